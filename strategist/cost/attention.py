"""MindSpore's load-balanced FlashAttention under context parallelism (``parallel_speed_up_json``'s
``enable_flash_attention_load_balance``, off by default).

Without it, a FlashAttentionScore whose query sequence is split ``k`` ways over devices (the keys and values
gathered whole) runs one kernel per device on its own chunk, and under a causal mask the device with the last chunk
attends the most keys: ``(2k - 1) / k`` times the mean, and the step waits on it (:func:`~strategist.engine.rules.
flops.attended_fraction`). With it, MindSpore replaces the operator by a graph (FlashAttentionScoreInfo's
``ComputeReplaceGraph``): each device splits its query chunk in two halves, keeps the first, and swaps the second
with its partner -- the device holding chunk ``k - 1 - i`` -- by an AllGather over the pair; it runs one kernel on
its first half and one on the partner's second half, and sends that result back by a second AllGather over the
pair. An attention mask MindSpore does not compress (a ``sparse_mode`` other than the causal and band modes) is
swapped as the query is. Autodiff transposes each AllGather into a ReduceScatter of the gradient; the mask has none.

So each device computes blocks ``2i`` and ``2(k - 1 - i) + 1`` of ``2k``: the causal work balanced, at the price of
two 2-device exchanges of half its query chunk each way.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..engine.rules.flops import ATTN_MASK, SPARSE_MODE, balanced_attention_flops
from ..vocab.graph import DTYPE_BYTES
from .optime import cached_rule
from .pricing import group_of_rank0

#: FlashAttentionScore's outputs: softmax_max, softmax_sum, softmax_out, attention_out
_ATTENTION_OUT = 3
#: the sparse modes whose mask MindSpore compresses (left-up and right-down causal, band): not swapped
_COMPRESSED = (2, 3, 4)


@dataclass(frozen=True)
class LoadBalance:
    """One FlashAttentionScore under the load balance on one device, for the step's whole batch: its training
    FLOPs, the bytes each device sends per exchange (forward, and the gradients' backward), the pair's ranks, and
    the seconds of those exchanges on the profile."""

    flops: float
    forward_bytes: tuple[float, ...]
    backward_bytes: tuple[float, ...]
    group: tuple[int, int]
    forward_seconds: float
    backward_seconds: float


def load_balance(op, choice, prof) -> LoadBalance | None:
    """``op`` (a FlashAttentionScore under ``choice``) as MindSpore runs it with the load balance on ``prof``, or
    None where it has nothing to balance (another operator, or the query's sequence not split)."""
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
    half = lambda lay, spec: math.prod(lay.slice_shape) / 2 * DTYPE_BYTES.get(spec.dtype if spec else "", 2)
    q_half = half(q, op.inputs[0].spec)
    out = s.outputs[_ATTENTION_OUT] if len(s.outputs) > _ATTENTION_OUT else q
    spec_out = op.outputs[_ATTENTION_OUT] if len(op.outputs) > _ATTENTION_OUT else op.inputs[0].spec
    out_half = half(out, spec_out)
    fwd = [q_half, out_half]
    mask = op.inputs[ATTN_MASK] if ATTN_MASK < len(op.inputs) else None
    sparse = op.inputs[SPARSE_MODE].value if SPARSE_MODE < len(op.inputs) and op.inputs[SPARSE_MODE].kind == "const" \
        else 0
    slot = _mask_slot(rule)
    if mask is not None and (mask.kind != "const" or mask.value is not None) and sparse not in _COMPRESSED \
            and slot is not None and rule.inputs[slot] and any(f in ("s", "t") for f in rule.inputs[slot]):
        fwd.append(half(s.inputs[slot], mask.spec))
    bwd = (q_half, out_half)
    intra = min(pair) // prof.devices_per_node == max(pair) // prof.devices_per_node
    n = 2 if pair[0] != pair[1] else 1
    return LoadBalance(flops, tuple(fwd), bwd, pair,
                       sum(prof.collective_seconds("AllGather", n, b, intra) for b in fwd),
                       sum(prof.collective_seconds("ReduceScatter", n, b, intra) for b in bwd))


def splits_attention(plan) -> bool:
    """Whether a FlashAttentionScore of ``plan`` has its query sequence split over devices: something for the load
    balance to balance."""
    return any(op.type == "FlashAttentionScore" and plan.choices[op.name].sharding is not None
               and balanced_attention_flops(op, cached_rule(op), plan.choices[op.name].sharding) is not None
               for op in plan.graph)


def _mask_slot(rule) -> int | None:
    """The position of the attention mask among the rule's inputs (its slots list the operator inputs it reads)."""
    return next((k for k, slot in enumerate(rule.slots) if slot == ATTN_MASK), None)

