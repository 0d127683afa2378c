"""``strategist compare``: the advice beside the experts who wrote a MindFormers model (issue 11 item 4).

Three plans of one graph on one mesh, side by side:

(a) strategist's advice (:func:`strategist.advice.advisor.advise`);
(b) MindFormers' ``sharding_propagation()`` anchors, propagated by strategist -- and, with
    ``verify=True``, by MindSpore itself in a child process (:mod:`strategist.verify`);
(c) MindFormers' full ``shard()`` strategies, taken as the reference plan, as MindFormers runs them: in
    ``semi_auto_parallel`` (its configs' ``parallel_mode: 1``). Every operator the experts configured keeps its
    strategy; every other one takes MindSpore's batch strategy, and an unconfigured Cast passes its input's
    layout on (:mod:`strategist.engine.semi_auto`). Nothing is propagated.

For each: the anchors, communication bytes and time, the step estimate, per-device memory
(:func:`strategist.advice.advisor.memory`), and the share of operators whose layouts equal (c)'s, with every
disagreement listed with both strategies and what the operator costs under each.

Dataset strategy. MindFormers feeds ``[B, S]`` token ids split ``(dp, 1)`` and replicated over tp; MindSpore's
auto_parallel refuses a dataset strategy that leaves devices unused, and ``data_parallel`` splits the batch over
*every* device, which none of the three plans does (the ids are reshaped to ``[B*S]`` and the Embedding refuses
split indices, so that split stops at the first operator). The comparison therefore uses ``full_batch`` for all
three: every device holds the whole micro-batch and the first operators take their slice locally, without
communication -- the same bytes as MindFormers' ``(dp, 1)`` input, and the same for (a), (b) and (c), so the
columns differ only in the operators' strategies. ``dataset_strategy=`` overrides it.

>>> cmp = compare_model("mindformers:qwen3/pretrain_qwen3_32b_4k.yaml", "dp=2,tp=4", layers=2)  # doctest: +SKIP
>>> print(cmp.text())                                                                          # doctest: +SKIP
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from .advice.minimality import group_key, same_plan
from .errors import StrategistError
from .vocab.graph import OpGraph
from .vocab.mesh import Mesh
from .files.hardware import load_hardware
from .propagate import propagate
from .engine.search.layout_eq import same_placement
from .advice.advisor import advise, anchor_of, load_rules, memory
from .advice.worth import PAY_FLOOR, slower
from .engine.plan import Plan, parallel_only_anchors
from .engine.semi_auto import BATCH, FOLLOW
from .propagate import semi_auto_plan
from .report.render import human_bytes, render_table, strategy_text
from .verify.compare import compare as vcompare
from .verify.runner import mindspore_plan

DEFAULT_DATASET = "full_batch"
COLUMNS = ("a", "b", "b_ms", "c")
TITLES = {"a": "(a) strategist advice", "b": "(b) MindFormers sharding_propagation(), strategist",
          "b_ms": "(b') MindFormers sharding_propagation(), MindSpore", "c": "(c) MindFormers shard() (reference)"}


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
        """The report as console text, or Markdown (``markdown``: its tables as Markdown tables)."""
        cols = [self.columns[k] for k in COLUMNS if k in self.columns]
        out = [f"model: {self.model}   mesh: {self.mesh} ({self.mesh.size} devices)   operators: {self.graph_ops}   "
               f"dataset: {self.dataset_strategy}", ""]

        def cell(c: Column, f):
            if c.error:
                return "-"
            try:
                return f(c)
            except (TypeError, KeyError):
                return "-"
        rows = [
            ["anchors"] + [cell(c, lambda c: str(c.anchors)) for c in cols],
            ["communication / step"] + [cell(c, lambda c: human_bytes(c.totals["total_bytes"])) for c in cols],
            ["communication time"] + [cell(c, lambda c: f"{c.totals['total_seconds'] * 1e3:.3f} ms") for c in cols],
            # compare weighs plans by the advisor's measure (the schedule's step, or the serial sum): named so
            [self.measure] + [cell(c, lambda c: f"{c.totals['step_seconds'] * 1e3:.3f} ms") for c in cols],
            ["memory / device"] + [cell(c, lambda c: human_bytes(c.memory["total"])) for c in cols],
            ["agreement with (c)"] + [cell(c, lambda c: f"{c.agreed}/{c.total} ({100 * c.agreement:.1f} %)")
                                      for c in cols],
            ["differing ops moving no data"] + [cell(c, lambda c: f"{c.quiet_disagreements} of "
                                                                 f"{len(c.disagreements)}") for c in cols],
            ["on the experts' configured ops"] + [
                cell(c, lambda c: f"{c.configured_agreed}/{c.configured_total} "
                                  f"({100 * c.configured_agreement:.1f} %)") for c in cols],
        ]
        out += render_table([""] + [c.title for c in cols], rows, markdown)
        r = self.step_ratio()
        if r is not None:
            out.append(f"{self.measure} (a)/(c): {r:.3f}")
        for c in cols:
            if c.error:
                out.append(f"{c.title}: not available: {c.error}")
        for c in cols:
            if c.key == "c" or c.error or not c.disagreements:
                continue
            out += ["", f"{c.title}: {len(c.disagreements)} operators differ from (c)"
                    + (f" (first {max_rows})" if max_rows and len(c.disagreements) > max_rows else "")]
            shown = c.disagreements[:max_rows] if max_rows else c.disagreements
            what_if = c.key == "a" and any(d.if_reference is not None for d in c.disagreements)
            out += render_table(["operator", "type", "strategy", "(c) strategy", "(c) by", "comm", "(c) comm"]
                                + (["step if (c)'s"] if what_if else []),
                                [[d.op, d.type, strategy_text(d.strategy), strategy_text(d.reference),
                                  d.reference_by or ("experts" if d.configured else "propagation"),
                                  human_bytes(d.bytes), human_bytes(d.ref_bytes)]
                                 + ([_what_if_text(d)] if what_if else []) for d in shown], markdown)
            if what_if:
                faster = c.reference_faster
                out.append(f"step if (c)'s: the step estimate's change with the operator (and the same operator of "
                           f"every repeated layer) anchored as (c) has it, on top of the advice (* a functional "
                           f"call: no shard() line can carry it); "
                           f"{len(faster)} faster" + (": " + patterns_text(faster, getattr(c.plan, "graph", None)) if faster else ""))
            if c.key == "a" and c.regions:
                out += _regions_text(c, max_rows, markdown)
            if c.key == "a" and len(c.toward) > 1:
                out += _toward_text(c, self.columns["c"].totals.get("step_seconds"), self.columns["b"], self.measure,
                                    markdown)
        notes = self.notes + [f"{c.key}: {n}" for c in cols for n in c.notes]
        if notes:
            out += ["", "notes:"] + [f"  {n}" for n in notes]
        return "\n".join(out) + "\n"


def patterns_text(ds: list[Disagreement], graph=None) -> str:
    """The operators of ``ds`` one pattern across repeated layers at a time (``layers.*`` and how many), in order."""
    groups: dict[str, list[Disagreement]] = {}
    for d in ds:
        groups.setdefault(group_key(d.op, graph), []).append(d)
    return ", ".join((key if len(g) > 1 else g[0].op) + (f" ({len(g)} layers)" if len(g) > 1 else "")
                     + ("" if g[0].held else " (functional call: no shard() line)") for key, g in groups.items())


def _regions_text(c: Column, max_rows: int, markdown: bool = False) -> list[str]:
    priced = [r for r in c.regions if r.if_reference is not None]
    faster = c.regions_reference_faster
    out = ["", f"{c.title}: its differences by region (differing operators joined by edges, each repeated layer's "
               f"together), (c)'s layout on the whole region on top of the advice: {len(c.regions)} regions, "
               f"{len(priced)} priced, {len(faster)} faster"]
    shown = sorted(priced, key=lambda r: (r.if_reference, r.patterns)) + [r for r in c.regions if r.if_reference is None]
    shown = shown[:max_rows] if max_rows else shown
    out += render_table(["region (its first operator)", "patterns", "operators", "step if (c)'s"],
                        [[r.name, str(len(r.patterns)), str(len(r.ops)),
                          f"{r.if_reference * 1e3:+.3f} ms" + ("" if r.held else " *") if r.if_reference is not None
                          else "- " + r.unpriced] for r in shown], markdown)
    if c.if_reference_everywhere is not None:
        worth = "faster" if c.if_reference_everywhere < -PAY_FLOOR else "no faster"
        out.append(f"(c)'s layout at every difference at once, on top of the advice: "
                   f"{c.if_reference_everywhere * 1e3:+.3f} ms ({worth})")
    return out


def _toward_text(c: Column, ref_step: float | None, b: Column, measure: str, markdown: bool = False) -> list[str]:
    functional = sum(not d.held for d in c.disagreements if d.type != "Cast")
    out = ["", f"{c.title} toward (c): (c)'s layout region by region on top of the advice, the cheapest per "
               f"operator first, each with the regions before it"
           + (f"; a functional call is anchored by no line ({functional} of the differing operators), it follows "
              f"or not" if functional else "")]
    ratio = (lambda t: f"{t.step_seconds / ref_step:.3f}") if ref_step else (lambda t: "-")
    out += render_table(["region taken", "agreement with (c)", "anchors", measure, f"{measure} / (c)'s"],
                        [[t.region or "(the advice)", f"{t.agreed}/{t.total} ({100 * t.agreement:.1f} %)",
                          str(t.anchors), f"{t.step_seconds * 1e3:.3f} ms", ratio(t)] for t in c.toward], markdown)
    limit = "" if b.error or b.anchors is None else f" and no more anchors than (b) ({b.anchors})"
    t = c.closest
    out.append(f"closest to (c) with a step no slower than (c)'s{limit}: "
               + (f"{t.agreed}/{t.total} ({100 * t.agreement:.1f} %), {t.anchors} anchors, "
                  f"step {t.step_seconds * 1e3:.3f} ms" + (f" (after {t.region})" if t.region else " (the advice)")
                  if t else "none"))
    return out


def _what_if_text(d: Disagreement) -> str:
    if d.if_reference is None:
        return "-"
    return f"{d.if_reference * 1e3:+.3f} ms" + ("" if d.held else " *")


def _lists(s):
    return None if s is None else [list(x) for x in s]


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


def _fill(col: Column, plan: Plan) -> None:
    col.plan = plan
    col.totals = plan.totals()
    col.memory = memory(plan)


def compare_model(model: str, mesh: Mesh | str, *, layers: int | None = None, seq: int | None = None,
                  batch: int | None = None, overrides: dict | None = None, graph: OpGraph | None = None,
                  experts: dict | None = None, hardware: str | None = "atlas-800t-a2",
                  dataset_strategy=DEFAULT_DATASET, verify: bool = False, verify_timeout: float = 600,
                  rules=None, fast_advice: bool = False, what_if: bool = True) -> Comparison3:
    """(a) advice, (b) the experts' ``sharding_propagation()`` anchors propagated (and verified), (c) their
    full ``shard()`` as the reference, for a MindFormers ``model`` on ``mesh``.

    ``experts``: ``{"semi_auto": Experts, "propagation": Experts}`` when already read (the bench reuses
    them); ``graph``: the tp=1 graph when already extracted. ``fast_advice``: on a replicated graph
    (:func:`strategist.frontend.mindformers.replicate_layers`), advise on the compiled layers and copy the anchors.
    Off by default: (a) is then exactly what ``strategist advise`` prints. The copy matched the whole graph's advice
    on qwen3 (4 and 64 layers), not on glm4 at 40 layers, dp=8,tp=8: choices the 2 compiled layers make against
    the embedding and head (the attention's layout) do not scale to 40 layers (3466 ms copied, 2509 ms whole,
    the experts' 3314 ms); the whole graph's advice takes 12 s on qwen3's 64 layers.
    ``what_if``: price each of (a)'s disagreements with (c)'s layout instead (:func:`what_if_plan`).
    """
    from .frontend.mindformers import expert_strategies, is_mindformers_ref, load_mindformers
    if not is_mindformers_ref(model):
        raise StrategistError(f"compare needs a MindFormers model (mindformers:<config.yaml> or a YAML path), "
                              f"not {model!r}: its experts' strategies are the yardstick")
    mesh = Mesh.parse(mesh) if isinstance(mesh, str) else mesh
    hw = load_hardware(hardware) if hardware else None
    opts = dict(layers=layers, seq=seq, batch=batch, overrides=overrides)
    t0 = time.perf_counter()
    if graph is None:
        graph, _ = load_mindformers(model, **opts)
    t_extract = time.perf_counter() - t0
    experts = dict(experts or {})
    cols = {k: Column(k, TITLES[k]) for k in COLUMNS}
    from .cost.step import step_measure
    cmp = Comparison3(model, mesh, dataset_strategy, cols, len(graph), t_extract, measure=step_measure(graph))
    cmp.notes += list(graph.notes)      # the front end's (layer-count keys fitted to --layers)
    if dataset_strategy == DEFAULT_DATASET:
        cmp.notes.append("dataset full_batch for all three: MindFormers' own (dp, 1) input split leaves the tp "
                         "devices unused, which auto_parallel refuses; slicing a whole batch costs no communication")

    def run(anchors):
        return propagate(graph, mesh, anchors, use_model_strategies=False, dataset_strategy=dataset_strategy,
                         hardware=hw)

    # (c) the reference
    c = cols["c"]
    t0 = time.perf_counter()
    if "semi_auto" not in experts:
        experts["semi_auto"] = expert_strategies(model, mesh, "semi_auto", graph=graph, **opts)
    ex_c = experts["semi_auto"]
    # the loss's own primitives, configured by MindFormers in every parallel build (every column's plan starts from
    # them: strategist.engine.plan.parallel_only_anchors), read from the experts' build already made
    own = graph.parallel_only or {}
    if own:
        fixed = parallel_only_anchors(graph, mesh)
        cmp.notes.append("the model's own in every column (its code configures them in every parallel build; not "
                         "counted as anchors or in the agreement): "
                         + ", ".join(f"{n} {a.describe()}" for n, a in fixed.items()))
    ref = semi_auto_plan(graph, mesh, dict(ex_c), use_model_strategies=False, dataset_strategy=dataset_strategy,
                         hardware=hw)
    c.anchors = sum(1 for n in ex_c if n not in own)
    _fill(c, ref)
    batch = sum(1 for n, ch in ref.choices.items()
                if ch.sharding is not None and n not in ref.anchors and ch.op.type != "Cast")
    casts = sum(1 for ch in ref.choices.values() if ch.op.type == "Cast")
    c.notes.append(f"as MindFormers runs it, in semi_auto_parallel: {batch} operators no shard() configures take "
                   f"MindSpore's batch strategy; {casts} Casts pass their input's layout on")
    c.seconds = time.perf_counter() - t0
    c.notes += [f"{len(ex_c.unmapped)} shard() calls map to no operator of the graph"] if getattr(ex_c, "unmapped", None) else []
    c.notes += _refused(ex_c)
    ref_costs = op_costs(ref)
    agreement(ref, ref, c, ref_costs)
    # (b) the experts' propagation anchors
    b = cols["b"]
    t0 = time.perf_counter()
    if "propagation" not in experts:
        experts["propagation"] = expert_strategies(model, mesh, "propagation", graph=graph, **opts)
    ex_b = experts["propagation"]
    b.anchors = sum(1 for n in ex_b if n not in own)
    b.notes += [n for n in getattr(ex_b, "notes", []) if n.startswith("MindFormers bug")]
    b.notes += _refused(ex_b)
    try:
        pb = run(dict(ex_b))
        _fill(b, pb)
        agreement(pb, ref, b, ref_costs)
    except StrategistError as err:
        b.error = str(err).splitlines()[0]
    b.seconds = time.perf_counter() - t0
    # (b') MindSpore's own propagation of the same anchors
    bm = cols["b_ms"]
    bm.anchors = b.anchors
    if not verify:
        bm.error = "not run (verify=True / --verify runs MindSpore's own propagation in a child process)"
    else:
        t0 = time.perf_counter()
        try:
            _verify_column(bm, model, mesh, graph, ex_b, ref, opts, dataset_strategy, verify_timeout,
                           b_plan=b.plan)
        except StrategistError as err:
            bm.error = str(err).splitlines()[0]
        bm.seconds = time.perf_counter() - t0
    # (a) the advice
    a = cols["a"]
    t0 = time.perf_counter()
    adv, plan_a = _advice_column(a, graph, mesh, rules, hw, dataset_strategy, fast_advice, run)
    a.seconds = time.perf_counter() - t0
    a.notes += adv.notes
    _fill(a, plan_a)
    agreement(plan_a, ref, a, ref_costs)
    if what_if:
        t0 = time.perf_counter()
        n = what_if_plan(a, graph, plan_a, ref, mesh, run)
        n += what_if_regions(a, graph, plan_a, ref, mesh, run)
        n += steps_toward_reference(a, plan_a, ref, mesh, run, ref_costs, c.totals["step_seconds"],
                               None if b.error else b.anchors)
        a.notes.append(f"step if (c)'s: {n} propagations")
        a.timings.append(("step if (c)'s", time.perf_counter() - t0))
    cmp.advice = adv
    return cmp


def _advice_column(a: Column, graph: OpGraph, mesh: Mesh, rules, hw, dataset_strategy, fast_advice: bool, run):
    """(a)'s advice and plan: on the whole graph, or (``fast_advice``, a replicated graph) on the compiled layers
    with their anchors copied, kept only if that beats configuring nothing."""
    base = graph.mf_base_graph if fast_advice else None
    adv = plan_a = None
    if base is not None:
        # a replicated graph: advise on the compiled layers, copy the last layer's anchors onto the copies
        # (the advisor's anchors are per-layer patterns; the same anchors and plan as advising on the whole
        # graph -- checked at 4 and 64 qwen3 layers), and keep the advice only if it beats configuring nothing
        from .frontend.mindformers import layer_of, replicate_anchors
        adv = advise(base, mesh, rules=load_rules(rules), hardware=hw, dataset_strategy=dataset_strategy)
        total = max((i for op in graph for i in [layer_of(op.cell_path)] if i is not None), default=0) + 1
        anchors = replicate_anchors(adv.anchors, graph, graph.mf_extracted_layers, total)
        plan_a = run(anchors) if anchors else run({})
        if anchors and slower(plan_a.totals()["step_seconds"], run({}).totals()["step_seconds"]):
            plan_a = None
        else:
            a.anchors = len(anchors)
            a.notes.append(f"advised on the {graph.mf_extracted_layers} compiled layers, the last layer's anchors "
                           f"copied onto the replicated ones")
    if plan_a is None:
        adv = advise(graph, mesh, rules=load_rules(rules), hardware=hw, dataset_strategy=dataset_strategy)
        plan_a = adv.plan
        a.anchors = len(adv.chosen)
    return adv, plan_a


def what_if_plan(col: Column, graph: OpGraph, plan: Plan, ref: Plan, mesh: Mesh, run) -> int:
    """Each disagreement's ``if_reference``: the step estimate's change when the operator -- with the others of
    its pattern across repeated layers that disagree too -- is anchored with (c)'s layout on top of ``plan``'s
    anchors: whether the experts' choice there would have been faster (one propagation per pattern). Casts are
    not tried (MindSpore ignores a Cast's shard()). Returns the number of propagations."""
    base = dict(plan.anchors)
    t0 = plan.totals()["step_seconds"]
    for d in col.disagreements:
        d.held = graph.op(d.op).held
    groups = _pattern_groups(col, ref)
    for key in sorted(groups, key=lambda k: graph.op(groups[k][0].op).topo_index):
        anchors = dict(base)
        for d in groups[key]:
            anchors[d.op] = _reference_anchor(d.op, ref, mesh, d.type)
        try:
            q = run(anchors)
        except StrategistError:
            continue
        for d in groups[key]:
            d.if_reference = q.totals()["step_seconds"] - t0
    return len(groups)


def _pattern_groups(col: Column, ref: Plan) -> dict[str, list[Disagreement]]:
    """``col``'s disagreements an anchor can set as (c) has them -- not Casts (MindSpore ignores a Cast's shard())
    and with a strategy in (c) -- by pattern across repeated layers."""
    groups: dict[str, list[Disagreement]] = {}
    for d in col.disagreements:
        rc = ref.choices.get(d.op)
        if d.type != "Cast" and rc is not None and rc.sharding is not None:
            groups.setdefault(group_key(d.op, ref.graph), []).append(d)
    return groups


def _reference_anchor(op: str, ref: Plan, mesh: Mesh, op_type: str):
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


def what_if_regions(col: Column, graph: OpGraph, plan: Plan, ref: Plan, mesh: Mesh, run) -> int:
    """``col.regions`` priced: each region's non-Cast operators anchored as (c) has them on top of ``plan``'s
    anchors, one propagation per region (a region of one pattern takes its operators' own ``if_reference``); then
    every difference at once (``col.if_reference_everywhere``). Returns the number of propagations."""
    col.regions = regions(col, graph, ref)
    groups = _pattern_groups(col, ref)
    settable = {d.op: d for g in groups.values() for d in g}
    base, t0, n = dict(plan.anchors), plan.totals()["step_seconds"], 0
    everywhere = dict(base)
    for r in col.regions:
        ds = [settable[o] for o in r.ops if o in settable]
        if not ds:
            r.unpriced = "Casts only (MindSpore ignores a Cast's shard(); they follow their inputs)"
            continue
        anchors = {d.op: _reference_anchor(d.op, ref, mesh, d.type) for d in ds}
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


def _refused(experts) -> list[str]:
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
    groups = _pattern_groups(col, ref)
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
        more = {o: _reference_anchor(o, ref, mesh, settable[o].type) for o in r.ops if o in held}
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


def _verify_column(col: Column, model, mesh, graph, experts, ref: Plan, opts, dataset_strategy, timeout,
                   b_plan: Plan | None = None) -> None:
    """(b'): MindSpore propagates the experts' anchors itself -- verify's child builds MindFormers at ``mesh`` in
    its sharding-propagation mode (the anchors are MindFormers' own ``sharding_propagation()`` calls) and
    compiles; agreement per operator with (c), and in a note with (b) (strategist's propagation of the same)."""
    ms = mindspore_plan(model, mesh, graph=graph, dataset_strategy=dataset_strategy, timeout=timeout,
                        mindformers={"mode": "propagation", **{k: v for k, v in opts.items() if v is not None}})
    res = vcompare(ref, ms)
    col.agreed, col.total = res.agreed, res.total
    col.notes.append(f"MindSpore's plan paired with (c) operator by operator: {res.agreed}/{res.total} equal; "
                     f"{len(res.only_ours)} only strategist, {len(res.only_theirs)} only MindSpore")
    if b_plan is not None:
        rb = vcompare(b_plan, ms)
        col.notes.append(f"MindSpore's propagation vs strategist's (b), same anchors: {rb.agreed}/{rb.total} "
                         f"operators equal; {len(rb.only_ours)} only strategist, {len(rb.only_theirs)} only MindSpore")
    col.timings += [("MindSpore's compile", ms.compile_seconds), ("its child process", ms.process_seconds)]
    col.notes += [f"MindSpore: {n}"
                  for n in ms.notes if not n.startswith("MindFormers bug: MoELayer")
                  and not n.startswith("MindFormers bug: FlashAttention")]
    col.totals = {}
