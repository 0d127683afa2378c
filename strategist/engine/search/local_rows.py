"""Device-local Reshape layouts: MindFormers' Morph bodies reshape each device's own slice between
sequence-first ``[S, B, ...]`` (or batch-first ``[B, S, ...]``) and token rows, not the global tensor."""
from __future__ import annotations

import math

from ...errors import StrategyError
from ...vocab.layout import Layout
from ..rules.reshape import reshape_layout


def local_rows_layout(src: Layout, out_shape: tuple[int, ...], rows: tuple[int, int],
                      seq_axes: frozenset | None = None) -> Layout | None:
    """A device-local Reshape between sequence-first ``[S, B, ...]`` and ``[S*B, ...]`` (MindFormers' Morph
    bodies; see :func:`strategist.frontend.mindformers.mark_local_rows`): merging, the rows take S's device axes
    then B's; splitting, the rows' axes are dealt back innermost first (the last axis to B while the
    split divides B, the rest to S). Merged rows do not say where S's axes ended, so ``seq_axes`` (the
    device axes MindFormers splits the sequence by: cp, and tp under sequence parallelism) stop B's share
    at the first of them. The other dims reshape as usual (:func:`reshape_layout`). None if the tail
    cannot keep its data in place.

    >>> x = Layout((8, 4, 16), (2, 4), ((), (0,), (1,)))       # [S, B, H], B by dp=2, H by tp=4
    >>> str(local_rows_layout(x, (32, 16), (8, 4)))
    '[32, 16]@[2, 4][d0,d1]'
    >>> str(local_rows_layout(local_rows_layout(x, (32, 16), (8, 4)), (8, 4, 16), (8, 4)))
    '[8, 4, 16]@[2, 4][-,d0,d1]'
    >>> sp = Layout((4, 8, 16), (2, 4), ((1,), (0,), ()))      # sequence parallel: S by tp, B by dp
    >>> r = local_rows_layout(sp, (32, 16), (4, 8)); str(r)
    '[32, 16]@[2, 4][d1xd0,-]'
    >>> str(local_rows_layout(r, (4, 8, 16), (4, 8))), str(local_rows_layout(r, (4, 8, 16), (4, 8), frozenset({1})))
    ('[4, 8, 16]@[2, 4][-,d1xd0,-]', '[4, 8, 16]@[2, 4][d1,d0,-]')
    """
    seq, batch = rows[:2]
    dm = src.dev_matrix
    if len(rows) > 2:
        return local_batch_first(src, tuple(out_shape), seq, batch, seq_axes)
    if src.shape[:2] == (seq, batch) and out_shape[:1] == (seq * batch,):
        lead = tuple(src.dims[0]) + tuple(src.dims[1])
        tail_src = Layout(src.shape[2:], dm, src.dims[2:]) if len(src.shape) > 2 else None
        tail_shape = out_shape[1:]
        new_lead: tuple = (lead,)
    elif src.shape[:1] == (seq * batch,) and out_shape[:2] == (seq, batch):
        axes = list(src.dims[0])
        to_b: list[int] = []
        while axes and batch % (math.prod(dm[a] for a in to_b) * dm[axes[-1]]) == 0 \
                and not (seq_axes and axes[-1] in seq_axes):
            to_b.insert(0, axes.pop())
        if seq % math.prod(dm[a] for a in axes):
            return None
        tail_src = Layout(src.shape[1:], dm, src.dims[1:]) if len(src.shape) > 1 else None
        tail_shape = out_shape[2:]
        new_lead = (tuple(axes), tuple(to_b))
    else:
        return None
    if tail_src is None or not tail_src.shape:
        if tail_shape and math.prod(tail_shape) != 1:
            return None
        return Layout(tuple(out_shape), dm, new_lead + tuple(() for _ in tail_shape))
    if tuple(tail_src.shape) == tuple(tail_shape):
        tail = tail_src
    else:
        tail = reshape_layout(tail_src, tuple(tail_shape))
        if tail is None:
            return None
        if tail.dev_matrix != dm:
            return None
    try:
        return Layout(tuple(out_shape), dm, new_lead + tuple(tail.dims))
    except StrategyError:
        return None


def local_batch_first(src: Layout, out_shape: tuple[int, ...], b: int, s: int,
                       seq_axes: frozenset | None) -> Layout | None:
    """MindFormers' MoE ``local_reshape_permute`` / ``unpermute`` Morphs: batch-first ``[B, S, h]`` and the
    token rows ``[1, B*S, h]`` reshaped on each device's own slice. Merging, the rows take B's axes then S's;
    splitting, the trailing sequence axes (``seq_axes``: cp, tp) go back to S and the rest to B, as the
    unpermute's out_strategy ``(dp, cp_tp)`` lays them.

    >>> x = Layout((8, 4096, 16), (2, 4), ((0,), (1,), ()))    # B by dp=2, S by tp=4
    >>> r = local_batch_first(x, (1, 32768, 16), 8, 4096, None); str(r)
    '[1, 32768, 16]@[2, 4][-,d0xd1,-]'
    >>> str(local_batch_first(r, (8, 4096, 16), 8, 4096, frozenset({1})))
    '[8, 4096, 16]@[2, 4][d0,d1,-]'
    """
    dm = src.dev_matrix
    tail = tuple(src.shape[2:]) if len(src.shape) == len(out_shape) else None
    if tail is None or tuple(out_shape[2:]) != tail:
        return None
    if src.shape[:2] == (b, s) and out_shape[:2] == (1, b * s):
        return Layout(out_shape, dm, ((), tuple(src.dims[0]) + tuple(src.dims[1])) + tuple(src.dims[2:]))
    if src.shape[:2] == (1, b * s) and out_shape[:2] == (b, s) and not src.dims[0]:
        axes = list(src.dims[1])
        to_s: list[int] = []
        while axes and seq_axes and axes[-1] in seq_axes and s % (math.prod(dm[a] for a in to_s) * dm[axes[-1]]) == 0:
            to_s.insert(0, axes.pop())
        if b % math.prod(dm[a] for a in axes):
            return None
        return Layout(out_shape, dm, (tuple(axes), tuple(to_s)) + tuple(src.dims[2:]))
    return None
