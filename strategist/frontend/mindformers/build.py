"""MindFormers' training network, built from a config inside the simulated world (:mod:`.world`).

The config and model classes of a config (mcore and legacy), the network under ``no_init_parameters``, its inputs,
the strategies on its primitives cleared, and the loss's own primitives (the "force redistribution" adds only a
parallel build has, and what the loss configures in ``__init__``). MindSpore and MindFormers are imported inside the
functions that use them: importing this module loads neither.
"""
from __future__ import annotations

import contextlib
import copy
import inspect
import logging
import sys

from ...errors import InputSpecError, ModelLoadError
from ...vocab.graph import OpGraph, TensorSpec
from .config import is_legacy
from .world import BUILD_LOG


def train_class(cfg):
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


def build_model(cfg, *, dp=1, tp=1, cp=1, ep=1, sp=None):
    """The training network under ``no_init_parameters`` (inside :func:`mindformers_world`)."""
    from mindspore.nn.utils import no_init_parameters
    conf_cls, train_cls, _, _ = train_class(cfg)
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
        moe = moe.to_dict() if hasattr(moe, "to_dict") else dict(moe)
        if legacy:
            # a legacy model takes the section whole, as MindFormers' trainer passes it (build_parallel_config:
            # MoEConfig(**moe_config)); an mcore config's keys are its model config's
            from mindformers.modules.transformer.moe import MoEConfig
            extra["moe_config"] = MoEConfig(**moe)
        else:
            extra.update(moe)
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
        if len(lines) > 1 and ("conversion failed" in msg or msg.endswith(":")):   # the problems on the next lines
            msg = " ".join(lines)[:600]
        errors = [m for lvl, m in BUILD_LOG if lvl >= logging.ERROR]
        if "error log" in msg and errors:
            msg = f"{msg} {' | '.join(e.replace(chr(10), ' ') for e in errors[-3:])}"
        raise ModelLoadError(f"building {train_cls.__name__} (dp={dp}, tp={tp}, cp={cp}, ep={ep}) failed: "
                             f"{type(err).__name__}: {msg} (check the config and --set overrides)") from None
    return net


def sliced_tokens(net) -> int:
    """The tokens ``net`` slices off its input in training: 1 for a legacy LLaMA (``input_sliced_sig`` False), whose
    dataset gives it ``seq_length + 1``; 0 for the rest (mcore models take ``seq_length`` tokens)."""
    return 1 if net is not None and getattr(net, "input_sliced_sig", None) is False else 0


def model_inputs(cfg, batch: int, net=None) -> dict[str, TensorSpec]:
    mc = cfg.model.model_config
    s = int(mc.get("seq_length") or 4096) + sliced_tokens(net)
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


def config_batch(cfg) -> int:
    rc = cfg.get("runner_config") or {}
    pc = cfg.get("parallel_config") or {}
    return max(1, int(rc.get("batch_size") or 1) * int(pc.get("data_parallel") or 1))


UID = "strategist_uid"


def clear_strategies(net, keep_self_defined: bool = False) -> int:
    """Delete every strategy attribute from ``net``'s primitives; returns how many primitives had one.

    Used on the tp=1 build (its strategies are trivial, never anchors; and a tuple input's layouts are nested
    tuples graph.extract does not read), after reading the experts' strategies from a build (MindFormers shares
    some primitive objects between builds, so a strategy left on one would reach the next), and by verify's
    child before an anchors file configures the model (``keep_self_defined``: MindFormers' per-device Morph
    bodies keep theirs). (Primitives with identical arguments are told apart by
    ``strategist.frontend.owners.owned_primitives`` during the compile; a distinct attribute per primitive object
    kept here would stop MindSpore's CSE from merging equal primitives' identical calls, as it does in the real
    compile.)"""
    cleared: set[int] = set()
    for _, cell in net.cells_and_names():
        for prim in prims_of(cell).values():
            if keep_self_defined and prim.attrs.get("self_define_shard"):
                continue
            for a in ("in_strategy", "out_strategy", "in_layout", "out_layout"):
                if a in prim.attrs:
                    prim.del_prim_attr(a)
                    cleared.add(id(prim))
    return len(cleared)


def strip_trivial(graph: OpGraph) -> int:
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
    TmpIdentity (:func:`strategist.engine.search.structure.shared_param_users`); ``load_mindformers`` builds stand-alone, where
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


def prims_of(cell):
    from mindspore.ops.primitive import Primitive
    d = dict(getattr(cell, "_primitives", {}) or {})
    d.update({k: v for k, v in vars(cell).items() if k not in d})
    return {k: v for k, v in d.items() if isinstance(v, Primitive)}


#: the primitives MindFormers' CrossEntropyLoss (legacy ``core/loss/loss.py`` and ``parallel_core/training_graph/
#: loss_func.py``) and its ``_LogSoftmax`` / ``_NLLLoss`` configure in ``__init__`` in every semi/auto parallel mode,
#: with no ``shard()`` / ``sharding_propagation()`` method to take them back: a real sharding-propagation run has
#: their strategies whatever else is configured. (loss cell's attribute) -> {primitive attribute: what it computes}
LOSS_OWN = {
    "": {"add": "logits + 0", "add_label": "labels + 0", "sum2": "the masked loss's sums",
         "mul2": "loss * mask", "relu": "relu"},
    "_log_softmax": {"max": "the logits' max", "sub": "logits - max, - log(sum exp)", "exp": "exp",
                     "sum": "sum of exp", "log": "log", "onehot": "the labels' one-hot"},
    "_nllloss": {"mul": "log-softmax * one-hot", "neg": "negation", "sum": "the per-token loss sum"},
}


def loss_own_prims(net, loss_cells) -> list[tuple[str, object, str, object, str]]:
    """(cell path, cell, attribute, primitive, what it computes) for each primitive of :data:`LOSS_OWN` the loss
    Cells at ``loss_cells`` (:func:`add_loss_adds`) and their softmax / NLL sub-Cells hold."""
    cells = dict(net.cells_and_names())
    out = []
    for path in loss_cells:
        for sub, prims in LOSS_OWN.items():
            sub_path = f"{path}.{sub}" if sub else path
            cell = cells.get(sub_path)
            for attr, what in (prims.items() if cell is not None else ()):
                prim = getattr(cell, attr, None)
                if prim is not None and hasattr(prim, "attrs"):
                    out.append((sub_path, cell, attr, prim, what))
    return out


def loss_own_operators(graph: OpGraph, net, loss_cells) -> dict[str, str]:
    """``graph.parallel_only``: the operators of the loss's own configured primitives (:data:`LOSS_OWN`; the
    x + 0 adds only a parallel build has, :func:`add_loss_adds`), each with where its strategy comes from."""
    prims = {(p, a): f"{type(cell).__name__}.{a} ({what})" for p, cell, a, _, what in loss_own_prims(net, loss_cells)}
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
