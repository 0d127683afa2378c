"""Strategies and Layouts -> :class:`~strategist.engine.rules.factor.Sharding`: every input's and output's layout
of an operator under a MindSpore strategy tuple (:func:`shard`), ``mindspore.Layout`` s (:func:`shard_layout`), an
anchor (:func:`shard_anchor`), a self-defined shard, or an ``enable_nd_tp`` (Batch)MatMul's 2D/3D tensor parallelism
(:func:`nd_tp_sharding`); and what an output holds before the operator's own reduction.

>>> from strategist.vocab.graph import Input, Op, TensorSpec
>>> x, w = TensorSpec((256, 784), "float32"), TensorSpec((784, 64), "float32")
>>> mm = Op("mm", "MatMul", "", "", "mm", "", (Input("input", "x", spec=x), Input("param", "w", spec=w),
...         Input("const", value=False), Input("const", value=False)), (TensorSpec((256, 64), "float32"),))
>>> s = shard(mm, ((2, 1), (1, 4)), 8)
>>> [str(l) for l in s.inputs], str(s.outputs[0])
(['[256, 784]@[2, 1, 4][d0,-]', '[784, 64]@[2, 1, 4][-,d2]'], '[256, 64]@[2, 1, 4][d0,d2]')
"""
from __future__ import annotations

import math

from ...memo import lru
from ...errors import StrategyError
from ...vocab.graph import Op, ShardLayout
from ...vocab.layout import Layout
from .common import const_arg, nonconst_tensor_slots
from .factor import FactorRule, Sharding
from .interleaved import without_interleaved
from .registry import rule_for


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
    return build_sharding(rule, tuple(tuple(s) for s in strategy), tuple(dm), splits, axis, repeat, out_strategy,
                          scatter)


def shard_anchor(op: Op, anchor, device_num: int, rule: FactorRule | None = None) -> Sharding:
    """The sharding an anchor (:class:`strategist.engine.plan.Anchor`: a strategy tuple or ``Layout`` rows, with their
    output forms) gives ``op``: :func:`shard_layout` or :func:`shard`."""
    if anchor.layouts is not None:
        outs = anchor.out_layouts
        return shard_layout(op, without_interleaved(tuple(anchor.layouts)), device_num,
                            without_interleaved(tuple(outs)) if outs else outs, rule)
    return shard(op, anchor.strategy, device_num, anchor.out_strategy, rule)


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
    s = build_sharding(rule, tuple(strategy), dm, splits, axis, 1, out_strat)
    if out_layouts:
        outs = []
        for j, o in enumerate(out_layouts):
            dims = tuple(tuple(n - 1 - k for k in rev) for rev in o.tensor_map)
            used = {a for d in dims for a in d}
            partial = tuple(a for a in s.partial_axes if a not in used)
            outs.append(Layout(rule.output_shapes[j], dm, dims, partial))
        s = Sharding(s.strategy, s.dev_matrix, s.splits, s.inputs, tuple(outs), s.partial_axes, s.grad_partial, 1)
    return s


def build_sharding(rule, strategy, dm, splits, axis, repeat, out_strategy, scatter=None) -> Sharding:
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
    specs = [op.inputs[i].spec for i in nonconst_tensor_slots(op)]
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

    >>> from strategist.vocab.graph import Input, TensorSpec
    >>> x, w = TensorSpec((64, 32), "float32"), TensorSpec((32, 64), "float32")
    >>> mm = Op("mm", "MatMul", "", "", "mm", "", (Input("input", "x", spec=x), Input("param", "w", spec=w),
    ...         Input("const", value=False), Input("const", value=False)), (TensorSpec((64, 64), "float32"),),
    ...         attrs={"enable_nd_tp": True})
    >>> lay = lambda *t: ShardLayout((2, 4), ("x", "y"), t)
    >>> s = nd_tp_sharding(mm, (lay((), (1, 0)), lay((1,), (0,))), 8)
    >>> [str(l) for l in s.inputs], str(s.outputs[0]), s.strategy
    (['[64, 32]@[2, 4][-,d0xd1]', '[32, 64]@[2, 4][d0,d1]'], '[64, 64]@[2, 4][-,d1xd0]', ((1, 8), (2, 4)))
    """
    # size: MatMul's enable_nd_tp layouts transcribed case by case from MindSpore's matmul_info.cc
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
    ta, tb = bool(const_arg(op, 2, False)), bool(const_arg(op, 3, False))
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
    return pre_reduce(s.outputs[j], output_scattered(s, j), tuple(sorted(output_partial(s, j))))


@lru("engine.rules.sharding.pre_reduce", 1 << 16)
def pre_reduce(out: Layout, scattered: tuple[int, ...], partial: tuple[int, ...]) -> Layout:
    dims = tuple(tuple(a for a in d if a not in scattered) for d in out.dims) if scattered else out.dims
    return Layout(out.shape, out.dev_matrix, dims, tuple(sorted(partial + scattered)))
