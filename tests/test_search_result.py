"""The search apart from its pricing: what :func:`strategist.engine.search.search` hands on is a frozen
:class:`~strategist.engine.search.SearchResult`; pricing it later gives the plan propagating priced gives."""
import dataclasses

import pytest

from strategist.engine.search import SearchResult, alternatives
from strategist.engine.search.dataset import dataset_layouts
from strategist.propagate import price_plan, propagate
from strategist.vocab.mesh import Mesh

MODEL = "examples/mlp.py:MegatronMLP"
MESH = "dp=2,tp=4"
ANCHORS = {"linear_fc1.matmul": ((2, 1), (1, 4))}


def test_unpriced_plan_carries_a_frozen_search_result(graph_of):
    g = graph_of(MODEL)
    plan = propagate(g, Mesh.parse(MESH), ANCHORS, price=False)
    res = plan.search
    assert isinstance(res, SearchResult) and not plan.priced
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.chosen = {}
    with pytest.raises(TypeError):
        res.chosen["linear_fc1.matmul"] = None
    assert set(res.user_anchors()) == set(ANCHORS)
    for op in g:
        ch = res.chosen[op.name]
        assert all(res.in_layout(op.name, slot) in (None, *ch.inputs) for slot in range(len(op.inputs)))


def test_pricing_the_result_later_is_propagating_priced(graph_of):
    g = graph_of(MODEL)
    mesh = Mesh.parse(MESH)
    later = price_plan(propagate(g, mesh, ANCHORS, price=False))
    now = propagate(g, mesh, ANCHORS)
    assert later.search is None and now.search is None
    assert later.totals() == now.totals()
    assert {n: c.strategy for n, c in later.choices.items()} == {n: c.strategy for n, c in now.choices.items()}
    assert later.warnings == now.warnings and later.inconsistencies == now.inconsistencies


def test_alternatives_rank_the_candidates_with_the_chosen_among_them(graph_of):
    plan = propagate(graph_of(MODEL), Mesh.parse(MESH), ANCHORS)
    name = next(n for n, c in plan.choices.items() if c.provenance.direction == "forward" and c.sharding is not None)
    opts = alternatives(plan, name)
    chosen = plan.choices[name].sharding
    assert any(s.inputs == chosen.inputs and s.outputs == chosen.outputs for s, _key in opts)


def test_dataset_layouts_split_the_batch_or_nothing(graph_of):
    g = graph_of(MODEL)
    name, spec = next(iter(g.inputs.items()))
    dp = dataset_layouts(g, 8, "data_parallel")[name]
    assert dp.strategy[0] == 8 and all(s == 1 for s in dp.strategy[1:])
    assert all(s == 1 for s in dataset_layouts(g, 8, "full_batch")[name].strategy)
