"""The registry's layouts and partial sums, executed: every candidate strategy of an operator is run
on simulated devices (numpy), each computing on its own shards; the partial sums the rule predicts
are reduced by the planned collectives; every device must then hold exactly its shard of the
operator's global result."""
import numpy as np
import pytest

from strategist.vocab.graph import Input, Op, TensorSpec
from strategist.engine.rules.candidates import candidates
from strategist.engine.rules.sharding import pre_reduce_layout, shard
from strategist.engine.redistribution import plan

from collectives import run, scatter


def T(*shape):
    return TensorSpec(tuple(shape), "float64")


def make(type_, ins, out, consts=()):
    inputs = tuple(Input("op", f"x{i}", spec=s) for i, s in enumerate(ins)) + \
        tuple(Input("const", value=c) for c in consts)
    return Op("op", type_, "", "", "op", "", inputs, (out,))


def execute(op, local_fn, arrays, n, limit=None):
    cands = candidates(op, n)
    assert cands
    for strat in cands[:limit]:
        s = shard(op, strat, n)
        shards = [scatter(a, lay) for a, lay in zip(arrays, s.inputs)]
        # each device computes on its own shards
        local = [local_fn(*[sh[r] for sh in shards], s=s, r=r) for r in range(n)]
        out = s.outputs[0]
        # what each device computes: partial, and whole on the axes a ReduceScatter lands on (Gather's table rows)
        got = run(plan(pre_reduce_layout(s), out), local)
        want = scatter(local_fn(*arrays, s=None, r=None), out)
        for r in range(n):
            np.testing.assert_allclose(got[r], want[r], rtol=1e-9, atol=1e-9, err_msg=f"{op.type} {strat} device {r}")


rng = np.random.default_rng(0)


@pytest.mark.parametrize("n", [4, 8])
@pytest.mark.parametrize("ta, tb", [(False, False), (False, True), (True, False)])
def test_matmul(n, ta, tb):
    a = rng.standard_normal((8, 16) if not ta else (16, 8))
    b = rng.standard_normal((16, 8) if not tb else (8, 16))
    op = make("MatMul", [T(*a.shape), T(*b.shape)], T(8, 8), (ta, tb))
    execute(op, lambda x, y, **_: (x.T if ta else x) @ (y.T if tb else y), [a, b], n)


@pytest.mark.parametrize("n", [4, 8])
def test_batch_matmul_with_broadcast_weight(n):
    a, b = rng.standard_normal((4, 8, 16)), rng.standard_normal((16, 8))
    op = make("BatchMatMul", [T(4, 8, 16), T(16, 8)], T(4, 8, 8), (False, False))
    execute(op, lambda x, y, **_: x @ y, [a, b], n)


@pytest.mark.parametrize("n", [4, 8])
def test_broadcast_add_and_reduce_and_transpose(n):
    a, b = rng.standard_normal((8, 4, 16)), rng.standard_normal((4, 1))
    execute(make("Add", [T(8, 4, 16), T(4, 1)], T(8, 4, 16)), lambda x, y, **_: x + y, [a, b], n)
    execute(make("ReduceSum", [T(8, 4, 16)], T(8, 16), ((1,), False)), lambda x, **_: x.sum(axis=1), [a], n)
    execute(make("Transpose", [T(8, 4, 16)], T(16, 8, 4), ((2, 0, 1),)), lambda x, **_: x.transpose(2, 0, 1), [a], n)


@pytest.mark.parametrize("n", [4, 8])
def test_gather_vocab_parallel(n):
    """A device holding rows [lo, hi) of the table looks up only those ids (zeros elsewhere): the
    outputs are partial sums over the vocabulary axis, reduced by the planned AllReduce (or, where the output
    takes the split on its first dimension, GatherV2PCost's ReduceScatter)."""
    table = rng.standard_normal((32, 8))
    ids = rng.integers(0, 32, size=(4, 6)).astype(np.float64)
    op = make("Gather", [T(32, 8), T(4, 6)], T(4, 6, 8), (0,))

    def local(tab, idx, s, r):
        if s is None:
            return table[idx.astype(int)]
        lo = s.inputs[0].box(r)[0][0]
        rows = idx.astype(int) - lo
        hit = (rows >= 0) & (rows < tab.shape[0])
        out = tab[np.clip(rows, 0, tab.shape[0] - 1)]
        return out * hit[..., None]

    execute(op, local, [table, ids], n)
