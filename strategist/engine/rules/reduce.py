"""Reductions and operators along one axis: Reduce*, Max, ArgMax*/MaxDim, Argmax, cumulative scans, Sort, TopK,
Unique, TraceV2. A reduced dimension MindSpore lets split is a reduction factor (partial results the operator
combines); one it refuses to split is unsplittable."""
from __future__ import annotations

from ...vocab.graph import Op
from .common import (axes_unsplit, axis_arg, const_arg, int_arg, letters, make_rule, norm_axes, out_shapes, shape_of,
                     tensor_slots)
from .factor import FactorRule

#: how the Reduce* primitives combine the partial results of a split reduced axis (the rest: sum)
REDUCE_KIND = {"ReduceMax": "max", "ReduceMin": "min", "ReduceProd": "prod"}


def reduce_rule(op: Op) -> FactorRule:
    """Reduce{Sum,Mean,Max,Min,Prod}: reduced dims are reduction factors (partial results)."""
    shp = shape_of(op, 0)
    axes = norm_axes(const_arg(op, 1, ()), len(shp))
    keep = bool(const_arg(op, 2, op.attrs.get("keep_dims", False)))
    factors = letters(len(shp))
    out = [None if i in axes else f for i, f in enumerate(factors)] if keep else \
        [f for i, f in enumerate(factors) if i not in axes]
    kind = REDUCE_KIND.get(op.type, "sum")
    return make_rule(op, factors, [factors], [out], [0], reduce=kind)


def all_reduce_rule(op: Op) -> FactorRule:
    """Max/Min/ReduceAll-like over every dim to a scalar (``Max(x)``, ``L2Loss``)."""
    x = shape_of(op, tensor_slots(op)[0])
    f = letters(len(x))
    kind = "max" if op.type in ("Max",) else "sum"
    return make_rule(op, f, [f], [[None] * len(o) for o in out_shapes(op)], [tensor_slots(op)[0]], reduce=kind)


def arg_reduce_rule(op: Op) -> FactorRule:
    """ArgMaxWithValue/ArgMinWithValue(x, axis, keep_dims) and MaxDim/MinDim(x, dim, keepdim):
    outputs (index, value) / (value, index) reduced over ``axis``. MindSpore accepts a split of the
    reduced axis (checked: ArgMaxWithValue ``((2, 4),)`` on axis 1) and combines the per-device
    results itself: it is a reduction factor here (max/min)."""
    x = shape_of(op, 0)
    axis = int_arg(axis_arg(op, 1, "axis", -1), -1) % max(len(x), 1)
    keep = bool(const_arg(op, 2, op.attrs.get("keep_dims", False)))
    f = letters(len(x))
    out = [None if i == axis else g for i, g in enumerate(f)] if keep else [g for i, g in enumerate(f) if i != axis]
    outs = [out if len(o) == len(out) else [None] * len(o) for o in out_shapes(op)]
    kind = "min" if "Min" in op.type else "max"
    return make_rule(op, f, [f], outs, [0], reduce=kind)


def max_dim_rule(op: Op) -> FactorRule:
    """MaxDim/MinDim(x, dim, keepdim) -> (values, indices): unlike ArgMaxWithValue, MindSpore refuses
    a split of ``dim`` (checked: ``((2, 4),)`` refused, ``((8, 1),)`` taken, dim 1)."""
    x = shape_of(op, 0)
    axis = int_arg(const_arg(op, 1, -1), -1) % len(x)
    keep = bool(const_arg(op, 2, False))
    f = letters(len(x))
    out = [None if i == axis else g for i, g in enumerate(f)] if keep else [g for i, g in enumerate(f) if i != axis]
    outs = [out if len(o) == len(out) else [None] * len(o) for o in out_shapes(op)]
    return make_rule(op, f, [f], outs, [0], unsplittable=[f[axis]])


def argmax_rule(op: Op) -> FactorRule:
    """Argmax/Argmin (index only): the reduced axis cannot be split."""
    x = shape_of(op, 0)
    axis = int_arg(axis_arg(op, 1, "axis", -1), -1)
    return axes_unsplit(op, (axis % len(x),) if x else ())


def cum_rule(op: Op) -> FactorRule:
    """CumSum/CumProd(x, axis, ...), Cummax/Cummin(x, axis), CumsumExt(x, dim, dtype): the scanned
    axis cannot be split (checked: CumSum ``((1, 2),)`` and CumsumExt ``((4, 2),)`` on axis 1 refused)."""
    x = shape_of(op, 0)
    axis = int_arg(axis_arg(op, 1, "axis", 0), 0)
    return axes_unsplit(op, (axis % len(x),))


def sort_rule(op: Op) -> FactorRule:
    """Sort(x, axis, descending) / SortExt(x, dim, descending, stable): the sorted axis cannot be
    split; both outputs (values, indices) follow the input."""
    x = shape_of(op, 0)
    axis = int_arg(axis_arg(op, 1, "axis", -1), -1)
    return axes_unsplit(op, (axis % len(x),))


def topk_rule(op: Op) -> FactorRule:
    """TopK(x, k) along the last dim / TopkExt(x, k, dim, largest, sorted): that dim cannot be split."""
    x = shape_of(op, 0)
    dim = -1 if op.type == "TopK" else int_arg(const_arg(op, 2, -1), -1)
    return axes_unsplit(op, (dim % len(x),))


def _first_tensor_rank(op: Op) -> int:
    s = tensor_slots(op)
    return len(shape_of(op, s[0])) if s else 0


def unique_rule(op: Op) -> FactorRule:
    return axes_unsplit(op, tuple(range(_first_tensor_rank(op))))


def trace_v2_rule(op: Op) -> FactorRule:
    """TraceV2(x, offset, axis1, axis2): the diagonal's two axes whole, the other dims split and kept, in order, by
    the output (TraceV2Info; MindSpore 2.9.0 generates [[1, 1, 1]], [[2, 1, 1]] for x [2, 3, 3] on axes -2, -1)."""
    rank = len(shape_of(op, tensor_slots(op)[0]))
    a1, a2 = int_arg(const_arg(op, 2, -2), -2), int_arg(const_arg(op, 3, -1), -1)
    return axes_unsplit(op, (a1 % rank, a2 % rank))


#: (builder, primitive names) pairs this family registers (:mod:`strategist.engine.rules.registry`)
REGISTRATIONS = (
    (reduce_rule, ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "SumExt", "MeanExt", "ReduceAll",
                   "ReduceAny")),
    (all_reduce_rule, ("Max",)),
    (arg_reduce_rule, ("ArgMaxWithValue", "ArgMinWithValue")),
    (max_dim_rule, ("MaxDim", "MinDim")),
    (argmax_rule, ("Argmax", "Argmin")),
    (cum_rule, ("CumSum", "CumProd", "Cummax", "Cummin", "CumsumExt")),
    (sort_rule, ("Sort", "SortExt")),
    (topk_rule, ("TopK", "TopkExt")),
    (unique_rule, ("Unique",)),
    (trace_v2_rule, ("TraceV2",)),
)
