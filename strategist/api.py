"""The library calls behind the CLI, for notebooks too: file -> graph -> anchors -> plan."""
from __future__ import annotations

from .files.anchors import load_anchors
from .errors import StrategistError
from .frontend.loader import load_graph
from .vocab.mesh import Mesh
from .files.hardware import load_hardware
from .engine.plan import Plan
from .propagate import propagate


def mindformers_defaults(model: str, mesh: str | None, kwargs: list[str] | None,
                         dataset_strategy: str | None, micro_batches: int = 1,
                         per_rank: int | None = None) -> tuple[list[str], str, list[str]]:
    """What the CLI fills in when the user does not say: for a MindFormers model, the whole batch on every device
    (``full_batch``: MindFormers' own (dp, 1) input split leaves the tp devices unused, which auto_parallel
    refuses) and the global batch it trains with on ``mesh`` (batch_size x dp x ``micro_batches``, where the config's
    own data_parallel would be 1 at the tp=1 build; ``per_rank``: its batch_size, where the run's settings read it
    already); otherwise the batch over all devices. Returns
    (kwargs, dataset_strategy, notes for stderr)."""
    from .frontend.mindformers import default_batch, is_mindformers_ref, split_model_options
    kwargs = list(kwargs or [])
    if model.startswith("mindone:"):
        return _mindone_defaults(mesh, kwargs, dataset_strategy, micro_batches)
    if not is_mindformers_ref(model):
        return kwargs, dataset_strategy or "data_parallel", []
    notes = []
    opts = split_model_options(kwargs)
    if opts["batch"] is None and mesh:
        b, note = default_batch(model, Mesh.parse(mesh), opts["overrides"], micro_batches, per_rank)
        kwargs.append(f"batch={b}")
        notes.append(note)
    return kwargs, dataset_strategy or "full_batch", notes


def _mindone_defaults(mesh: str | None, kwargs: list[str], dataset_strategy: str | None, micro_batches: int = 1):
    """A mindone model, as a MindFormers one: the whole batch on every device (``full_batch``) and, unless
    ``batch=`` is given, one sequence per data-parallel rank (dp x ep of ``mesh``) and micro-batch."""
    notes = []
    if mesh and not any(k.partition("=")[0].strip() == "batch" for k in kwargs):
        m = Mesh.parse(mesh)
        b = m.get("dp", 1) * m.get("ep", 1) * micro_batches
        kwargs = kwargs + [f"batch={b}"]
        notes.append(f"batch {b}: one sequence per data-parallel rank" + (f" and micro-batch ({micro_batches})"
                     if micro_batches > 1 else "") + " (--batch N to change)")
    return kwargs, dataset_strategy or "full_batch", notes


def parse_dataset_strategy(text):
    """``--dataset-strategy``: ``data_parallel`` | ``full_batch`` | per-input splits ``x=8,1;mask=8,1,1``.

    >>> parse_dataset_strategy("x=8,1; y=8")
    {'x': (8, 1), 'y': (8,)}
    """
    from .errors import InputSpecError
    if not isinstance(text, str) or text in ("data_parallel", "full_batch"):
        return text
    out = {}
    for item in text.split(";"):
        name, sep, splits = item.strip().partition("=")
        try:
            out[name.strip()] = tuple(int(x) for x in splits.split(","))
        except ValueError:
            sep = ""
        if not sep or not name.strip().isidentifier() or any(x < 1 for x in out.get(name.strip(), (0,))):
            raise InputSpecError(f"bad --dataset-strategy {text!r}: write data_parallel, full_batch, or per-input "
                                 f"splits such as x=8,1;mask=8,1,1")
    return out


def plan_model(model: str, mesh: str | Mesh, *, inputs=None, kwargs=None, strategies: str | None = None,
               hardware: str | None = "atlas-800t-a2", use_model_strategies: bool = True,
               dataset_strategy="data_parallel", graph=None, semi_auto: bool = False, training: bool = True,
               step=None) -> Plan:
    """Propagate strategies over ``model`` (``path.py:NAME``) on ``mesh`` (``"dp=2,tp=4"``).

    ``training`` (default True, ``--train``): propagate as MindSpore compiles the Cell after ``set_train(True)``, as
    a training run does; False (``--eval``): as it compiles the Cell as built, not set to training, as inference
    does (a VirtualOutput, operators created in another order, which can change the plan;
    :func:`strategist.frontend.loader.load_graph`).

    ``semi_auto``: no propagation -- the plan MindSpore's ``semi_auto_parallel`` runs with these anchors (every other
    operator takes its batch strategy, an unconfigured Cast passes its input's layout on: :mod:`strategist.engine.semi_auto`).

    >>> plan = plan_model("examples/mlp.py:MegatronMLP", "dp=2,tp=4")     # doctest: +SKIP
    >>> plan.totals()["total_bytes"]                                      # doctest: +SKIP
    """
    mesh = Mesh.parse(mesh) if isinstance(mesh, str) else mesh
    hw = load_hardware(hardware) if hardware else None
    graph = graph if graph is not None else load_graph(model, inputs, kwargs, training=training)
    graph = _with_step_options(graph, step)
    anchors = load_anchors(strategies, graph, mesh, check=True) if strategies else {}
    if not strategies and use_model_strategies and graph.mf_options is not None:
        # a MindFormers model's own strategies are what its code sets at the mesh (its tp=1 graph carries none):
        # sharding_propagation() anchors (shard() under semi_auto), as verify and compare's (b) and (c) take them
        # (their origin says so: mindformers_anchors_note)
        from .frontend.mindformers import expert_strategies
        mode = "semi_auto" if semi_auto else "propagation"
        anchors = dict(expert_strategies(graph.model, mesh, mode, graph=graph, **graph.mf_options))
    if semi_auto:
        from .propagate import semi_auto_plan
        run = semi_auto_plan
    else:
        run = propagate
    plan = run(graph, mesh, anchors, use_model_strategies=use_model_strategies, dataset_strategy=dataset_strategy,
               hardware=hw)
    _warn_mesh_fit(graph, mesh, plan.warnings)
    return plan


def mindformers_anchors_note(plan: Plan) -> str | None:
    """What :func:`plan_model` started from when it took a MindFormers model's own strategies (the anchors'
    origin), for stderr; None otherwise."""
    from .engine.plan import PARALLEL_ONLY, SEMI_AUTO
    own = [a for a in plan.anchors.values() if a.origin in ("mindformers", SEMI_AUTO)]
    fixed = [a for a in plan.anchors.values() if a.origin == PARALLEL_ONLY]
    if not own:
        # the loss's own primitives, which MindFormers configures in any parallel build, whatever the anchors
        return (f"MindFormers' loss configures {len(fixed)} of its operators at {plan.mesh} in any parallel build: "
                f"{', '.join(a.op for a in fixed)} start the plan too") if fixed else None
    what = "shard()" if own[0].origin == SEMI_AUTO else "sharding_propagation()"
    return (f"anchors: MindFormers' own {what} strategies at {plan.mesh} ({len(own)} operators; "
            f"--no-model-strategies for none, --anchors FILE for yours)")


def _drawn_warning(graph, mesh) -> str | None:
    """A drawn ep (``ep=8@dp*tp``) on a model without MindFormers' MoE dispatcher, the one thing it prices."""
    from .cost.experts import expert_params
    if not mesh.drawn or expert_params(graph):
        return None
    names = ", ".join(f"{n}={s}@{'*'.join(o)}" for n, s, o in mesh.drawn)
    return (f"mesh axis {names} is drawn from others, as MindFormers draws expert parallelism: it prices the experts "
            f"of a MindFormers MoE layer, and this model has none (it changes nothing here; leave it out)")


def _warn_mesh_fit(graph, mesh, into: list) -> None:
    """A mesh axis that divides no dimension of the model, or a mesh MindFormers would refuse for the config the
    graph was built from: a warning in the report and on stderr."""
    import sys
    from .vocab.mesh import mesh_fit_warning
    from .frontend.mindformers import mesh_warnings
    at = 0
    for w in [mesh_fit_warning(graph, mesh), _drawn_warning(graph, mesh)] + mesh_warnings(graph, mesh):
        if w and w not in into:
            into.insert(at, w)
            at += 1
            print(f"strategist: warning: {w}", file=sys.stderr)


def advise_model(model: str, mesh: str | Mesh, *, inputs=None, kwargs=None, rules=None, boundaries=None,
                 hardware: str | None = "atlas-800t-a2", dataset_strategy="data_parallel", graph=None,
                 training: bool = True, step=None, sequence_parallel: bool = False):
    """``strategist advise`` as a call: the :class:`~strategist.advice.advisor.Advice` for ``model`` on ``mesh``
    (``training``: as :func:`plan_model`; ``sequence_parallel``: the norms and residual adds between the tp blocks
    split along the sequence by tp, as Megatron's and MindFormers' sequence parallelism lay them out)."""
    from .advice.advisor import load_rules
    from .errors import InputSpecError
    mesh = Mesh.parse(mesh) if isinstance(mesh, str) else mesh
    bounds = {}
    for b in boundaries or []:
        path, sep, kind = b.partition("=")
        if not sep or kind not in ("tp", "dp") or not path:
            raise InputSpecError(f"bad --boundary {b!r}: write CELL.PATH=tp or CELL.PATH=dp, e.g. head=tp")
        bounds[path] = kind
    hw = load_hardware(hardware) if hardware else None
    rules = load_rules(rules)           # a bad rules file fails before the model is built
    graph = graph if graph is not None else load_graph(model, inputs, kwargs, training=training)
    graph = _with_step_options(graph, step)
    sp_note = None
    if sequence_parallel:
        graph, sp_note = with_sequence_parallel(graph, mesh)
    from .advice.advisor import check_boundaries
    check_boundaries(graph, bounds)
    from . import progress
    from .advice.repeated import advise_repeated
    with progress.task("advising (propagations)"):
        # repeated layers advised on the first few and carried to the rest (strategist.advice.repeated)
        advice = advise_repeated(graph, mesh, rules=rules, boundaries=bounds, hardware=hw,
                                 dataset_strategy=dataset_strategy)
    _warn_mesh_fit(graph, mesh, advice.notes)
    if sp_note:
        advice.notes.append(sp_note)
    from .source import installed_anchors     # (anchors inside installed packages: the user's lines)
    notes, advice.user_sites = installed_anchors(advice)
    advice.notes.extend(n for n in notes if n not in advice.notes)
    return advice


def with_sequence_parallel(graph, mesh: Mesh) -> tuple:
    """(``graph`` asking its advice for sequence parallelism (``sequence_parallel``: a view, the caller's graph left
    as it is), a note saying why it does not apply on ``mesh`` or None where it does)."""
    graph = graph.with_meta(sequence_parallel=True)
    return graph, _sequence_parallel_note(graph, mesh)


def _sequence_parallel_note(graph, mesh: Mesh) -> str | None:
    from .advice.anatomy import uses_sequence_parallel
    if mesh.get("tp") <= 1:
        return "sequence parallelism: not applied (it splits the sequence by tp, and the mesh has no tp axis)"
    if not uses_sequence_parallel(graph, mesh):
        return ("sequence parallelism: not applied (no layout of the norms' [batch, sequence, hidden] puts the "
                "batch's axes on the batch and tp on the sequence; a batch the outer axes divide, or divisible by tp)")
    return None


def _with_step_options(graph, step):
    """``graph`` with the step model's options its plans are estimated with (:class:`strategist.cost.step.StepOptions`:
    pipeline stages, micro-batches, recompute, parallel optimizer), a view leaving the caller's graph as it is; a model
    file's batch (its inputs' first dim: the step's) must split into the micro-batches, unless it is one micro-batch's
    (``graph_batch`` "micro")."""
    if step is None:
        return graph
    step = step.check()
    if step.split_by > 1 and graph.mf_options is None:
        batches = {spec.shape[0] for spec in graph.inputs.values() if getattr(spec, "shape", None)}
        bad = sorted(b for b in batches if b % step.micro_batches)
        if bad:
            from .errors import InputSpecError
            raise InputSpecError(f"--micro-batches {step.micro_batches} does not split the model's batch of {bad[0]} "
                                 f"into whole micro-batches: give a count dividing {bad[0]}, or a larger batch "
                                 f"(--kwargs batch=N or --input)")
    return graph.with_meta(step_options=step)


def find_op(plan: Plan, name: str) -> str:
    if name in plan.choices:
        return name
    tail = [n for n in plan.choices if n.endswith("." + name)]
    if len(tail) == 1:              # a unique dotted suffix: layers.0.mlp.linear_fc2.matmul for model.decoder.layers...
        return tail[0]
    close = [n for n in plan.choices if n.endswith(name) or name in n][:6]
    raise StrategistError(f"--op {name!r} names no operator"
                          + (f" (did you mean: {', '.join(close)})" if close else " (see strategist inspect)"))


def memory_estimate(model: str, mesh: Mesh, *, graph, strategies: str | None = None, dataset_strategy="data_parallel",
                    optimizer: str = "adamw", optimizer_parallel: bool = False, recompute: str = "none",
                    micro_batches: int = 1, hardware: str | None = "atlas-800t-a2", graph_batch: str = "step",
                    optimizer_swap: bool = False):
    """(the step estimate, the anchors the advice chose or None) of what ``verify --memory`` compiles: ``graph`` of
    ``model`` on ``mesh`` (a ``pp`` axis: pipeline stages) with the anchors of ``strategies`` or, without, the
    advice's; ``graph_batch``: what the graph's batch is (:class:`~strategist.cost.step.StepOptions`)."""
    from .cost.step import StepOptions, estimate
    rest = str(mesh.without("pp")) or "dp=1"
    step = StepOptions(pp=mesh.get("pp"), micro_batches=micro_batches, recompute=recompute,
                       optimizer_parallel=optimizer_parallel, optimizer=optimizer, graph_batch=graph_batch,
                       optimizer_swap=optimizer_swap).check()
    if strategies:
        return estimate(plan_model(model, rest, strategies=strategies, hardware=hardware,
                                   dataset_strategy=dataset_strategy, graph=graph, step=step)), None
    advice = advise_model(model, rest, hardware=hardware, dataset_strategy=dataset_strategy, graph=graph, step=step)
    return estimate(advice.plan), {c.op: advice.plan.anchors[c.op] for c in advice.chosen}


def verify_memory(model: str, mesh: str | Mesh, *, inputs=None, kwargs=None, strategies: str | None = None,
                  dataset_strategy="data_parallel", optimizer: str | None = None, optimizer_parallel: bool = False,
                  recompute: str = "none", micro_batches: int = 1, hardware: str | None = "atlas-800t-a2",
                  rank: int | None = None, timeout: float = 900, optimizer_swap: bool = False):
    """``strategist verify --memory``: MindSpore's DryRun peak memory per simulated rank beside strategist's
    estimate of the same stage (the step model's ``memory.total``, as ``advise --format json`` reports it), for the
    anchors of ``strategies`` or, without a file, strategist's own advice on ``mesh``. ``optimizer``: a key of
    strategist.cost.memory.OPTIMIZERS (None: as the model's config says, else adamw), run by MindSpore and assumed
    by the estimate alike; ``optimizer_swap``: MindFormers' AdamW's moments on the host, in both. A list of
    :class:`~strategist.verify.memory_report.MemoryCheck` (``mesh``'s ``pp`` axis: the first and the last stage)."""
    from .verify.dryrun import mindspore_memory
    from .verify.memory_report import MemoryCheck
    mesh = Mesh.parse(mesh) if isinstance(mesh, str) else mesh
    graph = load_graph(model, inputs, kwargs, training=True)
    optimizer = optimizer or graph.optimizer or "adamw"
    est, anchors = memory_estimate(model, mesh, graph=graph, strategies=strategies, dataset_strategy=dataset_strategy,
                                   optimizer=optimizer, optimizer_parallel=optimizer_parallel, recompute=recompute,
                                   micro_batches=micro_batches, hardware=hardware, optimizer_swap=optimizer_swap)
    answers = mindspore_memory(model, mesh, inputs=inputs, kwargs=kwargs, strategies=strategies, anchors=anchors,
                               dataset_strategy=dataset_strategy, optimizer_parallel=optimizer_parallel,
                               recompute=recompute, optimizer=optimizer, micro_batches=micro_batches, rank=rank,
                               timeout=timeout, graph=graph, optimizer_swap=optimizer_swap)
    stages = est.per_stage if est is not None else []
    assumes = est.memory["assumed"]["optimizer"] if est is not None else "no estimate (no hardware profile)"
    return [MemoryCheck(a, stages[a.stage]["memory_total"] if a.stage < len(stages) else None, assumes)
            for a in answers]
