"""Helpers the operator families build their :class:`~strategist.engine.rules.factor.FactorRule` s with, and the
batch-parallel rule MindSpore gives an operator without an OperatorInfo of its own.

Each builder follows the MindSpore ``OperatorInfo`` of the same primitive: which dimensions may be split
(``CheckStrategy``), which splits must agree (``InferTensorMap``: one factor), which inputs are strategy inputs.
Python scalars (``x * 0.5`` -> ``Muls``, ``alpha`` of ``AddExt``, axes, flags) are never strategy inputs; a 0-d
*tensor* input is (strategy ``()``).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from ...vocab.graph import Op
from .factor import FactorRule

#: an operator family's rule builder: the operator's :class:`FactorRule` from its input and output shapes
Builder = Callable[[Op], FactorRule]


def nonconst_tensor_slots(op: Op) -> list[int]:
    """The tensor inputs that are not constants (a constant tensor is left out, unlike :func:`tensor_slots`)."""
    return [i for i, x in enumerate(op.inputs) if x.kind != "const" and x.spec is not None]


def tensor_slots(op: Op) -> list[int]:
    """Strategy inputs: every tensor input (op outputs, parameters, graph inputs and constant
    *tensors*, 0-d included); Python scalars, tuples, strings and None are not."""
    return [i for i, x in enumerate(op.inputs) if x.spec is not None]


def shape_of(op: Op, slot: int) -> tuple[int, ...]:
    """Input ``slot``'s shape (``()`` for a scalar constant)."""
    x = op.inputs[slot]
    if x.spec is not None:
        return tuple(x.spec.shape)
    return ()  # a scalar constant: a rank-0 strategy input, strategy ()


def out_shapes(op: Op) -> tuple[tuple[int, ...], ...]:
    """Every output's shape (``()`` for an output without a spec)."""
    return tuple(tuple(o.shape) if o is not None else () for o in op.outputs)


def const_arg(op: Op, slot: int, default=None):
    """Input ``slot``'s value when it is a constant, else ``default``."""
    if slot < len(op.inputs) and op.inputs[slot].kind == "const":
        return op.inputs[slot].value
    return default


def letters(n: int, prefix: str = "d") -> list[str]:
    """``n`` factor names: ``d0``, ``d1``, ..."""
    return [f"{prefix}{i}" for i in range(n)]


def make_rule(op, factors, ins, outs, slots, unsplittable=(), sizes=(), reduce="sum") -> FactorRule:
    """A :class:`FactorRule` over the strategy inputs ``slots`` of ``op``, shapes read from the operator."""
    in_shapes = tuple(shape_of(op, s) for s in slots)
    return FactorRule(tuple(factors), tuple(tuple(t) for t in ins), tuple(tuple(t) for t in outs),
                      tuple(slots), in_shapes, out_shapes(op), frozenset(unsplittable),
                      tuple(sizes), reduce)


def norm_axes(value, rank: int) -> tuple[int, ...]:
    """Axes given as an int, a tuple or nothing (every axis), non-negative and sorted."""
    if value is None or value == ():
        return tuple(range(rank))
    if isinstance(value, int):
        value = (value,)
    return tuple(sorted(a % rank for a in value))


def int_arg(v, default=None):
    """An int given as an int, a bool or a 1-tuple, else ``default``."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, (tuple, list)) and len(v) == 1 and isinstance(v[0], int):
        return v[0]
    return default


def axis_arg(op: Op, slot: int, attr: str | None = None, default=None):
    """An axis given as a constant input ``slot`` or a primitive attribute ``attr``."""
    v = const_arg(op, slot, None) if slot is not None else None
    if v is None and attr:
        v = op.attrs.get(attr)
    return default if v is None else v


def axes_unsplit(op: Op, axes) -> FactorRule:
    """One strategy input whose ``axes`` cannot be split; outputs of the input's rank keep the other
    factors (an output dim of a different size than the input's is ``None``). With ``reduce_out`` the
    axes are dropped from outputs of lower rank (``keep`` False)."""
    x = shape_of(op, tensor_slots(op)[0])
    axes = norm_axes(axes, len(x)) if len(x) else ()
    f = letters(len(x))
    outs = []
    for o in out_shapes(op):
        if len(o) == len(x):
            outs.append([f[i] if (o[i] == x[i] or i not in axes) and o[i] == x[i] else None for i in range(len(x))])
        elif len(o) == len(x) - len(axes):
            outs.append([g for i, g in enumerate(f) if i not in axes])
        else:
            outs.append([None] * len(o))
    return make_rule(op, f, [f], outs, [tensor_slots(op)[0]], unsplittable=[f[a] for a in axes])


def batch_parallel_rule(op: Op) -> FactorRule:
    """MindSpore's ``BatchParallelInfo``, what an operator without an OperatorInfo of its own gets
    ("Operator X use Batch Parallel"; Flatten is one): its one strategy splits dimension 0 of the
    FIRST input (and of every output) over all devices, the other inputs stay whole (measured:
    ``Dense(x, w)`` runs as ``((8, 1), (1, 1))``). When dim 0 of the first input or output does not
    divide by the device count, or the output is a scalar, MindSpore runs it StandAlone instead:
    everything replicated (see :func:`candidates`)."""
    slots = nonconst_tensor_slots(op)
    ins = []
    for k, slot in enumerate(slots):
        shp = shape_of(op, slot)
        ins.append(([None if k else "b"] + [None] * (len(shp) - 1)) if shp else [])
    r = make_rule(op, ["b"], ins, [["b"] + [None] * (len(o) - 1) if o else [] for o in out_shapes(op)], slots)
    return dataclasses.replace(r, batch_parallel=True)


def unknown_rule(op: Op) -> FactorRule:
    """No rule here for this operator: treated as MindSpore treats an operator it has no OperatorInfo
    for, batch-parallel (:func:`batch_parallel_rule`), with a warning."""
    return dataclasses.replace(batch_parallel_rule(op), known=False)
