"""The run a command prices: the mesh and the step model's options, each from the command line, else (a
MindFormers config) from the config's own settings, else a default -- and where each came from.

>>> r = resolve_run("examples/mlp.py:MegatronMLP", {"mesh": "dp=2,tp=4"})
>>> r.mesh, r.step.micro_batches, r.origin("micro_batches")
('dp=2,tp=4', 1, 'default')
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .errors import InputSpecError, MeshError
from .vocab.mesh import Mesh

#: the settings a command line gives (StepOptions fields, and the mesh and sequence parallelism)
STEP_KEYS = ("micro_batches", "recompute", "recompute_layers", "select_layers", "comm_recompute_layers",
             "optimizer_parallel", "interleave", "pp_interleave", "offset", "grad_comm_overlap", "allgather_overlap",
             "fa_load_balance", "optimizer_swap", "max_device_memory")
#: settings written per pipeline stage: a config's apply only at the pp it was written for
PER_STAGE = ("offset", "recompute_layers", "select_layers", "comm_recompute_layers", "pp_interleave")
DEFAULTS = {"micro_batches": 1, "recompute": "none", "recompute_layers": (), "select_layers": (),
            "comm_recompute_layers": (), "optimizer_parallel": None, "interleave": 1, "pp_interleave": 1,
            "offset": (), "sequence_parallel": False, "grad_comm_overlap": False, "allgather_overlap": False,
            "fa_load_balance": False, "optimizer_swap": False, "max_device_memory": None}
COMMAND_LINE = "command line"


@dataclass(frozen=True)
class Run:
    """The mesh (without its pp axis), the step options, sequence parallelism, and per setting (name, value as
    shown, origin); notes on what a config says that is not applied or not priced."""

    mesh: str
    step: object
    sequence_parallel: bool
    origins: tuple = ()
    notes: tuple = ()
    batch_per_rank: int | None = None

    @property
    def full_mesh(self) -> str:
        """The mesh with its pp axis (outermost)."""
        pp = getattr(self.step, "pp", 1)
        return (f"pp={pp}," if pp > 1 else "") + self.mesh

    def origin(self, name: str) -> str | None:
        return next((o for n, _v, o in self.origins if n == name), None)


def _show(v) -> str:
    if isinstance(v, tuple):
        if _every_layer(v):
            return "every layer"
        return "[" + ", ".join(_show(x) for x in v) + "]"
    if v is None:
        return "as the model's config says"
    return str(v)


def _show_gb(v) -> str:
    return f"{v:g}GB" if v is not None else "the profile's device memory less its reserve"


#: how a setting's value reads in the report where it is not :func:`_show`'s
SHOWN = {"max_device_memory": _show_gb}


def resolve_run(model: str, given: dict, *, overrides: dict | None = None, optimizer: str | None = None,
                step_overrides: tuple = (), choose_by_schedule: bool = True, config=None,
                layers: int | None = None) -> Run:
    """The run of ``model`` with the settings ``given`` on the command line (None or absent: not given); the
    others from a MindFormers config's own settings (:func:`~.frontend.mindformers.config_settings`, ``overrides``
    its ``--set`` keys; or ``config``, a :class:`~.frontend.mindformers.settings.ConfigSettings` read elsewhere:
    a published run's YAML sections priced on a model file), else :data:`DEFAULTS`. A one-line error without a mesh
    from either, or for stages the model's layers cannot take (``layers``: ``--layers``, else the config's count),
    before anything is built."""
    from .cost.step import StepOptions
    from .frontend.mindformers import config_settings, is_mindformers_ref
    given = {k: v for k, v in given.items() if v is not None}
    cfg = config if config is not None else config_settings(model, overrides) if is_mindformers_ref(model) else None
    values, origins, notes = {}, [], list(cfg.notes) if cfg else []

    def take(name, value, origin):
        values[name] = value
        origins.append((name, SHOWN.get(name, _show)(value), origin))

    if "mesh" in given:
        mesh = Mesh.parse(given["mesh"])
        take("mesh", str(mesh), COMMAND_LINE)
        note = _ep_axis_note(mesh, cfg.get("mesh") if cfg is not None else None)
        if note:
            notes.append(note)
    elif cfg is not None and cfg.get("mesh") is not None:
        own = cfg.get("mesh")
        try:
            mesh = Mesh.parse(own.value)
        except MeshError as e:
            raise InputSpecError(f"the config's {own.origin} has no mesh MindFormers can run ({e}): give --mesh")
        take("mesh", own.value, "config " + own.origin)
    else:
        raise InputSpecError("no mesh: give --mesh (e.g. --mesh dp=2,tp=4); a MindFormers config gives its own")
    pp = mesh.get("pp")
    cfg_pp = cfg.get("pipeline_stage").value if cfg is not None else None
    for name in ("sequence_parallel",) + STEP_KEYS:
        if name in given:
            take(name, given[name], COMMAND_LINE)
            continue
        s = _config_value(cfg, name, pp)
        if s is not None and name in PER_STAGE and cfg_pp != pp and not _every_layer(s.value):
            notes.append(f"the config's {s.origin} ({_show(s.value)}) is written for pp={cfg_pp}: not applied at "
                         f"pp={pp}")
            s = None
        if s is not None and name in PER_STAGE and _every_layer(s.value):
            s = replace(s, value=(s.value[0],) * pp)
        if s is not None:
            take(name, s.value, "config " + s.origin)
        elif name in DEFAULTS:
            take(name, DEFAULTS[name], "default")
    rest = str(mesh.without("pp")) or "dp=1"
    step = StepOptions(pp=pp, overrides=step_overrides, choose_by_schedule=choose_by_schedule, optimizer=optimizer,
                       origins=tuple(origins), **{k: values[k] for k in STEP_KEYS}).check()
    _check_stages(step, layers or (cfg.get("layers").value if cfg is not None and cfg.get("layers") else None))
    per = (cfg.get("batch_per_rank").value if cfg is not None and cfg.get("batch_per_rank") else 1) \
        if cfg is not None else None
    return Run(rest, step, bool(values["sequence_parallel"]), tuple(origins), tuple(notes), per)


def _every_layer(v) -> bool:
    from .frontend.mindformers.settings import ALL
    return isinstance(v, tuple) and bool(v) and all(isinstance(x, int) and x >= ALL for x in v)


def _config_value(cfg, name: str, pp: int):
    if cfg is None:
        return None
    if name == "micro_batches":
        return cfg.get("micro_batch_num" if pp > 1 else "gradient_accumulation_steps")
    return cfg.get(name)


def _check_stages(step, layers: int | None) -> None:
    """A pipeline split the model's ``layers`` cannot take is refused now (:func:`~.cost.pipeline.stage_sizes`'
    one line), not after the build."""
    if layers and step.pp > 1:
        from .cost.pipeline import stage_sizes
        stage_sizes(layers, step.pp, step.offset or None, step.pp_interleave)


def _ep_axis_note(given: Mesh, own) -> str | None:
    """A ``--mesh`` that writes the config's sizes with ep as an axis of its own, where the config draws ep from
    its dp and tp devices (``dp=4,tp=8,ep=32`` for ``dp=4,tp=8,ep=32@dp*tp``): a mesh ep times as large."""
    if own is None or given.get("ep") == 1:
        return None
    try:
        mesh = Mesh.parse(own.value)
    except MeshError:
        return None
    if mesh.ways("ep") != given.get("ep") or mesh.get("ep") != 1 or \
            any(mesh.get(a) != given.get(a) for a in ("dp", "tp", "cp")):
        return None
    return (f"--mesh {given}: ep={given.get('ep')} is an axis of its own here ({given.size} devices, MindFormers' "
            f"data_parallel {given.get('dp') * given.get('ep')}); the config draws its expert_parallel from its dp and "
            f"tp devices: --mesh {mesh} ({mesh.size} devices)")
