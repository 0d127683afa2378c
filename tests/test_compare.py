"""``strategist compare`` (issue 11 item 4): (a) advice, (b) the experts' sharding_propagation() anchors,
(c) their full shard() as the reference, on tiny MindFormers configs (2 layers, hidden 256)."""
import json
import os
import subprocess
import sys

import pytest

from strategist.errors import StrategistError
from strategist.vocab.mesh import Mesh
from strategist.propagate import propagate

from conftest import serial

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable
QWEN3 = "mindformers:qwen3/pretrain_qwen3_32b_4k.yaml"
QWEN3_MOE = "mindformers:qwen3_moe/pretrain_qwen3_30b_a3b_4k.yaml"
DENSE = dict(hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=4, head_dim=64,
             vocab_size=1024)
MOE = dict(num_experts_per_tok=2, moe_intermediate_size=128, num_experts=4)
_CACHE = {}


def _cmp(ref, mesh, overrides):
    """compare on a tiny MindFormers model, its advice by the serial sum (conftest.serial: by the schedule these tiny
    models are advised nothing, and (a) would have no anchors of its own to compare)."""
    from strategist.compare import compare_model
    from strategist.frontend.mindformers import load_mindformers
    key = (ref, mesh)
    if key not in _CACHE:
        g, _ = load_mindformers(ref, layers=2, seq=128, batch=8, overrides=overrides)
        _CACHE[key] = compare_model(ref, mesh, layers=2, seq=128, batch=8, overrides=overrides, graph=serial(g))
    return _CACHE[key]


def test_compare_refuses_a_model_without_experts():
    from strategist.compare import compare_model
    with pytest.raises(StrategistError, match="needs a MindFormers model"):
        compare_model("examples/mlp.py:MegatronMLP", "dp=2,tp=4")


@pytest.mark.slow
def test_qwen3_tiny_three_plans():
    c = _cmp(QWEN3, "dp=2,tp=4", DENSE)
    a, b, ref = c["a"], c["b"], c["c"]
    # the experts' anchors as read from MindFormers' own code (see tests/test_mindformers.py)
    # (the rotary tables' per-call copies, as MindSpore's parallel graph holds them, take the experts' anchors; the
    # loss's 15 operators its __init__ configures in every parallel build are the model's own in every column, not
    # counted: 105 and 40 with them)
    assert ref.anchors == 92 and b.anchors == 27
    # (c) is the reference: it agrees with itself on every operator with a strategy (Reshapes have none)
    assert ref.agreed == ref.total == 148 and not ref.disagreements
    # every operator either agrees or is listed, with both strategies
    for col in (a, b):
        assert col.agreed + len(col.disagreements) == col.total == 148
        for d in col.disagreements:
            assert col.plan.choices[d.op].strategy == d.strategy
            assert ref.plan.choices[d.op].strategy == d.reference
    # (b) propagates the experts' 40 anchors. Three MindSpore behaviours make it reproduce (c) on the operators the
    # experts configured: the Casts of the MatMuls' weights are configured after the MatMul (PreProcessPreCastForSP,
    # repeat on the left), the Morph-local [S, B] <-> [S*B] reshapes keep the batch split, and the norms follow;
    # only the embedding (vocabulary-parallel in (c), configured by nothing in propagation mode) differs. (c) runs
    # in semi_auto_parallel, as MindFormers does: the labels' mask, which no shard() configures, takes MindSpore's
    # batch strategy there (NotEqual(labels, -100): ArithmeticBase splits dim 0 of the [8, 128] labels over all 8
    # devices, the scalar stays (); the Casts have no OperatorInfo and pass the layout on), where propagation from
    # the whole (full_batch) labels keeps it whole: 5 more.
    labels = [f"model.preprocess_labels_and_masks.{n}" for n in ("not_equal", "cast", "not_equal#1", "cast#1", "mul")]
    assert b.agreed == 142
    assert [d.op for d in b.disagreements] == ["model.embedding.word_embeddings.embedding"] + labels
    assert ref.plan.choices[labels[0]].strategy == ((8, 1), ()) and labels[0] not in ref.plan.anchors
    assert ref.plan.choices[labels[4]].strategy == ((8, 1), (8, 1))
    assert b.plan.choices[labels[0]].strategy == ((1, 1), ())
    by = {d.op: d.reference_by for d in b.disagreements}
    assert by[labels[0]] == "batch strategy" and by[labels[1]] == "passes its input on"
    assert by["model.embedding.word_embeddings.embedding"] == "experts"
    note = next(n for n in ref.notes if "semi_auto_parallel" in n)
    batch = [n for n, ch in ref.plan.choices.items()
             if ch.sharding is not None and n not in ref.plan.anchors and ch.op.type != "Cast"]
    assert set(labels) - {n for n in labels if ".cast" in n} <= set(batch) and f"{len(batch)} operators" in note
    assert b.plan.choices["model.loss.mul2"].strategy == ((1,), (1,)) and "model.loss.mul2" in b.plan.anchors
    qkv = "model.decoder.layers.0.self_attention.linear_qkv.matmul"
    assert qkv not in {d.op for d in b.disagreements}
    # hand-worked cost: row-parallel linear_proj in (c), ((2, 4), (1, 4)) on [1024, 256] bf16: AllReduce over
    # tp=4 of each device's [512, 256] partial output = 262144 B, ring: 2 * 3/4 * 262144 = 393216 B sent
    proj = "model.decoder.layers.0.self_attention.linear_proj.matmul"
    assert ref.plan.choices[proj].strategy == ((2, 4), (1, 4))
    assert ref.plan.op_costs[proj].fwd_bytes == 393216
    # columns carry the plans' own totals and memory
    for col in (a, b, ref):
        assert col.totals == col.plan.totals() and col.memory["total"] > 0
    # (c)'s linears are split by tp=4 (its weights too); (b)'s embedding table, which MindSpore can only
    # generate split over every device for 1-D ids, takes (8, 1) where (c) configures (4, 1)
    assert ref.plan.choices[qkv].strategy == ((2, 1), (4, 1))
    emb = "model.embedding.word_embeddings.embedding"
    assert b.plan.choices[emb].strategy == ((1,), (8, 1)) and ref.plan.choices[emb].strategy == ((1,), (4, 1))
    assert c.step_ratio() == pytest.approx(a.totals["step_seconds"] / ref.totals["step_seconds"])
    # the tiny model (hidden 256): the advice beats the experts' plan with fewer anchors than their propagation's
    assert 0 < a.anchors <= b.anchors and a.totals["step_seconds"] < ref.totals["step_seconds"]
    assert c.dataset_strategy == "full_batch"
    d = json.loads(c.to_json())
    assert d["columns"]["c"]["agreement"] == 1.0 and d["columns"]["b"]["agreed"] == 142
    assert d["columns"]["b_ms"]["error"].startswith("not run")
    # agreement over the operators the experts' shard() configured: (c)'s anchors, each disagreement marked
    cb = d["columns"]["b"]
    # (the loss's own operators, configured alike in every column, are not counted)
    assert len(ref.plan.graph.parallel_only) == 15
    assert d["columns"]["c"]["configured_operators"] == cb["configured_operators"] == len(
        [n for n in ref.plan.anchors if ref.plan.choices[n].sharding is not None
         and n not in ref.plan.graph.parallel_only]) == ref.configured_agreed
    assert cb["configured_agreed"] + sum(x["configured_in_reference"] for x in cb["disagreements"]) == \
        cb["configured_operators"]
    assert all(x["configured_in_reference"] == (x["op"] in ref.plan.anchors) for x in cb["disagreements"])
    text = c.text()
    # (the column titles wrap within the console's 120 columns: "(c) MindFormers", "shard()", "(reference)")
    assert "(c) MindFormers" in text and "(reference)" in text and "142/148 (95.9 %)" in text
    # toward (c): the labels' mask region is the one a shard() line can carry (the embedding is MindFormers'
    # functional call): 147/148 at 1 more anchor, the Mul (the NotEquals and Casts follow it back; anchored too,
    # they give the same plan), priced as the region alone, within (c)'s step and (b)'s anchors
    mask = next(r for r in a.regions if r.name == labels[0])
    assert [t.region for t in a.toward] == ["", labels[0]] and a.closest is a.toward[1]
    assert (a.closest.agreed, a.closest.anchors, a.closest.anchored) == (147, a.anchors + 1, [labels[4]])
    assert a.closest.step_seconds == pytest.approx(a.totals["step_seconds"] + mask.if_reference, rel=1e-12)
    assert d["columns"]["a"]["closest_within_reference"]["agreed"] == 147
    assert "closest to (c) with a step no slower than (c)'s and no more anchors than (b) (27): 147/148" in text
    assert "MindFormers bug: FlashAttention" in text


@pytest.mark.slow
def test_qwen3_moe_tiny_compare():
    c = _cmp(QWEN3_MOE, "dp=2,tp=2", {**DENSE, **MOE})
    a, b, ref = c["a"], c["b"], c["c"]
    # (the experts' dispatcher + experts Morph is one operator; the loss's own 15 are not counted)
    assert ref.agreed == ref.total == 172 and b.anchors < ref.anchors
    assert 0 < b.agreed < ref.total
    assert any("MoELayer" in n for n in b.notes)
    for col in (a, b):
        assert col.agreed + len(col.disagreements) == col.total


@pytest.mark.slow
def test_cli_compare_json_clean(tmp_path):
    cmd = [PY, "-m", "strategist", "compare", QWEN3, "--layers", "2", "--seq", "128", "--batch", "8",
           "--mesh", "dp=2,tp=4", "--format", "json", "--max-rows", "3"] + \
          [a for k, v in DENSE.items() for a in ("--set", f"{k}={v}")]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=600,
                       env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 0, r.stderr[-2000:]
    d = json.loads(r.stdout)          # nothing but the JSON on stdout
    assert d["columns"]["c"]["anchors"] == 92 and d["columns"]["b"]["anchors"] == 27
    assert len(d["columns"]["b"]["disagreements"]) == 3 and d["columns"]["b"]["disagreement_count"] == 6
    # --max-rows cuts each column's list, not its count
    assert len(d["columns"]["a"]["disagreements"]) == 3 and d["columns"]["a"]["disagreement_count"] > 3
    assert os.listdir(tmp_path) == []   # no output/ directory in the user's cwd
    # the same inputs, the same report, byte for byte: how long each part took goes to stderr, one line
    again = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=600,
                           env={**os.environ, "PYTHONPATH": ROOT})
    assert again.stdout == r.stdout and "seconds" not in d and "seconds" not in d["columns"]["a"]
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("strategist: compare: extraction ")]
    assert "(a) " in line and "step if (c)'s " in line and "(b') " not in line


GLM4 = "mindformers:glm4/finetune_glm4_9b.yaml"
DEEPSEEK3 = "mindformers:deepseek3/pretrain_deepseek3_671b.yaml"
MLA_TINY = dict(hidden_size=256, intermediate_size=512, num_attention_heads=4, vocab_size=1024, kv_lora_rank=64,
                q_lora_rank=128, qk_rope_head_dim=32, qk_nope_head_dim=32, v_head_dim=32, first_k_dense_replace=1,
                num_experts_per_tok=2, moe_intermediate_size=128)
GLM_TINY = dict(hidden_size=256, ffn_hidden_size=512, num_attention_heads=4, kv_channels=64,
                multi_query_group_num=2, padded_vocab_size=1024)


@pytest.mark.slow
@pytest.mark.parametrize("ref, overrides, ops, anchors", [
    # (+2 operators and experts: the loss's parallel-only x + 0 adds, load_mindformers(loss_adds=True))
    (QWEN3, DENSE, 331, {"semi_auto": 187, "propagation": 66}),
    # the legacy ChatGLM2: its layers share the rotary table's split, which layer 0 computes as split#1 -- and
    # layer 1 names its kv split split#1: a copy is told from a shared operator by what it computes, not its name
    (GLM4, GLM_TINY, 301, {"semi_auto": 89, "propagation": 88}),
    # experts: all four layers MoE (qwen3_moe); one dense layer first, then MoE, and the MTP layer (deepseek3: 1
    # dense + 2 MoE built, the last copied; MLA's mask compression needs a sequence beyond 2048)
    (QWEN3_MOE, {**DENSE, "num_experts_per_tok": 2, "moe_intermediate_size": 128, "num_experts": 4}, None, None),
    (DEEPSEEK3, {**MLA_TINY, "n_routed_experts": 4, "n_group": 2, "topk_group": 1}, None, None)])
def test_replicated_layers_equal_a_full_extraction(ref, overrides, ops, anchors):
    """4 layers compiled vs 2 compiled (and the dense ones before the experts) + the last copied: the same graph op
    for op, the same experts."""
    from strategist.frontend.mindformers import expert_strategies, load_mindformers
    opts = dict(layers=4, seq=4096 if ref == DEEPSEEK3 else 128, batch=8, overrides=overrides)
    full, fi = load_mindformers(ref, replicate=False, **opts)
    rep, ri = load_mindformers(ref, **opts)            # the default: replicate
    assert (fi.extracted_layers, ri.extracted_layers, ri.layers) == (4, 3 if ref == DEEPSEEK3 else 2, 4)
    assert ops is None or len(full) == len(rep) == ops  # each call's rotary Muls/cos/sin, as MindSpore's parallel graph
    assert full.ops == rep.ops                            # names, types, inputs, shapes, scopes, order
    assert full.params == rep.params and full.cells == rep.cells and full.outputs == rep.outputs
    assert sorted(full.nx.edges(data="in_slot")) == sorted(rep.nx.edges(data="in_slot"))
    for mode in ("semi_auto", "propagation"):
        a = expert_strategies(ref, "dp=2,tp=4", mode, graph=full, **opts)
        b = expert_strategies(ref, "dp=2,tp=4", mode, graph=rep, **opts)
        assert dict(a) == dict(b) and (anchors is None or len(a) == anchors[mode])
        assert sorted(a.unmapped) == sorted(b.unmapped)


@pytest.mark.slow
def test_advise_on_a_replicated_mindformers_graph_equals_advising_the_whole():
    """``strategist advise`` on qwen3 (4 layers, 2 built and 2 copies): advised on the built layers, the anchors
    carried -- the anchors and plan of advising all four."""
    from strategist.advice.advisor import advise
    from strategist.advice.repeated import advise_repeated
    from strategist.files.hardware import load_hardware
    from strategist.frontend.mindformers import load_mindformers
    g, info = load_mindformers(QWEN3, layers=4, seq=128, batch=8, overrides=DENSE)
    assert info.extracted_layers == 2 and g.mf_base_graph is not None
    hw = load_hardware("atlas-800t-a2")
    whole = advise(g, Mesh.parse("dp=2,tp=4"), hardware=hw, dataset_strategy="full_batch")
    carried = advise_repeated(g, Mesh.parse("dp=2,tp=4"), hardware=hw, dataset_strategy="full_batch")
    assert {k: (v.strategy, v.layouts) for k, v in whole.anchors.items()} == \
        {k: (v.strategy, v.layouts) for k, v in carried.anchors.items()}
    assert {n: c.strategy for n, c in whole.plan.choices.items()} == \
        {n: c.strategy for n, c in carried.plan.choices.items()}
    assert whole.plan.totals() == carried.plan.totals()


@pytest.mark.slow
def test_fast_advice_on_a_replicated_graph_equals_advising_the_whole():
    """qwen3 at its shipped size, 4 layers (2 compiled + 2 copies): advising the compiled layers and copying
    the anchors gives the advice and plan of advising all 4 layers."""
    from strategist.compare import compare_model
    from strategist.frontend.mindformers import expert_strategies, load_mindformers
    g, info = load_mindformers(QWEN3, layers=4, batch=8)
    assert info.extracted_layers == 2 and g.mf_base_graph is not None
    ex = {m: expert_strategies(QWEN3, "dp=2,tp=4", m, graph=g, layers=4, batch=8) for m in ("semi_auto", "propagation")}
    fast = compare_model(QWEN3, "dp=2,tp=4", graph=g, experts=ex, layers=4, batch=8, fast_advice=True)
    full = compare_model(QWEN3, "dp=2,tp=4", graph=g, experts=ex, layers=4, batch=8, fast_advice=False)
    # per layer: qkv column; proj, fc2 row; the q norm (fc1's column split propagates from its neighbours);
    # where two searches meet before FlashAttention, its bnsd Transpose (rule 2, consumer side) -- + the head. The
    # labels' mask is left as propagation leaves it, as the experts do; the loss is configured by MindFormers' own
    # __init__ (graph.parallel_only), so the advice never anchors it (it used to propose, then drop, loss.mul2)
    assert fast["a"].anchors == full["a"].anchors == 18
    mask = {ch.op: ch for ch in fast.advice.chosen if "labels_and_masks" in ch.op or ch.op.startswith("model.loss.")}
    assert mask == {}
    assert not any(ch.op.startswith("model.loss.") for ch, _ in fast.advice.dropped)
    # so the advice is the experts' shard() plan, operator for operator, but for the labels' mask: no shard()
    # configures it, and MindFormers' semi_auto_parallel gives it MindSpore's batch strategy (dim 0 over all 8
    # devices), where propagation keeps the full-batch labels whole -- one 128 KiB gather either way
    labels = {f"model.preprocess_labels_and_masks.{n}" for n in ("not_equal", "cast", "not_equal#1", "cast#1", "mul")}
    # and for the embedding: its table split over all 8 devices (MindSpore's generated candidate), not the experts'
    # vocabulary over tp -- with the backward priced as MindSpore transposes it, the vocabulary-parallel pair (the
    # table anchor and its companion Transpose) does not pay for itself here
    emb = "model.embedding.word_embeddings.embedding"
    assert {d.op for d in fast["a"].disagreements} == labels | {emb}
    assert fast["a"].plan.strategy(emb) == ((1,), (8, 1))
    assert any(ch.op == emb and "does not pay" in why for ch, why in fast.advice.dropped)
    assert all(not d.configured and d.reference[0] == (8, 1) for d in fast["a"].disagreements if d.op != emb)
    # the same plan; the copied advice may carry anchors the whole graph's advice finds redundant (layer 0's
    # bnsd Transposes, which the 2-layer advice needed): each configures what propagation gives it there anyway
    fa = dict(fast["a"].plan.anchors)
    assert all(fa.get(n) == a for n, a in full["a"].plan.anchors.items())
    assert all((fast["a"].plan.choices[n].inputs, fast["a"].plan.choices[n].outputs) == (c.inputs, c.outputs)
               for n, c in full["a"].plan.choices.items())
    assert fast["a"].totals == full["a"].totals
    assert fast["a"].agreed == full["a"].agreed
    assert any("copied onto the replicated" in n for n in fast["a"].notes)


@pytest.mark.slow
def test_verify_column_b_prime_mindspore_propagates_the_experts_anchors(tmp_path, monkeypatch, capfd):
    """(b'): verify's child builds tiny qwen3 at dp=2,tp=4 in MindFormers' sharding-propagation mode and
    MindSpore 2.9.0 propagates MindFormers' own sharding_propagation() anchors (full_batch)."""
    from strategist.compare import compare_model
    from strategist.verify.runner import mindspore_plan

    monkeypatch.chdir(tmp_path)
    ms = mindspore_plan(QWEN3, "dp=2,tp=4", dataset_strategy="full_batch", timeout=600,
                        mindformers=dict(layers=2, seq=128, batch=8, overrides=DENSE))
    by_path = {o.path: o for o in ms.ops}
    # MindFormers' ColumnParallelLinear.sharding_propagation: matmul ((dp*cp, 1), (tp, 1)) (transpose_b) --
    # seen by MindSpore as configured, so the Morph bodies were compiled as ordinary operators
    qkv = by_path["model.decoder.layers.0.self_attention.linear_qkv.matmul"]
    assert qkv.configured and qkv.in_strategy == ((2, 1), (4, 1))
    # RowParallelLinear.sharding_propagation: ((dp*cp, tp), (1, tp)) -- linear_proj and linear_fc2 of both
    # layers (their inlined bodies lose the cell scope in MindSpore's IR too, as in strategist's extraction)
    rows = [o for o in ms.ops if o.type == "MatMul" and o.in_strategy == ((2, 4), (1, 4))]
    assert len(rows) == 4 and all(o.configured for o in rows)
    assert sum(o.type == "MatMul" for o in ms.ops) == 9
    assert not any(o.type == "Morph" for o in ms.ops)
    assert any("self_define_shard" in n for n in ms.notes)
    assert os.listdir(tmp_path) == [] and capfd.readouterr().out == ""
    # the (b') column: agreement with (c) and with (b) (same anchors, strategist's propagation)
    c = compare_model(QWEN3, "dp=2,tp=4", layers=2, seq=128, batch=8, overrides=DENSE, verify=True)
    bm = c["b_ms"]
    assert bm.error is None and bm.total and bm.agreed
    note = next(n for n in bm.notes if n.startswith("MindSpore's propagation vs strategist's (b)"))
    agreed, total = (int(x) for x in note.split(": ")[1].split(" ")[0].split("/"))
    # strategist's (b) keeps MindFormers' Morph bodies device-local ([S, B] <-> [S*B] rows keep the batch
    # split); MindSpore's own propagation of the same anchors on the stand-alone graph pays those reshapes.
    # (112: the loss's x + 0 adds, on both sides since strategist's graph has them)
    assert total == 112 and agreed >= 72
    assert os.listdir(tmp_path) == [] and capfd.readouterr().out == ""



@pytest.mark.slow
@pytest.mark.ci_sample
def test_qwen3_moe_advice_beats_the_experts_with_ep():
    """qwen3_moe at its shipped size (hidden 2048, 128 experts), 2 layers, dp=2,ep=2,tp=2. Its linears are small
    against their activations and the dataset is full-batch, so nothing seeds data parallelism: the advice
    anchors them data parallel over every device (no tp device repeating another's work), keeps the
    151936-row head vocabulary-parallel, and treats ep as a data-parallel axis outside the experts (MindFormers'
    convention: dp*ep)."""
    from strategist.compare import compare_model
    c = compare_model(QWEN3_MOE, "dp=2,ep=2,tp=2", layers=2, batch=8)
    a, ref = c["a"], c["c"]
    # the config's sequence parallelism as one package, and the routers' patterns that pay alone: no more anchors
    # than the experts' 24 sharding_propagation() anchors (37 with the loss's 13 configured primitives, which its
    # __init__ sets in every parallel build: the model's own in every column, not counted)
    assert a.anchors <= c["b"].anchors == 24
    # not slower than the experts (0.913 while the MoE's token permutation was priced as whole-batch IndexSelects,
    # which cost the experts' tokens-over-every-device layout a gather; the Morph is one device-local operator now)
    assert c.step_ratio() <= 1.0
    plan = a.plan
    # the head: rows by dp*ep, vocabulary by tp, as the experts have it
    assert plan.strategy("model.output_layer.matmul") == ((4, 1), (2, 1)) == ref.plan.strategy("model.output_layer.matmul")
    # FlashAttention as the experts lay it: batch by dp*ep, heads by tp
    for i in range(2):
        fa = f"model.decoder.layers.{i}.self_attention.core_attention.flash_attention"
        assert plan.strategy(fa)[0] == (4, 2, 1, 1) == ref.plan.strategy(fa)[0]
    # compute within 3 % of the experts' (it was 1.9x)
    assert a.totals["compute_seconds"] <= ref.totals["compute_seconds"] * 1.03


@pytest.mark.slow
@pytest.mark.ci_sample
def test_qwen3_moe_layers_laid_out_alike():
    """qwen3_moe at its shipped size, 2 layers, dp=2,tp=4. MindSpore's search reaches layer 0's rotary embedding
    of q backward from the Cast its configured BNSD Transpose configures ((1, 2, 4, 1): batch by dp, heads by tp),
    but layer 1's forward from the qkv linear, deciding its Mul from the replicated cos table: heads by 8, then a
    redistribution into the Transpose (and one into the q Reshape before it), 10 ms a step; the plan was 1.021x the
    experts'. The advisor tries the operators the repeated layers lay out differently, anchored alike in every layer,
    and keeps the fastest pattern that pays: the rotary Mul, as layer 0 has it."""
    from strategist.compare import compare_model
    c = compare_model(QWEN3_MOE, "dp=2,tp=4", layers=2, batch=8)
    chosen = {ch.op: ch for ch in c.advice.chosen}
    for i in range(2):
        mul = chosen[f"model.decoder.layers.{i}.self_attention.apply_rotary_pos_emb.mul"]
        assert mul.template == "layer_twin" and mul.anchor.strategy == ((1, 2, 4, 1), (1, 1, 1, 1))
        # ~10 ms when measured (9.1 with mirrors and the embedding priced as MindSpore runs them): well above noise
        saved = float(mul.needed.split("step estimate +")[1].split(" ms")[0])
        assert saved > 5.0
    plan = c["a"].plan
    for i in range(2):
        for op in ("apply_rotary_pos_emb.add", "core_attention.bnsd_transpose"):
            assert plan.strategy(f"model.decoder.layers.{i}.self_attention.{op}")[0] == (1, 2, 4, 1)
    assert not [e for e in plan.edges if e.dst.endswith("core_attention.bnsd_transpose") and e.fwd_bytes]
    assert c.step_ratio() <= 1.0 and c["a"].anchors <= c["b"].anchors
    # --format md: its tables as Markdown tables, no fenced console text
    md = c.text(markdown=True)
    assert "```" not in md and "| | (a) " in md.replace("|  |", "| |") and "| region taken |" in md


@pytest.mark.slow
def test_telechat3_moe_shared_experts_data_parallel_rows_follow_the_sequence(tmp_path):
    """telechat3_moe at its shipped size, 2 layers, dp=2,tp=4 (sequence parallel). The shared experts' linears
    are data parallel over every device (their activations outweigh their weights); their rows come from a
    device-local [S, B, H] -> [S*B, H] Reshape and a bf16 Cast, split S by tp outside B by dp. The data-parallel
    template looked for the Reshape right before the MatMul, found the Cast, and split rows (dp, tp): every such
    linear paid an all-to-all of its input forward and back (MTP's fc1: 140 MiB each way), and the plan was 1.012x
    the experts'. Looking through the Cast, the rows are (tp, dp) and nothing moves there."""
    from strategist.compare import compare_model
    c = compare_model("mindformers:telechat3_moe/pretrain_telechat3_105b_a4b_4k.yaml", "dp=2,tp=4", layers=2,
                      batch=8)
    chosen = {ch.op: ch for ch in c.advice.chosen}
    fc1 = "model.decoder.layers.1.mlp.shared_experts.linear_fc1.matmul"
    assert chosen[fc1].template == "matmul_data_parallel_sequence_first"
    # fc2 and MTP's take the same layout, anchored or propagated (with the multi-input rule the advice
    # anchors fc2's pattern too)
    plan = c["a"].plan
    for lin in ("fc1", "fc2"):
        for layer in ("decoder.layers.1", "mtp.layers.0.transformer_layer"):
            op = f"model.{layer}.mlp.shared_experts.linear_{lin}.matmul"
            assert plan.strategy(op) == ((8, 1), (1, 1)), op        # rows over every device, the weight whole
    assert not [e for e in plan.edges if e.dst.endswith("shared_experts.linear_fc1.matmul") and e.fwd_bytes]
    assert c.step_ratio() <= 1.0
    # one name pattern, two operators: the dense layer 0's mlp.transpose (MLPInterleaved, 4-d) is anchored, the MoE
    # layer 1's (MoELayer, 3-d) is not (anchored it made the step 1.18 ms slower, and went with the dense one's line
    # while both were one pattern); the anchors file names each apart (a glob gave the MoE one the dense 4-d
    # layout), and loaded back it gives the advice's plan
    from strategist.files.anchors import load_anchors
    from strategist.propagate import propagate
    from strategist.report.render import advice_dict
    assert "model.decoder.layers.0.mlp.transpose" in chosen and "model.decoder.layers.1.mlp.transpose" not in chosen
    text = advice_dict(c.advice)["anchors_yaml"]
    assert "layers.*.mlp.transpose:" not in text and "model.decoder.layers.0.mlp.transpose:" in text
    f = tmp_path / "advice.yaml"
    f.write_text(text)
    g = plan.graph
    loaded = load_anchors(str(f), g, c.mesh)
    assert sorted(loaded) == sorted(chosen)
    again = propagate(g, c.mesh, loaded, use_model_strategies=False, dataset_strategy="full_batch")
    assert all(again.choices[n].inputs == ch.inputs and again.choices[n].outputs == ch.outputs
               for n, ch in plan.choices.items())
    # by the schedule two regions of (c)'s are faster on top of the advice, each by little: the attention's
    # ExpandDims in the decoder's layers and in the MTP layer, which no rule proposes (0.27 and 0.14 ms measured)
    faster = c["a"].regions_reference_faster
    assert len(faster) <= 2 and all(r.name.endswith("self_attention.expand_dims") for r in faster)
    assert all(-0.3e-3 < r.if_reference < 0 for r in faster)


def by_op(d, name):
    return next(o for o in d["operators"] if o["op"] == name)


@pytest.mark.slow
@pytest.mark.verify_live
def test_verify_an_anchors_file_on_a_mindformers_model(tmp_path):
    """verify --strategies on a MindFormers config: the child clears every strategy MindFormers set but the loss's
    x + 0 adds' (configured in any parallel run, and so on strategist's side: graph.parallel_only) and
    configures the file's operators; strategist propagates the same file on its tp=1 graph. The attention's
    one bnsd Transpose primitive transposes q, k and v: configured once, all three calls take it on both
    sides. Every operator agrees (the rotary table's Outer differed until its rule generated MindSpore's equal
    splits only)."""
    anchors = tmp_path / "a.yaml"
    anchors.write_text(
        "model.decoder.layers.*.self_attention.linear_qkv.matmul:\n  layout: [[dp, None], [tp, None]]\n"
        "model.decoder.layers.*.self_attention.linear_proj.matmul:\n  layout: [[dp, tp], [None, tp]]\n"
        "model.decoder.layers.*.self_attention.core_attention.bnsd_transpose:\n  layout: [[None, dp, tp, None]]\n"
        "model.output_layer.matmul: [[2, 1], [4, 1]]\n")
    cmd = [PY, "-m", "strategist", "verify", QWEN3, "--layers", "2", "--seq", "128", "--batch", "8",
           "--mesh", "dp=2,tp=4", "--dataset-strategy", "full_batch", "--strategies", str(anchors), "--format", "json"] + \
          [a for k, v in DENSE.items() for a in ("--set", f"{k}={v}")]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=900,
                       env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode in (0, 1), r.stderr[-2000:]
    d = json.loads(r.stdout)
    # 112: the rotary tables' per-call Muls/Cos/Sin copies MindSpore's parallel graph keeps (unmerge_rotary_tables),
    # and the loss's two x + 0 adds (110 while the child dropped them and strategist's graph had none)
    assert d["total"] == d["agreed"] == 112 and not d["only_strategist"]
    assert by_op(d, "model.loss.add")["mindspore"] == by_op(d, "model.loss.add")["strategist"] == [[2, 4], []]
    assert by_op(d, "model.rotary_pos_emb.outer")["mindspore"] == [[1], [1]]
    by = {o["op"]: o for o in d["operators"]}
    for k in ("", "#1", "#2"):
        t = by["model.decoder.layers.0.self_attention.core_attention.bnsd_transpose" + k]
        assert t["mindspore_configured"] and t["strategist"] == t["mindspore"] == [[1, 2, 4, 1]]
    assert os.listdir(tmp_path) == ["a.yaml"]


def test_an_anchor_dropped_early_is_reinstated_when_a_later_drop_needs_it(graph_of):
    """Minimality drops greedily: an anchor dropped because propagation reproduced it can be needed once an anchor
    checked later goes (measured on qwen3_moe before Casts were priced as MindSpore runs them: layer 1's
    q_layernorm, reached from the layer's qkv linear until that linear's anchor went, then replicated, 8.4 ms).
    The advisor tries each such anchor back and keeps it where the step is faster. Here on the Megatron MLP,
    with a step model in which only fc1's column layout is fast (numbers by hand: 1 s otherwise)."""
    from strategist.advice import minimality
    from strategist.advice.advisor import Choice
    from strategist.vocab.anchors import Anchor
    g = graph_of("examples/mlp.py:MegatronMLP", "hidden=64", "ffn=128", "tokens=64")
    mesh = Mesh.parse("dp=2,tp=4")
    fc1, fc2 = [op.name for op in g if op.type == "MatMul"][:2]
    col = Choice(fc1, "1 weight", "matmul_column", "test", Anchor(fc1, ((2, 1), (1, 4)), origin="advisor"))
    other = Choice(fc2, "1 weight", "matmul_row", "test", Anchor(fc2, ((1, 8), (8, 1)), origin="advisor"))

    def run(keep):
        anchors = {c.op: c.anchor for c in keep} if keep else {}
        p = propagate(g, mesh, anchors, use_model_strategies=False)
        fast = p.strategy(fc1) == ((2, 1), (1, 4))
        p.totals = lambda: {"step_seconds": 0.5 if fast else 1.5}
        return p
    dropped = [(col, "propagation gives the same layouts (test)"), (other, "does not pay for itself (test)")]
    keep = minimality.reinstate(g, mesh, [], dropped, run)
    assert [c.op for c in keep] == [fc1] and col.needed.startswith("reinstated") and "+1000.000 ms" in col.needed
    assert dropped == [(other, "does not pay for itself (test)")]          # tried back too: it does not pay
    # and not where it does not pay
    col.needed = ""
    dropped = [(col, "propagation gives the same layouts (test)")]
    slow = lambda keep: (lambda p: (setattr(p, "totals", lambda: {"step_seconds": 1.0}), p)[1])(
        propagate(g, mesh, {c.op: c.anchor for c in keep}, use_model_strategies=False))
    assert minimality.reinstate(g, mesh, [], dropped, slow) == [] and len(dropped) == 1




@pytest.mark.slow
def test_deepseek3_input_path_and_dense_mlp_interior():
    """deepseek3 at its shipped size, 2 layers (the second MoE), dp=2,tp=4, full-batch dataset. The multi-token
    prediction rolls the ids by one (a StridedSlice and a Concat) before its own embedding. Left to propagation,
    the Concat is whole and MindSpore's search, reaching the embedding backward from the MTP norm, scatters the
    whole fp32 output over every device ((8, 1): the vocabulary by all 8); with the Concat's batch split over the
    devices (rule 3 on the input path, tried per operator that reads only the dataset) the search takes a (2, 4)
    table there, 38.7 ms a step less (by all 8 devices, 38.4)."""
    from strategist.advice.footprint import MEMORY_WORTH, state_bytes
    from strategist.advice.minimality import PAY_FLOOR, group_key
    from strategist.compare import compare_model
    from strategist.frontend.mindformers import load_mindformers
    # the advice by the serial sum (conftest.serial), the measure every figure below was worked out under
    ref, ov = "mindformers:deepseek3/pretrain_deepseek3_671b.yaml", {"first_k_dense_replace": 1}
    g, _ = load_mindformers(ref, layers=2, batch=8, overrides=ov)
    c = compare_model(ref, "dp=2,tp=4", layers=2, batch=8, overrides=ov, graph=serial(g))
    chosen = {ch.op: ch for ch in c.advice.chosen}
    cat = chosen["model.mtp.concat_2d"]
    assert cat.template == "input_batch" and cat.anchor.strategy == ((2, 1), (2, 1))
    assert float(cat.needed.split("serial sum +")[1].split(" ms")[0]) > 20.0
    plan = c["a"].plan
    assert plan.strategy("model.mtp.embedding.word_embeddings.embedding") == ((1,), (2, 4))
    # without it, the same advice otherwise: the embedding scatters over every device
    rest = {k: v for k, v in c.advice.anchors.items() if k != "model.mtp.concat_2d"}
    q = propagate(plan.graph, plan.mesh, rest, use_model_strategies=False, dataset_strategy="full_batch",
                  hardware=plan.hardware)
    assert q.strategy("model.mtp.embedding.word_embeddings.embedding") == ((1,), (8, 1))
    assert q.totals()["step_seconds"] - plan.totals()["step_seconds"] > 20e-3
    assert c.step_ratio() <= 1.0 and c["a"].anchors <= c["b"].anchors
    # the Megatron pass ends where the data-parallel one does (its alternatives take data parallel back for the
    # shared experts' fc2 and keep the MLA up-projections' column): the same step, so the pass with fewer anchors
    # (the loss is the model's own: neither pass anchors any of it; the Megatron pass keeps 6 more lines, none of
    # which changes the step)
    assert any("give the same step" in n and n.endswith("data parallel (6 fewer anchors)") for n in c["a"].notes)
    # the dense layer's MLP: a data-parallel fc2 (the alternative to Megatron's row) with the SwiGLU between the
    # linears kept where the column fc1 hands it its rows, as the experts lay it (batch by dp, features by tp),
    # the redistribution at fc2's input: -8.5 ms against Megatron's pair, where the interior on the sequence-
    # parallel rows saved 4.4 ms. The alternative brings the interior's anchors; once taken, propagation from fc1
    # lays the interior so without them, and the final check that every line pays drops them
    dropped = {ch.op: why for ch, why in c.advice.dropped}
    for n in ("split", "activation_func.silu", "mul"):
        op = f"model.decoder.layers.0.mlp.{n}"
        assert op not in chosen and dropped[op].startswith("does not pay for its line in the final advice")
        assert plan.strategy(op) == c["c"].plan.strategy(op) and plan.strategy(op)[0][:3] == (1, 2, 4)
    # every line of the advice pays for itself beside the others: 45 anchors (55 before that check, against the
    # experts' 53 sharding_propagation() anchors without the loss MindFormers configures in every parallel build).
    # Since the router's patterns are tried back until none comes back, the decoder's and the MTP's
    # top-k TopkExt (tc_topk) come back beside the aux means, and pay for nothing once the means are back: the
    # every-line check, repeated after each drop, drops them again (one pass in graph order had kept them: 47)
    # (b) 52: MindFormers' MTP Concat is self-defined, the model's own in every column
    assert c["a"].anchors == 45 and c["b"].anchors == 52
    for n in ("model.decoder.layers.1.mlp.router.tc_topk", "model.mtp.layers.0.transformer_layer.mlp.router.tc_topk"):
        assert n not in chosen and dropped[n].startswith("does not pay for its line in the final advice")
    for k in {group_key(ch.op) for ch in c.advice.chosen if not ch.declared}:
        rest = {n: a for n, a in c.advice.anchors.items() if group_key(n) != k}
        q = propagate(plan.graph, plan.mesh, rest, use_model_strategies=False, dataset_strategy="full_batch",
                      hardware=plan.hardware)
        assert q.totals()["step_seconds"] - plan.totals()["step_seconds"] > PAY_FLOOR or \
            state_bytes(q) - state_bytes(plan) >= MEMORY_WORTH, k
    # the way toward (c): within (c)'s step and (b)'s 52 anchors, 323/356 operators (90.7 %, the advice 310); with
    # (c)'s layout on every region a shard() line reaches (64 anchors, 0.999 of (c)'s step) 344/356 (96.6 %): the
    # rest are functional calls no line reaches (the routers' LogicalNot chain and SumExt) and their neighbours.
    # (One operator fewer: the MTP Concat, self-defined, is the model's own and not counted)
    a = c["a"]
    assert (a.agreed, a.total) == (310, 356)
    assert a.closest.agreed == 323 and a.closest.anchors <= 52
    assert a.closest.step_seconds <= c["c"].totals["step_seconds"]
    last = a.toward[-1]
    assert max(t.agreed for t in a.toward) == last.agreed == 344 and last.anchors == 64
    assert last.step_seconds < c["c"].totals["step_seconds"]
    # the experts' rotary Mul, one primitive MLA applies to q_pe (heads by tp) and to the one-head k_pe: (b) has it on
    # q_pe only (MindSpore refuses the whole configuration), and says so
    assert any(n.startswith("the experts' strategy at model.decoder.layers.0.self_attention.apply_rotary_emb2.mul: ")
               and n.endswith("mul#1 (Mul) cannot take ((1, 2, 4, 1), (1, 1, 1, 1)): input 0 dimension 2: split 4 "
                              "does not divide size 1; skipped") for n in c["b"].notes)
    fc2 = chosen["model.decoder.layers.0.mlp.linear_fc2.matmul"]
    assert fc2.template == "matmul_data_parallel_sequence_first"
    assert float(fc2.needed.split("serial sum ")[1].split(" ms")[0]) < -5.0


def _advised(graph_of, target, *kwargs):
    """The advice on a zoo model at dp=2,tp=4 (full-batch dataset, the default hardware) and a propagation of the
    same graph for any anchors: (graph, mesh, run, advice). The references below are built by hand on the Cell
    compiled as built (``--eval``): what they exercise is compare's pricing, the same for either compile. By the
    serial sum (conftest.serial): by the schedule these small models are advised nothing, and (a) would have no
    layout of its own to compare."""
    from strategist.advice.advisor import advise
    from strategist.files.hardware import load_hardware
    hw = load_hardware("atlas-800t-a2")
    g = serial(graph_of(target, *kwargs, training=False))
    mesh = Mesh.parse("dp=2,tp=4")

    def run(anchors):
        return propagate(g, mesh, anchors, use_model_strategies=False, dataset_strategy="full_batch", hardware=hw)
    return g, mesh, run, advise(g, mesh, hardware=hw, dataset_strategy="full_batch")


def test_each_disagreement_priced_with_the_references_layout(graph_of):
    """compare's "step if (c)'s": each operator (a) lays out otherwise than (c), with the same operator of every
    repeated layer, anchored as (c) has it on top of (a)'s anchors, one propagation per pattern. Here (c) is (a)
    plus fc1 data parallel over all 8 devices: anchoring fc1 as (c) has it gives (c)'s plan itself, so its
    step change is exactly (c)'s step minus (a)'s, and the other way round its negative."""
    from strategist.compare import Column, what_if_plan, agreement
    g, mesh, run, a = _advised(graph_of, "examples/mlp.py:MegatronMLP", "hidden=1024", "ffn=4096", "tokens=8192")
    fc1 = "linear_fc1.matmul"
    assert a.plan.strategy(fc1) == ((2, 1), (1, 4))
    ref = run({**a.anchors, fc1: ((8, 1), (1, 1))})
    col = Column("a", "advice")
    agreement(a.plan, ref, col)
    assert [d.op for d in col.disagreements] == [fc1]      # fc2 (the anchored row linear) and the adds agree
    what_if_plan(col, g, a.plan, ref, mesh, run)
    d = next(d for d in col.disagreements if d.op == fc1)
    dt = ref.totals()["step_seconds"] - a.plan.totals()["step_seconds"]
    assert d.if_reference == pytest.approx(dt, rel=1e-12) and dt > 0      # data parallel fc1 is slower here
    assert d.held and col.reference_faster == []
    # (c) faster: the what-if of the reverse comparison is the same difference, negative
    back = Column("c", "reference")
    agreement(ref, a.plan, back)
    what_if_plan(back, g, ref, a.plan, mesh, run)
    assert back.disagreements[0].if_reference == pytest.approx(-dt, rel=1e-12)
    assert back.reference_faster == back.disagreements


def test_differences_priced_by_region_and_all_at_once(graph_of):
    """compare prices (a)'s differences by connected region too, and all at once: the experts' layouts often pay only
    together (a router chain split by tokens pays its gather once). Here (c) is the advice with every layer's SwiGLU
    up-projections and the head data parallel over all 8 devices, which reaches the whole residual stream: one
    region, whose price -- every differing operator anchored as (c) has it -- is exactly (c)'s step minus (a)'s, as
    is the all-at-once figure; each pattern alone is priced lower than the whole."""
    from strategist.compare import Column, what_if_plan, what_if_regions, agreement
    g, mesh, run, a = _advised(graph_of, "examples/llama.py:tiny", "batch=8")
    dp8 = ((8, 1), (1, 1))
    ups = {f"model.layers.{i}.feed_forward.{w}.matmul": dp8 for i in (0, 1) for w in ("w1", "w3")}
    ref = run({**a.anchors, **ups, "lm_head.matmul": dp8})
    col = Column("a", "advice")
    agreement(a.plan, ref, col)
    assert set(ups) | {"lm_head.matmul", "model.layers.1.add#1"} <= {d.op for d in col.disagreements}
    what_if_plan(col, g, a.plan, ref, mesh, run)
    n = what_if_regions(col, g, a.plan, ref, mesh, run)
    dt = ref.totals()["step_seconds"] - a.plan.totals()["step_seconds"]
    assert n == 2 and len(col.regions) == 1 and dt > 0
    (r,) = col.regions
    assert sorted(r.ops) == sorted(d.op for d in col.disagreements)
    assert r.if_reference == pytest.approx(dt, rel=1e-12)
    assert col.if_reference_everywhere == pytest.approx(dt, rel=1e-12)
    assert all(d.if_reference is None or d.if_reference < dt for d in col.disagreements)
    assert col.regions_reference_faster == []


def test_toward_the_reference_region_by_region(graph_of):
    """How close to (c) the advice can come, and at what price: (c)'s layout taken region by region on top of the
    advice, the cheapest per operator first, each step priced with the regions before it and its agreement counted
    again. Here (c) is the advice with the labels' mask replicated (which reaches back through the loss and the
    residual stream to the input slice: 17 operators, 15 of them not Casts) and each layer's SiLU data parallel
    over all 8 devices (its w1 and SiLU in both layers: 4). The first step takes the first region, priced as that
    region alone; the last agrees on every operator at exactly (c)'s step. An anchored pattern the others give anyway
    is dropped, so the anchors grow by as many as (c) was made with: one for the mask's region, then the two SiLUs
    (the 13 patterns of the first region and the 2 of the second each tried without: 2 + 15 propagations).
    ``closest`` obeys (c)'s step and (b)'s anchors."""
    from strategist.compare import Column, op_costs, steps_toward_reference, what_if_plan, what_if_regions, agreement
    g, mesh, run, a = _advised(graph_of, "examples/llama.py:tiny", "batch=8")
    silu = {f"model.layers.{i}.feed_forward.silu": ((8, 1),) for i in (0, 1)}
    ref = run({**a.anchors, "not_equal": ((1, 1), ()), **silu})
    col = Column("a", "advice", anchors=len(a.chosen))
    agreement(a.plan, ref, col)
    what_if_plan(col, g, a.plan, ref, mesh, run)
    what_if_regions(col, g, a.plan, ref, mesh, run)
    mask, ffn = col.regions
    assert len(mask.ops) == 17 and mask.name == "slice" and len(ffn.ops) == 4
    assert mask.if_reference / 17 < ffn.if_reference / 4          # the cheaper per operator goes first
    t_a, t_c = a.plan.totals()["step_seconds"], ref.totals()["step_seconds"]
    assert steps_toward_reference(col, a.plan, ref, mesh, run, op_costs(ref), t_c, None) == 2 + 13 + 2
    first, one, two = col.toward
    assert (first.region, first.agreed, first.total, first.anchors, first.step_seconds) == ("", 21, 42, 4, t_a)
    # (dropped in graph order while the rest gives the same plan: the last left, the loss's final sum replicated,
    # takes the whole region back with it, as the mask's NotEqual would)
    assert (one.region, one.agreed, one.anchors, one.anchored) == ("slice", 38, 4 + 1, ["loss.sum#1"])
    assert one.step_seconds == pytest.approx(t_a + mask.if_reference, rel=1e-12)
    assert (two.region, two.agreed, two.anchors) == ("model.layers.*.feed_forward.w1.matmul", 42, 5 + 2)
    assert two.anchored == list(silu)
    assert two.step_seconds == pytest.approx(t_c, rel=1e-12)
    assert col.closest is two
    steps_toward_reference(col, a.plan, ref, mesh, run, op_costs(ref), t_c, 6)      # (b) with 6 anchors
    assert (col.closest.region, col.closest.agreed) == ("slice", 38)
    steps_toward_reference(col, a.plan, ref, mesh, run, op_costs(ref), t_a, None)   # (c) no slower than the advice
    assert col.closest.region == "" and col.closest.agreed == 21


def test_regions_join_through_reshapes_and_merge_repeated_layers(graph_of):
    """A region: differing operators that read each other's outputs, directly or through an operator without a
    strategy (the FFN's input Reshape between the norm and the up-projections), the same set in every repeated
    layer one region; an operator joined to none is a region of its own."""
    from strategist.compare import Column, Disagreement, regions
    g = graph_of("examples/llama.py:tiny", "batch=8")
    mesh = Mesh.parse("dp=2,tp=4")
    plan = propagate(g, mesh, {}, use_model_strategies=False, dataset_strategy="full_batch")
    ffn = [f"model.layers.{i}.{n}" for i in (0, 1) for n in ("ffn_norm.norm", "feed_forward.w1.matmul",
                                                             "feed_forward.w3.matmul", "feed_forward.mul")]
    col = Column("a", "advice")
    col.disagreements = [Disagreement(op, g.op(op).type, None, None, 0, 0, 0, 0) for op in ffn + ["lm_head.matmul"]]
    rs = regions(col, g, plan)
    assert [r.patterns for r in rs] == [["model.layers.*.ffn_norm.norm", "model.layers.*.feed_forward.w1.matmul",
                                         "model.layers.*.feed_forward.w3.matmul", "model.layers.*.feed_forward.mul"],
                                        ["lm_head.matmul"]]
    assert rs[0].ops == ffn and rs[1].ops == ["lm_head.matmul"]
    # the norm alone, without the up-projections that read it: the mul still joins w3 (it reads w3's output) but
    # not w1 (through the SiLU, which does not differ here)
    col.disagreements = [d for d in col.disagreements if "norm" not in d.op and "w3" not in d.op]
    assert [r.patterns for r in regions(col, g, plan)] == [["model.layers.*.feed_forward.w1.matmul"],
                                                           ["model.layers.*.feed_forward.mul"], ["lm_head.matmul"]]


def test_faster_list_one_pattern_per_line_across_layers():
    """compare's "step if (c)'s ... N faster:" list names each pattern across repeated layers once, with how many
    layers (glm4 at 40 layers listed 163 operator names, four per layer)."""
    from strategist.compare import Disagreement, patterns_text

    def d(op, held=True):
        return Disagreement(op, "MatMul", None, None, 0, 0, 0, 0, held=held)
    ds = [d(f"m.layers.{i}.attn.dense.matmul") for i in range(3)] + [d("m.layers.0.rope.mul", held=False),
                                                                      d("loss.sum2")]
    assert patterns_text(ds) == ("m.layers.*.attn.dense.matmul (3 layers), m.layers.0.rope.mul (functional call: "
                                  "no shard() line), loss.sum2")


def test_parallel_only_operators_are_the_models_own_in_every_plan(graph_of):
    """An operator only a parallel build has, which the model's own code configures there (``graph.parallel_only``:
    MindFormers' loss ``x + 0``), starts every plan -- propagate with or without the model's strategies, semi_auto
    (compare's (c)), the advice and each of its propagations -- as the real run does: a configured operator ends
    the BFS, so it decides what lies before it (here the head, backward). It is never an advice anchor nor a line of
    its anchors file; the report lists it as the model's own; compare's agreement leaves it out (alike in every
    column); an anchor the user gives on it wins. On llama tiny the loss's SoftmaxCrossEntropyWithLogits stands in
    for the add, fixed at (8, 1) rows."""
    import copy
    from strategist.advice.advisor import advise
    from strategist.compare import Column, agreement
    from strategist.files.hardware import load_hardware
    from strategist.engine.plan import PARALLEL_ONLY
    from strategist.vocab.anchors import Anchor
    from strategist.propagate import semi_auto_plan
    from strategist.report.render import advice_dict, configurable_anchors_yaml
    plain = graph_of("examples/llama.py:tiny", "batch=8")
    g = copy.deepcopy(plain)                       # (graph_of's graphs are shared by the session)
    name, st = "loss.softmax_cross_entropy", ((8, 1), (8, 1))
    read = []
    g.parallel_only = {name: "the loss's own, parallel builds only"}
    g.parallel_only_strategies = lambda gg, m: (read.append(str(m)) or
                                                ({name: Anchor(name, st, origin=PARALLEL_ONLY)}, ["a note"]))
    mesh = Mesh.parse("dp=2,tp=4")
    run = dict(use_model_strategies=False, dataset_strategy="full_batch")
    before = propagate(plain, mesh, {}, **run)
    assert before.choices[name].strategy == ((1, 1), (1, 1)) and name not in before.anchors
    p = propagate(g, mesh, {}, **run)
    assert p.choices[name].strategy == st and p.anchors[name].origin == PARALLEL_ONLY and "a note" in p.warnings
    assert p.choices["lm_head.matmul"].strategy == ((8, 1), (1, 1)) != before.choices["lm_head.matmul"].strategy
    assert propagate(g, mesh, {}, dataset_strategy="full_batch").choices[name].strategy == st
    assert propagate(g, mesh, {name: ((1, 1), (1, 1))}, **run).choices[name].strategy == ((1, 1), (1, 1))
    s = semi_auto_plan(g, mesh, {}, **run)
    assert s.choices[name].strategy == st and name in s.anchors
    adv = advise(g, mesh, hardware=load_hardware("atlas-800t-a2"), dataset_strategy="full_batch")
    assert name not in adv.anchors and adv.plan.choices[name].strategy == st
    assert adv.baseline.choices[name].strategy == st            # "configure nothing" is the model's own too
    d = advice_dict(adv)
    own = [x for x in d["existing_shard_calls"] if x["op"] == name]
    assert own and own[0]["status"] == "the model's own (parallel build)" and "((8, 1), (8, 1))" in own[0]["detail"]
    assert name not in configurable_anchors_yaml(adv) and set(read) == {"dp=2,tp=4"}
    col = Column("a", "(a)")
    agreement(p, p, col)
    counted = sum(1 for ch in p.choices.values() if ch.sharding is not None)
    assert col.agreed == col.total == counted - 1


@pytest.mark.slow
def test_minimality_compares_the_layout_a_cast_slices_a_parameter_with():
    """A Cast's searched layout is not compared by minimality (MindSpore runs it in its input's layout), except a
    Cast of a Parameter, whose layout slices the Parameter. With the loss's x + 0 adds configured, qwen3's head is
    decided backward from them with the layout its anchor gives, but its weight's Cast is then whole on every device
    ((1, 1) against (4, 1)): on the full-size config the advice dropped the head as "propagation gives the same
    layouts and cost without it" and paid 8.2 ms a step more (622.1 ms against 613.9)."""
    from strategist.advice.minimality import layouts_differ, same_plan
    from strategist.frontend.mindformers import load_mindformers
    g, _ = load_mindformers(QWEN3, layers=2, seq=128, batch=8, overrides=DENSE)
    mesh = Mesh.parse("dp=2,tp=4")
    run = dict(use_model_strategies=False, dataset_strategy="full_batch", price=False)
    a = propagate(g, mesh, {"model.output_layer.matmul": ((2, 1), (4, 1))}, **run)
    b = propagate(g, mesh, {}, **run)
    assert [n for n, ca in a.choices.items() if layouts_differ(ca, b.choices[n])] == ["model.output_layer.cast"]
    assert a.choices["model.output_layer.cast"].strategy == ((4, 1),) != b.choices["model.output_layer.cast"].strategy
    assert not same_plan(a, b)
