"""Shape operators: Transpose, ExpandDims, Squeeze, StridedSlice, Slice, PadV3, Concat, Stack, Split*, Tile,
BroadcastTo, RepeatInterleave. Reshape, which has no strategy, is :mod:`strategist.engine.rules.reshape`."""
from __future__ import annotations

import dataclasses

from ...vocab.graph import Op
from .common import (axes_unsplit, axis_arg, const_arg, int_arg, letters, make_rule, norm_axes, out_shapes, shape_of,
                     tensor_slots, unknown_rule)
from .factor import FactorRule


def transpose_rule(op: Op) -> FactorRule:
    shp = shape_of(op, 0)
    perm = const_arg(op, 1, tuple(range(len(shp))))
    factors = letters(len(shp))
    return make_rule(op, factors, [factors], [[factors[p] for p in perm]], [0])


def expand_dims_rule(op: Op) -> FactorRule:
    shp = shape_of(op, 0)
    factors = letters(len(shp))
    out = list(factors)
    out.insert(const_arg(op, 1, 0) % (len(shp) + 1), None)
    return make_rule(op, factors, [factors], [out], [0])


def squeeze_rule(op: Op) -> FactorRule:
    shp = shape_of(op, 0)
    factors = letters(len(shp))
    axes = op.attrs.get("axis") or const_arg(op, 1, ())
    axes = norm_axes(axes, len(shp)) if axes not in (None, ()) else tuple(i for i, n in enumerate(shp) if n == 1)
    ins = [None if i in axes else f for i, f in enumerate(factors)]
    return make_rule(op, factors, [ins], [[f for i, f in enumerate(factors) if i not in axes]], [0])


def _bits(mask, n):
    mask = int(mask or 0)
    return [bool(mask >> i & 1) for i in range(n)]


def strided_slice_rule(op: Op) -> FactorRule:
    """StridedSlice(x, begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
    shrink_axis_mask): the strategy is over x's dims; only dims taken whole (begin 0, end >= size,
    stride 1, or masked) may be split. ``new_axis_mask`` inserts unsplit output dims and
    ``shrink_axis_mask`` removes dims (they are sliced to 1: unsplit). Checked: shrink ``((1, 8),)``
    and new-axis ``((2, 4),)`` taken, a partly sliced dim refused."""
    x = shape_of(op, 0)
    out = out_shapes(op)[0]
    begin, end, strides = (tuple(const_arg(op, k, ()) or ()) for k in (1, 2, 3))
    bm, em, ellipsis, newm, shrink = (const_arg(op, k, op.attrs.get(a, 0)) for k, a in
                                      ((4, "begin_mask"), (5, "end_mask"), (6, "ellipsis_mask"),
                                       (7, "new_axis_mask"), (8, "shrink_axis_mask")))
    if int(ellipsis or 0):
        return unknown_rule(op)
    f = letters(len(x))
    nspec = max(len(begin), len(end), len(strides))
    bmb, emb, newb, shb = (_bits(m, nspec) for m in (bm, em, newm, shrink))
    sliced, out_f, d = set(), [], 0
    for k in range(nspec):
        if newb[k]:
            out_f.append(None)
            continue
        if d >= len(x):
            break
        n = x[d]
        b = 0 if bmb[k] else (begin[k] if k < len(begin) else 0)
        e = n if emb[k] else (end[k] if k < len(end) else n)
        st = strides[k] if k < len(strides) else 1
        b = b + n if b < 0 else b
        e = e + n if e < 0 else e
        whole = b == 0 and e >= n and st == 1
        if shb[k]:
            sliced.add(f[d])
        else:
            if not whole:
                sliced.add(f[d])
            out_f.append(f[d] if whole else None)
        d += 1
    out_f += f[d:]
    if len(out_f) != len(out):
        return unknown_rule(op)
    return make_rule(op, f, [f], [out_f], [0], unsplittable=sorted(sliced))


def slice_rule(op: Op) -> FactorRule:
    """Slice(x, begin, size) / SliceExt(x, dim, start, end, step): only dims taken whole may be split."""
    x = shape_of(op, 0)
    out = out_shapes(op)[0]
    f = letters(len(x))
    cut = [g for g, a, b in zip(f, x, out) if a != b]
    return make_rule(op, f, [f], [[g if a == b else None for g, a, b in zip(f, x, out)]], [0], unsplittable=cut)


def pad_rule(op: Op) -> FactorRule:
    """PadV3(x, paddings, mode, value): padded dims cannot be split (output size differs)."""
    x = shape_of(op, 0)
    out = out_shapes(op)[0]
    f = letters(len(x))
    cut = [g for g, a, b in zip(f, x, out) if a != b]
    return make_rule(op, f, [f], [[g if a == b else None for g, a, b in zip(f, x, out)]], [0], unsplittable=cut)


def concat_rule(op: Op) -> FactorRule:
    # ConcatInfo's strategy has a row per tuple element, constant tensors included (MindFormers' MoE padding
    # ``concat((pad_tokens, tokens))``: MindSpore reports ((1, 1, 1), (1, 1, 1)) for [1, 128, H] and [1, T, H])
    slots = [i for i, x in enumerate(op.inputs) if x.spec is not None and (x.kind != "const" or x.spec.shape)]
    out = out_shapes(op)[0]
    axis = const_arg(op, len(op.inputs) - 1, op.attrs.get("axis", 0)) % len(out)
    factors = letters(len(out))
    return make_rule(op, factors, [factors] * len(slots), [factors], slots, unsplittable=[factors[axis]])


def stack_rule(op: Op) -> FactorRule:
    """Stack/StackExt(tensors, axis): all inputs share every factor; the new axis is not split."""
    slots = tensor_slots(op)
    out = out_shapes(op)[0]
    axis = int_arg(op.attrs.get("axis", const_arg(op, len(op.inputs) - 1, 0)), 0) % len(out)
    f = letters(len(out))
    fin = [g for i, g in enumerate(f) if i != axis]
    outf = [None if i == axis else g for i, g in enumerate(f)]
    return make_rule(op, fin, [fin] * len(slots), [outf], slots)


def split_rule(op: Op) -> FactorRule:
    shp = shape_of(op, 0)
    axis = const_arg(op, 1, op.attrs.get("axis", 0)) % len(shp)
    factors = letters(len(shp))
    return make_rule(op, factors, [factors], [factors] * len(op.outputs), [0], unsplittable=[factors[axis]])


def split_axis_rule(op: Op) -> FactorRule:
    """Split/SplitV/SplitWithSize/SplitTensor/SplitWithSizeView: the split axis cannot be split,
    every output follows the input's other dims."""
    x = shape_of(op, 0)
    if op.type in ("Split", "SplitV"):
        axis = axis_arg(op, 1, "axis", 0) if op.type == "Split" else op.attrs.get("split_dim", const_arg(op, 2, 0))
    else:   # SplitWithSize(x, sizes, dim), SplitTensor(x, size, dim)
        axis = const_arg(op, 2, 0)
    return axes_unsplit(op, (int_arg(axis, 0) % len(x),))


def tile_rule(op: Op) -> FactorRule:
    """Tile(x, multiples) as MindSpore 2.9's TileInfo: the strategy has one entry per output dimension
    (the multiples). A dimension with multiple m > 1 may be split by a divisor of m: the output is
    split, the input stays whole (each device tiles fewer copies). A dimension with m == 1 splits
    input and output alike. Candidates are generated over the multiples themselves (tile_info.cc
    ``GenerateOpStrategies`` passes ``full_multiples_`` as the shape), so they never split an m == 1
    dimension; a configured strategy may (``CheckStrategy`` checks such dims against the input)."""
    shp = shape_of(op, 0)
    out = out_shapes(op)[0]
    mult = tuple(const_arg(op, 1, (1,) * len(out)))
    if len(mult) < len(out):
        mult = (1,) * (len(out) - len(mult)) + mult
    factors = letters(len(out))
    off = len(out) - len(shp)
    ins = [factors[off + i] if mult[off + i] == 1 else None for i in range(len(shp))]
    r = make_rule(op, factors, [ins], [factors], [0])
    check = tuple(m if m != 1 else (shp[i - off] if i >= off else 1) for i, m in enumerate(mult))
    return dataclasses.replace(r, rows=(tuple(factors),), row_shapes=(check,), cand_sizes=tuple(zip(factors, mult)))


def broadcast_to_rule(op: Op) -> FactorRule:
    """BroadcastTo(x, shape): x's dims that are not broadcast carry the output's factors."""
    x = shape_of(op, 0)
    out = out_shapes(op)[0]
    f = letters(len(out))
    off = len(out) - len(x)
    ins = [None if (n == 1 and out[off + i] != 1) else f[off + i] for i, n in enumerate(x)]
    used = {g for g in ins if g}
    return make_rule(op, f, [ins], [[g if g in used else None for g in f]], [0])


def repeat_interleave_rule(op: Op) -> FactorRule:
    x = shape_of(op, 0)
    dim = const_arg(op, 2, None)
    return axes_unsplit(op, (int_arg(dim, 0) % len(x),) if dim is not None else tuple(range(len(x))))


#: (builder, primitive names) pairs this family registers (:mod:`strategist.engine.rules.registry`)
REGISTRATIONS = (
    (transpose_rule, ("Transpose",)),
    (expand_dims_rule, ("ExpandDims",)),
    (squeeze_rule, ("Squeeze",)),
    (strided_slice_rule, ("StridedSlice",)),
    (slice_rule, ("Slice", "SliceExt")),
    (pad_rule, ("PadV3",)),
    (concat_rule, ("Concat",)),
    (stack_rule, ("Stack", "StackExt")),
    (split_rule, ("Split",)),
    (split_axis_rule, ("SplitV", "SplitWithSize", "SplitTensor", "SplitWithSizeView", "SplitTensorView")),
    (tile_rule, ("Tile",)),
    (broadcast_to_rule, ("BroadcastTo",)),
    (repeat_interleave_rule, ("RepeatInterleaveInt", "RepeatInterleaveTensor")),
)
