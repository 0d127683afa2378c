"""Load a user's model from ``path/to/model.py:NAME`` and turn ``--input``/``--kwargs`` into values.

NAME is a ``mindspore.nn.Cell`` subclass or a factory function returning a Cell. The Cell is
built under ``mindspore.nn.utils.no_init_parameters()`` so its weights are never allocated.
"""
from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import sys
from dataclasses import dataclass

from .errors import InputSpecError, ModelLoadError
from .graph import OpGraph, TensorSpec, extract


@dataclass(frozen=True)
class ModelRef:
    """``path/to/model.py:NAME`` parsed."""

    path: str
    name: str

    @classmethod
    def parse(cls, target: str) -> "ModelRef":
        path, sep, name = target.rpartition(":")
        if not sep or not name.isidentifier() or not path:
            raise ModelLoadError(
                f"bad model reference {target!r}: write path/to/model.py:NAME, NAME a Cell class "
                f"or a factory function in that file")
        return cls(path, name)

    def __str__(self) -> str:
        return f"{self.path}:{self.name}"


def parse_inputs(items: list[str] | None) -> list[tuple[str, TensorSpec]]:
    """``["ids:int32[2,4096]"]`` -> ``[("ids", TensorSpec((2, 4096), "int32"))]``."""
    out = []
    for item in items or []:
        name, sep, spec = item.partition(":")
        if not sep or not name.strip().isidentifier():
            raise InputSpecError(
                f"bad --input {item!r}: write NAME:DTYPE[d0,d1,...], e.g. --input ids:int32[2,4096]")
        try:
            out.append((name.strip(), TensorSpec.parse(spec)))
        except InputSpecError as err:
            raise InputSpecError(f"bad --input {item!r}: {err}") from None
    return out


def parse_kwargs(items: list[str] | None) -> dict:
    """``["layers=2", "name=tiny"]`` -> ``{"layers": 2, "name": "tiny"}`` (Python literals, else str)."""
    out = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise InputSpecError(f"bad --kwargs {item!r}: write KEY=VALUE, e.g. --kwargs layers=2")
        try:
            out[key.strip()] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[key.strip()] = raw
    return out


def load_module(path: str):
    """Import a Python file by path (its folder is put on ``sys.path`` for its own imports)."""
    if not os.path.isfile(path):
        raise ModelLoadError(f"model file not found: {path} (check the path before ':NAME')")
    full = os.path.abspath(path)
    mod_name = "strategist_user_" + os.path.splitext(os.path.basename(full))[0]
    folder = os.path.dirname(full)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(mod_name, full)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # the user's code: report, don't trace back
        sys.modules.pop(mod_name, None)
        line = _user_line(err, full)
        raise ModelLoadError(
            f"importing {path} failed{line}: {type(err).__name__}: {err} (fix the model file)") from None
    return module


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
    import mindspore as ms
    from mindspore import nn
    from mindspore.nn.utils import no_init_parameters

    module = load_module(ref.path)
    obj = getattr(module, ref.name, None)
    if obj is None:
        cells = sorted(k for k, v in vars(module).items()
                       if (inspect.isclass(v) and issubclass(v, nn.Cell) and v.__module__ == module.__name__)
                       or (inspect.isfunction(v) and v.__module__ == module.__name__))
        raise ModelLoadError(
            f"{ref.name!r} not found in {ref.path} (available: {', '.join(cells) or 'none'})")
    if not callable(obj):
        raise ModelLoadError(f"{ref} is a {type(obj).__name__}, not a Cell class or factory function")
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        with no_init_parameters():
            cell = obj(**(kwargs or {}))
    except TypeError as err:
        raise ModelLoadError(f"building {ref} failed: {err} (check --kwargs)") from None
    except Exception as err:
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


def load_graph(target: str, inputs: list[str] | None = None, kwargs: list[str] | None = None) -> OpGraph:
    """``strategist inspect``'s whole front half: file -> Cell -> OpGraph.

    ``mindformers:<config.yaml>`` or a path to a MindFormers YAML builds that config's training model
    (:mod:`strategist.mindformers`); ``kwargs`` are then ``layers=N``, ``seq=S``, ``batch=B`` and any
    config key (``hidden_size=256``, ``parallel_config.use_seq_parallel=True``).
    """
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
    cell = build_cell(ref, kw)
    if not named:
        named = parse_inputs([f"{k}:{v}" for k, v in (getattr(cell, "example_inputs", None) or {}).items()])
    args = order_inputs(cell, named)
    return extract(cell, *args, model=str(ref))
