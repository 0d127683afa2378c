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
model.layers.*.attention.fa.flash_attention:
  device_matrix: {dp: 2, tp: 2, tp_group: 2}   # the Layout's own device matrix (tp split in two)
  layout: [[dp, None, [tp, tp_group]], [dp, None, tp], [dp, None, tp], [dp, None, None, None]]
```
"""
from __future__ import annotations

import fnmatch


from ..vocab.graph import OpGraph, ShardLayout
from ..vocab.mesh import Mesh
from ..vocab.anchors import Anchor
from .yamlio import compose_file
from ..engine.rules.sharding import shard, shard_layout
from ..engine.search.caches import cached_rule
from ..engine.search.kinds import RESHAPES
from ..errors import MeshError, RulesError, StrategyError
from .schema import SourceLines, did_you_mean, mapping_data, validate_anchor


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
            or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for r in v for x in r):
        raise RulesError(f"{where}: a strategy is a list of lists of positive integers, e.g. [[2, 1], [1, 4]]")
    return tuple(tuple(r) for r in v)


def parse_anchor(name: str, v, mesh: Mesh, where: str, lines=None, loc: tuple = ()) -> Anchor:
    """One anchors-file value (validated by :func:`strategist.files.schema.validate_anchor`) -> Anchor."""
    path, _, line = where.rpartition(" line ")
    if lines is None:
        lines = SourceLines({(): int(line) if line.isdigit() else 1})
    kind, spec = validate_anchor(v, path or where, lines, loc)
    if kind == "rows":
        return Anchor(name, _rows(spec, where))
    if spec.layout is not None:
        on = mesh
        if spec.device_matrix is not None:
            try:
                on = Mesh.parse(",".join(f"{k}={v}" for k, v in spec.device_matrix.items()))
            except MeshError as err:
                raise RulesError(f"{where}: device_matrix: {err}") from None
            if on.size != mesh.size:
                raise RulesError(f"{where}: device_matrix {on} has {on.size} devices, the mesh "
                                 f"{mesh} {mesh.size}")
        lays = tuple(layout_over_mesh(t, on, where) for t in spec.layout)
        outs = tuple(layout_over_mesh(t, on, where) for t in spec.out_layout) if spec.out_layout else None
        return Anchor(name, None, lays, None, outs)
    return Anchor(name, _rows(spec.in_strategy, where),
                  out_strategy=_rows(spec.out_strategy, where) if spec.out_strategy else None)


def _check(anchor: Anchor, graph: OpGraph, mesh: Mesh, where: str) -> None:
    """The anchor against its operator now, so a bad strategy names the anchors file and line."""
    op = graph.op(anchor.op)
    try:
        if op.type in RESHAPES:
            raise StrategyError(f"{op.name}: Setting strategy for Reshape goes for nothing! (remove its anchor)")
        rule = cached_rule(op)
        if anchor.layouts is not None:
            shard_layout(op, tuple(anchor.layouts), mesh.size, anchor.out_layouts, rule)
        else:
            shard(op, anchor.strategy, mesh.size, anchor.out_strategy, rule)
    except StrategyError as err:
        raise StrategyError(f"{where}: {err}") from None


def load_anchors(path: str, graph: OpGraph, mesh: Mesh, check: bool = False) -> dict[str, Anchor]:
    """Read an anchors file; glob keys expand to every matching operator (in graph order). A key given
    twice, or two keys (globs) configuring one operator, is an error naming both lines. ``check``: try
    each anchor on its operator now, so a strategy the operator refuses names the file and line
    (``verify`` leaves it off: MindSpore is asked even about what strategist refuses)."""
    data, lines = mapping_data(compose_file(path, "anchors file"), path,
                               "an anchors file maps operator names to strategies")
    if data is None:
        return {}
    out: dict[str, Anchor] = {}
    origin: dict[str, tuple[int, str]] = {}
    for key, value in data.items():
        ln = lines[(key,)]
        where = f"{path} line {ln}"
        if not isinstance(key, str) or not key.strip():
            raise RulesError(f"{where}: an operator name must be a string, got {key!r} (quote it)")
        names = [op.name for op in graph if fnmatch.fnmatchcase(op.name, key)] if any(c in key for c in "*?[") \
            else [key]
        if not names:
            raise RulesError(f"{where}: pattern {key!r} matches no operator (see strategist inspect --json)")
        if len(names) == 1 and names[0] not in graph:
            hint = did_you_mean(key, [op.name for op in graph])
            raise RulesError(f"{where}: {key!r} names no operator of the model"
                             + (hint if hint.startswith(" (did") else " (see strategist inspect --json)"))
        for n in names:
            if n in origin:
                raise RulesError(f"{where}: {key!r} configures {n} again (line {origin[n][0]}, {origin[n][1]!r}); "
                                 f"make the keys or globs disjoint")
            origin[n] = (ln, key)
            out[n] = parse_anchor(n, value, mesh, where, lines, (key,))
            if check:
                _check(out[n], graph, mesh, where)
    return out


# -- writing: the inverse of load_anchors ---------------------------------------------------------------------

def own_matrix(anchor: Anchor | None, mesh: Mesh) -> Anchor | None:
    """``anchor`` when its Layouts are over a device matrix of their own (the mesh with an axis split in two:
    FlashAttention's grouped-query layout), else None."""
    if anchor is None or anchor.layouts is None or anchor.out_layouts is not None:
        return None
    dm = anchor.layouts[0]
    if tuple(dm.device_matrix) == tuple(mesh.shape) and tuple(dm.alias_name) == tuple(mesh.names):
        return None
    return anchor


def named_dims(lay: ShardLayout) -> list:
    """A ShardLayout's tensor map as axis names per dimension (MindSpore's right-indexed map)."""
    n = len(lay.device_matrix)
    return [[lay.alias_name[n - 1 - k] for k in d] for d in lay.tensor_map]


def named_rows(layouts) -> str:
    """``[[dp, None], [tp, [cp, tp]]]``: each ShardLayout's dims by axis name."""
    return "[" + ", ".join("[" + ", ".join("None" if not d else d[0] if len(d) == 1 else "[" + ", ".join(d) + "]"
                                           for d in named_dims(l)) + "]" for l in layouts) + "]"


def _mesh_rows(layouts, mesh: Mesh) -> str:
    """Engine Layouts over ``mesh`` as the file writes them (axis names per dimension)."""
    dims = []
    for lay in layouts:
        row = ["None" if not d else mesh.names[d[0]] if len(d) == 1 else "[" + ", ".join(mesh.names[x] for x in d) + "]"
               for d in lay.dims]
        dims.append("[" + ", ".join(row) + "]")
    return f"[{', '.join(dims)}]"


def anchor_value(anchor: Anchor, strategy, inputs, outputs, mesh: Mesh, out_layouts: bool = True) -> str:
    """The file's value for one anchor (``": [[2, 1], [1, 4]]"`` or a block), as :func:`load_anchors` reads it back:
    over the anchor's own device matrix; as the Layouts it was planned with (``inputs``, ``outputs``: the plan's,
    and its out layout where it was configured with one -- ``out_layouts=False`` leaves that out); with its out
    strategy; else its tuple ``strategy``."""
    own = own_matrix(anchor, mesh)
    if own is not None:
        dm = own.layouts[0]
        return (f":\n  device_matrix: {{{', '.join(f'{n}: {v}' for n, v in zip(dm.alias_name, dm.device_matrix))}}}"
                f"\n  layout: {named_rows(own.layouts)}")
    if inputs[0].dev_matrix == mesh.shape and anchor.layouts is not None:
        return f":\n  layout: {_mesh_rows(inputs, mesh)}" + (
            f"\n  out_layout: {_mesh_rows(outputs, mesh)}" if anchor.out_layouts is not None and out_layouts else "")
    if anchor.out_strategy is not None:
        return (f":\n  in_strategy: {[list(s) for s in strategy]}\n"
                f"  out_strategy: {[list(s) for s in anchor.out_strategy]}")
    return f": {[list(s) for s in strategy]}"


def dump_anchors(entries: list[tuple[str, str]], header: str) -> str:
    """An anchors file: ``header`` (a comment line) then each (key, :func:`anchor_value`) entry."""
    return "\n".join([f"# {header}"] + [key + value for key, value in entries]) + "\n"
