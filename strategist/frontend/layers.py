"""A model's repeated layers (``layers.0``, ``layers.1``, ... -- one Cell list whose blocks are identical): the graph
cut down to its first few layers, to advise on, and the anchors advised there copied onto every layer of the whole
graph. The advisor's anchors are per-layer patterns (one group across the repeated layers), so the copy is the set
the whole graph's advice keeps; ``strategist sweep`` advises each mesh on the cut graph and prices the copy on
the whole one.

    >>> from strategist.vocab.graph import OpGraph
    >>> layer_block(OpGraph([], {}, {}, [], {}))
    ('', [])
"""
from __future__ import annotations

import dataclasses
import re

from ..errors import ModelLoadError
from ..vocab.graph import Input, OpGraph


def layer_block(graph: OpGraph) -> tuple[str, list[int]]:
    """(the repeated block's path prefix, e.g. ``layers`` or ``model.layers``; its layer indices in order), or
    ``("", [])`` for a graph without one Cell list of layers."""
    prefixes: dict[str, set] = {}
    for op in graph:
        if op.layer:
            prefix, _, idx = op.layer.rpartition(".")
            prefixes.setdefault(prefix, set()).add(int(idx))
    if len(prefixes) != 1:
        return "", []
    (prefix, idx), = prefixes.items()
    return prefix, sorted(idx)


def _pattern(prefix: str) -> re.Pattern:
    return re.compile(rf"(?<![\w]){re.escape(prefix)}\.(\d+)(?=\.|$)")


def _index(rx: re.Pattern, text: str) -> int | None:
    m = rx.search(text or "")
    return int(m.group(1)) if m else None


def _shift(rx: re.Pattern, text: str, frm: int, to: int) -> str:
    return rx.sub(lambda m: m.group(0)[:m.start(1) - m.start(0)] + str(to) if int(m.group(1)) == frm
                  else m.group(0), text) if text else text


def truncate_layers(graph: OpGraph, keep: int) -> OpGraph:
    """``graph`` with its first ``keep`` repeated layers only: what followed the last layer reads layer ``keep - 1``
    (the graph a ``keep``-layer build gives, the layers being identical). ``graph`` itself where it has no more."""
    prefix, idx = layer_block(graph)
    if len(idx) <= keep or keep < 1:
        return graph
    if idx != list(range(len(idx))):
        raise ModelLoadError(f"the layers of {prefix} are numbered {idx[:4]}...: cannot cut them down")
    rx, last = _pattern(prefix), idx[-1]
    kept = [op for op in graph if (_index(rx, op.cell_path) if op.layer else None) is None
            or _index(rx, op.cell_path) < keep]
    names = {op.name for op in kept}

    def read(x: Input) -> Input:
        if x.kind not in ("op", "param"):
            return x
        i = _index(rx, x.ref)
        if i is None or i < keep:
            return x
        if i != last:
            raise ModelLoadError(f"{x.ref} of layer {i} is read outside its block: cannot cut the layers down")
        ref = _shift(rx, x.ref, last, keep - 1)
        if x.kind == "op" and ref not in names:
            raise ModelLoadError(f"{x.ref}: layer {keep - 1} has no counterpart {ref}: the layers are not alike")
        return dataclasses.replace(x, ref=ref)
    ops = []
    for k, op in enumerate(kept):
        op = dataclasses.replace(op, inputs=tuple(read(x) for x in op.inputs), attrs=dict(op.attrs))
        op.topo_index = k
        ops.append(op)
    params = {n: p for n, p in graph.params.items() if (_index(rx, n) or 0) < keep}
    cells = {c: cls for c, cls in graph.cells.items() if (_index(rx, c) or 0) < keep}
    return graph.derived(ops, [read(x) for x in graph.outputs], params, cells)


def copy_anchors(anchors: dict, base: OpGraph, graph: OpGraph) -> dict:
    """Anchors advised on ``base`` (``graph`` cut down by :func:`truncate_layers`) for ``graph``: those of its last
    layer copied onto each later layer of ``graph``, the others as they are."""
    prefix, idx = layer_block(base)
    if not prefix:
        return dict(anchors)
    rx, t = _pattern(prefix), idx[-1]
    _, every = layer_block(graph)
    out = dict(anchors)
    for name, a in anchors.items():
        if _index(rx, name) == t:
            for k in every[t + 1:]:
                nn = _shift(rx, name, t, k)
                if nn in graph:
                    out[nn] = dataclasses.replace(a, op=nn)
    return out
