"""The child process of ``strategist verify``: MindSpore's own sharding propagation, one compile.

    python -m strategist.verify.child REQUEST.json RESULT.json

Run only by :mod:`strategist.verify.runner`, which prepares the environment (stub CUDA libraries on
``LD_LIBRARY_PATH``, a fake ``CUDA_HOME``, MindSpore's dry-run mode ``MS_SIMULATION_LEVEL=0`` with
``RANK_SIZE``/``RANK_ID``, ``OMPI_COMMAND``/``PMIX_RANK`` so the collective manager takes its host
path, and the ``step_parallel_begin`` IR dump into a private temporary directory) and removes that
directory afterwards. Here:

1. ``set_context(device_target=GPU)`` (the plugin loads on the stubs) and ``communication.init()``
   (the dry run installs MindSpore's dummy collectives); the device-count check is waived.
2. The model is built as ``strategist.frontend.loader`` builds it (weights never allocated); the anchors are
   applied with ``Primitive.shard`` to the primitive each strategist operator name stands for (its
   Cell by attribute path, the primitive by attribute name; a functional call's: every primitive of its type
   outside the model's Cells, see :func:`apply_anchors`).
3. ``auto_parallel`` + ``sharding_propagation`` on ``device_num`` devices, the dataset strategy and
   MindSpore's algorithm parameters as requested; the inputs are the per-device slices the dataset
   strategy implies. Compiling stops after the front end (dry run).
4. The result: ``_get_shard_strategy`` (MindSpore's operator names) and the IR dump (graph order,
   instance names, shapes, user-configured or not), written as JSON.

Every failure is written into the result as one line (``ok: false``); a crash (a signal in MindSpore's
C++) leaves no result, which the parent reports. ``STRATEGIST_VERIFY_FAULT=SIGFPE`` (or another signal
name) makes the child raise that signal just before compiling: a test hook for the crash path.
"""
from __future__ import annotations

import contextlib
import glob
import inspect
import json
import os
import signal
import sys
import time
import types

from ..errors import StrategistError


def _first_line(err: BaseException) -> str:
    from ..frontend.compile import first_line as first
    return first(err)


def from_mindspore(err: BaseException) -> bool:
    """True when the innermost frame of ``err``'s traceback is MindSpore's code."""
    tb, last = err.__traceback__, None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    return last is not None and f"{os.sep}mindspore{os.sep}" in last


def record_error(result: dict, err: Exception) -> None:
    """A child's failure in its result: strategist's refusal of the request (input), MindSpore's own checks -- which
    reject shard() arguments and context values with Python exceptions too -- (rejected), or anything else (internal,
    with its traceback)."""
    if isinstance(err, StrategistError):
        result["error_kind"], result["error"] = "input", str(err)
        return
    result["error_kind"] = "rejected" if from_mindspore(err) else "internal"
    result["error"] = _first_line(err)
    if result["error_kind"] == "internal":
        import traceback
        result["traceback"] = traceback.format_exc()[-3000:]


@contextlib.contextmanager
def import_time_guard():
    """Model files may call ``set_context(device_target=...)`` or ``init()`` when imported or built; while
    the model is built those calls keep our device target and do not re-initialise communication."""
    import mindspore as ms
    import mindspore.communication as comm
    from mindspore import context

    saved = [(ms, "set_context", ms.set_context), (context, "set_context", context.set_context),
             (comm, "init", comm.init)]
    real = context.set_context

    def set_context(*a, **kw):
        kw.pop("device_target", None)
        kw.pop("device_id", None)
        return real(*a, **kw) if (a or kw) else None
    ms.set_context = context.set_context = set_context
    comm.init = lambda *a, **kw: None
    with contextlib.suppress(ImportError):
        import mindspore.communication.management as mgmt
        saved.append((mgmt, "init", mgmt.init))
        mgmt.init = comm.init
    if hasattr(ms, "set_device"):
        saved.append((ms, "set_device", ms.set_device))
        ms.set_device = lambda *a, **kw: None
    try:
        yield
    finally:
        for obj, attr, value in saved:
            setattr(obj, attr, value)


def compile_specs(names: list[str], specs, device_num: int, how) -> tuple[list, object]:
    """Global input specs -> (per-device compile specs, MindSpore's ``dataset_strategy`` value).

    >>> from strategist.vocab.graph import TensorSpec as T
    >>> compile_specs(["x"], [T((256, 64), "float32")], 8, "data_parallel")
    ([TensorSpec(shape=(32, 64), dtype='float32')], 'data_parallel')
    >>> compile_specs(["x"], [T((256, 64), "float32")], 8, {"x": [2, 4]})
    ([TensorSpec(shape=(128, 16), dtype='float32')], ((2, 4),))
    """
    from ..errors import InputSpecError
    from ..vocab.graph import TensorSpec
    if how == "full_batch":
        return list(specs), "full_batch"
    if how == "data_parallel":
        out = []
        for name, s in zip(names, specs):
            if s.shape and s.shape[0] % device_num:
                raise InputSpecError(f"input {name} {s}: its batch dimension {s.shape[0]} does not divide into "
                                     f"{device_num} devices, which MindSpore's data_parallel dataset strategy needs "
                                     f"(use a batch that does, or --dataset-strategy full_batch)")
            out.append(TensorSpec((s.shape[0] // device_num,) + tuple(s.shape[1:]), s.dtype) if s.shape else s)
        return out, "data_parallel"
    if isinstance(how, dict) and "*dim0" in how:     # strategist's "dp": every batch split by the dp axis
        import math
        how = {name: (math.gcd(how["*dim0"], s.shape[0]),) + (1,) * (len(s.shape) - 1)
               for name, s in zip(names, specs) if s.shape}
    if isinstance(how, dict):
        unknown = set(how) - set(names)
        if unknown:
            raise InputSpecError(f"dataset strategy names no input {', '.join(sorted(unknown))} "
                                 f"(inputs: {', '.join(names)})")
        rows, out = [], []
        for name, s in zip(names, specs):
            split = tuple(how.get(name, (1,) * len(s.shape)))
            if len(split) != len(s.shape) or any(d % k for d, k in zip(s.shape, split)):
                raise InputSpecError(f"dataset split {split} does not fit input {name} {s}")
            rows.append(split)
            out.append(TensorSpec(tuple(d // k for d, k in zip(s.shape, split)), s.dtype))
        return out, tuple(rows)
    raise InputSpecError(f"unknown dataset strategy {how!r} (data_parallel, full_batch, or a split per input)")


def apply_anchors(net, anchors: list[dict], mesh: dict | None) -> None:
    """``prim.shard(...)`` on the primitive behind each strategist operator name."""
    from mindspore.ops.primitive import Primitive

    from ..errors import StrategyError
    cells = dict(net.cells_and_names())
    shared: set[str] = set()
    for a in anchors:
        cell = cells.get(a["cell_path"])
        prim = None
        if cell is not None:
            prim = (getattr(cell, "_primitives", None) or {}).get(a["instance"]) or vars(cell).get(a["instance"])
        if (not isinstance(prim, Primitive) or prim.name != a["type"]) and a.get("functional"):
            # a functional call: every primitive of its type outside the model's Cells (runner.shared_calls
            # checked that each such call has this anchor), configured once per type
            if a["type"] in shared:
                continue
            shared.add(a["type"])
            prims, classes = _shared_primitives(a["type"], net)
            if not prims and not classes:
                raise StrategyError(
                    f"anchor {a['op']}: no module of MindSpore or the model holds a {a['type']} primitive or "
                    f"class its functional call could use, so it cannot be configured")
            kw = _shard_args(a, mesh)
            for p in prims:
                p.shard(**kw)
            for cls in classes:
                _shard_on_creation(cls, kw)
            continue
        if not isinstance(prim, Primitive) or prim.name != a["type"]:
            raise StrategyError(
                f"anchor {a['op']}: MindSpore can only configure a primitive a Cell holds as an attribute, and "
                f"{a['cell_path'] or 'the top Cell'} has no {a['type']} attribute {a['instance']!r} "
                f"(a functional call or tensor method cannot be sharded by name)")
        prim.shard(**_shard_args(a, mesh))


def _shard_args(a: dict, mesh: dict | None) -> dict:
    """The ``Primitive.shard`` keywords of anchor request ``a``: tuple strategies, or Layouts over its mesh."""
    kw = {}
    if a.get("in_layout") is not None:
        from mindspore.parallel import Layout
        m = a.get("mesh") or mesh
        layout = Layout(tuple(m["shape"]), tuple(m["names"]))

        def lay(rows):
            return tuple(layout(*[(d[0] if len(d) == 1 else tuple(d)) if d else "None" for d in row])
                         for row in rows)
        kw["in_strategy"] = lay(a["in_layout"])
        if a.get("out_layout") is not None:
            kw["out_strategy"] = lay(a["out_layout"])
    else:
        kw["in_strategy"] = tuple(tuple(r) for r in a["in_strategy"])
        if a.get("out_strategy") is not None:
            kw["out_strategy"] = tuple(tuple(r) for r in a["out_strategy"])
    return kw


def _shared_primitives(typ: str, net) -> tuple[list, list]:
    """The primitives of type ``typ`` that a functional call can use: every instance a loaded module holds at its
    top level (``gen_ops_prim.embedding_op``, imported under other names too, counted once), and the primitive
    classes of that name, whose instances a call creates while the graph compiles
    (``_get_cache_prim(FlashAttentionScore)(...)``). The model's Cells' own primitives are left out."""
    from mindspore.ops.primitive import Primitive
    held = {id(p) for _, c in net.cells_and_names()
            for p in list((getattr(c, "_primitives", None) or {}).values()) + list(vars(c).values())
            if isinstance(p, Primitive)}
    prims: dict[int, object] = {}
    classes: dict[int, type] = {}
    for module in list(sys.modules.values()):
        space = getattr(module, "__dict__", None)
        if not isinstance(space, dict):
            continue
        for value in list(space.values()):
            if isinstance(value, Primitive) and value.name == typ and id(value) not in held:
                prims[id(value)] = value
            elif isinstance(value, type) and issubclass(value, Primitive) and value.__name__ == typ:
                classes[id(value)] = value
    return list(prims.values()), list(classes.values())


def _check_shared(anchors: list[dict], result: dict) -> None:
    """A note for each type of functional anchor whose calls MindSpore did not all take as configured."""
    want = {a["type"]: a["functional"] for a in anchors if a.get("functional")}
    for typ, calls in want.items():
        held = sum(1 for a in anchors if a["type"] == typ and not a.get("functional"))     # one node each
        took = sum(1 for nd in result["ops"] if nd["type"] == typ and nd.get("configured")) - held
        if took != calls:
            result.setdefault("notes", []).append(
                f"MindSpore configured {took} of the model's {calls} functional {typ} calls anchored through "
                f"their shared primitive")


def _shard_on_creation(cls: type, kw: dict) -> None:
    """Every ``cls`` created from now on (in this child only) is configured with ``shard(**kw)``."""
    import functools
    init = cls.__init__

    @functools.wraps(init)
    def configured(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if type(self) is cls:
            self.shard(**kw)
    cls.__init__ = configured


def attach_names(nodes: list[dict], shard_strategy: dict) -> list[dict]:
    """Give each IR node MindSpore's ``fullname_with_scope`` from ``_get_shard_strategy``: same scope and
    type, equal strategy first, in op-number order. Names MindSpore reports that no IR node takes
    come back as extra operators (no path, no shapes)."""
    import re
    groups: dict[tuple, list[dict]] = {}
    for n in nodes:
        groups.setdefault((n["scope"] or "Default", n["type"]), []).append(n)

    def opnum(k):
        m = re.search(r"-op(\d+)$", k)
        return int(m.group(1)) if m else 0
    leftover = []
    for key in sorted(shard_strategy, key=opnum):
        strategy = _tuples(shard_strategy[key])
        scope, _, leaf = key.rpartition("/")
        typ = re.sub(r"-op\d+$", "", leaf)
        free = [n for n in groups.get((scope, typ), []) if "name" not in n]
        pick = next((n for n in free if n["in_strategy"] == strategy), free[0] if free else None)
        if pick is not None:
            pick["name"] = key
        else:
            leftover.append((key, scope, typ, strategy))
    extra = []
    for key, scope, typ, strategy in leftover:    # scopes the IR credits elsewhere (repeated layers): by type
        free = [n for n in nodes if "name" not in n and n["type"] == typ]
        pick = next((n for n in free if n["in_strategy"] == strategy), None)
        if pick is not None:
            pick["name"] = key
        else:
            extra.append({"name": key, "type": typ, "instance": None, "scope": scope, "in_strategy": strategy,
                          "out_strategy": None, "configured": False, "input_shapes": None, "output_shapes": None})
    for n in nodes:
        n.setdefault("name", f"{n['scope'] or 'Default'}/{n['type']}")
    return nodes + extra


def _tuples(v):
    return tuple(_tuples(x) for x in v) if isinstance(v, (list, tuple)) else v


def _read_plan(req: dict, executor, cell, n: int, dump: str, result: dict) -> None:
    """Into ``result``: the strategies MindSpore settled (from the ``dump`` pass's IR and the executor), and on
    request the training step's collectives and the parallel graph's redistributions."""
    if req.get("training"):
        from .ir import parse_collectives
        result["collectives"] = parse_collectives(_latest_dump(req["ir_dir"], "validate"), n,
                                                  wrapper="/strategist_loss-", model=f"/{_NET}-",
                                                  outputs_configured=isinstance(req["training"], list))
    try:
        shard = executor._get_shard_strategy(cell)
    except Exception:
        shard = {}
    from .ir import parse_ir
    nodes = parse_ir(_latest_dump(req["ir_dir"], dump))
    if req.get("training"):
        # the training step's wrapper: the model's operators are those under it, named without its prefix
        nodes = [nd for nd in nodes if nd["scope"] and f"/{_NET}-" in nd["scope"]]
        for nd in nodes:
            nd["scope"] = "Default/" + nd["scope"].split(f"/{_NET}-", 1)[1].partition("/")[2]
        shard = {k.split(f"{_NET}.", 1)[1] if f"{_NET}." in k else k: v for k, v in shard.items()}
    for node in nodes:
        node["path"] = _node_path(node)
    result["ops"] = attach_names(nodes, shard)
    if req.get("redistributions"):
        from .ir import parse_redistributions
        found = parse_redistributions(_latest_dump(req["ir_dir"], "step_parallel_end"))
        result["redistributions"] = [{"src": _node_path(r["src"]), "dst": _node_path(r["dst"]),
                                      "src_type": r["src"]["type"], "dst_type": r["dst"]["type"],
                                      "also": [_node_path(d) for d in r["also"]],
                                      "ops": list(r["ops"]), "collectives": list(r["collectives"])}
                                     for r in found]


def run(req: dict) -> dict:
    # size: the MindSpore child's one run: context, build, configure, compile and read back, in the order MindSpore needs
    result: dict = {"ok": False}
    t_start = time.time()
    stack = None
    try:
        import mindspore as ms
        from mindspore import context
        import mindspore.communication as comm
        try:
            from mindspore.graph.api import _cell_graph_executor as executor
        except ImportError:
            from mindspore.common.api import _cell_graph_executor as executor
        from mindspore.parallel._auto_parallel_context import auto_parallel_context

        from ..frontend.compile import as_tensor
        from ..frontend.loader import ModelRef, build_cell, order_inputs, parse_inputs, parse_kwargs

        result["mindspore_version"] = ms.__version__
        target = {"stub": "GPU", "gpu": "GPU", "ascend": "Ascend"}[req["backend"]]
        early = _mindone_on_cpu(req)
        ms.set_context(mode=ms.GRAPH_MODE, device_target=target)
        if req.get("fa_load_balance"):
            # what parallel_speed_up_json's enable_flash_attention_load_balance sets: set_context takes the file
            # under ascend_config, which it ignores on another device target
            from mindspore._c_expression import ms_ctx_param
            context._context().set_param(ms_ctx_param.enable_flash_attention_load_balance, True)
        comm.init()
        n = req["device_num"]
        stack = contextlib.ExitStack()
        stack.__enter__()
        if early is not None:
            cell, names, specs, slots = early
            from ..frontend.graphfix import graph_mode_fixes    # (as strategist compiled it: noted there)
            stack.enter_context(graph_mode_fixes())
        elif req.get("mindformers") is not None:
            # MindFormers builds (and anchors) its own model at the requested mesh in its world
            cell, names, specs, slots = _build_mindformers(req, stack, result)
        else:
            with import_time_guard():
                cell = build_cell(ModelRef.parse(req["model"]), parse_kwargs(req.get("kwargs")))
            named = parse_inputs(req.get("inputs"))
            if not named:
                named = parse_inputs([f"{k}:{v}" for k, v in (getattr(cell, "example_inputs", None) or {}).items()])
            specs = order_inputs(cell, named)
            names = [p.name for p in inspect.signature(cell.construct).parameters.values()][:len(specs)]
            slots = None
        per_device, ds = compile_specs(names, specs, n, req["dataset_strategy"])
        result["compile_inputs"] = [f"{k}:{s}" for k, s in zip(names, per_device)]

        mode = ({"parallel_mode": "semi_auto_parallel"} if req.get("parallel_mode") == "semi_auto_parallel" else
                {"parallel_mode": "auto_parallel", "search_mode": "sharding_propagation"})
        context.set_auto_parallel_context(**mode, device_num=n, global_rank=0, dataset_strategy=ds)
        auto_parallel_context()._context_handle.set_hccl_test_avaible(True)
        from mindspore.parallel.algo_parameter_config import set_algo_parameters
        set_algo_parameters(**req.get("algo", {}))
        apply_anchors(cell, req.get("anchors") or [], req.get("mesh"))
        if req.get("strategy_file"):
            from mindspore.parallel import set_op_strategy_config
            set_op_strategy_config(mode=req.get("strategy_file_mode", "LOAD"), path=req["strategy_file"])
        args = [as_tensor(s) for s in per_device]
        if req.get("training"):
            # the step takes the tensors only and puts the model's None slots back itself: a None among the
            # compiled graph's inputs fails MindSpore's _VirtualDataset in a training step (GetNodeShape)
            cell = _training_step(cell, req["training"] if isinstance(req["training"], list) else None, slots)
        elif slots is not None:     # positional slots the model takes as None (MindFormers: masks, positions)
            it = iter(args)
            args = [next(it) if used else None for used in slots]
        if req.get("mindformers") is None and not req.get("eval"):
            # the training forward a training run compiles (TopoSort order, no VirtualOutput); for the eval
            # forward the Cell stays as built (set_train(False) would also rename its phase 'predict')
            cell.set_train(True)
        fault = os.environ.get("STRATEGIST_VERIFY_FAULT")
        if fault:
            os.kill(os.getpid(), getattr(signal, fault))
        dump = req.get("ir_pass", "step_parallel_begin")     # runner._ir_pass: the pass MindSpore dumps
        t0 = time.time()
        try:
            executor.compile(cell, *args, phase="train")
        except Exception as err:
            late = glob.glob(os.path.join(req["ir_dir"], "**", f"{dump}*.ir"), recursive=True)
            done = glob.glob(os.path.join(req["ir_dir"], "**", "step_parallel_end*.ir"), recursive=True)
            # a plain Cell's training compile that fails after its parallel passes: MindSpore's GPU plugin
            # expands RmsNorm in a training graph, then rejects the float16 + float32 eps Add of the expansion
            # (Ascend has the kernel); the strategies were settled and dumped before
            after = (late and done and req.get("mindformers") is None and not req.get("eval")
                     and not req.get("training"))
            if not (late and (req.get("mindformers") is not None or after)):
                result["error_kind"] = "rejected"
                result["error"] = _first_line(err)
                result["detail"] = str(err)[:6000]
                return result
            # MindFormers, or a plain Cell's training forward as above: the strategies were settled (the pass
            # dumped) before a later pass failed
            if req.get("training"):
                # the graph after autodiff is built after the parallel passes: nothing to read the collectives from
                result["error_kind"] = "rejected"
                result["error"] = (f"MindSpore's compile stopped after its sharding propagation, before the step's "
                                   f"parallel graph: {_first_line(err)}")
                result["detail"] = str(err)[:6000]
                return result
            result.setdefault("notes", []).append(
                f"MindSpore's compile failed after its sharding propagation (the plan is read from the "
                f"{dump} dump): {_first_line(err)}")
        result["compile_seconds"] = round(time.time() - t0, 3)
        _read_plan(req, executor, cell, n, dump, result)
        _check_shared(req.get("anchors") or [], result)
        result["ok"] = True
    except Exception as err:
        record_error(result, err)
    finally:
        if stack is not None:
            with contextlib.suppress(Exception):
                stack.__exit__(None, None, None)
        result["child_seconds"] = round(time.time() - t_start, 3)
    return result


#: the training step's attribute names: the model's collectives are those under ``/<_NET>-`` in their scope
_NET = "strategist_net"


def _mindone_on_cpu(req: dict):
    """A mindone model's ``__init__`` computes tensors (rotary tables), which the stand-in device (running no
    kernel) cannot: built on the CPU before that device is chosen. (cell, input names, specs, None), or None for
    any other model or backend."""
    if not str(req.get("model", "")).startswith("mindone:") or req["backend"] != "stub":
        return None
    import mindspore as ms
    from ..frontend.loader import ModelRef, build_cell, order_inputs, parse_inputs, parse_kwargs
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    cell = build_cell(ModelRef.parse(req["model"]), parse_kwargs(req.get("kwargs")))
    named = parse_inputs([f"{k}:{v}" for k, v in cell.example_inputs.items()])
    return cell, list(cell.example_inputs), order_inputs(cell, named), None


def _training_step(net, output_splits=None, slots=None):
    """``net`` as one training step MindSpore differentiates: the loss is the sum of its outputs (every element
    of a tuple, so nothing the model computes is pruned as dead), the gradients are taken for every trainable
    Parameter and kept (``depend``), so the compiled graph holds the forward, its transpose and the Parameters'
    mirrors -- the collectives one step runs. ``output_splits``: per output, the splits of its layout in the plan
    compared; each sum is configured with them, so the loss does not join the propagation with a layout of its
    own (left unconfigured, it changed MindSpore's strategies on 39 of 60 random nets)."""
    import mindspore as ms
    from mindspore import nn, ops, ParameterTuple

    class _Loss(nn.Cell):
        def __init__(self, model):
            super().__init__()
            setattr(self, _NET, model)
            splits = output_splits or [None]
            self.strategist_sums = nn.CellList([_Sum(sp) for sp in splits])
            self.strategist_n = len(splits)
            self.strategist_slots = tuple(bool(u) for u in slots) if slots is not None else None

        def construct(self, *args):
            if self.strategist_slots is not None:
                full = ()
                k = 0
                for used in self.strategist_slots:
                    if used:
                        full = full + (args[k],)
                        k = k + 1
                    else:
                        full = full + (None,)
                out = getattr(self, _NET)(*full)
            else:
                out = getattr(self, _NET)(*args)
            if isinstance(out, (tuple, list)):
                total = self.strategist_sums[0](out[0])
                for k in range(1, len(out)):
                    total = total + self.strategist_sums[min(k, self.strategist_n - 1)](out[k])
                return total
            return self.strategist_sums[0](out)

    class _Sum(nn.Cell):
        def __init__(self, splits):
            super().__init__()
            self.cast = ops.Cast()
            self.sum = ops.ReduceSum()
            if splits:
                self.cast.shard((tuple(splits),))
                self.sum.shard((tuple(splits),))

        def construct(self, x):
            return self.sum(self.cast(x, ms.float32))

    class _Step(nn.Cell):
        def __init__(self, model):
            super().__init__()
            self.strategist_loss = _Loss(model)
            self.weights = ParameterTuple(model.trainable_params())
            self.value_and_grad = ops.value_and_grad(self.strategist_loss, None, self.weights)

        def construct(self, *args):
            loss, grads = self.value_and_grad(*args)
            return ops.depend(loss, grads)

    return _Step(net)


def _latest_dump(ir_dir: str, ir_pass: str) -> str:
    """The text of the newest ``ir_pass`` IR dump under ``ir_dir``."""
    found = glob.glob(os.path.join(ir_dir, "**", f"{ir_pass}*.ir"), recursive=True)
    found += glob.glob(os.path.join(ir_dir, "**", f"[0-9]*_{ir_pass}_*.ir"), recursive=True)   # "20_validate_0081"
    irs = sorted(set(found), key=lambda p: (os.path.getmtime(p), p))
    if not irs:
        raise RuntimeError(f"MindSpore wrote no {ir_pass} IR dump (MS_DEV_SAVE_GRAPHS / MS_DEV_DUMP_IR_PASSES ignored?)")
    with open(irs[-1], errors="replace") as f:
        return f.read()


def _node_path(node: dict) -> str:
    """A dump node's cell attribute path + instance name, as strategist names operators."""
    from ..frontend.owners import scope_cell_path
    path = scope_cell_path(node["scope"] or "Default")[0]
    inst = node["instance"] or node["type"]
    return f"{path}.{inst}" if path else inst


def _build_mindformers(req: dict, stack: contextlib.ExitStack, result: dict):
    """A MindFormers training model built at the requested mesh, in MindFormers' ``propagation`` (or
    ``semi_auto``) mode: its own ``sharding_propagation()`` (or ``shard()``) calls are the anchors. The build
    runs in :func:`strategist.frontend.mindformers.mindformers_world` (simulated communication, logs in a temp dir,
    the FlashAttention/MoELayer missing-method patch), which stays open through the compile."""
    from ..frontend import mindformers as mf
    from ..vocab.mesh import Mesh
    opts = req["mindformers"]
    mesh = Mesh.parse(req["mf_mesh"])
    sizes = mf.mesh_sizes(mesh)
    path = mf.resolve_config(req["model"])
    mf.import_mindformers()
    notes: list[str] = []
    mode = opts.get("mode", "propagation")
    stack.enter_context(mf.mindformers_world(mode="propagation" if mode == "anchors" else mode,
                                             device_num=req["device_num"], notes=notes))
    cfg = mf.load_yaml(path, opts.get("layers"), opts.get("seq"), opts.get("overrides") or {})
    net = mf.build_model(cfg, **sizes)
    net.set_train(True)
    if opts.get("experts_stand_in"):       # as strategist's graph was extracted (verify_model)
        from ..frontend.mindformers.standin import patch_experts
        stack.callback(patch_experts(notes))
    if mode == "anchors":
        _clear_strategies(net, notes)
    _unshard_bare_morphs(net, notes)
    specs = mf.model_inputs(cfg, opts.get("batch") or mf.config_batch(cfg), net)
    result["notes"] = notes
    # construct(input_ids, position_ids, attention_mask, ..., labels): as strategist.frontend.mindformers extracts it
    return net, ["input_ids", "labels"], [specs["input_ids"], specs["labels"]], mf.input_slots(net)


def _clear_strategies(net, notes: list) -> None:
    """Forget every strategy MindFormers' build set on the model's primitives (its sharding_propagation()
    anchors, and the Morphs' layouts): an anchors file configures the model instead."""
    from ..frontend import mindformers as mf
    # the loss's primitives its __init__ configures in every parallel run (its "force redistribution" adds
    # logits + 0 and labels + 0, its softmax, NLL and reductions): they stay so, as in the real run of the file's
    # plan (strategist's graph has them configured alike: strategist.engine.plan.parallel_only_anchors); the file
    # may still configure them itself
    loss_cells = [p for p, cell in net.cells_and_names() if getattr(cell, "enable_force_redistribute", False)]
    kept = {id(prim): (prim, prim.attrs["in_strategy"]) for _, _, _, prim, _ in mf.loss_own_prims(net, loss_cells)
            if prim.attrs.get("in_strategy") is not None}     # (by primitive: the subs and sum2 calls share one)
    cleared = mf.clear_strategies(net, keep_self_defined=True)
    for prim, st in kept.values():
        prim.shard(tuple(tuple(r) for r in st))
    notes.append(f"MindFormers' own strategies cleared on {cleared - len(kept)} primitives; the anchors file "
                 f"configures the model" + (f"; the loss's {len(kept)} own primitives keep theirs (configured in "
                                            f"every parallel run)" if kept else ""))


def die_with_parent() -> None:
    """A killed ``strategist verify`` must not leave MindSpore compiling on a shared machine (Linux)."""
    parent = os.environ.get("STRATEGIST_VERIFY_PARENT")
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)      # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if parent and os.getppid() != int(parent):          # the parent died before prctl
        os._exit(1)


def main(argv: list[str], runner=None) -> int:
    """A child's entry: read the request, ``runner`` it (this module's :func:`run` by default), write the result
    atomically."""
    request_file, result_file = argv
    die_with_parent()
    with open(request_file) as f:
        req = json.load(f)
    result = (runner or run)(req)
    with open(result_file + ".part", "w") as f:
        json.dump(result, f)
    os.replace(result_file + ".part", result_file)
    sys.stdout.flush()
    return 0


def _passthrough(x):
    return x


def _plain_embedding_body(self, input_, weight):
    """VocabParallelEmbedding's body without vocabulary or sequence parallelism (its tp=1 self). MindSpore
    compiles it, so ``mint`` is a module global (set by :func:`_unshard_bare_morphs`), not an import here."""
    bs, seq_len = input_.shape
    _, hidden = weight.shape
    input_ = self.reshape(input_, (bs * seq_len,))
    output = mint.nn.functional.embedding(input_, weight)  # noqa: F821 (a module global, see above)
    return self.reshape(output, (bs, -1, hidden))


def _unshard_bare_morphs(net, notes: list) -> None:
    """MindFormers' propagation mode shards the operators inside its Morph bodies (e.g. a linear's
    ``matmul``) but gives most Morphs no layout while marking them ``self_define_shard``: MindSpore's
    SelfDefineShardInfo then refuses to search them ("it should not reach this function"). A Morph that does
    keep a layout (the labels' reshape) makes MindSpore's front end take its input at the per-device shape
    while the other inputs stay global (Mul [8, 128] x [4, 128]), and an unmarked Morph stays one opaque
    operator. So each cell calls its Morph's body function directly: MindSpore sees the body's operators (and
    the anchors MindFormers set on them) -- the graph strategist extracts, whose translation of the experts'
    anchors skips the layout-only Morphs as well."""
    from mindspore.ops.primitive import Primitive
    bare, laid = [], []
    for path, cell in net.cells_and_names():
        prims = dict(getattr(cell, "_primitives", {}) or {})
        prims.update({k: v for k, v in vars(cell).items() if isinstance(v, Primitive)})
        for attr, prim in prims.items():
            if not (isinstance(prim, Primitive) and prim.name == "Morph" and prim.attrs.get("self_define_shard")):
                continue
            where = f"{path}.{attr}" if path else attr
            configured = any(prim.attrs.get(k) is not None for k in ("in_layout", "in_strategy"))
            (laid if configured else bare).append(where)
            # without the mark MindSpore keeps the Morph whole (one opaque operator, BatchParallel): the anchors
            # on the operators of its body would never be seen -- the cell calls the body itself instead
            fn = getattr(prim, "__morph_fn__", None)
            if fn is not None:
                (cell.__dict__.get("_primitives") or {}).pop(attr, None)
                object.__setattr__(cell, attr, fn)
                # the bodies are written per device (tp-sized slices, an explicit AllReduce when tp > 1);
                # called on global shapes they must be their tp=1 selves -- as strategist extracts them
                if hasattr(cell, "input_size_per_partition") and hasattr(cell, "input_size"):
                    cell.input_size_per_partition = cell.input_size
                if getattr(cell, "tp", 1) != 1:
                    cell.tp = 1
                # the compiled graph still reads the tp the cell was built with: its collectives become no-ops
                for name, val in list((cell.__dict__.get("_primitives") or {}).items()):
                    if val is not None and type(val).__module__.endswith("comm_ops"):
                        cell._primitives.pop(name)
                        object.__setattr__(cell, name, _passthrough)
    _unshard_moe(net, notes)
    emb = [p for p, c in net.cells_and_names() if getattr(c, "enable_embedding_tp", False)
           and not hasattr(c, "vocab_start_index")]
    for p, c in net.cells_and_names():
        if p in emb:
            c.enable_embedding_tp = False
    # its sequence-parallel branch reduce-scatters over self.group, likewise set only by shard(): at tp=1
    # (strategist's build) the branch is off, so the plain body is the same graph
    # (setting ``sequence_parallel = False`` on the cell does not reach the compiled graph, so the cell's
    # Morph slot gets a body of its own: reshape, embedding, reshape)
    sp = [p for p, c in net.cells_and_names() if hasattr(c, "embedding_func") and getattr(c, "sequence_parallel", False)
          and not hasattr(c, "group")]
    if sp:
        from mindspore import mint
        globals()["mint"] = mint
    for p, c in net.cells_and_names():
        if p in sp:
            object.__setattr__(c, "embedding_morph", types.MethodType(_plain_embedding_body, c))
    if sp:
        notes.append(f"MindFormers bug: {sp[0]} (VocabParallelEmbedding) in propagation mode with sequence "
                     f"parallelism reduce-scatters over self.group, set only by shard(): AttributeError at "
                     f"compile; its body without the sequence-parallel branch (strategist's tp=1 graph) is compiled")
    if emb:
        notes.append(f"MindFormers bug: {emb[0]} (VocabParallelEmbedding) in propagation mode keeps its "
                     f"vocab-parallel body (explicit AllReduce) without vocab_start_index (set only by shard()): "
                     f"AttributeError at compile; its plain body (reshape, embedding, reshape) is compiled instead")
    if bare:
        notes.append(f"MindFormers bug: {len(bare)} Morph(s) marked self_define_shard without a layout "
                     f"(e.g. {bare[0]}), which MindSpore's sharding propagation refuses (SelfDefineShardInfo: "
                     f"'it should not reach this function'); their bodies are called directly (ordinary operators)")
    if laid:
        notes.append(f"{len(laid)} layout-only Morph(s) ({', '.join(laid[:3])}): bodies called directly, their layouts "
                     f"dropped (MindSpore would take their inputs at per-device shapes beside global ones)")


def _unshard_moe(net, notes: list) -> None:
    """MindFormers' MoE bodies (the GroupedMatmul FFN's Morph: token dispatcher, experts) are written per
    device: the dispatcher all-to-alls tokens over its expert-parallel group, which MindFormers creates in any
    parallel mode (``get_ep_group_name`` is None only stand-alone) -- even for ep=1 -- and which MindSpore refuses
    in an auto_parallel graph ("the graph can not contain communication op"). Called on global shapes the body
    must be its stand-alone self, as strategist extracts it: no group, so MindFormers' ``AlltoAll``/``AlltoAllV``
    wrappers (created when the body is parsed) pass their input through."""
    moe = []
    for path, cell in net.cells_and_names():
        disp = vars(cell).get("token_dispatcher")
        if disp is not None and getattr(disp, "ep_group", None) is not None:
            disp.ep_group = None
            moe.append(path)
    # the router's auxiliary loss reshapes its tokens to (dp, -1, E) with dp = dp*tp*cp of the build (a global
    # graph of its own at each mesh); strategist's tp=1 graph has dp = 1: the router is compiled at dp = tp = 1
    routers = []
    for path, cell in net.cells_and_names():
        if hasattr(cell, "ones_dp") and getattr(cell, "dp", 1) != 1:
            import numpy as np
            from mindspore import Tensor
            import mindspore as ms
            for name in ("dp", "original_tp"):
                object.__setattr__(cell, name, 1)
            for name in ("ones_dp", "ones_sp"):
                object.__setattr__(cell, name, Tensor(np.ones((1, 1, 1), dtype=np.float32), ms.float32))
            routers.append(path)
    if routers:
        notes.append(f"MindFormers' MoE router ({routers[0]}, {len(routers)} in all) shapes its auxiliary loss by "
                     f"the build's dp*tp*cp; compiled at dp = tp = 1, as strategist's graph")
    if moe:
        notes.append(f"MindFormers' MoE token dispatcher ({moe[0]}, {len(moe)} in all) all-to-alls over its "
                     f"expert-parallel group in any parallel mode (a communication operator MindSpore refuses in an "
                     f"auto_parallel graph); compiled without the group, as stand-alone (strategist's graph)")

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
