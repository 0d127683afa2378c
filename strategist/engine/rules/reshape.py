"""Reshape: its placeholder rule (no strategy) and the layout algebra that maps a layout through it without
communication (:func:`reshape_layout`). Flatten, which has no OperatorInfo of its own, runs batch-parallel."""
from __future__ import annotations

import math

from ...memo import lru
from ...vocab.graph import Op
from ...vocab.layout import Layout
from .common import batch_parallel_rule, letters, make_rule, out_shapes, shape_of
from .factor import FactorRule


def reshape_placeholder(op: Op) -> FactorRule:
    """Reshape has no strategy (MindSpore: "Setting strategy for Reshape goes for nothing!"); the
    propagation engine maps layouts through it with :func:`reshape_layout`."""
    return make_rule(op, letters(len(shape_of(op, 0))), [[None] * len(shape_of(op, 0))],
                     [[None] * len(o) for o in out_shapes(op)], [0])


@lru("engine.rules.reshape.reshape_layout", 1 << 16)      # pure; pricing maps every Reshape's output back on each plan it prices
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


#: (builder, primitive names) pairs this family registers (:mod:`strategist.engine.rules.registry`)
REGISTRATIONS = (
    (reshape_placeholder, ("Reshape",)),
    # Flatten has no OperatorInfo of its own: MindSpore runs it as BatchParallelInfo
    (batch_parallel_rule, ("Flatten",)),
)
