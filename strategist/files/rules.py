"""The advisor's rules files: the YAML of heuristics and operator templates (``rules/default.yaml``), and each
file a user adds over it, validated with one-line errors."""
from __future__ import annotations

import os
from dataclasses import dataclass

from .schema import validate_rules
from .yamlio import compose_file

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
