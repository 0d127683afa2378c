"""MindFormers training models from their YAML configs, and their experts' strategies.

``load_mindformers("mindformers:qwen3/pretrain_qwen3_32b_4k.yaml", layers=2)`` builds the config's
training model (an mcore ``GPTModel``) and extracts its graph with :func:`strategist.frontend.graph.extract`;
``expert_strategies(ref, "dp=2,tp=4")`` reads the strategies the model's authors wrote, from builds at
the requested mesh, as anchors on that graph's operators.

Why the graph is taken at tp=1: MindFormers' parallel linears and embedding are ``ops.Morph`` bodies
written in per-device shapes (``self_define_shard``), so a stand-alone compile only works when the
per-device shape is the global one. Their layouts are read from builds at the requested mesh that
are never compiled (``Primitive.shard`` only records ``in_strategy``/``in_layout`` attributes) and
translated onto the Morph's inlined operators: the body flattens MindFormers' sequence-first
``[S, B, H]`` activations to ``[S*B, H]`` rows for its MatMul, so a Morph layout ``("cp", "dp", "tp")``
becomes ``(("cp", "dp"), "tp")`` on the MatMul.

Building needs MindFormers' world: its context (``use_legacy=False``), communication helpers (rank,
group size, ``create_group``), ``parallel_state`` groups and ``LayoutManager`` caches, and the auto
parallel context. All of it is simulated or set only while building and restored afterwards, and
MindFormers' logger (stdout plus an ``./output/`` directory) is kept quiet: nothing is printed,
nothing is written in the working directory.
"""
from __future__ import annotations

import ast
import contextlib
import copy
import importlib.util
import inspect
import io
import logging
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputSpecError, ModelLoadError, StrategyError
from ..vocab.graph import OpGraph, OptimizerSharding, ShardLayout, TensorSpec
from .graph import extract
from ..vocab.mesh import Mesh
from ..engine.plan import Anchor

PREFIX = "mindformers:"


def is_mindformers_ref(target: str) -> bool:
    """``mindformers:<config>`` or a path to a ``.yaml``/``.yml`` file."""
    return target.startswith(PREFIX) or target.lower().endswith((".yaml", ".yml"))


# --------------------------------------------------------------------------------------
# results


@dataclass
class MfInfo:
    """What was built: the config, the effective model settings, timings, and notes."""

    ref: str
    path: str
    model_type: str
    architecture: str
    train_class: str
    layers: int
    seq: int
    batch: int
    model_config: dict
    parallel_config: dict          # the YAML's, for reference (the graph is built at dp=tp=cp=ep=1)
    inputs: dict[str, TensorSpec] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    build_seconds: float = 0.0
    extract_seconds: float = 0.0
    stripped: int = 0              # trivial tp=1 strategies (primitives' shard() at tp=1) kept out of the graph
    extracted_layers: int = 0      # layers compiled; the rest copies the last one (replicate_layers)


class Experts(dict):
    """Operator name -> :class:`~strategist.engine.propagate.Anchor` read from MindFormers' own code.

    ``notes`` lists what MindFormers breaks or what could not be mapped (the report prints them);
    ``unmapped`` the configured primitives that have no operator in the graph.
    """

    def __init__(self, mode: str, mesh: Mesh):
        super().__init__()
        self.mode = mode
        self.mesh = mesh
        self.notes: list[str] = []
        self.unmapped: list[str] = []
        self.build_seconds = 0.0
        #: propagation mode: (class name, source file) of the model's classes that MindFormers calls
        #: ``sharding_propagation()`` on without defining it (FlashAttention, MoELayer)
        self.undefined: list[tuple[str, str]] = []
        #: what MindFormers' code sets on an operator that cannot take it (read, not anchored; MindSpore refuses
        #: it): (operator, the strategy, the note saying so)
        self.refused: list[tuple[str, Anchor, str]] = []


# --------------------------------------------------------------------------------------
# config


def _site_configs() -> str:
    spec = importlib.util.find_spec("mindformers")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError("mindformers is not installed (pip install mindformers==1.9.0)")
    root = os.path.dirname(list(spec.submodule_search_locations)[0])
    return os.path.join(root, "configs")


def resolve_config(ref: str) -> str:
    """``mindformers:qwen3/pretrain_qwen3_32b_4k.yaml`` -> its path in the installed ``configs`` package."""
    if ref.startswith(PREFIX):
        name = ref[len(PREFIX):].strip()
        base = _site_configs()
        path = os.path.join(base, name)
        if not name.lower().endswith((".yaml", ".yml")) or not os.path.isfile(path):
            avail = sorted(os.path.relpath(os.path.join(d, f), base) for d, _, fs in os.walk(base) for f in fs
                           if f.startswith(("pretrain", "finetune")) and f.endswith(".yaml"))
            raise ModelLoadError(f"no MindFormers config {name!r} (training configs: {', '.join(avail)})")
        return path
    if not os.path.isfile(ref):
        raise ModelLoadError(f"MindFormers config not found: {ref}")
    return ref


def split_model_options(items: list[str] | None) -> dict:
    """``["layers=2", "seq=128", "model.model_config.hidden_size=256"]`` -> load_mindformers keywords."""
    out: dict[str, Any] = {"layers": None, "seq": None, "batch": None, "overrides": {}}
    for item in items or []:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*", key):
            raise InputSpecError(f"bad setting {item!r}: write KEY=VALUE, dotted keys allowed "
                                 f"(e.g. --set hidden_size=256 or --set parallel_config.use_seq_parallel=True)")
        try:
            value = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            value = raw.strip()
        if key in ("layers", "seq", "batch"):
            if not isinstance(value, int) or value < 1:
                raise InputSpecError(f"bad --{key} {raw!r}: a positive integer")
            out[key] = value
        else:
            out["overrides"][key] = value
    return out


def default_batch(ref: str, mesh: Mesh, overrides: dict | None = None) -> tuple[int, str]:
    """The global batch MindFormers trains ``ref`` with on ``mesh``: the config's ``runner_config.batch_size``
    (per data-parallel rank) times the mesh's data-parallel size; and a note saying so."""
    path = resolve_config(ref)
    _import_mindformers()
    with _quiet_logger([]):         # MindFormers' config reader logs to stdout
        cfg = _load_yaml(path, None, None, None, overrides or {})
    per = max(1, int((cfg.get("runner_config") or {}).get("batch_size") or 1))
    dp = _data_parallel(mesh)      # (an axis MindFormers does not know is a warning of the report)
    return per * dp, (f"batch {per * dp}: the config's runner_config.batch_size {per} x data parallel {dp} "
                      f"(--batch N to change)")


def _load_yaml(path: str, layers, seq, batch, overrides: dict, notes: list | None = None):
    """The config with the options applied. ``notes``: what was changed beside them (layer-count keys fitted to
    ``layers``: :func:`_fit_layer_keys`) is appended there."""
    from mindformers.tools.register import MindFormerConfig
    try:
        cfg = MindFormerConfig(os.path.abspath(path))
    except Exception as err:
        raise ModelLoadError(f"reading MindFormers config {path} failed: {type(err).__name__}: {err}") from None
    if cfg.get("model") is None or cfg.model.get("model_config") is None:
        raise ModelLoadError(f"{path} has no model.model_config: not a MindFormers model config")
    mc = cfg.model.model_config
    if cfg.get("parallel_config") is None:
        cfg.parallel_config = MindFormerConfig()
    for key, value in (overrides or {}).items():
        _set_dotted(cfg, key, value)
    _merge_pretrained(cfg, path)
    if layers is not None:
        mc[_layers_key(cfg)] = layers
        for line in _fit_layer_keys(cfg, layers, overrides or {}):
            if notes is not None and line not in notes:
                notes.append(line)
    if seq is not None:
        mc.seq_length = seq
        if (mc.get("max_position_embeddings") or 0) < seq:
            mc.max_position_embeddings = seq
    # pipeline settings are tied to the layer count; the graph is one stage
    mc.offset = 0
    if mc.get("pp_interleave_num") is not None:
        mc.pp_interleave_num = 1
    if cfg.get("recompute_config") is not None:
        cfg.recompute_config.recompute = False
    if cfg.get("parallel_config") is None:
        cfg.parallel_config = MindFormerConfig()
    return cfg


def is_legacy(cfg) -> bool:
    """A MindFormers ``use_legacy=True`` model config: ``model_config.type`` names the config class and
    ``model.arch.type`` the model (glm4's ``ChatGLM2ForConditionalGeneration``), where the mcore models name
    ``model_type`` and ``architectures``. Its layers are ordinary Cells in global shapes, batch-first, configured
    by ``shard()`` in ``__init__`` (fewer of them in sharding-propagation mode)."""
    mc = cfg.model.model_config
    arch = cfg.model.get("arch") or {}
    return bool(mc.get("type")) and bool(arch.get("type")) and not mc.get("model_type")


def _layers_key(cfg) -> str:
    """The model config's layer count: ``num_hidden_layers`` (mcore), ``num_layers`` (legacy ChatGLM2)."""
    mc = cfg.model.model_config
    return "num_layers" if "num_layers" in mc and "num_hidden_layers" not in mc else "num_hidden_layers"


def _merge_pretrained(cfg, path: str) -> None:
    """A finetune config names no model (model_type, architectures, sizes): MindFormers reads them from
    ``pretrained_model_dir``'s Hugging Face ``config.json``, the YAML's (and ``--set``) keys winning
    (``merge_model_config``). Done so here; a placeholder directory is one line naming the fix."""
    import json
    mc = cfg.model.model_config
    if (mc.get("model_type") and mc.get("architectures")) or is_legacy(cfg):
        return
    where = mc.get("pretrained_model_dir") or cfg.get("pretrained_model_dir")
    if not where:
        return                  # _train_class names what is missing
    hf = os.path.join(str(where), "config.json")
    if not os.path.isfile(hf):
        folder = os.path.dirname(os.path.abspath(path))
        same = sorted(os.path.join(folder, f) for f in os.listdir(folder)
                      if f.startswith("pretrain") and f.endswith((".yaml", ".yml")))
        base = os.path.abspath(_site_configs())
        same = [PREFIX + os.path.relpath(f, base) if f.startswith(base + os.sep) else f for f in same]
        alt = f", or use a pretrain config of the family: {', '.join(same)}" if same else ""
        raise ModelLoadError(f"{path} takes its model (model_type, architectures, sizes) from pretrained_model_dir's "
                             f"config.json, and {hf} does not exist: --set pretrained_model_dir=<a Hugging Face model "
                             f"directory> (only its config.json is read){alt}")
    try:
        with open(hf, encoding="utf-8") as fh:
            loaded = json.load(fh)
    except (OSError, ValueError) as err:
        raise ModelLoadError(f"reading {hf} (pretrained_model_dir of {path}) failed: {err}") from None
    if not isinstance(loaded, dict):
        raise ModelLoadError(f"{hf} (pretrained_model_dir of {path}) is not a JSON object")
    for key, value in loaded.items():
        if mc.get(key) is None:
            mc[key] = value


def _config_default(cfg, key: str):
    """``key``'s default in the config class of ``cfg``'s model_type (None if unknown)."""
    from mindformers.tools.register import MindFormerRegister
    try:
        cls = MindFormerRegister.get_cls("config", cfg.model.model_config.get("model_type"))
        param = inspect.signature(cls.__init__).parameters.get(key)
    except Exception:
        return None
    return None if param is None or param.default is inspect.Parameter.empty else param.default


def _fit_layer_keys(cfg, layers: int, overrides: dict) -> list[str]:
    """Model-config keys that count layers, fitted to a smaller ``--layers`` (notes of what changed).

    ``first_k_dense_replace`` (deepseek3, telechat3_moe: the config class defaults to 3) beyond the layer count
    makes MindFormers refuse the build; it becomes ``min(k, layers - 1)`` so at least one MoE layer is built
    (``min(k, 1)`` at 1 layer: the model's first layer, dense). ``moe_layer_freq`` (an int above the layer count,
    or a list of another length) is cut to the layers built. A key the user ``--set`` is left as given.
    """
    mc = cfg.model.model_config
    moe = cfg.get("moe_config") or {}
    given = {k.rsplit(".", 1)[-1] for k in overrides}
    out = []

    def find(key):
        for src in (moe, mc):       # _build: moe_config's keys override model_config's
            if src.get(key) is not None:
                return src, src[key]
        return mc, _config_default(cfg, key)

    src, k = find("first_k_dense_replace")
    if "first_k_dense_replace" not in given and isinstance(k, int) and not isinstance(k, bool) and k > 0:
        cap = layers - 1 if layers >= 2 else layers
        if k > cap:
            src["first_k_dense_replace"] = cap
            if layers >= 2:
                why = (f"{k} dense layers would leave no MoE layer; now {cap} dense, {layers - cap} MoE; "
                       f"--set first_k_dense_replace=N to choose")
            else:
                why = "the one layer built is dense; --set first_k_dense_replace=0 to build an MoE layer instead"
            out.append(f"--layers {layers}: first_k_dense_replace {k} -> {cap} ({why})")
            k = cap
    src, f = find("moe_layer_freq")
    if "moe_layer_freq" not in given:
        if isinstance(f, int) and not isinstance(f, bool) and f > layers:
            src["moe_layer_freq"] = layers
            out.append(f"--layers {layers}: moe_layer_freq {f} -> {layers} (the same layers are MoE)")
        elif isinstance(f, (list, tuple)) and len(f) != layers:
            cut = [0] * k + [1] * (layers - k) if isinstance(k, int) and k > 0 else \
                (list(f[:layers]) + [1] * (layers - len(f)))[:layers]
            src["moe_layer_freq"] = cut
            out.append(f"--layers {layers}: moe_layer_freq of {len(f)} layers -> {cut}")
    return out


def _set_dotted(cfg, key: str, value) -> None:
    """``a.b.c=v`` from the YAML root (every section on the way must exist); a bare key sets the model config
    (or parallel_config if it is there)."""
    parts = key.split(".")
    if len(parts) == 1:
        mc = cfg.model.model_config
        pc = cfg.get("parallel_config") or {}
        target = pc if key in pc and key not in mc else mc
        target[key] = value
        return
    node = cfg
    for i, p in enumerate(parts[:-1]):
        nxt = node.get(p) if isinstance(node, dict) else None
        if nxt is None:
            # a section the config does not have: MindFormers would never read it (a typo, or model_config.X
            # for model.model_config.X) -- refuse rather than build the model as if the setting were taken
            where = ".".join(parts[:i]) or "the config's root"
            have = sorted(str(k) for k, v in node.items() if isinstance(v, dict)) if isinstance(node, dict) else []
            hint = (f"; a model_config key is set bare (--set {parts[-1]}=...) or as model.model_config.{parts[-1]}"
                    if p == "model_config" else "")
            raise InputSpecError(f"bad setting {key}: {where} has no section {p!r} (sections: "
                                 f"{', '.join(have) or 'none'}){hint}")
        if not isinstance(nxt, dict):
            raise InputSpecError(f"bad setting {key}: {p!r} is a value, not a section")
        node = nxt
    node[parts[-1]] = value


# --------------------------------------------------------------------------------------
# MindFormers' world, simulated while building and restored after


_IMPORT_LOG = None
_LOG: list[tuple[int, str]] = []      # MindFormers' (level, message) warnings and errors of the current build


def _import_mindformers():
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
    except Exception as err:
        raise ModelLoadError(f"importing mindformers failed: {type(err).__name__}: {err}") from None
    finally:
        if saved is None:
            os.environ.pop("LOG_MF_PATH", None)
        else:
            os.environ["LOG_MF_PATH"] = saved


class _Collect(logging.Handler):
    def __init__(self, sink: list):
        super().__init__(logging.WARNING)
        self.sink = sink

    def emit(self, record):
        with contextlib.suppress(Exception):
            self.sink.append((record.levelno, record.getMessage().strip()[:600]))


@contextlib.contextmanager
def _quiet_logger(sink: list):
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
            init = obj.__dict__.get("__init__")
            try:
                src = inspect.getsource(init) if init else ""
            except (OSError, TypeError):
                src = ""
            if "self.sharding_propagation(" in src:
                obj.sharding_propagation = _configures_nothing(notes, obj, name)
                patched.append((obj, name))
    return patched


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


def _undefined_sharding_propagation(cells) -> list[tuple[str, str]]:
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
    import mindspore as ms
    from mindspore import context
    notes = notes if notes is not None else []
    _import_mindformers()
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
    _LOG.clear()
    repl = {orig: getattr(fake, meth) for orig, meth in _comm_originals().items()}
    patched_classes = []
    sink = _LOG
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
        with _quiet_logger(sink), _patched_modules(repl), contextlib.redirect_stdout(io.StringIO()):
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


# --------------------------------------------------------------------------------------
# building


def _train_class(cfg):
    from mindformers.tools.register import MindFormerRegister
    mc = cfg.model.model_config
    if is_legacy(cfg):
        # MindFormers' registry and layers ask its context for use_legacy: the world's own stub (mindformers_world,
        # restored on exit) answers True while a legacy model is looked up and built
        from mindformers.core.context.build_context import MFContextOperator
        MFContextOperator._instance.use_legacy = True
        conf_name, arch = mc.get("type"), cfg.model.arch.get("type")
        conf_cls = model_cls = None
        with contextlib.suppress(Exception):
            conf_cls = MindFormerRegister.get_cls("config", conf_name)
        with contextlib.suppress(Exception):
            model_cls = MindFormerRegister.get_cls("models", arch)
        if conf_cls is None:
            raise ModelLoadError(f"MindFormers has no config class {conf_name!r} (model.model_config.type)")
        if model_cls is None:
            raise ModelLoadError(f"MindFormers has no model class {arch!r} (model.arch.type)")
        return conf_cls, model_cls, conf_name, arch
    model_type = mc.get("model_type")
    arch = mc.get("architectures")
    arch = arch[0] if isinstance(arch, (list, tuple)) else arch
    if not model_type or not arch:
        raise ModelLoadError("the config's model.model_config needs model_type and architectures (MindFormers' "
                             "use_legacy=False models), or type and model.arch.type (use_legacy=True models)")
    try:
        conf_cls = MindFormerRegister.get_cls("config", model_type)
    except Exception:
        conf_cls = None
    if conf_cls is None:
        raise ModelLoadError(f"MindFormers has no config class for model_type {model_type!r}")
    try:
        model_cls = MindFormerRegister.get_cls("models", arch)
    except Exception:
        model_cls = None
    if model_cls is None:
        raise ModelLoadError(f"MindFormers has no model class {arch!r}")
    # Qwen3ForCausalLM.__new__ dispatches on run mode; the graph-mode training class sits beside it
    mod = sys.modules[model_cls.__module__]
    train = getattr(mod, "Training" + model_cls.__name__, None)
    if train is None:
        cands = [v for k, v in vars(mod).items() if k.startswith("Training") and inspect.isclass(v)]
        train = cands[0] if len(cands) == 1 else model_cls
    return conf_cls, train, model_type, arch


def _build(cfg, *, dp=1, tp=1, cp=1, ep=1, sp=None):
    """The training network under ``no_init_parameters`` (inside :func:`mindformers_world`)."""
    from mindspore.nn.utils import no_init_parameters
    from mindformers.tools.register import MindFormerConfig
    conf_cls, train_cls, _, _ = _train_class(cfg)
    legacy = is_legacy(cfg)
    mc = copy.deepcopy(cfg.model.model_config)
    mc = mc.to_dict() if hasattr(mc, "to_dict") else dict(mc)
    mc.pop("architectures", None)
    if legacy:
        mc.pop("type", None)
    pc = copy.deepcopy(cfg.parallel_config)
    pc.data_parallel, pc.model_parallel, pc.pipeline_stage = dp, tp, 1
    pc.context_parallel = cp
    pc.expert_parallel = ep
    pc.micro_batch_num = 1
    if sp is not None:
        pc.use_seq_parallel = sp
    if tp == 1:
        pc.use_seq_parallel = False     # MindFormers refuses sequence parallelism without tp
    if "vocab_emb_dp" in pc and not legacy:
        pc.pop("vocab_emb_dp")      # (the legacy layers read it: the embedding data parallel, or split by mp)
    extra = {}
    moe = cfg.get("moe_config")
    if moe:
        extra.update(moe.to_dict() if hasattr(moe, "to_dict") else dict(moe))
    try:
        if legacy:
            pc = pc.to_dict() if hasattr(pc, "to_dict") else dict(pc)
        conf = conf_cls(**{**mc, **extra}, parallel_config=pc)
        with no_init_parameters():
            net = train_cls(conf)
    except (InputSpecError, ModelLoadError):
        raise
    except Exception as err:
        lines = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()]
        msg = lines[0] if lines else ""
        if len(lines) > 1 and "conversion failed" in msg:
            msg = " ".join(lines)[:600]
        errors = [m for lvl, m in _LOG if lvl >= logging.ERROR]
        if "error log" in msg and errors:
            msg = f"{msg} {' | '.join(e.replace(chr(10), ' ') for e in errors[-3:])}"
        raise ModelLoadError(f"building {train_cls.__name__} (dp={dp}, tp={tp}, cp={cp}, ep={ep}) failed: "
                             f"{type(err).__name__}: {msg} (check the config and --set overrides)") from None
    return net


def _inputs(cfg, batch: int) -> dict[str, TensorSpec]:
    mc = cfg.model.model_config
    s = int(mc.get("seq_length") or 4096)   # mcore models take seq_length tokens (input_sliced_sig is legacy-only)
    return {"input_ids": TensorSpec((batch, s), "int32"), "labels": TensorSpec((batch, s), "int32")}


def input_slots(net) -> list[bool]:
    """The positional slots of ``net.construct`` up to ``labels``: True for ``input_ids`` and ``labels``, None
    (False) for the rest (mcore: ``input_ids, position_ids, attention_mask, ..., labels``; legacy ChatGLM2:
    ``input_ids, labels``)."""
    names = list(inspect.signature(net.construct).parameters)
    if "input_ids" not in names or "labels" not in names:
        raise ModelLoadError(f"{type(net).__name__}.construct takes no input_ids and labels: not a MindFormers "
                             f"language-model training class")
    return [n in ("input_ids", "labels") for n in names[:max(names.index("input_ids"), names.index("labels")) + 1]]


def _default_batch(cfg) -> int:
    rc = cfg.get("runner_config") or {}
    pc = cfg.get("parallel_config") or {}
    return max(1, int(rc.get("batch_size") or 1) * int(pc.get("data_parallel") or 1))


_UID = "strategist_uid"


def _clear_strategies(net, keep_self_defined: bool = False) -> int:
    """Delete every strategy attribute from ``net``'s primitives; returns how many primitives had one.

    Used on the tp=1 build (its strategies are trivial, never anchors; and a tuple input's layouts are nested
    tuples graph.extract does not read), after reading the experts' strategies from a build (MindFormers shares
    some primitive objects between builds, so a strategy left on one would reach the next), and by verify's
    child before an anchors file configures the model (``keep_self_defined``: MindFormers' per-device Morph
    bodies keep theirs). (Primitives with identical arguments are told apart by ``graph._owned_primitives``
    during the compile; a distinct attribute per primitive object kept here would stop MindSpore's CSE from
    merging equal primitives' identical calls, as it does in the real compile.)"""
    cleared: set[int] = set()
    for _, cell in net.cells_and_names():
        for prim in _prims_of(cell).values():
            if keep_self_defined and prim.attrs.get("self_define_shard"):
                continue
            for a in ("in_strategy", "out_strategy", "in_layout", "out_layout"):
                if a in prim.attrs:
                    prim.del_prim_attr(a)
                    cleared.add(id(prim))
    return len(cleared)


def _strip_trivial(graph: OpGraph) -> int:
    """The tp=1 build's shard() calls are all-ones: not the experts' strategies, never anchors."""
    n = 0
    for op in graph:
        if op.configured or op.out_strategy is not None or op.out_layout is not None:
            n += 1
            op.in_strategy = op.out_strategy = None
            op.in_layout = op.out_layout = None
    return n


def mf_lazy_inline_cells(net) -> tuple[str, ...]:
    """Paths of ``net``'s sub-Cells whose ``__init__`` carries MindFormers' ``get_lazy_inline`` (``GPTModel``,
    ``LlamaForCausalLM``...), unless their config sets ``disable_lazy_inline``: built in a parallel mode they are
    MindSpore ``@lazy_inline`` Cells, reused func graphs through the parallel passes, whose Parameters get no
    TmpIdentity (:func:`strategist.engine.search.shared_param_users`); ``load_mindformers`` builds stand-alone, where
    ``get_lazy_inline`` skips the decorator. (MindFormers' trainer also sets
    ``disable_lazy_inline`` when ``gradient_accumulation_steps == 1`` and ``pipeline_stage == 1``; verify's child,
    like ``load_mindformers``, builds the network without the trainer.)"""
    from mindformers.version_control import get_lazy_inline
    code = get_lazy_inline(lambda self: None).__code__
    out = []
    for path, c in net.cells_and_names():
        if not path or getattr(getattr(c, "config", None), "disable_lazy_inline", False):
            continue
        if any(getattr(k.__dict__.get("__init__"), "__code__", None) is code for k in type(c).__mro__):
            out.append(path)
    return tuple(out)


def load_mindformers(ref: str, *, layers: int | None = None, seq: int | None = None, batch: int | None = None,
                     overrides: dict | None = None, replicate: bool | None = None,
                     experts_stand_in: bool = False, loss_adds: bool = True) -> tuple[OpGraph, MfInfo]:
    """Build ``ref``'s training model at tp=1 and extract its graph (shapes global, ``[S, B, H]`` inside).

    ``experts_stand_in``: the MoE experts' GroupedMatmuls compiled as MatMul stand-ins
    (:mod:`strategist.frontend.mf_standin`; ``strategist verify`` only: MindSpore cannot propagate through GroupedMatmul).

    ``loss_adds``: the loss's "force redistribution" adds (``logits + 0``, ``labels + 0``; :func:`add_loss_adds`)
    in the graph, as every parallel build has them, configured by MindFormers' own code: ``graph.parallel_only``
    names them and every plan of the graph (advice, propagate, compare, verify) starts from their strategies at its
    mesh (:func:`strategist.engine.plan.parallel_only_anchors`, read by :func:`loss_own_strategies`). Off: the
    stand-alone graph, without them.

    ``replicate``: compile 2 layers and copy the last one for the rest (:func:`replicate_layers`; MindFormers
    disables lazy inline, so each layer compiles separately: 64 qwen3 layers take minutes). Default: on for
    models without MoE (checked op for op against a full extraction), off for MoE configs.

    >>> g, info = load_mindformers("mindformers:qwen3/pretrain_qwen3_32b_4k.yaml", layers=2)  # doctest: +SKIP
    """
    path = resolve_config(ref)
    _import_mindformers()
    notes: list[str] = []
    t0 = time.perf_counter()
    with mindformers_world(mode="stand_alone", device_num=1, notes=notes):
        fitted: list[str] = []          # layer-count keys fitted to --layers: notes for every report
        cfg = _load_yaml(path, layers, seq, batch, overrides or {}, notes=fitted)
        notes.extend(fitted)
        total = int(cfg.model.model_config.get(_layers_key(cfg)) or 0)
        if replicate is None:
            mcfg = cfg.model.model_config
            # the config class's default counts too (deepseek3's YAML leaves n_routed_experts=256 to it)
            replicate = not any(mcfg.get(k) or (k not in mcfg and _config_default(cfg, k))
                                for k in ("num_experts", "n_routed_experts", "num_moe_experts"))
        ext = 2 if replicate and total > 2 else total
        if ext != total:
            cfg = _load_yaml(path, ext, seq, batch, overrides or {})
        conf_cls, train_cls, model_type, arch = _train_class(cfg)
        legacy = is_legacy(cfg)
        # what a mesh must fit (mesh_warnings): the YAML's keys, else the config class's defaults
        fit = {k: cfg.model.model_config.get(k) if cfg.model.model_config.get(k) is not None
               else _config_default(cfg, k)
               for k in ("num_attention_heads", "num_key_value_heads", "num_experts", "n_routed_experts",
                         "num_moe_experts")}
        b = batch or _default_batch(cfg)
        net = _build(cfg)
        net.set_train(True)
        t1 = time.perf_counter()
        specs = _inputs(cfg, b)
        ids, labels = specs["input_ids"], specs["labels"]
        removed = _clear_strategies(net)
        loss_cells = add_loss_adds(net) if loss_adds else []
        undo = None
        if experts_stand_in:
            from .mf_standin import patch_experts
            undo = patch_experts(notes)
        try:
            it = iter((ids, labels))
            graph = extract(net, *[next(it) if used else None for used in input_slots(net)], model=ref)
        finally:
            if undo is not None:
                undo()
        # built stand-alone, MindFormers skipped @lazy_inline; a parallel build keeps it (verify's child: CR_ graphs)
        graph.lazy_inline_cells = mf_lazy_inline_cells(net)
        # MindSpore's parallel pass runs before its CSE: each rotary application computes its own cos/sin table
        graph = unmerge_rotary_tables(graph)
        # compiled as a training network (kTraining): no VirtualOutput, so MindSpore creates its operators in
        # TopoSort order (strategist.engine.propagate.creation_order)
        graph.training = True
        for op in graph:
            op.attrs.pop(_UID, None)
        # the loss's primitives MindFormers configures in __init__ in every parallel build (its x + 0 adds, which
        # only the parallel run has, and its softmax / NLL / reduction primitives): the model's own in every plan
        graph.parallel_only = loss_own_operators(graph, net, loss_cells)
        # and the self_define_shard primitives its Cells configure in __init__ whatever the mode (the MTP layer's
        # Concat): a SelfDefineShardInfo takes part in no propagation, so the plan has its layout from nowhere else
        graph.parallel_only.update({
            op.name: f"MindFormers' {op.cell_class}.{op.instance_name} (self_define_shard): configured in its "
                     f"__init__ in every parallel build"
            for op in graph if op.attrs.get("self_define_shard") and op.name not in graph.parallel_only})
        graph.parallel_only_strategies = loss_own_strategies
        # the sequence the inputs carry (a config without model_config.seq_length takes _inputs' default)
        mark_local_rows(graph, int(ids.shape[1]), b)
        if ext != total:
            base = graph
            graph = replicate_layers(base, total)
            graph.mf_extracted_layers = ext
            graph.mf_base_graph = base          # the compiled layers (compare advises on them)
        if not experts_stand_in:
            # the MoE FFN Morph runs per device on its own tokens: one operator, not a global permutation
            from .mf_morph import collapse_moe_ffn
            base = graph.mf_base_graph
            graph = collapse_moe_ffn(graph)
            if base is not None:
                graph.mf_base_graph = collapse_moe_ffn(base)
        t2 = time.perf_counter()
        for _, msg in _LOG:         # MindFormers' own warnings while building, once each
            line = "MindFormers: " + msg.splitlines()[0][:300]
            if line not in notes:
                notes.append(line)
    # the config's sequence parallelism (norms and residual adds split along S by tp): the advice follows it
    for g in (graph, graph.mf_base_graph):
        if g is not None:
            # how it was built: the experts' strategies of the same config (source diffs read what the
            # model's own methods set at a mesh: expert_strategies)
            g.mf_options = {"layers": layers, "seq": seq, "batch": batch, "overrides": dict(overrides or {})}
            g.mf_batch = b
            g.notes = list(g.notes) + [n for n in fitted if n not in g.notes]
            g.mf_model_config = {k: v for k, v in fit.items() if v is not None}    # (mesh_warnings)
            g.sequence_parallel = bool((cfg.get("parallel_config") or {}).get("use_seq_parallel"))
            g.sequence_first = not legacy       # mcore's [S, B, H]; the legacy layers are batch-first
            g.mf_legacy = legacy
            # the config's parallel optimizer: replicated weights and their optimizer states kept in slices
            g.optimizer_sharding = OptimizerSharding.from_config(_plain(cfg.get("parallel") or {}))
            # the config's enable_alltoall: without it MindSpore writes an all-to-all as AllGather + Split + Concat
            g.enable_alltoall = bool(_plain(cfg.get("parallel") or {}).get("enable_alltoall", False))
    mc = cfg.model.model_config
    info = MfInfo(
        ref=ref, path=path, model_type=model_type, architecture=arch, train_class=train_cls.__name__,
        layers=total, seq=int(ids.shape[1]), batch=b, extracted_layers=ext,
        model_config=_plain(mc), parallel_config=_plain(cfg.get("parallel_config") or {}),
        inputs=specs, notes=notes, build_seconds=t1 - t0, extract_seconds=t2 - t1)
    info.stripped = removed + _strip_trivial(graph)
    return graph, info


def _plain(d):
    if isinstance(d, dict):
        return {str(k): _plain(v) for k, v in d.items()}
    if isinstance(d, (list, tuple)):
        return [_plain(x) for x in d]
    return d if isinstance(d, (int, float, str, bool, type(None))) else str(d)


# --------------------------------------------------------------------------------------
# the experts' strategies


def mesh_warnings(graph: OpGraph, mesh: Mesh) -> list[str]:
    """What MindFormers itself would refuse of ``mesh`` for the model ``graph`` was built from (the tp=1 graph
    takes any mesh): tp not dividing the attention heads, ep not dividing the experts, axes it does not know."""
    mc = getattr(graph, "mf_model_config", None)      # any graph: one not from MindFormers has none
    if not mc:
        return []
    out = []
    extra = [n for n in mesh.names if n not in ("dp", "tp", "cp", "ep")]
    if extra:
        out.append(f"mesh axis {', '.join(extra)} means nothing to MindFormers or to the rules' templates "
                   f"(they place dp, tp, cp, ep): name the axes dp, tp, cp, ep")
    tp, ep = mesh.get("tp", 1), mesh.get("ep", 1)
    heads = mc.get("num_attention_heads")
    kv = mc.get("num_key_value_heads") or heads
    if tp > 1 and isinstance(heads, int) and isinstance(kv, int) and (heads % tp or kv % tp):
        out.append(f"tp={tp} does not divide the attention heads (num_attention_heads {heads}, num_key_value_heads "
                   f"{kv}): MindFormers splits heads by tp and cannot build this model at tp={tp}; pick a tp "
                   f"dividing both")
    experts = next((mc[k] for k in ("num_experts", "n_routed_experts", "num_moe_experts") if mc.get(k)), None)
    if ep > 1 and isinstance(experts, int) and experts % ep:
        out.append(f"ep={ep} does not divide the {experts} experts: MindFormers cannot build this model at ep={ep}; "
                   f"pick an ep dividing {experts}")
    batch = getattr(graph, "mf_batch", None)
    dp = _data_parallel(mesh)
    if isinstance(batch, int) and dp > 1 and batch % dp:
        out.append(f"batch {batch} is not a multiple of the data-parallel size {dp}: MindFormers splits the batch by "
                   f"it and cannot run this; give --batch a multiple of {dp}")
    return out


def mesh_sizes(mesh: Mesh) -> dict[str, int]:
    """MindFormers' parallel sizes from a mesh: axes dp, tp, cp, ep (others are an error)."""
    known = {"dp", "tp", "cp", "ep"}
    extra = [n for n in mesh.names if n not in known]
    if extra:
        raise InputSpecError(f"mesh axes {', '.join(extra)} mean nothing to MindFormers: use dp, tp, cp (and ep)")
    return {"dp": _data_parallel(mesh), "tp": mesh.get("tp", 1), "cp": mesh.get("cp", 1), "ep": mesh.get("ep", 1)}


def _data_parallel(mesh: Mesh) -> int:
    """MindFormers' data_parallel on ``mesh``: dp times ep (ep splits the data-parallel devices)."""
    return mesh.get("dp", 1) * mesh.get("ep", 1)


def _prims_of(cell):
    from mindspore.ops.primitive import Primitive
    d = dict(getattr(cell, "_primitives", {}) or {})
    d.update({k: v for k, v in vars(cell).items() if k not in d})
    return {k: v for k, v in d.items() if isinstance(v, Primitive)}


def _strategy_of(prim):
    a = prim.attrs
    ins = a.get("in_layout") or a.get("in_strategy")
    if ins is None:
        return None
    return {"in_strategy": a.get("in_strategy"), "out_strategy": a.get("out_strategy"),
            "in_layout": a.get("in_layout"), "out_layout": a.get("out_layout")}


def _to_layouts(v) -> tuple[ShardLayout, ...] | None:
    if v is None:
        return None
    flat = []
    for d in v:      # a tuple input (Concat's list) carries a tuple of layouts: its slots are flattened
        flat.extend(d if isinstance(d, tuple) else (d,))
    if not all(isinstance(d, dict) for d in flat):
        return None
    from .proto import shard_layouts
    return shard_layouts(tuple(flat))


def _tensor_inputs(op) -> list:
    return [x for x in op.inputs if x.spec is not None and x.kind != "const"] or \
        [x for x in op.inputs if x.spec is not None]


def _merge_rows(lay: ShardLayout) -> ShardLayout:
    """``[S, B, h]`` -> ``[S*B, h]``: the leading dimensions' axes, outer first, become one dimension."""
    lead = tuple(a for t in lay.tensor_map[:-1] for a in t)
    return ShardLayout(lay.device_matrix, lay.alias_name, (lead, lay.tensor_map[-1]))


def _param_reader(graph: OpGraph):
    """Parameter name -> operators reading it directly or through Cast/Load-like unary ops."""
    readers: dict[str, list] = {}
    for op in graph:
        for slot, x in enumerate(op.inputs):
            if x.kind == "param":
                readers.setdefault(x.ref, []).append((op, slot))
    out: dict[str, list] = {}
    for pname, lst in readers.items():
        res = []
        for op, slot in lst:
            res.append((op, slot))
            if op.type == "Cast":
                for e in graph.out_edges(op.name):
                    res.append((graph.op(e.dst), e.in_slot))
        out[pname] = res
    return out


#: the primitives MindFormers' CrossEntropyLoss (legacy ``core/loss/loss.py`` and ``parallel_core/training_graph/
#: loss_func.py``) and its ``_LogSoftmax`` / ``_NLLLoss`` configure in ``__init__`` in every semi/auto parallel mode,
#: with no ``shard()`` / ``sharding_propagation()`` method to take them back: a real sharding-propagation run has
#: their strategies whatever else is configured. (loss cell's attribute) -> {primitive attribute: what it computes}
_LOSS_OWN = {
    "": {"add": "logits + 0", "add_label": "labels + 0", "sum2": "the masked loss's sums",
         "mul2": "loss * mask", "relu": "relu"},
    "_log_softmax": {"max": "the logits' max", "sub": "logits - max, - log(sum exp)", "exp": "exp",
                     "sum": "sum of exp", "log": "log", "onehot": "the labels' one-hot"},
    "_nllloss": {"mul": "log-softmax * one-hot", "neg": "negation", "sum": "the per-token loss sum"},
}


def _loss_own_prims(net, loss_cells) -> list[tuple[str, object, str, object, str]]:
    """(cell path, cell, attribute, primitive, what it computes) for each primitive of :data:`_LOSS_OWN` the loss
    Cells at ``loss_cells`` (:func:`add_loss_adds`) and their softmax / NLL sub-Cells hold."""
    cells = dict(net.cells_and_names())
    out = []
    for path in loss_cells:
        for sub, prims in _LOSS_OWN.items():
            sub_path = f"{path}.{sub}" if sub else path
            cell = cells.get(sub_path)
            for attr, what in (prims.items() if cell is not None else ()):
                prim = getattr(cell, attr, None)
                if prim is not None and hasattr(prim, "attrs"):
                    out.append((sub_path, cell, attr, prim, what))
    return out


def loss_own_operators(graph: OpGraph, net, loss_cells) -> dict[str, str]:
    """``graph.parallel_only``: the operators of the loss's own configured primitives (:data:`_LOSS_OWN`; the
    x + 0 adds only a parallel build has, :func:`add_loss_adds`), each with where its strategy comes from."""
    prims = {(p, a): f"{type(cell).__name__}.{a} ({what})" for p, cell, a, _, what in _loss_own_prims(net, loss_cells)}
    return {op.name: f"MindFormers' {prims[op.cell_path, op.instance_name]}: configured in its __init__ in every "
                     f"parallel build"
            for op in graph if (op.cell_path, op.instance_name) in prims}


def add_loss_adds(net) -> list[str]:
    """MindFormers' CrossEntropyLoss (legacy ``core/loss`` and ``parallel_core``) creates ``self.add`` and
    ``self.add_label`` (``x + 0`` on the logits and the labels, ``keep_alive``) and calls them only in a semi/auto
    parallel mode; a stand-alone build has neither. They are configured there (``((dp, mp), ())``,
    ``((dp,), ())``), so they steer MindSpore's propagation: a configured operator ends every other configured
    operator's BFS (glm4: ReduceMax's BFS stops at the logits' add, and the unconfigured output layer is decided
    forward from the final norm, ((8, 1), (1, 1)); without the add strategist decided it backward from the
    ReduceMax, ((1, 1), (8, 1))). Puts them in a stand-alone build (unconfigured: :func:`loss_own_strategies`
    reads their strategies at a mesh); returns the paths of the loss Cells that got them."""
    from mindspore import ops as P
    paths = []
    for path, cell in net.cells_and_names():
        if getattr(cell, "enable_force_redistribute", None) is False and not hasattr(cell, "add_label"):
            prim = getattr(sys.modules.get(type(cell).__module__), "AddExt", None) or P.Add
            cell.add = prim().add_prim_attr("keep_alive", True)
            cell.add_label = prim().add_prim_attr("keep_alive", True)
            cell.enable_force_redistribute = True
            paths.append(path)
    return paths


#: (model, build options, mesh, operators) -> (anchors, notes): loss_own_strategies' readings
_LOSS_OWN_STRATEGIES: dict = {}


def _loss_own_key(graph: OpGraph, mesh: Mesh) -> tuple:
    import json
    opts = json.dumps(graph.mf_options or {}, sort_keys=True, default=str)
    return graph.model, opts, str(mesh), tuple(sorted(graph.parallel_only or ()))


def loss_own_strategies(graph: OpGraph, mesh: Mesh) -> tuple[dict[str, Anchor], list[str]]:
    """The strategies MindFormers' CrossEntropyLoss gives its own primitives (``graph.parallel_only``,
    :data:`_LOSS_OWN`) at ``mesh`` -- e.g. ``self.add.shard(((dp * cp, mp), ()))``,
    ``self.add_label.shard(((dp * cp,), ()))``, ``self.sum2.shard(((1,),))`` in ``__init__`` in any semi/auto
    parallel mode, with the dp/mp of the loss's own parallel config (ChatGLM2's is vocabulary-parallel:
    ``((1, dp*cp*mp), ())``) -- read from the model built at the mesh (:func:`expert_strategies`, once per
    model, options and mesh), origin :data:`~strategist.engine.plan.PARALLEL_ONLY`. Returns (anchors, notes); a
    mesh MindFormers cannot build leaves them unconfigured, with a note."""
    import dataclasses
    from ..engine.plan import PARALLEL_ONLY
    from ..errors import StrategistError
    key = _loss_own_key(graph, mesh)
    if key not in _LOSS_OWN_STRATEGIES:
        names = key[3]
        try:
            ex = expert_strategies(graph.model, mesh, "propagation", graph=graph,
                                   **(graph.mf_options or {}))
            got = {n: dataclasses.replace(ex[n], origin=PARALLEL_ONLY) for n in names if n in ex}
            miss = [n for n in names if n not in got]
            notes = [f"MindFormers configures no strategy strategist could read on {', '.join(miss)} at "
                     f"{mesh}: left to propagation"] if miss else []
        except StrategistError as err:
            got, notes = {}, [f"MindFormers' loss primitives left to propagation: their strategies at {mesh} "
                              f"could not be read ({str(err).splitlines()[0]})"]
        _LOSS_OWN_STRATEGIES[key] = (got, notes)
    got, notes = _LOSS_OWN_STRATEGIES[key]
    return dict(got), list(notes)


def note_loss_own_strategies(graph: OpGraph, mesh: Mesh, experts) -> None:
    """Record the loss adds' strategies from experts read at ``mesh`` (either mode: MindFormers configures the adds
    in ``__init__`` alike), so that :func:`loss_own_strategies` builds nothing more. :func:`expert_strategies` calls
    it on every reading."""
    import dataclasses
    from ..engine.plan import PARALLEL_ONLY
    names = graph.parallel_only
    if not names or experts is None:
        return
    key = _loss_own_key(graph, mesh)
    if key not in _LOSS_OWN_STRATEGIES and all(n in experts for n in names):
        _LOSS_OWN_STRATEGIES[key] = ({n: dataclasses.replace(experts[n], origin=PARALLEL_ONLY) for n in names}, [])


def _validate(graph: OpGraph, anchor: Anchor, n: int):
    from ..engine.ops import shard, shard_layout
    op = graph.op(anchor.op)
    if anchor.layouts is not None:
        shard_layout(op, tuple(anchor.layouts), n, anchor.out_layouts)
    else:
        shard(op, anchor.strategy, n, anchor.out_strategy)


def expert_strategies(ref: str, mesh: Mesh | str, mode: str = "semi_auto", *, graph: OpGraph | None = None,
                      layers: int | None = None, seq: int | None = None, batch: int | None = None,
                      overrides: dict | None = None) -> Experts:
    """The strategies MindFormers' own code sets at ``mesh``, as anchors on the tp=1 graph's operators.

    ``mode``: ``"semi_auto"`` (every ``shard()``) or ``"propagation"`` (the ``sharding_propagation()``
    anchors). Nothing is compiled: the strategies are the primitives' attributes after construction.
    """
    mesh = Mesh.parse(mesh) if isinstance(mesh, str) else mesh
    if mode not in ("semi_auto", "propagation"):
        raise InputSpecError(f"mode {mode!r}: semi_auto or propagation")
    if graph is None:
        graph, _ = load_mindformers(ref, layers=layers, seq=seq, batch=batch, overrides=overrides)
    sizes = mesh_sizes(mesh)
    n = sizes["dp"] * sizes["tp"] * sizes["cp"]
    if n != mesh.size:
        raise InputSpecError(f"mesh {mesh} has {mesh.size} devices but MindFormers' dp*cp*tp = {n} "
                             f"(ep splits the data-parallel devices, it adds none)")
    out = Experts(mode, mesh)
    path = resolve_config(ref)
    # a replicated graph (load_mindformers): read the experts at the extracted layer count, copy the last layer's
    ext = graph.mf_extracted_layers
    total = max((_layer_of(op.cell_path) or 0 for op in graph), default=0) + 1
    t0 = time.perf_counter()
    with mindformers_world(mode=mode, device_num=n, notes=out.notes):
        cfg = _load_yaml(path, ext or layers, seq, batch, overrides or {})
        net = _build(cfg, **sizes)
        cells = list(net.cells_and_names())
        if mode == "propagation":
            out.undefined = _undefined_sharding_propagation(cells)
        found = []
        for cpath, cell in cells:
            for attr, prim in _prims_of(cell).items():
                st = _strategy_of(prim)
                if st is not None:
                    found.append((cpath, cell, attr, prim, st))
        # MindFormers shares some primitive objects between builds (TopKRouter's gating activation is one
        # object for every router of every model): a strategy left on it would reach the next build, where
        # the mode calls no shard() (a propagation build read the router's semi_auto strategy). Leave none.
        _clear_strategies(net)
    out.build_seconds = time.perf_counter() - t0
    readers = _param_reader(graph)
    by_key: dict[tuple[str, str], list] = {}
    for op in graph:
        by_key.setdefault((op.cell_path, op.instance_name), []).append(op)
    for cpath, cell, attr, prim, st in found:
        where = f"{cpath}.{attr}" if cpath else attr
        if prim.name == "Morph":
            _morph(graph, readers, cell, cpath, attr, st, out, where)
            continue
        ops = by_key.get((cpath, attr)) or _by_params(graph, readers, cell, prim.name)
        if not ops:
            out.unmapped.append(where)
            continue
        for op in ops:
            _add(graph, out, op, st, where, n)
    if ext and total > ext:
        copied = replicate_anchors(dict(out), graph, ext, total)
        out.clear()
        out.update(copied)
        t = ext - 1
        out.unmapped += [_shift(w, t, t, k - t) for k in range(ext, total) for w in list(out.unmapped)
                         if _layer_of(w) == t]
    # the loss's own primitives are configured alike in either mode: read here, loss_own_strategies builds nothing more
    note_loss_own_strategies(graph, mesh, out)
    return out


def _by_params(graph, readers, cell, op_type):
    """Operators of ``op_type`` reading one of ``cell``'s own parameters (Morph bodies lose their scope)."""
    res = []
    for p in cell.get_parameters(expand=False) if hasattr(cell, "get_parameters") else []:
        for op, _ in readers.get(p.name, []):
            if op.type == op_type and not op.cell_path and op not in res:
                res.append(op)
    return res


def _origin(out: Experts) -> str:
    from ..engine.plan import SEMI_AUTO
    return SEMI_AUTO if out.mode == "semi_auto" else "mindformers"


def _add(graph, out: Experts, op, st, where, n, in_layouts=None, out_layouts=None):
    """Record ``op``'s expert strategy, adapted to the tp=1 graph where it must be (each adaptation exact)."""
    if op.type == "Cast":
        return      # MindSpore ignores Cast strategies
    if in_layouts is not None:
        anchor = Anchor(op.name, None, tuple(in_layouts), None, tuple(out_layouts) if out_layouts else None,
                        origin=_origin(out))
    elif st.get("in_layout") is not None:
        lays = _to_layouts(st["in_layout"])
        if lays is None:
            out.notes.append(f"{where}: layouts for tuple inputs on {op.name} ({op.type}); skipped")
            return
        anchor = Anchor(op.name, None, lays, None, _to_layouts(st.get("out_layout")), origin=_origin(out))
    else:
        rows = tuple(tuple(r) for r in st["in_strategy"])
        outs = tuple(tuple(r) for r in st["out_strategy"]) if st.get("out_strategy") else None
        anchor = Anchor(op.name, rows, None, outs, None, origin=_origin(out))
    first = None
    for cand, how in _variants(op, anchor):
        try:
            _validate(graph, cand, n)
        except StrategyError as err:
            first = first or err
            continue
        except Exception as err:  # an operator strategist has no rule for
            first = first or err
            continue
        if how:
            out.notes.append(f"{where}: on {op.name} {how}")
        out[op.name] = cand
        return
    why = str(first).removeprefix(f"{op.name} ({op.type}) ").removeprefix(f"{op.name} ({op.type}): ")
    note = f"{where}: {op.name} ({op.type}) cannot take {anchor.describe()}: {why}; skipped"
    out.notes.append(note)
    out.refused.append((op.name, anchor, note))


def _variants(op, a: Anchor):
    """The strategy as written, then exact adaptations to the tp=1 graph's shapes:
    rows for scalar inputs dropped; a split of a dimension that is 1 here (MindFormers' MoE reshapes
    tokens to ``[dp*tp, -1, H]``, the tp=1 graph to ``[1, -1, H]``) folded into the next dimension,
    outermost first, which is the same row-major partition; last, without the output strategy."""
    ins = _tensor_inputs(op)
    specs = [x for x in op.inputs if x.spec is not None]
    yield a, ""
    rows = a.layouts if a.layouts is not None else a.strategy
    seen = [a]
    folded = _fold_units(a, specs if len(rows) == len(specs) else ins)
    if folded is not None:
        seen.append(folded)
        yield folded, "splits of size-1 dimensions folded into the next dimension (MoE token reshape at tp=1)"
    k = len(ins)
    if rows is not None and len(rows) > k:
        if len(rows) == len(op.inputs):
            kept = [r for r, x in zip(rows, op.inputs) if x.kind != "const" and x.spec is not None]
        else:
            kept = list(rows[:k])
        t = _replace(a, kept)
        seen.append(t)
        yield t, f"rows for scalar inputs dropped ({len(rows)} -> {len(kept)})"
        tf = _fold_units(t, ins)
        if tf is not None:
            seen.append(tf)
            yield tf, (f"rows for scalar inputs dropped ({len(rows)} -> {len(kept)}), splits of size-1 "
                       f"dimensions folded into the next dimension")
    for v in seen:
        if v.out_layouts is not None or v.out_strategy is not None:
            yield Anchor(v.op, v.strategy, v.layouts, None, None, v.origin), "output strategy dropped"
    if op.type == "Embedding" and a.layouts is not None:
        # MindSpore's EmbeddingInfo refuses split indices; MindFormers' Morph runs the lookup per device on
        # its own slice of ids (dp, cp), which the inlined operator cannot say: the table's split stays
        ids = a.layouts[0]
        whole = ShardLayout(ids.device_matrix, ids.alias_name, tuple(() for _ in ids.tensor_map))
        yield (Anchor(a.op, None, (whole,) + tuple(a.layouts[1:]), None, None, a.origin),
               "the ids' split dropped (MindSpore's Embedding refuses split indices; MindFormers' Morph "
               "looks up each device's own ids)")


def _replace(a: Anchor, rows) -> Anchor:
    if a.layouts is not None:
        return Anchor(a.op, None, tuple(rows), None, a.out_layouts, a.origin)
    return Anchor(a.op, tuple(rows), None, a.out_strategy, None, a.origin)


def _fold_units(a: Anchor, ins) -> Anchor | None:
    changed = False
    rows = []
    src = a.layouts if a.layouts is not None else a.strategy
    for r, x in zip(src, ins):
        shape = x.spec.shape
        if a.layouts is not None:
            tm = [list(t) for t in r.tensor_map]
            if len(tm) != len(shape):
                rows.append(r)
                continue
            for d in range(len(tm) - 1):
                if shape[d] == 1 and tm[d]:
                    tm[d + 1] = tm[d] + tm[d + 1]
                    tm[d] = []
                    changed = True
            rows.append(ShardLayout(r.device_matrix, r.alias_name, tuple(tuple(t) for t in tm)))
        else:
            st = list(r)
            if len(st) != len(shape):
                rows.append(tuple(r))
                continue
            for d in range(len(st) - 1):
                if shape[d] == 1 and st[d] > 1:
                    st[d + 1] *= st[d]
                    st[d] = 1
                    changed = True
            rows.append(tuple(st))
    if not changed:
        return None
    rows += list(src[len(rows):])
    return Anchor(a.op, None if a.layouts is not None else tuple(rows),
                  tuple(rows) if a.layouts is not None else None, None, None, a.origin)


_MOE_LAYERS = ("MoELayer",)


def mark_local_rows(graph: OpGraph, seq: int, batch: int) -> int:
    """Mark the Reshapes between sequence-first ``[S, B, ...]`` and ``[S*B, ...]`` rows (what the
    Morph bodies of MindFormers' linears do to their input and output) as device-local: in the real
    model each device reshapes its own ``[S/cp, B/dp, ...]`` slice, so a batch split stays a batch split
    with no communication. On the inlined tp=1 graph the engine then carries the leading dims' device
    axes into the rows and back (:func:`strategist.engine.propagate.local_rows_layout`) instead of treating
    the rows as one contiguous block. Returns how many Reshapes were marked."""
    if seq <= 1 or batch <= 1:
        return 0
    n = 0
    for op in graph:
        if op.type != "Reshape" or not op.inputs or op.inputs[0].spec is None or not op.outputs \
                or op.outputs[0] is None:
            continue
        a, b = tuple(op.inputs[0].spec.shape), tuple(op.outputs[0].shape)
        if (a[:2] == (seq, batch) and b[:1] == (seq * batch,)) or (a[:1] == (seq * batch,) and b[:2] == (seq, batch)):
            op.attrs["strategist_local_rows"] = (seq, batch)
            n += 1
        elif op.cell_class in _MOE_LAYERS and a[2:] == b[2:] and (
                (a[:2] == (batch, seq) and b[:2] == (1, seq * batch)) or (a[:2] == (1, seq * batch) and b[:2] == (batch, seq))):
            # the MoE layer's local_reshape_permute / unpermute Morphs: batch-first [B, S, h] <-> tokens [1, B*S, h]
            op.attrs["strategist_local_rows"] = (batch, seq, "batch_first")
            n += 1
    return n


#: The rotary table operators of MindFormers' ``ApplyRotaryPosEmb.construct``: ``cos(mul_mscale(freqs, m))`` and
#: ``sin(mul_mscale(freqs, m))`` (each cast to ``rotary_dtype`` where that differs), computed afresh at every call.
_ROTARY_CELLS = ("ApplyRotaryPosEmb",)
_ROTARY_TABLE_OPS = ("Muls", "Cos", "Sin")


def unmerge_rotary_tables(graph: OpGraph) -> OpGraph:
    """Give every reader of an ``ApplyRotaryPosEmb`` cos/sin table its own chain of table operators, as MindSpore's
    parallel pass sees them.

    ``ApplyRotaryPosEmb.construct`` calls ``self.mul_mscale(freqs, m_scale)`` twice (once for ``cos``, once for
    ``sin``) and the attention calls the Cell twice (q and k) on the same ``freqs``: 4 Muls, 2 Cos, 2 Sin per
    layer. opt_a runs ``auto_parallel`` before its ``cse`` (pipeline/jit/ps/pass.cc GetOptPassesA), so the
    step_parallel_begin graph holds all of them (verify's child, GLOG_v=1: MulsInfo32 CosInfo33 MulInfo34 ...
    MulsInfo38 SinInfo39 MulInfo40 ... MulsInfo48 CosInfo49 ... MulsInfo54 SinInfo55 for layer 0), while the
    stand-alone export compile strategist reads runs the CSE: one Muls, one Cos, one Sin per layer. The copies
    matter: the rotary table's Reshape (``RotaryEmbedding``'s ``[S, 128] -> [S, 1, 1, 128]``) builds its swc list
    over every consumer's candidates (``ReshapeInfo::GenerateStrategyCosts``: 10 own + 8 Muls x 10 = 90 entries
    on qwen3 at 2 layers), and its libstdc++ ``std::sort`` over the 48 tied zero-communication entries lands on
    index 64 (output ``(2, 1, 1, 1)`` over ``[2, 4]``), where 2 Muls x 10 + 10 land on ``(8, 1, 1, 1)``.
    Each reader (the ``mul`` taking cos or sin) gets a private copy of the chain back to the first operator
    outside it, in reading order; the first copy keeps the operator's name, later ones take ``#k``."""
    import dataclasses
    ops = list(graph)
    by_name = {op.name: op for op in ops}
    merged: set = set()
    for op in ops:         # the table chain: the Cell's Muls/Cos/Sin, and Casts of them
        if op.cell_class not in _ROTARY_CELLS:
            continue
        feeds = [x.ref for x in op.inputs if x.kind == "op"]
        if op.type in _ROTARY_TABLE_OPS or (op.type == "Cast" and feeds and all(f in merged for f in feeds)):
            merged.add(op.name)
    readers: dict = {}
    for op in ops:
        for x in op.inputs:
            if x.kind == "op" and x.ref in merged:
                readers.setdefault(x.ref, set()).add(op.name)
    if not any(len(r) > 1 for r in readers.values()) or \
            any(x.kind == "op" and x.ref in merged for x in graph.outputs):
        return graph
    names = {op.name for op in ops if op.name not in merged}
    used: dict = {}

    def fresh(name: str) -> str:
        base = name.split("#")[0]
        k = used.get(base, 0)
        while True:
            cand = base if k == 0 else f"{base}#{k}"
            k += 1
            if cand not in names:
                used[base] = k
                names.add(cand)
                return cand

    out: list = []

    def own(inputs) -> tuple:
        """``inputs`` with each merged operator read replaced by a private copy of its chain."""
        return tuple(dataclasses.replace(x, ref=private(x.ref)) if x.kind == "op" and x.ref in merged else x
                     for x in inputs)

    def private(name: str) -> str:
        """A new copy of merged operator ``name`` and of the merged chain it reads; its name."""
        src = by_name[name]
        # each copy is one node of MindSpore's parallel graph: not several (graph._mark_copies counted the merged one)
        attrs = {k: v for k, v in src.attrs.items() if k != "strategist_copies"}
        new = dataclasses.replace(src, name=fresh(src.name), inputs=own(src.inputs), attrs=attrs)
        out.append(new)
        return new.name

    for op in ops:
        if op.name in merged:
            continue
        if any(x.kind == "op" and x.ref in merged for x in op.inputs):
            op = dataclasses.replace(op, inputs=own(op.inputs))
        out.append(op)
    # positions again (the copies took their source's): as replicate_layers numbers a replicated graph
    out = [op if op.topo_index == i else dataclasses.replace(op, topo_index=i) for i, op in enumerate(out)]
    return graph.derived(out)


def global_rows_graph(graph: OpGraph) -> OpGraph:
    """``graph`` as MindSpore itself sees the inlined Morph bodies (verify's child compiles them as
    global operators): a copy without :func:`mark_local_rows`' marks, so each ``[S, B] <-> [S*B]``
    Reshape is an ordinary Reshape, and then with the Reshapes MindSpore's optimizer folds once the Morph
    boundaries are gone (:func:`fold_reshapes`). ``graph`` itself when nothing is marked."""
    from ..engine.search import local_rows_marked
    if not local_rows_marked(graph):
        return graph
    g = copy.deepcopy(graph)
    for op in g:
        op.attrs.pop("strategist_local_rows", None)
    return fold_reshapes(g)


def fold_reshapes(graph: OpGraph) -> OpGraph:
    """MindSpore's ``ReshapeEliminater`` (frontend/optimizer/irpass/reshape_eliminate.h), run by the
    optimizer before the parallel passes: ``Reshape(Reshape(x, s1), s2)`` becomes ``Reshape(x, s2)``
    (TwoReshapeEliminater; the inner one goes when nothing else reads it) and a Reshape to its input's own
    shape is dropped (ReshapeSameShapeEliminater). The exported stand-alone graph has none of these left,
    except across a MindFormers Morph, whose body is its own graph there; verify's child inlines the bodies
    and MindSpore folds them (qwen3: linear_qkv's ``[S*B, N] -> [S, B, N]`` and the ``[S, B, n, d]`` split
    Reshape are one ``ReshapeInfo``, the q_layernorm round trip ``[S, B, n, d] -> [S, B, h] -> [S, B, n, d]``
    is gone: Cast follows Cast). ``graph`` itself when there is nothing to fold."""
    import dataclasses
    ops = list(graph)
    by_name: dict = {}
    alias: dict = {}            # a dropped same-shape Reshape -> its input
    changed = False

    def sub(x):
        return alias.get(x.ref, x) if x.kind == "op" and x.index == 0 else x

    for op in ops:
        ins = tuple(sub(x) for x in op.inputs)
        if op.type == "Reshape" and ins and ins[0].kind == "op" and by_name[ins[0].ref].type == "Reshape":
            ins = (by_name[ins[0].ref].inputs[0],) + ins[1:]
        if ins != op.inputs:
            op = dataclasses.replace(op, inputs=ins)
            changed = True
        if op.type == "Reshape" and ins and ins[0].spec is not None and op.outputs and op.outputs[0] is not None \
                and tuple(ins[0].spec.shape) == tuple(op.outputs[0].shape):
            alias[op.name] = ins[0]
            changed = True
            continue
        by_name[op.name] = op
    if not changed:
        return graph
    outputs = [sub(x) for x in graph.outputs]
    read = {x.ref for op in by_name.values() for x in op.inputs if x.kind == "op"}
    read |= {x.ref for x in outputs if x.kind == "op"}
    kept = [op for op in by_name.values() if op.type != "Reshape" or op.name in read]
    return graph.derived(kept, outputs)


def _morph(graph, readers, cell, cpath, attr, st, out: Experts, where):
    """Translate a Morph's layout onto its inlined compute operator (MatMul / Embedding)."""
    lays = _to_layouts(st.get("in_layout"))
    outs = _to_layouts(st.get("out_layout"))
    n = out.mesh.size
    if lays is None:
        out.notes.append(f"{where}: Morph with a tuple strategy; not translated")
        return
    from .mf_morph import MORPH_FFN, ffn_name
    ffn = graph.op(ffn_name(cpath)) if ffn_name(cpath) in graph else None
    if ffn is not None and ffn.type == MORPH_FFN and len(lays) >= 4:
        # the MoE dispatcher + experts (strategist.frontend.mf_morph): tokens over the tokens' axes; the expert weights
        # whole (the operator's rule: their ep split is the Morph's own all-to-all, not a layout strategist prices)
        tok = tuple(a for t in lays[0].tensor_map for a in t)
        dm = lays[0].device_matrix
        exp = [a for a in (lays[3].tensor_map[0] if lays[3].tensor_map else ()) if dm[len(dm) - 1 - a] > 1]
        if exp:
            out.notes.append(f"{where}: the experts' split by ep is not carried onto {ffn.name} (its rule keeps the "
                             f"expert weights whole)")
        dims = ffn.attrs.get("strategist_token_dims", ())
        ins = []
        for k, x in enumerate(ffn.inputs):
            tm = [()] * len(x.spec.shape)
            if dims[k] is not None:
                tm[dims[k]] = tok
            ins.append(ShardLayout(dm, lays[0].alias_name, tuple(tm)))
        _add(graph, out, ffn, st, where, n, tuple(ins), None)
        return
    weight = getattr(cell, "weight", None)
    wname = getattr(weight, "name", None)
    if weight is None or wname is None or len(lays) < 2:
        out.notes.append(f"{where}: Morph of {type(cell).__name__} (layout-only reshape or dispatcher body) "
                         f"has no single operator to carry its layout; not translated")
        return
    targets = [(op, slot) for op, slot in readers.get(wname, [])
               if op.type in ("MatMul", "BatchMatMul", "Embedding", "Gather", "GatherV2")]
    if not targets:
        out.unmapped.append(where)
        return
    for op, slot in targets:
        if op.type in ("MatMul", "BatchMatMul"):
            if slot != 1 or len(lays[0].tensor_map) < 2:
                out.notes.append(f"{where}: {op.name} reads the weight in slot {slot}; not translated")
                continue
            x = _merge_rows(lays[0])
            ins = (x, lays[1])
            o = _merge_rows(outs[0]) if outs else None
            natural = (x.tensor_map[0], lays[1].tensor_map[0] if getattr(cell, "transpose_b", True) else
                       lays[1].tensor_map[-1])
            out_l = (o,) if o is not None and o.tensor_map != natural else None
            _add(graph, out, op, st, where, n, ins, out_l)
            bias = getattr(cell, "bias", None)
            if bias is not None and len(lays) >= 3:
                for bop, bslot in readers.get(bias.name, []):
                    if bop.type in ("AddExt", "Add", "BiasAdd") and o is not None:
                        _add(graph, out, bop, st, where, n, (o, lays[2]) if bslot == 1 else (lays[2], o), None)
        else:  # embedding: ids [B, S] -> [B*S]; weight [V, H]
            ids = lays[0]
            flat = ShardLayout(ids.device_matrix, ids.alias_name, (tuple(a for t in ids.tensor_map for a in t),))
            ins = (flat, lays[1]) if slot == 1 else (lays[1], flat)
            o = None
            if outs:
                lead = tuple(a for t in outs[0].tensor_map[:-1] for a in t)
                o = ShardLayout(outs[0].device_matrix, outs[0].alias_name, (lead, outs[0].tensor_map[-1]))
            natural = (flat.tensor_map[0], ())
            out_l = (o,) if o is not None and o.tensor_map != natural else None
            _add(graph, out, op, st, where, n, ins, out_l)


# --------------------------------------------------------------------------------------
# repeated layers: extract a few, replicate the last one (MindFormers compiles every layer separately)

#: a layer's index in its path: ``decoder.layers.N`` (mcore), ``encoder.layers.N`` (legacy ChatGLM2)
_LAYER = re.compile(r"(?<![\w])(?:decoder|encoder)\.layers\.(\d+)(?=\.|$)")
_SCOPE = re.compile(r"(?<=/layers-CellList/)(\d+)(?=-)")


def _layer_of(name: str) -> int | None:
    m = _LAYER.search(name or "")
    return int(m.group(1)) if m else None


def _shift(text: str, lo: int, hi: int, d: int) -> str:
    """Layer indices in [lo, hi] move by ``d`` in ``decoder.layers.N`` (``encoder.layers.N``) paths."""
    if not text or not d:
        return text
    return _LAYER.sub(lambda m: f"{m.group(0)[:m.start(1) - m.start(0)]}{int(m.group(1)) + d}"
                      if lo <= int(m.group(1)) <= hi
                      else m.group(0), text)


def _shift_scope(text: str, lo: int, hi: int, d: int) -> str:
    if not text or not d:
        return text
    return _SCOPE.sub(lambda m: str(int(m.group(1)) + d) if lo <= int(m.group(1)) <= hi else m.group(0), text)


def replicate_layers(graph: OpGraph, layers: int) -> OpGraph:
    """``graph`` with its decoder grown to ``layers`` layers by copying its last layer.

    Layer k (k >= the extracted count L) is the last layer t = L-1 renamed (``decoder.layers.t`` ->
    ``decoder.layers.k`` in op names, cell paths, scopes and parameters); its inputs from layer t-1 come
    from layer k-1; what followed the decoder reads layer ``layers-1``. MindFormers' layers are identical
    modules, so this is the graph a ``layers``-layer extraction gives (tests: op for op at 4 layers)."""
    import dataclasses
    from ..vocab.graph import Input, Param
    ops = graph.ops
    idx = [_layer_of(op.cell_path) for op in ops]
    present = sorted({i for i in idx if i is not None})
    if not present or layers <= present[-1] + 1:
        return graph
    t = present[-1]
    block = [i for i, j in enumerate(idx) if j == t]
    if block != list(range(block[0], block[-1] + 1)):
        raise ModelLoadError(f"layer {t} of the extracted graph is not contiguous: cannot replicate it")
    last = layers - 1

    by_name = {op.name: op for op in ops}

    def signature(op):
        return op.type, tuple(x.spec.shape if x.spec is not None else None for x in op.inputs)

    def counterpart(name: str) -> bool:
        """Layer t has an operator of that name, doing the same (a shared op's name can be another op's in the
        next layer: ChatGLM2's layer 0 splits the shared rotary table as split#1, layer 1 its kv as split#1)."""
        other = by_name.get(_shift(name, t - 1, t - 1, 1))
        return other is not None and signature(other) == signature(by_name[name])

    def ref_in(x: Input, lo, hi, d) -> Input:
        if x.kind == "op":
            if lo == t - 1 and lo >= 0 and _shift(x.ref, lo, lo, 1) != x.ref and not counterpart(x.ref):
                # an operator of layer t-1 that layer t has no counterpart of: computed once and shared by the
                # layers after it (MindSpore's CSE keeps one rotary cos/sin, in the first layer), not per layer
                return x
            return dataclasses.replace(x, ref=_shift(x.ref, lo, hi, d))
        if x.kind == "param":
            return dataclasses.replace(x, ref=_shift(x.ref, lo, hi, d))
        return x

    def copy_op(op, lo, hi, d, inputs_only=False):
        new_inputs = tuple(ref_in(x, lo, hi, d) for x in op.inputs)
        if inputs_only:
            return dataclasses.replace(op, inputs=new_inputs, attrs=dict(op.attrs))
        return dataclasses.replace(op, name=_shift(op.name, lo, hi, d), cell_path=_shift(op.cell_path, lo, hi, d),
                                   full_name=_shift_scope(op.full_name, lo, hi, d), inputs=new_inputs,
                                   attrs=dict(op.attrs))
    new_ops = ops[:block[-1] + 1]
    for k in range(t + 1, layers):
        d = k - t
        new_ops += [copy_op(ops[i], t - 1, t, d) for i in block]
    new_ops += [copy_op(op, t, t, last - t, inputs_only=True) for op in ops[block[-1] + 1:]]
    for i, op in enumerate(new_ops):
        op.topo_index = i
    params: dict = {}
    tparams = [n for n in graph.params if _layer_of(n) == t]
    for name, p in graph.params.items():
        params[name] = p
        if tparams and name == tparams[-1]:
            for k in range(t + 1, layers):
                for n in tparams:
                    q = graph.params[n]
                    nn = _shift(n, t, t, k - t)
                    params[nn] = Param(nn, q.spec, q.requires_grad)
    cells: dict = {}
    tcells = [c for c in graph.cells if _layer_of(c) == t]
    for c, cls in graph.cells.items():
        cells[c] = cls
        if tcells and c == tcells[-1]:
            for k in range(t + 1, layers):
                for c2 in tcells:
                    cells[_shift(c2, t, t, k - t)] = graph.cells[c2]
    outputs = [ref_in(x, t, t, last - t) for x in graph.outputs]
    return graph.derived(new_ops, outputs, params, cells)


def replicate_anchors(anchors: dict, graph: OpGraph, extracted_layers: int, layers: int) -> dict:
    """Experts' anchors read at ``extracted_layers`` layers, the last layer's copied onto the replicated ones."""
    import dataclasses
    t = extracted_layers - 1
    out = {}
    for name, a in anchors.items():
        out[name] = a
    for name, a in anchors.items():
        if _layer_of(name) == t:
            for k in range(t + 1, layers):
                nn = _shift(name, t, t, k - t)
                if nn in graph:
                    out[nn] = dataclasses.replace(a, op=nn)
    return out
