"""A MindFormers config's training model, built at tp=1 and extracted as an
:class:`~strategist.vocab.graph.OpGraph`.

:func:`load_mindformers` builds the model in a simulated world, extracts its graph
(:func:`strategist.frontend.graph.extract`) and rewrites it as MindSpore's parallel passes see it;
:func:`expert_strategies` reads the experts' strategies at a mesh onto that graph. MindSpore and MindFormers are
imported inside the functions that use them: importing this module loads neither.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from ...errors import InputSpecError, ModelLoadError
from ...vocab.graph import OPTIMIZER_TYPES, OpGraph, OptimizerSharding, TensorSpec
from ...vocab.mesh import Mesh
from ..graph import extract
from .build import (UID, add_loss_adds, build_model, clear_strategies, config_batch, input_slots,
                    loss_own_operators, mf_lazy_inline_cells, model_inputs, sliced_tokens, strip_trivial,
                    train_class)
from .config import config_default, is_legacy, load_yaml, resolve_config
from .experts import Experts, loss_own_strategies, read_expert_strategies
from .morph import collapse_moe_ffn
from .settings import layers_key, plain
from .rewrites import mark_local_rows, replicate_layers, unmerge_rotary_tables
from .world import BUILD_LOG, import_mindformers, mindformers_world


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


def load_mindformers(ref: str, *, layers: int | None = None, seq: int | None = None, batch: int | None = None,
                     overrides: dict | None = None, replicate: bool | None = None,
                     experts_stand_in: bool = False, loss_adds: bool = True) -> tuple[OpGraph, MfInfo]:
    """Build ``ref``'s training model at tp=1 and extract its graph (shapes global, ``[S, B, H]`` inside).

    ``experts_stand_in``: the MoE experts' GroupedMatmuls compiled as MatMul stand-ins
    (:mod:`strategist.frontend.mindformers.standin`; ``strategist verify`` only: MindSpore cannot propagate through
    GroupedMatmul).

    ``loss_adds``: the loss's "force redistribution" adds (``logits + 0``, ``labels + 0``; :func:`add_loss_adds`)
    in the graph, as every parallel build has them, configured by MindFormers' own code: ``graph.parallel_only``
    names them and every plan of the graph (advice, propagate, compare, verify) starts from their strategies at its
    mesh (:func:`strategist.engine.plan.parallel_only_anchors`, read by :func:`loss_own_strategies`). Off: the
    stand-alone graph, without them.

    ``replicate``: compile 2 layers (with experts: the dense ones first and two expert layers: :func:`built_layers`)
    and copy the last one for the rest (:func:`replicate_layers`; MindFormers
    disables lazy inline, so each layer compiles separately: 64 qwen3 layers take minutes). Default: on wherever
    the layers after the first built are identical (checked op for op against a full extraction, with and without
    experts), off where an expert pattern alternates.

    >>> g, info = load_mindformers("mindformers:qwen3/pretrain_qwen3_32b_4k.yaml", layers=2)  # doctest: +SKIP
    """
    # size: MindFormers' build in its order inside one world context: config, model, extraction, rewrites
    path = resolve_config(ref)
    import_mindformers()
    notes: list[str] = []
    t0 = time.perf_counter()
    with mindformers_world(mode="stand_alone", device_num=1, notes=notes):
        fitted: list[str] = []          # layer-count keys fitted to --layers: notes for every report
        cfg = load_yaml(path, layers, seq, overrides or {}, notes=fitted)
        notes.extend(fitted)
        total = int(cfg.model.model_config.get(layers_key(cfg.model.model_config)) or 0)
        built = built_layers(cfg, total)
        if replicate is None:
            replicate = built < total
        ext = built if replicate and total > built else total
        if ext != total:
            cfg = load_yaml(path, ext, seq, overrides or {})
        conf_cls, train_cls, model_type, arch = train_class(cfg)
        legacy = is_legacy(cfg)
        # what a mesh must fit (mesh_warnings): the YAML's keys, else the config class's defaults
        fit = {k: cfg.model.model_config.get(k) if cfg.model.model_config.get(k) is not None
               else config_default(cfg, k)
               for k in ("num_attention_heads", "num_key_value_heads", "num_experts", "n_routed_experts",
                         "num_moe_experts")}
        b = batch or config_batch(cfg)
        net = build_model(cfg)
        net.set_train(True)
        t1 = time.perf_counter()
        specs = model_inputs(cfg, b, net)
        ids, labels = specs["input_ids"], specs["labels"]
        removed = clear_strategies(net)
        loss_cells = add_loss_adds(net) if loss_adds else []
        undo = None
        if experts_stand_in:
            from .standin import patch_experts    # (imports MindSpore and MindFormers: loaded only here)
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
        # TopoSort order (strategist.engine.search.orders.creation_order)
        graph.training = True
        for op in graph:
            op.attrs.pop(UID, None)
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
        # the sequence the inputs carry (a config without model_config.seq_length takes model_inputs' default)
        mark_local_rows(graph, int(ids.shape[1]) - sliced_tokens(net), b)
        if ext != total:
            base = graph
            graph = replicate_layers(base, total)
            if graph is base:
                raise ModelLoadError(f"{ref}: no repeated layers (decoder.layers.N, encoder.layers.N or model.layers.N) "
                                     f"found in the {ext} layers built, to grow them to {total}: give --layers {ext}")
            graph.mf_extracted_layers = ext
            graph.mf_base_graph = base          # the compiled layers (compare advises on them)
        if not experts_stand_in:
            # the MoE FFN Morph runs per device on its own tokens: one operator, not a global permutation
            base = graph.mf_base_graph
            graph = collapse_moe_ffn(graph)
            if base is not None:
                graph.mf_base_graph = collapse_moe_ffn(base)
        t2 = time.perf_counter()
        for _, msg in BUILD_LOG:         # MindFormers' own warnings while building, once each
            line = "MindFormers: " + msg.splitlines()[0][:300]
            if line not in notes:
                notes.append(line)
    # the config's sequence parallelism (norms and residual adds split along S by tp): the advice follows it
    for g in (graph, graph.mf_base_graph):
        if g is not None:
            _record_build(g, cfg, (layers, seq, batch, overrides), b, fitted, fit, legacy)
    mc = cfg.model.model_config
    info = MfInfo(
        ref=ref, path=path, model_type=model_type, architecture=arch, train_class=train_cls.__name__,
        layers=total, seq=int(ids.shape[1]), batch=b, extracted_layers=ext,
        model_config=plain(mc), parallel_config=plain(cfg.get("parallel_config") or {}),
        inputs=specs, notes=notes, build_seconds=t1 - t0, extract_seconds=t2 - t1)
    info.stripped = removed + strip_trivial(graph)
    return graph, info


def built_layers(cfg, total: int) -> int:
    """How many of a config's ``total`` layers to build, the rest copies of the last one (:func:`replicate_layers`):
    two of identical layers; with experts, the dense layers the config puts first (``first_k_dense_replace``, the
    config class's default counting too: deepseek3's YAML leaves it to the class) and two expert layers; ``total``
    where the experts' layers are not the dense ones followed by identical ones (a ``moe_layer_freq`` pattern)."""
    mcfg = cfg.model.model_config

    def value(k):
        return mcfg.get(k) if k in mcfg else config_default(cfg, k)
    experts = any(value(k) for k in ("num_experts", "n_routed_experts", "num_moe_experts"))
    if not experts:
        return min(2, total)
    freq = value("moe_layer_freq")
    if freq not in (None, 1) and not (isinstance(freq, (list, tuple)) and all(x == 1 for x in freq)):
        return total
    dense = value("first_k_dense_replace")
    dense = dense if isinstance(dense, int) and not isinstance(dense, bool) and dense > 0 else 0
    return min(dense + 2, total)


def _record_build(g: OpGraph, cfg, options: tuple, batch: int, fitted: list[str], fit: dict, legacy: bool) -> None:
    """What ``g`` records of its build: the options (``layers, seq, batch, overrides`` as given), the batch, the
    notes of keys fitted to ``--layers``, the model config keys a mesh must fit, and the config's parallel
    settings."""
    # how it was built: the experts' strategies of the same config (source diffs read what the
    # model's own methods set at a mesh: expert_strategies)
    layers, seq, given_batch, overrides = options
    g.mf_options = {"layers": layers, "seq": seq, "batch": given_batch, "overrides": dict(overrides or {})}
    g.mf_batch = batch
    g.notes = list(g.notes) + [n for n in fitted if n not in g.notes]
    g.mf_model_config = {k: v for k, v in fit.items() if v is not None}    # (mesh_warnings)
    g.sequence_parallel = bool((cfg.get("parallel_config") or {}).get("use_seq_parallel"))
    g.sequence_first = not legacy       # mcore's [S, B, H]; the legacy layers are batch-first
    g.mf_legacy = legacy
    # the config's parallel optimizer: replicated weights and their optimizer states kept in slices
    g.optimizer_sharding = OptimizerSharding.from_config(plain(cfg.get("parallel") or {}))
    # the config's enable_alltoall: without it MindSpore writes an all-to-all as AllGather + Split + Concat
    g.enable_alltoall = bool(plain(cfg.get("parallel") or {}).get("enable_alltoall", False))
    # the config's optimizer (its states' bytes): MindFormers' AdamW keeps fp32 moments, AdamWeightDecay the weights'
    g.optimizer = OPTIMIZER_TYPES.get(str((plain(cfg.get("optimizer") or {}) or {}).get("type", "")))


def expert_strategies(ref: str, mesh: Mesh | str, mode: str = "semi_auto", *, graph: OpGraph | None = None,
                      layers: int | None = None, seq: int | None = None, batch: int | None = None,
                      overrides: dict | None = None) -> Experts:
    """The strategies MindFormers' own code sets at ``mesh``, as anchors on the tp=1 graph's operators.

    ``mode``: ``"semi_auto"`` (every ``shard()``) or ``"propagation"`` (the ``sharding_propagation()``
    anchors). Nothing is compiled: the strategies are the primitives' attributes after construction.
    ``graph``: ``ref``'s graph (:func:`load_mindformers` with these options), loaded here if not given.
    """
    mesh = Mesh.parse(mesh) if isinstance(mesh, str) else mesh
    if mode not in ("semi_auto", "propagation"):
        raise InputSpecError(f"mode {mode!r}: semi_auto or propagation")
    if graph is None:
        graph, _ = load_mindformers(ref, layers=layers, seq=seq, batch=batch, overrides=overrides)
    return read_expert_strategies(ref, mesh, mode, graph, layers=layers, seq=seq, batch=batch, overrides=overrides)
