"""The comparison's run: the graph and the experts' strategies read, the three columns planned and compared."""
from __future__ import annotations

import time

from ..advice.advisor import advise, load_rules
from ..advice.worth import slower
from ..engine.plan import Plan, parallel_only_anchors
from ..errors import StrategistError
from ..files.hardware import load_hardware
from ..propagate import propagate, semi_auto_plan
from ..report.compare import COLUMNS, TITLES
from ..verify.compare import compare as vcompare
from ..verify.runner import mindspore_plan
from ..vocab.graph import OpGraph
from ..vocab.mesh import Mesh
from .agreement import fill_column, agreement, op_costs
from .model import DEFAULT_DATASET, Column, Comparison3
from .what_if import refused_notes, steps_toward_reference, what_if_plan, what_if_regions


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
    # size: the three columns planned in order, each reading the graph, experts and plans of those before it
    from ..frontend.mindformers import expert_strategies, is_mindformers_ref, load_mindformers
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
    from ..cost.step import step_measure
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
    fill_column(c, ref)
    batch = sum(1 for n, ch in ref.choices.items()
                if ch.sharding is not None and n not in ref.anchors and ch.op.type != "Cast")
    casts = sum(1 for ch in ref.choices.values() if ch.op.type == "Cast")
    c.notes.append(f"as MindFormers runs it, in semi_auto_parallel: {batch} operators no shard() configures take "
                   f"MindSpore's batch strategy; {casts} Casts pass their input's layout on")
    c.seconds = time.perf_counter() - t0
    c.notes += [f"{len(ex_c.unmapped)} shard() calls map to no operator of the graph"] if getattr(ex_c, "unmapped", None) else []
    c.notes += refused_notes(ex_c)
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
    b.notes += refused_notes(ex_b)
    try:
        pb = run(dict(ex_b))
        fill_column(b, pb)
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
            _verify_column(bm, model, mesh, graph, ref, opts, dataset_strategy, verify_timeout,
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
    fill_column(a, plan_a)
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
        from ..frontend.mindformers import layer_of, replicate_anchors
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


def _verify_column(col: Column, model, mesh, graph, ref: Plan, opts, dataset_strategy, timeout,
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
