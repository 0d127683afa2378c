"""What (c)'s layout would cost on top of the advice: per differing operator and per region, and taken region by
region toward (c)."""
from __future__ import annotations

from ..advice.minimality import group_key, same_plan
from ..advice.worth import slower
from ..errors import StrategistError
from ..engine.plan import Plan
from ..vocab.graph import OpGraph
from ..vocab.mesh import Mesh
from .agreement import pattern_groups, reference_anchor, agreement, regions
from .model import Column, Step


def what_if_plan(col: Column, graph: OpGraph, plan: Plan, ref: Plan, mesh: Mesh, run) -> int:
    """Each disagreement's ``if_reference``: the step estimate's change when the operator -- with the others of
    its pattern across repeated layers that disagree too -- is anchored with (c)'s layout on top of ``plan``'s
    anchors: whether the experts' choice there would have been faster (one propagation per pattern). Casts are
    not tried (MindSpore ignores a Cast's shard()). Returns the number of propagations."""
    base = dict(plan.anchors)
    t0 = plan.totals()["step_seconds"]
    for d in col.disagreements:
        d.held = graph.op(d.op).held
    groups = pattern_groups(col, ref)
    for key in sorted(groups, key=lambda k: graph.op(groups[k][0].op).topo_index):
        anchors = dict(base)
        for d in groups[key]:
            anchors[d.op] = reference_anchor(d.op, ref, mesh, d.type)
        try:
            q = run(anchors)
        except StrategistError:
            continue
        for d in groups[key]:
            d.if_reference = q.totals()["step_seconds"] - t0
    return len(groups)


def what_if_regions(col: Column, graph: OpGraph, plan: Plan, ref: Plan, mesh: Mesh, run) -> int:
    """``col.regions`` priced: each region's non-Cast operators anchored as (c) has them on top of ``plan``'s
    anchors, one propagation per region (a region of one pattern takes its operators' own ``if_reference``); then
    every difference at once (``col.if_reference_everywhere``). Returns the number of propagations."""
    col.regions = regions(col, graph, ref)
    groups = pattern_groups(col, ref)
    settable = {d.op: d for g in groups.values() for d in g}
    base, t0, n = dict(plan.anchors), plan.totals()["step_seconds"], 0
    everywhere = dict(base)
    for r in col.regions:
        ds = [settable[o] for o in r.ops if o in settable]
        if not ds:
            r.unpriced = "Casts only (MindSpore ignores a Cast's shard(); they follow their inputs)"
            continue
        anchors = {d.op: reference_anchor(d.op, ref, mesh, d.type) for d in ds}
        everywhere.update(anchors)
        keys = {group_key(d.op, graph) for d in ds}
        whole = len(keys) == 1 and {d.op for d in ds} == {d.op for d in groups[keys.pop()]}
        if whole and ds[0].if_reference is not None:
            r.if_reference = ds[0].if_reference        # the same anchors as that pattern's own "step if (c)'s"
            continue
        n += 1
        try:
            r.if_reference = run({**base, **anchors}).totals()["step_seconds"] - t0
        except StrategistError as err:
            r.unpriced = "(c)'s layout refused on top of the advice: " + str(err).splitlines()[0]
    if len(everywhere) > len(base):
        n += 1
        try:
            col.if_reference_everywhere = run(everywhere).totals()["step_seconds"] - t0
        except StrategistError:
            pass
    return n


def refused_notes(experts) -> list[str]:
    """The experts' strategies an operator of the graph cannot take, read and skipped (the column is without them):
    a primitive configured once and used by operators of other shapes (deepseek3's rotary Mul on MLA's q_pe and its
    one-head k_pe, which MindSpore refuses too), or a shape the tp=1 build has otherwise (the router's
    ``(dp, -1, E)`` reshape)."""
    return [f"the experts' strategy at {note}" for _, _, note in getattr(experts, "refused", [])]


def steps_toward_reference(col: Column, plan: Plan, ref: Plan, mesh: Mesh, run, ref_costs, ref_step: float,
                      max_anchors: int | None) -> int:
    """How close to (c) the advice can come, and at what price: (c)'s layout taken region by region on top of the
    advice, the cheapest per operator first (``Region.if_reference`` over its operators), each step priced and its
    agreement counted again with every region before it kept (a region refused on top of the others is
    skipped; an anchored pattern the others give anyway is dropped, as minimality drops it). Only what a shard()
    line can carry is anchored: a functional call of a region (MindFormers' Morph bodies, the routers' mint
    calls) follows its neighbours or not. ``col.closest``:
    the step agreeing most with a step estimate no slower than (c)'s and no more anchors than ``max_anchors``
    ((b)'s; None: no limit). Returns the number of propagations."""
    if not col.regions:
        return 0
    groups = pattern_groups(col, ref)
    settable = {d.op: d for g in groups.values() for d in g}
    base = dict(plan.anchors)
    held = {o for o, d in settable.items() if d.held}
    ways = [r for r in col.regions if r.if_reference is not None and held.intersection(r.ops)]
    ways.sort(key=lambda r: (max(r.if_reference, 0.0) / len(r.ops), r.if_reference, r.name))
    scratch = Column("toward", "")
    col.toward = [Step("", col.agreed, col.total, col.anchors, plan.totals()["step_seconds"])]
    taken: dict = {}
    n = 0
    for r in ways:
        more = {o: reference_anchor(o, ref, mesh, settable[o].type) for o in r.ops if o in held}
        n += 1
        try:
            q = run({**base, **taken, **more})
        except StrategistError:
            continue
        # a pattern the others give anyway is no line to write: tried without, one pattern at a time in graph order
        for key in dict.fromkeys(group_key(o, plan.graph) for o in more if o not in base):
            rest = {o: v for o, v in more.items() if o in base or group_key(o, plan.graph) != key}
            n += 1
            try:
                q2 = run({**base, **taken, **rest})
            except StrategistError:
                continue
            if same_plan(q, q2):
                more, q = rest, q2
        taken.update(more)
        agreement(q, ref, scratch, ref_costs)
        col.toward.append(Step(r.name, scratch.agreed, scratch.total,
                               col.anchors + sum(1 for o in taken if o not in base), q.totals()["step_seconds"],
                               list(more)))
    within = [t for t in col.toward if not slower(t.step_seconds, ref_step)
              and (max_anchors is None or t.anchors <= max_anchors)]
    col.closest = max(within, key=lambda t: (t.agreed, -t.anchors, -t.step_seconds), default=None)
    return n
