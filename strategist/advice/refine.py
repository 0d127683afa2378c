"""The stages after minimality, each kept only where the step is faster: operators no search reaches follow
their input, the rotary chain takes the attention's heads, repeated layers laid out alike, the input path,
embedding tables, alternative layouts."""
from __future__ import annotations

import math

from ..errors import PropagationError, StrategyError
from ..vocab.graph import Op, OpGraph
from ..vocab.layout import squeeze
from ..vocab.mesh import Mesh
from ..engine.rules.candidates import candidates
from ..engine.rules.registry import RULES
from ..engine.rules.reshape import reshape_layout
from ..engine.rules.sharding import shard_anchor
from ..vocab.anchors import Anchor
from ..engine.plan import Plan
from ..engine.search.caches import cached_rule
from ..engine.search.chooser import follow
from ..engine.search.layout_eq import same_placement
from ..files.rules import Rules
from .rules import anchor_of, template_sharding
from .choice import Choice
from .footprint import MEMORY_WORTH, state_bytes
from .minimality import plan_diff, group_key, same_plan
from .worth import faster, pays
from .anatomy import (LAYER_PATH, embedding_companion, producer_through, uses_sequence_parallel, sp_templates,
    weight_params, weight_slot)
from ..cost.step import step_measure


def unreached_followers(graph: OpGraph, plan: Plan, anchored: set, rules: Rules, mesh: Mesh) -> list[Choice]:
    """Rule 2, unreached consumers: an operator no search reaches (MindSpore leaves it at its default
    strategy, e.g. stuck behind a later seed in its waiting list) that reads a tensor a search did decide
    follows the largest such input; it would otherwise gather that tensor whole (MTP's loss on
    vocabulary-parallel logits). An operator MindSpore has no OperatorInfo for (no rule here: ``Addmm``) is never
    one: MindSpore runs it batch-parallel whatever is configured.

    Its search would go on into the consumers no search reached either (through Reshapes), splitting them
    too: a loss's token mask split by the batch hands its split to the masked sum, which then all-reduces
    scalars. So the follower is first proposed with those consumers pinned where they are (replicated), one
    package kept only if it pays; dropped, the follower alone is tried (its fallback)."""
    out = []
    pinned: set[str] = set()
    for op in graph:
        if op.name in anchored or op.name in pinned or op.type in ("Reshape", "Flatten", "Cast") or op.type not in RULES \
                or op.type in rules.categories.get("dimension_changing", ()) \
                or plan.choices[op.name].provenance.direction != "default":
            continue
        rule = cached_rule(op)
        best = None
        for slot, x in enumerate(op.inputs):
            if x.kind != "op" or x.spec is None or slot not in rule.slots or x.ref not in plan.choices:
                continue
            src = plan.choices[x.ref]
            if src.provenance.direction == "default" or x.index >= len(src.outputs):
                continue
            size = math.prod(x.spec.shape)
            if best is None or size > best[0]:
                best = (size, slot, src.outputs[x.index])
        if best is None:
            continue
        # a layout over the mesh with size-1 axes inserted (a Cast's of a (dp, 1) split) is the same placement
        s = next((s for lay in (best[2], squeeze(best[2]))
                  for s in [follow(rule, lay, rule.slots.index(best[1]), "in", mesh.size)]
                  if s is not None and s.dev_matrix == mesh.shape), None)
        if s is None:
            continue
        why = ("operator no search reaches, on a tensor a search decided: anchored to follow its largest such "
               "input instead of gathering it")
        follower = Choice(op.name, "2 dimension", "follow_input", why, anchor_of(op.name, s, mesh, op.type))
        pins = [Choice(n, "2 dimension", "keep_unreached",
                       f"consumer of {op.name} no search reaches: pinned where it is "
                       f"({plan.choices[n].sharding.strategy}), so that following its input changes only {op.name}",
                       Anchor(n, plan.choices[n].sharding.strategy, origin="advisor"), with_op=op.name)
                for n in _unreached_consumers(graph, plan, op.name, anchored | pinned)]
        if pins:
            pinned.update(c.op for c in pins)
            follower.fallback = Choice(op.name, "2 dimension", "follow_input", why, follower.anchor)
        out += [follower] + pins
    return out


def _unreached_consumers(graph: OpGraph, plan: Plan, name: str, skip: set) -> list[str]:
    """The consumers of ``name``'s outputs (through Reshapes) that no search reached: default, configured."""
    def unreached(n):
        ch = plan.choices.get(n)
        return ch is not None and ch.provenance.direction == "default" and ch.sharding is not None
    return [n for n in graph.consumers_through_reshapes(name)[1] if n not in skip and unreached(n)]


#: how many operators the walk back from a Transpose back looks through for the chain's first Transpose (glm4's
#: rotary chain between them: about 15 operators; the walk stops at weights and fused operators anyway)
_CHAIN_WALK = 64


def attention_chain_heads(graph: OpGraph, plan: Plan, proposed: list[Choice], anchored: set, rules: Rules,
                           mesh: Mesh) -> list[Choice]:
    """Rule 2, fused consumers through a chain: a fused attention input that arrives ``Transpose -> (rotary
    embedding, element-wise, same shape) -> Transpose back -> Reshape`` (the legacy BNSD rotary of ChatGLM / LLaMA
    layers) with a redistribution in front of the fused operator. The first Transpose is anchored with the layout
    the fused operator takes, traced back through the Reshape (``reshape_layout``) and the Transpose back, so the rotary runs in the
    attention's heads split instead of a sequence split the search brought forward from the QKV projection. glm4 at
    40 layers (dp=8,tp=8): the query Transposes took a sequence split by 4 (32 of 64 devices) behind the kept QKV
    column; heads by tp as the experts have them: -15.0 ms a step. Minimality keeps it only where it pays."""
    # size: one walk of an attention chain from its projections to its output; each case reads the walk's locals
    out: list[Choice] = []
    batch_only = sp_templates(graph, rules.templates, mesh)[1]
    for c in proposed:
        d = graph.op(c.op)
        if d.type != "FlashAttentionScore":
            continue
        drule = cached_rule(d)
        for k, slot in enumerate(drule.slots):
            x = d.inputs[slot] if slot < len(d.inputs) else None
            if x is None or x.kind != "op" or graph.op(x.ref).type not in ("Reshape", "Flatten"):
                continue
            want = plan.choices[c.op].inputs[k] if k < len(plan.choices[c.op].inputs) else None
            r = plan.choices[x.ref]
            if want is None or not r.inputs or r.inputs[0] is None:
                continue
            back = graph.op(x.ref)
            src = next((y for y in back.inputs if y.kind == "op"), None)
            if src is None or graph.op(src.ref).type != "Transpose" or src.ref in anchored:
                continue
            # the Reshape hands the fused operator its layout and takes the redistribution at its own input: the
            # input layout that reshapes to it in place
            lay_r = reshape_layout(want, r.inputs[0].shape)
            if lay_r is None or same_placement(r.inputs[0], lay_r):
                continue
            tb = graph.op(src.ref)
            st_b = follow(cached_rule(tb), lay_r, src.index, "out", mesh.size)
            if st_b is None:
                continue
            mid = st_b.inputs[0]
            # back from the Transpose back, through operators of the same graph region, to the Transpose whose
            # output has the shape the Transpose back takes
            head, seen, todo = None, set(), [tb.name]
            while todo and head is None and len(seen) < _CHAIN_WALK:
                n = todo.pop()
                for y in graph.op(n).inputs:
                    if y.kind != "op" or y.ref in seen or y.ref in anchored:
                        continue
                    seen.add(y.ref)
                    u = graph.op(y.ref)
                    if u.type == "Transpose":
                        o = plan.choices[u.name].outputs
                        if o and o[0] is not None and o[0].shape == mid.shape:
                            head = u
                            break
                        continue
                    if u.type in rules.categories.get("weight", ()) or u.type in rules.categories.get("fused", ()):
                        continue
                    todo.append(u.name)
            if head is None or same_placement(plan.choices[head.name].outputs[0], mid):
                continue
            sh = follow(cached_rule(head), mid, 0, "out", mesh.size)
            if sh is None:
                continue
            anchor = anchor_of(head.name, sh, mesh, head.type)
            try:        # the fused operator's layout may refine the mesh (grouped-query heads): the shard() line
                ok = same_placement(shard_anchor(head, anchor, mesh.size).inputs[0], sh.inputs[0])   # must place it so
            except StrategyError:
                ok = False
            if not ok:
                continue
            anchored.add(head.name)
            out.append(Choice(head.name, "2 dimension", "follow_output",
                              f"heads the chain (rotary embedding) into the fused {c.op}, which took it through a "
                              f"redistribution: anchored with the layout {c.op} takes, traced back through "
                              f"{back.name} and {tb.name}, so the chain runs in it",
                              anchor))
            # the Split in front of it (a fused QKV projection cut into q, k, v) cuts the features the column
            # linear splits by tp, which MindSpore's Split needs whole: batch-only, as the SwiGLU's Split
            # (_split_interiors); brought forward from the projection it takes a sequence split instead
            name = producer_through(graph, head.inputs[0], through=("Reshape", "Cast")) if head.inputs else None
            sp = graph.op(name) if name is not None else None
            if sp is None or sp.type not in ("Split", "SplitWithSize") or sp.name in anchored:
                continue
            ss = template_sharding(cached_rule(sp), batch_only, mesh)
            if ss is None or same_placement(plan.choices[sp.name].inputs[0], ss.inputs[0]):
                continue
            anchored.add(sp.name)
            out.append(Choice(sp.name, "2 dimension", "norm",
                              f"cuts the fused projection's features, split by tp, into the inputs of {c.op}: "
                              f"MindSpore's Split needs them whole, so batch-only; brought forward from the "
                              f"projection it splits the sequence instead", anchor_of(sp.name, ss, mesh, sp.type)))
    return out


#: candidates :func:`align_layers` tries at most (each one propagation)
ALIGN_CANDIDATES = 48


_CONTAINERS = ("CellList", "SequentialCell", "ModuleList", "CellDict")


def align_layers(graph: OpGraph, mesh: Mesh, keep: list[Choice], run) -> list[Choice]:
    """Repeated layers laid out alike. MindSpore's search reaches each layer from other seeds and in another
    order (qwen3_moe: layer 0's rotary embedding is reached backward from the Cast the configured BNSD Transpose
    configures, layer 1's forward from the qkv linear, splitting heads by 8, then redistributing into the
    Transpose, 10 ms a step). Where the same operator of the repeated layers (same name pattern, type and
    shapes) has different strategies, anchoring it in every layer with one of them is tried; the fastest such
    pattern is kept if it pays more than the step model resolves."""
    if not keep:
        return keep
    cur = run(keep)
    t_cur = cur.totals()["step_seconds"]
    anchored = {c.op for c in keep}
    groups: dict[tuple, list[str]] = {}
    uses: dict[str, int] = {}
    for cls in graph.cells.values():
        uses[cls] = uses.get(cls, 0) + 1

    def twin(op) -> str:
        # the operator's path inside the outermost Cell of a class built more than once (a layer): deepseek3's
        # multi-token-prediction block holds a TransformerLayer of its own (model.mtp.layers.0.transformer_layer),
        # a twin of the decoder's layers the layer-index pattern alone does not see
        parts = op.cell_path.split(".") if op.cell_path else []
        if not op.name.startswith(op.cell_path + "."):
            return group_key(op.name)
        for k in range(1, len(parts) + 1):
            cls = graph.cells.get(".".join(parts[:k]))
            if uses.get(cls, 0) > 1 and cls not in _CONTAINERS:
                return f"{cls}:" + group_key(op.name[len(".".join(parts[:k])):])
        return group_key(op.name)
    for name, ch in cur.choices.items():
        op = ch.op
        # a functional call has no shard() to write (an anchors file only): not worth a line nobody can apply
        if ch.sharding is None or op.type in ("Cast", "Reshape", "Flatten") or name in anchored \
                or not LAYER_PATH.search(name) or weight_slot(op) is not None or not op.held:
            continue
        key = (twin(op), op.type, tuple(x.spec.shape if x.spec else None for x in op.inputs))
        groups.setdefault(key, []).append(name)
    trials = []
    for members in groups.values():
        if len(members) < 2 or len({cur.choices[m].strategy for m in members}) < 2:
            continue
        seen = set()
        for m in members:
            s = cur.choices[m].sharding
            if s.strategy in seen:
                continue
            seen.add(s.strategy)
            trials.append((graph.op(members[0]).topo_index, members, s))
    trials.sort(key=lambda t: (t[0], t[2].strategy))
    best = _fastest(graph, keep, ([Choice(m, "2 dimension", "layer_twin",
                                          f"repeated layers laid out alike: MindSpore's search reaches this operator "
                                          f"of each layer from other seeds and lays some out otherwise; anchored with "
                                          f"{s.strategy} in every layer", anchor_of(m, s, mesh, graph.op(m).type))
                                   for m in members] for _, members, s in trials[:ALIGN_CANDIDATES]), run)
    if best is None:
        return keep
    t, extra, trial, q = best
    if not pays(t_cur - t, t_cur):
        return keep
    changed, dt = plan_diff(q, cur)
    for c in extra:
        c.needed = (f"without these {len(extra)} anchors: {changed} operators change layout, {step_measure(graph)} "
                    f"{dt * 1e3:+.3f} ms")
    return trial


def _fastest(graph: OpGraph, base: list[Choice], packages, run):
    """The fastest of ``base`` plus each package of anchors (the first of equals), as ``(step seconds, package,
    anchors, plan)``; None when MindSpore's search refuses every one."""
    best = None
    for package in packages:
        trial = sorted(base + package, key=lambda c: graph.op(c.op).topo_index)
        try:
            q = run(trial)
        except (PropagationError, StrategyError):
            continue
        t = q.totals()["step_seconds"]
        if best is None or faster(t, best[0]):
            best = (t, package, trial, q)
    return best


#: anchors :func:`input_path` tries at most (each one propagation), and keeps at most
INPUT_CANDIDATES = 32


INPUT_KEEP = 3


def _downstream_anchors(graph: OpGraph, name: str, keep: list[Choice]) -> list[Choice]:
    """The anchors of ``keep`` on the operators reading ``name``'s output (through Reshapes, Casts and Flattens),
    with their companions: what a batch split starting at ``name`` may make redundant."""
    readers: dict[str, list[str]] = {}
    for op in graph:
        for x in op.inputs:
            if x.kind == "op":
                readers.setdefault(x.ref, []).append(op.name)
    hit, todo, seen = set(), list(readers.get(name, ())), set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if graph.op(n).type in ("Reshape", "Cast", "Flatten"):
            todo.extend(readers.get(n, ()))
        hit.add(n)
    return [c for c in keep if c.op in hit or c.with_op in hit]


def input_path(graph: OpGraph, mesh: Mesh, keep: list[Choice], run, dropped: list | None = None) -> list[Choice]:
    """Rule 3 on the input path: where the data's batch split begins. With a full-batch dataset every device
    reads the whole batch and propagation decides where the split starts; an operator that reads only the
    dataset (through others that do) can start it, its inputs' batch dimension over every device or by dp.
    Each such operator a Cell holds is tried alone with each split, the fastest kept while it pays (at most
    :data:`INPUT_KEEP`). deepseek3's multi-token prediction rolls the ids and labels by one (a StridedSlice
    and a Concat): with the Concat's batch split, MindSpore's search reaches the MTP embedding from it and takes a
    (2, 4) table there instead of scattering the fp32 output over every device (-38.7 ms at dp=2,tp=4); LLaMA's
    labels one-hot split over every device computes the loss once, not tp times (-0.4 ms at dp=8,tp=8)."""
    # size: candidates scored, then taken in order with the plan priced again after each: both passes share the scores
    if not keep or mesh.size == 1:
        return keep
    cur = run(keep)
    anchored = {c.op for c in keep}
    pure: dict[str, bool] = {}
    for op in graph:
        pure[op.name] = any(x.kind in ("input", "op") for x in op.inputs) and all(
            x.kind in ("input", "const") or (x.kind == "op" and pure.get(x.ref, False)) for x in op.inputs)
    # the batch over every device or by dp (deepseek3's MTP Concat: -38.4 ms by all 8 devices, -38.7 by dp;
    # LLaMA's labels: by all 8 only)
    splits = [n for n in dict.fromkeys((mesh.size, mesh.get("dp"))) if n > 1]
    trials = []
    for op in graph:
        if not pure[op.name] or not op.held or op.name in anchored or op.type in ("Reshape", "Flatten", "Cast"):
            continue
        ch = cur.choices[op.name]
        rule = cached_rule(op)
        if ch.sharding is None or not rule.slots:
            continue
        for n in splits:
            rows = []
            for k, row in enumerate(ch.strategy):
                spec = op.inputs[rule.slots[k]].spec if rule.slots[k] < len(op.inputs) else None
                shape = tuple(spec.shape) if spec is not None else ()
                rows.append((n,) + (1,) * (len(row) - 1) if row and shape and shape[0] % n == 0
                            else (1,) * len(row))
            st = tuple(rows)
            if st != ch.strategy and any(r and r[0] > 1 for r in st):
                trials.append((op.name, st))
    base_t = cur.totals()["step_seconds"]
    scored = []
    for name, st in trials[:INPUT_CANDIDATES]:
        c = Choice(name, "3 boundary", "input_batch",
                   f"reads only the dataset: the batch split starts here, its inputs' batch by "
                   f"{max(r[0] for r in st if r)}",
                   Anchor(name, st, origin="advisor"))
        # ... alone, and in place of the anchors on what reads it (an embedding anchored earlier, which the
        # split reaching it lays out otherwise: deepseek3's MTP embedding once its table anchor was tuple-form)
        best = None
        for gone in ([], _downstream_anchors(graph, name, keep)):
            if best is not None and not gone:
                continue
            rest = [x for x in keep if x not in gone]
            trial = sorted(rest + [c], key=lambda x: graph.op(x.op).topo_index)
            try:
                if same_plan(cur, run(trial, price=False)):
                    continue        # propagation lays everything out as before: nothing to price
                q = run(trial)
            except (PropagationError, StrategyError):
                continue
            if best is None or faster(q.totals()["step_seconds"], best[0]):
                best = (q.totals()["step_seconds"], graph.op(name).topo_index, c, tuple(gone), q)
        if best is not None:
            scored.append(best)
    scored.sort(key=lambda x: (x[0], x[1]))
    taken = 0
    for _t, _i, c, gone, q in scored:
        if taken >= INPUT_KEEP:
            break
        if c.op in {x.op for x in keep} or any(x not in keep for x in gone):
            continue
        trial = sorted([x for x in keep if x not in gone] + [c], key=lambda x: graph.op(x.op).topo_index)
        if taken:       # the anchors kept so far changed the plan this one was scored on
            try:
                q = run(trial)
            except (PropagationError, StrategyError):
                continue
        t = q.totals()["step_seconds"]
        if not pays(base_t - t, base_t):
            continue
        changed, dt = plan_diff(q, cur)
        c.needed = f"without it: {changed} operators change layout, {step_measure(graph)} {dt * 1e3:+.3f} ms"
        for x in gone:
            if dropped is not None:
                dropped.append((x, f"replaced by the batch split starting at {c.op}: {changed} operators change "
                                   f"layout, {step_measure(graph)} {dt * 1e3:+.3f} ms"))
        keep, cur, base_t = trial, q, t
        taken += 1
    return keep


#: table layouts :func:`embedding_tables` tries per embedding at most (each with and without its companion)
TABLE_CANDIDATES = 12


def _embedding_table(graph: OpGraph, op: Op, rules: Rules) -> tuple[int, int] | None:
    """(input slot, row count) of ``op``'s weight table when ``op`` is an embedding of a large vocabulary."""
    slots = weight_params(graph, op)
    want = {"Embedding": 1, "Gather": 0, "GatherV2": 0}.get(op.type)
    if want is None or want not in slots or op.inputs[want].spec is None or len(op.inputs[want].spec.shape) != 2:
        return None
    vocab = op.inputs[want].spec.shape[0]
    return (want, vocab) if vocab >= rules.thresholds.get("large_vocab", 16384) else None


def embedding_tables(graph: OpGraph, mesh: Mesh, rules: Rules, keep: list[Choice], dropped: list,
                      run) -> list[Choice]:
    """Each large embedding table's layout, chosen by the step model among the layouts MindSpore generates for
    it with the indices split as the plan has them, and the vocabulary-parallel template, each alone and with
    its companion (the layout change after it, batch by dp). Megatron's vocabulary by tp all-reduces the whole
    output; the table's hidden dimension by tp gathers it (half the bytes) and is what the step model picks on the
    zoo's GPT (-2.0 ms of 82.8) and LLaMA-2-70B's shape (dp=2,tp=4: -2.1 ms of 232.6). The fastest is kept if it
    pays more than the step model resolves and adds less than :data:`MEMORY_WORTH` of state per device.

    Only a table a Cell holds: a functional call has no shard() line to carry the layout (MindFormers' embedding
    runs inside VocabParallelEmbedding's Morph, whose body is written for its own table layouts: there a
    (2, 4) table was 18 ms faster on qwen3 by the model, but no shard() of that class can express it)."""
    sp = uses_sequence_parallel(graph, mesh)
    for op in graph:
        found = _embedding_table(graph, op, rules)
        # a functional call (MindFormers' embedding, inside its Morph body) has no shard() line to write: its
        # layout is the class's own
        if found is None or not op.held:
            continue
        slot, vocab = found
        cur = run(keep)
        t_cur = cur.totals()["step_seconds"]
        mine = [c for c in keep if c.op == op.name or c.with_op == op.name]
        rest = [c for c in keep if c.op != op.name and c.with_op != op.name]
        rule = cached_rule(op)
        # the table's layouts, the other inputs (the indices) kept as the plan has them
        table = rule.slots.index(slot)
        now = cur.choices[op.name].strategy
        # ... over every device (a table split leaving devices to repeat the lookup is never the fastest: measured
        # on the zoo's GPT and LLaMA, where the candidates using part of the devices priced 2-90 ms slower)
        options = [s for s in candidates(op, mesh.size, rule)
                   if (now is None or all(r == n for i, (r, n) in enumerate(zip(s, now)) if i != table))
                   and math.prod(math.prod(r) for r in s) == mesh.size]
        tmpl = template_sharding(rule, rules.templates.get(
            "embedding_table_vocab_parallel" if op.type == "Embedding" else "embedding_vocab_parallel", {}), mesh)
        if tmpl is not None and tmpl.strategy not in options:
            options.append(tmpl.strategy)
        options = [s for s in options if any(math.prod(r) > 1 for r in s)][:TABLE_CANDIDATES]
        comp = embedding_companion(graph, op, rules, mesh, sp)
        heads = [Choice(op.name, "1 weight", "embedding_table",
                        f"embedding with a large vocabulary ({vocab} rows): of {len(options)} table layouts, "
                        f"the fastest by the step model", Anchor(op.name, s, origin="advisor")) for s in options]
        best = _fastest(graph, rest, [p for h in heads for p in (([h], [h, comp]) if comp is not None else ([h],))],
                        run)
        if best is None:
            continue
        t, package, trial, q = best
        if not pays(t_cur - t, t_cur) or state_bytes(q) - state_bytes(cur) >= MEMORY_WORTH or same_plan(cur, q):
            continue
        changed, dt = plan_diff(cur, q)
        what = f"{changed} operators change layout, {step_measure(graph)} {dt * 1e3:+.3f} ms"
        for c in package:
            c.needed = f"instead of propagation's table layout: {what}" if c.op == op.name else \
                f"with {op.name}'s table layout: {what}"
        for c in mine:
            dropped.append((c, f"replaced by the table layout {package[0].anchor.strategy}: {what}"))
        keep = trial
    return keep


def take_alternatives(graph: OpGraph, keep: list[Choice], dropped: list, run) -> list[Choice]:
    """A kept anchor with another layout on offer (a weight MatMul whose weight and activations are of
    comparable size: Megatron's layout or data parallel) takes it where the step estimate is faster, one
    pattern (across repeated layers) at a time, unless that costs :data:`MEMORY_WORTH` more weight, gradient
    and optimizer state per device. An alternative the plan then does not need goes, as in minimality."""
    alts: dict[str, list[Choice]] = {}
    for c in keep:
        if c.alternative is not None and c.alternative.anchor is not None:
            alts.setdefault(group_key(c.op, graph), []).append(c)
    if not alts:
        return keep
    cur = run(keep)
    for key in sorted(alts, key=lambda k: graph.op(alts[k][0].op).topo_index):
        members = alts[key]
        swap = {id(c): c.alternative for c in members}
        swapped = [swap.get(id(c), c) for c in keep]
        # an alternative comes with its package (a data-parallel row linear under sequence parallelism: the
        # element-wise operators between it and its column partners on the sequence-parallel layout), or with
        # those operators kept where the column linears hand them their rows (the redistribution then at the row
        # linear's input: deepseek3's dense SwiGLU at dp=8,tp=8, 16 ms faster than on the sequence-parallel rows)
        have = {c.op for c in swapped}
        sp = [f for c in members for f in c.alternative.package if f.op not in have]
        kept = [Choice(f.op, f.rule, "pair_interior_column",
                       f"between the data-parallel {f.with_op} and its column partners: as the column linears hand "
                       f"it its rows", anchor_of(f.op, cur.choices[f.op].sharding, cur.mesh, graph.op(f.op).type),
                       with_op=f.with_op)
                for f in sp if cur.choices[f.op].sharding is not None]
        best = _fastest(graph, swapped, [sp] + ([kept] if kept and len(kept) == len(sp) else []), run)
        if best is None:
            continue
        _t, followers, trial, q = best
        changed, dt = plan_diff(cur, q)
        more = state_bytes(q) - state_bytes(cur)
        if not faster(q.totals()["step_seconds"], cur.totals()["step_seconds"]) or more >= MEMORY_WORTH:
            continue
        what = f"{changed} operators change layout, {step_measure(graph)} {dt * 1e3:+.3f} ms, " \
               f"{more / 2**20:+.0f} MiB weight/gradient/optimizer state per device"
        for c in members:
            c.alternative.needed = f"instead of {c.template}: {what}"
            dropped.append((c, f"replaced by {c.alternative.template}: {what}"))
        for f in followers:
            f.needed = f"with the alternative {f.with_op}: {what}"
        keep, cur = trial, q
        alt_ids = {id(c.alternative) for c in members}
        rest = [c for c in keep if id(c) not in alt_ids]
        try:
            q = run(rest, price=False) if rest else None
        except (PropagationError, StrategyError):
            continue
        if q is not None and same_plan(cur, q):
            keep = rest
            for c in members:
                dropped.append((c.alternative, "propagation gives the same layouts and cost without it"))
    return keep
