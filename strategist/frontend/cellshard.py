"""``Cell.shard`` and ``mindspore.shard``: the anchors MindSpore inserts for them.

In a parallel compile MindSpore puts an ``AShardIdentity`` operator on every tensor entering a
Cell configured with ``cell.shard(in_strategy=...)`` (or ``mindspore.shard(cell, in_strategy=...)``),
configured with that input's row of ``in_strategy``; sharding propagation then starts from them like
from any ``shard()`` (measured on MindSpore 2.9.0: ``inner.shard(in_strategy=((2, 4),))`` reports
``AShardIdentity ((2, 4),)`` configured, and the MatMul inside follows with ``((2, 4), (4, 1))``).

A stand-alone compile leaves no trace of either (``Cell.shard`` even returns early on one device),
so :func:`recording` notes the calls while the model is built and :func:`insert_identities` adds the
identity operators to the extracted graph. ``Cell.shard`` is located by its Cell's path: an identity on each
tensor its operators read from outside. ``mindspore.shard(fn)`` returns a Cell of strategist's
(:func:`_sharded_call_cell`) that passes each argument through a marked Identity and calls ``fn`` -- a function,
``mint.matmul`` itself, or a Cell, whose operators keep their own paths: the markers become the identities,
wherever MindSpore scopes ``fn``'s operators (a mint call inside a Cell is scoped at the root). ``parameter_plan``
puts one on each Parameter it names, read wherever it is read. ``in_strategy`` and ``parameter_plan`` rows may be
tuples or ``Layout``s.
"""
from __future__ import annotations

import contextlib
import dataclasses
import weakref

from ..engine.rules.sharding import layout_strategy
from ..errors import ModelLoadError
from ..vocab.graph import Input, Op, OpGraph
from .proto import shard_layouts


@dataclasses.dataclass
class ShardCalls:
    cells: "weakref.WeakKeyDictionary" = dataclasses.field(default_factory=weakref.WeakKeyDictionary)
    #: mindspore.shard calls: call id -> (in_strategy, out_strategy, parameter_plan, fn)
    calls: dict = dataclasses.field(default_factory=dict)


#: the most arguments a mindspore.shard call is marked for (one marker primitive each)
_MAX_ARGS = 8
_MARK = "strategist_shard_arg"
_CALL = "strategist_shard_call"


def _sharded_call_cell():
    from mindspore import nn, ops

    class _ShardedCall(nn.Cell):
        """What ``mindspore.shard(fn, in_strategy)`` returns while strategist builds a model: a Cell calling ``fn``
        (a function or a Cell, kept off the Cell tree so its operators keep their own paths) on its arguments each
        passed through an Identity marked with the call and the argument's index. MindSpore's parallel compile puts
        a configured AShardIdentity on each argument of the call; the markers become those
        (:func:`insert_identities`)."""

        def __init__(self, fn, call: int, mark_out: bool = False):
            super().__init__(auto_prefix=False)
            object.__setattr__(self, "fn", fn)
            for k in range(_MAX_ARGS):
                setattr(self, f"m{k}", ops.Identity().add_prim_attr(_MARK, k).add_prim_attr(_CALL, call))
            self.mark_out = mark_out
            self.mo = ops.Identity().add_prim_attr(_MARK, -1).add_prim_attr(_CALL, call)

        def construct(self, *args):
            if self.mark_out:
                return self.mo(self.call(*args))
            return self.call(*args)

        def call(self, *args):
            n = len(args)
            if n == 1:
                return self.fn(self.m0(args[0]))
            if n == 2:
                return self.fn(self.m0(args[0]), self.m1(args[1]))
            if n == 3:
                return self.fn(self.m0(args[0]), self.m1(args[1]), self.m2(args[2]))
            if n == 4:
                return self.fn(self.m0(args[0]), self.m1(args[1]), self.m2(args[2]), self.m3(args[3]))
            if n == 5:
                return self.fn(self.m0(args[0]), self.m1(args[1]), self.m2(args[2]), self.m3(args[3]),
                               self.m4(args[4]))
            if n == 6:
                return self.fn(self.m0(args[0]), self.m1(args[1]), self.m2(args[2]), self.m3(args[3]),
                               self.m4(args[4]), self.m5(args[5]))
            if n == 7:
                return self.fn(self.m0(args[0]), self.m1(args[1]), self.m2(args[2]), self.m3(args[3]),
                               self.m4(args[4]), self.m5(args[5]), self.m6(args[6]))
            if n == 8:
                return self.fn(self.m0(args[0]), self.m1(args[1]), self.m2(args[2]), self.m3(args[3]),
                               self.m4(args[4]), self.m5(args[5]), self.m6(args[6]), self.m7(args[7]))
            return self.fn(*args)

    return _ShardedCall


@contextlib.contextmanager
def recording():
    """Patch ``Cell.shard`` and ``mindspore.shard`` while a model is built; yields the calls seen."""
    import mindspore as ms
    from mindspore import nn
    import mindspore.parallel as par
    import mindspore.parallel.shard as shard_mod
    calls = ShardCalls()
    orig_cell_shard = nn.Cell.shard
    saved = [(m, "shard", getattr(m, "shard")) for m in (ms, par, shard_mod) if hasattr(m, "shard")]

    def cell_shard(self, in_strategy, out_strategy=None, parameter_plan=None):
        calls.cells[self] = (in_strategy, out_strategy, _resolve_plan(self, parameter_plan))

    def fn_shard(fn, in_strategy, out_strategy=None, parameter_plan=None):
        call = len(calls.calls)
        calls.calls[call] = (in_strategy, out_strategy, _resolve_plan(fn, parameter_plan), fn)
        return _sharded_call_cell()(fn, call, mark_out=bool(out_strategy) and len(out_strategy) == 1)

    nn.Cell.shard = cell_shard
    for mod, attr, _ in saved:
        setattr(mod, attr, fn_shard)
    try:
        yield calls
    finally:
        nn.Cell.shard = orig_cell_shard
        for mod, attr, value in saved:
            setattr(mod, attr, value)


def _resolve_plan(fn, plan) -> dict:
    """``parameter_plan``'s names resolved to the Parameters as MindSpore resolves them when ``shard`` is called
    (``Shard._search_parameter_by_name``: ``self.`` dropped, matched against ``fn``'s trainable parameters' names
    then): {name: (Parameter or None, row)}. The Parameter's name in the graph may differ by then (a Cell also
    assigned under another attribute is prefixed by the last)."""
    out = {}
    params = list(fn.trainable_params()) if hasattr(fn, "trainable_params") else []
    for name, row in (plan or {}).items():
        short = name[len("self."):] if isinstance(name, str) and name.startswith("self.") else name
        out[name] = (next((p for p in params if p.name == short), None), row)
    return out


def _row(r):
    """One ``in_strategy`` (or ``parameter_plan``) entry: a tuple strategy row, or a ``mindspore.Layout``'s
    :class:`~strategist.vocab.graph.ShardLayout`."""
    if hasattr(r, "to_dict"):
        return shard_layouts([r.to_dict()])[0]
    if isinstance(r, (tuple, list)) and all(isinstance(x, int) and not isinstance(x, bool) for x in r):
        return tuple(r)
    raise ModelLoadError(f"a shard() strategy row {r!r} is neither a tuple of ints nor a mindspore Layout "
                         f"(MindSpore refuses it too): fix the model's shard call")


def _rows_text(rows) -> str:
    return "(" + ", ".join(str(r) if isinstance(r, tuple) else f"layout({r})" for r in rows) + ")"


def insert_identities(graph: OpGraph, root, calls: ShardCalls) -> tuple[OpGraph, list[str]]:
    """The graph with MindSpore's ``AShardIdentity`` anchors added, and notes for what was not located."""
    notes: list[str] = []
    ops = list(graph)
    plans: list[tuple[str, dict]] = []          # (where, parameter_plan)
    ops = _marked_calls(ops, calls, notes, plans)
    paths = {}
    for path, cell in root.cells_and_names():
        if cell in calls.cells:
            paths[path] = calls.cells[cell]
    for path, (in_strategy, out_strategy, parameter_plan) in sorted(paths.items()):
        plans.append((f"{path}.shard" if path else "shard", parameter_plan))
        ops = _cell_identities(graph, ops, path, in_strategy, notes, type(root).__name__)
        ops = _cell_output(graph, ops, path, _out_strategy(out_strategy))
    for where, plan in plans:
        ops = _parameter_identities(ops, where, plan, notes)
    if ops == list(graph):
        return graph, notes
    ops = [dataclasses.replace(op, topo_index=i) for i, op in enumerate(ops)]
    return graph.derived(ops), notes


def _ident(name, path, cls, x: Input, row, source) -> Op:
    return Op(name, "AShardIdentity", path, cls, "AShardIdentity", "", (x,), (x.spec,), {},
              in_strategy=(row,) if isinstance(row, tuple) else None,
              in_layout=None if isinstance(row, tuple) else (row,), source=source,
              held=False)      # no Cell attribute to call shard() on: the shard call itself configures it


def _marked_calls(ops: list, calls: ShardCalls, notes: list, plans: list) -> list:
    """``mindspore.shard`` calls: each marked argument becomes a configured AShardIdentity named after the call's
    path (``mul_shard.AShardIdentity``, numbered from the last argument as MindSpore numbers them)."""
    marks: dict[int, list] = {}
    for op in ops:
        if op.type == "Identity" and _CALL in op.attrs:
            marks.setdefault(int(op.attrs[_CALL]), []).append(op)
    renamed: dict[str, Input] = {}
    dropped: set[str] = set()
    replaced: dict[str, Op] = {}
    out_of: dict[str, tuple] = {}
    for call, (in_strategy, _out, parameter_plan, fn) in sorted(calls.calls.items()):
        what = getattr(fn, "__qualname__", None) or type(fn).__name__
        if parameter_plan:
            plans.append((f"mindspore.shard({what})", parameter_plan))
        mine = marks.get(call, [])
        if not mine:
            notes.append(f"mindspore.shard on {what} is never called in the graph: its strategy is not used")
            continue
        outs = [op for op in mine if int(op.attrs[_MARK]) < 0]
        mine = [op for op in mine if int(op.attrs[_MARK]) >= 0]
        for op in outs:             # the output marker: its producer takes the call's out_strategy
            dropped.add(op.name)
            renamed[op.name] = op.inputs[0]
            if op.inputs[0].kind == "op":
                out_of[op.inputs[0].ref] = _out_strategy(_out)
        rows = tuple(_row(r) for r in (in_strategy or ()))
        args = sorted({int(op.attrs[_MARK]) for op in mine})
        if len(args) != len(rows):
            notes.append(f"mindspore.shard({what}, in_strategy={_rows_text(rows)}): called with {len(args)} tensor "
                         f"argument(s); the strategy is not used")
            for op in mine:
                dropped.add(op.name)
                renamed[op.name] = op.inputs[0]
            continue
        for op in mine:
            k = int(op.attrs[_MARK])
            r = len(rows) - 1 - k
            path = op.cell_path
            name = (f"{path}." if path else "") + "AShardIdentity" + (f"#{r}" if r else "")
            n, j = name, 1
            while n in replaced or any(o.name == n for o in ops if o is not op):
                n, j = f"{name}.{j}", j + 1          # a call made more than once
            replaced[op.name] = _ident(n, path, op.cell_class, op.inputs[0], rows[k], op.source)
            renamed[op.name] = Input("op", n, 0, op.inputs[0].spec)
    if not renamed:
        return ops
    out = []
    for op in ops:
        if op.name in dropped:
            continue
        op = replaced.get(op.name, op)
        op = _with_out_strategy(op, out_of.get(op.name))
        out.append(dataclasses.replace(op, inputs=tuple(_through(x, renamed, dropped) for x in op.inputs)))
    return out


def _out_strategy(out_strategy) -> tuple | None:
    """A shard's ``out_strategy`` as strategy rows (a Layout's splits, an interleaved axis left out)."""
    rows = tuple(r if isinstance(r, tuple) else layout_strategy((r,))[0] for r in map(_row, out_strategy or ()))
    return rows or None


def _with_out_strategy(op: Op, rows) -> Op:
    """``op`` producing a sharded Cell's (or call's) output, given the shard's out_strategy: MindSpore's OperatorInfo
    keeps it (UT test_cell_shard_with_out_strategy_be_set_and_propagate_reduce_scatter: the Cell's last MatMul
    ((8, 1),)), and its successors take it (:meth:`strategist.engine.search.bfs.Propagation.out_strategy`). Only
    where no strategy of its own configures it."""
    if rows is None or op.configured or op.out_strategy is not None or len(rows) != len(op.outputs):
        return op
    return dataclasses.replace(op, out_strategy=rows)


def _through(x: Input, renamed: dict, dropped: set) -> Input:
    while x.kind == "op" and x.ref in renamed:
        y = renamed[x.ref]
        if x.ref not in dropped:
            return dataclasses.replace(x, ref=y.ref)
        x = dataclasses.replace(y, edge=x.edge, packed=x.packed)
    return x


def _cell_identities(graph: OpGraph, ops: list, path: str, in_strategy, notes: list, root_class: str) -> list:
    """``Cell.shard(in_strategy)``: an AShardIdentity on each tensor entering the Cell's operators (by their cell
    path), inserted together where the Cell's operators begin."""
    inside = (lambda p: lambda op: op.cell_path == p or op.cell_path.startswith(p + ".") or p == "")(path)
    by_name = {op.name: op for op in ops}
    # the tensors entering the Cell, in the order its operators first read them (its arguments' order
    # for the usual single-input Cell)
    entering: list[tuple] = []
    for op in ops:
        if not inside(op):
            continue
        for x in op.inputs:
            key = (x.kind, x.ref, x.index)
            outside = x.kind == "input" or (x.kind == "op" and x.ref in by_name and not inside(by_name[x.ref]))
            if outside and key not in entering:
                entering.append(key)
    rows = tuple(_row(r) for r in (in_strategy or ()))
    if len(rows) != len(entering):
        notes.append(f"{path}.shard(in_strategy={_rows_text(rows)}): the Cell takes {len(entering)} tensor "
                     f"input(s); the strategy is not used")
        return ops
    new_ops, renamed = [], {}
    for k, (key, row) in enumerate(zip(entering, rows)):
        first = next(i for i, op in enumerate(ops) if inside(op) and any(
            (x.kind, x.ref, x.index) == key for x in op.inputs))
        x = next(x for x in ops[first].inputs if (x.kind, x.ref, x.index) == key)
        # MindSpore creates the identities last argument first (AShardIdentity-op0 is the last one)
        r = len(entering) - 1 - k
        name = (f"{path}." if path else "") + "AShardIdentity" + (f"#{r}" if r else "")
        cls = ops[first].cell_class if ops[first].cell_path == path else root_class
        new_ops.append((first, _ident(name, path, cls, Input(x.kind, x.ref, x.index, x.spec), row,
                                      ops[first].source)))
        renamed[key] = Input("op", name, 0, x.spec)
    # MindSpore inserts them together where the call begins, in argument order, numbering them from the
    # last argument (AShardIdentity-op0 is the last argument's)
    start = min(first for first, _ in new_ops)
    for _, ident in reversed(new_ops):
        ops.insert(start, ident)
    return [dataclasses.replace(op, inputs=tuple(renamed.get((x.kind, x.ref, x.index), x) if op.type != "AShardIdentity"
                                                 else x for x in op.inputs)) if inside(op) else op for op in ops]


def _cell_output(graph: OpGraph, ops: list, path: str, rows) -> list:
    """``Cell.shard(out_strategy=...)``: the one operator of the Cell whose output leaves it takes the out_strategy
    (:func:`_with_out_strategy`); none where the Cell's output comes from more than one."""
    if rows is None or not path:
        return ops
    inside = lambda op: op.cell_path == path or op.cell_path.startswith(path + ".")
    names = {op.name for op in ops if inside(op)}
    leaving = {x.ref for op in ops if not inside(op) for x in op.inputs if x.kind == "op" and x.ref in names}
    leaving |= {x.ref for x in graph.outputs if x.kind == "op" and x.ref in names}
    if len(leaving) != 1:
        return ops
    (prod,) = leaving
    return [_with_out_strategy(op, rows) if op.name == prod else op for op in ops]


def _parameter_identities(ops: list, where: str, plan, notes: list) -> list:
    """``parameter_plan``: MindSpore sets the named Parameters' layouts (``Shard._set_param_layout_into_parameter``)
    and its parallel compile puts a configured AShardIdentity on each, read by every operator that reads the
    Parameter (measured, 2.9.0: UT test_cell_shard_with_out_layout_be_set_and_propagate's w1 takes
    ``AShardIdentity ((1, 4),)``). Located by the Parameter's name, wherever its readers' scopes are."""
    for pname, (param, lay) in (plan or {}).items():
        if param is None:
            notes.append(f"{where}: parameter_plan names {pname!r}, no trainable Parameter of it (MindSpore "
                         f"ignores it too); not used")
            continue
        ref = param.name
        key = ("param", ref, 0)
        first = next((i for i, op in enumerate(ops) if any((x.kind, x.ref, x.index) == key for x in op.inputs)), None)
        if first is None:
            notes.append(f"{where}: parameter_plan names {pname!r}, which no operator reads; not used")
            continue
        x = next(x for x in ops[first].inputs if (x.kind, x.ref, x.index) == key)
        name = f"{ref}.AShardIdentity"
        ident = _ident(name, ops[first].cell_path, ops[first].cell_class, Input("param", ref, 0, x.spec), _row(lay),
                       ops[first].source)
        to = Input("op", name, 0, x.spec)
        ops = ops[:first] + [ident] + [dataclasses.replace(op, inputs=tuple(
            dataclasses.replace(to, edge=y.edge, packed=y.packed) if (y.kind, y.ref, y.index) == key else y
            for y in op.inputs)) for op in ops[first:]]
    return ops


def apply(graph: OpGraph, root, calls: ShardCalls) -> OpGraph:
    """:func:`insert_identities`, its notes kept on the graph (``graph.notes``) for the reports."""
    out, notes = insert_identities(graph, root, calls)
    out.notes = list(graph.notes) + notes
    return out
