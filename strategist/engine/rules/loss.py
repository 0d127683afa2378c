"""Losses: SoftmaxCrossEntropyWithLogits, SparseSoftmaxCrossEntropyWithLogits (a BatchParallelInfo),
CrossEntropyLoss, KLDivLoss, L2Loss."""
from __future__ import annotations

import dataclasses

from ...vocab.graph import Op
from .common import letters, make_rule, out_shapes, shape_of, tensor_slots
from .factor import FactorRule
from .reduce import all_reduce_rule


def softmax_ce_rule(op: Op) -> FactorRule:
    """SoftmaxCrossEntropyWithLogits(logits[N,C], labels[N,C]) -> (loss[N], dlogits[N,C]); C unsplit."""
    return make_rule(op, ["n", "c"], [["n", "c"], ["n", "c"]], [["n"], ["n", "c"]], [0, 1], unsplittable=["c"])


def sparse_softmax_ce_rule(op: Op) -> FactorRule:
    """SparseSoftmaxCrossEntropyWithLogits(logits[N,C], labels[N]) -> mean loss; N reduces.

    MindSpore's SparseSoftmaxCrossEntropyWithLogitsInfo is a BatchParallelInfo with every input's
    split flag set: its one candidate splits dim 0 of logits and labels over all devices
    (``((16, 1), (16,))`` on 16 devices, measured), also when the loss is a scalar."""
    outs = [["n"] + [None] * (len(o) - 1) if o else [] for o in out_shapes(op)]
    r = make_rule(op, ["n"], [["n", None], ["n"]], outs, [0, 1])
    return dataclasses.replace(r, batch_parallel=True, batch_info=True)


def cross_entropy_rule(op: Op) -> FactorRule:
    """CrossEntropyLoss(input[N, C], target[N], weight[C], ...): N splits, C whole."""
    slots = tensor_slots(op)
    x = shape_of(op, slots[0])
    f = ["n", "c"][:len(x)]
    ins = [f] + [(["n"] if len(shape_of(op, s)) == 1 and shape_of(op, s)[0] == x[0] else [None] * len(shape_of(op, s)))
                 for s in slots[1:]]
    outs = [["n"] if len(o) == 1 and o[0] == x[0] else [None] * len(o) for o in out_shapes(op)]
    return make_rule(op, f, ins, outs, slots, unsplittable=["c"])


def kldiv_rule(op: Op) -> FactorRule:
    """KLDivLoss(logits, labels, reduction): element-wise, reduced to a scalar unless 'none'."""
    x = shape_of(op, 0)
    f = letters(len(x))
    outs = [f if tuple(o) == tuple(x) else [None] * len(o) for o in out_shapes(op)]
    return make_rule(op, f, [f, f], outs, [0, 1])


def l2_loss_rule(op: Op) -> FactorRule:
    return all_reduce_rule(op)


#: (builder, primitive names) pairs this family registers (:mod:`strategist.engine.rules.registry`)
REGISTRATIONS = (
    (softmax_ce_rule, ("SoftmaxCrossEntropyWithLogits",)),
    (sparse_softmax_ce_rule, ("SparseSoftmaxCrossEntropyWithLogits",)),
    (cross_entropy_rule, ("CrossEntropyLoss",)),
    (kldiv_rule, ("KLDivLoss",)),
    (l2_loss_rule, ("L2Loss",)),
)
