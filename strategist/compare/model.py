"""What ``strategist compare`` hands back: per column (:class:`Column`) its plan's figures, agreement with the
reference and the operators that differ (:class:`Disagreement`), grouped into regions (:class:`Region`), and the
steps toward the reference (:class:`Step`); the whole comparison (:class:`Comparison3`)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..advice.worth import PAY_FLOOR
from ..engine.plan import Plan
from ..report.compare import comparison_text
from ..vocab.mesh import Mesh


DEFAULT_DATASET = "full_batch"


@dataclass
class Disagreement:
    op: str
    type: str
    strategy: tuple | None            # this column's
    reference: tuple | None           # (c)'s
    bytes: float                      # this column: the op's own communication + its incoming redistributions
    seconds: float
    ref_bytes: float                  # the same under (c)
    ref_seconds: float
    configured: bool = False          # the experts configured it in (c)
    #: who decided (c)'s strategy: "experts" (a shard()), "batch strategy" (semi_auto's default for an operator
    #: no shard() configures) or "passes its input on" (an unconfigured Cast)
    reference_by: str = ""
    #: (a) only: the step estimate's change if this operator -- with the others of its pattern across repeated
    #: layers -- were anchored with (c)'s layout on top of the advice (seconds; None: not tried, e.g. a Cast,
    #: whose shard() MindSpore ignores, or MindSpore's search refuses it)
    if_reference: float | None = None
    #: a Cell holds it: a shard() line can carry the layout (a functional call's only goes in an anchors file)
    held: bool = True

    def to_dict(self) -> dict:
        return {"op": self.op, "type": self.type, "strategy": _lists(self.strategy),
                "reference": _lists(self.reference), "bytes": self.bytes, "seconds": self.seconds,
                "reference_bytes": self.ref_bytes, "reference_seconds": self.ref_seconds,
                "configured_in_reference": self.configured, "reference_by": self.reference_by,
                "step_change_if_reference": self.if_reference, "held": self.held}


@dataclass
class Region:
    """A connected set of (a)'s differing operators -- joined by graph edges directly or through operators with no
    strategy (Reshapes) -- together with the same set in every repeated layer, priced at once with (c)'s layout:
    the experts' choices often only pay together (a router chain split by tokens pays its gather once)."""
    ops: list[str]                    # every differing operator of the region, each repeated layer's, graph order
    patterns: list[str]               # their patterns across layers (``layers.*``), graph order
    #: the step estimate's change with every non-Cast operator of the region anchored as (c) has it on top of the
    #: advice (seconds; None: nothing to anchor (Casts only) or MindSpore's search refuses it)
    if_reference: float | None = None
    held: bool = True                 # a shard() line can carry every anchor the region takes
    name: str = ""                    # its first pattern that is not a Cast's (the first pattern if all are)
    unpriced: str = ""                # why ``if_reference`` is None

    def to_dict(self) -> dict:
        return {"name": self.name, "ops": self.ops, "patterns": self.patterns, "step_change_if_reference": self.if_reference,
                "held": self.held, "unpriced": self.unpriced}


@dataclass
class Step:
    """One step of the way from the advice toward (c) (:func:`steps_toward_reference`): (c)'s layout taken on one more
    region, on top of the advice and the regions before it."""
    region: str                       # the region taken ("" for the advice itself)
    agreed: int
    total: int
    anchors: int                      # the advice's anchors and every operator anchored as (c) so far
    step_seconds: float
    anchored: list[str] = field(default_factory=list)     # the operators this step anchors as (c) has them

    @property
    def agreement(self) -> float:
        return self.agreed / self.total if self.total else 0.0

    def to_dict(self) -> dict:
        return {"region": self.region, "agreed": self.agreed, "operators": self.total,
                "agreement": self.agreement, "anchors": self.anchors, "step_seconds": self.step_seconds,
                "anchored": self.anchored}


@dataclass
class Column:
    key: str
    title: str
    anchors: int | None = None
    plan: Plan | None = None
    totals: dict = field(default_factory=dict)
    memory: dict = field(default_factory=dict)
    agreed: int = 0
    total: int = 0
    configured_agreed: int = 0        # over the operators the experts configured in (c) (their shard() calls)
    configured_total: int = 0
    disagreements: list[Disagreement] = field(default_factory=list)
    #: (a) only: the disagreements by connected region (:func:`what_if_regions`), and the step estimate's change
    #: with (c)'s layout at every one of them at once (seconds)
    regions: list[Region] = field(default_factory=list)
    if_reference_everywhere: float | None = None
    #: (a) only: the way toward (c), region by region, the cheapest per operator first (:func:`steps_toward_reference`);
    #: ``closest``: its step agreeing most within (c)'s step estimate and (b)'s anchors (None: not computed)
    toward: list[Step] = field(default_factory=list)
    closest: Step | None = None
    seconds: float = 0.0              # time to produce this column (advise / experts' build + propagation)
    #: timings beyond ``seconds`` (the what-if pricing, MindSpore's compile): (what, seconds), not in the report
    timings: list[tuple[str, float]] = field(default_factory=list)
    error: str | None = None          # the column could not be produced (one line)
    notes: list[str] = field(default_factory=list)

    @property
    def agreement(self) -> float | None:
        return self.agreed / self.total if self.total else None

    @property
    def quiet_disagreements(self) -> int:
        """Differing operators that move no data in either plan: no communication of their own and none into
        them, here or in (c) (their layouts may still shift costs onto their neighbours)."""
        return sum(1 for d in self.disagreements if not d.bytes and not d.ref_bytes)

    @property
    def reference_faster(self) -> list[Disagreement]:
        """The disagreements where anchoring (c)'s layout on top of this column's plan speeds the step up by more
        than the step model resolves (:data:`strategist.advice.advisor.PAY_FLOOR`)."""
        return [d for d in self.disagreements if d.if_reference is not None and d.if_reference < -PAY_FLOOR]

    @property
    def regions_reference_faster(self) -> list[Region]:
        """The regions where (c)'s layout, all of the region at once on top of this column's plan, speeds the step
        up by more than the step model resolves."""
        return [r for r in self.regions if r.if_reference is not None and r.if_reference < -PAY_FLOOR]

    @property
    def configured_agreement(self) -> float | None:
        """Agreement over the operators the experts configured in (c)."""
        return self.configured_agreed / self.configured_total if self.configured_total else None

    def to_dict(self, max_rows: int = 0) -> dict:
        t = self.totals
        dis = self.disagreements[:max_rows] if max_rows else self.disagreements
        return {"key": self.key, "title": self.title, "anchors": self.anchors, "error": self.error,
                "communication_bytes": t.get("total_bytes"), "communication_seconds": t.get("total_seconds"),
                "step_seconds": t.get("step_seconds"), "compute_seconds": t.get("compute_seconds"),
                "memory": self.memory, "agreed": self.agreed, "operators": self.total,
                "agreement": self.agreement, "configured_agreed": self.configured_agreed,
                "configured_operators": self.configured_total,
                "configured_agreement": self.configured_agreement,
                "disagreements": [d.to_dict() for d in dis], "disagreement_count": len(self.disagreements),
                "disagreements_moving_no_data": self.quiet_disagreements,
                "disagreements_reference_faster": len(self.reference_faster),
                "regions": [r.to_dict() for r in self.regions],
                "regions_reference_faster": len(self.regions_reference_faster),
                "step_change_if_reference_everywhere": self.if_reference_everywhere,
                "toward_reference": [t.to_dict() for t in self.toward],
                "closest_within_reference": self.closest.to_dict() if self.closest else None,
                "notes": self.notes}


@dataclass
class Comparison3:
    model: str
    mesh: Mesh
    dataset_strategy: object
    columns: dict[str, Column]
    graph_ops: int = 0
    extract_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    advice: object = None             # the Advice behind (a)
    #: what its steps are ("step estimate": the schedule's, the default; "serial sum" with --choose-by-serial-sum)
    measure: str = "step estimate"

    def __getitem__(self, key: str) -> Column:
        return self.columns[key]

    def step_ratio(self) -> float | None:
        """Step estimate of (a) over (c)."""
        a, c = self.columns["a"].totals.get("step_seconds"), self.columns["c"].totals.get("step_seconds")
        return a / c if a is not None and c else None

    def to_dict(self, max_rows: int = 0) -> dict:
        return {"model": self.model, "mesh": str(self.mesh), "devices": self.mesh.size,
                "dataset_strategy": self.dataset_strategy if isinstance(self.dataset_strategy, str)
                else {k: list(v) for k, v in self.dataset_strategy.items()},
                "operators": self.graph_ops,
                "step_ratio_a_over_c": self.step_ratio(), "measure": self.measure,
                "columns": {k: c.to_dict(max_rows) for k, c in self.columns.items()}, "notes": self.notes}

    def timings(self) -> str:
        """How long each part took, one line (kept out of the report: the same inputs give the same report)."""
        cols = [c for c in self.columns.values() if not c.error]
        return "compare: extraction {:.1f} s; ".format(self.extract_seconds) + "; ".join(
            f"{c.title.split()[0]} {c.seconds:.1f} s" + "".join(f", {w} {t:.1f} s" for w, t in c.timings)
            for c in cols)

    def to_json(self, max_rows: int = 0) -> str:
        return json.dumps(self.to_dict(max_rows), indent=1, sort_keys=False, default=str)

    def text(self, max_rows: int = 20, markdown: bool = False) -> str:
        """The report as console text, or Markdown (``markdown``: its tables as Markdown tables):
        :func:`strategist.report.compare.comparison_text`."""
        return comparison_text(self, max_rows, markdown)


def _lists(s):
    return None if s is None else [list(x) for x in s]
