"""MindSpore's stand-alone compile of a Cell, as :func:`strategist.frontend.graph.extract` runs it.

Context managers set around ``executor.compile``: the export phase in graph mode with weights kept lazy and crash
reports in a private temporary directory (:func:`standalone_compile`), ``mindspore.reshard`` kept in a one-device
world (:func:`reshard_kept`), the training forward (:func:`train_mode`), a parse of every Python function per call
so that its operators take the caller's scope (:func:`call_site_scopes`), the validate-stage IR dump read back for
call stacks (:func:`call_stacks`) and ``@lazy_inline`` Cells compiled inlined (:func:`lazy_inlined`). MindSpore is
imported inside the functions: importing this module does not load it.
"""
from __future__ import annotations

import contextlib
import glob
import itertools
import os
import tempfile

from ..vocab.graph import TensorSpec
from .irtext import PRE_CSE_PASS, call_lines

#: Unique compile phases and parse keys within the process.
COUNTER = itertools.count()


_LAZY = "lazy_inline_"


def lazy_inline_cells(cell) -> tuple[str, ...]:
    """Paths of the sub-Cells built under ``@mindspore.lazy_inline`` (their ``cell_init_args`` starts
    ``lazy_inline_``). A parallel compile keeps each such Cell as one reused func graph, called once per instance;
    a stand-alone compile keeps it too, as a call strategist's extraction could not see into, so
    :func:`lazy_inlined` compiles them inlined."""
    return tuple(path for path, c in cell.cells_and_names()
                 if path and str(c.__dict__.get("_cell_init_args", "")).startswith(_LAZY))


def lazy_inline_groups(cell) -> tuple[tuple[str, ...], ...]:
    """The ``@lazy_inline`` Cells by the reused graph they share: MindSpore's parser keys a lazy-inline Cell's graph
    by its ``cell_init_args`` (``lazy_inline_`` + class name + ``__init__`` arguments), so instances of one class
    built with equal arguments are one func graph, called once per instance. Each group lists its instances' paths
    in the Cell tree's order (a one-instance group is a reused graph called once)."""
    groups: dict[str, list[str]] = {}
    for path, c in cell.cells_and_names():
        args = str(c.__dict__.get("_cell_init_args", ""))
        if path and args.startswith(_LAZY):
            groups.setdefault(args, []).append(path)
    return tuple(tuple(v) for v in groups.values())


@contextlib.contextmanager
def lazy_inlined(cell):
    """Compile ``@lazy_inline`` Cells inlined: their ``cell_init_args`` is taken away for the compile, restored after.
    (Renaming its ``lazy_inline_`` prefix is not enough: MindSpore's parser keys a Cell having one by its class path
    as well, and a key holding "lazy_inline" anywhere -- a module named so -- still makes a reused graph.)"""
    saved = []
    for _, c in cell.cells_and_names():
        args = c.__dict__.get("_cell_init_args")
        if isinstance(args, str) and args.startswith(_LAZY):
            saved.append((c, args))
            del c.__dict__["_cell_init_args"]
    try:
        yield
    finally:
        for c, args in saved:
            object.__setattr__(c, "_cell_init_args", args)


def deferred_cells(cell) -> tuple[str, ...]:
    """Paths of the sub-Cells with a custom ``bprop``: MindSpore's parser flags their graphs
    ``FUNC_GRAPH_FLAG_DEFER_INLINE``, so they stay separate func graphs (called, not inlined) until after
    automatic differentiation -- through the parallel passes. The exported graph has them inlined; the
    parallel pass's operator creation order does not (:func:`strategist.engine.search.orders.creation_order`)."""
    return tuple(path for path, c in cell.cells_and_names() if path and callable(getattr(c, "bprop", None)))


def as_tensor(x):
    import mindspore as ms
    import numpy as np
    if isinstance(x, TensorSpec):
        dt = "float32" if x.dtype == "bfloat16" else x.dtype
        t = ms.Tensor(np.zeros(x.shape, dtype=dt))
        return t.astype(ms.bfloat16) if x.dtype == "bfloat16" else t
    return x


#: Where MindSpore may write during a compile: graph dumps, and ``rank_N/om/analyze_fail.ir``
#: on a failed compile. Both point at a private temporary directory while we compile.
_DUMP_ENV = ("MS_DEV_SAVE_GRAPHS_PATH", "MS_OM_PATH")


@contextlib.contextmanager
def standalone_compile(cell):
    """Stand-alone graph compile, weights kept lazy, crash reports kept out of the user's tree."""
    import mindspore as ms
    from mindspore import context
    from mindspore._c_expression import MSContext, ms_ctx_param

    ms_ctx = MSContext.get_instance()
    saved_path = ms_ctx.get_param(ms_ctx_param.save_graphs_path)
    saved_mode = ms.get_context("mode")
    saved_parallel = context.get_auto_parallel_context("parallel_mode")
    saved_env = {k: os.environ.get(k) for k in _DUMP_ENV}
    tmp = tempfile.TemporaryDirectory(prefix="strategist-")
    had_own = "init_parameters_data" in cell.__dict__
    try:
        if saved_mode != ms.GRAPH_MODE:
            ms.set_context(mode=ms.GRAPH_MODE)
        if saved_parallel != "stand_alone":
            context.set_auto_parallel_context(parallel_mode="stand_alone")
        os.environ.update({k: tmp.name for k in _DUMP_ENV})
        ms_ctx.set_param(ms_ctx_param.save_graphs_path, tmp.name)  # analyze_fail.ir goes here
        if not had_own:
            object.__setattr__(cell, "init_parameters_data", lambda *a, **k: {})
        yield
    finally:
        if not had_own:
            cell.__dict__.pop("init_parameters_data", None)
        ms_ctx.set_param(ms_ctx_param.save_graphs_path, saved_path)
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if saved_parallel != "stand_alone":
            context.set_auto_parallel_context(parallel_mode=saved_parallel)
        if saved_mode != ms.GRAPH_MODE:
            ms.set_context(mode=saved_mode)
        tmp.cleanup()


@contextlib.contextmanager
def reshard_kept():
    """``mindspore.reshard(x, layout)`` -- a layout set on a tensor, which sharding propagation takes as set (MindSpore
    turns it into a configured AShardIdentity) -- returns ``x`` unchanged when the world has one device, so a
    stand-alone compile would lose it. While compiling, its world size reads as two: the Reshard primitive, its
    Layout among its attributes, stays in the graph (it compiles stand-alone)."""
    try:
        from mindspore.parallel.function import reshard_func
    except ImportError:         # a MindSpore without ms.reshard
        yield
        return
    saved = reshard_func.__dict__.get("group_size")
    reshard_func.group_size = lambda *a, **k: 2
    try:
        yield
    finally:
        reshard_func.group_size = saved


@contextlib.contextmanager
def train_mode(cell, training: bool = True):
    """Compile the training forward (``set_train(True)``): Dropout and other training-only operators
    exist only there. ``training=False``: the Cell as built, untouched."""
    was = bool(getattr(cell, "training", False))
    if training and not was:
        cell.set_train(True)
    try:
        yield
    finally:
        if training and not was:
            cell.set_train(False)


#: Functions whose graphs hold no operator of the model (argument conversion, checks, Python
#: builtins on lists and scalars): MindSpore may keep reusing its one parse of them. They are most
#: of the calls; parsing them afresh would double a compile.
_SHARED_PARSE_MODULES = ("mindspore.ops._utils", "mindspore._checkparam", "mindspore.ops._primitive_cache")
_SHARED_PARSE_FUNCTIONS = frozenset(
    f"mindspore.graph._parse.standard_method.{name}" for name in (
        "bool_", "ms_len", "list_append", "list_insert", "list_pop", "enumerate_", "ms_next",
        "int_bool", "float_bool", "str_bool", "none_bool"))


@contextlib.contextmanager
def call_site_scopes():
    """Give every call of a Python function (functional ops, tensor methods, Morph bodies) its own parse.

    MindSpore parses a function once and reuses the graph at every later call; the graph's nodes keep
    the scope of the Cell that called it first, so the functional and tensor-method operators of the
    2nd..Nth instance of a repeated layer are credited to the 1st (``blocks.0``), or even to another
    Cell class that happened to call the same function first. A parse made afresh at each call takes
    the scope of the calling Cell, as MindSpore's own ``debug_level=DEBUG`` does for every object
    (which costs ~5x the compile time). Here only functions that can hold operators are parsed
    again: no measurable cost on the 80-layer LLaMA shape (few functional calls), ~1.7x CPU time on
    a 2-layer ``nn.TransformerEncoder`` (functional multi-head attention, a tiny model).
    The parse cache is keyed by ``mindspore.graph._parse.get_object_key``; a key unique per call
    makes the lookup miss.
    """
    from mindspore import nn
    import mindspore.graph._parse as parse

    original = parse.get_object_key

    def get_object_key(obj):
        obj_id, obj_key = original(obj)
        if isinstance(obj, nn.Cell) or not callable(obj):
            return obj_id, obj_key
        module = getattr(obj, "__module__", None) or ""
        if module.startswith(_SHARED_PARSE_MODULES) or \
                f"{module}.{getattr(obj, '__qualname__', '')}" in _SHARED_PARSE_FUNCTIONS:
            return obj_id, obj_key
        return f"{obj_id}#strategist{next(COUNTER)}", obj_key

    parse.get_object_key = get_object_key
    try:
        yield
    finally:
        parse.get_object_key = original


class _Stacks:
    """The validate-stage IR MindSpore dumped during one compile, read into ``{full name: call line}``, and the
    graph its parallel passes would see (``pre_cse``: before opt_a's CSE,
    :func:`strategist.frontend.irtext.cse_copies`)."""

    def __init__(self):
        self.text: str | None = None
        self.pre_cse: str | None = None

    def calls(self) -> dict[str, str]:
        return call_lines(self.text) if self.text else {}


@contextlib.contextmanager
def call_stacks():
    """Have MindSpore dump the IR of its last export stage (``validate``) for this compile, with every node's
    call stack through the inlined functions (the ``# In file`` lines of ``MS_DEV_DUMP_IR_FORMAT`` 2, the
    default): ``save_graphs`` 1 for the compile, ``MS_DEV_DUMP_IR_PASSES=validate`` so that only that one
    file is written, into :func:`standalone_compile`'s private directory (read here, removed with it).
    The ANF proto and MindIR carry no debug info, and ``dump_func_graph`` prints subgraph locations only."""
    from mindspore._c_expression import MSContext, ms_ctx_param
    ctx = MSContext.get_instance()
    out = _Stacks()
    saved = ctx.get_param(ms_ctx_param.save_graphs)
    saved_env = os.environ.get("MS_DEV_DUMP_IR_PASSES")
    where = os.environ.get("MS_DEV_SAVE_GRAPHS_PATH")
    on = bool(where) and not saved and saved_env is None
    if on:
        os.environ["MS_DEV_DUMP_IR_PASSES"] = f"_validate,{PRE_CSE_PASS}"
        ctx.set_param(ms_ctx_param.save_graphs, 1)
    try:
        yield out
    finally:
        if on:
            ctx.set_param(ms_ctx_param.save_graphs, saved)
            os.environ.pop("MS_DEV_DUMP_IR_PASSES", None)
            files = sorted(glob.glob(os.path.join(where, "**", "*_validate*.ir"), recursive=True),
                           key=os.path.getmtime)
            if files:
                with open(files[-1], encoding="utf-8", errors="replace") as f:
                    out.text = f.read()
            pre = sorted(glob.glob(os.path.join(where, "**", f"*{PRE_CSE_PASS}*.ir"), recursive=True),
                         key=os.path.getmtime)
            if pre:
                with open(pre[0], encoding="utf-8", errors="replace") as f:
                    out.pre_cse = f.read()
            for f in files + pre:
                with contextlib.suppress(OSError):
                    os.remove(f)


def first_line(err: BaseException) -> str:
    """MindSpore's first meaningful line of an exception (no C++ stack, no separators)."""
    for line in str(err).splitlines():
        s = line.strip()
        if s and not s.startswith(("-", "=", "[", "#")) and "C++ Call Stack" not in s:
            return f"{type(err).__name__}: {s}"
    return type(err).__name__
