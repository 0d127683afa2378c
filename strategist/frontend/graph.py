"""The operator graph of a MindSpore Cell, taken from MindSpore's own compiler on CPU.

``extract(cell, *inputs)`` compiles the Cell's training forward (``set_train(True)``, so Dropout
and other training-only operators are there; ``training=False``: the Cell as built) stand-alone in an ``export`` phase (front end
only: no kernels, no device), reads the optimized ANF graph as MindSpore's ``anf_ir``
ModelProto straight from the graph executor, and folds it into an :class:`OpGraph`: one node
per real operator, one edge per tensor flowing between operators. Every operator is credited to the
Cell instance that really ran it: Cell-held primitives are tagged with their owner for the compile
(:func:`_owned_primitives`), functions are parsed afresh at each call so their operators take the
caller's scope (:func:`_call_site_scopes`), and operators a later pass leaves in the root scope go
to the Cell around them (:func:`_enclosing_cells`).

Why not ``MS_DEV_SAVE_GRAPHS``: MindSpore caches that switch at the first compile of a
process, so the env-var recipe silently dumps nothing in any process that compiled before,
and afterwards dumps every later compile into the current directory. The executor hands
out the same ``ms_output_optimize.pb`` bytes (``get_func_graph_proto(phase, "anf_ir")``)
without writing a file; the only file MindSpore may still write is its own crash report
on a failed compile, which we point at a private temporary directory that is always removed.
"""
from __future__ import annotations

import dataclasses

import ast
import contextlib
import glob
import inspect
import itertools
import os
import re
import tempfile
import textwrap
from typing import Any


from ..errors import CompileError
from ..vocab.graph import (PLUMBING, Input, Op, OpGraph, Param, ShardLayout,
                           TensorSpec)

_COUNTER = itertools.count()

# --------------------------------------------------------------------------------------
# extraction


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

    args = tuple(_as_tensor(x) for x in inputs)
    phase = f"export.strategist{next(_COUNTER)}"
    lazy = lazy_inline_cells(cell)
    with _standalone_compile(cell), _reshard_kept(), _training(cell, training), _call_site_scopes(), \
            _owned_primitives(cell) as owners, _call_stacks() as stacks, _lazy_inlined(cell):
        try:
            phase, _ = executor.compile(cell, *args, phase=phase, **kwargs)
        except Exception as err:  # MindSpore raises TypeError/ValueError/RuntimeError alike
            raise CompileError(
                f"MindSpore could not compile {model or type(cell).__name__}: {_first_line(err)} "
                f"(fix the model or the --input shapes/dtypes it is given)") from None
    proto = executor._graph_executor.get_func_graph_proto(phase, "anf_ir", False)
    text = None
    try:
        text = dump_func_graph(executor._graph_executor.get_func_graph(phase))
    except Exception:  # only used for tuple output shapes; TupleGetItem shapes remain
        pass
    with contextlib.suppress(Exception):
        executor.del_net_res(cell, set([phase]))
    graph = _from_proto(proto, text, cell, model, owners=owners, calls=stacks.calls())
    _mark_copies(graph, stacks.pre_cse)
    graph.deferred_cells = deferred_cells(cell)
    if lazy:
        graph.lazy_inline_cells = lazy
        graph.lazy_groups = lazy_inline_groups(cell)
        graph.lazy_classes = {p: type(c).__name__ for p, c in cell.cells_and_names() if p in set(lazy)}
    return graph


_LAZY = "lazy_inline_"


def lazy_inline_cells(cell) -> tuple[str, ...]:
    """Paths of the sub-Cells built under ``@mindspore.lazy_inline`` (their ``cell_init_args`` starts
    ``lazy_inline_``). A parallel compile keeps each such Cell as one reused func graph, called once per instance;
    a stand-alone compile keeps it too, as a call strategist's extraction could not see into, so
    :func:`_lazy_inlined` compiles them inlined."""
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
def _lazy_inlined(cell):
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
    parallel pass's operator creation order does not (:func:`strategist.engine.propagate.creation_order`)."""
    return tuple(path for path, c in cell.cells_and_names() if path and callable(getattr(c, "bprop", None)))


def _as_tensor(x):
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
def _standalone_compile(cell):
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
def _reshard_kept():
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
def _training(cell, training: bool = True):
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
def _call_site_scopes():
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
        return f"{obj_id}#strategist{next(_COUNTER)}", obj_key

    parse.get_object_key = get_object_key
    try:
        yield
    finally:
        parse.get_object_key = original


class _Stacks:
    """The validate-stage IR MindSpore dumped during one compile, read into ``{full name: call line}``, and the
    graph its parallel passes would see (``pre_cse``: before opt_a's CSE, :func:`_cse_copies`)."""

    def __init__(self):
        self.text: str | None = None
        self.pre_cse: str | None = None

    def calls(self) -> dict[str, str]:
        return _call_lines(self.text) if self.text else {}


@contextlib.contextmanager
def _call_stacks():
    """Have MindSpore dump the IR of its last export stage (``validate``) for this compile, with every node's
    call stack through the inlined functions (the ``# In file`` lines of ``MS_DEV_DUMP_IR_FORMAT`` 2, the
    default): ``save_graphs`` 1 for the compile, ``MS_DEV_DUMP_IR_PASSES=validate`` so that only that one
    file is written, into :func:`_standalone_compile`'s private directory (read here, removed with it).
    The ANF proto and MindIR carry no debug info, and ``dump_func_graph`` prints subgraph locations only."""
    from mindspore._c_expression import MSContext, ms_ctx_param
    ctx = MSContext.get_instance()
    out = _Stacks()
    saved = ctx.get_param(ms_ctx_param.save_graphs)
    saved_env = os.environ.get("MS_DEV_DUMP_IR_PASSES")
    where = os.environ.get("MS_DEV_SAVE_GRAPHS_PATH")
    on = bool(where) and not saved and saved_env is None
    if on:
        os.environ["MS_DEV_DUMP_IR_PASSES"] = f"_validate,{_PRE_CSE_PASS}"
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
            pre = sorted(glob.glob(os.path.join(where, "**", f"*{_PRE_CSE_PASS}*.ir"), recursive=True),
                         key=os.path.getmtime)
            if pre:
                with open(pre[0], encoding="utf-8", errors="replace") as f:
                    out.pre_cse = f.read()
            for f in files + pre:
                with contextlib.suppress(OSError):
                    os.remove(f)


#: The opt_a sub-step after which the stand-alone graph is the one MindSpore's parallel passes work on (``auto_parallel``,
#: a no-op stand-alone; ``parallel`` is sub-step 17): inlined, not yet through opt_a's ``cse`` (sub-step 43 of the same
#: dump, after ``before_grad``). Its first round's dump (``opt_substep_opt_a_r1_j0_16_auto_parallel_*.ir``, with
#: ``save_graphs`` 1 and this name in ``MS_DEV_DUMP_IR_PASSES``) is read by :func:`_cse_copies`.
_PRE_CSE_PASS = "opt_a_r1_j0_16_auto_parallel"
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


def _cse_copies(text: str) -> dict[tuple, list[int]]:
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


def _mark_copies(graph: "OpGraph", text: str | None) -> None:
    """``attrs["strategist_copies"] = k`` on each operator of ``graph`` that is ``k`` > 1 equal nodes in the graph
    MindSpore's parallel passes see (:func:`_cse_copies`), where the scope, type and output shape name as many
    operators of ``graph`` as groups of the pre-CSE graph (matched in graph order)."""
    if not text:
        return
    try:
        groups = _cse_copies(text)
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


def _call_lines(text: str) -> dict[str, str]:
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


#: Private primitive attribute naming each Cell-held primitive for the duration of one compile.
_OWNER_ATTR = "strategist_owner"


@contextlib.contextmanager
def _owned_primitives(cell):
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
                    prim.add_prim_attr(_OWNER_ATTR, tag)
            owners.setdefault(tagged[id(prim)][1], []).append((path, attr))
    try:
        yield owners
    finally:
        for prim, _ in tagged.values():
            with contextlib.suppress(Exception):
                prim.del_prim_attr(_OWNER_ATTR)


def _recomputed(prim) -> bool:
    try:
        return bool((prim.attrs or {}).get("recompute"))
    except Exception:
        return False


def _signature(prim) -> str:
    """What MindSpore's CSE compares of two primitives: type, name and attributes."""
    try:
        attrs = sorted((k, repr(v)) for k, v in (prim.attrs or {}).items() if k != _OWNER_ATTR)
    except Exception:
        attrs = [("id", str(id(prim)))]
    return f"{type(prim).__module__}.{type(prim).__qualname__}:{prim.name}:{attrs}"


def _first_line(err: BaseException) -> str:
    """MindSpore's first meaningful line of an exception (no C++ stack, no separators)."""
    for line in str(err).splitlines():
        s = line.strip()
        if s and not s.startswith(("-", "=", "[", "#")) and "C++ Call Stack" not in s:
            return f"{type(err).__name__}: {s}"
    return type(err).__name__


# --------------------------------------------------------------------------------------
# ANF proto -> OpGraph

_DT = {
    "DT_BOOL": "bool", "DT_INT8": "int8", "DT_INT16": "int16", "DT_INT32": "int32",
    "DT_INT64": "int64", "DT_UINT8": "uint8", "DT_UINT16": "uint16", "DT_UINT32": "uint32",
    "DT_UINT64": "uint64", "DT_FLOAT16": "float16", "DT_FLOAT32": "float32",
    "DT_FLOAT64": "float64", "DT_BFLOAT16": "bfloat16", "DT_BASE_FLOAT": "float32",
    "DT_COMPLEX64": "complex64", "DT_COMPLEX128": "complex128",
}


_ENUM_NAMES: dict[int, str] = {}


def _enum_name(v: int) -> str:
    """``anf_ir_pb2.DataType.Name`` through a table (the enum lookup is slow in the Python runtime)."""
    if not _ENUM_NAMES:
        from mindspore.train import anf_ir_pb2
        _ENUM_NAMES.update({e.number: e.name for e in anf_ir_pb2.DataType.DESCRIPTOR.values})
    return _ENUM_NAMES.get(v, "DT_UNDEFINED")


def _dtype_name(pb_enum_value) -> str:
    return _DT.get(_enum_name(pb_enum_value), "unknown")


def _value(v) -> Any:
    """ValueProto -> Python value (tuples, scalars, strings, None, dicts)."""
    dt = _enum_name(v.dtype)
    if dt in ("DT_TUPLE", "DT_LIST"):
        return tuple(_value(x) for x in v.values)
    if dt == "DT_DICT":
        return {kv.key: _value(kv.value) for kv in v.dict_val}
    if dt == "DT_NONE":
        return None
    if dt == "DT_BOOL":
        return bool(v.bool_val)
    if dt.startswith(("DT_INT", "DT_UINT")):
        return int(v.int_val)
    if dt.startswith(("DT_FLOAT", "DT_BFLOAT")):
        return float(v.float_val) if v.float_val else float(v.double_val)
    if dt == "DT_TYPE":
        return _dtype_name(v.type_val.data_type) if v.HasField("type_val") else "type"
    if dt == "DT_TENSOR" and v.HasField("tensor_val"):
        t = v.tensor_val
        return {"tensor": str(TensorSpec(tuple(t.dims), _dtype_name(t.data_type)))}
    if v.str_val:
        return v.str_val
    return None


def _spec_of(type_proto) -> TensorSpec | tuple | None:
    """TypeProto -> TensorSpec, or a tuple of (TensorSpec|dtype str) for tuple outputs."""
    dt = _enum_name(type_proto.data_type)
    if dt == "DT_TENSOR":
        tt = type_proto.tensor_type
        if tt.HasField("shape"):
            return TensorSpec(tuple(int(d.size) for d in tt.shape.dim), _dtype_name(tt.elem_type))
        return TensorSpec((), _dtype_name(tt.elem_type))
    if dt in ("DT_TUPLE", "DT_LIST"):
        return tuple(_spec_of(e) for e in type_proto.sequence_type.elem_types)
    if dt in _DT:  # a scalar
        return TensorSpec((), _DT[dt])
    return None


def _layouts(value) -> tuple[ShardLayout, ...]:
    """The Layouts of an operator's tensors; a tuple input's own tuple of Layouts (``Concat.shard(in_strategy=
    ((lay(...), lay(...)),))``, MindFormers' MTP Concat) gives one per element, as a tuple strategy does."""
    out = []
    for d in (x for v in value for x in (v if isinstance(v, (tuple, list)) else (v,))):
        tmap = tuple(tuple(t) if isinstance(t, tuple) else (() if t == -1 else (t,))
                     for t in d["tensor_map"])
        tmap = tuple(tuple(k for k in t if k != -1) for t in tmap)
        out.append(ShardLayout(tuple(d["device_matrix"]), tuple(d["alias_name"]), tmap))
    return tuple(out)


def _cell_path(scope: str) -> tuple[str, str]:
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


_IR_NODE = re.compile(r"^\s+%\d+\([^)]*\) = (?:PrimFunc_)?([A-Za-z0-9_]+)\(")
_IR_TUPLE = re.compile(r"TupleShape\((.*)\)>\)\s*$")


def _tuple_shapes_from_text(text: str | None) -> list[tuple[str, list[tuple[int, ...]] | None]]:
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


def _from_proto(proto: bytes, ir_text: str | None, cell, model: str, parser: str = "wire",
                owners: dict[int, list[tuple[str, str]]] | None = None,
                calls: dict[str, str] | None = None) -> OpGraph:
    """``parser``: ``"wire"`` (strategist.frontend.protowire, fast) or ``"protobuf"`` (MindSpore's generated class;
    the tests check both give the same graph). ``owners``: the tags of :func:`_owned_primitives`;
    ``calls``: node full name -> ``file:line`` of its call in the user's code (:func:`_call_stacks`)."""
    from mindspore.train import anf_ir_pb2

    if parser == "wire":
        from .protowire import decode
        m = decode(proto, anf_ir_pb2.ModelProto.DESCRIPTOR)
    else:
        m = anf_ir_pb2.ModelProto()
        m.ParseFromString(proto)
    g = m.graph
    consts = {c.key: _value(c.value) for c in g.const_vals}
    weights = cell.parameters_dict()
    params: dict[str, Param] = {}
    graph_inputs: dict[str, TensorSpec] = {}
    for p in g.parameters:
        spec = _spec_of(p.type)
        if p.name in weights:
            params[p.name] = Param(p.name, spec, bool(weights[p.name].requires_grad))
        else:
            graph_inputs[p.name] = spec
    nodes = {n.name: n for n in g.node}
    cells = {name: type(c).__name__ for name, c in cell.cells_and_names()}
    cell_objs = dict(cell.cells_and_names())

    # where every real op comes from, and its name: "<cell path>.<instance name>", "#k" for repeats
    op_name: dict[str, str] = {}
    where: dict[str, tuple[str, str, str]] = {}      # node -> (cell path, cell class, instance name)
    seen: dict[str, int] = {}
    real = [n for n in g.node if n.op_type not in PLUMBING]
    owner_of = {n.name: _owner_of(n, owners, _cell_path(n.scope)[0]) for n in real}
    folded = {n.name for n in real if _folded_into_caller(n, owners)}
    for name in folded:
        owner_of[name] = None
    enclosing = _enclosing_cells(real, nodes, owner_of)
    explicit: dict[str, bool] = {}
    for n in real:
        path, klass = _cell_path(n.scope)
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

    memo: dict[str, Any] = {}

    def _packed(x, name: str, tuple_: bool):
        """An element of a MakeTuple/MakeList: MindSpore links it only if it is a real op itself; a MakeTuple's
        elements are marked ``packed``."""
        direct = name in nodes and nodes[name].op_type not in PLUMBING
        if isinstance(x, Input) and x.kind in ("op", "input") and (not direct or tuple_):
            return dataclasses.replace(x, edge=x.edge and direct, packed=x.packed or tuple_)
        return x

    def resolve(name: str):
        if name in memo:
            return memo[name]
        if name in consts:
            v = consts[name]
            if isinstance(v, dict) and "tensor" in v:      # a tensor constant (scalars become rank 0)
                r = Input("const", spec=TensorSpec.parse(v["tensor"]), value=v)
            else:
                r = None if v in ("U", "IO") else Input("const", value=v)
        elif name in params:
            r = Input("param", name, spec=params[name].spec)
        elif name in graph_inputs:
            r = Input("input", name, spec=graph_inputs[name])
        elif name in nodes:
            n = nodes[name]
            ins = [i.name for i in n.input if i.type == anf_ir_pb2.InputProto.DATA_EDGE]
            if n.op_type in ("Load", "Depend"):
                r = resolve(ins[0])
            elif n.op_type in ("MakeTuple", "MakeList"):
                r = tuple(_packed(resolve(i), i, n.op_type == "MakeTuple") for i in ins)
            elif n.op_type in ("TupleGetItem", "ListGetItem"):
                src, idx = resolve(ins[0]), consts.get(ins[1], 0)
                spec = _spec_of(n.output_type)
                if isinstance(src, tuple):
                    r = src[idx]
                    if isinstance(r, Input) and not r.edge:
                        r = dataclasses.replace(r, edge=True)
                elif src is not None and src.kind == "op":
                    r = Input("op", src.ref, idx, spec if isinstance(spec, TensorSpec) else None)
                else:
                    r = src
            elif n.op_type in ("UpdateState", "Return"):
                r = None
            else:
                spec = _spec_of(n.output_type)
                r = Input("op", op_name[name], 0, spec if isinstance(spec, TensorSpec) else None)
        else:
            r = None
        memo[name] = r
        return r

    ir_nodes = _tuple_shapes_from_text(ir_text)
    ir_nodes = [x for x in ir_nodes if x[0] not in PLUMBING]
    use_ir = len(ir_nodes) == len(real) and all(a == n.op_type for (a, _), n in zip(ir_nodes, real))

    ops: list[Op] = []
    for idx, n in enumerate(real):
        slots: list[Input] = []
        for i in n.input:
            if i.type != anf_ir_pb2.InputProto.DATA_EDGE:
                continue
            r = resolve(i.name)
            if isinstance(r, tuple):
                slots.extend(x for x in r if x is not None)
            elif r is not None:
                slots.append(r)
        out = _spec_of(n.output_type)
        if isinstance(out, TensorSpec):
            outputs: tuple = (out,)
        elif isinstance(out, tuple):
            shapes = ir_nodes[idx][1] if use_ir else None
            outputs = tuple(
                TensorSpec(tuple(shapes[k]), e.dtype) if shapes and k < len(shapes) and isinstance(e, TensorSpec)
                else None for k, e in enumerate(out))
        else:
            outputs = ()
        attrs = {a.name: _value(a.value) for a in n.attribute if a.name != _OWNER_ATTR}
        path, klass, inst = where[n.name]
        name = op_name[n.name]
        op = Op(
            # mindspore.reshard's primitive: MindSpore's step_parallel turns it into a configured AShardIdentity
            name=name, type="AShardIdentity" if n.op_type == "Reshard" else n.op_type, cell_path=path, cell_class=klass,
            instance_name=inst, full_name=n.full_name, inputs=tuple(slots), outputs=outputs,
            attrs={k: v for k, v in attrs.items()
                   if k not in ("in_strategy", "out_strategy", "in_layout", "out_layout")},
            in_strategy=attrs.get("in_strategy"), out_strategy=attrs.get("out_strategy"),
            in_layout=_layouts(attrs["in_layout"]) if "in_layout" in attrs else None,
            out_layout=_layouts(attrs["out_layout"]) if "out_layout" in attrs else None,
            source=(_source_of(cell_objs.get(path), inst) if explicit[n.name] or not calls
                    else calls.get(n.full_name) or _source_of(cell_objs.get(path), inst)),
            topo_index=idx, held=bool(explicit[n.name]),
        )
        ops.append(op)
    # fill tuple-output shapes seen only through TupleGetItem
    by_name = {op.name: op for op in ops}
    for op in ops:
        for x in op.inputs:
            if x.kind == "op" and x.spec is not None:
                src = by_name[x.ref]
                if x.index < len(src.outputs) and src.outputs[x.index] is None:
                    outs = list(src.outputs)
                    outs[x.index] = x.spec
                    src.outputs = tuple(outs)
    outputs_ = []
    for o in g.outputs:
        r = resolve(o.name)
        outputs_.extend(x for x in (r if isinstance(r, tuple) else (r,)) if x is not None)
    return OpGraph(ops, graph_inputs, params, outputs_, cells, model)


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

    path = {n.name: (owner_of[n.name][0] if owner_of[n.name] else _cell_path(n.scope)[0]) for n in real}
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
    tag = next((a.value.int_val for a in node.attribute if a.name == _OWNER_ATTR), None)
    if tag is None or tag not in owners:
        return False
    path = _cell_path(node.scope)[0]
    return all(p != path for p, _ in owners[tag])


def _owner_of(node, owners, scope_path: str) -> tuple[str, str] | None:
    """(cell path, attribute name) of the Cell attribute holding ``node``'s primitive, from its tag.

    A tag held by several Cells (one shared primitive object, or equal primitives) is credited to the one its
    IR scope names.
    """
    if not owners:
        return None
    tag = next((a.value.int_val for a in node.attribute if a.name == _OWNER_ATTR), None)
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


_SOURCE_CACHE: dict[type, dict[str, str]] = {}


def _source_of(obj, inst: str) -> str | None:
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
                return f"{inspect.getsourcefile(fn)}:{inspect.getsourcelines(fn)[1]}"
    return None


def _assignments(klass) -> dict[str, str]:
    try:
        lines, start = inspect.getsourcelines(klass)
        path = inspect.getsourcefile(klass)
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
