"""Redistribution planner throughput: plans per second for 10 000 random layout pairs on a 64-device
mesh (device matrices: random coarsenings of [2,2,2,2,2,2]; tensors of rank 1-4), with and without
MindSpore's cost and the physical cost on the Atlas 800T A2 profile.

    .venv/bin/python bench/redistribution.py [--pairs 10000] [--seed 0]
"""
import argparse
import math
import os
import random
import sys
import time

# this checkout's strategist, not the one installed in .venv (an editable install of another tree)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from strategist.vocab.layout import Layout
from strategist.files.hardware import load_hardware
from strategist.engine.redistribution import plan


def random_layout(rng, shape_rank, base=(2,) * 6):
    m, dm = list(base), []
    while m:
        k = rng.randint(1, len(m))
        dm.append(math.prod(m[:k]))
        m = m[k:]
    dims = [[] for _ in range(shape_rank)]
    for a in rng.sample(range(len(dm)), len(dm)):
        w = rng.randint(-1, shape_rank - 1)
        if w >= 0:
            dims[w].append(a)
    return tuple(dm), tuple(tuple(d) for d in dims)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    pairs = []
    for _ in range(args.pairs):
        rank = rng.randint(1, 4)
        (dm1, d1), (dm2, d2) = random_layout(rng, rank), random_layout(rng, rank)
        shape = tuple(64 * rng.randint(1, 4) for _ in range(rank))
        pairs.append((Layout(shape, dm1, d1), Layout(shape, dm2, d2)))
    hw = load_hardware("atlas-800t-a2")

    t0 = time.perf_counter()
    plans = [plan(a, b) for a, b in pairs]
    t_plan = time.perf_counter() - t0
    t0 = time.perf_counter()
    for p in plans:
        p.mindspore_cost(2)
        p.physical(2, hw)
    t_cost = time.perf_counter() - t0
    kinds = {}
    for p in plans:
        for o in p.ops:
            kinds[o.kind] = kinds.get(o.kind, 0) + 1
    print(f"{args.pairs} random layout pairs on 64 devices (rank 1-4)")
    print("steps planned: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    print(f"plan only:        {args.pairs / t_plan:,.0f} plans/s  ({t_plan * 1e6 / args.pairs:.1f} us/plan)")
    print(f"plan + both costs: {args.pairs / (t_plan + t_cost):,.0f} plans/s")


if __name__ == "__main__":
    main()
