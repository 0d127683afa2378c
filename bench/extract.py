"""Extraction benchmark: the LLaMA-2-70B-shaped example (hidden 8192, FFN 28672, 64 heads, 8 KV heads,
vocab 32000, seq 4096) at 80 layers.

Prints wall time, peak RSS and operator count of ``strategist.extract``, and the ratio of extraction
time to MindSpore's bare compile of the same model in the same run (the same export-phase compile,
without reading the graph back). Targets: peak RSS <= 2 GB (weights are never materialised),
extraction <= 1.3x bare compile.

    .venv/bin/python bench/extract.py [--layers 80] [--repeat 3]
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
sys.path.insert(0, os.path.join(ROOT, "examples"))
os.environ.setdefault("GLOG_v", "4")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=80)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import mindspore as ms
    from mindspore.common.api import _cell_graph_executor as executor
    from mindspore.nn.utils import no_init_parameters

    from strategist.vocab.graph import TensorSpec
    from strategist.frontend.compile import as_tensor, standalone_compile
    from strategist.frontend.graph import extract
    import llama

    ms.set_context(mode=ms.GRAPH_MODE)
    spec = TensorSpec((1, 4097), "int32")
    print(f"model: examples/llama.py:llama2_70b layers={args.layers}, input_ids {spec}")

    def build():
        with no_init_parameters():
            return llama.llama2_70b(layers=args.layers)

    t0 = time.perf_counter()
    build()
    print(f"build (lazy weights): {time.perf_counter() - t0:.2f} s, peak RSS {peak_rss_mb():.0f} MB")

    bare, ext = [], []
    graph = None
    for i in range(args.repeat):
        # Fresh Cells each round: MindSpore caches compiled phases per Cell.
        c1 = build()
        c1.set_train(True)          # the same training forward extract() compiles (Dropout and all)
        with standalone_compile(c1):
            t0 = time.perf_counter()
            executor.compile(c1, as_tensor(spec), phase=f"export.bench_bare{i}")
            bare.append(time.perf_counter() - t0)
        c2 = build()
        t0 = time.perf_counter()
        graph = extract(c2, spec)
        ext.append(time.perf_counter() - t0)
        print(f"round {i}: bare compile {bare[-1]:.2f} s, extract {ext[-1]:.2f} s")
    b, e = min(bare), min(ext)
    lazy = all(p.has_init for p in c2.get_parameters())
    print(f"operators: {len(graph)}, edges: {graph.nx.number_of_edges()}, parameters: "
          f"{graph.param_count / 1e9:.2f} B ({graph.param_bytes / 2**30:.1f} GiB never allocated: {lazy})")
    print(f"bare compile (best of {args.repeat}): {b:.2f} s")
    print(f"extract      (best of {args.repeat}): {e:.2f} s")
    print(f"ratio extract / bare compile: {e / b:.2f}  (target <= 1.3)")
    print(f"peak RSS: {peak_rss_mb():.0f} MB  (target <= 2048)")


if __name__ == "__main__":
    main()
