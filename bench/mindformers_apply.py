"""The user's loop on MindFormers, measured: advise, ``--apply`` into a copy of the installed package, then run
MindFormers as applied in its own sharding-propagation mode.

For each training family (2 layers, dp=2,tp=4), in a scratch copy of the installed ``mindformers`` package and
its ``configs`` (a git repository first on PYTHONPATH; the installed package is never written):

1. ``strategist advise MODEL --format json``: the advised plan;
2. ``strategist advise MODEL --apply``: the advice written into the copy's classes (what could not be written is
   counted: functional calls, instances one line cannot tell apart);
3. ``strategist propagate MODEL``: strategist's propagation of the applied package's own
   ``sharding_propagation()`` anchors -- the operators laid out as the advice laid them out (placement: strategy
   and where each input and output lies);
4. ``strategist verify MODEL``: MindSpore's own propagation of the applied package beside strategist's, operator
   by operator (the user's run, in MindSpore 2.9.0 on CPU).

    .venv/bin/python bench/mindformers_apply.py [--case qwen3_moe] [--json FILE]

Prints one row per case; the times go to stderr (same inputs, same stdout).
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = sys.executable
# bench/mindformers.py would shadow the mindformers package: keep this folder off sys.path
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)
from test_source import _mindformers_repo  # noqa: E402

MESH = "dp=2,tp=4"
CASES = {
    "qwen3": ("mindformers:qwen3/pretrain_qwen3_32b_4k.yaml", []),
    "qwen3_moe": ("mindformers:qwen3_moe/pretrain_qwen3_30b_a3b_4k.yaml", []),
    "telechat3": ("mindformers:telechat3/pretrain_telechat3_36b.yaml", []),
    "telechat3_moe": ("mindformers:telechat3_moe/pretrain_telechat3_105b_a4b_4k.yaml", []),
    # MindSpore refuses MindFormers' own rotary Mul here (one primitive for q_pe and MLA's one-head k_pe): the
    # row shows how far the rest goes
    "deepseek3": ("mindformers:deepseek3/pretrain_deepseek3_671b.yaml", ["--set", "first_k_dense_replace=1"]),
}


def run_case(name: str, repo: str, work: str, env: dict) -> dict:
    from strategist.report.render import json_placement
    model, extra = CASES[name]
    args = [model, "--layers", "2", "--batch", "8", "--mesh", MESH, *extra]
    subprocess.run(["git", "checkout", "-q", "."], cwd=repo, check=True)
    subprocess.run(["git", "clean", "-qfdx"], cwd=repo, check=True)

    def cli(*a):
        return subprocess.run([PY, "-m", "strategist", *a], cwd=work, capture_output=True, text=True, env=env,
                              timeout=1800)
    t0 = time.perf_counter()
    r = cli("advise", *args, "--format", "json")
    if r.returncode:
        return {"case": name, "error": r.stderr.strip().splitlines()[-1]}
    advice = json.loads(r.stdout)
    plan = {o["name"]: json_placement(o) for o in advice["plan"]["ops"]}
    r = cli("advise", *args, "--apply")
    err = r.stderr.splitlines()
    unwritten = sorted({m.group(1) for line in err if (m := re.search(r"not written: (\S+):", line))})
    defined = sorted(line.split("strategist: ")[1].split(":")[0] for line in err if "the class lacked" in line)
    refused = sum("which MindSpore refuses in this mode" in line for line in err)
    changed = subprocess.run(["git", "diff", "--name-only"], cwd=repo, capture_output=True, text=True).stdout.split()
    r = cli("propagate", *args, "--format", "json")
    own = {o["name"]: json_placement(o) for o in json.loads(r.stdout)["ops"]} if r.returncode == 0 else {}
    same = sum(plan[k] == own.get(k) for k in plan)
    r = cli("verify", *args)
    m = re.search(r"(\d+)/(\d+) operators agree \([^)]*\); (\d+) only strategist, (\d+) only MindSpore", r.stdout)
    ms = (f"{m.group(1)}/{m.group(2)}" + (f", {m.group(3)} only strategist, {m.group(4)} only MindSpore"
                                         if m.group(3) != "0" or m.group(4) != "0" else "")
          if m else "refused: " + (r.stdout + r.stderr).strip().splitlines()[-1][:160])
    return {"case": name, "anchors": len(advice["anchors"]), "unwritten": unwritten, "defined": defined,
            "refused": refused, "files": len(changed), "operators": len(plan), "same": same,
            "differ": [k for k in plan if plan[k] != own.get(k)], "mindspore": ms,
            "verify_rc": r.returncode, "seconds": round(time.perf_counter() - t0, 1)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", action="append", choices=sorted(CASES))
    ap.add_argument("--json", help="write every row (with the operators that differ) to this file")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="strategist-apply-")
    env = {**os.environ, "PYTHONPATH": f"{os.path.join(work, 'repo')}{os.pathsep}{ROOT}", "GLOG_v": "4",
           "LOG_MF_PATH": os.path.join(work, "mflog")}
    rows = []
    try:
        repo, _ = _mindformers_repo(pathlib.Path(work))    # the slow source tests' copy of the package
        repo = str(repo)
        print(f"MindFormers applied, then run in its own sharding-propagation mode (2 layers, {MESH})")
        print(f"{'case':<14} {'anchors':>7} {'files':>5} {'not written':>11} {'methods defined':<22} "
              f"{'applied plan = advice':>22}  MindSpore beside strategist (applied)")
        for name in a.case or list(CASES):
            row = run_case(name, repo, work, env)
            rows.append(row)
            if "error" in row:
                print(f"{name:<14} error: {row['error']}")
                continue
            sys.stderr.write(f"bench: {name} {row['seconds']} s\n")
            same = f"{row['same']}/{row['operators']} ({100 * row['same'] / row['operators']:.1f} %)"
            print(f"{name:<14} {row['anchors']:>7} {row['files']:>5} {len(row['unwritten']):>11} "
                  f"{', '.join(row['defined']) or '-':<22} {same:>22}  {row['mindspore']}"
                  + (f" ({row['refused']} of the model's own strategies refused)" if row["refused"] else ""))
            for op in row["unwritten"]:
                print(f"    not written: {op}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
