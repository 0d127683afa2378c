"""What the model is made of, as the advisor reads it: weight operators' roles and Megatron pairs, the
attention's projections and interiors, sequence-first and sequence-parallel layouts, the companions an anchor
brings (the embedding's Transpose, the MoE permute)."""
from __future__ import annotations

import math
import re

from ..vocab.graph import Op, OpGraph, ShardLayout
from ..vocab.mesh import Mesh
from ..engine.rules.factor import FactorRule, Sharding
from ..vocab.anchors import Anchor
from ..engine.search.caches import cached_rule
from ..engine.search.structure import local_rows_marked
from ..files.rules import Rules
from .rules import anchor_of, template_sharding
from .choice import Choice


#: the sequence-parallel package's templates (kept as the config asks, see propose)
SP_TEMPLATES = frozenset({"norm_sequence_parallel", "matmul_row_sequence_parallel", "residual_sequence_parallel"})


#: weight operators a Megatron column/row or data-parallel template applies to
WEIGHT_MATMULS = frozenset({"MatMul", "BatchMatMul", "MatMulExt", "BatchMatMulExt"})


def weight_slot(op: Op) -> int | None:
    p = op.params
    return next(iter(p)) if p else None


def is_sequence_first(graph: OpGraph) -> bool:
    """MindFormers' (mcore) training graphs carry activations sequence-first, ``[S, B, H]``; its front end says
    so (``graph.sequence_first``: False for the batch-first legacy models)."""
    given = graph.sequence_first
    if given is not None:
        return bool(given)
    m = str(getattr(graph, "model", "") or "")
    return m.startswith("mindformers:") or m.endswith((".yaml", ".yml"))


def uses_sequence_parallel(graph: OpGraph, mesh: Mesh) -> bool:
    """The config asks for sequence parallelism (MindFormers' use_seq_parallel): on mcore's sequence-first rows
    (the Morph-inlined linears' local rows), or on a legacy model's batch-first ``[B, S, H]`` (ChatGLM2)."""
    if not graph.sequence_parallel or mesh.get("tp") <= 1:
        return False
    if is_sequence_first(graph):
        return local_rows_marked(graph)
    return _batch_first_rows(graph, mesh) is not None


def _batch_first_rows(graph: OpGraph, mesh: Mesh) -> dict | None:
    """Sequence parallelism on batch-first ``[B, S, H]`` (a legacy model): the template of the layout a row
    linear's output reduce-scattered over its rows ``[B*S]`` by (dp, ep, cp, tp), outer first, hands the norms
    through the Reshape back to ``[B, S, H]`` with no communication: the leading axes whose sizes multiply to B's
    on B, the rest on S (B by dp, S by cp and tp when each dp rank holds one sequence, MindFormers' own layout),
    or all on B where B holds them all (the graph's B: one micro-batch's where the graph holds one,
    ``StepOptions.graph_batch``). None where an axis would straddle B and S (no Layout expresses it), or cp would
    land on B (the attention splits S by cp)."""
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


def sp_templates(graph: OpGraph, t: dict, mesh: Mesh) -> tuple[dict, dict]:
    """(the sequence-parallel norm's template, the plain norm's) for the graph's orientation: ``[S, B, H]`` S by cp
    and tp, B by dp; batch-first ``[B, S, H]`` as the row linears' reduce-scattered rows arrive
    (:func:`_batch_first_rows`)."""
    if is_sequence_first(graph):
        return t.get("norm_sequence_parallel", {}), t.get("norm_sequence_first", {})
    return _batch_first_rows(graph, mesh) or {}, t.get("norm", {})


def weight_params(graph: OpGraph, op: Op) -> dict[int, str]:
    """Input slot -> Parameter, directly or through one Cast (MindFormers' Morph-inlined linears cast the
    weight to the compute dtype before the MatMul)."""
    out = dict(op.params)
    for i, x in enumerate(op.inputs):
        if x.kind == "op" and i not in out and x.ref in graph:
            src = graph.op(x.ref)
            if src.type == "Cast" and src.params:
                out[i] = next(iter(src.params.values()))
    return dict(sorted(out.items()))


def op_roles(graph: OpGraph, rules: Rules) -> dict[str, str]:
    """Weight MatMul -> "column" | "row" by data flow: a column MatMul's output reaching another weight
    MatMul before a norm makes that one its row partner."""
    weight_mm = {"MatMul", "BatchMatMul", "MatMulExt", "BatchMatMulExt"}
    norms = rules.categories.get("norm", frozenset())
    carry: dict[str, bool] = {}
    roles: dict[str, str] = {}
    for op in graph:
        incoming = any(carry.get(x.ref, False) for x in op.inputs if x.kind == "op")
        if op.type in weight_mm and weight_params(graph, op):
            roles[op.name] = "row" if incoming else "column"
            carry[op.name] = roles[op.name] == "column"
        elif op.type in norms:
            carry[op.name] = False
        else:
            carry[op.name] = incoming
    return roles


def megatron_pairs(graph: OpGraph, rules: Rules) -> set[str]:
    """The weight MatMuls of Megatron column -> row pairs: each row-role MatMul and every column-role one whose
    output reaches it before a norm (a lone projection into a norm or the head is not in a pair)."""
    weight_mm = {"MatMul", "BatchMatMul", "MatMulExt", "BatchMatMulExt"}
    norms = rules.categories.get("norm", frozenset())
    carry: dict[str, frozenset] = {}
    out: set[str] = set()
    rows: set[str] = set()
    for op in graph:
        incoming = frozenset().union(*(carry.get(x.ref, frozenset()) for x in op.inputs if x.kind == "op"))
        if op.type in weight_mm and weight_params(graph, op):
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


def _walk(graph: OpGraph, start: str, nexts, expand) -> None:
    """Depth first over the operators ``nexts(name)`` reaches from ``start`` (each once; ``start`` itself is not
    visited); ``expand(name, op)`` is called on each and says whether the walk goes on past it."""
    seen, todo = {start}, list(nexts(start))
    while todo:
        n = todo.pop()
        if n in seen or n not in graph:
            continue
        seen.add(n)
        if expand(n, graph.op(n)):
            todo.extend(nexts(n))


def _walk_back_to_weights(graph: OpGraph, row: str, weight_mm) -> tuple[set[str], list[str]]:
    """Walking back from ``row``'s activation input, stopping at each weight MatMul: (the weight MatMuls
    reached, the operators passed on the way)."""
    out, passed = set(), []

    def expand(n, op):
        if op.type in weight_mm and weight_params(graph, op):
            out.add(n)
            return False
        passed.append(n)
        return True
    _walk(graph, row, lambda n: [x.ref for x in graph.op(n).inputs if x.kind == "op"], expand)
    return out, passed


def _column_partners(graph: OpGraph, row: str, weight_mm) -> set[str]:
    """The weight MatMuls reached walking back from ``row``'s activation input (stopping at each)."""
    return _walk_back_to_weights(graph, row, weight_mm)[0]


def pair_interior(graph: OpGraph, row: Op, mesh: Mesh, tmpl: dict, with_op: str) -> list["Choice"]:
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
        s = template_sharding(cached_rule(op), tmpl, mesh)
        if s is not None:
            out.append((n, s))
    return out


def _activation_bytes(op: Op) -> int:
    ins = [x.spec.nbytes for x in op.inputs if x.kind in ("op", "input") and x.spec is not None]
    outs = [o.nbytes for o in op.outputs if o is not None]
    return max(ins + outs + [1])


def preferences(graph: OpGraph, rules: Rules, boundaries: dict[str, str]) -> dict[str, str]:
    """Weight op -> "dp" | "tp" | "" by parameter vs activation bytes (rule 3), or by a declared boundary."""
    ratio = float(rules.thresholds.get("boundary_ratio", 8.0))
    out = {}
    for op in graph:
        if op.type not in rules.categories.get("weight", ()) or not weight_params(graph, op):
            continue
        declared = next((v for path, v in sorted(boundaries.items(), key=lambda kv: -len(kv[0]))
                         if op.cell_path == path or op.cell_path.startswith(path + ".") or op.name.startswith(path)),
                        None)
        if declared:
            out[op.name] = declared
            continue
        pbytes = sum(op.inputs[s].spec.nbytes for s in weight_params(graph, op))
        r = pbytes / _activation_bytes(op)
        out[op.name] = "tp" if r > ratio else "dp" if r < 1 / ratio else ""
    return out


def cut_before(graph: OpGraph, name: str) -> str | None:
    """The operator producing ``name``'s only activation input, looking through Reshape and Cast (which
    cannot or need not be configured): every path from the data into ``name`` passes through it."""
    acts = [x for x in graph.op(name).inputs if x.kind == "op"]
    return producer_through(graph, acts[0]) if len(acts) == 1 else None


def producer_through(graph: OpGraph, x, through=("Reshape", "Cast")) -> str | None:
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


def splits_nothing_model_parallel(tmpl: dict, mesh: Mesh) -> bool:
    """A template whose model-parallel factors (those mapped only to tp / ep) all land on axes the mesh
    lacks (or of size 1): "column-parallel by tp" on a pure dp mesh would split nothing."""
    mp = [v if isinstance(v, (list, tuple)) else [v] for v in (tmpl or {}).values()]
    mp = [axes for axes in mp if axes and all(a in ("tp", "ep") for a in axes)]
    return bool(mp) and all(mesh.get(a) <= 1 for axes in mp for a in axes)


def attention_projections(graph: OpGraph, roles: dict[str, str], norms) -> set[str]:
    """The weight MatMuls around each FlashAttentionScore: the column-role ones whose output reaches it
    before another weight MatMul or a norm (q/k/v, MLA's up-projections), and the row-role one its output
    reaches first (the output projection)."""
    out: set[str] = set()

    def expand(role):
        def go(n, op):
            if n in roles:
                if roles[n] == role and not (role == "column" and _feeds_latent(graph, n, roles, norms)):
                    out.add(n)
                return False
            return op.type not in norms and op.type != "FlashAttentionScore"
        return go
    for fa in (op.name for op in graph if op.type == "FlashAttentionScore"):
        _walk(graph, fa, lambda n: list(graph.nx.predecessors(n)), expand("column"))
        _walk(graph, fa, lambda n: list(graph.nx.successors(n)), expand("row"))
    return out


def _feeds_latent(graph: OpGraph, name: str, roles: dict[str, str] | None, norms) -> bool:
    """True when some path out of weight MatMul ``name`` reaches a norm of a rank-3 activation (or, with
    ``roles``, another weight MatMul of ``roles``) before a FlashAttentionScore: a down-projection into a
    latent (MLA's ``linear_kv_down_proj`` into ``kv_layernorm``, its rotary slice alone reaching the
    attention), not a head projection (a per-head q/k norm on ``[S, B, N, D]`` does not count). Without
    ``roles`` a path ends at any weight MatMul."""
    found = []

    def expand(n, op):
        if found or op.type == "FlashAttentionScore":
            return False
        if roles is not None and n in roles:
            found.append(n)
            return False
        if roles is None and op.type in WEIGHT_MATMULS and weight_params(graph, op):
            return False
        if op.type in norms:
            x = op.inputs[0].spec if op.inputs else None
            if x is not None and len(x.shape) <= 3:
                found.append(n)
            return False
        return True
    _walk(graph, name, lambda n: list(graph.nx.successors(n)), expand)
    return bool(found)


def grouped_query_attention(op: Op, rule: FactorRule, tmpl: dict, mesh: Mesh, s: Sharding | None):
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
    gs = template_sharding(lay, t2, sub, share=frozenset({"n2"}))
    if gs is None or gs.splits.get("n", 1) != tp:
        return None
    return gs, sub


def split_interiors(graph: OpGraph, fa: Op, roles: dict[str, str], tmpl: dict, mesh: Mesh) -> list["Choice"]:
    """The companions of a grouped-query FlashAttention anchor: in the same layer, the operators between each
    row-role MatMul and its column partners whose way back holds a Split (a fused gate/up SwiGLU: the Split cuts
    the features the column linear splits by tp, which MindSpore's Split needs whole), laid out batch-only by
    ``tmpl``, as MindFormers' ChatGLM2 MLP has them. Propagated from the grouped-query layout, that Split takes
    the sequence split by tp, and the row linear then gathers its input over dp (glm4 at dp=8,tp=8, 4 layers:
    828 ms with the attention alone, 315 ms with this package, 337 ms the advice without either)."""
    m = LAYER_PATH.search(fa.name)
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


def token_template(op: Op, rule: FactorRule, axes) -> dict | None:
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


def data_parallel_template(graph: OpGraph, op: Op, templates: dict) -> str:
    """The data-parallel template of weight MatMul ``op``: rows merged from sequence-first ``[S, B, H]`` take
    S's axes outer, as the reshape back to ``[S, B, N]`` deals them."""
    # looking through a bf16 cast between the rows' reshape and the linear
    name = producer_through(graph, op.inputs[0], through=("Cast",)) if op.inputs else None
    src = graph.op(name) if name is not None else None
    if src is not None and src.attrs.get("strategist_local_rows") and "matmul_data_parallel_sequence_first" in templates:
        return "matmul_data_parallel_sequence_first"
    return "matmul_data_parallel"


def data_parallel_choice(graph: OpGraph, op: Op, rule: FactorRule, templates: dict, mesh: Mesh) -> "Choice | None":
    """``op`` (a weight MatMul) data parallel over every device, as an alternative to its Megatron layout."""
    tname = data_parallel_template(graph, op, templates)
    s = template_sharding(rule, templates.get(tname, {}), mesh)
    if s is None:
        return None
    return Choice(op.name, "1 weight", tname, "weight and activations of comparable size: data parallel over every "
                  "device is faster by the step model than the Megatron layout", anchor_of(op.name, s, mesh, op.type))


def reduce_scatter_rows(anchor: Anchor, mesh: Mesh, sequence_first: bool = True) -> Anchor:
    """A row-parallel MatMul anchor (``[S*B, K] x [K, N]``, K by tp) whose output is reduce-scattered over
    its rows: sequence-first rows take S's axes (cp, tp) then B's (dp, ep), outer first, as a device-local
    reshape back to ``[S, B, N]`` hands them to the sequence-parallel norms; batch-first rows ``[B*S]`` B's axes
    then S's."""
    n = len(mesh.shape)
    order = ("cp", "tp", "dp", "ep") if sequence_first else ("dp", "ep", "cp", "tp")
    rows = tuple(n - 1 - mesh.index(a) for a in order if a in mesh.names and mesh.get(a) > 1)
    out = ShardLayout(mesh.shape, mesh.names, (rows, ()))
    return Anchor(anchor.op, anchor.strategy, anchor.layouts, out_layouts=(out,), origin=anchor.origin)


def embedding_companion(graph: OpGraph, op: Op, rules: Rules, mesh: Mesh, sp: bool = False) -> Choice | None:
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
    s = template_sharding(cached_rule(t), rules.templates.get(tname, {}), mesh)
    if s is None:
        return None
    return Choice(t.name, "2 dimension", tname,
                  f"companion of the split embedding table {op.name}: the layout change after it, batch by dp"
                  + (", sequence by tp (sequence parallel)" if tname != "embedding_output_batch" else ""),
                  anchor_of(t.name, s, mesh, t.type), with_op=op.name)


def moe_permute_companion(graph: OpGraph, op: Op, tmpl: dict, mesh: Mesh) -> Choice | None:
    """The permute before a MindFormers MoE FFN Morph (``[S, B, H]`` -> ``[B, S, H]``, then the Reshape to tokens
    ``[B*S, H]``), anchored with its batch over the Morph's token axes: each device then holds its own tokens
    whole. Left to propagation it keeps the residual stream's layout (S by tp, B by dp), whose merged rows are not
    a contiguous slice of the tokens, and MindSpore's search resolves the Reshape with a gather of every token
    (deepseek3: 411 MiB forward, its transpose backward) where an all-to-all at the permute moves 88 MiB."""
    # the tokens' input: the one a Transpose feeds through Reshapes
    t = next((graph.op(n) for n in (producer_through(graph, x) for x in op.inputs)
              if n is not None and graph.op(n).type == "Transpose"), None)
    if t is None:
        return None
    rule = cached_rule(t)
    try:
        perm = [rule.inputs[0].index(f) for f in rule.outputs[0]]
    except ValueError:
        return None
    axes = [a for a in tmpl.get("n", []) if mesh.get(a) > 1]
    s = template_sharding(rule, {rule.inputs[0][perm[0]]: axes}, mesh) if axes else None
    if s is None:
        return None
    return Choice(t.name, "4 fused", "moe_permute",
                  f"companion of the MoE FFN {op.name}: the permute before it hands each device its own tokens",
                  anchor_of(t.name, s, mesh, t.type))


def model_own(graph: OpGraph) -> set[str]:
    """The operators the model's own code configures in every parallel build (``graph.parallel_only``: MindFormers'
    loss): every plan starts from their strategies (:func:`strategist.engine.plan.parallel_only_anchors`), so the
    advice never anchors them, and hands them no follower either."""
    return set(graph.parallel_only or ())


def flippable(graph: OpGraph, rules: Rules, prefs: dict[str, str], boundaries) -> list[str]:
    """Linears of Megatron pairs that prefer data parallelism, outside any declared --boundary."""
    declared = lambda n: any(graph.op(n).cell_path == p or graph.op(n).cell_path.startswith(p + ".")
                             for p in (boundaries or {}))
    return [n for n in sorted(megatron_pairs(graph, rules), key=lambda n: graph.op(n).topo_index)
            if prefs.get(n) == "dp" and not declared(n)]


LAYER_PATH = re.compile(r"\.layers\.\d+\.")
