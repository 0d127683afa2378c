"""MindFormers' rotary cos/sin tables as MindSpore's parallel pass sees them (``mindformers.unmerge_rotary_tables``).

opt_a runs ``auto_parallel`` before ``cse`` (pipeline/jit/ps/pass.cc GetOptPassesA): verify's child (qwen3 and
telechat3, 2 layers, dp=2,tp=4, full_batch; GLOG_v=1) creates MulsInfo32 CosInfo33 MulInfo34 ... MulsInfo38
SinInfo39 MulInfo40 ... MulsInfo48 CosInfo49 ... MulsInfo54 SinInfo55 for layer 0, where strategist's stand-alone
compile has one Muls, one Cos and one Sin. The rotary table's Reshape ("ReshapeInfo3131's strategy" x 90: 10 own
+ 8 Muls x 10) is entered from the configured Concat and "Set SWC index: 64" (output (2, 1, 1, 1) over [2, 4]);
then "MulsInfo3232: Set strategy [[2, 1, 1, 1]]" for all 8 Muls, and their Cos/Sin follow. With the merged graph
(2 Muls readers: 30 swcs) the same std::sort lands on (8, 1, 1, 1). The propagation itself is checked live
(`strategist verify` of the experts' anchors: qwen3 110/110, telechat3 106/106 after this; 94/100 and 90/96 before): a hand-made
copy of the subgraph does not reach the Reshape the way the full model does (its seeds order differs)."""
from strategist.vocab.graph import Input, Op, OpGraph, TensorSpec
from strategist.frontend.mindformers import unmerge_rotary_tables

S, D, B, N = 4096, 128, 8, 64


def _op(name, typ, inputs, out, cell="", klass="", strat=None):
    return Op(name=name, type=typ, cell_path=cell, cell_class=klass, instance_name=name.rsplit(".", 1)[-1],
              full_name=name, inputs=tuple(inputs), outputs=(out,), in_strategy=strat)


def _ref(name, shape):
    return Input("op", name, 0, TensorSpec(shape, "float32"))


def rotary_graph() -> OpGraph:
    """qwen3's rotary subgraph at 2 layers as the stand-alone compile gives it (CSE-merged tables)."""
    tab, half, full, t = (S, 1, 1, D), (S, D // 2), (S, D), (S, B, N, D)
    ops = [
        _op("rot.relu", "ReLU", [Input("input", "f", 0, TensorSpec(half, "float32"))], TensorSpec(half, "float32")),
        _op("rot.cat", "Concat", [_ref("rot.relu", half), _ref("rot.relu", half), Input("const", value=-1)],
            TensorSpec(full, "float32"), strat=((1, 1), (1, 1))),
        _op("rot.reshape", "Reshape", [_ref("rot.cat", full), Input("const", value=(-1, 1, 1, D))],
            TensorSpec(tab, "float32")),
    ]
    outs = []
    for layer in (0, 1):
        cell = f"layers.{layer}.apply_rotary_pos_emb"
        p = cell + "."
        ops += [_op(p + "mul_mscale", "Muls", [_ref("rot.reshape", tab), Input("const", value=1.0)],
                    TensorSpec(tab, "float32"), cell, "ApplyRotaryPosEmb"),
                _op(p + "cos", "Cos", [_ref(p + "mul_mscale", tab)], TensorSpec(tab, "float32"), cell,
                    "ApplyRotaryPosEmb"),
                _op(p + "sin", "Sin", [_ref(p + "mul_mscale", tab)], TensorSpec(tab, "float32"), cell,
                    "ApplyRotaryPosEmb")]
        for k, (x, table) in enumerate([("q", "cos"), ("q", "sin"), ("k", "cos"), ("k", "sin")]):
            name = p + ("mul" if k == 0 else f"mul#{k}")
            ops.append(_op(name, "Mul", [Input("input", x, 0, TensorSpec(t, "float32")), _ref(p + table, tab)],
                           TensorSpec(t, "float32"), cell, "ApplyRotaryPosEmb", strat=((1, 2, 4, 1), (1, 1, 1, 1))))
            outs.append(_ref(name, t))
    g = OpGraph(ops, {"f": TensorSpec(half, "float32"), "q": TensorSpec(t, "float32"),
                      "k": TensorSpec(t, "float32")}, {}, outs, {})
    g.training = True           # MindFormers' training graph: operators created in TopoSort order
    return g


def test_unmerge_gives_each_reader_its_own_table_chain():
    g = unmerge_rotary_tables(rotary_graph())
    for layer in (0, 1):
        p = f"layers.{layer}.apply_rotary_pos_emb."
        types = [op.type for op in g if op.name.startswith(p)]
        assert types.count("Muls") == 4 and types.count("Cos") == 2 and types.count("Sin") == 2
        reads = {op.name: [x.ref for x in op.inputs if x.kind == "op"] for op in g}
        assert reads[p + "mul"] == [p + "cos"] and reads[p + "cos"] == [p + "mul_mscale"]
        assert reads[p + "mul#1"] == [p + "sin"] and reads[p + "sin"] == [p + "mul_mscale#1"]
        assert reads[p + "mul#2"] == [p + "cos#1"] and reads[p + "cos#1"] == [p + "mul_mscale#2"]
        assert reads[p + "mul#3"] == [p + "sin#1"] and reads[p + "sin#1"] == [p + "mul_mscale#3"]
        assert all(reads[p + m] == ["rot.reshape"] for m in ("mul_mscale", "mul_mscale#1", "mul_mscale#2",
                                                              "mul_mscale#3"))
    assert getattr(g, "training", False)
    assert unmerge_rotary_tables(g) is g            # nothing merged left

