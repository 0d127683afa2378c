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
"""
from __future__ import annotations

import collections
import math
import os
import re
from dataclasses import dataclass, field

import yaml

from ..errors import PropagationError, RulesError, StrategyError
from ..yamlio import compose_file
from ..frontend.graph import Op, OpGraph, ShardLayout
from ..engine.layout import squeeze
from ..engine.mesh import Hardware, Mesh
from ..engine.ops import FactorRule, Sharding, _sharding, candidates, reshape_layout, shard_anchor
from ..engine.plan import Anchor, Plan
from ..engine.propagate import price_plan, propagate
from ..engine.search import NO_LAYOUT_INIT, _cached_rule, _follow, _same, no_cyclic_gc

RULES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "rules")
DEFAULT_RULES = os.path.join(RULES_DIR, "default.yaml")


# --------------------------------------------------------------------------------------
# rules


@dataclass(frozen=True)
class Rules:
    thresholds: dict
    categories: dict
    templates: dict
    sources: tuple[str, ...]


_THRESHOLDS = {"large_vocab", "long_sequence", "boundary_ratio"}


def load_rules(extra: list[str] | None = None) -> Rules:
    """The default rules, then each file in ``extra`` merged over them (categories and templates
    replace by name). A malformed file is a :class:`RulesError` naming the file and line; a template or
    category name the advisor does not use (a misspelling) is one too, with "did you mean"."""
    data = {"thresholds": {}, "categories": {}, "templates": {}}
    sources = []
    for path in [DEFAULT_RULES] + list(extra or []):
        d = _read_rules(path, data["templates"] if sources else None, data["categories"] if sources else None)
        for k in data:
            data[k].update(d.get(k, {}))
        sources.append(path)
    return Rules(data["thresholds"], {k: frozenset(v) for k, v in data["categories"].items()},
                 data["templates"], tuple(sources))


def _read_rules(path: str, known_templates=None, known_categories=None) -> dict:
    """One rules file, validated against :class:`strategist.schema.RulesSpec` (types, positive finite
    thresholds, unknown keys with "did you mean", duplicate keys)."""
    from ..schema import validate_rules
    out = validate_rules(compose_file(path, "rules file"), path, known_templates, known_categories)
    if "templates" in out:
        out["templates"] = {name: {f: (ax,) if isinstance(ax, str) else tuple(ax) for f, ax in v.items()}
                            for name, v in out["templates"].items()}
    return out


def check_boundaries(graph: OpGraph, boundaries: dict[str, str]) -> None:
    """Each ``--boundary CELL.PATH`` must name a cell of the model (a prefix of some operator's cell path)."""
    from ..schema import did_you_mean
    cells = {op.cell_path for op in graph}
    prefixes = {".".join(c.split(".")[:k]) for c in cells for k in range(1, len(c.split(".")) + 1) if c}
    for path in boundaries:
        if path not in prefixes:
            hint = did_you_mean(path, prefixes) if prefixes else ""
            raise RulesError(f"--boundary {path}: the model has no cell {path!r}"
                             + (hint if hint.startswith(" (did") else " (see strategist inspect)"))


# --------------------------------------------------------------------------------------
# templates -> shardings


def template_sharding(op: Op, rule: FactorRule, template: dict, mesh: Mesh,
                      share: frozenset = frozenset()) -> Sharding | None:
    """The sharding a template gives ``op`` on ``mesh``: each factor takes the named mesh axes the
    mesh has (size > 1), trimmed from the inner end until the split divides the factor; a mesh
    axis is used by one factor only (but by the factors in ``share`` too: FlashAttention's key/value heads
    under a Layout, on the query heads' axes). None when nothing is split or the result is invalid."""
    axis: dict[str, tuple[int, ...]] = {}
    used: set[int] = set()
    for f in rule.factors:
        if f not in template or f in rule.unsplittable:
            continue
        axes = [mesh.index(n) for n in template[f] if n in mesh.names and mesh.get(n) > 1
                and (f in share or mesh.index(n) not in used)]
        size = rule.factor_size(f)
        while axes and size % math.prod(mesh.shape[a] for a in axes):
            axes.pop()
        if axes:
            axis[f] = tuple(axes)
            used.update(axes)
    if not axis:
        return None
    splits = {f: math.prod(mesh.shape[a] for a in ax) for f, ax in axis.items()}
    strategy = tuple(tuple(splits.get(f, 1) if f else 1 for f in t) for t in rule.strategy_rows)
    try:
        return _sharding(rule, strategy, mesh.shape, splits, axis, 1, None)
    except Exception:
        return None


def anchor_of(name: str, s: Sharding, mesh: Mesh, op_type: str = "") -> Anchor:
    """An anchor in Layout form reproducing sharding ``s`` exactly over the mesh (the tuple form for
    operators MindSpore refuses a Layout on, such as Gather)."""
    from ..engine.search import LAYOUT_REJECTED
    if op_type in LAYOUT_REJECTED or tuple(s.dev_matrix) != tuple(mesh.shape):
        # a sharding whose device matrix is its strategy's own (a tuple strategy's): the tuple reproduces it,
        # a Layout over the mesh's axes would not
        return Anchor(name, s.strategy, origin="advisor")
    lays = tuple(ShardLayout.of(l, mesh.names, mesh.shape) for l in s.inputs)
    return Anchor(name, None, lays, origin="advisor")


# --------------------------------------------------------------------------------------
# the advice


@dataclass
class Choice:
    op: str
    rule: str            # "1 weight", "2 dimension", "3 boundary", "4 fused"
    template: str
    why: str
    anchor: Anchor
    needed: str = ""     # why it survived minimality
    declared: bool = False   # from a user-declared --boundary: kept even when it does not pay
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

    @property
    def anchors(self) -> dict[str, Anchor]:
        return {c.op: c.anchor for c in self.chosen}


#: the sequence-parallel package's templates (kept as the config asks, see propose)
SP_TEMPLATES = frozenset({"norm_sequence_parallel", "matmul_row_sequence_parallel", "residual_sequence_parallel"})

#: weight operators a Megatron column/row or data-parallel template applies to
WEIGHT_MATMULS = frozenset({"MatMul", "BatchMatMul", "MatMulExt", "BatchMatMulExt"})


def _weight_slot(op: Op) -> int | None:
    p = op.params
    return next(iter(p)) if p else None


def _sequence_first(graph: OpGraph) -> bool:
    """MindFormers' (mcore) training graphs carry activations sequence-first, ``[S, B, H]``; its front end says
    so (``graph.sequence_first``: False for the batch-first legacy models)."""
    given = getattr(graph, "sequence_first", None)
    if given is not None:
        return bool(given)
    m = str(getattr(graph, "model", "") or "")
    return m.startswith("mindformers:") or m.endswith((".yaml", ".yml"))


def _sequence_parallel(graph: OpGraph, mesh: Mesh) -> bool:
    """The config asks for sequence parallelism (MindFormers' use_seq_parallel): on mcore's sequence-first rows
    (the Morph-inlined linears' local rows), or on a legacy model's batch-first ``[B, S, H]`` (ChatGLM2)."""
    if not getattr(graph, "sequence_parallel", False) or mesh.get("tp") <= 1:
        return False
    if _sequence_first(graph):
        return any(op.attrs.get("strategist_local_rows") for op in graph)
    return _batch_first_rows(graph, mesh) is not None


def _batch_first_rows(graph: OpGraph, mesh: Mesh) -> dict | None:
    """Sequence parallelism on batch-first ``[B, S, H]`` (a legacy model): the template of the layout a row
    linear's output reduce-scattered over its rows ``[B*S]`` by (dp, ep, cp, tp), outer first, hands the norms
    through the Reshape back to ``[B, S, H]`` with no communication: the leading axes whose sizes multiply to B's
    on B, the rest on S (B by dp, S by cp and tp when each dp rank holds one sequence, MindFormers' own layout),
    or all on B where B holds them all. None where an axis would straddle B and S (no Layout expresses it), or cp
    would land on B (the attention splits S by cp)."""
    shape = next((tuple(op.inputs[0].spec.shape) for op in graph if op.type in ("RmsNorm", "LayerNorm")
                  and op.inputs and op.inputs[0].spec is not None and len(op.inputs[0].spec.shape) == 3), None)
    if shape is None:
        return None
    b, s = shape[0], shape[1]
    d0, d1, left = [], [], b
    for a in ("dp", "ep", "cp", "tp"):
        n = mesh.get(a) if a in mesh.names else 1
        if n <= 1:
            continue
        if left > 1:
            if left % n:
                return None
            left //= n
            d0.append(a)
        else:
            d1.append(a)
    if "cp" in d0 or s % math.prod(mesh.get(a) for a in d1):
        return None
    return {"d0": d0, "d1": d1}


def _sp_templates(graph: OpGraph, t: dict, mesh: Mesh) -> tuple[dict, dict]:
    """(the sequence-parallel norm's template, the plain norm's) for the graph's orientation: ``[S, B, H]`` S by cp
    and tp, B by dp; batch-first ``[B, S, H]`` as the row linears' reduce-scattered rows arrive
    (:func:`_batch_first_rows`)."""
    if _sequence_first(graph):
        return t.get("norm_sequence_parallel", {}), t.get("norm_sequence_first", {})
    return _batch_first_rows(graph, mesh) or {}, t.get("norm", {})


def _weight_params(graph: OpGraph, op: Op) -> dict[int, str]:
    """Input slot -> Parameter, directly or through one Cast (MindFormers' Morph-inlined linears cast the
    weight to the compute dtype before the MatMul)."""
    out = dict(op.params)
    for i, x in enumerate(op.inputs):
        if x.kind == "op" and i not in out and x.ref in graph:
            src = graph.op(x.ref)
            if src.type == "Cast" and src.params:
                out[i] = next(iter(src.params.values()))
    return dict(sorted(out.items()))


def _roles(graph: OpGraph, rules: Rules) -> dict[str, str]:
    """Weight MatMul -> "column" | "row" by data flow: a column MatMul's output reaching another weight
    MatMul before a norm makes that one its row partner."""
    weight_mm = {"MatMul", "BatchMatMul", "MatMulExt", "BatchMatMulExt"}
    norms = rules.categories.get("norm", frozenset())
    carry: dict[str, bool] = {}
    roles: dict[str, str] = {}
    for op in graph:
        incoming = any(carry.get(x.ref, False) for x in op.inputs if x.kind == "op")
        if op.type in weight_mm and _weight_params(graph, op):
            roles[op.name] = "row" if incoming else "column"
            carry[op.name] = roles[op.name] == "column"
        elif op.type in norms:
            carry[op.name] = False
        else:
            carry[op.name] = incoming
    return roles


def _megatron_pairs(graph: OpGraph, rules: Rules) -> set[str]:
    """The weight MatMuls of Megatron column -> row pairs: each row-role MatMul and every column-role one whose
    output reaches it before a norm (a lone projection into a norm or the head is not in a pair)."""
    weight_mm = {"MatMul", "BatchMatMul", "MatMulExt", "BatchMatMulExt"}
    norms = rules.categories.get("norm", frozenset())
    carry: dict[str, frozenset] = {}
    out: set[str] = set()
    rows: set[str] = set()
    for op in graph:
        incoming = frozenset().union(*(carry.get(x.ref, frozenset()) for x in op.inputs if x.kind == "op"))
        if op.type in weight_mm and _weight_params(graph, op):
            if incoming:
                rows.add(op.name)
                out.update(incoming)
                carry[op.name] = frozenset()
            else:
                carry[op.name] = frozenset({op.name})
        elif op.type in norms:
            carry[op.name] = frozenset()
        else:
            carry[op.name] = incoming
    # a down-projection into a latent (MLA's kv_down, whose rotary slice alone reaches the attention and the
    # output projection after it) is no column of a pair
    cols = {n for n in out if not _feeds_latent(graph, n, None, norms)}
    # a row whose only column partners were latent down-projections is in no pair
    return cols | {r for r in rows if any(c in cols for c in _column_partners(graph, r, weight_mm))}


def _walk_back_to_weights(graph: OpGraph, row: str, weight_mm) -> tuple[set[str], list[str]]:
    """Walking back from ``row``'s activation input, stopping at each weight MatMul: (the weight MatMuls
    reached, the operators passed on the way)."""
    out, passed, seen = set(), [], {row}
    todo = [x.ref for x in graph.op(row).inputs if x.kind == "op"]
    while todo:
        n = todo.pop()
        if n in seen or n not in graph:
            continue
        seen.add(n)
        op = graph.op(n)
        if op.type in weight_mm and _weight_params(graph, op):
            out.add(n)
            continue
        passed.append(n)
        todo.extend(x.ref for x in op.inputs if x.kind == "op")
    return out, passed


def _column_partners(graph: OpGraph, row: str, weight_mm) -> set[str]:
    """The weight MatMuls reached walking back from ``row``'s activation input (stopping at each)."""
    return _walk_back_to_weights(graph, row, weight_mm)[0]


def _pair_interior(graph: OpGraph, row: Op, mesh: Mesh, tmpl: dict, with_op: str) -> list["Choice"]:
    """The operators between row-role MatMul ``row`` and its column partners (Reshapes, Casts and Transposes
    left to the search), each anchored by ``tmpl``: one package with ``with_op``."""
    out = [Choice(n, "1 weight", "pair_interior_sequence_parallel",
                  f"between the data-parallel {with_op} and its column partners: the sequence-parallel layout, as "
                  f"the rows arrive", anchor_of(n, s, mesh, graph.op(n).type), with_op=with_op)
           for n, s in _interior_shardings(graph, _walk_back_to_weights(graph, row.name, WEIGHT_MATMULS)[1], tmpl,
                                           mesh)]
    return sorted(out, key=lambda c: graph.op(c.op).topo_index)


def _interior_shardings(graph: OpGraph, names, tmpl: dict, mesh: Mesh) -> list[tuple[str, Sharding]]:
    """(name, sharding) of the operators ``names`` (between a pair's linears) laid out by ``tmpl``: those with an
    output of rank >= 3; Reshapes, Casts and Transposes are left to the search."""
    out = []
    for n in names:
        op = graph.op(n)
        if op.type in ("Reshape", "Flatten", "Cast", "Transpose") or not op.outputs or op.outputs[0] is None \
                or len(op.outputs[0].shape) < 3:
            continue
        s = template_sharding(op, _cached_rule(op), tmpl, mesh)
        if s is not None:
            out.append((n, s))
    return out


def _activation_bytes(op: Op) -> int:
    ins = [x.spec.nbytes for x in op.inputs if x.kind in ("op", "input") and x.spec is not None]
    outs = [o.nbytes for o in op.outputs if o is not None]
    return max(ins + outs + [1])


def _preferences(graph: OpGraph, rules: Rules, boundaries: dict[str, str]) -> dict[str, str]:
    """Weight op -> "dp" | "tp" | "" by parameter vs activation bytes (rule 3), or by a declared boundary."""
    ratio = float(rules.thresholds.get("boundary_ratio", 8.0))
    out = {}
    for op in graph:
        if op.type not in rules.categories.get("weight", ()) or not _weight_params(graph, op):
            continue
        declared = next((v for path, v in sorted(boundaries.items(), key=lambda kv: -len(kv[0]))
                         if op.cell_path == path or op.cell_path.startswith(path + ".") or op.name.startswith(path)),
                        None)
        if declared:
            out[op.name] = declared
            continue
        pbytes = sum(op.inputs[s].spec.nbytes for s in _weight_params(graph, op))
        r = pbytes / _activation_bytes(op)
        out[op.name] = "tp" if r > ratio else "dp" if r < 1 / ratio else ""
    return out


def _group_key(name: str) -> str:
    """``model.layers.12.attention.wq.matmul`` -> ``model.layers.*.attention.wq.matmul``."""
    return re.sub(r"(?<=\.)\d+(?=\.)", "*", name)


def _layouts_differ(ca, cb) -> bool:
    """Different placement of any input or output (device matrices compared without size-1 axes)."""
    if ca.inputs == cb.inputs and ca.outputs == cb.outputs:
        return False
    sq = lambda ls: tuple(squeeze(l) for l in ls)
    return sq(ca.inputs) != sq(cb.inputs) or sq(ca.outputs) != sq(cb.outputs)


def _reinstate(graph: OpGraph, mesh: Mesh, keep: list, dropped: list, run) -> list:
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
            groups.setdefault(_group_key(c.with_op or c.op), []).append((c, why))     # minimality's groups
    for key in sorted(groups, key=lambda k: min(graph.op(c.op).topo_index for c, _ in groups[k])):
        members = groups[key]
        ops = {c.op for c, _ in members}
        differ = False
        for c, _ in members:
            try:
                sh = shard_anchor(graph.op(c.op), c.anchor, mesh.size, _cached_rule(graph.op(c.op)))
            except StrategyError:          # the search would refuse it too
                differ = False
                break
            differ = differ or _layouts_differ(sh, plan.choices[c.op])
        if not differ:
            continue
        # (a package's fallbacks, adopted when it went, give way to it)
        trial = sorted([k for k in keep if k.op not in ops] + [c for c, _ in members],
                       key=lambda x: graph.op(x.op).topo_index)
        try:
            q = run(trial)
        except (PropagationError, StrategyError):
            continue
        changed, dt = _diff(plan, q)
        if dt < -_worth(plan) * _lines(c for c, _ in members):
            keep, plan = trial, q
            for c, why in members:
                dropped.remove((c, why))
                c.needed = (f"reinstated after the anchors checked later went: without "
                            f"{'these' if len(members) > 1 else 'it'} {changed} operators change layout and the "
                            f"step estimate changes by {-dt * 1e3:+.3f} ms")
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
        patterns.setdefault(_group_key(c.op), []).append((c, why))
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
        changed, dt = _diff(plan, q)
        if dt >= -_worth(plan):
            return False
        keep, plan = trial, q
        for c, why in pat:
            dropped.remove((c, why))
            c.needed = (f"reinstated alone (its package does not pay whole): without it {changed} operators "
                        f"change layout and the step estimate changes by {-dt * 1e3:+.3f} ms")
        return True

    _settle(sorted(patterns, key=lambda k: min(graph.op(c.op).topo_index for c, _ in patterns[k])), back)
    return keep, plan


def _settle(keys, attempt) -> None:
    """``attempt(key)`` for each key in order, round and round, a key that succeeded leaving the round: until every
    key left has failed since the last success (on the state as it now is). The advisor's greedy passes that an
    earlier step can change the verdict of (_reinstate_patterns, _every_line_pays)."""
    queue = collections.deque(keys)
    failed = 0
    while queue and failed < len(queue):
        key = queue.popleft()
        if attempt(key):
            failed = 0
        else:
            queue.append(key)
            failed += 1


def _same_plan(a: Plan, b: Plan) -> bool:
    """Same layouts everywhere (and, when both are priced, the same totals: prices are a function of
    the layouts, so this only guards the pricing itself). A Cast's searched layout is not compared: MindSpore
    drops it after the search, and the Cast runs in its input's layout (:func:`strategist.cost.pricing.cast_overlay`),
    which the other operators' decide -- except a Cast of a Parameter, whose layout slices the Parameter."""
    for name, ca in a.choices.items():
        if (ca.op.type != "Cast" or ca.op.inputs[0].kind == "param") and _layouts_differ(ca, b.choices[name]):
            return False
    if not (a.priced and b.priced):
        return True
    ta, tb = a.totals(), b.totals()
    return all(math.isclose(ta[k], tb[k], rel_tol=1e-9, abs_tol=1e-9) for k in ta)


def _diff(a: Plan, b: Plan) -> tuple[int, float]:
    changed = sum(1 for n, ca in a.choices.items() if _layouts_differ(ca, b.choices[n]))
    return changed, b.totals()["step_seconds"] - a.totals()["step_seconds"]


def _cut_before(graph: OpGraph, name: str) -> str | None:
    """The operator producing ``name``'s only activation input, looking through Reshape and Cast (which
    cannot or need not be configured): every path from the data into ``name`` passes through it."""
    acts = [x for x in graph.op(name).inputs if x.kind == "op"]
    return _producer_through(graph, acts[0]) if len(acts) == 1 else None


def _producer_through(graph: OpGraph, x, through=("Reshape", "Cast")) -> str | None:
    """The operator producing input ``x``, looking through the ``through`` types (each with one activation input)."""
    while x.kind == "op":
        op = graph.op(x.ref)
        if op.type not in through:
            return op.name
        acts = [i for i in op.inputs if i.kind == "op"]
        if len(acts) != 1:
            return None
        x = acts[0]
    return None


def _splits_nothing_model_parallel(tmpl: dict, mesh: Mesh) -> bool:
    """A template whose model-parallel factors (those mapped only to tp / ep) all land on axes the mesh
    lacks (or of size 1): "column-parallel by tp" on a pure dp mesh would split nothing."""
    mp = [v if isinstance(v, (list, tuple)) else [v] for v in (tmpl or {}).values()]
    mp = [axes for axes in mp if axes and all(a in ("tp", "ep") for a in axes)]
    return bool(mp) and all(mesh.get(a) <= 1 for axes in mp for a in axes)


def _attention_projections(graph: OpGraph, roles: dict[str, str], norms) -> set[str]:
    """The weight MatMuls around each FlashAttentionScore: the column-role ones whose output reaches it
    before another weight MatMul or a norm (q/k/v, MLA's up-projections), and the row-role one its output
    reaches first (the output projection)."""
    succ = graph.nx.successors
    pred = graph.nx.predecessors
    out: set[str] = set()
    for fa in (op.name for op in graph if op.type == "FlashAttentionScore"):
        for walk, role in ((pred, "column"), (succ, "row")):
            seen, todo = {fa}, list(walk(fa))
            while todo:
                n = todo.pop()
                if n in seen or n not in graph:
                    continue
                seen.add(n)
                op = graph.op(n)
                if n in roles:
                    if roles[n] == role and not (role == "column" and _feeds_latent(graph, n, roles, norms)):
                        out.add(n)
                    continue
                if op.type in norms or op.type == "FlashAttentionScore":
                    continue
                todo.extend(walk(n))
    return out


def _feeds_latent(graph: OpGraph, name: str, roles: dict[str, str] | None, norms) -> bool:
    """True when some path out of weight MatMul ``name`` reaches a norm of a rank-3 activation (or, with
    ``roles``, another weight MatMul of ``roles``) before a FlashAttentionScore: a down-projection into a
    latent (MLA's ``linear_kv_down_proj`` into ``kv_layernorm``, its rotary slice alone reaching the
    attention), not a head projection (a per-head q/k norm on ``[S, B, N, D]`` does not count). Without
    ``roles`` a path ends at any weight MatMul."""
    seen, todo = {name}, list(graph.nx.successors(name))
    while todo:
        n = todo.pop()
        if n in seen or n not in graph:
            continue
        seen.add(n)
        op = graph.op(n)
        if op.type == "FlashAttentionScore":
            continue
        if roles is not None and n in roles:
            return True
        if roles is None and op.type in WEIGHT_MATMULS and _weight_params(graph, op):
            continue
        if op.type in norms:
            x = op.inputs[0].spec if op.inputs else None
            if x is not None and len(x.shape) <= 3:
                return True
            continue
        todo.extend(graph.nx.successors(n))
    return False


def _grouped_query_attention(op: Op, rule: FactorRule, tmpl: dict, mesh: Mesh, s: Sharding | None):
    """FlashAttentionScore with fewer key/value heads than tp can split (glm4: 32 query heads, 2 key/value heads,
    tp=8): the template's heads-by-tp split must divide both head counts, so it leaves the heads whole and every tp
    device computes all the attention. Under a Layout MindSpore splits the query heads by more axes than the
    key/value heads (MindFormers' own GQA layout, q ``("mp1", "mp2")``, k/v ``"mp1"``; verified): tp is split in two
    here, ``tp`` (the part dividing the key/value heads, g = gcd(kv heads, tp)) and ``tp_group`` (the rest), the
    query heads over both, the key/value heads over ``tp``. Returns (sharding, the mesh with tp split) or None."""
    lay = rule.layout_rule
    tp = mesh.get("tp")
    if lay is None or tp <= 1 or "n2" not in lay.factors or "tp" not in mesh.names or "tp_group" in mesh.names:
        return None
    if s is not None and s.splits.get("n", 1) >= tp:
        return None
    heads, kv = lay.factor_size("n"), lay.factor_size("n2")
    g = math.gcd(kv, tp)
    if heads % tp:
        return None
    axes, t2 = [], dict(tmpl)
    for n, size in mesh.axes:
        if n != "tp":
            axes.append((n, size))
        elif g > 1:
            axes += [("tp", g), ("tp_group", tp // g)]
        else:
            axes.append(("tp_group", tp))
    t2["n"] = [a for a in ("tp", "tp_group") if any(n == a for n, _ in axes)]
    t2["n2"] = ["tp"] if g > 1 else []
    sub = Mesh(tuple(axes))
    gs = template_sharding(op, lay, t2, sub, share=frozenset({"n2"}))
    if gs is None or gs.splits.get("n", 1) != tp:
        return None
    return gs, sub


def _split_interiors(graph: OpGraph, fa: Op, roles: dict[str, str], tmpl: dict, mesh: Mesh) -> list["Choice"]:
    """The companions of a grouped-query FlashAttention anchor: in the same layer, the operators between each
    row-role MatMul and its column partners whose way back holds a Split (a fused gate/up SwiGLU: the Split cuts
    the features the column linear splits by tp, which MindSpore's Split needs whole), laid out batch-only by
    ``tmpl``, as MindFormers' ChatGLM2 MLP has them. Propagated from the grouped-query layout, that Split takes
    the sequence split by tp, and the row linear then gathers its input over dp (glm4 at dp=8,tp=8, 4 layers:
    828 ms with the attention alone, 315 ms with this package, 337 ms the advice without either)."""
    m = _LAYER.search(fa.name)
    if m is None:
        return []
    prefix = fa.name[:m.end()]
    out = []
    for row, role in sorted(roles.items(), key=lambda kv: graph.op(kv[0]).topo_index):
        if role != "row" or not row.startswith(prefix):
            continue
        passed = _walk_back_to_weights(graph, row, WEIGHT_MATMULS)[1]
        if fa.name in passed or not any(graph.op(n).type in ("Split", "SplitWithSize") for n in passed):
            continue
        out += [Choice(n, "4 fused", "swiglu_batch_only",
                       f"with the grouped-query {fa.name}: the SwiGLU between {row} and its column partners "
                       f"batch-only (its Split needs the features whole; propagated from the attention's layout it "
                       f"would split the sequence, and {row} gather its rows)",
                       anchor_of(n, s, mesh, graph.op(n).type), with_op=fa.name)
                for n, s in _interior_shardings(graph, passed, tmpl, mesh)]
    return sorted(out, key=lambda c: graph.op(c.op).topo_index)


def _token_template(op: Op, rule: FactorRule, axes) -> dict | None:
    """A template splitting ``op``'s token factor over ``axes``: the factor of the largest dimension of its
    activation inputs of rank >= 2 (an MoE router's [1, tokens, experts] scores, [1, tokens*k] indices)."""
    best = None
    for k, slot in enumerate(rule.slots):
        x = op.inputs[slot] if slot < len(op.inputs) else None
        if x is None or x.kind == "param" or x.spec is None or len(x.spec.shape) < 2 or k >= len(rule.strategy_rows):
            continue
        for f, size in zip(rule.strategy_rows[k], x.spec.shape):
            if f and f not in rule.unsplittable and (best is None or size > best[0]):
                best = (size, f)
    return {best[1]: tuple(axes)} if best else None


def _data_parallel_template(graph: OpGraph, op: Op, templates: dict) -> str:
    """The data-parallel template of weight MatMul ``op``: rows merged from sequence-first ``[S, B, H]`` take
    S's axes outer, as the reshape back to ``[S, B, N]`` deals them."""
    # looking through a bf16 cast between the rows' reshape and the linear
    name = _producer_through(graph, op.inputs[0], through=("Cast",)) if op.inputs else None
    src = graph.op(name) if name is not None else None
    if src is not None and src.attrs.get("strategist_local_rows") and "matmul_data_parallel_sequence_first" in templates:
        return "matmul_data_parallel_sequence_first"
    return "matmul_data_parallel"


def _data_parallel_choice(graph: OpGraph, op: Op, rule: FactorRule, templates: dict, mesh: Mesh) -> "Choice | None":
    """``op`` (a weight MatMul) data parallel over every device, as an alternative to its Megatron layout."""
    tname = _data_parallel_template(graph, op, templates)
    s = template_sharding(op, rule, templates.get(tname, {}), mesh)
    if s is None:
        return None
    return Choice(op.name, "1 weight", tname, "weight and activations of comparable size: data parallel over every "
                  "device is faster by the step model than the Megatron layout", anchor_of(op.name, s, mesh, op.type))


def _reduce_scatter_rows(anchor: Anchor, mesh: Mesh, sequence_first: bool = True) -> Anchor:
    """A row-parallel MatMul anchor (``[S*B, K] x [K, N]``, K by tp) whose output is reduce-scattered over
    its rows: sequence-first rows take S's axes (cp, tp) then B's (dp, ep), outer first, as a device-local
    reshape back to ``[S, B, N]`` hands them to the sequence-parallel norms; batch-first rows ``[B*S]`` B's axes
    then S's."""
    n = len(mesh.shape)
    order = ("cp", "tp", "dp", "ep") if sequence_first else ("dp", "ep", "cp", "tp")
    rows = tuple(n - 1 - mesh.index(a) for a in order if a in mesh.names and mesh.get(a) > 1)
    out = ShardLayout(mesh.shape, mesh.names, (rows, ()))
    return Anchor(anchor.op, anchor.strategy, anchor.layouts, out_layouts=(out,), origin=anchor.origin)


def _embedding_companion(graph: OpGraph, op: Op, rules: Rules, mesh: Mesh, sp: bool = False) -> Choice | None:
    """The layout change right after a vocabulary-parallel Embedding (MindFormers: reshape to [B, S, H],
    then a Transpose to sequence-first [S, B, H]), anchored batch by dp. MindSpore generates an Embedding
    table split only over every device for 1-D ids, so the table's tp split exists only as an anchor; its
    own search then decides the layouts after it, and without this companion it hands the decoder a
    replicated batch. The pair is kept or dropped together."""
    readers = [graph.op(n) for n in graph.nx.successors(op.name)]
    while len(readers) == 1 and readers[0].type in ("Reshape", "Cast"):
        readers = [graph.op(n) for n in graph.nx.successors(readers[0].name)]
    if len(readers) != 1 or readers[0].type != "Transpose":
        return None
    t = readers[0]
    # sequence parallelism: the embedding's partial sums are reduce-scattered over the sequence (by cp and
    # tp), the residual stream's layout between the tensor-parallel blocks
    tname = "embedding_output_sequence_parallel" if sp and "embedding_output_sequence_parallel" in rules.templates \
        else "embedding_output_batch"
    s = template_sharding(t, _cached_rule(t), rules.templates.get(tname, {}), mesh)
    if s is None:
        return None
    return Choice(t.name, "2 dimension", tname,
                  f"companion of the split embedding table {op.name}: the layout change after it, batch by dp"
                  + (", sequence by tp (sequence parallel)" if tname != "embedding_output_batch" else ""),
                  anchor_of(t.name, s, mesh, t.type), with_op=op.name)


def _moe_permute_companion(graph: OpGraph, op: Op, tmpl: dict, mesh: Mesh) -> Choice | None:
    """The permute before a MindFormers MoE FFN Morph (``[S, B, H]`` -> ``[B, S, H]``, then the Reshape to tokens
    ``[B*S, H]``), anchored with its batch over the Morph's token axes: each device then holds its own tokens
    whole. Left to propagation it keeps the residual stream's layout (S by tp, B by dp), whose merged rows are not
    a contiguous slice of the tokens, and MindSpore's search resolves the Reshape with a gather of every token
    (deepseek3: 411 MiB forward, its transpose backward) where an all-to-all at the permute moves 88 MiB."""
    # the tokens' input: the one a Transpose feeds through Reshapes
    t = next((graph.op(n) for n in (_producer_through(graph, x) for x in op.inputs)
              if n is not None and graph.op(n).type == "Transpose"), None)
    if t is None:
        return None
    rule = _cached_rule(t)
    try:
        perm = [rule.inputs[0].index(f) for f in rule.outputs[0]]
    except ValueError:
        return None
    axes = [a for a in tmpl.get("n", []) if mesh.get(a) > 1]
    s = template_sharding(t, rule, {rule.inputs[0][perm[0]]: axes}, mesh) if axes else None
    if s is None:
        return None
    return Choice(t.name, "4 fused", "moe_permute",
                  f"companion of the MoE FFN {op.name}: the permute before it hands each device its own tokens",
                  anchor_of(t.name, s, mesh, t.type))


def propose(graph: OpGraph, mesh: Mesh, rules: Rules, boundaries: dict[str, str] | None = None,
            megatron: bool = False) -> tuple[list[Choice], list[str]]:
    """Rules 1, 3 and 4: the proposed anchors (before rule 2 and minimality), and notes. ``megatron``: the
    linears of column/row pairs (:func:`_megatron_pairs`) that prefer data parallelism are proposed as
    Megatron's pair instead (the advisor tries both, see :func:`advise`)."""
    t = rules.templates
    cats = rules.categories
    roles = _roles(graph, rules)
    prefs = _preferences(graph, rules, boundaries or {})
    if megatron:
        for n in _flippable(graph, rules, prefs, boundaries):
            prefs[n] = ""
    notes: list[str] = []
    out: list[Choice] = []
    order = [op.name for op in graph if op.name in prefs]
    # the config asks for sequence parallelism (MindFormers' use_seq_parallel) on sequence-first rows
    sp = _sequence_parallel(graph, mesh)
    sp_norm, plain_norm = _sp_templates(graph, t, mesh)     # (the norms' templates with and without it)
    sp_head = ""
    router_head: dict[str, str] = {}
    # the embedding tables' row counts: a weight MatMul producing that many features is a language-model head
    # (a wide MLP linear is not: its features are the intermediate size)
    vocabularies = {op.inputs[s].spec.shape[0] for op in graph if op.type in ("Embedding", "Gather", "GatherV2")
                    for s in _weight_params(graph, op)
                    if op.inputs[s].spec is not None and len(op.inputs[s].spec.shape) == 2}
    attention = _attention_projections(graph, roles, cats.get("norm", ()))
    # rule 3: where the preference flips dp -> tp
    boundary_ops: dict[str, str] = {}
    last_dp = None
    for name in order:
        p = prefs[name]
        if p == "dp":
            last_dp = name
        elif last_dp is not None and mesh.get("tp") > 1 and (p == "tp" or (p == "" and name == order[-1])):
            # a last weight op that is not clearly data-parallel (a classifier head whose parameters
            # about equal its activations) after a data-parallel body is a boundary candidate too:
            # minimality drops the cut where it does not pay
            # the dp side sits at the cut in front of the tp op: the producer of its activation. Under
            # MindSpore's seed order the tp op's search runs first and would flood the whole body
            # backward; a configured op at the cut stops it there, and the dataset gives the body dp
            cut = _cut_before(graph, name)
            if cut is not None:
                boundary_ops[cut] = "dp"
            boundary_ops[name] = "tp"
            last_dp = None
    own = _model_own(graph)
    for op in graph:
        if op.name in own:          # configured by the model itself in every parallel build: never advice
            continue
        rule = _cached_rule(op)
        choice = None
        if op.name in boundary_ops:
            if boundary_ops[op.name] == "dp":
                tname = ("conv_data_parallel" if op.type.startswith("Conv") else
                         "matmul_data_parallel" if op.type.startswith(("MatMul", "BatchMatMul")) else "data_parallel")
                tmpl = t.get(tname, {})
                why = (f"parallelism boundary: data parallel up to here, the cut in front of "
                       f"{next(k for k, v in boundary_ops.items() if v == 'tp')}, so the model-parallel side's "
                       f"propagation stops here")
            else:
                tname = ("matmul_column" if op.type.startswith(("MatMul", "BatchMatMul")) else
                         "conv_column" if op.type.startswith("Conv") else "embedding_vocab_parallel")
                tmpl = t.get(tname, {})
                why = "parallelism boundary: parameters outweigh activations from here on (model parallel)"
            choice = ("3 boundary", tname, tmpl, why)
        elif op.cell_class in cats.get("moe_router", ()) and op.type not in ("Reshape", "Flatten", "Cast") \
                and not _weight_params(graph, op) and "moe_router" in t:
            tmpl = _token_template(op, rule, t["moe_router"].get("tokens", ()))
            if tmpl is not None:
                choice = ("4 fused", "moe_router", tmpl,
                          "MoE router: its tokens over every device (each device scores, picks and counts only "
                          "its own tokens), as its gating input arrives; left to propagation it repeats the whole "
                          "batch's routing on every device")
        elif op.type in cats.get("fused", ()):
            if op.type == "FlashAttentionScore":
                choice = ("4 fused", "flash_attention", t.get("flash_attention", {}),
                          "fused attention: heads by tp, batch by dp, query sequence by cp")
            elif op.type in cats.get("norm", ()):
                rank = len(op.inputs[0].spec.shape) if op.inputs and op.inputs[0].spec else 0
                name = "norm" if rank >= 3 else "norm_2d"
                why = "fused norm: tokens by dp (and cp), hidden unsplit"
                if rank >= 3 and _sequence_first(graph) and "norm_sequence_first" in t:
                    name = "norm_sequence_first"      # MindFormers' [S, B, H]: batch by dp, sequence by cp
                    if rank >= 4 and "norm_heads_sequence_first" in t:
                        name = "norm_heads_sequence_first"     # q/k norms on [S, B, N, D]: heads by tp
                    elif getattr(graph, "sequence_parallel", False) and "norm_sequence_parallel" in t \
                            and mesh.get("tp") > 1:
                        # the config asks for sequence parallelism: S by cp and tp between the tp blocks
                        name = "norm_sequence_parallel"
                        why = "fused norm, sequence parallel (the config's use_seq_parallel): sequence by tp (and cp), batch by dp"
                tmpl = t.get(name, {})
                if rank == 3 and not _sequence_first(graph) and sp:
                    # a legacy model's batch-first [B, S, H] under the config's sequence parallelism
                    name, tmpl = "norm_sequence_parallel", sp_norm
                    why = ("fused norm, sequence parallel (the config's use_seq_parallel): as the row linears' "
                           "reduce-scattered rows [B*S] arrive, B by " + ", ".join(tmpl["d0"]) +
                           (", S by " + ", ".join(tmpl["d1"]) if tmpl["d1"] else ""))
                choice = ("4 fused", name, tmpl, why)
            elif op.type == "MorphFFN":
                choice = ("4 fused", "moe_ffn", t.get("moe_ffn", {}),
                          "MoE dispatcher + experts (MindFormers' Morph): each device permutes and computes its own "
                          "tokens; left to propagation they arrive in whatever layout the router had")
            elif op.type == "GroupedMatmul":
                choice = ("4 fused", "grouped_matmul", t.get("grouped_matmul", {}),
                          "MoE experts' GroupedMatmul: tokens over every device (MindSpore never splits its expert "
                          "dimension), each device computing only its own tokens")
            else:
                choice = ("4 fused", "moe", t.get("moe", {}), "MoE dispatch/combine: experts by ep")
        elif op.type in cats.get("weight", ()) and _weight_params(graph, op) and prefs.get(op.name) == "dp" \
                and op.type in WEIGHT_MATMULS and mesh.get("tp") > 1:
            oshape = op.outputs[0].shape if op.outputs and op.outputs[0] is not None else ()
            vocab = oshape[-1] if oshape else 0
            if op.name in attention:
                # an attention projection: Megatron's head-parallel pair whatever its weight's size, so that
                # FlashAttention runs on each device's own heads
                role = roles[op.name]
                choice = ("1 weight", f"matmul_{role}", t.get(f"matmul_{role}", {}),
                          "attention projection, Megatron " + ("column-parallel: heads by tp" if role == "column"
                                                               else "row-parallel: heads contracted by tp"))
            elif vocab >= rules.thresholds.get("large_vocab", 16384) and op.name in roles \
                    and (not vocabularies or vocab in vocabularies):
                # a language-model head: its logits dwarf its weight, but a replicated vocabulary would
                # gather them whole for the loss; vocabulary-parallel keeps them split
                choice = ("1 weight", "matmul_column", t.get("matmul_column", {}),
                          f"language-model head ({vocab} vocabulary rows): vocabulary by tp, the logits stay split")
            else:
                # activations outweigh the weight: data parallel over every device. Left to propagation
                # (a full-batch dataset seeds nothing), the tp devices would repeat each other's work
                tname = _data_parallel_template(graph, op, t)
                choice = ("1 weight", tname, t.get(tname, {}),
                          "activations outweigh the weight: data parallel over every device")
        elif op.type in cats.get("weight", ()) and _weight_params(graph, op) and prefs.get(op.name) != "dp":
            slot = next(iter(_weight_params(graph, op)))
            if op.type == "Embedding" and slot == 1:
                vocab = op.inputs[1].spec.shape[0]
                if vocab >= rules.thresholds.get("large_vocab", 16384):
                    choice = ("1 weight", "embedding_table_vocab_parallel", t.get("embedding_table_vocab_parallel", {}),
                              f"embedding with a large vocabulary ({vocab} rows): vocabulary split by tp")
            elif op.type in ("Gather", "GatherV2") and slot == 0:
                vocab = op.inputs[0].spec.shape[0]
                if vocab >= rules.thresholds.get("large_vocab", 16384):
                    choice = ("1 weight", "embedding_vocab_parallel", t.get("embedding_vocab_parallel", {}),
                              f"embedding with a large vocabulary ({vocab} rows): vocabulary split by tp")
                else:
                    choice = ("1 weight", "embedding_data_parallel", t.get("embedding_data_parallel", {}),
                              f"embedding with a small vocabulary ({vocab} rows): data parallel")
            elif op.name in roles:
                wspec = op.inputs[slot].spec
                if len(wspec.shape) >= 3 and op.type.startswith("BatchMatMul"):
                    choice = ("1 weight", "experts", t.get("experts", {}), "expert weights: experts by ep")
                else:
                    role = roles[op.name]
                    choice = ("1 weight", f"matmul_{role}", t.get(f"matmul_{role}", {}),
                              "Megatron " + ("column-parallel: output features by tp" if role == "column"
                                             else "row-parallel: contracted features by tp, after a column MatMul"))
        if choice is None:
            continue
        rule_name, tname, tmpl, why = choice
        if _splits_nothing_model_parallel(tmpl, mesh):
            continue
        s = template_sharding(op, rule, tmpl, mesh)
        on = mesh
        if tname == "flash_attention":
            gqa = _grouped_query_attention(op, rule, tmpl, mesh, s)
            if gqa is not None:
                s, on = gqa
                why += (f"; grouped-query attention ({rule.layout_rule.factor_size('n2')} key/value heads): the "
                        f"query heads by tp, the key/value heads by the part of tp that divides them (a Layout "
                        f"splitting tp in two)")
        if s is None:
            continue
        declared = rule_name == "3 boundary" and any(
            op.cell_path == p or op.cell_path.startswith(p + ".") for p in (boundaries or {}))
        anchor = anchor_of(op.name, s, on, op.type)
        if tname == "matmul_row" and sp:
            # sequence parallelism: the row-parallel output reduce-scattered over the sequence (Megatron-SP),
            # its rows [S*B] split by S's axes (cp, tp), then B's (dp, ep), as the norms after it take them
            anchor = _reduce_scatter_rows(anchor, mesh, _sequence_first(graph))
            tname, why = "matmul_row_sequence_parallel", why + "; output reduce-scattered over the sequence (sequence parallel)"
        choice_ = Choice(op.name, rule_name, tname, why, anchor, declared=declared)
        if tname in ("matmul_column", "matmul_row", "matmul_row_sequence_parallel") and prefs.get(op.name) == "" \
                and op.name not in attention \
                and op.type in WEIGHT_MATMULS and not (op.outputs and op.outputs[0] is not None
                                                       and op.outputs[0].shape[-1] in vocabularies):
            # neither its weight nor its activations clearly outweigh the other: data parallel over every
            # device is the alternative the step model weighs against the Megatron layout (MTP's eh_proj)
            choice_.alternative = _data_parallel_choice(graph, op, rule, t, mesh)
        if tname == "matmul_row_sequence_parallel" and choice_.alternative is not None \
                and sp_norm:
            # data parallel under sequence parallelism: the rows stay as the sequence-parallel norm split them
            # (S by cp and tp, B by dp), and so do the element-wise operators between the pair's linears (the
            # row linear's Reshape stops every search that would carry them the layout)
            choice_.alternative.package = _pair_interior(graph, op, mesh, sp_norm,
                                                         choice_.alternative.op)
        if tname == "matmul_row_sequence_parallel":
            # without sequence parallelism: the plain row-parallel pair (its output all-reduced)
            choice_.fallback = Choice(op.name, rule_name, "matmul_row", why.split("; output reduce-scattered")[0],
                                      anchor_of(op.name, s, mesh, op.type))
        elif tname == "norm_sequence_parallel" and plain_norm:
            fs = template_sharding(op, rule, plain_norm, mesh)
            if fs is not None:
                choice_.fallback = Choice(op.name, rule_name, "norm_sequence_first" if _sequence_first(graph)
                                          else "norm", "fused norm: tokens by dp "
                                          "(and cp), hidden unsplit (sequence parallelism does not pay here)",
                                          anchor_of(op.name, fs, mesh, op.type))
        if tname == "moe_ffn":
            # MindFormers' code fixes this Morph's layout (FFNGroupedGEMM.shard: tokens over dp_cp, every device of
            # the MoE layout): a plan whose propagation gives it another one is not the model that runs
            choice_.declared = True
        if tname == "moe_router":
            # one package per router: a split router pays only whole (each of its operators alone pays the
            # gather or split at its edges and is dropped, leaving the whole batch's routing on every device)
            choice_.with_op = router_head.setdefault(op.cell_path, op.name)
        if tname in ("norm_sequence_parallel", "matmul_row_sequence_parallel"):
            # one package: a sequence-parallel norm pays only where every row-parallel output is
            # reduce-scattered to it and every column-parallel input gathered from it. The config asks for it
            # (use_seq_parallel, for activation memory the step model does not weigh): kept like a declared
            # boundary, with what it costs or saves in the notes
            sp_head = sp_head or op.name
            choice_.with_op = sp_head
            choice_.declared = True
            if tname == "norm_sequence_parallel":
                # the residual stream between the tensor-parallel blocks is sequence parallel too: the residual
                # add feeding this norm (through Casts) takes its layout; left to propagation it keeps whole
                # sequences and every norm would re-split them
                res = _cut_before(graph, op.name)
                r = graph.op(res) if res is not None else None
                if r is not None and r.type in ("Add", "AddExt") and r.outputs and r.outputs[0] is not None \
                        and tuple(r.outputs[0].shape) == tuple(op.inputs[0].spec.shape):
                    rs = template_sharding(r, _cached_rule(r), tmpl, mesh)
                    if rs is not None:
                        out.append(Choice(r.name, "4 fused", "residual_sequence_parallel",
                                          f"residual add into the sequence-parallel {op.name}: the residual stream "
                                          f"is sequence parallel between the tensor-parallel blocks",
                                          anchor_of(r.name, rs, mesh, r.type), with_op=sp_head, declared=True))
        out.append(choice_)
        if tname == "flash_attention" and on is not mesh:
            out.extend(_split_interiors(graph, op, roles, plain_norm, mesh))
        if tname == "moe_ffn":
            comp = _moe_permute_companion(graph, op, t.get("moe_ffn", {}), mesh)
            if comp is not None:
                out.append(comp)
        if tname == "embedding_table_vocab_parallel":
            comp = _embedding_companion(graph, op, rules, mesh, sp)
            if comp is not None:
                out.append(comp)
    seq = max((op.inputs[0].spec.shape[1] for op in graph if op.type == "FlashAttentionScore"
               and op.inputs[0].spec is not None and len(op.inputs[0].spec.shape) >= 3), default=0)
    if seq >= rules.thresholds.get("long_sequence", 32768) and mesh.get("cp") == 1:
        notes.append(f"long sequence ({seq}): a cp axis (--mesh ...,cp=N) would split it (rule 3)")
    return out, notes


def _model_own(graph: OpGraph) -> set[str]:
    """The operators the model's own code configures in every parallel build (``graph.parallel_only``: MindFormers'
    loss): every plan starts from their strategies (:func:`strategist.engine.plan.parallel_only_anchors`), so the
    advice never anchors them, and hands them no follower either."""
    return set(getattr(graph, "parallel_only", None) or ())


def _unreached_followers(graph: OpGraph, plan: Plan, anchored: set, rules: Rules, mesh: Mesh) -> list[Choice]:
    """Rule 2, unreached consumers: an operator no search reaches (MindSpore leaves it at its default
    strategy, e.g. stuck behind a later seed in its waiting list) that reads a tensor a search did decide
    follows the largest such input; it would otherwise gather that tensor whole (MTP's loss on
    vocabulary-parallel logits).

    Its search would go on into the consumers no search reached either (through Reshapes), splitting them
    too: a loss's token mask split by the batch hands its split to the masked sum, which then all-reduces
    scalars. So the follower is first proposed with those consumers pinned where they are (replicated), one
    package kept only if it pays; dropped, the follower alone is tried (its fallback)."""
    out = []
    pinned: set[str] = set()
    for op in graph:
        if op.name in anchored or op.name in pinned or op.type in ("Reshape", "Flatten", "Cast") \
                or op.type in rules.categories.get("dimension_changing", ()) \
                or plan.choices[op.name].provenance.direction != "default":
            continue
        rule = _cached_rule(op)
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
                  for s in [_follow(rule, lay, rule.slots.index(best[1]), "in", mesh.size)]
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


def _flippable(graph: OpGraph, rules: Rules, prefs: dict[str, str], boundaries) -> list[str]:
    """Linears of Megatron pairs that prefer data parallelism, outside any declared --boundary."""
    declared = lambda n: any(graph.op(n).cell_path == p or graph.op(n).cell_path.startswith(p + ".")
                             for p in (boundaries or {}))
    return [n for n in sorted(_megatron_pairs(graph, rules), key=lambda n: graph.op(n).topo_index)
            if prefs.get(n) == "dp" and not declared(n)]


def advise(graph: OpGraph, mesh: Mesh, *, rules: Rules | None = None, boundaries: dict[str, str] | None = None,
           hardware: Hardware | None = None, dataset_strategy="data_parallel") -> Advice:
    """Choose a minimal set of anchors for ``graph`` on ``mesh`` and price the result."""
    with no_cyclic_gc():        # some twenty propagations: see no_cyclic_gc
        return _advise(graph, mesh, rules, boundaries, hardware, dataset_strategy)


def _advise(graph, mesh, rules, boundaries, hardware, dataset_strategy) -> Advice:
    rules = rules or load_rules()
    searched: dict = {}        # anchor set -> its unpriced plan: a plan checked by layouts, then priced, is searched once
    first = _advise_pass(graph, mesh, rules, boundaries, hardware, dataset_strategy, searched)
    flip = _flippable(graph, rules, _preferences(graph, rules, boundaries or {}), boundaries) \
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
    state = {id(p): _state_bytes(p.plan) for p in (first, alt)}      # weight, gradient, optimizer per device
    if abs(ta - tb) <= 1e-9 * max(ta, tb):
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
    # as for any alternative layout (_take_alternatives): not at MEMORY_WORTH more weight, gradient and optimizer
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


#: how many operators the walk back from a Transpose back looks through for the chain's first Transpose (glm4's
#: rotary chain between them: about 15 operators; the walk stops at weights and fused operators anyway)
_CHAIN_WALK = 64


def _attention_chain_heads(graph: OpGraph, plan: Plan, proposed: list[Choice], anchored: set, rules: Rules,
                           mesh: Mesh) -> list[Choice]:
    """Rule 2, fused consumers through a chain: a fused attention input that arrives ``Transpose -> (rotary
    embedding, element-wise, same shape) -> Transpose back -> Reshape`` (the legacy BNSD rotary of ChatGLM / LLaMA
    layers) with a redistribution in front of the fused operator. The first Transpose is anchored with the layout
    the fused operator takes, traced back through the Reshape (``reshape_layout``) and the Transpose back, so the rotary runs in the
    attention's heads split instead of a sequence split the search brought forward from the QKV projection. glm4 at
    40 layers (dp=8,tp=8): the query Transposes took a sequence split by 4 (32 of 64 devices) behind the kept QKV
    column; heads by tp as the experts have them: -15.0 ms a step. Minimality keeps it only where it pays."""
    out: list[Choice] = []
    batch_only = _sp_templates(graph, rules.templates, mesh)[1]
    for c in proposed:
        d = graph.op(c.op)
        if d.type != "FlashAttentionScore":
            continue
        drule = _cached_rule(d)
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
            if lay_r is None or _same(r.inputs[0], lay_r):
                continue
            tb = graph.op(src.ref)
            st_b = _follow(_cached_rule(tb), lay_r, src.index, "out", mesh.size)
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
            if head is None or _same(plan.choices[head.name].outputs[0], mid):
                continue
            sh = _follow(_cached_rule(head), mid, 0, "out", mesh.size)
            if sh is None:
                continue
            anchor = anchor_of(head.name, sh, mesh, head.type)
            try:        # the fused operator's layout may refine the mesh (grouped-query heads): the shard() line
                ok = _same(shard_anchor(head, anchor, mesh.size).inputs[0], sh.inputs[0])   # must place it so
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
            name = _producer_through(graph, head.inputs[0], through=("Reshape", "Cast")) if head.inputs else None
            sp = graph.op(name) if name is not None else None
            if sp is None or sp.type not in ("Split", "SplitWithSize") or sp.name in anchored:
                continue
            ss = template_sharding(sp, _cached_rule(sp), batch_only, mesh)
            if ss is None or _same(plan.choices[sp.name].inputs[0], ss.inputs[0]):
                continue
            anchored.add(sp.name)
            out.append(Choice(sp.name, "2 dimension", "norm",
                              f"cuts the fused projection's features, split by tp, into the inputs of {c.op}: "
                              f"MindSpore's Split needs them whole, so batch-only; brought forward from the "
                              f"projection it splits the sequence instead", anchor_of(sp.name, ss, mesh, sp.type)))
    return out


def _advise_pass(graph, mesh, rules, boundaries, hardware, dataset_strategy, searched, megatron=False) -> "_Pass":
    priced: dict = {}           # anchor set -> (its search, its priced plan)

    def run(anchors, price=True):
        anchors = {c.op: c.anchor for c in anchors} if isinstance(anchors, list) else anchors
        # the search does not depend on the anchors' order; the plan lists them in the order given
        key = frozenset((name, id(a)) for name, a in anchors.items())
        hit = searched.get(key)
        if hit is None or any(hit.anchors.get(n) is not a for n, a in anchors.items()):
            hit = searched[key] = propagate(graph, mesh, anchors, use_model_strategies=False,
                                            dataset_strategy=dataset_strategy, hardware=hardware, price=False)
        if not price:
            return hit
        # a plan priced once is not priced again (the final stages price the same anchors several times)
        done = priced.get(key)
        plan = done[1] if done is not None and done[0] is hit else price_plan(hit)
        priced[key] = (hit, plan)
        plan.anchors = {n: plan.anchors[n] for n in anchors}
        return plan

    proposed, notes = propose(graph, mesh, rules, boundaries, megatron=megatron)
    plan = run(proposed, price=False)          # rule 2 reads provenance only
    n_before = len(proposed)
    # rule 2, unreached consumers (see _unreached_followers)
    own = _model_own(graph)
    proposed += _unreached_followers(graph, plan, {c.op for c in proposed} | own, rules, mesh)
    if len(proposed) > n_before:
        plan = run(proposed, price=False)
    # rule 2: dimension-changing operators propagation reached with a redistribution, or not at all
    anchored = {c.op for c in proposed} | own
    for op in graph:
        if op.type not in rules.categories.get("dimension_changing", ()) or op.name in anchored \
                or op.type in ("Reshape", "Flatten"):
            continue
        ch = plan.choices[op.name]
        p = ch.provenance
        src = next((x for x in op.inputs if x.kind == "op"), None)
        if src is None:
            continue
        lay = plan.choices[src.ref].outputs[src.index] if src.index < len(plan.choices[src.ref].outputs) else None
        # reached over its own edge with a redistribution, or over another edge (a backward search from a
        # consumer) leaving a redistribution on its input: a reduction gathering what it could reduce locally
        met = p.cost > 0 or (lay is not None and ch.inputs and ch.inputs[0] is not None
                             and lay.shape == ch.inputs[0].shape and not _same(lay, ch.inputs[0]))
        if p.direction not in ("default",) and not met:
            continue
        s = _follow(_cached_rule(op), lay, 0, "in", mesh.size) if lay is not None else None
        if s is None or s.dev_matrix != mesh.shape:
            continue
        why = ("dimension-changing op propagation reached only with a redistribution (edge cost "
               f"{p.cost:.0f}): anchored to follow its input") if p.direction != "default" else \
            "dimension-changing op no anchor reaches: anchored to follow its input"
        proposed.append(Choice(op.name, "2 dimension", "follow_input", why, anchor_of(op.name, s, mesh, op.type)))
    # rule 2, fused consumers: a fused operator (FlashAttention) whose input comes from a layout-only
    # Transpose after a joining operator (MLA's K = Concat(k_nope, tiled k_pe), then the BNSD Transpose) is
    # handed its layout by both: where two searches meet there, the Transpose alone only moves the
    # redistribution in front of itself. One package per pattern (every layer), kept only if it pays
    anchored = {c.op for c in proposed} | own
    for c in list(proposed):
        d = graph.op(c.op)
        if d.type not in rules.categories.get("fused", ()) or d.type in rules.categories.get("norm", ()):
            continue
        drule = _cached_rule(d)
        for k, slot in enumerate(drule.slots):
            x = d.inputs[slot] if slot < len(d.inputs) else None
            if x is None or x.kind != "op" or x.ref in anchored or graph.op(x.ref).type != "Transpose":
                continue
            lay = plan.choices[c.op].inputs[k]
            t = graph.op(x.ref)
            src = plan.choices[t.name].outputs[x.index] if x.index < len(plan.choices[t.name].outputs) else None
            if lay is None or src is None:
                continue
            st = _follow(_cached_rule(t), lay, x.index, "out", mesh.size)
            j = next((y for y in t.inputs if y.kind == "op"), None)
            if st is None or st.dev_matrix != mesh.shape or j is None or j.ref in anchored:
                continue
            u = graph.op(j.ref)
            if u.type in ("Reshape", "Flatten", "Cast") or len([y for y in u.inputs if y.kind == "op"]) < 2:
                continue
            su = _follow(_cached_rule(u), st.inputs[0], j.index, "out", mesh.size)
            if su is None or su.dev_matrix != mesh.shape:
                continue
            why = (f"joins the inputs of the fused {c.op}, which took them through a redistribution: "
                   f"anchored with the Transpose after it to hand it the layout it takes")
            members = [(t, st, why), (u, su, why)]
            # an input of the join MindSpore cannot set from a neighbour's layout (Tile: MLA's k_pe broadcast
            # over the heads) keeps a generated candidate, whose split rarely matches what the join takes
            # there (a heads split over every device, then an all-to-all into the join): hand it that layout
            urule = _cached_rule(u)
            for slot, y in enumerate(u.inputs):
                if y.kind != "op" or y.ref in anchored or slot not in urule.slots \
                        or graph.op(y.ref).type not in NO_LAYOUT_INIT:
                    continue
                want = su.inputs[urule.slots.index(slot)]
                sy = _follow(_cached_rule(graph.op(y.ref)), want, y.index, "out", mesh.size) \
                    if want is not None else None
                if sy is not None and sy.dev_matrix == mesh.shape:
                    members.append((graph.op(y.ref), sy,
                                    f"{graph.op(y.ref).type} into {u.name}, which joins the inputs of the fused "
                                    f"{c.op}: MindSpore cannot set it from a neighbour's layout, so it is anchored "
                                    f"to hand the join the layout it takes"))
            for op_, sh, why in members:
                anchored.add(op_.name)
                proposed.append(Choice(op_.name, "2 dimension", "follow_output", why,
                                       anchor_of(op_.name, sh, mesh, op_.type), with_op=t.name))
    proposed += _attention_chain_heads(graph, plan, proposed, anchored, rules, mesh)
    # rule 2, consumer side: a dimension-changing operator whose output reaches a configured operator only
    # through a redistribution MindSpore's search leaves there ("Inconsistency occurred at edge": two seeds'
    # searches met) is anchored to hand that operator the layout it takes
    anchored = {c.op for c in proposed} | own
    for src, dst, _cost in plan.inconsistencies:
        if src not in graph or dst not in anchored or src in anchored:
            continue
        op = graph.op(src)
        if op.type not in rules.categories.get("dimension_changing", ()) or op.type in ("Reshape", "Flatten"):
            continue
        d = graph.op(dst)
        slot = next((i for i, x in enumerate(d.inputs) if x.kind == "op" and x.ref == src), None)
        drule = _cached_rule(d)
        if slot is None or slot not in drule.slots:
            continue
        j = d.inputs[slot].index
        lay = plan.choices[dst].inputs[drule.slots.index(slot)]
        s = _follow(_cached_rule(op), lay, j, "out", mesh.size) if lay is not None else None
        if s is None or s.dev_matrix != mesh.shape:
            continue
        anchored.add(src)
        proposed.append(Choice(src, "2 dimension", "follow_output",
                               f"dimension-changing op whose output reaches the configured {dst} only through a "
                               f"redistribution: anchored to hand it the layout it takes",
                               anchor_of(src, s, mesh, op.type)))
    # ... and a Transpose (a pure layout change) whose every consumer takes its output through the same
    # redistribution (the MoE combine's Transpose back to sequence-first, reached whole from the token
    # permutation, before a sequence-parallel residual add) hands them that layout instead
    for op in graph:
        if op.type != "Transpose" or op.name in anchored or not op.outputs:
            continue
        out = plan.choices[op.name].outputs[0] if plan.choices[op.name].outputs else None
        takes = set()
        for e in graph.out_edges(op.name):
            d = graph.op(e.dst)
            drule = _cached_rule(d)
            if e.in_slot not in drule.slots or d.type in ("Reshape", "Flatten"):
                takes = None
                break
            lay = plan.choices[e.dst].inputs[drule.slots.index(e.in_slot)]
            takes.add(lay)
        if not takes or len(takes) != 1 or out is None:
            continue
        lay = next(iter(takes))
        if lay is None or _same(out, lay):
            continue
        s = _follow(_cached_rule(op), lay, 0, "out", mesh.size)
        if s is None or s.dev_matrix != mesh.shape:
            continue
        anchored.add(op.name)
        proposed.append(Choice(op.name, "2 dimension", "follow_output",
                               "layout-only Transpose whose every consumer redistributes its output the same way: "
                               "anchored to hand them the layout they take", anchor_of(op.name, s, mesh, op.type)))
    proposed = [c for c in proposed if c.op not in own]
    proposed.sort(key=lambda c: graph.op(c.op).topo_index)
    # the head beside the loss layout the model configures itself in a parallel build (MindFormers' x + 0)
    from .parallel_only import loss_layout_alternatives
    loss_layout_alternatives(graph, mesh, proposed, run)
    plan = run(proposed)                       # the reference every minimality check compares with
    # minimality: drop every group of anchors (one pattern across repeated layers) the plan does not need
    groups: dict[str, list[Choice]] = {}
    for c in proposed:
        groups.setdefault(_group_key(c.with_op or c.op), []).append(c)
    priority = {"2 dimension": 0, "4 fused": 1, "1 weight": 2, "3 boundary": 3}
    keep = list(proposed)
    dropped: list[tuple[Choice, str]] = []
    baseline = run([])
    if proposed and _same_plan(plan, baseline):
        dropped = [(c, "propagation from the dataset alone gives the same plan") for c in proposed]
        keep, groups = [], {}
    from .. import progress
    order = sorted(groups, key=lambda k: (priority[groups[k][0].rule], graph.op(groups[k][0].op).topo_index))
    gone_keys: set[str] = set()

    def adopt(fallbacks):
        # the fallbacks now kept are checked by the next pass, one pattern per group
        for f in fallbacks:
            k = "fallback:" + _group_key(f.op)
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
            if _same_plan(plan, q):
                keep = trial
                gone_keys.add(key)
                for c in members:
                    dropped.append((c, "propagation gives the same layouts and cost without it"))
                adopt(fallbacks)
            else:
                q = run(trial) if trial else baseline
                changed, dt = _diff(plan, q)
                what = f"without {'these ' + str(len(members)) + ' anchors' if len(members) > 1 else 'it'}"
                # a saving within the step model's resolution is no reason for a line of configuration: a package
                # must save that for each of its lines (patterns), e.g. an MoE router's 12 lines saving 0.6 ms of a
                # 3 s step do not pay; its patterns are then tried back one by one (_reinstate_patterns)
                worth = _worth(plan) * _lines(members)
                saved = _state_bytes(q) - _state_bytes(plan) if dt <= worth else 0.0
                if dt <= worth and saved >= MEMORY_WORTH and not any(c.declared for c in members):
                    # it pays in memory: the weights, gradients and optimizer states it shards
                    for c in members:
                        c.needed = (f"{what}: {changed} operators change layout, step estimate {dt * 1e3:+.3f} ms, "
                                    f"but {saved / 2**30:.2f} GiB more weight/gradient/optimizer state per device")
                    continue
                if dt <= worth and not any(c.declared for c in members):
                    # an anchor must pay for itself: the plan is no slower without it (or slower by less than
                    # what the step model resolves: PAY_FLOOR, PAY_WORTH), so it goes
                    keep, plan = trial, q
                    gone_keys.add(key)
                    for c in members:
                        dropped.append((c, f"does not pay for itself: {what}" + (
                            f" (its {len(fallbacks)} norms and row linears without sequence parallelism)"
                            if any(c.template in SP_TEMPLATES for c in members) and fallbacks else
                            f" (then tried without its package)" if fallbacks else "") +
                            f", {changed} operators change layout and "
                                           f"the step estimate changes by {dt * 1e3:+.3f} ms" +
                                           (f" (less than {worth * 1e6:.0f} us, what the step model resolves)" if dt > 0 else "")))
                    adopt(fallbacks)
                    continue
                for c in members:
                    c.needed = f"{what}: {changed} operators change layout, step estimate {dt * 1e3:+.3f} ms" + ((
                        " (kept: the config asks for sequence parallelism, use_seq_parallel, though the plan is "
                        "faster without it)" if c.template in SP_TEMPLATES else
                        " (kept: MindFormers' FFNGroupedGEMM runs its Morph on this layout whatever the plan, though "
                        "the plan is faster without it)" if c.template == "moe_ffn" else
                        " (kept: declared by --boundary, though the plan is faster without it)") if dt <= 0 else "")
        if len(gone_keys) == dropped_before or not keep:
            break
    # a package kept whole may hold members propagation reproduces anyway: each such member (one pattern
    # across repeated layers) goes when the plan is the same without it
    members_of: dict[str, list[Choice]] = {}
    for c in keep:
        if c.with_op and len(groups.get(_group_key(c.with_op), ())) > 1:
            members_of.setdefault(_group_key(c.op), []).append(c)
    for key in sorted(members_of, key=lambda k: graph.op(members_of[k][0].op).topo_index):
        gone = {id(c) for c in members_of[key]}
        trial = [c for c in keep if id(c) not in gone]
        try:
            q = run(trial, price=False)
        except PropagationError:
            continue
        if _same_plan(plan, q):
            keep = trial
            for c in members_of[key]:
                dropped.append((c, "propagation gives the same layouts and cost without it (its package is kept)"))
        elif all(c.template == "residual_sequence_parallel" for c in members_of[key]):
            # the residual adds of a sequence-parallel package must pay for themselves, as a pattern
            q = run(trial)
            changed, dt = _diff(plan, q)
            if dt < 0:
                keep, plan = trial, q
                for c in members_of[key]:
                    dropped.append((c, f"does not pay for itself (its package is kept): without it, {changed} "
                                       f"operators change layout and the step estimate changes by {dt * 1e3:+.3f} ms"))
    keep = _reinstate(graph, mesh, keep, dropped, run)
    keep = _take_alternatives(graph, keep, dropped, run)
    keep = _align_layers(graph, mesh, keep, run)
    return _Pass(keep, dropped, notes, baseline, run, run(keep) if keep else baseline)


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
    keep = _input_path(graph, mesh, p.keep, p.run)
    keep = _embedding_tables(graph, mesh, rules, keep, p.dropped, p.run)
    keep = _every_line_pays(graph, keep, p.dropped, p.run)
    return _Pass(keep, p.dropped, p.notes, p.baseline, p.run, p.run(keep) if keep else p.baseline)


def _every_line_pays(graph: OpGraph, keep: list[Choice], dropped: list, run) -> list[Choice]:
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
        patterns.setdefault(_group_key(c.op), []).append(c)
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
        changed, dt = _diff(cur, q)
        worth = _worth(cur)
        if dt > worth or _state_bytes(q) - _state_bytes(cur) >= MEMORY_WORTH:
            return False        # it pays in step time, or in the weight, gradient and optimizer state it shards
        keep, cur = trial, q
        for c in members:
            dropped.append((c, f"does not pay for its line in the final advice: without it, {changed} operators "
                               f"change layout and the step estimate changes by {dt * 1e3:+.3f} ms" +
                               (f" (less than {worth * 1e6:.0f} us, what the step model resolves)" if dt > 0 else "")))
        return True

    _settle([k for k in sorted(patterns, key=lambda k: min(graph.op(c.op).topo_index for c in patterns[k]))
             if not any(c.declared and c.template != "residual_sequence_parallel" for c in patterns[k])], without)
    return keep


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
            ma, mb = memory(final)["activations"], memory(q)["activations"]
            notes.append(f"sequence parallelism (the config's use_seq_parallel): step {ts * 1e3:.3f} ms, activations "
                         f"{ma / 2**30:.2f} GiB per device; without it {tp_ * 1e3:.3f} ms ({(tp_ - ts) * 1e3:+.3f} ms), "
                         f"{mb / 2**30:.2f} GiB ({(mb - ma) / 2**30:+.2f} GiB)")
        except (PropagationError, StrategyError):
            pass
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
    # the layouts the model's own code fixes (MindFormers' MoE FFN Morph) stay whatever else goes: a plan without
    # them is not the model that runs. Configuring nothing is the floor where propagation lands them there anyway
    fixed = [c for c in keep if c.template == "moe_ffn"]
    lands = all(baseline.choices[c.op].strategy == final.choices[c.op].strategy for c in fixed)
    slower = final.totals()["step_seconds"] > baseline.totals()["step_seconds"] * (1 + 1e-9)
    floor, floor_keep = baseline, []
    if slower and not lands:
        floor, floor_keep = (run(fixed), fixed) if len(fixed) < len(keep) else (final, keep)
    if final.totals()["step_seconds"] > floor.totals()["step_seconds"] * (1 + 1e-9):
        notes.append("the anchored plan's step estimate exceeds the layouts the model's code fixes alone (its MoE FFN "
                     "Morphs) with propagation from the dataset's; the advice is those alone" if floor_keep else
                     "the anchored plan's step estimate exceeds plain propagation from the dataset's; "
                     "the advice is to configure nothing")
        for c in keep:
            if c not in floor_keep:
                dropped.append((c, "costlier than configuring nothing" if not floor_keep else
                                "costlier than the model's fixed layouts alone"))
        keep, final = floor_keep, floor
    elif slower:
        dt = final.totals()["step_seconds"] - baseline.totals()["step_seconds"]
        notes.append(f"configuring nothing would be {dt * 1e3:.3f} ms faster by the step model, but it leaves the MoE "
                     f"FFN Morphs on layouts MindFormers' code does not run (FFNGroupedGEMM.shard fixes theirs)")
    existing = _existing(graph, mesh, final, keep, hardware, dataset_strategy)
    return Advice(graph, mesh, rules, keep, dropped, final, baseline, semi, existing, notes)


_LAYER = re.compile(r"\.layers\.\d+\.")
#: candidates :func:`_align_layers` tries at most (each one propagation)
ALIGN_CANDIDATES = 48
_CONTAINERS = ("CellList", "SequentialCell", "ModuleList", "CellDict")


def _align_layers(graph: OpGraph, mesh: Mesh, keep: list[Choice], run) -> list[Choice]:
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
            return _group_key(op.name)
        for k in range(1, len(parts) + 1):
            cls = graph.cells.get(".".join(parts[:k]))
            if uses.get(cls, 0) > 1 and cls not in _CONTAINERS:
                return f"{cls}:" + _group_key(op.name[len(".".join(parts[:k])):])
        return _group_key(op.name)
    for name, ch in cur.choices.items():
        op = ch.op
        # a functional call has no shard() to write (an anchors file only): not worth a line nobody can apply
        if ch.sharding is None or op.type in ("Cast", "Reshape", "Flatten") or name in anchored \
                or not _LAYER.search(name) or _weight_slot(op) is not None or not op.held:
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
    worth = min(PAY_WORTH * t_cur, PAY_FLOOR)
    t, extra, trial, q = best
    if t_cur - t <= worth:
        return keep
    changed, dt = _diff(q, cur)
    for c in extra:
        c.needed = (f"without these {len(extra)} anchors: {changed} operators change layout, step estimate "
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
        if best is None or t < best[0] * (1 - 1e-12):
            best = (t, package, trial, q)
    return best


#: anchors :func:`_input_path` tries at most (each one propagation), and keeps at most
INPUT_CANDIDATES = 32
INPUT_KEEP = 3


def _input_path(graph: OpGraph, mesh: Mesh, keep: list[Choice], run) -> list[Choice]:
    """Rule 3 on the input path: where the data's batch split begins. With a full-batch dataset every device
    reads the whole batch and propagation decides where the split starts; an operator that reads only the
    dataset (through others that do) can start it, its inputs' batch dimension over every device or by dp.
    Each such operator a Cell holds is tried alone with each split, the fastest kept while it pays (at most
    :data:`INPUT_KEEP`). deepseek3's multi-token prediction rolls the ids and labels by one (a StridedSlice
    and a Concat): with the Concat's batch split, MindSpore's search reaches the MTP embedding from it and takes a
    (2, 4) table there instead of scattering the fp32 output over every device (-38.7 ms at dp=2,tp=4); LLaMA's
    labels one-hot split over every device computes the loss once, not tp times (-0.4 ms at dp=8,tp=8)."""
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
        rule = _cached_rule(op)
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
        trial = sorted(keep + [c], key=lambda x: graph.op(x.op).topo_index)
        try:
            if _same_plan(cur, run(trial, price=False)):
                continue        # propagation lays everything out as before: nothing to price
            q = run(trial)
        except (PropagationError, StrategyError):
            continue
        scored.append((q.totals()["step_seconds"], graph.op(name).topo_index, c, trial, q))
    scored.sort(key=lambda x: (x[0], x[1]))
    taken = 0
    for _t, _i, c, trial, q in scored:
        if taken >= INPUT_KEEP:
            break
        if c.op in {x.op for x in keep}:
            continue
        if taken:       # the anchors kept so far changed the plan this one was scored on
            trial = sorted(keep + [c], key=lambda x: graph.op(x.op).topo_index)
            try:
                q = run(trial)
            except (PropagationError, StrategyError):
                continue
        t = q.totals()["step_seconds"]
        if base_t - t <= min(PAY_WORTH * base_t, PAY_FLOOR):
            continue
        changed, dt = _diff(q, cur)
        c.needed = f"without it: {changed} operators change layout, step estimate {dt * 1e3:+.3f} ms"
        keep, cur, base_t = trial, q, t
        taken += 1
    return keep


#: table layouts :func:`_embedding_tables` tries per embedding at most (each with and without its companion)
TABLE_CANDIDATES = 12


def _embedding_table(graph: OpGraph, op: Op, rules: Rules) -> tuple[int, int] | None:
    """(input slot, row count) of ``op``'s weight table when ``op`` is an embedding of a large vocabulary."""
    slots = _weight_params(graph, op)
    want = {"Embedding": 1, "Gather": 0, "GatherV2": 0}.get(op.type)
    if want is None or want not in slots or op.inputs[want].spec is None or len(op.inputs[want].spec.shape) != 2:
        return None
    vocab = op.inputs[want].spec.shape[0]
    return (want, vocab) if vocab >= rules.thresholds.get("large_vocab", 16384) else None


def _embedding_tables(graph: OpGraph, mesh: Mesh, rules: Rules, keep: list[Choice], dropped: list,
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
    sp = _sequence_parallel(graph, mesh)
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
        rule = _cached_rule(op)
        # the table's layouts, the other inputs (the indices) kept as the plan has them
        table = rule.slots.index(slot)
        now = cur.choices[op.name].strategy
        # ... over every device (a table split leaving devices to repeat the lookup is never the fastest: measured
        # on the zoo's GPT and LLaMA, where the candidates using part of the devices priced 2-90 ms slower)
        options = [s for s in candidates(op, mesh.size, rule)
                   if (now is None or all(r == n for i, (r, n) in enumerate(zip(s, now)) if i != table))
                   and math.prod(math.prod(r) for r in s) == mesh.size]
        tmpl = template_sharding(op, rule, rules.templates.get(
            "embedding_table_vocab_parallel" if op.type == "Embedding" else "embedding_vocab_parallel", {}), mesh)
        if tmpl is not None and tmpl.strategy not in options:
            options.append(tmpl.strategy)
        options = [s for s in options if any(math.prod(r) > 1 for r in s)][:TABLE_CANDIDATES]
        comp = _embedding_companion(graph, op, rules, mesh, sp)
        heads = [Choice(op.name, "1 weight", "embedding_table",
                        f"embedding with a large vocabulary ({vocab} rows): of {len(options)} table layouts, "
                        f"the fastest by the step model", Anchor(op.name, s, origin="advisor")) for s in options]
        best = _fastest(graph, rest, [p for h in heads for p in (([h], [h, comp]) if comp is not None else ([h],))],
                        run)
        if best is None:
            continue
        t, package, trial, q = best
        worth = min(PAY_WORTH * t_cur, PAY_FLOOR)
        if t_cur - t <= worth or _state_bytes(q) - _state_bytes(cur) >= MEMORY_WORTH or _same_plan(cur, q):
            continue
        changed, dt = _diff(cur, q)
        what = f"{changed} operators change layout, step estimate {dt * 1e3:+.3f} ms"
        for c in package:
            c.needed = f"instead of propagation's table layout: {what}" if c.op == op.name else \
                f"with {op.name}'s table layout: {what}"
        for c in mine:
            dropped.append((c, f"replaced by the table layout {package[0].anchor.strategy}: {what}"))
        keep = trial
    return keep


def _take_alternatives(graph: OpGraph, keep: list[Choice], dropped: list, run) -> list[Choice]:
    """A kept anchor with another layout on offer (a weight MatMul whose weight and activations are of
    comparable size: Megatron's layout or data parallel) takes it where the step estimate is faster, one
    pattern (across repeated layers) at a time, unless that costs :data:`MEMORY_WORTH` more weight, gradient
    and optimizer state per device. An alternative the plan then does not need goes, as in minimality."""
    alts: dict[str, list[Choice]] = {}
    for c in keep:
        if c.alternative is not None and c.alternative.anchor is not None:
            alts.setdefault(_group_key(c.op), []).append(c)
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
        changed, dt = _diff(cur, q)
        more = _state_bytes(q) - _state_bytes(cur)
        if dt >= -1e-9 * cur.totals()["step_seconds"] or more >= MEMORY_WORTH:
            continue
        what = f"{changed} operators change layout, step estimate {dt * 1e3:+.3f} ms, " \
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
        if q is not None and _same_plan(cur, q):
            keep = rest
            for c in members:
                dropped.append((c.alternative, "propagation gives the same layouts and cost without it"))
    return keep


def _existing(graph, mesh, plan, keep, hardware, dataset_strategy) -> list[tuple[str, str, str]]:
    """The model's own shard() calls beside the advice: kept, contradicted, or redundant.

    No propagation per call (MindFormers models have hundreds): the advised plan already says what every
    operator gets without the model's calls, so each call's own sharding is just compared with it."""
    from ..engine.plan import model_anchors
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
            _same(x, y) for x, y in zip(mine.inputs + mine.outputs, ch.inputs + ch.outputs))
        if not same:
            out.append((name, "contradicted", f"model {a.describe()} vs advised {ch.strategy}"))
        elif name in advised:
            out.append((name, "kept", f"{a.describe()} is one of the advised anchors"))
        else:
            out.append((name, "redundant", f"{a.describe()} is what propagation gives without it"))
    return out


# --------------------------------------------------------------------------------------
# memory

#: an anchor that does not speed the step up is still kept when it shards at least this much weight,
#: gradient and optimizer state per device (a vocabulary-parallel embedding table, a large head)
MEMORY_WORTH = 2**30
# an anchor (group) kept by minimality saves more than PAY_FLOOR seconds or more than PAY_WORTH of the step
# estimate: a smaller saving is within what the step model resolves on a large step (it prices no kernel launch
# and no overlap; 100 us is ten collective latency steps, a few launches), not worth a shard() line: the labels'
# mask split by dp behind the loss, a 64 KiB gather, saves 17-65 us of a 136-600 ms step. A small model's step
# is its own scale (an encoder's 25 us of 1 ms pays)
PAY_WORTH = 1e-3
PAY_FLOOR = 100e-6


def _worth(plan: Plan) -> float:
    """What one line of configuration must save of ``plan``'s step to be worth writing (PAY_FLOOR, PAY_WORTH)."""
    return min(PAY_WORTH * plan.totals()["step_seconds"], PAY_FLOOR)


def _lines(members) -> int:
    """The shard() lines a group of anchors takes: one per pattern (an operator across repeated layers)."""
    return len({_group_key(c.op) for c in members})


def _state_bytes(plan: Plan) -> float:
    m = memory(plan)
    return m["parameters"] + m["gradients"] + m["optimizer_states"]


def memory(plan: Plan, optimizer_bytes_per_param: int = 8) -> dict[str, float]:
    """Per-device bytes of parameters, gradients and optimizer states (Adam: two fp32 moments) under
    ``plan``, and an activation estimate (every operator output kept for backward: an upper bound). With the
    model's parallel optimizer (``graph.optimizer_sharding``, a MindFormers config's
    ``enable_parallel_optimizer``) a replicated weight's slice is split further over its replicas, as
    :class:`~strategist.frontend.graph.OptimizerSharding` says; its communication (the gradient's reduce-scatter and
    the weight's all-gather) moves what the gradient's all-reduce would, so the step is priced as without."""
    g = plan.graph
    zero = getattr(g, "optimizer_sharding", None)
    seen: dict[str, tuple[int, ...]] = {}     # parameter -> its slice's shape
    for op in g:
        ch = plan.choices[op.name]
        if ch.sharding is None:
            continue
        rule = _cached_rule(op)
        for k, slot in enumerate(rule.slots):
            x = op.inputs[slot]
            if x.kind == "param" and x.ref not in seen and k < len(ch.inputs):
                seen[x.ref] = ch.inputs[k].slice_shape
    params = grads = opt = 0.0
    for name, p in g.params.items():
        shape = seen.get(name, tuple(p.spec.shape))
        n = math.prod(shape)
        per = p.spec.nbytes / max(p.spec.numel, 1)
        w = 1
        if zero is not None and p.requires_grad and shape:
            w = zero.ways(plan.mesh.size * n // max(p.spec.numel, 1), shape[0], n * per)
        params += n * per / w
        if p.requires_grad:
            grads += n * per / (w if zero.shards_gradients else 1) if zero is not None else n * per
            opt += n * optimizer_bytes_per_param / w
    act = 0.0
    for op in g:
        for j, lay in enumerate(plan.choices[op.name].outputs):
            if j < len(op.outputs) and op.outputs[j] is not None:
                act += lay.slice_numel * op.outputs[j].nbytes / max(op.outputs[j].numel, 1)
    return {"parameters": params, "gradients": grads, "optimizer_states": opt, "activations": act,
            "total": params + grads + opt + act}
