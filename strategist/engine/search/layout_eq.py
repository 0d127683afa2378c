"""The notions of layout equality the search and its pricing use, each named once, and the small layout
helpers they rest on:

* :func:`edge_cache_key` -- MindSpore's edge-cost cache key: (device arrangement, tensor map) in the standard
  form, shape and type left out;
* :func:`ms_standard_equal` -- ``TensorLayout::operator==`` where a Reshape meets its neighbours: the same shape
  and the same cache key;
* :func:`ms_layout_equal` -- ``TensorLayout::operator==`` of the 2.9 sources on identity edges: the same shape,
  and the same key or the same rank-0 device groups dimension by dimension;
* :func:`same_placement` -- strategist's own: the same data on every device (the redistribution between them
  is the identity), however the layouts are written."""
from __future__ import annotations

import itertools
import math

from ...memo import lru, table
from ...vocab.graph import DTYPE_BYTES
from ...vocab.layout import Layout
from .caches import cached_plan


def type_len(spec) -> int:
    return DTYPE_BYTES.get(spec.dtype, 4) if spec is not None else 4


@lru("engine.search.layout_eq.edge_cache_key", 1 << 16)
def edge_cache_key(layout: Layout) -> tuple:
    """MindSpore's edge-cost cache key of a layout: (device arrangement, tensor map) in the standard form
    (size-1 device axes dropped); the tensor shape and type are not part of it."""
    keep = [i for i, d in enumerate(layout.dev_matrix) if d != 1]
    idx = {a: j for j, a in enumerate(keep)}
    return (tuple(layout.dev_matrix[i] for i in keep),
            tuple(tuple(idx[a] for a in d if a in idx) for d in layout.dims))


_KEY_IDS = table("search: small id per edge cache key", 1 << 16)
_IDS = itertools.count()   # never reused: an id a cleared table gave out is not given to another key


@lru("engine.search.layout_eq.edge_cache_id", 1 << 16)
def edge_cache_id(layout: Layout) -> int:
    """A small integer naming :func:`edge_cache_key`'s key (equal keys, equal ids): a pair of them hashes in
    constant time where a pair of nested key tuples is hashed element by element."""
    key = edge_cache_key(layout)
    got = _KEY_IDS.get(key)
    if got is None:
        got = _KEY_IDS[key] = next(_IDS)
    return got


@lru("engine.search.layout_eq.without_partial", 1 << 16)
def without_partial(layout: Layout) -> Layout:
    """``layout`` with its partial sums reduced (one object per layout, so id-keyed caches keep hitting)."""
    return layout if not layout.partial else Layout(layout.shape, layout.dev_matrix, layout.dims)


def ms_standard_equal(a: Layout, b: Layout) -> bool:
    """MindSpore's ``TensorLayout::operator==`` as 2.9 applies it where a Reshape meets its neighbours
    (``ReshapeInfo::GetSWCIndexBy{Input,Output}LayoutWith{ZeroComm,MiniComm}``,
    ``OperatorInfo::GetStrategyFromSWCBy{Input,Output}Layout``): the same tensor shape, device
    arrangement and tensor map in the standard form (size-1 device axes dropped). Layouts that place
    the same data over different arrangements differ: a replicated [32, 8] over [2, 2] (a MatMul
    ((1, 1), (2, 1)) input, or a Reshape's own replicated output over its input's [2, 2, 1]) is not
    the replicated [32, 8] over [4] of ((1, 1), (1, 1)) (random nets 325, 385; MindSpore's log
    "ReshapeInfo33: Set SWC index: 8" then "MatMulInfo44: Set strategy [[1, 1], [2, 1]]").
    (The rank-by-rank device-group comparison of the 2.9 sources is ``IsSameTensorLayout`` in
    step_parallel_utils.cc, used for a tensor with several consumers, not here.)"""
    return a.shape == b.shape and edge_cache_key(a) == edge_cache_key(b)


def ms_layout_equal(a: Layout, b: Layout) -> bool:
    """MindSpore's ``TensorLayout::operator==`` (tensor_layout.cc): the same shape, and the same normalised
    device arrangement and tensor map, or else, dimension by dimension, the same ranks along its device
    axes as rank 0 sees them (an unsplit dimension matches only an unsplit one). Identity edges (a
    TmpIdentity to a reader of its parameter) admit only candidate pairs equal in this sense."""
    if a.shape != b.shape:
        return False
    if edge_cache_key(a) == edge_cache_key(b):
        return True
    for da, db in zip(a.dims, b.dims):
        if _rank0_group(a, da) != _rank0_group(b, db):
            return False
    return True


def _rank0_group(layout: Layout, axes: tuple[int, ...]) -> tuple[int, ...] | None:
    """The ranks along ``axes`` of ``layout``'s device matrix seen from rank 0 (``GetDevListByTensorMapValue``);
    None for an unsplit dimension (MAP_NONE)."""
    dm = layout.dev_matrix
    axes = tuple(a for a in axes if dm[a] > 1)
    if not axes:
        return None
    strides = [math.prod(dm[a + 1:]) for a in range(len(dm))]
    ranks = [0]
    for a in axes:          # outer axis most significant
        ranks = [r + c * strides[a] for r in ranks for c in range(dm[a])]
    return tuple(ranks)


def same_placement(a: Layout, b: Layout) -> bool:
    return a.shape == b.shape and (a == b or cached_plan(a, b).is_identity)


def gather_variants(layout: Layout):
    """``layout``, then layouts with ever more device axes gathered (innermost first), then replicated."""
    yield layout
    dims = [list(d) for d in layout.dims]
    while any(dims):
        d = max(range(len(dims)), key=lambda i: (len(dims[i]), -i))
        dims[d].pop()
        yield Layout(layout.shape, layout.dev_matrix, tuple(tuple(x) for x in dims))


def layout_text(layout: Layout) -> str:
    return f"{list(layout.strategy)} over device matrix {list(layout.dev_matrix)}"
