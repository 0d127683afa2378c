"""Scatter and index operators: Scatter*, ScatterNd* / TensorScatter*, UnsortedSegment*, IndexAddExt, OneHot."""
from __future__ import annotations

import dataclasses

from ...vocab.graph import Op
from .common import const_arg, int_arg, letters, make_rule, out_shapes, shape_of, tensor_slots, unknown_rule
from .factor import FactorRule


#: MindSpore's ScatterMathOpsInfo (scatter_math_ops_info.cc): these split the input's first dimension too
SCATTER_MATH = frozenset(("ScatterAdd", "ScatterSub", "ScatterMul", "ScatterDiv"))
#: how the UnsortedSegment* primitives combine the partial results of split segment ids (the rest: sum)
SEGMENT_KIND = {"UnsortedSegmentMin": "min", "UnsortedSegmentMax": "max", "UnsortedSegmentProd": "prod"}


def scatter_rule(op: Op) -> FactorRule:
    """ScatterUpdate/ScatterAdd/...(input, indices, updates): the indices are not split; updates' trailing
    dims follow input's other dims. ScatterUpdate/ScatterMax/ScatterMin (ScatterOpsInfo) refuse a split of
    input's first dim; ScatterAdd/Sub/Mul/Div (ScatterMathOpsInfo) take it -- each device masks the indices
    outside its rows (the replace graph's Sub/ReLU/Minimum/Equal mask) -- and generate it
    (GenerateOpStrategies enumerates all of input's dims; measured: [96,64,128] on 24 devices lists
    ``((3, 1, 1), (1, 1), (1, 1, 1, 1))`` first and takes ``((3, 2, 4), (1, 1), (1, 1, 2, 4))``)."""
    x, i, u = shape_of(op, 0), shape_of(op, 1), shape_of(op, 2)
    f = letters(len(x))
    fu = [None] * len(i) + f[1:]
    if len(fu) != len(u):
        return unknown_rule(op)
    outs = [f if len(o) == len(x) else [None] * len(o) for o in out_shapes(op)]
    return make_rule(op, f, [f, [None] * len(i), fu], outs, [0, 1, 2],
                     unsplittable=[] if op.type in SCATTER_MATH else [f[0]])


def scatter_nd_rule(op: Op) -> FactorRule:
    """ScatterNd*/TensorScatter*(input, indices[..., k], updates): input's first k dims and the
    indices are not split; updates' trailing dims follow input's dims after k."""
    x, i, u = shape_of(op, 0), shape_of(op, 1), shape_of(op, 2)
    k = i[-1] if i else 1
    f = letters(len(x))
    fu = [None] * (len(i) - 1) + f[k:]
    if len(fu) != len(u):
        return unknown_rule(op)
    outs = [f if len(o) == len(x) else [None] * len(o) for o in out_shapes(op)]
    return make_rule(op, f, [f, [None] * len(i), fu], outs, [0, 1, 2], unsplittable=f[:k])


def unsorted_segment_rule(op: Op) -> FactorRule:
    """UnsortedSegmentSum/Min/Max/Prod(x, segment_ids, num_segments): segment_ids covers x's leading
    dims; splitting them leaves partial results the operator reduces (sum/min/max/prod); out =
    [num_segments] + x's other dims."""
    x, ids = shape_of(op, 0), shape_of(op, 1)
    f = letters(len(x))
    kind = SEGMENT_KIND.get(op.type, "sum")
    return make_rule(op, f, [f, f[:len(ids)]], [[None] + f[len(ids):]], [0, 1], reduce=kind)


def index_add_rule(op: Op) -> FactorRule:
    """IndexAddExt(x, dim, index, source, alpha): ``dim`` and the index are not split; x, source and
    the output share the other dims."""
    x = shape_of(op, 0)
    dim = int_arg(const_arg(op, 1, 0), 0) % len(x)
    f = letters(len(x))
    return make_rule(op, f, [f, [None] * len(shape_of(op, 2)), f], [f], [0, 2, 3], unsplittable=[f[dim]])


def onehot_rule(op: Op) -> FactorRule:
    """OneHot(indices, depth, on, off) / OneHotExt(tensor, num_classes, on, off): MindSpore reads
    the first strategy row against the OUTPUT (indices' dims + depth), and depth may be split
    (checked: ``((2, 4), (), ())``); on/off (0-d tensors) take ``()``; depth is a Python int, not a
    strategy input. The row is the rule's ``rows`` (:attr:`FactorRule.strategy_rows`). Indices of rank > 1
    split their first dimension only ("When input dimension is > 1, axis must be -1, and strategy must be
    data parallel", OneHotInfo::CheckStrategy; measured: ``((1, 8, 1), (), ())`` on ``[1, 262144]`` indices
    refused, ``((8, 1, 1), (), ())`` on ``[8, 32768]`` taken)."""
    i = shape_of(op, 0)
    fi = letters(len(i), "i")
    slots = [0] + [s for s in tensor_slots(op)[1:]]
    outs = [fi + ["c"] if len(o) == len(fi) + 1 else [None] * len(o) for o in out_shapes(op)]
    r = make_rule(op, fi + ["c"], [fi] + [[None] * len(shape_of(op, s)) for s in slots[1:]], outs, slots,
                  unsplittable=fi[1:] + ["c"] if len(i) > 1 else [])
    return dataclasses.replace(r, rows=(tuple(fi + ["c"]),) + r.inputs[1:],
                               row_shapes=(r.output_shapes[0],) + r.input_shapes[1:])


#: (builder, primitive names) pairs this family registers (:mod:`strategist.engine.rules.registry`)
REGISTRATIONS = (
    (scatter_rule, ("ScatterUpdate", "ScatterAdd", "ScatterSub", "ScatterMul", "ScatterDiv", "ScatterMax",
                    "ScatterMin")),
    (scatter_nd_rule, ("ScatterNdUpdate", "ScatterNdAdd", "ScatterNdSub", "TensorScatterUpdate", "TensorScatterAdd",
                       "TensorScatterSub", "TensorScatterMul", "TensorScatterDiv", "TensorScatterMax",
                       "TensorScatterMin")),
    (unsorted_segment_rule, ("UnsortedSegmentSum", "UnsortedSegmentMin", "UnsortedSegmentMax", "UnsortedSegmentProd")),
    (index_add_rule, ("IndexAddExt",)),
    (onehot_rule, ("OneHot", "OneHotExt")),
)
