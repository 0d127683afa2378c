"""What a MindFormers Cell's own code says of the mesh: the config attributes its methods read for each axis
(``config.tensor_model_parallel_size``), the values a method's locals take, and the mode test around its own
``shard()`` calls."""
from __future__ import annotations

import math

import libcst as cst

from .cst_match import chained_shard, dotted, is_self_attr, is_self_call, method_named, walk_nodes
from .locate import AXIS_VARS


def infer_values(klass: cst.ClassDef, strategies: dict[str, tuple]) -> dict[str, int]:
    """Values of the class's bare-name variables from its existing shard() tuples and the strategies the
    graph recorded for them (``((dp, 1), (tp, 1))`` recorded as ``((2, 1), (4, 1))``: dp=2, tp=4)."""
    values: dict[str, int] = {}

    def walk(node, value):
        if isinstance(node, cst.Name) and isinstance(value, int):
            values.setdefault(node.value, value)
        elif isinstance(node, (cst.Tuple, cst.List)) and isinstance(value, (tuple, list)) \
                and len(node.elements) == len(value):
            for e, v in zip(node.elements, value):
                walk(e.value, v)

    for node in walk_nodes(klass):
        if isinstance(node, cst.Assign) and chained_shard(node.value) is not None and node.value.args:
            for t in node.targets:
                if is_self_attr(t.target) and strategies.get(t.target.attr.value) is not None:
                    walk(node.value.args[0].value, strategies[t.target.attr.value])
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "shard" \
                and node.args:
            base = node.func.value
            inst = base.attr.value if is_self_attr(base) else None
            if inst in strategies and strategies[inst] is not None:
                walk(node.args[0].value, strategies[inst])
    return values


# MindFormers' TransformerConfig attributes and the mesh axes whose product each holds: data_parallel_size
# counts the ep devices too (MindFormers splits its data-parallel devices into experts)
CONFIG_AXES = {"data_parallel_size": ("dp", "ep"), "tensor_model_parallel_size": ("tp",),
               "context_parallel_size": ("cp",), "expert_model_parallel_size": ("ep",)}


def config_size(attr: str, mesh) -> int:
    """The value MindFormers' config attribute ``attr`` takes on ``mesh``."""
    return math.prod(mesh.get(a, 1) for a in CONFIG_AXES[attr])


def config_read(value) -> str | None:
    """The one config attribute an expression holds: ``config.tensor_model_parallel_size``, also through
    ``self.config`` and MindFormers' ``1 if config.X is None else config.X``; None for anything else (a
    product such as MoELayer's ``self.dp = config.data_parallel_size * config.tensor_model_parallel_size``)."""
    if isinstance(value, cst.IfExp) and isinstance(value.orelse, cst.Attribute) \
            and isinstance(value.body, cst.Integer) and value.body.value == "1":
        value = value.orelse
    if isinstance(value, cst.Attribute) and value.attr.value in CONFIG_AXES and \
            dotted(value.value) in ("config", "self.config"):
        return value.attr.value
    return None


def config_values(fn: cst.FunctionDef, mesh) -> dict[str, int]:
    """MindFormers: ``dp = config.data_parallel_size ...`` at the top of a method: the variable holds what
    the config attribute it reads holds on the mesh (``data_parallel_size`` is dp times ep)."""
    out = {}
    for stmt in fn.body.body:
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
            a = stmt.body[0]
            read = config_read(a.value)
            for t in a.targets:
                if isinstance(t.target, cst.Name) and read and t.target.value in AXIS_VARS:
                    out[t.target.value] = config_size(read, mesh)
    return out


def self_config_values(klass: cst.ClassDef, mesh, method: str) -> dict[str, int]:
    """MindFormers: ``self.dp = config.data_parallel_size`` in the class's ``__init__`` before it calls
    ``method`` (MoELayer's ``self.tp``): ``self.tp`` holds what that attribute holds on the mesh; a name
    assigned twice, or from anything but one attribute, is not used (MoELayer's ``self.dp`` is dp * tp * cp)."""
    init = method_named(klass, "__init__")
    if init is None or not any(is_self_call(n, method) for n in walk_nodes(init)):
        return {}
    out, seen = {}, set()
    for n in walk_nodes(init):
        if is_self_call(n, method):
            break
        if isinstance(n, cst.Assign):
            for t in n.targets:
                if isinstance(t.target, cst.Attribute) and dotted(t.target.value) == "self":
                    name = f"self.{t.target.attr.value}"
                    read = config_read(n.value)
                    if name in seen or not read or t.target.attr.value not in AXIS_VARS:
                        out.pop(name, None)
                    else:
                        out[name] = config_size(read, mesh)
                    seen.add(name)
    return out


def config_attrs(mesh) -> dict[str, int]:
    """The config's attributes as scope entries (``config.tensor_model_parallel_size``: 4)."""
    return {f"config.{attr}": config_size(attr, mesh) for attr in CONFIG_AXES}


def config_param(klass: cst.ClassDef, fn, name: str) -> bool:
    """Is ``config`` a MindFormers config wherever method ``name`` of ``klass`` (``fn``, None when it is still to
    be written) runs: a parameter without a default, or one every ``self.<name>(...)`` call of the class passes?"""
    if fn is not None:
        params = fn.params.params + fn.params.kwonly_params
        p = next((p for p in params if p.name.value == "config"), None)
        if p is None:
            return False
        if p.default is None:
            return True
    calls = [n for n in walk_nodes(klass) if is_self_call(n, name)]
    return bool(calls) and all(c.args for c in calls)


def evaluate(node, values: dict[str, int]):
    """The value of a shard() tuple written with integers, names of known value and ``*``; None otherwise."""
    if isinstance(node, cst.Integer):
        return int(node.value)
    if isinstance(node, cst.Name):
        return values.get(node.value)
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
        return values.get(f"{node.value.value}.{node.attr.value}")
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        a, b = evaluate(node.left, values), evaluate(node.right, values)
        return None if a is None or b is None else a * b
    if isinstance(node, (cst.Tuple, cst.List)):
        out = tuple(evaluate(e.value, values) for e in node.elements)
        return None if any(x is None for x in out) else out
    return None


def mode_gate(klass: cst.ClassDef, fn) -> tuple | None:
    """(statement, test): where ``klass.__init__`` calls method ``fn`` (not __init__ itself) only inside a
    top-level ``if`` on the parallel mode (``if _get_parallel_mode() in (ParallelMode.SEMI_AUTO_PARALLEL,):``
    ``self.shard(config)``); None when it is called otherwise, or not from __init__."""
    if fn is None or fn.name.value == "__init__":
        return None
    init = method_named(klass, "__init__")
    if init is None:
        return None
    hits = [st for st in init.body.body if any(is_self_call(n, fn.name.value) for n in walk_nodes(st))]
    if len(hits) != 1 or not isinstance(hits[0], cst.If) or hits[0].orelse is not None:
        return None
    test = cst.Module([]).code_for_node(hits[0].test)
    return (hits[0], test) if "_parallel_mode" in test or "ParallelMode" in test else None
