"""A plan's operators as a drawn graph: a layered layout (each operator one row below its deepest producer, each
row ordered by its producers' places), every operator coloured by its layout, every edge that moves data marked
with its collectives and bytes. Whole graphs up to :data:`WHOLE_GRAPH` operators; larger ones show one layer of
the longest run of repeated layers (a transformer layer)."""
from __future__ import annotations

from ..groups import short_label
from ..layers import layer_ops, layer_runs
from ..render import human_bytes, strategy_text

WHOLE_GRAPH = 80
NODE_W, NODE_H, GAP_X, GAP_Y, PAD, VIA_W = 176, 30, 20, 58, 12, 8


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


def own_collectives(plan, name: str) -> str:
    """An operator's own collectives in the forward and backward (its partial sums), groups named; "" for none."""
    c = plan.op_costs.get(name)
    if c is None or not (c.fwd_bytes or c.bwd_bytes):
        return ""
    steps = [short_label(st, plan.mesh) for st in c.steps if st.nbytes > 0 and st.direction != "grad"]
    return f"{' ; '.join(steps)} \u00b7 {human_bytes(c.fwd_bytes + c.bwd_bytes)}" if steps else ""


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


def layered(names: list[str], preds: dict[str, list[str]]) -> tuple[dict, dict, float, float]:
    """(each operator's box corner, each edge's route through the rows it crosses, width, height): each operator one
    row below its deepest producer; an edge crossing rows runs through a narrow place of its own in each (a virtual
    node), so it passes beside the operators, not through them; each row ordered by its neighbours' mean place,
    down, up and down again."""
    depth: dict = {}
    for n in names:                                  # graph order is a topological order
        depth[n] = max((depth[p] + 1 for p in preds[n]), default=0)
    rows: list[list] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for n in names:
        rows[depth[n]].append(n)
    up: dict = {n: [] for n in names}
    down: dict = {n: [] for n in names}
    chains: dict = {}
    for n in names:
        for p in preds[n]:
            last, chain = p, []
            for r in range(depth[p] + 1, depth[n]):
                v = ("via", p, n, r)
                rows[r].append(v)
                up[v], down[v] = [last], []
                down[last].append(v)
                chain.append(v)
                last = v
            up[n].append(last)
            down[last].append(n)
            chains[(p, n)] = chain
    place = {x: k for row in rows for k, x in enumerate(row)}
    for sweep, near in ((range(len(rows)), up), (range(len(rows) - 1, -1, -1), down), (range(len(rows)), up)):
        for r in sweep:
            row = rows[r]
            row.sort(key=lambda x: (sum(place[y] for y in near[x]) / len(near[x]) if near[x] else place[x], place[x]))
            for k, x in enumerate(row):
                place[x] = k

    def size(x) -> float:
        return VIA_W if isinstance(x, tuple) else NODE_W
    spans = [sum(size(x) + GAP_X for x in row) - GAP_X for row in rows]
    width = max(spans, default=NODE_W) + 2 * PAD
    corner: dict = {}
    for r, row in enumerate(rows):
        x = (width - spans[r]) / 2
        for v in row:
            corner[v] = (x, PAD + r * (NODE_H + GAP_Y))
            x += size(v) + GAP_X
    routes = {}
    for (p, n), chain in chains.items():
        (x1, y1), (x2, y2) = corner[p], corner[n]
        pts = [(x1 + NODE_W / 2, y1 + NODE_H)]
        for v in chain:
            vx, vy = corner[v]
            pts += [(vx + VIA_W / 2, vy), (vx + VIA_W / 2, vy + NODE_H)]
        pts.append((x2 + NODE_W / 2, y2))
        routes[(p, n)] = pts
    height = PAD * 2 + len(rows) * (NODE_H + GAP_Y) - GAP_Y
    return {n: corner[n] for n in names}, routes, width, max(height, NODE_H + 2 * PAD)


def path_of(pts: list[tuple[float, float]]) -> str:
    """An SVG path through ``pts``: a curve between rows, straight down through a crossed row."""
    out = [f"M{pts[0][0]:.1f},{pts[0][1]:.1f}"]
    for k, ((x1, y1), (x2, y2)) in enumerate(zip(pts, pts[1:])):
        if k % 2:                                    # through a crossed row
            out.append(f"L{x2:.1f},{y2:.1f}")
        else:
            mid = (y1 + y2) / 2
            out.append(f"C{x1:.1f},{mid:.1f} {x2:.1f},{mid:.1f} {x2:.1f},{y2:.1f}")
    return " ".join(out)


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
    pos, routes, width, height = layered(names, preds)
    keys: dict[str, int] = {}
    nodes = []
    for op in ops:
        key = layout_key(plan, op.name)
        k = keys.setdefault(key, len(keys))
        x, y = pos[op.name]
        label = op_label(op)
        nodes.append({"name": op.name, "type": op.type, "x": round(x, 1), "y": round(y, 1), "w": NODE_W, "h": NODE_H,
                      "label": label if len(label) <= 26 else "\u2026" + label[-25:], "layout": key,
                      "fill": colour(k), "who": plan.choices[op.name].provenance.direction,
                      "own": own_collectives(plan, op.name)})
    moving = {}
    for e in plan.edges:
        if e.src in inside and e.dst in inside and (e.bytes > 0 or any(o.kind != "Split" for o in e.forward.ops)):
            steps = [short_label(o.step(), plan.mesh) for o in e.forward.ops if o.kind != "Split"]
            moving[(e.src, e.dst)] = f"{' ; '.join(steps) or 'local split'} \u00b7 {human_bytes(e.bytes)}"
    edges = []
    for op in ops:
        for p in preds[op.name]:
            pts = routes[(p, op.name)]
            (sx, sy), (tx, ty) = pts[0], pts[1]
            label = moving.get((p, op.name))
            edges.append({"src": p, "dst": op.name, "d": path_of(pts), "moves": label is not None, "label": label,
                          "lx": round((sx + tx) / 2 + 4, 1), "ly": round((sy + ty) / 2 + 4, 1)})
    counts: dict[str, int] = {}
    for n in nodes:
        counts[n["layout"]] = counts.get(n["layout"], 0) + 1
    legend = [{"layout": k, "fill": colour(i), "count": counts[k]} for k, i in keys.items()]
    return {"what": what, "nodes": nodes, "edges": edges, "legend": legend, "width": round(width),
            "height": round(height), "moving": sum(1 for e in edges if e["moves"]),
            "own": sum(1 for n in nodes if n["own"])}
