"""The proposal: every operator that deserves an explicit strategy under heuristics 1, 3 and 4
(:mod:`strategist.advice.heuristics`), with its template's sharding, alternatives, fallbacks and packages
(:func:`propose`)."""
from __future__ import annotations

from ..engine.rules.sharding import shard_anchor
from ..engine.search.caches import cached_rule
from ..engine.search.layout_eq import same_placement
from ..engine.search.structure import shared_param_users
from ..errors import StrategyError
from ..vocab.graph import Op, OpGraph
from ..vocab.mesh import Mesh
from .anatomy import (WEIGHT_MATMULS, cut_before, data_parallel_choice, embedding_companion, grouped_query_attention,
                      is_sequence_first, model_own, moe_permute_companion, pair_interior, reduce_scatter_rows,
                      split_interiors, splits_nothing_model_parallel)
from .choice import Choice
from .heuristics.boundaries import boundary_choice, long_sequence_notes
from .heuristics.context import Context, context
from .heuristics.fused import fused_choice, is_router, router_choice, unconfigurable
from .heuristics.weights import weight_choice
from ..files.rules import Rules
from .rules import anchor_of, template_sharding


def propose(graph: OpGraph, mesh: Mesh, rules: Rules, boundaries: dict[str, str] | None = None,
            megatron: bool = False) -> tuple[list[Choice], list[str]]:
    """Rules 1, 3 and 4: the proposed anchors (before rule 2 and minimality), and notes. ``megatron``: the
    linears of column/row pairs (:func:`strategist.advice.anatomy.megatron_pairs`) that prefer data parallelism
    are proposed as Megatron's pair instead (the advisor tries both, see :func:`strategist.advice.advisor.advise`)."""
    ctx = context(graph, mesh, rules, boundaries, megatron)
    notes: list[str] = []
    out: list[Choice] = []
    packages = {"sp_head": "", "router_head": {}}
    own = model_own(graph)
    for op in graph:
        if op.name in own:          # configured by the model itself in every parallel build: never advice
            continue
        rule = cached_rule(op)
        choice = _classify(ctx, op, rule)
        if choice is None:
            continue
        made = _choice(ctx, op, rule, choice)
        if made is None:
            continue
        choice_, on = made
        _package(ctx, op, choice_, choice[2], packages, out)
        out.append(choice_)
        out.extend(_companions(ctx, op, choice_.template, on))
    notes += long_sequence_notes(graph, mesh, rules.thresholds)
    out += unconfigurable(graph, mesh, rules, {c.op for c in out} | own)
    return _one_layout_per_shared_parameter(graph, mesh, out, notes), notes


def _classify(ctx: Context, op: Op, rule) -> tuple | None:
    """Which heuristic speaks for ``op``, in this order: a boundary (3), a MoE router or a fused operator (4),
    a weight operator (1). ``(rule, template name, template, why)``, or None."""
    if op.name in ctx.boundary_ops:
        return boundary_choice(ctx, op)
    if is_router(ctx, op):
        return router_choice(ctx, op, rule)
    if op.type in ctx.categories.get("fused", ()):
        return fused_choice(ctx, op)
    return weight_choice(ctx, op)


def _choice(ctx: Context, op: Op, rule, choice: tuple) -> tuple[Choice, Mesh] | None:
    """The :class:`Choice` of a classified operator: its template's sharding (grouped-query attention's over a
    mesh with tp split in two), sequence parallelism's reduce-scattered rows, the data-parallel alternative where
    neither weight nor activations clearly outweigh the other, the fallback without sequence parallelism. None
    where the template splits nothing model-parallel or does not apply."""
    graph, mesh, t, sp, sp_norm = ctx.graph, ctx.mesh, ctx.templates, ctx.sp, ctx.sp_norm
    rule_name, tname, tmpl, why = choice
    if splits_nothing_model_parallel(tmpl, mesh):
        return None
    s = template_sharding(rule, tmpl, mesh)
    on = mesh
    if tname == "flash_attention":
        gqa = grouped_query_attention(op, rule, tmpl, mesh, s)
        if gqa is not None:
            s, on = gqa
            why += (f"; grouped-query attention ({rule.layout_rule.factor_size('n2')} key/value heads): the "
                    f"query heads by tp, the key/value heads by the part of tp that divides them (a Layout "
                    f"splitting tp in two)")
    if s is None:
        return None
    declared = rule_name == "3 boundary" and any(
        op.cell_path == p or op.cell_path.startswith(p + ".") for p in ctx.boundaries)
    anchor = anchor_of(op.name, s, on, op.type)
    if tname == "matmul_row" and sp:
        # sequence parallelism: the row-parallel output reduce-scattered over the sequence (Megatron-SP),
        # its rows [S*B] split by S's axes (cp, tp), then B's (dp, ep), as the norms after it take them
        anchor = reduce_scatter_rows(anchor, mesh, is_sequence_first(graph))
        tname, why = "matmul_row_sequence_parallel", why + "; output reduce-scattered over the sequence (sequence parallel)"
    choice_ = Choice(op.name, rule_name, tname, why, anchor, declared=declared)
    if tname in ("matmul_column", "matmul_row", "matmul_row_sequence_parallel") and ctx.prefs.get(op.name) == "" \
            and op.name not in ctx.attention \
            and op.type in WEIGHT_MATMULS and not (op.outputs and op.outputs[0] is not None
                                                   and op.outputs[0].shape[-1] in ctx.vocabularies):
        # neither its weight nor its activations clearly outweigh the other: data parallel over every
        # device is the alternative the step model weighs against the Megatron layout (MTP's eh_proj)
        choice_.alternative = data_parallel_choice(graph, op, rule, t, mesh)
    if tname == "matmul_row_sequence_parallel" and choice_.alternative is not None \
            and sp_norm:
        # data parallel under sequence parallelism: the rows stay as the sequence-parallel norm split them
        # (S by cp and tp, B by dp), and so do the element-wise operators between the pair's linears (the
        # row linear's Reshape stops every search that would carry them the layout)
        choice_.alternative.package = pair_interior(graph, op, mesh, sp_norm,
                                                     choice_.alternative.op)
    if tname == "matmul_row_sequence_parallel":
        # without sequence parallelism: the plain row-parallel pair (its output all-reduced)
        choice_.fallback = Choice(op.name, rule_name, "matmul_row", why.split("; output reduce-scattered")[0],
                                  anchor_of(op.name, s, mesh, op.type))
    elif tname == "norm_sequence_parallel" and ctx.plain_norm:
        fs = template_sharding(rule, ctx.plain_norm, mesh)
        if fs is not None:
            choice_.fallback = Choice(op.name, rule_name, "norm_sequence_first" if is_sequence_first(graph)
                                      else "norm", "fused norm: tokens by dp "
                                      "(and cp), hidden unsplit (sequence parallelism does not pay here)",
                                      anchor_of(op.name, fs, mesh, op.type))
    if tname == "moe_ffn":
        # MindFormers' code fixes this Morph's layout (FFNGroupedGEMM.shard: tokens over dp_cp, every device of
        # the MoE layout): a plan whose propagation gives it another one is not the model that runs
        choice_.declared = True
    return choice_, on


def _package(ctx: Context, op: Op, choice_: Choice, tmpl: dict, packages: dict, out: list[Choice]) -> None:
    """Anchors that pay only together: one package per MoE router, one for sequence parallelism (its norms,
    row-parallel outputs and the residual adds between them, which are appended to ``out`` here)."""
    graph, mesh, tname = ctx.graph, ctx.mesh, choice_.template
    if tname == "moe_router":
        # one package per router: a split router pays only whole (each of its operators alone pays the
        # gather or split at its edges and is dropped, leaving the whole batch's routing on every device)
        choice_.with_op = packages["router_head"].setdefault(op.cell_path, op.name)
    if tname not in ("norm_sequence_parallel", "matmul_row_sequence_parallel"):
        return
    # one package: a sequence-parallel norm pays only where every row-parallel output is
    # reduce-scattered to it and every column-parallel input gathered from it. The config asks for it
    # (use_seq_parallel, for activation memory the step model does not weigh): kept like a declared
    # boundary, with what it costs or saves in the notes
    packages["sp_head"] = packages["sp_head"] or op.name
    sp_head = packages["sp_head"]
    choice_.with_op = sp_head
    choice_.declared = True
    if tname != "norm_sequence_parallel":
        return
    # the residual stream between the tensor-parallel blocks is sequence parallel too: the residual
    # add feeding this norm (through Casts) takes its layout; left to propagation it keeps whole
    # sequences and every norm would re-split them
    res = cut_before(graph, op.name)
    r = graph.op(res) if res is not None else None
    if r is not None and r.type in ("Add", "AddExt") and r.outputs and r.outputs[0] is not None \
            and tuple(r.outputs[0].shape) == tuple(op.inputs[0].spec.shape):
        rs = template_sharding(cached_rule(r), tmpl, mesh)
        if rs is not None:
            out.append(Choice(r.name, "4 fused", "residual_sequence_parallel",
                              f"residual add into the sequence-parallel {op.name}: the residual stream "
                              f"is sequence parallel between the tensor-parallel blocks",
                              anchor_of(r.name, rs, mesh, r.type), with_op=sp_head, declared=True))


def _companions(ctx: Context, op: Op, tname: str, on: Mesh) -> list[Choice]:
    """The operators a choice brings along: the interiors of a grouped-query attention, the token permutation
    in front of MoE experts, the embedding's gather of an embedding table split by vocabulary."""
    if tname == "flash_attention" and on is not ctx.mesh:
        return split_interiors(ctx.graph, op, ctx.roles, ctx.plain_norm, ctx.mesh)
    if tname == "moe_ffn":
        comp = moe_permute_companion(ctx.graph, op, ctx.templates.get("moe_ffn", {}), ctx.mesh)
        return [comp] if comp is not None else []
    if tname == "embedding_table_vocab_parallel":
        comp = embedding_companion(ctx.graph, op, ctx.rules, ctx.mesh, ctx.sp)
        return [comp] if comp is not None else []
    return []


def _one_layout_per_shared_parameter(graph: OpGraph, mesh: Mesh, out: list[Choice], notes: list[str]) -> list[Choice]:
    """Drop a proposal that would configure a Parameter another proposal (an earlier one) configures differently:
    MindSpore refuses such a configuration ("Incorrect strategy configuration ... shared parameter"), and the
    dropped operator takes the kept layout through the parameter's TmpIdentity anyway (random net 37: an
    embedding table that a MatMul reads as its weight; the embedding's data-parallel table and the MatMul's
    column split)."""
    shared = {p for p, us in shared_param_users(graph).items() if len(us) > 1}
    if not shared:
        return out
    seen: dict[str, tuple[str, object]] = {}
    keep = []
    for c in out:
        op = graph.op(c.op)
        rule = cached_rule(op)
        try:
            s = shard_anchor(op, c.anchor, mesh.size, rule)
        except StrategyError:
            keep.append(c)
            continue
        mine = {}
        for slot, x in enumerate(op.inputs):
            if x.kind == "param" and x.ref in shared and slot in rule.slots:
                mine[x.ref] = s.inputs[rule.slots.index(slot)]
        clash = next(((p, seen[p][0]) for p, lay in mine.items() if p in seen and not same_placement(seen[p][1], lay)), None)
        if clash:
            notes.append(f"{c.op}: not configured ({c.template}): it would shard the parameter {clash[0]} unlike "
                         f"{clash[1]}, which MindSpore refuses; it takes {clash[1]}'s layout of it")
            continue
        for p, lay in mine.items():
            seen.setdefault(p, (c.op, lay))
        keep.append(c)
    return keep
