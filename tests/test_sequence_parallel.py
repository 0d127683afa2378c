"""Sequence parallelism on a user's model (``advise --sequence-parallel``), the vocab-parallel cross-entropy of
the example LLaMA, and the CoC savings they lead to (the sequence-parallel AllGather before column MatMuls, the
ReduceScatter after row MatMuls)."""
import dataclasses
import json
import os

import pytest

from strategist.api import advise_model
from strategist.cost.overlap import coc_saving, hiding_matmul_seconds, input_gradient_overlap_saving
from strategist.cost.step import StepOptions, estimate_with
from strategist.cost.schedule import exposed

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA = os.path.join(ROOT, "examples", "llama.py")


def _advise(graph, mesh, sp, step=None):
    # by the serial sum: by the schedule the tiny LLaMA runs fastest data parallel on its 2 devices (conftest.serial),
    # and no tensor-parallel collective would be left to turn into a ReduceScatter
    step = dataclasses.replace(step or StepOptions(), choose_by_schedule=False)
    advice = advise_model("", mesh, graph=graph, dataset_strategy="full_batch", step=step, sequence_parallel=sp)
    # the options reach the plans on a view of the graph: the caller's (the cached one) is left as it was built
    assert not graph.sequence_parallel and graph.step_options is None
    return advice


def _steps(plan, name):
    return [(st.label.split("(")[0], st.nbytes) for st in plan.op_costs[name].steps]


def test_sequence_parallel_turns_the_row_linears_allreduce_into_a_reduce_scatter(graph_of):
    g = graph_of("examples/llama.py:tiny")
    wo = "model.layers.0.attention.wo.matmul"
    # tiny: batch 2, seq 128, hidden 256, fp16: wo's output [256, 256] is 128 KiB; tp=2
    plain = _advise(g, "tp=2", False)
    assert _steps(plain.plan, wo) == [("AllReduce", 131072.0), ("backward AllReduce", 131072.0)]
    sp = _advise(g, "tp=2", True)
    # reduce-scattered along the rows: each card sends its other half (64 KiB); the backward gathers it back
    assert _steps(sp.plan, wo) == [("ReduceScatter", 65536.0), ("backward AllGather", 65536.0)]
    norm = sp.anchors["model.layers.0.attention_norm.norm"]
    assert norm.layouts is not None and "tp" in norm.layouts[0].axes()[0]      # the norm's rows split by tp
    assert not any(n.startswith("sequence parallelism: not applied") for n in sp.notes)
    note = next(n for n in sp.notes if n.startswith("sequence parallelism (use_seq_parallel, --sequence-parallel): "))
    # its memory is the step model's peak under the run's options, the figure the report gives
    from strategist.cost.step import estimate
    assert f"memory {estimate(sp.plan).memory['total'] / 2**30:.2f} GiB per device; without it" in note


def test_sequence_parallel_without_tp_says_it_does_not_apply(graph_of):
    g = graph_of("examples/llama.py:tiny")
    a = _advise(g, "dp=2", True)
    assert ("sequence parallelism: not applied (it splits the sequence by tp, and the mesh has no tp axis)"
            in a.notes)
    assert _advise(g, "dp=2", False).anchors.keys() == a.anchors.keys()


def test_vocab_parallel_loss_reduces_over_the_split_vocabulary(graph_of):
    plan = _advise(graph_of("examples/llama.py:tiny", "loss=vocab_parallel", "vocab=32000"), "tp=2", False).plan
    # the head's weight [32000, 256] split along the vocabulary, and nothing gathered into the loss
    assert plan.choices["lm_head.matmul"].inputs[1].slice_shape == (16000, 256)
    assert not [e for e in plan.edges if e.dst.startswith("loss.") and (e.fwd_bytes or e.bwd_bytes)]
    # 2 x 128 = 256 rows, fp32: the max, the sum of exponentials and the picked logit all-reduced per row over
    # the two halves of the vocabulary, 256 x 4 bytes each, forward and backward
    comm = {n: [(st.label.split("(")[0], st.nbytes) for st in c.steps]
            for n, c in plan.op_costs.items() if n.startswith("loss.") and c.steps}
    assert comm == {n: [("AllReduce", 1024.0), ("backward AllReduce", 1024.0)]
                    for n in ("loss.max", "loss.sum_exp", "loss.sum_vocab")}


def test_cli_sequence_parallel_flag(capsys):
    from strategist.cli import main
    code = main(["advise", LLAMA + ":tiny", "--mesh", "tp=2", "--sequence-parallel", "--format", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    anchors = json.loads(out.out)["anchors"]
    assert any("attention_norm" in (a["op"] if isinstance(a, dict) else a) for a in anchors)


def test_coc_hides_the_sequence_parallel_allgather_behind_the_column_matmuls(graph_of):
    g = graph_of("examples/llama.py:tiny", "loss=vocab_parallel")
    opts = StepOptions(micro_batches=2)
    a = _advise(g, "tp=2", True, opts)
    plan, est = a.plan, estimate_with(a.plan, opts)
    assert est.opts.micro_batches == 2
    q = [f"model.layers.0.attention.{w}.matmul" for w in ("wq", "wk", "wv")]
    fwd = {it.op: 0.0 for it in est.items}
    for it in est.items:
        fwd[it.op] += it.fwd
    # the attention's input, gathered by the Reshape feeding the three projections, hides behind all three
    assert hiding_matmul_seconds(plan, est, "model.layers.0.attention.reshape", True) == \
        pytest.approx(2 * sum(fwd[n] for n in q))
    rows = [(n, w, e) for n, w, _l, e, _s in exposed(est.timeline) if e > 0]
    assert ("model.layers.0.attention.reshape", "output") in {(n, w) for n, w, _e in rows}
    whole, rest = coc_saving(plan, est), coc_saving(plan, est, input_gradients=False)
    # the ReduceScatter of the projections' input gradients: a CoC saving in a MindSpore baseline, already hidden
    # behind the weight-gradient MatMuls in Megatron's
    assert 0 < rest < whole and input_gradient_overlap_saving(plan, est) > 0
    plain = _advise(g, "tp=2", False, opts)
    assert input_gradient_overlap_saving(plain.plan, estimate_with(plain.plan, opts)) == 0.0


@pytest.mark.verify_live
def test_bloom_sequence_parallel_advice_propagates_as_mindspore_does(tmp_path):
    """The advice on the BLOOM example (LayerNorm, unfused ALiBi attention, GeLU MLP, vocab-parallel loss) with
    sequence parallelism, at dp=2,tp=4: Megatron's column/row pairs, the norms split along the rows by dp and tp,
    and MindSpore's own propagation from those anchors agreeing with strategist's on every operator."""
    from strategist.frontend.loader import load_graph
    from strategist.report.render import configurable_anchors_yaml
    from strategist.verify import verify_model
    model = os.path.join(ROOT, "examples", "bloom.py") + ":tiny"
    g = load_graph(model, None, ["batch=8"])
    a = advise_model(model, "dp=2,tp=4", graph=g, dataset_strategy="full_batch", sequence_parallel=True)
    tp = {n: a.anchors[n].describe() for n in a.anchors if ".h.0." in n}
    assert tp["transformer.h.0.self_attention.wq.matmul"] == '(layout("dp", "None"), layout("None", "tp"))'
    assert tp["transformer.h.0.self_attention.dense.matmul"] == '(layout("dp", "tp"), layout("tp", "None"))'
    assert tp["transformer.h.0.mlp.dense_4h_to_h.matmul"] == '(layout("dp", "tp"), layout("tp", "None"))'
    assert "tp" in a.anchors["transformer.h.0.input_layernorm.norm"].layouts[0].axes()[0]
    f = tmp_path / "advice.yaml"
    f.write_text(configurable_anchors_yaml(a, out_layouts=False))
    c = verify_model(model, "dp=2,tp=4", kwargs=["batch=8"], strategies=str(f), dataset_strategy="full_batch")
    assert c.all_agree, c.text(20)
