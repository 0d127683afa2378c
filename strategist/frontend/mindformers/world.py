"""MindFormers' world, simulated while a model is built and restored after.

Building needs MindFormers' context (``use_legacy=False``), communication helpers (rank, group size,
``create_group``), ``parallel_state`` groups and ``LayoutManager`` caches, and the auto parallel context:
:func:`mindformers_world` simulates or sets all of it only while building and restores it afterwards, and keeps
MindFormers' logger (stdout plus an ``./output/`` directory) quiet. MindSpore and MindFormers are imported inside
the functions that use them: importing this module loads neither.
"""
from __future__ import annotations

import contextlib
import copy
import inspect
import io
import logging
import os
import re
import sys
import tempfile

from ...errors import ModelLoadError
from ...memo import table


_IMPORT_LOG = None
BUILD_LOG: list[tuple[int, str]] = []      # MindFormers' (level, message) warnings and errors of the current build


def import_mindformers():
    """Import mindformers with its import-time logging kept out of stdout and the cwd."""
    global _IMPORT_LOG
    if "mindformers.tools.logger" in sys.modules:
        return
    saved = os.environ.get("LOG_MF_PATH")
    _IMPORT_LOG = tempfile.TemporaryDirectory(prefix="strategist-mflog-")
    os.environ["LOG_MF_PATH"] = _IMPORT_LOG.name
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            import mindformers  # noqa: F401
            from mindformers.tools import logger as _  # noqa: F401
            import mindformers.models  # noqa: F401
    except ModuleNotFoundError as err:
        missing = (err.name or "").split(".")[0]
        if not missing or missing == "mindformers":
            raise ModelLoadError(f"importing mindformers failed: {type(err).__name__}: {err}") from None
        raise ModelLoadError(missing_dependency(missing)) from None
    except Exception as err:
        raise ModelLoadError(f"importing mindformers failed: {type(err).__name__}: {err}") from None
    finally:
        if saved is None:
            os.environ.pop("LOG_MF_PATH", None)
        else:
            os.environ["LOG_MF_PATH"] = saved


# where the packages MindFormers imports come from when PyPI does not serve them
_NOT_ON_PYPI = {"hyper_parallel": "https://gitcode.com/mindspore/hyper-parallel"}


def missing_dependency(module: str) -> str:
    """The one line for a package MindFormers imports at import time that is not installed: which MindFormers needs
    it, the requirement MindFormers declares for it, and the fix.

    >>> missing_dependency("hyper_parallel").split(":")[0]   # doctest: +ELLIPSIS
    'MindFormers ... imports hyper_parallel, which is not installed'
    """
    from importlib.metadata import PackageNotFoundError, requires, version
    try:
        mf, reqs = version("mindformers"), requires("mindformers") or []
    except PackageNotFoundError:
        mf, reqs = "(not installed)", []
    norm = module.replace("_", "-").lower()
    req = next((r.split(";")[0].strip() for r in reqs
                if re.split(r"[\s<>=!~\[;(]", r, maxsplit=1)[0].replace("_", "-").lower() == norm), None)
    head = f"MindFormers {mf} imports {module}, which is not installed"
    if module in _NOT_ON_PYPI:
        return (f"{head}: install {req or norm} from {_NOT_ON_PYPI[module]} (PyPI does not serve it), or use "
                f"MindFormers 1.9.0 on MindSpore 2.9.0, which does not need it "
                f"(pip install mindformers==1.9.0 mindspore==2.9.0)")
    if req:
        return f"{head}: pip install '{req}' (a requirement of MindFormers {mf})"
    return f"{head}: install the package that provides {module}"


class _Collect(logging.Handler):
    def __init__(self, sink: list):
        super().__init__(logging.WARNING)
        self.sink = sink

    def emit(self, record):
        with contextlib.suppress(Exception):
            self.sink.append((record.levelno, record.getMessage().strip()[:600]))


@contextlib.contextmanager
def quiet_logger(sink: list):
    """MindFormers' ``logger`` resolves its handlers per call; point it at a silent one."""
    mflog = sys.modules["mindformers.tools.logger"]
    quiet = logging.getLogger("strategist.frontend.mindformers")
    quiet.handlers[:] = [_Collect(sink)]
    quiet.propagate = False
    quiet.setLevel(logging.WARNING)
    saved = mflog.get_logger
    mflog.get_logger = lambda *a, **k: quiet
    try:
        yield
    finally:
        mflog.get_logger = saved


class _FakeComm:
    """Rank 0 of ``size`` simulated devices: groups are names with rank lists."""

    def __init__(self, size: int):
        self.size = size
        self.groups: dict[str, list[int]] = {}

    def get_rank(self, group=None):
        return 0

    def get_local_rank(self, group=None):
        return 0

    def get_group_size(self, group=None):
        if group in self.groups:
            return len(self.groups[group])
        return self.size

    get_local_rank_size = get_group_size

    def create_group(self, group, rank_ids, options=None):
        self.groups[group] = list(rank_ids)

    def destroy_group(self, group):
        self.groups.pop(group, None)

    def is_initialized(self):
        return True


def _comm_originals():
    import mindspore.communication.management as mgmt
    import mindspore.communication._comm_helper as helper
    return {
        mgmt.get_rank: "get_rank", mgmt.get_local_rank: "get_local_rank",
        mgmt.get_group_size: "get_group_size", mgmt.get_local_rank_size: "get_local_rank_size",
        mgmt.create_group: "create_group", mgmt.destroy_group: "destroy_group",
        helper._is_initialized: "is_initialized",
    }


@contextlib.contextmanager
def _patched_modules(replacements: dict, prefixes=("mindformers", "mindspore.communication",
                                                    "mindspore.ops.operations.comm_ops", "mindspore.parallel")):
    """Replace every module-level reference to an original function (``from x import f`` copies too)."""
    undo = []
    for name, mod in list(sys.modules.items()):
        if mod is None or not name.startswith(prefixes):
            continue
        d = getattr(mod, "__dict__", None)
        if not d:
            continue
        for attr, val in list(d.items()):
            try:
                new = replacements.get(val)
            except TypeError:
                continue
            if new is not None:
                undo.append((d, attr, val))
                d[attr] = new
    try:
        yield
    finally:
        for d, attr, val in reversed(undo):
            d[attr] = val


def _mf_state_modules():
    return [m for n, m in list(sys.modules.items())
            if m is not None and n.startswith("mindformers.parallel_core")]


_CACHE_NAME = re.compile(r"^_?[A-Z][A-Z0-9_]*$")


def _snapshot_mf_globals():
    """Module-level caches of MindFormers' parallel code (group names, parallel_state groups)."""
    snap = []
    for mod in _mf_state_modules():
        for k, v in list(vars(mod).items()):
            if _CACHE_NAME.match(k) and isinstance(v, (dict, list)):
                snap.append((mod, k, v, copy.copy(v)))
            elif _CACHE_NAME.match(k) and k.startswith("_") and (v is None or type(v).__name__ == "ProcessGroup"
                                                                 or isinstance(v, (list, tuple))):
                snap.append((mod, k, v, None))
    return snap


def _restore_mf_globals(snap):
    for mod, k, obj, content in snap:
        if content is None:
            setattr(mod, k, obj)
        else:
            setattr(mod, k, obj)
            if isinstance(obj, dict):
                obj.clear()
                obj.update(content)
            else:
                obj[:] = content


_AP_KEYS = ("parallel_mode", "search_mode", "device_num", "global_rank", "full_batch",
            "enable_alltoall", "pipeline_stages")


def auto_parallel_snapshot() -> dict:
    """The auto-parallel context keys a build touches (tests compare them before/after)."""
    from mindspore import context
    from mindspore.parallel._auto_parallel_context import auto_parallel_context
    out = {k: context.get_auto_parallel_context(k) for k in _AP_KEYS}
    handle = auto_parallel_context()._context_handle
    for getter in ("get_device_num_is_set", "get_global_rank_is_set", "get_full_batch_is_set"):
        if hasattr(handle, getter):
            out[getter] = getattr(handle, getter)()
    from mindspore.parallel import get_algo_parameters
    for k in _ALGO_KEYS:
        with contextlib.suppress(Exception):
            out["algo." + k] = get_algo_parameters(k)
    return out


#: MindFormers' loss sets ``fully_use_devices=False`` in auto_parallel mode (loss_func.py)
_ALGO_KEYS = ("fully_use_devices", "elementwise_op_strategy_follow", "tensor_slice_align_enable",
              "tensor_slice_align_size", "enable_algo_approxi", "algo_approxi_epsilon")


def _restore_auto_parallel(snap: dict) -> None:
    from mindspore import context
    from mindspore.parallel._auto_parallel_context import auto_parallel_context
    ctx = auto_parallel_context()
    handle = ctx._context_handle
    if context.get_auto_parallel_context("parallel_mode") != snap["parallel_mode"]:
        context.set_auto_parallel_context(parallel_mode=snap["parallel_mode"])
    if snap["search_mode"] and context.get_auto_parallel_context("search_mode") != snap["search_mode"]:
        context.set_auto_parallel_context(search_mode=snap["search_mode"])
    for k in ("full_batch", "enable_alltoall"):     # only if changed: setting full_batch raises a flag
        with contextlib.suppress(Exception):
            if context.get_auto_parallel_context(k) != snap[k]:
                context.set_auto_parallel_context(**{k: snap[k]})
    if ctx.get_pipeline_stages() != snap["pipeline_stages"]:
        with contextlib.suppress(Exception):
            handle.set_pipeline_stage_split_num(snap["pipeline_stages"])
    # setting device_num/global_rank raises their *_is_set flags for good: only when they changed
    if ctx.get_device_num() != snap["device_num"]:
        handle.set_device_num(snap["device_num"])
    if ctx.get_global_rank() != snap["global_rank"]:
        handle.set_global_rank(snap["global_rank"])
    from mindspore.parallel import get_algo_parameters, set_algo_parameters
    for k in _ALGO_KEYS:
        if "algo." + k in snap:
            with contextlib.suppress(Exception):
                if get_algo_parameters(k) != snap["algo." + k]:
                    set_algo_parameters(**{k: snap["algo." + k]})


def _patch_missing_sharding_propagation(notes: list[str]):
    """FlashAttention and MoELayer call ``self.sharding_propagation(config)`` without defining it:
    give such classes a no-op (they configure nothing, as MindFormers' mode would if it worked)."""
    from mindspore import nn
    patched = []
    for name, mod in list(sys.modules.items()):
        if mod is None or not name.startswith("mindformers.parallel_core.training_graph"):
            continue
        for obj in list(vars(mod).values()):
            if not (inspect.isclass(obj) and issubclass(obj, nn.Cell) and obj.__module__ == name):
                continue
            if hasattr(obj, "sharding_propagation") or obj in [p for p, _ in patched]:
                continue
            if _calls_sharding_propagation(obj.__dict__.get("__init__")):
                obj.sharding_propagation = _configures_nothing(notes, obj, name)
                patched.append((obj, name))
    return patched


#: ``__init__`` -> whether its source calls ``self.sharding_propagation(``: read once per function (each build in
#: propagation mode asks of every class; a sweep builds once per mesh)
_CALLS_SP = table("mindformers: __init__s calling sharding_propagation", 4096)


def _calls_sharding_propagation(init) -> bool:
    if init is None:
        return False
    hit = _CALLS_SP.get(init)
    if hit is None:
        try:
            src = inspect.getsource(init)
        except (OSError, TypeError):
            src = ""
        hit = _CALLS_SP[init] = "self.sharding_propagation(" in src
    return hit


def _configures_nothing(notes: list[str], cls, module: str):
    """The no-op ``sharding_propagation`` of a class that lacks it; the first call (a model that builds one)
    says so in ``notes``."""
    line = (f"MindFormers bug: {cls.__name__} ({module}) calls self.sharding_propagation() in sharding-propagation "
            f"mode but does not define it (AttributeError); treated as configuring nothing")

    def sharding_propagation(self, *args, **kwargs):
        if line not in notes:
            notes.append(line)
    sharding_propagation.strategist_missing = True
    return sharding_propagation


def undefined_sharding_propagation(cells) -> list[tuple[str, str]]:
    """(class name, source file) of the classes among ``cells`` whose ``sharding_propagation`` is the no-op
    :func:`_patch_missing_sharding_propagation` gave them (the class lacking it, not a subclass inheriting it)."""
    out = set()
    for _, cell in cells:
        for cls in type(cell).__mro__:
            fn = cls.__dict__.get("sharding_propagation")
            if fn is not None:
                if getattr(fn, "strategist_missing", False):
                    with contextlib.suppress(OSError, TypeError):
                        out.add((cls.__name__, os.path.realpath(inspect.getsourcefile(cls))))
                break
    return sorted(out)


@contextlib.contextmanager
def mindformers_world(*, mode: str = "stand_alone", device_num: int = 1, notes: list | None = None):
    """MindFormers' global state for one build, restored on exit.

    ``mode``: ``"stand_alone"``, ``"semi_auto"`` (``semi_auto_parallel``: full ``shard()``) or
    ``"propagation"`` (``auto_parallel`` + ``sharding_propagation``).
    """
    # size: one context manager patching MindFormers' process-wide state and undoing each patch in reverse
    import mindspore as ms
    from mindspore import context
    notes = notes if notes is not None else []
    import_mindformers()
    from mindformers.core.context.build_context import MFContextOperator, Context
    from mindformers.parallel_core.training_graph.device_matrix import LayoutManager, MoeLayoutManager
    from mindformers.parallel_core.training_graph.device_matrix import layout, layout_moe

    cwd = os.getcwd()
    env = dict(os.environ)
    ap = auto_parallel_snapshot()
    saved_mode = ms.get_context("mode")
    saved_mf = MFContextOperator._instance
    saved_ctx = Context._instance
    saved_layouts = [(o, dict(o.__dict__)) for o in (layout, layout_moe)]
    saved_cls = [(c, {k: c.__dict__[k] for k in ("_layout", "_layout_type", "_config") if k in c.__dict__})
                 for c in (LayoutManager, MoeLayoutManager)]
    mf_globals = _snapshot_mf_globals()
    fake = _FakeComm(device_num)
    BUILD_LOG.clear()
    repl = {orig: getattr(fake, meth) for orig, meth in _comm_originals().items()}
    patched_classes = []
    sink = BUILD_LOG
    tmp = tempfile.TemporaryDirectory(prefix="strategist-mf-")
    try:
        stub = object.__new__(MFContextOperator)
        stub.use_legacy = False
        stub.run_mode = "train"
        stub._initialized = True
        MFContextOperator._instance = stub
        for o in (layout, layout_moe):
            for k in ("_layout", "_layout_type", "_config"):
                o.__dict__.pop(k, None)
        os.environ["LOG_MF_PATH"] = tmp.name
        os.environ.setdefault("RANK_ID", "0")
        os.environ["RANK_SIZE"] = str(device_num)
        ms.set_context(mode=ms.GRAPH_MODE)
        if mode == "stand_alone":
            context.set_auto_parallel_context(parallel_mode="stand_alone")
        # device_num stays unset (setting it raises a flag nothing resets): MindSpore's _get_device_num()
        # then asks get_group_size(), which answers device_num here
        elif mode == "semi_auto":
            context.set_auto_parallel_context(parallel_mode="semi_auto_parallel")
        elif mode == "propagation":
            context.set_auto_parallel_context(parallel_mode="auto_parallel", search_mode="sharding_propagation")
            patched_classes = _patch_missing_sharding_propagation(notes)
        else:
            raise ValueError(f"mode {mode!r}")
        with quiet_logger(sink), _patched_modules(repl), contextlib.redirect_stdout(io.StringIO()):
            yield fake
    finally:
        for cls, _ in patched_classes:
            with contextlib.suppress(AttributeError):
                del cls.sharding_propagation
        _restore_mf_globals(mf_globals)
        for o, d in saved_layouts:
            o.__dict__.clear()
            o.__dict__.update(d)
        for c, d in saved_cls:
            for k in ("_layout", "_layout_type", "_config"):
                if k in d:
                    setattr(c, k, d[k])
        MFContextOperator._instance = saved_mf
        Context._instance = saved_ctx
        _restore_auto_parallel(ap)
        if ms.get_context("mode") != saved_mode:
            ms.set_context(mode=saved_mode)
        for k in set(os.environ) - set(env):
            del os.environ[k]
        for k, v in env.items():
            if os.environ.get(k) != v:
                os.environ[k] = v
        if os.getcwd() != cwd:
            os.chdir(cwd)
        tmp.cleanup()
