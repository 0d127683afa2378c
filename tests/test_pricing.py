"""Pricing what MindSpore's parallel graph runs, not what its search saw.

After the search MindSpore drops every Cast's OperatorInfo (``AddOperatorToIgnoreCandidates``,
``IgnoreOperatorsInCostGraph``): in ``step_parallel`` a Cast is no ``IsParallelCareNode``, it casts the layout
its input arrives in and the redistribution into each consumer is inserted after it. The live test reads the
redistributions from MindSpore 2.9.0's own ``step_parallel_end`` graph."""
import os

import pytest

from strategist.vocab.mesh import Mesh
from strategist.engine.plan import CAST_PASS
from strategist.propagate import propagate
from strategist.engine.redistribution import plan as plan_redistribution

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "models", "layouts.py:CastBetweenLayouts")
MESH = "dp=2,tp=4"


def _plans(graph_of):
    g = graph_of(MODEL)
    mesh = Mesh.parse(MESH)
    return (propagate(g, mesh, dataset_strategy="full_batch", price=False),
            propagate(g, mesh, dataset_strategy="full_batch"))


def test_a_cast_passes_the_layout_its_input_arrives_in(graph_of):
    searched, p = _plans(graph_of)
    # the search configures the Cast from its tuple candidates (PreProcessPreCastForSP), as MindSpore's log says
    assert searched.strategy("cast") == ((1, 2, 1),)
    # ... and the plan priced is the parallel graph's: the Cast computes in the Add's layout (batch over 8)
    assert p.strategy("cast") == ((1, 8, 1),) and p.choices["cast"].provenance.direction == CAST_PASS
    edges = {(e.src, e.dst): e for e in p.edges}
    assert not edges[("add", "cast")].forward.has_communication
    e = edges[("cast", "gelu")]
    # one redistribution, after the Cast (float32), from the Add's layout straight into the GeLU's
    direct = plan_redistribution(p.choices["add"].outputs[0], p.choices["gelu"].inputs[0])
    assert e.src_layout == p.choices["add"].outputs[0] and e.forward.ops == direct.ops
    assert e.dtype == "float32" and e.fwd_bytes > 0
    # the searched Cast's two redistributions (into it and out of it) are priced nowhere
    assert sum(x.fwd_bytes for x in p.edges) == e.fwd_bytes


@pytest.mark.verify_live
def test_mindspore_redistributes_once_after_the_cast():
    from strategist.verify import mindspore_plan
    ms = mindspore_plan(MODEL, MESH, dataset_strategy="full_batch", redistributions=True)
    moved = {(r["src"], r["dst"]): tuple(r["collectives"]) for r in ms.redistributions}
    assert ("add", "cast") not in moved                      # the Cast computes where the Add's output is
    assert moved[("cast", "gelu")] == ("AllGather",)         # and moves it once, into the GeLU's layout


def test_an_all_to_all_is_priced_as_mindspore_writes_it(graph_of):
    """Without ``enable_alltoall`` (MindSpore's default, and qwen3's, qwen3_moe's and telechat3's configs) MindSpore
    writes an all-to-all as an AllGather of each device's whole slice, then a local Split and Concat (its
    step_parallel_end graph of CastBetweenLayouts: Reshape, AllGather(n=4), Split, Concat, Reshape, StridedSlice).
    Worked by hand: the Add's slice is [64, 1, 32] float32 = 8 KiB; all-to-all over 4 sends 3/4 of it, 6 KiB; the
    AllGather sends the 3 other devices' slices, 24 KiB."""
    from strategist.propagate import price_plan
    _, p = _plans(graph_of)
    e = next(x for x in p.edges if (x.src, x.dst) == ("cast", "gelu"))
    assert [c.kind for c in e.forward.ops] == ["AllToAll"]
    assert e.fwd_bytes == 3 * 64 * 32 * 4 == 24 * 1024
    assert e.forward.physical(4, None, alltoall=True).bytes_sent == 6 * 1024
    # a graph whose config enables it (deepseek3's, telechat3_moe's) is priced with the all-to-all itself
    g = graph_of(MODEL)
    searched = propagate(g, Mesh.parse(MESH), dataset_strategy="full_batch", price=False)
    g.enable_alltoall = True
    try:
        q = price_plan(searched)
    finally:
        del g.enable_alltoall
    assert next(x for x in q.edges if (x.src, x.dst) == ("cast", "gelu")).fwd_bytes == 6 * 1024


# ---- a weight's gradient reduction: MindSpore's mirror operator groups every device holding the same slice

MIRRORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models", "mirrors.py")
IR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "ir")


def _mirror_devices(plan) -> set[int]:
    """The group sizes of the mirrors (Parameters' gradient reductions) strategist prices (the toy has one weight)."""
    return {st.n for c in plan.op_costs.values() for st in c.steps
            if st.direction == "grad" and st.kind == "AllReduce"}


@pytest.mark.parametrize("factory, recorded", [("repeated", "rep"), ("column", "col"),
                                               ("CastWeightMatMul", "castrep")])
def test_weight_gradient_reduced_over_the_mirror_group(graph_of, factory, recorded):
    from strategist.propagate import semi_auto_plan
    from strategist.verify.ir import parse_mirrors
    with open(os.path.join(IR, f"mirror_{recorded}.step_parallel_end.ir")) as f:
        ms_devices = parse_mirrors(f.read())["net.w"]
    plan = semi_auto_plan(graph_of(f"{MIRRORS}:{factory}"), Mesh.parse("dp=2,tp=4"), {},
                          dataset_strategy="full_batch")
    assert _mirror_devices(plan) == {ms_devices}


def test_repeated_weight_gradient_bytes(graph_of):
    """A float32 64x128 weight all-reduced over 8 devices (ring): 2 * 7/8 * 32 KiB per device."""
    from strategist.propagate import semi_auto_plan
    plan = semi_auto_plan(graph_of(f"{MIRRORS}:repeated"), Mesh.parse("dp=2,tp=4"), {},
                          dataset_strategy="full_batch")
    assert plan.op_costs["mm"].grad_bytes == 2 * 7 / 8 * 64 * 128 * 4
