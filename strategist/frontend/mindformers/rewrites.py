"""Rewrites of a MindFormers graph, so that the stand-alone tp=1 extraction reads as MindSpore's parallel passes
see the model.

The ``[S, B] <-> [S*B]`` rows of the Morph bodies marked device-local (:func:`mark_local_rows`), each rotary table
reader given its own table chain (:func:`unmerge_rotary_tables`), the Reshapes MindSpore folds once the Morph
boundaries are gone (:func:`fold_reshapes`, :func:`global_rows_graph`), and the last compiled layer copied for the
rest (:func:`replicate_layers`, :func:`replicate_anchors`).
"""
from __future__ import annotations

import copy
import dataclasses
import re

from ...engine.search.structure import local_rows_marked
from ...vocab.graph import Input, OpGraph, Param


_MOE_LAYERS = ("MoELayer",)


def mark_local_rows(graph: OpGraph, seq: int, batch: int) -> int:
    """Mark the Reshapes between sequence-first ``[S, B, ...]`` and ``[S*B, ...]`` rows (what the
    Morph bodies of MindFormers' linears do to their input and output) as device-local: in the real
    model each device reshapes its own ``[S/cp, B/dp, ...]`` slice, so a batch split stays a batch split
    with no communication. On the inlined tp=1 graph the engine then carries the leading dims' device
    axes into the rows and back (:func:`strategist.engine.search.local_rows.local_rows_layout`) instead of treating
    the rows as one contiguous block. Returns how many Reshapes were marked."""
    if seq <= 1 or batch <= 1:
        return 0
    n = 0
    for op in graph:
        if op.type != "Reshape" or not op.inputs or op.inputs[0].spec is None or not op.outputs \
                or op.outputs[0] is None:
            continue
        a, b = tuple(op.inputs[0].spec.shape), tuple(op.outputs[0].shape)
        if (a[:2] == (seq, batch) and b[:1] == (seq * batch,)) or (a[:1] == (seq * batch,) and b[:2] == (seq, batch)):
            op.attrs["strategist_local_rows"] = (seq, batch)
            n += 1
        elif op.cell_class in _MOE_LAYERS and a[2:] == b[2:] and (
                (a[:2] == (batch, seq) and b[:2] == (1, seq * batch)) or (a[:2] == (1, seq * batch) and b[:2] == (batch, seq))):
            # the MoE layer's local_reshape_permute / unpermute Morphs: batch-first [B, S, h] <-> tokens [1, B*S, h]
            op.attrs["strategist_local_rows"] = (batch, seq, "batch_first")
            n += 1
    return n


#: The rotary table operators of MindFormers' ``ApplyRotaryPosEmb.construct``: ``cos(mul_mscale(freqs, m))`` and
#: ``sin(mul_mscale(freqs, m))`` (each cast to ``rotary_dtype`` where that differs), computed afresh at every call.
_ROTARY_CELLS = ("ApplyRotaryPosEmb",)
_ROTARY_TABLE_OPS = ("Muls", "Cos", "Sin")


def unmerge_rotary_tables(graph: OpGraph) -> OpGraph:
    """Give every reader of an ``ApplyRotaryPosEmb`` cos/sin table its own chain of table operators, as MindSpore's
    parallel pass sees them.

    ``ApplyRotaryPosEmb.construct`` calls ``self.mul_mscale(freqs, m_scale)`` twice (once for ``cos``, once for
    ``sin``) and the attention calls the Cell twice (q and k) on the same ``freqs``: 4 Muls, 2 Cos, 2 Sin per
    layer. opt_a runs ``auto_parallel`` before its ``cse`` (pipeline/jit/ps/pass.cc GetOptPassesA), so the
    step_parallel_begin graph holds all of them (verify's child, GLOG_v=1: MulsInfo32 CosInfo33 MulInfo34 ...
    MulsInfo38 SinInfo39 MulInfo40 ... MulsInfo48 CosInfo49 ... MulsInfo54 SinInfo55 for layer 0), while the
    stand-alone export compile strategist reads runs the CSE: one Muls, one Cos, one Sin per layer. The copies
    matter: the rotary table's Reshape (``RotaryEmbedding``'s ``[S, 128] -> [S, 1, 1, 128]``) builds its swc list
    over every consumer's candidates (``ReshapeInfo::GenerateStrategyCosts``: 10 own + 8 Muls x 10 = 90 entries
    on qwen3 at 2 layers), and its libstdc++ ``std::sort`` over the 48 tied zero-communication entries lands on
    index 64 (output ``(2, 1, 1, 1)`` over ``[2, 4]``), where 2 Muls x 10 + 10 land on ``(8, 1, 1, 1)``.
    Each reader (the ``mul`` taking cos or sin) gets a private copy of the chain back to the first operator
    outside it, in reading order; the first copy keeps the operator's name, later ones take ``#k``."""
    ops = list(graph)
    by_name = {op.name: op for op in ops}
    merged: set = set()
    for op in ops:         # the table chain: the Cell's Muls/Cos/Sin, and Casts of them
        if op.cell_class not in _ROTARY_CELLS:
            continue
        feeds = [x.ref for x in op.inputs if x.kind == "op"]
        if op.type in _ROTARY_TABLE_OPS or (op.type == "Cast" and feeds and all(f in merged for f in feeds)):
            merged.add(op.name)
    readers: dict = {}
    for op in ops:
        for x in op.inputs:
            if x.kind == "op" and x.ref in merged:
                readers.setdefault(x.ref, set()).add(op.name)
    if not any(len(r) > 1 for r in readers.values()) or \
            any(x.kind == "op" and x.ref in merged for x in graph.outputs):
        return graph
    names = {op.name for op in ops if op.name not in merged}
    used: dict = {}

    def fresh(name: str) -> str:
        base = name.split("#")[0]
        k = used.get(base, 0)
        while True:
            cand = base if k == 0 else f"{base}#{k}"
            k += 1
            if cand not in names:
                used[base] = k
                names.add(cand)
                return cand

    out: list = []

    def own(inputs) -> tuple:
        """``inputs`` with each merged operator read replaced by a private copy of its chain."""
        return tuple(dataclasses.replace(x, ref=private(x.ref)) if x.kind == "op" and x.ref in merged else x
                     for x in inputs)

    def private(name: str) -> str:
        """A new copy of merged operator ``name`` and of the merged chain it reads; its name."""
        src = by_name[name]
        # each copy is one node of MindSpore's parallel graph: not several (graph._mark_copies counted the merged one)
        attrs = {k: v for k, v in src.attrs.items() if k != "strategist_copies"}
        new = dataclasses.replace(src, name=fresh(src.name), inputs=own(src.inputs), attrs=attrs)
        out.append(new)
        return new.name

    for op in ops:
        if op.name in merged:
            continue
        if any(x.kind == "op" and x.ref in merged for x in op.inputs):
            op = dataclasses.replace(op, inputs=own(op.inputs))
        out.append(op)
    # positions again (the copies took their source's): as replicate_layers numbers a replicated graph
    out = [op if op.topo_index == i else dataclasses.replace(op, topo_index=i) for i, op in enumerate(out)]
    return graph.derived(out)


def global_rows_graph(graph: OpGraph) -> OpGraph:
    """``graph`` as MindSpore itself sees the inlined Morph bodies (verify's child compiles them as
    global operators): a copy without :func:`mark_local_rows`' marks, so each ``[S, B] <-> [S*B]``
    Reshape is an ordinary Reshape, and then with the Reshapes MindSpore's optimizer folds once the Morph
    boundaries are gone (:func:`fold_reshapes`). ``graph`` itself when nothing is marked."""
    if not local_rows_marked(graph):
        return graph
    g = copy.deepcopy(graph)
    for op in g:
        op.attrs.pop("strategist_local_rows", None)
    return fold_reshapes(g)


def fold_reshapes(graph: OpGraph) -> OpGraph:
    """MindSpore's ``ReshapeEliminater`` (frontend/optimizer/irpass/reshape_eliminate.h), run by the
    optimizer before the parallel passes: ``Reshape(Reshape(x, s1), s2)`` becomes ``Reshape(x, s2)``
    (TwoReshapeEliminater; the inner one goes when nothing else reads it) and a Reshape to its input's own
    shape is dropped (ReshapeSameShapeEliminater). The exported stand-alone graph has none of these left,
    except across a MindFormers Morph, whose body is its own graph there; verify's child inlines the bodies
    and MindSpore folds them (qwen3: linear_qkv's ``[S*B, N] -> [S, B, N]`` and the ``[S, B, n, d]`` split
    Reshape are one ``ReshapeInfo``, the q_layernorm round trip ``[S, B, n, d] -> [S, B, h] -> [S, B, n, d]``
    is gone: Cast follows Cast). ``graph`` itself when there is nothing to fold."""
    ops = list(graph)
    by_name: dict = {}
    alias: dict = {}            # a dropped same-shape Reshape -> its input
    changed = False

    def sub(x):
        return alias.get(x.ref, x) if x.kind == "op" and x.index == 0 else x

    for op in ops:
        ins = tuple(sub(x) for x in op.inputs)
        if op.type == "Reshape" and ins and ins[0].kind == "op" and by_name[ins[0].ref].type == "Reshape":
            ins = (by_name[ins[0].ref].inputs[0],) + ins[1:]
        if ins != op.inputs:
            op = dataclasses.replace(op, inputs=ins)
            changed = True
        if op.type == "Reshape" and ins and ins[0].spec is not None and op.outputs and op.outputs[0] is not None \
                and tuple(ins[0].spec.shape) == tuple(op.outputs[0].shape):
            alias[op.name] = ins[0]
            changed = True
            continue
        by_name[op.name] = op
    if not changed:
        return graph
    outputs = [sub(x) for x in graph.outputs]
    read = {x.ref for op in by_name.values() for x in op.inputs if x.kind == "op"}
    read |= {x.ref for x in outputs if x.kind == "op"}
    kept = [op for op in by_name.values() if op.type != "Reshape" or op.name in read]
    return graph.derived(kept, outputs)


#: a layer's index in its path: ``decoder.layers.N`` (mcore), ``encoder.layers.N`` (legacy ChatGLM2)
_LAYER = re.compile(r"(?<![\w])(?:decoder|encoder)\.layers\.(\d+)(?=\.|$)")
_SCOPE = re.compile(r"(?<=/layers-CellList/)(\d+)(?=-)")


def layer_of(name: str) -> int | None:
    m = _LAYER.search(name or "")
    return int(m.group(1)) if m else None


def shift_layers(text: str, lo: int, hi: int, d: int) -> str:
    """Layer indices in [lo, hi] move by ``d`` in ``decoder.layers.N`` (``encoder.layers.N``) paths."""
    if not text or not d:
        return text
    return _LAYER.sub(lambda m: f"{m.group(0)[:m.start(1) - m.start(0)]}{int(m.group(1)) + d}"
                      if lo <= int(m.group(1)) <= hi
                      else m.group(0), text)


def _shift_scope(text: str, lo: int, hi: int, d: int) -> str:
    if not text or not d:
        return text
    return _SCOPE.sub(lambda m: str(int(m.group(1)) + d) if lo <= int(m.group(1)) <= hi else m.group(0), text)


def replicate_layers(graph: OpGraph, layers: int) -> OpGraph:
    """``graph`` with its decoder grown to ``layers`` layers by copying its last layer.

    Layer k (k >= the extracted count L) is the last layer t = L-1 renamed (``decoder.layers.t`` ->
    ``decoder.layers.k`` in op names, cell paths, scopes and parameters); its inputs from layer t-1 come
    from layer k-1; what followed the decoder reads layer ``layers-1``. MindFormers' layers are identical
    modules, so this is the graph a ``layers``-layer extraction gives (tests: op for op at 4 layers)."""
    ops = graph.ops
    idx = [layer_of(op.cell_path) for op in ops]
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
        other = by_name.get(shift_layers(name, t - 1, t - 1, 1))
        return other is not None and signature(other) == signature(by_name[name])

    def ref_in(x: Input, lo, hi, d) -> Input:
        if x.kind == "op":
            if lo == t - 1 and lo >= 0 and shift_layers(x.ref, lo, lo, 1) != x.ref and not counterpart(x.ref):
                # an operator of layer t-1 that layer t has no counterpart of: computed once and shared by the
                # layers after it (MindSpore's CSE keeps one rotary cos/sin, in the first layer), not per layer
                return x
            return dataclasses.replace(x, ref=shift_layers(x.ref, lo, hi, d))
        if x.kind == "param":
            return dataclasses.replace(x, ref=shift_layers(x.ref, lo, hi, d))
        return x

    def copy_op(op, lo, hi, d, inputs_only=False):
        new_inputs = tuple(ref_in(x, lo, hi, d) for x in op.inputs)
        if inputs_only:
            return dataclasses.replace(op, inputs=new_inputs, attrs=dict(op.attrs))
        return dataclasses.replace(op, name=shift_layers(op.name, lo, hi, d),
                                   cell_path=shift_layers(op.cell_path, lo, hi, d),
                                   full_name=_shift_scope(op.full_name, lo, hi, d), inputs=new_inputs,
                                   attrs=dict(op.attrs))
    ends = {r[-1]: r for r in runs}
    moved = {i for r in runs if shift_layers(ops[r[0]].name, t, t, -1) in inside for i in r}
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
    new_ops, outputs_map = _renumber_unscoped(new_ops)
    for i, op in enumerate(new_ops):
        op.topo_index = i
    params: dict = {}
    tparams = [n for n in graph.params if layer_of(n) == t]
    for name, p in graph.params.items():
        params[name] = p
        if tparams and name == tparams[-1]:
            for k in range(t + 1, layers):
                for n in tparams:
                    q = graph.params[n]
                    nn = shift_layers(n, t, t, k - t)
                    params[nn] = Param(nn, q.spec, q.requires_grad)
    cells: dict = {}
    tcells = [c for c in graph.cells if layer_of(c) == t]
    for c, cls in graph.cells.items():
        cells[c] = cls
        if tcells and c == tcells[-1]:
            for k in range(t + 1, layers):
                for c2 in tcells:
                    cells[shift_layers(c2, t, t, k - t)] = graph.cells[c2]
    outputs = [ref_in(x, t, t, last - t) for x in graph.outputs]
    outputs = [dataclasses.replace(x, ref=outputs_map.get(x.ref, x.ref)) if x.kind == "op" else x for x in outputs]
    return graph.derived(new_ops, outputs, params, cells)


_SUFFIX = re.compile(r"#\d+$")
_TOP_SCOPE = re.compile(r"Default/(\w+)-op(\d+)")


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


def _renumber_unscoped(ops: list) -> tuple[list, dict]:
    """Operators outside any Cell (a functional ``expand_dims`` in a router) are named by their order of appearance
    (``expand_dims``, ``expand_dims#1``, ...): a copied layer's are named as a whole extraction names them, the
    references to them following. Returns the operators and the renaming."""
    ops = _renumber_scopes(ops)
    seen: dict[str, int] = {}
    rename: dict[str, str] = {}
    for op in ops:
        if op.cell_path or layer_of(op.name) is not None:
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


def replicate_anchors(anchors: dict, graph: OpGraph, extracted_layers: int, layers: int) -> dict:
    """Experts' anchors read at ``extracted_layers`` layers, the last layer's copied onto the replicated ones."""
    t = extracted_layers - 1
    out = {}
    for name, a in anchors.items():
        out[name] = a
    for name, a in anchors.items():
        if layer_of(name) == t:
            for k in range(t + 1, layers):
                nn = shift_layers(name, t, t, k - t)
                if nn in graph:
                    out[nn] = dataclasses.replace(a, op=nn)
    return out
