"""The vocabulary of operator rules: :class:`FactorRule` (an operator described by its dimension factors) and
:class:`Sharding` (an operator under one strategy).

Every operator is a :class:`FactorRule`, as in Shardy's op sharding rules and DTensor's einsum strategies: each
dimension of each strategy input and output names a *factor*; a factor shared by several tensors must be split the
same way (that is where MindSpore's strategy constraints come from: MatMul's contracted dims, element-wise inputs,
...); a factor that appears in inputs but not in the outputs is a *reduction* factor: splitting it leaves partial sums
the operator reduces itself (MatMul's ``k`` -> AllReduce, or ReduceScatter when ``out_strategy`` splits the output by
it).

A MindSpore strategy tuple gives one split per dimension of each strategy input; the operator's device matrix is
``[split(f) for f in factors] + [repeat]`` (MindSpore appends the repeated-calculation count on the right), and every
tensor's :class:`~strategist.vocab.layout.Layout` follows from its factors
(:func:`strategist.engine.rules.sharding.shard`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from ...vocab.layout import Layout


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
    #: (CheckSplitAxisStrategy, GetGatherMode), for generated candidates and configured strategies alike. Layouts: axis
    #: 0 split with the
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
