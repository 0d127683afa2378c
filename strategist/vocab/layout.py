"""Tensor layouts over a device matrix: pure functions, frozen values.

A :class:`Layout` says how one tensor is spread over ``N`` devices, in MindSpore's terms: a device
matrix (``dev_matrix``, outer -> inner; device rank = row-major index into it) and, for every tensor
dimension, the device-matrix axes that split it (outer -> inner; ``()`` = not split). Axes no dimension
uses hold repeated copies ("repeated calculation"). ``partial`` lists axes over which the devices
hold partial sums still to be reduced (a MatMul whose contracted dimension is split).

MindSpore writes a tensor map counting axes from the right with ``-1`` for "not split"; this module
counts from the left (``Layout.tensor_map()`` converts). Multi-axis dimensions (``("dp", "cp")`` in
``mindspore.Layout``) are first-class: a dimension's slice index is the mixed-radix number of its
axes' coordinates, outer axis most significant — the encoding MindSpore's Layout dict records
(``tensor_map`` entry ``(2, 1)`` for ``("dp", "cp")`` over ``("dp", "cp", "tp")``).

>>> x = Layout((256, 64), (2, 4), ((0,), (1,)))
>>> x.slice_shape
(128, 16)
>>> x.tensor_map()
(1, 0)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..memo import lru
from ..errors import StrategyError


@dataclass(frozen=True)
class Layout:
    shape: tuple[int, ...]
    dev_matrix: tuple[int, ...]
    dims: tuple[tuple[int, ...], ...]
    partial: tuple[int, ...] = ()

    def __post_init__(self):
        if len(self.dims) != len(self.shape):
            raise StrategyError(f"layout has {len(self.dims)} dims for a rank-{len(self.shape)} tensor")
        used = [a for d in self.dims for a in d] + list(self.partial)
        if len(set(used)) != len(used):
            raise StrategyError(f"layout uses a device axis twice: {self.dims} partial {self.partial}")
        if any(not 0 <= a < len(self.dev_matrix) for a in used):
            raise StrategyError(f"layout axis out of range for device matrix {self.dev_matrix}")
        numel = 1
        for i, (n, d) in enumerate(zip(self.shape, self.dims)):
            split = math.prod(self.dev_matrix[a] for a in d)
            if n % split:
                raise StrategyError(f"dimension {i} of size {n} cannot be split {split} ways")
            numel *= n // split
        object.__setattr__(self, "_numel", numel)     # slice_numel: read millions of times by the search
        # layouts key most of propagation's caches: hash once (the value the dataclass' own __hash__ gives)
        object.__setattr__(self, "_hash", hash((self.shape, self.dev_matrix, self.dims, self.partial)))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        if self is other:
            return True
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._hash == other._hash and self.shape == other.shape and self.dev_matrix == other.dev_matrix \
            and self.dims == other.dims and self.partial == other.partial

    @property
    def device_num(self) -> int:
        return math.prod(self.dev_matrix)

    def split(self, dim: int) -> int:
        return math.prod(self.dev_matrix[a] for a in self.dims[dim])

    @property
    def strategy(self) -> tuple[int, ...]:
        """Split count per dimension, as in a ``shard()`` tuple."""
        return tuple(self.split(i) for i in range(len(self.shape)))

    @property
    def slice_shape(self) -> tuple[int, ...]:
        return tuple(n // self.split(i) for i, n in enumerate(self.shape))

    @property
    def slice_numel(self) -> int:
        return self._numel

    @property
    def used_devices(self) -> int:
        """Devices holding distinct data (product of the splits)."""
        return math.prod(self.strategy)

    def tensor_map(self) -> tuple:
        """MindSpore's right-indexed tensor map: an int per dim (-1 = not split), a tuple for multi-axis."""
        n = len(self.dev_matrix)
        out = []
        for d in self.dims:
            rev = tuple(n - 1 - a for a in d)
            out.append(-1 if not rev else rev[0] if len(rev) == 1 else rev)
        return tuple(out)

    def __str__(self) -> str:
        dims = ",".join("x".join(f"d{a}" for a in d) or "-" for d in self.dims)
        p = f" partial(d{',d'.join(map(str, self.partial))})" if self.partial else ""
        return f"{list(self.shape)}@{list(self.dev_matrix)}[{dims}]{p}"

    def coords(self, rank: int) -> tuple[int, ...]:
        return _coords(self.dev_matrix, rank)

    def box(self, rank: int) -> tuple[tuple[int, int], ...]:
        """The [start, stop) range of every dimension held by device ``rank``."""
        c = self.coords(rank)
        out = []
        for n, d in zip(self.shape, self.dims):
            idx, split = 0, 1
            for a in d:
                idx = idx * self.dev_matrix[a] + c[a]
                split *= self.dev_matrix[a]
            size = n // split
            out.append((idx * size, (idx + 1) * size))
        return tuple(out)

    def placement(self) -> tuple:
        """Per device: its box and which partial-sum group coordinate it holds. Equal placements
        mean the same data on every device, whatever the device matrices."""
        out = []
        for r in range(self.device_num):
            c = self.coords(r)
            out.append((self.box(r), _partial_key(self, c)))
        return tuple(out)

    def same_as(self, other: "Layout") -> bool:
        """True when both layouts put the same data on every device."""
        if self.shape != other.shape or self.device_num != other.device_num:
            return False
        if self == other:
            return True
        return self.placement() == other.placement()


def _partial_key(layout: Layout, c: tuple[int, ...]):
    # devices along a partial axis hold different addends; record the (size, coordinate)
    # products so that equivalent partial groups over different matrices compare equal
    if not layout.partial:
        return ()
    idx, n = 0, 1
    for a in sorted(layout.partial):
        idx = idx * layout.dev_matrix[a] + c[a]
        n *= layout.dev_matrix[a]
    return (n, idx)


@lru("vocab.layout._coords", 4096)
def _coords(dev_matrix: tuple[int, ...], rank: int) -> tuple[int, ...]:
    out = []
    for size in reversed(dev_matrix):
        out.append(rank % size)
        rank //= size
    return tuple(reversed(out))


# --------------------------------------------------------------------------------------
# device-matrix refinement


def _boundaries(dev_matrix: tuple[int, ...]) -> list[int]:
    """Inner strides of each axis, plus the device count: [1, d_k, d_k*d_{k-1}, ..., N]."""
    out, s = [1], 1
    for d in reversed(dev_matrix):
        s *= d
        out.append(s)
    return out


def common_matrix(*mats: tuple[int, ...]) -> tuple[int, ...] | None:
    """The coarsest device matrix refining all of ``mats`` (same device count), or None.

    >>> common_matrix((2, 4), (8,), (4, 2))
    (2, 2, 2)
    >>> common_matrix((2, 3), (3, 2)) is None
    True
    """
    n = {math.prod(m) for m in mats}
    if len(n) != 1:
        return None
    cuts = sorted({b for m in mats for b in _boundaries(m)})
    for a, b in zip(cuts, cuts[1:]):
        if b % a:
            return None
    return tuple(b // a for a, b in reversed(list(zip(cuts, cuts[1:]))))


def refine(layout: Layout, target: tuple[int, ...]) -> Layout:
    """Re-express ``layout`` over the finer device matrix ``target`` (same placement)."""
    if layout.dev_matrix == target:
        return layout
    tb = _boundaries(target)       # boundary k is the stride below target axis (len-1-k)
    nt = len(target)
    mapping: dict[int, tuple[int, ...]] = {}
    src_b = _boundaries(layout.dev_matrix)
    ns = len(layout.dev_matrix)
    for a in range(ns):
        lo, hi = src_b[ns - 1 - a], src_b[ns - a]
        i, j = tb.index(lo), tb.index(hi)
        # target axes covering [lo, hi), outer -> inner
        mapping[a] = tuple(nt - 1 - k for k in range(j - 1, i - 1, -1))
    dims = tuple(tuple(x for a in d for x in mapping[a]) for d in layout.dims)
    partial = tuple(sorted(x for a in layout.partial for x in mapping[a]))
    return Layout(layout.shape, target, dims, partial)


@lru("vocab.layout.squeeze", 1 << 16)
def squeeze(layout: Layout) -> Layout:
    """Drop device axes of size 1 (placement unchanged)."""
    keep = [a for a, d in enumerate(layout.dev_matrix) if d > 1]
    if len(keep) == len(layout.dev_matrix):
        return layout
    if not keep:
        return Layout(layout.shape, (1,), tuple(() for _ in layout.shape))
    new = {a: i for i, a in enumerate(keep)}
    return Layout(layout.shape, tuple(layout.dev_matrix[a] for a in keep),
                  tuple(tuple(new[a] for a in d if a in new) for d in layout.dims),
                  tuple(new[a] for a in layout.partial if a in new))


def unify(a: Layout, b: Layout) -> tuple[Layout, Layout] | None:
    """Both layouts over one common device matrix, or None when none exists."""
    a, b = squeeze(a), squeeze(b)
    m = common_matrix(a.dev_matrix, b.dev_matrix)
    if m is None:
        return None
    return refine(a, m), refine(b, m)
