"""Where the search and its pricing meet: ``propagate(graph, mesh, anchors)``, the library's entry point, runs
MindSpore's search (:func:`strategist.engine.search.search`) and prices its result
(:func:`strategist.cost.pricing.price`); :func:`price_plan` prices a plan propagated unpriced;
:func:`semi_auto_plan` is semi_auto_parallel's plan (:mod:`strategist.engine.semi_auto`), priced."""
from __future__ import annotations

from typing import Any

from . import memo
from .cost import pricing
from .cost.step import chosen_step_seconds
from .vocab.anchors import DATASET, Anchor
from .engine.plan import Plan, Provenance, model_anchors, parallel_only_anchors
from .engine.search import search
from .engine.search.caches import no_cyclic_gc
from .engine.semi_auto import BATCH, FOLLOW, arriving, semi_auto_anchors
from .vocab.graph import OpGraph, ShardLayout
from .vocab.mesh import Hardware, Mesh

__all__ = ["propagate", "price_plan", "semi_auto_plan", "clear_caches"]


def propagate(graph: OpGraph, mesh: Mesh, anchors: dict[str, Any] | None = None, *, use_model_strategies=True,
              dataset_strategy="data_parallel", hardware: Hardware | None = None, price: bool = True,
              fully_use_devices: bool = False) -> Plan:
    """Propagate strategies from ``anchors`` over ``graph`` on ``mesh`` (the search: see
    :mod:`strategist.engine.search`), and price the result (:mod:`strategist.cost.pricing`).

    ``anchors`` maps op names to :class:`~strategist.engine.plan.Anchor` (or a bare strategy tuple). The model's
    own ``shard()`` calls count as anchors unless ``use_model_strategies`` is False; user anchors win.
    ``dataset_strategy``: MindSpore's ``"data_parallel"`` (the default: the batch split over all
    devices), ``"full_batch"`` (replicated), or ``{input: split tuple}`` using every device. ``price=False``
    skips pricing (layouts only: the plan's costs are a function of its layouts, so two plans with equal
    layouts cost the same).

    >>> plan = propagate(graph, Mesh.parse("dp=2,tp=4"), {"fc1.matmul": ((2, 1), (1, 4))})  # doctest: +SKIP
    """
    with no_cyclic_gc():
        res = search(graph, mesh, anchors, use_model_strategies=use_model_strategies,
                             dataset_strategy=dataset_strategy, hardware=hardware,
                             fully_use_devices=fully_use_devices)
        if not price:
            # the inconsistencies too: the advisor's rule 2 reads them unpriced
            return Plan(graph, mesh, hardware, res.user_anchors(), {op.name: res.chosen[op.name] for op in graph},
                        [], {}, [], list(res.inconsistencies), res.warnings, {}, priced=False,
                        dataset_strategy=dataset_strategy, search=res)
        plan = _priced(res)
    plan.dataset_strategy = dataset_strategy
    return plan


def _priced(res) -> Plan:
    """The priced plan of a search, its totals' step the step model's where the options ask the advisor to choose
    by it (:func:`strategist.cost.step.chosen_step_seconds`)."""
    plan = pricing.price(res)
    plan.step_model = chosen_step_seconds
    return plan


def price_plan(plan: Plan) -> Plan:
    """The priced plan of an unpriced one (``propagate(..., price=False)``): the same as propagating again
    with ``price=True`` (the search is deterministic; pricing reads its result only), without the search."""
    if plan.priced:
        return plan
    if plan.search is None:
        raise ValueError("an unpriced plan without its search: propagate it again")
    with no_cyclic_gc():
        out = _priced(plan.search)
    out.dataset_strategy = plan.dataset_strategy
    return out


def semi_auto_plan(graph: OpGraph, mesh: Mesh, anchors: dict[str, Any] | None = None, *, use_model_strategies=True,
                   dataset_strategy="data_parallel", hardware: Hardware | None = None, max_rounds: int = 6) -> Plan:
    """The plan MindSpore's semi_auto_parallel runs for ``graph`` with ``anchors`` configured (see
    :mod:`strategist.engine.semi_auto`). As in :func:`propagate`, the model's own ``shard()`` calls count too
    unless ``use_model_strategies`` is False, and ``anchors`` override them."""
    # the operators the model's code configures in every parallel build (MindFormers' loss) are configured here too
    anchors = {**parallel_only_anchors(graph, mesh), **(model_anchors(graph) if use_model_strategies else {}),
               **(anchors or {})}
    fixed, casts, configured = semi_auto_anchors(graph, mesh, anchors or {})
    follow: dict[str, Anchor] = {}
    plan = None
    for _ in range(max_rounds):
        plan = propagate(graph, mesh, {**fixed, **follow}, use_model_strategies=False,
                         dataset_strategy=dataset_strategy, hardware=hardware, price=False)
        changed = False
        for name in casts:
            lay = arriving(plan, graph.op(name))
            if lay is None or lay.partial:
                continue
            a = Anchor(name, layouts=(ShardLayout.of(lay),), origin=FOLLOW)
            if follow.get(name) != a:
                follow[name] = a
                changed = True
        if not changed:
            break
    out = price_plan(plan)
    out.anchors = {k: v for k, v in out.anchors.items() if k in configured}
    # provenance as semi_auto has it: nothing is propagated
    for name in fixed:
        if name not in configured and name in out.choices:
            out.choices[name].provenance = Provenance(name, None, 0, BATCH)
    for name in follow:
        x = graph.op(name).inputs[0]
        out.choices[name].provenance = Provenance(x.ref if x.kind == "op" else DATASET, x.ref or None, 0, FOLLOW)
    return out


def clear_caches() -> None:
    """Forget every cache strategist keeps (:func:`strategist.memo.clear_caches`): rules, candidates, shardings,
    redistribution plans, prices, the step and memory models' memos (for cold timings)."""
    memo.clear_caches()
