"""Every line of the advice pays (:mod:`strategist.advice.worth`): dropped
anchors tried back, and the last check of every line beside the others (:func:`every_line_pays`)."""
from __future__ import annotations

import collections
import math
import re

from ..errors import PropagationError, StrategyError
from ..vocab.graph import OpGraph
from ..vocab.layout import squeeze
from ..vocab.mesh import Mesh
from ..engine.rules.sharding import shard_anchor
from ..engine.plan import Plan
from .choice import Choice
from .footprint import state_bytes
from .worth import line_worth, pays
from ..engine.search.caches import cached_rule
from ..engine.search.structure import per_graph
from ..cost.step import step_measure


def plan_worth(plan: Plan, lines: int = 1) -> float:
    """What ``lines`` lines of configuration must save of ``plan``'s step to be worth writing
    (:func:`strategist.advice.worth.line_worth`)."""
    return line_worth(plan.totals()["step_seconds"], lines)


def line_count(members, graph: OpGraph | None = None) -> int:
    """The shard() lines a group of anchors takes: one per pattern (an operator across repeated layers)."""
    return len({group_key(c.op, graph) for c in members})


def group_key(name: str, graph: OpGraph | None = None) -> str:
    """``model.layers.12.attention.wq.matmul`` -> ``model.layers.*.attention.wq.matmul``: one operator across
    repeated layers. With ``graph``, operators of one name pattern that are not the same operator -- another Cell
    class, type or input shapes: telechat3_moe's dense layer-0 ``mlp.transpose`` (MLPInterleaved, 4-d) and its MoE
    layer-1 ``mlp.transpose`` (MoELayer, 3-d) -- are told apart (:func:`pattern_keys`)."""
    if graph is not None:
        return pattern_keys(graph).get(name) or _plain_key(name)
    return _plain_key(name)


def _plain_key(name: str) -> str:
    return re.sub(r"(?<=\.)\d+(?=\.)", "*", name)


def pattern_keys(graph: OpGraph) -> dict[str, str]:
    """Each operator's pattern in ``graph``: its name with layer indices starred, and where the operators of that
    name pattern are not all one operator (Cell class, type, input shapes), ``[Class]`` after it (``[Class|n]`` when
    the class alone does not tell them apart). Once per graph. Display text: :func:`pattern_text`."""

    def compute(g):
        by_key: dict[str, dict] = {}
        for op in g:
            sig = (op.cell_class, op.type, tuple(x.spec.shape if x.spec else None for x in op.inputs))
            by_key.setdefault(_plain_key(op.name), {}).setdefault(sig, []).append(op.name)
        out = {}
        for key, sigs in by_key.items():
            if len(sigs) == 1:
                continue
            classes = collections.Counter(sig[0] for sig in sigs)
            for k, (sig, names) in enumerate(sorted(sigs.items(), key=lambda kv: g.op(kv[1][0]).topo_index)):
                tag = sig[0] if classes[sig[0]] == 1 else f"{sig[0]}|{k}"
                out.update((n, f"{key}[{tag}]") for n in names)
        return out
    return per_graph("patterns", graph, compute)


def pattern_text(key: str) -> str:
    """A pattern key as a name glob (the ``[Class]`` tag of :func:`pattern_keys` dropped)."""
    return key.split("[", 1)[0]


def layouts_differ(ca, cb) -> bool:
    """Different placement of any input or output (device matrices compared without size-1 axes)."""
    if ca.inputs == cb.inputs and ca.outputs == cb.outputs:
        return False
    sq = lambda ls: tuple(squeeze(l) for l in ls)
    return sq(ca.inputs) != sq(cb.inputs) or sq(ca.outputs) != sq(cb.outputs)


def reinstate(graph: OpGraph, mesh: Mesh, keep: list, dropped: list, run) -> list:
    """Minimality drops greedily, each group judged with the anchors then left; a drop can be wrong once a group
    checked after it went. An anchor dropped because propagation reproduced it may be needed again when the
    search that reached its operator started at an anchor dropped later (measured: qwen3_moe's layer-1
    q_layernorm, reached from the layer's qkv linear until that linear's anchor went, then left unreached and
    replicated, 8.4 ms); a group dropped as not paying may pay beside what is left (measured: qwen3_moe's qkv
    linears, dropped while the attention after them was still anchored to match). Each dropped group (a package
    as one) whose operators the plan now lays out otherwise is tried back, in graph order, and kept where the
    step is faster by more than the step model resolves."""
    plan = run(keep) if keep else run({})
    groups: dict[str, list] = {}
    for c, why in dropped:
        if why.startswith(("propagation gives the same layouts", "does not pay for itself")):
            groups.setdefault(group_key(c.with_op or c.op, graph), []).append((c, why))     # minimality's groups
    for key in sorted(groups, key=lambda k: min(graph.op(c.op).topo_index for c, _ in groups[k])):
        members = groups[key]
        ops = {c.op for c, _ in members}
        differ = False
        for c, _ in members:
            try:
                sh = shard_anchor(graph.op(c.op), c.anchor, mesh.size, cached_rule(graph.op(c.op)))
            except StrategyError:          # the search would refuse it too
                differ = False
                break
            differ = differ or layouts_differ(sh, plan.choices[c.op])
        if not differ:
            continue
        # (a package's fallbacks, adopted when it went, give way to it)
        trial = sorted([k for k in keep if k.op not in ops] + [c for c, _ in members],
                       key=lambda x: graph.op(x.op).topo_index)
        try:
            q = run(trial)
        except (PropagationError, StrategyError):
            continue
        changed, dt = plan_diff(plan, q)
        if pays(-dt, plan.totals()["step_seconds"], line_count((c for c, _ in members), graph)):
            keep, plan = trial, q
            for c, why in members:
                dropped.remove((c, why))
                c.needed = (f"reinstated after the anchors checked later went: without "
                            f"{'these' if len(members) > 1 else 'it'} {changed} operators change layout and the "
                            f"{step_measure(graph)} changes by {-dt * 1e3:+.3f} ms")
            continue
        keep, plan = _reinstate_patterns(graph, keep, plan, members, dropped, run)
    return keep


def _reinstate_patterns(graph: OpGraph, keep: list, plan: Plan, members: list, dropped: list, run):
    """A package that does not pay back whole (an MoE router: its gating Softmax and Mul cost more at their edges
    than they save) may hold patterns -- one operator across repeated layers, one shard() line -- that pay alone on
    top of what is kept: each is tried back, in graph order, and kept where the step is faster by more than the
    step model resolves (qwen3_moe at dp=2,tp=4: the router's TopkExt and an aux-loss mean split by tokens, as
    MindFormers' experts have them, each 0.10-0.14 ms faster; the other aux-loss mean then follows; then, on a
    second round, the gating Softmax, which the TopkExt follows from then on)."""
    patterns: dict[str, list] = {}
    for c, why in members:
        patterns.setdefault(group_key(c.op, graph), []).append((c, why))
    if len(patterns) < 2:
        return keep, plan
    # a pattern may pay only once a later one is back (the router's gating Softmax split by tokens pays once its
    # TopkExt is): tried until every pattern left was refused on the plan as it now is

    def back(key) -> bool:
        nonlocal keep, plan
        pat = patterns[key]
        ops = {c.op for c, _ in pat}
        trial = sorted([k for k in keep if k.op not in ops] + [c for c, _ in pat], key=lambda x: graph.op(x.op).topo_index)
        try:
            q = run(trial)
        except (PropagationError, StrategyError):
            return False
        changed, dt = plan_diff(plan, q)
        if not pays(-dt, plan.totals()["step_seconds"]):
            return False
        keep, plan = trial, q
        for c, why in pat:
            dropped.remove((c, why))
            c.needed = (f"reinstated alone (its package does not pay whole): without it {changed} operators "
                        f"change layout and the {step_measure(graph)} changes by {-dt * 1e3:+.3f} ms")
        return True

    _settle(sorted(patterns, key=lambda k: min(graph.op(c.op).topo_index for c, _ in patterns[k])), back)
    return keep, plan


def _settle(keys, attempt) -> None:
    """``attempt(key)`` for each key in order, round and round, a key that succeeded leaving the round: until every
    key left has failed since the last success (on the state as it now is). The advisor's greedy passes that an
    earlier step can change the verdict of (_reinstate_patterns, every_line_pays)."""
    queue = collections.deque(keys)
    failed = 0
    while queue and failed < len(queue):
        key = queue.popleft()
        if attempt(key):
            failed = 0
        else:
            queue.append(key)
            failed += 1


def search_without(keep: list, gone: set, run) -> tuple[list, Plan | None]:
    """``keep`` without the anchors whose ids are in ``gone``, and its search (unpriced; None where MindSpore's own
    search fails without them: they are needed)."""
    trial = [c for c in keep if id(c) not in gone]
    try:
        return trial, run(trial, price=False)
    except PropagationError:
        return trial, None


def drop_siblings(graph: OpGraph, keep: list, groups: dict, gone_keys: set, plan: Plan, dropped: list, run) -> list:
    """Kept groups whose operators read one tensor (w1 and w3 after the MLP's norm, q/k/v after the attention's)
    tried without all together: each can be needed while its sibling is there and neither when both go -- MindSpore
    lays siblings out from their common input, so one anchored sibling's search sets the tensor the other then
    follows, and without both another search does it alike. The greedy checks one group at a time and keeps
    both (LLaMA's training compile: w1 and w3 each +140 ms alone, nothing together). Returns the anchors kept."""
    by_input: dict = {}
    for key, members in groups.items():
        if key in gone_keys or any(c.declared or c.fallback is not None for c in members):
            continue
        src = next((x for x in graph.op(members[0].op).inputs if x.kind == "op"), None)
        if src is not None:
            by_input.setdefault((group_key(src.ref, graph), src.index), []).append(key)
    for keys in sorted((k for k in by_input.values() if len(k) > 1),
                       key=lambda ks: graph.op(groups[ks[0]][0].op).topo_index):
        trial, q = search_without(keep, {id(c) for k in keys for c in groups[k]}, run)
        if len(trial) == len(keep) or q is None:
            continue
        if same_plan(plan, q):
            keep = trial
            gone_keys.update(keys)
            for k in keys:
                for c in groups[k]:
                    dropped.append((c, "propagation gives the same layouts and cost without it and its siblings "
                                       "(" + ", ".join(pattern_text(x) for x in keys if x != k) + ")"))
    return keep


def same_plan(a: Plan, b: Plan) -> bool:
    """Same layouts everywhere (and, when both are priced, the same totals: prices are a function of
    the layouts, so this only guards the pricing itself). A Cast's searched layout is not compared: MindSpore
    drops it after the search, and the Cast runs in its input's layout (:func:`strategist.cost.pricing.cast_overlay`),
    which the other operators' decide -- except a Cast of a Parameter, whose layout slices the Parameter."""
    for name, ca in a.choices.items():
        if (ca.op.type != "Cast" or ca.op.inputs[0].kind == "param") and layouts_differ(ca, b.choices[name]):
            return False
    if not (a.priced and b.priced):
        return True
    ta, tb = a.totals(), b.totals()
    return all(math.isclose(ta[k], tb[k], rel_tol=1e-9, abs_tol=1e-9) for k in ta)


def plan_diff(a: Plan, b: Plan) -> tuple[int, float]:
    changed = sum(1 for n, ca in a.choices.items() if layouts_differ(ca, b.choices[n]))
    return changed, b.totals()["step_seconds"] - a.totals()["step_seconds"]


def every_line_pays(graph: OpGraph, keep: list[Choice], dropped: list, run) -> list[Choice]:
    """Each line of the final advice (a pattern: one operator across repeated layers) must pay for itself beside
    the others. Minimality judged most of them before the stages after it (reinstated groups, alternatives, aligned
    layers, the input path, the tables) changed what they stand beside, and judged a package's members only as
    "propagation reproduces it": deepseek3 (dp=2,tp=4) ended with a router LogicalNot reinstated early whose line
    made the final step 0.39 ms slower, and a dense SwiGLU interior and MLA joins that change nothing once the
    alternatives around them were taken (10 of 55 anchors). Each pattern is tried without, in graph order and
    again after any drop, and goes where the step is no slower by more than what the step model resolves. Declared
    anchors (a --boundary, the config's sequence-parallel norms and rows, the MoE FFN Morph MindFormers fixes) stay;
    a sequence-parallel package's residual adds must pay like any line."""
    if not keep:
        return keep
    cur = run(keep)
    patterns: dict[str, list[Choice]] = {}
    for c in keep:
        patterns.setdefault(group_key(c.op, graph), []).append(c)
    # a line that paid beside one dropped after it may not pay any more (deepseek3's router tc_topk, reinstated
    # beside its aux means): tried until every line left was found paying beside the lines as they now are

    def without(key) -> bool:
        nonlocal keep, cur
        members = patterns[key]
        gone = {id(c) for c in members}
        trial = [c for c in keep if id(c) not in gone]
        try:
            q = run(trial) if trial else run({})
        except (PropagationError, StrategyError):
            return False
        changed, dt = plan_diff(cur, q)
        worth = plan_worth(cur)
        saved = state_bytes(q) - state_bytes(cur)
        if pays(dt, cur.totals()["step_seconds"], saved=saved):
            # it pays in step time, or in the weight, gradient and optimizer state it shards. Its "needed" is said
            # again beside the final advice where minimality worked it out beside other anchors (the lines after
            # it changed what it stands beside); a table's or a reinstated line's own reason stays
            what = f"without {'these ' + str(len(members)) + ' anchors' if len(members) > 1 else 'it'}"
            for c in members:
                if c.needed.startswith("without") and "kept:" not in c.needed:
                    c.needed = f"{what}: {changed} operators change layout, {step_measure(graph)} {dt * 1e3:+.3f} ms" + (
                        f", but {saved / 2**30:.2f} GiB more weight/gradient/optimizer state per device"
                        if dt <= worth else "")
            return False
        keep, cur = trial, q
        for c in members:
            dropped.append((c, f"does not pay for its line in the final advice: without it, {changed} operators "
                               f"change layout and the {step_measure(graph)} changes by {dt * 1e3:+.3f} ms" +
                               (f" (less than {worth * 1e6:.0f} us, what the step model resolves)" if dt > 0 else "")))
        return True

    _settle([k for k in sorted(patterns, key=lambda k: min(graph.op(c.op).topo_index for c in patterns[k]))
             if not any(c.declared and c.template != "residual_sequence_parallel" for c in patterns[k])], without)
    return keep
