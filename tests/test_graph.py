"""Graph extraction on real MindSpore: counts, names, shapes and strategies, derived by hand
from the example sources (see the comments for each derivation)."""
import os
import re

import pytest

from strategist.vocab.graph import PLUMBING, ShardLayout, TensorSpec

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
    from strategist.frontend.graph import extract
    from strategist.frontend.loader import ModelRef, build_cell
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
    from strategist.frontend.loader import load_graph
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CompileError):
        load_graph(os.path.join(MODELS, "broken.py:TwoInputs"), ["a:float32[4,5]", "b:float32[6,7]"])
    assert os.listdir(tmp_path) == []


def test_json_is_deterministic(graph_of):
    from strategist.frontend.loader import load_graph
    a = graph_of("examples/attention.py:AttentionBlock").to_json()
    b = load_graph(os.path.join(ROOT, "examples/attention.py:AttentionBlock")).to_json()
    assert a == b


@pytest.mark.parametrize("target, kwargs", [
    ("examples/llama.py:tiny", {}), ("examples/sharding_techniques.py:CoreAttention", {"mode": "semi"}),
    (os.path.join(MODELS, "layouts.py:LayoutNet"), {}), ("examples/resnet.py:ResNetLike", {"batch": 2}),
])
def test_wire_decoder_matches_protobuf(target, kwargs):
    """strategist.frontend.protowire decodes MindSpore's ANF ModelProto into the same graph as the generated class."""
    from mindspore._c_expression import dump_func_graph
    from mindspore.common.api import _cell_graph_executor as executor
    from strategist.frontend.compile import as_tensor, standalone_compile
    from strategist.frontend.proto import from_proto
    from strategist.frontend.loader import ModelRef, build_cell, parse_inputs
    path = target if os.path.isabs(target.split(":")[0]) else os.path.join(ROOT, target)
    cell = build_cell(ModelRef.parse(path), kwargs)
    args = [as_tensor(s) for _, s in parse_inputs([f"{k}:{v}" for k, v in cell.example_inputs.items()])]
    with standalone_compile(cell):
        phase, _ = executor.compile(cell, *args, phase=f"export.wiretest_{abs(hash(target)) % 10**6}")
    proto = executor._graph_executor.get_func_graph_proto(phase, "anf_ir", False)
    text = dump_func_graph(executor._graph_executor.get_func_graph(phase))
    a = from_proto(proto, text, cell, "m", parser="protobuf").to_json()
    b = from_proto(proto, text, cell, "m", parser="wire").to_json()
    assert a == b and len(a) > 1000


# --------------------------------------------------------------------------------------
# true cell paths, distinct primitives, the training graph (issue 10)

def _blocks_net(n=2, h=16, lazy=False):
    """A CellList of identical blocks mixing Cell-held primitives, nn layers, functional ops and tensor
    methods; a Dropout at the end (training only). ``lazy``: the blocks' ``__init__`` carries ``@lazy_inline``."""
    import mindspore as ms
    from mindspore import nn, ops

    def maybe_lazy(init):
        return ms.lazy_inline(init) if lazy else init

    class Block(nn.Cell):
        @maybe_lazy
        def __init__(self):
            super().__init__()
            self.dense = nn.Dense(h, h)
            self.sub1 = ops.Sub()          # two primitives with identical arguments
            self.sub2 = ops.Sub()
            self.norm = nn.LayerNorm((h,))

        def construct(self, x):
            y = ops.relu(self.dense(x))    # functional
            y = y * 0.5                    # tensor method -> Muls
            y = self.sub2(self.sub1(y, x), x)
            y = y.transpose(1, 0).transpose(1, 0)
            return self.norm(y)

    class Blocks(nn.Cell):
        def __init__(self):
            super().__init__()
            self.blocks = nn.CellList([Block() for _ in range(n)])
            self.drop = nn.Dropout(p=0.1)

        def construct(self, x):
            for b in self.blocks:
                x = b(x)
            return self.drop(x)

    return Blocks()


def _per_layer(g, prefix):
    """layer index -> sorted operator names with the layer prefix removed."""
    out: dict[str, list[str]] = {}
    for op in g:
        if op.name.startswith(prefix):
            k, _, rest = op.name[len(prefix):].partition(".")
            out.setdefault(k, []).append(f"{rest}:{op.type}")
    return {k: sorted(v) for k, v in out.items()}


def test_repeated_blocks_get_their_own_operators():
    """MindSpore parses ``ops.relu``, ``Tensor.__mul__``, ``transpose`` once and its IR scopes credit
    block 1's calls to block 0; every block must own exactly the operators its construct runs."""
    from strategist.frontend.graph import extract
    net = _blocks_net(3)
    g = extract(net, TensorSpec((4, 16), "float32"))
    # by hand from Block.construct: Dense = MatMul + BiasAdd, relu, y*0.5 = Muls, 2 Sub, 2 Transpose, LayerNorm
    block = sorted(["dense.matmul:MatMul", "dense.bias_add:BiasAdd", "re_lu:ReLU", "muls:Muls", "sub1:Sub",
                    "sub2:Sub", "transpose:Transpose", "transpose#1:Transpose", "norm.layer_norm:LayerNorm"])
    assert _per_layer(g, "blocks.") == {"0": block, "1": block, "2": block}
    for k in "012":
        relu = g.op(f"blocks.{k}.re_lu")
        assert (relu.cell_path, relu.cell_class, relu.layer) == (f"blocks.{k}", "Block", f"blocks.{k}")
        assert relu.inputs[0].ref == f"blocks.{k}.dense.bias_add"
        # the two identical Subs keep their own names, in data order: sub1 then sub2
        assert g.op(f"blocks.{k}.sub1").inputs[0].ref == f"blocks.{k}.muls"
        assert g.op(f"blocks.{k}.sub2").inputs[0].ref == f"blocks.{k}.sub1"
    # the training graph: Dropout is there; the Cell is left in the mode it was in
    assert [op.name for op in g if op.type == "Dropout"] == ["drop.dropout"]
    assert g.op("drop.dropout").inputs[0].ref == "blocks.2.norm.layer_norm"
    assert net.training is False and all(not c.training for _, c in net.cells_and_names())
    assert not any("strategist_owner" in op.attrs for op in g)


def test_lazy_inline_blocks_are_extracted_inlined():
    """``@lazy_inline`` blocks: a stand-alone compile keeps them one reused graph, called per block (strategist saw a
    single opaque call before); extraction compiles them inlined, every block owning its operators as without the
    decorator, and records them as lazy-inline Cells (their weights get no TmpIdentity) grouped by the reused graph
    they share (the engine folds each group: test_propagate). The Cells' own marking is restored."""
    from strategist.frontend.compile import lazy_inline_cells
    from strategist.frontend.graph import extract
    plain = extract(_blocks_net(3), TensorSpec((4, 16), "float32"))
    net = _blocks_net(3, lazy=True)
    before = [c.cell_init_args for c in net.blocks]
    assert all(a.startswith("lazy_inline_") for a in before)
    assert lazy_inline_cells(net) == ("blocks.0", "blocks.1", "blocks.2")
    g = extract(net, TensorSpec((4, 16), "float32"))
    assert [(op.name, op.type) for op in g] == [(op.name, op.type) for op in plain]
    assert _per_layer(g, "blocks.") == _per_layer(plain, "blocks.")
    assert g.lazy_inline_cells == ("blocks.0", "blocks.1", "blocks.2")
    assert getattr(plain, "lazy_inline_cells", ()) == ()
    assert g.lazy_groups == (("blocks.0", "blocks.1", "blocks.2"),)
    assert g.lazy_classes == {"blocks.0": "Block", "blocks.1": "Block", "blocks.2": "Block"}
    assert [c.cell_init_args for c in net.blocks] == before


def test_functional_operators_carry_their_call_line():
    """A functional or tensor-method operator's source is the line of the call in the model's code (from the
    call stack MindSpore records for every inlined node), the same for every block; a Cell-held primitive
    keeps the line that creates it (where its shard() goes)."""
    from strategist.frontend.graph import extract
    g = extract(_blocks_net(2), TensorSpec((4, 16), "float32"))
    here = os.path.abspath(__file__)

    def at(pattern):
        return f"{here}:{_line_of(here, pattern)}"
    for k in "01":
        assert g.op(f"blocks.{k}.re_lu").source == at(r"y = ops.relu\(self.dense\(x\)\)")
        assert g.op(f"blocks.{k}.muls").source == at(r"y = y \* 0.5")
        assert g.op(f"blocks.{k}.transpose").source == g.op(f"blocks.{k}.transpose#1").source == \
            at(r"y = y.transpose\(1, 0\).transpose")
        assert g.op(f"blocks.{k}.sub1").source == at(r"self.sub1 = ops.Sub\(\)")
        assert g.op(f"blocks.{k}.sub2").source == at(r"self.sub2 = ops.Sub\(\)")
    # the nn layer's own primitives: where nn.Dense creates them, inside MindSpore
    assert g.op("blocks.0.dense.matmul").source.endswith(".py:" + g.op("blocks.1.dense.matmul").source.split(":")[-1])
    assert "mindspore" in g.op("blocks.0.dense.matmul").source


def _qkv_net(h=32, heads=4):
    """Three ``nn.Dense`` reading one [B, S, H] tensor (each reshapes it to 2-D: three equal Reshapes of one
    input), then the caller splits each output into heads (a second Reshape right after the Dense's own)."""
    from mindspore import nn, ops

    class Attn(nn.Cell):
        def __init__(self):
            super().__init__()
            self.q = nn.Dense(h, h)
            self.k = nn.Dense(h, h)
            self.v = nn.Dense(h, h)

        def construct(self, x):
            b, s, _ = x.shape
            q = self.q(x).reshape(b, s, heads, h // heads)
            k = self.k(x).reshape(b, s, heads, h // heads)
            v = self.v(x).reshape(b, s, heads, h // heads)
            return ops.add(ops.add(q, k), v)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.layers = nn.CellList([Attn() for _ in range(2)])

        def construct(self, x):
            for layer in self.layers:
                x = layer(x).reshape(x.shape)
            return x

    return Net()


def test_equal_primitives_still_merge_and_folded_reshapes_belong_to_the_caller():
    """Tagging every primitive apart (to name each node's owner) used to stop MindSpore's CSE: the three
    Denses' equal input Reshapes of one tensor stayed 3 where MindSpore compiles 1. And MindSpore folds the
    Dense's output Reshape into the caller's head split (``TwoReshapeEliminater``: the inner primitive, the
    outer scope): that Reshape is the caller's. Checked against the reference (MindSpore's DEBUG parse)."""
    from strategist.frontend.celltrace import compare, reference_paths
    from strategist.frontend.graph import extract
    net, x = _qkv_net(), TensorSpec((2, 8, 32), "float32")
    g = extract(net, x)
    layers = _per_layer(g, "layers.")
    assert layers["0"] == layers["1"]
    reshapes = sorted(r for r in layers["0"] if r.endswith(":Reshape"))
    # one input Reshape (q's, CSE), three head splits in Attn (folded with each Dense's output Reshape)
    assert reshapes == ["q.reshape:Reshape", "reshape#1:Reshape", "reshape#2:Reshape", "reshape:Reshape"]
    here = os.path.abspath(__file__)
    assert {g.op(f"layers.1.{r}").source for r in ("reshape", "reshape#1", "reshape#2")} == \
        {f"{here}:{_line_of(here, re.escape(w + ' = self.' + w + '(x).reshape'))}" for w in "qkv"}   # the call lines
    check = compare(g, reference_paths(net, x))
    assert (check.wrong, check.unmatched, check.ref_unmatched, check.matched) == ([], [], 0, len(g))


def test_transformer_encoder_layers_are_identical():
    """``nn.TransformerEncoder`` deep-copies its layer and calls functional multi-head attention:
    before the fix, layer 0 got 82 operators and layer 1 got 10 (two Splits were at the root)."""
    from mindspore import nn
    from strategist.frontend.graph import extract

    class Encoder(nn.Cell):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, num_layers=2)

        def construct(self, x):
            return self.enc(x)

    g = extract(Encoder(), TensorSpec((2, 8, 32), "float32"))
    layers = _per_layer(g, "enc.layers.")
    assert set(layers) == {"0", "1"} and layers["0"] == layers["1"]
    assert all(op.cell_path.startswith("enc.layers.") for op in g)      # nothing left at the root
    counts = {k: sum(1 for op in g if op.layer == f"enc.layers.{k}") for k in "01"}
    assert counts["0"] == counts["1"] == len(g) // 2
    # training graph, per layer: dropout on the attention weights (multi_head_attention_forward's
    # dropout_p), after attention (dropout1), inside the feed-forward block (dropout) and after it (dropout2)
    assert sum(1 for x in layers["0"] if x.endswith(":Dropout")) == 4


def test_constant_input_operator_in_every_output_format(tmp_path, capsys):
    """An operator whose inputs are all constants (a StandardNormal of a fixed shape) has no strategy
    to print; the table and Markdown reports used to crash on it (IndexError in report.plan_text)."""
    import json
    from strategist.cli import main
    model = tmp_path / "constnet.py"
    model.write_text(
        "from mindspore import nn, ops\n\n\n"
        "class ConstInputs(nn.Cell):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.normal = ops.StandardNormal(seed=1)\n"
        "        self.add = ops.Add()\n"
        "        self.relu = ops.ReLU()\n\n"
        "    def construct(self, x):\n"
        "        return self.relu(self.add(x, self.normal((8, 16))))\n")
    target = f"{model}:ConstInputs"
    for cmd in ("propagate", "advise"):
        for fmt in ("table", "md", "json"):
            rc = main([cmd, target, "--input", "x:float32[8,16]", "--mesh", "dp=2,tp=2", "--format", fmt])
            out, err = capsys.readouterr()
            assert rc == 0, (cmd, fmt, err)
            if fmt == "json":
                d = json.loads(out)
                ops_ = (d["plan"] if "plan" in d else d)["ops"]
                normal = next(o for o in ops_ if o["name"] == "normal")
                assert normal["inputs"] == [] and normal["strategy"] is None
            else:
                line = next(x for x in out.splitlines() if x.strip("| ").startswith("normal"))
                assert "() (no tensor inputs)" in line and "StandardNormal" in line


@pytest.mark.slow
def test_mindformers_moe_layers_own_their_operators():
    """MindFormers qwen3_moe (mcore GPTModel, 2 layers, tp=1): functional ops of layer 1 used to be
    credited to layer 0 or to the root, and the SortExt that MindSpore expands inside the experts'
    inlined ``Morph`` body came out as root ``Default/SortExt-op0``."""
    import collections
    from strategist.frontend.mindformers import load_mindformers
    dense = dict(hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=4,
                 head_dim=64, vocab_size=1024)
    # the inlined body, as verify compiles it (advise and compare see it as one MorphFFN operator)
    g, _ = load_mindformers("mindformers:qwen3_moe/pretrain_qwen3_30b_a3b_4k.yaml", layers=2, seq=128, batch=8,
                            overrides={**dense, "num_experts_per_tok": 2, "moe_intermediate_size": 128,
                                       "num_experts": 4}, experts_stand_in=True)
    layers = {k: collections.Counter(v) for k, v in _per_layer(g, "model.decoder.layers.").items()}
    # MindSpore itself folds layer 1's two consecutive reshapes (linear_qkv's output reshape and the
    # attention's reshape_concat) into one Reshape in the attention's scope and keeps layer 0's apart: the real
    # difference. Each layer computes its own rotary cos/sin (and mscale Muls): MindSpore's parallel graph has
    # had no CSE when it searches (the stand-alone compile merged them into layer 0's)
    assert layers["0"] - layers["1"] == collections.Counter({
        "self_attention.reshape_concat:Reshape": 1, "self_attention.linear_qkv.reshape#1:Reshape": 1})
    assert layers["1"] - layers["0"] == collections.Counter({"self_attention.reshape:Reshape": 1})
    sorts = [op for op in g if op.type == "SortExt"]
    assert len(sorts) == 8 and all(op.cell_path.endswith(".mlp.experts") for op in sorts)
    assert all(op.cell_path.split(".")[0] == "model" for op in g)       # nothing at the root


def test_tuple_elements_get_mindspore_edges_and_attributes_own_their_names(graph_of):
    """MindSpore's CreateEdgeAccrossMakeList links an element of Concat's tuple only when it is a real
    operator's output itself: the graph input (a TupleGetItem of the VirtualDataset there) and Split's
    outputs (TupleGetItems) bring no cost-graph edge. And ``self.muls`` owns the name ``muls`` although a
    tensor-method ``z * 0.5`` (also Muls) runs first. Every element of a tuple is ``packed`` (a Reshape read
    through a MakeTuple lists no layouts of that reader: FindReshapeNextNodeStraCosts stops there); an operator's
    own tensor input is not."""
    g = graph_of("tests/models/propagation.py:TupleEdges")
    concat, concat2 = g.op("concat"), g.op("concat2")
    assert [(x.kind, x.edge) for x in concat.inputs if x.spec is not None] == [("input", False), ("op", True)]
    assert [(x.ref, x.edge) for x in concat2.inputs if x.spec is not None] == [("split", False), ("split", False)]
    assert [x.packed for x in concat.inputs + concat2.inputs if x.spec is not None] == [True] * 4
    assert not g.op("relu").inputs[0].packed and not g.op("split").inputs[0].packed
    muls = g.op("muls")
    assert muls.inputs[0].ref == "muls#1" and g.op("muls#1").inputs[0].ref == "concat2"


def test_mindspore_reshard_is_read_as_a_configured_identity(graph_of):
    """``mindspore.reshard(x, layout)`` returns ``x`` untouched on a one-device world, so a stand-alone compile lost
    it; MindSpore's parallel compile makes it a configured AShardIdentity. Extraction keeps it (the world reads as
    two devices while compiling, restored after): ReshardTail (MindSpore's UT) reshards its activation to Layout
    (4, 2, 1) ("dp", "mp", "sp") ("dp", "mp") and a constant [128, 128] to ("mp", "sp"); MindSpore 2.9.0 records
    AShardIdentity ((4, 2),) and ((2, 1),), both configured (tests/fixtures)."""
    from mindspore.parallel.function import reshard_func
    before = reshard_func.group_size
    g = graph_of(os.path.join(MODELS, "ms_ut", "reshard.py") + ":ReshardTail")
    assert reshard_func.group_size is before
    ids = [op for op in g if op.type == "AShardIdentity"]
    assert [(op.name, op.in_strategy) for op in ids] == [("reshard", ((4, 2),)), ("reshard#1", ((2, 1),))]
    assert ids[0].in_layout == (ShardLayout((4, 2, 1), ("dp", "mp", "sp"), ((2,), (1,))),)
    assert ids[1].inputs[0].kind == "const" and ids[1].inputs[0].spec.shape == (128, 128)
    assert [x.ref for x in g.op("matmul").inputs[:2]] == ["reshard", "reshard#1"]


def test_source_paths_have_one_spelling(monkeypatch):
    """A model's helper module imported earlier through a sys.path entry with '..' in it (tests/models/
    reused_blocks.py puts tests/models/../../examples there) is the same file: every source line names it as one
    path, not as examples/ in one run and tests/models/../../examples/ in another."""
    import importlib
    import sys
    from strategist import load_graph
    odd = os.path.join(os.path.dirname(EXAMPLES), "tests", "models", "..", "..", "examples")
    monkeypatch.syspath_prepend(odd)
    saved = sys.modules.pop("common", None)
    try:
        assert importlib.import_module("common").__file__.startswith(odd)
        g = load_graph(os.path.join(EXAMPLES, "mlp.py") + ":MegatronMLP")
        common = os.path.join(EXAMPLES, "common.py")
        assert g.op("linear_fc1.matmul").source == f"{common}:{_line_of(common, r'self.matmul = ops.MatMul')}"
    finally:
        sys.modules.pop("common", None)
        if saved is not None:
            sys.modules["common"] = saved
