"""MindFormers benchmark: the shipped training configs at full size, few layers (issue 11).

For qwen3 (2 and 64 layers) and deepseek3 (2 layers, one dense + one MoE layer) at dp=2,tp=4 and
dp=8,tp=8, prints: extraction time (config -> tp=1 build -> graph), peak RSS, operator count, and the
experts' anchors read from MindFormers' own code in each mode -- semi_auto (every ``shard()``) and
propagation (the ``sharding_propagation()`` anchors) -- with the time of those builds. Each case runs
in its own process so its peak RSS is its own.

    .venv/bin/python bench/mindformers.py [--case qwen3-2] [--mesh dp=2,tp=4] [--json]

The advise/compare columns of issue 11 come later (``compare_hook``).
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# this file is named mindformers.py: keep its folder off sys.path or it shadows the mindformers package
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.path.insert(0, ROOT)
os.environ.setdefault("GLOG_v", "4")

CASES = {
    "qwen3-2": ("mindformers:qwen3/pretrain_qwen3_32b_4k.yaml", 2, {}),
    "qwen3-64": ("mindformers:qwen3/pretrain_qwen3_32b_4k.yaml", 64, {}),
    # first_k_dense_replace=1: of the 2 layers, the second is MoE (the config's default keeps 3 dense)
    "deepseek3-2": ("mindformers:deepseek3/pretrain_deepseek3_671b.yaml", 2, {"first_k_dense_replace": 1}),
}
MESHES = ("dp=2,tp=4", "dp=8,tp=8")
BATCH = 8       # global batch of the graph: divisible by every mesh's dp


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def compare_hook(graph, info, mesh, experts):
    """Issue 11 item 4 (advise vs the experts, step-estimate ratio): filled in by the lead."""
    return None


def run_case(name: str, meshes) -> dict:
    from strategist.mesh import Mesh
    from strategist.mindformers import expert_strategies, load_mindformers
    ref, layers, ov = CASES[name]
    t0 = time.perf_counter()
    graph, info = load_mindformers(ref, layers=layers, batch=BATCH, overrides=ov)
    t_extract = time.perf_counter() - t0
    row = {"case": name, "ref": ref, "layers": layers, "seq": info.seq, "batch": info.batch, "ops": len(graph),
           "params_b": round(graph.param_count / 1e9, 2), "extract_s": round(t_extract, 2),
           "build_s": round(info.build_seconds, 2), "compile_s": round(info.extract_seconds, 2),
           "rss_after_extract_mb": round(peak_rss_mb()), "meshes": {}}
    for m in meshes:
        mesh = Mesh.parse(m)
        res = {}
        for mode in ("semi_auto", "propagation"):
            t0 = time.perf_counter()
            ex = expert_strategies(ref, mesh, mode, graph=graph, layers=layers, batch=BATCH, overrides=ov)
            by_type = {}
            for n in ex:
                t = graph.op(n).type
                by_type[t] = by_type.get(t, 0) + 1
            res[mode] = {"anchors": len(ex), "seconds": round(time.perf_counter() - t0, 2),
                         "matmul": by_type.get("MatMul", 0), "flash_attention": by_type.get("FlashAttentionScore", 0),
                         "embedding": by_type.get("Embedding", 0), "notes": len(ex.notes),
                         "mindformers_bugs": sum(n.startswith("MindFormers bug") for n in ex.notes),
                         "compare": compare_hook(graph, info, mesh, ex)}
        row["meshes"][m] = res
    row["peak_rss_mb"] = round(peak_rss_mb())
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", choices=list(CASES), action="append", help="default: all")
    ap.add_argument("--mesh", action="append", help=f"default: {' and '.join(MESHES)}")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--inline", action="store_true", help="run in this process (one case)")
    args = ap.parse_args()
    cases = args.case or list(CASES)
    meshes = args.mesh or list(MESHES)
    if args.inline:
        print(json.dumps(run_case(cases[0], meshes)))
        return
    rows = []
    for c in cases:
        cmd = [sys.executable, os.path.abspath(__file__), "--inline", "--case", c] + \
              [a for m in meshes for a in ("--mesh", m)]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if r.returncode != 0:
            print(f"{c}: failed: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
            continue
        rows.append(json.loads(r.stdout.strip().splitlines()[-1]))
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'case':<12} {'ops':>5} {'params':>8} {'extract':>8} {'peak RSS':>9}  "
          f"{'mesh':<10} {'semi_auto anchors (mm/fa/emb)':>30} {'propagation anchors (mm/fa/emb)':>32}")
    for r in rows:
        first = True
        for m, res in r["meshes"].items():
            sa, pr = res["semi_auto"], res["propagation"]
            head = (f"{r['case']:<12} {r['ops']:>5} {r['params_b']:>7.2f}B {r['extract_s']:>7.1f}s "
                    f"{r['peak_rss_mb']:>7}MB") if first else " " * 45
            print(f"{head}  {m:<10} {sa['anchors']:>14} ({sa['matmul']}/{sa['flash_attention']}/{sa['embedding']})"
                  f" {sa['seconds']:>5.1f}s {pr['anchors']:>16} ({pr['matmul']}/{pr['flash_attention']}/"
                  f"{pr['embedding']}) {pr['seconds']:>5.1f}s")
            first = False
    print("extract = YAML -> tp=1 build (weights never allocated) -> graph; anchors = experts' strategies "
          "mapped onto the graph (MatMul / FlashAttentionScore / Embedding); propagation-mode "
          "FlashAttention/MoELayer configure nothing (MindFormers bug, see notes).")


if __name__ == "__main__":
    main()
