"""An independent reference for which Cell instance ran each operator, to check :func:`strategist.frontend.graph.extract`.

The reference is MindSpore's own per-call parse: the same export-phase compile with ``debug_level=DEBUG``
(``mindspore.context.DEBUG``), under which the parser skips its function cache
(``parse::ConvertToFuncGraph`` in ccsrc/pipeline/jit/ps/parse/data_converter.cc) and parses every call of
every function afresh, so each node takes the scope of the Cell whose ``construct`` really called it --
and *none* of strategist's own devices (no per-call keys, no primitive owner tags, no re-crediting of
root-scope operators). It costs ~5x a compile, so it is a check, not the extraction.

Why not a PyNative trace of execution: in MindSpore 2.9 tensor operators (``y * 0.5``, ``x + y``) dispatch
in C++ through the Tensor type's number slots and never enter Python, so no Python hook (``sys.setprofile``,
a patched ``Primitive.__call__``) sees them; PyNative also runs different primitives than the graph
(``Mul`` for the graph's ``Muls``, fused pyboost kernels), and MindFormers' training models need kernels
(FlashAttentionScore, MoE routing) the CPU backend does not have.

:func:`reference_paths` gives ``[(op type, cell path)]`` in the compiled graph's order;
:func:`compare` aligns it with an :class:`~strategist.vocab.graph.OpGraph` by operator type and lists the
operators whose cell path differs. Operators that the reference leaves at the root scope ``Default``
because a later pass created them (``_enclosing_cells`` in graph.py) are counted apart: the reference
cannot say where they ran.
"""
from __future__ import annotations

import contextlib
import difflib
from dataclasses import dataclass, field

from ..vocab.graph import PLUMBING, OpGraph
from .compile import COUNTER, as_tensor, standalone_compile, train_mode
from .owners import scope_cell_path


@contextlib.contextmanager
def _debug_parse():
    """``debug_level=DEBUG`` for one compile (MindSpore then parses every function call afresh)."""
    from mindspore._c_expression import MSContext, ms_ctx_param
    ctx = MSContext.get_instance()
    saved = ctx.get_param(ms_ctx_param.debug_level)
    ctx.set_param(ms_ctx_param.debug_level, 1)          # mindspore.context.DEBUG
    try:
        yield
    finally:
        ctx.set_param(ms_ctx_param.debug_level, saved)


def reference_paths(cell, *inputs, **kwargs) -> list[tuple[str, str]]:
    """(op type, cell path from MindSpore's DEBUG-parse scope) of every real operator, in graph order."""
    from mindspore.common.api import _cell_graph_executor as executor
    from mindspore.train import anf_ir_pb2
    from .protowire import decode   # (protowire picks protobuf's runtime for MindSpore: after MindSpore)

    args = tuple(as_tensor(x) for x in inputs)
    phase = f"export.strategist_ref{next(COUNTER)}"
    with standalone_compile(cell), train_mode(cell), _debug_parse():
        phase, _ = executor.compile(cell, *args, phase=phase, **kwargs)
    proto = executor._graph_executor.get_func_graph_proto(phase, "anf_ir", False)
    with contextlib.suppress(Exception):
        executor.del_net_res(cell, set([phase]))
    g = decode(proto, anf_ir_pb2.ModelProto.DESCRIPTOR).graph
    return [(n.op_type, scope_cell_path(n.scope)[0]) for n in g.node if n.op_type not in PLUMBING]


@dataclass
class CellPathCheck:
    """How strategist's cell paths compare with the reference."""

    ops: int = 0                       # strategist's operators
    matched: int = 0                   # aligned with a reference operator of the same type
    wrong: list[tuple[str, str, str]] = field(default_factory=list)   # (op name, strategist path, reference path)
    #: matched operators both compiles leave at the root scope ``Default`` that strategist credits to the Cell
    #: around them (created by a later pass: the reference cannot say where they ran)
    root_scope: int = 0
    unmatched: list[str] = field(default_factory=list)                # strategist operators with no counterpart
    ref_unmatched: int = 0

    def summary(self) -> str:
        return (f"{len(self.wrong)} wrong of {self.matched} matched"
                + (f", {self.root_scope} re-credited from the root scope" if self.root_scope else "")
                + (f", {len(self.unmatched)}/{self.ref_unmatched} unmatched" if self.unmatched or self.ref_unmatched
                   else ""))


def compare(graph: OpGraph, ref: list[tuple[str, str]]) -> CellPathCheck:
    """Align ``graph``'s operators with the reference by type, in order, and compare their cell paths."""
    ops = graph.ops
    out = CellPathCheck(ops=len(ops))
    a = [op.type for op in ops]
    b = [t for t, _ in ref]
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    seen_a, seen_b = set(), set()
    for i, j, n in sm.get_matching_blocks():
        for k in range(n):
            op, (_, path) = ops[i + k], ref[j + k]
            seen_a.add(i + k)
            seen_b.add(j + k)
            out.matched += 1
            if op.cell_path == path:
                continue
            if path == "" and op.full_name.rpartition("/")[0] == "Default":
                out.root_scope += 1
            else:
                out.wrong.append((op.name, op.cell_path, path))
    out.unmatched = [ops[i].name for i in range(len(ops)) if i not in seen_a]
    out.ref_unmatched = len(b) - len(seen_b)
    return out
