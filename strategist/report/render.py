"""Text renderings of graphs and plans (console tables). Pure functions of their inputs."""
from __future__ import annotations

import fnmatch

import os

from ..files.anchors import anchor_value, dump_anchors, named_dims, own_matrix
from ..engine.search import alternatives
from ..vocab.graph import OpGraph
from ..engine.plan import CAST_PASS
from .groups import short_label
from .layers import repeated
from .step import memory_lines, per_layer_rows, step_dict, step_lines


def human_bytes(n: float) -> str:
    """``1536`` -> ``1.50 KiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} TiB"


def human_count(n: int) -> str:
    """``70553706496`` -> ``70.55 B``."""
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return str(n)


def rel(path: str | None) -> str:
    """A source location relative to the working directory when it lies below it."""
    if not path:
        return "-"
    file, _, line = path.rpartition(":")
    try:
        r = os.path.relpath(file)
    except ValueError:
        r = file
    return f"{file if r.startswith('..') else r}:{line}"


def inspect_text(graph: OpGraph, depth: int = 3, markdown: bool = False) -> str:
    """The ``strategist inspect`` report: ops by type, parameters, cell tree with op counts (``markdown``: the
    operators by type as a Markdown table, the cell tree as a nested list)."""
    if markdown:
        return _inspect_markdown(graph, depth)
    out = [f"model: {graph.model}",
           "inputs: " + ", ".join(f"{k}:{v}" for k, v in graph.inputs.items()),
           f"operators: {len(graph)}   edges: {graph.nx.number_of_edges()}",
           f"parameters: {len(graph.params)} tensors, {human_count(graph.param_count)} elements, "
           f"{human_bytes(graph.param_bytes)}",
           f"configured in source (shard): {sum(op.configured for op in graph)}",
           "", "operators by type:"]
    for t, n in graph.count_by_type().items():
        out.append(f"  {t:<32}{n:>8}")
    out += ["", "cell tree (operators inside each cell):"]
    out += [f"  {'  ' * level}{cell}" for level, cell in _cell_tree(graph, depth)]
    out += [f"note: {n}" for n in graph.notes]
    return "\n".join(out) + "\n"


def _cell_tree(graph: OpGraph, depth: int):
    """(level, ``"name [Class] operators"``) of each Cell down to ``depth``, in tree order."""
    counts = graph.cell_op_counts()
    for path in sorted(counts, key=_path_key):
        level = 0 if not path else path.count(".") + 1
        if level <= depth:
            label = path.rsplit(".", 1)[-1] if path else "(root)"
            yield level, f"{label} [{graph.cells.get(path, '?')}] {counts[path]}"


def _inspect_markdown(graph: OpGraph, depth: int) -> str:
    out = [f"# strategist inspect: {graph.model}", "",
           "- inputs: " + ", ".join(f"`{k}:{v}`" for k, v in graph.inputs.items()),
           f"- operators: {len(graph)}, edges: {graph.nx.number_of_edges()}",
           f"- parameters: {len(graph.params)} tensors, {human_count(graph.param_count)} elements, "
           f"{human_bytes(graph.param_bytes)}",
           f"- configured in source (shard): {sum(op.configured for op in graph)}", "", "## Operators by type", ""]
    out += render_table(["type", "operators"], [[t, str(n)] for t, n in graph.count_by_type().items()], True)
    out += ["", "## Cell tree (operators inside each cell)", ""]
    out += [f"{'  ' * level}- {cell}" for level, cell in _cell_tree(graph, depth)]
    out += [""] + [f"note: {n}" for n in graph.notes]
    return "\n".join(out).rstrip("\n") + "\n"


def _path_key(path: str):
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in path.split(".")] if path else []


# --------------------------------------------------------------------------------------
# propagation plans

#: the console tables' width (``render_table``): wider cells wrap onto continuation lines
TABLE_WIDTH = 120


def render_table(header, rows, markdown: bool = False, width: int | None = TABLE_WIDTH) -> list[str]:
    """Lines of an aligned console table, or a Markdown table (cells' ``|`` escaped). A console table wider than
    ``width`` columns has its widest columns narrowed and their cells wrapped onto continuation lines.

    >>> for line in render_table(["a", "b"], [("x", "one two three four")], width=12):
    ...     print(line)
    a  b
    x  one two
       three
       four
    """
    if markdown:
        return (["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
                + ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows])
    cols = [[str(x) for x in [hd] + [r[i] for r in rows]] for i, hd in enumerate(header)]
    w = [max(len(x) for x in c) for c in cols]
    if width and sum(w) + 2 * (len(w) - 1) > width:
        words = [max((len(t) for x in c for t in x.split()), default=0) for c in cols]
        # the first column (names) wraps only between words; the others keep short cells and words up to 24
        w = _fitted(cols, width, [words[0]] + [full if full <= 12 else min(n, 24) for n, full in zip(words[1:], w[1:])])
    out = []
    for r in [header] + list(rows):
        cells = [_wrapped(str(x), w[i]) for i, x in enumerate(r)]
        for k in range(max(len(c) for c in cells)):
            out.append("  ".join((c[k] if k < len(c) else "").ljust(w[i]) for i, c in enumerate(cells)).rstrip())
    return out


def _fitted(cols: list[list[str]], width: int, floors: list[int]) -> list[int]:
    """Column widths for the cells ``cols`` (per column, the header first) narrowed until the table (two spaces
    between columns) fits ``width``: one character at a time from the column whose narrowing adds the fewest lines
    to the table (a row is as tall as its tallest cell; the widest column of those), none below its ``floors``;
    then, if it still does not fit, every column but the first down to 8 (words broken)."""
    lengths = [[len(x) for x in c] for c in cols]
    w = [max(ls) for ls in lengths]
    rows = range(len(lengths[0]))
    lines = [[1] * len(w) for _ in rows]

    def taller(k: int) -> int:
        narrower = w[k] - 1
        return sum(max(-(-lengths[k][r] // narrower), max(lines[r])) - max(lines[r]) for r in rows)
    for floor in (floors, [floors[0]] + [8] * (len(w) - 1)):
        while sum(w) + 2 * (len(w) - 1) > width:
            free = [k for k in range(len(w)) if w[k] > floor[k]]
            if not free:
                break
            k = min(free, key=lambda j: (taller(j), -w[j], -j))
            w[k] -= 1
            for r in rows:
                lines[r][k] = -(-lengths[k][r] // w[k])
    return w


def _wrapped(text: str, width: int) -> list[str]:
    import textwrap
    if len(text) <= width:
        return [text]
    return textwrap.wrap(text, width, break_on_hyphens=False) or [""]


def strategy_text(strategy) -> str:
    """MindSpore's tuple syntax: ``((2, 1), (1, 4))``."""
    if strategy is None:
        return "-"
    return "(" + ", ".join("(" + ", ".join(map(str, s)) + ("," if len(s) == 1 else "") + ")"
                           for s in strategy) + ("," if len(strategy) == 1 else "") + ")"


def layout_text(layouts, mesh) -> str | None:
    """The same layouts as ``mindspore.Layout`` calls over the mesh's named axes, or None when a
    layout uses only part of a mesh axis (then only the tuple form expresses it)."""
    axes = layout_axes(layouts, mesh)
    if axes is None:
        return None
    parts = []
    for lay in axes:
        dims = ['"None"' if not names else f'"{names[0]}"' if len(names) == 1
                else "(" + ", ".join(f'"{x}"' for x in names) + ")" for names in lay]
        parts.append("layout(" + ", ".join(dims) + ")")
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def layout_axes(layouts, mesh) -> tuple | None:
    """Per layout, per tensor dimension: the mesh axes splitting it, outer first (``("tp", "dp")``); None
    when a layout uses only part of a mesh axis."""
    from ..vocab.layout import Layout, common_matrix, refine, squeeze
    out = []
    mesh_l = Layout(mesh.shape, mesh.shape, tuple((i,) for i in range(len(mesh.shape))))
    for lay in layouts:
        s = squeeze(Layout(lay.shape, lay.dev_matrix, lay.dims))
        m = common_matrix(s.dev_matrix, mesh.shape)
        if m is None:
            return None
        s = refine(s, m)
        groups = {g: mesh.names[i] for i, g in enumerate(refine(mesh_l, m).dims)}
        dims = []
        for d in s.dims:
            names, rest = [], list(d)
            while rest:
                hit = next((g for g in groups if tuple(rest[:len(g)]) == g and g), None)
                if hit is None:
                    return None
                names.append(groups[hit])
                rest = rest[len(hit):]
            dims.append(tuple(names))
        out.append(tuple(dims))
    return tuple(out)


def mesh_layout_decl(mesh) -> str:
    return f"layout = Layout({tuple(mesh.shape)}, {tuple(mesh.names)})"


def _seconds(s: float) -> str:
    if s == 0:
        return "0"
    return f"{s * 1e3:.3f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} us"


def decided_by(ch, here: bool = False) -> str:
    """How the search decided ``ch``; with ``here``, an operator of its own layer named past the layer
    (``.attention.wq.matmul``)."""
    p = ch.provenance

    def near(name):
        layer = ch.op.layer
        return name[len(layer):] if here and layer and name and name.startswith(layer + ".") else name
    if p.direction == "seed":
        return "anchor"
    if p.direction == "default":
        return "default (unreached)"
    if p.direction.startswith("semi_auto"):        # strategist.engine.semi_auto: no search decided it
        return p.direction
    if p.direction == CAST_PASS:                    # a Cast: MindSpore drops its strategy after the search
        return f"Cast: passes {near(p.parent) or '-'}'s layout on"
    root = near(p.root) or "-"
    return f"{p.direction} from {root}"


def _anchor_rows(plan, anchors: dict, same: dict) -> list[tuple]:
    """The anchors' rows; those of the layers repeating one (``same``) one row, after the run's first layer's."""
    repeats, out, done = _repeats(same), [], set()
    layer_of = {k: plan.choices[k].op.layer if k in plan.choices else "" for k in anchors}
    mine: dict[str, set] = {}
    for k, a in anchors.items():
        mine.setdefault(layer_of[k], set()).add((k[len(layer_of[k]):], a["strategy"], a["origin"]))
    # a run's anchors are one row only where every layer of it has the first layer's anchors
    same = {layer: first for layer, first in same.items()
            if all(mine.get(x, set()) == mine.get(first, set()) for x in repeats[first])}
    for k, a in anchors.items():
        layer = layer_of[k]
        if layer not in same:
            out.append((k, a["strategy"], a["origin"]))
        elif same[layer] not in done:
            done.add(same[layer])
            first = same[layer]
            n = len(mine.get(first, ()))
            out.append((_repeats_label(repeats[first]), f"{n} anchors each, as {first}.*'s", a["origin"]))
    return out


def _repeats(same: dict) -> dict[str, list[str]]:
    """A run's first layer -> the layers repeating it (``same``: layer -> the run's first layer)."""
    out: dict[str, list[str]] = {}
    for layer, first in same.items():
        out.setdefault(first, []).append(layer)
    return out


def _repeats_label(layers: list[str]) -> str:
    return f"{layers[0]}.*" if len(layers) == 1 else f"{layers[0]}.*..{layers[-1]}.*"


def _once_per_layer(items, same: dict) -> list[tuple]:
    """Table rows of ``items`` ((layer, leading cells, bytes, seconds), ...) with the bytes and time after the
    leading cells; the rows of the layers repeating one (``same``: layer -> the run's first layer) one row, each
    layer's sums."""
    out, at = [], {}
    repeats = _repeats(same)
    for layer, cells, b, t in items:
        if layer not in same:
            out.append(tuple(cells) + (human_bytes(b), _seconds(t)))
            continue
        first = same[layer]
        if first not in at:
            at[first] = [len(out), 0.0, 0.0, len(cells)]
            out.append(())
        at[first][1] += b
        at[first][2] += t
    for first, (k, b, t, n) in at.items():
        many = len(repeats[first])
        out[k] = ((_repeats_label(repeats[first]), f"as {first}.*" + (f", each of {many}" if many > 1 else ""))
                  + ("",) * (n - 2) + (human_bytes(b / many), _seconds(t / many)))
    return out


def _layer_rows(per_layer: dict, same: dict) -> list[tuple]:
    """The per-layer rows, a run of layers repeating the one before them one row."""
    out: list[tuple] = []
    run: list[str] = []

    def close():
        if run:
            v = per_layer[run[0]]
            out.append((f"{run[0]}..{run[-1]} (each of {len(run)} as {same[run[0]]})" if len(run) > 1
                        else f"{run[0]} (as {same[run[0]]})", human_bytes(v["bytes"]), _seconds(v["seconds"])))
            run.clear()
    for k, v in sorted(per_layer.items(), key=lambda kv: _path_key(kv[0])):
        if k in same and (not run or same[k] == same[run[0]]):
            run.append(k)
            continue
        close()
        if k in same:
            run.append(k)
        else:
            out.append((k, human_bytes(v["bytes"]), _seconds(v["seconds"])))
    close()
    return out


def _placement(layout: str) -> str:
    """A layout's text without its shape: ``[8, 4096]@[8, 1][d0,-]`` -> ``@[8,1][d0,-]``."""
    return "@" + layout.split("@", 1)[1].replace(" ", "") if "@" in layout else layout


def plan_dict(plan) -> dict:
    """Everything in a :class:`~strategist.engine.plan.Plan`, JSON-ready and deterministic."""
    ops = []
    for name, ch in plan.choices.items():
        ops.append({
            "name": name, "type": ch.op.type, "cell_path": ch.op.cell_path, "cell_class": ch.op.cell_class,
            "source": ch.op.source, "strategy": [list(s) for s in ch.strategy] if ch.strategy else None,
            "layout": layout_text(ch.inputs, plan.mesh) if ch.sharding is not None else None,
            "inputs": [str(l) for l in ch.inputs], "outputs": [str(l) for l in ch.outputs],
            "configured": ch.configured,
            "provenance": {"root": ch.provenance.root, "parent": ch.provenance.parent,
                           "depth": ch.provenance.depth, "direction": ch.provenance.direction,
                           "edge_cost": ch.provenance.cost,
                           "rejected": None if ch.provenance.rejected is None else
                           {"strategy": [list(s) for s in ch.provenance.rejected[0]],
                            "edge_cost": ch.provenance.rejected[1]}},
        })
    edges = [{"src": e.src, "dst": e.dst, "out_index": e.out_index, "in_slot": e.in_slot,
              "from": str(e.src_layout), "to": str(e.dst_layout),
              "forward": [str(o) for o in e.forward.ops],
              "backward": [str(o) for o in e.backward.ops] if e.backward else [],
              "mindspore_cost": e.ms_communication, "bytes": e.bytes, "seconds": e.seconds}
             for e in plan.edges if e.bytes or e.forward.ops]
    return {
        "model": plan.graph.model, "mesh": str(plan.mesh), "devices": plan.mesh.size,
        "hardware": plan.hardware.name if plan.hardware else None,
        "anchors": {k: {"strategy": a.describe(), "origin": a.origin} for k, a in sorted(plan.anchors.items())},
        "ops": ops, "edges": edges,
        "op_communication": {k: {"forward_bytes": c.fwd_bytes, "backward_bytes": c.bwd_bytes,
                                 "gradient_bytes": c.grad_bytes,
                                 "seconds": c.seconds, "steps": [s.label for s in c.steps]}
                             for k, c in plan.op_costs.items()},
        "per_layer": per_layer_rows(plan, plan.per_layer()), "per_cell": plan.per_cell(), "totals": plan.totals(),
        "step": step_dict(plan),
        "conflicts": [{"edge": [c.src, c.dst], "anchors": list(c.anchors), "mindspore_cost": c.cost,
                       "seconds": c.seconds} for c in plan.conflicts],
        "inconsistencies": [{"edge": [a, b], "mindspore_cost": c} for a, b, c in plan.inconsistencies],
        "warnings": plan.warnings,
    }


def plan_text(plan, markdown: bool = False, max_rows: int = 0, d: dict | None = None) -> str:
    """Console table (or Markdown) of a propagation plan (``d``: its :func:`plan_dict`, if at hand)."""
    d = d if d is not None else plan_dict(plan)
    t = d["totals"]
    out = []
    h = (lambda s: f"\n## {s}\n") if markdown else (lambda s: f"\n{s}\n{'-' * len(s)}")

    def table(header, rows):
        out.extend(render_table(header, rows, markdown))

    out.append(("# " if markdown else "") + f"strategist propagate: {d['model']}")
    out.append(f"mesh {d['mesh']} ({d['devices']} devices), hardware {d['hardware'] or '-'}")
    same = repeated(plan)
    out.append(h("Anchors"))
    table(["operator", "strategy", "origin"], _anchor_rows(plan, d["anchors"], same)
          or [("(none: only the dataset seeds propagation)", "", "")])
    out.append(h("Operators"))
    rows = []
    repeats = _repeats(same)
    for o in d["ops"]:
        layer = plan.choices[o["name"]].op.layer
        if layer in same:               # layers repeating the one before them: one row for them
            if layer == repeats[same[layer]][0] and not (rows and rows[-1][0] == _repeats_label(repeats[same[layer]])):
                n = sum(1 for x in d["ops"] if plan.choices[x["name"]].op.layer == layer)
                many = len(repeats[same[layer]])
                rows.append((_repeats_label(repeats[same[layer]]), f"{n} operators" + (f" \u00d7{many}" if many > 1 else ""),
                             f"as {same[layer]}.*", "-"))
            continue
        if o["strategy"]:
            strat = strategy_text(tuple(tuple(s) for s in o["strategy"]))
        elif o["inputs"]:                  # a Reshape: no strategy of its own, a layout in and out
            strat = f"(reshape) {_placement(o['inputs'][0])} -> {_placement(o['outputs'][0]) if o['outputs'] else '-'}"
        else:                              # every input a constant: nothing to split
            strat = "() (no tensor inputs)"
        ch = plan.choices[o["name"]]
        rows.append((o["name"], o["type"], strat, decided_by(ch, here=True)))
    if max_rows and len(rows) > max_rows:
        rows = rows[:max_rows] + [(f"... {len(rows) - max_rows} more (use --format json)", "", "", "")]
    table(["operator", "type", "strategy", "decided by"], rows)
    if any(" from ." in r[3] or "passes ." in r[3] for r in rows):
        out.append("(.name: an operator of the same layer; a reshape's layouts are device matrix and tensor map, "
                   "shapes in --format json)")
    out.append(h("Redistributions (edges that move data)"))
    moving = [e for e in plan.edges if e.bytes]
    rows = _once_per_layer([(plan.choices[e.dst].op.layer, (
        f"{e.src} -> {e.dst}", " ; ".join(short_label(o.step(), plan.mesh) for o in e.forward.ops) or "-",
        " ; ".join(short_label(o.step(), plan.mesh) for o in e.backward.ops) if e.backward else "-",
        f"{e.ms_communication:.0f}"), e.bytes, e.seconds) for e in moving], same)
    table(["edge", "forward", "backward", "ms cost", "bytes/dev", "time"], rows or [("(none)", "", "", "", "", "")])
    out.append(h("Operators' own communication"))
    rows = _once_per_layer([(plan.choices[k].op.layer, (k, " ; ".join(short_label(s, plan.mesh) for s in c.steps)),
                             c.bytes, c.seconds) for k, c in plan.op_costs.items()], same)
    if max_rows and len(rows) > max_rows:
        rows = rows[:max_rows] + [(f"... {len(rows) - max_rows} more", "", "", "")]
    table(["operator", "steps", "bytes/dev", "time"], rows or [("(none)", "", "", "")])
    out.append(h("Per layer"))
    table(["layer", "bytes/dev", "time"], _layer_rows(d["per_layer"], same) or [("(none)", "", "")])
    if d.get("step"):
        out.append(h("Step (scheduled, msprof-analyze's columns)"))
        out.extend(step_lines(d["step"], render_table, markdown))
    out.append(h("Totals (per device, one training step)"))
    table(["what", "bytes", "time"], [
        ("redistribution, forward + backward", human_bytes(t["redistribution_bytes"]), _seconds(t["redistribution_seconds"])),
        ("operators' partial sums, forward + backward", human_bytes(t["operator_bytes"]), _seconds(t["operator_seconds"])),
        ("parameter gradients (mirrors)", human_bytes(t["gradient_bytes"]), _seconds(t["gradient_seconds"])),
        ("total", human_bytes(t["total_bytes"]), _seconds(t["total_seconds"])),
        ("MindSpore redistribution cost (what propagation minimises)", f"{t['redistribution_ms_cost']:.0f}", "")])
    if d["conflicts"] or d["inconsistencies"]:
        out.append(h("Conflicts"))
        for c in d["conflicts"]:
            out.append(f"- anchors {c['anchors'][0]} and {c['anchors'][1]} disagree on {c['edge'][0]} -> "
                       f"{c['edge'][1]}: a redistribution is inserted (MindSpore cost {c['mindspore_cost']:.0f}, "
                       f"{_seconds(c['seconds'])})")
        for i in d["inconsistencies"]:
            out.append(f"- Inconsistency occurred at edge: {i['edge'][0]} -> {i['edge'][1]} "
                       f"(MindSpore cost {i['mindspore_cost']:.0f})")
    for w in d["warnings"]:
        out.append(f"warning: {w}")
    return "\n".join(out) + "\n"


def explain_text(plan, name: str, markdown: bool = False) -> str:
    """An operator's provenance chain and its candidates, costed against the edge that decided it (``markdown``: the
    candidates as a Markdown table, the chain as a list)."""
    if markdown:
        return _explain_markdown(plan, name)
    from ..vocab.anchors import DATASET
    ch = plan.choices[name]
    out = [f"{name} ({ch.op.type}) in {ch.op.cell_path or '(root)'} [{ch.op.cell_class}] at {rel(ch.op.source)}",
           f"strategy: {strategy_text(ch.strategy)}",
           f"layout form: {layout_text(ch.inputs, plan.mesh) if ch.sharding else '-'}",
           "", "provenance (seed first):"]
    for n in plan.chain(name):
        if n == DATASET:
            out.append(f"  {DATASET} (VirtualDataset, {plan.dataset_strategy})  [seed]")
            continue
        c = plan.choices[n]
        p = c.provenance
        how = "anchor" if p.direction == "seed" else p.direction
        extra = f", edge cost {p.cost:.0f}" if p.direction in ("forward", "backward", "parameter") else ""
        out.append(f"  {n} ({c.op.type}) {strategy_text(c.strategy)}  [{how}{extra}]")
    if ch.provenance.root == DATASET:
        out.append(f"  (seeded by the dataset: {', '.join(f'{k} {v}' for k, v in plan.graph.inputs.items())})")
    if ch.provenance.rejected:
        s, c = ch.provenance.rejected
        out.append(f"best rejected alternative: {strategy_text(s)} (edge cost {c:.0f})")
    out += ["", "candidates against the deciding edge (MindSpore order of preference):"]
    for s, key in candidate_costs(plan, name):
        mark = " <- chosen" if ch.sharding is not None and s.inputs == ch.sharding.inputs \
            and s.outputs == ch.sharding.outputs else ""
        out.append(f"  {strategy_text(s.strategy):32} edge comm {key[0]:>10.0f}  comp {key[1]:>12.0f}  "
                   f"own fwd comm {key[2]:>8.0f}{mark}")
    return "\n".join(out) + "\n"


def _explain_markdown(plan, name: str) -> str:
    d = explain_dict(plan, name)
    ch = plan.choices[name]
    out = [f"# {name} ({ch.op.type})", "", f"in `{ch.op.cell_path or '(root)'}` [{ch.op.cell_class}] at "
           f"{rel(ch.op.source)}", "", f"- strategy: `{strategy_text(ch.strategy)}`",
           f"- layout form: `{layout_text(ch.inputs, plan.mesh) if ch.sharding else '-'}`", "",
           "## Provenance (seed first)", ""]
    def st(v):
        return strategy_text(tuple(tuple(x) for x in v)) if v else "-"
    out += [f"- {c['name']}" + (f" ({c['type']}) `{st(c['strategy'])}`" if c["type"] else "") + f" [{c['how']}]"
            for c in d["provenance"]]
    out += ["", "## Candidates against the deciding edge (MindSpore order of preference)", ""]
    out += render_table(["strategy", "edge communication", "edge computation", "own forward communication", ""],
                        [[f"`{st(c['strategy'])}`", f"{c['edge_communication']:.0f}",
                          f"{c['edge_computation']:.0f}", f"{c['own_forward_communication']:.0f}",
                          "chosen" if c.get("chosen") else ""] for c in d["candidates"]], True)
    return "\n".join(out) + "\n"


def explain_dict(plan, name: str) -> dict:
    """:func:`explain_text` as JSON: the operator's plan entry, its provenance chain (seed first) and its
    candidates against the deciding edge, best first."""
    from ..vocab.anchors import DATASET
    op = next(o for o in plan_dict(plan)["ops"] if o["name"] == name)
    chain = [{"name": n, "type": None, "strategy": None, "how": "seed"} if n == DATASET else
             {"name": n, "type": plan.choices[n].op.type,
              "strategy": [list(s) for s in plan.choices[n].strategy] if plan.choices[n].strategy else None,
              "how": "anchor" if plan.choices[n].provenance.direction == "seed"
              else plan.choices[n].provenance.direction}
             for n in plan.chain(name)]
    ch = plan.choices[name]
    cands = [{"strategy": [list(x) for x in s.strategy] if s.strategy else None, "edge_communication": key[0],
              "edge_computation": key[1], "own_forward_communication": key[2],
              "chosen": ch.sharding is not None and s.inputs == ch.sharding.inputs
              and s.outputs == ch.sharding.outputs}
             for s, key in candidate_costs(plan, name)]
    return {"op": op, "dataset_strategy": str(plan.dataset_strategy), "provenance": chain, "candidates": cands}


def candidate_costs(plan, name: str):
    """(sharding, (edge comm, edge comp, own forward comm)) for each candidate of ``name``,
    best first, against the neighbour that decided it (:func:`strategist.engine.search.alternatives`)."""
    return alternatives(plan, name)


# --------------------------------------------------------------------------------------
# advice


def _shard_layout_text(layouts) -> str:
    parts = ["layout(" + ", ".join('"None"' if not d else f'"{d[0]}"' if len(d) == 1
                                   else "(" + ", ".join(f'"{x}"' for x in d) + ")" for d in named_dims(l)) + ")"
             for l in layouts]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def anchor_file_keys(ops: list[str], names: list[str], graph=None, bodies: dict | None = None) -> dict[str, list[str]]:
    """The anchors file's keys for the anchored ``ops``: one glob per pattern across repeated layers
    (``model.layers.*.wo.matmul``) where it matches those operators and no other of ``names``, else each
    operator by name (a glob's ``*`` crosses dots: ``model.layers.*.add`` also matches every layer's
    ``...apply_rotary_emb.add``, which MindSpore would then be asked to configure too). With ``graph``, operators
    of one name pattern that are not one operator (:func:`strategist.advice.minimality.pattern_keys`) are not one
    glob; with ``bodies`` (op -> its anchor's text), neither are operators anchored otherwise: telechat3_moe's
    dense ``layers.0.mlp.transpose`` and MoE ``layers.1.mlp.transpose`` each by name.

    >>> names = ["m.layers.0.add", "m.layers.0.rope.add", "m.layers.1.add", "m.layers.1.rope.add"]
    >>> anchor_file_keys(["m.layers.0.add", "m.layers.1.add"], names)
    {'m.layers.0.add': ['m.layers.0.add'], 'm.layers.1.add': ['m.layers.1.add']}
    >>> anchor_file_keys(["m.layers.0.rope.add", "m.layers.1.rope.add"], names)
    {'m.layers.*.rope.add': ['m.layers.0.rope.add', 'm.layers.1.rope.add']}
    """
    from ..advice.minimality import group_key, pattern_text
    groups: dict[tuple, list[str]] = {}
    for n in ops:
        groups.setdefault((group_key(n, graph), (bodies or {}).get(n)), []).append(n)
    out: dict[str, list[str]] = {}
    for (key, _), members in groups.items():
        glob = pattern_text(key)
        if glob == members[0] or {n for n in names if fnmatch.fnmatchcase(n, glob)} == set(members):
            out[glob] = members
        else:
            out.update((m, [m]) for m in members)
    return out


def configurable_anchors_yaml(advice, out_layouts: bool = True) -> str:
    """The advice's anchors file less what MindSpore cannot configure by name: the anchors on functional or
    tensor-method calls (no Cell attribute to call shard() on; a glob covering one goes), and, with
    ``out_layouts=False``, the out layouts (MindSpore refuses a sequence-parallel row linear's on its global-rows
    graph)."""
    unheld = [c.op for c in advice.chosen if not advice.plan.choices[c.op].op.held]
    return dump_anchors([(key, value) for key, value in _anchor_entries(advice, out_layouts)
                         if not any(fnmatch.fnmatchcase(u, key) for u in unheld)], _anchors_header(advice))


def _anchors_header(advice) -> str:
    return f"strategist advise: {advice.graph.model} on --mesh {advice.mesh}"


def _anchor_entries(advice, out_layouts: bool = True) -> list[tuple[str, str]]:
    """The anchors file's (key, value) entries: one glob per pattern across repeated layers where it names just
    those operators (:func:`anchor_file_keys`), each value as the file writes it
    (:func:`strategist.files.anchors.anchor_value`)."""
    plan, mesh = advice.plan, advice.mesh

    def values(out: bool) -> dict[str, str]:
        return {c.op: anchor_value(plan.anchors[c.op], plan.choices[c.op].strategy, plan.choices[c.op].inputs,
                                   plan.choices[c.op].outputs, mesh, out) for c in advice.chosen}
    whole = values(True)
    # the keys grouped by the whole anchors (an out layout left out does not join two patterns into one glob)
    groups = anchor_file_keys([c.op for c in advice.chosen], [op.name for op in advice.graph], advice.graph, whole)
    shown = whole if out_layouts else values(False)
    return [(key, shown[members[0]]) for key, members in groups.items()]


def advice_dict(advice) -> dict:
    from ..advice.choice import tuple_equivalent
    from ..engine.search.kinds import LAYOUT_REJECTED
    mesh = advice.mesh
    decl = mesh_layout_decl(mesh)
    anchors = []
    for c in advice.chosen:
        ch = advice.plan.choices[c.op]
        tup = strategy_text(ch.strategy)
        own = own_matrix(advice.plan.anchors.get(c.op), mesh)
        lay = layout_text(ch.inputs, mesh) if own is None else _shard_layout_text(own.layouts)
        anchors.append({
            "op": c.op, "type": ch.op.type, "rule": c.rule, "template": c.template, "why": c.why,
            "needed": c.needed, "source": ch.op.source, "cell_class": ch.op.cell_class,
            "user_source": getattr(advice, "user_sites", {}).get(c.op),
            "strategy": [list(s) for s in ch.strategy],
            # a functional or tensor-method call has no attribute to call shard() on: no shard() line
            "held": ch.op.held,
            "shard_tuple": f"self.{ch.op.instance_name}.shard({tup})" if ch.op.held else None,
            "tuple_equivalent": tuple_equivalent(ch, mesh),
            # MindSpore 2.9 refuses a Layout on some operators (Gather): only the tuple is offered there
            "shard_layout": f"self.{ch.op.instance_name}.shard({lay})" if lay and ch.op.type not in LAYOUT_REJECTED
            and ch.op.held else None,
            # a Layout over its own device matrix (a mesh axis split in two), declared with it
            "layout_declaration": decl if own is None else
            f"layout = Layout({tuple(own.layouts[0].device_matrix)}, {tuple(own.layouts[0].alias_name)})",
        })
    configs = advice.configurations()
    return {
        "model": advice.graph.model, "mesh": str(mesh), "devices": mesh.size,
        "hardware": advice.plan.hardware.name if advice.plan.hardware else None,
        "rules": list(advice.rules.sources), "layout_declaration": decl,
        "anchors": anchors, "anchors_yaml": dump_anchors(_anchor_entries(advice), _anchors_header(advice)),
        "dropped": [{"op": c.op, "rule": c.rule, "why": why} for c, why in advice.dropped],
        "existing_shard_calls": [{"op": o, "status": s, "detail": d} for o, s, d in advice.existing]
        + _parallel_only_calls(advice),
        "configurations": configs, "notes": advice.notes,
        "plan": (pd := plan_dict(advice.plan)),
        "overlap": (pd.get("step") or {}).get("overlap", {"candidates": []}),
    }


def _parallel_only_calls(advice) -> list[dict]:
    """The shard() calls the model's code makes on its operators in every parallel build (MindFormers' loss: its
    ``x + 0`` adds, softmax, NLL and reductions): the model's own, kept in every plan, never advice anchors (:func:`strategist.engine.plan.parallel_only_anchors`)."""
    from ..engine.plan import parallel_only_anchors
    own = advice.graph.parallel_only or {}
    return [{"op": n, "status": "the model's own (parallel build)",
             "detail": f"{a.describe()}: {own.get(n, '')}; every plan here starts from it"}
            for n, a in parallel_only_anchors(advice.graph, advice.mesh).items()]


def alike_anchors(anchors: list[dict], graph) -> dict[str, list[str]]:
    """The first of each set of anchors alike (one operator across repeated layers, the same rule, reason and
    shard() lines) -> the others of its set; the others are left out."""
    from ..advice.minimality import group_key
    first: dict[tuple, str] = {}
    out: dict[str, list[str]] = {}
    for a in anchors:
        key = (group_key(a["op"], graph), a["rule"], a["why"], a["shard_layout"], a["shard_tuple"], str(a["strategy"]))
        if key in first:
            out[first[key]].append(a["op"])
        else:
            first[key] = a["op"]
            out[a["op"]] = []
    return out


def advice_text(advice, markdown: bool = False, max_rows: int = 40) -> str:
    # size: the advice report's sections in print order
    d = advice_dict(advice)
    out = []
    h = (lambda s: f"\n## {s}\n") if markdown else (lambda s: f"\n{s}\n{'=' * len(s)}")

    def table(header, rows):
        out.extend(render_table(header, rows, markdown))

    out.append(("# " if markdown else "") + f"strategist advise: {d['model']}")
    out.append(f"mesh {d['mesh']} ({d['devices']} devices), hardware {d['hardware'] or '-'}, "
               f"rules {', '.join(rel(p + ':0').rsplit(':', 1)[0] for p in d['rules'])}")
    n_ops = len(advice.graph)
    out.append(h(f"Advice: configure {len(d['anchors'])} of {n_ops} operators"))
    if not d["anchors"]:
        out.append("Configure nothing: propagation from the dataset alone gives the best plan found.")
    alike = alike_anchors(d["anchors"], advice.graph)
    for a in d["anchors"]:
        others = alike.get(a["op"])
        if others is None:              # the same anchor as one printed above, in a repeated layer
            continue
        out.append(f"{'- ' if markdown else ''}{a['op']} ({a['type']}, rule {a['rule']}: {a['why']})")
        if others:
            out.append(f"    and {len(others)} more alike: {others[0]}" + (f" .. {others[-1]}" if len(others) > 1 else ""))
        if a.get("user_source"):        # created inside an installed package: the user's line configures it
            out.append(f"    configure at {a['user_source']} (created inside an installed package, "
                       f"{a['cell_class']})")
        else:
            out.append(f"    at {rel(a['source'])} [{a['cell_class']}]")
        if not a["held"]:
            out.append(f"    a functional or tensor-method call, not a primitive its Cell holds: no shard() line to "
                       f"write; strategy {strategy_text(tuple(tuple(x) for x in a['strategy']))} (hold the primitive "
                       f"as an attribute to configure it, or use the anchors file)")
        elif a["shard_layout"]:
            out.append(f"    {a['layout_declaration']};  {a['shard_layout']}")
        if not a["held"]:
            pass
        elif not a["shard_layout"]:
            out.append(f"    {a['shard_tuple']}" + ("" if a["tuple_equivalent"] else
                                                   "  (MindSpore 2.9 accepts no Layout on this operator)"))
        elif a["tuple_equivalent"]:
            out.append(f"    or, as a tuple: {a['shard_tuple']}")
        else:
            out.append(f"    (the tuple {a['shard_tuple'].split('.shard', 1)[1]} is not equivalent here: MindSpore would "
                       f"lay its splits on other devices; use the Layout form)")
        if a["needed"]:
            out.append(f"    needed: {a['needed']}")
    out.append(f"\nDropped {len(d['dropped'])} proposed anchor(s) that change nothing or do not pay for themselves"
               + (":" if d["dropped"] else "."))
    by_rule: dict[str, int] = {}
    for x in d["dropped"]:
        by_rule[f"rule {x['rule']}: {x['why']}"] = by_rule.get(f"rule {x['rule']}: {x['why']}", 0) + 1
    for k, v in by_rule.items():
        out.append(f"  {v} x {k}")
    out.append("\nAnchors file (strategist propagate --anchors):")
    out.append(("```yaml\n" if markdown else "") + d["anchors_yaml"].rstrip() + ("\n```" if markdown else ""))
    if d["existing_shard_calls"]:
        out.append(h("The model's own shard() calls"))
        table(["operator", "status", "detail"], [(x["op"], x["status"], x["detail"]) for x in d["existing_shard_calls"]])
    out.append(h("Configurations compared (per device, one training step)"))
    rows = []
    for label, c in d["configurations"].items():
        m = c["memory"]
        rows.append((label, c["anchors"], human_bytes(c["communication_bytes"]), _seconds(c["communication_seconds"]),
                     _seconds(c["compute_seconds"]), _seconds(c["serial_seconds"]), _seconds(c["step_seconds"]),
                     human_bytes(m["total"]), c["conflicts"]))
    table(["configuration", "anchors", "comm bytes", "comm time", "compute", "serial sum", "step estimate", "memory",
           "conflicts"], rows)
    out.append("(serial sum: communication plus compute, nothing hidden; step estimate: the schedule's step, as "
               "below)")
    m = d["configurations"]["advice"].get("memory_upper_bound") or d["configurations"]["advice"]["memory"]
    out.append(h("Memory under the advice (per device)"))
    if d["plan"].get("step"):
        out.extend(memory_lines(d["plan"]["step"]))
        out.append("every output kept (the upper bound):")
    table(["what", "bytes"], [("parameters", human_bytes(m["parameters"])), ("gradients", human_bytes(m["gradients"])),
                              ("optimizer states (Adam, fp32" + (", parallel optimizer" if advice.graph.optimizer_sharding
                                                                 else ", unsharded") + ")", human_bytes(m["optimizer_states"])),
                              ("activations (upper bound: every output kept)", human_bytes(m["activations"])),
                              ("total", human_bytes(m["total"]))])
    for n in d["notes"]:
        out.append(f"note: {n}")
    out.append(h("Propagated plan"))
    out.append(plan_text(advice.plan, markdown=markdown, max_rows=max_rows, d=d["plan"]))
    return "\n".join(out) + "\n"


def json_placement(op: dict) -> tuple:
    """An operator of a JSON plan (``--format json``'s ``ops``) as where its data lies: its strategy, and each
    input and output layout ``[shape]@[matrix][map]`` with the device matrix's size-1 axes dropped
    (``@[2, 1, 4][d0,d2]`` is ``@[2, 4][d0,d1]``), so two plans written over different matrices compare."""
    import re

    def norm(text):
        m = re.fullmatch(r"(\[.*?\])@\[(.*?)\]\[(.*)\]", text)
        if m is None:
            return text
        dm = [int(x) for x in m.group(2).split(",")] if m.group(2).strip() else []
        keep = [i for i, v in enumerate(dm) if v > 1]
        new = {f"d{i}": f"d{k}" for k, i in enumerate(keep)}
        dims = ",".join("".join(new.get(t, "-" if t.startswith("d") else t) for t in re.findall(r"d\d+|[^d]+", d))
                        for d in m.group(3).split(","))
        return f"{m.group(1)}@{[dm[i] for i in keep]}[{dims}]"
    return (op["strategy"], [norm(x) for x in op["inputs"]], [norm(x) for x in op["outputs"]])
