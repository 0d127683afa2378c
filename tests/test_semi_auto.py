"""MindSpore's semi_auto_parallel, as ``strategist compare``'s reference (c) runs it (strategist.engine.semi_auto).

MindFormers trains in semi_auto_parallel: an operator no ``shard()`` configures takes its OperatorInfo's batch
strategy, and an unconfigured Cast has no OperatorInfo at all. The expectations below are worked from
MindSpore's ops_info sources (``ReComputeBatchSplitFlagList``, ``GenerateBatchStrategies``,
``GenerateBatchStrategiesWithCheck``, ``IsParallelCareNode``); the live test asks MindSpore 2.9.0 itself.
"""
import os

import pytest

from strategist.frontend.loader import load_graph
from strategist.vocab.mesh import Mesh
from strategist.propagate import semi_auto_plan

HERE = os.path.dirname(os.path.abspath(__file__))
NETS = os.path.join(HERE, "models", "semi_auto.py")
FLAGS = (f"{NETS}:SplitFlags", ["x:float32[12,16]", "ids:int32[12]"], "dp=8")
CAST = (f"{NETS}:CastFollows", ["x:float32[64,64]"], "dp=8")


def _plan(model, inputs, mesh):
    g = load_graph(model, inputs, None)
    return semi_auto_plan(g, Mesh.parse(mesh), dataset_strategy="full_batch")     # the nets' own shard() calls


def test_unconfigured_operators_take_their_batch_strategy():
    p = _plan(*FLAGS)
    s = {n: c.strategy for n, c in p.choices.items()}
    assert s["mm0"] == ((1, 8), (8, 1)) and set(p.anchors) == {"mm0"}          # the one shard()
    # every split lowered to ONE value, gcd(8 devices, 12 rows) = 4 (GenerateBatchStrategiesWithCheck)
    # Add: ArithmeticBase splits an input whose dim 0, right-aligned, is not 1 -- not the [1, 16] row
    assert s["add"] == ((4, 1), (1, 1))
    # MatMul: input 0's rows only, never the weight
    assert s["mm1"] == ((4, 1), (1, 1))
    # Gather: the indices, never the table
    assert s["gather"] == ((1, 1), (4,))
    assert s["add2"] == ((4, 1), (4, 1))
    # Concat on axis 0 and a StridedSlice that does not fetch all of dim 0: nothing split
    assert s["concat"] == ((1, 1), (1, 1)) and s["slice"] == ((1, 1),)


def test_an_unconfigured_cast_passes_its_input_layout_on():
    p = _plan(*CAST)
    s = {n: c.strategy for n, c in p.choices.items()}
    # ReLU and Square: the default batch strategy (input 0's dim 0 over all 8 devices)
    assert s["relu"] == s["sq"] == ((8, 1),)
    # the Cast keeps the Mul's layout: no redistribution into it, the ReLU's after it
    assert p.choices["cast"].outputs[0] == p.choices["mul"].outputs[0]
    into = {(e.src, e.dst): e for e in p.edges}
    assert into[("mul", "cast")].forward.ops == ()
    assert into[("cast", "relu")].forward.ops != ()
    assert "cast" not in p.anchors


@pytest.mark.verify_live
@pytest.mark.parametrize("case", [FLAGS, CAST], ids=["split-flags", "cast-follows"])
def test_semi_auto_plan_is_mindspores_own(case):
    """MindSpore 2.9.0 compiled in semi_auto_parallel (strategies read from its step_parallel_end dump)."""
    from strategist.verify import compare, mindspore_plan
    model, inputs, mesh = case
    ms = mindspore_plan(model, mesh, inputs=inputs, dataset_strategy="full_batch", parallel_mode="semi_auto_parallel")
    c = compare(_plan(model, inputs, mesh), ms)
    # (the Cast has no OperatorInfo in MindSpore: no row to compare)
    assert c.total >= 4 and c.agreed == c.total, c.text()


def test_cli_propagate_semi_auto(tmp_path):
    """``strategist propagate --semi-auto``: the plan semi_auto_parallel runs, each operator saying why."""
    import subprocess
    import sys
    model, inputs, mesh = CAST
    cmd = [sys.executable, "-m", "strategist", "propagate", model, "--mesh", mesh, "--dataset-strategy", "full_batch",
           "--semi-auto"] + [a for i in inputs for a in ("--input", i)]
    env = {**os.environ, "PYTHONPATH": os.path.dirname(HERE)}
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = {ln.split()[0]: ln for ln in r.stdout.splitlines()          # the Operators table's rows
            if len(ln.split()) > 1 and (ln.split()[0], ln.split()[1]) in (("cast", "Cast"), ("relu", "ReLU"), ("neg", "Neg"))}
    assert "semi_auto cast follows its input" in rows["cast"] and "((2, 4),)" in rows["cast"]
    assert "semi_auto batch parallel" in rows["relu"] and "((8, 1),)" in rows["relu"]
    assert rows["neg"].rstrip().endswith("anchor")
    # MindFormers models cannot be verified so: one line naming why, no traceback
    r = subprocess.run([sys.executable, "-m", "strategist", "verify", "mindformers:qwen3/pretrain_qwen3_32b_4k.yaml",
                        "--mesh", "dp=2,tp=4", "--semi-auto"], capture_output=True, text=True, cwd=tmp_path,
                       timeout=300, env=env)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and "--semi-auto verifies path.py:NAME models" in r.stderr


TILE = (os.path.join(HERE, "models", "semi_auto_tile.py") + ":TileUp", ["x:float32[16,32]"], "dp=8")


def test_a_batch_strategy_the_operator_cannot_run_is_refused_in_one_line():
    """Tile(x[16, 32], (2, 1, 1)): its batch strategy is over the multiples, (8, 1, 1), and GenerateBatchStrategies-
    WithCheck leaves it unchecked (the row is not the input's rank), so the split of 8 meets a multiple of 2: MindSpore
    fails the Tile's Init ("operator Tile init failed"), and strategist refuses it, naming the operator and the fix."""
    from strategist.errors import StrategyError
    with pytest.raises(StrategyError, match=r"gives tile \(Tile\), which no shard\(\) configures, the batch strategy "
                                            r"\(\(8, 1, 1\),\).*configure tile with shard\(\)"):
        _plan(*TILE)


@pytest.mark.verify_live
def test_mindspore_refuses_that_batch_strategy_too():
    from strategist.errors import VerifyError
    from strategist.verify import mindspore_plan
    model, inputs, mesh = TILE
    with pytest.raises(VerifyError, match="operator Tile init failed"):
        mindspore_plan(model, mesh, inputs=inputs, dataset_strategy="full_batch", parallel_mode="semi_auto_parallel")
