"""Per-operator times of one training step on a :class:`~strategist.cost.profile.StepProfile`, read from a
priced :class:`~strategist.engine.plan.Plan`: MatMul/BatchMatMul/FlashAttention/Conv by FLOPs at the
profile's MatMul rate (a roofline against the bytes they move), every other operator by the bytes it moves
through device memory; forward and backward apart. Each redistribution and each operator's own collective
repriced on the profile's bus bandwidths, per kind and group size, intra- or inter-node by its group."""
from __future__ import annotations

from dataclasses import dataclass

from ..memo import table
from ..engine.rules.flops import COMPUTE_TYPES, attended_keys
from ..engine.search.caches import cached_rule as search_rule, signature
from ..vocab.graph import DTYPE_BYTES
from .pricing import LOOKUPS, memory_traffic


#: FlashAttention-2's backward runs five MatMuls of the forward's two (it recomputes the scores): 2.5x its FLOPs
FA_BACKWARD = 2.5

@dataclass(frozen=True)
class Comm:
    """One collective on one device: its kind, group size, whether its group stays in a node, the bytes each
    device sends, and its time on the profile."""

    kind: str
    n: int
    intra: bool
    nbytes: float
    seconds: float
    group: tuple = ()


_STEPS = table("step model: collectives per priced steps and profile", 1 << 16)


def comms_of_steps(steps, prof) -> dict[str, list[Comm]]:
    """A priced ``steps`` tuple (:class:`~strategist.vocab.comm.CommStep`) -> {direction: [Comm]} on ``prof``
    (``forward``, ``backward`` or ``grad``; local Splits and empty steps left out); memoised per tuple and
    profile."""
    key = (id(steps), id(prof))
    hit = _STEPS.get(key)
    if hit is not None and hit[0] is steps and hit[1] is prof:
        return hit[2]
    out = _comms_of_steps(steps, prof)
    _STEPS[key] = (steps, prof, out)
    return out


def _comms_of_steps(steps, prof) -> dict[str, list[Comm]]:
    out: dict[str, list[Comm]] = {}
    for st in steps:
        kind = st.collective
        if kind is None or st.nbytes <= 0:
            continue
        intra = st.intra(prof.devices_per_node)
        out.setdefault(st.direction, []).append(
            Comm(kind, st.n, intra, st.nbytes, prof.collective_seconds(kind, st.n, st.nbytes, intra), st.group))
    return out


def redistribution_comms(redist, dtype: str, prof, alltoall: bool) -> list[Comm]:
    """The collectives of one :class:`~strategist.engine.redistribution.Redistribution` on ``prof``."""
    if redist is None or not redist.has_communication:
        return []
    phys = redist.physical(DTYPE_BYTES.get(dtype, 4), None, alltoall)
    return comms_of_steps(phys.steps, prof).get("forward", [])


def batch_free(graph) -> frozenset[str]:
    """Operators whose outputs no batch sizes: computed from Parameters and constants alone (a weight's Cast to the
    compute dtype), so each micro-batch computes and holds them whole where a graph of the step's batch splits the
    rest among its micro-batches. Memoised per graph."""
    from ..engine.search.structure import per_graph

    def compute(g):
        batchy: set[str] = set()
        for op in g:
            if any(x.kind == "input" or (x.kind == "op" and x.ref in batchy) for x in op.inputs):
                batchy.add(op.name)
        return frozenset(op.name for op in g if op.name not in batchy)
    return per_graph("batch_free", graph, compute)


def needs_grad(graph) -> dict[str, bool]:
    """Operators a gradient flows back through: those reading a trainable Parameter or such an operator's
    output, directly or not."""
    out: dict[str, bool] = {}
    for op in graph:
        out[op.name] = any((x.kind == "param" and (x.ref not in graph.params or graph.params[x.ref].requires_grad))
                           or (x.kind == "op" and out.get(x.ref, False)) for x in op.inputs)
    return out


@dataclass(frozen=True)
class OpTime:
    """An operator's compute seconds on one device for the whole step's batch (forward, backward)."""

    forward: float
    backward: float
    bound: str            # "flops" | "bytes" | "none"


_TIMES = table("step model: compute time per operator, sharding and profile", 1 << 18)


def cached_rule(op):
    """``op``'s factor rule, memoised per operator signature (the search's memo: the repeated layers' operators
    share one)."""
    return search_rule(op, signature(op))


def op_time(op, choice, flops: float, traffic: float, grad: bool, prof, m: int = 1,
            whole: float | None = 0.0) -> OpTime:
    """``op``'s forward and backward compute time under ``choice`` (its plan entry) for one of ``m`` micro-batches
    of the graph's batch (``flops`` and ``traffic``: the whole batch's); ``whole``: the bytes of its inputs no batch
    sizes (a weight), which each micro-batch reads whole -- None where its outputs are such themselves (a weight's
    Cast: each micro-batch runs it whole). Memoised per operator, sharding, profile and split."""
    s = choice.sharding
    if s is None:
        return OpTime(0.0, 0.0, "none")
    key = (id(op), id(s), flops, traffic, grad, id(prof), m, whole)
    hit = _TIMES.get(key)
    if hit is not None and hit[0] is op and hit[1] is s and hit[2] is prof:
        return hit[3]
    t = _op_time(op, s, flops, traffic, grad, prof, 1 if whole is None else m, whole or 0.0)
    _TIMES[key] = (op, s, prof, t)
    return t


def whole_input_bytes(op, choice, free: frozenset, shares: dict | None = None) -> float | None:
    """The bytes of ``op``'s input slices under ``choice`` that no batch sizes (Parameters, the outputs of
    :func:`batch_free` operators), as :func:`~.pricing.memory_traffic` counts them, each divided by its
    ``shares`` (the experts' ep: :func:`~.experts.expert_shares`); None where ``op`` is such an operator itself."""
    if op.name in free:
        return None
    s = choice.sharding
    if s is None:
        return 0.0
    key = (id(op), id(s), id(free), id(shares))
    hit = _WHOLE.get(key)
    if hit is not None and hit[0] is op and hit[1] is s and hit[2] is free and hit[3] is shares:
        return hit[4]
    total = 0.0
    for k, slot in enumerate(cached_rule(op).slots):
        x = op.inputs[slot]
        if k < len(s.inputs) and x.spec is not None and (x.kind == "param" and op.type not in LOOKUPS
                                                         or (x.kind == "op" and x.ref in free)):
            total += s.inputs[k].slice_numel * x.spec.nbytes / max(x.spec.numel, 1) / (shares or {}).get(x.ref, 1)
    _WHOLE[key] = (op, s, free, shares, total)
    return total


_WHOLE = table("step model: bytes no batch sizes per operator and sharding", 1 << 16)


def _op_time(op, s, flops: float, traffic: float, grad: bool, prof, m: int = 1, whole: float = 0.0) -> OpTime:
    rule = cached_rule(op)
    moved = memory_traffic(op, rule, s, False)
    # one micro-batch's: its share of the batch's bytes, and the bytes no batch sizes whole
    whole = min(whole, moved)
    micro = (moved - whole) / m + whole
    traffic = traffic * micro / moved if moved else traffic / m     # the backward's passes over the same bytes
    attention = op.type == "FlashAttentionScore"
    # the keys a query row attends (the whole graph's FLOPs over its query's slice): a FlashAttention's rate
    keys = attended_keys(rule, s, flops / 3.0) if attention and flops else None
    moved, flops = micro, flops / m
    if op.type in COMPUTE_TYPES and flops:
        fwd_flops = flops / 3.0
        # the operands' dtype sets the rate: a FlashAttentionScore's first outputs are its fp32 softmax statistics,
        # its MatMuls run in the query's dtype
        of = op.inputs[0].spec if attention and op.inputs and op.inputs[0].spec is not None else \
            op.outputs[0] if op.outputs and op.outputs[0] is not None else None
        dtype = of.dtype if of is not None else "bfloat16"
        f = max(prof.matmul_seconds(fwd_flops, dtype, attention, keys), prof.memory_seconds(moved))
        bwd_factor = FA_BACKWARD if attention else 2.0
        b = max(prof.matmul_seconds(bwd_factor * fwd_flops, dtype, attention, keys), prof.memory_seconds(2 * moved))
        launch = prof.kernel_launch_us
        return OpTime(f + launch, (b + 2 * launch) if grad else 0.0, "flops")
    if not moved:
        return OpTime(0.0, 0.0, "none")
    back = (traffic - moved) if traffic > moved else (2.0 * moved if grad else 0.0)
    launch = prof.kernel_launch_us
    return OpTime(prof.memory_seconds(moved) + launch, (prof.memory_seconds(back) + launch) if grad else 0.0, "bytes")
