"""MindSpore's forward computation cost of an operator under a sharding (operator_costmodel.cc), which sharding
propagation uses to break ties between candidates."""
from __future__ import annotations

from ...vocab.graph import DTYPE_BYTES, Op
from .factor import FactorRule, Sharding
from .flops import COMPUTE_TYPES

#: the element-wise primitives whose computation cost is every input's slice (MindSpore's ArithmeticCost); any other
#: element-wise primitive is priced by its first input's slice (the default), which MindSpore's own cost class for
#: each of them has not been checked against
ARITHMETIC_COST = frozenset("""Add AddExt AddN Atan2 BiasAdd Div DivMod Equal FloorDiv Greater GreaterEqual Less
LessEqual LogicalAnd LogicalOr MaskedFill Maximum Minimum Mul Muls NotEqual Pow RealDiv Select Sub SubExt
SquaredDifference Where Xdivy""".split())

#: operators whose OperatorInfo prices with BatchParallelCost (Conv2DInfo and its subclasses, MaxPool3D, PadV3):
#: computation is the sum of every input's slice, forward communication nothing
BATCH_PARALLEL_COST = frozenset({"Conv2D", "Conv2DTranspose", "Conv2DBackpropInput", "Conv3D", "Convolution",
                                 "MaxPool3D", "PadV3"})

#: MatMul-like operators (MatMulCost): the first two inputs' slices, plus the output's when a reduction factor is split
MATMUL_COST = COMPUTE_TYPES - {"Conv2D", "FlashAttentionScore"}
#: operators priced by their output's slice (SoftmaxCost, TileCost, BroadcastTo)
OUTPUT_COST = frozenset({"Softmax", "LogSoftmax", "Tile", "BroadcastTo"})
#: the reductions besides the ``Reduce*`` primitives (ReduceSumCost / ReduceMeanCost)
REDUCE_COST = frozenset({"SumExt", "MeanExt"})
#: GatherCost (IndexSelectInfo is a GatherInfo): 3x the table's slice and 7x the indices' when the output is partial
GATHER_COST = frozenset({"Gather", "GatherV2", "IndexSelect"})
#: EmbeddingInfo's GatherCost: the ids' slice plus the table's, unweighted whatever the table's split (measured,
#: MindSpore 2.9.0's GetStrategyByVisitedEdges log on mindone LLaMA, ids int32 [2, 2048], table float32 [32000, 256]
#: on 8 devices: ((1, 1), (1, 1)) 3.27844e+07, ((1, 1), (1, 8)) and ((1, 1), (2, 4)) 4.11238e+06)
EMBEDDING_COST = frozenset({"Embedding"})
#: the normalisations priced as every input's slice
NORM_COST = frozenset({"LayerNorm", "RmsNorm"})


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
    if t in MATMUL_COST:
        c = sum(ins[:2]) + (outs[0] if reduced_split and outs else 0)
    elif t in OUTPUT_COST:
        c = outs[0] if outs else 0
    elif t.startswith("Reduce") or t in REDUCE_COST:
        c = ins[0] + ((2 if "Mean" in t else 1) * outs[0] if reduced_split and outs else 0)
    elif t in GATHER_COST and len(ins) >= 2:
        c = (3 * ins[0] + 7 * ins[1]) if reduced_split else ins[0] + ins[1]
    elif t in EMBEDDING_COST:
        c = sum(ins)
    elif t in ARITHMETIC_COST or t in NORM_COST or rule.batch_parallel or t in BATCH_PARALLEL_COST:
        # BatchParallelCost (Conv2DInfo and its subclasses too): every input's slice
        c = sum(ins)
    else:
        c = ins[0] if ins else 0
    if s.strategy and s.strategy[0] and s.strategy[0][0] == device_num and c > 1.0:
        c -= 1.0
    return float(c)


def _type_bytes(spec) -> int:
    return DTYPE_BYTES.get(spec.dtype, 4) if spec is not None else 4
