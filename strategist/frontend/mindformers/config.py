"""MindFormers' YAML configs: where they are, how they read with strategist's options, what a mesh means to them.

``resolve_config`` finds ``mindformers:<config>`` in the installed ``configs`` package; ``load_yaml`` reads a config
with ``--layers/--seq/--batch`` and ``--set`` overrides applied (a finetune config's model from its
``pretrained_model_dir``, the layer-count keys fitted to ``--layers``); ``mesh_sizes`` and ``mesh_warnings`` are
MindFormers' parallel sizes of a mesh and what it would refuse of one. MindSpore and MindFormers are imported inside
the functions that use them: importing this module loads neither.
"""
from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import os
import re
from typing import Any

from ...errors import InputSpecError, ModelLoadError
from ...memo import table
from ...vocab.graph import OpGraph
from ...vocab.mesh import Mesh
from .settings import layers_key, read_settings
from .world import import_mindformers, quiet_logger


PREFIX = "mindformers:"


def is_mindformers_ref(target: str) -> bool:
    """``mindformers:<config>`` or a path to a ``.yaml``/``.yml`` file."""
    return target.startswith(PREFIX) or target.lower().endswith((".yaml", ".yml"))


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


def default_batch(ref: str, mesh: Mesh, overrides: dict | None = None, micro_batches: int = 1,
                  per_rank: int | None = None) -> tuple[int, str]:
    """The global batch MindFormers trains ``ref`` with on ``mesh``: the config's ``runner_config.batch_size``
    (per data-parallel rank and micro-step; ``per_rank`` where the caller has read it already) times the mesh's
    data-parallel size times the micro-batches (the pipeline's micro_batch_num, or gradient_accumulation_steps); and
    a note saying so."""
    if per_rank is None:
        path = resolve_config(ref)
        import_mindformers()
        with quiet_logger([]):         # MindFormers' config reader logs to stdout
            cfg = load_yaml(path, None, None, overrides or {})
        per_rank = int((cfg.get("runner_config") or {}).get("batch_size") or 1)
    per = max(1, int(per_rank))
    dp = _data_parallel(mesh)      # (an axis MindFormers does not know is a warning of the report)
    m = max(int(micro_batches), 1)
    return per * dp * m, (f"batch {per * dp * m}: the config's runner_config.batch_size {per} x data parallel {dp}"
                          + (f" x {m} micro-batches" if m > 1 else "") + " (--batch N to change)")


def config_settings(ref: str, overrides: dict | None = None):
    """``ref``'s own run settings (:func:`~.settings.read_settings`), its ``--set`` overrides applied; the model is
    not built."""
    path = resolve_config(ref)
    import_mindformers()
    with quiet_logger([]):         # MindFormers' config reader logs to stdout
        cfg = load_yaml(path, None, None, overrides or {}, as_written=True)
    return read_settings(cfg, os.path.dirname(path))


def load_yaml(path: str, layers, seq, overrides: dict, notes: list | None = None, as_written: bool = False):
    """The config with the options applied. ``notes``: what was changed beside them (layer-count keys fitted to
    ``layers``: :func:`fit_layer_keys`) is appended there. ``as_written``: its pipeline and recompute settings kept
    (the run's), not cleared for the one-stage build."""
    from mindformers.tools.register import MindFormerConfig
    cfg = _parsed(path)
    if cfg.get("model") is None or cfg.model.get("model_config") is None:
        raise ModelLoadError(f"{path} has no model.model_config: not a MindFormers model config")
    mc = cfg.model.model_config
    if cfg.get("parallel_config") is None:
        cfg.parallel_config = MindFormerConfig()
    for key, value in (overrides or {}).items():
        _set_dotted(cfg, key, value)
    _merge_pretrained(cfg, path)
    if layers is not None:
        mc[layers_key(mc)] = layers
        for line in fit_layer_keys(cfg, layers, overrides or {}):
            if notes is not None and line not in notes:
                notes.append(line)
    if seq is not None:
        mc.seq_length = seq
        if (mc.get("max_position_embeddings") or 0) < seq:
            mc.max_position_embeddings = seq
    if as_written:
        return cfg
    # pipeline settings are tied to the layer count; the graph is one stage
    mc.offset = 0
    if mc.get("pp_interleave_num") is not None:
        mc.pp_interleave_num = 1
    if cfg.get("recompute_config") is not None:
        cfg.recompute_config.recompute = False
    if cfg.get("parallel_config") is None:
        cfg.parallel_config = MindFormerConfig()
    return cfg


#: each config file MindFormers parsed, by path and modification time (a sweep reads one config at every mesh)
_PARSED = table("mindformers: parsed config files", 16)


def _parsed(path: str):
    """MindFormers' ``MindFormerConfig`` of ``path``, a copy of one parse per file version (the caller edits it)."""
    import copy
    from mindformers.tools.register import MindFormerConfig
    path = os.path.abspath(path)
    try:
        key = (path, os.stat(path).st_mtime_ns)
        if key not in _PARSED:
            _PARSED[key] = MindFormerConfig(path)
    except Exception as err:
        raise ModelLoadError(f"reading MindFormers config {path} failed: {type(err).__name__}: {err}") from None
    return copy.deepcopy(_PARSED[key])


def is_legacy(cfg) -> bool:
    """A MindFormers ``use_legacy=True`` model config: ``model_config.type`` names the config class and
    ``model.arch.type`` the model (glm4's ``ChatGLM2ForConditionalGeneration``), where the mcore models name
    ``model_type`` and ``architectures``. Its layers are ordinary Cells in global shapes, batch-first, configured
    by ``shard()`` in ``__init__`` (fewer of them in sharding-propagation mode)."""
    mc = cfg.model.model_config
    arch = cfg.model.get("arch") or {}
    return bool(mc.get("type")) and bool(arch.get("type")) and not mc.get("model_type")


def _merge_pretrained(cfg, path: str) -> None:
    """A finetune config names no model (model_type, architectures, sizes): MindFormers reads them from
    ``pretrained_model_dir``'s Hugging Face ``config.json``, the YAML's (and ``--set``) keys winning
    (``merge_model_config``). Done so here; a placeholder directory is one line naming the fix."""
    mc = cfg.model.model_config
    if (mc.get("model_type") and mc.get("architectures")) or is_legacy(cfg):
        return
    where = mc.get("pretrained_model_dir") or cfg.get("pretrained_model_dir")
    if not where:
        return                  # train_class names what is missing
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


def config_default(cfg, key: str):
    """``key``'s default in the config class of ``cfg``'s model_type (None if unknown)."""
    from mindformers.tools.register import MindFormerRegister
    try:
        cls = MindFormerRegister.get_cls("config", cfg.model.model_config.get("model_type"))
        param = inspect.signature(cls.__init__).parameters.get(key)
    except Exception:
        return None
    return None if param is None or param.default is inspect.Parameter.empty else param.default


def fit_layer_keys(cfg, layers: int, overrides: dict) -> list[str]:
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
        for src in (moe, mc):       # build_model: moe_config's keys override model_config's
            if src.get(key) is not None:
                return src, src[key]
        return mc, config_default(cfg, key)

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
    tp, ep = mesh.get("tp", 1), mesh.ways("ep")
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
    return {"dp": _data_parallel(mesh), "tp": mesh.get("tp", 1), "cp": mesh.get("cp", 1), "ep": mesh.ways("ep")}


def _data_parallel(mesh: Mesh) -> int:
    """MindFormers' data_parallel on ``mesh``: dp times an ep axis (ep splitting the data-parallel devices); dp alone
    with ep drawn from the stage's devices (``ep=32@dp*tp``)."""
    return mesh.get("dp", 1) * mesh.get("ep", 1)
