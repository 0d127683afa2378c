"""The advisor's rules: the YAML of heuristics and op templates (``rules/default.yaml``), and a template's
sharding of one operator as an anchor."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

from ..errors import RulesError
from ..files.yamlio import compose_file
from ..vocab.graph import Op, OpGraph, ShardLayout
from ..vocab.mesh import Mesh
from ..engine.rules.factor import FactorRule, Sharding
from ..engine.rules.sharding import build_sharding
from ..vocab.anchors import Anchor
from ..engine.search.kinds import LAYOUT_REJECTED
from ..files.schema import did_you_mean, validate_rules


RULES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "rules")


DEFAULT_RULES = os.path.join(RULES_DIR, "default.yaml")


@dataclass(frozen=True)
class Rules:
    thresholds: dict
    categories: dict
    templates: dict
    sources: tuple[str, ...]


_THRESHOLDS = {"large_vocab", "long_sequence", "boundary_ratio"}


def load_rules(extra: list[str] | None = None) -> Rules:
    """The default rules, then each file in ``extra`` merged over them (categories and templates
    replace by name). A malformed file is a :class:`RulesError` naming the file and line; a template or
    category name the advisor does not use (a misspelling) is one too, with "did you mean"."""
    data = {"thresholds": {}, "categories": {}, "templates": {}}
    sources = []
    for path in [DEFAULT_RULES] + list(extra or []):
        d = _read_rules(path, data["templates"] if sources else None, data["categories"] if sources else None)
        for k in data:
            data[k].update(d.get(k, {}))
        sources.append(path)
    return Rules(data["thresholds"], {k: frozenset(v) for k, v in data["categories"].items()},
                 data["templates"], tuple(sources))


def _read_rules(path: str, known_templates=None, known_categories=None) -> dict:
    """One rules file, validated against :class:`strategist.files.schema.RulesSpec` (types, positive finite
    thresholds, unknown keys with "did you mean", duplicate keys)."""
    out = validate_rules(compose_file(path, "rules file"), path, known_templates, known_categories)
    if "templates" in out:
        out["templates"] = {name: {f: (ax,) if isinstance(ax, str) else tuple(ax) for f, ax in v.items()}
                            for name, v in out["templates"].items()}
    return out


def check_boundaries(graph: OpGraph, boundaries: dict[str, str]) -> None:
    """Each ``--boundary CELL.PATH`` must name a cell of the model (a prefix of some operator's cell path)."""
    cells = {op.cell_path for op in graph}
    prefixes = {".".join(c.split(".")[:k]) for c in cells for k in range(1, len(c.split(".")) + 1) if c}
    for path in boundaries:
        if path not in prefixes:
            hint = did_you_mean(path, prefixes) if prefixes else ""
            raise RulesError(f"--boundary {path}: the model has no cell {path!r}"
                             + (hint if hint.startswith(" (did") else " (see strategist inspect)"))


def template_sharding(op: Op, rule: FactorRule, template: dict, mesh: Mesh,
                      share: frozenset = frozenset()) -> Sharding | None:
    """The sharding a template gives ``op`` on ``mesh``: each factor takes the named mesh axes the
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
