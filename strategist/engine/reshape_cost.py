"""MindSpore 2.9.0's cost of a Reshape operator (ReshapeInfo strategy-with-cost), in elements.

Sharding propagation costs a Reshape as a tensor redistribution from its input layout (shape A) to its
output layout (shape B, same element count): ``ReshapeInfo::SetCostForReshape`` asks ``ReshapeCost``
(operator_costmodel.cc), which runs ``TensorRedistribution(construct_op=false).ComputeCost()``:

* ``communication_without_parameter_`` = ``communication_cost_`` = type length x ``comm_cost_``, where
  ``comm_cost_`` is the redistribution's forward + backward communication (ComputeConcatCost adds
  ``0.5*s*(n+1)`` per ConcatByAxis);
* ``computation_cost_`` = type length x ``computation_cost_`` of the redistribution.

Then, in bytes, ``BreakingTiesForPreferringDataParallel`` subtracts 1 from every cost above 1 when the
input strategy splits dimension 0 over all devices, and ``RefineForPracticalCost(.., false)`` maps the
communication ``x`` to ``3072`` if ``0 < x <= 2048`` and to ``x + 1024`` if ``x > 2048``. That is what the
INFO log prints (``The corresponding cost: comp, comm, comm_without_parameter``);
:func:`reshape_swc_logged` reproduces those bytes, :func:`reshape_swc_cost` returns the raw elements.

The redistribution, as MindSpore 2.9.0 infers it in cost mode (tensor_redistribution.cc,
reshape_layout_transfer.cc, redistribution_operator_infer.cc), rules checked against the printed logs:

1. Both layouts lose their size-1 tensor dimensions (``SqueezeShape``) and size-1 device axes; the device
   matrices are unified to their common refinement.
2. Both tensor shapes are expanded to one common shape, with each sub-dimension split by at most one
   device axis per side. Viewed on the flattened tensor: the cut points (outer-block counts) are every
   dimension boundary of A and of B plus the start of every device axis splitting a dimension; an axis
   whose block range ``[start, start*size)`` contains another cut is subdivided there (in both layouts).
   If the cuts do not form a divisibility chain (``[6,4] -> [4,6]``), or an axis cannot be subdivided
   at a cut, the layouts are "unexpandable".
3. Expandable: RedistributionOperatorInfer's split -> permute -> concat loop on the sub-dimensions
   (permute = ConcatByAxis + SplitByAxis; enable_all2all off) — ``redistribution.ms_infer``. Every
   operator's size is the SOURCE slice ``s``; Split: computation ``s``; Concat (n, sub-dim k):
   communication ``0.5*s*(n+1)`` (forward ``0.5*s*n`` + backward ``0.5*s``), computation
   ``(s if k == 0 else s + 2*s*n) + s`` (ComputeCost's fall-through).
   A Reshape is counted (reshape_flag) when there is no operator (ReshapeCost constructs the
   redistribution with ``keep_reshape = true``, so even equal slice shapes keep it), or when there are
   operators and the source (or target) slice shape differs from its expanded slice shape (rank
   included: ``[512, 3]`` vs ``[512, 1, 3]`` differ); it costs ``COST_FACTOR * s = 2 * s`` computation.
   So the computation is never zero.
4. Unexpandable (``InferTensorRedistributionOperatorListUnExpand``): source -> fully replicated on its
   own (unsqueezed) tensor (Concat per split dim, size s each, dims in order), a Reshape, then replicated
   -> target (a Split per split dim of B, each of size ``numel``); the Reshape term is ``2 * numel``
   (``prev_shape`` = the full tensor shape).
"""
from __future__ import annotations

import math

from ..memo import lru
from ..vocab.layout import Layout, unify
from .redistribution import (ALLGATHER_REDUCESCATTER_SCALE_FACTOR, RESHAPE_COST_FACTOR, ms_infer, cut_axis,
                             refine_cost, squeeze_shape)

__all__ = ["reshape_swc_cost", "reshape_swc_logged"]


def _starts(lay_dims, shape, sizes):
    """[(axis, start, end)] for every device axis of a layout, in outer-block units of the flat tensor."""
    out = []
    p = 1
    for n, d in zip(shape, lay_dims):
        q = p
        for x in d:
            out.append((x, q, q * sizes[x]))
            q *= sizes[x]
        p *= n
    return out


def _expand(ua: Layout, ub: Layout):
    """Common expanded shape: [(A axis, B axis)] per sub-dim (-1 = unsplit) and the axis sizes, or None."""
    sizes = dict(enumerate(ua.dev_matrix))
    A = [list(d) for d in ua.dims]
    B = [list(d) for d in ub.dims]
    fresh = len(sizes)
    numel = math.prod(ua.shape)

    def bounds(shape):
        out, p = {1}, 1
        for n in shape:
            p *= n
            out.add(p)
        return out

    base = bounds(ua.shape) | bounds(ub.shape)
    while True:
        sa = _starts(A, ua.shape, sizes)
        sb = _starts(B, ub.shape, sizes)
        cuts = sorted(base | {s for _, s, _ in sa} | {s for _, s, _ in sb})
        if any(b % a for a, b in zip(cuts, cuts[1:])):
            return None
        changed = False
        for x, p, e in sa + sb:
            q = next((c for c in cuts if c > p), numel)
            cut, fresh = cut_axis(x, p, q, e, sizes, fresh, (A, B))
            if cut is None:
                return None
            if cut:
                changed = True
                break
        if not changed:
            break
    amap = {s: x for x, s, _ in sa}
    bmap = {s: x for x, s, _ in sb}
    subs = [(amap.get(p, -1), bmap.get(p, -1)) for p in cuts[:-1]] or [(-1, -1)]
    shape = tuple(b // a for a, b in zip(cuts, cuts[1:])) or (1,)
    return subs, sizes, shape


def _slice(shape, subs, side, sizes):
    return tuple(n // (sizes[s[side]] if s[side] != -1 else 1) for n, s in zip(shape, subs))


def _op_costs(ops, s):
    comm = comp = 0.0
    for kind, k, n in ops:
        if kind == "Concat":
            comm += ALLGATHER_REDUCESCATTER_SCALE_FACTOR * s * (n + 1)
            comp += (s if k == 0 else s + 2 * s * n) + s
        else:
            comp += s
    return comm, comp


def _unexpandable(src: Layout, dst: Layout) -> tuple[float, float]:
    """InferTensorRedistributionOperatorListUnExpand in cost mode."""
    numel = float(math.prod(src.shape))
    s = float(src.slice_numel)
    # from_origin -> from_repeat: a Concat per split dim (own device matrix, single axis per dim)
    sizes = {}
    subs = []
    for d in src.dims:
        if len(d) > 1:
            raise _Unknown
        subs.append((d[0] if d else -1, -1))
    sizes.update(enumerate(src.dev_matrix))
    ops = ms_infer(subs, sizes)
    comm, comp = _op_costs(ops, s)
    # to_repeat -> to_origin: splits of the replicated tensor
    subs = []
    for d in dst.dims:
        if len(d) > 1:
            raise _Unknown
        subs.append((-1, d[0] if d else -1))
    sizes = dict(enumerate(dst.dev_matrix))
    ops2 = ms_infer(subs, sizes)
    c2, p2 = _op_costs(ops2, numel)
    comm += c2
    comp += p2
    if tuple(src.shape) != tuple(dst.shape):      # from_repeat.slice_shape != to_repeat.slice_shape
        comp += RESHAPE_COST_FACTOR * numel       # prev_shape = from_.tensor_shape()
    return comm, comp


class _Unknown(Exception):
    pass


@lru("engine.reshape_cost.reshape_swc_cost", 1 << 16)
def reshape_swc_cost(src: Layout, dst: Layout) -> tuple[float, float] | None:
    """(communication, computation) in ELEMENTS of MindSpore 2.9.0's ReshapeInfo strategy-with-cost for
    input layout ``src`` and output layout ``dst`` (same element count and device count), before
    BreakingTiesForPreferringDataParallel and RefineForPracticalCost: ``communication`` is what
    ``communication_without_parameter_`` (= ``communication_cost_``) holds divided by the type length,
    i.e. the redistribution's forward + backward communication; ``computation`` likewise for
    ``computation_cost_``. None if the model does not apply (partial sums, different element or device
    counts, multi-axis dims on the unexpandable path)."""
    if src.partial or dst.partial:
        return None
    if math.prod(src.shape) != math.prod(dst.shape) or src.device_num != dst.device_num:
        return None
    try:
        a, b = squeeze_shape(src), squeeze_shape(dst)
        u = unify(a, b)
        e = _expand(*u) if u is not None else None
        if e is None:
            return _unexpandable(src, dst)
        subs, sizes, shape = e
        ops = ms_infer(subs, sizes)
        s = float(src.slice_numel)
        comm, comp = _op_costs(ops, s)
        if not ops:
            flag = True     # ReshapeCost builds TensorRedistribution(false, keep_reshape=true)
        else:
            flag = (src.slice_shape != _slice(shape, subs, 0, sizes)
                    or dst.slice_shape != _slice(shape, subs, 1, sizes))
        if flag:
            comp += RESHAPE_COST_FACTOR * s
        return comm, comp
    except _Unknown:
        return None


def reshape_swc_logged(src: Layout, dst: Layout, type_len: int = 4) -> tuple[float, float, float] | None:
    """The triple MindSpore's INFO log prints for this strategy-with-cost, in BYTES:
    (computation_cost_, communication_cost_, communication_without_parameter_) after
    BreakingTiesForPreferringDataParallel (-1 on each cost > 1 when the input strategy's dim 0 is split
    over every device) and RefineForPracticalCost."""
    r = reshape_swc_cost(src, dst)
    if r is None:
        return None
    comm, comp = r[0] * type_len, r[1] * type_len
    if src.shape and src.split(0) == src.device_num:
        comp = comp - 1.0 if comp > 1.0 else comp
        comm = comm - 1.0 if comm > 1.0 else comm
    comm = refine_cost(comm)
    return comp, comm, comm
