"""MindSpore's load-balanced FlashAttention under context parallelism (``parallel_speed_up_json``'s
``enable_flash_attention_load_balance``, off by default).

Without it, a FlashAttentionScore whose query sequence is split ``k`` ways over devices (the keys and values
gathered whole) runs one kernel per device on its own chunk, and under a causal mask the device with the last chunk
attends the most keys: ``(2k - 1) / k`` times the mean, and the step waits on it (:func:`~strategist.engine.rules.
flops.attended_fraction`). With it, MindSpore replaces the operator by a graph (FlashAttentionScoreInfo's
``ComputeReplaceGraph``): each device splits its query chunk in two halves, keeps the first, and swaps the second
with its partner -- the device holding chunk ``k - 1 - i`` -- by an AllGather over the pair; it runs one kernel on
its first half and one on the partner's second half, and sends that result back by a second AllGather over the
pair. The inputs cut along the query sequence go the same way: a ``real_shift`` with a sequence dim, a drop mask,
an attention mask MindSpore does not compress (a ``sparse_mode`` other than the causal and band modes). Autodiff
transposes the query's and the output's AllGathers into ReduceScatters of their gradients.

So each device computes blocks ``2i`` and ``2(k - 1 - i) + 1`` of ``2k``: the causal work balanced, at the price of
those 2-device exchanges of half its slices. (MindSpore's graph checked: ``tests/test_communication.py``,
``tests/models/attention_nets.py``.)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..engine.rules.flops import ATTN_MASK, SPARSE_MODE, balanced_attention_flops
from ..vocab.comm import CommStep
from ..vocab.graph import DTYPE_BYTES
from .optime import cached_rule
from .pricing import group_of_rank0

#: FlashAttentionScore's inputs cut along the query sequence besides the query: real_shift, drop_mask, attn_mask
_REAL_SHIFT, _DROP_MASK = 3, 4
#: FlashAttentionScore's outputs: softmax_max, softmax_sum, softmax_out, attention_out
_ATTENTION_OUT = 3
#: the sparse modes whose mask MindSpore compresses (left-up and right-down causal, band): not swapped
_COMPRESSED = (2, 3, 4)


@dataclass(frozen=True)
class LoadBalance:
    """One FlashAttentionScore under the load balance on one device, for the step's whole batch: its training FLOPs
    and the exchanges over the pair (forward AllGathers, backward ReduceScatters: :class:`CommStep`, unpriced)."""

    flops: float
    steps: tuple[CommStep, ...]

    @property
    def group(self) -> tuple[int, ...]:
        return self.steps[0].group


def load_balance(op, choice) -> LoadBalance | None:
    """``op`` (a FlashAttentionScore under ``choice``) as MindSpore runs it with the load balance, or None where it
    has nothing to balance (another operator, or the query's sequence not split)."""
    s = choice.sharding
    if s is None or op.type != "FlashAttentionScore":
        return None
    rule = cached_rule(op)
    flops = balanced_attention_flops(op, rule, s)
    if flops is None:
        return None
    q = s.inputs[0]
    seq = next(i for i, f in enumerate(rule.inputs[0]) if f in ("s", "t"))
    ranks = group_of_rank0(q.dev_matrix, q.dims[seq])
    pair = (ranks[0], ranks[-1])

    def half(lay, spec):
        return math.prod(lay.slice_shape) / 2 * DTYPE_BYTES.get(spec.dtype if spec else "", 2)

    def step(kind, nbytes, spec, direction="forward"):
        return CommStep(kind, pair, nbytes, 0.0, direction, dtype=spec.dtype if spec else "")

    spec_q = op.inputs[0].spec
    out, spec_out = s.outputs[_ATTENTION_OUT], op.outputs[_ATTENTION_OUT]
    q_half, out_half = half(q, spec_q), half(out, spec_out)
    fwd = [step("AllGather", q_half, spec_q)]
    sparse = op.inputs[SPARSE_MODE].value if SPARSE_MODE < len(op.inputs) and op.inputs[SPARSE_MODE].kind == "const" \
        else 0
    for slot in (_REAL_SHIFT, _DROP_MASK, ATTN_MASK):
        k = next((k for k, sl in enumerate(rule.slots) if sl == slot), None)
        if k is None or not any(f in ("s", "t") for f in rule.inputs[k] if f) or \
                (slot == ATTN_MASK and sparse in _COMPRESSED):
            continue
        fwd.append(step("AllGather", half(s.inputs[k], op.inputs[slot].spec), op.inputs[slot].spec))
    fwd.append(step("AllGather", out_half, spec_out))
    bwd = [step("ReduceScatter", q_half, spec_q, "backward"), step("ReduceScatter", out_half, spec_out, "backward")]
    return LoadBalance(flops, tuple(fwd + bwd))


def splits_attention(plan) -> bool:
    """Whether a FlashAttentionScore of ``plan`` has its query sequence split over devices: something for the load
    balance to balance."""
    return any(op.type == "FlashAttentionScore" and plan.choices[op.name].sharding is not None
               and balanced_attention_flops(op, cached_rule(op), plan.choices[op.name].sharding) is not None
               for op in plan.graph)
