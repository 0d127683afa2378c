"""Anchors files: which operators to configure, and how.

```yaml
# op name (cell path + instance name; glob patterns allowed) -> strategy
linear_fc1.matmul: [[2, 1], [1, 4]]                     # tuple form, one row per input
model.layers.*.attention.wq.matmul: [[2, 1], [1, 4]]      # every layer
lm_head.matmul:
  in_strategy: [[2, 1], [4, 1]]
  out_strategy: [[8, 1]]
model.tok_embeddings.gather:
  layout: [[tp, None], [dp, None]]     # mindspore.Layout over the --mesh axes; [cp, tp] for several axes
```
"""
from __future__ import annotations

import fnmatch

import yaml

from .errors import RulesError
from .graph import OpGraph, ShardLayout
from .mesh import Mesh
from .propagate import Anchor
from .yamlio import compose_file


def layout_over_mesh(dims, mesh: Mesh, where: str = "") -> ShardLayout:
    """``[["dp", "cp"], "None"]`` -> ShardLayout over the mesh (MindSpore's right-indexed tensor map)."""
    n = len(mesh.shape)
    tmap = []
    for d in dims:
        names = [] if d in (None, "None") else [d] if isinstance(d, str) else list(d)
        for x in names:
            if x not in mesh.names:
                raise RulesError(f"{where}: layout axis {x!r} is not a mesh axis ({', '.join(mesh.names)})")
        tmap.append(tuple(n - 1 - mesh.index(x) for x in names))
    used = [k for t in tmap for k in t]
    if len(used) != len(set(used)):
        raise RulesError(f"{where}: a mesh axis may split one tensor only once (mindspore.Layout rule)")
    return ShardLayout(mesh.shape, mesh.names, tuple(tmap))


def _rows(v, where):
    if not isinstance(v, (list, tuple)) or not all(isinstance(r, (list, tuple)) for r in v) \
            or not all(isinstance(x, int) and x >= 1 for r in v for x in r):
        raise RulesError(f"{where}: a strategy is a list of lists of positive integers, e.g. [[2, 1], [1, 4]]")
    return tuple(tuple(r) for r in v)


def parse_anchor(name: str, v, mesh: Mesh, where: str) -> Anchor:
    if isinstance(v, list):
        return Anchor(name, _rows(v, where))
    if not isinstance(v, dict):
        raise RulesError(f"{where}: write a strategy list, or a mapping with in_strategy / layout")
    unknown = set(v) - {"in_strategy", "out_strategy", "layout", "out_layout"}
    if unknown:
        raise RulesError(f"{where}: unknown key(s) {', '.join(sorted(unknown))} "
                         f"(use in_strategy, out_strategy, layout, out_layout)")
    if ("in_strategy" in v) == ("layout" in v):
        raise RulesError(f"{where}: give exactly one of in_strategy or layout")
    if "layout" in v:
        lays = tuple(layout_over_mesh(t, mesh, where) for t in v["layout"])
        outs = tuple(layout_over_mesh(t, mesh, where) for t in v["out_layout"]) if "out_layout" in v else None
        return Anchor(name, None, lays, None, outs)
    return Anchor(name, _rows(v["in_strategy"], where),
                  out_strategy=_rows(v["out_strategy"], where) if "out_strategy" in v else None)


def load_anchors(path: str, graph: OpGraph, mesh: Mesh) -> dict[str, Anchor]:
    """Read an anchors file; glob keys expand to every matching operator (in graph order)."""
    root = compose_file(path, "anchors file")
    if root is None:
        return {}
    if not isinstance(root, yaml.MappingNode):
        raise RulesError(f"{path}: an anchors file maps operator names to strategies")
    out: dict[str, Anchor] = {}
    cons = yaml.constructor.SafeConstructor()
    for knode, vnode in root.value:
        where = f"{path} line {knode.start_mark.line + 1}"
        key = str(cons.construct_object(knode, deep=True))
        value = cons.construct_object(vnode, deep=True)
        names = [op.name for op in graph if fnmatch.fnmatchcase(op.name, key)] if any(c in key for c in "*?[") \
            else [key]
        if not names:
            raise RulesError(f"{where}: pattern {key!r} matches no operator (see strategist inspect --json)")
        if len(names) == 1 and names[0] not in graph:
            raise RulesError(f"{where}: {key!r} names no operator of the model (see strategist inspect --json)")
        for n in names:
            out[n] = parse_anchor(n, value, mesh, where)
    return out
