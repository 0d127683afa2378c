"""MindSpore's ``semi_auto_parallel`` mode: what a model whose every important operator calls ``shard()`` runs.

MindFormers trains in this mode (``parallel_mode: 1`` in its configs), so the experts' full ``shard()`` plan --
``strategist compare``'s reference (c) -- is what it gives. No propagation: MindSpore 2.9.0's step_parallel

* runs a configured operator with its strategy (a Cell-held primitive's strategy reaches every call of it);
* gives every other operator that has an OperatorInfo its **batch-parallel** strategy
  (``GenerateBatchParallelStrategy``: the operator's ``GenerateBatchStrategies``, dimension 0 of each input
  the operator's split flags allow split over every device of the stage, then ``GenerateBatchStrategiesWithCheck``
  lowers those splits to the gcd of the split dimensions and the device count; :func:`batch_strategy`);
* leaves an unconfigured **Cast** without an OperatorInfo (``IsParallelCareNode`` is false for it): the tensor
  passes through it in its producer's layout, and the consumer redistributes after it;
* maps layouts through Reshape (no strategy of its own).

Measured on a toy (``Mul`` shard ``((2, 4), (2, 4))`` -> ``Cast`` -> ``ReLU`` -> ``Neg`` shard ``((1, 8),)`` on 8
devices): MindSpore runs ReLU ``((8, 1),)`` (``gen_strategy``), inserts no redistribution between the Mul and the
Cast, and redistributes after the Cast (``tests/test_semi_auto.py``).

:func:`strategist.propagate.semi_auto_plan` builds that plan on strategist's engine (from :func:`semi_auto_anchors`
and :func:`arriving` here): every operator but the unconfigured Casts is
anchored; each such Cast is then anchored to the layout its input arrives in, until nothing changes (a Cast
after a Cast or a Reshape needs a second round).
"""
from __future__ import annotations

import math
from typing import Any

from ..errors import StrategyError
from ..vocab.graph import OpGraph
from ..vocab.layout import Layout
from ..vocab.mesh import Mesh
from .rules.sharding import shard
from ..vocab.anchors import Anchor, Direction
from .plan import Plan
from .rules.elementwise import ARITHMETIC_BASE, SCALAR_EXTRA_INPUTS
from .search.caches import cached_rule
from .search.structure import sibling_calls

#: operators MindSpore's semi_auto never gives a batch strategy: Reshape has no strategy at all (its layouts are
#: its neighbours'); an unconfigured Cast, handled apart, passes its input's layout on
NO_STRATEGY = frozenset({"Reshape"})

#: the origin of a batch strategy MindSpore's semi_auto gives an unconfigured operator
BATCH = Direction.SEMI_AUTO_BATCH
#: ... and of an unconfigured Cast's layout, its input's
FOLLOW = Direction.SEMI_AUTO_FOLLOW

#: OperatorInfos whose batch split flags are all set (``ReComputeBatchSplitFlagList``), Concat unless on axis 0
ALL_ROWS = frozenset("""Stack AddN FlashAttentionScore Select SoftmaxCrossEntropyWithLogits
SparseSoftmaxCrossEntropyWithLogits KLDivLoss Betainc GridSampler2D""".split())
#: ... none (Scatter*, Inplace*): every row whole
NO_ROWS = frozenset("""ScatterUpdate ScatterNdUpdate ScatterNdAdd ScatterNdSub ScatterNdMul ScatterNdDiv
ScatterNdMax ScatterNdMin TensorScatterUpdate KVCacheScatterUpdate InplaceAdd InplaceSub InplaceUpdate""".split())
#: ArithmeticBase and its kin: a row is split when its shape, right-aligned to the widest, has dim 0 != 1
ARITHMETIC = frozenset(set(ARITHMETIC_BASE) | set(SCALAR_EXTRA_INPUTS) | {"MaskedFill", "Lerp", "AddcmulExt", "AntiQuant",
                                                           "QuantV2", "Dequant", "Cdist", "BoundingBoxEncode"})
GATHERS = frozenset({"Gather", "GatherV2", "SparseGatherV2", "EmbeddingLookup", "IndexSelect"})
MATMULS = frozenset({"MatMul", "BatchMatMul", "MatMulExt", "BatchMatMulExt"})


def _split_rows(op, rule, n: int) -> tuple[list[int], dict[int, int]]:
    """Which strategy rows MindSpore's batch strategy splits, and (where not dimension 0) on which dimension:
    the operator's ``GenerateBatchStrategies``/``ReComputeBatchSplitFlagList`` (read from MindSpore's
    ops_info; the default splits row 0 only)."""
    t = op.type
    shapes = rule.strategy_shapes
    ins, outs = rule.input_shapes, rule.output_shapes
    rows = [i for i, shp in enumerate(shapes) if shp]
    if t in NO_ROWS:
        return [], {}
    if t in ALL_ROWS:
        return rows, {}
    if t == "Concat":     # all, or none when concatenating on axis 0
        return ([] if outs and ins and outs[0][0] != ins[0][0] else rows), {}
    if t in ARITHMETIC:
        width = max((len(x) for x in shapes), default=0)
        return [i for i in rows if len(shapes[i]) == width and shapes[i][0] != 1], {}
    if t in MATMULS:
        a, b = rule.inputs[0], rule.inputs[1]
        if t == "MatMul" or (len(a) == 2 and len(b) == 2):
            return [0], {0: a.index("i")}
        if len(a) == len(b):
            return ([0, 1] if len(a) > 2 else [0]), {}
        return ([0] if len(a) > len(b) else [1]), {}
    if t in GATHERS:      # the indices, never the table
        return [i for i in rows if i != 0][:1], {}
    if t in ("StridedSlice", "Slice", "StridedSliceExt", "SliceExt"):
        return ([0] if outs and ins and outs[0][0] == ins[0][0] else []), {}
    if t in ("Split", "SplitWithSize", "SplitTensor"):
        x = ins[0] if ins else ()
        return ([0] if len(x) > 1 and all(o[0] == x[0] for o in outs) else []), {}
    if t in ("CumSum", "CumsumExt", "CumProd", "Cummax", "Cummin"):   # split unless accumulating along dim 0
        x = rule.inputs[0]
        return ([0] if x and x[0] is not None else []), {}
    if t in ("OneHot", "OneHotExt"):   # its one row is the output's; split only when the indices divide
        return ([0] if shapes and shapes[0] and shapes[0][0] % n == 0 else []), {}
    if t == "GatherNd":
        return [i for i in rows if i == 1], {}
    return rows[:1] if rows and rows[0] == 0 else [], {}


def batch_strategy(op, rule, n: int) -> tuple:
    """MindSpore's ``GenerateBatchParallelStrategy`` for ``op`` under ``rule`` on ``n`` devices: the rows the
    operator's split flags name get their dimension 0 (MatMul: its ``i`` dimension) split over all ``n``
    devices, every other row stays whole (rank-0 rows ``()``); then ``GenerateBatchStrategiesWithCheck`` lowers
    every split to ONE value, the gcd of ``n`` and all the split dimensions (skipped when a row's length is
    not its input's rank: OneHot's and Tile's rows)."""
    shapes = rule.strategy_shapes
    if rule.batch_parallel:           # BatchParallelInfo: every row of its own subclasses (the losses),
        rows = [i for i, shp in enumerate(shapes) if shp]   # row 0 where it stands in for a missing Info
        split, at = (rows if rule.batch_info else rows[:1] if rows and rows[0] == 0 else []), {}
    else:
        split, at = _split_rows(op, rule, n)
    g = n
    ins = rule.input_shapes
    # the check reads the operator's INPUT shapes, and gives up when a row's length is not its input's rank
    # (OneHot's row is the output's; Tile's the multiples': there an unchecked n may fail the operator's Init,
    # as MindSpore's own does)
    if all(i < len(ins) and len(ins[i]) == len(shapes[i]) for i in split):
        for i in split:
            g = math.gcd(g, ins[i][at.get(i, 0)])
    out = []
    for i, shp in enumerate(shapes):
        row = [1] * len(shp)
        if i in split and shp:
            row[at.get(i, 0)] = g
        out.append(tuple(row))
    return tuple(out)


def arriving(plan: Plan, op) -> Layout | None:
    """The layout the tensor a Cast reads arrives in: its producer's output layout."""
    x = op.inputs[0]
    if x.kind == "op":
        ch = plan.choices.get(x.ref)
        if ch is not None and x.index < len(ch.outputs):
            return ch.outputs[x.index]
        return None
    res = plan.search       # a graph input: the layout the dataset strategy gives it (an unpriced plan's search)
    return res.dataset.get(x.ref) if res is not None and x.kind == "input" else None


def semi_auto_anchors(graph: OpGraph, mesh: Mesh, anchors: dict[str, Any]) -> tuple[dict[str, Any], list[str], set]:
    """The configured ``anchors`` plus MindSpore's batch strategy for every other operator that gets one
    (a configured primitive's other calls take its strategy, in the engine). Returns the anchors and the
    unconfigured Casts (to follow their inputs) and the configured operators (with the other calls of their
    primitives)."""
    siblings = sibling_calls(graph)
    configured = set(anchors)
    for name in list(configured):
        configured.update(siblings.get(name, ()))
    out = dict(anchors)
    casts = []
    for op in graph:
        if op.type == "Cast":          # never an OperatorInfo in semi_auto: even its shard() is ignored
            casts.append(op.name)
            out.pop(op.name, None)
            configured.discard(op.name)
            continue
        if op.name in configured or op.type in NO_STRATEGY:
            continue
        rule = cached_rule(op)
        if not rule.strategy_rows:
            continue
        strategy = batch_strategy(op, rule, mesh.size)
        try:
            shard(op, strategy, mesh.size, None, rule)
        except StrategyError as err:       # MindSpore's Init refuses its own batch strategy there too
            raise StrategyError(f"semi_auto_parallel gives {op.name} ({op.type}), which no shard() configures, the "
                                f"batch strategy {strategy}, which it cannot run ({err}); MindSpore fails there too: "
                                f"configure {op.name} with shard()") from None
        out[op.name] = Anchor(op.name, strategy, origin=BATCH)
    return out, casts, configured
