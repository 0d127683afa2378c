"""Operators of no other family: generators (no strategy input), the FFT family, batched linear algebra
(Cholesky, SolveTriangular, LstsqV2) and detection boxes."""
from __future__ import annotations

import dataclasses

from ...vocab.graph import Op
from .common import axes_unsplit, const_arg, int_arg, letters, make_rule, norm_axes, out_shapes, shape_of, tensor_slots
from .factor import FactorRule


def no_input_rule(op: Op) -> FactorRule:
    """Generators (Range, LinSpace, StandardNormal, UniformReal, FillV2, GetNext, ...): no tensor
    strategy input here; the output is replicated."""
    slots = tensor_slots(op)
    return make_rule(op, [], [[None] * len(shape_of(op, s)) for s in slots], [[None] * len(o) for o in out_shapes(op)],
                     slots)


def _dims_arg(op: Op, slot: int, rank: int, default_all: bool = True):
    v = const_arg(op, slot, None)
    if v is None:
        return tuple(range(rank)) if default_all else ()
    return norm_axes(v, rank)


def fft_rule(op: Op) -> FactorRule:
    """FFT family (FFTBase): the transformed dims cannot be split. FFT/IFFT/RFFT/IRFFT/HFFT/IHFFT/
    DCT/IDCT(x, n, dim, norm) transform ``dim`` (default -1); the 2-D/N-D forms (x, s, dim, norm)
    a tuple (default: the last 2 / all); FFTShift/IFFTShift(x, dim)."""
    x = shape_of(op, 0)
    t = op.type
    if t in ("FFTShift", "IFFTShift"):
        axes = _dims_arg(op, 1, len(x))
    elif t.endswith("2"):
        v = const_arg(op, 2, None)
        axes = norm_axes(v, len(x)) if v is not None else (len(x) - 2, len(x) - 1)
    elif t.endswith("N"):
        axes = _dims_arg(op, 2, len(x))
    else:
        axes = ((int_arg(const_arg(op, 2, -1), -1)) % len(x),)
    return axes_unsplit(op, axes)


def last2_rule(op: Op) -> FactorRule:
    """Cholesky/SolveTriangular: the matrix dims are whole; batch dims split."""
    slots = tensor_slots(op)
    x = shape_of(op, slots[0])
    nb = max(len(x) - 2, 0)
    bf = letters(nb, "b")
    ins = []
    for s in slots:
        shp = shape_of(op, s)
        ins.append(bf[nb - min(nb, len(shp) - 2):] + [None] * min(2, len(shp)) if len(shp) >= 2 else [None] * len(shp))
    outs = [bf[nb - min(nb, max(len(o) - 2, 0)):] + [None] * min(2, len(o)) if len(o) >= 2 else
            (bf[:len(o)] if len(o) <= nb else [None] * len(o)) for o in out_shapes(op)]
    return make_rule(op, bf, ins, outs, slots)


def lstsq_v2_rule(op: Op) -> FactorRule:
    """LstsqV2(a [*batch, M, N], b [*batch, M] or [*batch, M, K], driver): the batch dims split, the matrix dims
    whole; b is a vector per batch when its rank is a's less one (UT test_lstsqv2: a [2, 4, 2], b [2, 4] takes
    ((2, 1, 1), (2, 1)) in semi_auto, and MindSpore's training compile propagates it with nothing configured; the
    compile as built fails in MindSpore 2.9.0 itself). Outputs: their leading dims that are the batch's."""
    slots = tensor_slots(op)
    x = shape_of(op, slots[0])
    nb = max(len(x) - 2, 0)
    bf = letters(nb, "b")
    ins = [bf + [None] * (len(x) - nb)]
    for s in slots[1:]:
        shp = shape_of(op, s)
        k = max(0, min(nb, len(shp) - (1 if len(shp) == len(x) - 1 else 2)))
        ins.append(bf[nb - k:] + [None] * (len(shp) - k))
    outs = []
    for o in out_shapes(op):
        k = 0
        while k < min(nb, len(o)) and o[k] == x[k]:
            k += 1
        outs.append(bf[:k] + [None] * (len(o) - k))
    r = make_rule(op, bf, ins, outs, slots)
    if nb == 1:
        # its one generated strategy splits every input's batch over all devices (MindSpore 2.9.0's INFO log:
        # "LstsqV2Info11: Successfully generated the 1st strategy: [[2, 1, 1], [2, 1]]", nothing else), as a
        # BatchParallelInfo with every input's split flag set; more batch dims are not measured
        r = dataclasses.replace(r, batch_parallel=True, batch_info=True)
    return r


def boxes_rule(op: Op) -> FactorRule:
    """BoundingBoxEncode/CheckValid/IOU-style detection ops: the box count splits, coordinates whole."""
    slots = tensor_slots(op)
    ins = []
    for k, s in enumerate(slots):
        shp = shape_of(op, s)
        ins.append([f"n{k}"] + [None] * (len(shp) - 1) if shp else [])
    outs = []
    for o in out_shapes(op):
        if op.type == "IOU" and len(o) == 2:
            outs.append(["n1", "n0"])
        else:
            outs.append(["n0"] + [None] * (len(o) - 1) if o else [])
    if op.type != "IOU":
        ins = [["n0"] + t[1:] if t and shape_of(op, s)[:1] == shape_of(op, slots[0])[:1] else [None] * len(t)
               for t, s in zip(ins, slots)]
    factors = sorted({f for t in ins + outs for f in t if f})
    return make_rule(op, factors, ins, outs, slots)


#: (builder, primitive names) pairs this family registers (:mod:`strategist.engine.rules.registry`)
REGISTRATIONS = (
    (no_input_rule, tuple("Range Arange LinSpace LinSpaceExt StandardNormal UniformReal FillV2 GetNext Gamma "
                          "UniformCandidateSampler RandomChoiceWithMask GenerateEodMaskV2 DropoutGenMask".split())),
    (fft_rule, tuple("FFT IFFT FFT2 IFFT2 FFTN IFFTN RFFT IRFFT RFFT2 IRFFT2 RFFTN IRFFTN HFFT IHFFT HFFT2 IHFFT2 "
                     "HFFTN IHFFTN DCT IDCT DCTN IDCTN FFTShift IFFTShift".split())),
    (last2_rule, ("Cholesky", "SolveTriangular")),
    (lstsq_v2_rule, ("LstsqV2",)),
    (boxes_rule, ("BoundingBoxEncode", "CheckValid", "IOU")),
)
