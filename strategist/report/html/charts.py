"""The HTML report's charts as SVG geometry (the templates draw it): stacked bars of a schedule's msprof-analyze
columns, the step's timeline, a scatter of step time against memory. Pure functions of figures in seconds and
bytes; coordinates rounded so the page is the same for the same plan."""
from __future__ import annotations

from ..render import human_bytes

#: a bar's segments, left to right: (key, label, CSS class). Computing here is the compute stream alone: the
#: schedule's Computing less the Overlapped time, which runs beside it -- so a bar's length is the step's.
SEGMENTS = (("computing_only_s", "Computing", "seg-comp"), ("overlapped_s", "Overlapped", "seg-ovl"),
            ("communication_not_overlapped_s", "Communication (not overlapped)", "seg-comm"),
            ("free_s", "Free", "seg-free"), ("bubble_s", "Bubble", "seg-bub"))
LABEL_W, BAR_W, BAR_H, ROW_H = 300, 560, 16, 24


def ms(s: float) -> str:
    return f"{s * 1e3:.3f} ms"


def segments_of(row: dict) -> dict:
    """A schedule row (``computing_s``, ``overlapped_s``, ...) as the bar's segments, in seconds."""
    out = {k: float(row.get(k, 0.0) or 0.0) for k in ("overlapped_s", "communication_not_overlapped_s", "free_s",
                                                       "bubble_s")}
    out["computing_only_s"] = max(float(row.get("computing_s", 0.0) or 0.0) - out["overlapped_s"], 0.0)
    return out


def bar_chart(rows: list[dict], scale_s: float | None = None) -> dict:
    """``rows``: ``{"label", "row" (schedule keys), "note"}``; one bar each, on one scale (``scale_s`` or the
    longest bar)."""
    segs = [segments_of(r["row"]) for r in rows]
    top = scale_s or max((sum(s.values()) for s in segs), default=0.0) or 1.0
    bars = []
    for i, (r, s) in enumerate(zip(rows, segs)):
        x, parts = LABEL_W, []
        for key, label, cls in SEGMENTS:
            w = s[key] / top * BAR_W
            if w > 0:
                parts.append({"x": round(x, 2), "w": round(w, 2), "cls": cls, "title": f"{label}: {ms(s[key])}"})
            x += w
        total = sum(s.values())
        bars.append({"label": r["label"], "y": i * ROW_H, "segments": parts, "end": round(x + 6, 2),
                     "total": ms(total), "note": r.get("note", ""), "key": r.get("key", r["label"])})
    return {"bars": bars, "width": LABEL_W + BAR_W + 110, "height": max(len(rows), 1) * ROW_H, "bar_h": BAR_H,
            "label_w": LABEL_W, "scale": ms(top)}


def mean_row(rows: list[dict]) -> dict:
    keys = {k for r in rows for k in r}
    return {k: sum(float(r.get(k, 0.0) or 0.0) for r in rows) / len(rows) for k in keys}


TIMELINE_W, TRACK_H, TRACK_LABEL = 1000, 22, 190


def timeline(spans: dict | None) -> dict | None:
    """The step's spans (:func:`strategist.report.trace.schedule_spans`) as one row per track."""
    if not spans or spans["end_s"] <= 0:
        return None
    end = spans["end_s"]
    scale = TIMELINE_W / end
    rows = {t["id"]: k for k, t in enumerate(spans["tracks"])}
    rects = []
    for tid, s, e, name, cat, args in spans["spans"]:
        w = (e - s) * scale
        rects.append({"x": round(TRACK_LABEL + s * scale, 2), "w": round(max(w, 0.4), 2),
                      "y": rows[tid] * TRACK_H + 3,
                      "cls": ("tl-ph-" + name.split()[0]) if cat == "phase" else "tl-" + cat.replace(" ", "-"),
                      "title": f"{name}: {ms(s)} .. {ms(e)} ({ms(e - s)})"
                      + "".join(f"; {k} {v}" for k, v in sorted(args.items()) if k != "operator" or v != "-")})
    ticks = [{"x": round(TRACK_LABEL + k * TIMELINE_W / 5, 1), "label": ms(end * k / 5)} for k in range(6)]
    return {"tracks": [{"name": t["name"], "y": k * TRACK_H} for k, t in enumerate(spans["tracks"])],
            "rects": rects, "width": TRACK_LABEL + TIMELINE_W + 60, "height": len(rows) * TRACK_H + 24,
            "axis_y": len(rows) * TRACK_H + 14, "ticks": ticks, "end": ms(end), "track_h": TRACK_H - 6,
            "label_x": TRACK_LABEL - 8,
            "stage": (f"stage {spans['stage']} of pp={spans['pp']} (the slowest), its micro-batches one after "
                      f"another without the pipeline's bubbles; the step is {ms(spans['step_s'])}")
            if spans["pp"] > 1 else ""}


SC_W, SC_H, SC_PAD = 640, 360, 56


def scatter(points: list[dict], capacity: float | None = None) -> dict | None:
    """``points``: ``{"x" (bytes), "y" (seconds), "label", "cls"}``: step time against memory per device."""
    pts = [p for p in points if p["x"] is not None and p["y"] is not None]
    if not pts:
        return None
    most = max(p["x"] for p in pts)
    shown = capacity if capacity and capacity <= 2 * most else None     # the card, where it is near the points
    xmax = max(most, shown or 0.0) * 1.05 or 1.0
    ymax = max(p["y"] for p in pts) * 1.05 or 1.0

    def px(v):
        return round(SC_PAD + v / xmax * (SC_W - 2 * SC_PAD), 2)

    def py(v):
        return round(SC_H - SC_PAD - v / ymax * (SC_H - 2 * SC_PAD), 2)
    dots = [{"cx": px(p["x"]), "cy": py(p["y"]), "cls": p["cls"], "title": p["label"]} for p in pts]
    xt = [{"x": px(xmax * k / 4), "label": human_bytes(xmax * k / 4)} for k in range(5)]
    yt = [{"y": py(ymax * k / 4), "label": f"{ymax * k / 4 * 1e3:.3g} ms"} for k in range(5)]
    note = (f"The card's usable memory, {human_bytes(capacity)}, lies beyond the chart." if capacity and not shown
            else "")
    return {"dots": dots, "width": SC_W, "height": SC_H, "pad": SC_PAD, "xticks": xt, "yticks": yt,
            "capacity_x": px(shown) if shown else None, "capacity_note": note, "bottom": SC_H - SC_PAD,
            "right": SC_W - SC_PAD}


def memory_bar(mem: dict | None) -> dict | None:
    """The memory per device against the card: what the step holds at its peak, stacked, and the usable capacity."""
    if not mem or not mem.get("capacity"):
        return None
    parts = [("parameters", "Parameters"), ("gathered_weights", "Gathered weights"), ("gradients", "Gradients"),
             ("optimizer_states", "Optimizer states"), ("activations", "Activations"), ("transient", "Transient"),
             ("accumulated_gradients", "Accumulated gradients"), ("optimizer_temporaries", "Optimizer temporaries")]
    top = max(float(mem["capacity"]), float(mem.get("total", 0.0)))
    x, segs = 0.0, []
    for k, (key, label) in enumerate(parts):
        v = float(mem.get(key) or 0.0)
        w = v / top * BAR_W
        if w > 0:
            segs.append({"x": round(x, 2), "w": round(w, 2), "cls": f"mem{k}", "title": f"{label}: {v / 2**30:.2f} GiB"})
        x += w
    return {"segments": segs, "width": BAR_W + 10, "capacity_x": round(float(mem["capacity"]) / top * BAR_W, 2),
            "legend": [{"cls": f"mem{k}", "label": label} for k, (_key, label) in enumerate(parts)]}
