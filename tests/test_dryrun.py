"""``strategist verify --memory``: MindSpore's DryRun peak memory beside strategist's estimate.

Cheap tests read a captured MindSpore log (tests/fixtures/dryrun/: the memory lines of
``verify --memory examples/llama.py:llama2_7b --kwargs layers=2 batch=8 --mesh dp=8``, rank 0), build the child's
requests (anchors, recompute, pipeline stages) and check the one-line errors. The ``verify_live`` test runs
MindSpore's DryRun itself (a child process; it needs a C and a C++ compiler for the stub CANN libraries).
"""
import json
import os
import shutil

import pytest

from strategist.errors import VerifyError
from strategist.verify.dryrun import (MemoryAnswer, answer_of, memory_request, parse_memory_log, pipeline_stages,
                                      stage_ranks)
from strategist.verify.memory_report import MemoryCheck, memory_json, memory_text
from strategist.vocab.mesh import Mesh

from conftest import ROOT

LOG = os.path.join(ROOT, "tests", "fixtures", "dryrun", "llama2_7b_dp8_rank0.log")
TINY = "examples/llama.py:tiny"
MIB = 2 ** 20
#: MindSpore 2.9.0's used peak of llama2_7b (layers=2, batch=8) on dp=8, rank 0, nn.AdamWeightDecay
LLAMA_DP8_USED = 8743305216
KEYS = {"used_peak_bytes", "actual_peak_bytes", "estimate_bytes", "ratio", "rank", "stage", "seconds",
        "mindspore_version", "optimizer"}


def _log() -> str:
    with open(LOG) as f:
        return f.read()


def test_log_figures():
    m = parse_memory_log(_log())
    assert (m.used_peak_mib, m.actual_peak_mib, m.weight_mib) == (8338, 10076, 3816)
    assert (m.used_peak_bytes, m.actual_peak_bytes) == (LLAMA_DP8_USED, 10565934592)
    assert parse_memory_log("no memory lines here") == type(m)()


def test_answer_prefers_the_bytes_and_reads_the_weights():
    res = {"ok": True, "mindspore_version": "2.9.0", "memory_stats": {"max_allocated_memory": 1}}
    a = answer_of(res, _log(), -9, rank=0, stage=0, device_num=8, seconds=12.3456, where="w", timeout=900,
                  optimizer="adamw")
    assert a == MemoryAnswer(LLAMA_DP8_USED, 10565934592, 3816 * MIB, 0, 0, 8, 12.346, "2.9.0", "adamw")
    # only the WARNING summary (GLOG_v=2): whole MiB, and the in-process statistics for the used peak
    summary = "Used peak memory usage (without fragments): 8338M\nActual peak memory usage (with fragments): 10076M\n"
    a = answer_of(res | {"memory_stats": {"max_allocated_memory": 123}}, summary, -6, rank=7, stage=1,
                  device_num=8, seconds=1, where="w", timeout=900, optimizer="adamw")
    assert (a.used_peak_bytes, a.actual_peak_bytes, a.weight_bytes, a.rank, a.stage) == (123, 10076 * MIB, None, 7, 1)


@pytest.mark.parametrize("res, rc, log, expect", [
    (None, None, "", "did not finish within 900 s"),
    (None, -11, "x\n[ERROR] ME: it broke\n", "ended (exit code -11) before its answer; last message: [ERROR] ME: it broke"),
    ({"ok": False, "error_kind": "rejected", "error": "TypeError: For primitive[Add], Float16 and Float32"}, -9, "",
     "MindSpore could not run llama on dp=8 in DryRun: TypeError: For primitive[Add], Float16 and Float32"),
    ({"ok": False, "error_kind": "input", "error": "anchor x: no such attribute"}, 0, "", "anchor x: no such attribute"),
    ({"ok": True}, -6, "", "logged no peak memory"),
])
def test_failures_are_one_line(res, rc, log, expect):
    with pytest.raises(VerifyError) as err:
        answer_of(res, log, rc, rank=0, stage=0, device_num=8, seconds=1, where="llama on dp=8", timeout=900,
                  optimizer="adamw")
    assert expect in str(err.value) and "\n" not in str(err.value)


def test_ranks_simulated():
    assert stage_ranks(8, 1, None) == [(0, 0)]
    assert stage_ranks(8, 4, None) == [(0, 0), (7, 3)]
    with pytest.raises(VerifyError, match="not a device"):
        stage_ranks(8, 1, 8)


def test_request_anchors_tuple_and_layout(graph_of, tmp_path):
    graph = graph_of(TINY)
    anchors = tmp_path / "a.yaml"
    anchors.write_text("model.layers.*.feed_forward.w2.matmul: [[2, 4], [4, 1]]\n"
                       "lm_head.matmul:\n  layout: [[dp, None], [tp, None]]\n")
    from strategist.files.anchors import load_anchors
    mesh = Mesh.parse("dp=2,tp=4")
    req = memory_request(TINY, mesh, graph, anchors=load_anchors(str(anchors), graph, mesh))
    by_op = {a["op"]: a for a in req["anchors"]}
    assert by_op["model.layers.1.feed_forward.w2.matmul"]["in_strategy"] == ((2, 4), (4, 1))
    assert by_op["model.layers.1.feed_forward.w2.matmul"]["cell_path"] == "model.layers.1.feed_forward.w2"
    head = by_op["lm_head.matmul"]
    assert head["in_layout"] == [[["dp"], []], [["tp"], []]] and head["mesh"] == {"shape": [2, 4], "names": ["dp", "tp"]}
    assert req["model"] == os.path.join(ROOT, "examples", "llama.py") + ":tiny"
    assert (req["device_num"], req["pipeline_stages"], req["optimizer"], req["dataset_strategy"]) == \
        (8, 1, "adamw", "data_parallel")


def test_request_recompute_and_pipeline(graph_of):
    graph = graph_of(TINY)
    full = memory_request(TINY, Mesh.parse("dp=8"), graph, recompute="full")
    assert full["recompute_cells"] == ["model.layers.0", "model.layers.1"]
    sel = memory_request(TINY, Mesh.parse("dp=8"), graph, recompute="selective")
    assert {(o["cell_path"], o["instance"]) for o in sel["recompute_ops"]} == {
        (f"model.layers.{i}.feed_forward", n) for i in (0, 1) for n in ("silu", "mul")}
    pp = memory_request(TINY, Mesh.parse("dp=2,pp=2"), graph, micro_batches=4)
    assert pp["pipeline_stages"] == 2 and pp["device_num"] == 4 and pp["mesh"]["names"] == ["dp"]
    assert pp["stages"] == pipeline_stages(graph, 2) == {"model.layers.0": 0, "model.layers.1": 1,
                                                         "model.tok_embeddings": 0, "model.norm_out": 1,
                                                         "lm_head": 1, "loss": 1}


def test_a_swap_request_runs_mindformers_adamw_swapping_with_switch_inlining_off(graph_of, tmp_path, monkeypatch):
    """``verify --memory --optimizer-swap``: the child builds MindFormers' AdamW with swap=True, and MindSpore's
    runtime runs it with switch_inline:False (the setting MindFormers documents for it), any other runtime setting
    kept."""
    from strategist.verify import dryrun
    req = memory_request(TINY, Mesh.parse("dp=8"), graph_of(TINY), optimizer_swap=True)
    assert req["optimizer_swap"] is True and req["optimizer"] == "adamw"
    assert memory_request(TINY, Mesh.parse("dp=8"), graph_of(TINY))["optimizer_swap"] is False
    cann = dryrun.cann_stubs.CannStubs(home=str(tmp_path), lib_dirs=(str(tmp_path),), nprocs_shim="")
    monkeypatch.setenv("MS_DEV_RUNTIME_CONF", "memory_statistics:True,switch_inline:True")
    env, plain = dryrun._child_env(cann, 8, 0, swap=True), dryrun._child_env(cann, 8, 0)
    assert env["MS_DEV_RUNTIME_CONF"] == "memory_statistics:True,switch_inline:False"
    assert plain["MS_DEV_RUNTIME_CONF"] == "memory_statistics:True,switch_inline:True"


@pytest.mark.parametrize("options, expect", [
    ({"micro_batches": 1, "mesh": "dp=2,pp=2"}, "needs at least 2 micro-batches"),
    ({"mesh": "dp=2,pp=4", "micro_batches": 4}, "needs at least 4 repeated layers"),
    ({"optimizer": "lamb"}, "bad optimizer 'lamb'"),
    ({"recompute": "some"}, "bad recompute 'some'"),
    ({"model": "mindformers:llama2_7b"}, "takes a path/to/model.py:NAME model"),
    ({"optimizer": "momentum", "optimizer_swap": True}, "an optimizer swap is MindFormers' AdamW's"),
])
def test_request_errors(graph_of, options, expect):
    options = dict(options)
    model = options.pop("model", TINY)
    mesh = Mesh.parse(options.pop("mesh", "dp=8"))
    with pytest.raises(VerifyError, match=expect.replace("(", r"\(")):
        memory_request(model, mesh, graph_of(TINY), **options)


def _check(rank=0, stage=0, used=LLAMA_DP8_USED, estimate=1.19 * LLAMA_DP8_USED):
    return MemoryCheck(MemoryAnswer(used, 10565934592, 3816 * MIB, rank, stage, 8, 21.5, "2.9.0", "adamw"), estimate,
                       "MindSpore's nn.AdamWeightDecay: two moments in the weights' dtype")


def test_report_keys_and_table():
    d = json.loads(memory_json([_check()], TINY, "dp=8"))
    assert KEYS <= set(d["ranks"][0]) and d["ranks"][0]["ratio"] == 1.19 and d["mesh"] == "dp=8"
    text = memory_text([_check(), _check(7, 1)], TINY, "dp=4,pp=2")
    assert "8,338.3 MiB" in text and "10,076.5 MiB" in text and "1.19" in text and "AdamWeightDecay" in text
    assert MemoryCheck(_check().answer, None, "").ratio is None


@pytest.mark.parametrize("argv, expect", [
    (["--optimizer", "adamw"], "--optimizer is an option of --memory"),
    (["--memory", "--semi-auto"], "--semi-auto does not apply"),
    (["--memory", "--micro-batches", "0"], "--micro-batches must be >= 1"),
])
def test_cli_memory_options_are_checked(capsys, argv, expect):
    from strategist.cli import main
    with pytest.raises(SystemExit) as done:
        main(["verify", TINY, "--mesh", "dp=8", *argv])
    err = capsys.readouterr().err
    assert done.value.code == 2 and expect in err and err.count("\n") == 1


def test_cli_memory_json(monkeypatch, capsys):
    import strategist.api as api
    from strategist.cli import main
    seen = {}

    def fake(model, mesh, **kw):
        seen.update(kw, model=model, mesh=mesh)
        return [_check()]
    monkeypatch.setattr(api, "verify_memory", fake)
    assert main(["verify", TINY, "--mesh", "dp=8", "--memory", "--optimizer", "adam-weight-decay",
                 "--optimizer-parallel", "--recompute", "full", "--micro-batches", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert KEYS <= set(out["ranks"][0])
    assert (seen["optimizer"], seen["optimizer_parallel"], seen["recompute"], seen["micro_batches"]) == \
        ("adam-weight-decay", True, "full", 2)


def test_no_cxx_compiler_is_one_line(tmp_path, monkeypatch):
    from strategist.verify import cann_stubs
    monkeypatch.setenv("STRATEGIST_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))          # no compiler at all
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("CXX", raising=False)
    with pytest.raises(VerifyError) as err:
        cann_stubs.ensure_cann_stubs()
    msg = str(err.value)
    assert "\n" not in msg and "C compiler" in msg and "apt-get install gcc" in msg


def _cann(tmp_path):
    from strategist.verify.cann_stubs import CannStubs
    return CannStubs((str(tmp_path / "lib64"),), str(tmp_path), str(tmp_path / "preload" / "libstrategist_nprocs.so"))


def test_child_env_preloads_the_shim_only_for_micro_batches(graph_of, tmp_path, monkeypatch):
    from strategist.verify.dryrun import _child_env, needs_mindformers_cell
    graph = graph_of(TINY)
    assert not needs_mindformers_cell(memory_request(TINY, Mesh.parse("dp=8"), graph))
    assert needs_mindformers_cell(memory_request(TINY, Mesh.parse("dp=4"), graph, micro_batches=2))
    assert needs_mindformers_cell(memory_request(TINY, Mesh.parse("dp=2,pp=2"), graph, micro_batches=2))
    cann = _cann(tmp_path)
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    assert "LD_PRELOAD" not in _child_env(cann, 8, 0)
    assert _child_env(cann, 8, 0, nprocs_shim=True)["LD_PRELOAD"] == cann.nprocs_shim
    monkeypatch.setenv("LD_PRELOAD", "/x/libmine.so")        # the user's own preload stays, after the shim
    assert _child_env(cann, 8, 0, nprocs_shim=True)["LD_PRELOAD"] == f"{cann.nprocs_shim}:/x/libmine.so"
    assert _child_env(cann, 8, 0)["LD_PRELOAD"] == "/x/libmine.so"


def test_micro_batches_without_mindformers_is_one_line(graph_of, monkeypatch):
    import importlib.util

    from strategist.verify.dryrun import require_mindformers
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mindformers" else real(name, *a))
    graph = graph_of(TINY)
    require_mindformers(memory_request(TINY, Mesh.parse("dp=8"), graph))        # no micro-batches: not needed
    with pytest.raises(VerifyError) as err:
        require_mindformers(memory_request(TINY, Mesh.parse("dp=4"), graph, micro_batches=2))
    assert "pip install 'strategist[mindformers]'" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.skipif(not shutil.which("cc"), reason="no C compiler")
def test_nprocs_shim_reports_16_processors(tmp_path):
    import subprocess
    import sys

    from strategist.verify.cann_stubs import NPROCS_SOURCE
    src, so = tmp_path / "shim.c", tmp_path / "shim.so"
    src.write_text(NPROCS_SOURCE)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    code = "import ctypes; c = ctypes.CDLL(None); print(c.get_nprocs(), c.get_nprocs_conf())"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "LD_PRELOAD": str(so)},
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["16", "16"]


# --------------------------------------------------------------------------------------
# MindSpore's DryRun itself, in a child process

_TOOLS = [t for t in ("cc", "c++", "readelf") if not shutil.which(t)]


@pytest.mark.slow
@pytest.mark.verify_live
@pytest.mark.skipif(bool(_TOOLS), reason=f"verify --memory builds stub CANN libraries: no {', '.join(_TOOLS)}")
def test_llama_dp8_used_peak_live(capsys):
    """llama2_7b at 2 layers, global batch 8 on dp=8 (strategist's advice as the anchors), nn.AdamWeightDecay:
    MindSpore 2.9.0 reports a used peak of 8338 MiB on rank 0, its optimizer step (1272 MiB of fp16 weights, 2544 of
    fp16 moments, the gradients and the AllReduce's output 2 x 1272, four fp32 temporaries of the 500 MiB vocabulary
    table), which strategist's estimate holds too (8360 MiB)."""
    from strategist.cli import main
    assert main(["verify", "examples/llama.py:llama2_7b", "--kwargs", "layers=2", "batch=8", "--mesh", "dp=8",
                 "--memory", "--optimizer", "adam-weight-decay", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    (rank,) = d["ranks"]
    assert KEYS <= set(rank) and rank["rank"] == 0 and rank["optimizer"] == "adam-weight-decay"
    assert abs(rank["used_peak_bytes"] - LLAMA_DP8_USED) < 0.03 * LLAMA_DP8_USED
    assert rank["estimate_bytes"] == pytest.approx(8360 * MIB, rel=1e-3) and 0.97 < rank["ratio"] < 1.03
    assert rank["actual_peak_bytes"] >= rank["used_peak_bytes"] and rank["estimate_bytes"] > 0
    assert not os.path.exists(os.path.join(ROOT, "rank_0"))


#: MindSpore 2.9.0's used peak of llama2_7b (layers=2, batch=16) on dp=8 with 2 micro-batches of gradient
#: accumulation in MindFormers' MFPipelineWithLossScaleCell, rank 0, MindFormers' AdamW (measured with MindSpore's
#: default data-parallel strategies, semi_auto_parallel)
LLAMA_DP8_GA2_USED = 11154 * MIB


@pytest.mark.slow
@pytest.mark.skipif(bool(_TOOLS), reason=f"verify --memory builds stub CANN libraries: no {', '.join(_TOOLS)}")
def test_llama_dp8_grad_accumulation_used_peak_live(capsys):
    """The same model at global batch 16 with 2 micro-batches: MindFormers' cell (accumulated gradients whole, no
    constant zeros, gradients clipped), 11154 MiB used peak on rank 0 at the optimizer's start (1272 MiB weights,
    5088 fp32 moments, 1272 accumulated gradients, the clipped gradients and AdamW's fp32 temporaries). The anchors
    pin the norms and the loss's OneHot to the batch split (under a GradAccumulationCell MindSpore's propagation
    leaves the OneHot whole: 12133 MiB)."""
    from strategist.cli import main
    assert main(["verify", "examples/llama.py:llama2_7b", "--kwargs", "layers=2", "batch=16", "--mesh", "dp=8",
                 "--micro-batches", "2", "--memory", "--anchors",
                 os.path.join(ROOT, "bench", "anchors", "llama_dp8_norms.yaml"),
                 "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    (rank,) = d["ranks"]
    assert rank["rank"] == 0 and rank["optimizer"] == "adamw"
    assert abs(rank["used_peak_bytes"] - LLAMA_DP8_GA2_USED) < 0.03 * LLAMA_DP8_GA2_USED
    assert 0.9 < rank["ratio"] < 1.1


@pytest.mark.slow
def test_the_childs_mindformers_optimizer_writes_nothing_into_its_working_directory(tmp_path):
    """MindFormers logs into ./output/ unless LOG_MF_PATH points elsewhere: the child imports it as strategist does."""
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "LOG_MF_PATH"}
    code = ("import numpy as np; from mindspore import Parameter, Tensor; "
            "from strategist.verify import dryrun_child as c; "
            "c._optimizer('adamw', [Parameter(Tensor(np.ones(4, np.float32)), name='w')])")
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, check=True, capture_output=True, timeout=300)
    assert not (tmp_path / "output").exists()
