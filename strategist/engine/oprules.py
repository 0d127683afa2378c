"""Factor rules for the rest of MindSpore 2.9's parallel OperatorInfo registry (merged into
:data:`strategist.engine.ops.RULES`, after it: a name defined here overrides the one in ``ops.py``).

Each builder follows the MindSpore ``OperatorInfo`` of the same primitive: which dimensions may be
split (``CheckStrategy``), which splits must agree (``InferTensorMap``: one factor), which inputs are
strategy inputs. Python scalars (``x * 0.5`` -> ``Muls``, ``alpha`` of ``AddExt``, axes, flags) are
never strategy inputs; a 0-d *tensor* input is (strategy ``()``). Behaviour checked against MindSpore
2.9.0 itself (a compile of a one-operator net) is marked "(checked)"; see ``docs/notes/coverage.md``.

The list of primitives MindSpore registers an OperatorInfo for is ``rules/mindspore_operator_infos.yaml``.

Rules here are only added for primitives ``ops.py`` has no rule for (:data:`NEW`), except the ones in
:data:`OVERRIDES`, where ``ops.py``'s rule disagreed with MindSpore (each with the reason).
Primitives whose OperatorInfo cannot be written exactly as a FactorRule (a strategy row naming a
dimension its tensor does not have: Tile's multiples) keep a conservative rule and are
listed in :data:`INEXACT`; OperatorInfo primitives deliberately without a rule are in :data:`LEFT_OUT`.
An operator without any rule is what MindSpore calls BatchParallel/StandAlone (:func:`batch_parallel_rule`,
``docs/notes/coverage.md``).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

from ..vocab.graph import Op

#: filled at the end of this module; defined first so that ``ops._register_families`` finds it even
#: when this module is imported before ``strategist.engine.ops`` (import cycle)
RULES: dict = {}

from .ops import (FactorRule, GatherAxis, _axes, _const, _letters, _out_shapes, _rule, _shape,  # noqa: E402
                  batch_parallel_rule, elementwise, gather_like_rule, norm_rule, reduce_rule, unary, unknown_rule)

# --------------------------------------------------------------------------------------
# helpers


def _tslots(op: Op) -> list[int]:
    """Strategy inputs: every tensor input (op outputs, parameters, graph inputs and constant
    *tensors*, 0-d included); Python scalars, tuples, strings and None are not."""
    return [i for i, x in enumerate(op.inputs) if x.spec is not None]


def _int(v, default=None):
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, (tuple, list)) and len(v) == 1 and isinstance(v[0], int):
        return v[0]
    return default


def _axis_arg(op: Op, slot: int, attr: str | None = None, default=None):
    """An axis given as a constant input ``slot`` or a primitive attribute ``attr``."""
    v = _const(op, slot, None) if slot is not None else None
    if v is None and attr:
        v = op.attrs.get(attr)
    return default if v is None else v


def masked_fill_rule(op: Op) -> FactorRule:
    """MaskedFill(x, mask, value): MindSpore 2.9's MaskedFillInfo drops a 0-d tensor ``value`` from its inputs
    (``GetAttrs`` pops the third shape), so its strategies have two rows (measured: deepseek3's router
    MaskedFill, propagated, reports ``((1, 8, 1), (1, 8, 1))``); a configured third row ``()`` is accepted and
    kept (``FactorRule.dropped_rows``)."""
    return FactorRule(**{**elementwise(op, _tslots(op)[:2]).__dict__, "dropped_rows": 1})


def tensor_elementwise(op: Op) -> FactorRule:
    """Broadcasting element-wise over the tensor inputs only (``AddExt(x, y, alpha)``,
    ``MaskedFill(x, mask, value)``, ``Lerp(start, end, weight)``, the ``Inplace*`` ops ...)."""
    return elementwise(op, _tslots(op))


def scalar_arith(op: Op) -> FactorRule:
    """ArithmeticScalarBase (``Muls``, ``FmodScalar``, ``RemainderTensorScalar``, ...): one strategy
    input, the tensor; the scalar is not one (checked: ``Muls`` takes ``((2, 4),)``)."""
    return elementwise(op, _tslots(op)[:1])


def axes_unsplit(op: Op, axes, reduce_out: bool = False, keep: bool = True) -> FactorRule:
    """One strategy input whose ``axes`` cannot be split; outputs of the input's rank keep the other
    factors (an output dim of a different size than the input's is ``None``). With ``reduce_out`` the
    axes are dropped from outputs of lower rank (``keep`` False)."""
    x = _shape(op, _tslots(op)[0])
    axes = _axes(axes, len(x)) if len(x) else ()
    f = _letters(len(x))
    outs = []
    for o in _out_shapes(op):
        if len(o) == len(x):
            outs.append([f[i] if (o[i] == x[i] or i not in axes) and o[i] == x[i] else None for i in range(len(x))])
        elif len(o) == len(x) - len(axes):
            outs.append([g for i, g in enumerate(f) if i not in axes])
        else:
            outs.append([None] * len(o))
    return _rule(op, f, [f], outs, [_tslots(op)[0]], unsplittable=[f[a] for a in axes])


def _first_tensor_rank(op: Op) -> int:
    s = _tslots(op)
    return len(_shape(op, s[0])) if s else 0


# --------------------------------------------------------------------------------------
# element-wise families


def bias_add_rule(op: Op) -> FactorRule:
    """BiasAdd(x, bias[, data_format]): bias follows x's channel dim (dim 1 for NCHW inputs of rank
    > 2, the last dim otherwise); data_format is not a strategy input (checked: ``((2, 4), (4,))``)."""
    x = _shape(op, 0)
    f = _letters(len(x))
    fmt = op.attrs.get("data_format", op.attrs.get("format", "NCHW"))
    c = 1 if len(x) > 2 and str(fmt).upper().startswith("NC") else len(x) - 1
    return _rule(op, f, [f, [f[c]]], [f], [0, 1])


def prelu_rule(op: Op) -> FactorRule:
    """PReLU(x[N, C, ...], w[C] or [1]): w follows the channel dim."""
    x, w = _shape(op, 0), _shape(op, 1)
    f = _letters(len(x))
    c = f[1] if len(x) > 1 else f[0]
    return _rule(op, f, [f, [c if w and w[0] != 1 else None]], [f], [0, 1])


def dropout_rule(op: Op) -> FactorRule:
    """Dropout / DropoutExt: the input's dims split freely; outputs of the input's shape follow it
    (the bit mask of DropoutExt/DropoutGenMask is not a layout-carrying output)."""
    rule = _dropout_first(op)
    slots = _tslots(op)
    if op.type == "DropoutExt" and len(slots) > 1:
        # DropoutExt(input, p, seed, offset): the seed and offset tensors are strategy rows too, unsplit
        # (MindSpore 2.9.0 reports ((1, 1), (), ()); its UT test_dropout_ext's net)
        f = rule.inputs[0]
        return _rule(op, f, [f] + [[None] * len(_shape(op, k)) for k in slots[1:]], rule.outputs, slots)
    return rule


def dropout_do_mask_rule(op: Op) -> FactorRule:
    """DropoutDoMask(x, mask, keep_prob): only x is a strategy input (the mask is regenerated)."""
    return _dropout_first(op)


def _dropout_first(op: Op) -> FactorRule:
    slots = _tslots(op)
    x = _shape(op, slots[0])
    f = _letters(len(x))
    outs = [f if tuple(o) == tuple(x) else [None] * len(o) for o in _out_shapes(op)]
    return _rule(op, f, [f], outs, [slots[0]])


# --------------------------------------------------------------------------------------
# reductions and axis operators


def all_reduce_rule(op: Op) -> FactorRule:
    """Max/Min/ReduceAll-like over every dim to a scalar (``Max(x)``, ``L2Loss``)."""
    x = _shape(op, _tslots(op)[0])
    f = _letters(len(x))
    kind = "max" if op.type in ("Max",) else "sum"
    return _rule(op, f, [f], [[None] * len(o) for o in _out_shapes(op)], [_tslots(op)[0]], reduce=kind)


def arg_reduce_rule(op: Op) -> FactorRule:
    """ArgMaxWithValue/ArgMinWithValue(x, axis, keep_dims) and MaxDim/MinDim(x, dim, keepdim):
    outputs (index, value) / (value, index) reduced over ``axis``. MindSpore accepts a split of the
    reduced axis (checked: ArgMaxWithValue ``((2, 4),)`` on axis 1) and combines the per-device
    results itself: it is a reduction factor here (max/min)."""
    x = _shape(op, 0)
    axis = _int(_axis_arg(op, 1, "axis", -1), -1) % max(len(x), 1)
    keep = bool(_const(op, 2, op.attrs.get("keep_dims", False)))
    f = _letters(len(x))
    out = [None if i == axis else g for i, g in enumerate(f)] if keep else [g for i, g in enumerate(f) if i != axis]
    outs = [out if len(o) == len(out) else [None] * len(o) for o in _out_shapes(op)]
    kind = "min" if "Min" in op.type else "max"
    return _rule(op, f, [f], outs, [0], reduce=kind)


def argmax_rule(op: Op) -> FactorRule:
    """Argmax/Argmin (index only): the reduced axis cannot be split."""
    x = _shape(op, 0)
    axis = _int(_axis_arg(op, 1, "axis", -1), -1)
    return axes_unsplit(op, (axis % len(x),) if x else ())


def cum_rule(op: Op) -> FactorRule:
    """CumSum/CumProd(x, axis, ...), Cummax/Cummin(x, axis), CumsumExt(x, dim, dtype): the scanned
    axis cannot be split (checked: CumSum ``((1, 2),)`` and CumsumExt ``((4, 2),)`` on axis 1 refused)."""
    x = _shape(op, 0)
    axis = _int(_axis_arg(op, 1, "axis", 0), 0)
    return axes_unsplit(op, (axis % len(x),))


def softmax_like_rule(op: Op) -> FactorRule:
    """Softmax/LogSoftmax/L2Normalize/ReverseV2/SoftmaxExt: the given axes cannot be split."""
    x = _shape(op, 0)
    ax = _axis_arg(op, 1, "axis", -1)
    if op.type == "ReverseV2":
        ax = op.attrs.get("axis", _const(op, 1, ()))
    return axes_unsplit(op, ax if ax not in (None, ()) else (-1 % len(x),))


def sort_rule(op: Op) -> FactorRule:
    """Sort(x, axis, descending) / SortExt(x, dim, descending, stable): the sorted axis cannot be
    split; both outputs (values, indices) follow the input."""
    x = _shape(op, 0)
    axis = _int(_axis_arg(op, 1, "axis", -1), -1)
    return axes_unsplit(op, (axis % len(x),))


def topk_rule(op: Op) -> FactorRule:
    """TopK(x, k) along the last dim / TopkExt(x, k, dim, largest, sorted): that dim cannot be split."""
    x = _shape(op, 0)
    dim = -1 if op.type == "TopK" else _int(_const(op, 2, -1), -1)
    return axes_unsplit(op, (dim % len(x),))


def swiglu_rule(op: Op) -> FactorRule:
    """Swiglu(x, dim): the gated dim (halved in the output) cannot be split (checked: ``((2, 4),)``
    refused, ``((8, 1),)`` taken, for dim -1)."""
    x = _shape(op, 0)
    return axes_unsplit(op, (_int(_const(op, 1, -1), -1) % len(x),))


def gatherd_rule(op: Op) -> FactorRule:
    """GatherD(x, dim, index): strategy (x, index); every dim but ``dim`` is shared by x, index and
    the output; ``dim`` cannot be split."""
    x = _shape(op, 0)
    dim = _int(_const(op, 1, 0), 0) % len(x)
    f = _letters(len(x))
    idx = 2
    return _rule(op, f, [f, f], [f], [0, idx], unsplittable=[f[dim]])


def index_select_rule(op: Op) -> FactorRule:
    """IndexSelect(x, axis, index): strategy (x, index); out = x with ``axis`` replaced by the
    index's dim. MindSpore's IndexSelectInfo is a GatherInfo (gather_info.h ``class IndexSelectInfo final :
    public GatherInfo``): Gather's rule with x as the table, its device matrix [index, x...], and its checks of a
    split ``axis`` (measured, deepseek3's MoE stand-in: x [32768, 7168] on axis 0 over 8 devices lists 18
    strategies, ``((2, 1), (2,))`` and ``((2, 2), (1,))`` fail SetCostUnderStrategy: a split axis beside any other
    split must use every device)."""
    return gather_like_rule(op, 0, 2, _int(_const(op, 1, 0), 0))


def embedding_rule(op: Op) -> FactorRule:
    """Embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq) (mint):
    strategy (input, weight); out = input.shape + [H]. MindSpore's EmbeddingInfo refuses any split
    of the indices (checked: ``((2, 1), (1, 1))``, ``((8, 1), (1, 1))`` refused). A vocabulary split is a
    reduction factor (each device looks up its own rows). Measured on 8 devices (msoracle, and the
    EmbeddingInfo candidates of MindFormers' qwen3 in verify's GLOG_v=1 log): a vocabulary split must use
    every device (GatherInfo::CheckProductValidity, "param_strategy [2, 1] is not supported": ``((1, 1),
    (2, 1))``, ``((1, 1), (2, 2))``, ``((1,), (2, 1))`` refused; ``((1,), (8, 1))``, ``((1,), (2, 4))`` taken),
    and with 1-D indices the unsplit-vocabulary ("normal") mode fails its tensor-info inference
    ("tensor_map_origin_ size must be equal to tensor_shape_origin_ size": ``((1,), (1, 1))``, ``((1,), (1, 8))``
    refused, while 2-D indices take ``((1, 1), (1, 1))`` and ``((1, 1), (1, 8))``)."""
    i = _shape(op, 0)
    rule = _rule(op, ["v", "h"], [[None] * len(i), ["v", "h"]], [[None] * len(i) + ["h"]], [0, 1])
    # 1-D indices (MindFormers' ids reshaped to [B*S]): the vocabulary split reduce-scatters onto the output's
    # rows, as Gather's table-row split does (verify's GLOG_v=1 log of deepseek3: EmbeddingInfo's candidates
    # ((1), (2, 4)), ((1), (4, 2)), ((1), (8, 1)) give the Reshape after it the input layouts [2, 4] / [4, 2]
    # tensor map [1, 0] and [8] tensor map [0, -1], dim 0 split by the vocabulary's devices)
    gather = GatherAxis("v", (), 2, 0, i[0]) if len(i) == 1 else ()
    return dataclasses.replace(rule, split_uses_all=frozenset({"v"}), gather_axis=gather,
                               must_split=frozenset({"v"}) if len(i) == 1 else frozenset())


def embedding_lookup_rule(op: Op) -> FactorRule:
    """EmbeddingLookup(params, indices, offset): Gather on axis 0 (params first)."""
    p, i = _shape(op, 0), _shape(op, 1)
    fp = _letters(len(p), "p")
    fi = _letters(len(i), "i")
    return _rule(op, fp + fi, [fp, fi], [fi + fp[1:]], [0, 1])


def outer_rule(op: Op) -> FactorRule:
    """Outer(x[M], y[N]) -> [M, N]: a configured strategy splits both freely (checked: ``((2,), (4,))``), but
    MindSpore generates only equal splits: OuterInfo is an ArithmeticBase, whose broadcast generation aligns the
    two 1-D inputs as one dimension, while its device matrix is ``[m, n]``. On 8 devices: ``((1,), (1,))`` and
    ``((2,), (2,))``; ``((4,), (4,))`` needs 16 devices (measured: qwen3_moe's rotary table, MindSpore's INFO log)."""
    r = _rule(op, ["m", "n"], [["m"], ["n"]], [["m", "n"]], [0, 1])
    return FactorRule(**{**r.__dict__, "tied": ("m", "n")})


def split_axis_rule(op: Op) -> FactorRule:
    """Split/SplitV/SplitWithSize/SplitTensor/SplitWithSizeView: the split axis cannot be split,
    every output follows the input's other dims."""
    x = _shape(op, 0)
    if op.type in ("Split", "SplitV"):
        axis = _axis_arg(op, 1, "axis", 0) if op.type == "Split" else op.attrs.get("split_dim", _const(op, 2, 0))
    else:   # SplitWithSize(x, sizes, dim), SplitTensor(x, size, dim)
        axis = _const(op, 2, 0)
    return axes_unsplit(op, (_int(axis, 0) % len(x),))


def stack_rule(op: Op) -> FactorRule:
    """Stack/StackExt(tensors, axis): all inputs share every factor; the new axis is not split."""
    slots = _tslots(op)
    out = _out_shapes(op)[0]
    axis = _int(op.attrs.get("axis", _const(op, len(op.inputs) - 1, 0)), 0) % len(out)
    f = _letters(len(out))
    fin = [g for i, g in enumerate(f) if i != axis]
    outf = [None if i == axis else g for i, g in enumerate(f)]
    return _rule(op, fin, [fin] * len(slots), [outf], slots)


def broadcast_to_rule(op: Op) -> FactorRule:
    """BroadcastTo(x, shape): x's dims that are not broadcast carry the output's factors."""
    x = _shape(op, 0)
    out = _out_shapes(op)[0]
    f = _letters(len(out))
    off = len(out) - len(x)
    ins = [None if (n == 1 and out[off + i] != 1) else f[off + i] for i, n in enumerate(x)]
    used = {g for g in ins if g}
    return _rule(op, f, [ins], [[g if g in used else None for g in f]], [0])


def slice_rule(op: Op) -> FactorRule:
    """Slice(x, begin, size) / SliceExt(x, dim, start, end, step): only dims taken whole may be split."""
    x = _shape(op, 0)
    out = _out_shapes(op)[0]
    f = _letters(len(x))
    cut = [g for g, a, b in zip(f, x, out) if a != b]
    return _rule(op, f, [f], [[g if a == b else None for g, a, b in zip(f, x, out)]], [0], unsplittable=cut)


def _bits(mask, n):
    mask = int(mask or 0)
    return [bool(mask >> i & 1) for i in range(n)]


def strided_slice_rule(op: Op) -> FactorRule:
    """StridedSlice(x, begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
    shrink_axis_mask): the strategy is over x's dims; only dims taken whole (begin 0, end >= size,
    stride 1, or masked) may be split. ``new_axis_mask`` inserts unsplit output dims and
    ``shrink_axis_mask`` removes dims (they are sliced to 1: unsplit). Checked: shrink ``((1, 8),)``
    and new-axis ``((2, 4),)`` taken, a partly sliced dim refused."""
    x = _shape(op, 0)
    out = _out_shapes(op)[0]
    begin, end, strides = (tuple(_const(op, k, ()) or ()) for k in (1, 2, 3))
    bm, em, ellipsis, newm, shrink = (_const(op, k, op.attrs.get(a, 0)) for k, a in
                                      ((4, "begin_mask"), (5, "end_mask"), (6, "ellipsis_mask"),
                                       (7, "new_axis_mask"), (8, "shrink_axis_mask")))
    if int(ellipsis or 0):
        return unknown_rule(op)
    f = _letters(len(x))
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
    return _rule(op, f, [f], [out_f], [0], unsplittable=sorted(sliced))


def pad_rule(op: Op) -> FactorRule:
    """PadV3(x, paddings, mode, value): padded dims cannot be split (output size differs)."""
    x = _shape(op, 0)
    out = _out_shapes(op)[0]
    f = _letters(len(x))
    cut = [g for g, a, b in zip(f, x, out) if a != b]
    return _rule(op, f, [f], [[g if a == b else None for g, a, b in zip(f, x, out)]], [0], unsplittable=cut)


def tril_rule(op: Op) -> FactorRule:
    """Tril/Triu(x, diagonal): one strategy input, every dim splittable, generated strategies included
    (MindSpore's TrilInfo/TriuInfo rewrite ``diagonal`` per rank from its row/column slice, GetDiag); only
    ranks 2 to 6 have a strategy (TrilInfo::CheckStrategy)."""
    if not 2 <= len(_shape(op, _tslots(op)[0])) <= 6:
        return unknown_rule(op)
    return elementwise(op, _tslots(op)[:1])


def onehot_rule(op: Op) -> FactorRule:
    """OneHot(indices, depth, on, off) / OneHotExt(tensor, num_classes, on, off): MindSpore reads
    the first strategy row against the OUTPUT (indices' dims + depth), and depth may be split
    (checked: ``((2, 4), (), ())``); on/off (0-d tensors) take ``()``; depth is a Python int, not a
    strategy input. The row is the rule's ``rows`` (:attr:`FactorRule.strategy_rows`). Indices of rank > 1
    split their first dimension only ("When input dimension is > 1, axis must be -1, and strategy must be
    data parallel", OneHotInfo::CheckStrategy; measured: ``((1, 8, 1), (), ())`` on ``[1, 262144]`` indices
    refused, ``((8, 1, 1), (), ())`` on ``[8, 32768]`` taken)."""
    i = _shape(op, 0)
    fi = _letters(len(i), "i")
    slots = [0] + [s for s in _tslots(op)[1:]]
    outs = [fi + ["c"] if len(o) == len(fi) + 1 else [None] * len(o) for o in _out_shapes(op)]
    r = _rule(op, fi + ["c"], [fi] + [[None] * len(_shape(op, s)) for s in slots[1:]], outs, slots,
              unsplittable=fi[1:] + ["c"] if len(i) > 1 else [])
    return FactorRule(**{**r.__dict__, "rows": (tuple(fi + ["c"]),) + r.inputs[1:],
                         "row_shapes": (r.output_shapes[0],) + r.input_shapes[1:]})


# --------------------------------------------------------------------------------------
# norms


def layer_norm_v3_rule(op: Op) -> FactorRule:
    x = _shape(op, 0)
    axis = _int(_const(op, 3, op.attrs.get("begin_norm_axis", -1)), -1)
    return norm_rule(op, axis % len(x))


def batch_norm_rule(op: Op) -> FactorRule:
    """BatchNorm(x[N, C, ...], scale, bias, mean, variance): N, C and the spatial dims split; the
    four [C] inputs follow C. Training statistics over a split N/H/W are combined by MindSpore
    (SyncBatchNorm-style AllReduce) -- they are reduction-like but the output is not partial."""
    x = _shape(op, 0)
    f = _letters(len(x))
    slots = _tslots(op)
    ins = [f] + [[f[1]] if len(_shape(op, s)) == 1 else [None] * len(_shape(op, s)) for s in slots[1:]]
    outs = [f if tuple(o) == tuple(x) else ([f[1]] if len(o) == 1 else [None] * len(o)) for o in _out_shapes(op)]
    return _rule(op, f, ins, outs, slots)


def group_norm_rule(op: Op) -> FactorRule:
    """GroupNorm(x[N, C, ...], num_groups, gamma, beta, eps): only N splits."""
    x = _shape(op, 0)
    f = _letters(len(x))
    slots = _tslots(op)
    ins = [f] + [[None] * len(_shape(op, s)) for s in slots[1:]]
    outs = [[f[0]] + [None] * (len(o) - 1) if o else [] for o in _out_shapes(op)]
    return _rule(op, f, ins, outs, slots, unsplittable=f[1:])


# --------------------------------------------------------------------------------------
# convolution and pooling (NCHW)


def _pair(v, default=1):
    if v is None:
        return (default, default)
    if isinstance(v, int):
        return (v, v)
    v = tuple(v)
    return v[-2:] if len(v) >= 2 else (v[0], v[0])


def _spatial_ok(k, s, pad_mode, d=1) -> bool:
    """A spatial dim may be split when windows do not straddle slices (kernel <= stride) or, with
    'same'/'pad' padding and stride 1, by MindSpore's halo exchange (checked: Conv2D k3 s1 'same'
    H split taken, 'valid' refused; MaxPool k2 s2 taken, k3 s2 refused)."""
    ke = (k - 1) * d + 1
    if ke <= s:
        return True
    return str(pad_mode).lower() in ("same", "pad", "1", "0") and s == 1 and ke % 2 == 1


def conv2d_rule(op: Op) -> FactorRule:
    """Conv2D(x[N,C,H,W], w[O,C/g,kh,kw]): N and O split freely, C is the reduction factor, H/W
    split when :func:`_spatial_ok` (checked: ``((2, 2, 2, 1), (1, 2, 1, 1))`` taken)."""
    a = op.attrs
    k = _pair(a.get("kernel_size"), _shape(op, 1)[-1] if len(_shape(op, 1)) == 4 else 1)
    s = _pair(a.get("stride"), 1)
    d = _pair(a.get("dilation"), 1)
    pm = a.get("pad_mode", "valid")
    group = int(a.get("group", 1) or 1)
    uns = [n for n, kk, ss, dd in zip(("h", "w"), k, s, d) if not _spatial_ok(kk, ss, pm, dd)]
    if group != 1:
        uns += ["c"]
    return _conv_candidates(_rule(op, ["n", "c", "o", "h", "w"], [["n", "c", "h", "w"], ["o", "c", None, None]],
                                  [["n", "o", "h", "w"]], [0, 1], unsplittable=uns))


def _conv_candidates(r: FactorRule) -> FactorRule:
    """Conv2DInfo::GenerateOpStrategies searches (N, C-in, H, W, C-out) with C-out unsplittable ("simply avoid
    redistribution"; measured: a ResNet-50 3x3 conv's 10 candidates on 8 devices split N and C-in only). A
    configured strategy may still split the output channels."""
    return FactorRule(**{**r.__dict__, "cand_sizes": tuple(r.cand_sizes) + (("o", 1),)})


def conv2d_transpose_rule(op: Op) -> FactorRule:
    """Conv2DTranspose / Conv2DBackpropInput(dout[N,Cin,H,W], w[Cin,Cout,kh,kw], input_size):
    N and Cout split freely, Cin is the reduction factor (checked: ``((2, 2, 1, 1), (2, 1, 1, 1))``).
    H/W split as ``Conv2DBackpropInputInfo::CheckHWStrategy`` allows, whatever the kernel (a halo exchange
    follows): pad mode 'same' only, the dim's input times its stride equal to its output, and the split dividing
    both (CheckHWStrategyBase). Measured: k4 s2 'same' [32,8,32,32] -> [32,16,64,64] takes ``((1,1,1,8),(1,1,1,1))``
    backward from a ReLU so split (MindSpore's UT test_sharding_propagation_1x1x1x8)."""
    a = op.attrs
    s = _pair(a.get("stride"), 1)
    x, out = _shape(op, 0), (_out_shapes(op) or ((),))[0]
    uns, sizes = ["h", "w"], []
    if len(x) == 4 and len(out) == 4 and str(a.get("pad_mode", "valid")).lower() in ("same", "1"):
        for i, name in ((2, "h"), (3, "w")):
            if x[i] * s[i - 2] == out[i] and math.gcd(x[i], out[i]) > 1:
                uns.remove(name)
                sizes.append((name, math.gcd(x[i], out[i])))
    return _conv_candidates(_rule(op, ["n", "c", "o", "h", "w"], [["n", "c", "h", "w"], ["c", "o", None, None]],
                                  [["n", "o", "h", "w"]], [0, 1], unsplittable=uns, sizes=sizes))


def pool_rule(op: Op) -> FactorRule:
    """MaxPool/AvgPool(x[N,C,H,W]): N, C split freely; H/W only when windows do not overlap
    (checked: k2 s2 H split taken; k3 s2 'same' refused)."""
    a = op.attrs
    k = _pair(a.get("kernel_size", a.get("ksize")), 1)
    s = _pair(a.get("strides", a.get("stride")), 1)
    x = _shape(op, 0)
    f = _letters(len(x))
    if len(x) != 4:
        return _rule(op, f, [f], [f], [0], unsplittable=f[2:])
    uns = [g for g, kk, ss in zip(f[2:], k, s) if kk > ss]
    outs = [[f[0], f[1], f[2], f[3]] if len(o) == 4 else [None] * len(o) for o in _out_shapes(op)]
    return _rule(op, f, [f], outs, [0], unsplittable=uns)


# --------------------------------------------------------------------------------------
# matmul-like


def dense_rule(op: Op) -> FactorRule:
    """Dense(x[..., K], w[N, K], b[N]) has no OperatorInfo in MindSpore 2.9: it runs as
    BatchParallelInfo (checked: strategy ``((8, 1), (1, 1), (1,))`` and a configured strategy is
    refused) -- see :func:`batch_parallel_rule`."""
    return batch_parallel_rule(op)


def grouped_matmul_rule(op: Op) -> FactorRule:
    """GroupedMatmul(x[(bs,) M, K], w[(E,) K, N], bias[(E,) N], scale..., group_list) (MindSpore's
    GroupedMatmulInfo: dev matrix [(bs,) M, K, N]): x's dims all split (tokens ``m`` too), the expert
    dim E of w never, K is the reduction factor (forward AllReduce), N splits w, bias, the 1-D/2-D
    quant inputs (last dim) and the output; group_list is whole."""
    slots = _tslots(op)
    xs = _shape(op, slots[0])
    ws = _shape(op, slots[1]) if len(slots) > 1 else ()
    if len(xs) not in (2, 3) or len(ws) not in (2, 3):
        return unknown_rule(op)
    fx = (["bs"] if len(xs) == 3 else []) + ["m", "k"]
    fw = ([None] if len(ws) == 3 else []) + ["k", "n"]
    ins = [fx, fw]
    for s in slots[2:]:
        shp = _shape(op, s)
        n = ws[-1]
        if shp and shp[-1] == n and len(shp) <= 2 and op.inputs[s].spec.dtype not in ("int64", "int32"):
            ins.append([None] * (len(shp) - 1) + ["n"])
        else:
            ins.append([None] * len(shp))
    outs = [fx[:-1] + ["n"] if len(o) == len(xs) else [None] * len(o) for o in _out_shapes(op)]
    return _rule(op, [f for f in fx if f != "k"] + ["k", "n"], ins, outs, slots)


def morph_ffn_rule(op: Op) -> FactorRule:
    """strategist's own ``MorphFFN`` (:mod:`strategist.frontend.mf_morph`: MindFormers' MoE dispatcher + experts Morph
    as one device-local operator): one token factor ``n`` on every activation's token dimension and the
    output's. The expert weights are whole, as MindSpore's GroupedMatmulInfo never splits their expert
    dimension: an expert factor priced as a partial output would let propagation take the dp axis for
    experts (an ep the mesh does not have) to save their gradients' AllReduce."""
    slots = _tslots(op)
    dims = op.attrs.get("strategist_token_dims", ())
    ins = []
    for k, s in enumerate(slots):
        row = [None] * len(_shape(op, s))
        if k < len(dims) and dims[k] is not None:
            row[dims[k]] = "n"
        ins.append(row)
    outs = [[None] * (len(o) - 2) + ["n", None] for o in _out_shapes(op)]
    return _rule(op, ["n"], ins, outs, slots)


def tensor_dot_rule(op: Op) -> FactorRule:
    """TensorDot(a, b, axes) with integer axes n: the last n dims of a contract with the first n of b."""
    a, b = _shape(op, 0), _shape(op, 1)
    n = _const(op, 2, op.attrs.get("axes", 1))
    if not isinstance(n, int):
        return unknown_rule(op)
    fa = _letters(len(a) - n, "a") + _letters(n, "k")
    fb = _letters(n, "k") + _letters(len(b) - n, "b")
    return _rule(op, fa + fb[n:], [fa, fb], [fa[:len(a) - n] + fb[n:]], [0, 1])


# --------------------------------------------------------------------------------------
# losses


def l2_loss_rule(op: Op) -> FactorRule:
    return all_reduce_rule(op)


def kldiv_rule(op: Op) -> FactorRule:
    """KLDivLoss(logits, labels, reduction): element-wise, reduced to a scalar unless 'none'."""
    x = _shape(op, 0)
    f = _letters(len(x))
    outs = [f if tuple(o) == tuple(x) else [None] * len(o) for o in _out_shapes(op)]
    return _rule(op, f, [f, f], outs, [0, 1])


# --------------------------------------------------------------------------------------
# other


def identity_rule(op: Op) -> FactorRule:
    """Identity-like (TensorMove, Identity, Depend-free copies, AShardIdentity): output = input. Its input may be a
    constant tensor (``mindspore.reshard(self.y, layout)`` on a Tensor attribute: MindSpore's AShardIdentity of it
    takes the layout, 2.9.0's UT ``ReshardTail``)."""
    return elementwise(op, _tslots(op)[:1])


def assign_rule(op: Op) -> FactorRule:
    """Assign/AssignAdd/AssignSub(param, value): same-shape element-wise (checked: AssignAdd)."""
    return tensor_elementwise(op)


# --------------------------------------------------------------------------------------
# the registry

UNARY = """ACos Acosh Asin Asinh Atan Atanh Ceil Cos Cosh Expm1 Log1p Sinh Tan Inv Invert Rint Trunc
Erfc Erfinv BesselI0 BesselI0e BesselI1 BesselI1e BesselJ0 BesselJ1 Lgamma Mish SeLU SoftShrink
HShrink Softsign PopulationCount NanToNum EluExt LeakyReLUExt SoftplusExt ClampScalar Elu Softplus
ReLU ReLU6 GeLU FastGeLU SiLU Sigmoid Tanh Exp Log Sqrt Rsqrt Neg Abs Square Reciprocal Erf Sin Round
Floor Ceil Sign IsFinite LogicalNot ZerosLike OnesLike Cast Mish HSigmoid HSwish""".split()

#: ArithmeticBase primitives whose inputs are tensor-typed: a Python scalar operand is converted to a
#: 0-d tensor and IS a strategy input (checked: ``Add(x, 2.0)`` takes ``((2, 4), ())``, refuses ``((2, 4),)``)
BINARY = """Add Sub Mul Div RealDiv FloorDiv FloorMod Mod DivNoNan MulNoNan TruncateDiv TruncateMod
Maximum Minimum Pow Equal NotEqual Less LessEqual Greater GreaterEqual ApproximateEqual LogicalAnd
LogicalOr BitwiseAnd BitwiseOr BitwiseXor Atan2 Hypot Igamma Igammac LeftShift RightShift NextAfter Zeta
Gcd Xdivy Xlogy SquaredDifference Polar Select AddN SigmoidCrossEntropyWithLogits""".split()

#: element-wise primitives with scalar-typed extra inputs (``alpha``, a float ``weight``/``value``,
#: tolerances): only the tensor inputs are strategy inputs (checked: ``AddExt`` takes ``((2, 4), (2, 4))``)
TENSOR_BINARY = """AddExt SubExt FmodTensor RemainderTensorTensor IsClose Lerp MaskedFill AddcmulExt
InplaceAdd InplaceSub InplaceAddExt InplaceSubExt InplaceMul InplaceDiv InplaceFloorDivide InplaceCopy
InplaceUpdate""".split()

SCALAR_ARITH = """Muls FmodScalar RemainderTensorScalar RemainderScalarTensor InplaceMuls InplaceDivs
InplaceAddsExt InplaceSubScalar InplaceFloorDivides""".split()

def max_dim_rule(op: Op) -> FactorRule:
    """MaxDim/MinDim(x, dim, keepdim) -> (values, indices): unlike ArgMaxWithValue, MindSpore refuses
    a split of ``dim`` (checked: ``((2, 4),)`` refused, ``((8, 1),)`` taken, dim 1)."""
    x = _shape(op, 0)
    axis = _int(_const(op, 1, -1), -1) % len(x)
    keep = bool(_const(op, 2, False))
    f = _letters(len(x))
    out = [None if i == axis else g for i, g in enumerate(f)] if keep else [g for i, g in enumerate(f) if i != axis]
    outs = [out if len(o) == len(out) else [None] * len(o) for o in _out_shapes(op)]
    return _rule(op, f, [f], outs, [0], unsplittable=[f[axis]])


# --------------------------------------------------------------------------------------
# the long tail of the registry


def _dims_arg(op: Op, slot: int, rank: int, default_all: bool = True):
    v = _const(op, slot, None)
    if v is None:
        return tuple(range(rank)) if default_all else ()
    return _axes(v, rank)


def fft_rule(op: Op) -> FactorRule:
    """FFT family (FFTBase): the transformed dims cannot be split. FFT/IFFT/RFFT/IRFFT/HFFT/IHFFT/
    DCT/IDCT(x, n, dim, norm) transform ``dim`` (default -1); the 2-D/N-D forms (x, s, dim, norm)
    a tuple (default: the last 2 / all); FFTShift/IFFTShift(x, dim)."""
    x = _shape(op, 0)
    t = op.type
    if t in ("FFTShift", "IFFTShift"):
        axes = _dims_arg(op, 1, len(x))
    elif t.endswith("2"):
        v = _const(op, 2, None)
        axes = _axes(v, len(x)) if v is not None else (len(x) - 2, len(x) - 1)
    elif t.endswith("N"):
        axes = _dims_arg(op, 2, len(x))
    else:
        axes = ((_int(_const(op, 2, -1), -1)) % len(x),)
    return axes_unsplit(op, axes)


#: MindSpore's ScatterMathOpsInfo (scatter_math_ops_info.cc): these split the input's first dimension too
SCATTER_MATH = frozenset(("ScatterAdd", "ScatterSub", "ScatterMul", "ScatterDiv"))


def scatter_rule(op: Op) -> FactorRule:
    """ScatterUpdate/ScatterAdd/...(input, indices, updates): the indices are not split; updates' trailing
    dims follow input's other dims. ScatterUpdate/ScatterMax/ScatterMin (ScatterOpsInfo) refuse a split of
    input's first dim; ScatterAdd/Sub/Mul/Div (ScatterMathOpsInfo) take it -- each device masks the indices
    outside its rows (the replace graph's Sub/ReLU/Minimum/Equal mask) -- and generate it
    (GenerateOpStrategies enumerates all of input's dims; measured: [96,64,128] on 24 devices lists
    ``((3, 1, 1), (1, 1), (1, 1, 1, 1))`` first and takes ``((3, 2, 4), (1, 1), (1, 1, 2, 4))``)."""
    x, i, u = _shape(op, 0), _shape(op, 1), _shape(op, 2)
    f = _letters(len(x))
    fu = [None] * len(i) + f[1:]
    if len(fu) != len(u):
        return unknown_rule(op)
    return _rule(op, f, [f, [None] * len(i), fu], [f if len(o) == len(x) else [None] * len(o) for o in _out_shapes(op)],
                 [0, 1, 2], unsplittable=[] if op.type in SCATTER_MATH else [f[0]])


def scatter_nd_rule(op: Op) -> FactorRule:
    """ScatterNd*/TensorScatter*(input, indices[..., k], updates): input's first k dims and the
    indices are not split; updates' trailing dims follow input's dims after k."""
    x, i, u = _shape(op, 0), _shape(op, 1), _shape(op, 2)
    k = i[-1] if i else 1
    f = _letters(len(x))
    fu = [None] * (len(i) - 1) + f[k:]
    if len(fu) != len(u):
        return unknown_rule(op)
    return _rule(op, f, [f, [None] * len(i), fu], [f if len(o) == len(x) else [None] * len(o) for o in _out_shapes(op)],
                 [0, 1, 2], unsplittable=f[:k])


def unsorted_segment_rule(op: Op) -> FactorRule:
    """UnsortedSegmentSum/Min/Max/Prod(x, segment_ids, num_segments): segment_ids covers x's leading
    dims; splitting them leaves partial results the operator reduces (sum/min/max/prod); out =
    [num_segments] + x's other dims."""
    x, ids = _shape(op, 0), _shape(op, 1)
    f = _letters(len(x))
    kind = {"UnsortedSegmentMin": "min", "UnsortedSegmentMax": "max", "UnsortedSegmentProd": "prod"}.get(op.type, "sum")
    return _rule(op, f, [f, f[:len(ids)]], [[None] + f[len(ids):]], [0, 1], reduce=kind)


def gather_nd_rule(op: Op) -> FactorRule:
    """GatherNd(x, indices[..., k]): indices' batch dims split the output's leading dims; x is not
    split on its first k dims; x's remaining dims follow the output's trailing dims."""
    x, i = _shape(op, 0), _shape(op, 1)
    k = i[-1] if i else 1
    fx = _letters(len(x), "x")
    fi = _letters(len(i) - 1, "i")
    return _rule(op, fx + fi, [fx, fi + [None]], [fi + fx[k:]], [0, 1], unsplittable=fx[:k])


def sparse_gather_rule(op: Op) -> FactorRule:
    from .ops import gather_rule
    return gather_rule(op)


def no_input_rule(op: Op) -> FactorRule:
    """Generators (Range, LinSpace, StandardNormal, UniformReal, FillV2, GetNext, ...): no tensor
    strategy input here; the output is replicated."""
    slots = _tslots(op)
    return _rule(op, [], [[None] * len(_shape(op, s)) for s in slots], [[None] * len(o) for o in _out_shapes(op)], slots)


def unique_rule(op: Op) -> FactorRule:
    return axes_unsplit(op, tuple(range(_first_tensor_rank(op))))


def index_add_rule(op: Op) -> FactorRule:
    """IndexAddExt(x, dim, index, source, alpha): ``dim`` and the index are not split; x, source and
    the output share the other dims."""
    x = _shape(op, 0)
    dim = _int(_const(op, 1, 0), 0) % len(x)
    f = _letters(len(x))
    return _rule(op, f, [f, [None] * len(_shape(op, 2)), f], [f], [0, 2, 3], unsplittable=[f[dim]])


def _conv_spatial_units(n_in, n_out, ke, s, pad_mode, pads) -> int:
    """Conv2DInfo::CheckHWStrategy for one spatial dim (ke: the dilated kernel, pads: its two pads): the
    largest unit count a split of it must divide (1: unsplittable). Every condition is "the split divides X",
    so this is their gcd: the input and the output (CheckHWStrategyBase), and by pad mode (0 'pad', 1 'same',
    2 'valid'): 'pad'/'same' (CheckHWStrategyPadModeByDimension, after AdjustPadList trims the 'pad' mode's
    bottom pad by (in + pad_all - k) % s): k <= s wants no padding and a slice divisible by s; k > s wants
    (in + pad_all - k) % s == 0 and the split to divide out * s - in (the halo exchange); 'valid'
    (CheckHWStrategyValidMode): k <= s and a slice divisible by s."""
    pm = {"pad": 0, "same": 1, "valid": 2}.get(str(pad_mode).lower(), pad_mode)
    try:
        pm = int(pm)
    except (TypeError, ValueError):
        return 1
    units = math.gcd(n_in, n_out)
    p0, p1 = pads
    if pm == 0:
        useless = (n_in + p0 + p1 - ke) % s
        if useless > p1:            # AdjustPadList raises
            return 1
        p1 -= useless
    if pm in (0, 1):
        if ke <= s:
            return 1 if p0 + p1 or n_in % s else math.gcd(units, n_in // s)
        if (n_in + p0 + p1 - ke) % s:
            return 1
        return math.gcd(units, abs(n_out * s - n_in))
    if pm == 2 and ke <= s and n_in % s == 0:
        return math.gcd(units, n_in // s)
    return 1


def _triple(v, default=1):
    if v is None:
        return (default,) * 3
    if isinstance(v, int):
        return (v,) * 3
    v = tuple(v)
    return v[-3:] if len(v) >= 3 else (v[0],) * 3


def conv3d_rule(op: Op) -> FactorRule:
    """Conv3D(x[N,C,D,H,W], w[O,C,kd,kh,kw]) (Conv3DInfo, a Conv2DInfo): N and O split, C is the reduction
    factor; D and H split as Conv2D's H and W (Conv2DInfo::CheckHWStrategy on dims 2 and 3, see
    :func:`_conv_spatial_units`), W never (Conv3DInfo::CheckStrategy). The candidates search (N, C-in, D, H)
    with C-out whole, as Conv2D's (measured: k3 s2 'pad' 1 on [2,16,56,56,24] lists 28 candidates, D/H up to
    4 as the output's 28 refuses 8, and takes ``((1, 1, 2, 4, 1), (1, 1, 1, 1, 1))`` after a Neg so split).
    Convolution keeps its spatial dims whole."""
    x = _shape(op, 0)
    sp = _letters(len(x) - 2, "s")
    w = _shape(op, 1)
    slots = [0, 1]
    uns, sizes = list(sp), []
    a = op.attrs
    if op.type == "Conv3D" and len(x) == 5 and len(w) == 5:
        out = _out_shapes(op)[0]
        k = _triple(a.get("kernel_size"))
        s = _triple(a.get("strides", a.get("stride")))
        d = _triple(a.get("dilations", a.get("dilation")))
        pads = a.get("pad_list") or a.get("pad") or 0
        pads = (pads,) * 6 if isinstance(pads, int) else tuple(pads) * (6 if len(tuple(pads)) == 1 else 1)
        for i in (0, 1):            # D and H
            u = _conv_spatial_units(x[2 + i], out[2 + i], (k[i] - 1) * d[i] + 1, s[i], a.get("pad_mode", "valid"),
                                    pads[2 * i:2 * i + 2])
            if u > 1:
                uns.remove(sp[i])
                sizes.append((sp[i], u))
        if int(a.get("group", 1) or 1) != 1:
            uns.append("c")
    return _conv_candidates(_rule(op, ["n", "c", "o"] + sp, [["n", "c"] + sp, ["o", "c"] + [None] * (len(w) - 2)],
                                  [["n", "o"] + sp], slots, unsplittable=uns, sizes=sizes))


def pool3d_rule(op: Op) -> FactorRule:
    x = _shape(op, 0)
    f = _letters(len(x))
    return _rule(op, f, [f], [f if len(o) == len(x) else [None] * len(o) for o in _out_shapes(op)], [0],
                 unsplittable=f[2:])


def resize_rule(op: Op) -> FactorRule:
    """ResizeBilinearV2/ResizeNearestNeighbor(x[N,C,H,W], size): N and C split, H/W whole."""
    x = _shape(op, 0)
    f = _letters(len(x))
    return _rule(op, f, [f], [f], [0], unsplittable=f[2:])


def cdist_rule(op: Op) -> FactorRule:
    """Cdist(x1[B,P,M], x2[B,R,M]) -> [B,P,R]: M (the distance's reduction) whole."""
    a, b = _shape(op, 0), _shape(op, 1)
    nb = len(a) - 2
    bf = _letters(nb, "b")
    return _rule(op, bf + ["p", "r", "m"], [bf + ["p", "m"], bf + ["r", "m"]], [bf + ["p", "r"]], [0, 1],
                 unsplittable=["m"])


def cross_entropy_rule(op: Op) -> FactorRule:
    """CrossEntropyLoss(input[N, C], target[N], weight[C], ...): N splits, C whole."""
    slots = _tslots(op)
    x = _shape(op, slots[0])
    f = ["n", "c"][:len(x)]
    ins = [f] + [(["n"] if len(_shape(op, s)) == 1 and _shape(op, s)[0] == x[0] else [None] * len(_shape(op, s)))
                 for s in slots[1:]]
    outs = [["n"] if len(o) == 1 and o[0] == x[0] else [None] * len(o) for o in _out_shapes(op)]
    return _rule(op, f, ins, outs, slots, unsplittable=["c"])


def last2_rule(op: Op) -> FactorRule:
    """Cholesky/SolveTriangular: the matrix dims are whole; batch dims split."""
    slots = _tslots(op)
    x = _shape(op, slots[0])
    nb = max(len(x) - 2, 0)
    bf = _letters(nb, "b")
    ins = []
    for s in slots:
        shp = _shape(op, s)
        ins.append(bf[nb - min(nb, len(shp) - 2):] + [None] * min(2, len(shp)) if len(shp) >= 2 else [None] * len(shp))
    outs = [bf[nb - min(nb, max(len(o) - 2, 0)):] + [None] * min(2, len(o)) if len(o) >= 2 else
            (bf[:len(o)] if len(o) <= nb else [None] * len(o)) for o in _out_shapes(op)]
    return _rule(op, bf, ins, outs, slots)


def lstsq_v2_rule(op: Op) -> FactorRule:
    """LstsqV2(a [*batch, M, N], b [*batch, M] or [*batch, M, K], driver): the batch dims split, the matrix dims
    whole; b is a vector per batch when its rank is a's less one (UT test_lstsqv2: a [2, 4, 2], b [2, 4] takes
    ((2, 1, 1), (2, 1)) in semi_auto, and MindSpore's training compile propagates it with nothing configured; the
    compile as built fails in MindSpore 2.9.0 itself). Outputs: their leading dims that are the batch's."""
    slots = _tslots(op)
    x = _shape(op, slots[0])
    nb = max(len(x) - 2, 0)
    bf = _letters(nb, "b")
    ins = [bf + [None] * (len(x) - nb)]
    for s in slots[1:]:
        shp = _shape(op, s)
        k = max(0, min(nb, len(shp) - (1 if len(shp) == len(x) - 1 else 2)))
        ins.append(bf[nb - k:] + [None] * (len(shp) - k))
    outs = []
    for o in _out_shapes(op):
        k = 0
        while k < min(nb, len(o)) and o[k] == x[k]:
            k += 1
        outs.append(bf[:k] + [None] * (len(o) - k))
    r = _rule(op, bf, ins, outs, slots)
    if nb == 1:
        # its one generated strategy splits every input's batch over all devices (MindSpore 2.9.0's INFO log:
        # "LstsqV2Info11: Successfully generated the 1st strategy: [[2, 1, 1], [2, 1]]", nothing else), as a
        # BatchParallelInfo with every input's split flag set; more batch dims are not measured
        r = FactorRule(**{**r.__dict__, "batch_parallel": True, "batch_info": True})
    return r


def trace_v2_rule(op: Op) -> FactorRule:
    """TraceV2(x, offset, axis1, axis2): the diagonal's two axes whole, the other dims split and kept, in order, by
    the output (TraceV2Info; MindSpore 2.9.0 generates [[1, 1, 1]], [[2, 1, 1]] for x [2, 3, 3] on axes -2, -1)."""
    rank = len(_shape(op, _tslots(op)[0]))
    a1, a2 = _int(_const(op, 2, -2), -2), _int(_const(op, 3, -1), -1)
    return axes_unsplit(op, (a1 % rank, a2 % rank), reduce_out=True, keep=False)


def repeat_interleave_rule(op: Op) -> FactorRule:
    x = _shape(op, 0)
    dim = _const(op, 2, None)
    return axes_unsplit(op, (_int(dim, 0) % len(x),) if dim is not None else tuple(range(len(x))))


def quant_matmul_rule(op: Op) -> FactorRule:
    """QuantBatchMatmul/WeightQuantBatchMatmul(x1, x2, scale/antiquant..., bias...): MatMul on the
    first two inputs (transpose flags from attrs); the other tensors follow ``j`` when they have
    the output's last size, else whole."""
    from .ops import matmul_rule
    slots = _tslots(op)
    a, b = _shape(op, slots[0]), _shape(op, slots[1])
    ta = bool(op.attrs.get("transpose_x1", op.attrs.get("transpose_x", False)))
    tb = bool(op.attrs.get("transpose_x2", op.attrs.get("transpose_weight", False)))
    nb = max(len(a), len(b)) - 2
    batch = _letters(nb, "b")
    fa = batch[nb - (len(a) - 2):] + (["k", "i"] if ta else ["i", "k"])
    fb = batch[nb - (len(b) - 2):] + (["j", "k"] if tb else ["k", "j"])
    out = _out_shapes(op)[0]
    n = out[-1] if out else 0
    ins = [fa, fb] + [(["j"] if _shape(op, s) == (n,) else [None] * len(_shape(op, s))) for s in slots[2:]]
    return _rule(op, batch + ["i", "k", "j"], ins, [batch + ["i", "j"]], slots)


def rotary_rule(op: Op) -> FactorRule:
    """RotaryPositionEmbedding(x[B,N,S,D], cos, sin, mode) / ApplyRotaryPosEmb(q, k, cos, sin, ...):
    the head dim D is whole; the other dims of q/k split; cos/sin follow the dims they share by size."""
    slots = _tslots(op)
    x = _shape(op, slots[0])
    f = _letters(len(x))
    if op.type == "ApplyRotaryPosEmb" and len(x) == 4:
        # ApplyRotaryPosEmbInfo (4-D): q/k (dp, 1, mp, 1), their batch and heads equal; seq and head_dim whole; the
        # cos/sin rows are checked to be 1 on dims 0 and 1 (the configured (1, 1, 1, 1)); position_ids whole.
        # (Their tensor map {0, -1, -1, -1} lays cos/sin out split by the batch's axis: not modelled here.)
        ins = [list(f) if len(_shape(op, s)) == 4 and k < 2 else [None] * len(_shape(op, s))
               for k, s in enumerate(slots)]
        outs = [f if len(o) == len(x) else [None] * len(o) for o in _out_shapes(op)]
        return _rule(op, f, ins, outs, slots, unsplittable=[f[1], f[3]])
    ins = []
    for s in slots:
        shp = _shape(op, s)
        if len(shp) == len(x):
            ins.append([g if n == x[i] and n != 1 else None for i, (g, n) in enumerate(zip(f, shp))])
        else:
            ins.append([None] * len(shp))
    outs = [f if len(o) == len(x) else [None] * len(o) for o in _out_shapes(op)]
    return _rule(op, f, ins, outs, slots, unsplittable=[f[-1]])


def nc_rule(op: Op) -> FactorRule:
    """GridSampler2D(x[N,C,H,W], grid[N,Ho,Wo,2]): N shared, C split, the rest whole."""
    x, g = _shape(op, 0), _shape(op, 1)
    return _rule(op, ["n", "c"], [["n", "c", None, None], ["n", None, None, None][:len(g)]],
                 [["n", "c", None, None]], [0, 1])


def boxes_rule(op: Op) -> FactorRule:
    """BoundingBoxEncode/CheckValid/IOU-style detection ops: the box count splits, coordinates whole."""
    slots = _tslots(op)
    ins, out_f = [], []
    for k, s in enumerate(slots):
        shp = _shape(op, s)
        ins.append([f"n{k}"] + [None] * (len(shp) - 1) if shp else [])
    outs = []
    for o in _out_shapes(op):
        if op.type == "IOU" and len(o) == 2:
            outs.append(["n1", "n0"])
        else:
            outs.append(["n0"] + [None] * (len(o) - 1) if o else [])
    if op.type != "IOU":
        ins = [["n0"] + t[1:] if t and _shape(op, s)[:1] == _shape(op, slots[0])[:1] else [None] * len(t)
               for t, s in zip(ins, slots)]
    factors = sorted({f for t in ins + outs for f in t if f})
    return _rule(op, factors, ins, outs, slots)


def roi_rule(op: Op) -> FactorRule:
    """ROIAlign(features[N,C,H,W], rois[R,5]) / CropAndResize(x[N,H,W,C], boxes, box_index, size):
    only the channel dim is split, shared with the output."""
    x = _shape(op, 0)
    slots = _tslots(op)
    cpos = 1 if op.type == "ROIAlign" else len(x) - 1
    fx = [None] * len(x)
    fx[cpos] = "c"
    ins = [fx] + [[None] * len(_shape(op, s)) for s in slots[1:]]
    outs = []
    for o in _out_shapes(op):
        t = [None] * len(o)
        if len(o) == len(x):
            t[cpos] = "c"
        outs.append(t)
    return _rule(op, ["c"], ins, outs, slots)


NEW: dict[str, Callable[[Op], FactorRule]] = {
    **{t: unary for t in UNARY},
    **{t: elementwise for t in BINARY},
    **{t: tensor_elementwise for t in TENSOR_BINARY},
    **{t: scalar_arith for t in SCALAR_ARITH},
    **{t: assign_rule for t in ("Assign", "AssignAdd", "AssignSub")},
    "PReLU": prelu_rule, "DropoutDoMask": dropout_do_mask_rule,
    **{t: reduce_rule for t in ("ReduceAll", "ReduceAny")},
    "Max": all_reduce_rule, "L2Loss": l2_loss_rule, "SquareSumAll": all_reduce_rule,
    **{t: arg_reduce_rule for t in ("ArgMaxWithValue", "ArgMinWithValue")},
    **{t: max_dim_rule for t in ("MaxDim", "MinDim")},
    "Argmax": argmax_rule, "Argmin": argmax_rule,
    **{t: cum_rule for t in ("CumSum", "CumProd", "Cummax", "Cummin", "CumsumExt")},
    **{t: softmax_like_rule for t in ("L2Normalize", "ReverseV2")},
    "Sort": sort_rule, "SortExt": sort_rule, "TopK": topk_rule, "TopkExt": topk_rule,
    "Swiglu": swiglu_rule, "GatherD": gatherd_rule, "IndexSelect": index_select_rule,
    "Embedding": embedding_rule, "EmbeddingLookup": embedding_lookup_rule, "Outer": outer_rule,
    **{t: split_axis_rule for t in ("SplitV", "SplitWithSize", "SplitTensor", "SplitWithSizeView",
                                    "SplitTensorView")},
    "Stack": stack_rule, "StackExt": stack_rule, "BroadcastTo": broadcast_to_rule,
    "Slice": slice_rule, "SliceExt": slice_rule, "PadV3": pad_rule, "Tril": tril_rule, "Triu": tril_rule,
    "OneHotExt": onehot_rule,
    "LayerNormV3": layer_norm_v3_rule, "BatchNorm": batch_norm_rule, "GroupNorm": group_norm_rule,
    "Conv2DTranspose": conv2d_transpose_rule, "Conv2DBackpropInput": conv2d_transpose_rule,
    "MaxPool": pool_rule, "AvgPool": pool_rule,
    "Dense": dense_rule, "GroupedMatmul": grouped_matmul_rule, "MorphFFN": morph_ffn_rule, "TensorDot": tensor_dot_rule,
    "KLDivLoss": kldiv_rule,
    "TensorMove": identity_rule, "Identity": identity_rule, "AShardIdentity": identity_rule,
    **{t: fft_rule for t in ("FFT IFFT FFT2 IFFT2 FFTN IFFTN RFFT IRFFT RFFT2 IRFFT2 RFFTN IRFFTN HFFT IHFFT "
                             "HFFT2 IHFFT2 HFFTN IHFFTN DCT IDCT DCTN IDCTN FFTShift IFFTShift").split()},
    **{t: scatter_rule for t in ("ScatterUpdate ScatterAdd ScatterSub ScatterMul ScatterDiv ScatterMax "
                                 "ScatterMin").split()},
    **{t: scatter_nd_rule for t in ("ScatterNdUpdate ScatterNdAdd ScatterNdSub TensorScatterUpdate "
                                    "TensorScatterAdd TensorScatterSub TensorScatterMul TensorScatterDiv "
                                    "TensorScatterMax TensorScatterMin").split()},
    **{t: unsorted_segment_rule for t in ("UnsortedSegmentSum", "UnsortedSegmentMin", "UnsortedSegmentMax",
                                          "UnsortedSegmentProd")},
    "GatherNd": gather_nd_rule, "SparseGatherV2": sparse_gather_rule,
    **{t: no_input_rule for t in ("Range Arange LinSpace LinSpaceExt StandardNormal UniformReal FillV2 GetNext "
                                  "Gamma UniformCandidateSampler RandomChoiceWithMask GenerateEodMaskV2 DropoutGenMask").split()},
    "Unique": unique_rule, "IndexAddExt": index_add_rule,
    "Conv3D": conv3d_rule, "Convolution": conv3d_rule, "MaxPool3D": pool3d_rule, "AvgPool3D": pool3d_rule,
    "ResizeBilinearV2": resize_rule, "ResizeNearestNeighbor": resize_rule, "Cdist": cdist_rule,
    "CrossEntropyLoss": cross_entropy_rule,
    **{t: last2_rule for t in ("Cholesky", "SolveTriangular")},
    "LstsqV2": lstsq_v2_rule,
    "TraceV2": trace_v2_rule,
    "RepeatInterleaveInt": repeat_interleave_rule, "RepeatInterleaveTensor": repeat_interleave_rule,
    "QuantBatchMatmul": quant_matmul_rule, "WeightQuantBatchMatmul": quant_matmul_rule,
    "RotaryPositionEmbedding": rotary_rule, "ApplyRotaryPosEmb": rotary_rule,
    "GridSampler2D": nc_rule, "BoundingBoxEncode": boxes_rule, "CheckValid": boxes_rule, "IOU": boxes_rule,
    "ROIAlign": roi_rule, "CropAndResize": roi_rule,
    **{t: tensor_elementwise for t in ("Betainc AntiQuant QuantV2 Dequant FakeQuantPerLayer "
                                       "MinMaxUpdatePerLayer").split()},
}

#: rules of ``ops.py`` this module replaces, and why (MindSpore 2.9 checked with msoracle)
OVERRIDES: dict[str, tuple[Callable[[Op], FactorRule], str]] = {
    "MaskedFill": (masked_fill_rule, "a 0-d tensor value is no strategy input: MaskedFillInfo::GetAttrs pops it "
                                     "(measured: deepseek3's router MaskedFill, propagated, ((1, 8, 1), (1, 8, 1)))"),
    "BiasAdd": (bias_add_rule, "data_format is not a strategy input; the bias follows the channel dim "
                               "(dim 1 of NCHW), not the last dim"),
    "StridedSlice": (strided_slice_rule, "new_axis/shrink_axis masks are legal (checked); the rule maps dims "
                                         "through the masks instead of refusing"),
    "Conv2D": (conv2d_rule, "H/W may be split (checked: k3 s1 'same' and 1x1 kernels); group conv keeps C whole"),
    "OneHot": (onehot_rule, "on/off are 0-d tensor strategy inputs found by their spec; output rows keep depth"),
    "Dropout": (dropout_rule, "outputs of another shape than the input (the mask) carry no factors"),
    "DropoutExt": (dropout_rule, "as Dropout"),
}


def _merge() -> dict[str, Callable[[Op], FactorRule]]:
    from . import ops
    base = ops.RULES
    out = {k: v for k, v in NEW.items() if k not in base}
    out.update({k: v for k, (v, _why) in OVERRIDES.items()})
    return out


RULES.update(_merge())
_ops_module = __import__("strategist.engine.ops", fromlist=["RULES"])
_ops_module.RULES.update(RULES)

#: primitives whose rule here is narrower than MindSpore's OperatorInfo, and why
INEXACT = {
    "Tile": "a dim with multiple > 1 may be split by a divisor of the multiple (output split, input whole): "
            "not a factor of the input, kept unsplit",
    "Dense": "BatchParallel in MindSpore (no DenseInfo): exact only where the engine honours "
             "FactorRule.batch_parallel (one candidate: input 0's dim 0 over all devices)",
    "BatchNorm": "statistics over split N/H/W are combined by MindSpore's own AllReduce; not costed here",
}


_INFER = "inference-only operator (KV cache / incremental decoding), not in a training graph"
_MOE = "Ascend MoE routing kernel with data-dependent output shapes; MindFormers' training graphs use " \
       "GroupedMatmul/TopkExt/SortExt instead"
#: OperatorInfo primitives deliberately without a rule, and why
LEFT_OUT = {
    **{t: _INFER for t in ("PromptFlashAttention IncreFlashAttention FusedInferAttentionScore PagedAttention "
                           "PagedAttentionMask ReshapeAndCache KVCacheScatterUpdate").split()},
    **{t: _MOE for t in ("MoeInitRouting MoeFinalizeRouting MoeGatingTopKSoftmax MoeComputeExpertTokens "
                         "TopKRouter TopPRouter FFN FFNExt").split()},
    "Custom": "its layout comes from the user's attributes (dev matrix, tensor maps), not from the primitive",
    "DSDMatmul": "legacy block-sparse attention (Ascend custom op)", "MatmulDDS": "legacy block-sparse attention",
    "Index": "tensor indexing with a tuple of index tensors: output shape depends on the index pattern",
    "DynamicQuantExt": "quantisation: per-token scale output; inference", "QuantLinearSparse": "inference quant",
    "FakeQuantPerChannel": "quantisation-aware training with per-channel axis attribute (not modelled)",
    "MinMaxUpdatePerChannel": "as FakeQuantPerChannel",
    "WKV": "RWKV kernel (not modelled)",
}


