"""The propagation engine: MindSpore's documented results, the spec's facts, and invariants."""
import json
import os

import pytest

from strategist.errors import PropagationError, StrategyError
from strategist.vocab.mesh import Mesh
from strategist.files.hardware import load_hardware
from strategist.engine.rules.sharding import shard
from strategist.engine.search.orders import creation_order
from strategist.propagate import propagate
from strategist.vocab.anchors import Anchor
from strategist.engine.plan import CAST_PASS
from strategist.engine.redistribution import plan as plan_redistribution
from strategist.report.render import plan_dict

from conftest import MODELS

ST = "examples/sharding_techniques.py:"
MESH = Mesh.parse("dp=2,tp=4")
HW = load_hardware("atlas-800t-a2")

#: These tests model Megatron-style tensor parallelism, whose input is whole on every tensor-parallel
#: rank: MindSpore's full_batch (its default data_parallel splits the batch over all devices).
FB = "full_batch"


def strategies(p):
    return {name: ch.strategy for name, ch in p.choices.items()}


# --- the "sharding techniques" page: propagation from the few configured ops gives semi-auto ---

@pytest.mark.parametrize("cls, mesh, kwargs", [
    ("RowParallelLinear", "dp=2,tp=4", ()),
    ("RowParallelLinear", "dp=2,cp=2,tp=2", ("dp=2", "cp=2", "tp=2")),
    ("RowParallelLinear", "dp=2,tp=4", ("transpose_b=False",)),
    ("CoreAttention", "dp=2,tp=4", ()),
    ("CoreAttention", "dp=2,cp=2,tp=2", ("dp=2", "cp=2", "tp=2")),
    ("FlashAttention", "dp=2,tp=4", ()),
    ("FlashAttention", "dp=2,cp=2,tp=2", ("dp=2", "cp=2", "mp=2")),
])
def test_reproduces_semi_auto_strategies(graph_of, cls, mesh, kwargs):
    """Every operator the page's semi-auto version configures gets exactly that strategy."""
    g = graph_of(ST + cls, *kwargs)
    semi = graph_of(ST + cls, "mode='semi'", *kwargs)
    p = propagate(g, Mesh.parse(mesh), hardware=HW, dataset_strategy=FB)
    expected = {op.name: op.in_strategy for op in semi if op.in_strategy is not None}
    assert len(expected) > len([op for op in g if op.configured])     # something was propagated
    assert {n: p.strategy(n) for n in expected} == expected
    assert not p.conflicts and not p.inconsistencies


def test_page_named_expectations(graph_of):
    """The page's table, literally (dp=2, tp=4, cp=1)."""
    p = propagate(graph_of(ST + "RowParallelLinear"), MESH, dataset_strategy=FB)
    assert p.strategy("add") == ((2, 4), (4,))                       # ((dp*cp, tp), (tp,))
    p = propagate(graph_of(ST + "CoreAttention"), MESH, dataset_strategy=FB)
    assert p.strategy("dropout") == ((2, 4, 1, 1),)                  # (dp, tp, cp, 1)
    assert p.strategy("mul") == ((2, 4, 1, 1), ())                   # ((dp, tp, cp, 1), ())
    p = propagate(graph_of(ST + "FlashAttention"), MESH, dataset_strategy=FB)
    assert p.strategy("alibi_rescale_mul") == ((2, 4, 1, 1), (1,))   # ((dp, mp, cp, 1), (1,))
    assert p.choices["alibi_rescale_mul"].provenance.root == "flash_attention"
    # The page's semi-auto head splits the batch by dp=2, which auto_parallel cannot: MindSpore 2.9.0 rejects
    # a dataset strategy that does not use every device. Its own answers: nothing split under full_batch,
    # the batch over all 8 devices under data_parallel.
    p = propagate(graph_of(ST + "LlamaForCausalLMHead"), MESH, dataset_strategy=FB)
    assert (p.strategy("slice"), p.strategy("not_equal"), p.strategy("mul")) == (((1, 1),), ((1, 1), ()), ((1, 1), (1, 1)))
    p = propagate(graph_of(ST + "LlamaForCausalLMHead"), MESH)
    assert (p.strategy("slice"), p.strategy("not_equal"), p.strategy("mul")) == (((8, 1),), ((8, 1), ()), ((8, 1), (8, 1)))
    with pytest.raises(StrategyError, match=r"dataset strategy \(8, 1\) does not divide input input_ids \(2, 4097\)"):
        propagate(graph_of(ST + "LlamaForCausalLMHead", "batch=2"), MESH)


def test_docs_ffn_as_mindspore_propagates_it(graph_of):
    """sharding_propagation.md's FFN with MatMul1 ((2,1),(1,4)), as MindSpore 2.9.0 propagates it (full_batch):
    Add1 ((2,4),(4)), ReLU ((2,4)), MatMul2 ((2,4),(4,1)), Add2 ((2,1),(1)); Flatten has no OperatorInfo, so
    it runs batch-parallel ((8,1,1,1)) and the edge into MatMul1 redistributes; MatMul2 reduces its split k
    with an AllReduce over tp."""
    p = propagate(graph_of(ST + "DocsFFN"), MESH, hardware=HW, dataset_strategy=FB)
    assert [p.strategy(n) for n in ("flatten", "add1", "relu", "matmul2", "add2")] == \
        [((8, 1, 1, 1),), ((2, 4), (4,)), ((2, 4),), ((2, 4), (4, 1)), ((2, 1), (1,))]
    assert [(e.src, e.dst) for e in p.edges if e.forward.has_communication] == [("flatten", "matmul1")]
    assert [(a, b) for a, b, _ in p.inconsistencies] == [("flatten", "matmul1")]
    # flatten's [32, 784] rows gathered to matmul1's [128, 784] over 4 devices: 3/4 of 128*784 fp32 per device
    fl = next(e for e in p.edges if e.dst == "matmul1")
    assert fl.fwd_bytes == 3 / 4 * 128 * 784 * 4
    # matmul2's forward AllReduce of its [128,10] fp32 output slice over the 4 tp devices
    assert p.op_costs["matmul2"].fwd_bytes == 2 * 3 / 4 * 128 * 10 * 4
    # matmul1's weight [784,16] per device, replicated over dp=2: gradient AllReduce (spec §4 fact 1: 50176)
    assert p.op_costs["matmul1"].grad_bytes == 784 * 16 * 4


def test_unreached_operator_gets_first_candidate(graph_of):
    """MindSpore 2.9.0: an operator no seed reaches gets its first candidate, all-ones (spec §2 fact 3's
    ((1,1),(1,8)) assumed fully_use_devices)."""
    p = propagate(graph_of(os.path.join(MODELS, "propagation.py:Unreached")), Mesh.parse("dp=8"))
    assert p.strategy("matmul") == ((1, 1), (1, 1))
    assert p.choices["matmul"].provenance.direction == "default"
    assert p.strategy("relu") == ((8, 1),)                            # from the dataset (dp=8)


def test_no_seed_is_an_error(graph_of):
    with pytest.raises(StrategyError, match="There is no operator that is configured sharding strategy"):
        propagate(graph_of(os.path.join(MODELS, "propagation.py:NoInputs")), MESH)


def test_conflicting_anchors_on_a_shared_weight_raise(graph_of):
    """Spec §2 fact 4: configured users of one Parameter that disagree -> 'Incorrect strategy configuration'."""
    g = graph_of(os.path.join(MODELS, "propagation.py:SharedWeight"), "s1=((1, 1), (1, 8))", "s2=((8, 1), (1, 1))")
    with pytest.raises(StrategyError, match="Incorrect strategy configuration.*mm1 and mm2 .*shared parameter w"):
        propagate(g, Mesh.parse("dp=8"), dataset_strategy=FB)


def test_shared_weight_user_follows_the_configured_one(graph_of):
    g = graph_of(os.path.join(MODELS, "propagation.py:SharedWeight"), "s1=((1, 1), (1, 8))")
    p = propagate(g, Mesh.parse("dp=8"), dataset_strategy=FB)
    w1 = p.choices["mm1"].inputs[1]
    w2 = p.choices["mm2"].inputs[1]
    assert plan_redistribution(w1, w2).is_identity


def test_self_gram_after_a_transpose_fails_as_mindspore_does(graph_of):
    """MindSpore 2.9.0 (msoracle, 8 devices, data_parallel): ``mm(t, t)`` with transpose_b after a Transpose
    raises "Failure: tensor_redistribution init failed." -- AddSwcUnderPrevOpDevMatrixMulti's candidate puts
    i and j on one device axis ("invalid map"), wins as a scalar-output candidate, and the edge after it
    cannot be built (random net 265). With transpose_a its strategy fails MatMul's check ("add 0 swcs")."""
    target = os.path.join(MODELS, "propagation.py:SelfGram")
    with pytest.raises(PropagationError, match=r"tensor_redistribution init failed: mm \(MatMul\) follows .*tr"):
        propagate(graph_of(target), Mesh.parse("dp=8"), price=False)
    p = propagate(graph_of(target, "transpose_a=True"), Mesh.parse("dp=8"), price=False)
    assert strategies(p) == {"tr": ((8, 1),), "mm": ((1, 1), (1, 8)), "relu": ((1, 8),)}     # MindSpore's answer


def test_nd_tp_matmul_propagates_from_its_2d_output_and_fails_unconfigured(graph_of):
    """MindSpore 2.9.0 (8 devices, full_batch, both compiles; tests/models/ms_ut/ut6_bmm_high_dim.py): the enable_nd_tp
    anchor's output ("b", None, ("y", "x")) reaches bmm2, which takes ((2, 1, 4), (2, 4, 1)); an enable_nd_tp
    BatchMatMul no Layout configures fails the compile (its NDTP replace graph: "The dimension 18446744073709551586
    is out of the size of the device shape!"), as does one a tuple configures."""
    target = os.path.join(MODELS, "ms_ut", "ut6_bmm_high_dim.py:")
    p = propagate(graph_of(target + "BmmTP2DNdAnchor8"), Mesh.parse("b=1,x=2,y=4"), dataset_strategy=FB, price=False)
    assert strategies(p) == {"mul1": ((1, 1, 8), (1, 2, 4)), "mul2": ((2, 1, 4), (2, 4, 1))}      # MindSpore's answer
    for cls, name in (("BmmTP2D8", "mul2"), ("BmmNdTuple8", "mul1")):
        with pytest.raises(PropagationError, match=name + r" \(BatchMatMul\) carries enable_nd_tp but no Layout"):
            propagate(graph_of(target + cls), Mesh.parse("b=1,x=2,y=4"), dataset_strategy=FB, price=False)


def test_tied_table_no_reader_strategy_matches_fails_as_mindspore_does(graph_of):
    """MindSpore 2.9.0 (4 devices, full_batch): the table split (2, 1) by the MatMul anchor reaches the Gather
    over the TmpIdentity's identity edge; no Gather candidate has that layout exactly (a table split on the
    gathered axis with devices to spare repeats on the left: ranks {0, 1}, not {0, 2}), so ParamPropagation
    raises "Edge cost initialization failed." (random net 397). Replicating the table is accepted."""
    target = os.path.join(MODELS, "propagation.py:SharedTable")
    with pytest.raises(PropagationError, match=r"Edge cost initialization failed: the shared parameter w .*gather"):
        propagate(graph_of(target, "s=((1, 1), (2, 1))"), Mesh.parse("dp=4"), dataset_strategy=FB, price=False)
    p = propagate(graph_of(target, "s=((2, 1), (1, 1))"), Mesh.parse("dp=4"), dataset_strategy=FB, price=False)
    assert {k: v for k, v in strategies(p).items() if k in ("gather", "matmul")} == \
        {"gather": ((1, 1), (2, 1)), "matmul": ((2, 1), (1, 1))}                             # MindSpore's answer


def test_two_anchors_disagreeing_are_reported_with_both_names(graph_of):
    g = graph_of("examples/mlp.py:MegatronMLP", "hidden=64", "ffn=256", inputs=("x:float16[64,64]",), training=False)
    p = propagate(g, MESH, {"linear_fc1.matmul": ((2, 1), (1, 4)), "linear_fc2.matmul": ((8, 1), (1, 1))}, hardware=HW,
                  dataset_strategy=FB)
    # MindSpore 2.9.0, the Cell compiled as built (--eval): fc2's BFS runs first (created first, walking back from
    # the output) and takes gelu
    # and fc1.add ((8,1)); the redistribution lands between fc1.matmul and fc1.add
    assert p.strategy("linear_fc1.add") == ((8, 1), (1,)) and p.strategy("gelu") == ((8, 1),)
    (c,) = p.conflicts
    assert (c.src, c.dst) == ("linear_fc1.matmul", "linear_fc1.add")
    assert c.anchors == ("linear_fc1.matmul", "linear_fc2.matmul") and c.cost > 0


def test_user_errors_name_the_op(graph_of):
    with pytest.raises(StrategyError, match="reshape: Setting strategy for Reshape goes for nothing!"):
        propagate(graph_of(ST + "CoreAttention"), MESH, {"reshape": ((2, 1, 1),)}, dataset_strategy=FB)
    g = graph_of(ST + "DocsFFN")
    with pytest.raises(StrategyError, match=r"add1 \(Add\) input 0 dimension 1: split 3 does not divide size 64"):
        propagate(g, MESH, {"add1": ((1, 3), (3,))})
    with pytest.raises(StrategyError, match="anchor 'matmul3' names no operator"):
        propagate(g, MESH, {"matmul3": ((1, 1), (1, 1))})


# --- invariants -----------------------------------------------------------------------

@pytest.mark.parametrize("target, kwargs, anchors", [
    (ST + "DocsFFN", (), {}),
    ("examples/llama.py:tiny", (), {"model.layers.*.attention.wq.matmul": ((2, 1), (1, 4))}),
    ("examples/resnet.py:ResNetLike", ("batch=16",), {}),
])
def test_invariants(graph_of, target, kwargs, anchors):
    import fnmatch
    g = graph_of(target, *kwargs)
    expanded = {op.name: s for pat, s in anchors.items() for op in g if fnmatch.fnmatchcase(op.name, pat)}
    p = propagate(g, MESH, expanded, hardware=HW, dataset_strategy=FB)
    # every op has a layout; every edge's cost is the planner's cost for its two layouts
    assert set(p.choices) == {op.name for op in g}
    paid = {}
    for e in p.edges:
        r = plan_redistribution(e.src_layout, e.dst_layout)
        tl = 2 if e.dtype in ("float16", "bfloat16") else 4 if e.dtype in ("float32", "int32") else 1
        assert e.ms_communication == r.mindspore_cost(tl, e.dtype).communication
        sent = r.physical(tl, HW).bytes_sent
        # a tensor redistributed alike for several consumers is sent once (MindSpore's graph has one node)
        key = (e.src, e.out_index, e.src_layout, sent)
        assert e.fwd_bytes == sent or (e.fwd_bytes == 0 and paid.get(key)), (e.src, e.dst)
        paid[key] = paid.get(key) or e.fwd_bytes == sent
    t = p.totals()
    assert t["total_bytes"] == pytest.approx(sum(e.bytes for e in p.edges) + sum(c.bytes for c in p.op_costs.values()))
    assert sum(v["bytes"] for v in p.per_layer().values()) == pytest.approx(t["total_bytes"])
    # deterministic
    again = propagate(g, MESH, expanded, hardware=HW, dataset_strategy=FB)
    assert json.dumps(plan_dict(again), sort_keys=True) == json.dumps(plan_dict(p), sort_keys=True)
    # anchoring a propagated op at its propagated strategy changes nothing -- for ops decided by an
    # anchor's BFS that come after that anchor in seed order, in the compile of the Cell as built. (MindSpore's
    # search is order-dependent: the first seed's BFS wins, so an op decided by a later seed -- the dataset runs
    # last -- becomes, as an anchor, an earlier seed, and may flood the graph first. In the training compile an
    # anchor can also cut the search's way to a multi-input operator, which then waits and is decided from its
    # other inputs: test_an_anchor_that_cuts_the_way_to_a_waiting_add.)
    g = graph_of(target, *kwargs, training=False)
    p = propagate(g, MESH, expanded, hardware=HW, dataset_strategy=FB)
    t = p.totals()
    tried = 0
    created = creation_order(g)
    for name, ch in p.choices.items():
        if ch.sharding is None or ch.configured or ch.op.type == "Cast":
            continue
        root = ch.provenance.root
        # seeds run in OperatorInfo creation order (walking back from the output): the new anchor must
        # come after the one that decided it, or its own BFS runs first
        if root not in p.anchors or created[root] > created[name]:
            continue
        if shard(ch.op, ch.strategy, MESH.size).inputs != ch.sharding.inputs:
            continue      # follows a neighbour's device matrix: not expressible as a tuple anchor
        q = propagate(g, MESH, {**expanded, name: ch.strategy}, hardware=HW, dataset_strategy=FB)
        assert strategies(q) == strategies(p), name
        assert q.totals() == t, name
        tried += 1
        if tried == 6:
            break
    assert tried >= (1 if p.anchors else 0)


def test_an_anchor_that_cuts_the_way_to_a_waiting_add(graph_of):
    """The training compile, LLaMA tiny, dp=2,tp=4, wq anchored column-wise: the FlashAttention follows with
    ((2, 1, 4),)*3 and the residual Add after the attention with rows (2, 1, 1). Anchoring the FlashAttention at
    that very strategy changes the Add: wq's search, created first, no longer reaches it through the attention,
    so the Add waits and is decided from the residual alone, (2, 1, 4). MindSpore 2.9.0 (verify, the anchors
    file below, full_batch): 40/40 operators agree, add ((2,1,4),(2,1,4))."""
    g = graph_of("examples/llama.py:tiny")
    wq = {f"model.layers.{i}.attention.wq.matmul": ((2, 1), (1, 4)) for i in range(2)}
    p = propagate(g, MESH, wq, dataset_strategy=FB, price=False)
    fa = "model.layers.0.attention.flash_attention"
    assert p.strategy(fa) == ((2, 1, 4),) * 3 and p.strategy("model.layers.0.add") == ((2, 1, 1),) * 2
    q = propagate(g, MESH, {**wq, fa: p.strategy(fa)}, dataset_strategy=FB, price=False)
    assert q.strategy("model.layers.0.add") == ((2, 1, 4),) * 2
    assert q.strategy("model.layers.1.add") == ((2, 1, 4),) * 2      # the next layer's Add follows it


def test_megatron_mlp_inside_a_model_costs_two_allreduces(graph_of):
    """LLaMA tiny, dp=2 tp=4, Megatron anchors on the MLP (w1/w3 column, w2 row): per layer, the MLP
    costs one forward AllReduce of w2's output and, in the backward, that AllReduce's transpose (MindSpore's
    autodiff: an AllReduce of the output's gradient), each of the [B*S/dp, H] fp16 activations
    (128 x 256 x 2 bytes), ring: 2*(3/4) of it per device. The column inputs' gradients stay partial sums
    until that transpose sums them: nothing is priced on the edges into w1 and w3."""
    g = graph_of("examples/llama.py:tiny")
    anchors = {f"model.layers.{i}.feed_forward.{w}.matmul": s for i in range(2)
               for w, s in (("w1", ((2, 1), (1, 4))), ("w3", ((2, 1), (1, 4))), ("w2", ((2, 4), (4, 1))))}
    p = propagate(g, MESH, anchors, hardware=HW, dataset_strategy=FB)
    act = 2 * 3 / 4 * (2 * 128 // 2) * 256 * 2
    for i in range(2):
        c = p.op_costs[f"model.layers.{i}.feed_forward.w2.matmul"]
        assert (c.fwd_bytes, c.bwd_bytes) == (act, act)
        into = [e for e in p.edges if e.src == f"model.layers.{i}.feed_forward.reshape"]
        assert sorted(e.dst for e in into) == [f"model.layers.{i}.feed_forward.w{k}.matmul" for k in (1, 3)]
        assert sum(e.bytes for e in into) == 0


@pytest.mark.parametrize("functional", [False, True])
def test_cell_shard_is_an_anchor_as_in_mindspore(graph_of, functional):
    """MindSpore 2.9.0 (msoracle, 8 devices, full_batch) reports AShardIdentity ((2,4),) configured,
    MatMul ((2,4),(4,1)), ReLU ((2,1),), GeLU ((2,1),) for ``inner.shard(in_strategy=((2, 4),))``."""
    g = graph_of(os.path.join(MODELS, "propagation.py:CellShard"), f"functional={functional}")
    ident = g.op("inner.AShardIdentity")
    assert ident.configured and ident.in_strategy == ((2, 4),)
    assert g.op("inner.mm").inputs[0].ref == "inner.AShardIdentity"
    p = propagate(g, Mesh.parse("dp=8"), dataset_strategy=FB)
    assert [p.strategy(n) for n in ("inner.AShardIdentity", "inner.mm", "inner.relu", "gelu")] == \
        [((2, 4),), ((2, 4), (4, 1)), ((2, 1),), ((2, 1),)]


def test_shard_on_a_plain_function_anchors_its_arguments_as_in_mindspore(graph_of):
    """``mindspore.shard(fn, in_strategy=((8, 1), (4, 2), (1, 1)))`` called as ``f(exp(x), sin(y), w)``:
    MindSpore 2.9.0 (verify, 8 devices, data_parallel) puts a configured AShardIdentity on every argument,
    the Parameter included, in argument order (numbered from the last: op2, op1, op0), and propagates
    Exp ((8,1)), Sin ((4,2)) backward from them, Add ((8,1),(8,1)), MatMulExt ((8,1),(1,1))."""
    g = graph_of(os.path.join(MODELS, "propagation.py:ShardedFunction"))
    idents = [op.name for op in g if op.type == "AShardIdentity"]
    assert idents == ["f.AShardIdentity#2", "f.AShardIdentity#1", "f.AShardIdentity"]
    assert [g.op(n).in_strategy for n in idents] == [((8, 1),), ((4, 2),), ((1, 1),)]
    assert g.op("f.AShardIdentity").inputs[0].kind == "param"
    p = propagate(g, Mesh.parse("dp=8"))
    assert [p.strategy(n) for n in ("exp", "sin", "f.add", "f.mat_mul_ext", "f.re_lu", "muls")] == \
        [((8, 1),), ((4, 2),), ((8, 1), (8, 1)), ((8, 1), (1, 1)), ((8, 1),), ((8, 1),)]
    assert not any("not located" in n for n in getattr(g, "notes", []))


def test_layout_anchor_on_gather_is_refused_as_mindspore_does(graph_of):
    """MindSpore 2.9.0 fails to compile a Layout strategy on Gather (vector::_M_range_check, via verify);
    the tuple form is the way, and the error says which tuple."""
    from strategist.vocab.graph import ShardLayout
    g = graph_of("examples/llama.py:tiny", "batch=8")
    mesh = Mesh.parse("dp=2,tp=4")
    lay = (ShardLayout((2, 4), ("dp", "tp"), ((0,), ())), ShardLayout((2, 4), ("dp", "tp"), ((1,), ())))  # (tp), (dp)
    with pytest.raises(StrategyError, match=r"rejects a Layout strategy on Gather.*tuple form, e\.g\. \[\[4, 1\], \[2, 1\]\]"):
        propagate(g, mesh, {"model.tok_embeddings.gather": Anchor("model.tok_embeddings.gather", None, lay)})
    p = propagate(g, mesh, {"model.tok_embeddings.gather": ((4, 1), (2, 1))})
    assert p.strategy("model.tok_embeddings.gather") == ((4, 1), (2, 1))


def test_cast_before_a_layout_anchor_takes_a_generated_candidate(graph_of):
    """MindSpore's PreProcessPreCastForSP configures a Cast feeding a configured operator with the least-cost of
    the Cast's GENERATED strategies (GetPrevOpSwcByNextOpStrategyWithMiniComm): no candidate following the
    consumer's device matrix is added there. Before GeLU configured with Layout (dp=2, tp=4)("tp", "dp", "None")
    (qwen3_moe's final_layernorm) the Cast is (1, 2, 1) and the ReLU before it, decided backward, too (MindSpore
    2.9.0 via verify: relu ((1,2,1))); the zero-cost follow of the layout gave ((4,2,1))."""
    g = graph_of(os.path.join(MODELS, "layouts.py:CastBeforeLayout"))
    p = propagate(g, Mesh.parse("dp=2,tp=4"), dataset_strategy="full_batch")
    assert p.strategy("cast") == ((1, 2, 1),)
    assert p.strategy("relu") == ((1, 2, 1),)
    assert p.strategy("gelu") == ((4, 2, 1),)


def test_a_multi_input_producer_gets_no_candidate_following_a_layout_consumer(graph_of):
    """CostGraph::AddSwcUnderNextOpDevMatrix returns first when the producer is multi-input, even before a
    Layout-configured consumer: tests/models/layouts.py:AddBeforeLayoutAdd (applied telechat3_moe's MoE add of
    the routed and shared experts, before the residual add configured (S over tp, B over dp)). The Add is
    decided backward among its generated strategies: (1, 2, 1), whose repeat sits right of B's axis, so B lies
    over dp and only slices reach the residual's layout; the Transpose then follows it. MindSpore 2.9.0 via
    verify: transpose ((2,1,1)), add ((1,2,1),(1,2,1)); the zero-cost follow of the layout gave ((4,2,1)) and
    ((2,4,1))."""
    g = graph_of(os.path.join(MODELS, "layouts.py:AddBeforeLayoutAdd"))
    p = propagate(g, Mesh.parse("dp=2,tp=4"), dataset_strategy="full_batch")
    assert p.strategy("add") == ((1, 2, 1), (1, 2, 1))
    assert p.strategy("transpose") == ((2, 1, 1),)
    assert p.strategy("residual") == ((4, 2, 1), (4, 2, 1))


def test_a_self_defined_tuple_operator_takes_its_layouts_and_propagates_nothing(graph_of):
    """MindFormers' MTP Concat (tests/models/layouts.py:SelfDefinedConcat): marked ``self_define_shard``, its Layouts
    on a tuple input are taken as set (MindSpore builds a SelfDefineShardInfo; a plain Concat refuses a Layout),
    and, a "new shape" operator, its edges propagate nothing (IsOpNotPropagate). The ReLU before it, with no other
    neighbour, keeps its default; the Reshape after it runs from the Concat's layout into the MatMul's rows.
    MindSpore 2.9.0 via verify: relu ((1,1,1)), matmul ((8,1),(1,1)); no strategy recorded for the Concat; the
    one edge moving data agrees. Propagating over the Concat gave relu ((4,2,1))."""
    g = graph_of(os.path.join(MODELS, "layouts.py:SelfDefinedConcat"))
    p = propagate(g, Mesh.parse("dp=2,tp=4"), dataset_strategy="full_batch")
    assert p.strategy("concat") == ((4, 2, 1), (4, 2, 1))
    assert p.strategy("relu") == ((1, 1, 1),)
    assert p.choices["relu"].provenance.direction != "backward"
    assert p.choices["reshape"].inputs[0] == p.choices["concat"].outputs[0]
    assert p.choices["reshape"].outputs[0] == p.choices["matmul"].inputs[0]


@pytest.mark.parametrize("residual_first, add", [("True", (2, 1, 1)), ("False", (1, 2, 1))])
def test_residual_cast_copies_and_a_waiting_add(graph_of, residual_first, add):
    """telechat3's residual (tests/models/layouts.py:ResidualCastCopies): the layer and its norm each Cast the
    ReLU's output to float32. MindSpore's parallel graph keeps the two Casts (no CSE before step_parallel_begin):
    the norm's is configured from the Layout-anchored GeLU (PreProcessPreCastForSP), the residual's follows the
    ReLU's layout. With the residual first the row MatMul's search decides the Add first (rows over dp, from its
    Reshape and Cast); second, the ReLU's search reaches the Add over the residual Cast only, the Add waits and
    is decided from that one visited edge among its GENERATED strategies: a multi-input operator gets no
    candidate following a single producer (CostGraph::AddSwcUnderPrevOpDevMatrix; the Multi follow needs every
    input visited), so not the ReLU's (tp, dp) layout ((4, 2, 1) on its device matrix) but (1, 2, 1).
    MindSpore 2.9.0 via verify (compiled as built, --eval): add ((2,1,1),(2,1,1)) / ((1,2,1),(1,2,1)). That (1, 2, 1) of the norm's Cast only
    steers the search: MindSpore then drops every Cast's strategy, and in its parallel graph the Cast passes the
    ReLU's layout on to the GeLU, which is the same: nothing moves there."""
    g = graph_of(os.path.join(MODELS, "layouts.py:ResidualCastCopies"), f"residual_first={residual_first}",
                 training=False)
    casts = sorted(op.name for op in g if op.type == "Cast" and op.inputs[0].ref == "relu")
    assert len(casts) == 2 and casts[-1] == "norm.cast"
    mesh = Mesh.parse("dp=2,tp=4")
    searched = propagate(g, mesh, dataset_strategy="full_batch", price=False)
    assert searched.strategy("add") == (add, add)
    assert searched.strategy("norm.cast") == ((1, 2, 1),) and searched.strategy("relu") == ((4, 2, 1),)
    p = propagate(g, mesh, dataset_strategy="full_batch")
    assert p.strategy("add") == (add, add)
    assert p.choices["norm.cast"].outputs[0] == p.choices["relu"].outputs[0]
    assert p.choices["norm.cast"].provenance.direction == CAST_PASS
    assert not [e for e in p.edges if "norm.cast" in (e.src, e.dst) and e.fwd_bytes]


# --- speed without changing a result ------------------------------------------------------

@pytest.mark.parametrize("target, kwargs, anchors", [
    (ST + "DocsFFN", (), {}),
    ("examples/llama.py:tiny", (), {"model.layers.*.attention.wq.matmul": ((2, 1), (1, 4)),
                                    "model.layers.*.feed_forward.w2.matmul": ((2, 4), (4, 1))}),
])
def test_pricing_an_unpriced_plan_is_propagating_priced(graph_of, target, kwargs, anchors):
    """The advisor searches each anchor set once and prices the unpriced plan when it needs its cost."""
    import fnmatch
    from strategist.propagate import price_plan
    g = graph_of(target, *kwargs)
    expanded = {op.name: s for pat, s in anchors.items() for op in g if fnmatch.fnmatchcase(op.name, pat)}
    unpriced = propagate(g, MESH, expanded, hardware=HW, dataset_strategy=FB, price=False)
    later = price_plan(unpriced)
    now = propagate(g, MESH, expanded, hardware=HW, dataset_strategy=FB)
    assert later.priced and later.totals() == now.totals() and later.flops == now.flops
    assert json.dumps(plan_dict(later), sort_keys=True) == json.dumps(plan_dict(now), sort_keys=True)
    assert list(later.anchors) == list(now.anchors)


def test_propagation_pauses_the_cyclic_gc_and_restores_it():
    import gc
    from strategist.engine.search.caches import no_cyclic_gc
    assert gc.isenabled()
    with no_cyclic_gc():
        assert not gc.isenabled()
        with no_cyclic_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()          # the inner pause does not end the outer one
    assert gc.isenabled()
    gc.disable()
    try:
        with no_cyclic_gc():
            pass
        assert not gc.isenabled()          # left as the caller had it
    finally:
        gc.enable()
    with pytest.raises(ValueError), no_cyclic_gc():
        raise ValueError
    assert gc.isenabled()


def test_layouts_hash_once_as_their_fields_do():
    import pickle
    from strategist.vocab.layout import Layout
    a = Layout((8, 4), (2, 4), ((0,), (1,)))
    b = Layout((8, 4), (2, 4), ((0,), (1,)))
    assert a == b and a is not b and hash(a) == hash(b) == hash(((8, 4), (2, 4), ((0,), (1,)), ()))
    assert a != Layout((8, 4), (2, 4), ((1,), (0,))) and a != Layout((8, 4), (2, 2, 2), ((0,), (1,)))
    c = Layout((8, 4), (2, 4), ((0,), ()))
    assert c != Layout((8, 4), (2, 4), ((0,), ()), (1,))
    assert a != ((8, 4), (2, 4), ((0,), (1,)), ()) and len({a, b}) == 1
    assert pickle.loads(pickle.dumps(a)) == a and hash(pickle.loads(pickle.dumps(a))) == hash(a)


def test_a_reshape_that_gathers_inside_pays_for_it(graph_of):
    """A Reshape whose output layout is not its input's data redistributes inside itself (MindSpore's
    ReshapeInfo takes its input layout from the producer and its output layout from a consumer). dp=4: the
    ReLU's rows split 4 ways, the ReduceSum's [512] 2 ways; the Reshape between them gathers pairs of
    devices: each holds 2 of the 8 rows (2 x 64 fp32 = 512 B) and receives its partner's 512 B. No
    gradient flows (no Parameter), so only the forward AllGather is paid, once. (The Cell compiled as built; in the
    training compile, other creation order, the Reshape takes its output layout from the replicated Mul instead.)"""
    g = graph_of(os.path.join(MODELS, "propagation.py:ReshapeGather"), training=False)
    p = propagate(g, Mesh.parse("dp=4"), {"relu": ((4, 1),), "mul": ((1,), (1,)), "sum": ((2,),)},
                  hardware=HW, dataset_strategy=FB)
    ch = p.choices["reshape"]
    assert ch.inputs[0].split(0) == 4 and ch.outputs[0].split(0) == 2
    c = p.op_costs["reshape"]
    assert c.fwd_bytes == 512 and [s.kind for s in c.steps] == ["AllGather"]
    assert sum(e.fwd_bytes for e in p.edges if "reshape" in (e.src, e.dst) and e.dst != "mul") == 0


def test_an_anchor_configures_every_call_of_its_primitive(graph_of):
    """A strategy lives on the primitive: anchoring ``transpose`` (``self.transpose.shard(...)``) configures
    its second call ``transpose#1`` too, as MindSpore does; an explicit anchor on the second call wins."""
    g = graph_of(os.path.join(MODELS, "propagation.py:TwoCalls"))
    assert {op.name for op in g if op.type == "Transpose"} == {"transpose", "transpose#1"}
    p = propagate(g, Mesh.parse("dp=2,tp=4"), {"transpose": ((1, 2, 4),)}, dataset_strategy=FB)
    assert p.strategy("transpose#1") == ((1, 2, 4),) and p.choices["transpose#1"].provenance.direction == "seed"
    p = propagate(g, Mesh.parse("dp=2,tp=4"), {"transpose": ((1, 2, 4),), "transpose#1": ((2, 1, 4),)},
                  dataset_strategy=FB)
    assert p.strategy("transpose#1") == ((2, 1, 4),)


def test_step_estimate_charges_memory_bound_work():
    """Element-wise work is priced by the bytes it moves through device memory (every input slice read, every
    output slice written, x3 with a backward): a GeLU every device repeats on fc1's whole [8192, 4096] float16
    output moves 8 times what one split 8 ways does, and the step estimate carries it."""
    from strategist.frontend.loader import load_graph
    g = load_graph("examples/mlp.py:MegatronMLP", inputs=["x:float16[8192,1024]"])
    hw = load_hardware("atlas-800t-a2")
    assert hw.hbm_bandwidth == 1600e9 * 0.8
    gelu = next(op.name for op in g if op.type == "GeLU")
    plans = [propagate(g, Mesh.parse("dp=2,tp=4"), {gelu: Anchor(gelu, s)}, use_model_strategies=False,
                       dataset_strategy="full_batch", hardware=hw) for s in (((1, 1),), ((2, 4),))]
    # hand-worked: 8192 * 4096 fp16 = 64 MiB read and 64 MiB written, forward and twice backward
    assert plans[0].traffic[gelu] == 3 * 2 * 8192 * 4096 * 2 == 8 * plans[1].traffic[gelu]
    for p in plans:
        t = p.totals()
        assert t["memory_bound_bytes"] == sum(p.traffic.values())
        assert t["memory_bound_seconds"] == pytest.approx(t["memory_bound_bytes"] / hw.hbm_bandwidth)
        # the serial sum (the step estimate, the default "step_seconds", is the schedule's)
        assert t["serial_step_seconds"] == pytest.approx(t["total_seconds"] + t["compute_seconds"] +
                                                         t["memory_bound_seconds"])
        # Reshapes are views and MatMuls are priced by their FLOPs: neither moves memory-bound bytes here
        assert not any(p.choices[n].op.type in ("Reshape", "MatMul") for n in p.traffic)


def test_reshape_costs_are_cached_by_layouts_whatever_the_shape(graph_of):
    """MindSpore caches a Reshape strategy-with-cost by the (device arrangement, tensor map) of its input and
    output layouts only (ReshapeInfo::SetCostForReshape, "Find the same cost in cache, skip calculation"): the
    first Reshape to price a layout pair fixes its cost for every later one. In ReshapeCostCache the big
    [1, 64, 256] -> [1, 64, 8, 32] Reshape is created first; the small [1, 64, 8] -> [1, 64, 8, 1] one, reached
    backward from a replicated ReLU, then finds its replicated pairs 32 times dearer than the pair from the
    ReduceSum's reduced-axis split, priced afresh, and takes that: MindSpore 2.9.0 (verify, dp=2,tp=4,
    full_batch) sum ((1, 1, 2, 1)); without the cache every zero-communication pair tied and the sum stayed
    whole (deepseek3's router sum_ext and the experts' token permutation after it, 10 operators). The Cell
    compiled as built (--eval): that creation order."""
    g = graph_of(os.path.join(MODELS, "propagation.py:ReshapeCostCache"), training=False)
    p = propagate(g, Mesh.parse("dp=2,tp=4"), dataset_strategy="full_batch")
    assert p.strategy("sum") == ((1, 1, 2, 1),)
    assert p.strategy("relu3") == ((1, 1, 1, 1),)
    assert p.strategy("relu1") == ((1, 1, 1),) and p.strategy("relu2") == ((1, 1, 1, 1),)


#: MindSpore 2.9.0's answers for IndexSelectRows (verify, dp=2,tp=4, full_batch)
INDEX_SELECT_MS = {
    "s1=((2,1),)": {"relu1": ((2, 1),), "isel": ((2, 4), (1,)), "relu2": ((2, 4),), "sigmoid": ((2, 4),)},
    "s1=((4,1),)": {"relu1": ((4, 1),), "isel": ((4, 2), (1,)), "relu2": ((4, 2),), "sigmoid": ((4, 2),)},
    "s2=((2,2),)": {"relu1": ((1, 1),), "isel": ((1, 2), (2,)), "relu2": ((2, 2),), "sigmoid": ((2, 2),)},
    "s2=((2,4),)": {"relu1": ((1, 1),), "isel": ((1, 4), (2,)), "relu2": ((2, 4),), "sigmoid": ((2, 4),)},
}


@pytest.mark.parametrize("kw", sorted(INDEX_SELECT_MS))
def test_index_select_is_a_gather(graph_of, kw):
    """MindSpore's IndexSelectInfo is a GatherInfo (gather_info.h): Gather's candidates and device matrix
    [index, x...], and, chosen from a candidate, no layout for a neighbour to follow. strategist had a rule of its
    own (device matrix [x..., index], every split allowed): on deepseek3 the MoE stand-in's IndexSelect then
    offered the Reshape before it 20 consumer layouts where MindSpore has 18, some on other device orders, and those
    pairs entered MindSpore's shape-blind Reshape cost cache first; the MTP layer's shared-experts fc2 Reshape read
    them (not the output head's Reshape costs, and not its own), and its MatMul and the MLP's add took another
    split (((1, 1), (2, 1)) for MindSpore's ((1, 2), (2, 2)))."""
    g = graph_of(os.path.join(MODELS, "propagation.py:IndexSelectRows"), kw)
    p = propagate(g, MESH, dataset_strategy=FB)
    assert {n: p.strategy(n) for n in INDEX_SELECT_MS[kw]} == INDEX_SELECT_MS[kw]


#: MindSpore 2.9.0's answers for LazyAccum, s=((8,), (8,)) (verify, dp=2,tp=4, full_batch; GLOG_v=1 "The strategy
#: is"). Lazy: no TmpIdentity ("CR_..._LazyAccumBlock_construct" takes acc as a graph parameter without a default);
#: the compile fails later, slicing acc for the Add ("input1.shape = [64] and input2.shape = [8]"), after propagation.
#: (MindFormers' qwen3_moe compiles with the same disagreement on fi_accu: add_accu ((8),(8)), assignadd ((1),(1)).)
#: Plain: TmpIdentity "identity_info" [[8]], and verify agrees 3/3.
LAZY_ACCUM_MS = {
    "lazy=True": {"block.add": ((8,), (8,)), "block.assignadd": ((1,), (1,)), "block.relu": ((1,),)},
    "lazy=False": {"block.add": ((8,), (8,)), "block.assignadd": ((8,), (8,)), "block.relu": ((8,),)},
}


@pytest.mark.parametrize("kw", sorted(LAZY_ACCUM_MS))
def test_lazy_inline_parameters_get_no_tmp_identity(graph_of, kw):
    """A Parameter read by two operators inside a ``@lazy_inline`` Cell gets no TmpIdentity: MindSpore's parallel
    passes see the Cell as a reused func graph whose weights are graph parameters without a default value, and
    ``FindParameterUsers`` skips those. qwen3_moe's router (MindFormers' GPTModel is lazy-inline): ``fi_accu`` read by
    ``add_accu`` and ``assignadd``; strategist crossed a TmpIdentity from add_accu to the AssignAdd (((8,), (8,))),
    MindSpore left it unreached behind a stuck waiting list (((1,), (1,)))."""
    g = graph_of(os.path.join(MODELS, "propagation.py:LazyAccum"), kw, "s=((8,), (8,))")
    assert getattr(g, "lazy_inline_cells", ()) == (("block",) if kw == "lazy=True" else ())
    p = propagate(g, MESH, dataset_strategy=FB)
    assert {n: p.strategy(n) for n in LAZY_ACCUM_MS[kw]} == LAZY_ACCUM_MS[kw]
    if kw == "lazy=True":
        # as load_mindformers records it (MindFormers' GPTModel: built stand-alone without the decorator, its Cell
        # path recorded): the same plan
        plain = graph_of(os.path.join(MODELS, "propagation.py:LazyAccum"), "lazy=False", "s=((8,), (8,))")
        plain = plain.derived(list(plain))
        plain.lazy_inline_cells = ("block",)
        q = propagate(plain, MESH, dataset_strategy=FB)
        assert {n: q.strategy(n) for n in LAZY_ACCUM_MS[kw]} == LAZY_ACCUM_MS[kw]


def test_lazy_inline_copies_take_the_first_call_strategy(graph_of):
    """Three ``@lazy_inline`` blocks are one reused graph in MindSpore (tests/models/reused_blocks.py): every call's
    operator takes the first call's strategy, an anchor on a later call's operator is ignored with a warning, and
    the plan prices every call's edges -- the same communication as the same blocks without the decorator, whose
    shard() also reaches every call. Without a tuple dataset strategy the compile as built (--eval) is not folded:
    each call is planned on its own, and the warning says so."""
    path = os.path.join(MODELS, "reused_blocks.py:LazyStack")
    g = graph_of(path, "layers=3", "m1=((2,1),(1,4))")
    assert g.lazy_groups == (("blocks.0", "blocks.1", "blocks.2"),)
    p = propagate(g, MESH, {"blocks.2.m2": ((1, 4), (4, 2))})
    for k in (1, 2):
        for n in ("m1", "act", "m2", "add"):
            assert p.choices[f"blocks.{k}.{n}"] is p.choices[f"blocks.0.{n}"]
    assert p.strategy("blocks.2.m2") == p.strategy("blocks.0.m2") != ((1, 4), (4, 2))
    assert any(w.startswith("the anchor of blocks.2.m2 is ignored: it is a later call of a @lazy_inline Cell")
               for w in p.warnings)
    assert any("planned so (the first call's operators stand for all" in w for w in p.warnings)
    plain = propagate(graph_of(path, "layers=3", "m1=((2,1),(1,4))", "lazy=0"), MESH)
    assert {n: p.strategy(n) for n in p.choices} == {n: plain.strategy(n) for n in plain.choices}
    assert p.totals()["total_bytes"] == plain.totals()["total_bytes"] > 0
    ev = propagate(graph_of(path, "layers=3", "m1=((2,1),(1,4))", training=False), MESH)
    assert any("in the compile as built (--eval) that is not modelled" in w for w in ev.warnings)


def test_index_select_candidates_are_gathers(graph_of):
    """The 18 strategies MindSpore 2.9.0 lists for IndexSelect(x[64, 16], 0, idx[32]) on 8 devices (GLOG_v=1,
    "Successfully generated the ... strategy"), in its order: ((2, 1), (2,)) and ((2, 2), (1,)) fail
    SetCostUnderStrategy (the split axis beside another split on 4 of the 8 devices). deepseek3's
    x[32768, 7168], idx[262144] lists the same 18."""
    from strategist.engine.rules.candidates import candidates
    from strategist.engine.rules.registry import rule_for
    g = graph_of(os.path.join(MODELS, "propagation.py:IndexSelectRows"))
    op = g.op("isel")
    ms = [((1, 1), (1,)), ((1, 1), (2,)), ((1, 1), (4,)), ((1, 1), (8,)), ((1, 2), (1,)), ((1, 2), (2,)),
          ((1, 2), (4,)), ((1, 4), (1,)), ((1, 4), (2,)), ((1, 8), (1,)), ((2, 1), (1,)), ((2, 1), (4,)),
          ((2, 2), (2,)), ((2, 4), (1,)), ((4, 1), (1,)), ((4, 1), (2,)), ((4, 2), (1,)), ((8, 1), (1,))]
    assert candidates(op, 8, rule_for(op)) == ms
    # the device matrix is [idx, x rows, x columns] (MindSpore's log: "the dev matrix shape is {2, 1, 1}")
    assert shard(op, ((1, 1), (2,)), 8).inputs[1].dev_matrix[0] == 2


def test_mask_cast_before_a_cp_flash_attention_lands_on_its_devices(graph_of):
    """MindFormers' legacy glm4 at dp=2,cp=2,tp=2: the causal mask's Cast before FlashAttentionScore (BSH,
    ((2, 2, 2), (2, 1, 2), (2, 1, 2), (2, 1, 2, 1))) is configured by PreProcessPreCastForSP with the candidate of
    least redistribution to the FA's mask. MindSpore's FA device matrix for BSH is [batch, s1, n1]
    (FlashAttentionScoreInfo::InferDevMatrixShape), so (2, 1, 2, 1) lands on the FA's own devices (MindSpore's log:
    "CastInfo: Set strategy [[2, 1, 2, 1]]"), and the Less building the mask follows backward through the Reshape:
    MindSpore 2.9.0 via verify: less ((2, 2, 1), ()). strategist's former [batch, n1, s1] order gave ((2, 1, 1), ())."""
    g = graph_of(os.path.join(MODELS, "layouts.py:MaskCastBeforeCpFlashAttention"))
    p = propagate(g, Mesh.parse("dp=2,cp=2,tp=2"), dataset_strategy="full_batch")
    assert p.strategy("cast") == ((2, 1, 2, 1),)
    assert p.strategy("less") == ((2, 2, 1), ())


def test_a_gather_table_split_on_its_axis_takes_no_other_split_beside_split_ids(graph_of):
    """GatherInfo::GetGatherMode (gather_info.cc): a table split on its gathered axis beside split indices is
    SHARD_BATCH_AND_AXIS only when a 2-d table and 2-d indices are each split on dim 0 alone, together on every
    device (Megatron's vocabulary-parallel embedding); otherwise ShardAxisImpl refuses split indices. MindSpore
    2.9.0 (verify, LLaMA-70B 2 layers, dp=8,tp=8, full_batch): the table ((2, 4), (8, 1)) configured fails with
    "operator Gather SetCostUnderStrategy failed"; ((8, 1), (8, 1)) compiles (40/40 agree). The advisor took the
    refused layout as the fastest of the table's candidates until strategist's generation dropped it as
    MindSpore's does. One-dimensional ids (nn.Embedding flattens them) take any table split beside them on every
    device (MindSpore 2.9.0's "Sharding index, dp and mp": the GPT's ((2, 2), (2,)) on 8 taken, ((2, 1), (2,))
    on 8 refused). A table split on its axis with devices to spare takes no other split, configured or generated."""
    from strategist.engine.rules.candidates import candidates
    from strategist.engine.rules.registry import rule_for
    g = graph_of("examples/llama.py:llama2_70b", "layers=2", "batch=8")
    emb = "model.tok_embeddings.gather"
    cands = candidates(g.op(emb), 64, rule_for(g.op(emb)))
    assert ((8, 1), (8, 1)) in cands and ((1, 8), (8, 1)) in cands
    assert not [s for s in cands if s[0][0] > 1 and (s[0][1] > 1 or s[1][1] > 1) and s[1][0] > 1]
    mesh = Mesh.parse("dp=8,tp=8")
    assert propagate(g, mesh, {emb: ((8, 1), (8, 1))}, dataset_strategy=FB, price=False).strategy(emb) == \
        ((8, 1), (8, 1))
    with pytest.raises(StrategyError, match=r"\(\(2, 4\), \(8, 1\)\): MindSpore 2.9 rejects it"):
        propagate(g, mesh, {emb: ((2, 4), (8, 1))}, dataset_strategy=FB, price=False)
    # with devices to spare the gathered axis is the table's only split, configured too (MindSpore 2.9.0, verify's
    # child, LLaMA tiny on dp=2,tp=4: ((2, 2), (1, 1)) rejected, ((2, 1), (1, 1)) taken)
    tiny = graph_of("examples/llama.py:tiny")
    with pytest.raises(StrategyError, match=r"\(\(2, 2\), \(1, 1\)\): MindSpore 2.9 rejects it.*devices to spare"):
        propagate(tiny, MESH, {emb: ((2, 2), (1, 1))}, dataset_strategy=FB, price=False)
    assert propagate(tiny, MESH, {emb: ((2, 1), (1, 1))}, dataset_strategy=FB, price=False).strategy(emb) == \
        ((2, 1), (1, 1))
    gpt = graph_of("examples/gpt_nn.py:GPT", "hidden=512", "heads=8", "seq=128", "batch=8", "vocab=4096")
    cands = candidates(gpt.op("wte.gather"), 8, rule_for(gpt.op("wte.gather")))
    assert {((4, 1), (2,)), ((2, 2), (2,)), ((2, 1), (4,))} <= set(cands) and ((2, 1), (2,)) not in cands


def test_per_input_dataset_strategy_names_inputs_and_leaves_the_rest_unsplit(graph_of):
    """A per-input dataset strategy naming no input of the model is a one-line error naming the inputs; an input
    it leaves out is unsplit, as verify asks MindSpore (which takes an unsplit input beside split ones: the
    rules.MulReLUBias fixtures)."""
    g = graph_of("tests/models/rule_nets.py:MulReLUBias")
    mesh = Mesh.parse("dp=16")
    with pytest.raises(StrategyError, match=r"names 'z', not an input of the model \(its inputs: x, b\)"):
        propagate(g, mesh, dataset_strategy={"x": (16, 1, 1, 1), "z": (4,)}, price=False)
    p = propagate(g, mesh, dataset_strategy={"x": (16, 1, 1, 1)}, price=False)
    q = propagate(g, mesh, dataset_strategy={"x": (16, 1, 1, 1), "b": (1,)}, price=False)
    assert strategies(p) == strategies(q)
    assert strategies(p)["add"] == ((16, 1, 1, 1), (1,))
