"""Convolutions and pooling (NCHW): Conv2D, Conv2DTranspose / Conv2DBackpropInput, Conv3D / Convolution, MaxPool /
AvgPool (2-D and 3-D), the resizes, GridSampler2D, ROIAlign / CropAndResize."""
from __future__ import annotations

import dataclasses
import math

from ...vocab.graph import Op
from .common import letters, make_rule, out_shapes, shape_of, tensor_slots
from .factor import FactorRule


def _pair(v, default=1):
    if v is None:
        return (default, default)
    if isinstance(v, int):
        return (v, v)
    v = tuple(v)
    return v[-2:] if len(v) >= 2 else (v[0], v[0])


def _triple(v, default=1):
    if v is None:
        return (default,) * 3
    if isinstance(v, int):
        return (v,) * 3
    v = tuple(v)
    return v[-3:] if len(v) >= 3 else (v[0],) * 3


def _spatial_ok(k, s, pad_mode, d=1) -> bool:
    """A spatial dim may be split when windows do not straddle slices (kernel <= stride) or, with
    'same'/'pad' padding and stride 1, by MindSpore's halo exchange (checked: Conv2D k3 s1 'same'
    H split taken, 'valid' refused; MaxPool k2 s2 taken, k3 s2 refused)."""
    ke = (k - 1) * d + 1
    if ke <= s:
        return True
    return str(pad_mode).lower() in ("same", "pad", "1", "0") and s == 1 and ke % 2 == 1


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


def _conv_candidates(r: FactorRule) -> FactorRule:
    """Conv2DInfo::GenerateOpStrategies searches (N, C-in, H, W, C-out) with C-out unsplittable ("simply avoid
    redistribution"; measured: a ResNet-50 3x3 conv's 10 candidates on 8 devices split N and C-in only). A
    configured strategy may still split the output channels."""
    return dataclasses.replace(r, cand_sizes=tuple(r.cand_sizes) + (("o", 1),))


def conv2d_rule(op: Op) -> FactorRule:
    """Conv2D(x[N,C,H,W], w[O,C/g,kh,kw]): N and O split freely, C is the reduction factor, H/W
    split when :func:`_spatial_ok` (checked: ``((2, 2, 2, 1), (1, 2, 1, 1))`` taken)."""
    a = op.attrs
    k = _pair(a.get("kernel_size"), shape_of(op, 1)[-1] if len(shape_of(op, 1)) == 4 else 1)
    s = _pair(a.get("stride"), 1)
    d = _pair(a.get("dilation"), 1)
    pm = a.get("pad_mode", "valid")
    group = int(a.get("group", 1) or 1)
    uns = [n for n, kk, ss, dd in zip(("h", "w"), k, s, d) if not _spatial_ok(kk, ss, pm, dd)]
    if group != 1:
        uns += ["c"]
    return _conv_candidates(make_rule(op, ["n", "c", "o", "h", "w"], [["n", "c", "h", "w"], ["o", "c", None, None]],
                                      [["n", "o", "h", "w"]], [0, 1], unsplittable=uns))


def conv2d_transpose_rule(op: Op) -> FactorRule:
    """Conv2DTranspose / Conv2DBackpropInput(dout[N,Cin,H,W], w[Cin,Cout,kh,kw], input_size):
    N and Cout split freely, Cin is the reduction factor (checked: ``((2, 2, 1, 1), (2, 1, 1, 1))``).
    H/W split as ``Conv2DBackpropInputInfo::CheckHWStrategy`` allows, whatever the kernel (a halo exchange
    follows): pad mode 'same' only, the dim's input times its stride equal to its output, and the split dividing
    both (CheckHWStrategyBase). Measured: k4 s2 'same' [32,8,32,32] -> [32,16,64,64] takes ``((1,1,1,8),(1,1,1,1))``
    backward from a ReLU so split (MindSpore's UT test_sharding_propagation_1x1x1x8)."""
    a = op.attrs
    s = _pair(a.get("stride"), 1)
    x, out = shape_of(op, 0), (out_shapes(op) or ((),))[0]
    uns, sizes = ["h", "w"], []
    if len(x) == 4 and len(out) == 4 and str(a.get("pad_mode", "valid")).lower() in ("same", "1"):
        for i, name in ((2, "h"), (3, "w")):
            if x[i] * s[i - 2] == out[i] and math.gcd(x[i], out[i]) > 1:
                uns.remove(name)
                sizes.append((name, math.gcd(x[i], out[i])))
    return _conv_candidates(make_rule(op, ["n", "c", "o", "h", "w"], [["n", "c", "h", "w"], ["c", "o", None, None]],
                                      [["n", "o", "h", "w"]], [0, 1], unsplittable=uns, sizes=sizes))


def conv3d_rule(op: Op) -> FactorRule:
    """Conv3D(x[N,C,D,H,W], w[O,C,kd,kh,kw]) (Conv3DInfo, a Conv2DInfo): N and O split, C is the reduction
    factor; D and H split as Conv2D's H and W (Conv2DInfo::CheckHWStrategy on dims 2 and 3, see
    :func:`_conv_spatial_units`), W never (Conv3DInfo::CheckStrategy). The candidates search (N, C-in, D, H)
    with C-out whole, as Conv2D's (measured: k3 s2 'pad' 1 on [2,16,56,56,24] lists 28 candidates, D/H up to
    4 as the output's 28 refuses 8, and takes ``((1, 1, 2, 4, 1), (1, 1, 1, 1, 1))`` after a Neg so split).
    Convolution keeps its spatial dims whole."""
    x = shape_of(op, 0)
    sp = letters(len(x) - 2, "s")
    w = shape_of(op, 1)
    slots = [0, 1]
    uns, sizes = list(sp), []
    a = op.attrs
    if op.type == "Conv3D" and len(x) == 5 and len(w) == 5:
        out = out_shapes(op)[0]
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
    return _conv_candidates(make_rule(op, ["n", "c", "o"] + sp, [["n", "c"] + sp, ["o", "c"] + [None] * (len(w) - 2)],
                                      [["n", "o"] + sp], slots, unsplittable=uns, sizes=sizes))


def pool_rule(op: Op) -> FactorRule:
    """MaxPool/AvgPool(x[N,C,H,W]): N, C split freely; H/W only when windows do not overlap
    (checked: k2 s2 H split taken; k3 s2 'same' refused)."""
    a = op.attrs
    k = _pair(a.get("kernel_size", a.get("ksize")), 1)
    s = _pair(a.get("strides", a.get("stride")), 1)
    x = shape_of(op, 0)
    f = letters(len(x))
    if len(x) != 4:
        return make_rule(op, f, [f], [f], [0], unsplittable=f[2:])
    uns = [g for g, kk, ss in zip(f[2:], k, s) if kk > ss]
    outs = [[f[0], f[1], f[2], f[3]] if len(o) == 4 else [None] * len(o) for o in out_shapes(op)]
    return make_rule(op, f, [f], outs, [0], unsplittable=uns)


def pool3d_rule(op: Op) -> FactorRule:
    x = shape_of(op, 0)
    f = letters(len(x))
    return make_rule(op, f, [f], [f if len(o) == len(x) else [None] * len(o) for o in out_shapes(op)], [0],
                     unsplittable=f[2:])


def resize_rule(op: Op) -> FactorRule:
    """ResizeBilinearV2/ResizeNearestNeighbor(x[N,C,H,W], size): N and C split, H/W whole."""
    x = shape_of(op, 0)
    f = letters(len(x))
    return make_rule(op, f, [f], [f], [0], unsplittable=f[2:])


def nc_rule(op: Op) -> FactorRule:
    """GridSampler2D(x[N,C,H,W], grid[N,Ho,Wo,2]): N shared, C split, the rest whole."""
    g = shape_of(op, 1)
    return make_rule(op, ["n", "c"], [["n", "c", None, None], ["n", None, None, None][:len(g)]],
                     [["n", "c", None, None]], [0, 1])


def roi_rule(op: Op) -> FactorRule:
    """ROIAlign(features[N,C,H,W], rois[R,5]) / CropAndResize(x[N,H,W,C], boxes, box_index, size):
    only the channel dim is split, shared with the output."""
    x = shape_of(op, 0)
    slots = tensor_slots(op)
    cpos = 1 if op.type == "ROIAlign" else len(x) - 1
    fx = [None] * len(x)
    fx[cpos] = "c"
    ins = [fx] + [[None] * len(shape_of(op, s)) for s in slots[1:]]
    outs = []
    for o in out_shapes(op):
        t = [None] * len(o)
        if len(o) == len(x):
            t[cpos] = "c"
        outs.append(t)
    return make_rule(op, ["c"], ins, outs, slots)


#: (builder, primitive names) pairs this family registers (:mod:`strategist.engine.rules.registry`)
REGISTRATIONS = (
    (conv2d_rule, ("Conv2D",)),
    (conv2d_transpose_rule, ("Conv2DTranspose", "Conv2DBackpropInput")),
    (conv3d_rule, ("Conv3D", "Convolution")),
    (pool_rule, ("MaxPool", "AvgPool")),
    (pool3d_rule, ("MaxPool3D", "AvgPool3D")),
    (resize_rule, ("ResizeBilinearV2", "ResizeNearestNeighbor")),
    (nc_rule, ("GridSampler2D",)),
    (roi_rule, ("ROIAlign", "CropAndResize")),
)
