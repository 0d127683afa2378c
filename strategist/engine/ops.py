"""Per-operator sharding rules: one registry, operators described by their dimension factors.

Every operator is a :class:`FactorRule`, as in Shardy's op sharding rules and DTensor's einsum
strategies: each dimension of each strategy input and output names a *factor*; a factor shared by
several tensors must be split the same way (that is where MindSpore's strategy constraints come from:
MatMul's contracted dims, element-wise inputs, ...); a factor that appears in inputs but not in the
outputs is a *reduction* factor: splitting it leaves partial sums the operator reduces itself
(MatMul's ``k`` -> AllReduce, or ReduceScatter when ``out_strategy`` splits the output by it).

A MindSpore strategy tuple gives one split per dimension of each strategy input; the operator's
device matrix is ``[split(f) for f in factors] + [repeat]`` (MindSpore appends the repeated-calculation
count on the right), and every tensor's :class:`~strategist.vocab.layout.Layout` follows from its factors.

The registry (``RULES``) maps primitive names to builders ``(op) -> FactorRule``. Most families
are one line; Reshape (:func:`reshape_layout`), Gather, StridedSlice and FlashAttentionScore have
small builders. An operator with no rule gets :func:`unknown_rule`: every dimension unsplittable,
so its inputs are gathered to replicated — conservative, never a crash, and a warning names it.

>>> from strategist.frontend.graph import Input, Op, TensorSpec
>>> x, w = TensorSpec((256, 784), "float32"), TensorSpec((784, 64), "float32")
>>> mm = Op("mm", "MatMul", "", "", "mm", "", (Input("input", "x", spec=x), Input("param", "w", spec=w),
...         Input("const", value=False), Input("const", value=False)), (TensorSpec((256, 64), "float32"),))
>>> s = shard(mm, ((2, 1), (1, 4)), 8)
>>> [str(l) for l in s.inputs], str(s.outputs[0])
(['[256, 784]@[2, 1, 4][d0,-]', '[784, 64]@[2, 1, 4][-,d2]'], '[256, 64]@[2, 1, 4][d0,d2]')
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, NamedTuple

from ..errors import StrategyError
from ..vocab.graph import Op, ShardLayout
from ..vocab.layout import Layout

log = logging.getLogger("strategist")


class GatherAxis(NamedTuple):
    """Gather's table split on its gathered axis (see ``FactorRule.gather_axis``)."""
    factor: str                   # the table's factor on the gathered axis
    index_factors: tuple          # the indices' factors
    table_rank: int
    axis: int
    index_rows: int               # the indices' dim-0 size
    table_factors: tuple = ()     # the table's factors, per dim


@dataclass(frozen=True)
class FactorRule:
    """Factors of one operator.

    ``inputs``/``outputs``: per strategy tensor, per dimension, a factor name or ``None`` (a
    broadcast size-1 dim or a dim that is never split). ``slots``: which ``op.inputs`` are the
    strategy inputs, in strategy order. ``sizes``: units a factor's split must divide (heads for
    FlashAttention's ``n``; else the dimension sizes are checked directly).
    """

    factors: tuple[str, ...]
    inputs: tuple[tuple[str | None, ...], ...]
    outputs: tuple[tuple[str | None, ...], ...]
    slots: tuple[int, ...]
    input_shapes: tuple[tuple[int, ...], ...]
    output_shapes: tuple[tuple[int, ...], ...]
    unsplittable: frozenset = frozenset()
    sizes: tuple[tuple[str, int], ...] = ()
    reduce: str = "sum"        # how reduction factors combine (sum, max, min)
    known: bool = True
    batch_parallel: bool = False   # MindSpore's BatchParallelInfo: one candidate, dim 0 over all devices
    #: MindSpore's strategy rows where they are not the input tensors' dims (OneHot's first row covers
    #: the output [indices..., depth]): per row its factors, and the shape the row is checked against
    rows: tuple = ()
    row_shapes: tuple = ()
    #: the order MindSpore's GenerateStrategies loops over the factors (outermost first), where it
    #: is not the device-matrix order (FlashAttentionScore: heads, then sequence, then batch)
    enum: tuple = ()
    #: per factor, the size MindSpore's candidate generation divides instead of the dimension sizes,
    #: without limiting a configured strategy (Tile enumerates over its multiples)
    cand_sizes: tuple[tuple[str, int], ...] = ()
    #: a BatchParallelInfo subclass of MindSpore's own (not the fallback for an operator without an
    #: OperatorInfo): no StandAlone fallback for a scalar output
    batch_info: bool = False
    #: (factor, factors): a split of ``factor`` that leaves devices over puts the repeated-calculation
    #: count on the LEFT of the device matrix unless the ``factors`` use all devices or none (Gather's
    #: table split on its gathered axis: ShardAxisImpl::SetAttribute, repeated_num_in_dev_matrix_right_)
    repeat_left_on: tuple = ()
    #: candidate generation only (a configured strategy is not checked against these): factors every
    #: generated strategy MindSpore keeps splits ...
    must_split: frozenset = frozenset()
    #: ... and factors whose split makes it keep only strategies using every device (GatherInfo's
    #: CheckProductValidity on a split table axis); the others fail SetCostUnderStrategy and are dropped
    split_uses_all: frozenset = frozenset()
    #: Gather's table split on its gathered axis (gather_info.cc ShardAxisImpl / ShardBatchAndAxis):
    #: a :class:`GatherAxis`. Which strategies with the axis split MindSpore takes is :func:`gather_axis_refused`
    #: (CheckSplitAxisStrategy, GetGatherMode), for generated candidates and configured strategies alike. Layouts: axis 0 split with the
    #: indices whole, the output's dim 0 is split by the axis' devices (``ShardAxisImpl::InferTensorMap``: its
    #: forward is a ReduceScatter, unless dim 0 does not divide: AllReduce)
    gather_axis: "GatherAxis | tuple" = ()
    #: candidate generation only: factors MindSpore's generator splits equally (Outer's two 1-D inputs, which
    #: ArithmeticBase's broadcast generation aligns as one dimension), each still a device-matrix axis of its own
    tied: tuple = ()
    #: rank-0 strategy rows a configured strategy may add after its inputs', which MindSpore's CheckStrategy pops
    #: (MaskedFill's 0-d ``value``): accepted and kept, but not an input of the rule
    dropped_rows: int = 0
    #: the rule a configured ``Layout`` is checked and laid out under, where it is not this one (FlashAttentionScore:
    #: the key/value heads are a factor of their own, see :func:`flash_attention_rule`)
    layout_rule: "FactorRule | None" = None
    #: factors in inputs only that are no reduction (FlashAttentionScore's key/value heads under a Layout)
    unreduced: frozenset = frozenset()

    @property
    def strategy_rows(self) -> tuple[tuple[str | None, ...], ...]:
        return self.rows or self.inputs

    @property
    def strategy_shapes(self) -> tuple[tuple[int, ...], ...]:
        return self.row_shapes or self.input_shapes

    @property
    def reductions(self) -> tuple[str, ...]:
        if self.batch_parallel:
            # BatchParallelInfo inserts no forward communication: a loss it reduces stays per device (the loss
            # divisor scales the gradient). Measured in MindSpore's training graph: no AllReduce on gpt_nn's
            # SparseSoftmaxCrossEntropyWithLogits (verify --communication)
            return ()
        out = {f for t in self.outputs for f in t if f} | self.unreduced
        return tuple(f for f in self.factors if f not in out and any(f in t for t in self.inputs))

    def factor_size(self, f: str) -> int:
        """Largest split the factor admits (gcd of its dims, or its declared unit count)."""
        sizes = dict(self.sizes)
        if f in sizes:
            return sizes[f]
        dims = [n for shape, t in zip(self.input_shapes + self.output_shapes, self.inputs + self.outputs)
                for n, g in zip(shape, t) if g == f]
        return math.gcd(*dims) if dims else 1


@dataclass(frozen=True)
class Sharding:
    """An operator under one strategy: its device matrix, every tensor's layout, its own communication."""

    strategy: tuple[tuple[int, ...], ...]
    dev_matrix: tuple[int, ...]
    splits: dict
    inputs: tuple[Layout, ...]
    outputs: tuple[Layout, ...]
    partial_axes: tuple[int, ...]                 # reduction factors' axes: output partial sums
    grad_partial: tuple[tuple[int, ...], ...]     # per input: axes its gradient is partial over
    repeat: int = 1
    #: per input, the layout the operator all-gathers it to before computing (an ``enable_nd_tp`` MatMul's
    #: inputs), or None: its own AllGather forward, ReduceScatter of the gradient backward
    gathered: tuple = ()

    @property
    def partition_num(self) -> int:
        return math.prod(x for s in self.strategy for x in s)


# --------------------------------------------------------------------------------------
# builders


def _tensor_slots(op: Op) -> list[int]:
    return [i for i, x in enumerate(op.inputs) if x.kind != "const" and x.spec is not None]


def _shape(op: Op, slot: int) -> tuple[int, ...]:
    x = op.inputs[slot]
    if x.spec is not None:
        return tuple(x.spec.shape)
    return ()  # a scalar constant: a rank-0 strategy input, strategy ()


def _out_shapes(op: Op) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(o.shape) if o is not None else () for o in op.outputs)


def _const(op: Op, slot: int, default=None):
    if slot < len(op.inputs) and op.inputs[slot].kind == "const":
        return op.inputs[slot].value
    return default


def _letters(n: int, prefix: str = "d") -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def _rule(op, factors, ins, outs, slots, unsplittable=(), sizes=(), reduce="sum"):
    in_shapes = tuple(_shape(op, s) for s in slots)
    return FactorRule(tuple(factors), tuple(tuple(t) for t in ins), tuple(tuple(t) for t in outs),
                      tuple(slots), in_shapes, _out_shapes(op), frozenset(unsplittable),
                      tuple(sizes), reduce)


def elementwise(op: Op, slots: list[int] | None = None) -> FactorRule:
    """Broadcasting element-wise operator: output dims are factors; inputs align right, size-1 dims
    (broadcast) are ``None``; scalar constants are rank-0 inputs. Every output has the output's factors."""
    if slots is None:
        # tensors (a tensor constant too, as a rank-0 input); a Python scalar argument (Muls' value,
        # AddExt's alpha) is not a strategy input in MindSpore
        slots = [i for i, x in enumerate(op.inputs) if x.kind != "const" or x.spec is not None]
    out = _out_shapes(op)[0] if op.outputs else ()
    factors = _letters(len(out))
    ins = []
    for s in slots:
        shp = _shape(op, s)
        off = len(out) - len(shp)
        ins.append([None if (n == 1 and out[off + i] != 1) else factors[off + i] for i, n in enumerate(shp)])
    outs = [factors if len(o) == len(out) else [None] * len(o) for o in _out_shapes(op)]
    r = _rule(op, factors, ins, outs, slots)
    fixed = _broadcast_unsearched(r)
    return FactorRule(**{**r.__dict__, "cand_sizes": tuple((f, 1) for f in fixed)}) if fixed else r


def _broadcast_unsearched(rule: FactorRule) -> list[str]:
    """Factors MindSpore's candidate search never splits for two inputs of different ranks.

    ``GenerateStrategiesForBroadcast{Right,Left}`` (operator_info.cc, behind
    ``ArithmeticBase::GenerateOpStrategies``' ``GenerateStrategiesWithBroadcast``) enumerates the
    splits of the LONGER input's shape, copies its trailing dims to the shorter input and resets to 1
    only the shorter input's LEADING run of size-1 dims. So (a) a dim that is 1 in the longer input
    is never split, and (b) a size-1 dim of the shorter input after its first non-1 dim keeps the
    longer input's split: ``SetCostUnderStrategy`` then fails ("shape value 1 at dim index 1 cannot be
    divisible by strategy value 2") and the candidate is dropped. Both leave that factor at 1 in
    every generated candidate (random net 259: Minimum([8,8,2], w[8,1]) has no ((1,1,2),(1,1))).
    Equal ranks (``...BroadcastBoth``: every size-1 dim reset) and a rank-0 input search freely.
    Only candidate generation is limited; a configured strategy may still split these factors."""
    if len(rule.inputs) != 2:
        return []
    sa, sb = rule.input_shapes
    if len(sa) == len(sb) or not sa or not sb:
        return []
    sbig, ssmall = (sa, sb) if len(sa) > len(sb) else (sb, sa)
    if len(sbig) != len(rule.factors):
        return []
    off = len(sbig) - len(ssmall)
    lead = next((i for i, n in enumerate(ssmall) if n != 1), len(ssmall))   # leading run of 1s
    fixed = []
    for j, (n, f) in enumerate(zip(sbig, rule.factors)):
        i = j - off
        if n == 1 or (i >= lead and ssmall[i] == 1):
            fixed.append(f)
    return fixed


def unary(op: Op) -> FactorRule:
    return elementwise(op, _tensor_slots(op)[:1])


def _axes(value, rank: int) -> tuple[int, ...]:
    if value is None or value == ():
        return tuple(range(rank))
    if isinstance(value, int):
        value = (value,)
    return tuple(sorted(a % rank for a in value))


def reduce_rule(op: Op) -> FactorRule:
    """Reduce{Sum,Mean,Max,Min,Prod}: reduced dims are reduction factors (partial results)."""
    shp = _shape(op, 0)
    axes = _axes(_const(op, 1, ()), len(shp))
    keep = bool(_const(op, 2, op.attrs.get("keep_dims", False)))
    factors = _letters(len(shp))
    out = [None if i in axes else f for i, f in enumerate(factors)] if keep else \
        [f for i, f in enumerate(factors) if i not in axes]
    kind = {"ReduceMax": "max", "ReduceMin": "min", "ReduceProd": "prod"}.get(op.type, "sum")
    return _rule(op, factors, [factors], [out], [0], reduce=kind)


def softmax_rule(op: Op) -> FactorRule:
    """Softmax/LogSoftmax: the softmax axes cannot be split."""
    shp = _shape(op, 0)
    axes = _axes(_const(op, 1, op.attrs.get("axis", -1)), len(shp))
    factors = _letters(len(shp))
    return _rule(op, factors, [factors], [factors], [0], unsplittable=[factors[a] for a in axes])


def matmul_rule(op: Op) -> FactorRule:
    """MatMul / BatchMatMul: ``...ik,...kj->...ij`` (transposes swap the last two dims), batch dims
    broadcast from the right; ``k`` is the reduction factor. Device matrix order: batch, i, k, j."""
    a, b = _shape(op, 0), _shape(op, 1)
    ta, tb = bool(_const(op, 2, False)), bool(_const(op, 3, False))
    nb = max(len(a), len(b)) - 2
    batch = _letters(nb, "b")
    fa = batch[nb - (len(a) - 2):] + (["k", "i"] if ta else ["i", "k"])
    fb = batch[nb - (len(b) - 2):] + (["j", "k"] if tb else ["k", "j"])
    out = _out_shapes(op)[0]
    for t, shp in ((fa, a), (fb, b)):
        for i, n in enumerate(shp[:-2]):
            if n == 1 and out[len(out) - len(shp) + i] != 1:
                t[i] = None
    return _rule(op, batch + ["i", "k", "j"], [fa, fb], [batch + ["i", "j"]], [0, 1])


def transpose_rule(op: Op) -> FactorRule:
    shp = _shape(op, 0)
    perm = _const(op, 1, tuple(range(len(shp))))
    factors = _letters(len(shp))
    return _rule(op, factors, [factors], [[factors[p] for p in perm]], [0])


def expand_dims_rule(op: Op) -> FactorRule:
    shp = _shape(op, 0)
    factors = _letters(len(shp))
    out = list(factors)
    out.insert(_const(op, 1, 0) % (len(shp) + 1), None)
    return _rule(op, factors, [factors], [out], [0])


def squeeze_rule(op: Op) -> FactorRule:
    shp = _shape(op, 0)
    factors = _letters(len(shp))
    axes = op.attrs.get("axis") or _const(op, 1, ())
    axes = _axes(axes, len(shp)) if axes not in (None, ()) else tuple(i for i, n in enumerate(shp) if n == 1)
    ins = [None if i in axes else f for i, f in enumerate(factors)]
    return _rule(op, factors, [ins], [[f for i, f in enumerate(factors) if i not in axes]], [0])


def strided_slice_rule(op: Op) -> FactorRule:
    """StridedSlice: only dimensions taken whole (begin 0, end = size, stride 1) may be split."""
    shp = _shape(op, 0)
    out = _out_shapes(op)[0]
    begin, end, strides = (_const(op, k, ()) or () for k in (1, 2, 3))
    factors = _letters(len(shp))
    sliced = set()
    for i, n in enumerate(shp):
        b = begin[i] if i < len(begin) else 0
        e = end[i] if i < len(end) else n
        st = strides[i] if i < len(strides) else 1
        if not (b == 0 and e >= n and st == 1):
            sliced.add(factors[i])
    if len(out) != len(shp):   # masks changed the rank: keep it safe
        return unknown_rule(op)
    return _rule(op, factors, [factors], [factors], [0], unsplittable=sliced)


def concat_rule(op: Op) -> FactorRule:
    # ConcatInfo's strategy has a row per tuple element, constant tensors included (MindFormers' MoE padding
    # ``concat((pad_tokens, tokens))``: MindSpore reports ((1, 1, 1), (1, 1, 1)) for [1, 128, H] and [1, T, H])
    slots = [i for i, x in enumerate(op.inputs) if x.spec is not None and (x.kind != "const" or x.spec.shape)]
    out = _out_shapes(op)[0]
    axis = _const(op, len(op.inputs) - 1, op.attrs.get("axis", 0)) % len(out)
    factors = _letters(len(out))
    return _rule(op, factors, [factors] * len(slots), [factors], slots, unsplittable=[factors[axis]])


def split_rule(op: Op) -> FactorRule:
    shp = _shape(op, 0)
    axis = _const(op, 1, op.attrs.get("axis", 0)) % len(shp)
    factors = _letters(len(shp))
    return _rule(op, factors, [factors], [factors] * len(op.outputs), [0], unsplittable=[factors[axis]])


def gather_rule(op: Op) -> FactorRule:
    """Gather(params, indices, axis): out = indices.shape + params.shape without ``axis``.
    The gathered ``axis`` of params is a reduction factor (vocab-parallel embedding: each device
    looks up its own rows, zeros elsewhere, and the output is summed)."""
    axis = _const(op, 2, 0)
    if op.attrs.get("manual_split") and int(axis or 0) == 0 and op.inputs[1].spec is not None \
            and len(_shape(op, 1)) >= 1:
        return gather_manual_rule(op)
    return gather_like_rule(op, 0, 1, axis)


def gather_manual_rule(op: Op) -> FactorRule:
    """Gather on a table split unevenly by its ``manual_split`` attribute (GatherInfo's ManualImpl): the device
    matrix is the table's strategy; the indices split their last dimension only, on the table rows' axis (each
    device's field of ids is its rows'), the other dims whole; the output is [indices..., table dims 1..] with the
    indices' last dimension on the rows' axis. No partial sums. Measured (MindSpore 2.9.0, UT
    test_manual_split_2x3): ((4, 2), (1, 1, 4)) on 8 devices, the ReLU after it ((1, 1, 4, 2),)."""
    p, i = _shape(op, 0), _shape(op, 1)
    hp = _letters(len(p) - 1, "h")
    lead = [None] * (len(i) - 1)
    return _rule(op, ["r"] + hp, [["r"] + hp, lead + ["r"]], [lead + ["r"] + hp], [0, 1])


def gather_like_rule(op: Op, p_slot: int, i_slot: int, axis) -> FactorRule:
    """Gather's rule over the table in ``p_slot`` and the indices in ``i_slot`` (MindSpore's GatherInfo and
    its subclasses, IndexSelectInfo among them: strategy (table, indices))."""
    p, i = _shape(op, p_slot), _shape(op, i_slot)
    axis = int(axis or 0) % len(p)
    fp = _letters(len(p), "p")
    fi = _letters(len(i), "i")
    out = fp[:axis] + fi + fp[axis + 1:]
    # GatherInfo's device matrix is [indices strategy..., param strategy...] (gather_info.cc NormalImpl);
    # its candidates loop over the param dims first
    r = _rule(op, fi + fp, [fp, fi], [out], [p_slot, i_slot])
    # a table split on ``axis`` (ShardAxisImpl, indices unsplit) with devices to spare repeats on the left
    # unless the table uses every device: MindSpore's param slice groups are then neighbouring ranks
    # ([[2, 1], [1, 1]] on 4 devices: ranks {0, 1} share a slice, not {0, 2})
    return FactorRule(**{**r.__dict__, "enum": tuple(fp + fi), "repeat_left_on": (fp[axis], tuple(fp)),
                         "gather_axis": GatherAxis(fp[axis], tuple(fi), len(p), axis, i[0] if i else 0, tuple(fp))})


def onehot_rule(op: Op) -> FactorRule:
    """OneHot(indices, depth, on, off): out = indices.shape + [depth] (axis -1). MindSpore reads the
    first strategy row against the OUTPUT (``((8, 1), (), ())`` for 1-D indices on 8 devices) and may
    split the depth ``c``; on/off are rank-0 tensor inputs; depth is a Python int, not an input."""
    i = _shape(op, 0)
    fi = _letters(len(i), "i")
    slots = [0] + [s for s in _tensor_slots(op)[1:]]
    r = _rule(op, fi + ["c"], [fi] + [[] for _ in slots[1:]], [fi + ["c"]], slots)
    return FactorRule(**{**r.__dict__, "rows": (tuple(fi + ["c"]),) + r.inputs[1:],
                         "row_shapes": (r.output_shapes[0],) + r.input_shapes[1:]})


def norm_rule(op: Op, norm_from: int | None = None) -> FactorRule:
    """RmsNorm(x, gamma) / LayerNorm(x, gamma, beta): normalised dims unsplittable; statistics
    outputs keep the leading dims with size-1 tails. gamma and beta take x's trailing dims, which may reach
    before the normalised ones (LayerNorm's ``begin_params_axis`` < ``begin_norm_axis``: a split there is
    theirs too, LayerNormInfo::GenerateGammaAndBetaStrategies; UT test_layer_norm's net)."""
    x = _shape(op, 0)
    slots = _tensor_slots(op)
    if norm_from is None:
        g = _shape(op, slots[1]) if len(slots) > 1 else x[-1:]
        norm_from = len(x) - len(g)
    factors = _letters(len(x))
    normed = factors[norm_from:]
    ins = [factors] + [factors[len(x) - len(_shape(op, s)):] for s in slots[1:]]
    outs = [factors if len(o) == len(x) and o == x else factors[:norm_from] + [None] * (len(o) - norm_from)
            for o in _out_shapes(op)]
    return _rule(op, factors, ins, outs, slots, unsplittable=normed)


def layer_norm_rule(op: Op) -> FactorRule:
    x = _shape(op, 0)
    axis = op.attrs.get("begin_norm_axis", _const(op, 3, -1))
    return norm_rule(op, axis % len(x) if isinstance(axis, int) else None)


def softmax_ce_rule(op: Op) -> FactorRule:
    """SoftmaxCrossEntropyWithLogits(logits[N,C], labels[N,C]) -> (loss[N], dlogits[N,C]); C unsplit."""
    return _rule(op, ["n", "c"], [["n", "c"], ["n", "c"]], [["n"], ["n", "c"]], [0, 1], unsplittable=["c"])


def sparse_softmax_ce_rule(op: Op) -> FactorRule:
    """SparseSoftmaxCrossEntropyWithLogits(logits[N,C], labels[N]) -> mean loss; N reduces.

    MindSpore's SparseSoftmaxCrossEntropyWithLogitsInfo is a BatchParallelInfo with every input's
    split flag set: its one candidate splits dim 0 of logits and labels over all devices
    (``((16, 1), (16,))`` on 16 devices, measured), also when the loss is a scalar."""
    outs = [["n"] + [None] * (len(o) - 1) if o else [] for o in _out_shapes(op)]
    r = _rule(op, ["n"], [["n", None], ["n"]], outs, [0, 1])
    return FactorRule(**{**r.__dict__, "batch_parallel": True, "batch_info": True})


def tile_rule(op: Op) -> FactorRule:
    """Tile(x, multiples) as MindSpore 2.9's TileInfo: the strategy has one entry per output dimension
    (the multiples). A dimension with multiple m > 1 may be split by a divisor of m: the output is
    split, the input stays whole (each device tiles fewer copies). A dimension with m == 1 splits
    input and output alike. Candidates are generated over the multiples themselves (tile_info.cc
    ``GenerateOpStrategies`` passes ``full_multiples_`` as the shape), so they never split an m == 1
    dimension; a configured strategy may (``CheckStrategy`` checks such dims against the input)."""
    shp = _shape(op, 0)
    out = _out_shapes(op)[0]
    mult = tuple(_const(op, 1, (1,) * len(out)))
    if len(mult) < len(out):
        mult = (1,) * (len(out) - len(mult)) + mult
    factors = _letters(len(out))
    off = len(out) - len(shp)
    ins = [factors[off + i] if mult[off + i] == 1 else None for i in range(len(shp))]
    r = _rule(op, factors, [ins], [factors], [0])
    check = tuple(m if m != 1 else (shp[i - off] if i >= off else 1) for i, m in enumerate(mult))
    return FactorRule(**{**r.__dict__, "rows": (tuple(factors),), "row_shapes": (check,),
                         "cand_sizes": tuple(zip(factors, mult))})


def conv2d_rule(op: Op) -> FactorRule:
    """Conv2D (NCHW): batch ``n`` and output channels ``o`` split freely; input channels ``c`` are a
    reduction factor; spatial dims are never split (no halo exchange)."""
    return _rule(op, ["n", "c", "o", "h", "w"], [["n", "c", "h", "w"], ["o", "c", None, None]],
                 [["n", "o", "h", "w"]], [0, 1], unsplittable=["h", "w"])


#: FlashAttentionScore ``input_layout`` codes (MindSpore's FASInputLayoutMode; 0 and 1 checked on 2.9).
FA_LAYOUTS = {0: "BSH", 1: "BNSD", 2: "SBH", 3: "BSND", 4: "TND"}
FA_Q_FACTORS = {"BSH": ["b", "s", "n"], "BNSD": ["b", "n", "s", "dq"], "SBH": ["s", "b", "n"],
                "BSND": ["b", "s", "n", "dq"], "TND": ["t", "n", "dq"]}


def flash_attention_rule(op: Op) -> FactorRule:
    """FlashAttentionScore: heads (``n``) split by tp, batch by dp, query sequence (``s``) by cp;
    the key/value sequence and head_dim are never split. ``n`` splits must divide both the query
    and the key/value head counts (GQA). Optional inputs: pse [B,N,S1,S2], attn_mask
    ([B,1,S1,S2], [S1,S2] or compressed), drop_mask, padding_mask."""
    code = _const(op, 16, 0)
    layout = FA_LAYOUTS.get(code, code if isinstance(code, str) else "BSH")
    heads = _const(op, 10, 1) or 1
    q, k = _shape(op, 0), _shape(op, 1)
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
    compressed = _const(op, 17, 0) in (2, 3, 4)
    for s in (3, 4, 5, 6):
        shp = _shape(op, s) if s < len(op.inputs) and op.inputs[s].spec is not None else None
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
    for o in _out_shapes(op):
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
    r = _rule(op, factors, ins, outs, slots, unsplittable=unsplittable,
              sizes=[("n", heads if mqa else math.gcd(heads, kv_heads))])
    # Under a Layout the key/value heads are a factor of their own, n2: MindSpore 2.9 lays a configured Layout out as
    # given (InferSplitNumAndDevMatrixShapeByLayout reads the query's maps; the tuple path's CheckStrategy, "The split
    # num of N1-dim and N2-dim must be equal", is not run), so the kv heads may be split by fewer axes than the query's
    # (MindFormers' GQA layout: q ("mp1", "mp2"), k/v "mp1"; measured: strategy ((2, 1, 4), (2, 1, 2), (2, 1, 2)), the
    # output the query's layout), by others, or not at all. k and v share n2 (MindSpore's compile fails on differing
    # ones), and its split must divide the kv heads (MindSpore crashes, SIGFPE, where it does not). n2 is no reduction.
    kv_ins = [[("n2" if f == "n" else f) for f in t] if k in (1, 2) else t for k, t in enumerate(ins)]
    lay = _rule(op, factors[:factors.index("n") + 1] + ["n2"] + factors[factors.index("n") + 1:], kv_ins, outs, slots,
                unsplittable=unsplittable, sizes=[("n", heads), ("n2", kv_heads)])
    lay = FactorRule(**{**lay.__dict__, "unreduced": frozenset({"n2"})})
    # MindSpore 2.9 loops over heads (outermost), then the query sequence, then the batch
    return FactorRule(**{**r.__dict__, "enum": tuple(f for f in ("n", "s", "t", "b") if f in factors),
                         "layout_rule": lay})


def reshape_placeholder(op: Op) -> FactorRule:
    """Reshape has no strategy (MindSpore: "Setting strategy for Reshape goes for nothing!"); the
    propagation engine maps layouts through it with :func:`reshape_layout`."""
    return _rule(op, _letters(len(_shape(op, 0))), [[None] * len(_shape(op, 0))],
                 [[None] * len(o) for o in _out_shapes(op)], [0])


def batch_parallel_rule(op: Op) -> FactorRule:
    """MindSpore's ``BatchParallelInfo``, what an operator without an OperatorInfo of its own gets
    ("Operator X use Batch Parallel"; Flatten is one): its one strategy splits dimension 0 of the
    FIRST input (and of every output) over all devices, the other inputs stay whole (measured:
    ``Dense(x, w)`` runs as ``((8, 1), (1, 1))``). When dim 0 of the first input or output does not
    divide by the device count, or the output is a scalar, MindSpore runs it StandAlone instead:
    everything replicated (see :func:`candidates`)."""
    slots = _tensor_slots(op)
    ins = []
    for k, slot in enumerate(slots):
        shp = _shape(op, slot)
        ins.append(([None if k else "b"] + [None] * (len(shp) - 1)) if shp else [])
    r = _rule(op, ["b"], ins, [["b"] + [None] * (len(o) - 1) if o else [] for o in _out_shapes(op)], slots)
    return FactorRule(**{**r.__dict__, "batch_parallel": True})


def unknown_rule(op: Op) -> FactorRule:
    """No rule here for this operator: treated as MindSpore treats an operator it has no OperatorInfo
    for, batch-parallel (:func:`batch_parallel_rule`), with a warning."""
    return FactorRule(**{**batch_parallel_rule(op).__dict__, "known": False})


UNARY = ("TmpIdentity ReLU ReLU6 GeLU FastGeLU SiLU Sigmoid Tanh Exp Log Sqrt Rsqrt Neg Abs Square Reciprocal Erf "
         "Cast LogicalNot Sin Cos Softplus HSwish HSigmoid Elu LeakyReLU Ones Zeros OnesLike ZerosLike "
         "Identity Round Floor Ceil IsFinite SquareSumAll Dropout DropoutExt Sign").split()
BINARY = ("Muls Add AddExt Sub SubExt Mul Div RealDiv DivMod FloorDiv Maximum Minimum Pow Equal NotEqual "
          "Less LessEqual Greater GreaterEqual LogicalAnd LogicalOr BiasAdd SquaredDifference Select "
          "Where MaskedFill AddN Xdivy Atan2").split()

BINARY_SET = frozenset(BINARY)

RULES: dict[str, Callable[[Op], FactorRule]] = {
    **{t: unary for t in UNARY},
    **{t: elementwise for t in BINARY},
    **{t: reduce_rule for t in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                                "SumExt", "MeanExt")},
    "Softmax": softmax_rule, "LogSoftmax": softmax_rule,
    "MatMul": matmul_rule, "BatchMatMul": matmul_rule, "MatMulExt": matmul_rule, "BatchMatMulExt": matmul_rule,
    "Transpose": transpose_rule, "ExpandDims": expand_dims_rule, "Squeeze": squeeze_rule,
    "StridedSlice": strided_slice_rule, "Concat": concat_rule, "Split": split_rule,
    "Gather": gather_rule, "GatherV2": gather_rule, "OneHot": onehot_rule,
    "RmsNorm": norm_rule, "LayerNorm": layer_norm_rule,
    "SoftmaxCrossEntropyWithLogits": softmax_ce_rule,
    "SparseSoftmaxCrossEntropyWithLogits": sparse_softmax_ce_rule,
    "Tile": tile_rule, "FlashAttentionScore": flash_attention_rule, "Conv2D": conv2d_rule,
    "Reshape": reshape_placeholder, "Flatten": batch_parallel_rule,
}


def _register_families() -> None:
    """Operator families kept in their own modules register into ``RULES`` here (one registry)."""
    import importlib
    for mod in ("strategist.engine.oprules",):
        try:
            m = importlib.import_module(mod)
        except ModuleNotFoundError as err:
            if err.name != mod:
                raise
            continue
        RULES.update(m.RULES)


_register_families()


def rule_for(op: Op) -> FactorRule:
    """The operator's factor rule (the conservative :func:`unknown_rule` if none is registered)."""
    builder = RULES.get(op.type)
    if builder is None:
        log.warning("no sharding rule for %s (%s): batch-parallel, as MindSpore runs an operator it has no "
                    "OperatorInfo for", op.name, op.type)
        return unknown_rule(op)
    return builder(op)


# --------------------------------------------------------------------------------------
# strategies -> layouts


def _where(op: Op, i: int, d: int | None = None) -> str:
    return f"{op.name} ({op.type}) input {i}" + (f" dimension {d}" if d is not None else "")


def splits_of(op: Op, rule: FactorRule, strategy) -> dict[str, int]:
    """Factor -> split for a strategy tuple; raises StrategyError naming the op and dimension."""
    strategy = tuple(tuple(s) for s in strategy)
    n = len(rule.strategy_rows)
    if rule.dropped_rows and len(strategy) == n + rule.dropped_rows and not any(strategy[n:]):
        strategy = strategy[:n]
    if len(strategy) != len(rule.strategy_rows):
        raise StrategyError(f"{op.name} ({op.type}) strategy {strategy} has {len(strategy)} inputs, "
                            f"the operator takes {len(rule.strategy_rows)} (shapes {list(rule.strategy_shapes)})")
    splits: dict[str, int] = {}
    for i, (s, t, shape) in enumerate(zip(strategy, rule.strategy_rows, rule.strategy_shapes)):
        if len(s) != len(shape):
            raise StrategyError(f"{_where(op, i)}: strategy {s} has rank {len(s)}, tensor shape {shape}")
        for d, (x, f, n) in enumerate(zip(s, t, shape)):
            if x < 1:
                raise StrategyError(f"{_where(op, i, d)}: split {x} must be >= 1")
            if n % x:
                raise StrategyError(f"{_where(op, i, d)}: split {x} does not divide size {n}")
            if f is None:
                if x != 1:
                    raise StrategyError(f"{_where(op, i, d)}: this dimension cannot be split (got {x})")
                continue
            if f in rule.unsplittable and x != 1:
                raise StrategyError(f"{_where(op, i, d)}: {op.type} cannot split this dimension (got {x})")
            if splits.setdefault(f, x) != x:
                raise StrategyError(f"{_where(op, i, d)}: split {x} conflicts with split {splits[f]} of the "
                                    f"same dimension factor {f!r} elsewhere in {strategy}")
    sizes = dict(rule.sizes)
    for f, x in splits.items():
        if f in sizes and sizes[f] % x:
            raise StrategyError(f"{op.name} ({op.type}): split {x} of {f!r} does not divide {sizes[f]}")
    return splits


def shard(op: Op, strategy, device_num: int, out_strategy=None, rule: FactorRule | None = None,
          repeat_left: bool = False) -> Sharding:
    """Layouts of every input and output of ``op`` under a MindSpore strategy tuple.

    Raises :class:`StrategyError` for a wrong rank, a split not dividing a dimension, inconsistent
    splits of one factor, or a device count the strategy does not divide.
    """
    rule = rule or rule_for(op)
    splits = splits_of(op, rule, strategy)
    dm = [splits.get(f, 1) for f in rule.factors]
    used = math.prod(dm)
    if device_num % used:
        raise StrategyError(f"{op.name} ({op.type}) strategy {tuple(map(tuple, strategy))} requires {used} "
                            f"devices, but the device number {device_num} is not divisible by {used}")
    repeat = device_num // used
    if rule.repeat_left_on and repeat > 1 and splits.get(rule.repeat_left_on[0], 1) > 1:
        table = math.prod(splits.get(f, 1) for f in rule.repeat_left_on[1])
        repeat_left = repeat_left or table not in (1, device_num)
    shift = 1 if repeat > 1 and repeat_left else 0
    if repeat > 1:
        # MindSpore appends the repeated-calculation count on the right of the device matrix, or on the
        # left where an operator sets repeated_num_in_dev_matrix_right(false) (a Cast feeding a MatMul's weight)
        dm = [repeat] + dm if repeat_left else dm + [repeat]
    axis = {f: (i + shift,) if splits.get(f, 1) > 1 else () for i, f in enumerate(rule.factors)}
    scatter = None
    g = rule.gather_axis
    if g and out_strategy is None:
        k = splits.get(g.factor, 1)
        if g.axis == 0 and k > 1 and g.index_rows and all(splits.get(f, 1) == 1 for f in g.index_factors) \
                and g.index_rows % k == 0:
            scatter = g.factor
    return _sharding(rule, tuple(tuple(s) for s in strategy), tuple(dm), splits, axis, repeat, out_strategy,
                     scatter)


def shard_anchor(op: Op, anchor, device_num: int, rule: FactorRule | None = None) -> Sharding:
    """The sharding an anchor (:class:`strategist.engine.plan.Anchor`: a strategy tuple or ``Layout`` rows, with their
    output forms) gives ``op``: :func:`shard_layout` or :func:`shard`."""
    if anchor.layouts is not None:
        outs = anchor.out_layouts
        return shard_layout(op, without_interleaved(tuple(anchor.layouts)), device_num,
                            without_interleaved(tuple(outs)) if outs else outs, rule)
    return shard(op, anchor.strategy, device_num, anchor.out_strategy, rule)


#: the Layout axis MindSpore reserves for interleaved (micro-sliced) parallelism
INTERLEAVED = "interleaved_parallel"


def without_interleaved(layouts: tuple[ShardLayout, ...]) -> tuple[ShardLayout, ...]:
    """Layouts over a device matrix with an ``interleaved_parallel`` axis, that axis dropped: it slices a dimension
    further on the same devices (run interleaved), and MindSpore's strategy leaves it out (measured, 2.9.0:
    ``Layout((2, 2, 2, 2), ("dp", "mp", "sp", "interleaved_parallel"))`` ``(("dp", "interleaved_parallel"), "mp")``
    configures MatMul's ``(2, 2)``; its UT test_layout_propagation_save_and_load4). So sharding propagation sees
    the layout without it -- except in the edge costs, which lay it out with the axis (:func:`interleaved_priced`).

    >>> lay = ShardLayout((2, 2, 2, 2), ("dp", "mp", "sp", "interleaved_parallel"), ((3, 0), (2,)))
    >>> without_interleaved((lay,))
    (ShardLayout(device_matrix=(2, 2, 2), alias_name=('dp', 'mp', 'sp'), tensor_map=((2,), (1,))),)
    """
    out = []
    for sl in layouts:
        if not isinstance(sl, ShardLayout) or INTERLEAVED not in sl.alias_name:
            out.append(sl)
            continue
        n = len(sl.device_matrix)
        i = sl.alias_name.index(INTERLEAVED)
        rev = n - 1 - i                     # its index counted from the right, as tensor maps count
        dm = sl.device_matrix[:i] + sl.device_matrix[i + 1:]
        names = sl.alias_name[:i] + sl.alias_name[i + 1:]
        tmap = tuple(tuple(k - (k > rev) for k in t if k != rev) for t in sl.tensor_map)
        out.append(ShardLayout(dm, names, tmap))
    return tuple(out)


def interleaved_priced(layouts, shapes) -> dict[int, Layout]:
    """The inputs whose Layout has an ``interleaved_parallel`` axis, laid out as MindSpore's cost model prices an
    edge into them: over the Layout's whole device matrix, the interleaved axis a device axis like any other
    (index -> :class:`Layout` over ``shapes[index]``). MindSpore 2.9.0's edge cost (``InitNotIdentityEdgeCost``)
    takes a consumer's interleaved input as such a layout -- ``(("dp", "interleaved_parallel", "mp"), "sp")`` over
    (2, 2, 2, 2) is device arrangement [2, 2, 2, 2], tensor shape [2, 2, rows/4, cols], map [3, 0, 2, 1] -- and
    the producer's candidate over its own device matrix with one more innermost axis of the interleaved size
    (``device arrangement origin = [1 1 8 2]``; :func:`with_interleaved_axis`). The rows a device holds are then
    not one block where the interleaved axis sits between two of a dimension's axes, so a candidate splitting that
    dimension over both pays communication (UT test_sharding_strategy_save_and_load4 compiled as built: the Add
    before the second MatMul takes (2, 1), not (4, 2))."""
    out = {}
    for k, sl in enumerate(layouts):
        if not isinstance(sl, ShardLayout) or INTERLEAVED not in sl.alias_name or k >= len(shapes):
            continue
        dm = tuple(sl.device_matrix)
        n = len(dm)
        try:
            out[k] = Layout(tuple(shapes[k]), dm, tuple(tuple(n - 1 - r for r in rev) for rev in sl.tensor_map))
        except StrategyError:
            continue
    return out


def with_interleaved_axis(layout: Layout, device_num: int) -> Layout | None:
    """``layout`` over ``device_num`` devices, a multiple of its own: one more innermost device axis holding repeated
    copies (how MindSpore's cost model lays a producer's candidate against an interleaved consumer's layout)."""
    if layout.device_num == device_num:
        return layout
    if device_num % layout.device_num:
        return None
    return Layout(layout.shape, tuple(layout.dev_matrix) + (device_num // layout.device_num,), layout.dims,
                  layout.partial)


def layout_splits(dm: tuple[int, ...], layouts) -> tuple[tuple[int, ...], ...]:
    """The strategy rows ``mindspore.Layout`` s over device matrix ``dm`` stand for: per tensor dimension, the
    product of the device axes its tensor map names (counted from the right)."""
    n = len(dm)
    return tuple(tuple(math.prod(dm[n - 1 - k] for k in rev) for rev in lay.tensor_map) for lay in layouts)


def layout_strategy(layouts) -> tuple[tuple[int, ...], ...]:
    """The strategy rows MindSpore reads from ``Layout`` s, each over its own device matrix, an
    ``interleaved_parallel`` axis left out (:func:`without_interleaved`)."""
    return tuple(layout_splits(tuple(sl.device_matrix), (sl,))[0] for sl in without_interleaved(tuple(layouts)))


def _layouts_dev_matrix(op: Op, layouts, n_inputs: int, device_num: int) -> tuple[int, ...]:
    """The device matrix of an operator's input Layouts: one per input, over the stage's devices."""
    if len(layouts) != n_inputs:
        raise StrategyError(f"{op.name} ({op.type}): {len(layouts)} input layouts for {n_inputs} inputs")
    dm = tuple(layouts[0].device_matrix)
    if math.prod(dm) != device_num:
        raise StrategyError(f"{op.name} ({op.type}): Layout device matrix {dm} has {math.prod(dm)} devices, "
                            f"the stage has {device_num}")
    return dm


def self_defined_sharding(op: Op, layouts: tuple[ShardLayout, ...], device_num: int,
                          out_layouts: tuple[ShardLayout, ...] | None = None) -> Sharding:
    """An operator marked ``self_define_shard`` under its Layouts exactly as set, whatever its own rule allows
    (MindSpore's SelfDefineShardInfo: "User needs to ensure the accuracy and correctness of input/output layout";
    MindSpore's UT test_auto_parallel_sp_newshape splits TensorScatterUpdate's indices). Its outputs are its out
    Layouts, or, without them, the first input's where the shapes match (replicated otherwise)."""
    specs = [op.inputs[i].spec for i in _tensor_slots(op)]
    dm = _layouts_dev_matrix(op, layouts, len(specs), device_num)
    n = len(dm)

    def lay(shape, sl):
        if len(sl.tensor_map) != len(shape):
            raise StrategyError(f"{op.name} ({op.type}): layout has {len(sl.tensor_map)} dims, tensor shape {shape}")
        return Layout(tuple(shape), dm, tuple(tuple(n - 1 - k for k in rev) for rev in sl.tensor_map))
    ins = tuple(lay(sp.shape, sl) for sp, sl in zip(specs, layouts))
    shapes = [o.shape for o in op.outputs if o is not None]
    if out_layouts:
        outs = tuple(lay(sh, sl) for sh, sl in zip(shapes, out_layouts))
    else:
        outs = tuple(ins[0] if ins and tuple(sh) == ins[0].shape else Layout(tuple(sh), dm, ((),) * len(sh))
                     for sh in shapes)
    return Sharding(layout_splits(dm, layouts), dm, {}, ins, outs, (), tuple(() for _ in ins), 1)


#: the operators whose ``enable_nd_tp`` attribute MindSpore reads (``MatMulBase::GetAttrs``; MatMulExtInfo's own
#: GetAttrs does not)
ND_TP_TYPES = frozenset({"MatMul", "BatchMatMul"})


def nd_tp(op: Op) -> bool:
    """True for a (Batch)MatMul carrying the prim attr ``enable_nd_tp=True`` (2D/3D tensor parallelism)."""
    return op.type in ND_TP_TYPES and op.attrs.get("enable_nd_tp") == True     # noqa: E712 (a numpy bool too)


def nd_tp_sharding(op: Op, layouts: tuple[ShardLayout, ...], device_num: int,
                   out_layouts: tuple[ShardLayout, ...] | None = None, rule: FactorRule | None = None) -> Sharding:
    """An ``enable_nd_tp`` (Batch)MatMul under its ``Layout`` s: MindSpore 2.9's 2D/3D tensor parallelism
    (matmul_info.cc: ``MatMul::CheckInputLayout`` -> ``CheckNDTPInputLayout`` / ``Check2DTPInputLayout`` /
    ``Check3DTPInputLayout``, ``InferNDTPOutputLayout``, ``ComputeNDTPReplaceGraph``: AllGather, MatMul,
    ReduceScatter). The contraction dimension is split differently in the two inputs. With ``a`` the left input's
    last two dims (M, K) and ``b`` the right's (K, N) (each swapped by its transpose flag):

    * 2D, a ``(M, (p, q))``, b ``(p, q)``: ``a`` is gathered over ``q`` on K, the local product is partial over
      ``p``, which a ReduceScatter puts on N: output ``(..., M, (q, p))``;
    * 3D, a ``((..., z, y), x)``, b ``((x, z), y)``: ``a`` is gathered over ``y`` on M, ``b`` over ``z`` on K, the
      product is partial over ``x``, scattered onto M in ``y``'s place: output ``(..., (..., z, x), y)``.

    Measured, MindSpore 2.9.0 (its INFO log, ``InferAsLossDivisorByLayout``'s output tensor map; UT
    test_batch_matmul_high_dimension re-expressed in tests/models/ms_ut/ut6_bmm_high_dim.py): BatchMatMul
    ``("b", None, ("x", "y")), ("b", "x", "y")`` gives ``("b", None, ("y", "x"))``; ``(None, ("z", "x"), "y"),
    (None, ("y", "z"), "x")`` gives ``(None, ("z", "y"), "x")``. Any other layout MindSpore refuses: its check
    fails, or (a single-axis contraction, which its 2D check lets through) its replace graph does ("The dimension
    18446744073709551585 is out of the size of the device shape!"). The output is no partial sum: the
    ReduceScatter's axis is listed in ``partial_axes`` and lies on the output (:func:`output_scattered`).

    >>> from strategist.frontend.graph import Input, TensorSpec
    >>> x, w = TensorSpec((64, 32), "float32"), TensorSpec((32, 64), "float32")
    >>> mm = Op("mm", "MatMul", "", "", "mm", "", (Input("input", "x", spec=x), Input("param", "w", spec=w),
    ...         Input("const", value=False), Input("const", value=False)), (TensorSpec((64, 64), "float32"),),
    ...         attrs={"enable_nd_tp": True})
    >>> lay = lambda *t: ShardLayout((2, 4), ("x", "y"), t)
    >>> s = nd_tp_sharding(mm, (lay((), (1, 0)), lay((1,), (0,))), 8)
    >>> [str(l) for l in s.inputs], str(s.outputs[0]), s.strategy
    (['[64, 32]@[2, 4][-,d0xd1]', '[32, 64]@[2, 4][d0,d1]'], '[64, 64]@[2, 4][-,d1xd0]', ((1, 8), (2, 4)))
    """
    rule = rule or rule_for(op)
    dm = _layouts_dev_matrix(op, layouts, 2, device_num)
    n = len(dm)
    dims = []
    for i, (lay, shape) in enumerate(zip(layouts, rule.input_shapes)):
        if tuple(lay.device_matrix) != dm:
            raise StrategyError(f"{_where(op, i)}: all inputs must use one Layout device matrix")
        if len(lay.tensor_map) != len(shape):
            raise StrategyError(f"{_where(op, i)}: layout has {len(lay.tensor_map)} dims, tensor shape {shape}")
        dims.append(tuple(tuple(n - 1 - k for k in rev) for rev in lay.tensor_map))
    ta, tb = bool(_const(op, 2, False)), bool(_const(op, 3, False))
    da, db = dims
    ra, rb = len(da), len(db)
    a_m, a_k = (da[-1], da[-2]) if ta else (da[-2], da[-1])
    b_k, b_n = (db[-1], db[-2]) if tb else (db[-2], db[-1])
    if len(a_k) == 2 and b_k == a_k[:1] and b_n == a_k[1:]:
        out_m, out_n, scatter, kind = a_m, (a_k[1], a_k[0]), a_k[0], "2D"
    elif len(a_k) == 1 and len(b_n) == 1 and len(b_k) == 2 and len(a_m) >= 2 and b_k == (a_k[0], a_m[-2]) \
            and b_n[0] == a_m[-1]:
        out_m, out_n, scatter, kind = a_m[:-1] + a_k, b_n, a_k[0], "3D"
    else:
        names = lambda d: tuple(tuple(layouts[0].alias_name[a] for a in t) for t in d)
        raise StrategyError(
            f"{op.name} ({op.type}) enable_nd_tp: MindSpore 2.9 runs only 2D/3D tensor parallel layouts, the last "
            f"two dims like (M, (x, y)), (x, y) (2D) or ((..., z, y), x), ((x, z), y) (3D), transposes swapping "
            f"them; got {names(da[-2:])}, {names(db[-2:])}")
    nb = max(ra, rb) - 2
    batch = []
    for d in range(nb):
        ia, ib = d - (nb - (ra - 2)), d - (nb - (rb - 2))
        batch.append(da[ia] if ia >= 0 else db[ib])
    out_dims = tuple(batch) + (out_m, out_n)
    out_shape = rule.output_shapes[0]
    try:
        ins = tuple(Layout(tuple(shape), dm, d) for shape, d in zip(rule.input_shapes, dims))
        out = Layout(tuple(out_shape), dm, out_dims)
    except StrategyError as err:
        raise StrategyError(f"{op.name} ({op.type}) enable_nd_tp {kind}: {err}") from None
    if out_layouts:
        # MatMul::CheckOutputLayout: a configured output Layout must be the inferred one (else SetCostUnderLayout
        # fails; measured); it stays the operator's out_strategy, which propagation onward follows
        got = tuple(tuple(n - 1 - k for k in rev) for rev in out_layouts[0].tensor_map)
        if len(out_layouts) != 1 or tuple(out_layouts[0].device_matrix) != dm or got != out_dims:
            raise StrategyError(f"{op.name} ({op.type}) enable_nd_tp {kind}: the output Layout must be the one "
                                f"MindSpore infers, {ShardLayout.of(out, layouts[0].alias_name)} (its compile fails "
                                f"with SetCostUnderLayout failed)")
    strategy = layout_splits(dm, layouts)
    split = lambda t: math.prod(dm[a] for a in t)
    # the local product after the AllGathers: batch, M less the gathered axis (3D), K, N
    local_m = a_m[:-1] if kind == "3D" else a_m
    splits = {f: split(t) for f, t in zip(rule.factors, tuple(batch) + (local_m, (scatter,), out_n[:1]))}
    partial = (scatter,) if dm[scatter] > 1 else ()
    out_axes = {a for t in out_dims for a in t}
    grad = tuple(tuple(sorted(out_axes - {a for t in d for a in t})) for d in dims)
    # the replace graph's AllGathers: 2D gathers a's K over q; 3D a's M over y and b's K over z
    ga, gb = list(da), list(db)
    if kind == "2D":
        ga[-2 if ta else -1] = a_k[:1]
    else:
        ga[-1 if ta else -2] = a_m[:-1]
        gb[-1 if tb else -2] = b_k[:1]
    gathered = tuple(Layout(lay.shape, dm, tuple(g)) if tuple(g) != lay.dims else None
                     for lay, g in zip(ins, (ga, gb)))
    return Sharding(strategy, dm, splits, ins, (out,), partial, grad, 1, gathered)


def shard_layout(op: Op, layouts: tuple[ShardLayout, ...], device_num: int,
                 out_layouts: tuple[ShardLayout, ...] | None = None, rule: FactorRule | None = None) -> Sharding:
    """Layouts under ``mindspore.Layout`` in_strategy (named axes, several axes per dimension); an
    ``enable_nd_tp`` (Batch)MatMul's: :func:`nd_tp_sharding`."""
    if nd_tp(op):
        return nd_tp_sharding(op, layouts, device_num, out_layouts, rule)
    rule = rule or rule_for(op)
    rule = rule.layout_rule or rule
    dm = _layouts_dev_matrix(op, layouts, len(rule.inputs), device_num)
    n = len(dm)
    axis: dict[str, tuple[int, ...]] = {}
    strategy = []
    for i, (lay, t, shape) in enumerate(zip(layouts, rule.inputs, rule.input_shapes)):
        if tuple(lay.device_matrix) != dm:
            raise StrategyError(f"{_where(op, i)}: all inputs must use one Layout device matrix")
        if len(lay.tensor_map) != len(shape):
            raise StrategyError(f"{_where(op, i)}: layout has {len(lay.tensor_map)} dims, tensor shape {shape}")
        row = []
        for d, (rev, f) in enumerate(zip(lay.tensor_map, t)):
            axes = tuple(n - 1 - k for k in rev)
            row.append(math.prod(dm[a] for a in axes))
            if f is None:
                if axes:
                    raise StrategyError(f"{_where(op, i, d)}: this dimension cannot be split")
                continue
            if axis.setdefault(f, axes) != axes:
                raise StrategyError(f"{_where(op, i, d)}: axes {lay.axes()[d]} conflict with another input's "
                                    f"split of the same dimension factor {f!r}")
        strategy.append(tuple(row))
    if rule.rows:       # MindSpore's strategy rows are not the input tensors' dims (OneHot, Tile)
        strategy = [tuple(math.prod(dm[a] for a in axis.get(f, ())) if f else 1 for f in row)
                    for row in rule.strategy_rows]
    splits = splits_of(op, rule, strategy)
    for f in rule.factors:
        axis.setdefault(f, ())
    out_strat = None
    if out_layouts:
        out_strat = layout_splits(dm, out_layouts)
    s = _sharding(rule, tuple(strategy), dm, splits, axis, 1, out_strat)
    if out_layouts:
        outs = []
        for j, o in enumerate(out_layouts):
            dims = tuple(tuple(n - 1 - k for k in rev) for rev in o.tensor_map)
            used = {a for d in dims for a in d}
            partial = tuple(a for a in s.partial_axes if a not in used)
            outs.append(Layout(rule.output_shapes[j], dm, dims, partial))
        s = Sharding(s.strategy, s.dev_matrix, s.splits, s.inputs, tuple(outs), s.partial_axes, s.grad_partial, 1)
    return s


def _sharding(rule, strategy, dm, splits, axis, repeat, out_strategy, scatter=None) -> Sharding:
    def layout(shape, factors):
        return Layout(tuple(shape), dm, tuple(axis.get(f, ()) if f else () for f in factors))

    ins = tuple(layout(s, t) for s, t in zip(rule.input_shapes, rule.inputs))
    partial = tuple(a for f in rule.reductions for a in axis.get(f, ()))
    outs = []
    for j, (s, t) in enumerate(zip(rule.output_shapes, rule.outputs)):
        lay = layout(s, t)
        if partial and out_strategy is not None and j < len(out_strategy):
            # out_strategy splits an output dim by a reduction factor's axis: ReduceScatter
            dims = list(lay.dims)
            left = list(partial)
            for d, want in enumerate(out_strategy[j]):
                have = lay.split(d)
                if want != have and left and want == have * dm[left[0]]:
                    dims[d] = dims[d] + (left.pop(0),)
            lay = Layout(lay.shape, dm, tuple(dims))
        if scatter is not None and j == 0:
            # Gather's ReduceScatter over the table's row split lands on the output's dim 0
            lay = Layout(lay.shape, dm, (lay.dims[0] + axis[scatter],) + lay.dims[1:])
        outs.append(lay)
    out_factors = {f for t in rule.outputs for f in t if f}
    grad = []
    for t in rule.inputs:
        mine = set(f for f in t if f)
        held = {a for f in mine for a in axis.get(f, ())}     # a Layout may split two factors by one axis (FA's n, n2)
        grad.append(tuple(a for f in rule.factors if f not in mine and f in out_factors for a in axis.get(f, ())
                          if a not in held))
    return Sharding(strategy, dm, dict(splits), ins, tuple(outs), partial, tuple(grad), repeat)


def output_partial(s: Sharding, j: int = 0) -> tuple[int, ...]:
    """Axes over which output ``j`` still holds partial sums before the operator reduces them."""
    used = {a for d in s.outputs[j].dims for a in d}
    return tuple(a for a in s.partial_axes if a not in used)


def output_scattered(s: Sharding, j: int = 0) -> tuple[int, ...]:
    """Partial-sum axes the operator reduce-scatters onto output ``j``'s dims (Gather's table row split)."""
    used = {a for d in s.outputs[j].dims for a in d}
    return tuple(a for a in s.partial_axes if a in used)


def pre_reduce_layout(s: Sharding, j: int = 0) -> Layout:
    """What each device computes of output ``j`` before the operator's own reduction: unsplit on the axes it
    reduce-scatters onto the output (Gather's table rows) and partial over them and its other partial axes; the
    planned redistribution from here to ``s.outputs[j]`` is that reduction (AllReduce or ReduceScatter)."""
    return _pre_reduce(s.outputs[j], output_scattered(s, j), tuple(sorted(output_partial(s, j))))


@lru_cache(maxsize=1 << 16)
def _pre_reduce(out: Layout, scattered: tuple[int, ...], partial: tuple[int, ...]) -> Layout:
    dims = tuple(tuple(a for a in d if a not in scattered) for d in out.dims) if scattered else out.dims
    return Layout(out.shape, out.dev_matrix, dims, tuple(sorted(partial + scattered)))


# --------------------------------------------------------------------------------------
# candidates (MindSpore's GenerateStrategies)


def candidates(op: Op, device_num: int, rule: FactorRule | None = None,
               fully_use_devices: bool = False) -> list[tuple[tuple[int, ...], ...]]:
    """Candidate strategies in MindSpore 2.9's enumeration order (``GenerateStrategies``).

    Each splittable factor takes powers of two (1, 2, 4, ...) dividing its size, and the
    factors are enumerated lexicographically ascending (the first factor outermost), so the
    all-ones strategy comes first. With MindSpore's default ``fully_use_devices=False`` every
    product dividing the device count is a candidate (the rest of the devices repeat the
    computation); with ``fully_use_devices=True`` only products equal to it, and the all-ones
    strategy (``PrepareStrategyBase`` accepts ``product == 1`` either way: measured, an Add of two
    [64, 32] on 8 devices lists [[1, 1], [1, 1]] first and takes it backward from a MatMul
    Layout-configured (2, 2) with sp repeated, MindSpore's UT sharding_strategy_save_and_load6). For
    ``device_num = 2^p * q`` (q odd), the power-of-two part is enumerated, one factor at a time
    is multiplied by ``q``, and the all-ones strategy is added.
    """
    rule = rule or rule_for(op)
    if rule.batch_parallel:     # BatchParallelInfo: one strategy, input 0's dim 0 over all devices
        first_in = rule.input_shapes[0] if rule.input_shapes else ()
        first_out = rule.output_shapes[0] if rule.output_shapes else ()
        if rule.batch_info:
            stand_alone = not first_in or first_in[0] % device_num
        else:
            stand_alone = not first_in or not first_out or first_in[0] % device_num or first_out[0] % device_num
        return [tuple(tuple(1 if stand_alone or not f else device_num for f in t) for t in rule.inputs)]
    free = [f for f in (rule.enum or rule.factors)
            if f not in rule.unsplittable and any(f in t for t in rule.strategy_rows)]
    csizes = dict(rule.cand_sizes)
    sizes = [csizes[f] if f in csizes else rule.factor_size(f) for f in free]
    tied = [f for f in rule.tied if f in free]
    if len(tied) > 1:       # one enumerated split for the group (gcd of their sizes), then each member takes it
        lead = tied[0]
        sizes[free.index(lead)] = math.gcd(*(sizes[free.index(f)] for f in tied))
        keep = [i for i, f in enumerate(free) if f not in tied[1:]]
        free, sizes = [free[i] for i in keep], [sizes[i] for i in keep]
    out = [dict(zip(free, c)) for c in _enumerate_splits(sizes, device_num, fully_use_devices,
                                                                        keep_unsplit=True)] or [{}]
    if len(tied) > 1:       # each member is an axis of the device matrix: their product must fit the devices
        out = [dict(c, **{f: c.get(tied[0], 1) for f in tied[1:]}) for c in out]
        out = [c for c in out if device_num % math.prod(c.values()) == 0] or [{}]
    strategies = []
    for c in out:
        strategies.append(tuple(tuple(c.get(f, 1) if f else 1 for f in t) for t in rule.strategy_rows))
    seen, uniq = set(), []
    for s in strategies:
        if s not in seen:
            seen.add(s)
            uniq.append(s)
    if rule.must_split or rule.split_uses_all or rule.gather_axis:
        kept = [s for s in uniq if _generated_ok(rule, s, device_num)]
        uniq = kept or uniq
    return uniq


def _enumerate_splits(sizes: list[int], device_num: int, fully_use_devices: bool,
                      keep_unsplit: bool = False) -> list[list[int]]:
    """MindSpore's enumeration of splits over ``sizes``, in its order and with its duplicates: each size takes
    powers of two (1, 2, 4, ...) dividing it and the remaining power-of-two budget, the first size outermost;
    with ``fully_use_devices`` only splits using the whole budget (and, with ``keep_unsplit``, the all-ones
    one too, as ``GenerateStrategiesForIndependentInputs`` keeps it). For ``device_num = 2^p * q`` (q odd) the
    power-of-two part is enumerated, one size at a time takes the factor ``q``, and all-ones is added."""
    odd, pow2 = device_num, 1
    while odd % 2 == 0:
        odd //= 2
        pow2 *= 2
    out: list[list[int]] = []

    def rec(i, budget, cur):
        if i == len(sizes):
            if not fully_use_devices or budget == 1 or (keep_unsplit and budget == pow2):
                out.append(cur)
            return
        x = 1
        while x <= budget:
            if budget % x == 0 and sizes[i] % x == 0:
                rec(i + 1, budget // x, cur + [x])
            x *= 2

    rec(0, pow2, [])
    if odd > 1:
        out = [c[:k] + [c[k] * odd] + c[k + 1:] for c in out for k, n in enumerate(sizes) if n % (c[k] * odd) == 0]
        out.append([1] * len(sizes))
    return out


def _independent_inputs(shapes, device_num: int, fully_use_devices: bool) -> list[tuple[tuple[int, ...], ...]]:
    """MindSpore's ``GenerateStrategiesForIndependentInputs`` (operator_info.cc) over every dim of every
    shape in ``shapes`` (all splittable), duplicates and order as MindSpore lists them."""
    dims = [n for s in shapes for n in s]

    def unflat(flat):
        out, i = [], 0
        for s in shapes:
            out.append(tuple(flat[i:i + len(s)]))
            i += len(s)
        return tuple(out)

    return [unflat(c) for c in _enumerate_splits(dims, device_num, fully_use_devices, keep_unsplit=True)]


def swc_strategies(op: Op, device_num: int, rule: FactorRule | None = None,
                   fully_use_devices: bool = False) -> list[tuple[tuple[int, ...], ...]]:
    """The operator's strategies-with-cost list as MindSpore builds it, duplicates included: the
    distinct :func:`candidates`, except for an operator whose ``GenerateOpStrategies`` lists a strategy
    more than once. BiasAdd enumerates two independent copies of x's shape and keeps the first
    (``BiasAddInfo::GenerateOpStrategies``): [[1,1,1],[1]] 31 times over 16 devices (random net 10).
    The copies matter only where MindSpore sorts the list with an unstable std::sort: a Reshape's
    strategies-with-cost, built from its neighbours' lists."""
    rule = rule or rule_for(op)
    cands = candidates(op, device_num, rule, fully_use_devices)
    if op.type != "BiasAdd" or rule.batch_parallel or len(rule.strategy_rows) != 2:
        return cands
    x = rule.input_shapes[0]
    c = rule.strategy_rows[0].index(rule.strategy_rows[1][0]) if rule.strategy_rows[1] else None
    if c is None:
        return cands
    out = [(s, (s[c],)) for s, _ in _independent_inputs([x, x], device_num, fully_use_devices)]
    return out if set(out) == set(cands) else cands


def _generated_ok(rule: FactorRule, strategy, device_num: int) -> bool:
    """``rule.must_split`` / ``rule.split_uses_all`` for one generated strategy."""
    splits: dict[str, int] = {}
    for row, t in zip(strategy, rule.strategy_rows):
        for x, f in zip(row, t):
            if f:
                splits[f] = x
    if any(splits.get(f, 1) == 1 for f in rule.must_split):
        return False
    if rule.gather_axis and gather_axis_refused(rule.gather_axis, splits, device_num):
        return False
    used = math.prod(splits.values())
    return used == device_num or not any(splits.get(f, 1) > 1 for f in rule.split_uses_all)


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


def partition_num(strategy) -> int:
    """MindSpore's ``Strategy::PartitionNum``: product of every split of every input."""
    return math.prod(x for s in strategy for x in s)


def strategy_better(a, b) -> bool:
    """MindSpore's ``Strategy::Compare(a, b)``: larger PartitionNum wins, then the lexicographically
    larger dims."""
    pa, pb = partition_num(a), partition_num(b)
    if pa != pb:
        return pa > pb
    return [list(x) for x in a] > [list(x) for x in b]


def computation_cost(op: Op, rule: FactorRule, s: Sharding, device_num: int) -> float:
    """MindSpore's forward ``computation_cost_`` of ``op`` under ``s`` (operator_costmodel.cc, bytes per
    device), with ``BreakingTiesForPreferringDataParallel`` (minus 1 when input 0's dimension 0 is split
    over every device). Sharding propagation uses it to break ties between candidates of an operator
    decided from several visited edges."""
    hit = s.__dict__.get("_ccost")           # a Sharding belongs to one operator: its cost is computed once
    if hit is not None and hit[0] == device_num:
        return hit[1]
    c = _computation_cost(op, rule, s, device_num)
    object.__setattr__(s, "_ccost", (device_num, c))
    return c


def _computation_cost(op: Op, rule: FactorRule, s: Sharding, device_num: int) -> float:
    def nbytes(layout, spec):
        return layout.slice_numel * (_type_bytes(spec))
    ins = [nbytes(l, op.inputs[slot].spec) for l, slot in zip(s.inputs, rule.slots)]
    outs = [nbytes(l, op.outputs[j] if j < len(op.outputs) else None) for j, l in enumerate(s.outputs)]
    t = op.type
    reduced_split = bool(s.partial_axes)
    if t in COMPUTE_TYPES - {"Conv2D", "FlashAttentionScore"}:
        c = sum(ins[:2]) + (outs[0] if reduced_split and outs else 0)
    elif t in ("Softmax", "LogSoftmax", "Tile", "BroadcastTo"):
        c = outs[0] if outs else 0
    elif t.startswith("Reduce") or t in ("SumExt", "MeanExt"):
        c = ins[0] + ((2 if "Mean" in t else 1) * outs[0] if reduced_split and outs else 0)
    elif t in ("Gather", "GatherV2", "IndexSelect") and len(ins) >= 2:     # GatherCost (IndexSelectInfo too)
        c = (3 * ins[0] + 7 * ins[1]) if reduced_split else ins[0] + ins[1]
    elif t in BINARY_SET or t in ("LayerNorm", "RmsNorm") or rule.batch_parallel or t in BATCH_PARALLEL_COST:
        # BatchParallelCost (Conv2DInfo and its subclasses too): every input's slice
        c = sum(ins)
    else:
        c = ins[0] if ins else 0
    if s.strategy and s.strategy[0] and s.strategy[0][0] == device_num and c > 1.0:
        c -= 1.0
    return float(c)


def _type_bytes(spec) -> int:
    from ..vocab.graph import DTYPE_BYTES
    return DTYPE_BYTES.get(spec.dtype, 4) if spec is not None else 4


# --------------------------------------------------------------------------------------
# Reshape


@lru_cache(maxsize=1 << 16)      # pure; pricing maps every Reshape's output back on each plan it prices
def reshape_layout(src: Layout, out_shape: tuple[int, ...]) -> Layout | None:
    """The layout of ``reshape(x, out_shape)`` that needs no communication given ``x``'s layout
    ``src``, or None when the reshape cannot keep every device's data in place.

    Dimensions are grouped where the two shapes reach equal products. Inside a group a device's
    data is one contiguous run only if the splits sit on a prefix: dims before the last split dim
    fully split, dims after it unsplit. The group's device axes (outer -> inner) are then dealt
    to the output dims of the group, outer first, under the same rule; an axis larger than what is
    left of an output dim is itself split in two (the device matrix is refined), as MindSpore's
    layout transfer does: a 16-way split of 32 reshaped to [4, 8] becomes (4, 4).

    >>> x = Layout((4, 128, 256), (2, 4), ((0,), (1,), ()))
    >>> str(reshape_layout(x, (512, 256)))       # [B,S,H] -> [B*S,H] with B and S split: not contiguous
    'None'
    >>> str(reshape_layout(Layout((4, 128, 256), (2, 4), ((0,), (), (1,))), (512, 256)))
    '[512, 256]@[2, 4][d0,d1]'
    >>> str(reshape_layout(Layout((32, 12), (16,), ((0,), ())), (4, 8, 12)))
    '[4, 8, 12]@[4, 4][d0,d1,-]'
    """
    if src.partial:
        return None
    groups = _reshape_groups(src.shape, tuple(out_shape))
    if groups is None:
        return None
    # device axes as tokens, so that splitting one in two keeps the others' identity
    order: list = list(range(len(src.dev_matrix)))
    size = {a: n for a, n in enumerate(src.dev_matrix)}
    fresh = len(order)
    out_dims: list[list] = [[] for _ in out_shape]
    for ins, outs in groups:
        if not _prefix_split([src.split(d) for d in ins], [src.shape[d] for d in ins]):
            return None
        rest = [a for d in ins for a in src.dims[d]]
        for d in outs:
            dim, taken = out_shape[d], []
            while rest:
                used = math.prod(size[a] for a in taken)
                cap = dim // used
                a = rest[0]
                if dim % (used * size[a]) == 0:
                    taken.append(rest.pop(0))
                elif cap > 1 and size[a] % cap == 0:
                    outer, inner = fresh, fresh + 1     # split axis a into (cap, size / cap)
                    fresh += 2
                    i = order.index(a)
                    order[i:i + 1] = [outer, inner]
                    size[outer], size[inner] = cap, size[a] // cap
                    taken.append(outer)
                    rest[0] = inner
                    break
                else:
                    break
            out_dims[d] = taken
            if rest and math.prod(size[a] for a in taken) != dim:
                return None
        if rest:
            return None
    dm = tuple(size[a] for a in order)
    return Layout(tuple(out_shape), dm, tuple(tuple(order.index(a) for a in t) for t in out_dims))


def _prefix_split(splits: list[int], sizes: list[int]) -> bool:
    """Splits on a contiguous prefix: every dim before the last split dim is fully split."""
    last = max((i for i, x in enumerate(splits) if x > 1), default=-1)
    return all(splits[i] == sizes[i] for i in range(last))


def _reshape_groups(a: tuple[int, ...], b: tuple[int, ...]):
    """Pairs (input dims, output dims) with equal products, in order; None if sizes differ."""
    if math.prod(a) != math.prod(b):
        return None
    groups, i, j = [], 0, 0
    while i < len(a) or j < len(b):
        gi, gj, pa, pb = [], [], 1, 1
        if i < len(a):
            gi, pa, i = [i], a[i], i + 1
        if j < len(b):
            gj, pb, j = [j], b[j], j + 1
        while pa != pb:
            if pa < pb and i < len(a):
                gi.append(i)
                pa, i = pa * a[i], i + 1
            elif pb < pa and j < len(b):
                gj.append(j)
                pb, j = pb * b[j], j + 1
            else:
                return None
        groups.append((gi, gj))
    return groups


# --------------------------------------------------------------------------------------
# computation

# operators whose OperatorInfo prices with BatchParallelCost (Conv2DInfo and its subclasses, MaxPool3D, PadV3):
# computation is the sum of every input's slice, forward communication nothing
BATCH_PARALLEL_COST = frozenset({"Conv2D", "Conv2DTranspose", "Conv2DBackpropInput", "Conv3D", "Convolution",
                                 "MaxPool3D", "PadV3"})
COMPUTE_TYPES = frozenset({"MatMul", "BatchMatMul", "MatMulExt", "BatchMatMulExt", "Conv2D", "FlashAttentionScore",
                           "MorphFFN"})


def training_flops(op: Op, rule: FactorRule, s: Sharding) -> float:
    """FLOPs one device spends on ``op`` in a training step (forward + 2x backward) under ``s``:
    the operator's iteration space divided by the splits of its factors only, so repeated
    (redundant) computation is charged in full. MatMul-like, Conv2D and FlashAttentionScore only;
    the memory-bound rest is left out."""
    if op.type not in COMPUTE_TYPES:
        return 0.0
    sizes: dict[str, int] = {}
    for shape, t in zip(rule.input_shapes + rule.output_shapes, rule.inputs + rule.outputs):
        for n, f in zip(shape, t):
            if f:
                sizes[f] = max(sizes.get(f, 1), n)
    split = lambda fs: math.prod(s.splits.get(f, 1) for f in fs)
    if op.type == "Conv2D":
        o, c = rule.input_shapes[1][0], rule.input_shapes[1][1]
        kh, kw = rule.input_shapes[1][2], rule.input_shapes[1][3]
        n, _, h, w = rule.output_shapes[0]
        fwd = 2.0 * n * o * h * w * c * kh * kw / split(["n", "o", "c"])
    elif op.type == "MorphFFN":
        # MindFormers' MoE dispatcher + experts (strategist.frontend.mf_morph): its GroupedMatmuls' FLOPs, each device
        # computing its own tokens
        fwd = op.attrs.get("strategist_flops", 0.0) / split(["n"])
    elif op.type == "FlashAttentionScore":
        q = math.prod(rule.input_shapes[0])
        kf = rule.inputs[1]
        s2 = next((rule.input_shapes[1][i] for i, f in enumerate(kf) if f in ("s2", "t2")), 1)
        fwd = 4.0 * q * s2 / split(["b", "n", "s", "t"])
    else:
        fwd = 2.0 * math.prod(sizes[f] for f in rule.factors if f in sizes) / split(rule.factors)
    return 3.0 * fwd
