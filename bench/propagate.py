"""Propagation benchmark: the LLaMA-2-70B-shaped example at 1, 10 and 80 layers on 64 devices
(dp=8, tp=8), anchored Megatron-style by examples/llama_megatron_dp8_tp8.yaml (column/row MatMuls,
FlashAttention by heads, vocab-parallel embedding and head). Prints operators, propagation seconds (extraction excluded) and peak RSS for
each, and the 80/10 time ratio. Targets: 80 layers in <= 2 s of propagation; 80/10 ratio <= 9.

    .venv/bin/python bench/propagate.py [--layers 1 10 80] [--batch 8]
"""
import argparse
import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# this checkout's strategist, not the one installed in .venv (an editable install of another tree), and
# bench/mindformers.py off sys.path (it would shadow the mindformers package)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.path.insert(0, ROOT)
os.environ.setdefault("GLOG_v", "4")

ANCHORS = os.path.join(ROOT, "examples", "llama_megatron_dp8_tp8.yaml")


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, nargs="+", default=[1, 10, 80])
    ap.add_argument("--batch", type=int, default=8)
    args = ap.parse_args()
    from strategist import load_graph
    from strategist.vocab.mesh import Mesh
    from strategist.files.hardware import load_hardware
    from strategist.files.anchors import load_anchors
    from strategist.propagate import clear_caches, propagate

    mesh, hw = Mesh.parse("dp=8,tp=8"), load_hardware("atlas-800t-a2")
    times = {}
    print(f"LLaMA-2-70B shape, batch {args.batch}, seq 4096, mesh {mesh}, hardware {hw.name}")
    for n in args.layers:
        g = load_graph(os.path.join(ROOT, "examples/llama.py:llama2_70b"), None, [f"layers={n}", f"batch={args.batch}"])
        anchors = load_anchors(ANCHORS, g, mesh)
        clear_caches()   # cold: no rules, candidates or plans carried over from the smaller run
        t0 = time.perf_counter()
        p = propagate(g, mesh, anchors, hardware=hw, dataset_strategy="full_batch")
        times[n] = time.perf_counter() - t0
        t = p.totals()
        print(f"layers {n:>3}: {len(g):>6} operators, {len(anchors):>4} anchors, propagation {times[n]:.2f} s, "
              f"peak RSS {peak_mb():.0f} MB, communication {t['total_bytes'] / 2**30:.2f} GiB/device "
              f"({t['total_seconds'] * 1e3:.1f} ms), conflicts {len(p.conflicts)}")
    if 10 in times and 80 in times:
        print(f"80/10 propagation time ratio: {times[80] / times[10]:.2f}  (target <= 9; 80 layers <= 2 s)")


if __name__ == "__main__":
    main()
