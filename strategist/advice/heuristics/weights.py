"""Rule 1, weight operators: Megatron's column/row pairs (output features, then contracted features, by tp),
attention projections (heads by tp whatever their weight's size), embeddings and language-model heads with a large
vocabulary (vocabulary by tp), expert weights (experts by ep), and data parallelism over every device where the
activations outweigh the weight."""
from __future__ import annotations

from ...vocab.graph import Op
from ..anatomy import WEIGHT_MATMULS, data_parallel_template, weight_params


def weight_choice(ctx, op: Op) -> tuple | None:
    """``(rule, template name, template, why)`` for a weight operator, None for any other (or one that keeps
    what propagation gives it)."""
    graph, mesh, t, rules = ctx.graph, ctx.mesh, ctx.templates, ctx.rules
    if op.type not in ctx.categories.get("weight", ()) or not weight_params(graph, op):
        return None
    if ctx.prefs.get(op.name) == "dp":
        if op.type in WEIGHT_MATMULS and mesh.get("tp") > 1:
            return _data_parallel_side(ctx, op)
        return None
    slot = next(iter(weight_params(graph, op)))
    large = rules.thresholds.get("large_vocab", 16384)
    if op.type == "Embedding" and slot == 1:
        vocab = op.inputs[1].spec.shape[0]
        if vocab >= large:
            return ("1 weight", "embedding_table_vocab_parallel", t.get("embedding_table_vocab_parallel", {}),
                    f"embedding with a large vocabulary ({vocab} rows): vocabulary split by tp")
    elif op.type in ("Gather", "GatherV2") and slot == 0:
        vocab = op.inputs[0].spec.shape[0]
        if vocab >= large:
            return ("1 weight", "embedding_vocab_parallel", t.get("embedding_vocab_parallel", {}),
                    f"embedding with a large vocabulary ({vocab} rows): vocabulary split by tp")
        return ("1 weight", "embedding_data_parallel", t.get("embedding_data_parallel", {}),
                f"embedding with a small vocabulary ({vocab} rows): data parallel")
    elif op.name in ctx.roles:
        wspec = op.inputs[slot].spec
        if len(wspec.shape) >= 3 and op.type.startswith("BatchMatMul"):
            return ("1 weight", "experts", t.get("experts", {}), "expert weights: experts by ep")
        role = ctx.roles[op.name]
        return ("1 weight", f"matmul_{role}", t.get(f"matmul_{role}", {}),
                "Megatron " + ("column-parallel: output features by tp" if role == "column"
                               else "row-parallel: contracted features by tp, after a column MatMul"))
    return None


def _data_parallel_side(ctx, op: Op) -> tuple:
    """A weight MatMul whose preference is data parallel, on a mesh with tp."""
    t, rules, roles = ctx.templates, ctx.rules, ctx.roles
    oshape = op.outputs[0].shape if op.outputs and op.outputs[0] is not None else ()
    vocab = oshape[-1] if oshape else 0
    if op.name in ctx.attention:
        # an attention projection: Megatron's head-parallel pair whatever its weight's size, so that
        # FlashAttention runs on each device's own heads
        role = roles[op.name]
        return ("1 weight", f"matmul_{role}", t.get(f"matmul_{role}", {}),
                "attention projection, Megatron " + ("column-parallel: heads by tp" if role == "column"
                                                     else "row-parallel: heads contracted by tp"))
    if vocab >= rules.thresholds.get("large_vocab", 16384) and op.name in roles \
            and (not ctx.vocabularies or vocab in ctx.vocabularies):
        # a language-model head: its logits dwarf its weight, but a replicated vocabulary would
        # gather them whole for the loss; vocabulary-parallel keeps them split
        return ("1 weight", "matmul_column", t.get("matmul_column", {}),
                f"language-model head ({vocab} vocabulary rows): vocabulary by tp, the logits stay split")
    # activations outweigh the weight: data parallel over every device. Left to propagation
    # (a full-batch dataset seeds nothing), the tp devices would repeat each other's work
    tname = data_parallel_template(ctx.graph, op, t)
    return ("1 weight", tname, t.get(tname, {}), "activations outweigh the weight: data parallel over every device")
