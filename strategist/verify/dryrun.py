"""Parent side of ``strategist verify --memory``: MindSpore's own per-device peak memory of one training step.

:func:`mindspore_memory` runs :mod:`strategist.verify.dryrun_child` in MindSpore's DryRun
(``MS_SIMULATION_LEVEL=1``) through its Ascend plugin on stub CANN libraries (:mod:`strategist.verify.cann_stubs`):
MindSpore compiles the step as ``strategist verify`` does (``auto_parallel`` + ``sharding_propagation``, the anchors
shard()ed), runs it once allocating every tensor from a simulated 64 GiB device, and reports the device memory pool's
peak: "Used peak memory usage (without fragments)" and "Actual peak memory usage (with fragments)". Level 2 (kernel
workspaces) needs the real CANN and is not run.

With micro-batches (gradient accumulation, or a pipeline) the child trains in MindFormers' cell, as MindFormers'
trainer builds it (strategist's memory model follows it); its inlined control flow needs the processor-count shim
of :mod:`~strategist.verify.cann_stubs` in the child's ``LD_PRELOAD`` on a machine with few cores.

Each simulated rank is one child (one at a time). With a ``pp`` axis: the first stage's rank and the last stage's.
MindSpore refusing the configuration, crashing before its answer or timing out is a one-line
:class:`~strategist.errors.VerifyError`.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from .. import progress
from ..errors import VerifyError
from ..files.anchors import load_anchors
from ..vocab.mesh import Mesh
from . import cann_stubs, stubs
from .runner import anchor_requests, dataset_request

#: the optimizers the child can run (the step model's keys, strategist.cost.memory.OPTIMIZERS) -> their class name
#: (``adamw``: MindFormers' ``AdamW``, fp32 moments; ``adam-weight-decay``: MindSpore's ``nn.AdamWeightDecay``)
OPTIMIZER_CLASSES = {"adamw": "AdamW", "adam-weight-decay": "AdamWeightDecay", "momentum": "Momentum"}
OPTIMIZERS = tuple(OPTIMIZER_CLASSES)
RECOMPUTE = ("none", "selective", "full")
MIB = 2 ** 20
_PKG_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass(frozen=True)
class MemoryAnswer:
    """MindSpore's DryRun memory of one simulated rank: the device pool's peak in use (``used_peak_bytes``, without
    fragmentation), its peak footprint with fragmentation (``actual_peak_bytes``), and what it held for weights and
    optimizer states (``weight_bytes``); None where MindSpore did not log it."""

    used_peak_bytes: int
    actual_peak_bytes: int | None
    weight_bytes: int | None
    rank: int
    stage: int
    device_num: int
    seconds: float
    mindspore_version: str
    optimizer: str


@dataclass(frozen=True)
class MemoryLog:
    """What MindSpore's log says about its device memory (MiB lines are whole MiB; bytes where it logs them)."""

    used_peak_mib: int | None = None
    actual_peak_mib: int | None = None
    used_peak_bytes: int | None = None
    actual_peak_bytes: int | None = None
    weight_mib: int | None = None


_LOG_FIGURES = {
    "used_peak_mib": r"Used peak memory usage \(without fragments\): (\d+)M",
    "actual_peak_mib": r"Actual peak memory usage \(with fragments\): (\d+)M",
    "used_peak_bytes": r"Max peak used memory size is (\d+)",
    "actual_peak_bytes": r"Max actual used memory size is (\d+)",
    "weight_mib": r"stat info : .*? Weight used size:(\d+)M",
}


def parse_memory_log(text: str) -> MemoryLog:
    """The memory figures of a DryRun log (the largest of each, as several pools report).

    >>> parse_memory_log("Used peak memory usage (without fragments): 8338M\\n"
    ...                  "Actual peak memory usage (with fragments): 10076M\\n").used_peak_mib
    8338
    """
    found = {}
    for key, pattern in _LOG_FIGURES.items():
        values = [int(v) for v in re.findall(pattern, text)]
        if values:
            found[key] = max(values)
    return MemoryLog(**found)


def stage_ranks(device_num: int, pp: int, rank: int | None) -> list[tuple[int, int]]:
    """(rank, stage) pairs to simulate: ``rank`` if given, else rank 0 and, with pipeline stages, the last rank.

    >>> stage_ranks(8, 1, None), stage_ranks(8, 2, None), stage_ranks(8, 2, 5)
    ([(0, 0)], [(0, 0), (7, 1)], [(5, 1)])
    """
    per_stage = device_num // pp
    ranks = [rank] if rank is not None else ([0, device_num - 1] if pp > 1 else [0])
    for r in ranks:
        if not 0 <= r < device_num:
            raise VerifyError(f"rank {r} is not a device of the mesh (0 .. {device_num - 1})")
    return [(r, r // per_stage) for r in ranks]


def _layer_key(path: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in path.split("."))


def layer_paths(graph) -> list[str]:
    """The repeated layers' cell paths (``model.layers.0``, ...) in model order."""
    return sorted({op.layer for op in graph if op.layer}, key=_layer_key)


def pipeline_stages(graph, pp: int) -> dict[str, int]:
    """Cell path -> pipeline stage: the layers evenly, in order; every other Cell owning operators to the first
    stage when its operators come before the first layer's, else to the last (the top Cell keeps none)."""
    layers = layer_paths(graph)
    if pp > 1 and len(layers) < pp:
        raise VerifyError(f"pp={pp} needs at least {pp} repeated layers to give each stage one; the model has "
                          f"{len(layers)} (build it with more layers)")
    stages = {path: i * pp // len(layers) for i, path in enumerate(layers)}
    seen_layer = False
    for op in graph:
        if op.layer:
            seen_layer = True
        elif op.cell_path and op.cell_path not in stages:
            stages[op.cell_path] = pp - 1 if seen_layer else 0
    return stages


def recompute_request(graph, recompute: str) -> dict:
    """What the child recomputes: ``full``, each repeated layer (``Cell.recompute()``); ``selective``, MindFormers'
    default select_recompute (the MLP activation and the product reading it, ``Primitive.recompute()``)."""
    if recompute not in RECOMPUTE:
        raise VerifyError(f"bad recompute {recompute!r}: none, selective or full")
    if recompute == "full":
        layers = layer_paths(graph)
        if not layers:
            raise VerifyError("--recompute full recomputes each repeated layer, and the model has none "
                              "(no Cell list of layers)")
        return {"recompute_cells": layers}
    if recompute == "selective":
        from ..cost.memory import selective_ops
        ops = [graph.op(n) for n in sorted(selective_ops(graph))]
        if not ops:
            raise VerifyError("--recompute selective recomputes the MLP activation and its product in each layer, "
                              "and the model has none")
        return {"recompute_ops": [{"cell_path": op.cell_path, "instance": op.instance_name} for op in ops]}
    return {}


def memory_request(model: str, mesh: Mesh, graph, *, inputs=None, kwargs=None, anchors: dict | None = None,
                   dataset_strategy="data_parallel", optimizer_parallel: bool = False, recompute: str = "none",
                   optimizer: str = "adamw", micro_batches: int = 1, optimizer_swap: bool = False) -> dict:
    """The child's request for ``model`` on ``mesh`` (its ``pp`` axis: pipeline stages), without the rank;
    ``optimizer_swap``: MindFormers' AdamW with its moments on the host (``swap``)."""
    if optimizer not in OPTIMIZERS:
        raise VerifyError(f"bad optimizer {optimizer!r}: {', '.join(OPTIMIZERS)}")
    if optimizer_swap and optimizer != "adamw":
        raise VerifyError(f"an optimizer swap is MindFormers' AdamW's (swap=True), not {optimizer}'s: "
                          f"give --optimizer adamw")
    if micro_batches < 1:
        raise VerifyError(f"micro-batches {micro_batches}: give a whole number >= 1")
    pp = mesh.get("pp")
    if pp > 1 and micro_batches < pp:
        raise VerifyError(f"pp={pp} needs at least {pp} micro-batches (MindSpore's PipelineCell): "
                          f"give --micro-batches {pp} or more")
    path, sep, name = model.rpartition(":")
    if not sep or not path or model.startswith(("mindformers:", "mindone:")) or path.endswith((".yaml", ".yml")):
        raise VerifyError(f"verify --memory takes a path/to/model.py:NAME model, not {model}")
    rest = [(n, s) for n, s in mesh.axes if n != "pp"]
    req = {"model": f"{os.path.abspath(path)}:{name}", "inputs": list(inputs or []), "kwargs": list(kwargs or []),
           "device_num": mesh.size, "dataset_strategy": dataset_request(dataset_strategy, mesh),
           "anchors": anchor_requests(anchors or {}, graph),
           "mesh": {"shape": [s for _, s in rest], "names": [n for n, _ in rest]},
           "optimizer": optimizer, "optimizer_parallel": bool(optimizer_parallel),
           "micro_batches": micro_batches, "pipeline_stages": pp, "optimizer_swap": bool(optimizer_swap)}
    req.update(recompute_request(graph, recompute))
    if pp > 1:
        req["stages"] = pipeline_stages(graph, pp)
    return req


def needs_mindformers_cell(request: dict) -> bool:
    """Whether the child trains in MindFormers' cell (``MFPipelineWithLossScaleCell``): with micro-batches."""
    return request.get("micro_batches", 1) > 1


#: what to install for MindFormers' training cell (pyproject.toml's extra)
MINDFORMERS_HINT = "pip install 'strategist[mindformers]'"


def require_mindformers(request: dict) -> None:
    """A one-line error when the child needs MindFormers (its training cell for micro-batches) and it is missing."""
    import importlib.util
    if needs_mindformers_cell(request) and importlib.util.find_spec("mindformers") is None:
        raise VerifyError(f"verify --memory with --micro-batches {request['micro_batches']} trains in MindFormers' "
                          f"MFPipelineWithLossScaleCell, and mindformers is not installed: {MINDFORMERS_HINT}")


def _child_env(cann: cann_stubs.CannStubs, device_num: int, rank: int, *, nprocs_shim: bool = False,
               swap: bool = False) -> dict:
    """The child's environment; ``nprocs_shim``: preload the processor-count shim (MindFormers' cell, whose inlined
    control flow MindSpore's runtime runs only with more than two actor threads, which it sizes from the cores)."""
    env = dict(os.environ)
    lib = os.pathsep.join(cann.lib_dirs)
    env["LD_LIBRARY_PATH"] = lib + (os.pathsep + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    if nprocs_shim:
        env["LD_PRELOAD"] = cann.nprocs_shim + (os.pathsep + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    env.update({
        "MS_SIMULATION_LEVEL": "1",            # DryRun: compile, then run the step allocating, launching nothing
        "RANK_SIZE": str(device_num), "RANK_ID": str(rank),
        "OMPI_COMMAND": "strategist-verify", "PMIX_RANK": str(rank),     # MindSpore's dummy collectives
        "ASCEND_HOME_PATH": cann.home,
        "GLOG_v": "2", "GLOG_logtostderr": "1",
        # the pools' byte-exact peaks and the weights' share, logged at INFO by these two modules
        "MS_SUBMODULE_LOG_v": "{DEVICE:1,PRE_ACT:1}",
        "MS_MEMORY_STATISTIC": "1",
        "STRATEGIST_VERIFY_PARENT": str(os.getpid()),
        "PYTHONPATH": _PKG_PARENT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""),
    })
    if swap:
        # MindFormers' swap optimizer runs only with the runtime's switch inlining off (its documented setting)
        env["MS_DEV_RUNTIME_CONF"] = ",".join([x for x in env.get("MS_DEV_RUNTIME_CONF", "").split(",")
                                               if x and not x.startswith("switch_inline")] + ["switch_inline:False"])
    for k in ("CUDA_HOME", "MS_ROLE", "MS_SCHED_HOST", "MS_SCHED_PORT", "MS_WORKER_NUM"):
        env.pop(k, None)
    return env


#: what MindSpore prints last of its memory summary, as it tears the device down
SUMMARY_END = "Actual peak memory usage (with fragments)"
#: seconds the child may take to tear down after writing its answer (MindSpore prints its summary there, and
#: then often dies of a double free, or hangs in it)
TEARDOWN_SECONDS = 60.0


def _run_child(work: str, request: dict, env: dict, timeout: float) -> tuple[int | None, dict | None, str]:
    """(return code, or None on timeout; the child's result or None; its log); the child runs in ``work``. Once the
    child has written its result and MindSpore its summary, the child is ended: its teardown may hang."""
    req_file, res_file, log_file = (os.path.join(work, f) for f in ("request.json", "result.json", "child.log"))
    with open(req_file, "w") as f:
        json.dump(request, f)
    with open(log_file, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "strategist.verify.dryrun_child", req_file, res_file],
                                cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    progress.add_child(proc.pid)
    res, rc = None, None
    try:
        with progress.task(f"MindSpore's DryRun of one training step, rank {request['rank']} (child process)"):
            rc, res = _wait(proc, res_file, log_file, time.time() + timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):       # timeout, Ctrl-C, a hung teardown
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        progress.remove_child(proc.pid)
    if res is None and os.path.exists(res_file):
        with open(res_file) as f:
            res = json.load(f)
    return rc, res, _read(log_file)


def _wait(proc, res_file: str, log_file: str, deadline: float) -> tuple[int | None, dict | None]:
    """(return code, -9 when ended after its answer, None on timeout; the result once written)."""
    res, answered = None, None
    while True:
        rc = proc.poll()
        if rc is not None:
            return rc, res
        now = time.time()
        if res is None and os.path.exists(res_file):
            with open(res_file) as f:
                res = json.load(f)
            answered = now
        if res is not None and (not res.get("ok") or SUMMARY_END in _tail(log_file)
                                or now - answered > TEARDOWN_SECONDS):
            if res.get("ok"):
                time.sleep(0.5)         # the summary's last lines
            return -signal.SIGKILL, res
        if now > deadline:
            return None, res
        time.sleep(0.2)


def _tail(path: str, size: int = 65536) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - size))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _one_line(text: str, limit: int = 600) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def answer_of(res: dict | None, log: str, rc: int | None, *, rank: int, stage: int, device_num: int,
              seconds: float, where: str, timeout: float, optimizer: str) -> MemoryAnswer:
    """The child's result and log as a :class:`MemoryAnswer`, or the one-line :class:`VerifyError` of its failure."""
    if rc is None:
        raise VerifyError(f"MindSpore's DryRun of {where} did not finish within {timeout:g} s "
                          f"(raise --timeout, or build the model with fewer layers)")
    if res is None:
        hint = next((ln.strip() for ln in reversed(log.splitlines()) if "ERROR" in ln or "Error" in ln), "")
        raise VerifyError(_one_line(f"MindSpore's DryRun of {where} ended (exit code {rc}) before its answer"
                                    + (f"; last message: {hint}" if hint else "")))
    if not res.get("ok"):
        if res.get("error_kind") == "input":
            raise VerifyError(_one_line(res.get("error", "")))
        if res.get("error_kind") == "internal":
            tb = (res.get("traceback") or "").strip().splitlines()
            raise VerifyError(_one_line(f"verify --memory's MindSpore child failed: {res.get('error')} "
                                        f"({tb[-3].strip() if len(tb) >= 3 else 'no traceback'}; please report this)"))
        error = res.get("error", "no message")
        hint = ""
        if "must have same data type" in error and "Float16" in error:
            hint = ("; with MindSpore 2.9 this is typically an RmsNorm whose hidden dimension its propagation split "
                    "(the replacement graph adds a float32 eps to float16): anchoring the norms' strategies "
                    "(their batch split only) avoids it")
        raise VerifyError(_one_line(f"MindSpore could not run {where} in DryRun: {error}{hint}", 800))
    figures = parse_memory_log(log)
    stats = res.get("memory_stats") or {}
    used = figures.used_peak_bytes or stats.get("max_allocated_memory")
    if used is None and figures.used_peak_mib is not None:
        used = figures.used_peak_mib * MIB
    actual = figures.actual_peak_bytes
    if actual is None and figures.actual_peak_mib is not None:
        actual = figures.actual_peak_mib * MIB
    if used is None:
        raise VerifyError(f"MindSpore ran {where} in DryRun but logged no peak memory (its 'Used peak memory usage' "
                          f"lines): is MS_SIMULATION_LEVEL=1 honoured by this MindSpore {res.get('mindspore_version')}?")
    weight = figures.weight_mib * MIB if figures.weight_mib is not None else None
    return MemoryAnswer(int(used), None if actual is None else int(actual), weight, rank, stage, device_num, round(seconds, 3),
                        res.get("mindspore_version", ""), optimizer)


def mindspore_memory(model: str, mesh, *, inputs=None, kwargs=None, strategies: str | None = None,
                     anchors: dict | None = None, dataset_strategy="data_parallel", optimizer_parallel: bool = False,
                     recompute: str = "none", optimizer: str = "adamw", micro_batches: int = 1,
                     rank: int | None = None, timeout: float = 900, graph=None,
                     optimizer_swap: bool = False) -> list[MemoryAnswer]:
    """MindSpore's own per-device peak memory of one training step of ``model`` (``path.py:NAME``) on ``mesh``.

    ``strategies`` is an anchors file in strategist's format (``anchors``: the same, already read, as
    :class:`~strategist.vocab.anchors.Anchor` per operator name); none: MindSpore's propagation from the model's own
    ``shard()`` calls alone. ``inputs`` are global shapes; the child compiles the per-device slices. ``optimizer``:
    ``adamw`` (MindFormers' AdamW: fp32 moments), ``adam-weight-decay`` (``nn.AdamWeightDecay``: moments in the
    weights' dtype) or ``momentum``. ``micro_batches`` > 1 without a ``pp`` axis: gradient accumulation
    (``GradAccumulationCell``); with one: ``nn.PipelineCell``'s micro-batches, the layers split evenly; either in
    MindFormers' training cell (``MFPipelineWithLossScaleCell``, as MindFormers' trainer builds it; needs
    mindformers). ``optimizer_swap``: MindFormers' AdamW keeps its moments on the host (``swap``).

    One :class:`MemoryAnswer` per simulated rank: ``rank``, else rank 0, and with a ``pp`` axis the last rank too.

    >>> [a.used_peak_bytes // 2**20 for a in mindspore_memory("examples/llama.py:llama2_7b", "dp=8",
    ...                                                        kwargs=["layers=2", "batch=8"])]   # doctest: +SKIP
    [8338]
    """
    mesh = Mesh.parse(mesh) if isinstance(mesh, str) else mesh
    if graph is None:
        from ..frontend.loader import load_graph
        graph = load_graph(model, inputs, kwargs, training=True)
    if strategies:
        rest = mesh.without("pp")
        anchors = {**(anchors or {}), **load_anchors(strategies, graph, rest)}
    request = memory_request(model, mesh, graph, inputs=inputs, kwargs=kwargs, anchors=anchors,
                             dataset_strategy=dataset_strategy, optimizer_parallel=optimizer_parallel,
                             recompute=recompute, optimizer=optimizer, micro_batches=micro_batches,
                             optimizer_swap=optimizer_swap)
    require_mindformers(request)
    targets = stage_ranks(mesh.size, mesh.get("pp"), rank)
    cann = cann_stubs.ensure_cann_stubs(stubs.mindspore_dir())
    shim = needs_mindformers_cell(request)
    answers = []
    for r, stage in targets:
        where = f"{os.path.basename(model)} on {mesh} (rank {r})"
        work = tempfile.mkdtemp(prefix=f"strategist-verify-{os.getpid()}-")    # (swept as verify's are)
        try:
            t0 = time.time()
            rc, res, log = _run_child(work, {**request, "rank": r}, _child_env(cann, mesh.size, r, nprocs_shim=shim,
                                                                                swap=optimizer_swap),
                                      timeout)
            seconds = time.time() - t0
        finally:
            keep = os.environ.get("STRATEGIST_VERIFY_KEEP")     # a directory: the child's log and request
            if keep:
                shutil.copytree(work, os.path.join(keep, f"rank{r}"), dirs_exist_ok=True)
            shutil.rmtree(work, ignore_errors=True)
        answers.append(answer_of(res, log, rc, rank=r, stage=stage, device_num=mesh.size, seconds=seconds,
                                 where=where, timeout=timeout, optimizer=optimizer))
    return answers
