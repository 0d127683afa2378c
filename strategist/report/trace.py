"""One training step as the step model schedules it (:mod:`strategist.cost.schedule`), as tracks of timed spans:
the phases (forward, backward, optimizer, per micro-batch), the compute stream, the communication stream the next
operator waits on, the optimizer-parallel AllGathers and the data-parallel gradient reductions. :func:`trace_dict`
writes them as Chrome trace events (``--trace FILE``: Perfetto and ``chrome://tracing`` open it); the HTML report
draws the same spans as its timeline."""
from __future__ import annotations

import json

from ..cost.step import estimate

#: (track id, name), top to bottom
TRACKS = ((0, "phases"), (1, "compute"), (2, "communication"), (3, "weight AllGather (prefetch)"),
          (4, "gradient reduction"))
#: the schedule's collectives by what they are -> their stream's track
STREAM = {"prefetch": 3, "gradient": 4}
_EPS = 1e-12


def schedule_spans(plan) -> dict | None:
    """``{"tracks", "spans", "end_s", "stage", "pp", "micro_batches"}`` of ``plan``'s step (None without a hardware
    profile): ``spans`` are ``(track, start s, end s, name, category, {detail})``, start order within a track. A
    step of M micro-batches runs M - 1 forward-and-backward passes and then the last one with the gradient
    reductions and the optimizer; with pp > 1 the stage reported (the slowest), without the pipeline's bubbles."""
    est = estimate(plan)
    if est is None:
        return None
    _names, a, b = est.runs[est.worst]
    m = est.opts.micro_batches
    spans: list[tuple] = []
    t0 = 0.0
    for k in range(m):
        tl = a if k < m - 1 else b
        label = f" (micro-batch {k + 1} of {m})" if m > 1 else ""
        spans.extend(_passes(tl, t0, label))
        t0 += tl.end
    spans.sort(key=lambda s: (s[0], s[1], s[2], s[3]))
    return {"tracks": [{"id": i, "name": n} for i, n in TRACKS], "spans": spans, "end_s": t0,
            "stage": est.worst, "pp": est.opts.pp, "micro_batches": m, "step_s": est.step_s}


def _passes(tl, t0: float, label: str) -> list[tuple]:
    """The spans of one micro-batch's timeline starting at ``t0``."""
    out: list[tuple] = []
    opt = [c for c in tl.compute if c[2] == "(optimizer)"]
    back_end = opt[0][0] if opt else tl.end
    out.append((0, t0, t0 + tl.forward_end, "forward" + label, "phase", {}))
    if back_end > tl.forward_end:
        out.append((0, t0 + tl.forward_end, t0 + back_end, "backward" + label, "phase", {}))
    for s, e, _layer in opt:
        out.append((0, t0 + s, t0 + e, "optimizer", "phase", {}))
    cur = None
    for s, e, layer in tl.compute:          # a layer's back-to-back operators as one span
        phase = "optimizer" if layer == "(optimizer)" else "forward" if s < tl.forward_end - _EPS else "backward"
        if cur is not None and cur[3] == layer and cur[4] == phase and abs(cur[2] - s) < _EPS:
            cur[2] = e
            continue
        if cur is not None:
            out.append(tuple(cur[:5]) + ({"layer": cur[3]},))
        cur = [1, s, e, layer, phase]
    if cur is not None:
        out.append(tuple(cur[:5]) + ({"layer": cur[3]},))
    out = [x if x[0] == 0 else (x[0], t0 + x[1], t0 + x[2]) + x[3:] for x in out]
    for s, e, layer, op, what in tl.comm:
        if e > s:
            name = f"{what}: {op}" if op else f"{what} ({layer})"
            out.append((STREAM.get(what, 2), t0 + s, t0 + e, name, what, {"layer": layer, "operator": op or "-"}))
    return out


def _us(s: float) -> float:
    return round(s * 1e6, 3)


def trace_dict(plan) -> dict | None:
    """The step's spans as Chrome trace events (``ph: X``, microseconds; one process, a thread per track)."""
    d = schedule_spans(plan)
    if d is None:
        return None
    events = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0,
               "args": {"name": f"strategist step model: {plan.graph.model} on {plan.mesh}"
                        + (f", stage {d['stage']} of pp={d['pp']}" if d["pp"] > 1 else "")}}]
    for t in d["tracks"]:
        events.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": t["id"], "args": {"name": t["name"]}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": 1, "tid": t["id"], "args": {"sort_index": t["id"]}})
    for tid, s, e, name, cat, args in d["spans"]:
        events.append({"ph": "X", "name": name, "cat": cat, "pid": 1, "tid": tid, "ts": _us(s), "dur": _us(e - s),
                       "args": args})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"model": plan.graph.model, "mesh": str(plan.mesh), "step_s": d["step_s"],
                          "micro_batches": d["micro_batches"], "pp": d["pp"], "stage": d["stage"]}}


def trace_json(plan) -> str:
    """:func:`trace_dict` as JSON text (deterministic)."""
    from ..errors import StrategistError
    d = trace_dict(plan)
    if d is None:
        raise StrategistError("--trace: the step model needs a hardware profile: give --hardware")
    return json.dumps(d, indent=None, sort_keys=True, separators=(",", ":")) + "\n"
