"""Sharding propagation: MindSpore's search (:mod:`strategist.engine.search`), then the price of its result
(:mod:`strategist.cost.pricing`). ``propagate(graph, mesh, anchors)`` is the library's entry point; the names
other modules have always imported from here stay importable from here."""
from __future__ import annotations

from typing import Any

from ..vocab.graph import OpGraph
from ..vocab.mesh import Hardware, Mesh
from ..vocab.anchors import DATASET, Anchor
from .plan import SEMI_AUTO, Conflict, EdgeCost, OpChoice, OpCost, Plan, Provenance, model_anchors
from ..cost import pricing
from . import search as _search
from .search import LAYOUT_REJECTED, RESHAPES, creation_order, no_cyclic_gc, topo_sort_order

__all__ = ["propagate", "price_plan", "clear_caches", "Anchor", "Plan", "OpChoice", "Provenance", "EdgeCost",
           "OpCost", "Conflict", "DATASET", "SEMI_AUTO", "LAYOUT_REJECTED", "RESHAPES", "model_anchors",
           "creation_order", "topo_sort_order", "no_cyclic_gc"]


def propagate(graph: OpGraph, mesh: Mesh, anchors: dict[str, Any] | None = None, *, use_model_strategies=True,
              dataset_strategy="data_parallel", hardware: Hardware | None = None, price: bool = True,
              fully_use_devices: bool = False) -> Plan:
    """Propagate strategies from ``anchors`` over ``graph`` on ``mesh`` (the search: see
    :mod:`strategist.engine.search`), and price the result (:mod:`strategist.cost.pricing`).

    ``anchors`` maps op names to :class:`Anchor` (or a bare strategy tuple). The model's own
    ``shard()`` calls count as anchors unless ``use_model_strategies`` is False; user anchors win.
    ``dataset_strategy``: MindSpore's ``"data_parallel"`` (the default: the batch split over all
    devices), ``"full_batch"`` (replicated), or ``{input: split tuple}`` using every device. ``price=False``
    skips pricing (layouts only: the plan's costs are a function of its layouts, so two plans with equal
    layouts cost the same).

    >>> plan = propagate(graph, Mesh.parse("dp=2,tp=4"), {"fc1.matmul": ((2, 1), (1, 4))})  # doctest: +SKIP
    """
    with no_cyclic_gc():
        eng = _search.search(graph, mesh, anchors, use_model_strategies=use_model_strategies,
                             dataset_strategy=dataset_strategy, hardware=hardware,
                             fully_use_devices=fully_use_devices)
        if not price:
            # the inconsistencies too: the advisor's rule 2 reads them unpriced
            plan = Plan(graph, mesh, hardware, eng.user_anchors(), {op.name: eng.chosen[op.name] for op in graph},
                        [], {}, [], eng.inconsistencies(), eng.warnings, {}, priced=False,
                        dataset_strategy=dataset_strategy)
            plan._engine = eng      # for price_plan: the search's state, to price it later without searching again
            return plan
        plan = pricing.price(eng)
    plan.dataset_strategy = dataset_strategy
    return plan


def price_plan(plan: Plan) -> Plan:
    """The priced plan of an unpriced one (``propagate(..., price=False)``): the same as propagating again
    with ``price=True`` (the search is deterministic; pricing reads its result only), without the search."""
    if plan.priced:
        return plan
    with no_cyclic_gc():
        out = pricing.price(plan._engine)
    out.dataset_strategy = plan.dataset_strategy
    return out


def clear_caches() -> None:
    """Forget every cached rule, candidate, sharding, redistribution plan and price (for cold timings)."""
    _search.clear_caches()
    pricing.clear_caches()
