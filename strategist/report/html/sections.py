"""The HTML report's sections of one plan, as plain data for the templates: the summary, the per-layer bars with
repeated layers collapsed, the operator table, the redistributions, the rank x rank matrix, the timeline."""
from __future__ import annotations

from ..groups import short_label
from ..layers import layer_runs
from ..render import decided_by, human_bytes, rel, strategy_text
from ..trace import schedule_spans
from . import charts
from .graphview import colour, graph_view, layout_key
from .matrix import comm_matrix

#: the largest mesh whose matrix has a cell per device pair; larger ones are drawn in blocks of ranks
MATRIX_CELLS = 128


def summary(plan, step: dict | None) -> dict:
    t = plan.totals()
    out = {"model": plan.graph.model, "mesh": str(plan.mesh), "devices": plan.mesh.size,
           "hardware": plan.hardware.name if plan.hardware else "-", "anchors": len(plan.anchors),
           "operators": len(plan.graph), "comm_bytes": human_bytes(t["total_bytes"]),
           "comm_time": charts.ms(t["total_seconds"]), "step": None, "throughput": None, "memory": None}
    if step:
        s = step["schedule"]
        out["step"] = charts.ms(s["step_s"])
        tp = step.get("throughput") or {}
        if tp.get("tokens_per_s_per_device"):
            out["throughput"] = f"{tp['tokens_per_s_per_device']:.0f} tokens/s per device"
        m = step["memory"]
        out["memory"] = {"total": f"{m['total'] / 2**30:.2f} GiB", "capacity": f"{m['capacity'] / 2**30:.2f} GiB",
                         "fits": bool(m["fits"]), "bar": charts.memory_bar(m)}
        o = step["options"]
        out["options"] = (f"pp={o['pp']}, micro-batches {o['micro_batches']}, recompute {o['recompute']}, "
                          f"optimizer parallel {'on' if o['optimizer_parallel'] else 'off'}, "
                          f"interleave {o['interleave']}")
        out["schedule"] = charts.bar_chart([{"label": "one training step", "row": s}])
    return out


def layer_bars(plan, step: dict | None) -> dict | None:
    """The per-layer chart, a run of repeated layers one bar (its mean, marked xN), and each run's own chart."""
    if not step or not step.get("per_layer"):
        return None
    per = step["per_layer"]
    zero: dict = {}
    runs = layer_runs(plan)
    in_layers = {layer for r in runs for layer in r.layers}
    outside = [k for k in per if k not in in_layers]
    first = [k for k in outside if k == "(outside layers)"]
    last = [k for k in outside if k not in first]
    rows, expand = [], []
    for k in first:
        rows.append({"label": k, "row": per[k]})
    for r in runs:
        members = [per.get(layer, zero) for layer in r.layers]
        if len(r.layers) == 1:
            rows.append({"label": r.first, "row": members[0]})
            continue
        rows.append({"label": r.label, "row": charts.mean_row(members), "note": f"mean of {len(r.layers)} layers",
                     "key": r.first})
        expand.append({"label": r.label, "layers": len(r.layers),
                       "rows": [{"label": layer, "row": row} for layer, row in zip(r.layers, members)]})
    for k in last:
        rows.append({"label": k, "row": per[k]})
    every = [x["row"] for x in rows] + [m["row"] for e in expand for m in e["rows"]]
    top = max((sum(charts.segments_of(x).values()) for x in every), default=0.0) or 1.0
    return {"chart": charts.bar_chart(rows, top),
            "runs": [{"label": e["label"], "layers": e["layers"], "chart": charts.bar_chart(e["rows"], top)}
                     for e in expand],
            "kinds": len(runs), "layers": len(in_layers)}


def strategy_cell(plan, name: str) -> str:
    ch = plan.choices[name]
    if ch.strategy is not None:
        return strategy_text(ch.strategy)
    if ch.inputs:
        return f"(reshape) {ch.inputs[0]} -> {ch.outputs[0] if ch.outputs else '-'}"
    return "() (no tensor inputs)"


def op_rows(plan) -> list[dict]:
    """Every operator: name, type, layout, what decided it, its communication (its own and its inputs')."""
    into: dict[str, list[float]] = {}
    for e in plan.edges:
        c = into.setdefault(e.dst, [0.0, 0.0])
        c[0] += e.bytes
        c[1] += e.seconds
    keys: dict[str, int] = {}
    out = []
    for op in plan.graph:
        ch = plan.choices[op.name]
        own = plan.op_costs.get(op.name)
        b = into.get(op.name, [0.0, 0.0])[0] + (own.bytes if own else 0.0)
        s = into.get(op.name, [0.0, 0.0])[1] + (own.seconds if own else 0.0)
        k = keys.setdefault(layout_key(plan, op.name), len(keys))
        out.append({"name": op.name, "type": op.type, "layout": strategy_cell(plan, op.name),
                    "who": decided_by(ch), "bytes": human_bytes(b) if b else "-", "time": charts.ms(s) if s else "-",
                    "fill": colour(k), "source": rel(op.source)})
    return out


def redistributions(plan) -> list[dict]:
    return [{"edge": f"{e.src} -> {e.dst}",
             "forward": " ; ".join(short_label(o.step(), plan.mesh) for o in e.forward.ops) or "-",
             "backward": " ; ".join(short_label(o.step(), plan.mesh) for o in e.backward.ops) if e.backward else "-",
             "bytes": human_bytes(e.bytes), "time": charts.ms(e.seconds)}
            for e in plan.edges if e.bytes]


def matrix_view(plan) -> dict:
    """The matrix's cells, shaded in eight steps of the largest; a cell per device pair up to
    :data:`MATRIX_CELLS` devices, else per block of ranks."""
    m = comm_matrix(plan)
    n = len(m)
    block = -(-n // MATRIX_CELLS)
    k = -(-n // block)
    grid = [[0.0] * k for _ in range(k)]
    for i in range(n):
        for j in range(n):
            grid[i // block][j // block] += m[i][j]
    top = max((v for row in grid for v in row), default=0.0)
    size = max(3, min(14, 520 // k))
    cells = []
    for i in range(k):
        for j in range(k):
            v = grid[i][j]
            level = 0 if v <= 0 or top <= 0 else max(1, min(8, round(v / top * 8)))
            what = f"{i}" if block == 1 else f"{i * block}-{min(n, (i + 1) * block) - 1}"
            to = f"{j}" if block == 1 else f"{j * block}-{min(n, (j + 1) * block) - 1}"
            cells.append({"x": j * size, "y": i * size, "q": level,
                          "title": f"{what} \u2192 {to}: {human_bytes(v)}" if v > 0 else None})
    axis = plan.mesh.shape[-1] if plan.mesh.shape else 1
    step = axis if 1 < axis < k else max(1, k // 8)
    ticks = [{"at": t * size + size / 2, "label": str(t * block)} for t in range(0, k, step)]
    return {"cells": cells, "size": size, "n": k, "side": k * size, "block": block, "devices": n,
            "max": human_bytes(top), "ticks": ticks,
            "sent": human_bytes(sum(m[0])), "pairs": sum(1 for c in cells if c["q"])}


def plan_sections(plan, step: dict | None) -> dict:
    """Every section of one plan's page."""
    spans = schedule_spans(plan)
    return {"summary": summary(plan, step), "layers": layer_bars(plan, step), "graph": graph_view(plan),
            "ops": op_rows(plan), "redistributions": redistributions(plan), "matrix": matrix_view(plan),
            "timeline": charts.timeline(spans),
            "anchors_plan": [{"op": k, "strategy": a.describe(), "origin": a.origin}
                             for k, a in sorted(plan.anchors.items())],
            "conflicts": [f"anchors {c.anchors[0]} and {c.anchors[1]} disagree on {c.src} -> {c.dst}: a "
                          f"redistribution is inserted ({charts.ms(c.seconds)})" for c in plan.conflicts],
            "warnings": list(plan.warnings)}
