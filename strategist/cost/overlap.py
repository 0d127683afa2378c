"""Overlap advice: for every collective the scheduled step waits on (exposed time on the critical path), which
of MindSpore's computation-communication overlap features applies, what it would save, and the line to
write -- or why it does not apply.

Features and their constraints (MindSpore 2.9 API documentation):

- ``ops.all_gather_matmul`` / ``ops.matmul_reduce_scatter``: an AllGather feeding a MatMul / a MatMul whose
  partial sums are reduce-scattered, fused and pipelined in one kernel; fp16/bf16, 2-D, group size
  (world_size) 2, 4 or 8, k in [256, 65535), m a multiple of the group size (matmul_reduce_scatter), one
  communication group for every such kernel of a model.
- the MatMul-AllReduce fusion (``computation_communication_fusion_level`` in ``parallel_speed_up_json``) and
  chunked CoC (MindSpeed's 2/4/8 chunks, M divisible by the chunk count) for a row-parallel MatMul's AllReduce.
- fine-grained multi-copy (``interleaved_parallel`` in a Layout; MindFormers ``fine_grain_interleave``).
- ``parallel_speed_up_json`` ``matmul_grad_comm_overlap`` (an input gradient's AllReduce beside the weight
  gradient's MatMul) and ``recompute_comm_overlap`` (a recomputed collective beside recomputation).

A saving is the exposed time the feature can hide: a k-chunk pipeline of a collective ``c`` and its MatMul
``t`` hides ``min(c, t) (k - 1) / k``.
"""
from __future__ import annotations

from .schedule import exposed

MATMULS = frozenset({"MatMul", "MatMulExt", "BatchMatMul", "BatchMatMulExt"})
#: chunks a CoC pipeline uses here (MindSpeed's choices are 2, 4 or 8)
CHUNKS = 4
SPEED_UP = ('ms.set_context(ascend_config={{"parallel_speed_up_json_path": "parallel_speed_up.json"}}) '
            'with {{"{key}": true}} in parallel_speed_up.json')


def _matmul_shape(plan, name: str):
    """(m, k, group size, dtype) of a MatMul's local slices, or None."""
    ch = plan.choices.get(name)
    op = plan.graph.op(name) if name in plan.choices else None
    if op is None or ch is None or len(ch.inputs) < 2 or ch.inputs[0] is None:
        return None
    a = ch.inputs[0].slice_shape
    if len(a) != 2:
        return None
    ta = bool(op.attrs.get("transpose_a") or op.attrs.get("transpose_x1"))
    m, k = (a[1], a[0]) if ta else (a[0], a[1])
    dtype = op.outputs[0].dtype if op.outputs and op.outputs[0] is not None else ""
    return m, k, dtype


def _fused_ok(shape, n: int, need_m: bool, groups: set) -> str | None:
    """Why ``ops.all_gather_matmul`` / ``ops.matmul_reduce_scatter`` cannot take this MatMul, or None."""
    if shape is None:
        return "not a 2-D MatMul"
    m, k, dtype = shape
    if n not in (2, 4, 8):
        return f"group of {n} devices: the fused kernels take world_size 2, 4 or 8"
    if not 256 <= k < 65535:
        return f"k = {k} outside [256, 65535)"
    if need_m and m % n:
        return f"m = {m} not a multiple of the group size {n}"
    if dtype not in ("float16", "bfloat16"):
        return f"dtype {dtype}: the fused kernels take float16 or bfloat16"
    if len(groups) > 1:
        return f"the model's collectives use {len(groups)} group sizes: one communication group per model"
    return None


def candidates(plan, est) -> list[dict]:
    """``[{op, feature, applicable, reason, saving_s, how}]`` for the exposed collectives of ``est``'s
    reported timeline, largest exposure first (times for the whole step)."""
    m = est.opts.micro_batches
    rows: dict = {}
    for name, what, _layer, exp, secs in exposed(est.timeline):
        once = what in ("gradient", "prefetch")         # once a step, all of them one row
        if exp <= 0 or not (name or once):
            continue
        r = rows.setdefault(("" if once else name, what), [0.0, 0.0])
        r[0] += exp * (1 if once else m)
        r[1] += secs * (1 if once else m)
    groups = {c.n for c in _tp_comms(plan)}
    out = []
    for (name, what), (exp, secs) in sorted(rows.items(), key=lambda kv: -kv[1][0]):
        if what in ("gradient", "prefetch"):
            out.append(_data_parallel_row(est, what, exp))
            continue
        op = plan.graph.op(name) if name in plan.choices else None
        if op is not None:
            out.extend(_for(plan, est, op, what, exp, groups))
    return out[:24]


def _data_parallel_row(est, what: str, exp: float) -> dict:
    """The overlap row of the data-parallel gradient reductions or the parallel optimizer's weight AllGathers: the
    parallel_speed_up_json key that runs them beside computation and the step it saves (the schedule again with it
    on), or why none applies."""
    from dataclasses import replace
    grads = what == "gradient"
    key, field, op = (("grad_computation_allreduce_overlap", "grad_comm_overlap", "(data-parallel gradient reduction)")
                      if grads else ("computation_allgather_overlap", "allgather_overlap",
                                     "(optimizer-parallel weight AllGather)"))
    row = {"op": op, "collective": what, "exposed_s": exp, "feature": f"parallel_speed_up_json {key}"}
    if getattr(est.opts, field):
        why = ("its last bucket waits for the last gradient, after the backward it could hide behind; more "
               "micro-batches (gradient accumulation) amortise it" if grads else
               "the first layer's AllGather has no computation before it to hide behind")
        return {**row, "applicable": False, "reason": f"already on: {why}", "saving_s": 0.0, "how": ""}
    from .step import estimate_with
    saving = est.step_s - estimate_with(est.plan, replace(est.opts, **{field: True})).step_s
    return {**row, "applicable": saving > 0, "reason": "" if saving > 0 else "nothing beside it to hide behind",
            "saving_s": max(saving, 0.0), "how": SPEED_UP.format(key=key) + (
                " (or --overlap-grad-reduce here)" if grads else " (or --overlap-param-gather here)")}


def _tp_comms(plan):
    from .optime import comms_of_steps
    from .step import step_profile_of
    prof = step_profile_of(plan.hardware, ())
    for c in plan.op_costs.values():
        yield from comms_of_steps(c.steps, prof).get("forward", ())


def _mm_seconds(est, name: str) -> tuple[float, float]:
    """(forward, backward) compute seconds of operator ``name`` over the step."""
    m = est.opts.micro_batches
    items = getattr(est, "by_op", None)
    if items is None:
        items = est.by_op = {}
        for it in est.items:            # a fine-grained copy's times add up to its operator's
            f, b = items.get(it.op, (0.0, 0.0))
            items[it.op] = (f + it.fwd, b + it.bwd)
    f, b = items.get(name, (0.0, 0.0))
    return f * m, b * m


def _for(plan, est, op, what: str, exp: float, groups: set) -> list[dict]:
    name = op.name
    fwd, bwd = _mm_seconds(est, name)
    n = max(groups) if groups else 1
    shape = _matmul_shape(plan, name) if op.type in MATMULS else None
    out = []

    def row(feature, ok, reason, saving, how):
        out.append({"op": name, "collective": what, "exposed_s": exp, "feature": feature, "applicable": ok,
                    "reason": reason, "saving_s": saving if ok else 0.0, "how": how if ok else ""})
    hide = min(exp, fwd) * (CHUNKS - 1) / CHUNKS
    if op.type in MATMULS and what == "output":
        why = _fused_ok(shape, n, True, groups)
        row("ops.matmul_reduce_scatter (sequence parallel)", why is None, why or "fuses the MatMul with the "
            "reduce-scatter of its partial sums", hide, f"y = ops.matmul_reduce_scatter(x, w, group, {n}) in place of "
            f"{name} and the AllReduce after it (then AllGather where the sequence is needed whole)")
        ok = shape is not None and shape[0] % CHUNKS == 0
        row(f"MatMul-AllReduce fusion / CoC ({CHUNKS} chunks)", ok,
            "" if ok else f"M = {shape[0] if shape else '?'} not divisible by {CHUNKS} chunks", hide,
            SPEED_UP.format(key="computation_communication_fusion_level").replace("true", "1"))
    if op.type in MATMULS and what == "input":
        why = _fused_ok(shape, n, False, groups)
        row("ops.all_gather_matmul", why is None, why or "", hide,
            f"y, _ = ops.all_gather_matmul(x, w, group, {n}) in place of the AllGather before {name} and {name}")
    if what in ("output gradient", "input gradient") and op.type in MATMULS:
        dw = bwd / 2
        row("parallel_speed_up_json matmul_grad_comm_overlap", dw > 0, "no weight-gradient MatMul beside it",
            min(exp, dw), SPEED_UP.format(key="matmul_grad_comm_overlap"))
    if what == "recompute":
        row("parallel_speed_up_json recompute_comm_overlap", True, "", min(exp, fwd),
            SPEED_UP.format(key="recompute_comm_overlap"))
    if what in ("output", "input", "output gradient", "input gradient") and op.layer:
        on = est.opts.interleave > 1
        row("fine-grained multi-copy (interleaved_parallel; MindFormers fine_grain_interleave)", not on,
            f"already interleaved x{est.opts.interleave}" if on else "", exp / 2,
            "model_config: fine_grain_interleave: 2 (MindFormers), or an interleaved_parallel axis in the "
            "layer's Layouts (Layout((dp, tp, 2), (\"dp\", \"tp\", \"interleaved_parallel\")))")
    if not out:
        row("(none)", False, f"no MindSpore overlap feature for a {what} collective of {op.type}", 0.0, "")
    return out


def coc_saving(plan, est, chunks: int = CHUNKS, input_gradients: bool = True) -> float:
    """Seconds a chunked CoC pipeline (MindSpeed's fused MatMul + collective, ``chunks`` pieces) would save
    over the step: every exposed tensor-parallel collective next to a weight MatMul, each hidden behind that
    MatMul's own ``(chunks - 1) / chunks``: a MatMul's partial sums (their AllReduce, or ReduceScatter under
    sequence parallelism) behind its forward, and their backward behind its input-gradient MatMul; under
    sequence parallelism, the AllGather into column MatMuls (through Reshapes) behind their forward, and the
    ReduceScatter of their input gradients behind their input-gradient MatMuls; a recomputed forward's collectives
    as the forward's. ``input_gradients=False`` leaves
    that last one out: a baseline that already hides it behind the weight-gradient MatMul
    (:func:`input_gradient_overlap_saving`; Megatron's column linear does)."""
    m = est.opts.micro_batches
    total = 0.0
    for name, what, _layer, exp, _secs in exposed(est.timeline):
        if exp <= 0 or what not in ("output", "recompute", "output gradient") or name not in plan.choices:
            continue
        if not input_gradients and what == "output gradient" and plan.graph.op(name).type not in MATMULS:
            continue
        mm = hiding_matmul_seconds(plan, est, name, what != "output gradient")
        total += min(exp * m, mm) * (chunks - 1) / chunks
    return total


def input_gradient_overlap_saving(plan, est) -> float:
    """Seconds saved over the step by running the collective of column MatMuls' input gradients (the
    ReduceScatter under sequence parallelism) beside their weight-gradient MatMuls, which do not wait for it
    (MindSpore's ``matmul_grad_comm_overlap``; Megatron's column linear by default): each hides up to the
    weight-gradient MatMuls' time."""
    m = est.opts.micro_batches
    total = 0.0
    for name, what, _layer, exp, _secs in exposed(est.timeline):
        if exp <= 0 or what != "output gradient" or name not in plan.choices or plan.graph.op(name).type in MATMULS:
            continue
        total += min(exp * m, hiding_matmul_seconds(plan, est, name, False))
    return total


def hiding_matmul_seconds(plan, est, name: str, forward: bool) -> float:
    """Compute seconds over the step of the MatMuls a collective on ``name``'s output (``forward``) or its
    gradient can be chunked with: ``name`` itself if it is a MatMul, else the weight MatMuls every one of its
    consumers (through Reshapes) is (0 where any consumer is not)."""
    g = plan.graph
    if g.op(name).type in MATMULS:
        mms = [name]
    else:
        _, consumers = g.consumers_through_reshapes(name)
        mms = consumers if consumers and all(g.op(c).type in MATMULS and g.op(c).params for c in consumers) else []
    secs = [_mm_seconds(est, n) for n in mms]
    return sum(f for f, _b in secs) if forward else sum(b / 2 for _f, b in secs)
