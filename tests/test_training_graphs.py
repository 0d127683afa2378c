"""What MindSpore's parallel pass sees of a training network (MindFormers' models): operator creation order
without a VirtualOutput, sub-graphs of custom-bprop Cells, Reshapes folded once Morph bodies are inlined,
and EmbeddingInfo's refusals. Expected values are MindSpore 2.9.0's own (verify's child log on qwen3 at
dp=2,tp=4, and msoracle runs on 8 devices), see the docstrings."""
from strategist.vocab.graph import Input, Op, OpGraph, TensorSpec
from strategist.frontend.mindformers import fold_reshapes
from strategist.engine.rules.candidates import candidates
from strategist.engine.search.orders import creation_order
from strategist.vocab.anchors import DATASET


def _op(name, typ, cell, ins, out, dtype="float32"):
    return Op(name=name, type=typ, cell_path=cell, cell_class="C", instance_name=name.rsplit(".", 1)[-1],
              full_name="", inputs=tuple(ins), outputs=(TensorSpec(tuple(out), dtype),))


def _x(ref, shape):
    return Input("op", ref, 0, TensorSpec(tuple(shape), "float32"))


def _loss_net(training: bool):
    """model.relu -> model.mm -> loss (log_softmax and nllloss Cells with a custom bprop) -> loss.div."""
    x = Input("input", "x", spec=TensorSpec((8, 16), "float32"))
    w = Input("param", "w", spec=TensorSpec((16, 16), "float32"))
    ops = [
        _op("model.relu", "ReLU", "model", [x], (8, 16)),
        _op("model.mm", "MatMul", "model", [_x("model.relu", (8, 16)), w], (8, 16)),
        _op("loss.ls.max", "ReduceMax", "loss.ls", [_x("model.mm", (8, 16))], (8, 1)),
        _op("loss.ls.sub", "Sub", "loss.ls", [_x("model.mm", (8, 16)), _x("loss.ls.max", (8, 1))], (8, 16)),
        _op("loss.nll.neg", "Neg", "loss.nll", [_x("loss.ls.sub", (8, 16))], (8, 16)),
        _op("loss.nll.sum", "ReduceSum", "loss.nll", [_x("loss.nll.neg", (8, 16))], (8,)),
        _op("loss.div", "RealDiv", "loss", [_x("loss.nll.sum", (8,)), _x("model.relu", (8, 16))], (8, 16)),
    ]
    g = OpGraph(ops, {"x": x.spec}, {}, [_x("loss.div", (8, 16))], {})
    g.deferred_cells = ("loss.ls", "loss.nll")
    g.training = training
    return g


def test_training_graph_creates_operators_in_topo_sort_order_callee_bodies_first():
    """MindFormers' qwen3 in verify's child (set_train(True), so no VirtualOutput): "Successfully created
    operator MulInfo0 / NegInfo1 / SumExtInfo2" (_NLLLoss's body), "ArgMaxWithValueInfo3 ... OneHotExtInfo9"
    (_LogSoftmax's), then "ReshapeInfo10 / EmbeddingInfo11 ..." from the model's input on; both loss Cells
    define bprop, so their graphs are called, not inlined, when the parallel pass collects its nodes with
    TopoSort(ret, SuccDeeperSimple)."""
    order = creation_order(_loss_net(True))
    names = sorted((n for n in order if n != DATASET), key=order.get)
    assert names == ["loss.nll.neg", "loss.nll.sum", "loss.ls.max", "loss.ls.sub", "model.relu", "model.mm",
                     "loss.div"]
    assert order[DATASET] > max(v for k, v in order.items() if k != DATASET)


def test_eval_graph_keeps_the_virtual_output_dfs_order():
    order = creation_order(_loss_net(False))
    assert min(order, key=order.get) == "loss.div"          # pre-order from the output, as before


def test_fold_reshapes_as_reshape_eliminater():
    """verify's child on qwen3: linear_qkv's [S*B, N] -> [S, B, N] and the split's [S, B, n, d] Reshape are
    one ReshapeInfo (a new node: "UniqueId: 101275 and UniqueIdThroughCopy: 101275"); the q_layernorm round
    trip [S, B, n, d] -> [S, B, h] -> [S, B, n, d] is gone (CastInfo27 feeds CastInfo28 directly)."""
    x = Input("input", "x", spec=TensorSpec((32, 10), "float32"))
    ops = [
        _op("relu", "ReLU", "", [x], (32, 10)),
        _op("r1", "Reshape", "", [_x("relu", (32, 10)), Input("const", value=(4, 8, 10))], (4, 8, 10)),
        _op("r2", "Reshape", "", [_x("r1", (4, 8, 10)), Input("const", value=(4, 8, 2, 5))], (4, 8, 2, 5)),
        _op("c1", "Cast", "", [_x("r2", (4, 8, 2, 5))], (4, 8, 2, 5)),
        _op("r3", "Reshape", "", [_x("c1", (4, 8, 2, 5)), Input("const", value=(4, 8, 10))], (4, 8, 10)),
        _op("r4", "Reshape", "", [_x("r3", (4, 8, 10)), Input("const", value=(4, 8, 2, 5))], (4, 8, 2, 5)),
        _op("c2", "Cast", "", [_x("r4", (4, 8, 2, 5))], (4, 8, 2, 5)),
    ]
    g = OpGraph(ops, {"x": x.spec}, {}, [_x("c2", (4, 8, 2, 5))], {})
    g.training = True
    f = fold_reshapes(g)
    assert [op.name for op in f] == ["relu", "r2", "c1", "c2"]
    assert f.op("r2").inputs[0].ref == "relu" and f.op("c2").inputs[0].ref == "c1"
    assert f.training is True


def _embedding(ids_shape, table_shape=(1024, 64)):
    ids = Input("input", "ids", spec=TensorSpec(tuple(ids_shape), "int32"))
    table = Input("param", "w", spec=TensorSpec(tuple(table_shape), "float32"))
    return _op("emb", "Embedding", "", [ids, table], tuple(ids_shape) + tuple(table_shape[1:]))


def test_embedding_with_flat_ids_generates_only_vocabulary_splits_over_every_device():
    """qwen3's EmbeddingInfo (ids [32768], 8 devices): "Successfully generated the 1st strategy: [[1], [2, 4]]",
    2nd [[1], [4, 2]], 3rd [[1], [8, 1]]; every other candidate "SetCostUnderStrategy failed" (msoracle:
    Embedding.shard(((1,), (1, 1))), ((1,), (1, 8)), ((1,), (2, 1))) fail the same way)."""
    assert candidates(_embedding((256,)), 8) == [((1,), (2, 4)), ((1,), (4, 2)), ((1,), (8, 1))]


def test_embedding_with_2d_ids_keeps_the_unsplit_vocabulary():
    """msoracle, 8 devices: ((1, 1), (1, 1)) and ((1, 1), (1, 8)) taken, ((1, 1), (2, 1)) and ((1, 1), (2, 2))
    refused: a vocabulary split must use every device."""
    got = candidates(_embedding((8, 32)), 8)
    assert ((1, 1), (1, 1)) in got and ((1, 1), (1, 8)) in got and ((1, 1), (2, 4)) in got
    assert ((1, 1), (2, 1)) not in got and ((1, 1), (2, 2)) not in got


def test_embedding_splits_its_table_over_every_device_and_its_vocabulary_by_the_ids_rows():
    """mindone LLaMA's EmbeddingInfo in verify's child (ids int32 [2, 2048], table float32 [32000, 256], 8 devices,
    GLOG_v=1): "Successfully generated" [[1, 1], [1, 1]], [[1, 1], [1, 8]], [[1, 1], [2, 4]] only -- [1, 2], [1, 4]
    and the other splits on fewer devices "param_strategy ... is not supported" (CheckProductValidity), [4, 2] and
    [8, 1] fail InferTensorInfo (the output's dim 0, 2 rows, takes the vocabulary's split). GetStrategyByVisitedEdges
    prices them "computation cost: 3.27844e+07", "4.11238e+06", "4.11238e+06": the ids' slice plus the table's."""
    from strategist.engine.rules.computation import computation_cost
    from strategist.engine.rules.registry import rule_for
    from strategist.engine.rules.sharding import shard
    op = _embedding((2, 2048), (32000, 256))
    got = candidates(op, 8)
    assert got == [((1, 1), (1, 1)), ((1, 1), (1, 8)), ((1, 1), (2, 4))]
    costs = [computation_cost(op, rule_for(op), shard(op, s, 8), 8) for s in got]
    assert costs == [32784384.0, 4112384.0, 4112384.0]


def test_a_configured_embedding_table_split_on_fewer_than_every_device_is_refused():
    """MindSpore 2.9 refuses mindone LLaMA's embedding anchored ((1, 1), (4, 1)) on dp=2,tp=4 (verify's child:
    "EmbeddingInfo param_strategy [4, 1] is not supported", CheckProductValidity, then SetCostUnderStrategy
    failed) and takes ((1, 1), (2, 4)); a vocabulary split of 8 does not divide the ids' 2 rows."""
    from strategist.engine.rules.gather import table_split_refused
    from strategist.engine.rules.registry import rule_for
    from strategist.engine.rules.sharding import shard
    op = _embedding((2, 2048), (32000, 256))
    rule = rule_for(op)

    def why(strategy):
        return table_split_refused(rule, shard(op, strategy, 8, rule=rule).splits, 8)
    assert "uses 4 of the 8 devices" in why(((1, 1), (4, 1)))
    assert "uses 2 of the 8 devices" in why(((1, 1), (1, 2)))
    assert "does not divide the ids' 2 rows" in why(((1, 1), (8, 1)))
    assert why(((1, 1), (2, 4))) is None and why(((1, 1), (1, 8))) is None and why(((1, 1), (1, 1))) is None


def test_flat_ids_take_a_table_split_on_fewer_devices():
    """MindFormers' vocabulary-parallel embedding over flat ids, ((1,), (4, 1)) on 8 devices, compiles in MindSpore
    (the experts' configurations of deepseek3, qwen3 and telechat3, verified): only 2-D ids need every device."""
    from strategist.engine.rules.gather import table_split_refused
    from strategist.engine.rules.registry import rule_for
    from strategist.engine.rules.sharding import shard
    op = _embedding((4096,), (32000, 256))
    rule = rule_for(op)
    assert table_split_refused(rule, shard(op, ((1,), (4, 1)), 8, rule=rule).splits, 8) is None
    assert table_split_refused(rule, shard(op, ((1,), (8, 1)), 8, rule=rule).splits, 8) is None
