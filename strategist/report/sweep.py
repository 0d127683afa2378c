"""The sweep's report: the ranked configurations (mesh, options, anchors, step, exposed communication, memory per
device), the ones out of memory and the infeasible ones with their reasons, and the best three's advice with the
MindSpore / MindFormers settings to write; as a table, Markdown, or JSON (:meth:`SweepResult.to_dict`)."""
from __future__ import annotations

import json

from .render import human_bytes, render_table


def _options_text(o: dict) -> str:
    return (f"recompute {o['recompute']}, optimizer parallel {'on' if o['optimizer_parallel'] else 'off'}"
            + (f", {o['micro_batches']} micro-batches" if o["micro_batches"] > 1 else "")
            + (f", {o['interleave']} copies" if o.get("interleave", 1) > 1 else "")
            + (", FlashAttention load balance" if o.get("fa_load_balance") else "")
            + (f", offset {','.join(map(str, o['offset']))}" if o.get("offset") else "")
            + (", sequence parallel" if o.get("sequence_parallel") else ""))


def _row(c) -> list[str]:
    tps = f"{c.tokens_per_s_per_device:.0f}" if c.tokens_per_s_per_device else "-"
    carried = "*" if c.anchors_from and c.anchors_from != c.mesh else ""
    return [c.mesh, _options_text(c.options) if c.options else "-",
            "-" if c.anchors is None else f"{c.anchors}{carried}",
            f"{c.step_s * 1e3:.1f} ms" if c.step_s is not None else "-", tps,
            f"{c.exposed_s * 1e3:.1f} ms" if c.exposed_s is not None else "-",
            human_bytes(c.memory_bytes) if c.memory_bytes is not None else "-",
            "yes" if c.fits else (c.reason or "no")]


HEAD = ["mesh", "options", "anchors", "step", "tokens/s/device", "exposed comm", "memory/device", "fits"]


def sweep_text(result, markdown: bool = False, max_rows: int = 20) -> str:
    carried = (f", {result.meshes_carried} priced with the anchors of their family's advised mesh (anchors marked *;"
               f" --exhaustive advises each)") if result.meshes_carried else ""
    out = [f"strategist sweep: {result.model} on {result.devices} devices, hardware {result.hardware}",
           f"{len(result.ranked)} configurations fit, {len(result.unfit)} out of memory, "
           f"{len(result.infeasible)} infeasible; {result.meshes_advised} meshes advised on their own{carried}"
           + (" (interrupted: what was ranked so far)" if result.interrupted else "")]
    if result.usable_bytes:
        out.append(f"memory per device as MindSpore's allocator holds it at the step's peak, against "
                   f"{human_bytes(result.usable_bytes)} usable (MindSpore's max_device_memory: the config's or "
                   f"--max-device-memory, else the profile's memory less its reserve)")
    out.append("")
    shown = result.ranked if not max_rows else result.ranked[:max_rows]
    out.append("Ranked (fastest first)")
    out += render_table(HEAD, [_row(c) for c in shown], markdown=markdown)
    if max_rows and len(result.ranked) > max_rows:
        out.append(f"... {len(result.ranked) - max_rows} more (--max-rows 0 for all)")
    if result.unfit:
        out += ["", "Out of memory (least memory first)"]
        out += render_table(HEAD, [_row(c) for c in result.unfit[:max_rows or None]], markdown=markdown)
    if result.infeasible:
        out += ["", "Infeasible"]
        out += render_table(["mesh", "options", "why"], [[c.mesh, _options_text(c.options) if c.options else "-",
                                                         c.reason] for c in result.infeasible[:max_rows or None]],
                            markdown=markdown)
    for k, b in enumerate(result.best, 1):
        out += ["", f"#{k}: --mesh {b['mesh']} ({_options_text(b['options'])})"]
        anchors = b["advice"].get("anchors", [])
        out.append(f"  {len(anchors)} anchors" + (":" if anchors else " (configure nothing)"))
        for a in anchors:
            out.append(f"    {a['op']}: {a['shard_tuple'] or a['strategy']}")
        pc = b["parallel_config"]["mindformers"]
        out.append("  MindFormers: parallel_config " + json.dumps(pc["parallel_config"], sort_keys=True)
                   + ", recompute_config " + json.dumps(pc["recompute_config"], sort_keys=True)
                   + ", model_config " + json.dumps(pc["model_config"], sort_keys=True)
                   + ", parallel " + json.dumps(pc["parallel"], sort_keys=True))
    return "\n".join(out) + "\n"
