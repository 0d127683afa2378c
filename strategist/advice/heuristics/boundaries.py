"""Rule 3, parallelism boundaries: where the weights' preference flips from data to model parallelism (a cut in
front of the first model-parallel operator, so the model-parallel side's propagation stops there), and a sequence
long enough to want a cp axis."""
from __future__ import annotations

from ...vocab.graph import Op, OpGraph
from ...vocab.mesh import Mesh
from ..anatomy import cut_before


def boundary_ops(graph: OpGraph, mesh: Mesh, prefs: dict[str, str]) -> dict[str, str]:
    """Operator -> ``"dp"`` (the cut: the producer of the model-parallel operator's activation) or ``"tp"`` (the
    first operator past a data-parallel body that prefers model parallelism)."""
    order = [op.name for op in graph if op.name in prefs]
    out: dict[str, str] = {}
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
            cut = cut_before(graph, name)
            if cut is not None:
                out[cut] = "dp"
            out[name] = "tp"
            last_dp = None
    return out


def boundary_choice(ctx, op: Op) -> tuple[str, str, dict, str]:
    """``(rule, template name, template, why)`` for an operator of ``ctx.boundary_ops``."""
    t, boundary = ctx.templates, ctx.boundary_ops
    if boundary[op.name] == "dp":
        tname = ("conv_data_parallel" if op.type.startswith("Conv") else
                 "matmul_data_parallel" if op.type.startswith(("MatMul", "BatchMatMul")) else "data_parallel")
        tmpl = t.get(tname, {})
        why = (f"parallelism boundary: data parallel up to here, the cut in front of "
               f"{next(k for k, v in boundary.items() if v == 'tp')}, so the model-parallel side's "
               f"propagation stops here")
    else:
        tname = ("matmul_column" if op.type.startswith(("MatMul", "BatchMatMul")) else
                 "conv_column" if op.type.startswith("Conv") else "embedding_vocab_parallel")
        tmpl = t.get(tname, {})
        why = "parallelism boundary: parameters outweigh activations from here on (model parallel)"
    return ("3 boundary", tname, tmpl, why)


def long_sequence_notes(graph: OpGraph, mesh: Mesh, thresholds: dict) -> list[str]:
    """A note when the attention's sequence is long enough for a cp axis and the mesh has none."""
    seq = max((op.inputs[0].spec.shape[1] for op in graph if op.type == "FlashAttentionScore"
               and op.inputs[0].spec is not None and len(op.inputs[0].spec.shape) >= 3), default=0)
    if seq >= thresholds.get("long_sequence", 32768) and mesh.get("cp") == 1:
        return [f"long sequence ({seq}): a cp axis (--mesh ...,cp=N) would split it (rule 3)"]
    return []
