"""MoE at its published scale: ``strategist advise`` on MindFormers' DeepSeek-V3 671B and Qwen3-MoE 30B-A3B
pretraining configs with the YAML's own run settings (pipeline, offsets, pipeline interleave, micro-batches,
recompute, parallel optimizer, sequence parallelism), each as one CLI run: its wall time (target <= 2 minutes) and
peak memory, the step and memory it reports; how fast a setting the model cannot take is refused (before anything
is built); and ``strategist sweep`` on Qwen3-MoE over 32 devices and on DeepSeek-V3 over its 256 (tp within a node,
pp up to 16: its 61 layers on stages an offset balances), their expert-parallel meshes among the rest, with the
time of each of its phases (the start before the workers: the model's build and MindFormers' loss readings).

Both configs draw expert parallelism from the tensor-parallel devices too (``expert_parallel`` beyond
``data_parallel``): strategist spells their meshes with ep drawn from the stage's devices (``ep=32@dp*tp``), as
MindFormers groups them (consecutive ranks).

    .venv/bin/python bench/moe_scale.py [--only SUBSTRING] [--check]

``--only``: the runs whose label contains it (``--only Qwen3``: the Qwen3-MoE sweep and advice alone). ``--check``:
each sweep again with every mesh advised on its own, the two rankings compared (the carried rows' error; about 8
minutes for Qwen3-MoE, an hour for DeepSeek-V3).
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.path.insert(0, ROOT)

RUNS = [
    ("DeepSeek-V3 671B, its YAML's own settings", "mindformers:deepseek3/pretrain_deepseek3_671b.yaml", []),
    ("Qwen3-MoE 30B-A3B, its YAML's own settings", "mindformers:qwen3_moe/pretrain_qwen3_30b_a3b_4k.yaml", []),
    ("DeepSeek-V3 671B at pp=16, a pipeline its 61 layers and the YAML's 8-stage offset cannot take",
     "mindformers:deepseek3/pretrain_deepseek3_671b.yaml", ["--mesh", "pp=16,dp=2,tp=8,ep=16@dp*tp"]),
]


def run(model: str, extra: list[str]) -> dict:
    env = dict(os.environ, GLOG_v="4")
    cmd = [sys.executable, "-m", "strategist", "advise", model, *extra, "--format", "json"]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    out = {"seconds": wall, "exit": r.returncode, "peak_rss_MB_so_far": rss}
    if r.returncode:
        out["error"] = next((line for line in r.stderr.splitlines() if line.startswith("strategist: error")),
                            r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "")
        return out
    d = json.loads(r.stdout)
    step = d["plan"]["step"]
    out.update(mesh=d["mesh"], anchors=len(d["anchors"]), step_s=step["schedule"]["step_s"],
               tokens_per_s_per_device=step["throughput"].get("tokens_per_s_per_device"),
               memory_GiB=step["memory"]["total"] / 2**30, fits=step["memory"]["fits"],
               options={k: step["options"][k] for k in ("pp", "micro_batches", "recompute", "pp_interleave",
                                                         "offset")})
    return out


#: a sweep over every mesh of the devices with the expert axis among them (its MoE layers priced with their experts
#: divided by ep and the dispatcher's all-to-alls): (label, model, devices, extra options)
SWEEPS = [("Qwen3-MoE 30B-A3B, sweep over 32 devices (batch 32)", "mindformers:qwen3_moe/pretrain_qwen3_30b_a3b_4k.yaml",
           32, ["--kwargs", "batch=32"]),
          # the YAML's own global batch (1 x dp 4 x 32 micro-batches); its 61 layers split by any pp with an offset
          ("DeepSeek-V3 671B, sweep over 256 devices (dp, tp <= 8, ep, pp <= 16; the YAML's global batch 128)",
           "mindformers:deepseek3/pretrain_deepseek3_671b.yaml", 256,
           ["--axes", "dp,tp,ep,pp", "--max-tp", "8", "--max-pp", "16"])]


def sweep(model: str, devices: int, extra: list[str]) -> dict:
    """The sweep as one CLI run, its phases timed as they start (the run's ``STRATEGIST_PHASE_FILE``, read every
    0.1 s)."""
    with tempfile.TemporaryDirectory() as tmp:
        phase_file = os.path.join(tmp, "phases")
        env = dict(os.environ, GLOG_v="4", STRATEGIST_PHASE_FILE=phase_file)
        cmd = [sys.executable, "-m", "strategist", "sweep", model, "--devices", str(devices), *extra,
               "--format", "json"]
        t0 = time.perf_counter()
        started: dict[str, float] = {}
        with open(os.path.join(tmp, "out"), "w+") as so, open(os.path.join(tmp, "err"), "w+") as se:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=so, stderr=se, text=True)
            while proc.poll() is None:
                time.sleep(0.1)
                if os.path.exists(phase_file):
                    with open(phase_file) as f:
                        for line in f.read().splitlines():
                            if line.startswith("sweep:"):
                                started.setdefault(line, time.perf_counter() - t0)
            wall = time.perf_counter() - t0
            so.seek(0)
            se.seek(0)
            stdout, stderr = so.read(), se.read()
    out = {"seconds": wall, "exit": proc.returncode, "phases": started}
    if proc.returncode:
        out["error"] = stderr.strip().splitlines()[-1] if stderr.strip() else ""
        return out
    d = json.loads(stdout)
    ranked = d["ranked"]
    out["result"] = d
    out.update(fit=len(ranked), best=ranked[0] if ranked else None,
               with_ep=sum(1 for c in ranked if "ep=" in c["mesh"]), unfit=len(d["unfit"]),
               infeasible=len(d["infeasible"]), advised=d["meshes_advised"], carried=d["meshes_carried"],
               uneven=sum(1 for c in ranked + d["unfit"] if c["options"].get("offset")))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="the runs whose label contains this")
    ap.add_argument("--check", action="store_true",
                    help="each sweep run again with every mesh advised on its own (--exhaustive), compared")
    args = ap.parse_args()
    only = args.only
    for label, model, devices, extra in SWEEPS:
        if only not in label:
            continue
        r = sweep(model, devices, extra)
        every = sweep(model, devices, extra + ["--exhaustive"]) if args.check and "result" in r else {}
        print(f"{label}: {r['seconds']:.1f} s (target <= 120), exit {r['exit']}")
        marks = sorted(r["phases"].items(), key=lambda kv: kv[1]) + [("end", r["seconds"])]
        if len(marks) > 1:
            spans = [f"before the workers {marks[0][1]:.1f} s"] + [
                f"{name.removeprefix('sweep: ')} {nxt - at:.1f} s" for (name, at), (_, nxt) in zip(marks, marks[1:])]
            print("    phases: " + "; ".join(spans))
        if "error" in r:
            print(f"    {r['error']}")
            continue
        print(f"    meshes advised on their own {r['advised']}, carried {r['carried']}; configurations fitting "
              f"{r['fit']}, out of memory {r['unfit']}, infeasible {r['infeasible']}; {r['uneven']} of those priced "
              f"have stages an offset balances")
        if r["best"]:
            b = r["best"]
            print(f"    {r['fit']} configurations fit, {r['with_ep']} of them with ep; fastest {b['mesh']} "
                  f"{b['options']}: step {b['step_s']:.2f} s, memory {b['memory_bytes'] / 2**30:.1f} GiB per device")
        if "result" in every:
            from strategist.ranking import compare_rankings
            from strategist.sweep import SweepResult
            ch = compare_rankings(SweepResult.from_dict(r["result"]), SweepResult.from_dict(every["result"]))
            print(f"    every mesh advised on its own: {every['seconds']:.1f} s; the same first configuration: "
                  f"{'yes' if ch['same_first'] else 'NO'}; the same ten fastest meshes in order: "
                  f"{'yes' if ch['same_top10_meshes'] else 'NO'}; rows of meshes advised on their own equal: "
                  f"{ch['own_rows_equal']} of {ch['own_rows']}; rows with their family's anchors: "
                  f"{ch['carried_rows']}, step off by median {ch['carried_median'] * 100:.2f} %, 90th percentile "
                  f"{ch['carried_p90'] * 100:.1f} %, at most {ch['carried_max'] * 100:.1f} %; {ch['fits_differ']} "
                  f"rows fit in one ranking only, {ch['rows_in_one_sweep_only']} in one sweep only")
    for label, model, extra in RUNS:
        if only not in label:
            continue
        r = run(model, extra)
        print(f"{label}: {r['seconds']:.1f} s (target <= 120), exit {r['exit']}")
        if "error" in r:
            print(f"    {r['error']}")
        else:
            print(f"    mesh {r['mesh']}, {r['options']}; {r['anchors']} anchors; step {r['step_s']:.2f} s, "
                  f"{r['tokens_per_s_per_device']:.0f} tokens/s per device; memory {r['memory_GiB']:.1f} GiB per "
                  f"device, fits {r['fits']}")
    print(f"peak RSS of the runs: {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
