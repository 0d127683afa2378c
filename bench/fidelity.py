"""The step model against published throughput: for each run in ``bench/published_runs.yaml`` (MindFormers', and one
MindSpeed-LLM context-parallel run: the figure, its hardware, the YAML's own settings read by strategist's reader of a
MindFormers config, each row's graph one micro-batch run as many times as the run's micro-batches), predicted tokens/s
per card beside the published figure and their ratio (target 0.85-1.15, median error 5 %), the predicted per-card
memory beside the card's; the median and the worst; and the predicted end-to-end gain of chunked CoC (fused MatMul +
collective) on BLOOM-7B, BLOOM-176B and LLaMA-2-70B shapes at tp=8 beside MindSpeed's published gains.

    .venv/bin/python bench/fidelity.py [--json] [--quick] [--only NAME[,NAME...]]

``--quick`` builds 8 layers for the CoC shapes (their gain is per layer; the full models dilute it by the
embedding and head only)."""
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
sys.path.insert(0, os.path.join(ROOT, "examples"))
os.environ.setdefault("GLOG_v", "4")

RUNS = os.path.join(HERE, "published_runs.yaml")


def published_rows() -> list[dict]:
    import yaml
    with open(RUNS, encoding="utf-8") as f:
        return yaml.safe_load(f)


def row_model(row: dict) -> str:
    """The model a row is priced on: examples/llama.py at its shape, or a MindFormers config (``mindformers:``)."""
    return f"mindformers:{row['mindformers']}" if row.get("mindformers") else "examples/llama.py:build"


def row_run(row: dict):
    """The run a row's YAML sections describe (strategist.run_settings.Run) and the model's kwargs."""
    from strategist.frontend.mindformers.settings import read_settings
    from strategist.run_settings import resolve_run
    cfg = {k: row.get(k) or {} for k in ("context", "runner_config", "parallel_config", "parallel", "recompute_config")}
    cfg["model"] = {"model_config": row.get("model_config") or {}}
    if row.get("micro_batch_interleave_num"):
        cfg["micro_batch_interleave_num"] = row["micro_batch_interleave_num"]
    run = resolve_run(row_model(row), {}, config=read_settings(cfg))
    if row.get("parallel_speed_up"):
        # the keys of MindSpore's parallel_speed_up_json the run sets, as a config's file would
        from dataclasses import replace
        from strategist.frontend.mindformers.settings import SPEED_UP
        run = replace(run, step=replace(run.step, **{SPEED_UP[k]: bool(v)
                                                     for k, v in row["parallel_speed_up"].items()}))
    from strategist.vocab.mesh import Mesh
    mesh = Mesh.parse(run.mesh)
    dp = mesh.get("dp") * mesh.get("ep")
    # the layers as MindSpore compiles them: one micro-batch (the pipeline's, or gradient accumulation's) of
    # batch_size sequences per data-parallel rank, run micro_batches times a step
    batch = run.batch_per_rank * dp
    from dataclasses import replace
    run = replace(run, step=replace(run.step, graph_batch="micro"))
    if row.get("mindformers"):
        # MindFormers builds it: the published shape written over the installed config's model_config
        return run, [f"seq={row['seq_length']}", f"batch={batch}"] + \
            [f"{k}={v}" for k, v in sorted(row["model_set"].items())]
    sh = row["shape"]
    kwargs = [f"vocab={sh['vocab']}", f"hidden={sh['hidden']}", f"ffn={sh['ffn']}", f"heads={sh['heads']}",
              f"kv_heads={sh['kv_heads']}", f"layers={sh['layers']}", f"seq={row['seq_length']}", f"batch={batch}",
              "loss=vocab_parallel", "causal=True"]
    # the YAML's dtypes: compute_dtype, and param_init_type (weights kept in it, cast to the compute dtype where
    # read; a float32 weight's gradient reduced in float32: MindSpore's gradient_fp32_sync)
    mc = row.get("model_config") or {}
    kwargs += [f"dtype={mc.get('compute_dtype', 'float16')}",
               f"param_dtype={mc.get('param_init_type', mc.get('compute_dtype', 'float16'))}"]
    return run, kwargs


def regime(run) -> str:
    from strategist.vocab.mesh import Mesh
    m = Mesh.parse(run.full_mesh)
    o = run.step
    parts = [run.full_mesh]
    if o.offset:
        parts.append(f"offset {list(o.offset)}")
    if o.recompute != "none" or o.recompute_layers:
        parts.append(f"recompute {o.recompute}" + (f" {list(o.recompute_layers)}" if o.recompute_layers else "")
                     + (f" select {list(o.select_layers)}" if o.select_layers else ""))
    if run.sequence_parallel and m.get("tp") > 1:
        parts.append("sp")
    if o.interleave > 1:
        parts.append(f"fine-grain x{o.interleave}")
    if o.fa_load_balance:
        parts.append("FA load balance")
    return ", ".join(parts)


def run_published(row: dict) -> dict:
    from strategist.api import advise_model
    from strategist.cost.step import estimate
    t0 = time.perf_counter()
    run, kwargs = row_run(row)
    # the whole batch on every device, as MindFormers' configs feed it (parallel.full_batch)
    a = advise_model(row_model(row), run.mesh, kwargs=kwargs, step=run.step, hardware=row["hardware"],
                     sequence_parallel=run.sequence_parallel, dataset_strategy="full_batch")
    est = estimate(a.plan)
    pred = est.throughput["tokens_per_s_per_device"]
    pub = row["published_tokens_per_s_per_device"]
    m = est.memory
    return {"name": row["name"], "hardware": row["hardware"], "cards": row["cards"], "regime": regime(run),
            "devices": est.throughput["devices"],
            "predicted_tokens_per_s_per_device": pred, "published_tokens_per_s_per_device": pub,
            "ratio": pred / pub, "schedule": est.schedule, "table": row["table"], "yaml": row["yaml"],
            "notes": list(run.notes) + ([row["shape_deviation"]] if row.get("shape_deviation") else []),
            # GiB, as MindSpore's max_device_memory counts its GB
            "memory": {"total_GB": m["total"] / 2**30, "usable_GB": m["capacity"] / 2**30,
                       "device_GB": m["device_memory"] / 2**30, "fits": m["fits"], "peak_at": m["peak_at"],
                       "per_stage_GB": [s["memory_total"] / 2**30 for s in est.per_stage]},
            "seconds": time.perf_counter() - t0}


def summary(rows: list[dict]) -> dict:
    errors = [abs(r["ratio"] - 1) for r in rows]
    worst = max(rows, key=lambda r: abs(r["ratio"] - 1)) if rows else None
    return {"rows": len(rows), "median_error": statistics.median(errors) if errors else None,
            "worst": worst and {"name": worst["name"], "ratio": worst["ratio"]},
            "within_0.85_1.15": sum(0.85 <= r["ratio"] <= 1.15 for r in rows),
            "fit": sum(r["memory"]["fits"] for r in rows)}


#: MindSpeed's published end-to-end gains of CoC (its "通算融合" page), in the settings of its training scripts
#: (Ascend/AscendSpeed examples/bloom/pretrain_bloom_7b1.sh, examples/bloom/pretrain_bloom_176b.sh,
#: examples/llama2/pretrain_llama2_70B_ptd.sh): tp=8, sequence parallel, dp=1, the global batch in micro-batches
COC = {
    "bloom_7b": {"mindspeed_gain_pct": 3.20, "pp": 1, "micro_batches": 128, "recompute": "none",
                 "setting": "tp=8, pp=1, micro-batch 4, global batch 512, no recompute",
                 "model": "examples/bloom.py:build",
                 "kwargs": ["preset=bloom_7b", "batch=512"]},
    # the script's pp=12 does not split 70 layers evenly, as MindSpore's stages need: pp=10, 7 layers a stage
    # (with 2048 micro-batches the bubble is under 0.5 % either way)
    "bloom_176b": {"mindspeed_gain_pct": 5.47, "pp": 10, "micro_batches": 2048, "recompute": "full",
                   "setting": "tp=8, pp=10 (the script's 12 does not divide 70 layers), micro-batch 1, global batch "
                              "2048, full recompute (--checkpoint-activations)",
                   "model": "examples/bloom.py:build",
                   "kwargs": ["preset=bloom_176b", "batch=2048"]},
    "llama2_70b": {"mindspeed_gain_pct": 7.85, "pp": 8, "micro_batches": 512, "recompute": "none",
                   "setting": "tp=8, pp=8, micro-batch 2, global batch 1024, no recompute",
                   "model": "examples/llama.py:build",
                   "kwargs": ["preset=llama2_70b", "batch=1024", "loss=vocab_parallel"]},
}
COC_NOTE = ("--coc-parallel-num 2 (MindSpeed's usage example; 4 beside it); examples/bloom.py (LayerNorm, ALiBi attention unfused, GeLU MLP) and examples/llama.py in MindSpeed's "
            "settings (each row's), sequence parallel, a vocab-parallel cross-entropy, the baseline Megatron's (the "
            "column linears' input-gradient ReduceScatter beside their weight-gradient MatMul)")


def run_coc(name, row, quick):
    from strategist.api import advise_model
    from strategist.cost.overlap import coc_saving, input_gradient_overlap_saving
    from strategist.cost.step import StepOptions, estimate
    kw = row["kwargs"] + (["layers=8"] if quick else [])
    if quick:       # 8 layers: the pipeline's stages cut down with them
        pp = max(d for d in (1, 2, 4, 8) if d <= row["pp"])
    else:
        pp = row["pp"]
    a = advise_model(row["model"], "tp=8", kwargs=kw, dataset_strategy="full_batch",
                     step=StepOptions(pp=pp, micro_batches=row["micro_batches"], recompute=row["recompute"]),
                     sequence_parallel=True)
    est = estimate(a.plan)
    # MindSpeed's baseline is Megatron's: its column linears already hide their input gradients' ReduceScatter
    # behind the weight-gradient MatMul, so CoC gains the rest, on a step without that exposed time
    base = est.step_s - input_gradient_overlap_saving(a.plan, est)
    # --coc-parallel-num: 2 in MindSpeed's usage example (2, 4 or 8); the published gains do not say which ran
    gains = {k: coc_saving(a.plan, est, chunks=k, input_gradients=False) / base * 100 for k in (2, 4)}
    gain = gains[2]
    return {"predicted_gain_pct": gain, "mindspeed_gain_pct": row["mindspeed_gain_pct"], "baseline_step_s": base,
            "predicted_gain_pct_by_chunks": gains,
            "ratio": gain / row["mindspeed_gain_pct"], "shape": row["model"] + " " + " ".join(kw), "step_s": est.step_s,
            "setting": row["setting"] + (f" (--quick: pp={pp})" if pp != row["pp"] else ""),
            "communication_not_overlapped_s": est.schedule["communication_not_overlapped_s"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="8 layers for the CoC shapes")
    ap.add_argument("--only", help="published rows to run, by name (comma-separated); no CoC shapes")
    args = ap.parse_args()
    rows = published_rows()
    if args.only:
        names = set(args.only.split(","))
        unknown = names - {r["name"] for r in rows}
        if unknown:
            ap.error(f"--only: no row {', '.join(sorted(unknown))} in {os.path.relpath(RUNS)}")
        rows = [r for r in rows if r["name"] in names]
    out = {"published": [run_published(r) for r in rows]}
    out["summary"] = summary(out["published"])
    if not args.only:
        out["coc"] = {n: run_coc(n, r, args.quick) for n, r in COC.items()}
        out["coc_shapes"] = COC_NOTE
        order = sorted(out["coc"], key=lambda n: out["coc"][n]["predicted_gain_pct"])
        out["coc_same_order"] = order == sorted(COC, key=lambda n: COC[n]["mindspeed_gain_pct"])
    if args.json:
        print(json.dumps(out, indent=1, sort_keys=True))
        return
    print("published run (tokens/s per card)       hardware           predicted published  ratio  memory GiB (usable) fits")
    for r in out["published"]:
        m = r["memory"]
        print(f"{r['name']:40s} {r['hardware']:18s} {r['predicted_tokens_per_s_per_device']:9.0f} "
              f"{r['published_tokens_per_s_per_device']:9.0f} {r['ratio']:6.3f}  {m['total_GB']:6.1f} ({m['usable_GB']:.1f})"
              f"   {m['fits']}")
        s = r["schedule"]
        print(f"    {r['regime']}; step {s['step_s']:.3f} s: computing {s['computing_s']:.3f}, communication not "
              f"overlapped {s['communication_not_overlapped_s']:.3f}, free {s['free_s']:.3f}, bubble {s['bubble_s']:.3f}")
        print(f"    {r['yaml']}; table {r['table']}")
        for n in r["notes"]:
            print(f"    note: {n}")
    sm = out["summary"]
    if sm["rows"]:
        print(f"\n{sm['rows']} rows: median error {sm['median_error'] * 100:.1f} %, worst {sm['worst']['name']} "
              f"{sm['worst']['ratio']:.3f}, {sm['within_0.85_1.15']} within 0.85-1.15, {sm['fit']} fit in memory")
    if "coc" not in out:
        return
    print(f"\nCoC end-to-end gain at tp=8 ({COC_NOTE})")
    print("shape        predicted (2 chunks)  MindSpeed  ratio   4 chunks (ratio)")
    for n, r in out["coc"].items():
        g4 = r["predicted_gain_pct_by_chunks"][4]
        print(f"{n:12s} {r['predicted_gain_pct']:8.2f} %           {r['mindspeed_gain_pct']:8.2f} % {r['ratio']:6.2f}"
              f"   {g4:5.2f} % ({g4 / r['mindspeed_gain_pct']:.2f})   {r['setting']}")
    print(f"same order as MindSpeed: {out['coc_same_order']}")


if __name__ == "__main__":
    main()
