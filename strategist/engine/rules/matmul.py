"""MatMul-like operators: MatMul / BatchMatMul (and their ``Ext`` forms), the quantised matmuls, GroupedMatmul,
strategist's ``MorphFFN``, TensorDot, Outer, Cdist, and Dense (no OperatorInfo in MindSpore: batch-parallel).
An ``enable_nd_tp`` (Batch)MatMul's Layouts are :func:`strategist.engine.rules.sharding.nd_tp_sharding`."""
from __future__ import annotations

import dataclasses

from ...vocab.graph import MORPH_FFN, Op
from .common import batch_parallel_rule, const_arg, letters, make_rule, out_shapes, shape_of, tensor_slots, unknown_rule
from .factor import FactorRule


def matmul_rule(op: Op) -> FactorRule:
    """MatMul / BatchMatMul: ``...ik,...kj->...ij`` (transposes swap the last two dims), batch dims
    broadcast from the right; ``k`` is the reduction factor. Device matrix order: batch, i, k, j."""
    a, b = shape_of(op, 0), shape_of(op, 1)
    ta, tb = bool(const_arg(op, 2, False)), bool(const_arg(op, 3, False))
    nb = max(len(a), len(b)) - 2
    batch = letters(nb, "b")
    fa = batch[nb - (len(a) - 2):] + (["k", "i"] if ta else ["i", "k"])
    fb = batch[nb - (len(b) - 2):] + (["j", "k"] if tb else ["k", "j"])
    out = out_shapes(op)[0]
    for t, shp in ((fa, a), (fb, b)):
        for i, n in enumerate(shp[:-2]):
            if n == 1 and out[len(out) - len(shp) + i] != 1:
                t[i] = None
    return make_rule(op, batch + ["i", "k", "j"], [fa, fb], [batch + ["i", "j"]], [0, 1])


def quant_matmul_rule(op: Op) -> FactorRule:
    """QuantBatchMatmul/WeightQuantBatchMatmul(x1, x2, scale/antiquant..., bias...): MatMul on the
    first two inputs (transpose flags from attrs); the other tensors follow ``j`` when they have
    the output's last size, else whole."""
    slots = tensor_slots(op)
    a, b = shape_of(op, slots[0]), shape_of(op, slots[1])
    ta = bool(op.attrs.get("transpose_x1", op.attrs.get("transpose_x", False)))
    tb = bool(op.attrs.get("transpose_x2", op.attrs.get("transpose_weight", False)))
    nb = max(len(a), len(b)) - 2
    batch = letters(nb, "b")
    fa = batch[nb - (len(a) - 2):] + (["k", "i"] if ta else ["i", "k"])
    fb = batch[nb - (len(b) - 2):] + (["j", "k"] if tb else ["k", "j"])
    out = out_shapes(op)[0]
    n = out[-1] if out else 0
    ins = [fa, fb] + [(["j"] if shape_of(op, s) == (n,) else [None] * len(shape_of(op, s))) for s in slots[2:]]
    return make_rule(op, batch + ["i", "k", "j"], ins, [batch + ["i", "j"]], slots)


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
    slots = tensor_slots(op)
    xs = shape_of(op, slots[0])
    ws = shape_of(op, slots[1]) if len(slots) > 1 else ()
    if len(xs) not in (2, 3) or len(ws) not in (2, 3):
        return unknown_rule(op)
    fx = (["bs"] if len(xs) == 3 else []) + ["m", "k"]
    fw = ([None] if len(ws) == 3 else []) + ["k", "n"]
    ins = [fx, fw]
    for s in slots[2:]:
        shp = shape_of(op, s)
        n = ws[-1]
        if shp and shp[-1] == n and len(shp) <= 2 and op.inputs[s].spec.dtype not in ("int64", "int32"):
            ins.append([None] * (len(shp) - 1) + ["n"])
        else:
            ins.append([None] * len(shp))
    outs = [fx[:-1] + ["n"] if len(o) == len(xs) else [None] * len(o) for o in out_shapes(op)]
    return make_rule(op, [f for f in fx if f != "k"] + ["k", "n"], ins, outs, slots)


def morph_ffn_rule(op: Op) -> FactorRule:
    """strategist's own ``MorphFFN`` (:mod:`strategist.frontend.mf_morph`: MindFormers' MoE dispatcher + experts Morph
    as one device-local operator): one token factor ``n`` on every activation's token dimension and the
    output's. The expert weights are whole, as MindSpore's GroupedMatmulInfo never splits their expert
    dimension: an expert factor priced as a partial output would let propagation take the dp axis for
    experts (an ep the mesh does not have) to save their gradients' AllReduce."""
    slots = tensor_slots(op)
    dims = op.attrs.get("strategist_token_dims", ())
    ins = []
    for k, s in enumerate(slots):
        row = [None] * len(shape_of(op, s))
        if k < len(dims) and dims[k] is not None:
            row[dims[k]] = "n"
        ins.append(row)
    outs = [[None] * (len(o) - 2) + ["n", None] for o in out_shapes(op)]
    return make_rule(op, ["n"], ins, outs, slots)


def tensor_dot_rule(op: Op) -> FactorRule:
    """TensorDot(a, b, axes) with integer axes n: the last n dims of a contract with the first n of b."""
    a, b = shape_of(op, 0), shape_of(op, 1)
    n = const_arg(op, 2, op.attrs.get("axes", 1))
    if not isinstance(n, int):
        return unknown_rule(op)
    fa = letters(len(a) - n, "a") + letters(n, "k")
    fb = letters(n, "k") + letters(len(b) - n, "b")
    return make_rule(op, fa + fb[n:], [fa, fb], [fa[:len(a) - n] + fb[n:]], [0, 1])


def outer_rule(op: Op) -> FactorRule:
    """Outer(x[M], y[N]) -> [M, N]: a configured strategy splits both freely (checked: ``((2,), (4,))``), but
    MindSpore generates only equal splits: OuterInfo is an ArithmeticBase, whose broadcast generation aligns the
    two 1-D inputs as one dimension, while its device matrix is ``[m, n]``. On 8 devices: ``((1,), (1,))`` and
    ``((2,), (2,))``; ``((4,), (4,))`` needs 16 devices (measured: qwen3_moe's rotary table, MindSpore's INFO log)."""
    r = make_rule(op, ["m", "n"], [["m"], ["n"]], [["m", "n"]], [0, 1])
    return dataclasses.replace(r, tied=("m", "n"))


def cdist_rule(op: Op) -> FactorRule:
    """Cdist(x1[B,P,M], x2[B,R,M]) -> [B,P,R]: M (the distance's reduction) whole."""
    a = shape_of(op, 0)
    nb = len(a) - 2
    bf = letters(nb, "b")
    return make_rule(op, bf + ["p", "r", "m"], [bf + ["p", "m"], bf + ["r", "m"]], [bf + ["p", "r"]], [0, 1],
                     unsplittable=["m"])


#: (builder, primitive names) pairs this family registers (:mod:`strategist.engine.rules.registry`)
REGISTRATIONS = (
    (matmul_rule, ("MatMul", "BatchMatMul", "MatMulExt", "BatchMatMulExt")),
    (quant_matmul_rule, ("QuantBatchMatmul", "WeightQuantBatchMatmul")),
    (dense_rule, ("Dense",)),
    (grouped_matmul_rule, ("GroupedMatmul",)),
    (morph_ffn_rule, (MORPH_FFN,)),
    (tensor_dot_rule, ("TensorDot",)),
    (outer_rule, ("Outer",)),
    (cdist_rule, ("Cdist",)),
)
