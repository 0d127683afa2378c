"""The advisor: four heuristics -> a minimal set of shard() anchors -> propagation -> cost report.

``advise(graph, mesh)`` picks the operators that deserve an explicit strategy by the four rules of
MindSpore's "sharding techniques" guidance, gives each a strategy from the rules' templates
(``rules/default.yaml``, overridable), propagates, drops every anchor the plan does not need, and
compares the result with no anchors at all and with every operator configured.

Rule 1, weight operators: MatMul/BatchMatMul fed by a Parameter alternate Megatron column -> row
along the data flow (a column MatMul's output reaching the next weight MatMul before any norm makes
that one a row MatMul); embeddings split the vocabulary when it is large; expert weights split by ep.
Rule 2, dimension-changing operators: those propagation reached only with a redistribution, or not at
all, are anchored to follow their input.
Rule 3, parallelism boundaries: each weight operator prefers dp when its activations outweigh its
parameters and tp in the opposite case (``boundary_ratio``); where the preference flips from dp to tp
along the graph, the last dp operator is anchored data-parallel over every device and the first tp
operator model-parallel. ``boundaries={"cell.path": "tp"}`` declares one by hand.
Rule 4, fused operators: FlashAttentionScore, RmsNorm/LayerNorm, MoE dispatch/combine get their template.

This module runs the passes; the parts live beside it: :mod:`.rules` (the YAML rules, a template's sharding),
:mod:`.anatomy` (what the model is made of), :mod:`.propose` (the heuristics' proposals), :mod:`.minimality`
(every line pays), :mod:`.refine` (the stages after minimality), :mod:`.footprint` (memory), :mod:`.choice`.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import PropagationError, StrategyError
from ..vocab.graph import OpGraph
from ..vocab.mesh import Hardware, Mesh
from ..engine.rules.sharding import shard_anchor
from ..vocab.anchors import Anchor
from ..propagate import price_plan, propagate
from ..engine.search.caches import no_cyclic_gc
from ..engine.search.layout_eq import same_placement
from ..engine.search.structure import lazy_copies
from ..files.rules import DEFAULT_RULES, RULES_DIR, Rules, load_rules
from .rules import anchor_of, check_boundaries, template_sharding
from .choice import Advice, Choice
from .footprint import MEMORY_WORTH, state_bytes, memory
from .minimality import (plan_diff, drop_siblings, every_line_pays, group_key, line_count,
                         reinstate, same_plan, search_without, plan_worth)
from .worth import PAY_FLOOR, PAY_WORTH, pays, same_step, slower
from .anatomy import SP_TEMPLATES, flippable, model_own, preferences
from .parallel_only import loss_layout_alternatives
from .propose import propose
from .heuristics.dimensions import add_dimension_anchors
from .refine import (align_layers, embedding_tables, input_path, take_alternatives,
    unreached_followers)
from .. import progress
from ..engine.plan import Plan, model_anchors
from ..cost.step import memory_with, options_of, step_measure

#: the advice's API (the parts re-exported from the modules beside this one)
__all__ = ["advise", "propose", "load_rules", "check_boundaries", "Rules", "Choice", "Advice", "anchor_of",
           "template_sharding", "memory", "MEMORY_WORTH", "PAY_FLOOR", "PAY_WORTH", "DEFAULT_RULES", "RULES_DIR"]


def advise(graph: OpGraph, mesh: Mesh, *, rules: Rules | None = None, boundaries: dict[str, str] | None = None,
           hardware: Hardware | None = None, dataset_strategy="data_parallel") -> Advice:
    """Choose a minimal set of anchors for ``graph`` on ``mesh`` and price the result."""
    with no_cyclic_gc():        # tens to a hundred propagations (about 110 on a MoE model): see no_cyclic_gc
        return _advise(graph, mesh, rules, boundaries, hardware, dataset_strategy)


def _advise(graph, mesh, rules, boundaries, hardware, dataset_strategy) -> Advice:
    rules = rules or load_rules()
    searched: dict = {}        # anchor set -> its unpriced plan: a plan checked by layouts, then priced, is searched once
    first = _advise_pass(graph, mesh, rules, boundaries, hardware, dataset_strategy, searched)
    flip = flippable(graph, rules, preferences(graph, rules, boundaries or {}), boundaries) \
        if mesh.get("tp") > 1 else []
    if flip:
        first = _choose_pass(graph, mesh, rules, boundaries, hardware, dataset_strategy, searched, first, flip)
    return _finish(graph, mesh, rules, _polish(graph, mesh, rules, first), hardware, dataset_strategy)


def _choose_pass(graph, mesh, rules, boundaries, hardware, dataset_strategy, searched, first: _Pass, flip) -> _Pass:
    # the linears of column/row pairs whose activations outweigh their weights: data parallel (no activation
    # collective, but every weight whole on every device) or Megatron's pair (an activation collective per
    # pair, the weights split): the step model decides, not the bytes ratio alone
    alt = _advise_pass(graph, mesh, rules, boundaries, hardware, dataset_strategy, searched, megatron=True)
    ta, tb = first.plan.totals()["step_seconds"], alt.plan.totals()["step_seconds"]
    name = {id(alt): "Megatron column/row", id(first): "data parallel"}
    state = {id(p): state_bytes(p.plan) for p in (first, alt)}      # weight, gradient, optimizer per device
    if same_step(ta, tb):
        # the same step (deepseek3: the Megatron pass's alternatives take data parallel back for these
        # linears): the pass holding less state per device, then the one with fewer anchors
        best, other = sorted((first, alt), key=lambda p: (round(state[id(p)]), len(p.keep)))
        less = state[id(other)] - state[id(best)]
        why = (f"{less / 2**30:.2f} GiB less state per device" if round(less) else
               f"{len(other.keep) - len(best.keep)} fewer anchors" if len(other.keep) > len(best.keep) else
               "the same state and anchors")
        best.notes.append(f"{len(flip)} linears of column/row pairs have activations outweighing their weights: "
                          f"data parallel and Megatron column/row give the same step ({ta * 1e3:.3f} ms): "
                          f"{name[id(best)]} ({why})")
        return best
    best = alt if tb < ta else first
    other = first if best is alt else alt
    # as for any alternative layout (take_alternatives): not at MEMORY_WORTH more weight, gradient and optimizer
    # state per device (telechat3's data-parallel MLPs: 64 ms faster, 2.5 GiB more state per device than Megatron's)
    more = state[id(best)] - state[id(other)]
    if more >= MEMORY_WORTH:
        other.notes.append(f"{len(flip)} linears of column/row pairs have activations outweighing their weights: "
                           f"{name[id(best)]} would be {abs(ta - tb) * 1e3:.3f} ms faster by the step model but holds "
                           f"{more / 2**30:.2f} GiB more weight, gradient and optimizer state per device: "
                           f"{name[id(other)]} (step {max(ta, tb) * 1e3:.3f} ms)")
        return other
    best.notes.append(f"{len(flip)} linears of column/row pairs have activations outweighing their weights: "
                      f"{name[id(best)]} (step {min(ta, tb) * 1e3:.3f} ms) beats {name[id(other)]} "
                      f"(step {max(ta, tb) * 1e3:.3f} ms) for them")
    return best


class _Runner:
    """One advisor pass's propagation of a set of anchors (a list of :class:`Choice` or ``{name: Anchor}``):
    searched once per anchor set (``searched`` is shared by the passes), priced once; the later calls of a
    reused ``@lazy_inline`` graph (``copies``) take no anchor of their own, and the operators MindSpore cannot
    leave unconfigured (``required``) are in every plan, the baseline too."""

    def __init__(self, graph, mesh, hardware, dataset_strategy, searched: dict):
        self.graph, self.mesh, self.hardware, self.dataset_strategy = graph, mesh, hardware, dataset_strategy
        self.searched = searched
        self.priced: dict = {}           # anchor set -> (its search, its priced plan)
        self.required: dict = {}
        # the later calls of a reused @lazy_inline graph take the first call's strategy: no anchor of their own
        self.copies = lazy_copies(graph, isinstance(dataset_strategy, dict))

    def __call__(self, anchors, price=True):
        anchors = {c.op: c.anchor for c in anchors} if isinstance(anchors, list) else anchors
        if self.copies:
            anchors = {n: a for n, a in anchors.items() if n not in self.copies}
        if self.required:
            anchors = {**anchors, **{n: a for n, a in self.required.items() if n not in anchors}}
        # the search does not depend on the anchors' order; the plan lists them in the order given
        key = frozenset((name, id(a)) for name, a in anchors.items())
        hit = self.searched.get(key)
        if hit is None or any(hit.anchors.get(n) is not a for n, a in anchors.items()):
            hit = self.searched[key] = propagate(self.graph, self.mesh, anchors, use_model_strategies=False,
                                                 dataset_strategy=self.dataset_strategy, hardware=self.hardware,
                                                 price=False)
        if not price:
            return hit
        # a plan priced once is not priced again (the final stages price the same anchors several times)
        done = self.priced.get(key)
        plan = done[1] if done is not None and done[0] is hit else price_plan(hit)
        self.priced[key] = (hit, plan)
        plan.anchors = {n: plan.anchors[n] for n in anchors}
        return plan


def _advise_pass(graph, mesh, rules, boundaries, hardware, dataset_strategy, searched, megatron=False) -> "_Pass":
    # size: the greedy minimality loop and the adopt closure share the pass's order, groups and plan; split, each piece would hand all of them back
    run = _Runner(graph, mesh, hardware, dataset_strategy, searched)
    copies, required = run.copies, run.required
    proposed, notes = propose(graph, mesh, rules, boundaries, megatron=megatron)
    proposed = [c for c in proposed if c.op not in copies]
    required.update({c.op: c.anchor for c in proposed if c.required})
    plan = run(proposed, price=False)          # rule 2 reads provenance only
    n_before = len(proposed)
    # rule 2, unreached consumers (see unreached_followers)
    own = model_own(graph)
    proposed += unreached_followers(graph, plan, {c.op for c in proposed} | own, rules, mesh)
    if len(proposed) > n_before:
        plan = run(proposed, price=False)
    add_dimension_anchors(graph, mesh, rules, plan, proposed, own)
    proposed = [c for c in proposed if c.op not in own]
    proposed.sort(key=lambda c: graph.op(c.op).topo_index)
    # the head beside the loss layout the model configures itself in a parallel build (MindFormers' x + 0)
    loss_layout_alternatives(graph, mesh, proposed, run)
    plan = run(proposed)                       # the reference every minimality check compares with
    # minimality: drop every group of anchors (one pattern across repeated layers) the plan does not need
    groups: dict[str, list[Choice]] = {}
    for c in proposed:
        if not c.required:          # never tried without: MindSpore's compile fails there
            groups.setdefault(group_key(c.with_op or c.op, graph), []).append(c)
    priority = {"2 dimension": 0, "4 fused": 1, "1 weight": 2, "3 boundary": 3}
    keep = list(proposed)
    dropped: list[tuple[Choice, str]] = []
    baseline = run([])
    if proposed and same_plan(plan, baseline):
        dropped = [(c, "propagation from the dataset alone gives the same plan") for c in proposed if not c.required]
        keep, groups = [c for c in proposed if c.required], {}
    order = sorted(groups, key=lambda k: (priority[groups[k][0].rule], graph.op(groups[k][0].op).topo_index))
    gone_keys: set[str] = set()

    def adopt(fallbacks):
        # the fallbacks now kept are checked by the next pass, one pattern per group
        for f in fallbacks:
            k = "fallback:" + group_key(f.op, graph)
            if k not in groups:
                order.append(k)
            groups.setdefault(k, []).append(f)
    # greedy, in priority order; a group kept early may stop being needed once a later one goes, so the kept
    # groups are checked again until a pass drops nothing (at most three passes)
    for pass_no in range(3):
        dropped_before = len(gone_keys)
        todo = [k for k in order if k not in gone_keys]
        for key in progress.bar(todo, "minimality checks" if pass_no == 0 else "minimality checks (again)"):
            members = groups[key]
            gone = {id(c) for c in members}        # (Choice equality compares every field: slow, and same op = same group)
            # a sequence-parallel package dropped leaves its norms and row linears their plain layouts
            fallbacks = [c.fallback for c in members if c.fallback is not None]
            trial = sorted([c for c in keep if id(c) not in gone] + fallbacks, key=lambda c: graph.op(c.op).topo_index)
            try:
                q = run(trial, price=False) if trial else baseline
            except PropagationError as err:
                # without these anchors MindSpore's own search fails (e.g. a shared parameter's reader no
                # candidate matches): they are needed
                for c in members:
                    c.needed = f"without {'these anchors' if len(members) > 1 else 'it'} MindSpore's search fails: {err}"
                continue
            if same_plan(plan, q):
                keep = trial
                gone_keys.add(key)
                for c in members:
                    dropped.append((c, "propagation gives the same layouts and cost without it"))
                adopt(fallbacks)
            else:
                q = run(trial) if trial else baseline
                changed, dt = plan_diff(plan, q)
                what = f"without {'these ' + str(len(members)) + ' anchors' if len(members) > 1 else 'it'}"
                # a saving within the step model's resolution is no reason for a line of configuration: a package
                # must save that for each of its lines (patterns), e.g. an MoE router's 12 lines saving 0.6 ms of a
                # 3 s step do not pay; its patterns are then tried back one by one (_reinstate_patterns)
                lines = line_count(members, graph)
                worth, step = plan_worth(plan, lines), plan.totals()["step_seconds"]
                in_time = pays(dt, step, lines)
                saved = state_bytes(q) - state_bytes(plan) if not in_time else 0.0
                if not in_time and pays(dt, step, lines, saved) and not any(c.declared for c in members):
                    # it pays in memory: the weights, gradients and optimizer states it shards
                    for c in members:
                        c.needed = (f"{what}: {changed} operators change layout, {step_measure(graph)} {dt * 1e3:+.3f} ms, "
                                    f"but {saved / 2**30:.2f} GiB more weight/gradient/optimizer state per device")
                    continue
                if not in_time and not any(c.declared for c in members):
                    # an anchor must pay for itself: the plan is no slower without it (or slower by less than
                    # what the step model resolves: worth.line_worth), so it goes
                    keep, plan = trial, q
                    gone_keys.add(key)
                    for c in members:
                        dropped.append((c, f"does not pay for itself: {what}" + (
                            f" (its {len(fallbacks)} norms and row linears without sequence parallelism)"
                            if any(c.template in SP_TEMPLATES for c in members) and fallbacks else
                            " (then tried without its package)" if fallbacks else "") +
                            f", {changed} operators change layout and "
                                           f"the {step_measure(graph)} changes by {dt * 1e3:+.3f} ms" +
                                           (f" (less than {worth * 1e6:.0f} us, what the step model resolves)" if dt > 0 else "")))
                    adopt(fallbacks)
                    continue
                for c in members:
                    c.needed = f"{what}: {changed} operators change layout, {step_measure(graph)} {dt * 1e3:+.3f} ms" + ((
                        " (kept: the config asks for sequence parallelism, use_seq_parallel, though the plan is "
                        "faster without it)" if c.template in SP_TEMPLATES else
                        " (kept: MindFormers' FFNGroupedGEMM runs its Morph on this layout whatever the plan, though "
                        "the plan is faster without it)" if c.template == "moe_ffn" else
                        " (kept: declared by --boundary, though the plan is faster without it)") if dt <= 0 else "")
        if len(gone_keys) == dropped_before or not keep:
            break
    if len(keep) > 1:
        keep = drop_siblings(graph, keep, groups, gone_keys, plan, dropped, run)
    keep, plan = _drop_package_members(graph, keep, groups, plan, dropped, run)
    keep = reinstate(graph, mesh, keep, dropped, run)
    keep = take_alternatives(graph, keep, dropped, run)
    keep = align_layers(graph, mesh, keep, run)
    return _Pass(keep, dropped, notes, baseline, run, run(keep) if keep else baseline)


def _drop_package_members(graph, keep: list[Choice], groups: dict, plan, dropped: list, run):
    """``(keep, plan)`` without the members of a package kept whole that propagation reproduces anyway."""
    # a package kept whole may hold members propagation reproduces anyway: each such member (one pattern
    # across repeated layers) goes when the plan is the same without it
    members_of: dict[str, list[Choice]] = {}
    for c in keep:
        if c.with_op and len(groups.get(group_key(c.with_op, graph), ())) > 1:
            members_of.setdefault(group_key(c.op, graph), []).append(c)
    for key in sorted(members_of, key=lambda k: graph.op(members_of[k][0].op).topo_index):
        trial, q = search_without(keep, {id(c) for c in members_of[key]}, run)
        if q is None:
            continue
        if same_plan(plan, q):
            keep = trial
            for c in members_of[key]:
                dropped.append((c, "propagation gives the same layouts and cost without it (its package is kept)"))
        elif all(c.template == "residual_sequence_parallel" for c in members_of[key]):
            # the residual adds of a sequence-parallel package must pay for themselves, as a pattern
            q = run(trial)
            changed, dt = plan_diff(plan, q)
            if dt < 0:
                keep, plan = trial, q
                for c in members_of[key]:
                    dropped.append((c, f"does not pay for itself (its package is kept): without it, {changed} "
                                       f"operators change layout and the {step_measure(graph)} changes by {dt * 1e3:+.3f} ms"))
    return keep, plan


@dataclass
class _Pass:
    """One advisor pass up to its anchors (before :func:`_polish` and :func:`_finish`)."""
    keep: list
    dropped: list
    notes: list
    baseline: Plan
    run: object
    plan: Plan


def _polish(graph: OpGraph, mesh: Mesh, rules: Rules, p: _Pass) -> _Pass:
    """The last choices, on the winning pass only (each tries a few anchors, one propagation each): where the
    input's batch split starts, the embedding tables' layouts, then the check that every line pays for itself."""
    keep = input_path(graph, mesh, p.keep, p.run, p.dropped)
    keep = embedding_tables(graph, mesh, rules, keep, p.dropped, p.run)
    keep = every_line_pays(graph, keep, p.dropped, p.run)
    return _Pass(keep, p.dropped, p.notes, p.baseline, p.run, p.run(keep) if keep else p.baseline)


def carried_advice(graph, mesh, rules, chosen: list, dropped: list, notes: list, hardware, dataset_strategy,
                   recheck) -> Advice:
    """The Advice of anchors chosen on part of ``graph`` and carried to all of it (:mod:`strategist.advice.repeated`):
    its plan, baseline and every-operator plan propagated on ``graph``; ``recheck(chosen, dropped, run, plan,
    baseline) -> (chosen, plan)`` first drops what the whole graph does not need (``run``: the pass's propagation of
    a list of choices)."""
    run = _Runner(graph, mesh, hardware, dataset_strategy, {})
    run.required.update({c.op: c.anchor for c in chosen if c.required})
    baseline = run([])
    plan = run(chosen) if chosen else baseline
    chosen, plan = recheck(chosen, dropped, run, plan, baseline)
    return _finish(graph, mesh, rules, _Pass(chosen, dropped, notes, baseline, run, plan), hardware, dataset_strategy)


def load_balance_note(plan) -> str | None:
    """Where a FlashAttention's query sequence is split over devices (context parallelism): the step with and
    without MindSpore's load balance of its causal work (:mod:`strategist.cost.attention`), or None."""
    from dataclasses import replace

    from ..cost.attention import splits_attention
    from ..cost.step import estimate_with
    if plan.hardware is None or not splits_attention(plan):
        return None
    opts = options_of(plan)
    on, off = (estimate_with(plan, replace(opts, fa_load_balance=b)).step_s for b in (True, False))
    now = "on" if opts.fa_load_balance else "off"
    return (f"FlashAttention's query sequence split over devices: with MindSpore's load balance of its causal work "
            f"(parallel_speed_up_json enable_flash_attention_load_balance, --fa-load-balance; {now} here) the step "
            f"is {on * 1e3:.3f} ms, without it {off * 1e3:.3f} ms ({(on - off) * 1e3:+.3f} ms)")


def _finish(graph, mesh, rules, p: _Pass, hardware, dataset_strategy) -> Advice:
    """The Advice of a pass's anchors: the sequence-parallel note, every operator configured, the floor (configure
    nothing, or only the layouts the model's code fixes) and the model's own shard() calls."""
    keep, dropped, notes, baseline, run, final = p.keep, p.dropped, p.notes, p.baseline, p.run, p.plan
    if any(c.fallback is not None and c.template in SP_TEMPLATES for c in keep):
        # what the config's sequence parallelism costs or saves: the same anchors with plain norms and rows
        plain = sorted([c.fallback or c for c in keep if c.template != "residual_sequence_parallel"],
                       key=lambda c: graph.op(c.op).topo_index)
        try:
            q = run(plain)
            ts, tp_ = final.totals()["step_seconds"], q.totals()["step_seconds"]
            # the step model's peak under the run's options (recompute, micro-batches in flight), as reported
            opts = options_of(final)
            ma, mb = memory_with(final, opts)["total"], memory_with(q, opts)["total"]
            notes.append(f"sequence parallelism (use_seq_parallel, --sequence-parallel): step {ts * 1e3:.3f} ms, memory "
                         f"{ma / 2**30:.2f} GiB per device; without it {tp_ * 1e3:.3f} ms ({(tp_ - ts) * 1e3:+.3f} ms), "
                         f"{mb / 2**30:.2f} GiB ({(mb - ma) / 2**30:+.2f} GiB)")
        except (PropagationError, StrategyError):
            pass
    balance = load_balance_note(final)
    if balance:
        notes.append(balance)
    # the layouts the model's own code fixes (MindFormers' MoE FFN Morph) stay whatever else goes: a plan without
    # them is not the model that runs. Configuring nothing is the floor where propagation lands them there anyway
    fixed = [c for c in keep if c.template == "moe_ffn"]
    lands = all(baseline.choices[c.op].strategy == final.choices[c.op].strategy for c in fixed)
    is_slower = slower(final.totals()["step_seconds"], baseline.totals()["step_seconds"])
    floor, floor_keep = baseline, []
    if is_slower and not lands:
        floor, floor_keep = (run(fixed), fixed) if len(fixed) < len(keep) else (final, keep)
    if slower(final.totals()["step_seconds"], floor.totals()["step_seconds"]):
        notes.append(f"the anchored plan's {step_measure(graph)} exceeds the layouts the model's code fixes alone (its MoE FFN "
                     "Morphs) with propagation from the dataset's; the advice is those alone" if floor_keep else
                     f"the anchored plan's {step_measure(graph)} exceeds plain propagation from the dataset's; "
                     "the advice is to configure nothing")
        for c in keep:
            if c not in floor_keep and not c.required:
                dropped.append((c, "costlier than configuring nothing" if not floor_keep else
                                "costlier than the model's fixed layouts alone"))
        keep, final = floor_keep + [c for c in keep if c.required and c not in floor_keep], floor
    elif is_slower:
        dt = final.totals()["step_seconds"] - baseline.totals()["step_seconds"]
        notes.append(f"configuring nothing would be {dt * 1e3:.3f} ms faster by the step model, but it leaves the MoE "
                     f"FFN Morphs on layouts MindFormers' code does not run (FFNGroupedGEMM.shard fixes theirs)")
    # every operator configured as the plan advised (after the floor: configuring nothing has its plan too)
    semi_anchors = {}
    for name, ch in final.choices.items():
        if name in final.anchors and final.anchors[name].layouts is not None:
            semi_anchors[name] = final.anchors[name]      # as configured (a Layout over a device matrix of its own)
        elif ch.sharding is not None and ch.op.type not in ("Cast",):
            s = ch.sharding if ch.sharding.dev_matrix == mesh.shape else None
            semi_anchors[name] = anchor_of(name, s, mesh, ch.op.type) if s is not None else \
                Anchor(name, ch.sharding.strategy, origin="semi")
    try:
        semi = run(semi_anchors)
    except (PropagationError, StrategyError) as err:   # MindSpore would refuse it: compare with the advice
        notes.append(f"configuring every operator as the advice's plan fails in MindSpore's search ({err}); "
                     f"that column repeats the advice")
        semi = final
    existing = _existing(graph, mesh, final, keep)
    return Advice(graph, mesh, rules, keep, dropped, final, baseline, semi, existing, notes)


def _existing(graph, mesh, plan, keep) -> list[tuple[str, str, str]]:
    """The model's own shard() calls beside the advice: kept, contradicted, or redundant.

    No propagation per call (MindFormers models have hundreds): the advised plan already says what every
    operator gets without the model's calls, so each call's own sharding is just compared with it."""
    out = []
    advised = {c.op for c in keep}
    for name, a in model_anchors(graph).items():
        ch = plan.choices[name]
        try:
            op = graph.op(name)
            mine = shard_anchor(op, a, mesh.size)
        except Exception as err:  # an invalid strategy in the model
            out.append((name, "contradicted", f"invalid on this mesh: {err}"))
            continue
        same = ch.sharding is not None and len(mine.inputs) == len(ch.inputs) and all(
            same_placement(x, y) for x, y in zip(mine.inputs + mine.outputs, ch.inputs + ch.outputs))
        if not same:
            out.append((name, "contradicted", f"model {a.describe()} vs advised {ch.strategy}"))
        elif name in advised:
            out.append((name, "kept", f"{a.describe()} is one of the advised anchors"))
        else:
            out.append((name, "redundant", f"{a.describe()} is what propagation gives without it"))
    return out
