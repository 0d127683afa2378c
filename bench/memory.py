"""strategist's memory model against MindSpore's own answer: its DryRun (``strategist verify --memory``).

Each row runs one training step of examples/llama.py in MindSpore 2.9's DryRun (MS_SIMULATION_LEVEL=1, on this CPU
through its Ascend plugin against stub CANN libraries) and prints MindSpore's used peak per device (without
fragments), its actual peak (with them), strategist's estimate of the same configuration and their ratio. The
matrix spans data parallelism, the parallel optimizer, MindSpore's and MindFormers' optimizers, tensor parallelism
(Megatron anchors), sequence parallelism (the advice's anchors), selective and full recompute, gradient
accumulation, a pipeline's first and last stage (with more micro-batches than stages, fp16 and fp32 weights), at
two model widths (llama2_7b's hidden 4096 and hidden 2048). Target: every row within 0.90-1.10 of MindSpore's used
peak. Beside the matrix, the known disagreements (``KNOWN``) print with their cause: MindFormers' optimizer swap.

    .venv/bin/python bench/memory.py [--only SUBSTRING] [--large] [--no-known] [--json out.json]

``--large`` adds LLaMA-2-7B at all 32 layers (dp=8, the parallel optimizer, the vocab-parallel loss: MindFormers'
published configuration without its gradient accumulation). About 25 s a row on two cores.
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.path.insert(0, ROOT)
os.environ.setdefault("GLOG_v", "4")

LLAMA = os.path.join(ROOT, "examples", "llama.py") + ":llama2_7b"
W2K = ["hidden=2048", "ffn=5504", "heads=16", "kv_heads=16"]
MEGATRON = os.path.join(HERE, "anchors", "llama_megatron_dp2_tp4.yaml")
SP = os.path.join(HERE, "anchors", "llama_advice_dp2_tp4_sp.yaml")
MEGATRON_TP4 = os.path.join(HERE, "anchors", "llama_megatron_tp4.yaml")
#: Yi-34B's width (MindFormers' research/yi/yi_34b: hidden 7168, 56 heads, 8 KV heads, FFN 20480, vocab 64000)
YI34B = ["vocab=64000", "hidden=7168", "ffn=20480", "heads=56", "kv_heads=8", "loss=vocab_parallel", "causal=True",
         "dtype=bfloat16", "param_dtype=float32"]
NORMS = os.path.join(HERE, "anchors", "llama_dp8_norms.yaml")
BF16 = ["layers=2", "dtype=bfloat16", "param_dtype=float16"]

#: (label, kwargs, mesh, options of strategist.api.verify_memory)
ROWS = [
    ("dp=8", ["layers=2", "batch=8"], "dp=8", {}),
    ("dp=8, parallel optimizer", ["layers=2", "batch=8"], "dp=8", {"optimizer_parallel": True}),
    ("dp=8, nn.AdamWeightDecay", ["layers=2", "batch=8"], "dp=8", {"optimizer": "adam-weight-decay"}),
    ("dp=8, 4 layers, 4 sequences/device", ["layers=4", "batch=32"], "dp=8", {}),
    ("dp=8, 4 layers, 4 seq, selective recompute", ["layers=4", "batch=32"], "dp=8", {"recompute": "selective"}),
    ("dp=8, 4 layers, 4 seq, full recompute", ["layers=4", "batch=32"], "dp=8", {"recompute": "full"}),
    ("dp=8, 4 layers, 4 seq, full recompute, parallel optimizer", ["layers=4", "batch=32"], "dp=8",
     {"recompute": "full", "optimizer_parallel": True}),
    ("dp=8, gradient accumulation 2", ["layers=2", "batch=16"], "dp=8", {"micro_batches": 2, "strategies": NORMS}),
    ("dp=8, gradient accumulation 2, parallel optimizer", ["layers=2", "batch=16"], "dp=8",
     {"micro_batches": 2, "strategies": NORMS, "optimizer_parallel": True}),
    ("dp=2,tp=4 Megatron", ["layers=2", "batch=8"], "dp=2,tp=4",
     {"strategies": MEGATRON, "dataset_strategy": "full_batch"}),
    ("dp=2,tp=4 Megatron, parallel optimizer", ["layers=2", "batch=8"], "dp=2,tp=4",
     {"strategies": MEGATRON, "dataset_strategy": "full_batch", "optimizer_parallel": True}),
    ("dp=2,tp=4 sequence parallel (advice)", ["layers=2", "batch=8"], "dp=2,tp=4",
     {"strategies": SP, "dataset_strategy": "full_batch"}),
    ("pp=2,dp=4, 4 layers, 2 micro-batches", ["layers=4", "batch=8"], "pp=2,dp=4", {"micro_batches": 2}),
    ("pp=2,dp=4, 4 layers, 4 micro-batches", ["layers=4", "batch=16"], "pp=2,dp=4", {"micro_batches": 4}),
    ("fp32 weights: pp=2,dp=4, 4 layers, 4 micro-batches", ["layers=4", "batch=16", "param_dtype=float32"],
     "pp=2,dp=4", {"micro_batches": 4}),
    ("fp32 weights: pp=2,dp=4, 4 layers, 4 seq, 4 micro-batches", ["layers=4", "batch=64", "param_dtype=float32"],
     "pp=2,dp=4", {"micro_batches": 4}),
    # the optimizer's update after accumulating: the first stage's first Parameter is the largest (the embedding),
    # the last stage's first a layer's (strategist.cost.memory.update_peak)
    ("fp32 weights: pp=4,dp=2, 8 layers, seq 256, 8 micro-batches",
     ["layers=8", "batch=16", "seq=256", "param_dtype=float32"], "pp=4,dp=2", {"micro_batches": 8}),
    # a pipeline's micro-batches in flight share one Cast of each float32 weight (strategist.cost.memory.shared_bytes)
    ("Yi-34B width, fp32 weights: pp=4,tp=4 Megatron, 8 layers, 4 micro-batches", ["layers=8", "batch=4", *YI34B],
     "pp=4,tp=4", {"micro_batches": 4, "strategies": MEGATRON_TP4, "dataset_strategy": "full_batch"}),
    ("hidden 2048: dp=8", ["layers=2", "batch=8", *W2K], "dp=8", {}),
    ("hidden 2048: dp=8, parallel optimizer", ["layers=2", "batch=8", *W2K], "dp=8", {"optimizer_parallel": True}),
    ("hidden 2048: dp=8, 4 layers, 4 seq, full recompute", ["layers=4", "batch=32", *W2K], "dp=8",
     {"recompute": "full"}),
    ("hidden 2048: dp=2,tp=4 Megatron", ["layers=2", "batch=8", *W2K], "dp=2,tp=4",
     {"strategies": MEGATRON, "dataset_strategy": "full_batch"}),
    # MindFormers' param_init_type float32: the weights kept in fp32, cast to fp16 where read
    ("fp32 weights: dp=8", ["layers=2", "batch=8", "param_dtype=float32"], "dp=8", {}),
    ("fp32 weights: dp=8, parallel optimizer", ["layers=2", "batch=8", "param_dtype=float32"], "dp=8",
     {"optimizer_parallel": True}),
    ("fp32 weights: dp=8, gradient accumulation 2", ["layers=2", "batch=16", "param_dtype=float32"], "dp=8",
     {"micro_batches": 2, "strategies": NORMS}),
    ("fp32 weights: dp=2,tp=4 Megatron", ["layers=2", "batch=8", "param_dtype=float32"], "dp=2,tp=4",
     {"strategies": MEGATRON, "dataset_strategy": "full_batch"}),
    # full recompute keeps an inlined network's weight Casts from the forward to the backward (MindSpore's
    # SetCastForParamNotRecompute): the activations' maximum is strategist's end of the forward to the MiB; the peak is
    # the optimizer's update, where MindSpore makes more temporaries ahead than strategist counts
    ("fp32 weights: dp=8, 4 layers, 4 seq, full recompute", ["layers=4", "batch=32", "param_dtype=float32"], "dp=8",
     {"recompute": "full"}),
    # each micro-batch casts its weights to fp16 and keeps the casts for its backward, whole: the peak at the end of
    # its forward holds them beside its share of the activations
    ("fp32 weights: dp=8, 4 seq, gradient accumulation 2", ["layers=2", "batch=64", "param_dtype=float32"], "dp=8",
     {"micro_batches": 2, "strategies": NORMS}),
    ("fp32 weights: dp=8, 4 seq, gradient accumulation 4", ["layers=2", "batch=64", "param_dtype=float32"], "dp=8",
     {"micro_batches": 4, "strategies": NORMS}),
    # bf16 compute of fp16 weights (MindFormers' pretrain_llama2_7b_bf16.yaml): with the parallel optimizer and
    # accumulation, a weight read only by its Cast is not kept gathered beside the Casts
    ("bf16 compute, fp16 weights: dp=8, 4 seq, gradient accumulation 2", [*BF16, "batch=64"], "dp=8",
     {"micro_batches": 2, "strategies": NORMS}),
    ("bf16 compute, fp16 weights: dp=8, 4 seq, accumulation 2, parallel optimizer", [*BF16, "batch=64"], "dp=8",
     {"micro_batches": 2, "strategies": NORMS, "optimizer_parallel": True}),
]
LARGE = [("LLaMA-2-7B, 32 layers, dp=8, parallel optimizer, vocab-parallel loss",
          ["layers=32", "batch=8", "loss=vocab_parallel"], "dp=8", {"optimizer_parallel": True})]
#: configurations strategist and the DryRun are known to price apart, run beside the matrix (not in its band
#: count): (label, kwargs, mesh, options, the cause)
KNOWN = [("dp=8, MindFormers' AdamW swap", ["layers=2", "batch=8"], "dp=8", {"optimizer_swap": True},
          "the DryRun keeps the swapped moments in its device pool (its 'Weight used size' is the same as without "
          "the swap) beside the MoveTo copies it inserts for their update; strategist keeps them on the host, as "
          "MindSpore's Parameter(device='CPU') and MindFormers' AdamW document it. Which a 910B holds is not "
          "checkable on this machine: DryRun does not place host memory")]
MIB = 2**20


def run_row(label, kwargs, mesh, opts, out: list, note: str = "") -> list:
    """One configuration in DryRun beside the estimate: its ranks printed (with ``note`` under each) and recorded in
    ``out``; [] where MindSpore could not run it."""
    from strategist.api import verify_memory
    from strategist.errors import StrategistError
    try:
        checks = verify_memory(LLAMA, mesh, kwargs=kwargs, **opts)
    except StrategistError as err:
        print(f"{label:58s} MindSpore could not run it: {err}")
        out.append({"configuration": label, "error": str(err)})
        return []
    for c in checks:
        print(f"{label:58s} {c.answer.rank:>4d} {c.estimate_bytes / MIB:>11.0f} {c.answer.used_peak_bytes / MIB:>9.0f} "
              f"{(c.answer.actual_peak_bytes or 0) / MIB:>9.0f} {c.ratio:>6.3f}" + (f"\n    cause: {note}" if note else ""),
              flush=True)
        out.append({"configuration": label, **({"known": note} if note else {}), "kwargs": kwargs, "mesh": mesh,
                    **{k: (os.path.relpath(v, ROOT) if k == "strategies" else v) for k, v in opts.items()},
                    **c.to_dict()})
    return checks


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", default=None, help="rows whose label contains this")
    p.add_argument("--large", action="store_true", help="the 32-layer LLaMA-2-7B row too")
    p.add_argument("--json", default=None, metavar="FILE")
    p.add_argument("--no-known", action="store_true", help="leave out the known disagreements")
    a = p.parse_args()
    rows = [r for r in ROWS + (LARGE if a.large else []) if a.only is None or a.only in r[0]]
    out, ratios = [], []
    print(f"{'configuration':58s} {'rank':>4s} {'strategist':>11s} {'MS used':>9s} {'MS actual':>9s} {'ratio':>6s}")
    t0 = time.time()
    for label, kwargs, mesh, opts in rows:
        ratios += [c.ratio for c in run_row(label, kwargs, mesh, opts, out)]
    if ratios:
        worst = max(ratios, key=lambda x: abs(x - 1))
        inside = sum(0.9 <= x <= 1.1 for x in ratios)
        print(f"\n{len(ratios)} ranks: median ratio {statistics.median(ratios):.3f}, worst {worst:.3f}, "
              f"{inside}/{len(ratios)} within 0.90-1.10 of MindSpore's used peak ({time.time() - t0:.0f} s)")
    known = [k for k in KNOWN if not a.no_known and (a.only is None or a.only in k[0])]
    if known:
        print("\nknown disagreements (beside the matrix):")
    for label, kwargs, mesh, opts, cause in known:
        run_row(label, kwargs, mesh, opts, out, cause)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
