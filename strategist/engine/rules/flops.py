"""FLOPs one device spends on an operator in a training step (MatMul-like, Conv2D and FlashAttentionScore)."""
from __future__ import annotations

import math

from ...vocab.graph import Op
from .factor import FactorRule, Sharding

#: the operators :func:`training_flops` counts (the memory-bound rest is left out)
COMPUTE_TYPES = frozenset({"MatMul", "BatchMatMul", "MatMulExt", "BatchMatMulExt", "Conv2D", "FlashAttentionScore",
                           "MorphFFN"})


def training_flops(op: Op, rule: FactorRule, s: Sharding) -> float:
    """FLOPs one device spends on ``op`` in a training step (forward + 2x backward) under ``s``:
    the operator's iteration space divided by the splits of its factors only, so repeated
    (redundant) computation is charged in full. MatMul-like, Conv2D and FlashAttentionScore only;
    the memory-bound rest is left out."""
    if op.type not in COMPUTE_TYPES:
        return 0.0
    sizes: dict[str, int] = {}
    for shape, t in zip(rule.input_shapes + rule.output_shapes, rule.inputs + rule.outputs):
        for n, f in zip(shape, t):
            if f:
                sizes[f] = max(sizes.get(f, 1), n)
    split = lambda fs: math.prod(s.splits.get(f, 1) for f in fs)
    if op.type == "Conv2D":
        o, c = rule.input_shapes[1][0], rule.input_shapes[1][1]
        kh, kw = rule.input_shapes[1][2], rule.input_shapes[1][3]
        n, _, h, w = rule.output_shapes[0]
        fwd = 2.0 * n * o * h * w * c * kh * kw / split(["n", "o", "c"])
    elif op.type == "MorphFFN":
        # MindFormers' MoE dispatcher + experts (strategist.frontend.mf_morph): its GroupedMatmuls' FLOPs, each device
        # computing its own tokens
        fwd = op.attrs.get("strategist_flops", 0.0) / split(["n"])
    elif op.type == "FlashAttentionScore":
        q = math.prod(rule.input_shapes[0])
        kf = rule.inputs[1]
        s2 = next((rule.input_shapes[1][i] for i, f in enumerate(kf) if f in ("s2", "t2")), 1)
        fwd = 4.0 * q * s2 / split(["b", "n", "s", "t"])
    else:
        fwd = 2.0 * math.prod(sizes[f] for f in rule.factors if f in sizes) / split(rule.factors)
    return 3.0 * fwd
