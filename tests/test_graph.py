"""Graph extraction on real MindSpore: counts, names, shapes and strategies, derived by hand
from the example sources (see the comments for each derivation)."""
import os
import re

import pytest

from strategist.graph import PLUMBING, ShardLayout, TensorSpec

from conftest import EXAMPLES, MODELS, ROOT


def _line_of(path, pattern):
    for i, line in enumerate(open(path), 1):
        if re.search(pattern, line):
            return i
    raise AssertionError(pattern)


def test_mlp_ops_shapes_and_params(graph_of):
    g = graph_of("examples/mlp.py:MegatronMLP")
    assert [op.name for op in g] == ["linear_fc1.matmul", "linear_fc1.add", "gelu",
                                     "linear_fc2.matmul", "linear_fc2.add"]
    assert [op.type for op in g] == ["MatMul", "Add", "GeLU", "MatMul", "Add"]
    # x[4096,1024] @ W1[1024,4096] -> [4096,4096]; W2[4096,1024] -> [4096,1024]
    assert [op.outputs[0].shape for op in g] == [(4096, 4096)] * 3 + [(4096, 1024)] * 2
    assert all(op.outputs[0].dtype == "float16" for op in g)
    fc1 = g.op("linear_fc1.matmul")
    assert (fc1.cell_path, fc1.cell_class, fc1.instance_name) == ("linear_fc1", "Linear", "matmul")
    assert fc1.inputs[0].kind == "input" and fc1.inputs[0].ref == "x"
    assert fc1.params == {1: "linear_fc1.weight"}
    assert fc1.inputs[1].spec == TensorSpec((1024, 4096), "float16")
    # MindSpore 2.9 passes transpose_a / transpose_b as constant inputs
    assert [x.value for x in fc1.inputs[2:]] == [False, False]
    assert g.op("gelu").cell_class == "MegatronMLP" and g.op("gelu").cell_path == ""
    # 1024*4096 + 4096 + 4096*1024 + 1024 parameters, fp16
    assert g.param_count == 8393728 and g.param_bytes == 2 * 8393728
    assert sorted((e.src, e.dst, e.in_slot) for e in g.edges()) == sorted([
        ("linear_fc1.matmul", "linear_fc1.add", 0), ("linear_fc1.add", "gelu", 0),
        ("gelu", "linear_fc2.matmul", 0), ("linear_fc2.matmul", "linear_fc2.add", 0)])
    common = os.path.join(EXAMPLES, "common.py")
    assert fc1.source == f"{common}:{_line_of(common, r'self.matmul = ops.MatMul')}"
    assert g.op("linear_fc1.add").source == f"{common}:{_line_of(common, r'self.add = ops.Add')}"


# LlamaForCausalLM ops, by the code in examples/llama.py, attention.py and common.py:
# per layer: RmsNorm 2, Reshape 6 (attention) + 2 (MLP), MatMul 4 + 3, FlashAttentionScore 1,
#            Add 2, SiLU 1, Mul 1                                         = 22
# once:      StridedSlice 2, NotEqual 1, Cast 1, Reshape 3, Gather 1, RmsNorm 1, MatMul 1 (lm head),
#            loss: Cast 1, OneHot 1, SoftmaxCrossEntropyWithLogits 1, Mul 1, ReduceSum 2, RealDiv 1 = 17
def _llama_counts(layers):
    return {"Reshape": 8 * layers + 3, "MatMul": 7 * layers + 1, "RmsNorm": 2 * layers + 1,
            "Add": 2 * layers, "Mul": layers + 1, "FlashAttentionScore": layers, "SiLU": layers,
            "Cast": 2, "ReduceSum": 2, "StridedSlice": 2, "Gather": 1, "NotEqual": 1, "OneHot": 1,
            "RealDiv": 1, "SoftmaxCrossEntropyWithLogits": 1}


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_llama_counts_scale_with_layers(graph_of, layers):
    g = graph_of("examples/llama.py:tiny", f"layers={layers}")
    assert g.count_by_type() == {k: v for k, v in sorted(_llama_counts(layers).items(),
                                                         key=lambda kv: (-kv[1], kv[0]))}
    assert len(g) == 22 * layers + 17
    assert g.cell_op_counts()["model.layers"] == 22 * layers
    assert all(op.type not in PLUMBING for op in g)


def test_llama_names_shapes_and_multi_output(graph_of):
    g = graph_of("examples/llama.py:tiny")  # vocab 1024, hidden 256, ffn 688, 8 heads, 4 kv, B=2, S=128
    assert g.inputs == {"input_ids": TensorSpec((2, 129), "int32")}
    wk = g.op("model.layers.0.attention.wk.matmul")
    assert wk.outputs[0].shape == (256, 128)          # B*S tokens x kv_heads*head_dim = 4*32
    assert wk.cell_class == "Linear" and wk.layer == "model.layers.0"
    assert g.op("model.layers.1.feed_forward.w2.matmul").params == {1: "model.layers.1.feed_forward.w2.weight"}
    fa = g.op("model.layers.0.attention.flash_attention")
    assert fa.cell_class == "Attention"
    # FlashAttentionScore outputs: softmax_max, softmax_sum [B,N,S,8] fp32; attention_out like query
    assert fa.outputs[0] == TensorSpec((2, 8, 128, 8), "float32")
    assert fa.outputs[1] == TensorSpec((2, 8, 128, 8), "float32")
    assert fa.outputs[3] == TensorSpec((2, 128, 256), "float16")
    consumer = g.out_edges(fa.name)
    assert [(e.out_index, e.dst) for e in consumer] == [(3, "model.layers.0.attention.reshape#4")]
    norm = g.op("model.layers.0.attention_norm.norm")
    assert norm.outputs[0] == TensorSpec((2, 128, 256), "float16")
    assert norm.outputs[1] == TensorSpec((2, 128, 1), "float32")   # rstd
    gather = g.op("model.tok_embeddings.gather")
    assert gather.params == {0: "model.tok_embeddings.weight"}
    assert gather.inputs[1].kind == "op" and gather.inputs[1].ref == "slice"
    assert gather.inputs[2].value == 0
    assert gather.outputs[0] == TensorSpec((2, 128, 256), "float16")
    assert g.op("slice#1").inputs[1].value == (0, 1)               # labels = ids[:, 1:]
    assert g.op("model.layers.0.attention.reshape#1").inputs[1].value == (2, 128, 256)
    assert [x.ref for x in g.outputs] == ["loss.div"]


def test_resnet_boundary_shapes(graph_of):
    g = graph_of("examples/resnet.py:ResNetLike")
    # stem + 4 bottlenecks x 4 convs; ReLU: stem + 3 per block; Add: 4 residual + bias
    assert g.count_by_type() == {"Conv2D": 17, "ReLU": 13, "Add": 5, "MatMul": 1, "ReduceMean": 1}
    pool = g.op("pool")
    assert pool.inputs[0].spec.shape == (64, 2048, 7, 7)          # 224 / 4 / 2 / 2 / 2 = 7
    assert pool.inputs[1].value == (2, 3)
    head = g.op("head.matmul")
    assert head.inputs[1].spec == TensorSpec((2048, 65536), "float32")


def test_existing_strategies_read_back_exactly(graph_of):
    g = graph_of("examples/sharding_techniques.py:RowParallelLinear", "mode='semi'", "dp=2", "tp=4", "cp=2")
    assert g.op("matmul").in_strategy == ((4, 1), (4, 1))        # ((dp*cp, 1), (tp, 1)), transpose_b
    assert g.op("add").in_strategy == ((4, 4), (4,))
    g = graph_of("examples/sharding_techniques.py:RowParallelLinear")
    assert g.op("matmul").in_strategy == ((2, 1), (4, 1)) and g.op("add").in_strategy is None
    g = graph_of("examples/sharding_techniques.py:CoreAttention")
    assert g.op("bmm_qk").in_strategy == ((2, 4, 1, 1), (2, 4, 1, 1))
    assert g.op("merge_head_transpose").in_strategy == ((2, 4, 1, 1),)
    assert [op.name for op in g if op.configured] == ["bmm_qk", "bmm_qkv", "merge_head_transpose"]
    g = graph_of("examples/sharding_techniques.py:LlamaForCausalLMHead", "mode='semi'")
    assert g.op("not_equal").in_strategy == ((2, 1), ())
    assert g.op("mul").in_strategy == ((2, 1), (2, 1))


def test_layout_strategies_read_back(graph_of):
    g = graph_of(os.path.join(MODELS, "layouts.py:LayoutNet"))
    mm = g.op("mm")     # MindSpore drops instance_name for Layout-sharded primitives; recovered from the Cell
    assert mm.in_strategy is None
    assert mm.in_layout == (ShardLayout((2, 2, 2), ("dp", "cp", "tp"), ((2, 1), ())),
                            ShardLayout((2, 2, 2), ("dp", "cp", "tp"), ((0,), ())))
    assert mm.in_layout[0].axes() == (("dp", "cp"), ())
    assert str(mm.in_layout[0]) == '("dp", "cp"), "None"'
    assert mm.out_layout == (ShardLayout((2, 2, 2), ("dp", "cp", "tp"), ((2, 1), (0,))),)
    assert g.op("relu").in_strategy == ((4, 2),)


def test_extraction_writes_nothing_and_keeps_weights_lazy(tmp_path, monkeypatch):
    from strategist.graph import extract
    from strategist.loader import ModelRef, build_cell
    monkeypatch.chdir(tmp_path)
    cell = build_cell(ModelRef(os.path.join(EXAMPLES, "mlp.py"), "MegatronMLP"), {"hidden": 64, "ffn": 256})
    g = extract(cell, TensorSpec((8, 64), "float16"))
    assert len(g) == 5
    assert all(p.has_init for p in cell.get_parameters())          # never materialised
    assert "init_parameters_data" not in cell.__dict__                # patch undone
    assert os.listdir(tmp_path) == []
    # a second extraction in the same process still works (no cached dump switch involved)
    assert len(extract(cell, TensorSpec((16, 64), "float16"))) == 5
    assert os.listdir(tmp_path) == []


def test_failed_compile_writes_nothing(tmp_path, monkeypatch):
    from strategist.errors import CompileError
    from strategist.loader import load_graph
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CompileError):
        load_graph(os.path.join(MODELS, "broken.py:TwoInputs"), ["a:float32[4,5]", "b:float32[6,7]"])
    assert os.listdir(tmp_path) == []


def test_json_is_deterministic(graph_of):
    from strategist.loader import load_graph
    a = graph_of("examples/attention.py:AttentionBlock").to_json()
    b = load_graph(os.path.join(ROOT, "examples/attention.py:AttentionBlock")).to_json()
    assert a == b


@pytest.mark.parametrize("target, kwargs", [
    ("examples/llama.py:tiny", {}), ("examples/sharding_techniques.py:CoreAttention", {"mode": "semi"}),
    (os.path.join(MODELS, "layouts.py:LayoutNet"), {}), ("examples/resnet.py:ResNetLike", {"batch": 2}),
])
def test_wire_decoder_matches_protobuf(target, kwargs):
    """strategist.protowire decodes MindSpore's ANF ModelProto into the same graph as the generated class."""
    from mindspore._c_expression import dump_func_graph
    from mindspore.common.api import _cell_graph_executor as executor
    from strategist.graph import _as_tensor, _from_proto, _standalone_compile
    from strategist.loader import ModelRef, build_cell, parse_inputs
    path = target if os.path.isabs(target.split(":")[0]) else os.path.join(ROOT, target)
    cell = build_cell(ModelRef.parse(path), kwargs)
    args = [_as_tensor(s) for _, s in parse_inputs([f"{k}:{v}" for k, v in cell.example_inputs.items()])]
    with _standalone_compile(cell):
        phase, _ = executor.compile(cell, *args, phase=f"export.wiretest_{abs(hash(target)) % 10**6}")
    proto = executor._graph_executor.get_func_graph_proto(phase, "anf_ir", False)
    text = dump_func_graph(executor._graph_executor.get_func_graph(phase))
    a = _from_proto(proto, text, cell, "m", parser="protobuf").to_json()
    b = _from_proto(proto, text, cell, "m", parser="wire").to_json()
    assert a == b and len(a) > 1000
