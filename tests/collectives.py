"""A numpy collective simulator: N devices as N arrays; executes redistribution plans."""
import numpy as np


def scatter(a: np.ndarray, layout, rng=None) -> list:
    """Each device's shard of global ``a`` under ``layout``; partial layouts get random addends
    that sum to ``a`` over every partial group."""
    n = layout.device_num
    shards = []
    addends = None
    if layout.partial:
        size = int(np.prod([layout.dev_matrix[x] for x in layout.partial]))
        rng = rng or np.random.default_rng(0)
        parts = [rng.standard_normal(a.shape) for _ in range(size - 1)]
        addends = parts + [a - sum(parts)]
    for r in range(n):
        box = layout.box(r)
        src = a
        if addends is not None:
            c = layout.coords(r)
            idx = 0
            for x in sorted(layout.partial):
                idx = idx * layout.dev_matrix[x] + c[x]
            src = addends[idx]
        shards.append(src[tuple(slice(lo, hi) for lo, hi in box)].copy())
    return shards


def run(plan, shards: list) -> list:
    for op in plan.ops:
        new = []
        for r in range(len(shards)):
            group = op.group(r)
            me = group.index(r)
            if op.kind == "Split":
                new.append(np.split(shards[r], op.n, axis=op.dim)[me])
            elif op.kind == "AllGather":
                new.append(np.concatenate([shards[g] for g in group], axis=op.dim))
            elif op.kind == "AllReduce":
                new.append(sum(shards[g] for g in group))
            elif op.kind == "ReduceScatter":
                new.append(np.split(sum(shards[g] for g in group), op.n, axis=op.dim)[me])
            elif op.kind == "AllToAll":
                got = [np.split(shards[g], op.n, axis=op.dim)[me] for g in group]
                new.append(np.concatenate(got, axis=op.concat_dim))
            else:
                raise AssertionError(op.kind)
        shards = new
    return shards


def check(src, dst, plan, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(src.shape)
    got = run(plan, scatter(a, src, rng))
    want = scatter(a, dst)
    assert len(got) == len(want)
    for r, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, (r, g.shape, w.shape, str(plan))
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-9, err_msg=f"device {r}: {plan}")
