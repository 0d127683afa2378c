"""Anchors files and the propagate / explain commands."""
import json
import os

import pytest

from strategist.files.anchors import load_anchors
from strategist.cli import main
from strategist.errors import RulesError
from strategist.vocab.mesh import Mesh

from conftest import ROOT

MLP = os.path.join(ROOT, "examples/mlp.py:MegatronMLP")
FFN = os.path.join(ROOT, "examples/sharding_techniques.py:DocsFFN")
MESH = Mesh.parse("dp=2,tp=4")


def test_anchor_file_forms(tmp_path, graph_of):
    g = graph_of("examples/llama.py:tiny")
    f = tmp_path / "a.yaml"
    f.write_text("model.layers.*.attention.wq.matmul: [[2, 1], [1, 4]]\n"
                 "lm_head.matmul:\n  in_strategy: [[2, 1], [4, 1]]\n  out_strategy: [[8, 1]]\n"
                 "model.tok_embeddings.gather:\n  layout: [[tp, None], [dp, None]]\n")
    a = load_anchors(str(f), g, MESH)
    assert sorted(a) == ["lm_head.matmul", "model.layers.0.attention.wq.matmul",
                         "model.layers.1.attention.wq.matmul", "model.tok_embeddings.gather"]
    assert a["model.layers.1.attention.wq.matmul"].strategy == ((2, 1), (1, 4))
    assert a["lm_head.matmul"].out_strategy == ((8, 1),)
    lay = a["model.tok_embeddings.gather"].layouts
    assert lay[0].device_matrix == (2, 4) and lay[0].tensor_map == ((0,), ()) and lay[1].tensor_map == ((1,), ())


@pytest.mark.parametrize("text, needle", [
    ("x: [[2, 1]\n", "line 2: not valid YAML"),
    ("- a\n", "maps operator names to strategies"),
    ("linear_fc1.matmul: [[2, 0], [1, 4]]\n", "line 1: a strategy is a list of lists of positive integers"),
    ("linear_fc1.add: [[1, 1], [1]]\nlinear_fc1.matmul: 1\n", "line 2: write a strategy list"),
    ("linear_fc9.matmul: [[1, 1], [1, 1]]\n", "line 1: 'linear_fc9.matmul' names no operator"),
    ("nothing.*: [[1, 1], [1, 1]]\n", "pattern 'nothing.*' matches no operator"),
    ("linear_fc1.matmul:\n  layout: [[xp, None], [None, tp]]\n", "line 1: layout axis 'xp' is not a mesh axis"),
    ("linear_fc1.matmul:\n  layout: [[tp, tp], [None, None]]\n", "may split one tensor only once"),
    ("linear_fc1.matmul:\n  strategy: [[1, 1]]\n", "unknown key(s) strategy"),
    ("linear_fc1.matmul:\n  device_matrix: {dp: 2, tp: 2}\n  layout: [[dp, None], [None, tp]]\n",
     "device_matrix dp=2,tp=2 has 4 devices, the mesh dp=2,tp=4 8"),
    ("linear_fc1.matmul:\n  device_matrix: {dp: 8}\n  in_strategy: [[1, 1], [1, 1]]\n", "device_matrix goes with layout"),
])
def test_bad_anchor_files_name_the_line(tmp_path, graph_of, text, needle):
    f = tmp_path / "a.yaml"
    f.write_text(text)
    with pytest.raises(RulesError, match=None) as e:
        load_anchors(str(f), graph_of("examples/mlp.py:MegatronMLP"), MESH)
    assert needle in str(e.value) and str(f) in str(e.value)


def test_propagate_command_formats(capsys, tmp_path):
    f = tmp_path / "a.yaml"
    f.write_text("linear_fc1.matmul: [[2, 1], [1, 4]]\nlinear_fc2.matmul: [[2, 4], [4, 1]]\n")
    assert main(["propagate", "--dataset-strategy", "full_batch", MLP, "--mesh", "dp=2,tp=4", "--strategies", str(f)]) == 0
    out = capsys.readouterr().out
    assert "linear_fc1.add     Add     ((2, 4), (4,))" in out
    assert "linear_fc2.matmul  AllReduce(tp group of 4)" in out and "group=[" not in out
    assert main(["propagate", "--dataset-strategy", "full_batch", MLP, "--mesh", "dp=2,tp=4", "--strategies", str(f), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["anchors"]["linear_fc1.matmul"] == {"origin": "user", "strategy": "((2, 1), (1, 4))"}
    ops = {o["name"]: o for o in d["ops"]}
    assert ops["gelu"]["strategy"] == [[2, 4]] and ops["gelu"]["layout"] == '(layout("dp", "tp"),)'
    # Megatron MLP on dp=2,tp=4 (tokens 4096, hidden 1024, fp16): one forward AllReduce of the
    # [2048,1024] output slice over tp, 2*(3/4)*4 MiB per device, and its transpose in the backward (the same
    # AllReduce of the output's gradient: MindSpore's autodiff, as verify --communication reads it)
    t = d["totals"]
    assert t["operator_bytes"] == 2 * (2 * 3 / 4 * 2048 * 1024 * 2) and t["redistribution_bytes"] == 0
    assert t["forward_bytes"] == t["backward_bytes"] == 2 * 3 / 4 * 2048 * 1024 * 2
    assert d["per_cell"]["linear_fc2"]["bytes"] >= t["operator_bytes"]          # fc2's AllReduce is in its cell
    assert main(["propagate", "--dataset-strategy", "full_batch", MLP, "--mesh", "dp=2,tp=4", "--strategies", str(f), "--format", "md"]) == 0
    assert "| operator | type | strategy | decided by |" in capsys.readouterr().out


def test_explain_command(capsys):
    assert main(["explain", "--dataset-strategy", "full_batch", FFN, "--mesh", "dp=2,tp=4", "--op", "matmul2"]) == 0
    out = capsys.readouterr().out
    assert "strategy: ((2, 4), (4, 1))" in out
    assert "  matmul1 (MatMul) ((2, 1), (1, 4))  [anchor]" in out
    assert "  relu (ReLU) ((2, 4),)  [forward, edge cost 0]" in out
    assert "((2, 4), (4, 1))                 edge comm          0" in out and "<- chosen" in out
    assert main(["explain", "--dataset-strategy", "full_batch", FFN, "--mesh", "dp=2,tp=4", "--op", "matmul9"]) == 2
    assert "--op 'matmul9' names no operator" in capsys.readouterr().err


def test_explain_op_by_unique_suffix():
    """--op layers.0.mlp.linear_fc2.matmul for model.decoder.layers.0.mlp.linear_fc2.matmul: a dotted suffix naming
    one operator is that operator (it was an error whose only suggestion was that very operator)."""
    from types import SimpleNamespace
    from strategist.api import find_op
    from strategist.errors import StrategistError
    plan = SimpleNamespace(choices=dict.fromkeys(["model.decoder.layers.0.mlp.linear_fc2.matmul",
                                                  "model.decoder.layers.1.mlp.linear_fc2.matmul", "a.matmul"]))
    assert find_op(plan, "layers.0.mlp.linear_fc2.matmul") == "model.decoder.layers.0.mlp.linear_fc2.matmul"
    assert find_op(plan, "a.matmul") == "a.matmul"
    with pytest.raises(StrategistError, match="did you mean: model.decoder.layers.0"):    # two operators end so
        find_op(plan, "mlp.linear_fc2.matmul")
    with pytest.raises(StrategistError, match="names no operator"):                     # not at a dot
        find_op(plan, "ayers.0.mlp.linear_fc2.matmul")


def test_propagate_bad_mesh_and_hardware(capsys):
    assert main(["propagate", "--dataset-strategy", "full_batch", MLP, "--mesh", "dp2"]) == 2
    assert "bad mesh 'dp2'" in capsys.readouterr().err
    assert main(["propagate", "--dataset-strategy", "full_batch", MLP, "--mesh", "dp=2", "--hardware", "tpu"]) == 2
    assert "hardware profile not found: tpu" in capsys.readouterr().err


def test_advice_anchor_over_its_own_device_matrix_round_trips(tmp_path, graph_of):
    """Grouped-query attention (examples/attention.py: 8 query heads, 2 key/value heads) at dp=2,tp=4: the advice
    configures FlashAttention with the query heads by tp and the key/value heads by 2, a Layout over (dp, tp, tp_group)
    = (2, 2, 2), which no tuple expresses (MindSpore refuses those rows as a tuple). The anchors file says so with
    the Layout's own device_matrix; read back, it is the same anchor and gives the advice's plan."""
    from strategist.advice.advisor import advise, load_rules
    from strategist.propagate import propagate
    from strategist.report.render import advice_dict
    g = graph_of("examples/attention.py:AttentionBlock", "kv_heads=2")
    from strategist.files.hardware import load_hardware
    hw = load_hardware("atlas-800t-a2")
    adv = advise(g, MESH, rules=load_rules(), dataset_strategy="full_batch", hardware=hw)
    fa = "attention.flash_attention"
    d = advice_dict(adv)
    text = d["anchors_yaml"]
    assert f"{fa}:\n  device_matrix: {{dp: 2, tp: 2, tp_group: 2}}\n" \
           f"  layout: [[dp, None, [tp, tp_group]], [dp, None, tp], [dp, None, tp]]\n" in text
    a = next(x for x in d["anchors"] if x["op"] == fa)
    assert a["layout_declaration"] == "layout = Layout((2, 2, 2), ('dp', 'tp', 'tp_group'))"
    assert not a["tuple_equivalent"]
    f = tmp_path / "a.yaml"
    f.write_text(text)
    back = load_anchors(str(f), g, MESH, check=True)
    assert back[fa].layouts == adv.anchors[fa].layouts
    plan = propagate(g, MESH, back, use_model_strategies=False, dataset_strategy="full_batch", hardware=hw)
    assert plan.strategy(fa)[:3] == ((2, 1, 4), (2, 1, 2), (2, 1, 2))
    assert all(plan.strategy(n) == adv.plan.strategy(n) for n in adv.plan.choices)


@pytest.mark.parametrize("target,kwargs,mesh,sp", [
    ("examples/mlp.py:MegatronMLP", ("hidden=4096", "ffn=16384", "tokens=4096"), "dp=2,tp=4", False),
    # sequence parallel: row linears configured with their reduce-scattered out layouts
    ("examples/llama.py:llama2_7b", ("layers=3", "batch=8", "loss=vocab_parallel"), "dp=2,tp=4", True),
    # grouped-query attention: a Layout over its own device matrix
    ("examples/attention.py:AttentionBlock", ("kv_heads=2",), "dp=2,tp=4", False),
])
def test_the_anchors_file_written_reads_back_as_the_advice(tmp_path, graph_of, target, kwargs, mesh, sp):
    """files.anchors.dump_anchors is load_anchors' inverse: the advice's anchors file, read back, is the advice's
    anchors (their strategies, layouts and out layouts) and propagates to the advice's plan."""
    from strategist.advice.advisor import advise, load_rules
    from strategist.files.hardware import load_hardware
    from strategist.propagate import propagate
    from strategist.report.render import advice_dict
    from conftest import serial
    m = Mesh.parse(mesh)
    g = serial(graph_of(target, *kwargs))
    if sp:
        g = g.with_meta(sequence_parallel=True)
    hw = load_hardware("atlas-800t-a2")
    adv = advise(g, m, rules=load_rules(), dataset_strategy="full_batch", hardware=hw)
    assert adv.chosen
    if sp:
        assert any(a.out_layouts is not None for a in adv.anchors.values())
    if "kv_heads=2" in kwargs:
        assert any(a.layouts is not None and tuple(a.layouts[0].device_matrix) != m.shape
                   for a in adv.anchors.values())
    f = tmp_path / "a.yaml"
    f.write_text(advice_dict(adv)["anchors_yaml"])
    back = load_anchors(str(f), g, m, check=True)
    assert set(back) == set(adv.anchors)
    for n, a in adv.anchors.items():
        b = back[n]
        assert adv.plan.strategy(n) == propagate(g, m, {n: b}, use_model_strategies=False,
                                                 dataset_strategy="full_batch", hardware=hw).strategy(n)
        assert (a.out_layouts is None) == (b.out_layouts is None) and (a.out_strategy is None) == (
            b.out_strategy is None)
    plan = propagate(g, m, back, use_model_strategies=False, dataset_strategy="full_batch", hardware=hw)
    assert all(plan.strategy(n) == adv.plan.strategy(n) for n in adv.plan.choices)
