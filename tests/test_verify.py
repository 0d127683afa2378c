"""``strategist verify``: MindSpore 2.9.0's own sharding propagation next to strategist's.

Cheap tests read recorded MindSpore answers (no child process): the IR parser, the operator matching
(repeated layers, names MindSpore credits to the first layer, operators one side lacks), the dataset
slices, and the missing-compiler error. Tests marked ``verify_live`` run MindSpore itself in a child
(a few seconds each) and assert MindSpore's answer.
"""
import json
import os
import subprocess
import sys

import pytest

from strategist.errors import VerifyError
from strategist.vocab.graph import TensorSpec
from strategist.verify import MsOp, MsPlan, compare
from strategist.verify.child import compile_specs
from strategist.verify.ir import parse_ir, parse_tuple

from conftest import EXAMPLES, ROOT

DOCS_FFN = os.path.join(EXAMPLES, "sharding_techniques.py") + ":DocsFFN"

# step_parallel_begin of DocsFFN on 8 devices (matmul1 configured ((2, 1), (1, 4))), trimmed
DOCS_FFN_IR = """\
subgraph @1_DocsFFN_construct_17() {
  %0(CNode_2) = _VirtualDataset(%para1_x) {instance name: _VirtualDataset} primitive_attrs: {order_enforce_skip: Bool(1)} cnode_attrs: {op_info_created: Bool(1)} {in_strategy: ((8, 1, 1, 1))}
      : (<Tensor[Float32], (256, 1, 28, 28)>) -> (<Tuple[Tensor[Float32]], TupleShape((256, 1, 28, 28))>)
      # Scope: (Default)
  %1(CNode_3) = TupleGetItem(%0, I64(0))
      : (<Tuple[Tensor[Float32]], TupleShape((256, 1, 28, 28))>, <Int64, NoShape>) -> (<Tensor[Float32], (256, 1, 28, 28)>)
      # Scope: (Default)
  %2(CNode_4) = PrimFunc_Flatten(%1) {instance name: flatten} primitive_attrs: {BatchParallel: Bool(1)} cnode_attrs: {op_info_created: Bool(1)} {in_strategy: ((8, 1, 1, 1))}
      : (<Tensor[Float32], (256, 1, 28, 28)>) -> (<Tensor[Float32], (256, 784)>)
      # Scope: (Default)
  %3(CNode_5) = Load(%para2_w1, UMonad[U])
      : (<Ref[Tensor[Float32]], (784, 64), ref_key=w1, is_parameter>, <UMonad, NoShape>) -> (<Tensor[Float32], (784, 64)>)
      # Scope: (Default)
  %4(CNode_6) = PrimFunc_MatMul(%2, %3, Bool(0), Bool(0)) {instance name: matmul1} primitive_attrs: {in_strategy: ((2, 1), (1, 4))} cnode_attrs: {op_info_created: Bool(1)} {in_strategy: ((2, 1), (1, 4))}
      : (<Tensor[Float32], (256, 784)>, <Tensor[Float32], (784, 64)>, <Bool, NoShape>, <Bool, NoShape>) -> (<Tensor[Float32], (256, 64)>)
      # Scope: (Default)
  %6(CNode_8) = PrimFunc_Add(%4, %5) {instance name: add1} cnode_attrs: {op_info_created: Bool(1)} {in_strategy: ((2, 4), (4))}
      : (<Tensor[Float32], (256, 64)>, <Tensor[Float32], (64)>) -> (<Tensor[Float32], (256, 64)>)
      # Scope: (Default)
  %7(y) = PrimFunc_ReLU(%6) {instance name: relu} cnode_attrs: {op_info_created: Bool(1)} {in_strategy: ((2, 4))}
      : (<Tensor[Float32], (256, 64)>) -> (<Tensor[Float32], (256, 64)>)
      # Scope: (Default)
  %8(x2) = PrimFunc_Reshape(%7, (I64(256), I64(64))) {instance name: reshape} cnode_attrs: {op_info_created: Bool(1)}
      : (<Tensor[Float32], (256, 64)>, <Tuple[Int64*2], TupleShape(NoShape, NoShape)>) -> (<Tensor[Float32], (256, 64)>)
      # Scope: (Default)
  %9(CNode_10) = PrimFunc_MatMul(%8, %3, Bool(0), Bool(0)) {instance name: matmul2} cnode_attrs: {op_info_created: Bool(1)} {in_strategy: ((2, 4), (4, 1))}
      : (<Tensor[Float32], (256, 64)>, <Tensor[Float32], (64, 10)>, <Bool, NoShape>, <Bool, NoShape>) -> (<Tensor[Float32], (256, 10)>)
      # Scope: (Default/head-Dense)
}
"""

# MsPlan.to_dict() of a live run: DocsFFN, dp=2,tp=4, data_parallel
DOCS_FFN_MS = {
    "ops": [
        {"name": "Default/Flatten-op0", "type": "Flatten", "path": "flatten", "in_strategy": [[8, 1, 1, 1]],
         "input_shapes": [[256, 1, 28, 28]], "output_shapes": [[256, 784]]},
        {"name": "Default/MatMul-op1", "type": "MatMul", "path": "matmul1", "in_strategy": [[2, 1], [1, 4]],
         "configured": True, "input_shapes": [[256, 784], [784, 64]], "output_shapes": [[256, 64]]},
        {"name": "Default/Add-op1", "type": "Add", "path": "add1", "in_strategy": [[2, 4], [4]],
         "input_shapes": [[256, 64], [64]], "output_shapes": [[256, 64]]},
        {"name": "Default/ReLU-op0", "type": "ReLU", "path": "relu", "in_strategy": [[2, 4]],
         "input_shapes": [[256, 64]], "output_shapes": [[256, 64]]},
        {"name": "Default/MatMul-op0", "type": "MatMul", "path": "matmul2", "in_strategy": [[2, 4], [4, 1]],
         "input_shapes": [[256, 64], [64, 10]], "output_shapes": [[256, 10]]},
        {"name": "Default/Add-op0", "type": "Add", "path": "add2", "in_strategy": [[2, 1], [1]],
         "input_shapes": [[256, 10], [10]], "output_shapes": [[256, 10]]},
    ],
    "dataset_strategy": "data_parallel", "device_num": 8, "compile_seconds": 0.39, "process_seconds": 5.2,
    "dataset": [[8, 1, 1, 1]], "output": [[8, 1]], "backend": "stub", "mindspore_version": "2.9.0",
    "compile_inputs": ["x:float32[32,1,28,28]"], "model": "examples/sharding_techniques.py:DocsFFN",
}

#: MindSpore's documented strategies for the tutorial's FFN on 8 devices (matmul1 configured).
DOCS_EXPECTED = {"matmul1": ((2, 1), (1, 4)), "add1": ((2, 4), (4,)), "relu": ((2, 4),),
                 "matmul2": ((2, 4), (4, 1))}


# --------------------------------------------------------------------------------------
# no MindSpore child


def test_parse_tuple_single_row_and_scalars():
    assert parse_tuple("((8, 1, 1, 1))") == ((8, 1, 1, 1),)
    assert parse_tuple("((2, 4), (4))") == ((2, 4), (4,))
    assert parse_tuple("((8, 1), (), ())") == ((8, 1), (), ())


def test_parse_ir_reads_strategies_shapes_and_configuration():
    nodes = parse_ir(DOCS_FFN_IR)
    # Reshape, Load and TupleGetItem carry no parallel info and are not reported
    assert [(n["type"], n["instance"]) for n in nodes] == [
        ("_VirtualDataset", "_VirtualDataset"), ("Flatten", "flatten"), ("MatMul", "matmul1"), ("Add", "add1"),
        ("ReLU", "relu"), ("MatMul", "matmul2")]
    by = {n["instance"]: n for n in nodes}
    assert by["matmul1"]["configured"] and not by["matmul2"]["configured"]
    assert by["matmul1"]["in_strategy"] == ((2, 1), (1, 4))
    assert by["add1"]["in_strategy"] == ((2, 4), (4,))
    assert by["_VirtualDataset"]["output_shapes"] == [(256, 1, 28, 28)]
    assert by["matmul1"]["input_shapes"] == [(256, 784), (784, 64)]      # Bool arguments are not tensors
    assert by["matmul2"]["scope"] == "Default/head-Dense"


# step_parallel_end of tests/models/semi_auto.py's CastFollows in semi_auto_parallel on 8 devices, trimmed: the
# unconfigured ReLU's batch strategy (gen_strategy), the Cast without one, a redistribution op; and a Layout-
# configured MatMul, which the end dump records by its primitive's in_layout alone
SEMI_AUTO_END_IR = """\
  %6(y) = PrimFunc_Mul(%3, %5) {instance name: mul} primitive_attrs: {in_strategy: ((2, 4), (2, 4))} {in_strategy: ((2, 4), (2, 4))}
      : (<null>, <null>) -> (<Tensor[Float32], (64, 64)>)
      # Scope: (Default)
  %7(y) = PrimFunc_Cast(%6, I64(42)) {instance name: cast} primitive_attrs: {output_names: [output], input_names: [x, dst_type]}
      : (<Tensor[Float32], (64, 64)>, <Int64, NoShape>) -> (<Tensor[Float16], (64, 64)>)
      # Scope: (Default)
  %18(CNode_20) = PrimFunc_StridedSlice(%17, (I64(0), I64(0)), (I64(8), I64(64)), (I64(1), I64(1)), I64(0), I64(0), I64(0), I64(0), I64(0)) {instance name: redistribution_op_6614310911506831424StridedSlice_} primitive_attrs: {keep_value_node_input: Bool(1)} cnode_primal_attrs: {forward_comm_node_unique_id: "586"}
      : (<null>) -> (<null>)
      # Scope: (Default)
  %19(y) = PrimFunc_ReLU(%18) {instance name: relu} primitive_attrs: {gen_strategy: ((8, 1))} {in_strategy: ((8, 1))}
      : (<null>) -> (<Tensor[Float16], (64, 64)>)
      # Scope: (Default)
  %159(x) = PrimFunc_MatMul(%157, %158, Bool(0), Bool(1)) {instance name: matmul} primitive_attrs: {in_layout: ({'device_matrix': (2, 4), 'tensor_map': (1, -1), 'interleaved_parallel': false, 'alias_name': (dp, tp)}, {'device_matrix': (2, 4), 'tensor_map': (0, -1), 'interleaved_parallel': false, 'alias_name': (dp, tp)})} cnode_primal_attrs: {origin_output_shape: (8, 1000)}
      : (<Tensor[Float32], (8, 512)>, <Tensor[Float32], (1000, 512)>) -> (<Tensor[Float32], (8, 1000)>)
      # Scope: (Default/fc-Dense)
"""


def test_parse_ir_reads_semi_auto_batch_strategies_from_the_end_dump():
    nodes = parse_ir(SEMI_AUTO_END_IR)
    # the Cast has no OperatorInfo in semi_auto and the redistribution ops none either: neither is reported
    assert [(n["instance"], n["in_strategy"], n["configured"]) for n in nodes] == [
        ("mul", ((2, 4), (2, 4)), True), ("relu", ((8, 1),), False), ("matmul", ((2, 1), (4, 1)), True)]


def test_names_attach_across_scopes_the_ir_credits_to_layer_0():
    from strategist.verify.child import attach_names
    l0, l1 = "Default/layers-CellList/0-Blk", "Default/layers-CellList/1-Blk"
    nodes = [{"type": "Add", "scope": l0, "in_strategy": ((2, 1), (2, 1))},
             {"type": "Add", "scope": l0, "in_strategy": ((4, 1), (4, 1))}]     # layer 1's, credited to layer 0
    out = attach_names(nodes, {f"{l0}/Add-op0": [[2, 1], [2, 1]], f"{l1}/Add-op1": [[4, 1], [4, 1]]})
    assert [n["name"] for n in out] == [f"{l0}/Add-op0", f"{l1}/Add-op1"]


def test_compile_specs_slice_global_inputs_per_device():
    x = TensorSpec((256, 64), "float32")
    assert compile_specs(["x"], [x], 8, "data_parallel") == ([TensorSpec((32, 64), "float32")], "data_parallel")
    assert compile_specs(["x"], [x], 8, "full_batch") == ([x], "full_batch")
    assert compile_specs(["x"], [x], 8, {"x": (2, 4)}) == ([TensorSpec((128, 16), "float32")], ((2, 4),))
    assert compile_specs(["x"], [x], 8, {"*dim0": 2}) == ([TensorSpec((128, 64), "float32")], ((2, 1),))
    with pytest.raises(Exception, match="does not divide into 3 devices"):
        compile_specs(["x"], [x], 3, "data_parallel")


def test_functional_anchors_go_through_their_shared_primitive_when_every_call_agrees():
    """An anchor on a call no Cell holds is marked with the number of such calls of its type (the child shards the
    primitive they share); a call of that type left out, or anchored otherwise, is one line naming both."""
    from types import SimpleNamespace as O
    from strategist.errors import StrategyError
    from strategist.verify.runner import shared_calls
    ops = [O(name=f"layers.{i}.fa", type="FlashAttentionScore", held=False) for i in range(2)]
    ops += [O(name="emb", type="Embedding", held=False), O(name="layers.0.mm", type="MatMul", held=True),
            O(name="mul", type="Mul", held=False)]
    fa = [[2, 1, 4, 1]] * 3

    def req(op, typ, rows):
        return {"op": op, "type": typ, "cell_path": "", "instance": "x", "in_strategy": rows, "out_strategy": None}
    both = [req("layers.0.fa", "FlashAttentionScore", fa), req("layers.1.fa", "FlashAttentionScore", fa)]
    got = shared_calls(ops, both + [req("emb", "Embedding", [[1, 1], [1, 8]]),
                                    req("layers.0.mm", "MatMul", [[2, 1], [4, 1]])])
    assert [r.get("functional") for r in got] == [2, 2, 1, None]
    with pytest.raises(StrategyError, match=r"anchor layers\.0\.fa: .* and layers\.1\.fa has no anchor: anchor all 2"):
        shared_calls(ops, [req("layers.0.fa", "FlashAttentionScore", fa)])
    other = [[2, 1, 1, 1]] * 3
    with pytest.raises(StrategyError, match=r"layers\.1\.fa has another strategy"):
        shared_calls(ops, [req("layers.0.fa", "FlashAttentionScore", fa),
                           req("layers.1.fa", "FlashAttentionScore", other)])
    held = [req("layers.0.mm", "MatMul", [[2, 1], [4, 1]])]
    assert shared_calls(ops, held) == held and "functional" not in held[0]     # held anchors: as before


def _docs_plan(graph_of):
    from strategist.vocab.mesh import Mesh
    from strategist.propagate import propagate
    graph = graph_of("examples/sharding_techniques.py:DocsFFN")
    return propagate(graph, Mesh.parse("dp=2,tp=4"), dataset_strategy="data_parallel", price=False)


def test_compare_on_recorded_answer(graph_of):
    plan = _docs_plan(graph_of)
    ms = MsPlan.from_dict(json.loads(json.dumps(DOCS_FFN_MS)))
    c = compare(plan, ms)
    theirs = {r.op: r.theirs for r in c.rows}
    assert {k: theirs[k] for k in DOCS_EXPECTED} == DOCS_EXPECTED
    assert theirs["add2"] == ((2, 1), (1,)) and theirs["flatten"] == ((8, 1, 1, 1),)
    assert not c.only_ours and not c.only_theirs
    assert c.dataset_theirs == ((8, 1, 1, 1),) and c.dataset_agrees
    d = c.to_dict()
    assert d["total"] == 6 and d["dataset"]["mindspore"] == [[8, 1, 1, 1]]
    text = c.text()
    assert "dataset strategy data_parallel" in text and "compile 0.39 s" not in text
    assert "MindSpore compile 0.39 s" in c.timings() and "seconds" not in d
    # --format md: the operators as a Markdown table, one row each, no fenced console text
    md = c.text(markdown=True)
    assert "```" not in md and "| operator | type | agree | strategy" in md
    assert sum(1 for line in md.splitlines() if line.startswith("| ") and line.split(" | ")[2] == "yes") == 6


def test_compare_reports_a_disagreement_and_one_sided_ops(graph_of):
    plan = _docs_plan(graph_of)
    d = json.loads(json.dumps(DOCS_FFN_MS))
    d["ops"][3]["in_strategy"] = [[8, 1]]                       # relu: MindSpore says otherwise
    del d["ops"][5]                                             # add2: MindSpore reports nothing
    d["ops"].append({"name": "Default/Mystery-op0", "type": "Mystery", "path": None, "in_strategy": [[1]]})
    c = compare(plan, MsPlan.from_dict(d))
    bad = c.disagreements()
    assert [(r.op, r.theirs) for r in bad if r.op == "relu"] == [("relu", ((8, 1),))]
    assert [n for n, _t, _s in c.only_ours] == ["add2"]
    assert [m.name for m in c.only_theirs] == ["Default/Mystery-op0"]
    assert not c.all_agree


def test_mindformers_parallel_only_loss_adds_are_listed_not_counted(graph_of):
    """MindFormers' CrossEntropyLoss builds ``logits + 0`` and ``labels + 0`` (AddExt with a scalar) only in a
    parallel mode: MindSpore's report has them (as its qwen3 run at dp=2,tp=4 did: AddExt-op0 ((2,4),()),
    AddExt-op1 ((2),())), strategist's stand-alone graph cannot. They are listed apart and the verdict ignores
    them; any other MindSpore-only AddExt still counts."""
    plan = _docs_plan(graph_of)
    d = json.loads(json.dumps(DOCS_FFN_MS))
    d["ops"] += [{"name": "Default/model-GPTModel/loss-CrossEntropyLoss/AddExt-op0", "type": "AddExt",
                  "path": None, "in_strategy": [[2, 4], []]},
                 {"name": "Default/model-GPTModel/loss-CrossEntropyLoss/AddExt-op1", "type": "AddExt",
                  "path": None, "in_strategy": [[2], []]}]
    c = compare(plan, MsPlan.from_dict(d))
    assert not c.only_theirs and c.all_agree and len(c.parallel_only) == 2
    assert "0 only MindSpore (2 more only in its parallel build)" in c.text() and "-> ALL AGREE" in c.text()
    assert len(c.to_dict()["only_mindspore_parallel_build"]) == 2
    d["ops"].append({"name": "Default/model-GPTModel/loss-CrossEntropyLoss/AddExt-op2", "type": "AddExt",
                     "path": None, "in_strategy": [[2, 4], [2, 4]]})          # two tensors: not the x + 0
    c = compare(plan, MsPlan.from_dict(d))
    assert [m.name for m in c.only_theirs] == ["Default/model-GPTModel/loss-CrossEntropyLoss/AddExt-op2"]
    assert not c.all_agree


def test_cse_copies_in_mindspores_graph_agree_only_with_the_same_strategy(graph_of):
    """``q = k = v = x.transpose(...)``: MindSpore's parallel graph keeps three Transposes where the stand-alone
    compile keeps one. A MindSpore-only operator identical to a matched one (type, scope, shapes, strategy)
    is a merged copy; with another strategy it stays a one-sided disagreement."""
    plan = _docs_plan(graph_of)
    d = json.loads(json.dumps(DOCS_FFN_MS))
    relu = dict(d["ops"][3], name="Default/ReLU-op9")
    d["ops"].append(relu)
    c = compare(plan, MsPlan.from_dict(d))
    assert [ours for _m, ours in c.merged] == ["relu"] and len(c.merged) == 1   # either copy may be the twin
    assert not c.only_theirs and c.all_agree
    assert "merged in strategist's stand-alone compile" in c.text() and c.to_dict()["merged_by_cse"][0]["copy_of"] == "relu"
    d["ops"][-1]["in_strategy"] = [[1, 8]]
    c = compare(plan, MsPlan.from_dict(d))
    assert not c.merged and len(c.only_theirs) == 1 and not c.all_agree


def test_matching_falls_back_to_names_when_shapes_differ(graph_of):
    plan = _docs_plan(graph_of)
    d = json.loads(json.dumps(DOCS_FFN_MS))
    d["ops"][3]["input_shapes"] = d["ops"][3]["output_shapes"] = [[32, 64]]   # relu: per-device shapes
    c = compare(plan, MsPlan.from_dict(d))
    assert not c.only_ours and not c.only_theirs
    assert {r.op: r.ms_name for r in c.rows}["relu"] == "Default/ReLU-op0"


def test_matching_survives_first_layer_scopes_and_a_missing_op(graph_of):
    """MindSpore credits repeated layers' functional ops to layer 0 and names them by type; pairing goes by
    graph order and shapes, so every operator still meets its own counterpart."""
    from strategist.vocab.mesh import Mesh
    from strategist.propagate import propagate
    graph = graph_of("examples/llama.py:tiny", "layers=2")
    plan = propagate(graph, Mesh.parse("dp=2,tp=2"), dataset_strategy="full_batch", price=False)
    ops = []
    for op in graph.ops:
        if op.type in ("Reshape", "Cast"):
            continue
        path = op.name.split("#")[0].replace("layers.1.", "layers.0.")     # MindSpore's scope quirk
        ops.append({"name": f"Default/{op.type}-op{len(ops)}", "type": op.type, "path": path,
                    "in_strategy": [[len(ops)]],                            # a tag to recognise the pairing
                    "input_shapes": [list(x.spec.shape) for x in op.inputs if x.spec is not None],
                    "output_shapes": [list(s.shape) for s in op.outputs if s is not None]})
    tags = {o["in_strategy"][0][0]: n for n, o in zip([op.name for op in graph.ops
                                                        if op.type not in ("Reshape", "Cast")], ops)}
    dropped = ops.pop(3)
    ms = MsPlan(ops=[MsOp.from_dict(o) for o in ops], dataset_strategy="full_batch", device_num=4,
                compile_seconds=0.0, process_seconds=0.0)
    c = compare(plan, ms)
    assert all(tags[r.theirs[0][0]] == r.op for r in c.rows)
    assert [n for n, _t, _s in c.only_ours] == [tags[dropped["in_strategy"][0][0]]]
    assert not c.only_theirs


def test_a_self_defined_operator_is_listed_not_counted(graph_of):
    """MindSpore records no strategy for a SelfDefineShardInfo (a Concat marked ``self_define_shard``) and records
    one on the Reshape after it (MindSpore 2.9.0's answer for tests/models/layouts.py:SelfDefinedConcat, recorded):
    the pair is listed as self-defined, neither side's one-sided operator, and the rest still all agree."""
    from strategist.vocab.mesh import Mesh
    from strategist.propagate import propagate
    graph = graph_of(os.path.join(ROOT, "tests", "models", "layouts.py") + ":SelfDefinedConcat")
    plan = propagate(graph, Mesh.parse("dp=2,tp=4"), dataset_strategy="full_batch", price=False)
    ops = [{"name": "Default/ReLU-op0", "type": "ReLU", "path": "relu", "in_strategy": [[1, 1, 1]],
            "input_shapes": [[64, 8, 32]], "output_shapes": [[64, 8, 32]]},
           {"name": "Default/Reshape", "type": "Reshape", "path": "reshape", "in_strategy": [[8, 1, 1]],
            "input_shapes": [[64, 8, 64]], "output_shapes": [[512, 64]]},
           {"name": "Default/MatMul-op0", "type": "MatMul", "path": "matmul", "in_strategy": [[8, 1], [1, 1]],
            "configured": True, "input_shapes": [[512, 64], [16, 64]], "output_shapes": [[512, 16]]}]
    ms = MsPlan(ops=[MsOp.from_dict(o) for o in ops], dataset_strategy="full_batch", device_num=8,
                compile_seconds=0.0, process_seconds=0.0, dataset=((1, 1, 1), (1, 1, 1)))
    c = compare(plan, ms)
    assert [(r.op, r.agree) for r in c.rows] == [("relu", True), ("matmul", True)]
    assert [(n, [m.type for m in after]) for n, _t, _s, after in c.self_defined] == [("concat", ["Reshape"])]
    assert not c.only_ours and not c.only_theirs and c.all_agree
    assert "1 self-defined, not compared" in c.text()
    assert c.to_dict()["self_defined"][0]["mindspore_after"][0]["mindspore"] == [[8, 1, 1]]


@pytest.mark.slow
@pytest.mark.verify_live
def test_self_defined_concat_live():
    """test_propagate's self-defined Concat and the comparison above, against MindSpore itself."""
    from strategist.verify import verify_model
    c = verify_model(os.path.join(ROOT, "tests", "models", "layouts.py") + ":SelfDefinedConcat", "dp=2,tp=4",
                     dataset_strategy="full_batch", redistributions=True)
    assert {r.op: r.theirs for r in c.rows} == {"relu": ((1, 1, 1),), "matmul": ((8, 1), (1, 1))}
    assert [n for n, *_ in c.self_defined] == ["concat"]
    assert c.all_agree


def test_strategist_failure_still_shows_mindspore_answer(graph_of, monkeypatch):
    """MindSpore may accept what strategist refuses: verify then reports a disagreement (exit 1), not an error."""
    from strategist.errors import StrategyError
    from strategist.verify import runner, verify_model

    def refuse(*a, **k):
        raise StrategyError("no rule for Mystery")
    monkeypatch.setattr(runner, "propagate", refuse)          # strategist's propagation, as verify calls it
    monkeypatch.setattr(runner, "mindspore_plan", lambda *a, **k: MsPlan.from_dict(json.loads(json.dumps(DOCS_FFN_MS))))
    c = verify_model(DOCS_FFN, "dp=2,tp=4", graph=graph_of("examples/sharding_techniques.py:DocsFFN"))
    assert not c.all_agree and len(c.only_theirs) == 6 and not c.dataset_agrees
    assert "no rule for Mystery" in c.text()


def test_no_c_compiler_is_one_line_naming_the_package(tmp_path, monkeypatch):
    from strategist.verify import stubs
    monkeypatch.setenv("STRATEGIST_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))          # no cc, gcc or clang
    monkeypatch.delenv("CC", raising=False)
    with pytest.raises(VerifyError) as err:
        stubs.ensure_stubs()
    msg = str(err.value)
    assert "\n" not in msg and "C compiler" in msg and "apt-get install gcc" in msg
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_cli_exit_codes_and_table(graph_of, monkeypatch, capsys):
    """exit 0 when every operator agrees, 1 on any disagreement (both strategies printed)."""
    import strategist.verify as verify
    from strategist.cli import main
    plan = _docs_plan(graph_of)
    d = json.loads(json.dumps(DOCS_FFN_MS))
    for o in d["ops"]:                            # MindSpore's answer where strategist agrees with it
        o["in_strategy"] = [list(r) for r in (plan.choices[o["path"]].strategy
                                               or [lay.strategy for lay in plan.choices[o["path"]].inputs])]
    agreeing = compare(plan, MsPlan.from_dict(d))
    d["ops"][3]["in_strategy"] = [[8, 1]]
    differing = compare(plan, MsPlan.from_dict(d))
    for result, code in ((agreeing, 0), (differing, 1)):
        monkeypatch.setattr(verify, "verify_model", lambda *a, _r=result, **k: _r)
        assert main(["verify", DOCS_FFN, "--mesh", "dp=2,tp=4"]) == code
        out, err = capsys.readouterr()
        # the report on stdout; the times on stderr, one line
        assert "dataset strategy data_parallel" in out and "0.39 s" not in out
        assert "strategist: verify: MindSpore compile 0.39 s" in err
    assert "((2,4)) | ((8,1))" in out and "DISAGREE" in out


# --------------------------------------------------------------------------------------
# MindSpore itself, in a child process


@pytest.mark.slow
@pytest.mark.verify_live
def test_docs_ffn_anchored_as_documented(tmp_path):
    """The sharding-propagation tutorial: configure matmul1 ((2, 1), (1, 4)) on 8 devices; MindSpore derives
    Add1 ((2, 4), (4)), ReLU ((2, 4)) and MatMul2 ((2, 4), (4, 1)). The anchor goes through Primitive.shard in
    the child (an anchors file, over the model's own shard())."""
    from strategist.verify import verify_model
    anchors = tmp_path / "docs.yaml"
    anchors.write_text("matmul1: [[2, 1], [1, 4]]\n")
    c = verify_model(DOCS_FFN, "dp=2,tp=4", strategies=str(anchors))
    theirs = {r.op: r.theirs for r in c.rows}
    assert {k: theirs[k] for k in DOCS_EXPECTED} == DOCS_EXPECTED
    assert {r.op for r in c.rows if r.configured} == {"matmul1"}
    assert c.dataset_theirs == ((8, 1, 1, 1),) and c.ms.compile_inputs == ["x:float32[32,1,28,28]"]
    assert c.ms.backend in ("stub", "gpu", "ascend") and c.ms.process_seconds > 0
    assert not list(tmp_path.glob("rank_*")) and not os.path.exists(os.path.join(ROOT, "rank_0"))


@pytest.mark.slow
@pytest.mark.verify_live
def test_cast_before_a_layout_anchor_live():
    """MindSpore configures the Cast before a Layout-configured GeLU from the Cast's generated strategies (not a
    follow of the layout): the ReLU before it, decided backward, is ((1,2,1)), strategist's answer too."""
    from strategist.verify import verify_model
    c = verify_model(os.path.join(ROOT, "tests", "models", "layouts.py") + ":CastBeforeLayout", "dp=2,tp=4",
                     dataset_strategy="full_batch")
    theirs = {r.op: r.theirs for r in c.rows}
    assert theirs["relu"] == ((1, 2, 1),) and theirs["gelu"] == ((4, 2, 1),)
    assert c.all_agree


@pytest.mark.slow
@pytest.mark.verify_live
@pytest.mark.parametrize("residual_first, add", [("True", (2, 1, 1)), ("False", (1, 2, 1))])
def test_residual_cast_copies_live(residual_first, add):
    """MindSpore keeps the layer's and the norm's equal Casts of one tensor apart, and decides a waiting Add
    from its visited edge among its generated strategies (test_propagate's residual-cast test, recorded here; the
    Cell compiled as built, --eval)."""
    from strategist.verify import verify_model
    c = verify_model(os.path.join(ROOT, "tests", "models", "layouts.py") + ":ResidualCastCopies", "dp=2,tp=4",
                     kwargs=[f"residual_first={residual_first}"], dataset_strategy="full_batch", training=False)
    assert {r.op: r.theirs for r in c.rows}["add"] == (add, add)
    assert c.all_agree


@pytest.mark.slow
@pytest.mark.verify_live
def test_add_before_a_layout_add_live():
    """A multi-input producer before a Layout-configured consumer keeps its generated candidates (test_propagate's
    test of the same model, recorded here)."""
    from strategist.verify import verify_model
    c = verify_model(os.path.join(ROOT, "tests", "models", "layouts.py") + ":AddBeforeLayoutAdd", "dp=2,tp=4",
                     dataset_strategy="full_batch")
    assert {r.op: r.theirs for r in c.rows}["add"] == ((1, 2, 1), (1, 2, 1))
    assert c.all_agree


@pytest.mark.slow
@pytest.mark.verify_live
def test_cli_verify_megatron_mlp_json():
    """Pure data parallelism on 8 devices: MindSpore gives every MatMul ((8, 1), (1, 1)); exit 0 when all agree."""
    r = subprocess.run([sys.executable, "-m", "strategist", "verify", "examples/mlp.py:MegatronMLP", "--mesh",
                        "dp=2,tp=4", "--kwargs", "hidden=64", "ffn=256", "tokens=64", "--format", "json"],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode in (0, 1), r.stderr
    d = json.loads(r.stdout)
    ms = {o["op"]: o["mindspore"] for o in d["operators"]}
    assert ms["linear_fc1.matmul"] == [[8, 1], [1, 1]] and ms["linear_fc2.matmul"] == [[8, 1], [1, 1]]
    assert d["dataset_strategy"] == "data_parallel" and d["dataset"]["mindspore"] == [[8, 1]]
    assert r.returncode == (0 if d["all_agree"] else 1)
    # the report holds no time (the same inputs, the same report); the times are one line on stderr
    assert "seconds" not in d
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("strategist: verify: MindSpore compile ")]
    assert "strategist propagate " in line


@pytest.mark.slow
@pytest.mark.verify_live
def test_configuration_mindspore_rejects_is_one_line():
    """auto_parallel refuses a dataset strategy that leaves devices unused."""
    from strategist.verify import mindspore_plan
    with pytest.raises(VerifyError) as err:
        mindspore_plan(DOCS_FFN, "dp=2,tp=4", dataset_strategy={"x": (2, 1, 1, 1)})
    msg = str(err.value)
    assert "\n" not in msg and "MindSpore rejected" in msg and "No available strategy" in msg


@pytest.mark.slow
@pytest.mark.verify_live
def test_mindspore_crash_is_one_line(monkeypatch):
    """A signal in the child (here raised by the test hook just before compiling) is reported, not hung on."""
    from strategist.verify import mindspore_plan
    monkeypatch.setenv("STRATEGIST_VERIFY_FAULT", "SIGFPE")
    with pytest.raises(VerifyError) as err:
        mindspore_plan(DOCS_FFN, "dp=2,tp=4")
    assert "\n" not in str(err.value) and "crashed (SIGFPE)" in str(err.value)


@pytest.mark.slow
def test_mindspore_real_crash_flash_attention_kv_heads(tmp_path):
    """FlashAttentionScore with 2 KV heads split 4 ways: MindSpore dies of SIGFPE in its shape inference."""
    from strategist.verify import mindspore_plan
    anchors = tmp_path / "fa.yaml"
    anchors.write_text("attention.flash_attention: [[2, 1, 4], [2, 1, 4], [2, 1, 4]]\n")
    with pytest.raises(VerifyError, match=r"crashed \(SIGFPE\)"):
        mindspore_plan(os.path.join(EXAMPLES, "attention.py") + ":AttentionBlock", "dp=2,tp=4",
                       kwargs=["kv_heads=2", "batch=8", "seq=256"], strategies=str(anchors))


@pytest.mark.slow
def test_no_c_compiler_cli(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path), STRATEGIST_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("CC", None)
    r = subprocess.run([sys.executable, "-m", "strategist", "verify", "examples/mlp.py:MegatronMLP", "--mesh",
                        "dp=2,tp=4", "--kwargs", "hidden=64", "ffn=256", "tokens=64"],
                       cwd=ROOT, capture_output=True, text=True, env=env)
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("strategist:")]
    assert len(lines) == 1 and "apt-get install gcc" in lines[0]


@pytest.mark.slow
def test_llama_two_layers_megatron_anchors_match_everything(tmp_path):
    """The 70B shape, 2 layers, 64 devices, Megatron anchors (without the Layout on Gather, which MindSpore
    rejects): every strategist operator MindSpore reports is paired, none left over."""
    from strategist.verify import verify_model
    src = open(os.path.join(EXAMPLES, "llama_megatron_dp8_tp8.yaml")).read().splitlines()
    anchors = tmp_path / "a.yaml"
    anchors.write_text("\n".join(ln for ln in src if "gather" not in ln and "layout:" not in ln) + "\n")
    c = verify_model(os.path.join(EXAMPLES, "llama.py") + ":llama2_70b", "dp=8,tp=8", kwargs=["layers=2", "batch=8"],
                     strategies=str(anchors), dataset_strategy="full_batch")
    assert not c.only_ours and not c.only_theirs and c.total == 40
    theirs = {r.op: r.theirs for r in c.rows}
    assert theirs["model.layers.1.attention.wo.matmul"] == ((8, 8), (8, 1))
    assert theirs["model.layers.1.feed_forward.silu"] == ((8, 8),)
    assert theirs["lm_head.matmul"] == ((8, 1), (8, 1))


@pytest.mark.slow
def test_layout_on_gather_mindspore_rejects(tmp_path):
    from strategist.verify import mindspore_plan
    # the example's anchors with the embedding's Gather in Layout form (the example writes the tuple)
    with open(os.path.join(EXAMPLES, "llama_megatron_dp8_tp8.yaml")) as f:
        text = f.read().replace("model.tok_embeddings.gather: [[8, 1], [8, 1]]",
                                "model.tok_embeddings.gather:\n  layout: [[tp, None], [dp, None]]")
    assert "layout: [[tp, None]" in text
    anchors = tmp_path / "anchors.yaml"
    anchors.write_text(text)
    with pytest.raises(VerifyError, match="MindSpore rejected.*_M_range_check"):
        mindspore_plan(os.path.join(EXAMPLES, "llama.py") + ":llama2_70b", "dp=8,tp=8",
                       kwargs=["layers=1", "batch=8"], dataset_strategy="full_batch", strategies=str(anchors))


@pytest.mark.slow
def test_timeout_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    import glob
    import tempfile
    from strategist.verify import mindspore_plan
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), f"strategist-verify-{os.getpid()}-*")))
    with pytest.raises(VerifyError, match="did not finish .* within 0.5 s"):
        mindspore_plan(DOCS_FFN, "dp=2,tp=4", timeout=0.5)
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), f"strategist-verify-{os.getpid()}-*"))) == before


@pytest.mark.slow
def test_fully_use_devices_reaches_mindspore():
    """MindSpore 2.9's default fully_use_devices=False lets add2 take ((2, 1), (1,)) (2 of 8 devices, following
    matmul2's output); with it True, only strategies using all 8 devices are candidates."""
    from strategist.verify import mindspore_plan
    ms = mindspore_plan(DOCS_FFN, "dp=2,tp=4", fully_use_devices=True)
    assert {o.path: o.in_strategy for o in ms.ops}["add2"] == ((8, 1), (1,))


@pytest.mark.slow
@pytest.mark.verify_live
def test_reshape_cost_cache_live():
    """MindSpore's Reshape cost cache is shape-blind: the small Reshape reads the big one's costs and the ReduceSum
    before it splits its reduced axis ((1, 1, 2, 1)); strategist's answer too (the Cell compiled as built, --eval:
    test_propagate's cache test)."""
    from strategist.verify import verify_model
    c = verify_model(os.path.join(ROOT, "tests", "models", "propagation.py") + ":ReshapeCostCache", "dp=2,tp=4",
                     dataset_strategy="full_batch", training=False)
    theirs = {r.op: r.theirs for r in c.rows}
    assert theirs["sum"] == ((1, 1, 2, 1),)
    assert c.all_agree


@pytest.mark.slow
@pytest.mark.verify_live
@pytest.mark.parametrize("kw", ["s1=((2,1),)", "s2=((2,2),)"])
def test_index_select_is_a_gather_live(kw):
    """MindSpore's IndexSelectInfo is a GatherInfo: Gather's candidates and device matrix, and no layout to follow
    after one set from a candidate (test_propagate.INDEX_SELECT_MS records these answers)."""
    from strategist.verify import verify_model
    c = verify_model(os.path.join(ROOT, "tests", "models", "propagation.py") + ":IndexSelectRows", "dp=2,tp=4",
                     kwargs=[kw], dataset_strategy="full_batch")
    assert c.all_agree, [(r.op, r.ours, r.theirs) for r in c.disagreements()]


_TWO_SUB_CELLS = '''
from mindspore import nn, ops


class Inner(nn.Cell):
    def __init__(self):
        super().__init__()
        self.sub = ops.Sub()

    def construct(self, x, m):
        return self.sub(self.sub(x, m), m)


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.pre = ops.Sub()
        self.reshape = ops.Reshape()
        self.inner = Inner()
        self.example_inputs = {"x": "float32[16,8,4]", "m": "float32[16,1]"}

    def construct(self, x, m):
        a = self.pre(self.pre(x, x), x)
        return self.inner(self.reshape(a, (16, 32)), m)
'''


def test_operators_of_one_name_matched_where_mindspores_order_differs(graph_of, tmp_path):
    """glm4's verify: MindSpore's report holds the loss _LogSoftmax's two Subs (Sub-op0, Sub-op1, path
    loss._log_softmax.sub) before the rotary Subs, strategist's graph after them. The order-preserving
    alignment of the Subs kept the rotary pairs, and the two loss Subs were left on both sides ("only in
    strategist's plan" / "only in MindSpore's report") with the same strategies. Leftovers of one name, as
    many on each side, with compatible shapes, are paired in order."""
    from strategist.vocab.mesh import Mesh
    from strategist.propagate import propagate
    f = tmp_path / "twosubs.py"
    f.write_text(_TWO_SUB_CELLS)
    plan = propagate(graph_of(f"{f}:Net"), Mesh.parse("dp=8"), dataset_strategy="data_parallel", price=False)
    subs = [op.name for op in plan.graph.ops if op.type == "Sub"]
    assert subs == ["pre", "pre#1", "inner.sub", "inner.sub#1"]
    mine = {n: [list(r) for r in plan.choices[n].sharding.strategy] for n in subs}
    ops = [{"name": f"Default/inner-Inner/Sub-op{k}", "type": "Sub", "path": "inner.sub",
            "in_strategy": mine[n], "input_shapes": [[16, 32], [16, 1]], "output_shapes": [[16, 32]]}
           for k, n in enumerate(["inner.sub", "inner.sub#1"])]
    ops += [{"name": f"Default/Sub-op{k}", "type": "Sub", "path": "pre", "in_strategy": mine[n],
             "input_shapes": [[16, 8, 4], [16, 8, 4]], "output_shapes": [[16, 8, 4]]}
            for k, n in ((2, "pre"), (3, "pre#1"))]
    c = compare(plan, MsPlan.from_dict({"ops": ops, "dataset_strategy": "data_parallel", "device_num": 8,
                                        "dataset": None, "model": f"{f}:Net",
                                        "compile_seconds": 0.1, "process_seconds": 1.0}))
    assert {r.op: r.ms_name for r in c.rows} == {
        "inner.sub": "Default/inner-Inner/Sub-op0", "inner.sub#1": "Default/inner-Inner/Sub-op1",
        "pre": "Default/Sub-op2", "pre#1": "Default/Sub-op3"}
    assert not c.only_ours and not c.only_theirs and all(r.agree for r in c.rows)
