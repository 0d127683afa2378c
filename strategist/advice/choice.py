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
