"""Attention operators: FlashAttentionScore and the rotary position embeddings."""
from __future__ import annotations

import dataclasses
import math

from ...vocab.graph import Op
from .common import const_arg, letters, make_rule, out_shapes, shape_of, tensor_slots
from .factor import FactorRule


#: FlashAttentionScore ``input_layout`` codes (MindSpore's FASInputLayoutMode; 0 and 1 checked on 2.9).
FA_LAYOUTS = {0: "BSH", 1: "BNSD", 2: "SBH", 3: "BSND", 4: "TND"}
#: the query's factors per ``input_layout`` (the key/value's: ``s`` -> ``s2``, ``dq`` -> ``dk``)
FA_Q_FACTORS = {"BSH": ["b", "s", "n"], "BNSD": ["b", "n", "s", "dq"], "SBH": ["s", "b", "n"],
                "BSND": ["b", "s", "n", "dq"], "TND": ["t", "n", "dq"]}


def flash_attention_rule(op: Op) -> FactorRule:
    """FlashAttentionScore: heads (``n``) split by tp, batch by dp, query sequence (``s``) by cp;
    the key/value sequence and head_dim are never split. ``n`` splits must divide both the query
    and the key/value head counts (GQA). Optional inputs: pse [B,N,S1,S2], attn_mask
    ([B,1,S1,S2], [S1,S2] or compressed), drop_mask, padding_mask."""
    code = const_arg(op, 16, 0)
    layout = FA_LAYOUTS.get(code, code if isinstance(code, str) else "BSH")
    heads = const_arg(op, 10, 1) or 1
    q, k = shape_of(op, 0), shape_of(op, 1)
    fq = list(FA_Q_FACTORS[layout])
    fk = [("s2" if f in ("s", "t") else "dk" if f == "dq" else f) for f in fq]
    if layout == "TND":
        fk = ["t2", "n", "dk"]
    kv_heads = heads
    if layout in ("BSH", "SBH"):
        kv_heads = max(1, heads * k[-1] // q[-1])
    elif layout in ("BNSD",):
        kv_heads = k[1]
    elif layout in ("BSND", "TND"):
        kv_heads = k[-2]
    # MQA: FlashAttentionScoreInfo's kv_split_ is false (query heads == key heads x head_num): n2_split_num is 1,
    # the key/value head dim is never split while the query's heads split freely
    mqa = kv_heads == 1 and heads > 1 and layout != "TND"
    if mqa:
        fk = [None if f == "n" else f for f in fk]
    slots, ins = [0, 1, 2], [fq, fk, fk]
    # a constant mask tensor is a strategy input too (deepseek3's compressed [2048, 2048] causal mask: MindSpore
    # reports its row ``(1, 1)``); a compressed mask (sparse_mode 2, 3, 4) is never split
    compressed = const_arg(op, 17, 0) in (2, 3, 4)
    for s in (3, 4, 5, 6):
        shp = shape_of(op, s) if s < len(op.inputs) and op.inputs[s].spec is not None else None
        if shp is None:
            continue
        slots.append(s)
        if s == 6 and len(shp) == 2:
            ins.append(["s", None] if layout != "TND" and not compressed else [None, None])
        elif len(shp) == 4:   # [B, N or 1, S1, S2]
            ins.append(["b", "n" if shp[1] == heads else None, "s", None])
        else:
            ins.append([None] * len(shp))
    outs = []
    for o in out_shapes(op):
        if len(o) == len(q) and o == q:
            outs.append(fq)
        elif len(o) == 4 and layout != "TND":        # softmax_max / softmax_sum [B, N, S1, 8]
            outs.append(["b", "n", "s", None])
        elif len(o) == 3 and layout == "TND":
            outs.append(["t", "n", None])
        else:
            outs.append([None] * len(o))
    # the device matrix, outer -> inner, is MindSpore's (FlashAttentionScoreInfo::InferDevMatrixShape): BSH, BSND
    # and TND [batch, s1, n1], SBH [s1, batch, n1], BNSD [batch, n1, s1]. With cp and tp both > 1 the order says
    # which devices hold which query-sequence slice: glm4's causal mask Cast before the FA (BSH, dp=2,cp=2,tp=2)
    # takes (2, 1, 2, 1) in MindSpore, the zero-cost layout only under [b, s1, n1]
    factors = {"BSH": ["b", "s", "n"], "BSND": ["b", "s", "n"], "TND": ["t", "n"], "SBH": ["s", "b", "n"]}.get(
        layout, ["b", "n", "s"]) + ["s2", "t2", "dq", "dk"]
    factors = [f for f in factors if any(f in t for t in ins + outs)]
    unsplittable = ["s2", "t2", "dq", "dk"]
    r = make_rule(op, factors, ins, outs, slots, unsplittable=unsplittable,
                  sizes=[("n", heads if mqa else math.gcd(heads, kv_heads))])
    # Under a Layout the key/value heads are a factor of their own, n2: MindSpore 2.9 lays a configured Layout out as
    # given (InferSplitNumAndDevMatrixShapeByLayout reads the query's maps; the tuple path's CheckStrategy, "The split
    # num of N1-dim and N2-dim must be equal", is not run), so the kv heads may be split by fewer axes than the query's
    # (MindFormers' GQA layout: q ("mp1", "mp2"), k/v "mp1"; measured: strategy ((2, 1, 4), (2, 1, 2), (2, 1, 2)), the
    # output the query's layout), by others, or not at all. k and v share n2 (MindSpore's compile fails on differing
    # ones), and its split must divide the kv heads (MindSpore crashes, SIGFPE, where it does not). n2 is no reduction.
    kv_ins = [[("n2" if f == "n" else f) for f in t] if k in (1, 2) else t for k, t in enumerate(ins)]
    at = factors.index("n") + 1
    lay = make_rule(op, factors[:at] + ["n2"] + factors[at:], kv_ins, outs, slots,
                    unsplittable=unsplittable, sizes=[("n", heads), ("n2", kv_heads)])
    lay = dataclasses.replace(lay, unreduced=frozenset({"n2"}))
    # MindSpore 2.9 loops over heads (outermost), then the query sequence, then the batch
    return dataclasses.replace(r, enum=tuple(f for f in ("n", "s", "t", "b") if f in factors), layout_rule=lay)


def rotary_rule(op: Op) -> FactorRule:
    """RotaryPositionEmbedding(x[B,N,S,D], cos, sin, mode) / ApplyRotaryPosEmb(q, k, cos, sin, ...):
    the head dim D is whole; the other dims of q/k split; cos/sin follow the dims they share by size."""
    slots = tensor_slots(op)
    x = shape_of(op, slots[0])
    f = letters(len(x))
    if op.type == "ApplyRotaryPosEmb" and len(x) == 4:
        # ApplyRotaryPosEmbInfo (4-D): q/k (dp, 1, mp, 1), their batch and heads equal; seq and head_dim whole; the
        # cos/sin rows are checked to be 1 on dims 0 and 1 (the configured (1, 1, 1, 1)); position_ids whole.
        # (Their tensor map {0, -1, -1, -1} lays cos/sin out split by the batch's axis: not modelled here.)
        ins = [list(f) if len(shape_of(op, s)) == 4 and k < 2 else [None] * len(shape_of(op, s))
               for k, s in enumerate(slots)]
        outs = [f if len(o) == len(x) else [None] * len(o) for o in out_shapes(op)]
        return make_rule(op, f, ins, outs, slots, unsplittable=[f[1], f[3]])
    ins = []
    for s in slots:
        shp = shape_of(op, s)
        if len(shp) == len(x):
            ins.append([g if n == x[i] and n != 1 else None for i, (g, n) in enumerate(zip(f, shp))])
        else:
            ins.append([None] * len(shp))
    outs = [f if len(o) == len(x) else [None] * len(o) for o in out_shapes(op)]
    return make_rule(op, f, ins, outs, slots, unsplittable=[f[-1]])


#: (builder, primitive names) pairs this family registers (:mod:`strategist.engine.rules.registry`)
REGISTRATIONS = (
    (flash_attention_rule, ("FlashAttentionScore",)),
    (rotary_rule, ("RotaryPositionEmbedding", "ApplyRotaryPosEmb")),
)
