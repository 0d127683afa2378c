"""Rule 4, fused operators: FlashAttentionScore (heads by tp, batch by dp, query sequence by cp), the norms
(tokens by dp and cp; sequence parallel where the config asks for it), MoE routers, dispatchers and experts -- and
the operators MindSpore generates no strategy for, which must be configured."""
from __future__ import annotations

from ...engine.rules.sharding import shard
from ...engine.search.caches import cached_rule
from ...engine.search.structure import no_generated_strategy
from ...vocab.graph import MORPH_FFN, Op, OpGraph
from ...vocab.mesh import Mesh
from ..anatomy import is_sequence_first, token_template, weight_params
from ..choice import Choice
from ...files.rules import Rules
from ..rules import anchor_of, template_sharding


def is_router(ctx, op: Op) -> bool:
    """An operator of a MoE router Cell (no weight, not a reshape or cast) where the rules have a router template."""
    return op.cell_class in ctx.categories.get("moe_router", ()) and op.type not in ("Reshape", "Flatten", "Cast") \
        and not weight_params(ctx.graph, op) and "moe_router" in ctx.templates


def router_choice(ctx, op: Op, rule) -> tuple | None:
    tmpl = token_template(op, rule, ctx.templates["moe_router"].get("tokens", ()))
    if tmpl is None:
        return None
    return ("4 fused", "moe_router", tmpl,
            "MoE router: its tokens over every device (each device scores, picks and counts only "
            "its own tokens), as its gating input arrives; left to propagation it repeats the whole "
            "batch's routing on every device")


def fused_choice(ctx, op: Op) -> tuple:
    """``(rule, template name, template, why)`` for an operator of the rules' ``fused`` category."""
    t, cats, graph, mesh = ctx.templates, ctx.categories, ctx.graph, ctx.mesh
    if op.type == "FlashAttentionScore":
        return ("4 fused", "flash_attention", t.get("flash_attention", {}),
                "fused attention: heads by tp, batch by dp, query sequence by cp")
    if op.type in cats.get("norm", ()):
        rank = len(op.inputs[0].spec.shape) if op.inputs and op.inputs[0].spec else 0
        name = "norm" if rank >= 3 else "norm_2d"
        why = "fused norm: tokens by dp (and cp), hidden unsplit"
        if rank >= 3 and is_sequence_first(graph) and "norm_sequence_first" in t:
            name = "norm_sequence_first"      # MindFormers' [S, B, H]: batch by dp, sequence by cp
            if rank >= 4 and "norm_heads_sequence_first" in t:
                name = "norm_heads_sequence_first"     # q/k norms on [S, B, N, D]: heads by tp
            elif graph.sequence_parallel and "norm_sequence_parallel" in t \
                    and mesh.get("tp") > 1:
                # the config asks for sequence parallelism: S by cp and tp between the tp blocks
                name = "norm_sequence_parallel"
                why = "fused norm, sequence parallel (use_seq_parallel, --sequence-parallel): sequence by tp (and cp), batch by dp"
        tmpl = t.get(name, {})
        if rank == 3 and not is_sequence_first(graph) and ctx.sp:
            # a legacy model's batch-first [B, S, H] under the config's sequence parallelism
            name, tmpl = "norm_sequence_parallel", ctx.sp_norm
            why = ("fused norm, sequence parallel (use_seq_parallel, --sequence-parallel): as the row linears' "
                   "reduce-scattered rows [B*S] arrive, B by " + ", ".join(tmpl["d0"]) +
                   (", S by " + ", ".join(tmpl["d1"]) if tmpl["d1"] else ""))
        return ("4 fused", name, tmpl, why)
    if op.type == MORPH_FFN:
        return ("4 fused", "moe_ffn", t.get("moe_ffn", {}),
                "MoE dispatcher + experts (MindFormers' Morph): each device permutes and computes its own "
                "tokens; left to propagation they arrive in whatever layout the router had")
    if op.type == "GroupedMatmul":
        return ("4 fused", "grouped_matmul", t.get("grouped_matmul", {}),
                "MoE experts' GroupedMatmul: tokens over every device (MindSpore never splits its expert "
                "dimension), each device computing only its own tokens")
    return ("4 fused", "moe", t.get("moe", {}), "MoE dispatch/combine: experts by ep")


def unconfigurable(graph: OpGraph, mesh: Mesh, rules: Rules, taken: set[str]) -> list[Choice]:
    """The operators MindSpore cannot leave to propagation (it generates no strategy for them,
    :func:`strategist.engine.search.structure.no_generated_strategy`) are always configured: ApplyRotaryPosEmb by its template
    (batch by dp, heads by tp), a weighted CrossEntropyLoss data parallel; all-ones where the template splits
    nothing. Kept whatever they cost (without them MindSpore's compile fails)."""
    out = []
    for op in graph:
        why = no_generated_strategy(op) if op.name not in taken else None
        if not why:
            continue
        tname = "rotary" if op.type == "ApplyRotaryPosEmb" else "loss_data_parallel"
        rule = cached_rule(op)
        s = template_sharding(rule, rules.templates.get(tname, {}), mesh)
        if s is None:
            s = shard(op, tuple((1,) * len(r) for r in rule.strategy_rows), mesh.size, rule=rule)
        out.append(Choice(op.name, "4 fused", tname, f"MindSpore generates no strategy for an unconfigured {op.type} "
                          f"({why}): it must be configured", anchor_of(op.name, s, mesh, op.type), declared=True,
                          required=True))
    return out
