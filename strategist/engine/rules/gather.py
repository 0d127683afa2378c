"""Gather and embedding lookups (GatherInfo and its kin: Gather, IndexSelect, SparseGatherV2, Embedding,
EmbeddingLookup), GatherD and GatherNd, with MindSpore's checks of a table split on its gathered axis
(:func:`gather_axis_refused`)."""
from __future__ import annotations

import dataclasses
import math

from ...vocab.graph import Op
from .common import const_arg, int_arg, letters, make_rule, shape_of
from .factor import FactorRule, GatherAxis


def gather_rule(op: Op) -> FactorRule:
    """Gather(params, indices, axis): out = indices.shape + params.shape without ``axis``.
    The gathered ``axis`` of params is a reduction factor (vocab-parallel embedding: each device
    looks up its own rows, zeros elsewhere, and the output is summed)."""
    axis = const_arg(op, 2, 0)
    if op.attrs.get("manual_split") and int(axis or 0) == 0 and op.inputs[1].spec is not None \
            and len(shape_of(op, 1)) >= 1:
        return gather_manual_rule(op)
    return gather_like_rule(op, 0, 1, axis)


def gather_manual_rule(op: Op) -> FactorRule:
    """Gather on a table split unevenly by its ``manual_split`` attribute (GatherInfo's ManualImpl): the device
    matrix is the table's strategy; the indices split their last dimension only, on the table rows' axis (each
    device's field of ids is its rows'), the other dims whole; the output is [indices..., table dims 1..] with the
    indices' last dimension on the rows' axis. No partial sums. Measured (MindSpore 2.9.0, UT
    test_manual_split_2x3): ((4, 2), (1, 1, 4)) on 8 devices, the ReLU after it ((1, 1, 4, 2),)."""
    p, i = shape_of(op, 0), shape_of(op, 1)
    hp = letters(len(p) - 1, "h")
    lead = [None] * (len(i) - 1)
    return make_rule(op, ["r"] + hp, [["r"] + hp, lead + ["r"]], [lead + ["r"] + hp], [0, 1])


def gather_like_rule(op: Op, p_slot: int, i_slot: int, axis) -> FactorRule:
    """Gather's rule over the table in ``p_slot`` and the indices in ``i_slot`` (MindSpore's GatherInfo and
    its subclasses, IndexSelectInfo among them: strategy (table, indices))."""
    p, i = shape_of(op, p_slot), shape_of(op, i_slot)
    axis = int(axis or 0) % len(p)
    fp = letters(len(p), "p")
    fi = letters(len(i), "i")
    out = fp[:axis] + fi + fp[axis + 1:]
    # GatherInfo's device matrix is [indices strategy..., param strategy...] (gather_info.cc NormalImpl);
    # its candidates loop over the param dims first
    r = make_rule(op, fi + fp, [fp, fi], [out], [p_slot, i_slot])
    # a table split on ``axis`` (ShardAxisImpl, indices unsplit) with devices to spare repeats on the left
    # unless the table uses every device: MindSpore's param slice groups are then neighbouring ranks
    # ([[2, 1], [1, 1]] on 4 devices: ranks {0, 1} share a slice, not {0, 2})
    return dataclasses.replace(r, enum=tuple(fp + fi), repeat_left_on=(fp[axis], tuple(fp)),
                               gather_axis=GatherAxis(fp[axis], tuple(fi), len(p), axis, i[0] if i else 0, tuple(fp)))


def table_split_refused(rule, splits: dict, device_num: int) -> str | None:
    """Why MindSpore's EmbeddingInfo refuses a strategy of an operator whose table split must use every device
    (``rule.split_uses_all``), or None: with ids of two or more dims, a table split on fewer devices
    (``GatherInfo::CheckProductValidity``, measured on mindone LLaMA's ids [2, 2048] and table [32000, 256] over 8
    devices: "param_strategy [4, 1] is not supported"; flat ids take it, as MindFormers' vocabulary-parallel
    embeddings ``((1,), (4, 1))`` on 8 compile), or a vocabulary split that does not divide the ids' rows (its
    output is scattered onto them: InferTensorInfo fails)."""
    if not rule.split_uses_all or not any(splits.get(f, 1) > 1 for f in rule.split_uses_all):
        return None
    if len(rule.inputs[0]) >= 2 and math.prod(splits.values()) != device_num:
        return (f"its table split uses {math.prod(splits.values())} of the {device_num} devices; EmbeddingInfo takes a "
                f"table split on every device or none (CheckProductValidity)")
    g = rule.gather_axis
    k = splits.get(g.factor, 1) if g else 1
    if k > 1 and g.index_rows % k:
        return f"its vocabulary split {k} does not divide the ids' {g.index_rows} rows (InferTensorInfo)"
    return None


def gather_axis_refused(g: GatherAxis, splits: dict, device_num: int) -> str | None:
    """Why MindSpore's GatherInfo refuses a table split on its gathered axis, or None: its checks of such a split
    (``CheckSplitAxisStrategy``, ``GetGatherMode``), which refuse a generated candidate and a configured strategy
    alike ("operator Gather SetCostUnderStrategy failed").

    - Only a 1-d or 2-d table (``ShardAxisImpl::CheckStrategy``).
    - With devices to spare (repeated calculation), only axis 0, split alone: measured on gpt_nn's position table
      [16, 64], ``((2, 1), (1,))`` taken with 4 devices repeating, ``((2, 2), (1,))`` and ``((2, 1), (2,))``
      refused; LLaMA's table ((2, 2), (1, 1)) on 8 refused, ((2, 1), (1, 1)) taken.
    - Split indices: one-dimensional ones (``nn.Embedding`` flattens its ids) take any such table split on every
      device (MindSpore 2.9.0's "Sharding index, dp and mp" mode, device matrix [ids, table...]: the GPT's
      ((4, 1), (2,)), ((2, 2), (2,)), ((2, 1), (4,)) on 8). Indices of more dimensions: axis 0, a 2-d table and 2-d
      indices, each split on dim 0 only, together on every device and neither alone, is ``SHARD_BATCH_AND_AXIS``
      (Megatron's vocabulary-parallel embedding, ((8, 1), (8, 1)) on 64); any other split is ``ShardAxisImpl``,
      which refuses split indices ("param is split at dim (axis), index can't be split"): LLaMA's [B, S] ids with
      the tables ((2, 4), (8, 1)) on 64, ((2, 2), (2, 1)) and ((4, 1), (1, 2)) on 8 refused, ((4, 1), (2, 1))
      taken."""
    k = splits.get(g.factor, 1)
    if k == 1:
        return None
    if g.table_rank > 2:
        return "a table of more than 2 dims cannot be split on its gathered axis: leave that axis whole"
    if math.prod(splits.values()) != device_num and (g.axis != 0 or any(x > 1 for f, x in splits.items()
                                                                        if f != g.factor)):
        return ("a table split on its gathered axis with devices to spare takes no other split (no repeated "
                "calculation): use every device, or split only the gathered axis")
    idx = [splits.get(f, 1) for f in g.index_factors]
    if math.prod(idx) == 1 or len(idx) < 2:
        return None
    table = [splits.get(f, 1) for f in g.table_factors]
    if g.axis == 0 and len(table) == 2 and len(idx) == 2 and table[1] == 1 and idx[1] == 1 \
            and k * idx[0] == device_num and device_num not in (k, idx[0]):
        return None
    return ("a table split on its gathered axis takes split indices only when the table and the indices are each "
            "split on dim 0 alone, together on every device (GatherInfo ShardAxisImpl)")


def index_select_rule(op: Op) -> FactorRule:
    """IndexSelect(x, axis, index): strategy (x, index); out = x with ``axis`` replaced by the
    index's dim. MindSpore's IndexSelectInfo is a GatherInfo (gather_info.h ``class IndexSelectInfo final :
    public GatherInfo``): Gather's rule with x as the table, its device matrix [index, x...], and its checks of a
    split ``axis`` (measured, deepseek3's MoE stand-in: x [32768, 7168] on axis 0 over 8 devices lists 18
    strategies, ``((2, 1), (2,))`` and ``((2, 2), (1,))`` fail SetCostUnderStrategy: a split axis beside any other
    split must use every device)."""
    return gather_like_rule(op, 0, 2, int_arg(const_arg(op, 1, 0), 0))


def sparse_gather_rule(op: Op) -> FactorRule:
    return gather_rule(op)


def embedding_rule(op: Op) -> FactorRule:
    """Embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq) (mint):
    strategy (input, weight); out = input.shape + [H]. MindSpore's EmbeddingInfo refuses any split
    of the indices (checked: ``((2, 1), (1, 1))``, ``((8, 1), (1, 1))`` refused). A vocabulary split is a
    reduction factor (each device looks up its own rows). Measured on 8 devices (MindSpore 2.9.0 itself, and the
    EmbeddingInfo candidates of MindFormers' qwen3 and mindone's LLaMA in verify's GLOG_v=1 log): a table split
    must use every device (GatherInfo::CheckProductValidity, "param_strategy [2, 1] is not supported": ``((1, 1),
    (2, 1))``, ``((1, 1), (2, 2))``, ``((1,), (2, 1))`` refused; ``((1,), (8, 1))``, ``((1,), (2, 4))`` taken),
    and with 1-D indices the unsplit-vocabulary ("normal") mode fails its tensor-info inference
    ("tensor_map_origin_ size must be equal to tensor_shape_origin_ size": ``((1,), (1, 1))``, ``((1,), (1, 8))``
    refused, while 2-D indices take ``((1, 1), (1, 1))`` and ``((1, 1), (1, 8))``)."""
    i = shape_of(op, 0)
    rule = make_rule(op, ["v", "h"], [[None] * len(i), ["v", "h"]], [[None] * len(i) + ["h"]], [0, 1])
    # the vocabulary split reduce-scatters onto the output's dim 0, as Gather's table-row split does (verify's
    # GLOG_v=1 log of deepseek3: EmbeddingInfo's candidates ((1), (2, 4)), ((1), (4, 2)), ((1), (8, 1)) give the
    # Reshape after it the input layouts [2, 4] / [4, 2] tensor map [1, 0] and [8] tensor map [0, -1], dim 0 split
    # by the vocabulary's devices); a split that does not divide the ids' dim 0 fails InferTensorInfo ("0th input
    # shape is not divisible"), so the generator only splits the vocabulary by divisors of both (mindone LLaMA's
    # ids [2, 2048], vocabulary 32000 on 8 devices: ((1, 1), (2, 4)) taken, ((1, 1), (4, 2)) and ((1, 1), (8, 1))
    # refused). CheckProductValidity refuses a table split on fewer than every device, the hidden dim's alone
    # too ("param_strategy [1, 2] is not supported", [1, 4] likewise): only ((1, 1), (1, 1)), ((1, 1), (1, 8))
    # and ((1, 1), (2, 4)) are generated there
    gather = GatherAxis("v", (), 2, 0, i[0])
    vocab = shape_of(op, 1)[0]
    return dataclasses.replace(rule, split_uses_all=frozenset({"v", "h"}), gather_axis=gather,
                               cand_sizes=(("v", math.gcd(vocab, i[0])),),
                               must_split=frozenset({"v"}) if len(i) == 1 else frozenset())


def embedding_lookup_rule(op: Op) -> FactorRule:
    """EmbeddingLookup(params, indices, offset): Gather on axis 0 (params first)."""
    p, i = shape_of(op, 0), shape_of(op, 1)
    fp = letters(len(p), "p")
    fi = letters(len(i), "i")
    return make_rule(op, fp + fi, [fp, fi], [fi + fp[1:]], [0, 1])


def gatherd_rule(op: Op) -> FactorRule:
    """GatherD(x, dim, index): strategy (x, index); every dim but ``dim`` is shared by x, index and
    the output; ``dim`` cannot be split."""
    x = shape_of(op, 0)
    dim = int_arg(const_arg(op, 1, 0), 0) % len(x)
    f = letters(len(x))
    idx = 2
    return make_rule(op, f, [f, f], [f], [0, idx], unsplittable=[f[dim]])


def gather_nd_rule(op: Op) -> FactorRule:
    """GatherNd(x, indices[..., k]): indices' batch dims split the output's leading dims; x is not
    split on its first k dims; x's remaining dims follow the output's trailing dims."""
    x, i = shape_of(op, 0), shape_of(op, 1)
    k = i[-1] if i else 1
    fx = letters(len(x), "x")
    fi = letters(len(i) - 1, "i")
    return make_rule(op, fx + fi, [fx, fi + [None]], [fi + fx[k:]], [0, 1], unsplittable=fx[:k])


#: (builder, primitive names) pairs this family registers (:mod:`strategist.engine.rules.registry`)
REGISTRATIONS = (
    (gather_rule, ("Gather", "GatherV2")),
    (index_select_rule, ("IndexSelect",)),
    (sparse_gather_rule, ("SparseGatherV2",)),
    (embedding_rule, ("Embedding",)),
    (embedding_lookup_rule, ("EmbeddingLookup",)),
    (gatherd_rule, ("GatherD",)),
    (gather_nd_rule, ("GatherNd",)),
)
