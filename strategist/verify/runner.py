"""Parent side of ``strategist verify``: ask MindSpore 2.9.0 itself, in a child process.

:func:`mindspore_plan` runs :mod:`strategist.verify.child` with the environment MindSpore's dry run
needs (see :mod:`strategist.verify.stubs` for the CPU-only part), waits for it (with a timeout), and
turns its answer into an :class:`MsPlan`. The IR dump goes to a temporary directory that is always
removed; the child runs there, so nothing lands in the user's working tree. MindSpore rejecting the
configuration, crashing (a signal) or timing out is a :class:`~strategist.errors.VerifyError`, one line.
"""
from __future__ import annotations

import contextlib
import inspect
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from ..vocab.mesh import Mesh
from .msplan import MsOp, MsPlan, as_tuples, output_strategies
from . import stubs
from .compare import Communication, Comparison, compare, compare_communication, compare_moves
from .. import progress
from ..propagate import price_plan, propagate
from ..propagate import semi_auto_plan
from ..errors import StrategistError, VerifyError
from ..files.anchors import load_anchors

_PKG_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _one_line(text: str, limit: int = 400) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _anchor_requests(strategies: str, graph, mesh: Mesh) -> list[dict]:
    """The anchors file resolved against strategist's graph: what the child must ``shard()``."""
    return anchor_requests(load_anchors(strategies, graph, mesh), graph)


def anchor_requests(anchors: dict, graph) -> list[dict]:
    """Anchors (:class:`~strategist.vocab.anchors.Anchor` per operator name) as the child's ``shard()`` requests."""
    out = []
    for name, a in anchors.items():
        op = graph.op(name)
        req = {"op": name, "cell_path": op.cell_path, "instance": op.instance_name, "type": op.type,
               "in_strategy": a.strategy, "out_strategy": a.out_strategy}
        if a.layouts is not None:
            lay = a.layouts[0]
            req["mesh"] = {"shape": list(lay.device_matrix), "names": list(lay.alias_name)}
            req["in_layout"] = [[list(d) for d in x.axes()] for x in a.layouts]
            req["out_layout"] = [[list(d) for d in x.axes()] for x in a.out_layouts] if a.out_layouts else None
        out.append(req)
    return shared_calls(graph.ops, out)


#: the keys of an anchor request that say its strategy (the rest say which operator it is)
_STRATEGY_KEYS = ("in_strategy", "out_strategy", "mesh", "in_layout", "out_layout")


def shared_calls(ops, requests: list[dict]) -> list[dict]:
    """``requests`` with ``functional`` (how many such calls the model makes) on each anchor of an operator no Cell
    attribute holds (a functional call, a tensor method). MindSpore configures such a call through the primitive its
    function shares with every other call of it (``ops.embedding`` calls the one ``embedding_op``;
    ``ops.flash_attention_score`` creates a ``FlashAttentionScore`` while the graph compiles), so the child shards
    every primitive of that type outside the model's Cells: exact when each call of that type no Cell holds has the
    same anchor. The first that has none, or another, is a ``StrategyError`` naming both operators and why.

    >>> from types import SimpleNamespace as O
    >>> ops = [O(name="emb", type="Embedding", held=False), O(name="mm", type="MatMul", held=True)]
    >>> reqs = [{"op": "emb", "type": "Embedding", "in_strategy": [[1, 1], [4, 1]]},
    ...         {"op": "mm", "type": "MatMul", "in_strategy": [[2, 1], [4, 1]]}]
    >>> [r.get("functional") for r in shared_calls(ops, reqs)]
    [1, None]
    """
    from ..errors import StrategyError
    by_op = {r["op"]: r for r in requests}
    free: dict[str, list[str]] = {}
    for op in ops:
        if not op.held:
            free.setdefault(op.type, []).append(op.name)
    for r in requests:
        names = free.get(r["type"], [])
        if r["op"] not in names:
            continue
        r["functional"] = len(names)      # the calls it configures: the child checks MindSpore took each
        mine = [r.get(k) for k in _STRATEGY_KEYS]
        for other in names:
            o = by_op.get(other)
            why = ("has no anchor" if o is None else
                   "has another strategy" if [o.get(k) for k in _STRATEGY_KEYS] != mine else None)
            if why is not None:
                raise StrategyError(
                    f"anchor {r['op']}: MindSpore configures this functional {r['type']} call through the "
                    f"primitive it shares with the model's other functional {r['type']} calls, and {other} "
                    f"{why}: anchor all {len(names)} alike (or none)")
    return requests


def dataset_request(dataset_strategy, mesh: Mesh):
    """The dataset strategy as the MindSpore child takes it."""
    if dataset_strategy in ("data_parallel", "full_batch"):
        return dataset_strategy
    if dataset_strategy == "dp":      # strategist's MindFormers convention: the batch split by the dp axis
        return {"*dim0": mesh.get("dp", mesh.size)}
    if isinstance(dataset_strategy, dict):
        return {k: list(v) for k, v in dataset_strategy.items()}
    raise VerifyError(f"unknown dataset strategy {dataset_strategy!r}: use data_parallel, full_batch, "
                      f"or a split per input such as {{'x': (8, 1)}}")


def mindspore_plan(model: str, mesh, *, inputs=None, kwargs=None, strategies: str | None = None,
                   dataset_strategy="data_parallel", fully_use_devices=False, elementwise_op_strategy_follow=False,
                   timeout=900, graph=None, strategy_file: str | None = None,
                   strategy_file_mode: str = "LOAD", mindformers: dict | None = None,
                   parallel_mode: str = "auto_parallel", redistributions: bool = False, training: bool = False,
                   eval_forward: bool | None = None, fa_load_balance: bool = False) -> MsPlan:
    """MindSpore 2.9.0's own sharding propagation of ``model`` (``path.py:NAME``) on ``mesh``.

    The child compiles the Cell as built or, ``eval_forward=False``, after ``set_train(True)``, as a training run
    does; None: the compile ``graph`` emulates (``graph.training``; MindFormers models always train), else as built.

    ``inputs`` are strategist's ``--input`` specs with GLOBAL shapes; the child compiles with the
    per-device slices the dataset strategy implies. ``strategies`` is an anchors file (strategist op
    names and globs); resolving it needs strategist's graph (``graph``, else it is loaded here).

    MindFormers configs (``mindformers:<yaml>`` or a ``.yaml`` path): the child builds the training model at
    ``mesh`` (dp, tp, cp, ep) in MindFormers' own mode -- ``mindformers={"mode": "propagation"}`` (default:
    its ``sharding_propagation()`` anchors under auto_parallel) or ``"semi_auto"`` (its full ``shard()``,
    still compiled under auto_parallel + sharding_propagation) -- with ``layers``/``seq``/``batch``/
    ``overrides`` as :func:`strategist.frontend.mindformers.load_mindformers` takes them (else from ``kwargs``, the
    ``--layers/--seq/--batch/--set`` entries). With a ``strategies`` file (mode ``"anchors"``) the child clears
    every strategy MindFormers set and configures the file's operators instead.

    ``parallel_mode="semi_auto_parallel"``: no propagation -- MindSpore's semi_auto compile, its strategies (the batch
    strategies it generates for unconfigured operators among them) read from the ``step_parallel_end`` dump.

    ``redistributions=True``: :attr:`MsPlan.redistributions` lists the redistributions MindSpore inserted in its
    ``step_parallel_end`` graph.

    ``fa_load_balance=True``: MindSpore's FlashAttention load balance on (``parallel_speed_up_json``'s
    ``enable_flash_attention_load_balance``).

    >>> ms = mindspore_plan("examples/sharding_techniques.py:DocsFFN", "dp=2,tp=4")   # doctest: +SKIP
    >>> [(o.path, o.in_strategy) for o in ms.ops][:1]                                # doctest: +SKIP
    [('flatten', ((8, 1, 1, 1),))]
    """
    # size: the child's request built in one place (its keys listed once), run and read back
    mesh = Mesh.parse(mesh) if isinstance(mesh, str) else mesh
    given = model
    mf = _mindformers_request(model, kwargs, strategies, mindformers)
    if mf is not None:
        if not model.startswith("mindformers:"):
            model = os.path.abspath(model)                 # the child runs in its own directory
    elif not model.startswith("mindone:"):         # (a mindone model is named, not a file)
        ref_path, sep, name = model.rpartition(":")
        if sep and ref_path:
            model = f"{os.path.abspath(ref_path)}:{name}"     # the child runs in its own directory
    if eval_forward is None:
        eval_forward = not (graph is not None and graph.training)
    anchors = []
    if strategies:
        if graph is None:
            from ..frontend.loader import load_graph
            graph = load_graph(model, inputs, kwargs, training=not eval_forward)
        anchors = _anchor_requests(strategies, graph, mesh)
    ms_dir = stubs.mindspore_dir()
    backend = stubs.detect_backend(ms_dir)
    stub_paths = stubs.ensure_stubs(ms_dir) if backend == "stub" else None
    _sweep_orphans()
    work = tempfile.mkdtemp(prefix=f"strategist-verify-{os.getpid()}-")
    try:
        ir_dir = os.path.join(work, "ir")
        request = {
            "model": model, "inputs": list(inputs or []), "kwargs": list(kwargs or []),
            "device_num": mesh.size, "dataset_strategy": dataset_request(dataset_strategy, mesh),
            "anchors": anchors, "backend": backend, "ir_dir": ir_dir,
            "algo": {"fully_use_devices": bool(fully_use_devices),
                     "elementwise_op_strategy_follow": bool(elementwise_op_strategy_follow)},
        }
        if parallel_mode != "auto_parallel":
            request["parallel_mode"] = parallel_mode
        if fa_load_balance:
            request["fa_load_balance"] = True
        request["ir_pass"] = _ir_pass(parallel_mode)       # the dump the child reads strategies from
        passes = request["ir_pass"]
        if eval_forward and mf is None:
            request["eval"] = True
        elif mf is None:
            # a compile that fails after the parallel passes (step_parallel_end dumped) still settled its
            # strategies: the GPU plugin expands RmsNorm for a training graph and then fails its float16 Add
            passes = ",".join(dict.fromkeys([passes, "step_parallel_end"]))
        if redistributions:
            request["redistributions"] = True              # ... and the redistributions from step_parallel_end
            passes = ",".join(dict.fromkeys([passes, "step_parallel_end"]))
        if training:
            # one training step: the model under a loss and its gradients, every collective read from the graph
            # after autodiff (the strategies too, named without the step's wrapper); ``training`` may be the
            # outputs' strategies (output_strategies), which the loss's sums take
            request["training"] = training if isinstance(training, list) else True
            passes = ",".join(dict.fromkeys([passes, "validate"]))
        if mf is not None:
            request["mindformers"] = mf
            request["kwargs"] = []
            request["mf_mesh"] = str(mesh)
        if strategy_file:   # MindSpore's operator-strategy file (strategist advise --emit-strategy-file)
            request["strategy_file"] = os.path.abspath(strategy_file)
            request["strategy_file_mode"] = strategy_file_mode      # "SAVE": MindSpore writes its own
        t0 = time.time()
        rc, res, log_file = _run_child(work, request, _child_env(backend, stub_paths, mesh.size, ir_dir, passes), timeout)
        wall = time.time() - t0
        where = f"{os.path.basename(given)} on {mesh.size} devices"
        _raise_on_failure(rc, res, log_file, where, timeout, dataset_strategy)
    finally:
        keep = os.environ.get("STRATEGIST_VERIFY_KEEP")     # a directory: a copy of the child's log, IR, request
        if keep:                                            # (debugging: GLOG_v=1 for MindSpore's INFO log)
            shutil.copytree(work, keep, dirs_exist_ok=True)
        shutil.rmtree(work, ignore_errors=True)
    return _ms_plan(res, given, mesh, dataset_strategy, backend, wall)


def _raise_on_failure(rc, res, log_file, where: str, timeout: float, dataset_strategy) -> None:
    """A VerifyError naming what went wrong when the child timed out, crashed or reported a failure."""
    if rc is None:
        raise VerifyError(f"MindSpore did not finish its sharding propagation of {where} within {timeout} s "
                          f"(raise the timeout, or verify fewer layers)")
    if res is None:
        raise VerifyError(_crash_message(rc, where, log_file))
    if not res.get("ok"):
        if res.get("error_kind") == "input":
            raise VerifyError(_one_line(res.get("error", "")))
        if res.get("error_kind") == "internal":
            tb = (res.get("traceback") or "").strip().splitlines()
            raise VerifyError(_one_line(f"verify's MindSpore child failed: {res.get('error')} "
                                        f"({tb[-3].strip() if len(tb) >= 3 else 'no traceback'}; "
                                        f"please report this)", 600))
        raise VerifyError(_one_line(f"MindSpore rejected the configuration ({where}, dataset strategy "
                                    f"{_ds_text(dataset_strategy)}): {res.get('error', 'no message')}", 600))


def _ms_plan(res: dict, given: str, mesh: Mesh, dataset_strategy, backend: str, wall: float) -> MsPlan:
    """The child's result as an :class:`MsPlan` (the dataset's and output's strategies apart from the operators)."""
    ops, dataset, output = [], None, None
    for d in res["ops"]:
        if d["type"] == "_VirtualDataset":
            dataset = as_tuples(d["in_strategy"])
        elif d["type"] == "_VirtualOutput":
            output = as_tuples(d["in_strategy"])
        else:
            ops.append(MsOp.from_dict(d))
    return MsPlan(ops, dataset_strategy, mesh.size, res.get("compile_seconds", 0.0), round(wall, 3), dataset, output,
                  backend, res.get("mindspore_version", ""), res.get("compile_inputs", []), given,
                  list(res.get("notes") or []), res.get("redistributions"), res.get("collectives"))


def _mindformers_request(model: str, kwargs, strategies, mindformers: dict | None) -> dict | None:
    """The child's MindFormers build options, or None for a ``path.py:NAME`` model."""
    from ..frontend.mindformers import is_mindformers_ref, resolve_config, split_model_options
    if not is_mindformers_ref(model):
        if mindformers is not None:
            raise VerifyError(f"mindformers= options given for {model}, which is not a MindFormers config")
        return None
    resolve_config(model)            # a missing config is the user's error, before any child runs
    opts = dict(split_model_options(kwargs)) if mindformers is None else dict(mindformers)
    # an anchors file replaces MindFormers' own strategies: the child builds in propagation mode, clears every
    # strategy MindFormers set, and configures the file's operators instead
    opts.setdefault("mode", "anchors" if strategies else "propagation")
    if opts["mode"] not in ("propagation", "semi_auto", "anchors"):
        raise VerifyError(f"mindformers mode {opts['mode']!r}: propagation, semi_auto or anchors")
    if (opts["mode"] == "anchors") != bool(strategies):
        raise VerifyError(f"{model}: MindFormers mode {opts['mode']!r} "
                          + ("takes an anchors file (--anchors)" if not strategies else
                             "configures the model with MindFormers' own strategies; an anchors file replaces "
                             "them (mode 'anchors')"))
    opts["overrides"] = dict(opts.get("overrides") or {})
    # experts_stand_in: the MoE GroupedMatmuls as MatMul stand-ins (strategist.frontend.mindformers.standin; set by
    # verify_model)
    return {k: opts.get(k) for k in ("mode", "layers", "seq", "batch", "overrides", "experts_stand_in")}


def _load_mf(model: str, mf: dict):
    """strategist's graph of a MindFormers model as verify's child compiles it: MindSpore 2.9 cannot propagate
    through GroupedMatmul, so the MoE experts are MatMul stand-ins on both sides
    (:mod:`strategist.frontend.mindformers.standin`)."""
    from ..frontend.mindformers import load_mindformers
    # the child builds in a parallel mode, where the loss adds its logits + 0 and labels + 0 and configures them
    # (strategist.frontend.mindformers.add_loss_adds), with MindFormers' own strategies or an anchors file alike
    return load_mindformers(model, **{k: mf[k] for k in ("layers", "seq", "batch", "overrides")},
                            experts_stand_in=True)[0]


def _supported(model: str) -> None:
    """Kept for callers of the former refusal: every model kind is supported now."""
    return None


def _sweep_orphans() -> None:
    """Remove the temporary directories of verify runs whose process was killed before it could."""
    import glob
    for d in glob.glob(os.path.join(tempfile.gettempdir(), "strategist-verify-*-*")):
        pid = os.path.basename(d).split("-")[2]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except OSError:
            pass


def _ir_pass(parallel_mode: str) -> str:
    """The IR dump the child reads strategies from: under auto_parallel the propagation has set every strategy
    by ``step_parallel_begin`` (at its end some operators are replaced by their pieces: a OneHot's FloorDiv, Sub);
    under semi_auto_parallel the batch strategies of the unconfigured operators are generated inside
    step_parallel, so only ``step_parallel_end`` shows them (``gen_strategy``). The redistributions inserted
    are read from ``step_parallel_end``."""
    return "step_parallel_end" if parallel_mode == "semi_auto_parallel" else "step_parallel_begin"


def _child_env(backend: str, stub_paths, device_num: int, ir_dir: str, ir_pass: str = "step_parallel_begin") -> dict:
    """The child's environment: MindSpore's dry run on ``device_num`` devices, the IR dump into ``ir_dir``."""
    env = dict(os.environ)
    if stub_paths is not None:
        lib_dir, cuda_home = stub_paths
        env["LD_LIBRARY_PATH"] = lib_dir + (os.pathsep + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        env["CUDA_HOME"] = cuda_home
    env.update({
        "MS_SIMULATION_LEVEL": "0",            # dry run: front end only, dummy collectives
        "RANK_SIZE": str(device_num), "RANK_ID": "0",
        "MS_DEV_SAVE_GRAPHS": "1", "MS_DEV_DUMP_IR_PASSES": ir_pass,
        "MS_DEV_SAVE_GRAPHS_PATH": ir_dir, "MS_OM_PATH": ir_dir,
        "GLOG_v": env.get("GLOG_v", "3"),
        "STRATEGIST_VERIFY_PARENT": str(os.getpid()),
        "PYTHONPATH": _PKG_PARENT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""),
    })
    if backend != "ascend":                    # the collective manager's host path (no MPI is used)
        env.update({"OMPI_COMMAND": "strategist-verify", "PMIX_RANK": "0"})
    for k in ("MS_ROLE", "MS_SCHED_HOST", "MS_SCHED_PORT", "MS_WORKER_NUM"):
        env.pop(k, None)
    return env


def _run_child(work: str, request: dict, env: dict, timeout: float) -> tuple[int | None, dict | None, str]:
    """(return code or None on timeout, the child's result or None, its log file); the child runs in ``work``."""
    req_file, res_file, log_file = (os.path.join(work, f) for f in ("request.json", "result.json", "child.log"))
    with open(req_file, "w") as f:
        json.dump(request, f)
    with open(log_file, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "strategist.verify.child", req_file, res_file],
                                cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        progress.add_child(proc.pid)           # an interrupted run kills it before exiting
        try:
            with progress.task("MindSpore's own sharding propagation (child process)"):
                rc = proc.wait(timeout=timeout)
        except BaseException as err:           # timeout, Ctrl-C: never leave MindSpore running
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            if isinstance(err, subprocess.TimeoutExpired):
                return None, None, log_file
            raise
        finally:
            progress.remove_child(proc.pid)
    if not os.path.exists(res_file):
        return rc, None, log_file
    with open(res_file) as f:
        return rc, json.load(f), log_file


def _ds_text(ds) -> str:
    return ds if isinstance(ds, str) else json.dumps({k: list(v) for k, v in ds.items()})


def _crash_message(rc: int, where: str, log_file: str) -> str:
    try:
        with open(log_file, errors="replace") as f:
            lines = [ln.strip() for ln in f if ln.strip()]
    except OSError:
        lines = []
    hint = next((ln for ln in reversed(lines) if "ERROR" in ln or "Error" in ln or "Exception" in ln), "")
    if rc < 0:
        try:
            what = signal.Signals(-rc).name
        except ValueError:
            what = f"signal {-rc}"
        msg = (f"MindSpore crashed ({what}) during its sharding propagation of {where}: a bug in MindSpore's C++ "
               f"on this configuration, typically an operator's shape inference on a split it cannot take")
    else:
        msg = f"MindSpore's child process exited with code {rc} without an answer"
    return _one_line(msg + (f"; last message: {hint}" if hint else ""), 600)


def verify_model(model: str, mesh, *, inputs=None, kwargs=None, strategies=None, dataset_strategy="data_parallel",
                 graph=None, plan=None, timeout=900, semi_auto: bool = False, redistributions: bool = False, communication: bool = False,
                 training: bool = True, **settings):
    """strategist's propagation and MindSpore's, side by side: a :class:`~strategist.verify.compare.Comparison`.

    ``settings`` (``fully_use_devices``, ``elementwise_op_strategy_follow``, ``fa_load_balance``) go to MindSpore
    and to strategist's ``propagate`` where it accepts them. MindFormers configs: both sides take the experts'
    anchors of ``mindformers={"mode": "propagation"|"semi_auto"}`` (default propagation; the build options come
    from ``kwargs``); strategist's side is :func:`strategist.frontend.mindformers.expert_strategies` on its tp=1 graph.

    ``semi_auto``: both sides in semi_auto_parallel instead -- strategist's :func:`strategist.engine.semi_auto.semi_auto_plan`
    beside MindSpore compiled so (``path.py:NAME`` models only).

    ``redistributions``: also which edges move data, strategist's priced plan beside the redistributions MindSpore
    inserted in its ``step_parallel_end`` graph (:func:`strategist.verify.compare.compare_moves`).

    ``training`` (default True, ``--train``): MindSpore's child compiles the Cell after ``set_train(True)``, as a
    training run does, and strategist emulates that compile; False (``--eval``): the Cell compiled as built, not
    set to training, as inference does. The two compiles can propagate differently: MindSpore creates its
    operators in another order (a VirtualOutput only in the inference compile).

    ``communication``: also every collective of one training step -- MindSpore compiles the model under a loss
    (the sum of its output) with the gradients of its Parameters, in a second child, and its graph after autodiff
    is read (:func:`strategist.verify.compare.compare_communication`): forward, backward and mirror collectives,
    kind, group and bytes, beside strategist's priced plan.
    """
    # size: strategist's plan beside MindSpore's, then each comparison asked for, in order
    from ..frontend.loader import load_graph
    mesh = Mesh.parse(mesh) if isinstance(mesh, str) else mesh
    mf = _mindformers_request(model, kwargs, strategies, settings.pop("mindformers", None))
    if semi_auto and mf is not None:
        raise VerifyError(f"--semi-auto verifies path.py:NAME models: MindFormers' {os.path.basename(model)} compiles "
                          f"its Morph bodies' collectives inline in verify's child, which semi_auto_parallel refuses")
    if mf is not None and graph is None and plan is None:
        graph = _load_mf(model, mf)
    graph = graph if graph is not None else (plan.graph if plan is not None
                                             else load_graph(model, inputs, kwargs, training=training))
    if mf is not None:
        mf = dict(mf, experts_stand_in=True)
    if mf is not None and any(op.type == "GroupedMatmul" for op in graph):
        graph, plan = _load_mf(model, mf), None
    known = {"fully_use_devices", "elementwise_op_strategy_follow", "fa_load_balance"}
    unknown = set(settings) - known
    if unknown:
        raise VerifyError(f"unknown verify setting(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(known))})")
    t0 = time.time()
    failed = None
    if plan is None:
        anchors = load_anchors(strategies, graph, mesh) if strategies else {}   # a bad file is the user's error
        accepted = inspect.signature(propagate).parameters
        extra = {k: v for k, v in settings.items() if k in accepted}
        ours = graph
        if settings.get("fa_load_balance"):
            # priced with the load balance's exchanges (strategist.cost.attention), as MindSpore's step runs them
            from ..cost.step import StepOptions
            ours = ours.with_meta(step_options=StepOptions(fa_load_balance=True))
        if mf is not None and mf["mode"] == "anchors":
            # the file's anchors on both sides; MindFormers' own strategies are cleared in the child
            from ..frontend.mindformers import global_rows_graph
            extra["use_model_strategies"] = False
            ours = global_rows_graph(graph)
        elif mf is not None:    # the same anchors MindFormers sets in the child, on strategist's tp=1 graph
            from ..frontend.mindformers import expert_strategies, global_rows_graph
            anchors = dict(expert_strategies(model, mesh, mf["mode"], graph=graph,
                                             **{k: mf[k] for k in ("layers", "seq", "batch", "overrides")}))
            extra["use_model_strategies"] = False
            # the child compiles the Morph bodies inlined as global operators: their [S, B] <-> [S*B]
            # Reshapes are ordinary Reshapes there, so strategist's side reads them so too
            ours = global_rows_graph(graph)
        try:
            if semi_auto:
                plan = semi_auto_plan(ours, mesh, anchors, dataset_strategy=dataset_strategy)
            else:
                plan = propagate(ours, mesh, anchors, dataset_strategy=dataset_strategy, price=False, **extra)
        except StrategistError as err:      # MindSpore may accept what strategist refuses: still ask it
            failed = str(err)
    ours_seconds = time.time() - t0
    if any("traced with its eager attention" in n for n in graph.notes):
        kwargs = list(kwargs or []) + ["attn_implementation=eager"]     # (a mindone model's flash attention)
    ms = mindspore_plan(model, mesh, inputs=inputs, kwargs=kwargs, strategies=strategies,
                        dataset_strategy=dataset_strategy, timeout=timeout, graph=graph, mindformers=mf,
                        parallel_mode="semi_auto_parallel" if semi_auto else "auto_parallel",
                        redistributions=redistributions, **settings)
    if failed is not None:
        result = Comparison([], [], list(ms.ops), None, ms.dataset, ms, model=ms.model,
                            mesh=str(mesh), dataset_strategy=dataset_strategy,
                            notes=[f"strategist's propagate failed where MindSpore did not: {failed}"])
    else:
        result = compare(plan, ms)
        # what MindSpore's child noted: a compile that failed after its sharding propagation (the plan read from
        # the dumps), MindFormers' bugs worked around
        result.notes = [n for n in ms.notes if n not in result.notes] + result.notes
        if redistributions:
            result.moves = compare_moves(price_plan(plan), ms)
        if communication:
            result.communication = _training_step_communication(model, mesh, plan, result, semi_auto, inputs=inputs,
                                                                kwargs=kwargs, strategies=strategies,
                                                                dataset_strategy=dataset_strategy, timeout=timeout,
                                                                graph=graph, mindformers=mf, **settings)
    result.strategist_seconds = round(ours_seconds, 3)
    return result


def _training_step_communication(model, mesh, plan, result, semi_auto: bool, **ms_options):
    """``verify --communication``: a second child compiles the model as one training step; its collectives after
    autodiff beside ``plan`` priced. A step MindSpore cannot compile is reported as not compared (the forward
    comparison in ``result`` stands); where the step's strategies differ from the plan, ``result`` gets a note."""
    try:
        step = mindspore_plan(model, mesh, parallel_mode="semi_auto_parallel" if semi_auto else "auto_parallel",
                              training=output_strategies(plan), **ms_options)
    except VerifyError as err:
        hint = ""
        if "must have same data type" in str(err) and getattr(ms_options.get("graph"), "training", False) \
                and ms_options.get("mindformers") is None:
            # the forward was read from the dumps (its note says so); the step's graph after autodiff is not there
            hint = ("; MindSpore's GPU plugin expands RmsNorm in a graph set to training and rejects the expansion's "
                    "float16 + float32 Add (Ascend has the kernel): --eval compiles the step as built")
        return Communication({}, {}, error=f"MindSpore could not compile {os.path.basename(model)} as a training "
                                           f"step: {err}{hint}")
    c = compare_communication(price_plan(plan), step)
    if c.strategies_differ:
        result.notes.append(
            f"MindSpore's training step chose other strategies than strategist for {len(c.strategies_differ)} "
            f"operator(s) (e.g. {c.strategies_differ[0]}; the loss the step adds, the sum of the output, joins its "
            f"propagation): the communication comparison covers a different plan there")
    return c
