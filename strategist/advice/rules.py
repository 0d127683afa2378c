"""The advisor's rules (read by :mod:`strategist.files.rules`): a template's sharding of one operator as an
anchor, and the ``--boundary`` check."""
from __future__ import annotations

import math

from ..errors import RulesError
from ..vocab.graph import OpGraph, ShardLayout
from ..vocab.mesh import Mesh
from ..engine.rules.factor import FactorRule, Sharding
from ..engine.rules.gather import table_split_refused
from ..engine.rules.sharding import build_sharding
from ..vocab.anchors import Anchor
from ..engine.search.kinds import LAYOUT_REJECTED
from ..files.schema import did_you_mean


def check_boundaries(graph: OpGraph, boundaries: dict[str, str]) -> None:
    """Each ``--boundary CELL.PATH`` must name a cell of the model (a prefix of some operator's cell path)."""
    cells = {op.cell_path for op in graph}
    prefixes = {".".join(c.split(".")[:k]) for c in cells for k in range(1, len(c.split(".")) + 1) if c}
    for path in boundaries:
        if path not in prefixes:
            hint = did_you_mean(path, prefixes) if prefixes else ""
            raise RulesError(f"--boundary {path}: the model has no cell {path!r}"
                             + (hint if hint.startswith(" (did") else " (see strategist inspect)"))


def template_sharding(rule: FactorRule, template: dict, mesh: Mesh,
                      share: frozenset = frozenset()) -> Sharding | None:
    """The sharding a template gives the operator of factor ``rule`` on ``mesh``: each factor takes the named mesh axes the
    mesh has (size > 1), trimmed from the inner end until the split divides the factor; a mesh
    axis is used by one factor only (but by the factors in ``share`` too: FlashAttention's key/value heads
    under a Layout, on the query heads' axes). None when nothing is split or the result is invalid."""
    axis: dict[str, tuple[int, ...]] = {}
    used: set[int] = set()
    for f in rule.factors:
        if f not in template or f in rule.unsplittable:
            continue
        axes = [mesh.index(n) for n in template[f] if n in mesh.names and mesh.get(n) > 1
                and (f in share or mesh.index(n) not in used)]
        size = rule.factor_size(f)
        while axes and size % math.prod(mesh.shape[a] for a in axes):
            axes.pop()
        if axes:
            axis[f] = tuple(axes)
            used.update(axes)
    if not axis:
        return None
    splits = {f: math.prod(mesh.shape[a] for a in ax) for f, ax in axis.items()}
    if table_split_refused(rule, splits, mesh.size):       # an embedding table split MindSpore refuses
        return None
    strategy = tuple(tuple(splits.get(f, 1) if f else 1 for f in t) for t in rule.strategy_rows)
    try:
        return build_sharding(rule, strategy, mesh.shape, splits, axis, 1, None)
    except Exception:
        return None


def anchor_of(name: str, s: Sharding, mesh: Mesh, op_type: str = "") -> Anchor:
    """An anchor in Layout form reproducing sharding ``s`` exactly over the mesh (the tuple form for
    operators MindSpore refuses a Layout on, such as Gather)."""
    if op_type in LAYOUT_REJECTED or tuple(s.dev_matrix) != tuple(mesh.shape):
        # a sharding whose device matrix is its strategy's own (a tuple strategy's): the tuple reproduces it,
        # a Layout over the mesh's axes would not
        return Anchor(name, s.strategy, origin="advisor")
    lays = tuple(ShardLayout.of(l, mesh.names, mesh.shape) for l in s.inputs)
    return Anchor(name, None, lays, origin="advisor")
