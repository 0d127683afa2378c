"""The step model (strategist.cost.step and its modules): hand-worked schedules, pipeline bubble, memory."""
import math

import pytest

from strategist.cost.pipeline import one_f_one_b, stage_of_ops
from strategist.cost.profile import StepProfile, parse_overrides, step_profile
from strategist.cost.schedule import FUSION_BYTES, Item, Overlap, simulate, summarize
from strategist.cost.step import StepOptions, estimate
from strategist.vocab.mesh import Mesh
from strategist.files.hardware import load_hardware
from strategist.vocab.anchors import Anchor
from strategist.propagate import propagate
from strategist.errors import InputSpecError, MeshError

#: round figures: 100 TFLOP/s, 1000 GB/s element-wise, every collective at 10 GB/s bus bandwidth, no latency
FLAT = StepProfile("flat", 8, 100e12, 100e12, 1000e9, 64e9, (("AllReduce", ((2, 10e9),)), ("AllGather", ((2, 10e9),))),
                   0.0, 10e9, 0.0, 10e9, 10e9)


def test_exposed_collective_waits_and_an_independent_one_hides():
    # a -> b(own AllReduce 2 s) -> c: c waits for the AllReduce; d beside it does not
    a = Item("a", "L0", 1.0, 0.0, False, ())
    b = Item("b", "L0", 1.0, 0.0, False, (("a", 0, 0.0, 0.0),), own_fwd=2.0)
    c = Item("c", "L0", 1.0, 0.0, False, (("b", 0, 0.0, 0.0),))
    exposed = simulate([a, b, c], FLAT, grads=False)
    assert exposed.end == pytest.approx(5.0)                 # 1 + 1 + 2 (exposed) + 1
    t, _ = summarize(exposed)
    assert t["communication_not_overlapped_s"] == pytest.approx(2.0) and t["overlapped_s"] == 0.0
    d = Item("d", "L0", 2.0, 0.0, False, (("a", 0, 0.0, 0.0),))
    hidden = simulate([a, b, d, c], FLAT, grads=False)       # d (2 s) runs while b's AllReduce does
    assert hidden.end == pytest.approx(5.0)                  # 1 + 1 + 2 (d, beside the AllReduce) + 1
    t, _ = summarize(hidden)
    assert t["overlapped_s"] == pytest.approx(2.0) and t["communication_not_overlapped_s"] == 0.0
    assert t["computing_s"] == pytest.approx(5.0) and t["step_s"] == pytest.approx(5.0)


def test_data_parallel_gradient_reduction_overlaps_the_rest_of_the_backward():
    # three operators, 1 s forward and 2 s backward each; the last one's weight gradient (10 GB, 2 devices:
    # 1 s on FLAT at its ring bytes 10e9) is reduced while the two earlier operators' backward runs
    mirror = (("g", "AllReduce"), "AllReduce", 2, True, 10e9)
    items = [Item("x", "L0", 1.0, 2.0, True, ()),
             Item("y", "L0", 1.0, 2.0, True, (("x", 0, 0.0, 0.0),)),
             Item("z", "L0", 1.0, 2.0, True, (("y", 0, 0.0, 0.0),), mirrors=(mirror,))]
    tl = simulate(items, FLAT, grads=True)
    assert tl.end == pytest.approx(9.0)                      # 3 forward + 6 backward; the 1 s reduction hidden
    t, _ = summarize(tl)
    assert t["overlapped_s"] == pytest.approx(1.0) and t["communication_not_overlapped_s"] == 0.0
    # on the first operator (the last backward) it is exposed instead
    items[0].mirrors, items[2].mirrors = (mirror,), ()
    tl = simulate(items, FLAT, grads=True)
    assert tl.end == pytest.approx(10.0)
    assert summarize(tl)[0]["communication_not_overlapped_s"] == pytest.approx(1.0)


def test_one_f_one_b_bubble_is_three_elevenths_for_four_stages_and_eight_micro_batches():
    span, bubble = one_f_one_b([0.5] * 4, 8)
    assert span == pytest.approx(11 * 0.5)
    assert all(b / span == pytest.approx(3 / 11) for b in bubble)
    # interleaved 1F1B, 2 chunks per stage: the fill and drain on half a stage, (p - 1) / (2m + p - 1)
    span, bubble = one_f_one_b([0.5] * 4, 8, chunks=2)
    assert bubble[0] / span == pytest.approx(3 / 19)
    # an unequal stage sets the pace of the other micro-batches
    span, bubble = one_f_one_b([1.0, 2.0], 4)
    assert span == pytest.approx(3.0 + 3 * 2.0) and bubble == [pytest.approx(5.0), pytest.approx(1.0)]


class _OneSecondPerBucket:
    """A profile whose collectives take one second per fusion bucket of bytes."""

    def collective_seconds(self, kind, n, nbytes, intra):
        return nbytes / FUSION_BYTES


def test_data_parallel_collectives_beside_computation_only_with_mindspores_overlap_options():
    # two operators, 1 s forward and 2 s backward each, each weight gathered in 0.5 s (the parallel optimizer) and
    # its gradient a whole fusion bucket reduced in 1 s
    items = [Item(n, "", 1.0, 2.0, True, (), prefetch=0.5, mirrors=((("dp", "AllReduce"), "AllReduce", 2, True,
                                                                     float(FUSION_BYTES)),)) for n in "ab"]
    prof = _OneSecondPerBucket()
    both = simulate(items, prof, grads=True, overlap=Overlap(grad_reduce=True, param_gather=True))
    # b's weight gathered during a's forward (0.5-1.0); b's bucket (after its backward, 2.5-4.5) reduced during a's
    # backward (4.5-5.5), a's after it (6.5-7.5)
    assert both.forward_end == pytest.approx(2.5) and both.end == pytest.approx(7.5)
    # MindSpore's default: each AllGather waits for the computation before it and the forward for it (0-0.5,
    # 1.5-2.0); the reductions run after the backward (7-9)
    none = simulate(items, prof, grads=True, overlap=Overlap(grad_reduce=False, param_gather=False))
    assert none.forward_end == pytest.approx(3.0) and none.end == pytest.approx(9.0)
    assert summarize(none)[0]["communication_not_overlapped_s"] == pytest.approx(3.0)


def _mlp_plan(graph_of, mesh, fc1, fc2, opts=None):
    g = graph_of("examples/mlp.py:MegatronMLP")
    anchors = {"linear_fc1.matmul": Anchor("linear_fc1.matmul", fc1), "linear_fc2.matmul": Anchor("linear_fc2.matmul", fc2)}
    plan = propagate(g.with_meta(step_options=opts), Mesh.parse(mesh), anchors, hardware=load_hardware("atlas-800t-a2"))
    estimate(plan)          # memoised on the plan with the options it was priced under
    return plan


def test_megatron_mlp_at_tp4_exposes_the_row_parallel_allreduce(graph_of):
    plan = _mlp_plan(graph_of, "tp=4", ((1, 1), (1, 4)), ((1, 4), (4, 1)))
    est = estimate(plan)
    # fc2's output [4096, 1024] fp16 (8 MiB) all-reduced over 4 cards at 30 GB/s bus bandwidth: ring bytes
    # 2 * 3/4 * 8 MiB = 12 MiB, plus 2 x log2(4) steps of 10 us; once forward (the bias Add waits), once
    # backward (its transpose, before fc2's backward)
    ar = 2 * 2 * 10e-6 + 2 * 0.75 * 8 * 2**20 / 30e9
    # the dataset splits x [4096, 1024] by rows over the 4 cards, fc1 reads it whole: an AllGather sending
    # 3 slices of 2 MiB at 64 GB/s, 2 steps of 10 us, before fc1 can start
    ag = 2 * 10e-6 + 3 * 2 * 2**20 / 64e9
    # fc2's bias [1024] is replicated on the 4 cards: its 2 KiB gradient AllReduce (2 x log2(4) steps of 10 us and
    # 2 * 3/4 * 2 KiB at 30 GB/s) runs after the backward, MindSpore's default without
    # grad_computation_allreduce_overlap
    gb = 2 * 2 * 10e-6 + 2 * 0.75 * 2048 / 30e9
    assert est.schedule["communication_not_overlapped_s"] == pytest.approx(ag + 2 * ar + gb, rel=1e-6)
    assert est.schedule["overlapped_s"] == 0.0
    # with the overlap it runs on the data-parallel stream beside fc2's backward AllReduce, which the compute stream
    # waits for: no time of its own
    over = estimate(_mlp_plan(graph_of, "tp=4", ((1, 1), (1, 4)), ((1, 4), (4, 1)),
                              StepOptions(grad_comm_overlap=True)))
    assert over.schedule["communication_not_overlapped_s"] == pytest.approx(ag + 2 * ar, rel=1e-6)
    assert over.schedule["overlapped_s"] == 0.0
    s = est.schedule
    assert s["step_s"] == pytest.approx(s["computing_s"] + s["communication_not_overlapped_s"] + s["free_s"])


def test_mlp_memory_with_and_without_the_parallel_optimizer(graph_of):
    mib = 2**20
    plan = _mlp_plan(graph_of, "dp=2,tp=4", ((2, 1), (1, 4)), ((2, 4), (4, 1)), StepOptions())
    m = estimate(plan).memory
    # weights [1024, 4096] and [4096, 1024] fp16 split by 4: 2 MiB each; biases 2 KiB each
    assert m["parameters"] == pytest.approx(4 * mib + 4096)
    assert m["optimizer_states"] == pytest.approx(4 * (4 * mib + 4096))      # two fp32 moments: 8 B per element
    # the forward, walked in order: fc1's input x gathered from the dataset's rows, [2048, 1024] fp16 (4 MiB), kept
    # for fc1's weight gradient; GeLU's input and fc2's input kept (4 MiB each); at fc2's bias Add its input (fc2's
    # output) and its output (4 MiB each) beside them: 20 MiB. The optimizer step: as it starts, the local gradients
    # and the dp AllReduce's output (2 x 4 MiB + 4 KiB) and two fp32 copies of the largest slice (1M elements: 4 MiB
    # each): 16 MiB + 8 KiB; then the Parameters updated in order (fc1's weight and bias, fc2's): while fc1's weight
    # is, five fp32 temporaries of its slice (20 MiB) beside the reduced gradients of the three after it (2 MiB +
    # 4 KiB): 22 MiB + 4 KiB, the larger, and the peak
    held = 4 * mib + 4096 + 16 * mib + 16384                                   # parameters and optimizer states
    assert m["moments"]["end of the forward"] == pytest.approx(held + 20 * mib)
    assert m["activations_per_micro_batch"] == pytest.approx(8 * mib)
    assert m["moments"]["optimizer step"] == pytest.approx(held + 22 * mib + 4096)
    assert m["peak_at"] == "optimizer step" and m["total"] == pytest.approx(held + 22 * mib + 4096)
    assert m["gradients"] == pytest.approx(2 * mib + 4096) and m["optimizer_temporaries"] == pytest.approx(20 * mib)
    assert m["margin"] == pytest.approx(m["capacity"] - m["total"])
    assert not m["assumed"]["optimizer_parallel"]
    plan = _mlp_plan(graph_of, "dp=2,tp=4", ((2, 1), (1, 4)), ((2, 4), (4, 1)), StepOptions(optimizer_parallel=True))
    z = estimate(plan).memory
    # each weight slice is repeated on the 2 dp replicas and >= 64 KiB: kept as halves; biases below the 64 KiB
    # threshold stay whole. The end of the forward holds the gathered weights (both MatMuls read theirs again in the
    # backward) beside the forward's 20 MiB: 24 MiB; the optimizer step the whole gradients and their shards
    # (4 MiB + 4 KiB, 2 MiB + 4 KiB) and two fp32 copies of the largest kept slice (2 MiB each): 10 MiB + 8 KiB
    assert z["parameters"] == pytest.approx(2 * mib + 4096)
    assert z["optimizer_states"] == pytest.approx(8 * (mib + 2048))                # 8 B per element kept
    assert z["peak_at"] == "end of the forward" and z["gathered_weights"] == pytest.approx(4 * mib)
    assert z["gradients"] == 0 and z["activations"] == pytest.approx(8 * mib)
    assert z["moments"]["optimizer step"] == pytest.approx(2 * mib + 4096 + 8 * mib + 16384 + 10 * mib + 8192)
    assert z["total"] == pytest.approx(2 * mib + 4096 + 8 * mib + 16384 + 24 * mib)
    assert z["assumed"]["optimizer_parallel"] and z["assumed"]["optimizer_level"] == "level1"


def test_optimizer_states_by_optimizer(graph_of):
    """The optimizer's states per kept parameter element: MindFormers' AdamW two fp32 moments (8 B), MindSpore's
    nn.AdamWeightDecay two moments in the weights' dtype (fp16: 4 B), nn.Momentum one (2 B)."""
    mib = 2**20
    for name, per in (("adamw", 8), ("adam-weight-decay", 4), ("momentum", 2)):
        plan = _mlp_plan(graph_of, "dp=2,tp=4", ((2, 1), (1, 4)), ((2, 4), (4, 1)), StepOptions(optimizer=name))
        m = estimate(plan).memory
        assert m["optimizer_states"] == pytest.approx(per * (2 * mib + 2048)), name
        assert m["assumed"]["optimizer_key"] == name
    with pytest.raises(InputSpecError, match="bad --optimizer 'adam'"):
        StepOptions(optimizer="adam").check()


def test_gradient_accumulation_memory(graph_of):
    """Two micro-batches without a pipeline, as MindFormers' training cell runs them: the accumulated gradients
    (4 MiB + 4 KiB) kept all step. The optimizer updates the parameters in order; while the first, fc1's weight, is
    updated, five fp32 copies of its slice (4 MiB each) sit beside the scaled gradients of the three after it (fc1's
    bias, fc2's weight and bias: 2 MiB + 4 KiB, fp16 weights making no temporary ahead)."""
    mib = 2**20
    plan = _mlp_plan(graph_of, "dp=2,tp=4", ((2, 1), (1, 4)), ((2, 4), (4, 1)), StepOptions(micro_batches=2))
    m = estimate(plan).memory
    g = 4 * mib + 4096
    assert m["accumulated_gradients"] == pytest.approx(g) and "accumulation_constants" not in m
    assert m["peak_at"] == "optimizer step"
    assert m["gradients"] == pytest.approx(g - 2 * mib)
    assert m["total"] == pytest.approx(g + 4 * g + g + (g - 2 * mib) + 5 * 4 * mib)
    assert m["moments"]["end of the forward"] == pytest.approx(g + 4 * g + g + 10 * mib)     # one micro-batch: half


def test_recompute_and_pipeline_options_change_time_and_memory(graph_of):
    g = graph_of("examples/llama.py:tiny")
    hw = load_hardware("atlas-800t-a2")
    mesh = Mesh.parse("dp=2")
    base = {}
    for r in ("none", "selective", "full"):
        base[r] = estimate(propagate(g.with_meta(step_options=StepOptions(recompute=r)), mesh, {}, hardware=hw))
    assert base["none"].memory["activations_per_micro_batch"] > \
        base["selective"].memory["activations_per_micro_batch"] > base["full"].memory["activations_per_micro_batch"]
    assert base["none"].schedule["computing_s"] < base["selective"].schedule["computing_s"] < \
        base["full"].schedule["computing_s"]
    est = estimate(propagate(g.with_meta(step_options=StepOptions(pp=2, micro_batches=2)), mesh, {}, hardware=hw))
    assert est.schedule["bubble_s"] > 0 and len(est.per_stage) == 2
    with pytest.raises(InputSpecError, match="pp=3 does not split the model's 2 layers evenly"):
        estimate(propagate(g.with_meta(step_options=StepOptions(pp=3, micro_batches=3)), mesh, {}, hardware=hw))
    assert g.step_options is None           # the views left the cached graph as it was built


def test_stage_assignment_is_even_with_embedding_first_and_head_last(graph_of):
    g = graph_of("examples/llama.py:tiny")
    st = stage_of_ops(g, 2)
    assert st["model.tok_embeddings.gather"] == 0 and st["lm_head.matmul"] == 1
    assert {st[o.name] for o in g if o.layer == "model.layers.0"} == {0}
    assert {st[o.name] for o in g if o.layer == "model.layers.1"} == {1}


def test_an_operator_of_no_layer_after_the_first_takes_the_stage_of_what_it_reads():
    # MindSpore's BroadCastColoring: an operator of no staged Cell takes its producers' (the latest) stage -- a
    # scope-less op reading layer 1 and read back by it (DeepSeek's router's repeat_interleave) runs on layer 1's
    # stage; one reading nothing staged after the layers (a label's reshape) on the last; the head on the last
    from strategist.vocab.graph import Input, Op, OpGraph, TensorSpec
    x = TensorSpec((4, 8), "float32")

    def op(name, layer="", reads=()):
        return Op(name, "Add", layer, "Cell", "add", name, tuple(Input("op", r) for r in reads) or (Input("input", "x"),),
                  (x,))
    ops = [op("embed"), op("slice"), op("model.layers.0.a", "model.layers.0", ["embed"]),
           op("model.layers.1.a", "model.layers.1", ["model.layers.0.a"]),
           op("expand_dims", reads=["model.layers.1.a"]), op("tile", reads=["expand_dims"]),
           op("model.layers.1.b", "model.layers.1", ["tile"]),
           op("model.layers.2.a", "model.layers.2", ["model.layers.1.b"]),
           op("model.layers.3.a", "model.layers.3", ["model.layers.2.a"]),
           op("labels"), op("mask", reads=["slice"]), op("head", reads=["model.layers.3.a"])]
    st = stage_of_ops(OpGraph(ops, {"x": x}, {}, [], {}), 2)
    # (the mask reads the input's slice alone, which no layer's operator feeds: unstaged in MindSpore, used by the
    # loss on the last stage)
    assert [st[o.name] for o in ops] == [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1]


def test_profile_figures_name_their_sources_and_can_be_overridden():
    hw = load_hardware("atlas-800t-a2")
    p = step_profile(hw)
    assert p.matmul_tflops == 273.3e12 and p.elementwise_GBps == 1280e9 and p.memory_GB == 64 * 2**30
    podc = step_profile(load_hardware("Atlas 900 A2 PoDc"))      # as the vendor writes it
    assert podc.matmul_tflops == 328e12 and podc.elementwise_GBps == p.elementwise_GBps \
        and podc.intra_bus_GBps == p.intra_bus_GBps and podc.memory_GB == p.memory_GB
    assert [p.bus_bandwidth("AllGather", n, True) for n in (2, 4, 8)] == [38e9, 64e9, 149e9]
    assert [p.bus_bandwidth("AllReduce", n, True) for n in (2, 4, 8)] == [18e9, 30e9, 72e9]
    assert all(p.sources[k] for k in ("matmul_tflops", "elementwise_GBps", "intra_bus_GBps", "inter_bus_GBps"))
    q = step_profile(hw, parse_overrides(["matmul_tflops=300", "intra_bus_GBps.AllReduce.8=80"]))
    assert q.matmul_tflops == 300e12 and q.sources["matmul_tflops"] == "user override"
    assert q.bus_bandwidth("AllReduce", 8, True) == 80e9 and q.bus_bandwidth("AllReduce", 4, True) == 30e9
    with pytest.raises(MeshError, match="unknown step_model figure 'matmul_tflop'"):
        step_profile(hw, {"matmul_tflop": 1})
    with pytest.raises(MeshError, match="bad --step-set"):
        parse_overrides(["matmul_tflops"])


def test_bad_options_are_one_line_errors():
    with pytest.raises(InputSpecError, match="bad --recompute 'some': write none, selective or full"):
        StepOptions(recompute="some").check()
    with pytest.raises(InputSpecError, match="fewer than pp=4"):
        StepOptions(pp=4, micro_batches=2).check()


def test_two_copies_hide_a_row_parallel_allreduce_behind_each_other():
    from strategist.cost.step import interleaved
    # a layer: x (1 s) -> w (1 s, its own AllReduce 1 s) -> y (1 s). One copy: the AllReduce is exposed (4 s).
    # Two copies of half the batch: w's AllReduce of copy 0 (0.5 s) runs beside copy 1's x and w (1 s)
    items = [Item("x", "L0", 1.0, 0.0, False, ()), Item("w", "L0", 1.0, 0.0, False, (("x", 0, 0.0, 0.0),), own_fwd=1.0),
             Item("y", "L0", 1.0, 0.0, False, (("w", 0, 0.0, 0.0),))]
    assert simulate(items, FLAT, grads=False).end == pytest.approx(4.0)
    two = interleaved(items, 2)
    assert [i.name for i in two] == ["x (copy 0)", "w (copy 0)", "x (copy 1)", "w (copy 1)", "y (copy 0)", "y (copy 1)"]
    tl = simulate(two, FLAT, grads=False)
    # x0 w0 | x1 w1 (AR0 beside them) | y0 | AR1 ends at 2.5 -> y1 from 2.5: 3.0 s, 0.5 s of AllReduce exposed
    assert tl.end == pytest.approx(3.0)
    assert summarize(tl)[0]["overlapped_s"] == pytest.approx(1.0)


def test_the_advisor_chooses_by_the_schedule(graph_of):
    from strategist.advice.advisor import advise
    g = graph_of("examples/mlp.py:MegatronMLP", "hidden=1024", "ffn=4096", "tokens=8192")
    hw, mesh = load_hardware("atlas-800t-a2"), Mesh.parse("dp=2,tp=4")
    megatron = {"linear_fc1.matmul": Anchor("linear_fc1.matmul", ((2, 1), (1, 4))),
                "linear_fc2.matmul": Anchor("linear_fc2.matmul", ((2, 4), (4, 1)))}
    a = advise(g, mesh, hardware=hw, dataset_strategy="full_batch")        # the schedule: the default
    ref = propagate(g.with_meta(step_options=StepOptions(choose_by_schedule=True)), mesh, megatron, hardware=hw,
                    dataset_strategy="full_batch")
    assert a.plan.totals()["step_seconds"] == estimate(a.plan).step_s
    assert ref.totals()["step_seconds"] == estimate(ref).step_s
    # the whole 8 cards as one tensor-parallel group: fc2's AllReduce of the [8192, 1024] fp16 output
    # over 8 at 72 GB/s bus bandwidth (2 * 7/8 * 16 MiB: 408 us) against Megatron's [4096, 1024] over 4
    # at 30 GB/s (2 * 3/4 * 8 MiB: 419 us), and no gradient reduction over dp
    assert a.plan.strategy("linear_fc1.matmul") == ((1, 1), (1, 8))
    assert a.plan.totals()["step_seconds"] < ref.totals()["step_seconds"]
    # by the serial sum (--choose-by-serial-sum), every collective at its link bandwidth: Megatron's column/row pair
    a = advise(g.with_meta(step_options=StepOptions(choose_by_schedule=False)), mesh, hardware=hw,
               dataset_strategy="full_batch")
    assert a.plan.strategy("linear_fc1.matmul") == ((2, 1), (1, 4))


def test_per_stage_recompute_lists_take_each_stages_first_layers(graph_of):
    from strategist.cost.step import selective_drop
    g = graph_of("examples/llama.py:tiny")
    opts = StepOptions(pp=2, micro_batches=2, recompute="selective", select_layers=(1, 0),
                       comm_recompute_layers=(0, 1)).check()
    drop = selective_drop(g, opts)
    by_layer = {}
    for name in drop:
        by_layer.setdefault(g.op(name).layer, set()).add(g.op(name).type)
    # layer 0 (stage 0's first): the MLP's SiLU and its product; layer 1 (stage 1's first): its two norms
    assert by_layer == {"model.layers.0": {"SiLU", "Mul"}, "model.layers.1": {"RmsNorm"}}
    with pytest.raises(InputSpecError, match="bad select_layers"):
        StepOptions(pp=2, micro_batches=2, select_layers=(1,)).check()


def _cli(capsys, *argv):
    from strategist.cli import main
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_options_and_json_keys(capsys):
    import json
    import os
    tiny = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "llama.py") + ":tiny"
    code, out, err = _cli(capsys, "advise", tiny, "--kwargs", "batch=8", "--mesh", "pp=2,dp=2", "--micro-batches", "4",
                          "--recompute", "selective", "--optimizer-parallel", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    keys = {"computing_s", "communication_not_overlapped_s", "overlapped_s", "free_s", "bubble_s", "step_s"}
    c = d["configurations"]["advice"]
    assert keys <= set(c["schedule"]) and c["schedule"]["bubble_s"] > 0
    assert c["throughput"]["tokens_per_s_per_device"] > 0 and c["throughput"]["devices"] == 4
    assert c["memory"]["assumed"]["recompute"] == "selective" and c["memory"]["assumed"]["optimizer_parallel"]
    rows = [r for k, r in d["plan"]["per_layer"].items() if k.startswith("model.layers.")]
    assert rows and all(keys <= set(r) for r in rows)
    assert all({"op", "feature", "applicable", "reason", "saving_s", "how"} <= set(x) for x in d["overlap"]["candidates"])
    code, out, err = _cli(capsys, "advise", tiny, "--kwargs", "batch=8", "--mesh", "pp=2,dp=2", "--micro-batches", "4")
    assert code == 0 and "Step (scheduled, msprof-analyze's columns)" in out and "Bubble" in out
    code, out, err = _cli(capsys, "advise", tiny, "--kwargs", "batch=8", "--mesh", "pp=3,dp=2", "--micro-batches", "4")
    assert code == 2 and err.strip().splitlines()[-1:] == [
        ("strategist: error: pp=3 does not split the model's 2 layers evenly: give --offset (MindFormers' "
         "model_config.offset, per-stage extra layers summing to 2 % 3 = 2) or a pp dividing 2 (2)")]
    # MindFormers' own split: 2 // 3 = 0 layers a stage, the offsets give the middle and last stage one each
    code, out, err = _cli(capsys, "advise", tiny, "--kwargs", "batch=8", "--mesh", "pp=3,dp=2", "--micro-batches", "4",
                          "--offset", "0,1,1", "--format", "json")
    assert code == 0, err
    o = json.loads(out)["plan"]["step"]["options"]
    assert o["offset"] == [0, 1, 1] and {"setting": "offset", "value": "[0, 1, 1]", "from": "command line"} in o["settings"]
    code, out, err = _cli(capsys, "advise", tiny, "--kwargs", "batch=8", "--mesh", "pp=2,dp=2", "--micro-batches", "4",
                          "--offset", "1,0")
    assert code == 2 and err.strip().splitlines()[-1] == (
        "strategist: error: bad offset [1,0]: MindFormers needs the offsets to sum to 2 % 2 = 0 (the layers pp=2 "
        "leave over), and they sum to 1")
    code, out, err = _cli(capsys, "advise", tiny, "--kwargs", "batch=8")
    assert code == 2 and err.strip().splitlines()[-1] == (
        "strategist: error: no mesh: give --mesh (e.g. --mesh dp=2,tp=4); a MindFormers config gives its own")
    code, out, err = _cli(capsys, "propagate", tiny, "--mesh", "dp=2", "--step-set", "matmul_tflops")
    assert code == 2 and "bad --step-set 'matmul_tflops'" in err


def test_clear_caches_clears_the_step_and_memory_models(graph_of):
    """propagate.clear_caches() leaves the step model's and the memory model's memos empty (bench/ cold timings)."""
    from strategist.cost import memory, step
    from strategist.propagate import clear_caches
    plan = _mlp_plan(graph_of, "dp=2,tp=4", ((2, 1), (1, 4)), ((2, 4), (4, 1)), StepOptions())
    estimate(plan).memory
    assert step._GRAPHS or step._BASES or step._STAGES
    assert memory._ACTIVATIONS and memory._SLICES
    clear_caches()
    assert not any((step._PROFILES, step._COMMS, step._GRAPHS, step._BASES, step._DROPS, step._MIRRORS,
                    step._STAGES, step._NAMES, step._ITEMS, memory._ACTIVATIONS, memory._SLICES, memory._STAGE_OPS,
                    memory._PARAMS, memory._MOVES))


def test_the_html_memory_bar_adds_up_to_the_total(graph_of):
    """The HTML report's memory bar stacks what the step holds at its peak: its parts add up to the total."""
    from strategist.report.html.charts import BAR_W, memory_bar
    for opts in (StepOptions(), StepOptions(optimizer_parallel=True), StepOptions(micro_batches=2)):
        m = estimate(_mlp_plan(graph_of, "dp=2,tp=4", ((2, 1), (1, 4)), ((2, 4), (4, 1)), opts)).memory
        bar = memory_bar(m)
        top = max(m["capacity"], m["total"])
        assert sum(s["w"] for s in bar["segments"]) == pytest.approx(m["total"] / top * BAR_W, abs=0.05)


def test_flash_attention_runs_at_its_querys_rate_on_the_blocks_its_mask_leaves():
    """By hand, the tiny LLaMA's FlashAttentionScore at sequence 2048 (batch 2, hidden 256, fp16 query; its first
    outputs the fp32 softmax statistics): forward FLOPs 4 x (2 x 2048 x 256) x 2048 = 8.59 G without a mask; causal
    (sparse_mode 2), the 2048 x 2049 / 2 pairs on and below the diagonal: x 2049 / 4096; at the fp16 rate x 0.645
    x keys / (keys + 1100), ``keys`` the keys a query row attends on average (2048 without the mask, 1024.5 with
    it: the fixed cost of a query tile spread over less work), compute-bound (its 10 MB through memory take a
    sixth of that); the backward 2.5x the forward."""
    import os
    from strategist.cost.optime import op_time
    from strategist.cost.step import step_profile_of
    from strategist.frontend.loader import load_graph
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    hw = load_hardware("atlas-800t-a2")
    prof = step_profile_of(hw, ())
    for causal, share in ((False, 1.0), (True, 2049 / 4096)):
        g = load_graph(os.path.join(root, "examples", "llama.py") + ":tiny", None,
                       ["layers=1", "batch=2", "seq=2048", f"causal={causal}"])
        plan = propagate(g, Mesh.parse("dp=1"), {}, hardware=hw)
        fa = next(op for op in g if op.type == "FlashAttentionScore")
        assert fa.outputs[0].dtype == "float32" and fa.inputs[0].spec.dtype == "float16"
        fwd = 4 * (2 * 2048 * 256) * 2048 * share
        assert plan.flops[fa.name] == pytest.approx(3 * fwd)
        t = op_time(fa, plan.choices[fa.name], plan.flops[fa.name], plan.traffic.get(fa.name, 0.0), True, prof)
        keys = 2048 * share
        rate = 273.3e12 * 0.645 * keys / (keys + 1100)
        assert t.forward == pytest.approx(fwd / rate)
        assert t.backward == pytest.approx(2.5 * fwd / rate)
    # the query's sequence split over cp=2 (the keys whole): the device with rows 1024-2047 attends
    # sum(i + 1 for those rows) = 2048 x 2049 / 2 - 1024 x 1025 / 2 pairs of its 1024 x 2048, three quarters against
    # the half of the other device: the step waits on it
    plan = propagate(g, Mesh.parse("cp=2"), {fa.name: ((1, 2, 1), (1, 1, 1), (1, 1, 1), (1, 1))}, hardware=hw,
                     dataset_strategy="full_batch")
    pairs = 2048 * 2049 / 2 - 1024 * 1025 / 2
    assert plan.flops[fa.name] == pytest.approx(3 * 4 * 2 * 256 * pairs)         # 4 x batch x hidden per pair


def test_flash_attention_load_balance_computes_the_mean_share_and_swaps_half_the_query_chunk():
    """By hand, the tiny LLaMA's causal FlashAttentionScore at sequence 2048 (batch 2, hidden 256, fp16) with its
    query split over cp=2, under MindSpore's load balance: the sequence cut into 4 blocks of 512 rows, device 0
    computes blocks 0 and 3 (512 x 513 / 2 + (2048 x 2049 - 1536 x 1537) / 2 = 1049088 pairs), device 1 blocks 2
    and 1 (655616 + 393472: the same), the mean 2048 x 2049 / 4 -- against the 1573376 of the last chunk without it.
    Each device swaps half its query chunk (2 x 512 x 256 fp16: 512 KiB) with its partner by an AllGather of the pair
    and sends the partner's attention output back alike; the gradients go back by two ReduceScatters. The layer's
    computing time drops by the FLOPs' difference at FlashAttention's rate, its exposed communication grows by the
    four exchanges."""
    import os
    from strategist.cost.attention import load_balance
    from strategist.cost.optime import op_time
    from strategist.cost.step import estimate_with, step_profile_of
    from strategist.frontend.loader import load_graph
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    hw = load_hardware("atlas-800t-a2")
    prof = step_profile_of(hw, ())
    g = load_graph(os.path.join(root, "examples", "llama.py") + ":tiny", None,
                   ["layers=1", "batch=2", "seq=2048", "causal=True"])
    fa = next(op for op in g if op.type == "FlashAttentionScore")
    plan = propagate(g, Mesh.parse("cp=2"), {fa.name: ((1, 2, 1), (1, 1, 1), (1, 1, 1), (1, 1))}, hardware=hw,
                     dataset_strategy="full_batch")
    per_pair = 3 * 4 * 2 * 256                      # training FLOPs per query-key pair: 3 x 4 x batch x hidden
    assert plan.flops[fa.name] == pytest.approx(per_pair * 1573376)
    lb = load_balance(fa, plan.choices[fa.name])
    assert lb.flops == pytest.approx(per_pair * 1049088) and 1049088 == 2048 * 2049 // 4
    assert lb.group == (0, 1)
    assert [(st.kind, st.direction, st.nbytes) for st in lb.steps] == \
        [("AllGather", "forward", 524288), ("AllGather", "forward", 524288),
         ("ReduceScatter", "backward", 524288), ("ReduceScatter", "backward", 524288)]
    ch = plan.choices[fa.name]
    before, after = (op_time(fa, ch, f, plan.traffic.get(fa.name, 0.0), True, prof) for f in (plan.flops[fa.name],
                                                                                               lb.flops))
    off, on = (estimate_with(plan, StepOptions(fa_load_balance=b)).per_layer["model.layers.0"] for b in (False, True))
    assert off["computing_s"] - on["computing_s"] == pytest.approx(
        before.forward + before.backward - after.forward - after.backward)
    assert on["communication_not_overlapped_s"] - off["communication_not_overlapped_s"] == pytest.approx(
        2 * prof.collective_seconds("AllGather", 2, 524288, True)
        + 2 * prof.collective_seconds("ReduceScatter", 2, 524288, True))
    # the advice's note: both steps, as the estimates give them
    from strategist.advice.advisor import load_balance_note
    steps = [estimate_with(plan, StepOptions(fa_load_balance=b)).step_s for b in (True, False)]
    assert load_balance_note(plan).endswith(f"--fa-load-balance; off here) the step is {steps[0] * 1e3:.3f} ms, "
                                            f"without it {steps[1] * 1e3:.3f} ms ({(steps[0] - steps[1]) * 1e3:+.3f} ms)")
    # nothing to balance on a query whose sequence is whole
    whole = propagate(g, Mesh.parse("dp=2"), {}, hardware=hw)
    assert load_balance(fa, whole.choices[fa.name]) is None and load_balance_note(whole) is None


def test_a_graph_of_one_micro_batch_runs_it_micro_batches_times():
    """The tiny LLaMA on dp=2 with 4 micro-batches: a graph of the step's 8 sequences split into 4 micro-batches
    (graph_batch "step") and a graph of one micro-batch's 2 sequences run 4 times ("micro") are the same step: each
    micro-batch's operators, collectives and activations alike, the gradients reduced once. A tensor no batch sizes
    is whole in every micro-batch of either: the memory-bound MatMul w1 reads its whole fp16 weight (256 x 688)
    each micro-batch beside a quarter of the step's rows, by hand at the element-wise rate."""
    import os
    from strategist.api import _with_step_options
    from strategist.cost.step import estimate_with, step_profile_of
    from strategist.engine.search.caches import cached_rule
    from strategist.frontend.loader import load_graph
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    hw = load_hardware("atlas-800t-a2")
    prof = step_profile_of(hw, ())
    model = os.path.join(root, "examples", "llama.py") + ":tiny"
    est, plans = {}, {}
    for batch, kind in ((8, "step"), (2, "micro")):
        g = load_graph(model, None, ["layers=2", f"batch={batch}", "param_dtype=float32"])
        plans[kind] = plan = propagate(g, Mesh.parse("dp=2"), {}, hardware=hw)
        est[kind] = estimate_with(plan, StepOptions(micro_batches=4, graph_batch=kind))
    whole, micro = est["step"], est["micro"]
    assert micro.throughput["tokens_per_step"] == whole.throughput["tokens_per_step"] == 8 * 129
    # (the loss's scalars, which no batch sizes either but come from it, split among the micro-batches: 0.2 ns)
    assert micro.step_s == pytest.approx(whole.step_s, rel=1e-6)
    assert micro.memory["total"] == pytest.approx(whole.memory["total"], rel=1e-9)
    w1 = "model.layers.0.feed_forward.w1.matmul"
    op, s = g.op(w1), plans["step"].choices[w1].sharding
    assert op.inputs[1].kind == "op" and g.op(op.inputs[1].ref).type == "Cast"     # the fp32 weight cast to fp16
    assert cached_rule(op).slots[:2] == (0, 1) and math.prod(s.inputs[1].slice_shape) == 256 * 688
    n = s.inputs[0].slice_shape[0]                      # the step's rows a device reads (fp16)
    item = next(it for it in whole.items if it.op == w1)
    assert prof.matmul_seconds(2 * n * 256 * 688 / 4) < item.fwd
    assert item.fwd == pytest.approx(prof.memory_seconds((n * 256 + n * 688) * 2 / 4 + 256 * 688 * 2))
    with pytest.raises(InputSpecError, match="graph_batch"):
        StepOptions(graph_batch="half").check()
    # a model file's batch must split into the micro-batches, unless the graph holds one
    with pytest.raises(InputSpecError, match="does not split the model's batch of 2"):
        _with_step_options(g, StepOptions(micro_batches=4))
    assert _with_step_options(g, StepOptions(micro_batches=4, graph_batch="micro")).step_options.graph_batch == "micro"


def test_gradient_accumulation_adds_each_micro_batchs_gradients_into_the_sum():
    """By hand, the tiny LLaMA (2 layers, dp=2, fp16 weights): its P trainable elements' gradients (2 bytes each) are
    added into the accumulated sum once per micro-batch -- the gradient and the sum read, the sum written: 4
    micro-batches move 4 x 3 x 2P bytes more than one, at the profile's element-wise rate."""
    import math
    import os
    from strategist.frontend.loader import load_graph
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    hw = load_hardware("atlas-800t-a2")
    g = load_graph(os.path.join(root, "examples", "llama.py") + ":tiny", None, ["layers=2", "batch=8"])
    plan = propagate(g, Mesh.parse("dp=2"), {}, hardware=hw)
    from strategist.cost.step import estimate_with
    one, four = (estimate_with(plan, StepOptions(micro_batches=m)).per_layer["(optimizer)"]["computing_s"]
                 for m in (1, 4))
    elements = sum(math.prod(p.spec.shape) for p in g.params.values() if p.requires_grad)
    assert all(p.spec.dtype == "float16" for p in g.params.values() if p.requires_grad)
    assert four - one == pytest.approx(4 * 3 * 2 * elements / 1280e9)


def test_every_step_figure_of_one_advice_is_the_schedules(capsys):
    """Text, JSON and HTML of one advice: the configurations' step estimate, the schedule's Step and the HTML
    summary's step are one number (the serial sum, where shown, under its own name)."""
    import json
    import os
    import re
    from strategist.api import advise_model
    from strategist.report.html import advice_html
    from strategist.report.render import advice_dict, advice_text
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    a = advise_model(os.path.join(root, "examples", "llama.py") + ":tiny", "dp=2,tp=2",
                     kwargs=["layers=2", "batch=8", "loss=vocab_parallel"], hardware="atlas-800t-a2")
    step = estimate(a.plan).step_s
    d = json.loads(json.dumps(advice_dict(a)))
    assert d["configurations"]["advice"]["step_seconds"] == step == d["plan"]["step"]["schedule"]["step_s"]
    assert d["configurations"]["advice"]["serial_seconds"] == a.plan.totals()["serial_step_seconds"]
    text = advice_text(a)
    ms = f"{step * 1e3:.3f} ms" if step >= 1e-3 else f"{step * 1e6:.1f} us"
    row = next(line for line in text.splitlines() if line.startswith("advice ")).split()
    # ... serial sum, step estimate, memory (two words each), conflicts
    assert " ".join(row[-5:-3]) == ms
    html = advice_html(a)
    assert re.search(r"step estimate", text) and "serial sum" in text
    from strategist.report.html import charts
    assert charts.ms(step) in html


def test_float32_weights_with_the_parallel_optimizer(graph_of):
    """Float32 weights read through a Cast (MindFormers' param_init_type float32) take the parallel optimizer like
    any weight, and as MindSpore 2.9 compiles them (its IR, pipelined or not): the gradient reduce-scattered in
    float32, half the float32 AllReduce's ring bytes (wq, 256 x 256 over 8: 2 x 7/8 x 256 KiB / 2 = 224 KiB), the
    weight gathered after its Cast in fp16, half of that again (optimize_parallel_all_gather_comm moves the Cast in
    front). The embedding table, read by its Gather itself, is gathered in float32."""
    from strategist.files.hardware import load_hardware
    from strategist.propagate import propagate
    from strategist.vocab.mesh import Mesh
    g = graph_of("examples/llama.py:tiny", "layers=2", "batch=8", "param_dtype=float32")
    hw = load_hardware("atlas-800t-a2")
    for pp in (1, 2):
        opts = StepOptions(optimizer_parallel=True, pp=pp, micro_batches=2 if pp > 1 else 1)
        plan = propagate(g.with_meta(step_options=opts), Mesh.parse("dp=8"), {}, hardware=hw)
        est = estimate(plan)
        items = {i.op: i for i in est.items if i.mirrors}
        (m,) = items["model.layers.0.attention.wq.matmul"].mirrors
        (t,) = items["model.tok_embeddings.gather"].mirrors
        assert m[1] == t[1] == "ReduceScatter" and m[2] == 8
        assert m[4] == pytest.approx(2 * 7 / 8 * 256 * 256 * 4 / 2)
        assert t[4] == pytest.approx(2 * 7 / 8 * 1024 * 256 * 4 / 2)
        prof = est.prof
        gather = items["model.layers.0.attention.wq.matmul"].prefetch
        assert gather == pytest.approx(prof.collective_seconds("AllGather", 8, m[4] / 2, True))
        assert items["model.tok_embeddings.gather"].prefetch == pytest.approx(
            prof.collective_seconds("AllGather", 8, t[4], True))


@pytest.mark.parametrize("keys, tflops", [(2048, 139.15), (4096, 170.11), (8192, 189.54)])
def test_flash_attentions_rate_at_a_key_length_is_the_measured_one(keys, tflops):
    """The 24-core 910B's FlashAttention forward as pto-isa's demo benchmarks measure it (a 128-row query tile,
    head 128, normalised to the chip's 24 cores): the profile's rate at that many keys within 2 %."""
    from strategist.cost.step import step_profile_of
    prof = step_profile_of(load_hardware("atlas-900-a2-podc"), ())
    assert 1 / prof.matmul_seconds(1.0, "bfloat16", attention=True, keys=keys) / 1e12 == pytest.approx(tflops, rel=0.02)


def test_an_optimizer_that_swaps_keeps_its_states_on_the_host_and_the_largest_weights_for_its_update(graph_of):
    """By hand, the Megatron MLP (hidden 1024, ffn 4096, fp16, biases of 4096 and 1024) at dp=8: each device holds
    both 1024 x 4096 weights and the biases whole. AdamW's two fp32 moments are 8 bytes an element:
    8 x (2 x 1024 x 4096 + 4096 + 1024) bytes. With MindFormers' AdamW ``swap`` they are on the host (reported as
    such); the device holds the largest weight's, 8 x 1024 x 4096 bytes (32 MiB), only during the optimizer step,
    beside the step's temporaries."""
    plain = estimate(_mlp_plan(graph_of, "dp=8", ((8, 1), (1, 1)), ((8, 1), (1, 1)), StepOptions())).memory
    swap = estimate(_mlp_plan(graph_of, "dp=8", ((8, 1), (1, 1)), ((8, 1), (1, 1)),
                              StepOptions(optimizer_swap=True))).memory
    states, largest = 8 * (2 * 1024 * 4096 + 4096 + 1024), 8 * 1024 * 4096
    assert plain["optimizer_states"] == states
    assert swap["optimizer_states"] == 0 and swap["optimizer_states_on_host"] == states
    assert swap["parameters"] == plain["parameters"] == 2 * (2 * 1024 * 4096 + 4096 + 1024)
    assert swap["optimizer_temporaries"] == plain["optimizer_temporaries"] + largest
    assert swap["moments"]["optimizer step"] == plain["moments"]["optimizer step"] - states + largest


def test_max_device_memory_is_what_a_step_must_fit_in(graph_of):
    """MindSpore's max_device_memory bounds its pool: the Megatron MLP at dp=8 holds the same bytes under any limit,
    and fits where they are within ``GB x 2**30`` (MindSpore's GB), not where they exceed it; without one the limit
    is the profile's memory less its reserve."""
    plain = estimate(_mlp_plan(graph_of, "dp=8", ((8, 1), (1, 1)), ((8, 1), (1, 1)), StepOptions())).memory
    total = plain["total"]
    assert plain["capacity"] == (64 - 5) * 2**30
    tight = total / 2**30 * 0.99
    low = estimate(_mlp_plan(graph_of, "dp=8", ((8, 1), (1, 1)), ((8, 1), (1, 1)),
                             StepOptions(max_device_memory=tight))).memory
    assert low["total"] == total and low["capacity"] == tight * 2**30 and not low["fits"]
    assert low["assumed"]["capacity"] == f"max_device_memory {tight:g} GB"
    roomy = estimate(_mlp_plan(graph_of, "dp=8", ((8, 1), (1, 1)), ((8, 1), (1, 1)),
                               StepOptions(max_device_memory=62))).memory
    assert roomy["capacity"] == 62 * 2**30 and roomy["fits"]
    from strategist.report.step import memory_lines
    assert "usable (max_device_memory 62 GB; fits" in memory_lines({"memory": roomy})[0]
    assert "usable (fits" in memory_lines({"memory": plain})[0]
