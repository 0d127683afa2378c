"""Advice on a model of repeated layers at the cost of its first few: the advisor runs on the layers a MindFormers
config built (its dense layers and two more: :func:`~strategist.frontend.mindformers.load.built_layers`) or, for a
model file, on the graph cut down to its first :data:`ADVISE_LAYERS` layers
(:func:`~strategist.frontend.layers.truncate_layers`); the last advised layer's anchors are copied onto every later
layer (the advisor's anchors are per-layer patterns, one group across the repeated layers), and the whole graph's
plan, baseline and every-operator plan are propagated from them. The same anchors and plan as advising the whole
graph (tested on the example LLaMA and on MindFormers' qwen3); each anchor's "needed" figure is the one measured
on the advised layers.
"""
from __future__ import annotations

import dataclasses

from ..vocab.graph import OpGraph
from ..vocab.mesh import Mesh
from ..cost.step import step_measure

#: the repeated layers a model file is advised on; the anchors advised there are copied onto the others
ADVISE_LAYERS = 2


def advised_graph(graph: OpGraph, layers: int = ADVISE_LAYERS) -> OpGraph:
    """The graph the advisor runs on: a MindFormers graph's built layers, a model file's first ``layers`` repeated
    layers, or ``graph`` itself where it has no more."""
    base = getattr(graph, "mf_base_graph", None)
    if base is not None:
        return base
    from ..frontend.layers import truncate_layers
    return truncate_layers(graph, layers)


def copied_anchors(anchors: dict, base: OpGraph, graph: OpGraph) -> dict:
    """``anchors`` advised on ``base`` as anchors of ``graph``: those of its last layer copied onto every later one."""
    if base is graph:
        return dict(anchors)
    if getattr(graph, "mf_base_graph", None) is base:
        from ..frontend.mindformers import layer_of, replicate_anchors
        total = max((i for op in graph for i in [layer_of(op.cell_path)] if i is not None), default=0) + 1
        return replicate_anchors(anchors, graph, graph.mf_extracted_layers, total)
    from ..frontend.layers import copy_anchors
    return copy_anchors(anchors, base, graph)


def advise_repeated(graph: OpGraph, mesh: Mesh, *, rules=None, boundaries=None, hardware=None,
                    dataset_strategy="data_parallel"):
    """:func:`~strategist.advice.advisor.advise` of ``graph``, run on its first layers and carried to the rest."""
    from ..errors import StrategistError
    from .advisor import advise, carried_advice
    from .footprint import state_bytes
    from .minimality import plan_diff
    from .worth import pays
    base = advised_graph(graph)
    if base is graph:
        return advise(graph, mesh, rules=rules, boundaries=boundaries, hardware=hardware,
                      dataset_strategy=dataset_strategy)
    adv = advise(_layers_view(base, graph), mesh, rules=rules, boundaries=boundaries, hardware=hardware,
                 dataset_strategy=dataset_strategy)
    whole = copied_anchors(adv.anchors, base, graph)
    of = {c.op: c for c in adv.chosen}
    chosen = []
    for name, a in whole.items():
        c = of.get(name)
        if c is None:            # a copy of a last-layer anchor: the same choice on its layer
            src = next(n for n, b in adv.anchors.items() if b.layouts == a.layouts and b.strategy == a.strategy
                       and _same_place(n, name))
            c = dataclasses.replace(of[src], op=name, anchor=a, fallback=None, alternative=None, package=[])
        chosen.append(c)
    chosen.sort(key=lambda c: graph.op(c.op).topo_index)
    layers = len({op.layer for op in graph if op.layer})
    notes = list(adv.notes) + [f"advised on {len({op.layer for op in base if op.layer})} of the {layers} repeated "
                               f"layers, the last one's anchors copied onto the others; each anchor's \"needed\" "
                               f"figure is measured there"]

    def recheck(chosen, dropped, run, plan, baseline):
        # the anchors outside the repeated layers (the head, the embedding) were checked against two layers: each is
        # checked again on the whole graph, one propagation each, and dropped where the whole plan does not need it
        for c in [c for c in chosen if not graph.op(c.op).layer and not c.required]:
            trial = [x for x in chosen if x is not c]
            try:
                q = run(trial) if trial else baseline
            except StrategistError:
                continue
            # as every line of the advice must pay for itself (minimality.every_line_pays): in step time beyond what
            # the step model resolves, or in the state it shards
            changed, dt = plan_diff(plan, q)
            if not pays(dt, plan.totals()["step_seconds"], saved=state_bytes(q) - state_bytes(plan)):
                dropped.append((c, f"does not pay for its line on the whole graph: without it, {changed} operators "
                                   f"change layout and the {step_measure(graph)} changes by {dt * 1e3:+.3f} ms"))
                chosen, plan = trial, q
        return chosen, plan
    return carried_advice(graph, mesh, adv.rules, chosen, list(adv.dropped), notes, hardware, dataset_strategy,
                          recheck)


def _layers_view(base: OpGraph, graph: OpGraph) -> OpGraph:
    """The advised layers with the run's step options as one pipeline stage holding them
    (:func:`~strategist.cost.step.stage_options`: the stage split needs the whole model's layers), each standing for
    its share of a stage of ``graph`` (:func:`layer_repeats`)."""
    from ..cost.step import stage_options
    opts = base.step_options
    pp = opts.pp if opts is not None else 1
    changes = {"layer_repeats": layer_repeats(base, graph, pp)}
    if pp > 1:
        changes["step_options"] = stage_options(opts)
    return base.with_meta(**changes)


def layer_repeats(base: OpGraph, graph: OpGraph, pp: int = 1) -> float:
    """How many layers of one of ``graph``'s ``pp`` pipeline stages each repeated layer of ``base`` (its first
    layers) stands for: the stage's mean layer count over ``base``'s, at least 1.

    >>> from strategist.vocab.graph import Op, OpGraph
    >>> def layers(k):
    ...     return OpGraph([Op(f"l{i}", "Add", f"layers.{i}", "", "add", "", (), ()) for i in range(k)], {}, {}, [], {})
    >>> layer_repeats(layers(2), layers(32), pp=4)
    4.0
    """
    advised = len({op.layer for op in base if op.layer})
    whole = len({op.layer for op in graph if op.layer})
    return max(1.0, whole / max(pp, 1) / advised) if advised else 1.0


def _same_place(src: str, name: str) -> bool:
    """Whether operator ``name`` is ``src`` on another layer (the same name but the layer index)."""
    import re
    strip = re.compile(r"\.\d+\.")
    return strip.sub(".#.", src) == strip.sub(".#.", name)
