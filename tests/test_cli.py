"""The CLI: inspect output, and one-line errors (exit 2, no traceback) for every kind of bad input."""
import json
import os
import subprocess
import sys

import pytest

from strategist.cli import main

from conftest import MODELS, ROOT

MLP = os.path.join(ROOT, "examples/mlp.py:MegatronMLP")
BROKEN = os.path.join(MODELS, "broken.py")


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_inspect_prints_types_params_and_cell_tree(capsys):
    rc, out, err = run(capsys, "inspect", MLP, "--kwargs", "hidden=64", "ffn=256", "--input", "x:float16[8,64]")
    assert rc == 0
    assert "operators: 5   edges: 4" in out
    # 64*256 + 256 + 256*64 + 64 = 33088 parameters; fp16
    assert "parameters: 4 tensors, 33.09 K elements, 64.62 KiB" in out
    assert "  MatMul                                 2" in out
    assert "    linear_fc1 [Linear] 2" in out


def test_inspect_json_is_the_full_graph(capsys):
    rc, out, _ = run(capsys, "inspect", MLP, "--json")
    d = json.loads(out)
    assert [o["name"] for o in d["ops"]] == ["linear_fc1.matmul", "linear_fc1.add", "gelu",
                                             "linear_fc2.matmul", "linear_fc2.add"]
    assert d["params"]["linear_fc2.weight"]["spec"] == "float16[4096,1024]"


@pytest.mark.parametrize("argv, needle", [
    (["inspect", "no/such/model.py:Net"], "model file not found: no/such/model.py"),
    (["inspect", "examples/mlp.py"], "write path/to/model.py:NAME"),
    (["inspect", os.path.join(MODELS, "import_error.py:Net")], "No module named 'no_such_module_strategist'"),
    (["inspect", BROKEN + ":Nope"], "'Nope' not found in"),
    (["inspect", BROKEN + ":NOT_CALLABLE"], "is an integer, not a Cell class or factory function"),
    (["inspect", BROKEN + ":not_a_cell"], "returned str, not a mindspore.nn.Cell"),
    (["inspect", BROKEN + ":raises"], "RuntimeError: boom in factory"),
    (["inspect", BROKEN + ":NeedsArg"], "check --kwargs"),
    (["inspect", MLP, "--input", "x=float16[8,64]"], "bad --input 'x=float16[8,64]': write NAME:DTYPE"),
    (["inspect", MLP, "--input", "x:half[8,64]"], "write DTYPE[d0,d1,...] with DTYPE one of"),
    (["inspect", MLP, "--input", "y:float16[8,1024]"], "--input y is not a parameter of MegatronMLP.construct"),
    (["inspect", BROKEN + ":TwoInputs", "--input", "a:float32[4,5]"], "needs input 'b': add --input b:"),
    (["inspect", MLP, "--input", "x:float16[8,512]"], "For 'MatMul' the input dimensions must be equal"),
    (["inspect", BROKEN + ":GraphSyntaxError", "--input", "x:float32[2]"], "MindSpore could not compile"),
    (["inspect", MLP, "--kwargs", "hidden"], "bad --kwargs 'hidden': write KEY=VALUE"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, needle):
    rc, out, err = run(capsys, *argv)
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("strategist: error: "), err
    assert needle in lines[0]
    assert "Traceback" not in err and out == ""


def test_console_script_end_to_end_no_traceback(tmp_path):
    """The installed entry point, in a fresh process, from a directory that must stay empty."""
    exe = os.path.join(os.path.dirname(sys.executable), "strategist")
    env = {k: v for k, v in os.environ.items() if k != "GLOG_v"}   # as a user runs it
    ok = subprocess.run([exe, "inspect", MLP], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert ok.returncode == 0 and "operators: 5" in ok.stdout
    bad = subprocess.run([exe, "inspect", MLP, "--input", "x:float16[8,512]"], cwd=tmp_path,
                         capture_output=True, text=True, env=env)
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines() == [l for l in bad.stderr.splitlines() if l.startswith("strategist: error:")]
    assert os.listdir(tmp_path) == []


def test_the_overlap_options_reach_the_step_and_its_report(capsys):
    import json
    off = json.loads(run(capsys, "advise", "examples/llama.py:tiny", "--mesh", "dp=2", "--optimizer-parallel",
                         "--format", "json")[1])
    on = json.loads(run(capsys, "advise", "examples/llama.py:tiny", "--mesh", "dp=2", "--optimizer-parallel",
                        "--overlap-grad-reduce", "--overlap-param-gather", "--format", "json")[1])
    on, off = on["plan"]["step"], off["plan"]["step"]
    assert (on["options"]["grad_comm_overlap"], on["options"]["allgather_overlap"]) == (True, True)
    assert off["options"]["grad_comm_overlap"] is False
    # the dp=2 gradient reductions and weight AllGathers hidden behind computation: a shorter step
    assert on["schedule"]["step_s"] < off["schedule"]["step_s"]
    assert on["schedule"]["communication_not_overlapped_s"] < off["schedule"]["communication_not_overlapped_s"]
