"""The sweep's extrapolation against the whole graph: ``strategist sweep`` prices a configuration whose stages hold
many layers on two plans of the graph cut to 2 and 3 layers per stage and extrapolates its step to the stage's layer
count (strategist.cost.extrapolate). Here each mesh is advised as the sweep advises it, and every memory option that
fits is priced both ways: the extrapolated step beside the step of the whole graph's plan. Prints, per mesh, the
median and the worst relative difference. Target: within 0.5 % everywhere.

Default: LLaMA-2-7B's shape (examples/llama.py:llama2_7b, 32 layers, seq 4096, 16 sequences a step, MindFormers'
whole batches and sequence parallelism) on 8 devices, over data, tensor, context and pipeline parallel meshes.

    .venv/bin/python bench/extrapolate.py [--model M] [--kwargs K=V ...] [--meshes "dp=2,cp=4;dp=8"]
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.path.insert(0, ROOT)
os.environ.setdefault("GLOG_v", "4")

MESHES = "dp=2,cp=4;dp=8;dp=2,tp=4;dp=2,cp=2,tp=2;dp=4,pp=2;dp=2,tp=2,pp=2"


def compare(w, mesh: dict, shapes, hw) -> list[float]:
    """The relative difference of the extrapolated step from the whole graph's, per fitting memory option."""
    from strategist import sweep as S
    from strategist.advice.advisor import advise, load_rules
    opts = S.option_sets(mesh, shapes, None, w.dataset_strategy)
    inner, pp = S.inner_mesh(mesh), mesh.get("pp", 1)
    advice = advise(w.advised(pp), inner, rules=load_rules(None), hardware=hw, dataset_strategy=w.dataset_strategy)
    cut = S.pricing_plans(w, advice, inner, pp, opts, hw)
    whole = S.pricing_plans(w, advice, inner, pp, opts, hw, whole=True)
    if len(cut[1]) < 2:
        return []
    rows = zip(S._price_options(*cut[:2], opts, cut[2]), S._price_options(*whole[:2], opts, whole[2]))
    return [x["step_s"] / y["step_s"] - 1 for x, y in rows if x.get("step_s") and y.get("step_s")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "examples", "llama.py") + ":llama2_7b")
    ap.add_argument("--kwargs", nargs="*", default=["layers=32", "batch=16", "seq=4096"])
    ap.add_argument("--meshes", default=MESHES)
    a = ap.parse_args()
    from strategist import sweep as S
    from strategist.files.hardware import load_hardware
    from strategist.frontend.loader import load_graph
    t0 = time.perf_counter()
    graph = load_graph(a.model, None, a.kwargs, training=True).with_meta(sequence_parallel=True)
    shapes = S.shapes_of(graph)
    w = S.WorkerState.of(graph, "atlas-800t-a2", "full_batch", None)
    hw = load_hardware("atlas-800t-a2")
    every = []
    print(f"{os.path.relpath(a.model.rpartition(':')[0], ROOT)}:{a.model.rpartition(':')[2]} {' '.join(a.kwargs)}, "
          f"{shapes.layers} layers: extrapolated step / whole graph's step - 1")
    for text in a.meshes.split(";"):
        mesh = {k: int(v) for k, v in (kv.split("=") for kv in text.split(","))}
        errs = compare(w, mesh, shapes, hw)
        every += errs
        if errs:
            worst = max(errs, key=abs)
            print(f"  {text:18s} {len(errs):3d} options: median {statistics.median(abs(e) for e in errs) * 100:.3f} %, "
                  f"worst {worst * 100:+.3f} %")
        else:
            print(f"  {text:18s} priced on the whole graph (nothing to extrapolate) or no option fits")
    if every:
        print(f"{len(every)} options: worst {max(abs(e) for e in every) * 100:.3f} % "
              f"({time.perf_counter() - t0:.0f} s; target within 0.5 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
