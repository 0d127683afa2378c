"""libcst queries the source edits read: a statement's ``self.x = ...`` and ``.shard(...)`` calls, a class's
methods and the calls under a test, the names a function binds, a module's imports (and adding one)."""
from __future__ import annotations

import ast

import libcst as cst

from .shard_text import MF_LAYOUT_MODULE


def is_self_attr(node, name: str | None = None) -> bool:
    return (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"
            and (name is None or node.attr.value == name))


def dotted(node) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


def shard_call_of(stmt, target: str) -> cst.Call | None:
    """``self.<target>.shard(...)`` as a whole statement (``target`` may be dotted: ``fc2.matmul``)."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Expr):
        return None
    call = stmt.body[0].value
    if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "shard" \
            and dotted(call.func.value) == f"self.{target}":
        return call
    return None


def assign_to(stmt, attr: str) -> cst.Assign | None:
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    a = stmt.body[0]
    if isinstance(a, cst.Assign) and any(is_self_attr(t.target, attr) for t in a.targets):
        return a
    return None


def chained_shard(value) -> cst.Call | None:
    """``ops.X(...).shard(...)``: the outer shard call of an assignment's value."""
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "shard" \
            and isinstance(value.func.value, cst.Call):
        return value
    return None


def call_args(expr: str) -> list[cst.Arg]:
    return [cst.Arg(cst.parse_expression(expr))]


def method_scope(fn: cst.FunctionDef, before=None) -> set[str]:
    names = {p.name.value for p in fn.params.params + fn.params.kwonly_params + fn.params.posonly_params}
    for stmt in fn.body.body:
        if stmt is before:
            break
        if isinstance(stmt, cst.SimpleStatementLine):
            for s in stmt.body:
                if isinstance(s, cst.Assign):
                    for t in s.targets:
                        names |= bound_names(t.target)
    return names


def walk_nodes(node):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(list(n.children)))


def is_self_call(node, name: str) -> bool:
    """Is ``node`` a call ``self.<name>(...)``?"""
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == name \
        and isinstance(node.func.value, cst.Name) and node.func.value.value == "self"


def calls_under(block, cond: str, name: str) -> list:
    """The ``self.<name>.shard(...)`` statements inside the ``if <cond>:`` statements of ``block``."""
    return [x for b in block if isinstance(b, cst.If) and cst.Module([]).code_for_node(b.test) == cond
            for x in b.body.body if shard_call_of(x, name) is not None]


def own_call(klass: cst.ClassDef, name: str):
    """The last statement of ``klass``'s own body that is a bare ``self.<name>(...)`` call, or None."""
    found = None
    for n in walk_nodes(klass):
        if isinstance(n, cst.SimpleStatementLine) and len(n.body) == 1 and isinstance(n.body[0], cst.Expr) \
                and is_self_call(n.body[0].value, name):
            found = n
    return found


def method_named(klass: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    """The class's own method ``name`` (defined in its body), or None."""
    return next((n for n in klass.body.body if isinstance(n, cst.FunctionDef) and n.name.value == name), None)


def uses_method(klass: cst.ClassDef, name: str) -> bool:
    """Does the class define method ``name`` or call ``self.<name>(...)``?"""
    return method_named(klass, name) is not None or any(is_self_call(n, name) for n in walk_nodes(klass))


def syntax_of(stmt) -> str | None:
    """A libcst statement's Python syntax tree, dumped (its formatting and comments left out)."""
    try:
        return ast.dump(ast.parse(cst.Module(body=[stmt]).code))
    except (SyntaxError, ValueError):
        return None


def is_pass(stmt) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Pass)


def imports_layout(module: cst.Module) -> bool:
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for s in stmt.body:
                if isinstance(s, cst.ImportFrom) and not isinstance(s.names, cst.ImportStar) and any(
                        (a.asname.name.value if a.asname else dotted(a.name)) == "Layout" for a in s.names):
                    return True
    return False


def add_layout_import(module: cst.Module) -> cst.Module:
    """``from mindspore import Layout`` after the module's last top-level import."""
    return add_import(module, "from mindspore import Layout\n")


def layout_binding(module: cst.Module) -> str | None:
    """How the module binds the name ``layout``: "mf" (imported from MindFormers' device_matrix), "other"
    (anything else, anywhere in the file), or None (not at all)."""
    found = None
    for n in walk_nodes(module):
        if isinstance(n, cst.ImportFrom) and not isinstance(n.names, cst.ImportStar):
            for a in n.names:
                if (a.asname.name.value if a.asname else dotted(a.name)) == "layout":
                    mod = dotted(n.module) if n.module is not None else None
                    if mod != MF_LAYOUT_MODULE or a.asname is not None:
                        return "other"
                    found = "mf"
        elif isinstance(n, cst.Import):
            if any((a.asname.name.value if a.asname else dotted(a.name)) == "layout" for a in n.names):
                return "other"
        elif isinstance(n, (cst.FunctionDef, cst.ClassDef)) and n.name.value == "layout":
            return "other"
        elif isinstance(n, cst.Param) and n.name.value == "layout":
            return "other"
        elif isinstance(n, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For)) and "layout" in bound_names(n.target):
            return "other"
        elif isinstance(n, cst.WithItem) and n.asname is not None and "layout" in bound_names(n.asname.name):
            return "other"
    return found


def bound_names(target) -> set[str]:
    """The bare names an assignment target binds (``a``, ``a, (b, c)``; not ``self.a``)."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return set().union(*(bound_names(e.value) for e in target.elements))
    if isinstance(target, cst.StarredElement):
        return bound_names(target.value)
    return set()


def assigned_names(fn: cst.FunctionDef, before=None) -> set[str]:
    """Names ``fn``'s body assigns before statement ``before``."""
    return method_scope(fn, before) - {p.name.value for p in fn.params.params + fn.params.kwonly_params
                                          + fn.params.posonly_params}


def add_import(module: cst.Module, line: str) -> cst.Module:
    """``line`` after the module's last top-level import."""
    body = list(module.body)
    last = -1
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(s, (cst.Import, cst.ImportFrom))
                                                             for s in stmt.body):
            last = i
    body.insert(last + 1, cst.parse_statement(line))
    return module.with_changes(body=body)
