"""Registry coverage (issue 10): the MindSpore OperatorInfo list, the rules of strategist/engine/rules/
against what MindSpore 2.9 accepts (facts measured with the msoracle harness, written down here), and
the numeric families executed on simulated devices: every candidate strategy, each device computing
on its own shards, the predicted partial sums reduced by the planned collectives, must give every
device exactly its shard of the global result."""
import os

import numpy as np
import pytest
import yaml

from strategist.errors import StrategyError
from strategist.vocab.graph import Input, Op, TensorSpec
from strategist.engine.rules.candidates import candidates
from strategist.engine.rules.registry import RULES, rule_for
from strategist.engine.rules.sharding import pre_reduce_layout, shard
from strategist.engine.redistribution import plan
from strategist.engine.rules import coverage

from collectives import run, scatter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def T(*shape, dtype="float64"):
    return TensorSpec(tuple(shape), dtype)


def make(type_, args, outs, attrs=None, params=()):
    """args: TensorSpec (a tensor input) or a Python value (a constant)."""
    inputs = tuple(Input("param" if k in params else "op", f"x{k}", spec=a) if isinstance(a, TensorSpec)
                   else Input("const", value=a) for k, a in enumerate(args))
    return Op("op", type_, "", "", "op", "", inputs, tuple(outs), attrs=attrs or {})


def execute(op, local_fn, arrays, n, outputs=(0,)):
    """Run every candidate of ``op`` on ``n`` simulated devices (see the module docstring)."""
    cands = candidates(op, n)
    assert cands
    for strat in cands:
        s = shard(op, strat, n)
        shards = [scatter(a, lay) for a, lay in zip(arrays, s.inputs)]
        local = [local_fn(*[sh[r] for sh in shards], s=s, r=r) for r in range(n)]
        full = local_fn(*arrays, s=None, r=None)
        for j in outputs:
            lj = [x[j] if isinstance(x, tuple) else x for x in local]
            fj = full[j] if isinstance(full, tuple) else full
            out = s.outputs[j]
            # partial sums, and whole on the axes a ReduceScatter lands on (a Gather's table rows)
            lay = pre_reduce_layout(s, j)
            got = run(plan(lay, out), lj)
            want = scatter(fj, out)
            for r in range(n):
                np.testing.assert_allclose(got[r], want[r], rtol=1e-9, atol=1e-9,
                                           err_msg=f"{op.type} {strat} output {j} device {r}")
    return cands


rng = np.random.default_rng(0)


# --------------------------------------------------------------------------------------
# the registry list


def test_operator_info_list_and_coverage():
    with open(os.path.join(ROOT, "rules", "mindspore_operator_infos.yaml")) as f:
        data = yaml.safe_load(f)
    prims = data["primitives"]
    assert data["count"] == len(prims) == len(set(prims))
    # the ones issue 10 names, all with an OperatorInfo in 2.9 and a rule here
    for p in ("Embedding SplitWithSize Outer Muls ArgMaxWithValue OneHotExt GroupedMatmul TopkExt SortExt "
              "IndexSelect CumsumExt AssignAdd FmodScalar Swiglu GatherD BatchNorm MaxPool AvgPool "
              "Conv2DTranspose CumSum MaxDim AddExt SubExt").split():
        assert p in prims and p in RULES, p
    # Dense has no OperatorInfo in 2.9 (BatchParallel), but has a rule
    assert "Dense" not in prims and "Dense" in data["no_operator_info"] and "Dense" in RULES
    left = [p for p in prims if p not in RULES]
    assert len(prims) - len(left) >= 300
    assert all(p in coverage.LEFT_OUT for p in left), [p for p in left if p not in coverage.LEFT_OUT]


# --------------------------------------------------------------------------------------
# what MindSpore 2.9 accepts (one-operator nets compiled by MindSpore, recorded in docs/notes/coverage.md)


def ok(op, strategy, n=8):
    shard(op, strategy, n)


def refused(op, strategy, n=8):
    with pytest.raises(StrategyError):
        shard(op, strategy, n)


def test_scalars_are_strategy_inputs_only_when_tensor_typed():
    muls = make("Muls", [T(8, 16), 0.5], [T(8, 16)])
    ok(muls, ((2, 4),))                          # MindSpore: Muls ((2, 4),)
    refused(muls, ((2, 4), ()))
    addext = make("AddExt", [T(8, 16), T(8, 16), 1], [T(8, 16)])
    ok(addext, ((2, 4), (2, 4)))                 # MindSpore: AddExt ((2, 4), (2, 4)); alpha is not an input
    add = make("Add", [T(8, 16), T()], [T(8, 16)])   # the extractor gives Add(x, 2.0)'s 2.0 as a 0-d tensor
    ok(add, ((2, 4), ()))                        # MindSpore: Add(x, 2.0) takes ((2, 4), ()), refuses ((2, 4),)
    refused(add, ((2, 4),))
    fmod = make("FmodScalar", [T(8, 16), 3.0], [T(8, 16)])
    ok(fmod, ((2, 4),))


def test_axis_operators_match_mindspore():
    x = T(8, 16)
    refused(make("CumSum", [x, 1, False, False], [x]), ((1, 2),))
    refused(make("CumsumExt", [x, 1, None], [x]), ((4, 2),))
    ok(make("CumsumExt", [x, 1, None], [x]), ((8, 1),))
    refused(make("Swiglu", [x, -1], [T(8, 8)]), ((2, 4),))
    ok(make("Swiglu", [x, -1], [T(8, 8)]), ((8, 1),))
    ok(make("ArgMaxWithValue", [x, 1, False], [T(8), T(8)]), ((2, 4),))     # reduced axis may split
    refused(make("MaxDim", [x, 1, False], [T(8), T(8)]), ((2, 4),))         # ... but not for MaxDim
    ok(make("MaxDim", [x, 1, False], [T(8), T(8)]), ((8, 1),))
    refused(make("TopkExt", [x, 4, -1, True, True], [T(8, 4), T(8, 4)]), ((2, 4),))
    refused(make("SortExt", [x, 1, False, False], [x, x]), ((2, 4),))
    refused(make("SplitWithSize", [x, (8, 8), 1], [T(8, 8), T(8, 8)]), ((2, 4),))
    ok(make("SplitWithSize", [x, (8, 8), 1], [T(8, 8), T(8, 8)]), ((8, 1),))
    gd = make("GatherD", [x, 1, T(8, 4, dtype="int32")], [T(8, 4)])
    ok(gd, ((8, 1), (8, 1)))
    refused(gd, ((2, 4), (2, 4)))
    refused(gd, ((2, 1), (4, 1)))


def test_gather_like_match_mindspore():
    sel = make("IndexSelect", [T(8, 16), 0, T(4, dtype="int32")], [T(4, 16)])
    ok(sel, ((2, 4), (1,)))
    ok(sel, ((1, 1), (4,)))
    emb = make("Embedding", [T(8, 4, dtype="int32"), T(32, 16), None, None, 2.0, False], [T(8, 4, 16)],
               params=(1,))
    for st in (((1, 1), (8, 1)), ((1, 1), (1, 8)), ((1, 1), (2, 4))):
        ok(emb, st)
    for st in (((2, 1), (1, 1)), ((8, 1), (1, 1)), ((2, 1), (4, 1))):
        refused(emb, st)
    oh = make("OneHot", [T(8, dtype="int32"), 16, T(), T()], [T(8, 16)])
    ok(oh, ((8, 1), (), ()))               # MindSpore's first row is shaped like the output [8, 16]
    ok(oh, ((2, 4), (), ()))               # and the depth may be split (checked on MindSpore)
    assert candidates(oh, 8)[:3] == [((1, 1), (), ()), ((1, 2), (), ()), ((1, 4), (), ())]


def test_cnn_operators_match_mindspore():
    conv = {"kernel_size": (3, 3), "stride": (1, 1, 1, 1), "dilation": (1, 1, 1, 1), "group": 1}
    same = make("Conv2D", [T(8, 4, 16, 16), T(8, 4, 3, 3)], [T(8, 8, 16, 16)], {**conv, "pad_mode": "same"})
    ok(same, ((1, 1, 2, 1), (1, 1, 1, 1)))
    ok(same, ((2, 2, 2, 1), (1, 2, 1, 1)))
    valid = make("Conv2D", [T(8, 4, 16, 16), T(8, 4, 3, 3)], [T(8, 8, 14, 14)], {**conv, "pad_mode": "valid"})
    refused(valid, ((1, 1, 2, 1), (1, 1, 1, 1)))
    pool = make("MaxPool", [T(8, 4, 16, 16)], [T(8, 4, 8, 8)], {"kernel_size": (1, 1, 2, 2), "strides": (1, 1, 2, 2)})
    ok(pool, ((2, 2, 2, 1),))
    over = make("MaxPool", [T(8, 4, 16, 16)], [T(8, 4, 8, 8)],
                {"kernel_size": (1, 1, 3, 3), "strides": (1, 1, 2, 2), "pad_mode": "same"})
    refused(over, ((1, 1, 2, 1),))
    bn = make("BatchNorm", [T(8, 4, 6, 6)] + [T(4)] * 4, [T(8, 4, 6, 6), T(4), T(4), T(4), T(4)])
    ok(bn, ((2, 2, 1, 1), (2,), (2,), (2,), (2,)))
    ok(bn, ((2, 1, 2, 1), (1,), (1,), (1,), (1,)))
    ct = make("Conv2DTranspose", [T(8, 8, 16, 16), T(8, 4, 3, 3), (8, 4, 16, 16)], [T(8, 4, 16, 16)],
              {"kernel_size": (3, 3), "stride": (1, 1), "pad_mode": "same"})
    ok(ct, ((2, 2, 1, 1), (2, 1, 1, 1)))
    ok(ct, ((1, 1, 2, 1), (1, 1, 1, 1)))
    bias = make("BiasAdd", [T(8, 4, 6, 6), T(4), 0], [T(8, 4, 6, 6)])
    ok(bias, ((2, 2, 1, 1), (2,)))                 # the bias follows the channel dim; data_format is no input


def test_strided_slice_masks_match_mindspore():
    x = T(8, 16)
    shrink = make("StridedSlice", [x, (0, 0), (1, 16), (1, 1), 0, 0, 0, 0, 1], [T(16)])
    ok(shrink, ((1, 8),))
    new = make("StridedSlice", [x, (0, 0), (1, 16), (1, 1), 0, 0, 0, 1, 0], [T(1, 8, 16)])
    ok(new, ((2, 4),))
    part = make("StridedSlice", [x, (0, 0), (4, 16), (1, 1), 0, 0, 0, 0, 0], [T(4, 16)])
    refused(part, ((2, 4),))
    ok(part, ((1, 8),))


def test_dense_is_batch_parallel():
    d = make("Dense", [T(8, 16), T(32, 16), T(32)], [T(8, 32)], params=(1, 2))
    r = rule_for(d)
    assert r.inputs == (("b", None), (None, None), (None,)) and r.outputs == (("b", None),)
    if hasattr(r, "batch_parallel"):
        assert candidates(d, 8) == [((8, 1), (1, 1), (1,))]     # MindSpore's one strategy


# --------------------------------------------------------------------------------------
# numeric families on simulated devices


@pytest.mark.parametrize("n", [4, 8])
def test_scalar_and_ext_elementwise(n):
    a, b = rng.standard_normal((8, 16)), rng.standard_normal((8, 16))
    execute(make("Muls", [T(8, 16), 0.5], [T(8, 16)]), lambda x, **_: x * 0.5, [a], n)
    execute(make("AddExt", [T(8, 16), T(8, 16), 2], [T(8, 16)]), lambda x, y, **_: x + 2 * y, [a, b], n)
    execute(make("FmodScalar", [T(8, 16), 0.7], [T(8, 16)]), lambda x, **_: np.fmod(x, 0.7), [a], n)


@pytest.mark.parametrize("n", [4, 8])
def test_outer_cumsum_swiglu_topk(n):
    u, v = rng.standard_normal(8), rng.standard_normal(16)
    execute(make("Outer", [T(8), T(16)], [T(8, 16)]), lambda x, y, **_: np.outer(x, y), [u, v], n)
    a = rng.standard_normal((8, 16))
    execute(make("CumsumExt", [T(8, 16), 1, None], [T(8, 16)]), lambda x, **_: np.cumsum(x, 1), [a], n)

    def swiglu(x, **_):
        g, h = np.split(x, 2, axis=-1)
        return g / (1 + np.exp(-g)) * h
    execute(make("Swiglu", [T(8, 16), -1], [T(8, 8)]), swiglu, [a], n)
    execute(make("TopkExt", [T(8, 16), 4, -1, True, True], [T(8, 4), T(8, 4)]),
            lambda x, **_: (-np.sort(-x, axis=-1)[..., :4], np.argsort(-x, axis=-1)[..., :4].astype(float)),
            [a], n, outputs=(0,))


@pytest.mark.parametrize("n", [4, 8])
def test_gatherd_and_split(n):
    a = rng.standard_normal((8, 16))
    idx = rng.integers(0, 16, size=(8, 4)).astype(np.float64)
    execute(make("GatherD", [T(8, 16), 1, T(8, 4)], [T(8, 4)]),
            lambda x, i, **_: np.take_along_axis(x, i.astype(int), 1), [a, idx], n)
    execute(make("SplitWithSize", [T(8, 16), (4, 12), 1], [T(8, 4), T(8, 12)]),
            lambda x, **_: (x[:, :4], x[:, 4:]), [a], n, outputs=(0, 1))


def _rows_local(table_of, lookup):
    """A device holding rows [lo, hi) of a table looks up only those ids (zeros elsewhere)."""
    def local(*xs, s, r):
        table, ids = table_of(xs)
        if s is None:
            return lookup(table, ids.astype(int))
        k = 0 if table is xs[0] else 1
        lo = s.inputs[k].box(r)[0][0]
        rows = ids.astype(int) - lo
        hit = (rows >= 0) & (rows < table.shape[0])
        out = lookup(table, np.clip(rows, 0, table.shape[0] - 1))
        return out * np.expand_dims(hit, -1) if out.ndim > hit.ndim else out * hit
    return local


@pytest.mark.parametrize("n", [4, 8])
def test_embedding_vocab_parallel(n):
    table = rng.standard_normal((32, 8))
    ids = rng.integers(0, 32, size=(4, 6)).astype(np.float64)
    op = make("Embedding", [T(4, 6), T(32, 8), None, None, 2.0, False], [T(4, 6, 8)], params=(1,))
    cands = execute(op, _rows_local(lambda xs: (xs[1], xs[0]), lambda t, i: t[i]), [ids, table], n)
    assert any(c[1][0] > 1 for c in cands)     # the vocabulary split (partial sums) is exercised


@pytest.mark.parametrize("n", [4, 8])
def test_index_select_rows(n):
    x = rng.standard_normal((16, 8))
    ids = rng.integers(0, 16, size=(4,)).astype(np.float64)
    op = make("IndexSelect", [T(16, 8), 0, T(4)], [T(4, 8)])
    execute(op, _rows_local(lambda xs: (xs[0], xs[1]), lambda t, i: t[i]), [x, ids], n)


@pytest.mark.parametrize("n", [4, 8])
def test_unsorted_segment_sum_partial(n):
    x = rng.standard_normal((8, 6))
    seg = rng.integers(0, 4, size=(8,)).astype(np.float64)

    def local(x, s_ids, **_):
        out = np.zeros((4,) + x.shape[1:])
        np.add.at(out, s_ids.astype(int), x)
        return out
    execute(make("UnsortedSegmentSum", [T(8, 6), T(8), 4], [T(4, 6)]), local, [x, seg], n)


@pytest.mark.parametrize("n", [4, 8])
def test_grouped_matmul_k_reduction(n):
    x, w = rng.standard_normal((8, 16)), rng.standard_normal((1, 16, 8))
    op = make("GroupedMatmul", [T(8, 16), T(1, 16, 8)], [T(8, 8)], params=(1,))
    execute(op, lambda a, b, **_: a @ b[0], [x, w], n)


@pytest.mark.parametrize("n", [4, 8])
def test_cnn_local_windows(n):
    x = rng.standard_normal((4, 4, 8, 8))
    pool = make("MaxPool", [T(4, 4, 8, 8)], [T(4, 4, 4, 4)], {"kernel_size": (1, 1, 2, 2), "strides": (1, 1, 2, 2)})
    execute(pool, lambda a, **_: a.reshape(a.shape[0], a.shape[1], a.shape[2] // 2, 2, a.shape[3] // 2, 2).max((3, 5)),
            [x], n)
    w = rng.standard_normal((8, 4, 1, 1))
    conv = make("Conv2D", [T(4, 4, 8, 8), T(8, 4, 1, 1)], [T(4, 8, 8, 8)],
                {"kernel_size": (1, 1), "stride": (1, 1, 1, 1), "pad_mode": "valid", "dilation": (1, 1, 1, 1),
                 "group": 1})
    execute(conv, lambda a, k, **_: np.einsum("nchw,oc->nohw", a, k[:, :, 0, 0]), [x, w], n)
    b = rng.standard_normal(4)
    execute(make("BiasAdd", [T(4, 4, 8, 8), T(4), 0], [T(4, 4, 8, 8)]),
            lambda a, c, **_: a + c[None, :, None, None], [x, b], n)


@pytest.mark.parametrize("n", [4, 8])
def test_stack_broadcast_and_shrink(n):
    a, b = rng.standard_normal((8, 16)), rng.standard_normal((8, 16))
    execute(make("Stack", [T(8, 16), T(8, 16), 1], [T(8, 2, 16)], {"axis": 1}),
            lambda x, y, **_: np.stack([x, y], 1), [a, b], n)
    v = rng.standard_normal((1, 16))

    def bcast(x, s, r):
        shape = (8, 16) if s is None else tuple(hi - lo for lo, hi in s.outputs[0].box(r))
        return np.broadcast_to(x, shape)
    execute(make("BroadcastTo", [T(1, 16), (8, 16)], [T(8, 16)]), bcast, [v], n)
    execute(make("StridedSlice", [T(8, 16), (2, 0), (3, 16), (1, 1), 0, 0, 0, 0, 1], [T(16)]),
            lambda x, **_: x[2], [a], n)


# --------------------------------------------------------------------------------------
# MindSpore itself, through an external reference harness (not part of this repository): set
# STRATEGIST_MSORACLE to its run.py to include these checks

MSORACLE = os.environ.get("STRATEGIST_MSORACLE", "")
_PROBE = '''
import numpy as np
import mindspore as ms
from mindspore import nn
from mindspore.ops.auto_generate import gen_ops_prim as G


class Emb(nn.Cell):
    def __init__(self, strategy):
        super().__init__()
        self.p = G.Embedding()
        self.p.shard(tuple(tuple(s) for s in strategy))

    def construct(self, i, w):
        return self.p(i, w, None, None, 2.0, False)


class Muls(nn.Cell):
    def __init__(self, strategy):
        super().__init__()
        self.p = G.Muls()
        self.p.shard(tuple(tuple(s) for s in strategy))

    def construct(self, x):
        return self.p(x, 0.5)
'''


def _oracle(tmp_path, cls, strategy, *inputs):
    import json
    import subprocess
    import sys
    model = tmp_path / "probe.py"
    model.write_text(_PROBE)
    args = [sys.executable, MSORACLE, f"{model}:{cls}", "--kwargs", json.dumps({"strategy": strategy}),
            "--devices", "8", "--dataset-strategy", "full_batch", "--compact"]
    for x in inputs:
        args += ["--input", x]
    out = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    return json.loads(out.stdout)


@pytest.mark.slow
@pytest.mark.skipif(not MSORACLE or not os.path.exists(MSORACLE),
                    reason="no reference harness: set STRATEGIST_MSORACLE")
def test_mindspore_agrees_on_embedding_and_muls(tmp_path):
    emb = make("Embedding", [T(8, 4, dtype="int32"), T(32, 16), None, None, 2.0, False], [T(8, 4, 16)],
               params=(1,))
    for strategy, want in (([[1, 1], [2, 4]], True), ([[2, 1], [1, 1]], False)):
        res = _oracle(tmp_path, "Emb", strategy, "i:int32[8,4]", "w:float32[32,16]")
        assert res["ok"] is want, res.get("error")
        if want:
            ok(emb, strategy)
        else:
            refused(emb, strategy)
    res = _oracle(tmp_path, "Muls", [[2, 4]], "x:float32[8,16]")
    assert res["ok"], res.get("error")
    assert [o["in_strategy"] for o in res["ops"] if o["type"] == "Muls"] == [[[2, 4]]]
    ok(make("Muls", [T(8, 16), 0.5], [T(8, 16)]), ((2, 4),))
