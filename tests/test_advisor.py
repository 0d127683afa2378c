"""The advisor: Megatron reproduced with fewer anchors than the page, the ResNet boundary, minimality,
never costlier than configuring nothing, rules as data."""
import json
import math
import os

import pytest

from strategist.advice.advisor import advise, load_rules
from strategist.api import advise_model
from strategist.cli import main
from strategist.cost.step import estimate
from strategist.errors import RulesError
from strategist.vocab.mesh import Mesh
from strategist.files.hardware import load_hardware
from strategist.propagate import propagate
from strategist.report.render import advice_dict

from conftest import ROOT, serial, serial_step

HW = load_hardware("atlas-800t-a2")
LLAMA = "examples/llama.py:llama2_70b"

#: These tests model Megatron-style tensor parallelism, whose input is whole on every tensor-parallel
#: rank: MindSpore's full_batch (its default data_parallel splits the batch over all devices).
FB = "full_batch"


def splits(plan, name):
    """The factors the operator actually splits (split > 1)."""
    return {f: x for f, x in plan.choices[name].sharding.splits.items() if x > 1}


def ar_bytes(n_tp, numel, tl=2):
    """Ring AllReduce: each device sends 2(n-1)/n of the tensor."""
    return 2 * (n_tp - 1) / n_tp * numel * tl


@pytest.mark.parametrize("dp, tp", [(2, 4), (8, 8)])
def test_megatron_mlp(graph_of, dp, tp):
    """MindSpore's propagation page, by the serial sum: Megatron's column/row pair. By the default schedule the same
    at dp=8,tp=8; at dp=2,tp=4 all 8 cards as one tensor-parallel group (fc2's AllReduce over 8 at 72 GB/s against
    Megatron's over 4 at 30 GB/s, and no data-parallel gradient reduction: worked in
    test_step_model.py::test_the_advisor_chooses_by_the_schedule)."""
    g = graph_of("examples/mlp.py:MegatronMLP", "hidden=1024", "ffn=4096", "tokens=8192")
    by_schedule = advise(g, Mesh.parse(f"dp={dp},tp={tp}"), hardware=HW, dataset_strategy=FB)
    assert by_schedule.plan.strategy("linear_fc1.matmul") == (((1, 1), (1, 8)) if dp == 2 else ((dp, 1), (1, tp)))
    a = advise(serial(g), Mesh.parse(f"dp={dp},tp={tp}"), hardware=HW, dataset_strategy=FB)
    assert a.plan.strategy("linear_fc1.matmul") == ((dp, 1), (1, tp))       # column
    assert a.plan.strategy("linear_fc2.matmul") == ((dp, tp), (tp, 1))      # row
    assert a.plan.strategy("linear_fc1.add") == ((dp, tp), (tp,))
    assert len(a.chosen) <= 2           # the page's propagation version configures each Linear's MatMul
    # Megatron: one forward AllReduce of the [tokens/dp, hidden] output over tp and its transpose in the backward
    # (an AllReduce of the output's gradient: MindSpore's autodiff, as verify --communication measures it)
    t = a.plan.totals()
    assert t["operator_bytes"] == 2 * ar_bytes(tp, 8192 // dp * 1024) and t["redistribution_bytes"] == 0


@pytest.mark.parametrize("dp, tp, table", [(2, 4, {"p1": 4, "i0": 2}), (8, 8, {"p0": 8, "i0": 8})])
def test_megatron_llama(graph_of, dp, tp, table):
    """LLaMA-2-70B shape (2 layers, batch 8, seq 4096), the training compile: column q/k/v, w1/w3; row wo, w2;
    vocab-parallel head; FlashAttention split by heads. Per layer the activations move as Megatron's closed
    form: 2 forward AllReduces (wo, w2 outputs) and 2 backward (their transposes, which sum the attention and MLP
    input gradients), each of the [B*S/dp, H] fp16 activations over tp."""
    g = graph_of(LLAMA, "layers=2", "batch=8")
    a = advise(g, Mesh.parse(f"dp={dp},tp={tp}"), hardware=HW, dataset_strategy=FB)
    p = a.plan
    for i in range(2):
        for w in ("attention.wq", "attention.wk", "attention.wv", "feed_forward.w1", "feed_forward.w3"):
            assert splits(p, f"model.layers.{i}.{w}.matmul") == {"i": dp, "j": tp}, w
        for w in ("attention.wo", "feed_forward.w2"):
            assert splits(p, f"model.layers.{i}.{w}.matmul") == {"i": dp, "k": tp}, w
        fa = splits(p, f"model.layers.{i}.attention.flash_attention")
        assert fa == {"b": dp, "n": tp}
    # the table: the fastest by the step model of the layouts MindSpore takes. At dp=2,tp=4 each device reads its
    # hidden slice of its rows (one AllGather of the [B*S/dp, H] output after it), faster than Megatron's vocabulary
    # by tp (an AllReduce of it: twice the bytes); at dp=8,tp=8 the hidden split by tp is slower there and
    # MindSpore refuses a vocabulary split beside a hidden one with the ids split (((2, 4), (8, 1)):
    # ops.gather_axis_refused), so Megatron's vocabulary split. The indices keep the dataset's batch split
    emb = "model.tok_embeddings.gather"
    assert emb in [c.op for c in a.chosen] and splits(p, emb) == table
    other = ((tp, 1), (dp, 1)) if dp == 2 else ((1, tp), (dp, 1))
    alt = propagate(g, Mesh.parse(f"dp={dp},tp={tp}"), {**a.anchors, emb: other},
                    use_model_strategies=False, hardware=HW, dataset_strategy=FB)
    assert p.totals()["step_seconds"] < alt.totals()["step_seconds"]
    assert splits(p, "lm_head.matmul") == {"i": dp, "j": tp}   # vocab-parallel head
    # fewer anchors than the page's propagation version (every Linear + FlashAttention: 8 per layer). In the
    # training compile MindSpore creates the embedding first, and its search lays out the residual stream and
    # reaches the attention's projections from their norm before any later anchor: q, k and v each take their
    # column anchor; w2's row anchor; w1 and w3 follow (anchored, each was needed beside the other: the advisor
    # tries such siblings without together). Then the head, the embedding and where the labels' batch split starts
    chosen = [c.op for c in a.chosen]
    assert sorted(chosen) == sorted([emb, "lm_head.matmul", "loss.one_hot"] + [
        f"model.layers.{i}.{w}.matmul" for i in range(2)
        for w in ("attention.wq", "attention.wk", "attention.wv", "feed_forward.w2")])
    act = 8 * 4096 // dp * 8192
    for i in range(2):
        layer = f"model.layers.{i}"
        moved = sum(e.bytes for e in p.edges if p.graph.op(e.dst).layer == layer and e.src != emb) + \
            sum(c.fwd_bytes + c.bwd_bytes for n, c in p.op_costs.items() if p.graph.op(n).layer == layer)
        assert moved == pytest.approx(4 * ar_bytes(tp, act))
    # the table's hidden split gathered into layer 0's norm and residual add: one fp16 AllGather forward (the two
    # consumers share it) and ONE ReduceScatter of their summed gradient back (MindSpore's step: one redistribution
    # node, transposed once; test_communication.py::test_llama_embedding_read_by_two_consumers_is_transposed_once),
    # (h-1)/h of the [B*S/dp, H] output each, h the table's hidden split
    into = [e for e in p.edges if e.src == emb]
    n = math.prod(p.graph.op(emb).outputs[0].shape) // dp
    h = table.get("p1", 1)
    assert sorted(e.dst for e in into) == ["model.layers.0.add", "model.layers.0.attention_norm.norm"]
    assert sum(e.bytes for e in into) == pytest.approx(2 * (h - 1) / h * n * 2)
    assert p.totals()["step_seconds"] < a.baseline.totals()["step_seconds"]


def test_llama_w1_and_w3_are_dropped_together(graph_of):
    """The greedy minimality tries one pattern at a time: without w1 the plan changes (w3's search sets the MLP
    norm's output, w1 then follows it otherwise), without w3 likewise (+140 ms each at dp=8,tp=8), and without both
    nothing changes. The advisor tries kept siblings -- groups reading one tensor -- without all together."""
    g = graph_of(LLAMA, "layers=2", "batch=8")
    mesh = Mesh.parse("dp=8,tp=8")
    a = advise(g, mesh, hardware=HW, dataset_strategy=FB)
    w13 = {f"model.layers.{i}.feed_forward.{w}.matmul": a.plan.strategy(f"model.layers.{i}.feed_forward.{w}.matmul")
           for i in range(2) for w in ("w1", "w3")}
    reasons = {c.op: why for c, why in a.dropped if c.op in w13}
    assert set(reasons) == set(w13) and all("and its siblings" in r for r in reasons.values())

    def step(anchors):
        return propagate(g, mesh, anchors, use_model_strategies=False, hardware=HW,
                         dataset_strategy=FB).totals()["step_seconds"]
    both = {**a.anchors, **w13}
    assert step(both) == pytest.approx(a.plan.totals()["step_seconds"], rel=1e-12)
    for w in ("w1", "w3"):
        alone = {k: v for k, v in both.items() if f".{w}." not in k}
        assert step(alone) > step(both) + 0.1


def test_resnet_gets_a_dp_to_tp_boundary(graph_of):
    """A CNN: model-parallel head, data-parallel body. The dataset's search runs last, so the head's would flood
    the body backward with its dp=2 split: the dp side is anchored at the cut in front of the head (the pool), and
    the body follows the dataset over all 8 devices. In the training compile the head's MatMul then follows its
    bias Add, which no search reaches otherwise (rule 2): its anchor, (dp, tp) rows, lays the MatMul out backward
    column-wise, and a MatMul anchor is not needed. MindSpore 2.9.0 (verify, these 2 anchors): 37/37 agree."""
    g = graph_of("examples/resnet.py:ResNetLike", "batch=128")
    a = advise(g, Mesh.parse("dp=2,tp=4"), hardware=HW)
    assert [(c.op, c.rule) for c in a.chosen] == [("pool", "3 boundary"), ("head.add", "2 dimension")]
    assert a.plan.strategy("head.add") == ((2, 4), (4,))
    assert splits(a.plan, "head.matmul") == {"i": 2, "j": 4}    # classes split by tp
    assert a.plan.strategy("pool") == ((8, 1, 1, 1),)
    convs = [n for n, ch in a.plan.choices.items() if ch.op.type == "Conv2D"]
    assert convs and all(splits(a.plan, n) == {"n": 8} for n in convs)    # batch over all devices
    assert a.plan.totals()["step_seconds"] < a.baseline.totals()["step_seconds"]
    # with a batch of 16 the cut still pays: without it the head's search floods the body backward and
    # MindSpore splits each convolution by its input channels (Conv2DInfo never splits output channels
    # in its search), an AllReduce per convolution
    small = advise(graph_of("examples/resnet.py:ResNetLike", "batch=16"), Mesh.parse("dp=2,tp=4"), hardware=HW)
    assert [c.op for c in small.chosen] == ["pool", "head.add"]
    assert all(splits(small.plan, n) == {"n": 8} for n, ch in small.plan.choices.items() if ch.op.type == "Conv2D")


@pytest.mark.slow
@pytest.mark.ci_sample
def test_resnet50_gets_a_data_parallel_body_and_a_model_parallel_head(graph_of):
    """Issue 10's zoo: ResNet-50 (BatchNorm, MaxPool) with a 10 000-class head on dp=2,tp=4, batch 256. The
    head's parameters about equal its activations, so it is a boundary candidate as the last weight
    operator after a data-parallel body; the cut at the pool keeps every convolution batch-split over all
    8 devices, and the classifier is column-parallel. Each anchor pays for itself."""
    g = graph_of("examples/resnet50.py:ResNet50", "batch=256", "classes=10000")
    a = advise(g, Mesh.parse("dp=2,tp=4"), hardware=HW)
    # the training compile: the classifier follows its bias Add's anchor (test_resnet_gets_a_dp_to_tp_boundary)
    assert [(c.op, c.rule) for c in a.chosen] == [("pool", "3 boundary"), ("fc.bias_add", "2 dimension")]
    convs = [n for n, ch in a.plan.choices.items() if ch.op.type == "Conv2D"]
    assert len(convs) == 53 and all(a.plan.strategy(n) == ((8, 1, 1, 1), (1, 1, 1, 1)) for n in convs)
    assert a.plan.strategy("fc.matmul") == ((2, 1), (4, 1))
    assert a.plan.totals()["step_seconds"] < a.baseline.totals()["step_seconds"]


def test_no_model_parallel_template_on_a_pure_dp_mesh(graph_of):
    """Issue 10: on dp=8 the CNN's classifier is not offered a "column-parallel by tp" anchor."""
    a = advise(graph_of("examples/resnet.py:ResNetLike", "batch=16"), Mesh.parse("dp=8"), hardware=HW)
    assert not a.chosen and not any(c.template.startswith("matmul_") for c, _ in a.dropped)


@pytest.mark.parametrize("target, kwargs", [
    ("examples/mlp.py:MegatronMLP", ()), ("examples/attention.py:AttentionBlock", ()),
    ("examples/resnet.py:ResNetLike", ("batch=16",)), ("examples/llama.py:tiny", ()),
    (LLAMA, ("layers=2", "batch=8")),
])
@pytest.mark.parametrize("mesh", ["dp=2,tp=4", "dp=8,tp=8"])
def test_never_costlier_than_no_anchors(graph_of, target, kwargs, mesh):
    g = graph_of(target, *kwargs)
    try:
        a = advise(g, Mesh.parse(mesh), hardware=HW, dataset_strategy=FB)
    except Exception as err:      # a batch that cannot be split 64 ways is a legitimate refusal
        pytest.skip(str(err))
    assert a.plan.totals()["step_seconds"] <= a.baseline.totals()["step_seconds"] * (1 + 1e-9)


def test_minimality_every_survivor_is_needed(graph_of):
    g = graph_of(LLAMA, "layers=2", "batch=8")
    mesh = Mesh.parse("dp=8,tp=8")
    a = advise(g, mesh, hardware=HW, dataset_strategy=FB)
    assert a.dropped and all(c.needed for c in a.chosen)
    for c in a.chosen[:3]:
        rest = {x.op: x.anchor for x in a.chosen if x.op != c.op}
        q = propagate(g, mesh, rest, use_model_strategies=False, hardware=HW, dataset_strategy=FB)
        changed = [n for n, ch in q.choices.items()
                   if [str(x) for x in ch.outputs] != [str(x) for x in a.plan.choices[n].outputs]]
        assert changed or q.totals() != a.plan.totals(), c.op


def test_every_kept_anchor_pays_for_itself(graph_of):
    """Issue 10: no anchor survives whose removal leaves the step estimate no worse; each says what it saves (the
    70B shape, 2 layers, on dp=8,tp=8: by the schedule, the default, as by the serial sum, Megatron's layers)."""
    a = advise(graph_of(LLAMA, "layers=2", "batch=8"), Mesh.parse("dp=8,tp=8"), hardware=HW, dataset_strategy=FB)
    assert a.chosen and a.plan.totals()["step_seconds"] < a.baseline.totals()["step_seconds"]
    for c in a.chosen:
        assert float(c.needed.split("step estimate ")[1].split(" ms")[0]) > 0, c.needed
    for c, why in a.dropped:
        assert "same layouts" in why or "does not pay for" in why or "dataset alone" in why


def test_existing_shard_calls_are_classified(graph_of):
    """Under full_batch, propagation alone gives the Linear ((1,1),(8,1)) and its bias add ((1,8),(8,)):
    the page's calls written for dp=1, tp=8 say exactly that (redundant); for dp=8, tp=1 they contradict."""
    g = graph_of("examples/sharding_techniques.py:RowParallelLinear", "mode='semi'", "dp=1", "tp=8")
    a = advise(g, Mesh.parse("dp=2,tp=4"), hardware=HW, dataset_strategy=FB)
    assert a.plan.strategy("matmul") == ((1, 1), (8, 1)) and a.plan.strategy("add") == ((1, 8), (8,))
    assert {op: s for op, s, _ in a.existing} == {"matmul": "redundant", "add": "redundant"}
    g = graph_of("examples/sharding_techniques.py:RowParallelLinear", "mode='semi'", "dp=8", "tp=1")
    a = advise(g, Mesh.parse("dp=2,tp=4"), hardware=HW, dataset_strategy=FB)
    assert dict((op, s) for op, s, _ in a.existing)["matmul"] == "contradicted"


def test_rules_override_and_errors(tmp_path, graph_of):
    g = graph_of(LLAMA, "layers=1", "batch=8")
    f = tmp_path / "r.yaml"
    f.write_text("thresholds:\n  large_vocab: 100000\n")
    a = advise(g, Mesh.parse("dp=8,tp=8"), rules=load_rules([str(f)]), hardware=HW, dataset_strategy=FB)
    assert "p0" not in splits(a.plan, "model.tok_embeddings.gather")  # vocab not split now
    for text, needle in [("thresholds:\n  large_vocab: -1\n", "line 2: threshold 'large_vocab'"),
                         ("templates:\n  matmul_row: {k: 3}\n", "line 2: template 'matmul_row'"),
                         ("bogus: 1\n", "line 1: unknown section 'bogus'"),
                         ("categories:\n  weight: MatMul\n", "line 2: category 'weight'"),
                         ("a: [\n", "not valid YAML")]:
        f.write_text(text)
        with pytest.raises(RulesError, match=None) as e:
            load_rules([str(f)])
        assert needle in str(e.value) and str(f) in str(e.value)


def test_declared_boundary(graph_of):
    """--boundary layer4=tp: layer4's first conv goes model-parallel (output channels by tp) and is kept,
    as declared, with its cost stated."""
    g = graph_of("examples/resnet.py:ResNetLike", "batch=16")
    a = advise_model("", "dp=2,tp=4", graph=g, boundaries=["layer4=tp"])
    (c,) = [c for c in a.chosen if c.rule == "3 boundary" and c.declared]
    assert c.op == "layer4.conv1.conv" and c.template == "conv_column"
    # the cut in front of it keeps the body data-parallel (it pays: without it the declared op's search
    # floods layer1-3 backward)
    assert [x.op for x in a.chosen if x.rule == "3 boundary" and not x.declared] == ["layer3.relu"]
    assert splits(a.plan, "layer4.conv1.conv") == {"n": 2, "o": 4}
    assert "declared by --boundary" in c.needed or "+" in c.needed.split("step estimate")[1]


def test_advise_cli(capsys):
    model = os.path.join(ROOT, LLAMA)
    assert main(["advise", "--dataset-strategy", "full_batch", model, "--kwargs", "layers=1", "batch=8", "--mesh", "dp=8,tp=8", "--max-rows", "5"]) == 0
    out = capsys.readouterr().out
    # the training compile: q, k, v and w2, the LM head, the embedding table and the labels' one-hot split over
    # every device (rule 3 on the input path: the loss is not computed 8 times over); w1 and w3 dropped together
    assert "Advice: configure 7 of 39 operators" in out
    assert "loss.one_hot (OneHot, rule 3 boundary: reads only the dataset" in out
    assert 'self.matmul.shard((layout("dp", "tp"), layout("tp", "None")))' in out
    assert "model.layers.*.feed_forward.w2.matmul:\n  layout: [[dp, tp], [tp, None]]" in out
    assert "model.layers.*.attention.wq.matmul:\n  layout: [[dp, None], [None, tp]]" in out
    assert "and its siblings (model.layers.*.feed_forward.w3.matmul)" in out
    assert main(["advise", "--dataset-strategy", "full_batch", model, "--kwargs", "layers=1", "batch=8", "--mesh", "dp=8,tp=8", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d["configurations"]) == {"advice", "no anchors", "every operator configured"}
    assert main(["advise", "--dataset-strategy", "full_batch", model, "--mesh", "dp=2", "--boundary", "head"]) == 2
    assert "bad --boundary 'head'" in capsys.readouterr().err


def test_advice_is_deterministic(graph_of):
    g = graph_of(LLAMA, "layers=1", "batch=8")
    a = json.dumps(advice_dict(advise(g, Mesh.parse("dp=8,tp=8"), hardware=HW, dataset_strategy=FB)), sort_keys=True)
    b = json.dumps(advice_dict(advise(g, Mesh.parse("dp=8,tp=8"), hardware=HW, dataset_strategy=FB)), sort_keys=True)
    assert a == b


def test_expert_weights_split_by_ep(graph_of):
    """Rule 1: a BatchMatMul over a 3-D expert weight takes the experts template (experts by ep)."""
    g = graph_of(os.path.join(ROOT, "tests/models/propagation.py:Experts"))
    # by the schedule (the default) they do not pay: each device's quarter of each fp32 weight, 2 MiB, has its
    # gradient all-reduced over dp=2 after the backward, at the 2-card bus bandwidth (18 GB/s: 116.5 us each),
    # dearer than the baseline's two AllReduces of bmm2's output over 8 at 72 GB/s (92.8 us each)
    by_schedule = advise(g, Mesh.parse("dp=2,ep=2,tp=2"), hardware=HW, dataset_strategy=FB)
    assert not by_schedule.chosen
    assert {c.op: why for c, why in by_schedule.dropped} == dict.fromkeys(("bmm1", "bmm2"),
                                                                          "costlier than configuring nothing")
    # by the serial sum, every collective priced at its link bandwidth, they are kept
    a = advise(serial(g), Mesh.parse("dp=2,ep=2,tp=2"), hardware=HW, dataset_strategy=FB)
    proposed = {c.op: c for c in a.chosen + [c for c, _ in a.dropped]}
    assert proposed["bmm1"].template == "experts" and proposed["bmm2"].template == "experts"
    for name in ("bmm1", "bmm2"):
        w = proposed[name].anchor.layouts[1]              # the weight [E, K, N]: E by ep (tensor map 1 = ep)
        assert w.alias_name == ("dp", "ep", "tp") and w.tensor_map[0] == (1,)
    # the dataset's own propagation splits the F dimension over all 8 devices: one AllReduce of bmm2's output
    # forward and its transpose backward, each 3 halving-doubling rounds x2 at 10 us + 1.75 MiB at 56 GB/s
    # (92.8 us); the anchors (experts by ep) cost less than those two, so they are kept
    base = a.baseline.totals()["total_seconds"] * 1e6
    assert math.isclose(base, 2 * (6 * 10 + 1.75 * 2**20 / 56e3), rel_tol=1e-6)
    assert {c.op for c in a.chosen} == {"bmm1", "bmm2"} and a.plan.totals()["total_seconds"] * 1e6 < base


def test_advise_rejects_flags_it_would_ignore(capsys):
    with pytest.raises(SystemExit) as e:
        main(["advise", "--dataset-strategy", "full_batch", os.path.join(ROOT, "examples/mlp.py:MegatronMLP"), "--mesh", "dp=2", "--strategies", "a.yaml"])
    assert e.value.code == 2 and "unrecognized arguments: --strategies" in capsys.readouterr().err


def test_gpt_written_with_nn_layers_gets_megatron(graph_of):
    """Issue 10's zoo: a GPT-2 written with nn.Dense / nn.LayerNorm / nn.Embedding and tensor-method
    attention, at a realistic width, on dp=2, tp=4: column q/k/v and fc, head-parallel attention, row
    out_proj and proj (the anchors), vocab-parallel embedding and head."""
    g = graph_of("examples/gpt_nn.py:GPT", "hidden=4096", "heads=32", "seq=1024", "batch=8", "vocab=32768")
    # by the schedule (the default) nothing is configured: the dataset's data parallelism over all 8 devices
    # all-reduces the whole fp32 gradients over 8 at 72 GB/s after the backward, Megatron's dp=2 a quarter of them
    # over 2 at 18 GB/s, and its tensor-parallel AllReduces (over 4 at 30 GB/s) wait in every layer
    by_schedule = advise(g, Mesh.parse("dp=2,tp=4"), hardware=HW)
    assert not by_schedule.chosen
    a = advise(serial(g), Mesh.parse("dp=2,tp=4"), hardware=HW)
    assert estimate(by_schedule.plan).step_s < estimate(a.plan).step_s
    p = a.plan
    chosen = {c.op for c in a.chosen}
    assert {f"h.{i}.{w}.matmul" for i in range(2) for w in ("attn.out_proj", "mlp.proj")} <= chosen
    for i in range(2):
        for w in ("attn.q_proj", "attn.k_proj", "attn.v_proj", "mlp.fc"):       # nn.Dense: weight [out, in]
            assert p.strategy(f"h.{i}.{w}.matmul") == ((2, 1), (4, 1)), w
        for w in ("attn.out_proj", "mlp.proj"):
            assert p.strategy(f"h.{i}.{w}.matmul") == ((2, 4), (1, 4)), w
        for bmm in ("attn.qk", "attn.pv"):                                          # batch x heads
            assert p.strategy(f"h.{i}.{bmm}")[0] == (2, 4, 1, 1), bmm
    assert p.strategy("lm_head.matmul") == ((2, 1), (4, 1))
    assert p.totals()["step_seconds"] < a.baseline.totals()["step_seconds"]
    # the table takes the fastest of its layouts by the step model. In the training compile that is Megatron's
    # vocabulary by tp (an AllReduce of the output): the embedding's search runs first, and with the table's hidden
    # split by tp (each device reading its hidden slice of every row) the position embedding's functional Add, which
    # no shard() line reaches, takes that split and the residual stream after it is gathered later, dearer (+6.9 ms
    # of 82.7; in the compile as built, where the output's searches run first, the hidden split is faster:
    # test_gpt_as_built_takes_the_hidden_split_table); the batch split of the indices stays
    assert p.strategy("wte.gather") == ((4, 1), (2,)) and "wte.gather" in chosen
    hidden = propagate(g, Mesh.parse("dp=2,tp=4"), {**a.anchors, "wte.gather": ((1, 4), (2,))},
                       use_model_strategies=False, hardware=HW)
    assert hidden.strategy("add") == ((2, 1, 4), (1, 1, 4))
    assert p.totals()["step_seconds"] < hidden.totals()["step_seconds"] - 1e-3


def test_gpt_as_built_takes_the_hidden_split_table(graph_of):
    """The same GPT compiled as built (``--eval``): the output's searches run first and lay the residual stream out
    by rows, so the table's hidden split by tp (one AllGather of the output after it) beats Megatron's vocabulary by
    tp (an AllReduce of the whole output, twice the bytes); 8 anchors there (out_proj, proj and v_proj per layer,
    the head, the table)."""
    g = graph_of("examples/gpt_nn.py:GPT", "hidden=4096", "heads=32", "seq=1024", "batch=8", "vocab=32768",
                 training=False)
    a = advise(serial(g), Mesh.parse("dp=2,tp=4"), hardware=HW)      # (by the schedule: nothing, as in training)
    p = a.plan
    assert len(a.chosen) == 8
    assert p.strategy("wte.gather") == ((1, 4), (2,))
    megatron = propagate(g, Mesh.parse("dp=2,tp=4"), {**a.anchors, "wte.gather": ((4, 1), (2,))},
                         use_model_strategies=False, hardware=HW)
    assert p.totals()["step_seconds"] < megatron.totals()["step_seconds"] - 1e-3


@pytest.mark.slow
@pytest.mark.ci_sample
def test_encoder_and_vit_get_megatron_mlps(graph_of):
    """Issue 10's zoo on dp=2,tp=4, the training compile. ``nn.TransformerEncoder``: each layer's feed-forward is a
    Megatron pair, dense1 column-parallel ``((2, 1), (4, 1))`` (nn.Dense's weight is [out, in]) and dense2
    row-parallel ``((2, 4), (1, 4))``, from dense2's anchor (dense1 follows); the classifier follows column-wise
    from its bias Add's anchor. ViT-L-sized (hidden 1024, 16 heads, 224/16 patches): at batch 8 fc1/fc2 are a
    Megatron pair; the fused qkv Dense stays batch-split (column-split across q/k/v, as in the compile as built,
    it is 0.26 ms slower here: the training order redistributes around the attention's reshapes). At batch 16 the
    activations outweigh the weights and plain data parallelism over every device wins; in the training compile
    the dataset's search alone does not give it (11.7 ms against 6.7), so each block's fc2 and the head's bias Add
    are anchored data parallel. A block left data parallel over dp only would repeat its work on the tp devices
    and still all-reduce its weights' gradients over all 8 (MindSpore's mirror group: tests/test_pricing.py), so
    no such middle way is advised.

    All of that by the serial sum. By the schedule (the default) the 910B's 4-card tensor-parallel AllReduces (30
    GB/s) outweigh the 8-card gradient reductions (72 GB/s) at these sizes: the encoder anchors only its classifier's
    bias Add, and ViT at batch 8 is laid out as at batch 16, data parallel over every device."""
    g = graph_of("examples/encoder.py:EncoderClassifier")
    assert [c.op for c in advise(g, Mesh.parse("dp=2,tp=4"), hardware=HW).chosen] == ["classifier.bias_add"]
    vit8 = advise(graph_of("examples/vit.py:ViT", "hidden=1024", "heads=16", "image=224", "patch=16", "batch=8"),
                  Mesh.parse("dp=2,tp=4"), hardware=HW)
    assert [c.op for c in vit8.chosen] == ["blocks.0.fc2.matmul", "blocks.1.fc2.matmul", "head.bias_add"]
    assert all(vit8.plan.strategy(f"blocks.{i}.fc1.matmul") == ((8, 1), (1, 1)) for i in range(2))
    g = serial(g)
    a = advise(g, Mesh.parse("dp=2,tp=4"), hardware=HW)
    p = a.plan
    for i in range(2):
        assert p.strategy(f"encoder.layers.{i}.dense1.matmul") == ((2, 1), (4, 1))
        assert p.strategy(f"encoder.layers.{i}.dense2.matmul") == ((2, 4), (1, 4))
    assert [c.op for c in a.chosen] == ["encoder.layers.0.dense2.matmul", "encoder.layers.1.dense2.matmul",
                                        "classifier.bias_add"]
    assert p.totals()["step_seconds"] < a.baseline.totals()["step_seconds"]
    g = serial(graph_of("examples/vit.py:ViT", "hidden=1024", "heads=16", "image=224", "patch=16", "batch=8"))
    a = advise(g, Mesh.parse("dp=2,tp=4"), hardware=HW)
    p = a.plan
    for i in range(2):
        assert p.strategy(f"blocks.{i}.fc1.matmul") == ((2, 1), (4, 1))
        assert p.strategy(f"blocks.{i}.fc2.matmul") == ((2, 4), (1, 4))
        assert p.strategy(f"blocks.{i}.attn.qkv.matmul") == ((2, 1), (1, 1))
    qkv = {f"blocks.{i}.attn.qkv.matmul": ((2, 1), (4, 1)) for i in range(2)}
    column = propagate(g, Mesh.parse("dp=2,tp=4"), {**a.anchors, **qkv}, use_model_strategies=False, hardware=HW)
    assert p.totals()["step_seconds"] < column.totals()["step_seconds"] - 1e-4
    assert p.totals()["step_seconds"] < a.baseline.totals()["step_seconds"]
    g = serial(graph_of("examples/vit.py:ViT", "hidden=1024", "heads=16", "image=224", "patch=16", "batch=16"))
    a = advise(g, Mesh.parse("dp=2,tp=4"), hardware=HW)
    assert [c.op for c in a.chosen] == ["blocks.0.fc2.matmul", "blocks.1.fc2.matmul", "head.bias_add"]
    assert all(a.plan.strategy(f"blocks.{i}.{n}.matmul") == ((8, 1), (1, 1))
               for i in range(2) for n in ("attn.qkv", "attn.proj", "fc1", "fc2"))
    assert a.baseline.totals()["step_seconds"] > 1.5 * a.plan.totals()["step_seconds"]


@pytest.mark.slow
@pytest.mark.ci_sample
def test_encoder_and_vit_as_built(graph_of):
    """The compile as built (--eval), where the output's searches run first: the encoder's dense1 and dense2 both
    anchored, ViT's qkv column-split at batch 8, and nothing configured at batch 16 (the dataset's search alone
    gives plain data parallelism). By the serial sum; by the schedule (the default) nothing at all is configured, for
    the reason test_encoder_and_vit_get_megatron_mlps gives."""
    g = graph_of("examples/encoder.py:EncoderClassifier", training=False)
    assert not advise(g, Mesh.parse("dp=2,tp=4"), hardware=HW).chosen
    g = serial(g)
    a = advise(g, Mesh.parse("dp=2,tp=4"), hardware=HW)
    assert {f"encoder.layers.{i}.dense{k}.matmul" for i in range(2) for k in (1, 2)} <= {c.op for c in a.chosen}
    g = serial(graph_of("examples/vit.py:ViT", "hidden=1024", "heads=16", "image=224", "patch=16", "batch=8",
                        training=False))
    a = advise(g, Mesh.parse("dp=2,tp=4"), hardware=HW)
    assert all(a.plan.strategy(f"blocks.{i}.attn.qkv.matmul") == ((2, 1), (4, 1)) for i in range(2))
    g = serial(graph_of("examples/vit.py:ViT", "hidden=1024", "heads=16", "image=224", "patch=16", "batch=16",
                        training=False))
    a = advise(g, Mesh.parse("dp=2,tp=4"), hardware=HW)
    assert not a.chosen


def test_megatron_pairs(graph_of):
    """The linears the advisor also tries as Megatron's pair: each row MatMul and the column MatMuls feeding it
    before a norm. Llama: q/k/v -> o through the attention, w1/w3 -> w2 through SwiGLU; the vocabulary head
    feeds no row, so it is in no pair."""
    from strategist.advice.anatomy import megatron_pairs
    g = graph_of(LLAMA, "layers=1", "batch=8")
    pairs = {n.split(".", 3)[-1] for n in megatron_pairs(g, load_rules())}      # model.layers.0.<name>
    assert pairs == {"attention.wq.matmul", "attention.wk.matmul", "attention.wv.matmul", "attention.wo.matmul",
                     "feed_forward.w1.matmul", "feed_forward.w3.matmul", "feed_forward.w2.matmul"}, pairs


def test_anchor_of_keeps_a_tuple_strategys_own_device_matrix(graph_of):
    """A sharding whose device matrix is its strategy's own (a tuple strategy repeated on the rest: ((2, 1),
    (1, 1)) on 8 devices has device matrix (2, 1, 4)) is anchored in tuple form: as a Layout over the mesh's
    (dp, tp) axes its axes were mapped wrong (a tensor map of -1, an IndexError in the search)."""
    from strategist.advice.advisor import anchor_of
    from strategist.engine.rules.sharding import shard
    g = graph_of("examples/mlp.py:MegatronMLP", "hidden=64", "ffn=128", "tokens=64")
    mesh = Mesh.parse("dp=2,tp=4")
    fc1 = next(op for op in g if op.type == "MatMul")
    s = shard(fc1, ((2, 1), (1, 1)), mesh.size)
    assert s.dev_matrix != mesh.shape
    a = anchor_of(fc1.name, s, mesh, fc1.type)
    assert a.strategy == ((2, 1), (1, 1)) and a.layouts is None
    plan = propagate(g, mesh, {fc1.name: a}, use_model_strategies=False)
    assert plan.choices[fc1.name].sharding == s


def test_layers_aligned_only_where_a_shard_line_can_be_written(graph_of):
    """examples/encoder.py at dp=2,tp=4: the two encoder layers lay their attention's head Transpose out differently,
    and anchoring it alike in both saves 36 us. It is a functional call (``ops.transpose``), no primitive its Cell
    holds: no shard() line can carry it, and MindSpore's propagation of the printed advice failed on it (verify:
    "MindSpore can only configure a primitive a Cell holds as an attribute"). The alignment leaves such operators
    alone; the advice is the 6 anchors a user can write."""
    g = graph_of("examples/encoder.py:EncoderClassifier", training=False)     # the compile as built shows it
    # (by the serial sum: by the schedule this small encoder runs fastest data parallel, nothing configured)
    adv = advise(serial(g), Mesh.parse("dp=2,tp=4"), hardware=load_hardware("atlas-800t-a2"))
    assert not [c.op for c in adv.chosen if c.template == "layer_twin"]
    assert all(g.op(c.op).held for c in adv.chosen) and len(adv.chosen) == 6
    t = next(op for op in g if op.name == "encoder.layers.0.self_attn.transpose")
    assert not t.held


def test_advice_text_on_a_functional_call_names_the_strategy_once(graph_of):
    """An anchor on a functional call (no Cell attribute to call shard() on) is reported with its strategy and
    how to configure it, and no shard() line: before, the empty shard() line printed as "None"."""
    from strategist.report.render import advice_text
    g = graph_of("examples/mlp.py:MegatronMLP", "hidden=1024", "ffn=4096", "tokens=8192")
    a = advise(serial(g), Mesh.parse("dp=2,tp=4"), hardware=HW, dataset_strategy=FB)     # (Megatron's pair)
    op = a.chosen[0].op
    g.op(op).held = False
    try:
        text = advice_text(a)
    finally:
        g.op(op).held = True
    block = text.split(f"\n{op} (", 1)[1].split("\n", 4)
    assert f"no shard() line to write; strategy {a.plan.strategy(op)} (hold the primitive" in block[2]
    assert "None" not in block[3] and "shard(" not in block[3], block


@pytest.mark.parametrize("training", [True, False])
def test_every_line_of_the_final_advice_pays(graph_of, training):
    """The last pass (minimality.every_line_pays): each pattern (one shard() line across repeated layers) is tried
    without, beside the rest of the final advice, and goes where the step is no slower by more than what the step
    model resolves. On the 2-layer LLaMA's advice, a line anchoring each layer's attention norm exactly as
    propagation lays it changes nothing: it goes, with that reason; the same line declared (a --boundary) stays;
    every line of the advice itself pays: its removal slows the step by more than PAY_FLOOR, or leaves at least
    MEMORY_WORTH more weight, gradient and optimizer state per device (compiled as built, the vocabulary-parallel
    head: 20 ms slower than the table whole on every device, which costs 2.2 GiB more; in the training compile the
    head's anchor also saves time: without it the embedding's search, created first, reaches the head)."""
    from strategist.advice.advisor import MEMORY_WORTH, PAY_FLOOR, Choice, anchor_of
    from strategist.advice.footprint import state_bytes
    from strategist.advice.minimality import every_line_pays, group_key
    g = graph_of(LLAMA, "layers=2", "batch=8", training=training)
    mesh = Mesh.parse("dp=2,tp=4")
    a = advise(g, mesh, hardware=HW, dataset_strategy=FB)

    def run(anchors, price=True):
        anchors = {c.op: c.anchor for c in anchors} if isinstance(anchors, list) else anchors
        return propagate(g, mesh, anchors, use_model_strategies=False, dataset_strategy=FB, hardware=HW)
    norms = [f"model.layers.{i}.attention_norm.norm" for i in range(2)]
    extra = [Choice(n, "4 fused", "norm", "test", anchor_of(n, a.plan.choices[n].sharding, mesh, g.op(n).type))
             for n in norms]
    dropped = []
    keep = every_line_pays(g, list(a.chosen) + extra, dropped, run)
    assert [c.op for c in keep] == [c.op for c in a.chosen]
    assert [c.op for c, _ in dropped] == norms
    assert all(why.startswith("does not pay for its line in the final advice: without it, 0 operators change")
               for _, why in dropped)
    for c in extra:
        c.declared = True
    assert len(every_line_pays(g, list(a.chosen) + extra, [], run)) == len(a.chosen) + 2
    t = a.plan.totals()["step_seconds"]
    for k in {group_key(c.op) for c in a.chosen}:
        q = run([c for c in a.chosen if group_key(c.op) != k])
        assert q.totals()["step_seconds"] - t > PAY_FLOOR or state_bytes(q) - state_bytes(a.plan) >= MEMORY_WORTH, k
    head = run([c for c in a.chosen if c.op != "lm_head.matmul"])
    assert state_bytes(head) - state_bytes(a.plan) > 2 * 2**30
    assert (head.totals()["step_seconds"] > t + 0.1) if training else (head.totals()["step_seconds"] < t)


def test_reshape_traced_back_for_the_rotary_chain():
    """The rotary-chain rule traces a fused attention's input layout back through the Reshape in front of it with
    the engine's ``reshape_layout`` (the layout that reshapes in place), the output shape's layout mapped onto the
    input shape. By hand: [B, S, N*D] with N*D by (tp, tp_group) comes from [B, S, N, D] with N by both; a merged
    [B*S] rows split 64 ways is B by the outer axis and S by the inner one (64 contiguous blocks of 64 rows: block k
    is b = k // 8, the k % 8-th eighth of S); a split on S alone has no in-place [B*S] layout."""
    from strategist.vocab.layout import Layout
    from strategist.engine.rules.reshape import reshape_layout
    heads = Layout((8, 512, 4096), (8, 2, 4), ((0,), (), (1, 2)))
    assert reshape_layout(heads, (8, 512, 32, 128)) == Layout((8, 512, 32, 128), (8, 2, 4), ((0,), (), (1, 2), ()))
    seq = Layout((8, 512, 4096), (8, 8), ((0,), (1,), ()))
    assert reshape_layout(seq, (8, 512, 32, 128)) == Layout((8, 512, 32, 128), (8, 8), ((0,), (1,), (), ()))
    assert reshape_layout(Layout((4096, 64), (8, 8), ((0, 1), ())), (8, 512, 64)) == \
        Layout((8, 512, 64), (8, 8), ((0,), (1,), ()))
    assert reshape_layout(Layout((4096, 64), (8, 8), ((0,), ())), (8, 512, 64)) == \
        Layout((8, 512, 64), (8, 8), ((0,), (), ()))
    assert reshape_layout(Layout((8, 512, 64), (8, 8), ((), (1,), ())), (4096, 64)) is None
    # a trailing 1
    assert reshape_layout(Layout((8, 512, 4096), (8, 8), ((0,), (), (1,))), (8, 512, 4096, 1)) == \
        Layout((8, 512, 4096, 1), (8, 8), ((0,), (), (1,), ()))


def test_one_name_pattern_of_two_operators_is_two_lines(graph_of):
    """telechat3_moe's dense layer 0 and MoE layer 1 both hold an ``mlp.transpose``, a 4-d permute in one and a
    3-d one in the other: one name pattern, two operators. The advisor weighed them as one line (its drop of the MoE
    one, which pays 1.18 ms, went with the dense one, which costs 79 ms without it) and the anchors file wrote one
    glob ``layers.*.mlp.transpose`` with the dense layout, which MindSpore would have applied to the MoE one too.
    Patterns now tell such operators apart (Cell class), and an anchors-file glob only covers operators anchored
    alike."""
    from strategist.advice.minimality import group_key, pattern_keys, pattern_text
    from strategist.report.render import anchor_file_keys
    g = graph_of("tests/models/mixed_layers.py:MixedLayers")
    t0, t1 = "layers.0.mlp.transpose", "layers.1.mlp.transpose"
    assert pattern_keys(g) == {t0: "layers.*.mlp.transpose[DenseMLP]", t1: "layers.*.mlp.transpose[RoutedMLP]"}
    assert group_key(t0) == group_key(t1) == pattern_text(group_key(t1, g)) == "layers.*.mlp.transpose"
    assert group_key("layers.0.add", g) == group_key("layers.1.add", g) == "layers.*.add"
    names = [op.name for op in g]
    assert anchor_file_keys([t0, t1], names) == {"layers.*.mlp.transpose": [t0, t1]}      # by name alone: one glob
    assert anchor_file_keys([t0, t1], names, g) == {t0: [t0], t1: [t1]}
    adds = ["layers.0.add", "layers.1.add"]
    assert anchor_file_keys(adds, names, g, {adds[0]: ": [[2, 1, 1], [2, 1, 1]]",
                                             adds[1]: ": [[1, 2, 1], [1, 2, 1]]"}) == {a: [a] for a in adds}
    assert anchor_file_keys(adds, names, g, dict.fromkeys(adds, ": [[2, 1, 1], [2, 1, 1]]")) == {"layers.*.add": adds}


def test_advice_never_configures_a_shared_parameter_two_ways(tmp_path):
    """Random net 37 (dp=2,cp=2,tp=2): its table ``w`` is gathered (an embedding) and read as a MatMul's weight.
    The advisor proposed the embedding data parallel and the MatMul column-parallel, two layouts of ``w`` that
    MindSpore refuses ("Incorrect strategy configuration ... shared parameter"), and ``advise`` failed with that
    error. Now the later proposal goes (the MatMul takes the table's layout through its TmpIdentity) and the advice
    is the embedding's line alone, which MindSpore's training compile propagates as strategist does (verify: 9/9
    operators, measured)."""
    import sys
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import netgen
    case = netgen.random_cases(1, 37)[0].materialise(str(tmp_path))
    # (by the serial sum: by the schedule no line of this small net pays, nothing is configured)
    adv = advise_model(case.model, "dp=2,cp=2,tp=2", inputs=case.inputs, dataset_strategy=case.dataset_strategy,
                       step=serial_step())
    assert {c.op: c.anchor.strategy for c in adv.chosen} == {"gather": ((1, 1), (2, 2))}


@pytest.mark.parametrize("model, anchors", [("ut6_triu_rope.py:ApplyRopeAuto8", "advice_apply_rope.yaml"),
                                            ("ut6_transpose_loss.py:CrossEntropyAuto8", "advice_cross_entropy.yaml")])
def test_advice_configures_what_mindspore_cannot_propagate(model, anchors):
    """MindSpore generates no strategy for an unconfigured ApplyRotaryPosEmb, nor for a CrossEntropyLoss with a class
    weight: its compile fails, and so did ``advise`` (its baseline propagates with no anchor). The advice now always
    configures them (rule 4, in every plan it compares, tuple form: MindSpore refuses their Layouts) and prints the
    anchors of tests/models/advice_*.yaml, which MindSpore's training compile propagates as strategist does
    (``test_differential.py::test_rule_net_agrees_with_mindspore[train.rules.advice.*]``)."""
    import yaml
    adv = advise_model(os.path.join(ROOT, "tests", "models", "ms_ut", model), "dp=2,tp=4", dataset_strategy=FB)
    want = yaml.safe_load(open(os.path.join(ROOT, "tests", "models", anchors)))
    assert yaml.safe_load(advice_dict(adv)["anchors_yaml"]) == want
    assert all(c.required and c.rule == "4 fused" for c in adv.chosen)


def test_context_parallel_advice_splits_the_vocabulary_as_mindformers_does_and_the_query_by_cp():
    """On dp=2,cp=2,tp=2 with a 32000-word vocabulary and the whole batch on every device (MindFormers' dataset
    splits only by dp): MindSpore refuses a vocabulary split beside ids split on their sequence (GatherInfo
    SHARD_BATCH_AND_AXIS), so the embedding takes LlamaEmbedding's ((mp * cp, 1), (dp, 1)); the attention's query
    sequence splits by cp, its keys and values gathered whole (MindFormers' colossalai_cp)."""
    from strategist.api import advise_model
    a = advise_model("examples/llama.py:tiny", "dp=2,cp=2,tp=2", kwargs=["vocab=32000", "batch=2", "seq=512",
                                                                          "causal=True"],
                     dataset_strategy="full_batch")
    assert a.plan.strategy("model.tok_embeddings.gather") == ((4, 1), (2, 1))
    assert a.plan.strategy("model.layers.0.attention.flash_attention")[:3] == ((2, 2, 2), (2, 1, 2), (2, 1, 2))
