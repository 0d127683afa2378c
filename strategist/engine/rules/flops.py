"""FLOPs one device spends on an operator in a training step (MatMul-like, Conv2D and FlashAttentionScore)."""
from __future__ import annotations

import math

from ...vocab.graph import MORPH_FFN, Op
from .factor import FactorRule, Sharding

#: the operators :func:`training_flops` counts (the memory-bound rest is left out)
COMPUTE_TYPES = frozenset({"MatMul", "BatchMatMul", "MatMulExt", "BatchMatMulExt", "Conv2D", "FlashAttentionScore",
                           MORPH_FFN})


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
    elif op.type == MORPH_FFN:
        # MindFormers' MoE dispatcher + experts (strategist.frontend.mf_morph): its GroupedMatmuls' FLOPs, each device
        # computing its own tokens
        fwd = op.attrs.get("strategist_flops", 0.0) / split(["n"])
    elif op.type == "FlashAttentionScore":
        # the query's sequence split k ways (context parallelism): the device holding the last chunk sets the pace
        fwd = _attention_forward(op, rule, s)
    else:
        fwd = 2.0 * math.prod(sizes[f] for f in rule.factors if f in sizes) / split(rule.factors)
    return 3.0 * fwd


def _query_split(rule: FactorRule, s: Sharding) -> int:
    """How many ways a FlashAttentionScore's query sequence is split."""
    return next((s.splits.get(f, 1) for f in rule.inputs[0] if f in ("s", "t")), 1)


def _attention_forward(op: Op, rule: FactorRule, s: Sharding, balanced: bool = False) -> float:
    """A FlashAttentionScore's forward FLOPs on the busiest device: 4 per query element and key it attends
    (:func:`attended_fraction`, ``balanced``: under MindSpore's load balance), divided by its splits."""
    q = math.prod(rule.input_shapes[0])
    s2 = next((rule.input_shapes[1][i] for i, f in enumerate(rule.inputs[1]) if f in ("s2", "t2")), 1)
    s1 = next((rule.input_shapes[0][i] for i, f in enumerate(rule.inputs[0]) if f in ("s", "t")), s2)
    return 4.0 * q * s2 * attended_fraction(op, s1, s2, _query_split(rule, s), balanced) / _attention_split(s)


def _attention_split(s: Sharding) -> int:
    """How many ways a FlashAttentionScore's query elements are divided: its batch, head and sequence splits."""
    return math.prod(s.splits.get(f, 1) for f in ("b", "n", "s", "t"))


def attended_keys(rule: FactorRule, s: Sharding, fwd_flops: float) -> float:
    """The keys one query row of a FlashAttentionScore attends on average, from its forward FLOPs on a device under
    ``s`` (:func:`_attention_forward`'s 4 per query element and attended key, inverted): the kernel's work per
    query tile, which sets the share of its fixed per-tile cost."""
    q = math.prod(rule.input_shapes[0]) / _attention_split(s)
    return fwd_flops / (4.0 * q) if q else 0.0


def balanced_attention_flops(op: Op, rule: FactorRule, s: Sharding) -> float | None:
    """:func:`training_flops` of a FlashAttentionScore whose query sequence is split over devices, under MindSpore's
    load balance (``parallel_speed_up_json`` ``enable_flash_attention_load_balance``): each device computes the first
    half of its own chunk and the second half of its partner's (chunk ``k - 1 - i``), so the busiest device's share
    is :func:`attended_fraction`'s ``balanced`` one; None where the query's sequence is not split (nothing to
    balance)."""
    if op.type != "FlashAttentionScore" or _query_split(rule, s) < 2:
        return None
    return 3.0 * _attention_forward(op, rule, s, balanced=True)


#: FlashAttentionScore's inputs: pre_tokens, next_tokens, sparse_mode (MindSpore's argument order); attn_mask
_PRE, _NEXT, SPARSE_MODE, ATTN_MASK = 13, 14, 17, 6
_ALL = 2**31 - 1


def attended_fraction(op: Op, s1: int, s2: int, chunks: int = 1, balanced: bool = False) -> float:
    """The share of a FlashAttentionScore's query-key blocks its kernel computes: Ascend's kernel skips the blocks
    outside the band its mask mode sets (CANN FlashAttentionScore: ``sparse_mode`` 0 reads ``pre_tokens`` and
    ``next_tokens`` where an ``attn_mask`` is given, 2 and 3 are causal from the top left and the bottom right, 4 a
    band), so a causal attention computes about half of them (MindFormers' LLaMA: ``next_tokens=0``).

    ``chunks``: the query's sequence split that many ways over the devices (context parallelism, the keys gathered
    whole): MindSpore shifts each device's band by its chunk's offset (FlashAttentionScoreInfo's
    ``GetAttentionMaskAttrs``: causal modes become band mode 4), and the share is the last chunk's, the device that
    attends the most keys and that the step waits on -- ``(2k - 1) / k`` times the mean for a causal mask.
    ``balanced``: MindSpore's load balance (FlashAttentionScoreInfo's replace graph): the sequence cut into ``2k``
    blocks, device ``i`` computes blocks ``2i`` and ``2(k - 1 - i) + 1``; the share is the busiest device's, the mean
    for a causal mask.

    >>> from strategist.vocab.graph import Input, Op
    >>> def fa(sparse, pre=_ALL, nxt=_ALL, mask=True):
    ...     consts = {_PRE: pre, _NEXT: nxt, SPARSE_MODE: sparse}
    ...     ins = [Input("input", "x")] * 6 + [Input("const", "", value=1 if mask else None)]
    ...     ins += [Input("const", "", value=consts.get(i)) for i in range(7, 18)]
    ...     return Op("fa", "FlashAttentionScore", "", "", "fa", "", tuple(ins), ())
    >>> attended_fraction(fa(2), 4, 4), attended_fraction(fa(0, nxt=0), 4, 4), attended_fraction(fa(0, mask=False), 4, 4)
    (0.625, 0.625, 1.0)
    >>> attended_fraction(fa(2), 4, 4, chunks=2)       # rows 2 and 3 of the causal 4 x 4: 3 + 4 of their 8 pairs
    0.875
    >>> attended_fraction(fa(2), 4, 4, chunks=2, balanced=True)   # rows 0 and 3, or 1 and 2: 1 + 4 = 2 + 3 pairs
    0.625
    """
    def const(i, default):
        x = op.inputs[i] if i < len(op.inputs) else None
        return x.value if x is not None and x.kind == "const" and x.value is not None else default
    mode = const(SPARSE_MODE, 0)
    masked = ATTN_MASK < len(op.inputs) and (op.inputs[ATTN_MASK].kind != "const" or
                                             op.inputs[ATTN_MASK].value is not None)
    if mode == 0 and masked:
        pre, nxt = const(_PRE, _ALL), const(_NEXT, _ALL)
    elif mode == 2:
        pre, nxt = _ALL, 0
    elif mode == 3:
        pre, nxt = _ALL, s2 - s1
    elif mode == 4:
        pre, nxt = const(_PRE, _ALL), const(_NEXT, _ALL) + s2 - s1
    else:
        return 1.0
    if s1 <= 0 or s2 <= 0:
        return 1.0
    pre, nxt = min(pre, s1 + s2), min(nxt, s1 + s2)
    if balanced and chunks > 1 and s1 % (2 * chunks) == 0:
        c = s1 // (2 * chunks)
        rows = lambda b: _band((b + 1) * c, s2, pre, nxt) - _band(b * c, s2, pre, nxt)     # block b's pairs
        return max(rows(2 * i) + rows(2 * (chunks - 1 - i) + 1) for i in range(chunks)) / (2 * c * s2)
    if chunks > 1 and s1 % chunks == 0:
        lo = s1 - s1 // chunks
        return (_band(s1, s2, pre, nxt) - _band(lo, s2, pre, nxt)) / (s1 // chunks * s2)
    return _band(s1, s2, pre, nxt) / (s1 * s2)


def _band(s1: int, s2: int, pre: int, nxt: int) -> float:
    """Query-key pairs with ``i - pre <= j <= i + nxt`` (0 <= i < s1, 0 <= j < s2), summed in closed form over the
    stretches where the band's edges are straight."""
    a, b = max(0, -nxt), min(s1, s2 + pre)
    if a >= b:
        return 0.0
    cuts = sorted({a, b} | {c for c in (pre + 1, s2 - nxt) if a < c < b})
    total = 0.0
    for lo, hi in zip(cuts, cuts[1:]):
        def count(i):
            return min(s2 - 1, i + nxt) - max(0, i - pre) + 1
        n = hi - lo
        total += (count(lo) + count(hi - 1)) * n / 2       # linear on the stretch: its mean times its length
    return total
