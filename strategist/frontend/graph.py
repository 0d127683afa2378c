"""The operator graph of a MindSpore Cell, taken from MindSpore's own compiler on CPU.

``extract(cell, *inputs)`` compiles the Cell's training forward (``set_train(True)``, so Dropout
and other training-only operators are there; ``training=False``: the Cell as built) stand-alone in an ``export`` phase (front end
only: no kernels, no device), reads the optimized ANF graph as MindSpore's ``anf_ir``
ModelProto straight from the graph executor, and folds it into an :class:`OpGraph`: one node
per real operator, one edge per tensor flowing between operators. Every operator is credited to the
Cell instance that really ran it: Cell-held primitives are tagged with their owner for the compile
(:func:`strategist.frontend.owners.owned_primitives`), functions are parsed afresh at each call so their
operators take the caller's scope (:func:`strategist.frontend.compile.call_site_scopes`), and operators a later
pass leaves in the root scope go to the Cell around them (:func:`strategist.frontend.owners.name_operators`).

The compile's context managers are :mod:`strategist.frontend.compile`, the IR text dumps' readers
:mod:`strategist.frontend.irtext`, the proto's decoding :mod:`strategist.frontend.proto` and the operators' owners
:mod:`strategist.frontend.owners`; the graph types are :mod:`strategist.vocab.graph`.

Why not ``MS_DEV_SAVE_GRAPHS``: MindSpore caches that switch at the first compile of a
process, so the env-var recipe silently dumps nothing in any process that compiled before,
and afterwards dumps every later compile into the current directory. The executor hands
out the same ``ms_output_optimize.pb`` bytes (``get_func_graph_proto(phase, "anf_ir")``)
without writing a file; the only file MindSpore may still write is its own crash report
on a failed compile, which we point at a private temporary directory that is always removed.
"""
from __future__ import annotations

import contextlib

from ..errors import CompileError
from ..vocab.graph import Input, Op, OpGraph, TensorSpec  # noqa: F401  (the graph types, also importable from here)
from .compile import (COUNTER, as_tensor, call_site_scopes, call_stacks, deferred_cells, first_line,
                      lazy_inline_cells, lazy_inline_groups, lazy_inlined, reshard_kept, standalone_compile,
                      train_mode)
from .graphfix import failing_line, fix_for, graph_mode_fixes
from .graphfix import note as fix_note
from .irtext import mark_copies
from .owners import owned_primitives
from .proto import from_proto


def extract(cell, *inputs, model: str = "", training: bool = True, **kwargs) -> OpGraph:
    """Compile ``cell`` on CPU in MindSpore's export phase and return its operator graph: its training forward
    (``set_train(True)`` for the compile, restored after), or with ``training=False`` the Cell as built (an
    ``nn.Dropout`` not set to training is no operator there, as in MindSpore's compile of it). Which compile the
    engine emulates is ``graph.training``, set by the loader.

    ``inputs`` are ``mindspore.Tensor`` values or :class:`TensorSpec` (only shape and dtype
    matter). Weights are never materialised: build the Cell under
    ``mindspore.nn.utils.no_init_parameters()`` (``strategist.frontend.loader`` does) and extraction
    keeps MindSpore from initialising them. Nothing is written to the working tree.

    >>> import mindspore as ms; from mindspore import nn, ops
    >>> class Net(nn.Cell):
    ...     def __init__(self):
    ...         super().__init__(); self.relu = ops.ReLU()
    ...     def construct(self, x): return self.relu(x)
    >>> g = extract(Net(), TensorSpec((2, 3), "float32"))          # doctest: +SKIP
    >>> [op.name for op in g]                                       # doctest: +SKIP
    ['relu']
    """
    from mindspore.common.api import _cell_graph_executor as executor
    from mindspore._c_expression import dump_func_graph

    args = tuple(as_tensor(x) for x in inputs)
    lazy = lazy_inline_cells(cell)
    fixes: list[str] = []           # graph-mode fixes a failed compile asked for (strategist.frontend.graphfix)
    fixed: list[str] = []
    while True:
        phase = f"export.strategist{next(COUNTER)}"
        with standalone_compile(cell), reshard_kept(), train_mode(cell, training), call_site_scopes(), \
                owned_primitives(cell) as owners, call_stacks() as stacks, lazy_inlined(cell), \
                graph_mode_fixes(tuple(fixes)):
            try:
                phase, _ = executor.compile(cell, *args, phase=phase, **kwargs)
                break
            except Exception as err:  # MindSpore raises TypeError/ValueError/RuntimeError alike
                fix = fix_for(err, fixes)
                if fix is None:
                    raise CompileError(
                        f"MindSpore could not compile {model or type(cell).__name__}: {first_line(err)} "
                        f"(fix the model or the --input shapes/dtypes it is given)") from None
                fixes.append(fix)
                fixed.append(fix_note(fix, failing_line(err)))
    proto = executor._graph_executor.get_func_graph_proto(phase, "anf_ir", False)
    text = None
    try:
        text = dump_func_graph(executor._graph_executor.get_func_graph(phase))
    except Exception:  # only used for tuple output shapes; TupleGetItem shapes remain
        pass
    with contextlib.suppress(Exception):
        executor.del_net_res(cell, set([phase]))
    graph = from_proto(proto, text, cell, model, owners=owners, calls=stacks.calls())
    mark_copies(graph, stacks.pre_cse)
    graph.deferred_cells = deferred_cells(cell)
    if fixed:
        graph.notes = tuple(graph.notes) + tuple(n for n in fixed if n not in graph.notes)
    if lazy:
        graph.lazy_inline_cells = lazy
        graph.lazy_groups = lazy_inline_groups(cell)
        graph.lazy_classes = {p: type(c).__name__ for p, c in cell.cells_and_names() if p in set(lazy)}
    return graph
