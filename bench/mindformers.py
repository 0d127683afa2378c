"""MindFormers benchmark: the shipped training configs at full size, few layers (issue 11).

For qwen3 (2 and 64 layers) and deepseek3 (2 layers, one dense + one MoE layer) at dp=2,tp=4 and
dp=8,tp=8, qwen3_moe (2 layers) at dp=2,tp=4 and dp=2,ep=2,tp=2, and telechat3 and telechat3_moe (2 layers) at
dp=2,tp=4, prints: extraction time (config -> tp=1 build -> graph), peak RSS, operator count, and the
experts' anchors read from MindFormers' own code in each mode -- semi_auto (every ``shard()``) and
propagation (the ``sharding_propagation()`` anchors) -- with the time of those builds. Each case runs
in its own process so its peak RSS is its own.

    .venv/bin/python bench/mindformers.py [--case qwen3-2] [--mesh dp=2,tp=4] [--json]

and the compare columns (``strategist.compare``): advise time, anchors of (a) advice / (b) the experts'
sharding_propagation() / (c) their full shard(), agreement of (a) with (c), step-estimate ratio (a)/(c).
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
    # 128 experts, hidden 2048: a MoE whose linears are small against their activations; with an ep axis
    "qwen3_moe-2": ("mindformers:qwen3_moe/pretrain_qwen3_30b_a3b_4k.yaml", 2, {}),
    # the other two training families 1.9.0 ships (fp32 residual connection; telechat3_moe: 105B-A4B)
    "telechat3-2": ("mindformers:telechat3/pretrain_telechat3_36b.yaml", 2, {}),
    "telechat3_moe-2": ("mindformers:telechat3_moe/pretrain_telechat3_105b_a4b_4k.yaml", 2, {}),
    # the legacy (use_legacy=True) training config 1.9.0 ships: ChatGLM2, batch-first, grouped-query attention
    # (2 kv heads), 8k sequence; 40 layers is the shipped depth (2 compiled, the rest copied)
    "glm4-2": ("mindformers:glm4/finetune_glm4_9b.yaml", 2, {}),
    "glm4-40": ("mindformers:glm4/finetune_glm4_9b.yaml", 40, {}),
}
MESHES = ("dp=2,tp=4", "dp=8,tp=8")
CASE_MESHES = {"qwen3_moe-2": ("dp=2,tp=4", "dp=2,ep=2,tp=2"), "telechat3-2": ("dp=2,tp=4",),
               "telechat3_moe-2": ("dp=2,tp=4",), "glm4-40": ("dp=8,tp=8",)}
BATCH = 8       # global batch of the graph: divisible by every mesh's dp


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def compare_hook(graph, info, mesh, experts):
    """Issue 11 item 4: (a) advice, (b) the experts' propagation anchors, (c) their full shard(), compared."""
    from strategist.compare import compare_model
    cmp = compare_model(info.ref, mesh, graph=graph, experts=experts, layers=info.layers, batch=info.batch)
    a, b, c = cmp["a"], cmp["b"], cmp["c"]
    ratio = cmp.step_ratio()
    return {"advise_s": round(a.seconds, 2), "compare_s": round(a.seconds + b.seconds + c.seconds, 2),
            "anchors_a": a.anchors, "anchors_b": b.anchors, "anchors_c": c.anchors,
            "agreement_a": round(a.agreement, 4) if a.agreement is not None else None,
            "agreement_b": round(b.agreement, 4) if b.agreement is not None else None,
            # over the operators the experts configured in (c) (the rest of (c) is strategist's own propagation)
            "configured_agreement_a": round(a.configured_agreement, 4) if a.configured_agreement is not None else None,
            "differ_a": len(a.disagreements), "differ_a_moving_no_data": a.quiet_disagreements,
            # of them, those where (c)'s layout on top of the advice is faster (compare's "step if (c)'s"), and how
            # many of those a shard() line can carry (the rest are functional calls: MindFormers' Morph bodies)
            "differ_a_reference_faster": len(a.reference_faster),
            "differ_a_reference_faster_held": sum(d.held for d in a.reference_faster),
            # the same by connected region (each repeated layer's together), and (c)'s layout at every difference
            # at once on top of the advice: what taking the experts' choices wherever the advice differs would cost
            "differ_a_regions": len(a.regions),
            "differ_a_regions_reference_faster": len(a.regions_reference_faster),
            "step_change_if_reference_everywhere_ms": None if a.if_reference_everywhere is None
            else round(a.if_reference_everywhere * 1e3, 3),
            # toward (c): (c)'s layout taken region by region on top of the advice (what a shard() line can carry
            # anchored, functional calls following or not; the cheapest per operator first): the most agreement any
            # step reaches, and the most within (c)'s step estimate and (b)'s anchors (the other two targets)
            # with its anchors
            "toward_max_agreement": round(max(t.agreement for t in a.toward), 4) if a.toward else None,
            "closest_agreement": round(a.closest.agreement, 4) if a.closest else None,
            "closest_anchors": a.closest.anchors if a.closest else None,
            "closest_step_change_ms": round((a.closest.step_seconds - a.totals["step_seconds"]) * 1e3, 3)
            if a.closest else None,
            "step_ratio": round(ratio, 4) if ratio is not None else None,
            "step_ms": {k: round(cmp[k].totals["step_seconds"] * 1e3, 3) for k in "abc" if cmp[k].totals},
            "rss_mb": round(peak_rss_mb())}


def run_case(name: str, meshes) -> dict:
    from strategist.vocab.mesh import Mesh
    from strategist.frontend.mindformers import expert_strategies, load_mindformers
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
                         "mindformers_bugs": sum(n.startswith("MindFormers bug") for n in ex.notes)}
            res[mode]["_experts"] = ex
        t0 = time.perf_counter()
        res["compare"] = compare_hook(graph, info, mesh, {k: res[k].pop("_experts") for k in ("semi_auto", "propagation")})
        res["compare"]["seconds_with_experts"] = round(time.perf_counter() - t0 + res["semi_auto"]["seconds"]
                                                       + res["propagation"]["seconds"], 2)
        row["meshes"][m] = res
    row["peak_rss_mb"] = round(peak_rss_mb())
    return row


def _near(cp) -> str:
    if cp.get("closest_agreement") is None:
        return "-"
    return f"{100 * cp['closest_agreement']:.1f}% {cp['closest_anchors']} {cp['closest_step_change_ms']:+.2f}ms"


def _ms(v) -> str:
    return "-" if v is None else f"{v:+.1f}ms"


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
        ms = meshes if args.mesh else CASE_MESHES.get(c, meshes)
        cmd = [sys.executable, os.path.abspath(__file__), "--inline", "--case", c] + \
              [a for m in ms for a in ("--mesh", m)]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if r.returncode != 0:
            print(f"{c}: failed: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
            continue
        rows.append(json.loads(r.stdout.strip().splitlines()[-1]))
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'case':<12} {'ops':>5} {'params':>8} {'extract':>8} {'peak RSS':>9}  "
          f"{'mesh':<10} {'anchors a/b/c (c: mm/fa/emb)':>30} {'experts':>8} {'advise':>7} {'agree a|b':>13} {'cfg a':>6} "
          f"{'a quiet':>8} {'c faster':>9} {'regions':>8} {'all (c)':>10} {'near (c)':>16} {'max':>6} {'ratio a/c':>9} {'compare':>8}")
    for r in rows:
        first = True
        for m, res in r["meshes"].items():
            sa, pr, cp = res["semi_auto"], res["propagation"], res.get("compare") or {}
            head = (f"{r['case']:<12} {r['ops']:>5} {r['params_b']:>7.2f}B {r['extract_s']:>7.1f}s "
                    f"{r['peak_rss_mb']:>7}MB") if first else " " * 45
            # (b)/(c) as compare counts them: the operators the model configures in every parallel build (the loss's, alike in
            # every column) left out
            anchors = (f"{cp.get('anchors_a')}/{cp.get('anchors_b', pr['anchors'])}/{cp.get('anchors_c', sa['anchors'])} "
                       f"({sa['matmul']}/{sa['flash_attention']}/{sa['embedding']})")
            agree = f"{100 * (cp.get('agreement_a') or 0):.1f}|{100 * (cp.get('agreement_b') or 0):.1f}%"
            print(f"{head}  {m:<10} {anchors:>30} {sa['seconds'] + pr['seconds']:>7.1f}s {cp.get('advise_s', 0):>6.1f}s "
                  f"{agree:>13} {100 * (cp.get('configured_agreement_a') or 0):>5.1f}% "
                  f"{cp.get('differ_a_moving_no_data', 0):>3}/{cp.get('differ_a', 0):<4} "
                  f"{cp.get('differ_a_reference_faster', 0):>4} ({cp.get('differ_a_reference_faster_held', 0)}) "
                  f"{cp.get('differ_a_regions_reference_faster', 0):>3}/{cp.get('differ_a_regions', 0):<4} "
                  f"{_ms(cp.get('step_change_if_reference_everywhere_ms')):>10} "
                  f"{_near(cp):>16} {100 * (cp.get('toward_max_agreement') or 0):>5.1f}% "
                  f"{cp.get('step_ratio') or 0:>9.4f} "
                  f"{cp.get('seconds_with_experts', 0):>7.1f}s")
            first = False
    print("extract = YAML -> tp=1 build (weights never allocated) -> graph; anchors: (a) advice, (b) the experts' "
          "sharding_propagation(), (c) their full shard() (MatMul / FlashAttentionScore / Embedding); experts = "
          "both MindFormers builds; agree = operators whose layouts equal (c)'s; cfg a = the same over the operators the experts' shard() configured; a quiet = of the operators (a) lays out "
          "otherwise than (c), those moving no data in either plan; c faster = of them, those where (c)'s layout "
          "anchored on top of the advice (with the same operator of every repeated layer) speeds the step up by more "
          "than 100 us (in brackets: those a shard() line can carry, not functional calls); regions = of (a)'s differences "
          "joined into connected regions (each repeated layer's together), those where (c)'s layout on the whole region "
          "is faster / all regions; all (c) = the step change with (c)'s layout at every difference at once on top of "
          "the advice; near (c) = (c)'s layout taken region by region on top of the advice (what a shard() line can "
          "carry anchored, functional calls following or not; the cheapest per operator first): the most agreement with a step no slower than (c)'s and anchors "
          "no more than (b)'s, its anchors and step change; max = the most agreement any step of that way reaches; "
          "ratio = step estimate (a)/(c); "
          "compare = experts + three propagations + advise (extraction excluded). Targets: agree a >= 98 %, "
          "ratio <= 1.00, anchors a <= b, 64-layer compare <= 60 s.")


if __name__ == "__main__":
    main()
