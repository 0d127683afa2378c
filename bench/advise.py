"""End-to-end advice benchmark: ``strategist advise`` on the 80-layer LLaMA-2-70B-shaped example over
64 devices (dp=8, tp=8): extraction + heuristics + propagation + minimality + the three-way comparison.
Prints the time of each stage, peak RSS, and the ratio of the whole to MindSpore's bare compile of
the same model measured in the same run. Targets: <= 1.25x bare compile, <= 2 GB.

The model's 80 alike layers are compiled three at a time and the graph grown (strategist.frontend.blocks); the
extraction compiling every layer (``load_graph(..., replicate=False)``, what advise did before) is timed beside it
in the same run, with the ratio the whole run would have with it.

    .venv/bin/python bench/advise.py [--layers 80] [--batch 8] [--eval]
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=80)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--eval", action="store_true", help="advise for the compile as built (strategist --eval)")
    args = ap.parse_args()
    import mindspore as ms
    from mindspore.common.api import _cell_graph_executor as executor
    from mindspore.nn.utils import no_init_parameters

    import llama
    from strategist import load_graph
    from strategist.advice.advisor import load_rules
    from strategist.advice.repeated import advise_repeated
    from strategist.vocab.graph import TensorSpec
    from strategist.frontend.compile import as_tensor, standalone_compile
    from strategist.vocab.mesh import Mesh
    from strategist.files.hardware import load_hardware
    from strategist.report.render import advice_text

    ms.set_context(mode=ms.GRAPH_MODE)
    # MindSpore's side: build the Cell (lazy weights) and compile it; strategist's side below does the
    # same build inside load_graph, so both clocks start from the model file.
    t0 = time.perf_counter()
    with no_init_parameters():
        cell = llama.llama2_70b(layers=args.layers, batch=args.batch)
    build = time.perf_counter() - t0
    cell.set_train(True)            # the same training forward strategist compiles
    with standalone_compile(cell):
        t0 = time.perf_counter()
        executor.compile(cell, as_tensor(TensorSpec((args.batch, 4097), "int32")), phase="export.bench_bare")
        compile_s = time.perf_counter() - t0
    bare = build + compile_s

    t0 = time.perf_counter()
    g = load_graph(os.path.join(ROOT, "examples/llama.py:llama2_70b"), None,
                   [f"layers={args.layers}", f"batch={args.batch}"], training=not args.eval)
    t1 = time.perf_counter()
    c1 = time.process_time()
    # as `strategist advise` runs it: the repeated layers advised on the first two, carried to the rest
    a = advise_repeated(g, Mesh.parse("dp=8,tp=8"), rules=load_rules(), hardware=load_hardware("atlas-800t-a2"),
                        dataset_strategy="full_batch")
    t2 = time.perf_counter()
    advise_cpu = time.process_time() - c1
    text = advice_text(a)
    t3 = time.perf_counter()
    total = t3 - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t4 = time.perf_counter()
    whole = load_graph(os.path.join(ROOT, "examples/llama.py:llama2_70b"), None,
                       [f"layers={args.layers}", f"batch={args.batch}"], training=not args.eval, replicate=False)
    whole_s = time.perf_counter() - t4
    same = list(whole) == list(g) and whole.params == g.params
    print(f"LLaMA-2-70B shape, {args.layers} layers, batch {args.batch}, mesh dp=8,tp=8: {len(g)} operators "
          f"({'the compile as built, --eval' if args.eval else 'the training compile'})")
    print(f"advice: {len(a.chosen)} anchors ({len(a.dropped)} proposed anchors dropped), "
          f"{len(text.splitlines())} report lines")
    print(f"stages: load + extract {t1 - t0:.2f} s, advise {t2 - t1:.2f} s (CPU {advise_cpu:.2f} s: the machine's "
          f"other load does not count), report {t3 - t2:.2f} s")
    print(f"MindSpore bare: build {build:.2f} s + compile {compile_s:.2f} s = {bare:.2f} s")
    print(f"end to end: {total:.2f} s; ratio to bare {total / bare:.2f} (target <= 1.25); "
          f"to the compile alone {total / compile_s:.2f}")
    print(f"extraction compiling every layer: {whole_s:.2f} s (the grown graph {'is' if same else 'is NOT'} the same, "
          f"op for op); the run with it: {total - (t1 - t0) + whole_s:.2f} s, ratio to bare "
          f"{(total - (t1 - t0) + whole_s) / bare:.2f}")
    print(f"peak RSS: {rss:.0f} MB (target <= 2048)")


if __name__ == "__main__":
    main()
