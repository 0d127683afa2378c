"""Redistribution planning: from one tensor layout to another, the ordered MindSpore-style operators.

``plan(src, dst)`` returns a :class:`Redistribution`: a list of :class:`Collective` steps over one device matrix
(the common refinement of both layouts' matrices). Steps, as MindSpore's
``RedistributionOperatorInfer`` names them:

* ``Split`` (SplitByAxis: a local StridedSlice, no communication),
* ``AllToAll`` (PermuteByAxis: one device axis moves from one tensor dim to another),
* ``AllGather`` (ConcatByAxis: a device axis stops splitting a dim),
* ``AllReduce`` / ``ReduceScatter`` (partial sums reduced; the scatter when the target splits a dim
  by that same axis next).

Order: local splits first, then an AllToAll where an axis leaves one dim for another, else an
AllGather of a dim's innermost axis — MindSpore's split -> permute -> concat loop, generalised to
dimensions split over several axes (``mindspore.Layout``'s ``("dp", "cp")``).

Two costs per plan:

* :meth:`Redistribution.mindspore_cost` — MindSpore's cost model (``tensor_redistribution.cc``, spec §3):
  forward/backward communication and computation in bytes, refined with the threshold/const/bias
  rule; this is what sharding propagation minimises.
* :meth:`Redistribution.physical` — what each device actually sends, and the time under a
  :class:`~strategist.mesh.Hardware` profile (alpha-beta per link class, ring algorithms).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .layout import Layout, unify

#: MindSpore CostModelContext defaults (costmodel_context.h).
COMMUNI_THRESHOLD = 2048.0
COMMUNI_CONST = 3072.0
COMMUNI_BIAS = 1024.0
ALLTOALL_SCALE_FACTOR = 2.0
ALLGATHER_REDUCESCATTER_SCALE_FACTOR = 0.5


@dataclass(frozen=True)
class Collective:
    """One redistribution step on ``dev_matrix``, its group running along device axis ``axis``."""

    kind: str                       # Split | AllGather | AllToAll | AllReduce | ReduceScatter
    axis: int
    dim: int                        # tensor dim split / gathered / scattered (AllToAll: split dim)
    concat_dim: int                 # AllToAll: the dim gathered; else -1
    n: int                          # group size
    slice_shape: tuple[int, ...]    # each device's slice before the step
    dev_matrix: tuple[int, ...]

    @property
    def slice_numel(self) -> int:
        return math.prod(self.slice_shape)

    def group(self, rank: int = 0) -> tuple[int, ...]:
        """Ranks of the group ``rank`` belongs to."""
        stride = math.prod(self.dev_matrix[self.axis + 1:])
        coord = (rank // stride) % self.n
        base = rank - coord * stride
        return tuple(base + k * stride for k in range(self.n))

    def __str__(self) -> str:
        if self.kind == "AllToAll":
            where = f"split_dim={self.dim} concat_dim={self.concat_dim}"
        elif self.kind == "AllReduce":
            where = ""
        else:
            where = f"dim={self.dim}"
        return f"{self.kind}(n={self.n}, group={list(self.group(0))}{', ' + where if where else ''})"

    # -- MindSpore's cost model (elements; spec §3.2) ------------------------------------
    def ms_cost(self) -> tuple[float, float, float]:
        """(forward comm, backward comm, computation) in elements, as MindSpore counts them.

        AllReduce/ReduceScatter never appear in MindSpore's redistribution (the producing operator
        reduces its own partial sums); we charge them like the operator does (MatMulCost: the slice
        reduced, forward) and give ReduceScatter the AllGather backward of its output.
        """
        s, n = float(self.slice_numel), float(self.n)
        if self.kind == "Split":
            return 0.0, 0.0, s
        if self.kind == "AllToAll":
            comp = s if self.concat_dim == 0 else s + 2 * s * n
            return ALLTOALL_SCALE_FACTOR * s, ALLTOALL_SCALE_FACTOR * s, comp
        if self.kind == "AllGather":
            comp = s if self.dim == 0 else s + 2 * s * n
            return (ALLGATHER_REDUCESCATTER_SCALE_FACTOR * s * n,
                    ALLGATHER_REDUCESCATTER_SCALE_FACTOR * s, comp)
        if self.kind == "ReduceScatter":
            return s, ALLGATHER_REDUCESCATTER_SCALE_FACTOR * s, s
        return s, 0.0, s  # AllReduce

    # -- physical volume (bytes each device sends) ----------------------------------------
    def bytes_sent(self, type_len: int) -> float:
        s, n = self.slice_numel * type_len, self.n
        if self.kind == "Split":
            return 0.0
        if self.kind == "AllGather":
            return (n - 1) * s                 # ring: pass n-1 shards of size s
        if self.kind in ("ReduceScatter", "AllToAll"):
            return (n - 1) / n * s             # s = the full local slice
        return 2 * (n - 1) / n * s             # AllReduce = ReduceScatter + AllGather

    def steps(self) -> int:
        """Latency terms of the ring/pairwise algorithm."""
        if self.kind == "Split":
            return 0
        return 2 * (self.n - 1) if self.kind == "AllReduce" else self.n - 1


def refine_cost(x: float) -> float:
    """MindSpore's RefineForPracticalCost on one communication figure (bytes)."""
    if 0 < x <= COMMUNI_THRESHOLD:
        return COMMUNI_CONST
    if x > COMMUNI_THRESHOLD:
        return x + COMMUNI_BIAS
    return x


@dataclass(frozen=True)
class MsCost:
    """MindSpore's redistribution cost of one edge, bytes (type length applied)."""

    forward: float
    backward: float
    computation: float

    @property
    def communication(self) -> float:
        """``communication_cost_`` after refinement: what sharding propagation compares first."""
        return refine_cost(self.forward) + refine_cost(self.backward)


@dataclass(frozen=True)
class Physical:
    """Bytes each device sends and the time, per step and in total."""

    bytes_sent: float
    seconds: float
    steps: tuple[tuple[str, float, float], ...] = field(default=())   # (step, bytes, seconds)


@dataclass(frozen=True)
class Redistribution:
    src: Layout
    dst: Layout
    ops: tuple[Collective, ...]

    @property
    def is_identity(self) -> bool:
        return not self.ops

    @property
    def has_communication(self) -> bool:
        return any(op.kind != "Split" for op in self.ops)

    def mindspore_cost(self, type_len: int = 4, dtype: str = "") -> MsCost:
        f = b = c = 0.0
        for op in self.ops:
            of, ob, oc = op.ms_cost()
            f, b, c = f + of, b + ob, c + oc
        if dtype == "bool" and f + b > 0:
            return MsCost(math.inf, math.inf, math.inf)  # "Communication Operators don't support bool dtype!"
        return MsCost(f * type_len, b * type_len, c * type_len)

    def physical(self, type_len: int, hardware=None) -> Physical:
        total_b, total_t, steps = 0.0, 0.0, []
        for op in self.ops:
            nb = op.bytes_sent(type_len)
            t = hardware.collective_seconds(op, nb) if hardware is not None and nb else 0.0
            steps.append((str(op), nb, t))
            total_b += nb
            total_t += t
        return Physical(total_b, total_t, tuple(steps))

    def __str__(self) -> str:
        return " -> ".join(map(str, self.ops)) or "(identity)"


def _is_prefix(a: list[int], b: tuple[int, ...]) -> bool:
    return len(a) <= len(b) and tuple(a) == b[: len(a)]


def plan(src: Layout, dst: Layout) -> "Redistribution":
    """The redistribution steps turning ``src`` into ``dst`` (same shape and device count).

    >>> a = Layout((256, 64), (2, 4), ((0,), (1,)))
    >>> print(plan(a, Layout((256, 64), (2, 4), ((0,), ()))))
    AllGather(n=4, group=[0, 1, 2, 3], dim=1)
    """
    if src.shape != dst.shape:
        raise ValueError(f"redistribution needs equal shapes, got {src.shape} and {dst.shape}")
    if src.device_num != dst.device_num:
        raise ValueError(f"redistribution needs equal device counts, got {src.device_num} and {dst.device_num}")
    if dst.partial:
        raise ValueError("a redistribution target cannot hold partial sums")
    if src == dst:
        return Redistribution(src, dst, ())
    u = unify(src, dst)
    if u is not None and u[0] == u[1]:
        return Redistribution(src, dst, ())          # same placement over different device matrices
    if u is None and src.same_as(dst):
        return Redistribution(src, dst, ())
    if u is None:
        # no common refinement (e.g. [2,3] vs [3,2]): gather everything, then slice
        ops = _steps(src, Layout(src.shape, src.dev_matrix, tuple(() for _ in src.shape)))
        ops += _steps(Layout(dst.shape, dst.dev_matrix, tuple(() for _ in dst.shape)), dst)
        return Redistribution(src, dst, tuple(ops))
    return Redistribution(src, dst, tuple(_steps(*u)))


def _steps(src: Layout, dst: Layout) -> list[Collective]:
    dm = src.dev_matrix
    state = [list(d) for d in src.dims]
    tgt = dst.dims
    ops: list[Collective] = []

    def slice_shape():
        return tuple(n // math.prod(dm[a] for a in d) for n, d in zip(src.shape, state))

    def emit(kind, axis, dim, concat=-1):
        ops.append(Collective(kind, axis, dim, concat, dm[axis], slice_shape(), dm))

    for a in sorted(src.partial):
        d = next((d for d in range(len(state))
                  if _is_prefix(state[d], tgt[d]) and len(state[d]) < len(tgt[d])
                  and tgt[d][len(state[d])] == a), None)
        if d is None:
            emit("AllReduce", a, -1)
        else:
            emit("ReduceScatter", a, d)
            state[d].append(a)

    while True:
        used = {a for d in state for a in d}
        wants = {d: tgt[d][len(state[d])] for d in range(len(state))
                 if _is_prefix(state[d], tgt[d]) and len(state[d]) < len(tgt[d])}
        free = [(d, a) for d, a in wants.items() if a not in used]
        if free:
            for d, a in free:
                emit("Split", a, d)
                state[d].append(a)
            continue
        bad = [c for c in range(len(state)) if state[c] and not _is_prefix(state[c], tgt[c])]
        if not bad:
            break
        moved = False
        for c in bad:
            a = state[c][-1]
            d = next((d for d, w in wants.items() if w == a and d != c), None)
            if d is not None:
                emit("AllToAll", a, d, c)
                state[c].pop()
                state[d].append(a)
                moved = True
                break
        if not moved:
            c = bad[0]
            emit("AllGather", state[c][-1], c)
            state[c].pop()
    assert tuple(map(tuple, state)) == tgt, (state, tgt)
    return ops
