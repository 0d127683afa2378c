"""Declared schemas of strategist's input files, validated with pydantic v2.

Every YAML file strategist reads -- anchors (``--anchors``), advisor rules (``--rules``), hardware
profiles (``--hardware``) -- and the MindFormers ``--set`` overrides are checked here against a
declared model: types (strict: ``true`` is not a split, ``"8"`` is not a number), ranges, finiteness
(no NaN or infinity), unknown keys (with "did you mean") and duplicate keys. The first problem
becomes one line naming the file, the YAML line, the key and the fix:

    rules/mine.yaml line 3: thresholds.large_vokab: unknown key (did you mean 'large_vocab'?)
"""
from __future__ import annotations

import difflib
import math
from typing import Annotated, Any, Optional

import yaml
from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, StrictInt, StrictStr, TypeAdapter,
                      ValidationError)

from ..errors import InputSpecError, MeshError, RulesError

from ..vocab.mesh import MAX_DEVICES  # a cluster bigger than any built bounds meshes, nodes, splits


# --------------------------------------------------------------------------------------
# YAML -> Python with a line for every key, duplicates refused


class SourceLines(dict):
    """``loc tuple -> 1-based YAML line`` of every mapping key and sequence item."""


def to_python(node, path: str, lines: SourceLines | None = None, loc: tuple = (), err=RulesError):
    """The Python value of a composed YAML ``node``; ``lines`` gets the line of every key/item.
    A key given twice in one mapping is an error naming both lines (YAML would silently keep the last)."""
    lines = SourceLines() if lines is None else lines
    lines.setdefault(loc, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict = {}
        first: dict = {}
        cons = yaml.constructor.SafeConstructor()
        for knode, vnode in node.value:
            if knode.tag == "tag:yaml.org,2002:merge":
                raise err(f"{path} line {knode.start_mark.line + 1}: YAML merge keys (<<) are not supported; "
                          f"write the keys out")
            try:
                key = cons.construct_object(knode, deep=True)
                hash(key)
            except (yaml.YAMLError, TypeError, ValueError, OverflowError):
                raise err(f"{path} line {knode.start_mark.line + 1}: a key must be a plain name") from None
            ln = knode.start_mark.line + 1
            if key in first:
                raise err(f"{path} line {ln}: duplicate key {_show(key)} (first given at line {first[key]}); "
                          f"keep one")
            first[key] = ln
            lines[loc + (key,)] = ln
            out[key] = to_python(vnode, path, lines, loc + (key,), err)
        return out
    if isinstance(node, yaml.SequenceNode):
        out_l = []
        for i, item in enumerate(node.value):
            lines[loc + (i,)] = item.start_mark.line + 1
            out_l.append(to_python(item, path, lines, loc + (i,), err))
        return out_l
    try:
        return yaml.constructor.SafeConstructor().construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, OverflowError) as e:   # e.g. a timestamp like 2020-13-45
        why = " ".join(str(getattr(e, "problem", None) or e).split())
        raise err(f"{path} line {node.start_mark.line + 1}: {why}") from None


def _show(key) -> str:
    return repr(key) if isinstance(key, str) else str(key)


def _article(name: str) -> str:
    return "an" if name[:1] in "aeiou" else "a"


def type_name(value) -> str:
    """``a list``, ``an int``, ``a bool`` -- for messages (never "a int")."""
    n = {bool: "boolean", int: "integer", float: "number", str: "string", list: "list", dict: "mapping",
         tuple: "list", type(None): "null"}.get(type(value), type(value).__name__)
    return f"{_article(n)} {n}"


def _line_of(lines: SourceLines, loc: tuple) -> int:
    for k in range(len(loc), -1, -1):
        if loc[:k] in lines:
            return lines[loc[:k]]
    return 1


def _clean_loc(loc: tuple, lines: SourceLines) -> tuple:
    """pydantic's loc without its internal union/validator tags."""
    out = []
    for x in loc:
        if isinstance(x, int) or tuple(out) + (x,) in lines:
            out.append(x)
    return tuple(out)


def shown_key(x) -> str:
    """A YAML key as an error message shows it: a key with a newline or a control character is quoted,
    so the message stays on one line."""
    name = str(x)
    return name if name and name.isprintable() else repr(name)


def _keyname(loc: tuple) -> str:
    s = ""
    for x in loc:
        s += f"[{x}]" if isinstance(x, int) else (("." if s else "") + shown_key(x))
    return s


def _known_fields(model, loc: tuple) -> list[str]:
    """Field names of the (nested) pydantic model that owns ``loc``'s parent."""
    cls = model
    for x in loc[:-1]:
        if isinstance(x, int) or not (isinstance(cls, type) and issubclass(cls, BaseModel)):
            return []
        f = cls.model_fields.get(x)
        if f is None:
            return []
        ann = f.annotation
        args = getattr(ann, "__args__", None)
        cls = next((a for a in (args or (ann,)) if isinstance(a, type) and issubclass(a, BaseModel)), None)
    return list(cls.model_fields) if isinstance(cls, type) and issubclass(cls, BaseModel) else []


def did_you_mean(word: str, known) -> str:
    close = difflib.get_close_matches(str(word), [str(k) for k in known], n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f" (known: {', '.join(sorted(map(str, known)))})" if known else ""


def one_line(err: ValidationError, path: str, lines: SourceLines, model=None, fix: str = "") -> str:
    """The first pydantic error as ``PATH line N: KEY: PROBLEM (FIX)``."""
    errs = err.errors(include_url=False)
    e = next((x for x in errs if x["type"] == "extra_forbidden"), errs[0])
    loc = tuple(e["loc"]) if e["type"] == "missing" else _clean_loc(tuple(e["loc"]), lines)
    if e["type"] == "extra_forbidden" and tuple(e["loc"])[-1:] and loc[-1:] != tuple(e["loc"])[-1:]:
        loc = loc + tuple(e["loc"])[-1:]
    line = _line_of(lines, loc)
    key = _keyname(loc)
    kind = e["type"]
    if kind == "extra_forbidden":
        known = _known_fields(model, loc) if model is not None else []
        text = f"unknown key{did_you_mean(loc[-1], known)}"
    elif kind == "missing":
        text = "missing key (add it"
        text += f"; {fix})" if fix else ")"
        fix = ""
    else:
        msg = str(e["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        msg = msg[:1].lower() + msg[1:]
        got = e.get("input")
        shown = repr(got) if not isinstance(got, (dict, list)) else type_name(got)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        text = f"{msg}, got {shown}" if "input" in e else msg
    where = f"{path} line {line}: " + (f"{key}: " if key else "")
    return (where + text + (f" ({fix})" if fix and kind != "extra_forbidden" else ""))[:500]


# --------------------------------------------------------------------------------------
# common field types


def _finite(v: float) -> float:
    if not math.isfinite(v):
        raise ValueError("must be a finite number")
    return v


Finite = Annotated[float, Field(strict=True, allow_inf_nan=True), AfterValidator(_finite)]
PositiveFinite = Annotated[Finite, Field(gt=0)]
NonNegFinite = Annotated[Finite, Field(ge=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# --------------------------------------------------------------------------------------
# hardware profiles


class LinkSpec(_Strict):
    bandwidth_GBps: Annotated[PositiveFinite, Field(le=1e7)]   # GB/s per device, one direction
    latency_us: Annotated[NonNegFinite, Field(le=1e7)]         # per collective step


class HardwareSpec(_Strict):
    name: Optional[StrictStr] = None
    devices_per_node: Annotated[StrictInt, Field(ge=1, le=MAX_DEVICES)]
    intra_node: LinkSpec
    inter_node: LinkSpec
    peak_tflops: Annotated[NonNegFinite, Field(le=1e7)] = 0.0
    mfu: Annotated[PositiveFinite, Field(le=1)] = 0.5
    memory_GB: Annotated[NonNegFinite, Field(le=1e9)] = 0.0
    hbm_GBps: Annotated[NonNegFinite, Field(le=1e7)] = 0.0        # device-memory bandwidth (peak)
    hbm_efficiency: Annotated[PositiveFinite, Field(le=1)] = 0.8  # fraction an element-wise kernel sustains
    step_model: Optional[dict[StrictStr, Any]] = None             # the step model's figures (cost/profile.py)


HARDWARE_FIX = ("a profile needs devices_per_node, intra_node and inter_node {bandwidth_GBps, latency_us}, "
                "optional peak_tflops, mfu in (0, 1], memory_GB, hbm_GBps, hbm_efficiency in (0, 1]")


def validate_hardware(root, path: str) -> HardwareSpec:
    """A composed hardware-profile YAML -> :class:`HardwareSpec`, or MeshError naming the line and key."""
    if root is None or not isinstance(root, yaml.MappingNode):
        raise MeshError(f"bad hardware profile {path}: not a mapping ({HARDWARE_FIX})")
    lines = SourceLines()
    data = to_python(root, path, lines, err=MeshError)
    try:
        return HardwareSpec.model_validate(data)
    except ValidationError as err:
        raise MeshError("bad hardware profile " + one_line(err, path, lines, HardwareSpec, HARDWARE_FIX)) from None


# --------------------------------------------------------------------------------------
# advisor rules


class Thresholds(_Strict):
    large_vocab: Optional[PositiveFinite] = None
    long_sequence: Optional[PositiveFinite] = None
    boundary_ratio: Optional[PositiveFinite] = None


def _axes(v):
    if isinstance(v, str):
        return v
    if isinstance(v, list) and v and all(isinstance(a, str) for a in v):
        return v
    raise ValueError("a factor maps to a mesh axis name or a list of them, e.g. {i: [dp, cp], j: [tp]}")


Template = dict[StrictStr, Annotated[Any, AfterValidator(_axes)]]


class RulesSpec(_Strict):
    version: Optional[StrictInt] = None
    thresholds: Optional[Thresholds] = None
    categories: Optional[dict[StrictStr, list[StrictStr]]] = None
    templates: Optional[dict[StrictStr, Template]] = None


def mapping_data(root, path: str, not_a_mapping: str):
    """A composed YAML document that must be a mapping -> (plain data, line numbers); (None, None) for an
    empty file; RulesError ``PATH line 1: NOT_A_MAPPING`` for any other document."""
    if root is None:
        return None, None
    if not isinstance(root, yaml.MappingNode):
        raise RulesError(f"{path} line 1: {not_a_mapping}")
    lines = SourceLines()
    return to_python(root, path, lines), lines


def validate_rules(root, path: str, known_templates=None, known_categories=None) -> dict:
    """A composed rules YAML -> ``{"thresholds": {...}, "categories": {...}, "templates": {...}}`` with only
    the keys the file gives. ``known_templates``: names a template may have (a misspelt one is an error)."""
    data, lines = mapping_data(root, path, "a rules file is a mapping with thresholds, categories, templates")
    if data is None:
        return {}
    for k in data:
        if k not in RulesSpec.model_fields:
            raise RulesError(f"{path} line {lines[(k,)]}: unknown section {_show(k)}"
                             f"{did_you_mean(k, ['thresholds', 'categories', 'templates'])[:-1]}; "
                             f"sections: thresholds, categories, templates)"
                             if did_you_mean(k, ['thresholds', 'categories', 'templates']).startswith(" (did")
                             else f"{path} line {lines[(k,)]}: unknown section {_show(k)} "
                                  f"(thresholds, categories, templates)")
    for sec, known in (("templates", known_templates), ("categories", known_categories)):
        if known and isinstance(data.get(sec), dict):
            for name in data[sec]:
                if name not in known:
                    raise RulesError(f"{path} line {lines[(sec, name)]}: {sec}: unknown {'template' if sec == 'templates' else 'category'} {_show(name)}"
                                     f"{did_you_mean(name, known)}; the advisor uses only its own names")
    try:
        spec = RulesSpec.model_validate(data)
    except ValidationError as err:
        e = err.errors(include_url=False)[0]
        loc = _clean_loc(tuple(e["loc"]), lines)
        ln = _line_of(lines, loc[:2])
        if len(loc) >= 2 and loc[0] == "thresholds" and e["type"] != "extra_forbidden":
            raise RulesError(f"{path} line {ln}: threshold {_show(loc[1])} must be a positive finite number "
                             f"(got {e.get('input')!r})") from None
        if e["type"] == "extra_forbidden" and loc[:1] == ("thresholds",):
            raise RulesError(f"{path} line {ln}: threshold {_show(loc[-1])} must be one of "
                             f"{', '.join(Thresholds.model_fields)}{did_you_mean(loc[-1], Thresholds.model_fields)}"
                             ) from None
        if len(loc) >= 2 and loc[0] == "categories":
            raise RulesError(f"{path} line {ln}: category {_show(loc[1])} must be a list of operator type names, "
                             f"e.g. [MatMul, BatchMatMul]") from None
        if len(loc) >= 2 and loc[0] == "templates":
            raise RulesError(f"{path} line {ln}: template {_show(loc[1])} maps factor names to mesh axis lists, "
                             f"e.g. {{i: [dp, cp], j: [tp]}}") from None
        if len(loc) == 1 and loc[0] in ("thresholds", "categories", "templates"):
            raise RulesError(f"{path} line {ln}: {loc[0]} must be a mapping") from None
        raise RulesError(one_line(err, path, lines, RulesSpec)) from None
    out = spec.model_dump(exclude_unset=True, exclude_none=True)
    if "thresholds" in out:
        out["thresholds"] = {k: data["thresholds"][k] for k, v in out["thresholds"].items() if v is not None}
    out.pop("version", None)
    return out


# --------------------------------------------------------------------------------------
# anchors


def _split(v):
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError("a split is a positive integer")
    if not 1 <= v <= MAX_DEVICES:
        raise ValueError(f"a split is a positive integer at most {MAX_DEVICES}")
    return v


Rows = list[list[Annotated[Any, AfterValidator(_split)]]]


def _layout_dim(v):
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, list) and v and all(isinstance(a, str) for a in v):
        return v
    raise ValueError("a layout entry is a mesh axis name, a list of axis names, or None, e.g. [[dp, cp], None]")


LayoutRows = list[list[Annotated[Any, AfterValidator(_layout_dim)]]]


class AnchorSpec(_Strict):
    in_strategy: Optional[Rows] = None
    out_strategy: Optional[Rows] = None
    layout: Optional[LayoutRows] = None
    out_layout: Optional[LayoutRows] = None
    #: the Layout's own device matrix, outer axis first (``{dp: 2, tp: 2, tp_group: 2}``: the mesh with an axis split
    #: in two, as ``mindspore.Layout((2, 2, 2), ("dp", "tp", "tp_group"))``); default: the --mesh axes
    device_matrix: Optional[dict[str, int]] = None


STRATEGY_FIX = "a strategy is a list of lists of positive integers, e.g. [[2, 1], [1, 4]]"
_ROWS = TypeAdapter(Rows)


def validate_anchor(value, path: str, lines: SourceLines, loc: tuple):
    """One anchors-file value: a strategy list, or a mapping of in_strategy/out_strategy/layout/out_layout.
    Returns ``("rows", rows)`` or ``("map", AnchorSpec)``; RulesError naming the line otherwise."""
    where = f"{path} line {_line_of(lines, loc)}"
    if isinstance(value, list):
        if not value or not all(isinstance(r, list) for r in value):
            raise RulesError(f"{where}: {STRATEGY_FIX}")
        try:
            return "rows", _ROWS.validate_python(value)
        except ValidationError as err:
            e = err.errors(include_url=False)[0]
            ln = _line_of(lines, loc + _clean_loc(tuple(e["loc"]), _shift(lines, loc)))
            raise RulesError(f"{path} line {ln}: {STRATEGY_FIX} (got {e.get('input')!r})") from None
    if not isinstance(value, dict):
        raise RulesError(f"{where}: write a strategy list, or a mapping with in_strategy / layout "
                         f"(got {type_name(value)})")
    unknown = [k for k in value if k not in AnchorSpec.model_fields]
    if unknown:
        raise RulesError(f"{path} line {lines.get(loc + (unknown[0],), _line_of(lines, loc))}: unknown key(s) "
                         f"{', '.join(map(shown_key, unknown))}{did_you_mean(unknown[0], AnchorSpec.model_fields)[:-1]}; "
                         f"use in_strategy, out_strategy, layout, out_layout, device_matrix)"
                         if did_you_mean(unknown[0], AnchorSpec.model_fields).startswith(" (did") else
                         f"{where}: unknown key(s) {', '.join(map(shown_key, unknown))} "
                         f"(use in_strategy, out_strategy, layout, out_layout, device_matrix)")
    try:
        spec = AnchorSpec.model_validate(value)
    except ValidationError as err:
        e = err.errors(include_url=False)[0]
        sub = _clean_loc(tuple(e["loc"]), _shift(lines, loc))
        ln = _line_of(lines, loc + sub)
        key = sub[0] if sub else ""
        fix = STRATEGY_FIX if "strategy" in str(key) else \
            "a layout is one list per input of mesh axis names or None, e.g. [[dp, None], [None, tp]]"
        msg = str(e["msg"]).removeprefix("Value error, ")
        raise RulesError(f"{path} line {ln}: {key}: {msg[:1].lower() + msg[1:]} ({fix})"
                         if "layout" in str(key) else f"{path} line {ln}: {key}: {fix} (got {e.get('input')!r})"
                         ) from None
    if (spec.in_strategy is None) == (spec.layout is None):
        raise RulesError(f"{where}: give exactly one of in_strategy or layout")
    if spec.out_strategy is not None and spec.in_strategy is None or spec.out_layout is not None and spec.layout is None:
        raise RulesError(f"{where}: out_strategy goes with in_strategy, out_layout with layout")
    if spec.device_matrix is not None and (spec.layout is None or not spec.device_matrix
                                           or any(not isinstance(v, int) or v < 1 for v in spec.device_matrix.values())):
        raise RulesError(f"{where}: device_matrix goes with layout and maps axis names to positive sizes, outer "
                         f"first, e.g. {{dp: 2, tp: 2, tp_group: 2}}")
    return "map", spec


def _shift(lines: SourceLines, loc: tuple) -> SourceLines:
    """``lines`` re-rooted at ``loc`` (for pydantic locs relative to a sub-value)."""
    n = len(loc)
    return SourceLines({k[n:]: v for k, v in lines.items() if k[:n] == loc})


# --------------------------------------------------------------------------------------
# MindFormers --set overrides


_MF_POSITIVE_INT = {"hidden_size", "num_attention_heads", "num_hidden_layers", "num_layers", "seq_length",
                    "vocab_size", "intermediate_size", "ffn_hidden_size", "num_key_value_heads", "n_kv_heads",
                    "max_position_embeddings", "batch_size", "num_experts", "moe_intermediate_size",
                    "data_parallel", "model_parallel", "context_parallel", "expert_parallel", "pipeline_stage",
                    "micro_batch_num", "multiple_of", "head_dim", "kv_lora_rank", "q_lora_rank"}
_MF_FRACTION = {"hidden_dropout", "attention_dropout", "ffn_dim_multiplier"}


def validate_mindformers_override(key: str, value, known_keys=()) -> None:
    """A ``--set KEY=VALUE`` for a MindFormers config: sizes are positive integers (not bools, at most
    2^31), floats finite; a bare key the model config lacks gets "did you mean" when one is close."""
    leaf = key.rsplit(".", 1)[-1]
    if leaf in _MF_POSITIVE_INT and value is not None:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 2 ** 31 - 1:
            raise InputSpecError(f"bad setting {key}={value!r}: {leaf} is a positive integer")
    if isinstance(value, float) and not math.isfinite(value):
        raise InputSpecError(f"bad setting {key}={value!r}: must be a finite number")
    if leaf in _MF_FRACTION and isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        raise InputSpecError(f"bad setting {key}={value!r}: must not be negative")
    if "." not in key and known_keys and key not in known_keys:
        hint = did_you_mean(key, known_keys)
        if hint.startswith(" (did"):
            raise InputSpecError(f"bad setting {key}: the config has no such key{hint}")
