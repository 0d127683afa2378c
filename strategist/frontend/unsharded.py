"""Operators MindSpore cannot shard: what they cost the plan and which rewrite of the model's code lifts it.

MindSpore runs an operator it has no parallel OperatorInfo for batch-parallel, whatever is configured. On one that
reads a weight (GPT-2's ``Conv1D`` runs as ``Addmm``) that weight is replicated on every device: tensor parallelism
is impossible in that code. :func:`unsharded_notes` gives one note per such operator type and source line, with the
weights it holds and the rewrite that makes it shardable (:data:`REWRITES`). The graph's notes are shown with every
plan.
"""
from __future__ import annotations

import os

from ..vocab.graph import OpGraph

#: operator type -> the rewrite of the model's code into operators MindSpore shards
REWRITES = {
    "Addmm": "write it as MatMul + Add held by the Cell (self.matmul = ops.MatMul(), self.add = ops.Add(); "
             "x = self.add(self.matmul(x, w), b)), or use nn.Dense (for mindone's Conv1D, price that rewrite with "
             "--set addmm=matmul)",
    "Baddbmm": "write it as BatchMatMul + Add (mint.bmm(x, y) + b)",
    "GeluExt": "use ops.GeLU / nn.GELU, whose GeLU MindSpore shards",
    "LayerNormExt": "use nn.LayerNorm (ops.LayerNorm), which MindSpore shards",
    "PowTensorScalar": "write x ** 3 as x * x * x, or use ops.Pow, which MindSpore shards",
    "Linear": "use mint.nn.Linear's MatMul form (mint.matmul(x, w.T) + b) or nn.Dense",
}


def _unruled(op_type: str) -> bool:
    from ..engine.rules.coverage import LEFT_OUT
    from ..engine.rules.registry import RULES
    return op_type not in RULES and op_type not in LEFT_OUT


def _where(op) -> str:
    if not op.source:
        return ""
    file, _, line = op.source.rpartition(":")
    marker = os.sep + "site-packages" + os.sep
    short = file.split(marker, 1)[1] if marker in file else os.path.basename(file)
    return f" at {short}:{line}"


def _pattern(paths: list[str]) -> str:
    """Cell paths with their layer indices as ``*``, each once (up to 4): ``transformer.h.*.attn.c_attn, ...``."""
    seen: list[str] = []
    for p in paths:
        q = ".".join("*" if part.isdigit() else part for part in p.split(".")) or "(root)"
        if q not in seen:
            seen.append(q)
    return ", ".join(seen[:4]) + (f" and {len(seen) - 4} more" if len(seen) > 4 else "")


def unsharded_notes(graph: OpGraph) -> list[str]:
    """One note per (operator type without an OperatorInfo, source line) whose operators read weights."""
    groups: dict[tuple, list] = {}
    for op in graph:
        if op.params and _unruled(op.type):
            groups.setdefault((op.type, op.source or ""), []).append(op)
    out = []
    for (op_type, _), ops in sorted(groups.items()):
        params = {ref for op in ops for ref in op.params.values()}
        shapes = sorted({tuple(graph.params[p].spec.shape) for p in params if p in graph.params},
                        key=lambda s: (-len(s), s))
        shown = ", ".join(f"[{', '.join(map(str, s))}]" for s in shapes[:3])
        fix = REWRITES.get(op_type, "write it with operators MindSpore has an OperatorInfo for")
        out.append(f"{op_type} has no OperatorInfo in MindSpore: {_pattern([op.cell_path for op in ops])}"
                   f"{_where(ops[0])} ({len(ops)} operator{'s' if len(ops) > 1 else ''}) runs batch-parallel only, "
                   f"its {len(params)} weight{'s' if len(params) > 1 else ''} ({shown}) replicated on every device: "
                   f"tensor parallelism is impossible in that code; to make it shardable, {fix}")
    return out
