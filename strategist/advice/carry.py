"""Anchors advised on one mesh, carried onto another mesh of the same axes at other sizes.

A ``mindspore.Layout`` anchor names its mesh axes: on the other mesh it splits each dimension by the axes of the
same names (an axis the other mesh does not have, being of size 1 there, drops out). A strategy tuple gives sizes
only: each size is read as the product of the one set of the mesh's axes that multiplies to it, and becomes the
product of those axes on the other mesh; where no set or more than one does (``dp=8,tp=8``: an 8 is either), the
anchors are not carried.

    >>> from strategist.vocab.mesh import Mesh
    >>> carry_size(32, Mesh.parse("dp=4,tp=8"), Mesh.parse("dp=16,tp=8"))
    128
    >>> carry_size(8, Mesh.parse("dp=8,tp=8"), Mesh.parse("dp=16,tp=8")) is None
    True
"""
from __future__ import annotations

import dataclasses
import itertools
import math

from ..vocab.anchors import Anchor
from ..vocab.graph import ShardLayout
from ..vocab.mesh import Mesh


def _axis_sets(mesh: Mesh) -> list[tuple[tuple[str, int], ...]]:
    """Every non-empty set of ``mesh``'s axes above size 1, as ``(name, size)`` pairs: what a strategy tuple's size
    can be the product of."""
    axes = [(n, s) for n, s in mesh.axes if s > 1]
    return [c for r in range(1, len(axes) + 1) for c in itertools.combinations(axes, r)]


def told_apart_from_dp(mesh: Mesh) -> bool:
    """Whether every size a strategy tuple can give on ``mesh`` says whether dp is among its axes: no set of its axes
    with dp multiplies to the size of a set without it. Anchors on such a mesh carry to every mesh that differs from
    it in dp alone (a sweep's family), whatever sizes the other axes share.

    >>> told_apart_from_dp(Mesh.parse("dp=8,tp=2,cp=2")), told_apart_from_dp(Mesh.parse("dp=4,tp=2,cp=2"))
    (True, False)
    """
    sets = _axis_sets(mesh)
    with_dp = {math.prod(s for _, s in c) for c in sets if any(n == "dp" for n, _ in c)}
    without = {math.prod(s for _, s in c) for c in sets if all(n != "dp" for n, _ in c)}
    return not with_dp & without


def carry_size(size: int, src: Mesh, dst: Mesh) -> int | None:
    """``size`` (a product of ``src``'s axes) as the product of the same axes on ``dst``. Where more than one set
    of ``src``'s axes multiplies to it, the size every one of them gives on ``dst``, if they agree. Where none
    does, a split inside an axis that keeps its size on ``dst`` (4 key/value heads under tp=32: the size itself),
    or else the fewest whole axes times such a split (a batch split 16 ways under ``dp=4,tp=8``: dp and 4 of tp's
    8, ``dp x 4`` on ``dst``, as the advisor splits it there), where every reading of that kind agrees. None
    otherwise.

    >>> carry_size(2, Mesh.parse("dp=2,ep=2,tp=4"), Mesh.parse("dp=2,ep=2,tp=4,pp=2"))   # dp or ep: 2 either way
    2
    >>> carry_size(2, Mesh.parse("dp=2,ep=2,tp=4"), Mesh.parse("dp=4,ep=2,tp=4")) is None  # dp (4) or ep (2)?
    True
    >>> carry_size(4, Mesh.parse("dp=2,tp=32"), Mesh.parse("dp=8,tp=32"))    # inside tp, which keeps its 32
    4
    >>> carry_size(16, Mesh.parse("dp=4,tp=8"), Mesh.parse("dp=32,tp=8"))    # dp and 4 of tp's 8
    128
    """
    if size == 1:
        return 1
    sets = [c for c in _axis_sets(src) if math.prod(s for _, s in c) == size]
    if not sets:
        return _partial_size(size, src, dst)
    sizes = {_size_on(dst, (n for n, _ in c)) for c in sets}
    return sizes.pop() if len(sizes) == 1 else None


def _size_on(dst: Mesh, names) -> int:
    """The product of the axes ``names`` on ``dst`` (1 for an axis it lacks)."""
    return math.prod(dst.get(n) if n in dst.names else 1 for n in names)


def _partial_size(size: int, src: Mesh, dst: Mesh) -> int | None:
    """``size``, which no set of ``src``'s axes multiplies to, read as the fewest whole axes times a part of one
    more axis that keeps its size on ``dst`` (:func:`_readings`): their size on ``dst``, None where no reading
    does or the readings with that many whole axes disagree."""
    sets = [()] + _axis_sets(src)
    for count in range(len(src.axes) + 1):
        out = set().union(*(_readings(size, whole, src, dst) for whole in sets if len(whole) == count))
        if out:
            return out.pop() if len(out) == 1 else None
    return None


def _readings(size: int, whole: tuple, src: Mesh, dst: Mesh) -> set[int]:
    """``size`` as ``whole``'s axes times a part of another axis that ``dst`` keeps at its size: ``{its size on
    dst}``, or nothing where it is not."""
    rest, left = divmod(size, math.prod(s for _, s in whole))
    names = {n for n, _ in whole}
    if left or rest == 1 or not any(n not in names and s % rest == 0 and dst.get(n) == s for n, s in src.axes):
        return set()
    return {_size_on(dst, names) * rest}


def carry_layout(lay: ShardLayout, src: Mesh, dst: Mesh) -> ShardLayout | None:
    """``lay`` (over ``src``'s axes, or over a device matrix that splits some of them further, as
    FlashAttention's key/value heads under more tp than heads: ``('tp', 'tp_group')``) over ``dst``: each of the
    mesh's axes at its size on ``dst`` (dropped where ``dst`` has it at 1), the others as they are; None where
    an axis it splits further changes size, or where the sizes do not make up ``dst``'s devices."""
    names, sizes = [], []
    for n, size in zip(lay.alias_name, lay.device_matrix):
        whole = n in src.names and size == src.get(n)
        if not whole and src.get(n) != dst.get(n):
            return None
        new = dst.get(n) if whole else size
        if new > 1:
            names.append(n)
            sizes.append(new)
    if math.prod(sizes) != dst.size:
        return None
    k = len(names)
    tmap = tuple(tuple(k - 1 - names.index(n) for n in dim if n in names) for dim in lay.axes())
    return ShardLayout(tuple(sizes), tuple(names), tmap)


def _carry_strategy(strategy, src: Mesh, dst: Mesh):
    if strategy is None:
        return None
    rows = []
    for row in strategy:
        sizes = tuple(carry_size(v, src, dst) for v in row)
        if None in sizes:
            raise ValueError
        rows.append(sizes)
    return tuple(rows)


def _carry_layouts(layouts, src: Mesh, dst: Mesh):
    if layouts is None:
        return None
    out = tuple(carry_layout(x, src, dst) for x in layouts)
    if None in out:
        raise ValueError
    return out


def carry_anchor(a: Anchor, src: Mesh, dst: Mesh) -> Anchor | None:
    """``a`` (an anchor on ``src``) on ``dst``; None where its strategy's sizes do not name their axes."""
    try:
        return dataclasses.replace(
            a, strategy=_carry_strategy(a.strategy, src, dst), out_strategy=_carry_strategy(a.out_strategy, src, dst),
            layouts=_carry_layouts(a.layouts, src, dst), out_layouts=_carry_layouts(a.out_layouts, src, dst))
    except ValueError:
        return None


def carry_anchors(anchors: dict[str, Anchor], src: Mesh, dst: Mesh) -> dict[str, Anchor] | None:
    """Every anchor of ``anchors`` on ``dst`` (:func:`carry_anchor`); None where one cannot be carried, or where
    ``dst`` has an axis ``src`` lacks (where it would split nothing says)."""
    if any(n not in src.names for n, s in dst.axes if s > 1):
        return None
    out = {}
    for name, a in anchors.items():
        c = carry_anchor(a, src, dst)
        if c is None:
            return None
        out[name] = c
    return out
