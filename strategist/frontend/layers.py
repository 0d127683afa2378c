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
from ..vocab.graph import Input, OpGraph, Param


def _layer_lists(graph: OpGraph) -> dict[str, set[int]]:
    """``{a Cell list's path prefix: the layer indices its operators are in}``."""
    prefixes: dict[str, set[int]] = {}
    for op in graph:
        if op.layer:
            prefix, _, idx = op.layer.rpartition(".")
            prefixes.setdefault(prefix, set()).add(int(idx))
    return prefixes


def layer_block(graph: OpGraph) -> tuple[str, list[int]]:
    """(the repeated block's path prefix, e.g. ``layers`` or ``model.layers``; its layer indices in order), or
    ``("", [])`` for a graph without one Cell list of layers."""
    prefixes = _layer_lists(graph)
    if len(prefixes) != 1:
        return "", []
    (prefix, idx), = prefixes.items()
    return prefix, sorted(idx)


def main_block(graph: OpGraph) -> tuple[str, list[int]]:
    """(the largest Cell list of layers' path prefix, its layer indices in order): :func:`layer_block` where the
    graph has one; beside a second list (DeepSeek's multi-token-prediction ``mtp.layers``), the decoder's; of two
    as large, the first in the graph."""
    prefixes = _layer_lists(graph)
    if not prefixes:
        return "", []
    prefix = max(prefixes, key=lambda k: len(prefixes[k]))
    return prefix, sorted(prefixes[prefix])


def alike_from(graph: OpGraph) -> int | None:
    """The first layer of :func:`main_block` from which every later one is alike: the same operators, named alike,
    of the same types and output shapes, reading the same operators of their own layer (what they read from outside
    it, its predecessor's output or the embedding's, told apart by slot only), with parameters of the same shapes.
    0 where every layer is; DeepSeek-V3's 3, its dense layers first; None without such a list.

    >>> alike_from(OpGraph([], {}, {}, [], {})) is None
    True
    """
    prefix, idx = main_block(graph)
    if not idx or idx != list(range(len(idx))):
        return None
    rx = layer_pattern(prefix)
    # parameter names may drop the model's top cell (DeepSeek's ``decoder.layers.3...`` beside operators'
    # ``model.decoder.layers.3...``): found by the list's own name
    prx = layer_pattern(prefix.rpartition(".")[2])
    sig: dict[int, list] = {i: [] for i in idx}
    for op in graph:
        i = _index(rx, op.cell_path) if op.layer and op.layer.startswith(prefix + ".") else None
        if i is None:
            continue
        sig[i].append((move_layers(rx, op.name, i, i, -i), op.type,
                       tuple(None if o is None else (tuple(o.shape), o.dtype) for o in op.outputs),
                       tuple(_read_in(x, i, rx, prx) for x in op.inputs)))
    for name, p in graph.params.items():
        i = _index(prx, name)
        if i in sig:
            sig[i].append((move_layers(prx, name, i, i, -i), tuple(p.spec.shape), p.spec.dtype))
    first = idx[-1]
    while first > 0 and sig[first - 1] == sig[idx[-1]]:
        first -= 1
    return first


def _read_in(x: Input, i: int, rx: re.Pattern, prx: re.Pattern):
    """An input of an operator of layer ``i`` as layers alike read it: an operator or parameter of its own layer by
    its name there, anything else by its kind and slot."""
    if x.kind == "op" and _index(rx, x.ref) == i:
        return "op", move_layers(rx, x.ref, i, i, -i), x.index
    if x.kind == "param" and _index(prx, x.ref) == i:
        return "param", move_layers(prx, x.ref, i, i, -i)
    return x.kind, x.index


def layer_pattern(prefix: str) -> re.Pattern:
    """A repeated layer's index (group 1) in operator names, cell paths and parameter names under ``prefix``."""
    return re.compile(rf"(?<![\w]){re.escape(prefix)}\.(\d+)(?=\.|$)")


def _index(rx: re.Pattern, text: str) -> int | None:
    m = rx.search(text or "")
    return int(m.group(1)) if m else None


def move_layers(rx: re.Pattern, text: str, lo: int, hi: int, d: int) -> str:
    """``text`` with each layer index ``rx`` finds (its group 1) in [lo, hi] moved by ``d``."""
    if not text or not d:
        return text
    return rx.sub(lambda m: f"{m.group(0)[:m.start(1) - m.start(0)]}{int(m.group(1)) + d}"
                            f"{m.group(0)[m.end(1) - m.start(0):]}" if lo <= int(m.group(1)) <= hi
                  else m.group(0), text)


def truncate_layers(graph: OpGraph, keep: int) -> OpGraph:
    """``graph`` with its first ``keep`` repeated layers only: what followed the last layer reads layer ``keep - 1``
    (the graph a ``keep``-layer build gives, the layers being identical). ``graph`` itself where it has no more."""
    prefix, idx = layer_block(graph)
    if len(idx) <= keep or keep < 1:
        return graph
    if idx != list(range(len(idx))):
        raise ModelLoadError(f"the layers of {prefix} are numbered {idx[:4]}...: cannot cut them down")
    rx, last = layer_pattern(prefix), idx[-1]
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
        ref = move_layers(rx, x.ref, last, last, keep - 1 - last)
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
    rx, t = layer_pattern(prefix), idx[-1]
    _, every = layer_block(graph)
    out = dict(anchors)
    for name, a in anchors.items():
        if _index(rx, name) == t:
            for k in every[t + 1:]:
                nn = move_layers(rx, name, t, t, k - t)
                if nn in graph:
                    out[nn] = dataclasses.replace(a, op=nn)
    return out


def grow_layers(graph: OpGraph, layers: int, rx: re.Pattern, scope_rx: re.Pattern) -> OpGraph:
    """``graph`` with its repeated layers grown to ``layers`` by copying its last one: the graph a ``layers``-layer
    compile gives where the layers are alike (tests: op for op against whole extractions).

    ``rx`` finds a layer's index in a path (group 1: ``model.layers.N``), ``scope_rx`` in MindSpore's scope names
    (``.../layers-CellList/N-DecoderLayer/...``). Layer k (k >= the extracted count L) is the last layer t = L-1
    renamed in op names, cell paths, scopes and parameters; its inputs from layer t-1 come from layer k-1; what
    followed the layers reads layer ``layers-1``."""
    # size: one walk renaming each copy of the last layer; its late runs need the body's bounds and names found in the walk
    ops = graph.ops
    idx = [_index(rx, op.cell_path) for op in ops]
    present = sorted({i for i in idx if i is not None})
    if not present or layers <= present[-1] + 1:
        return graph
    t = present[-1]
    first = idx.index(t)
    # the layer's body: from its first operator while the operators are its own or its predecessor's (MindSpore can
    # order an MoE router's late operators -- DeepSeek's expert-bias update -- inside the next layer's body)
    end = first
    while end + 1 < len(ops) and (idx[end + 1] in (t, t - 1) or not ops[end + 1].cell_path):
        end += 1
    while idx[end] != t:
        end -= 1
    body = range(first, end + 1)
    # the predecessor's operators the body holds: a late run of this layer named as one of them runs, for each copy,
    # inside the next copy's body
    inside = {ops[i].name for i in body if idx[i] == t - 1}
    # its operators after the body, in runs: an MoE router's auxiliary loss, added to the loss at the end (each
    # layer's run in turn: the copies follow it), or the late operators of the last layer (interleaved: they are
    # the last layer's, the copies' own running inside the copied bodies)
    late = [i for i in range(end + 1, len(ops)) if idx[i] == t]
    runs = []
    for i in late:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    last = layers - 1

    by_name = {op.name: op for op in ops}

    def signature(op):
        return op.type, tuple(x.spec.shape if x.spec is not None else None for x in op.inputs)

    def counterpart(name: str) -> bool:
        """Layer t has an operator of that name, doing the same (a shared op's name can be another op's in the
        next layer: ChatGLM2's layer 0 splits the shared rotary table as split#1, layer 1 its kv as split#1)."""
        other = by_name.get(move_layers(rx, name, t - 1, t - 1, 1))
        return other is not None and signature(other) == signature(by_name[name])

    def ref_in(x: Input, lo, hi, d) -> Input:
        if x.kind == "op":
            if lo == t - 1 and lo >= 0 and move_layers(rx, x.ref, lo, lo, 1) != x.ref and not counterpart(x.ref):
                # an operator of layer t-1 that layer t has no counterpart of: computed once and shared by the
                # layers after it (MindSpore's CSE keeps one rotary cos/sin, in the first layer), not per layer
                return x
            return dataclasses.replace(x, ref=move_layers(rx, x.ref, lo, hi, d))
        if x.kind == "param":
            return dataclasses.replace(x, ref=move_layers(rx, x.ref, lo, hi, d))
        return x

    def copy_op(op, lo, hi, d, inputs_only=False):
        new_inputs = tuple(ref_in(x, lo, hi, d) for x in op.inputs)
        if inputs_only:
            return dataclasses.replace(op, inputs=new_inputs, attrs=dict(op.attrs))
        return dataclasses.replace(op, name=move_layers(rx, op.name, lo, hi, d),
                                   cell_path=move_layers(rx, op.cell_path, lo, hi, d),
                                   full_name=move_layers(scope_rx, op.full_name, lo, hi, d), inputs=new_inputs,
                                   attrs=dict(op.attrs))
    ends = {r[-1]: r for r in runs}
    moved = {i for r in runs if move_layers(rx, ops[r[0]].name, t, t, -1) in inside for i in r}
    new_ops = list(ops[:end + 1])
    for k in range(t + 1, layers):
        new_ops += [copy_op(ops[j], t - 1, t, k - t) for j in body]
    for i in range(end + 1, len(ops)):
        op = ops[i]
        if idx[i] != t:
            new_ops.append(copy_op(op, t, t, last - t, inputs_only=True))
        elif i in moved:
            new_ops.append(copy_op(op, t, t, last - t))
        else:
            new_ops.append(op)
        if i in ends and i not in moved:
            for k in range(t + 1, layers):
                new_ops += [copy_op(ops[j], t - 1, t, k - t) for j in ends[i]]
    new_ops, outputs_map = _renumber_unscoped(new_ops, rx)
    for i, op in enumerate(new_ops):
        op.topo_index = i
    params = _with_copies(graph.params, rx, t, layers, lambda name, q: Param(name, q.spec, q.requires_grad))
    cells = _with_copies(graph.cells, rx, t, layers, lambda _name, cls: cls)
    outputs = [ref_in(x, t, t, last - t) for x in graph.outputs]
    outputs = [dataclasses.replace(x, ref=outputs_map.get(x.ref, x.ref)) if x.kind == "op" else x for x in outputs]
    return graph.derived(new_ops, outputs, params, cells)


_SUFFIX = re.compile(r"#\d+$")
_TOP_SCOPE = re.compile(r"Default/(\w+)-op(\d+)")


def _with_copies(table: dict, rx: re.Pattern, t: int, layers: int, copy) -> dict:
    """``table`` (parameters or cells by name) with layer ``t``'s entries copied for each later layer up to
    ``layers``, placed after its last one (``copy(new name, entry)`` makes each)."""
    own = [n for n in table if _index(rx, n) == t]
    out: dict = {}
    for name, value in table.items():
        out[name] = value
        if own and name == own[-1]:
            for k in range(t + 1, layers):
                for n in own:
                    moved = move_layers(rx, n, t, t, k - t)
                    out[moved] = copy(moved, table[n])
    return out


def _renumber_scopes(ops: list) -> list:
    """MindSpore numbers the operators of its top scope per type in order (``Default/SplitWithSize-op6``): a copied
    layer's functional operators numbered as a whole extraction numbers them."""
    seen: dict[str, int] = {}
    out = []
    for op in ops:
        m = _TOP_SCOPE.fullmatch(op.full_name or "")
        if m is None:
            out.append(op)
            continue
        n = seen.get(m.group(1), 0)
        seen[m.group(1)] = n + 1
        want = f"Default/{m.group(1)}-op{n}"
        out.append(op if want == op.full_name else dataclasses.replace(op, full_name=want))
    return out


def _renumber_unscoped(ops: list, rx: re.Pattern) -> tuple[list, dict]:
    """Operators outside any Cell (a functional ``expand_dims`` in a router) are named by their order of appearance
    (``expand_dims``, ``expand_dims#1``, ...): a copied layer's are named as a whole extraction names them, the
    references to them following. Returns the operators and the renaming."""
    ops = _renumber_scopes(ops)
    seen: dict[str, int] = {}
    rename: dict[str, str] = {}
    for op in ops:
        if op.cell_path or _index(rx, op.name) is not None:
            continue
        base = _SUFFIX.sub("", op.name)
        n = seen.get(base, 0)
        seen[base] = n + 1
        new = base if n == 0 else f"{base}#{n}"
        if new != op.name:
            rename[id(op)] = new
    if not rename:
        return ops, {}
    out = []
    # a name can be held by one operator before renaming and another after: map each reference to the operator it
    # named -- the nearest earlier holder of that name in order (the graph is in topological order)
    holder: dict[str, str] = {}
    for op in ops:
        new = rename.get(id(op), op.name)
        inputs = tuple(dataclasses.replace(x, ref=holder.get(x.ref, x.ref)) if x.kind == "op" else x
                       for x in op.inputs)
        holder[op.name] = new
        out.append(dataclasses.replace(op, name=new, inputs=inputs) if (new != op.name or inputs != op.inputs)
                   else op)
    return out, holder


def grows_alike(graph: OpGraph, rx: re.Pattern, scope_rx: re.Pattern) -> bool:
    """Whether ``graph``'s last repeated layer is its previous one copied: :func:`grow_layers` of the graph cut to
    one layer fewer gives ``graph`` back, op for op (operators, their inputs, parameters, cells, outputs). Checked
    on a compile of three layers before two are grown to many: a layer reading two layers back, or compiled
    differently for its position, is not copied."""
    _, idx = layer_block(graph)
    if len(idx) < 2:
        return False
    try:
        again = grow_layers(truncate_layers(graph, len(idx) - 1), len(idx), rx, scope_rx)
    except ModelLoadError:
        return False
    return (list(again) == list(graph) and again.params == graph.params and again.cells == graph.cells
            and list(again.outputs) == list(graph.outputs))
