"""A MindFormers config's own run settings, read from its YAML without building the model: its parallel sizes (the
mesh), micro-batches, recompute (per stage, full, selective and communication), the parallel optimizer, sequence
parallelism, the stages' layer offsets and the interleaves. They are the defaults of ``advise``, ``propagate`` and
``sweep`` for that config; each option given on the command line overrides one, and the report names where each
came from (:class:`Setting`).

MindFormers' own readers define the meaning: ``runner_config.batch_size`` is per data-parallel rank and
micro-step; with ``pipeline_stage`` 1 the step accumulates ``gradient_accumulation_steps`` micro-batches, with
more it runs ``micro_batch_num``; ``recompute``/``select_recompute``/``select_comm_recompute`` are a bool (every
layer), a count of each stage's first layers (a row per model chunk with ``pp_interleave_num``), or operator
patterns (``LayerSetting`` in ``mindformers/parallel_core/training_graph/transformer/utils.py``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...errors import InputSpecError
from ...vocab.mesh import drawn_from

#: MindFormers' default selective-recompute patterns (legacy and mcore layers): the MLP's activation and its product,
#: what the step model recomputes for "selective"
DEFAULT_SELECT = frozenset({r"feed_forward\.mul", r"feed_forward\.w1\.activation\.silu", r"mlp\.shared_experts\.mul",
                            r"mlp\.shared_experts\.activation_func\.silu", r"mlp\.mul", r"mlp\.activation_func\.silu"})
DEFAULT_COMM = frozenset({r".*\.norm"})
#: a per-stage count meaning "every layer of the stage" (MindFormers' True in a count list)
ALL = 1_000_000


@dataclass(frozen=True)
class Setting:
    """One run setting: its value and where it came from (a YAML key, the command line, a default)."""

    value: object
    origin: str


@dataclass(frozen=True)
class ConfigSettings:
    """A config's run settings by name (``mesh``, ``batch_per_rank``, ``sequence_parallel`` and the
    :class:`~strategist.cost.step.StepOptions` fields it sets), and what the step model does not price of them."""

    settings: dict = field(default_factory=dict)
    notes: tuple = ()

    def get(self, name: str) -> Setting | None:
        return self.settings.get(name)


def device_memory_GB(value, where: str) -> float:
    """MindSpore's ``max_device_memory`` (``"58GB"``, a number of GB) as GB of 2**30 bytes, as MindSpore counts
    them; a one-line error naming ``where`` for anything else.

    >>> device_memory_GB("57GB", "--max-device-memory"), device_memory_GB(58, "--max-device-memory")
    (57.0, 58.0)
    """
    text = str(value).strip()
    number = text[:-2].strip() if text.upper().endswith("GB") else text
    try:
        gb = float(number)
    except ValueError:
        gb = math.nan
    if not 0 < gb < math.inf:
        raise InputSpecError(f"bad {where} {value!r}: give the device memory MindSpore may use in GB, e.g. 58GB")
    return gb


def _count_rows(value, key: str, pp: int, chunks: int) -> tuple | None:
    """A recompute key's per-stage counts of first layers: None for every layer, () for none."""
    if isinstance(value, bool) or value is None:
        return None if value else ()
    if isinstance(value, int):
        return tuple([value] * pp)
    if isinstance(value, (list, tuple)):
        if all(isinstance(x, str) for x in value):
            return None                       # operator patterns: every layer
        def counts(row):                    # MindFormers' True in a count list: every layer of the stage
            return [(ALL if x else 0) if isinstance(x, bool) else x for x in row]
        if all(isinstance(x, (int, bool)) for x in value):
            rows = [counts(value)]
        elif all(isinstance(r, (list, tuple)) for r in value):
            rows = [counts(r) for r in value]
        else:
            raise InputSpecError(f"bad {key} {value!r} in the config: give a bool, per-stage counts, or operator "
                                 f"patterns, as MindFormers reads it")
        per = [sum(r[s] for r in rows if s < len(r)) for s in range(pp)]
        return tuple(per)
    raise InputSpecError(f"bad {key} {value!r} in the config: give a bool, per-stage counts, or operator patterns")


def _patterns(value, default: frozenset) -> tuple[frozenset, object]:
    """(the patterns a select key names, the per-stage value they share) of a bool / counts / list / dict."""
    if isinstance(value, dict):
        vals = list(value.values())
        same = all(v == vals[0] for v in vals)
        return frozenset(value), vals[0] if same and vals else max(vals, key=lambda v: 0 if v is False else 1)
    if isinstance(value, (list, tuple)) and value and all(isinstance(x, str) for x in value):
        return frozenset(value), True
    return default, value


def plain(d):
    """A config section (MindFormerConfig, nested) as plain dicts, lists and scalars (anything else as its str)."""
    if isinstance(d, dict):
        return {str(k): plain(v) for k, v in d.items()}
    if isinstance(d, (list, tuple)):
        return [plain(x) for x in d]
    return d if isinstance(d, (int, float, str, bool, type(None))) else str(d)


#: MindSpore's parallel_speed_up_json keys the step model prices, as StepOptions fields
SPEED_UP = {"grad_computation_allreduce_overlap": "grad_comm_overlap",
            "computation_allgather_overlap": "allgather_overlap",
            "enable_flash_attention_load_balance": "fa_load_balance"}


def config_mesh(dp: int, tp: int, pp: int, cp: int, ep: int) -> str:
    """strategist's mesh of MindFormers' parallel sizes: ep an axis inside data parallel where it divides dp, else
    drawn from the stage's innermost devices (``ep=32@dp*tp``, MindFormers' consecutive ranks); a size MindFormers
    itself refuses (ep not dividing dp * cp * tp) is refused with the mesh's own message."""
    inside = ep > 1 and dp % ep == 0
    axes = [("pp", pp), ("dp", dp // ep), ("ep", ep), ("cp", cp), ("tp", tp)] if inside else \
        [("pp", pp), ("dp", dp), ("cp", cp), ("tp", tp)]
    axes = [(n, s) for n, s in axes if s > 1 or n == "dp"]
    text = ",".join(f"{n}={s}" for n, s in axes)
    return text if inside or ep <= 1 else f"{text},ep={ep}@{'*'.join(drawn_from(axes, ep))}"


def layers_key(mc) -> str:
    """The model config's (``model.model_config``'s) layer count: ``num_hidden_layers`` (mcore), ``num_layers``
    (legacy ChatGLM2)."""
    return "num_layers" if "num_layers" in mc and "num_hidden_layers" not in mc else "num_hidden_layers"


def read_settings(cfg, config_dir: str | None = None) -> ConfigSettings:
    """The run settings of a loaded config (``MindFormerConfig`` or a plain dict of the YAML); ``config_dir``: the
    YAML's directory (a relative ``parallel_speed_up_json_path`` is looked for from the working directory, as
    MindFormers reads it, then from there and the directories above it)."""
    cfg = plain(dict(cfg))
    pc = cfg.get("parallel_config") or {}
    rc = cfg.get("runner_config") or {}
    par = cfg.get("parallel") or {}
    mc = (cfg.get("model") or {}).get("model_config") or {}
    rec = cfg.get("recompute_config") or {}
    out: dict[str, Setting] = {}
    notes: list[str] = []

    def size(*keys):
        for k in keys:
            if pc.get(k) is not None:
                return int(pc[k]), f"parallel_config.{k}"
        return 1, None

    dp, kdp = size("data_parallel", "data_parallel_size")
    tp, ktp = size("model_parallel", "tensor_model_parallel_size")
    pp, kpp = size("pipeline_stage", "pipeline_model_parallel_size")
    cp, kcp = size("context_parallel", "context_parallel_size")
    ep, kep = size("expert_parallel", "expert_model_parallel_size")
    out["pipeline_stage"] = Setting(pp, kpp or "default")
    out["mesh"] = Setting(config_mesh(dp, tp, pp, cp, ep),
                          ", ".join(f"{k} {v}" for k, v in ((kdp, dp), (ktp, tp), (kpp, pp), (kcp, cp), (kep, ep))
                                    if k) or "default (dp=1)")
    # the micro-batches of a pipeline, and gradient accumulation without one: each mesh picks its own
    # (a key the YAML leaves out: MindFormers' default, the run's default too -- not reported as the config's)
    for name, section, key, kind in (("micro_batch_num", pc, "micro_batch_num", int),
                                     ("gradient_accumulation_steps", rc, "gradient_accumulation_steps", int),
                                     ("batch_per_rank", rc, "batch_size", int),
                                     ("sequence_parallel", pc, "use_seq_parallel", bool),
                                     ("optimizer_parallel", par, "enable_parallel_optimizer", bool),
                                     ("interleave", mc, "fine_grain_interleave", int)):
        if section.get(key) is not None:
            where = {id(pc): "parallel_config", id(rc): "runner_config", id(par): "parallel",
                     id(mc): "model_config"}[id(section)]
            out[name] = Setting(kind(section[key]), f"{where}.{key}")
    interleaved = bool((par.get("pipeline_config") or {}).get("pipeline_interleave", False))
    chunks = int(mc.get("pp_interleave_num") or 1) if interleaved and pp > 1 else 1
    if chunks > 1:
        out["pp_interleave"] = Setting(chunks, "model_config.pp_interleave_num (parallel.pipeline_config."
                                               "pipeline_interleave on)")
    key = layers_key(mc)
    layers = mc.get(key)
    if isinstance(layers, int) and not isinstance(layers, bool) and layers > 0:
        out["layers"] = Setting(layers, f"model_config.{key}")
    offset = mc.get("offset", 0)
    if pp > 1 and offset not in (0, None, [], ()):
        out["offset"] = Setting(_hashable(offset), "model_config.offset")
    swap = (cfg.get("optimizer") or {}).get("swap")
    if swap is not None:
        out["optimizer_swap"] = Setting(bool(swap), "optimizer.swap")
    limit = (cfg.get("context") or {}).get("max_device_memory")
    if limit is not None:
        out["max_device_memory"] = Setting(device_memory_GB(limit, "context.max_device_memory"),
                                           "context.max_device_memory")
    _recompute(rec, pp, chunks, out, notes)
    _speed_up(cfg, config_dir, out, notes)
    if int(cfg.get("micro_batch_interleave_num") or 1) > 1:
        notes.append(f"micro_batch_interleave_num {cfg['micro_batch_interleave_num']}: MindSpore's micro-batch "
                     f"interleave is not priced (each copy's communication hiding the other's computation)")
    return ConfigSettings(out, tuple(notes))


def _speed_up(cfg: dict, config_dir: str | None, out: dict, notes: list) -> None:
    """The overlaps a config's ``context.ascend_config.parallel_speed_up_json_path`` turns on (MindSpore's default
    where the file names none), or a note where the file is not found."""
    import json
    import os
    path = ((cfg.get("context") or {}).get("ascend_config") or {}).get("parallel_speed_up_json_path")
    if not path or not isinstance(path, str):
        return
    tries = [path]
    d = os.path.abspath(config_dir) if config_dir else None
    while d and not os.path.isabs(path):
        tries.append(os.path.join(d, path))
        d = None if os.path.dirname(d) == d else os.path.dirname(d)
    found = next((t for t in tries if os.path.isfile(t)), None)
    if found is None:
        notes.append(f"context.ascend_config.parallel_speed_up_json_path {path}: not found, so its overlaps are "
                     f"taken as MindSpore's defaults (off); --overlap-grad-reduce, --overlap-param-gather to say")
        return
    try:
        with open(found, encoding="utf-8") as f:
            speed = json.load(f)
    except (OSError, ValueError) as e:
        raise InputSpecError(f"context.ascend_config.parallel_speed_up_json_path {path}: not JSON ({e}): fix the "
                             f"file or the path") from None
    for key, name in SPEED_UP.items():
        if isinstance(speed, dict) and key in speed:
            out[name] = Setting(bool(speed[key]), f"{path} {key}")


def _hashable(v):
    return tuple(_hashable(x) for x in v) if isinstance(v, (list, tuple)) else v


def _recompute(rec: dict, pp: int, chunks: int, out: dict, notes: list) -> None:
    full = _count_rows(rec.get("recompute", False), "recompute_config.recompute", pp, chunks)
    pats, sel_value = _patterns(rec.get("select_recompute", False), DEFAULT_SELECT)
    select = _count_rows(sel_value, "recompute_config.select_recompute", pp, chunks)
    cpats, comm_value = _patterns(rec.get("select_comm_recompute", False), DEFAULT_COMM)
    comm = _count_rows(comm_value, "recompute_config.select_comm_recompute", pp, chunks)
    if full is None:
        out["recompute"] = Setting("full", "recompute_config.recompute")
    elif select != ():
        out["recompute"] = Setting("selective", "recompute_config.select_recompute")
    else:
        out["recompute"] = Setting("none", "recompute_config (no recompute)")
    if full:
        out["recompute_layers"] = Setting(full, "recompute_config.recompute")
        if select != ():
            out["recompute"] = Setting("selective", "recompute_config.select_recompute")
    if select:
        out["select_layers"] = Setting(select, "recompute_config.select_recompute")
    if comm is None or comm:
        out["comm_recompute_layers"] = Setting(comm or (ALL,) * pp, "recompute_config.select_comm_recompute")
    if select != () and not pats <= DEFAULT_SELECT:
        notes.append(f"select_recompute patterns {', '.join(sorted(pats - DEFAULT_SELECT))}: priced as MindFormers' "
                     f"default ones (the MLP's activation and its product)")
    if comm != () and not cpats <= DEFAULT_COMM:
        notes.append(f"select_comm_recompute patterns {', '.join(sorted(cpats - DEFAULT_COMM))}: priced as the "
                     f"default (the norms)")
