"""Softmax-like operators (the normalised axes whole) and normalisations (RmsNorm, LayerNorm, BatchNorm, GroupNorm),
with Swiglu, whose gated axis is read whole as well."""
from __future__ import annotations

from ...vocab.graph import Op
from .common import (axes_unsplit, axis_arg, const_arg, int_arg, letters, make_rule, nonconst_tensor_slots,
                     norm_axes, out_shapes, shape_of, tensor_slots)
from .factor import FactorRule


def softmax_rule(op: Op) -> FactorRule:
    """Softmax/LogSoftmax: the softmax axes cannot be split."""
    shp = shape_of(op, 0)
    axes = norm_axes(const_arg(op, 1, op.attrs.get("axis", -1)), len(shp))
    factors = letters(len(shp))
    return make_rule(op, factors, [factors], [factors], [0], unsplittable=[factors[a] for a in axes])


def softmax_like_rule(op: Op) -> FactorRule:
    """Softmax/LogSoftmax/L2Normalize/ReverseV2/SoftmaxExt: the given axes cannot be split."""
    x = shape_of(op, 0)
    ax = axis_arg(op, 1, "axis", -1)
    if op.type == "ReverseV2":
        ax = op.attrs.get("axis", const_arg(op, 1, ()))
    return axes_unsplit(op, ax if ax not in (None, ()) else (-1 % len(x),))


def swiglu_rule(op: Op) -> FactorRule:
    """Swiglu(x, dim): the gated dim (halved in the output) cannot be split (checked: ``((2, 4),)``
    refused, ``((8, 1),)`` taken, for dim -1)."""
    x = shape_of(op, 0)
    return axes_unsplit(op, (int_arg(const_arg(op, 1, -1), -1) % len(x),))


def norm_rule(op: Op, norm_from: int | None = None) -> FactorRule:
    """RmsNorm(x, gamma) / LayerNorm(x, gamma, beta): normalised dims unsplittable; statistics
    outputs keep the leading dims with size-1 tails. gamma and beta take x's trailing dims, which may reach
    before the normalised ones (LayerNorm's ``begin_params_axis`` < ``begin_norm_axis``: a split there is
    theirs too, LayerNormInfo::GenerateGammaAndBetaStrategies; UT test_layer_norm's net)."""
    x = shape_of(op, 0)
    slots = nonconst_tensor_slots(op)
    if norm_from is None:
        g = shape_of(op, slots[1]) if len(slots) > 1 else x[-1:]
        norm_from = len(x) - len(g)
    factors = letters(len(x))
    normed = factors[norm_from:]
    ins = [factors] + [factors[len(x) - len(shape_of(op, s)):] for s in slots[1:]]
    outs = [factors if len(o) == len(x) and o == x else factors[:norm_from] + [None] * (len(o) - norm_from)
            for o in out_shapes(op)]
    return make_rule(op, factors, ins, outs, slots, unsplittable=normed)


def layer_norm_rule(op: Op) -> FactorRule:
    x = shape_of(op, 0)
    axis = op.attrs.get("begin_norm_axis", const_arg(op, 3, -1))
    return norm_rule(op, axis % len(x) if isinstance(axis, int) else None)


def layer_norm_v3_rule(op: Op) -> FactorRule:
    x = shape_of(op, 0)
    axis = int_arg(const_arg(op, 3, op.attrs.get("begin_norm_axis", -1)), -1)
    return norm_rule(op, axis % len(x))


def batch_norm_rule(op: Op) -> FactorRule:
    """BatchNorm(x[N, C, ...], scale, bias, mean, variance): N, C and the spatial dims split; the
    four [C] inputs follow C. Training statistics over a split N/H/W are combined by MindSpore
    (SyncBatchNorm-style AllReduce) -- they are reduction-like but the output is not partial."""
    x = shape_of(op, 0)
    f = letters(len(x))
    slots = tensor_slots(op)
    ins = [f] + [[f[1]] if len(shape_of(op, s)) == 1 else [None] * len(shape_of(op, s)) for s in slots[1:]]
    outs = [f if tuple(o) == tuple(x) else ([f[1]] if len(o) == 1 else [None] * len(o)) for o in out_shapes(op)]
    return make_rule(op, f, ins, outs, slots)


def group_norm_rule(op: Op) -> FactorRule:
    """GroupNorm(x[N, C, ...], num_groups, gamma, beta, eps): only N splits."""
    x = shape_of(op, 0)
    f = letters(len(x))
    slots = tensor_slots(op)
    ins = [f] + [[None] * len(shape_of(op, s)) for s in slots[1:]]
    outs = [[f[0]] + [None] * (len(o) - 1) if o else [] for o in out_shapes(op)]
    return make_rule(op, f, ins, outs, slots, unsplittable=f[1:])


#: (builder, primitive names) pairs this family registers (:mod:`strategist.engine.rules.registry`)
REGISTRATIONS = (
    (softmax_rule, ("Softmax", "LogSoftmax")),
    (softmax_like_rule, ("L2Normalize", "ReverseV2")),
    (swiglu_rule, ("Swiglu",)),
    (norm_rule, ("RmsNorm",)),
    (layer_norm_rule, ("LayerNorm",)),
    (layer_norm_v3_rule, ("LayerNormV3",)),
    (batch_norm_rule, ("BatchNorm",)),
    (group_norm_rule, ("GroupNorm",)),
)
