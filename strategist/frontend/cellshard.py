"""``Cell.shard`` and ``mindspore.shard``: the anchors MindSpore inserts for them.

In a parallel compile MindSpore puts an ``AShardIdentity`` operator on every tensor entering a
Cell configured with ``cell.shard(in_strategy=...)`` (or ``mindspore.shard(cell, in_strategy=...)``),
configured with that input's row of ``in_strategy``; sharding propagation then starts from them like
from any ``shard()`` (measured on MindSpore 2.9.0: ``inner.shard(in_strategy=((2, 4),))`` reports
``AShardIdentity ((2, 4),)`` configured, and the MatMul inside follows with ``((2, 4), (4, 1))``).

A stand-alone compile leaves no trace of either (``Cell.shard`` even returns early on one device),
so :func:`recording` notes the calls while the model is built and :func:`insert_identities` adds the
identity operators to the extracted graph. A function (not a Cell) passed to ``mindspore.shard`` is
wrapped in a Cell of its own (:class:`_ShardedFunction`, which only calls it) while the model is built,
so its operators have a cell path and its arguments -- Parameters included, as MindSpore puts an
``AShardIdentity`` on every argument of a sharded function -- take the identities.
"""
from __future__ import annotations

import contextlib
import dataclasses
import weakref

from .graph import Input, Op, OpGraph


@dataclasses.dataclass
class ShardCalls:
    cells: "weakref.WeakKeyDictionary" = dataclasses.field(default_factory=weakref.WeakKeyDictionary)
    wrappers: "weakref.WeakSet" = dataclasses.field(default_factory=weakref.WeakSet)   # their Cells


def _sharded_function_cell():
    from mindspore import nn

    class _ShardedFunction(nn.Cell):
        """A plain function given to ``mindspore.shard``, as a Cell that calls it: the function's operators
        get this Cell's path, and its arguments enter it as a Cell's inputs do."""

        def __init__(self, fn):
            super().__init__(auto_prefix=False)
            self.fn = fn

        def construct(self, *args):
            return self.fn(*args)

    return _ShardedFunction


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
        calls.cells[self] = (in_strategy, out_strategy)

    def fn_shard(fn, in_strategy, out_strategy=None, parameter_plan=None):
        if isinstance(fn, nn.Cell):
            calls.cells[fn] = (in_strategy, out_strategy)
            return fn
        cell = _sharded_function_cell()(fn)
        calls.cells[cell] = (in_strategy, out_strategy)
        calls.wrappers.add(cell)
        return cell

    nn.Cell.shard = cell_shard
    for mod, attr, _ in saved:
        setattr(mod, attr, fn_shard)
    try:
        yield calls
    finally:
        nn.Cell.shard = orig_cell_shard
        for mod, attr, value in saved:
            setattr(mod, attr, value)


def insert_identities(graph: OpGraph, root, calls: ShardCalls) -> tuple[OpGraph, list[str]]:
    """The graph with MindSpore's ``AShardIdentity`` anchors added, and notes for what was not located."""
    paths, functions = {}, set()
    for path, cell in root.cells_and_names():
        if cell in calls.cells:
            paths[path] = calls.cells[cell]
            if cell in calls.wrappers:
                functions.add(path)
    found = {id(c) for p, c in root.cells_and_names() if p in functions}
    notes = [f"mindspore.shard on the function {getattr(w.fn, '__qualname__', repr(w.fn))} is not located in the "
             f"graph (no Cell holds it): its strategy is not used" for w in calls.wrappers if id(w) not in found]
    if not paths:
        return graph, notes
    ops = list(graph)
    for path, (in_strategy, _out) in sorted(paths.items()):
        inside = (lambda p: lambda op: op.cell_path == p or op.cell_path.startswith(p + ".") or p == "")(path)
        # the tensors entering the Cell, in the order its operators first read them (its arguments' order
        # for the usual single-input Cell)
        entering: list[tuple] = []
        for op in ops:
            if not inside(op):
                continue
            for x in op.inputs:
                key = (x.kind, x.ref, x.index)
                outside = x.kind == "input" or (x.kind == "op" and x.ref in graph and not inside(graph.op(x.ref))) \
                    or (x.kind == "param" and path in functions)     # a sharded function's Parameter argument
                if outside and key not in entering:
                    entering.append(key)
        rows = tuple(tuple(r) for r in (in_strategy or ()))
        if len(rows) != len(entering):
            notes.append(f"{path}.shard(in_strategy={rows}): the Cell takes {len(entering)} tensor input(s); "
                         f"the strategy is not used")
            continue
        new_ops, renamed = [], {}
        for k, (key, row) in enumerate(zip(entering, rows)):
            first = next(i for i, op in enumerate(ops) if inside(op) and any(
                (x.kind, x.ref, x.index) == key for x in op.inputs))
            spec = next(x.spec for x in ops[first].inputs if (x.kind, x.ref, x.index) == key)
            # MindSpore creates the identities last argument first (AShardIdentity-op0 is the last one)
            r = len(entering) - 1 - k
            name = (f"{path}." if path else "") + "AShardIdentity" + (f"#{r}" if r else "")
            cls = ops[first].cell_class if ops[first].cell_path == path else type(root).__name__
            ident = Op(name, "AShardIdentity", path, cls, "AShardIdentity", "", (Input(key[0], key[1], key[2], spec),),
                       (spec,), {}, in_strategy=(row,), source=ops[first].source)
            new_ops.append((first, ident))
            renamed[key] = Input("op", name, 0, spec)
        # MindSpore inserts them together where the call begins, in argument order, numbering them from the
        # last argument (AShardIdentity-op0 is the last argument's)
        start = min(first for first, _ in new_ops)
        for _, ident in reversed(new_ops):
            ops.insert(start, ident)
        ops = [dataclasses.replace(op, inputs=tuple(renamed.get((x.kind, x.ref, x.index), x) if inside(op)
                                                    and op.type != "AShardIdentity" else x for x in op.inputs))
               if inside(op) else op for op in ops]
    ops = [dataclasses.replace(op, topo_index=i) for i, op in enumerate(ops)]
    return graph.derived(ops), notes


def apply(graph: OpGraph, root, calls: ShardCalls) -> OpGraph:
    """:func:`insert_identities`, its notes kept on the graph (``graph.notes``) for the reports."""
    out, notes = insert_identities(graph, root, calls)
    out.notes = list(getattr(graph, "notes", [])) + notes
    return out
