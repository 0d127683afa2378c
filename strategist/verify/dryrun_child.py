"""The child process of ``strategist verify --memory``: one training step in MindSpore's DryRun.

    python -m strategist.verify.dryrun_child REQUEST.json RESULT.json

Run only by :mod:`strategist.verify.dryrun`, which prepares the environment (the stub CANN libraries of
:mod:`strategist.verify.cann_stubs` on ``LD_LIBRARY_PATH``, ``MS_SIMULATION_LEVEL=1``, ``RANK_SIZE``/``RANK_ID`` and
``OMPI_COMMAND``/``PMIX_RANK`` for MindSpore's dummy collectives) and runs it in a temporary directory it removes.
Here:

1. ``device_target="Ascend"`` (the plugin loads on the stubs; in simulation MindSpore replaces the ACL runtime by
   its own and simulates the device memory) and ``communication.init()``.
2. ``auto_parallel`` + ``sharding_propagation`` on ``device_num`` devices, as ``strategist verify`` compiles; the
   parallel optimizer and ``pipeline_stages`` as requested; the simulated rank is ``rank``.
3. The model is built as :mod:`strategist.frontend.loader` builds it (under ``no_init_parameters()``); the anchors
   are applied by :func:`strategist.verify.child.apply_anchors`; recompute (``Cell.recompute()`` on each layer, or
   ``Primitive.recompute()`` on the selective operators), pipeline stages (``Cell.pipeline_stage``).
4. the training cell is compiled and run once: every tensor of the step is allocated from the simulated device
   memory, no kernel runs. Without micro-batches the one ``Model`` builds (``amp.build_train_network``:
   ``TrainOneStepCell``); with them the one MindFormers 1.9's trainer builds, which strategist's memory model
   follows: ``MFPipelineWithLossScaleCell`` over ``_VirtualDatasetCell(GradAccumulationCell(net, micro))`` (with
   pipeline stages ``PipelineCell(net, micro)``), the gradients clipped by their global norm, the optimizer on a
   learning-rate schedule (the parent preloads the processor-count shim for its inlined control flow).

The result file holds MindSpore's memory statistics of the process (``runtime.memory_stats()``); MindSpore logs its
own summary ("Used peak memory usage ...") when the process ends, which the parent reads from the log. The process
then usually dies in MindSpore's teardown (a double free): harmless, the result was written before.
"""
from __future__ import annotations

import sys
import time
import types

from ..errors import StrategistError
from .child import apply_anchors, compile_specs, import_time_guard, record_error
from .child import main as child_main
from .dryrun import MINDFORMERS_HINT


def _fake_hccl() -> None:
    """``communication.init()`` imports CANN's ``hccl`` Python package only to read its version."""
    hccl, version = types.ModuleType("hccl"), types.ModuleType("hccl.sys_version")
    version.__sys_version__ = "8.1.0"
    hccl.sys_version = version
    sys.modules.setdefault("hccl", hccl)
    sys.modules.setdefault("hccl.sys_version", version)


def _optimizer(name: str, params, learning_rate=1e-4, swap: bool = False):
    from mindspore import nn
    if name == "adam-weight-decay":
        return nn.AdamWeightDecay(params, learning_rate=learning_rate)
    if name == "adamw":
        _import_mindformers("MindFormers' AdamW")
        from mindformers.core.optim.adamw import AdamW     # fp32 moments whatever the weights' dtype
        # swap: its moments Parameters on the host (device='CPU'), moved in for their update (MindFormers' optimizer.swap)
        return AdamW(params, learning_rate=learning_rate, swap=swap)
    if name == "momentum":
        return nn.Momentum(params, learning_rate=learning_rate, momentum=0.9)
    raise StrategistError(f"unknown optimizer {name!r}: adamw, adam-weight-decay or momentum")


def _import_mindformers(what: str) -> None:
    """MindFormers imported as strategist imports it: its log kept out of the working directory (it writes
    ``./output/`` unless LOG_MF_PATH points elsewhere); a one-line error naming the extra where it cannot be."""
    from ..frontend.mindformers.world import import_mindformers
    try:
        import_mindformers()
    except StrategistError as err:
        raise StrategistError(f"verify --memory runs {what}, and mindformers cannot be imported ({err}): "
                              f"{MINDFORMERS_HINT}") from None


def _mindformers_cell(net, params, req: dict):
    """MindFormers 1.9's training cell for micro-batches, as its trainer builds it in (semi-)auto parallel
    (``BaseTrainer``: ``_wrap_network_with_tool_cells_legacy`` wraps the net in ``GradAccumulationCell`` -- with
    pipeline stages ``PipelineCell`` -- and ``_VirtualDatasetCell``; ``_reset_wrapper_for_grad_accu`` /
    ``_reset_wrapper_for_pipeline_parallel`` make the wrapper ``MFPipelineWithLossScaleCell``; its default
    arguments): the accumulated gradients are cleared from their own values rather than from constant zeros
    (MindSpore's ``_TrainGradAccuStepCell`` keeps those), and the gradients are clipped by their global norm.
    The optimizer gets a learning-rate schedule, as the trainer gives it: the cell deep-copies the rate, which
    a float one (a Parameter) does not survive."""
    from mindspore import nn
    from mindspore.nn.wrap.cell_wrapper import GradAccumulationCell, _VirtualDatasetCell  # noqa: PLC2701
    _import_mindformers("micro-batches in MindFormers' MFPipelineWithLossScaleCell")
    from mindformers.core.lr.lr_schedule import CosineWithWarmUpLR
    from mindformers.wrapper.wrapper import MFPipelineWithLossScaleCell
    micro = req["micro_batches"]
    pipeline = req.get("pipeline_stages", 1) > 1
    wrapped = _VirtualDatasetCell(nn.PipelineCell(net, micro) if pipeline else GradAccumulationCell(net, micro))
    lr = CosineWithWarmUpLR(learning_rate=1e-4, warmup_steps=10, total_steps=1000)
    opt = _optimizer(req.get("optimizer", "adamw"), params, lr, bool(req.get("optimizer_swap")))
    return MFPipelineWithLossScaleCell(
        network=wrapped, optimizer=opt, use_clip_grad=True, max_grad_norm=1.0, scale_sense=1.0,
        micro_batch_num=micro, parallel_config=None, calculate_per_token_loss=False,
        global_norm_spike_threshold=1.0, print_separate_loss=True, use_skip_data_by_global_norm=False,
        lr_scheduler=None, grouped_lr_scheduler=None)


def _configure(cell, req: dict, result: dict) -> None:
    """Anchors, recompute and pipeline stages on the built model."""
    cells = dict(cell.cells_and_names())
    apply_anchors(cell, req.get("anchors") or [], req.get("mesh"))
    for path in req.get("recompute_cells") or []:
        cells[path].recompute()
    for op in req.get("recompute_ops") or []:
        owner = cells.get(op["cell_path"])
        prim = None if owner is None else ((getattr(owner, "_primitives", None) or {}).get(op["instance"])
                                           or vars(owner).get(op["instance"]))
        if prim is None:
            raise StrategistError(f"selective recompute: {op['cell_path'] or 'the top Cell'} holds no primitive "
                                  f"{op['instance']!r} to recompute (a functional call cannot be recomputed by name)")
        prim.recompute()
    result["recomputed"] = len(req.get("recompute_cells") or []) + len(req.get("recompute_ops") or [])
    for path, stage in (req.get("stages") or {}).items():
        cells[path].pipeline_stage = stage


def _train_step(cell, req: dict):
    """The model under a scalar loss, micro-batched as requested, in the training cell with the optimizer."""
    import mindspore as ms
    from mindspore import nn, ops

    class _Loss(nn.Cell):
        """The model's output as the loss: a scalar output as is, otherwise the float32 sum of the first output."""

        def __init__(self, model):
            super().__init__(auto_prefix=False)
            self.strategist_net = model

        def construct(self, *args):
            out = self.strategist_net(*args)
            if isinstance(out, (tuple, list)):
                out = out[0]
            if out.ndim:
                out = ops.sum(out.astype(ms.float32))
            return out

    params = cell.trainable_params()
    net = _Loss(cell)
    if req.get("micro_batches", 1) > 1 or req.get("pipeline_stages", 1) > 1:
        return _mindformers_cell(net, params, req)
    # without micro-batches, as Model builds it: TrainOneStepCell
    from mindspore.amp import build_train_network
    return build_train_network(net, _optimizer(req.get("optimizer", "adamw"), params,
                                               swap=bool(req.get("optimizer_swap"))), level="O0")


def _zero_weights(cell) -> None:
    """Weights the step initialises as zeros: no kernel runs, so only their sizes matter, and a random host-side
    initialisation of billions of values would take most of the run."""
    from mindspore.common.initializer import Zero
    for p in cell.get_parameters():
        pending = getattr(p, "init_mode", None)
        if pending is not None and getattr(pending, "init", None) is not None:
            pending.init = Zero()


def _build(req: dict):
    """(the model, its per-device inputs as tensors, their text, MindSpore's dataset strategy)."""
    import inspect

    from ..frontend.compile import as_tensor
    from ..frontend.loader import ModelRef, build_cell, order_inputs, parse_inputs, parse_kwargs
    with import_time_guard():
        cell = build_cell(ModelRef.parse(req["model"]), parse_kwargs(req.get("kwargs")))
    _zero_weights(cell)
    named = parse_inputs(req.get("inputs"))
    if not named:
        named = parse_inputs([f"{k}:{v}" for k, v in (getattr(cell, "example_inputs", None) or {}).items()])
    specs = order_inputs(cell, named)
    names = [p.name for p in inspect.signature(cell.construct).parameters.values()][:len(specs)]
    # a pipeline's data-parallel split is over one stage's devices
    per_device, ds = compile_specs(names, specs, req["device_num"] // req.get("pipeline_stages", 1),
                                   req["dataset_strategy"])
    micro = req.get("micro_batches", 1)
    for k, s in zip(names, per_device):
        if s.shape and s.shape[0] % micro:
            raise StrategistError(f"input {k}: its per-device batch {s.shape[0]} does not split into {micro} "
                                  f"micro-batches: give a global batch divisible by the data-parallel devices "
                                  f"times {micro}")
    return cell, [as_tensor(s) for s in per_device], [f"{k}:{s}" for k, s in zip(names, per_device)], ds


def run(req: dict) -> dict:
    result: dict = {"ok": False}
    t_start = time.time()
    try:
        import mindspore as ms
        import mindspore.communication as comm
        from mindspore import context
        # (MindSpore's own parallel context, as verify's child drives it: the dummy collectives' device check)
        from mindspore.parallel._auto_parallel_context import auto_parallel_context  # noqa: PLC2701

        result["mindspore_version"] = ms.__version__
        _fake_hccl()
        ms.set_context(mode=ms.GRAPH_MODE, device_target="Ascend")
        comm.init()
        n = req["device_num"]
        cell, args, result["compile_inputs"], ds = _build(req)
        settings = {"parallel_mode": "auto_parallel", "search_mode": "sharding_propagation", "device_num": n,
                    "global_rank": req["rank"], "dataset_strategy": ds,
                    "enable_parallel_optimizer": bool(req.get("optimizer_parallel"))}
        if req.get("pipeline_stages", 1) > 1:
            settings["pipeline_stages"] = req["pipeline_stages"]
        context.set_auto_parallel_context(**settings)
        auto_parallel_context()._context_handle.set_hccl_test_avaible(True)
        _configure(cell, req, result)
        step = _train_step(cell, req)
        step.set_train(True)
        t0 = time.time()
        step.compile(*args)
        result["compile_seconds"] = round(time.time() - t0, 3)
        t0 = time.time()
        step(*args)
        result["run_seconds"] = round(time.time() - t0, 3)
        stats = ms.runtime.memory_stats()
        result["memory_stats"] = {k: v for k, v in stats.items() if isinstance(v, (int, float))}
        result["ok"] = True
    except Exception as err:
        record_error(result, err)
    result["child_seconds"] = round(time.time() - t_start, 3)
    return result


def main(argv: list[str]) -> int:
    return child_main(argv, run)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
