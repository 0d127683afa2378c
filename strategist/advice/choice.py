"""What the advisor hands back: each proposed anchor (:class:`Choice`) and the advice (:class:`Advice`)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..vocab.graph import OpGraph
from ..vocab.mesh import Mesh
from ..vocab.anchors import Anchor
from ..engine.plan import Plan
from ..files.rules import Rules


@dataclass
class Choice:
    op: str
    rule: str            # "1 weight", "2 dimension", "3 boundary", "4 fused"
    template: str
    why: str
    anchor: Anchor
    needed: str = ""     # why it survived minimality
    declared: bool = False   # from a user-declared --boundary: kept even when it does not pay
    required: bool = False   # MindSpore generates no strategy for the operator: every plan configures it
    with_op: str = ""        # tested by minimality together with this operator's anchor (a companion)
    fallback: "Choice | None" = None   # what replaces it when its package is dropped (sequence parallel -> plain)
    alternative: "Choice | None" = None  # another layout for the same operator, taken where the step is faster
    package: list = field(default_factory=list)   # an alternative's companions, taken with it


@dataclass
class Advice:
    graph: OpGraph
    mesh: Mesh
    rules: Rules
    chosen: list[Choice]                  # the minimal set, in graph order
    dropped: list[tuple[Choice, str]]     # proposed then removed, with the reason
    plan: Plan
    baseline: Plan                        # no anchors at all
    semi: Plan                            # every operator configured
    existing: list[tuple[str, str, str]]  # (op, status, detail) for the model's own shard() calls
    notes: list[str] = field(default_factory=list)
    #: anchors on operators created inside installed packages -> the user's line that configures each
    #: (``strategist.source.installed_anchors``), which the report names in place of the package's line
    user_sites: dict[str, str] = field(default_factory=dict)

    @property
    def anchors(self) -> dict[str, Anchor]:
        return {c.op: c.anchor for c in self.chosen}

    def configurations(self) -> dict[str, dict]:
        """The three configurations compared -- the advice, no anchors, every operator configured -- each with its
        anchors, communication, compute, step estimate (the schedule's makespan; the serial sum, communication plus
        compute with nothing hidden, named for what it is), MindSpore's cost, conflicts, memory and schedule.
        Computed once per advice (every report reads them)."""
        if self._configurations is None:
            self._configurations = _configurations(self)
        return self._configurations

    _configurations: dict | None = field(default=None, init=False, repr=False, compare=False)


def _configurations(advice: Advice) -> dict[str, dict]:
    from ..cost.step import estimate
    from ..engine.search.caches import no_cyclic_gc
    from .footprint import memory
    out = {}
    for label, p, n in (("advice", advice.plan, len(advice.chosen)), ("no anchors", advice.baseline, 0),
                        ("every operator configured", advice.semi, len(advice.semi.anchors))):
        t = p.totals()
        out[label] = {"anchors": n, "communication_bytes": t["total_bytes"],
                      "communication_seconds": t["total_seconds"], "compute_seconds": t["compute_seconds"],
                      "step_seconds": t["step_seconds"], "serial_seconds": t["serial_step_seconds"],
                      "mindspore_cost": t["redistribution_ms_cost"],
                      "conflicts": len(p.conflicts), "memory": memory(p)}
        with no_cyclic_gc():            # many small acyclic tuples: no collector walks over MindSpore's objects
            step = estimate(p)
            if step is not None:
                out[label].update(schedule=step.schedule, throughput=step.throughput, step_seconds=step.step_s,
                                  memory=step.memory, memory_upper_bound=memory(p))
    return out


def tuple_equivalent(ch, mesh: Mesh) -> bool:
    """Does the plain tuple strategy of plan entry ``ch`` put the same data on the same devices as its advised
    layouts? (False where the operator refuses the tuple.)"""
    from ..errors import StrategyError
    from ..engine.rules.sharding import shard
    from ..vocab.layout import squeeze
    try:
        s = shard(ch.op, ch.strategy, mesh.size)
    except StrategyError:
        return False
    return all(squeeze(a) == squeeze(b) or a.same_as(b) for a, b in zip(s.inputs, ch.inputs))
