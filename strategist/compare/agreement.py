"""A plan's agreement with the reference plan (c), operator by operator, and its differences joined into regions
(operators joined by edges, each repeated layer's together)."""
from __future__ import annotations

from ..advice.advisor import anchor_of, memory
from ..advice.minimality import group_key
from ..engine.plan import Plan
from ..engine.search.layout_eq import same_placement
from ..engine.semi_auto import BATCH, FOLLOW
from ..vocab.graph import OpGraph
from ..vocab.mesh import Mesh
from .model import Column, Disagreement, Region


def op_costs(plan: Plan) -> dict[str, tuple[float, float]]:
    """Per operator: its own communication plus the redistributions into its inputs (bytes, seconds)."""
    out: dict[str, list[float]] = {}
    for e in plan.edges:
        v = out.setdefault(e.dst, [0.0, 0.0])
        v[0] += e.bytes
        v[1] += e.seconds
    for name, c in plan.op_costs.items():
        v = out.setdefault(name, [0.0, 0.0])
        v[0] += c.bytes
        v[1] += c.seconds
    return {k: (v[0], v[1]) for k, v in out.items()}


def same_choice(a, b) -> bool:
    """Two operator choices place every input and output identically."""
    if a.sharding is None or b.sharding is None:
        return a.sharding is None and b.sharding is None
    return len(a.inputs) == len(b.inputs) and len(a.outputs) == len(b.outputs) and all(
        same_placement(x, y) for x, y in zip(a.inputs + a.outputs, b.inputs + b.outputs))


def agreement(plan: Plan, ref: Plan, col: Column, ref_costs=None) -> None:
    """Fill ``col``'s agreement with ``ref`` over the operators that have a strategy (Reshape has none), and
    over those of them ``ref`` anchors (the experts' own ``shard()`` calls; the rest of (c) is propagated).
    The operators the model's code configures in every parallel build (``graph.parallel_only``: MindFormers'
    loss), are the same in every column and not counted."""
    mine, theirs = op_costs(plan), ref_costs if ref_costs is not None else op_costs(ref)
    col.agreed = col.total = col.configured_agreed = col.configured_total = 0
    col.disagreements = []
    own = ref.graph.parallel_only or {}
    for name, rc in ref.choices.items():
        if rc.sharding is None or name in own:
            continue        # (the operators the model's code configures in every parallel build: alike everywhere)
        configured = name in ref.anchors
        col.total += 1
        col.configured_total += configured
        ch = plan.choices[name]
        if same_choice(ch, rc):
            col.agreed += 1
            col.configured_agreed += configured
            continue
        b, s = mine.get(name, (0.0, 0.0))
        rb, rs = theirs.get(name, (0.0, 0.0))
        col.disagreements.append(Disagreement(name, rc.op.type, ch.strategy, rc.strategy, b, s, rb, rs, configured,
                                              _decided_by(rc, configured)))


def _decided_by(choice, configured: bool) -> str:
    if configured:
        return "experts"
    return {BATCH: "batch strategy", FOLLOW: "passes its input on"}.get(choice.provenance.direction, "propagation")


def fill_column(col: Column, plan: Plan) -> None:
    col.plan = plan
    col.totals = plan.totals()
    col.memory = memory(plan)


def pattern_groups(col: Column, ref: Plan) -> dict[str, list[Disagreement]]:
    """``col``'s disagreements an anchor can set as (c) has them -- not Casts (MindSpore ignores a Cast's shard())
    and with a strategy in (c) -- by pattern across repeated layers."""
    groups: dict[str, list[Disagreement]] = {}
    for d in col.disagreements:
        rc = ref.choices.get(d.op)
        if d.type != "Cast" and rc is not None and rc.sharding is not None:
            groups.setdefault(group_key(d.op, ref.graph), []).append(d)
    return groups


def reference_anchor(op: str, ref: Plan, mesh: Mesh, op_type: str):
    return ref.anchors.get(op) or anchor_of(op, ref.choices[op].sharding, mesh, op_type)


def regions(col: Column, graph: OpGraph, ref: Plan) -> list[Region]:
    """``col``'s disagreements as connected regions: two differing operators are joined where one reads the
    other's output, directly or through operators that have no strategy (Reshape); a region and its copies in
    the repeated layers (the same patterns) are one :class:`Region`. In graph order of their first operator."""
    differ = {d.op: d for d in col.disagreements}
    parent = {n: n for n in differ}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def producers(name, seen):
        for x in graph.op(name).inputs:
            if x.kind != "op" or x.ref in seen:
                continue
            seen.add(x.ref)
            if x.ref in differ:
                yield x.ref
            elif (rc := ref.choices.get(x.ref)) is None or rc.sharding is None:
                yield from producers(x.ref, seen)
    for n in differ:
        for p in producers(n, set()):
            parent[find(p)] = find(n)
    comps: dict[str, list[str]] = {}
    for n in differ:
        comps.setdefault(find(n), []).append(n)
    order = lambda n: graph.op(n).topo_index
    merged: dict[tuple, list[str]] = {}
    for ops in comps.values():
        key = tuple(dict.fromkeys(group_key(n, graph) for n in sorted(ops, key=order)))    # patterns in graph order
        merged.setdefault(key, []).extend(ops)
    out = []
    for key, ops in merged.items():
        ops = sorted(ops, key=order)
        named = [n for n in ops if differ[n].type != "Cast"] or ops
        out.append(Region(ops, list(key), held=all(differ[n].held for n in ops if differ[n].type != "Cast"),
                          name=group_key(named[0], graph)))
    return sorted(out, key=lambda r: order(r.ops[0]))
