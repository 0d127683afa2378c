"""The advice beside the operators the model's code configures in every parallel build (``graph.parallel_only``:
MindFormers' CrossEntropyLoss, its ``logits + 0`` / ``labels + 0`` first, see
:func:`strategist.engine.plan.parallel_only_anchors`). Every plan of such a graph starts from their strategies, as
the real run does; a configured operator ends MindSpore's BFS, so the layout they take is handed back to the
operators before them. A language-model head laid out otherwise than that pays a redistribution of its whole logits
there (glm4: MindFormers' vocabulary-parallel loss takes them ``(1, dp*cp*tp)``, the advisor's vocabulary-by-tp
head gives ``(dp, tp)``), so the head is proposed in the loss's layout, with the template's as its alternative,
taken where the step is faster (:func:`strategist.advice.refine.take_alternatives`)."""
from __future__ import annotations

from .choice import Choice
from .rules import anchor_of


def loss_layout_alternatives(graph, mesh, proposed: list, run) -> int:
    """Propose each language-model head (a vocabulary-by-tp ``matmul_column`` without an alternative) in the layout
    propagation from the model's own parallel-only operators alone gives it, when they decide it (its provenance's
    root is one of them) and it differs; the template's layout becomes its alternative. ``run``: the advisor pass's
    propagation. Returns how many heads changed."""
    own = graph.parallel_only or {}
    heads = [c for c in proposed if c.alternative is None and c.template == "matmul_column"
             and c.why.startswith("language-model head")]
    if not own or not heads:
        return 0
    base = run([], price=False)            # the model's own parallel-only operators configured, nothing else
    n = 0
    for c in heads:
        ch = base.choices.get(c.op)
        if ch is None or ch.sharding is None or ch.provenance.root not in own:
            continue
        alt = anchor_of(c.op, ch.sharding, mesh, graph.op(c.op).type)
        if alt == c.anchor:
            continue
        # the loss's layout first (minimality would drop a head the loss then redistributes, and the loss's BFS
        # would decide the head and whatever lies before it), the template's as the alternative
        column = Choice(c.op, c.rule, c.template, c.why, c.anchor)
        c.template, c.anchor = "matmul_loss_layout", alt
        c.why = (f"language-model head laid out as the model's own {ch.provenance.root} takes its logits "
                 f"({ch.strategy}): no redistribution of the logits there")
        c.alternative = column
        n += 1
    return n
