"""libcst edits of one source file: write, replace or remove ``shard()`` strategies, nothing else.

Every change goes through libcst, so formatting and comments outside the edited statements survive
byte for byte. The edits are idempotent: run on their own output they change nothing.
"""
from __future__ import annotations

import ast
import math

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from ..errors import StrategistError
from .locate import AXIS_VARS, Placement, Site

LAYOUT_VAR = "strategist_layout"
#: the docstring of a method a MindFormers class is called with but lacks (sharding_propagation)
DEFINED_DOC = "Set parallel strategy in sharding-propagation mode: nothing here (MindFormers calls this method)."


class SourceEditError(StrategistError):
    """A file cannot be edited as advised."""


# --------------------------------------------------------------------------------------
# small matchers


def _is_self_attr(node, name: str | None = None) -> bool:
    return (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"
            and (name is None or node.attr.value == name))


def _dotted(node) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


def _shard_call_of(stmt, target: str) -> cst.Call | None:
    """``self.<target>.shard(...)`` as a whole statement (``target`` may be dotted: ``fc2.matmul``)."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Expr):
        return None
    call = stmt.body[0].value
    if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "shard" \
            and _dotted(call.func.value) == f"self.{target}":
        return call
    return None


def _assign_to(stmt, attr: str) -> cst.Assign | None:
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    a = stmt.body[0]
    if isinstance(a, cst.Assign) and any(_is_self_attr(t.target, attr) for t in a.targets):
        return a
    return None


def _chained_shard(value) -> cst.Call | None:
    """``ops.X(...).shard(...)``: the outer shard call of an assignment's value."""
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "shard" \
            and isinstance(value.func.value, cst.Call):
        return value
    return None


def _args(expr: str) -> list[cst.Arg]:
    return [cst.Arg(cst.parse_expression(expr))]


# --------------------------------------------------------------------------------------
# rendering


def render(placement: Placement, mesh, scope: dict[str, int], mf_layout: bool = False) -> tuple[str, bool]:
    """The shard() argument text and whether it needs the Layout declaration.

    ``scope``: the class's parallel-config variables visible at the edit, with their known values (a
    MindFormers config's attributes as ``config.data_parallel_size``, used where no variable holds the axis).
    ``mf_layout``: a Layout is written with MindFormers' own ``layout`` (its device matrix built from the
    config), which needs no declaration."""
    st = placement.strategy
    if not st.tuple_ok:
        if st.layout is None:
            raise SourceEditError(f"{st.op}: neither the tuple nor the Layout form expresses the advised layout")
        if mf_layout:
            return st.layout, False
        return st.layout.replace("layout(", f"{LAYOUT_VAR}("), True
    size = dict(zip(mesh.names, mesh.shape))
    by_axis = {}
    # the method's own names first, then the class's (``self.dp``), then the config's attributes
    for var, value in sorted(scope.items(), key=lambda kv: ("." in kv[0], not kv[0].startswith("self."), kv[0])):
        axis = AXIS_VARS.get(var.rsplit(".", 1)[-1])
        if axis is not None and size.get(axis) == value and axis not in by_axis:
            by_axis[axis] = var
    rows = []
    for i, row in enumerate(st.strategy):
        cells = []
        for j, v in enumerate(row):
            axes = st.axes[i][j] if i < len(st.axes) and j < len(st.axes[i]) else ()
            if v != 1 and axes and all(a in by_axis for a in axes) and _prod(size[a] for a in axes) == v:
                cells.append(" * ".join(by_axis[a] for a in axes))
            else:
                cells.append(str(v))
        rows.append("(" + ", ".join(cells) + ("," if len(cells) == 1 else "") + ")")
    return "(" + ", ".join(rows) + ("," if len(rows) == 1 else "") + ")", False


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def layout_decl(mesh) -> str:
    return f"{LAYOUT_VAR} = Layout({tuple(mesh.shape)}, {tuple(mesh.names)})"


# --------------------------------------------------------------------------------------
# the transformation


class _Plan:
    """What to do in one class body."""

    def __init__(self):
        self.set_args: dict[int, str] = {}          # id of a shard Call node -> new argument text
        self.chain: dict[int, str] = {}             # id of an Assign node -> wrap its value in .shard(args)
        self.unchain: set[int] = set()              # id of an Assign node -> drop its chained .shard()
        self.insert_after: dict[int, list[str]] = {}  # id of a statement -> statements to insert after it
        self.insert_before: dict[int, list[str]] = {}
        self.remove: set[int] = set()               # ids of statements to delete
        self.append_method: dict[str, list[str]] = {}  # (class id, method) handled by caller
        self.needs_layout_import = False
        self.needs_mf_layout_import = False


class _Rewriter(cst.CSTTransformer):
    def __init__(self, plan: _Plan, new_methods: dict[int, list[str]]):
        self.p = plan
        self.new_methods = new_methods

    def leave_Call(self, original, updated):
        item = self.p.set_args.get(id(original))
        if item is None:
            return updated
        text, values, strategy = item
        first = next((a for a in updated.args if a.keyword is None or a.keyword.value == "in_strategy"), None)
        if first is not None and len(updated.args) == 1:
            old = cst.Module([]).code_for_node(first.value)
            if "".join(old.split()) == "".join(text.split()) or \
                    (strategy is not None and _evaluate(first.value, values) == strategy):
                return updated          # already the advised strategy (perhaps in the user's own words)
        return updated.with_changes(args=_args(text))

    def leave_Assign(self, original, updated):
        text = self.p.chain.get(id(original))
        if text is not None:
            return updated.with_changes(value=cst.Call(
                func=cst.Attribute(value=updated.value, attr=cst.Name("shard")), args=_args(text)))
        if id(original) in self.p.unchain:
            inner = _chained_shard(updated.value)
            if inner is not None:
                return updated.with_changes(value=inner.func.value)
        return updated

    def _fix_body(self, original_body, updated_body):
        out = []
        for o, u in zip(original_body, updated_body):
            for s in self.p.insert_before.get(id(o), []):
                out.append(cst.parse_statement(s))
            if id(o) not in self.p.remove:
                out.append(u)
            for s in self.p.insert_after.get(id(o), []):
                out.append(cst.parse_statement(s))
        return out

    def leave_IndentedBlock(self, original, updated):
        body = self._fix_body(original.body, updated.body)
        if not body:
            body = [cst.SimpleStatementLine([cst.Pass()])]
        return updated.with_changes(body=body)

    def leave_ClassDef(self, original, updated):
        extra = self.new_methods.get(id(original))
        if not extra:
            return updated
        body = list(updated.body.body)
        for m in extra:
            meth = cst.parse_statement(m)
            if body:        # a blank line between methods
                meth = meth.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
            body.append(meth)
        return updated.with_changes(body=updated.body.with_changes(body=body))


def _method_scope(fn: cst.FunctionDef, before=None) -> set[str]:
    names = {p.name.value for p in fn.params.params + fn.params.kwonly_params + fn.params.posonly_params}
    for stmt in fn.body.body:
        if stmt is before:
            break
        if isinstance(stmt, cst.SimpleStatementLine):
            for s in stmt.body:
                if isinstance(s, cst.Assign):
                    for t in s.targets:
                        names |= _bound(t.target)
    return names


def _infer_values(klass: cst.ClassDef, strategies: dict[str, tuple]) -> dict[str, int]:
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

    for node in _walk(klass):
        if isinstance(node, cst.Assign) and _chained_shard(node.value) is not None and node.value.args:
            for t in node.targets:
                if _is_self_attr(t.target) and strategies.get(t.target.attr.value) is not None:
                    walk(node.value.args[0].value, strategies[t.target.attr.value])
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "shard" \
                and node.args:
            base = node.func.value
            inst = base.attr.value if _is_self_attr(base) else None
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


def _config_read(value) -> str | None:
    """The one config attribute an expression holds: ``config.tensor_model_parallel_size``, also through
    ``self.config`` and MindFormers' ``1 if config.X is None else config.X``; None for anything else (a
    product such as MoELayer's ``self.dp = config.data_parallel_size * config.tensor_model_parallel_size``)."""
    if isinstance(value, cst.IfExp) and isinstance(value.orelse, cst.Attribute) \
            and isinstance(value.body, cst.Integer) and value.body.value == "1":
        value = value.orelse
    if isinstance(value, cst.Attribute) and value.attr.value in CONFIG_AXES and \
            _dotted(value.value) in ("config", "self.config"):
        return value.attr.value
    return None


def _config_values(fn: cst.FunctionDef, mesh) -> dict[str, int]:
    """MindFormers: ``dp = config.data_parallel_size ...`` at the top of a method: the variable holds what
    the config attribute it reads holds on the mesh (``data_parallel_size`` is dp times ep)."""
    out = {}
    for stmt in fn.body.body:
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
            a = stmt.body[0]
            read = _config_read(a.value)
            for t in a.targets:
                if isinstance(t.target, cst.Name) and read and t.target.value in AXIS_VARS:
                    out[t.target.value] = config_size(read, mesh)
    return out


def _self_config_values(klass: cst.ClassDef, mesh, method: str) -> dict[str, int]:
    """MindFormers: ``self.dp = config.data_parallel_size`` in the class's ``__init__`` before it calls
    ``method`` (MoELayer's ``self.tp``): ``self.tp`` holds what that attribute holds on the mesh; a name
    assigned twice, or from anything but one attribute, is not used (MoELayer's ``self.dp`` is dp * tp * cp)."""
    init = _method(klass, "__init__")
    if init is None or not any(_self_call(n, method) for n in _walk(init)):
        return {}
    out, seen = {}, set()
    for n in _walk(init):
        if _self_call(n, method):
            break
        if isinstance(n, cst.Assign):
            for t in n.targets:
                if isinstance(t.target, cst.Attribute) and _dotted(t.target.value) == "self":
                    name = f"self.{t.target.attr.value}"
                    read = _config_read(n.value)
                    if name in seen or not read or t.target.attr.value not in AXIS_VARS:
                        out.pop(name, None)
                    else:
                        out[name] = config_size(read, mesh)
                    seen.add(name)
    return out


def _config_attrs(mesh) -> dict[str, int]:
    """The config's attributes as scope entries (``config.tensor_model_parallel_size``: 4)."""
    return {f"config.{attr}": config_size(attr, mesh) for attr in CONFIG_AXES}


def _config_param(klass: cst.ClassDef, fn, name: str) -> bool:
    """Is ``config`` a MindFormers config wherever method ``name`` of ``klass`` (``fn``, None when it is still to
    be written) runs: a parameter without a default, or one every ``self.<name>(...)`` call of the class passes?"""
    if fn is not None:
        params = fn.params.params + fn.params.kwonly_params
        p = next((p for p in params if p.name.value == "config"), None)
        if p is None:
            return False
        if p.default is None:
            return True
    calls = [n for n in _walk(klass) if _self_call(n, name)]
    return bool(calls) and all(c.args for c in calls)


def _evaluate(node, values: dict[str, int]):
    """The value of a shard() tuple written with integers, names of known value and ``*``; None otherwise."""
    if isinstance(node, cst.Integer):
        return int(node.value)
    if isinstance(node, cst.Name):
        return values.get(node.value)
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
        return values.get(f"{node.value.value}.{node.attr.value}")
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        a, b = _evaluate(node.left, values), _evaluate(node.right, values)
        return None if a is None or b is None else a * b
    if isinstance(node, (cst.Tuple, cst.List)):
        out = tuple(_evaluate(e.value, values) for e in node.elements)
        return None if any(x is None for x in out) else out
    return None


def _walk(node):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(list(n.children)))


def _self_call(node, name: str) -> bool:
    """Is ``node`` a call ``self.<name>(...)``?"""
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == name \
        and isinstance(node.func.value, cst.Name) and node.func.value.value == "self"


def _calls_under(block, cond: str, name: str) -> list:
    """The ``self.<name>.shard(...)`` statements inside the ``if <cond>:`` statements of ``block``."""
    return [x for b in block if isinstance(b, cst.If) and cst.Module([]).code_for_node(b.test) == cond
            for x in b.body.body if _shard_call_of(x, name) is not None]


def _mode_gate(klass: cst.ClassDef, fn) -> tuple | None:
    """(statement, test): where ``klass.__init__`` calls method ``fn`` (not __init__ itself) only inside a
    top-level ``if`` on the parallel mode (``if _get_parallel_mode() in (ParallelMode.SEMI_AUTO_PARALLEL,):``
    ``self.shard(config)``); None when it is called otherwise, or not from __init__."""
    if fn is None or fn.name.value == "__init__":
        return None
    init = _method(klass, "__init__")
    if init is None:
        return None
    hits = [st for st in init.body.body if any(_self_call(n, fn.name.value) for n in _walk(st))]
    if len(hits) != 1 or not isinstance(hits[0], cst.If) or hits[0].orelse is not None:
        return None
    test = cst.Module([]).code_for_node(hits[0].test)
    return (hits[0], test) if "_parallel_mode" in test or "ParallelMode" in test else None


def _own_call(klass: cst.ClassDef, name: str):
    """The last statement of ``klass``'s own body that is a bare ``self.<name>(...)`` call, or None."""
    found = None
    for n in _walk(klass):
        if isinstance(n, cst.SimpleStatementLine) and len(n.body) == 1 and isinstance(n.body[0], cst.Expr) \
                and _self_call(n.body[0].value, name):
            found = n
    return found


def _method(klass: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    """The class's own method ``name`` (defined in its body), or None."""
    return next((n for n in klass.body.body if isinstance(n, cst.FunctionDef) and n.name.value == name), None)


def _uses_method(klass: cst.ClassDef, name: str) -> bool:
    """Does the class define method ``name`` or call ``self.<name>(...)``?"""
    return _method(klass, name) is not None or any(_self_call(n, name) for n in _walk(klass))


def edit_source(code: str, placements: list[Placement], prune: list[Site], mesh, *,
                target: str | None = None, recorded: dict[tuple[int, str], tuple] | None = None,
                path: str = "<source>", inherited: frozenset = frozenset(),
                define: frozenset = frozenset()) -> tuple[str, list[str]]:
    """``code`` with every placement written (and every pruned shard() removed); notes on what was done.

    ``target``: ``"sharding_propagation"`` or ``"shard"``: write into that method of the class (created if
    missing) instead of where the primitive is created. ``recorded``: (creation line, instance) -> the
    strategy the graph recorded for the model's own shard() of that primitive, to learn the values of
    the class's parallel-config variables. ``inherited``: names of this file's classes that inherit ``target``
    from a base without defining it (the lines then go after the class's own call of it). ``define``: names of
    this file's classes that call ``target`` without defining it (MindFormers' FlashAttention): each gets the
    method, configuring nothing where no placement writes into it."""
    ed = _Editor(code, mesh, target, recorded, path, inherited, define)
    for pl in placements:
        ed.place(pl)
    return ed.finish(code, prune)


class _Editor:
    """One file's edit (:func:`edit_source`): the parsed module with its positions and parents, the edits planned
    on it, and the notes."""

    def __init__(self, code: str, mesh, target, recorded, path, inherited, define):
        self.mesh, self.target, self.path, self.inherited, self.define = mesh, target, path, inherited, define
        try:
            self.module = module = cst.parse_module(code)
        except cst.ParserSyntaxError as err:
            raise SourceEditError(f"{path} does not parse: {err.message} (line {err.raw_line})") from None
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        self.pos = wrapper.resolve(PositionProvider)
        self.parents = wrapper.resolve(ParentNodeProvider)
        self.classes = [n for n in _walk(module) if isinstance(n, cst.ClassDef)]
        self.plan = _Plan()
        # MindFormers' own ``layout`` (device matrix (dp, cp, tp) from the run's config) writes a Layout that holds
        # at any mesh of those axes, as the experts' own shard() methods do; where this file's ``layout`` is another
        # name, or the mesh is not laid out as MindFormers lays it, the Layout is declared over the mesh
        self.binds = _layout_binding(module)
        self.mf_layout = bool(target) and self.binds != "other" and _mf_mesh(mesh)
        self.new_methods: dict[int, list[str]] = {}
        self.gated: dict[int, tuple] = {}        # mode-test statement -> (it, negated test, pre-lines, shard() lines)
        self.notes: list[str] = []
        self.recorded = recorded or {}

    def class_at(self, line) -> cst.ClassDef | None:
        best = None
        for c in self.classes:
            r = self.pos[c]
            if r.start.line <= line <= r.end.line and (best is None or self.pos[best].start.line < r.start.line):
                best = c
        return best

    def top_stmt(self, node, fn):
        """The statement of ``fn``'s body containing ``node``."""
        while node is not None and self.parents.get(node) is not fn.body:
            node = self.parents.get(node)
        return node

    def enclosing_fn(self, node):
        while node is not None and not isinstance(node, cst.FunctionDef):
            node = self.parents.get(node)
        return node

    def scope_values(self, klass, fn, before, tgt=None, name=None):
        """The parallel-config names visible at the edit, with their values; a MindFormers method (``tgt``)
        whose ``config`` is the run's config (``name``: the method, when ``fn`` is still to be written) also
        offers the config's own attributes."""
        rec = {inst: s for (ln, inst), s in self.recorded.items() if self.pos[klass].start.line <= ln <= self.pos[klass].end.line}
        values = _infer_values(klass, rec) if fn is not None else {}
        if tgt and fn is not None:
            values.update(_config_values(fn, self.mesh))
        visible = _method_scope(fn, before) if fn is not None else set()
        out = {k: v for k, v in values.items() if k in visible}
        if self.target and (fn is not None or name) and _config_param(klass, fn, name or fn.name.value) \
                and "config" not in (_assigned(fn, before) if fn is not None else set()):
            out.update(_config_attrs(self.mesh))
        if self.target and (fn is None or fn.name.value != "__init__"):
            out.update(_self_config_values(klass, self.mesh, name or fn.name.value))    # set by __init__ before any other method runs
        return out

    def rend(self, pl, sc):
        if self.mf_layout and not pl.strategy.tuple_ok:
            self.plan.needs_mf_layout_import = True
        return render(pl, self.mesh, sc, self.mf_layout)

    def add_insert(self, table, stmt, lines):
        cur = table.setdefault(id(stmt), [])
        for ln in lines:
            if ln not in cur:
                cur.append(ln)

    def update(self, stmts, name, text, sc, lay, pl):
        # the model's own shard() calls of ``name``: their arguments become the advice (kept if already so)
        for x in stmts:
            self.plan.set_args[id(_shard_call_of(x, name))] = (text, sc, None if lay else pl.strategy.strategy)

    def add_to_method(self, klass, head: str, lines):
        # the new method ``head`` of the class, one line per strategy (several instances merged into it)
        cur = self.new_methods.setdefault(id(klass), [])
        body = [f"    {ln}\n" for ln in lines]
        if not cur:
            cur.append(head + "".join(body))
            return
        first, *rest = cur[0].splitlines(keepends=True)
        rest += [b for b in body if b not in rest]
        cur[0] = first + "".join(rest)

    @staticmethod
    def has_stmt(body, text):
        # by syntax, not layout: a line the diff wrapped (wrap_long_lines) is the same statement
        want = ast.dump(ast.parse(text))
        return any(_syntax(s) == want for s in body)

    def place(self, pl: Placement) -> None:
        """Write one placement: from its owner (``pl.via``), into the target method, after a mode test, at the
        class's own shard() calls, or where the primitive is created."""
        klass = self.class_at(pl.line)
        if klass is None:
            raise SourceEditError(f"{self.path}:{pl.line}: no class around the line that creates "
                                  f"self.{pl.via or pl.instance}")
        kname = klass.name.value
        if pl.via:
            return self._place_via(pl, klass, kname)
        # class-level: where the class configures this primitive today. A MindFormers class that neither
        # defines nor calls the target method (CrossEntropyLoss configures in __init__ in every mode): a new
        # method would never run, so the strategy goes where the class configures the primitive
        tgt = self.target if self.target and _uses_method(klass, self.target) else None
        calls = [n for n in _walk(klass) if isinstance(n, cst.SimpleStatementLine)
                 and _shard_call_of(n, pl.instance) is not None]
        if tgt:   # MindFormers: only the target method's own calls count
            calls = [n for n in calls if getattr(self.enclosing_fn(n), "name", None) is not None
                     and self.enclosing_fn(n).name.value == tgt]
        assign = next((n for n in _walk(klass) if isinstance(n, cst.SimpleStatementLine)
                       and self.pos[n].start.line == pl.line and _assign_to(n, pl.instance)), None)
        if tgt and not calls:
            return self._place_in_target(pl, klass, kname, tgt)
        gate = _mode_gate(klass, self.enclosing_fn(calls[-1])) if (self.target and not tgt and calls) else None
        if gate is not None:
            return self._place_gated(pl, klass, kname, gate)
        if calls:
            return self._place_at_calls(pl, klass, kname, calls, tgt)
        if assign is None:
            raise SourceEditError(f"{self.path}:{pl.line}: expected self.{pl.instance} = ... in class {kname}")
        return self._place_at_assign(pl, klass, kname, assign, tgt)

    def _place_via(self, pl, klass, kname) -> None:
        """One instance configured from its owner, right after the owner creates it."""
        # configure one instance from its owner, right after the owner creates it
        first = pl.via.split(".")[0]
        stmt = next((n for n in _walk(klass) if isinstance(n, cst.SimpleStatementLine)
                     and self.pos[n].start.line == pl.line and _assign_to(n, first)), None)
        if stmt is None:
            raise SourceEditError(f"{self.path}:{pl.line}: expected self.{first} = ... in class {kname}")
        fn = self.enclosing_fn(stmt)
        sc = self.scope_values(klass, fn, stmt, self.target)
        text, lay = self.rend(pl, sc)
        target_name = f"{pl.via}.{pl.instance}"
        body = self.parents[stmt].body
        if pl.guard:
            # the owner's line also runs where the chain is not there: under the guard (an earlier
            # run's guarded block is updated, not repeated)
            existing = _calls_under(body, pl.guard, target_name)
        else:
            existing = [s for s in body if _shard_call_of(s, target_name) is not None]
        if existing:
            self.update(existing, target_name, text, sc, lay, pl)
        else:
            call = f"self.{target_name}.shard({text})"
            lines = ([layout_decl(self.mesh)] if lay and not self.has_stmt(body, layout_decl(self.mesh)) else []) + \
                    [f"if {pl.guard}:\n    {call}\n" if pl.guard else call]
            self.add_insert(self.plan.insert_after, stmt, lines)
        self.plan.needs_layout_import |= lay
        self.notes.append(f"{kname}: self.{target_name}.shard({text})")

    def _place_in_target(self, pl, klass, kname, tgt) -> None:
        """MindFormers: into the target method, where it does not configure the primitive yet (created where missing)."""
        fn = _method(klass, tgt)
        inherits = fn is None and kname in self.inherited
        text, lay = self.rend(pl, {} if inherits else self.scope_values(klass, fn, None, tgt, tgt))
        lines = ([layout_decl(self.mesh)] if lay else []) + [f"self.{pl.instance}.shard({text})"]
        call_site = _own_call(klass, tgt) if fn is None and kname in self.inherited else None
        if call_site is not None:
            # the method comes from a base (MultiLatentAttention's): a new one would override its strategies,
            # and the base's __init__ calls it before this class creates its primitives; the lines go right
            # after this class's own call of it instead (an earlier run's lines there are updated)
            block = self.parents[call_site].body
            after = list(block[list(block).index(call_site) + 1:])
            have = [x for x in after if _shard_call_of(x, pl.instance) is not None]
            if have:
                self.update(have, pl.instance, text, {}, lay, pl)
                lines = [ln for ln in lines if ln == layout_decl(self.mesh) and not self.has_stmt(block, ln)]
            else:
                lines = [ln for ln in lines if not (ln == layout_decl(self.mesh) and self.has_stmt(block, ln))]
            if lines:
                self.add_insert(self.plan.insert_after, call_site, lines)
        elif fn is None and kname in self.inherited:
            # inherited and only a base calls it: an override that keeps the base's strategies
            self.add_to_method(klass, f"def {tgt}(self, *args, **kwargs):\n    super().{tgt}(*args, **kwargs)\n",
                          lines)
        elif fn is None:
            # MindFormers calls it with a config, or with none (MLASelfAttention)
            self.add_to_method(klass, f"def {tgt}(self, config=None):\n", lines)
        else:
            last = fn.body.body[-1]
            lines = [ln for ln in lines if not self.has_stmt(fn.body.body, ln)]
            if lines:
                self.add_insert(self.plan.insert_after, last, lines)
            if _is_pass(last) and lines:       # a placeholder ``pass`` goes
                self.plan.remove.add(id(last))
        self.plan.needs_layout_import |= lay
        self.notes.append(f"{kname}.{tgt}: self.{pl.instance}.shard({text})")

    def _place_gated(self, pl, klass, kname, gate) -> None:
        """After the mode test under which the class configures the primitive, under its negation."""
        # the class configures this primitive in a method its __init__ calls under a mode test alone
        # (TopKRouter: shard() in semi_auto_parallel): there the line would never run in the target's mode.
        # It goes after that test, under its negation (an earlier run's block is updated, not repeated)
        stmt, test = gate
        init = self.enclosing_fn(stmt)
        sc = self.scope_values(klass, init, stmt, None)
        text, lay = self.rend(pl, sc)
        block = self.parents[stmt].body
        cond = f"not ({test})"
        have = _calls_under(block, cond, pl.instance)
        call = f"self.{pl.instance}.shard({text})"
        if have:
            self.update(have, pl.instance, text, sc, lay, pl)
        else:
            pre = [layout_decl(self.mesh)] if lay and not self.has_stmt(block, layout_decl(self.mesh)) else []
            self.gated.setdefault(id(stmt), (stmt, cond, pre, []))[3].append(call)
        self.plan.needs_layout_import |= lay
        self.notes.append(f"{kname}: self.{pl.instance}.shard({text}) (under `if {cond}:` in __init__)")

    def _place_at_calls(self, pl, klass, kname, calls, tgt) -> None:
        """Where the class configures the primitive today: its shard() calls updated, or a call after conditional ones."""
        fn = self.enclosing_fn(calls[-1])
        direct = [c for c in calls if self.parents.get(c) is (fn.body if fn else None)]
        anchor_stmt = direct[0] if direct else self.top_stmt(calls[-1], fn)
        sc = self.scope_values(klass, fn, anchor_stmt, tgt)
        text, lay = self.rend(pl, sc)
        body = fn.body.body
        if direct:
            self.update(direct, pl.instance, text, sc, lay, pl)
            if lay and not self.has_stmt(body, layout_decl(self.mesh)):
                self.add_insert(self.plan.insert_before, direct[0], [layout_decl(self.mesh)])
            where = "its shard() call"
        else:
            # only conditional shard() calls: the advised one runs after them, whatever branch ran
            lines = ([layout_decl(self.mesh)] if lay and not self.has_stmt(body, layout_decl(self.mesh)) else []) + \
                    [f"self.{pl.instance}.shard({text})"]
            lines = [ln for ln in lines if not self.has_stmt(body, ln)]
            if lines:
                self.add_insert(self.plan.insert_after, anchor_stmt, lines)
            where = "after its conditional shard() calls"
        self.plan.needs_layout_import |= lay
        self.notes.append(f"{kname}: self.{pl.instance}.shard({text}) ({where})")

    def _place_at_assign(self, pl, klass, kname, assign, tgt) -> None:
        """Where the primitive is created: a chained shard(), or a call after the assignment."""
        fn = self.enclosing_fn(assign)
        sc = self.scope_values(klass, fn, assign, tgt)
        text, lay = self.rend(pl, sc)
        a = assign.body[0]
        chained = _chained_shard(a.value)
        if lay:
            if chained is not None:
                self.plan.unchain.add(id(a))
            body = self.parents[assign].body
            lines = [ln for ln in (layout_decl(self.mesh), f"self.{pl.instance}.shard({text})") if not self.has_stmt(body, ln)]
            if lines:
                self.add_insert(self.plan.insert_after, assign, lines)
        elif chained is not None:
            self.plan.set_args[id(chained)] = (text, sc, None if lay else pl.strategy.strategy)
        elif isinstance(a.value, cst.Call):
            self.plan.chain[id(a)] = text
        else:
            self.add_insert(self.plan.insert_after, assign, [f"self.{pl.instance}.shard({text})"])
        self.plan.needs_layout_import |= lay
        self.notes.append(f"{kname}: self.{pl.instance} = ....shard({text})")

    def finish(self, code: str, prune: list[Site]) -> tuple[str, list[str]]:
        """The methods to define, the gated blocks, the pruned shard() calls; the edited code and the notes."""
        for klass in self.classes:
            if self.target and klass.name.value in self.define and id(klass) not in self.new_methods and _method(klass, self.target) is None:
                self.new_methods[id(klass)] = [f'def {self.target}(self, config=None):\n    """{DEFINED_DOC}"""\n']
                self.notes.append(f"{klass.name.value}: defined {self.target}(), which MindFormers calls and the class lacked")
        for stmt, cond, pre, calls_ in self.gated.values():      # one negated block per mode test
            self.add_insert(self.plan.insert_after, stmt, pre + [f"if {cond}:\n" + "".join(f"    {c}\n" for c in calls_)])
        for site in prune:
            klass = self.class_at(site.line)
            if klass is None:
                continue
            assign = next((n for n in _walk(klass) if isinstance(n, cst.SimpleStatementLine)
                           and self.pos[n].start.line == site.line and _assign_to(n, site.instance)), None)
            if assign is not None and _chained_shard(assign.body[0].value) is not None:
                self.plan.unchain.add(id(assign.body[0]))
            for n in _walk(klass):
                if isinstance(n, cst.SimpleStatementLine) and _shard_call_of(n, site.instance) is not None:
                    self.plan.remove.add(id(n))
            self.notes.append(f"{klass.name.value}: removed the redundant shard() of self.{site.instance}")
        new = self.module.visit(_Rewriter(self.plan, self.new_methods))
        if self.plan.needs_layout_import and not _imports_layout(new):
            new = _add_layout_import(new)
        if self.plan.needs_mf_layout_import and self.binds is None:
            new = _add_import(new, f"from {MF_LAYOUT_MODULE} import layout\n")
        return wrap_long_lines(new.code, code), self.notes


#: the longest line the diff writes: MindFormers' own lint limit (its .pylintrc max-line-length)
LINE_LIMIT = 120


def wrap_long_lines(code: str, original: str, limit: int = LINE_LIMIT) -> str:
    r"""Each ``shard(...)`` line the edit wrote (one not in ``original``) longer than ``limit``, broken after
    ``shard(`` with a hanging indent, and if that is not enough, one argument a line; a line no break brings
    under the limit is left whole.

    >>> print(wrap_long_lines("    self.mm.shard(((config.data_parallel_size * config.tensor_model_parallel_size,"
    ...                       " 1), (1, 1)))\n", "", limit=90))
        self.mm.shard(
            ((config.data_parallel_size * config.tensor_model_parallel_size, 1), (1, 1)))
    <BLANKLINE>
    """
    old = set(original.splitlines())
    out = []
    for line in code.splitlines(keepends=True):
        body = line.rstrip("\n")
        if len(body) > limit and body not in old:
            body = _wrapped(body, limit) or body
            line = body + line[len(line.rstrip("\n")):]
        out.append(line)
    return "".join(out)


def _wrapped(line: str, limit: int) -> str | None:
    """``line`` (one ``x.shard(ARGS)`` statement) broken to fit ``limit``, or None."""
    indent = line[:len(line) - len(line.lstrip())]
    head, sep, rest = line.partition(".shard(")
    if not sep or not rest.endswith(")") or not _balanced(rest[:-1]):
        return None
    args, pad = rest[:-1], indent + "    "
    hanging = f"{head}.shard(\n{pad}{args})"
    if all(len(x) <= limit for x in hanging.splitlines()):
        return hanging
    parts = _top_level_split(args)
    lines = [f"{head}.shard("] + [f"{pad}{p}," for p in parts[:-1]] + [f"{pad}{parts[-1]})"]
    return "\n".join(lines) if len(parts) > 1 and all(len(x) <= limit for x in lines) else None


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth < 0:
            return False
    return depth == 0


def _top_level_split(args: str) -> list[str]:
    """``a, b=(1, 2)`` -> [``a``, ``b=(1, 2)``]: the commas outside any bracket (no strings hold one here)."""
    parts, depth, cur = [], 0, ""
    for ch in args:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return parts + [cur.strip()] if cur.strip() else parts


def _syntax(stmt) -> str | None:
    """A libcst statement's Python syntax tree, dumped (its formatting and comments left out)."""
    try:
        return ast.dump(ast.parse(cst.Module(body=[stmt]).code))
    except (SyntaxError, ValueError):
        return None


def _is_pass(stmt) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Pass)


def _imports_layout(module: cst.Module) -> bool:
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for s in stmt.body:
                if isinstance(s, cst.ImportFrom) and not isinstance(s.names, cst.ImportStar) and any(
                        (a.asname.name.value if a.asname else _dotted(a.name)) == "Layout" for a in s.names):
                    return True
    return False


def _add_layout_import(module: cst.Module) -> cst.Module:
    """``from mindspore import Layout`` after the module's last top-level import."""
    return _add_import(module, "from mindspore import Layout\n")


MF_LAYOUT_MODULE = "mindformers.parallel_core.training_graph.device_matrix"


def _mf_mesh(mesh) -> bool:
    """Is the mesh laid out as MindFormers' ``layout`` lays its devices: axes in its order (dp, cp, tp), no ep?"""
    order = ("dp", "cp", "tp")
    return all(n in order for n in mesh.names) and list(mesh.names) == sorted(mesh.names, key=order.index)


def _layout_binding(module: cst.Module) -> str | None:
    """How the module binds the name ``layout``: "mf" (imported from MindFormers' device_matrix), "other"
    (anything else, anywhere in the file), or None (not at all)."""
    found = None
    for n in _walk(module):
        if isinstance(n, cst.ImportFrom) and not isinstance(n.names, cst.ImportStar):
            for a in n.names:
                if (a.asname.name.value if a.asname else _dotted(a.name)) == "layout":
                    mod = _dotted(n.module) if n.module is not None else None
                    if mod != MF_LAYOUT_MODULE or a.asname is not None:
                        return "other"
                    found = "mf"
        elif isinstance(n, cst.Import):
            if any((a.asname.name.value if a.asname else _dotted(a.name)) == "layout" for a in n.names):
                return "other"
        elif isinstance(n, (cst.FunctionDef, cst.ClassDef)) and n.name.value == "layout":
            return "other"
        elif isinstance(n, cst.Param) and n.name.value == "layout":
            return "other"
        elif isinstance(n, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For)) and "layout" in _bound(n.target):
            return "other"
        elif isinstance(n, cst.WithItem) and n.asname is not None and "layout" in _bound(n.asname.name):
            return "other"
    return found


def _bound(target) -> set[str]:
    """The bare names an assignment target binds (``a``, ``a, (b, c)``; not ``self.a``)."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return set().union(*(_bound(e.value) for e in target.elements))
    if isinstance(target, cst.StarredElement):
        return _bound(target.value)
    return set()


def _assigned(fn: cst.FunctionDef, before=None) -> set[str]:
    """Names ``fn``'s body assigns before statement ``before``."""
    return _method_scope(fn, before) - {p.name.value for p in fn.params.params + fn.params.kwonly_params
                                          + fn.params.posonly_params}


def _add_import(module: cst.Module, line: str) -> cst.Module:
    """``line`` after the module's last top-level import."""
    body = list(module.body)
    last = -1
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(s, (cst.Import, cst.ImportFrom))
                                                             for s in stmt.body):
            last = i
    body.insert(last + 1, cst.parse_statement(line))
    return module.with_changes(body=body)
