"""Rule 2, dimension- and axis-changing operators: where propagation reaches one only through a redistribution
(or not at all), it is anchored to follow its input; where its output reaches a configured operator only through
one (two seeds' searches meeting), to hand that operator the layout it takes. Read off a propagation of the other
heuristics' proposal (:func:`add_dimension_anchors`)."""
from __future__ import annotations

from ...engine.plan import Plan
from ...engine.search.caches import cached_rule
from ...engine.search.chooser import follow
from ...engine.search.kinds import NO_LAYOUT_INIT
from ...engine.search.layout_eq import same_placement
from ...vocab.graph import OpGraph
from ...vocab.mesh import Mesh
from ..choice import Choice
from ..refine import attention_chain_heads
from ...files.rules import Rules
from ..rules import anchor_of


def add_dimension_anchors(graph: OpGraph, mesh: Mesh, rules: Rules, plan: Plan, proposed: list[Choice],
                          own: set[str]) -> None:
    """Append rule 2's anchors to ``proposed`` (``plan``: its propagation; ``own``: the operators the model
    configures itself), in this order: the operators reached with a redistribution or not at all, the joins in
    front of a fused operator, the attention chain's heads, the producers of a configured operator's input."""
    _reached_with_a_redistribution(graph, mesh, rules, plan, proposed, own)
    anchored = {c.op for c in proposed} | own
    _joins_before_fused(graph, mesh, rules, plan, proposed, anchored)
    proposed += attention_chain_heads(graph, plan, proposed, anchored, rules, mesh)
    anchored = {c.op for c in proposed} | own
    _producers_of_configured(graph, mesh, rules, plan, proposed, anchored)
    _transposes_before_consumers(graph, mesh, plan, proposed, anchored)


def _reached_with_a_redistribution(graph, mesh, rules, plan, proposed, own) -> None:
    """Dimension-changing operators propagation reached with a redistribution, or not at all: follow the input."""
    # rule 2: dimension-changing operators propagation reached with a redistribution, or not at all
    anchored = {c.op for c in proposed} | own
    for op in graph:
        if op.type not in rules.categories.get("dimension_changing", ()) or op.name in anchored \
                or op.type in ("Reshape", "Flatten"):
            continue
        ch = plan.choices[op.name]
        p = ch.provenance
        src = next((x for x in op.inputs if x.kind == "op"), None)
        if src is None:
            continue
        lay = plan.choices[src.ref].outputs[src.index] if src.index < len(plan.choices[src.ref].outputs) else None
        # reached over its own edge with a redistribution, or over another edge (a backward search from a
        # consumer) leaving a redistribution on its input: a reduction gathering what it could reduce locally
        met = p.cost > 0 or (lay is not None and ch.inputs and ch.inputs[0] is not None
                             and lay.shape == ch.inputs[0].shape and not same_placement(lay, ch.inputs[0]))
        if p.direction not in ("default",) and not met:
            continue
        s = follow(cached_rule(op), lay, 0, "in", mesh.size) if lay is not None else None
        if s is None or s.dev_matrix != mesh.shape:
            continue
        why = ("dimension-changing op propagation reached only with a redistribution (edge cost "
               f"{p.cost:.0f}): anchored to follow its input") if p.direction != "default" else \
            "dimension-changing op no anchor reaches: anchored to follow its input"
        proposed.append(Choice(op.name, "2 dimension", "follow_input", why, anchor_of(op.name, s, mesh, op.type)))


def _joins_before_fused(graph, mesh, rules, plan, proposed, anchored) -> None:
    """A fused operator whose input comes from a layout-only Transpose after a joining operator."""
    # rule 2, fused consumers: a fused operator (FlashAttention) whose input comes from a layout-only
    # Transpose after a joining operator (MLA's K = Concat(k_nope, tiled k_pe), then the BNSD Transpose) is
    # handed its layout by both: where two searches meet there, the Transpose alone only moves the
    # redistribution in front of itself. One package per pattern (every layer), kept only if it pays
    for c in list(proposed):
        d = graph.op(c.op)
        if d.type not in rules.categories.get("fused", ()) or d.type in rules.categories.get("norm", ()):
            continue
        drule = cached_rule(d)
        for k, slot in enumerate(drule.slots):
            x = d.inputs[slot] if slot < len(d.inputs) else None
            if x is None or x.kind != "op" or x.ref in anchored or graph.op(x.ref).type != "Transpose":
                continue
            lay = plan.choices[c.op].inputs[k]
            t = graph.op(x.ref)
            src = plan.choices[t.name].outputs[x.index] if x.index < len(plan.choices[t.name].outputs) else None
            if lay is None or src is None:
                continue
            st = follow(cached_rule(t), lay, x.index, "out", mesh.size)
            j = next((y for y in t.inputs if y.kind == "op"), None)
            if st is None or st.dev_matrix != mesh.shape or j is None or j.ref in anchored:
                continue
            u = graph.op(j.ref)
            if u.type in ("Reshape", "Flatten", "Cast") or len([y for y in u.inputs if y.kind == "op"]) < 2:
                continue
            su = follow(cached_rule(u), st.inputs[0], j.index, "out", mesh.size)
            if su is None or su.dev_matrix != mesh.shape:
                continue
            why = (f"joins the inputs of the fused {c.op}, which took them through a redistribution: "
                   f"anchored with the Transpose after it to hand it the layout it takes")
            members = [(t, st, why), (u, su, why)]
            # an input of the join MindSpore cannot set from a neighbour's layout (Tile: MLA's k_pe broadcast
            # over the heads) keeps a generated candidate, whose split rarely matches what the join takes
            # there (a heads split over every device, then an all-to-all into the join): hand it that layout
            urule = cached_rule(u)
            for slot, y in enumerate(u.inputs):
                if y.kind != "op" or y.ref in anchored or slot not in urule.slots \
                        or graph.op(y.ref).type not in NO_LAYOUT_INIT:
                    continue
                want = su.inputs[urule.slots.index(slot)]
                sy = follow(cached_rule(graph.op(y.ref)), want, y.index, "out", mesh.size) \
                    if want is not None else None
                if sy is not None and sy.dev_matrix == mesh.shape:
                    members.append((graph.op(y.ref), sy,
                                    f"{graph.op(y.ref).type} into {u.name}, which joins the inputs of the fused "
                                    f"{c.op}: MindSpore cannot set it from a neighbour's layout, so it is anchored "
                                    f"to hand the join the layout it takes"))
            for op_, sh, why in members:
                anchored.add(op_.name)
                proposed.append(Choice(op_.name, "2 dimension", "follow_output", why,
                                       anchor_of(op_.name, sh, mesh, op_.type), with_op=t.name))


def _producers_of_configured(graph, mesh, rules, plan, proposed, anchored) -> None:
    """A dimension-changing operator whose output reaches a configured operator only through a redistribution."""
    # rule 2, consumer side: a dimension-changing operator whose output reaches a configured operator only
    # through a redistribution MindSpore's search leaves there ("Inconsistency occurred at edge": two seeds'
    # searches met) is anchored to hand that operator the layout it takes
    for src, dst, _cost in plan.inconsistencies:
        if src not in graph or dst not in anchored or src in anchored:
            continue
        op = graph.op(src)
        if op.type not in rules.categories.get("dimension_changing", ()) or op.type in ("Reshape", "Flatten"):
            continue
        d = graph.op(dst)
        slot = next((i for i, x in enumerate(d.inputs) if x.kind == "op" and x.ref == src), None)
        drule = cached_rule(d)
        if slot is None or slot not in drule.slots:
            continue
        j = d.inputs[slot].index
        lay = plan.choices[dst].inputs[drule.slots.index(slot)]
        s = follow(cached_rule(op), lay, j, "out", mesh.size) if lay is not None else None
        if s is None or s.dev_matrix != mesh.shape:
            continue
        anchored.add(src)
        proposed.append(Choice(src, "2 dimension", "follow_output",
                               f"dimension-changing op whose output reaches the configured {dst} only through a "
                               f"redistribution: anchored to hand it the layout it takes",
                               anchor_of(src, s, mesh, op.type)))


def _transposes_before_consumers(graph, mesh, plan, proposed, anchored) -> None:
    """A layout-only Transpose whose every consumer redistributes its output the same way."""
    # ... and a Transpose (a pure layout change) whose every consumer takes its output through the same
    # redistribution (the MoE combine's Transpose back to sequence-first, reached whole from the token
    # permutation, before a sequence-parallel residual add) hands them that layout instead
    for op in graph:
        if op.type != "Transpose" or op.name in anchored or not op.outputs:
            continue
        out = plan.choices[op.name].outputs[0] if plan.choices[op.name].outputs else None
        takes = set()
        for e in graph.out_edges(op.name):
            d = graph.op(e.dst)
            drule = cached_rule(d)
            if e.in_slot not in drule.slots or d.type in ("Reshape", "Flatten"):
                takes = None
                break
            lay = plan.choices[e.dst].inputs[drule.slots.index(e.in_slot)]
            takes.add(lay)
        if not takes or len(takes) != 1 or out is None:
            continue
        lay = next(iter(takes))
        if lay is None or same_placement(out, lay):
            continue
        s = follow(cached_rule(op), lay, 0, "out", mesh.size)
        if s is None or s.dev_matrix != mesh.shape:
            continue
        anchored.add(op.name)
        proposed.append(Choice(op.name, "2 dimension", "follow_output",
                               "layout-only Transpose whose every consumer redistributes its output the same way: "
                               "anchored to hand them the layout they take", anchor_of(op.name, s, mesh, op.type)))
