"""A model's repeated layers cut down (what ``strategist sweep`` advises on) and the anchors copied back: the cut
graph is the graph a build with fewer layers gives, operator for operator."""
from __future__ import annotations

import dataclasses
import os

import pytest

from strategist.frontend.layers import alike_from, copy_anchors, layer_block, main_block, truncate_layers
from strategist.frontend.loader import load_graph
from strategist.vocab.anchors import Anchor
from strategist.vocab.graph import TensorSpec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "examples", "llama.py") + ":tiny"


def _sig(g):
    return [(op.name, op.type, op.cell_path, op.topo_index, tuple((x.kind, x.ref, x.index) for x in op.inputs))
            for op in g]


@pytest.fixture(scope="module")
def graphs():
    return {n: load_graph(TINY, None, [f"layers={n}", "batch=4"]) for n in (2, 5)}


def test_five_layers_cut_to_two_are_a_two_layer_build(graphs):
    five, two = graphs[5], graphs[2]
    assert layer_block(five) == ("model.layers", [0, 1, 2, 3, 4])
    cut = truncate_layers(five, 2)
    assert _sig(cut) == _sig(two)
    assert sorted(cut.params) == sorted(two.params) and sorted(cut.cells) == sorted(two.cells)
    assert [(x.kind, x.ref, x.index) for x in cut.outputs] == [(x.kind, x.ref, x.index) for x in two.outputs]
    assert truncate_layers(two, 2) is two and truncate_layers(five, 5) is five


def test_layers_alike_from_the_first_unless_one_differs(graphs):
    # the example LLaMA's layers are alike from layer 0 (the first reads the embedding where the others read their
    # predecessor: a read from outside the layer, told apart by slot only); a layer whose own operators differ (a
    # norm of another width in layer 1) makes the alike run start after it
    five = graphs[5]
    assert alike_from(five) == 0 and main_block(five) == layer_block(five)
    ops = [dataclasses.replace(op, outputs=tuple(TensorSpec((9,), o.dtype) for o in op.outputs))
           if op.layer == "model.layers.1" and op.type == "RmsNorm" else op for op in five]
    assert alike_from(five.derived(ops)) == 2


def test_the_last_layers_anchors_are_copied_onto_the_later_layers(graphs):
    five, two = graphs[5], graphs[2]
    names = [op.name for op in two if op.type == "MatMul" and op.layer]
    first, last = (next(n for n in names if n.startswith(f"model.layers.{i}.")) for i in (0, 1))
    got = copy_anchors({first: Anchor(first, ((1, 2), (2, 1))), last: Anchor(last, ((2, 1), (1, 4)))}, two, five)
    tail = last.split(".", 3)[3]
    assert set(got) == {first} | {f"model.layers.{i}.{tail}" for i in (1, 2, 3, 4)}
    assert all(got[f"model.layers.{i}.{tail}"].strategy == ((2, 1), (1, 4)) for i in (2, 3, 4))
    assert got[first].strategy == ((1, 2), (2, 1))


def _same_advice(a, b) -> None:
    assert {k: (v.strategy, v.layouts) for k, v in a.anchors.items()} == \
        {k: (v.strategy, v.layouts) for k, v in b.anchors.items()}
    assert {n: c.strategy for n, c in a.plan.choices.items()} == {n: c.strategy for n, c in b.plan.choices.items()}
    assert a.plan.totals() == b.plan.totals() and a.baseline.totals() == b.baseline.totals()
    assert a.semi.totals() == b.semi.totals()


@pytest.mark.parametrize("model, kwargs, mesh, dataset", [
    (TINY, ["layers=6", "batch=8"], "dp=2,tp=4", "data_parallel"),
    (TINY, ["layers=5", "batch=8", "loss=vocab_parallel"], "dp=4,tp=2", "data_parallel"),
    (os.path.join(ROOT, "examples", "llama.py") + ":llama2_70b", ["layers=8", "batch=8"], "dp=8,tp=8", "full_batch")])
def test_advice_on_the_first_layers_carried_is_the_whole_graphs(model, kwargs, mesh, dataset):
    """``strategist advise`` advises two of the repeated layers and carries their anchors to the rest: the anchors,
    the plan and the configurations compared of advising every layer."""
    from strategist.advice.advisor import advise
    from strategist.advice.repeated import advise_repeated
    from strategist.files.hardware import load_hardware
    from strategist.vocab.mesh import Mesh
    g = load_graph(model, None, kwargs)
    hw = load_hardware("atlas-800t-a2")
    whole = advise(g, Mesh.parse(mesh), hardware=hw, dataset_strategy=dataset)
    carried = advise_repeated(g, Mesh.parse(mesh), hardware=hw, dataset_strategy=dataset)
    _same_advice(whole, carried)
    assert any("advised on 2 of the" in n for n in carried.notes)


def test_advice_on_two_layers_of_a_deeper_pipeline_prices_them_as_one_stage():
    """8 layers on pp=4: the advisor runs on 2 of them, which no 4-stage split holds; it prices them as one stage
    (strategist.cost.step.stage_options) and the whole graph's plan is priced on the 4 stages."""
    from strategist.api import advise_model
    from strategist.cost.step import StepOptions, estimate, stage_options
    step = StepOptions(pp=4, micro_batches=4, choose_by_schedule=True, recompute_layers=(2, 1, 0, 0))
    assert stage_options(step) == StepOptions(micro_batches=4, choose_by_schedule=True, recompute_layers=(2,))
    a = advise_model(os.path.join(ROOT, "examples", "llama.py") + ":tiny", "dp=2", kwargs=["layers=8", "batch=8"],
                     step=step)
    assert len(estimate(a.plan).per_stage) == 4


def test_the_memory_rule_weighs_the_advised_layers_as_the_stage_holds_them():
    """The linears whose activations outweigh their weights are advised data parallel or Megatron column/row on the
    first two layers. Data parallel keeps every weight whole: on those two layers (hidden 1024, ffn 4096, fp16,
    tp=4) it holds 0.21 GiB more weight, gradient and Adam state per device than Megatron's pairs, under the 1 GiB
    the memory rule asks before a faster layout may cost it. Each advised layer stands for 16 of the 32 layers one
    device holds: 16 x 0.21 = 3.38 GiB, and Megatron's pairs win. At pp=8 a device holds 4 layers (2 x 0.21 GiB):
    data parallel again, as on the two layers alone."""
    from strategist.api import advise_model
    from strategist.cost.step import StepOptions
    shape = ["hidden=1024", "ffn=4096", "heads=8", "kv_heads=8", "seq=4096", "batch=8", "vocab=32000"]

    def note(layers, pp=1):
        a = advise_model("examples/llama.py:build", "dp=2,tp=4", kwargs=shape + [f"layers={layers}"],
                         step=StepOptions(pp=pp, micro_batches=pp))
        return next(n for n in a.notes if "outweighing their weights" in n)
    whole = note(32)
    assert "holds 3.38 GiB more weight, gradient and optimizer state" in whole
    assert whole.endswith(": Megatron column/row (step 64.248 ms)")
    assert note(32, pp=8).endswith(": data parallel (the same state and anchors)")
    assert note(2).endswith(": data parallel (the same state and anchors)")
