"""MindSpore's IR text dumps, read: call lines of the validate stage, equal nodes of the pre-CSE graph, tuple shapes.

Pure text parsing (MindSpore is imported only to know where its package lives, :func:`call_lines`).
"""
from __future__ import annotations

import os
import re

from ..vocab.graph import OpGraph


#: The opt_a sub-step after which the stand-alone graph is the one MindSpore's parallel passes work on (``auto_parallel``,
#: a no-op stand-alone; ``parallel`` is sub-step 17): inlined, not yet through opt_a's ``cse`` (sub-step 43 of the same
#: dump, after ``before_grad``). Its first round's dump (``opt_substep_opt_a_r1_j0_16_auto_parallel_*.ir``, with
#: ``save_graphs`` 1 and this name in ``MS_DEV_DUMP_IR_PASSES``) is read by :func:`cse_copies`.
PRE_CSE_PASS = "opt_a_r1_j0_16_auto_parallel"
_IR_CNODE = re.compile(r"^  %(\d+)\([^)]*\) = ([\w.]+)\((.*)$")
_IR_OUT_SHAPE = re.compile(r"-> \(<Tensor\[\w+\], \(([\d, ]*)\)>\)$")


def _ir_args(text: str) -> tuple[list[str], str]:
    """A node line's top-level arguments (after its ``Op(``) and the rest of the line."""
    args, depth, cur = [], 0, []
    for i, ch in enumerate(text):
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            if depth == 0:
                if cur or args:
                    args.append("".join(cur).strip())
                return args, text[i + 1:].strip()
            depth -= 1
        elif ch == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    return args, ""


def cse_copies(text: str) -> dict[tuple, list[int]]:
    """``(scope, type, output shape) -> [copies, ...]`` (in graph order) of every node the CSE merges.

    MindSpore's parallel passes see the graph before opt_a's ``cse``: equal calls of one primitive object on one
    tensor (``nn.MultiheadAttention``'s ``[x.swapaxes(1, 0) for x in (query, key, value)]``) are separate nodes
    there, each redistributed for its own consumers and each redistribution transposed by the autodiff; the CSE
    after the autodiff merges the forward collectives, not their transposes (the ReduceScatters have different
    inputs). The stand-alone graph strategist reads holds one node. Here the equal nodes of the dumped pre-CSE
    graph (same primitive, attributes and arguments, arguments compared as their own classes) are grouped as the
    CSE would; a group of ``k`` > 1 is listed under its scope, operator type and output shape."""
    cls: dict[tuple, int] = {}
    of: dict[str, int] = {}
    members: dict[int, list] = {}
    last = None
    for line in text.splitlines():
        m = _IR_CNODE.match(line)
        if m:
            num, op, tail = m.groups()
            args, rest = _ir_args(tail)
            key = (op, tuple(f"%{of[a[1:]]}" if a[1:].isdigit() and a[1:] in of else a for a in args), rest)
            c = of[num] = cls.setdefault(key, len(cls))
            last = [op[len("PrimFunc_"):] if op.startswith("PrimFunc_") else op, None, None]
            members.setdefault(c, []).append(last)
            continue
        if last is None:
            continue
        s = line.strip()
        if s.startswith(": (") and last[2] is None:
            o = _IR_OUT_SHAPE.search(s)
            last[2] = tuple(int(x) for x in o.group(1).split(",") if x.strip()) if o else ()
        elif s.startswith("# Scope: (") and last[1] is None:
            last[1] = s[len("# Scope: ("):].rstrip(")")
        elif s.startswith("}"):
            last = None
    out: dict[tuple, list[int]] = {}
    for c in sorted(members):
        ms = members[c]
        typ, scope, shape = ms[0]
        out.setdefault((scope, typ, shape), []).append(len(ms))
    return {k: v for k, v in out.items() if any(n > 1 for n in v)}


def mark_copies(graph: "OpGraph", text: str | None) -> None:
    """``attrs["strategist_copies"] = k`` on each operator of ``graph`` that is ``k`` > 1 equal nodes in the graph
    MindSpore's parallel passes see (:func:`cse_copies`), where the scope, type and output shape name as many
    operators of ``graph`` as groups of the pre-CSE graph (matched in graph order)."""
    if not text:
        return
    try:
        groups = cse_copies(text)
    except Exception:       # a dump this parser does not read: no copies known
        return
    if not groups:
        return
    ours: dict[tuple, list] = {}
    for op in sorted(graph.ops, key=lambda o: o.topo_index):
        shape = tuple(op.outputs[0].shape) if len(op.outputs) == 1 and op.outputs[0] is not None else None
        ours.setdefault((op.full_name.rsplit("/", 1)[0], op.type, shape), []).append(op)
    for key, sizes in groups.items():
        ops = ours.get(key, [])
        if len(ops) != len(sizes):
            continue
        for op, n in zip(ops, sizes):
            if n > 1:
                op.attrs["strategist_copies"] = n


_IR_FULLNAME = "# Fullname with scope: ("
_IR_IN_FILE = re.compile(r"# In file (.+?):(\d+)(~\d+)?(?:, [\d~]+)?/")
_MS_DIR = None


def call_lines(text: str) -> dict[str, str]:
    """Node full name -> ``file:line`` of the innermost frame of its call stack in the user's code (outside
    MindSpore's package), single lines only (a ``def`` spans lines: ``216~219``)."""
    global _MS_DIR
    if _MS_DIR is None:
        import mindspore
        _MS_DIR = os.path.dirname(os.path.abspath(mindspore.__file__)) + os.sep
    out: dict[str, str] = {}
    name = None
    for line in text.splitlines():
        s = line.lstrip()
        if not s.startswith("#"):
            if s.startswith("%") or s.startswith("}"):
                name = None
            continue
        if s.startswith(_IR_FULLNAME):
            name = s[len(_IR_FULLNAME):].rstrip(")")
            continue
        if name is None or not s.startswith("# In file "):
            continue
        m = _IR_IN_FILE.match(s)
        if m and not m.group(3) and not m.group(1).startswith(_MS_DIR):
            out[name] = f"{m.group(1)}:{m.group(2)}"
    return out


_IR_NODE = re.compile(r"^\s+%\d+\([^)]*\) = (?:PrimFunc_)?([A-Za-z0-9_]+)\(")
_IR_TUPLE = re.compile(r"TupleShape\((.*)\)>\)\s*$")


def tuple_shapes_from_text(text: str | None) -> list[tuple[str, list[tuple[int, ...]] | None]]:
    """(op type, tuple output shapes) per CNode of the IR text, in order."""
    if not text:
        return []
    out: list[tuple[str, list[tuple[int, ...]] | None]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _IR_NODE.match(line)
        if not m:
            continue
        shapes = None
        if i + 1 < len(lines):
            t = _IR_TUPLE.search(lines[i + 1])
            if t:
                shapes = [tuple(int(x) for x in grp.split(",") if x.strip())
                          for grp in re.findall(r"\(([0-9,\s]*)\)", t.group(1))]
        out.append((m.group(1), shapes))
    return out
