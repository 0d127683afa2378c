"""MindSpore's VirtualDataset layouts: how a dataset strategy lays out the model's inputs."""
from __future__ import annotations

import math

from ...errors import StrategyError
from ...vocab.graph import OpGraph
from ...vocab.layout import Layout


def dataset_layouts(graph: OpGraph, n: int, how) -> dict[str, Layout]:
    """MindSpore's VirtualDataset layouts of ``graph``'s inputs on ``n`` devices. ``data_parallel`` (the default)
    splits every input's first dimension over all devices, ``full_batch`` splits nothing, and a per-input dict
    gives MindSpore's tuple form (an input it leaves out is unsplit, as verify asks MindSpore). MindSpore's
    VirtualDatasetInfo takes per-input strategies that split at most one dim each, by one shard number
    shared by every split input; in auto_parallel mode that
    number must be the device count, or nothing split at all ("No available strategy for:
    VirtualDatasetInfo"), and so we check. Unsplit inputs beside split ones are taken (measured on 16
    devices: x (16, 1, 1, 1) with b (1,) taken, either order; x (1, 1, 1, 1) with b (1,) taken;
    x (8, 1, 1, 1), x (4, 4, 1, 1), or b (2,) or (8,) beside x (16, 1, 1, 1) refused)."""
    out = {}
    if isinstance(how, dict):
        check_dataset_dict(graph, n, how)
    for name, spec in graph.inputs.items():
        shape = tuple(spec.shape)
        if isinstance(how, dict) and name in how:
            split = tuple(how[name])
            if len(split) != len(shape):
                raise StrategyError(f"dataset strategy {split} for input {name} has rank {len(split)}, "
                                    f"the input is {shape}")
        elif how == "full_batch" or not shape or isinstance(how, dict):   # an input a dict leaves out: unsplit
            split = (1,) * len(shape)
        elif how == "data_parallel":
            split = (n,) + (1,) * (len(shape) - 1)
        else:
            raise StrategyError(f"unknown dataset strategy {how!r}: use data_parallel, full_batch or "
                                f"per-input splits such as x=8,1")
        if any(d % s for d, s in zip(shape, split)):
            raise StrategyError(f"dataset strategy {split} does not divide input {name} {shape} "
                                f"(make the batch a multiple of {n} -- --batch {n} for a MindFormers "
                                f"config, --input otherwise -- or use --dataset-strategy full_batch)")
        used = math.prod(split)
        dm = tuple(split) + ((n // used,) if used < n else ())
        out[name] = Layout(shape, dm, tuple((i,) if s > 1 else () for i, s in enumerate(split)))
    return out


def check_dataset_dict(graph: OpGraph, n: int, how: dict) -> None:
    """VirtualDatasetInfo::CheckStrategy and auto_parallel's use-every-device rule (see :func:`dataset_layouts`)."""
    names = list(graph.inputs)
    unknown = [k for k in how if k not in graph.inputs]
    if unknown:
        raise StrategyError(f"dataset strategy names {', '.join(map(repr, unknown))}, not an input of the model "
                            f"(its inputs: {', '.join(names) or 'none'})")
    shards = set()
    for name in graph.inputs:
        split = tuple(how.get(name, ()))
        cut = [s for s in split if s != 1]
        if len(cut) > 1:
            raise StrategyError(f"dataset strategy {split} for input {name} splits {len(cut)} dims: MindSpore "
                                f"splits a dataset input in one dim only (e.g. {n} on the batch)")
        shards.update(cut)
    if len(shards) > 1:
        raise StrategyError(f"dataset strategy splits inputs by {' and '.join(map(str, sorted(shards)))}: "
                            f"MindSpore needs one shard number for every split input (leave an input "
                            f"unsplit with 1s)")
    if shards and shards != {n}:
        raise StrategyError(f"dataset strategy splits inputs by {shards.pop()} of {n} devices: "
                            f"MindSpore's auto_parallel mode requires all of them (split the batch by "
                            f"{n}, or use full_batch)")
