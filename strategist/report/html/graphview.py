"""A plan's operators as a drawn graph: a layered layout (each operator one row below its deepest producer, each
row ordered by its producers' places), every operator coloured by its layout, every edge that moves data marked
with its collectives and bytes. Whole graphs up to :data:`WHOLE_GRAPH` operators; larger ones show one layer of
the longest run of repeated layers (a transformer layer)."""
from __future__ import annotations

from ..groups import short_label
from ..layers import layer_ops, layer_runs
from ..render import human_bytes, strategy_text

WHOLE_GRAPH = 80
NODE_W, NODE_H, GAP_X, GAP_Y, PAD = 176, 30, 20, 58, 12


def chosen_ops(plan) -> tuple[list, str]:
    """(the operators drawn, what they are)."""
    ops = list(plan.graph)
    if len(ops) <= WHOLE_GRAPH:
        return ops, f"the whole graph ({len(ops)} operators)"
    runs = layer_runs(plan)
    if not runs:
        return ops[:WHOLE_GRAPH], f"the first {WHOLE_GRAPH} of {len(ops)} operators"
    run = max(runs, key=lambda r: (len(r.layers), -runs.index(r)))
    mine = layer_ops(plan)[run.first]
    return mine, (f"one layer, {run.first} ({len(mine)} operators)"
                  + (f", as its {len(run.layers) - 1} repeats" if len(run.layers) > 1 else ""))


def op_label(op) -> str:
    """An operator's name in its box: past its layer, after the layer's index (``0 attention.wq.matmul``).

    >>> from types import SimpleNamespace as N
    >>> op_label(N(name="model.layers.3.attention.wq.matmul", layer="model.layers.3")), op_label(N(name="loss.mul", layer=""))
    ('3 attention.wq.matmul', 'loss.mul')
    """
    if op.layer and op.name.startswith(op.layer + "."):
        return f"{op.layer.rsplit('.', 1)[-1]} {op.name[len(op.layer) + 1:]}"
    return op.name


def layout_key(plan, name: str) -> str:
    """What colours an operator: its strategy, or a Reshape's layout out."""
    ch = plan.choices[name]
    if ch.strategy is not None:
        return strategy_text(ch.strategy)
    if ch.outputs:
        return "reshape to " + str(ch.outputs[0]).split("@", 1)[-1]
    return "()"


def colour(k: int) -> str:
    """The ``k``-th layout's colour: hues apart by the golden angle."""
    return f"hsl({(k * 137.508) % 360:.0f}, 62%, 58%)"


def _rows(names: list[str], preds: dict[str, list[str]]) -> list[list[str]]:
    depth: dict[str, int] = {}
    for n in names:                                  # graph order is a topological order
        depth[n] = max((depth[p] + 1 for p in preds[n]), default=0)
    rows: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for n in names:
        rows[depth[n]].append(n)
    place: dict[str, float] = {}
    for row in rows:                                 # one sweep down: order by the producers' mean place
        order = {n: k for k, n in enumerate(row)}
        row.sort(key=lambda n: (sum(place[p] for p in preds[n]) / len(preds[n]) if preds[n] else order[n],
                                order[n]))
        for k, n in enumerate(row):
            place[n] = k
    return rows


def graph_view(plan) -> dict:
    """Nodes, edges and legend of the drawn graph, in SVG coordinates."""
    ops, what = chosen_ops(plan)
    names = [op.name for op in ops]
    inside = set(names)
    preds: dict[str, list[str]] = {n: [] for n in names}
    for op in ops:
        for x in op.inputs:
            if x.kind == "op" and x.ref in inside and x.ref not in preds[op.name]:
                preds[op.name].append(x.ref)
    rows = _rows(names, preds)
    widest = max((len(r) for r in rows), default=1)
    width = widest * (NODE_W + GAP_X) - GAP_X + 2 * PAD
    pos: dict[str, tuple[float, float]] = {}
    for y, row in enumerate(rows):
        left = (width - (len(row) * (NODE_W + GAP_X) - GAP_X)) / 2
        for k, n in enumerate(row):
            pos[n] = (left + k * (NODE_W + GAP_X), PAD + y * (NODE_H + GAP_Y))
    keys: dict[str, int] = {}
    nodes = []
    for op in ops:
        key = layout_key(plan, op.name)
        k = keys.setdefault(key, len(keys))
        x, y = pos[op.name]
        label = op_label(op)
        nodes.append({"name": op.name, "type": op.type, "x": round(x, 1), "y": round(y, 1), "w": NODE_W, "h": NODE_H,
                      "label": label if len(label) <= 28 else "\u2026" + label[-27:], "layout": key,
                      "fill": colour(k), "who": plan.choices[op.name].provenance.direction})
    moving = {}
    for e in plan.edges:
        if e.src in inside and e.dst in inside and (e.bytes > 0 or any(o.kind != "Split" for o in e.forward.ops)):
            steps = [short_label(str(o), plan.mesh) for o in e.forward.ops if o.kind != "Split"]
            moving[(e.src, e.dst)] = f"{' ; '.join(steps) or 'local split'} \u00b7 {human_bytes(e.bytes)}"
    edges = []
    for op in ops:
        for p in preds[op.name]:
            (x1, y1), (x2, y2) = pos[p], pos[op.name]
            sx, sy, tx, ty = x1 + NODE_W / 2, y1 + NODE_H, x2 + NODE_W / 2, y2
            mid = (sy + ty) / 2
            label = moving.get((p, op.name))
            edges.append({"src": p, "dst": op.name, "d": f"M{sx:.1f},{sy:.1f} C{sx:.1f},{mid:.1f} {tx:.1f},{mid:.1f} "
                                                           f"{tx:.1f},{ty:.1f}",
                          "moves": label is not None, "label": label, "lx": round((sx + tx) / 2 + 4, 1),
                          "ly": round(mid + 4, 1)})
    counts: dict[str, int] = {}
    for n in nodes:
        counts[n["layout"]] = counts.get(n["layout"], 0) + 1
    legend = [{"layout": k, "fill": colour(i), "count": counts[k]} for k, i in keys.items()]
    height = PAD * 2 + len(rows) * (NODE_H + GAP_Y) - GAP_Y
    return {"what": what, "nodes": nodes, "edges": edges, "legend": legend, "width": round(width),
            "height": round(max(height, NODE_H + 2 * PAD)), "moving": sum(1 for e in edges if e["moves"])}
