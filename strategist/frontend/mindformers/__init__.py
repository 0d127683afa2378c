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

The package by concern: :mod:`.config` (the YAML configs, their options and overrides, a mesh's parallel sizes),
:mod:`.world` (MindFormers' world, simulated while building), :mod:`.build` (the training network, its inputs, the
loss's own primitives), :mod:`.load` (:func:`load_mindformers`, :func:`expert_strategies`), :mod:`.experts` (the
experts' strategies read into anchors), :mod:`.rewrites` (local rows, rotary tables, folded Reshapes, replicated
layers), :mod:`.morph` (the MoE FFN Morph as one operator) and :mod:`.standin` (the experts' GroupedMatmul
stand-ins of ``strategist verify``). What other modules use is imported from here.
"""
from __future__ import annotations

from .build import (LOSS_OWN, add_loss_adds, build_model, clear_strategies, config_batch, input_slots,
                    loss_own_operators, loss_own_prims, mf_lazy_inline_cells, model_inputs)
from .config import (PREFIX, config_settings, default_batch, fit_layer_keys, is_legacy, is_mindformers_ref, load_yaml, mesh_sizes,
                     mesh_warnings, resolve_config, split_model_options)
from .experts import Experts, loss_own_strategies, note_loss_own_strategies
from .load import MfInfo, expert_strategies, load_mindformers
from .rewrites import (fold_reshapes, global_rows_graph, layer_of, mark_local_rows, replicate_anchors,
                       replicate_layers, unmerge_rotary_tables)
from .world import auto_parallel_snapshot, import_mindformers, mindformers_world

__all__ = [
    "LOSS_OWN", "PREFIX", "Experts", "MfInfo", "add_loss_adds", "auto_parallel_snapshot", "build_model",
    "clear_strategies", "config_batch", "config_settings", "default_batch", "expert_strategies", "fit_layer_keys", "fold_reshapes",
    "global_rows_graph", "import_mindformers", "input_slots", "is_legacy", "is_mindformers_ref", "layer_of",
    "load_mindformers", "load_yaml", "loss_own_operators", "loss_own_prims", "loss_own_strategies", "mark_local_rows",
    "mesh_sizes", "mesh_warnings", "mf_lazy_inline_cells", "mindformers_world", "model_inputs",
    "note_loss_own_strategies", "replicate_anchors", "replicate_layers", "resolve_config", "split_model_options",
    "unmerge_rotary_tables",
]
