"""Expert parallelism in the step and the memory (strategist.cost.experts), worked by hand on a small qwen3_moe: the
experts over the ep devices, their gradients reduced over each expert's replicas, and the token dispatcher's
all-to-alls over the ep group."""
import math

import pytest

from strategist.api import plan_model
from strategist.cost.experts import dispatch_bytes, ep_group_intra, expert_params
from strategist.cost.step import StepOptions, build_items, estimate, step_profile_of
from strategist.vocab.graph import DTYPE_BYTES

QWEN3_MOE = "mindformers:qwen3_moe/pretrain_qwen3_30b_a3b_4k.yaml"
SMALL = ["layers=2", "seq=128", "batch=8", "hidden_size=256", "intermediate_size=512", "num_attention_heads=4",
         "num_key_value_heads=4", "head_dim=64", "vocab_size=1024", "num_experts_per_tok=2",
         "moe_intermediate_size=128", "num_experts=4"]


@pytest.fixture(scope="module")
def plans():
    from strategist.frontend.loader import load_graph
    g = load_graph(QWEN3_MOE, None, SMALL, training=True)
    return {mesh: plan_model(QWEN3_MOE, mesh, graph=g, step=StepOptions()) for mesh in ("dp=4", "dp=2,ep=2")}


def test_each_device_holds_its_share_of_the_experts(plans):
    plain, ep = plans["dp=4"], plans["dp=2,ep=2"]
    experts = expert_params(ep.graph)
    # two layers, each: w1 [4 experts x 256, 256] (gate and up, 128 each) and w2 [4 x 128, 256]
    assert sorted(experts.values()) == [4, 4, 4, 4]
    whole = sum(math.prod(ep.graph.params[p].spec.shape) * DTYPE_BYTES[ep.graph.params[p].spec.dtype]
                for p in experts)
    assert whole == 2 * (4 * 256 * 256 + 4 * 128 * 256) * DTYPE_BYTES[ep.graph.params[next(iter(experts))].spec.dtype]
    # ep=2: half of them on each device, and half their optimizer states (two fp32 moments per element)
    a, b = estimate(plain).memory, estimate(ep).memory
    assert a["parameters"] - b["parameters"] == pytest.approx(whole / 2)
    elements = whole / DTYPE_BYTES[ep.graph.params[next(iter(experts))].spec.dtype]
    assert a["optimizer_states"] - b["optimizer_states"] == pytest.approx(elements / 2 * 8)


def test_the_dispatcher_exchanges_each_devices_routed_tokens_over_the_ep_group(plans):
    plan = plans["dp=2,ep=2"]
    ffn = next(op for op in plan.graph if op.type == "MorphFFN")
    # 8 x 128 tokens over 4 devices: 256 rows each, routed to 2 experts, 256 bf16 elements a row; half of them to the
    # other device of the ep pair
    assert dispatch_bytes(plan, ffn) == 2 * 256 * 256 * 2 / 2
    assert dispatch_bytes(plans["dp=4"], ffn) == 0.0
    prof = step_profile_of(plan.hardware, ())
    a2a = prof.collective_seconds("AllToAll", 2, 2 * 256 * 256 * 2 / 2, True)
    mine = {it.name: it for it in build_items(plan, prof, StepOptions(), None)}[ffn.name]
    plain = {it.name: it for it in build_items(plans["dp=4"], prof, StepOptions(), None)}[ffn.name]
    # dispatch and combine, forward and again backward, on top of what the operator had without ep
    assert mine.own_fwd - (plain.own_fwd or 0.0) == pytest.approx(2 * a2a)
    assert mine.own_bwd - (plain.own_bwd or 0.0) == pytest.approx(2 * a2a)


def test_an_experts_gradient_is_reduced_over_its_replicas_only(plans):
    ep = plans["dp=2,ep=2"]
    prof = step_profile_of(ep.hardware, ())
    mirrors = [m for it in build_items(ep, prof, StepOptions(), None) for m in it.mirrors if m[0][0][:1] == ("experts",)]
    # each expert weight on 2 of the 4 devices: one AllReduce over the pair, not over all 4
    assert mirrors and all(m[2] == 2 for m in mirrors)


def test_the_sweep_counts_a_mindformers_moe_layers_experts(plans):
    # (its expert weights enter the collapsed MoE FFN through Casts and Reshapes: the sweep's ep meshes were all
    # refused, "the model has no experts")
    from strategist.sweep import shapes_of
    assert shapes_of(plans["dp=4"].graph).experts == 4


@pytest.fixture(scope="module")
def drawn():
    """Advised plans with MindFormers' MoE layout (the tokens over every device, the rules' ``moe_ffn`` template) on
    four devices dp=2 x tp=2: no ep, and ep drawn from those devices (MindFormers' ep beyond data parallel)."""
    from strategist.api import advise_model
    from strategist.frontend.loader import load_graph
    g = load_graph(QWEN3_MOE, None, SMALL, training=True)
    return {mesh: advise_model(QWEN3_MOE, mesh, graph=g, step=StepOptions(), dataset_strategy="full_batch").plan
            for mesh in ("dp=2,tp=2", "dp=2,tp=2,ep=4@dp*tp", "dp=2,tp=2,ep=2@tp")}


def test_ep_drawn_from_dp_and_tp_divides_the_experts_and_exchanges_every_devices_tokens(drawn):
    none, four, two = drawn["dp=2,tp=2"], drawn["dp=2,tp=2,ep=4@dp*tp"], drawn["dp=2,tp=2,ep=2@tp"]
    ffn = next(op for op in four.graph if op.type == "MorphFFN")
    # 8 x 128 tokens over all 4 devices: 256 rows each, 2 experts a row, 256 bf16 elements; 3 of 4 leave the device
    assert four.choices[ffn.name].inputs[0].slice_shape[1] == 256
    assert dispatch_bytes(four, ffn) == 2 * 256 * 256 * 2 * 3 / 4
    assert dispatch_bytes(two, ffn) == 2 * 256 * 256 * 2 / 2 and dispatch_bytes(none, ffn) == 0.0
    # the ep group is consecutive ranks: four of an 8-device node
    assert ep_group_intra(four, 8) and not ep_group_intra(four, 2)
    experts = expert_params(four.graph)
    dtype = four.graph.params[next(iter(experts))].spec.dtype
    whole = sum(math.prod(four.graph.params[p].spec.shape) * DTYPE_BYTES[dtype] for p in experts)
    a, b, c = (estimate(p).memory for p in (none, four, two))
    assert a["parameters"] - b["parameters"] == pytest.approx(whole * 3 / 4)     # one expert of four per device
    assert a["parameters"] - c["parameters"] == pytest.approx(whole / 2)
    prof = step_profile_of(four.hardware, ())

    def expert_mirrors(plan):
        return [m[2] for it in build_items(plan, prof, StepOptions(), None) for m in it.mirrors
                if m[0][0][:1] == ("experts",)]
    # each expert on one device: nothing to reduce; with ep=2 of tp, over its two replicas (the dp pair)
    assert expert_mirrors(four) == [] and expert_mirrors(two) and set(expert_mirrors(two)) == {2}


def test_the_ep_group_is_consecutive_ranks_however_the_mesh_spells_ep():
    # MindFormers' get_ep_group_name: ep consecutive ranks. An ep axis outside tp=8 still exchanges within the
    # node (ranks 0-1, not 0 and 8), and ep drawn from 16 devices crosses nodes
    from types import SimpleNamespace

    from strategist.vocab.mesh import Mesh
    at = lambda text: SimpleNamespace(mesh=Mesh.parse(text))                               # noqa: E731
    assert ep_group_intra(at("dp=2,ep=2,tp=8"), 8) and ep_group_intra(at("dp=2,tp=8,ep=8@tp"), 8)
    assert not ep_group_intra(at("dp=2,tp=8,ep=16@dp*tp"), 8) and not ep_group_intra(at("ep=16,tp=1"), 8)


def test_the_losss_own_strategies_are_read_once_per_mindformers_sizes(monkeypatch):
    # the loss's shard() calls read MindFormers' data, model and context parallel sizes, not ep: an ep axis and a
    # drawn ep share the build of the mesh without them (a sweep builds once per those sizes, not once per mesh)
    from strategist.frontend.loader import load_graph
    from strategist.frontend.mindformers import experts as mf_experts
    from strategist.memo import clear_caches
    from strategist.vocab.mesh import Mesh
    g = load_graph(QWEN3_MOE, None, SMALL, training=True)
    assert g.parallel_only
    clear_caches()
    builds = []
    real = mf_experts.read_expert_strategies

    def counted(ref, mesh, *a, **k):
        builds.append(str(mesh))
        return real(ref, mesh, *a, **k)
    monkeypatch.setattr(mf_experts, "read_expert_strategies", counted)
    first, notes = mf_experts.loss_own_strategies(g, Mesh.parse("dp=4,tp=2"))
    assert first and not notes
    for text in ("dp=2,ep=2,tp=2", "dp=4,tp=2,ep=8@dp*tp", "dp=4,tp=2,ep=2@tp"):
        assert mf_experts.loss_own_strategies(g, Mesh.parse(text)) == (first, [])
    assert builds == ["dp=4,tp=2"]
    mf_experts.loss_own_strategies(g, Mesh.parse("dp=2,tp=4"))
    assert builds == ["dp=4,tp=2", "dp=2,tp=4"]


def test_the_loss_is_read_from_a_one_layer_build_at_a_short_sequence(monkeypatch):
    # the loss's shard() calls read the parallel config alone: a one-layer build at a short sequence gives the
    # strategies the build at the graph's own options gives, at a fraction of its cost
    from strategist.frontend.loader import load_graph
    from strategist.frontend.mindformers import experts as mf_experts
    from strategist.memo import clear_caches
    from strategist.vocab.mesh import Mesh
    g = load_graph(QWEN3_MOE, None, SMALL + ["seq=8192"], training=True)
    assert g.inputs["input_ids"].shape == (8, 8192)
    clear_caches()
    asked = []
    real = mf_experts.read_expert_strategies

    def counted(ref, mesh, *a, **k):
        asked.append((k.get("layers"), k.get("seq")))
        return real(ref, mesh, *a, **k)
    monkeypatch.setattr(mf_experts, "read_expert_strategies", counted)
    for text in ("dp=4,tp=2", "dp=2,tp=2,cp=2"):
        mesh = Mesh.parse(text)
        got, notes = mf_experts.loss_own_strategies(g, mesh)
        whole = real(g.model, mesh, "propagation", g, **g.mf_options)
        assert not notes and got and {n: a.strategy for n, a in got.items()} == \
            {n: whole[n].strategy for n in g.parallel_only}
    assert asked == [(1, 256), (1, 256)]


def test_a_model_refusing_a_short_sequence_has_its_loss_read_at_2048_from_then_on(monkeypatch):
    # DeepSeek-V3's compressed attention mask refuses a sequence below 2048: its first reading falls back to 2048,
    # and every later mesh is read there at once (one refused build per model, not one per mesh)
    from strategist.frontend.loader import load_graph
    from strategist.frontend.mindformers import experts as mf_experts
    from strategist.memo import clear_caches
    from strategist.vocab.mesh import Mesh
    g = load_graph("mindformers:deepseek3/pretrain_deepseek3_671b.yaml", None, ["layers=4", "batch=8"],
                   training=True)
    clear_caches()                  # (the models refusing a short build too)
    asked = []
    real = mf_experts.read_expert_strategies

    def counted(ref, mesh, *a, **k):
        asked.append((str(mesh), k.get("seq")))
        return real(ref, mesh, *a, **k)
    monkeypatch.setattr(mf_experts, "read_expert_strategies", counted)
    for text in ("dp=2,tp=4", "dp=4,tp=2"):
        got, notes = mf_experts.loss_own_strategies(g, Mesh.parse(text))
        assert got and not notes
    assert asked == [("dp=2,tp=4", 256), ("dp=2,tp=4", 2048), ("dp=4,tp=2", 2048)]


def test_a_drawn_ep_on_a_model_without_mindformers_experts_is_a_warning():
    import os

    from strategist.api import _drawn_warning
    from strategist.frontend.loader import load_graph
    from strategist.vocab.mesh import Mesh
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    dense = load_graph(os.path.join(root, "examples", "llama.py") + ":tiny", None, ["layers=1"])
    assert _drawn_warning(dense, Mesh.parse("dp=2,tp=4,ep=2@tp")).startswith(
        "mesh axis ep=2@tp is drawn from others, as MindFormers draws expert parallelism")
    assert _drawn_warning(dense, Mesh.parse("dp=2,tp=4")) is None
    moe = load_graph(QWEN3_MOE, None, SMALL, training=True)
    assert _drawn_warning(moe, Mesh.parse("dp=2,tp=2,ep=4@dp*tp")) is None


def test_each_micro_batch_casts_its_devices_experts_whole(plans):
    """Layer 0's expert weight1 (float32 [4 experts x 256, 256]) cast to bf16 for the grouped MatMuls: every
    micro-batch casts the device's own experts whole, however many micro-batches the step has -- under ep=2 half
    of them, 512 x 256 elements read at 4 bytes and written at 2, at the profile's element-wise rate (the backward
    twice that)."""
    plan = plans["dp=2,ep=2"]
    prof = step_profile_of(plan.hardware, ())
    cast = "model.decoder.layers.0.mlp.experts.cast_op"
    op = plan.graph.op(cast)
    assert op.type == "Cast" and op.inputs[0].kind == "param" and op.outputs[0].shape == (1024, 256)
    for m in (1, 4):
        it = {i.name: i for i in build_items(plan, prof, StepOptions(micro_batches=m), None)}[cast]
        assert it.fwd == pytest.approx(prof.memory_seconds(512 * 256 * (4 + 2)))
        assert it.bwd == pytest.approx(2 * it.fwd)
