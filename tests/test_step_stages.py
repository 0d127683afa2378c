"""The step model's shortcuts for a sweep, checked against the path without them on a small model: a pipeline's
stages of one shape scheduled once, the schedule's totals read off the reported stage, and the memory's memos
(the selective-recompute set, each stage's operators and activations) -- the same figures, to the bit."""
from __future__ import annotations

import os

import pytest

from strategist.advice.advisor import advise
from strategist.cost import memory as memory_module
from strategist.cost import step as step_module
from strategist.cost.step import StepOptions, estimate_with, memory_with
from strategist.files.hardware import load_hardware
from strategist.frontend.loader import load_graph
from strategist.vocab.mesh import Mesh

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "examples", "llama.py") + ":tiny"

OPTIONS = [StepOptions(pp=4, micro_batches=8, recompute="selective", optimizer_parallel=True, interleave=2,
                       comm_recompute_layers=(2, 2, 2, 2)),
           StepOptions(pp=8, micro_batches=16, recompute="full"),
           StepOptions(pp=2, micro_batches=4, recompute="none", optimizer_parallel=True),
           StepOptions(micro_batches=2, recompute="selective")]


@pytest.fixture(scope="module")
def plan():
    graph = load_graph(TINY, None, ["layers=8", "batch=16"])
    return advise(graph, Mesh.parse("dp=2,tp=2"), hardware=load_hardware("atlas-800t-a2")).plan


def _figures(est) -> dict:
    return {"step": est.step_s, "worst": est.worst, "breakdown": est.to_dict(),
            "runs": [(sorted(n), a.compute, a.comm, a.end, b.compute, b.comm, b.end) for n, a, b in est.runs],
            "timeline": (est.timeline.compute, est.timeline.comm)}


def test_the_middle_stages_simulated_once_give_every_stages_figures(plan, monkeypatch):
    # eight layers on four or eight stages: the middle stages share a signature; each stage simulated on its own
    # gives the same step, breakdown, per-stage figures and timelines
    shared = [_figures(estimate_with(plan, o)) for o in OPTIONS]
    sims = []
    real = step_module.simulate
    monkeypatch.setattr(step_module, "simulate", lambda *a, **k: sims.append(1) or real(*a, **k))
    estimate_with(plan, OPTIONS[1])
    assert len(sims) < 2 * 8               # eight stages, fewer simulated (first, middle, last)
    monkeypatch.setattr(step_module, "stage_signature", lambda *a: (object(),))   # every stage its own shape
    assert [_figures(estimate_with(plan, o)) for o in OPTIONS] == shared


def test_the_schedule_totals_read_off_the_reported_stage(plan):
    for o in OPTIONS:
        est = estimate_with(plan, o)
        per_stage_first = estimate_with(plan, o)
        per_stage_first.per_layer                  # every stage summarised before the totals are read
        assert est.schedule == per_stage_first.schedule
        assert est.schedule["step_s"] == est.step_s


def test_memory_memos_give_the_figures_computed_afresh(plan):
    warm = [memory_with(plan, o) for o in OPTIONS + OPTIONS[::-1]]
    for memo in (memory_module._ACTIVATIONS, memory_module._STAGE_OPS, memory_module._PARAMS, memory_module._MOVES,
                 memory_module._SLICES, step_module._DROPS, step_module._NAMES):
        memo.clear()
    cold = [memory_with(plan, o) for o in OPTIONS]
    assert warm[:len(OPTIONS)] == cold and warm[len(OPTIONS):] == cold[::-1]


def test_the_activation_walk_is_memoised_by_the_sets_it_walks(plan):
    # the step model's memo of the recomputed sets emptied makes new objects of the same sets: the walks are not
    # made again (a sweep's many plans empty that memo between one option set and the next)
    for o in OPTIONS:
        memory_with(plan, o)
    walks = len(memory_module._ACTIVATIONS)
    step_module._DROPS.clear()
    step_module._NAMES.clear()
    for o in OPTIONS:
        memory_with(plan, o)
    assert walks and len(memory_module._ACTIVATIONS) == walks


def test_a_stages_communication_not_overlapped_is_its_summarys(plan):
    # the sweep's shortcut for the exposed communication: the time a collective runs and no computation does,
    # read off a stage's timelines, is what summarising them gives (every stage, pipelined or not, with copies)
    from strategist.cost.schedule import not_overlapped, summarize
    for o in OPTIONS:
        est = estimate_with(plan, o)
        for s in range(o.pp):
            for tl in est._simulated(s):
                want = summarize(tl)[0]["communication_not_overlapped_s"]
                assert want > 0 and not_overlapped(tl) == pytest.approx(want, rel=1e-12)
            assert est.stage_not_overlapped(s) == \
                pytest.approx(est.stage_totals(s)["communication_not_overlapped_s"], rel=1e-12)


def test_an_advice_leaves_no_cyclic_garbage():
    # a plan and its memoised estimate hold no reference to each other both ways: the advice's hundred plans are
    # freed by reference counting as they go, not by the cyclic collector's walk (a sweep collects after each mesh)
    import gc

    g = load_graph(TINY, None, ["layers=4", "batch=16"])
    hw = load_hardware("atlas-800t-a2")
    gc.collect()
    gc.disable()
    try:
        advice = advise(g, Mesh.parse("dp=2,tp=4"), hardware=hw)
        assert step_module.estimate(advice.plan).step_s > 0
        del advice
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        left = {type(o).__name__ for o in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert not left & {"Plan", "StepEstimate", "OpChoice", "EdgeCost"}
