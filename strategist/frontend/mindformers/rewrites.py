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
from ...vocab.graph import OpGraph
from ..layers import grow_layers, move_layers


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


#: a layer's index in its path: mcore's ``decoder.layers.N``, legacy ChatGLM2's ``encoder.layers.N``, legacy LLaMA's
#: ``model.layers.N``
_LAYER = re.compile(r"(?<![\w])(?:decoder|encoder|model)\.layers\.(\d+)(?=\.|$)")
_SCOPE = re.compile(r"(?<=/layers-CellList/)(\d+)(?=-)")


def layer_of(name: str) -> int | None:
    m = _LAYER.search(name or "")
    return int(m.group(1)) if m else None


def shift_layers(text: str, lo: int, hi: int, d: int) -> str:
    """Layer indices in [lo, hi] move by ``d`` in ``decoder.layers.N`` (``encoder.layers.N``, ``model.layers.N``)
    paths."""
    return move_layers(_LAYER, text, lo, hi, d)


def replicate_layers(graph: OpGraph, layers: int) -> OpGraph:
    """``graph`` with its decoder grown to ``layers`` layers by copying its last layer
    (:func:`strategist.frontend.layers.grow_layers` on ``decoder.layers.N``): MindFormers' layers are identical
    modules, so this is the graph a ``layers``-layer extraction gives (tests: op for op at 4 layers)."""
    return grow_layers(graph, layers, _LAYER, _SCOPE)


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
