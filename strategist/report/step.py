"""The step estimate in the reports: the schedule in msprof-analyze's vocabulary, throughput, memory with
what it assumes, overlap candidates; as JSON and as a short table section."""
from __future__ import annotations

from ..cost.step import estimate
from ..frontend.mindformers.settings import ALL

#: the msprof-analyze columns, in their order
COLUMNS = (("computing_s", "Computing"), ("communication_not_overlapped_s", "Communication (not overlapped)"),
           ("overlapped_s", "Overlapped"), ("free_s", "Free"), ("bubble_s", "Bubble"), ("step_s", "Step"))


def step_dict(plan) -> dict | None:
    """``schedule``, ``per_layer``, ``throughput``, ``memory``, ``options``, ``per_stage`` and
    ``overlap.candidates`` of ``plan``'s step estimate (None without a hardware profile)."""
    from ..cost.overlap import candidates
    from ..engine.search.caches import no_cyclic_gc
    with no_cyclic_gc():            # many small acyclic tuples: no collector walks over MindSpore's objects
        est = estimate(plan)
        if est is None:
            return None
        d = est.to_dict()
        d["overlap"] = {"candidates": candidates(plan, est)}
    return d


def per_layer_rows(plan, per_layer: dict) -> dict:
    """``Plan.per_layer()`` (communication bytes and seconds) with each layer's schedule keys."""
    est = estimate(plan)
    if est is None:
        return per_layer
    out = {k: dict(v) for k, v in per_layer.items()}
    for layer, row in est.per_layer.items():
        out.setdefault(layer, {"bytes": 0.0, "seconds": 0.0}).update(row)
    return dict(sorted(out.items()))


def _s(x: float) -> str:
    return f"{x * 1e3:.3f} ms" if x < 10 else f"{x:.3f} s"


def _gib(x: float) -> str:
    return f"{x / 2**30:.2f} GiB"


def step_lines(d: dict | None, render_table, markdown: bool, max_layers: int = 6) -> list[str]:
    """The short table section: the schedule, throughput, memory against the card, the overlap candidates."""
    if not d:
        return []
    return schedule_lines(d, render_table, markdown, max_layers) + memory_lines(d) + \
        overlap_lines(d, render_table, markdown)


#: per-stage settings the options line shows when set
PER_STAGE = (("offset", "offset"), ("recompute_layers", "full recompute on each stage's first"),
             ("select_layers", "selective recompute on each stage's first"),
             ("comm_recompute_layers", "communication recompute on each stage's first"))


def _per_stage(v) -> str:
    """A per-stage list as written; a count beyond any stage (MindFormers' True) as "all"."""
    if isinstance(v, list):
        return "[" + ", ".join(_per_stage(x) for x in v) + "]"
    return "all" if isinstance(v, int) and v >= ALL else str(v)


def schedule_lines(d: dict, render_table, markdown: bool, max_layers: int = 6) -> list[str]:
    s, o = d["schedule"], d["options"]
    out = [f"options: pp={o['pp']}, micro-batches {o['micro_batches']}, recompute {o['recompute']}, "
           f"optimizer parallel {'on' if o['optimizer_parallel'] else 'off'}, interleave {o['interleave']}"
           + "".join(f", {label} {o[k]}" for k, label in (("pp_interleave", "chunks per stage"),)
                     if o.get(k, 1) != 1)
           + "".join(f", {label} {_per_stage(o[k])}" for k, label in PER_STAGE if o.get(k))
           + (f" (stage {o['stage_reported']} shown, the slowest)" if o["pp"] > 1 else ""),
           "beside computation: data-parallel gradient reductions "
           f"{'yes' if o.get('grad_comm_overlap') else 'no'}, optimizer-parallel AllGathers "
           f"{'yes' if o.get('allgather_overlap') else 'no'}"
           + ("" if o.get("grad_comm_overlap") and o.get("allgather_overlap") else " (MindSpore's default: no)")]
    if o.get("fa_load_balance"):
        out.append("FlashAttention's context-parallel work balanced over its devices (parallel_speed_up_json "
                   "enable_flash_attention_load_balance)")
    if o.get("optimizer_swap"):
        out.append("the optimizer's states on the host, each weight's brought to the device for its update "
                   "(MindFormers' AdamW swap); the transfers are not priced in the step")
    given = [x for x in o.get("settings", ()) if x["from"].startswith("config")]
    if given:
        out.append("settings from the config: " + "; ".join(f"{x['setting']} {x['value']} ({x['from'][7:]})"
                                                             for x in given))
    out.extend(render_table([label for _k, label in COLUMNS], [[_s(s[k]) for k, _l in COLUMNS]], markdown))
    t = d["throughput"]
    if t.get("tokens_per_s_per_device"):
        out.append(f"throughput: {t['tokens_per_s_per_device']:.0f} tokens/s per device")
    layers = list(d["per_layer"].items())
    if layers:
        cols = [c for c in COLUMNS if c[0] != "bubble_s"]
        rows = [[k] + [_s(v[c]) for c, _l in cols] for k, v in layers[:max_layers]]
        if len(layers) > max_layers:
            rows.append([f"... {len(layers) - max_layers} more (--format json)"] + [""] * len(cols))
        out.extend(render_table(["layer"] + [label for _c, label in cols], rows, markdown))
    return out


def memory_lines(d: dict) -> list[str]:
    m = d["memory"]
    a = m["assumed"]
    margin = m["capacity"] - m["total"]
    held = [("parameters", m["parameters"]), ("optimizer states", m["optimizer_states"]),
            ("accumulated gradients", m.get("accumulated_gradients", 0.0))]
    at = [("activations", m["activations"]), ("transient", m["transient"]),
          ("gathered weights", m["gathered_weights"]), ("gradients", m["gradients"]),
          ("optimizer temporaries", m.get("optimizer_temporaries", 0.0))]
    limit = m.get("max_device_memory_GB")
    total = (f"memory per device: {_gib(m['total'])} of {_gib(m['capacity'])} usable "
             + (f"(max_device_memory {limit:g} GB; " if limit is not None else "(")
             + f"{'fits' if m['fits'] else 'does NOT fit'}, margin {'-' if margin < 0 else ''}{_gib(abs(margin))}); "
             f"peak at the {m.get('peak_at', 'end of the forward')}: "
             + ", ".join(f"{k} {_gib(v)}" for k, v in held + at if v or k in ("parameters", "optimizer states"))
             + (f"; optimizer states on the host (optimizer swap) {_gib(m['optimizer_states_on_host'])}"
                if m.get("optimizer_states_on_host") else ""))
    assumed = (f"  assumed: recompute {a['recompute']}, optimizer parallel "
               f"{'on' if a['optimizer_parallel'] else 'off'}, {a['micro_batches_in_flight']} micro-batch(es) in "
               f"flight; {a['activations']}; {a['optimizer']}; gradients {a['gradients']}")
    return [total, assumed]


def overlap_lines(d: dict, render_table, markdown: bool, max_rows: int = 8) -> list[str]:
    cands = d["overlap"]["candidates"]
    if not cands:
        return ["overlap: no collective on the critical path"]
    return render_table(["collective on the critical path", "feature", "applies", "saving", "how / why not"],
                        [[f"{c['op']} ({c['collective']})", c["feature"], "yes" if c["applicable"] else "no",
                          _s(c["saving_s"]), c["how"] if c["applicable"] else c["reason"]] for c in cands[:max_rows]],
                        markdown)
