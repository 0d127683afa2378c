"""Per-device memory a training run keeps at its peak, per pipeline stage: the weights (their
optimizer-parallel slices, and the gathered copies the backward reads), one gradient buffer, Adam's two fp32
moments, the activations the backward reads for every micro-batch in flight (what each operator's bprop
saves, not every output; recompute drops what it recomputes), and the largest transient output."""
from __future__ import annotations

import math

from ..vocab.graph import OptimizerSharding
from .optime import DTYPE_BYTES, cached_rule

#: operators whose backward reads none of their inputs (a sum, a view, a cast, a copy)
NOTHING_SAVED = frozenset({"Add", "AddExt", "Sub", "SubExt", "Neg", "Reshape", "Cast", "Transpose", "StridedSlice",
                           "Concat", "Split", "ExpandDims", "Squeeze", "Identity", "BroadcastTo", "Tile", "Flatten",
                           "Slice", "Load", "OneHot", "NotEqual", "Equal", "ReduceSum", "SumExt"})
#: element-wise activations MindFormers' selective recompute recomputes (its default select_recompute patterns
#: ``feed_forward\.mul``, ``feed_forward\.w1\.activation\.silu``: the MLP's activation and its gating product)
ACTIVATIONS = frozenset({"SiLU", "Silu", "GeLU", "FastGeLU", "Gelu", "Swish", "ReLU", "Sigmoid"})
RECOMPUTE = ("none", "selective", "full")
ADAM_BYTES = 8          # Adam's two moments in fp32 (MindFormers' FP32StateAdamWeightDecay)


def saved_inputs(op) -> tuple[int, ...]:
    """Input slots ``op``'s backward reads."""
    if op.type in NOTHING_SAVED:
        return ()
    if op.type == "Gather" or op.type == "GatherV2":
        return (1,)
    if op.type in ("RmsNorm", "LayerNorm"):
        return (0,)
    if op.type == "FlashAttentionScore":
        return (0, 1, 2)
    return tuple(i for i, x in enumerate(op.inputs) if x.kind in ("op", "input"))


NORMS = frozenset({"RmsNorm", "LayerNorm"})
VIEWS = frozenset({"Reshape", "ExpandDims", "Squeeze", "Flatten"})


def selective_ops(graph, layers=None) -> set[str]:
    """MindFormers' selective recompute: an activation inside a repeated layer and the product reading it
    (``layers``: only those layers; None: every one)."""
    act = {op.name for op in graph if op.layer and op.type in ACTIVATIONS and (layers is None or op.layer in layers)}
    gate = {op.name for op in graph if op.layer and op.type == "Mul" and (layers is None or op.layer in layers)
            and any(x.kind == "op" and x.ref in act for x in op.inputs)}
    return act | gate


def comm_recompute_ops(graph, layers) -> set[str]:
    """MindFormers' ``select_comm_recompute`` (its default pattern ``.*\\.norm``): the norms of ``layers``,
    recomputed with the communication after them."""
    return {op.name for op in graph if op.layer in layers and op.type in NORMS}


def _bytes(choice, j: int, spec) -> float:
    if spec is None or j >= len(choice.outputs) or choice.outputs[j] is None:
        return 0.0
    return choice.outputs[j].slice_numel * DTYPE_BYTES.get(spec.dtype, 4)


_ACTIVATIONS: dict = {}


def activation_bytes(plan, names: set[str], recompute: str, micro_batches: int,
                     drop: set | None = None) -> tuple[float, float]:
    """(activations saved for one micro-batch, largest transient output) over operators ``names``; ``drop``:
    the operators recomputed selectively (their outputs not kept). Memoised per plan, operator set and dropped
    set (the same objects: a sweep's memory options read the same stages under each micro-batch count)."""
    key = (id(plan), id(names), recompute, id(drop))
    hit = _ACTIVATIONS.get(key)
    if hit is None or hit[0] is not plan or hit[1] is not names or hit[2] is not drop:
        if len(_ACTIVATIONS) >= 256:
            _ACTIVATIONS.clear()
        hit = _ACTIVATIONS[key] = (plan, names, drop, _activation_bytes(plan, names, recompute, drop))
    total, transient = hit[3]
    return total / micro_batches, transient / micro_batches


def _activation_bytes(plan, names: set[str], recompute: str, drop: set | None) -> tuple[float, float]:
    """(activations saved, largest transient output) for the whole batch: :func:`activation_bytes` times the
    micro-batch count."""
    g, ch = plan.graph, plan.choices
    drop = set(drop if drop is not None else selective_ops(g) if recompute == "selective" else ())
    for op in g:
        # a view of a recomputed tensor is recomputed with it (MindFormers' fine-grained configs list the
        # Reshapes beside the operators for this reason)
        if op.type in VIEWS and any(x.kind == "op" and x.ref in drop for x in op.inputs):
            drop.add(op.name)
    saved: dict = {}            # (producer, j) -> bytes
    layer_of = {}
    transient = 0.0
    for op in g:
        if op.name not in names:
            continue
        for j, spec in enumerate(op.outputs):
            transient = max(transient, _bytes(ch[op.name], j, spec))
        for slot in saved_inputs(op):
            x = op.inputs[slot] if slot < len(op.inputs) else None
            if x is None or x.kind != "op" or x.ref in drop or x.ref not in ch:
                continue
            spec = g.op(x.ref).outputs[x.index or 0] if x.index is not None else None
            key = (x.ref, x.index or 0)
            if key not in saved:
                saved[key] = _bytes(ch[x.ref], x.index or 0, spec)
                layer_of[key] = (g.op(x.ref).layer, op.layer)
    if recompute == "full":
        per_layer: dict = {}
        kept = 0.0
        for key, b in saved.items():
            mine, reader = layer_of[key]
            if reader and mine == reader:
                per_layer[reader] = per_layer.get(reader, 0.0) + b      # recomputed inside the layer
            else:
                kept += b                                               # a layer's input, or outside layers
        total = kept + max(per_layer.values(), default=0.0)             # one layer rebuilt at a time
    else:
        total = sum(saved.values())
    return total, transient


_SLICES: dict = {}


def param_slices(plan, names: set[str]) -> dict[str, tuple]:
    """Parameter -> its slice shape, for the Parameters operators ``names`` read (memoised per plan and operator
    set: every memory option of a sweep reads the same stages). The result is shared: do not change it."""
    key = (id(plan), frozenset(names))
    hit = _SLICES.get(key)
    if hit is not None and hit[0] is plan:
        return hit[1]
    if len(_SLICES) >= 32:
        _SLICES.clear()
    out = _SLICES[key] = (plan, _param_slices(plan, names))
    return out[1]


def _param_slices(plan, names: set[str]) -> dict[str, tuple]:
    seen: dict[str, tuple] = {}
    for op in plan.graph:
        if op.name not in names:
            continue
        ch = plan.choices[op.name]
        if ch.sharding is None:
            continue
        for k, slot in enumerate(cached_rule(op).slots):
            x = op.inputs[slot]
            if x.kind == "param" and x.ref not in seen and k < len(ch.inputs):
                seen[x.ref] = ch.inputs[k].slice_shape
    return seen


def stage_memory(plan, names: set[str], *, devices: int, recompute: str, optimizer_parallel: bool,
                 micro_batches: int, in_flight: int, profile, drop: set | None = None) -> dict:
    """The peak bytes one device of the stage holding operators ``names`` keeps, and what is assumed."""
    g = plan.graph
    zero = getattr(g, "optimizer_sharding", None)
    if optimizer_parallel and zero is None:
        zero = OptimizerSharding()
    if not optimizer_parallel:
        zero = None
    params = gathered = grads = opt = 0.0
    for name, shape in param_slices(plan, names).items():
        p = g.params.get(name)
        if p is None:
            continue
        n = math.prod(shape)
        per = DTYPE_BYTES.get(p.spec.dtype, 4)
        w = 1
        if zero is not None and p.requires_grad and shape:
            w = zero.ways(devices * n // max(p.spec.numel, 1), shape[0], n * per)
        params += n * per / w
        if w > 1:
            gathered += n * per          # the AllGather's output, kept for the backward
        if p.requires_grad:
            grads += n * per / (w if zero is not None and zero.shards_gradients else 1)
            opt += n * ADAM_BYTES / w
    act, transient = activation_bytes(plan, names, recompute, micro_batches, drop)
    act_total = act * in_flight
    total = params + gathered + grads + opt + act_total + transient
    cap = profile.memory_GB - profile.memory_reserved_GB
    return {"parameters": params, "gathered_weights": gathered, "gradients": grads, "optimizer_states": opt,
            "activations": act_total, "activations_per_micro_batch": act, "transient": transient,
            "total": total, "capacity": cap, "device_memory": profile.memory_GB, "fits": total <= cap,
            "assumed": {"recompute": recompute, "optimizer_parallel": bool(zero is not None),
                        "optimizer_level": zero.level if zero is not None else None,
                        "micro_batches_in_flight": in_flight,
                        "optimizer": "Adam, two fp32 moments per parameter, no fp32 master copy",
                        "gradients": "one buffer in the weights' dtype" + (", sharded over dp" if zero is not None
                                                                          and zero.shards_gradients else ""),
                        "gathered_weights": "optimizer-parallel AllGather outputs kept for the backward"
                                            if zero is not None else None,
                        "activations": "what each operator's backward reads, per micro-batch in flight"
                                       + {"none": "", "selective": "; the MLP activation and its product "
                                          "recomputed", "full": "; each layer's input kept, one layer rebuilt at "
                                          "a time"}[recompute]
                                       + ("; norms recomputed with their communication (select_comm_recompute)"
                                          if drop and any(plan.graph.op(n).type in NORMS for n in drop) else "")}}
