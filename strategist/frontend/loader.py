"""Load a user's model from ``path/to/model.py:NAME`` and turn ``--input``/``--kwargs`` into values.

NAME is a ``mindspore.nn.Cell`` subclass or a factory function returning a Cell; ``mindone:<model>`` is a
mindone.transformers model (:mod:`strategist.frontend.mindone`). The Cell is built under
``mindspore.nn.utils.no_init_parameters()`` so its weights are never allocated, with the init-time kernels MindSpore's
CPU backend lacks run on the host (:mod:`strategist.frontend.hostinit`). What the model prints while it is imported
or built goes to stderr: stdout carries strategist's report only.
"""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib.util
import inspect
import os
import sys
from dataclasses import dataclass

from .. import progress
from ..errors import CompileError, InputSpecError, ModelLoadError
from ..vocab.graph import OpGraph, TensorSpec
from .graph import extract


@dataclass(frozen=True)
class ModelRef:
    """``path/to/model.py:NAME`` parsed."""

    path: str
    name: str

    @classmethod
    def parse(cls, target: str) -> "ModelRef":
        if target.startswith(MINDONE):
            name = target[len(MINDONE):].strip()
            if not name.isidentifier():
                raise ModelLoadError(f"bad model reference {target!r}: write mindone:<model_type> (mindone:llama) "
                                     f"or mindone:<ClassName> (mindone:BertModel)")
            return cls(MINDONE.rstrip(":"), name)
        path, sep, name = target.rpartition(":")
        if not sep or not name.isidentifier() or not path:
            raise ModelLoadError(
                f"bad model reference {target!r}: write path/to/model.py:NAME, NAME a Cell class "
                f"or a factory function in that file")
        return cls(path, name)

    def __str__(self) -> str:
        return f"{self.path}:{self.name}"


#: the prefix of a mindone.transformers model (strategist.frontend.mindone.PREFIX)
MINDONE = "mindone:"


#: strategist traces the graph with zero-filled inputs of the given shapes: beyond these it would
#: exhaust memory (or numpy's index range) before MindSpore even sees the model
MAX_DIM = 2 ** 31 - 1
MAX_INPUT_BYTES = 2 ** 33


def parse_inputs(items: list[str] | None, source: str = "--input") -> list[tuple[str, TensorSpec]]:
    """``["ids:int32[2,4096]"]`` -> ``[("ids", TensorSpec((2, 4096), "int32"))]``. ``source`` names where
    the specs come from in errors (``--input``, or the model's ``example_inputs``)."""
    out = []
    seen = set()
    for item in items or []:
        name, sep, spec = item.partition(":")
        if not sep or not name.strip().isidentifier():
            raise InputSpecError(
                f"bad {source} {item[:80]!r}: write NAME:DTYPE[d0,d1,...], e.g. --input ids:int32[2,4096]")
        try:
            t = TensorSpec.parse(spec)
        except InputSpecError as err:
            raise InputSpecError(f"bad {source} {item[:80]!r}: {err}") from None
        except (ValueError, OverflowError):
            raise InputSpecError(f"bad {source} {item[:80]!r}: a dimension is not a number") from None
        if name.strip() in seen:
            raise InputSpecError(f"{source} {name.strip()} is given twice: give each input once")
        seen.add(name.strip())
        if any(d == 0 for d in t.shape):
            raise InputSpecError(f"bad {source} {item[:80]!r}: a zero-sized dimension has nothing to shard "
                                 f"(every dimension must be >= 1)")
        if any(d > MAX_DIM for d in t.shape):
            raise InputSpecError(f"bad {source} {item[:80]!r}: a dimension above {MAX_DIM} (the platform's "
                                 f"index limit)")
        if t.nbytes > MAX_INPUT_BYTES:
            raise InputSpecError(f"bad {source} {item[:80]!r}: {t.nbytes / 2 ** 30:.3g} GiB is more than "
                                 f"strategist traces with ({MAX_INPUT_BYTES // 2 ** 30} GiB per input); "
                                 f"use a smaller batch (communication scales linearly with it)")
        out.append((name.strip(), t))
    return out


def parse_kwargs(items: list[str] | None) -> dict:
    """``["layers=2", "name=tiny"]`` -> ``{"layers": 2, "name": "tiny"}`` (Python literals, else str)."""
    out = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise InputSpecError(f"bad --kwargs {item!r}: write KEY=VALUE, e.g. --kwargs layers=2")
        if len(raw) > 10000:
            raise InputSpecError(f"bad --kwargs {key.strip()}=...: the value is {len(raw)} characters long "
                                 f"(at most 10000)")
        try:
            out[key.strip()] = ast.literal_eval(raw)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            out[key.strip()] = raw
    return out


def load_module(path: str):
    """Import a Python file by path (its folder is put on ``sys.path`` for its own imports)."""
    if not os.path.isfile(path):
        hint = f" (did you mean {path}.py?)" if os.path.isfile(path + ".py") else " (check the path before ':NAME')"
        raise ModelLoadError(f"model file not found: {path}{hint}")
    if not path.endswith(".py"):
        hint = f" (did you mean {path}.py?)" if os.path.isfile(path + ".py") else ""
        raise ModelLoadError(f"model file {path} is not a .py file: write path/to/model.py:NAME{hint}")
    full = os.path.abspath(path)
    mod_name = "strategist_user_" + os.path.splitext(os.path.basename(full))[0]
    folder = os.path.dirname(full)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(mod_name, full)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    sys.dont_write_bytecode = True   # no __pycache__/ beside the user's model (nor its sibling modules)
    try:
        with _no_exit(path, "importing"), contextlib.redirect_stdout(sys.stderr):
            spec.loader.exec_module(module)
    except ModelLoadError:
        sys.modules.pop(mod_name, None)
        raise
    except Exception as err:  # the user's code: report, don't trace back
        sys.modules.pop(mod_name, None)
        line = _user_line(err, full)
        msg = " ".join(str(err).split())[:300]
        raise ModelLoadError(
            f"importing {path} failed{line}: {type(err).__name__}: {msg} (fix the model file)") from None
    return module


class _Exit(BaseException):
    pass


class _no_exit:
    """The user's code may not end strategist: ``sys.exit()`` and ``os._exit()`` inside become a
    ModelLoadError naming the model file."""

    def __init__(self, path: str, doing: str):
        self.path, self.doing = path, doing

    def __enter__(self):
        self._os_exit = os._exit

        def refuse(code=0):
            raise _Exit(code)
        os._exit = refuse
        return self

    def __exit__(self, typ, err, tb):
        os._exit = self._os_exit
        if typ is not None and issubclass(typ, (SystemExit, _Exit)):
            fn = "os._exit" if typ is _Exit else "sys.exit"
            code = err.args[0] if err.args else None
            raise ModelLoadError(f"{self.doing} {self.path} called {fn}({'' if code is None else repr(code)})"
                                 f"{_user_line(err, os.path.abspath(self.path))}: a model file must not exit "
                                 f"(remove the call or guard it with if __name__ == '__main__')") from None
        return False


def _user_line(err: BaseException, full: str) -> str:
    if isinstance(err, SyntaxError) and err.lineno:
        return f" at line {err.lineno}"
    tb = err.__traceback__
    line = ""
    while tb is not None:
        if os.path.abspath(tb.tb_frame.f_code.co_filename) == full:
            line = f" at line {tb.tb_lineno}"
        tb = tb.tb_next
    return line


def build_cell(ref: ModelRef, kwargs: dict | None = None):
    """Build the Cell named by ``ref`` with lazily-initialised (never allocated) weights."""
    with progress.task("importing MindSpore"):
        import mindspore as ms
        from mindspore import nn
        from mindspore.nn.utils import no_init_parameters
    progress.rearm_interrupts()
    if str(ref).startswith(MINDONE):
        from .mindone import build_mindone      # (imports mindone and transformers: loaded when used)
        ms.set_context(mode=ms.GRAPH_MODE)
        return build_mindone(ref.name, kwargs)

    module = load_module(ref.path)
    obj = getattr(module, ref.name, None)
    if obj is None:
        cells = sorted(k for k, v in vars(module).items()
                       if (inspect.isclass(v) and issubclass(v, nn.Cell) and v.__module__ == module.__name__)
                       or (inspect.isfunction(v) and v.__module__ == module.__name__))
        raise ModelLoadError(
            f"{ref.name!r} not found in {ref.path} (available: {', '.join(cells) or 'none'})")
    if not callable(obj):
        from ..files.schema import type_name     # (pydantic, loaded on this error path only)
        raise ModelLoadError(f"{ref} is {type_name(obj)}, not a Cell class or factory function")
    ms.set_context(mode=ms.GRAPH_MODE)
    from .hostinit import host_kernels, kernel_error
    try:
        with _no_exit(ref.path, "building a Cell of"), no_init_parameters(), host_kernels(), \
                contextlib.redirect_stdout(sys.stderr):
            cell = obj(**(kwargs or {}))
    except ModelLoadError:
        raise
    except TypeError as err:
        raise ModelLoadError(f"building {ref} failed: {err} (check --kwargs)") from None
    except Exception as err:
        known = kernel_error(str(ref), err)
        if known is not None:
            raise known from None
        raise ModelLoadError(
            f"building {ref} failed: {type(err).__name__}: {err} (fix the model or its --kwargs)") from None
    if not isinstance(cell, nn.Cell):
        raise ModelLoadError(f"{ref} returned {type(cell).__name__}, not a mindspore.nn.Cell")
    return cell


def order_inputs(cell, inputs: list[tuple[str, TensorSpec]]) -> list[TensorSpec]:
    """Match named inputs to ``construct``'s parameters; one-line errors for any mismatch."""
    sig = inspect.signature(cell.construct)
    params = [p for p in sig.parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = [p.name for p in params]
    given = dict(inputs)
    for name in given:
        if name not in names:
            raise InputSpecError(
                f"--input {name} is not a parameter of {type(cell).__name__}.construct "
                f"(its inputs are: {', '.join(names) or 'none'})")
    out = []
    for p in params:
        if p.name in given:
            out.append(given[p.name])
        elif p.default is p.empty:
            raise InputSpecError(
                f"{type(cell).__name__}.construct needs input {p.name!r}: add --input {p.name}:DTYPE[d0,...]")
        else:
            break
    return out


def _extract(cell, args, model: str, training: bool, replicate: bool) -> OpGraph:
    """``extract``, or (``replicate``, a list of alike blocks) its first three blocks extracted and the graph grown
    to the whole list; the whole compile where the grown graph might not be its: the small compile fails (a
    ``construct`` counting the blocks itself), its layers are not that list's, or its third layer is not its second
    copied (:func:`strategist.frontend.layers.grows_alike`)."""
    from . import blocks
    from .compile import deferred_cells, lazy_inline_cells, lazy_inline_groups
    from .layers import grow_layers, grows_alike, layer_block, layer_pattern
    found = blocks.repeated_list(cell) if replicate else None
    if found is None:
        return extract(cell, *args, model=model, training=training)
    path, lst, n = found
    try:
        with blocks.first_blocks(lst):
            small = extract(cell, *args, model=model, training=training)
    except CompileError:            # its construct counts the blocks itself (range(self.num_layers))
        small = None
    rx, scope_rx = layer_pattern(path), blocks.scope_pattern(path, lst)
    if small is None or layer_block(small) != (path, list(range(blocks.COMPILED))) \
            or not grows_alike(small, rx, scope_rx):
        return extract(cell, *args, model=model, training=training)
    graph = grow_layers(small, n, rx, scope_rx)
    graph.meta = dataclasses.replace(small.meta, deferred_cells=deferred_cells(cell))
    lazy = lazy_inline_cells(cell)
    if lazy:
        graph.meta = dataclasses.replace(graph.meta, lazy_inline_cells=lazy, lazy_groups=lazy_inline_groups(cell),
                                         lazy_classes={p: type(c).__name__ for p, c in cell.cells_and_names()
                                                       if p in set(lazy)})
    return graph


def load_graph(target: str, inputs: list[str] | None = None, kwargs: list[str] | None = None,
               training: bool = True, replicate: bool = True) -> OpGraph:
    """``strategist inspect``'s whole front half: file -> Cell -> OpGraph.

    ``training`` says which compile strategist extracts and emulates (``graph.training``): True (the default,
    ``--train``), MindSpore's compile after ``set_train(True)``, as a training run compiles it (``Model.train``, a
    ``TrainOneStepCell``: Dropout there, no VirtualOutput, operators created in ``TopoSort`` order), or False
    (``--eval``), its compile of the Cell as built, as an inference run compiles it (an ``nn.Dropout`` not set to
    training is no operator, a VirtualOutput, operators created in ``DeepScopedGraphSearch`` order); the two can
    propagate differently.

    ``mindformers:<config.yaml>`` or a path to a MindFormers YAML builds that config's training model
    (:mod:`strategist.frontend.mindformers`); ``kwargs`` are then ``layers=N``, ``seq=S``, ``batch=B`` and any
    config key (``hidden_size=256``, ``parallel_config.use_seq_parallel=True``).

    ``replicate``: a model whose one list of repeated blocks is alike after the first
    (:func:`strategist.frontend.blocks.repeated_list`) is compiled with its first three blocks and the graph grown to
    the whole list, the graph the whole compile gives at a three-layer compile's cost; off, every block compiled.
    """
    # the MindFormers front end (and the engine it reads) is loaded when used: `import strategist` stays light
    from .mindformers import is_mindformers_ref
    if is_mindformers_ref(target):
        from .mindformers import load_mindformers, split_model_options
        if inputs:
            raise InputSpecError("--input does not apply to MindFormers configs: their inputs are input_ids and "
                                 "labels of [batch, seq] (use --batch and --seq)")
        return load_mindformers(target, **split_model_options(kwargs))[0]
    ref = ModelRef.parse(target)
    named = parse_inputs(inputs)
    kw = parse_kwargs(kwargs)
    from . import cellshard    # (reads the engine's layouts: loaded when used, as the MindFormers front end)
    with cellshard.recording() as shard_calls:
        cell = build_cell(ref, kw)
    if not named:
        ex = getattr(cell, "example_inputs", None) or {}
        if not isinstance(ex, dict):
            raise ModelLoadError(f"{ref}: example_inputs must be a dict of name -> 'DTYPE[d0,...]' "
                                 f"(got {type(ex).__name__}); fix the model or give --input")
        try:
            named = parse_inputs([f"{k}:{v}" for k, v in ex.items()], source=f"example_inputs of {ref}")
        except InputSpecError as err:
            raise ModelLoadError(f"{err} (fix the model's example_inputs or give --input)") from None
    args = order_inputs(cell, named)
    with progress.task("extracting the graph (MindSpore compile)"):
        try:
            graph = _extract(cell, args, str(ref), training, replicate)
        except CompileError as err:
            fallback = cell.__dict__.get("strategist_eager_fallback")     # (a mindone model's default attention)
            if fallback is None:
                raise
            cell = fallback()
            graph = extract(cell, *order_inputs(cell, named), model=str(ref), training=training)
            graph.notes = tuple(graph.notes) + (
                f"{ref}: its flash attention does not compile in graph mode ({str(err).partition(': ')[2][:200]}); "
                f"traced with its eager attention (--set attn_implementation=eager)",)
    graph.training = bool(training)
    progress.rearm_interrupts()
    from .unsharded import unsharded_notes
    notes = [n for n in unsharded_notes(graph) if n not in graph.notes]
    if notes:
        graph.notes = tuple(graph.notes) + tuple(notes)
    return cellshard.apply(graph, cell, shard_calls)
