"""Which Cell instance ran each operator of the compiled graph, and the operators' names.

Cell-held primitives are tagged with their owner for the compile (:func:`owned_primitives`); the ANF nodes are
credited to the Cell attribute holding their primitive, to the Cell their scope names, or, for operators a later
pass leaves in the root scope, to the Cell around them (:func:`name_operators`); :func:`source_of` finds the line
that assigned a primitive. MindSpore is imported inside the functions: importing this module does not load it.
"""
from __future__ import annotations

import ast
import contextlib
import inspect
import os
import re
import textwrap
from typing import Any

from ..memo import table
from ..vocab.graph import PLUMBING


#: Private primitive attribute naming each Cell-held primitive for the duration of one compile.
OWNER_ATTR = "strategist_owner"


@contextlib.contextmanager
def owned_primitives(cell):
    """Tag every primitive a Cell holds with a private attribute, so each graph node names its owner.

    MindSpore merges primitives with identical arguments (two ``ops.Sub()`` come out under one
    instance name, the last attribute's) and drops the instance name of Layout-sharded ones; a
    distinct attribute value keeps them apart and says which Cell attribute each node came from.
    Yields ``{tag: [(cell path, attribute name), ...]}``: each Cell's primitives get tags of their own (Reshapes
    excepted, unless recomputed), so the stand-alone compile's CSE does not merge the equal calls of different
    Cells on one tensor, which MindSpore's parallel graph keeps apart (opt_a runs ``auto_parallel`` before its
    ``cse``, pipeline/jit/ps/pass.cc GetOptPassesA).
    """
    from mindspore.ops.primitive import Primitive
    owners: dict[int, list[tuple[str, str]]] = {}
    tagged: dict[int, tuple[Any, int]] = {}
    tags: dict[tuple, int] = {}
    for path, sub in cell.cells_and_names():
        rank: dict[str, int] = {}
        for attr, prim in _prims(sub).items():
            if not isinstance(prim, Primitive):
                continue
            if id(prim) not in tagged:
                # every Cell's primitives keep tags of their own: MindSpore's step_parallel_begin graph has had
                # no CSE yet, so equal calls of different Cells on one tensor stay apart there (MindFormers'
                # telechat3 TransformerLayer and its input_layernorm each Cast the hidden states to float32: 2
                # Casts, the residual's not the norm's pre-cast; each layer's rotary cos/sin). The stand-alone
                # compile's CSE still merges equal calls of one primitive object (``q = k = v =
                # x.transpose(...)``: verify counts those copies as merged)
                sig = _signature(prim)
                k = rank[sig] = rank.get(sig, -1) + 1
                # ... but equal Reshapes of different Cells share a tag (the q/k/v Denses' input Reshapes of one
                # tensor: one Reshape, as the cell paths of MindSpore's own parse have it), unless recomputed
                # (MindFormers' linears' Reshape().recompute(True): MLA's q and kv down-projections reshape one
                # tensor, and step_parallel_begin holds two Reshapes)
                own = path if type(prim).__name__ != "Reshape" or _recomputed(prim) else None
                tag = tags.setdefault((sig, k, own), len(tags))
                tagged[id(prim)] = (prim, tag)
                with contextlib.suppress(Exception):
                    prim.add_prim_attr(OWNER_ATTR, tag)
            owners.setdefault(tagged[id(prim)][1], []).append((path, attr))
    try:
        yield owners
    finally:
        for prim, _ in tagged.values():
            with contextlib.suppress(Exception):
                prim.del_prim_attr(OWNER_ATTR)


def _recomputed(prim) -> bool:
    try:
        return bool((prim.attrs or {}).get("recompute"))
    except Exception:
        return False


def _signature(prim) -> str:
    """What MindSpore's CSE compares of two primitives: type, name and attributes."""
    try:
        attrs = sorted((k, repr(v)) for k, v in (prim.attrs or {}).items() if k != OWNER_ATTR)
    except Exception:
        attrs = [("id", str(id(prim)))]
    return f"{type(prim).__module__}.{type(prim).__qualname__}:{prim.name}:{attrs}"


def scope_cell_path(scope: str) -> tuple[str, str]:
    """``Default/layers-CellList/0-Blk`` -> (``layers.0``, ``Blk``)."""
    parts = [p for p in scope.split("/") if p]
    if parts and parts[0] == "Default":
        parts = parts[1:]
    names, cls = [], ""
    for p in parts:
        name, _, klass = p.partition("-")
        names.append(name)
        cls = klass or cls
    return ".".join(names), cls


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def name_operators(real, nodes, cell, owners) -> tuple[dict[str, tuple[str, str, str]], dict[str, str],
                                                       dict[str, bool]]:
    """Where every real node comes from and its operator's name: ``(where, names, explicit)``, keyed by node name:
    ``where`` ``(cell path, cell class, instance name)``; ``names`` ``"<cell path>.<instance name>"``, ``"#k"``
    for repeats; ``explicit`` whether a Cell attribute holds its primitive (the tags of :func:`owned_primitives`,
    ``owners``) or MindSpore kept its instance name."""
    cell_objs = dict(cell.cells_and_names())
    op_name: dict[str, str] = {}
    where: dict[str, tuple[str, str, str]] = {}      # node -> (cell path, cell class, instance name)
    seen: dict[str, int] = {}
    owner_of = {n.name: _owner_of(n, owners, scope_cell_path(n.scope)[0]) for n in real}
    folded = {n.name for n in real if _folded_into_caller(n, owners)}
    for name in folded:
        owner_of[name] = None
    enclosing = _enclosing_cells(real, nodes, owner_of)
    explicit: dict[str, bool] = {}
    for n in real:
        path, klass = scope_cell_path(n.scope)
        owner = owner_of[n.name]
        if owner is not None:
            path, inst = owner
            klass = type(cell_objs[path]).__name__ if path in cell_objs else klass
            explicit[n.name] = True
        else:
            if n.name in enclosing:
                path = enclosing[n.name]
                klass = type(cell_objs[path]).__name__ if path in cell_objs else klass
            explicit[n.name] = bool(n.instance_name) and n.name not in folded
            inst = _snake(n.op_type) if n.name in folded else n.instance_name or _instance_from_cell(cell_objs.get(path), n.op_type) or _snake(n.op_type)
        where[n.name] = (path, klass or type(cell).__name__, inst)
    # a primitive held by a Cell attribute owns the bare name; a functional or tensor-method operator
    # of the same type (``x * 0.5`` is a Muls too) takes "#k" after it, so an anchor on the attribute
    # configures the attribute's operator
    claimed = {(where[n.name][0], where[n.name][2]) for n in real if explicit[n.name]}
    for n in sorted(real, key=lambda n: not explicit[n.name]):
        path, _, inst = where[n.name]
        if not explicit[n.name] and (path, inst) in claimed and inst != _snake(n.op_type):
            inst = _snake(n.op_type)
            where[n.name] = (path, where[n.name][1], inst)
        base = f"{path}.{inst}" if path else inst
        k = seen.get(base, 0)
        seen[base] = k + 1
        op_name[n.name] = base if k == 0 else f"{base}#{k}"
    return where, op_name, explicit


def _instance_from_cell(obj, op_type: str) -> str:
    """The attribute name of the one Primitive of ``op_type`` held by Cell ``obj``, if unique.

    MindSpore drops ``instance_name`` for primitives sharded with a ``Layout``.
    """
    if obj is None:
        return ""
    from mindspore.ops.primitive import Primitive
    found = [k for k, v in _prims(obj).items() if isinstance(v, Primitive) and v.name == op_type]
    return found[0] if len(found) == 1 else ""


def _enclosing_cells(real, nodes, owner_of) -> dict[str, str]:
    """Node -> cell path, for operators MindSpore leaves in the root scope although a sub-Cell ran them.

    Operators that a later pass creates (the expansion of a functional op inside an inlined
    ``ops.Morph`` body, e.g. MindFormers' MoE ``argsort`` -> ``SortExt``) get the default scope
    ``Default``, as if the root Cell had called them. Such an operator is credited to the innermost
    Cell holding every operator it reads from and feeds; operators the root's own ``construct`` runs
    read from or feed another Cell (or a graph input) and stay at the root.
    """
    producers: dict[str, list[str]] = {}

    def real_inputs(name: str, out: list[str], depth: int = 0) -> None:
        n = nodes.get(name)
        if n is None or depth > 50:
            return
        if n.op_type not in PLUMBING:
            out.append(name)
            return
        if n.op_type in ("UpdateState", "Return"):
            return
        ins = [i.name for i in n.input if i.type == 0]           # InputProto.DATA_EDGE
        for i in (ins[:1] if n.op_type in ("Depend", "Load", "TupleGetItem", "ListGetItem") else ins):
            real_inputs(i, out, depth + 1)

    for n in real:
        out: list[str] = []
        for i in n.input:
            if i.type == 0:
                real_inputs(i.name, out)
        producers[n.name] = out
    consumers: dict[str, list[str]] = {}
    for k, ps in producers.items():
        for p in ps:
            consumers.setdefault(p, []).append(k)

    path = {n.name: (owner_of[n.name][0] if owner_of[n.name] else scope_cell_path(n.scope)[0]) for n in real}
    todo = [n.name for n in real if owner_of[n.name] is None and n.scope in ("Default", "")]
    unknown = set(todo)
    found: dict[str, str] = {}
    for _ in range(4):                    # chains of such operators resolve from their ends inwards
        changed = False
        for name in todo:
            if name not in unknown:
                continue
            before = [path[p] for p in producers[name] if p not in unknown]
            after = [path[c] for c in consumers.get(name, ()) if c not in unknown]
            if not before or not after:
                continue
            common = _common_cell(before + after)
            if common:
                found[name] = path[name] = common
                unknown.discard(name)
                changed = True
        if not changed:
            break
    return found


def _common_cell(paths: list[str]) -> str:
    """The innermost cell path containing every one of ``paths``."""
    parts = [p.split(".") if p else [] for p in paths]
    common = []
    for level in zip(*parts):
        if any(x != level[0] for x in level):
            break
        common.append(level[0])
    return ".".join(common)


def _folded_into_caller(node, owners) -> bool:
    """True for a node carrying a Cell-held primitive in another Cell's scope: MindSpore's optimizer merged
    the owner's call into the caller's. ``TwoReshapeEliminater`` (frontend/optimizer/irpass/reshape_eliminate.h)
    turns ``Reshape(Reshape(x, s1), s2)`` into one Reshape with the *inner* node's primitive and the *outer*
    node's scope: ``nn.Dense``'s output reshape (``self.reshape``, the Dense's) followed by the attention's
    head split (``x.reshape(B, S, h, d)``, the attention's) becomes one Reshape of the attention, of the
    attention's output shape. It is credited to the Cell whose scope MindSpore gives it, as a functional
    operator there. The root scope ``Default`` is no evidence (nodes a later pass creates have it too)."""
    if not owners or node.scope in ("Default", ""):
        return False
    tag = next((a.value.int_val for a in node.attribute if a.name == OWNER_ATTR), None)
    if tag is None or tag not in owners:
        return False
    path = scope_cell_path(node.scope)[0]
    return all(p != path for p, _ in owners[tag])


def _owner_of(node, owners, scope_path: str) -> tuple[str, str] | None:
    """(cell path, attribute name) of the Cell attribute holding ``node``'s primitive, from its tag.

    A tag held by several Cells (one shared primitive object, or equal primitives) is credited to the one its
    IR scope names.
    """
    if not owners:
        return None
    tag = next((a.value.int_val for a in node.attribute if a.name == OWNER_ATTR), None)
    found = owners.get(tag) if tag is not None else None
    if not found:
        return None
    mine = next((o for o in found if o[0] == scope_path), None)
    if mine is None and len({p for p, _ in found}) > 1:
        return None             # equal primitives of several Cells share the tag: the scope must say which
    return mine or found[0]


def _prims(obj) -> dict:
    d = dict(getattr(obj, "_primitives", {}) or {})
    d.update({k: v for k, v in vars(obj).items() if k not in d})
    return d


_SOURCE_CACHE = table("front end: assignment lines per Cell class", 4096)


def source_of(obj, inst: str) -> str | None:
    """``file:line`` where ``self.<inst> = ...`` is assigned in the Cell's class (MRO order),
    else the line of its ``construct``."""
    if obj is None:
        return None
    for klass in type(obj).__mro__:
        if klass.__module__.startswith("mindspore."):
            break
        table = _SOURCE_CACHE.get(klass)
        if table is None:
            table = _SOURCE_CACHE[klass] = _assignments(klass)
        if inst in table:
            return table[inst]
    for klass in type(obj).__mro__:
        fn = klass.__dict__.get("construct")
        if fn is not None:
            with contextlib.suppress(OSError, TypeError):
                return f"{_path(inspect.getsourcefile(fn))}:{inspect.getsourcelines(fn)[1]}"
    return None


def _assignments(klass) -> dict[str, str]:
    try:
        lines, start = inspect.getsourcelines(klass)
        path = _path(inspect.getsourcefile(klass))
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return {}
    table: dict[str, str] = {}
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        for t in targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                table.setdefault(t.attr, f"{path}:{start + node.lineno - 1}")
    return table


def _path(path: str | None) -> str | None:
    """A source file's path as one spelling (``a/b/../../c.py`` -> ``c.py``'s): a module imported through a
    ``sys.path`` entry with ``..`` in it names the same file as the one imported directly."""
    return os.path.normpath(path) if path else path
