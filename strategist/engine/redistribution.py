"""Redistribution planning: from one tensor layout to another, the ordered MindSpore-style operators.

``plan(src, dst)`` returns a :class:`Redistribution`: a list of :class:`Collective` steps over one device matrix
(the common refinement of both layouts' matrices). Steps, as MindSpore's
``RedistributionOperatorInfer`` names them:

* ``Split`` (SplitByAxis: a local StridedSlice, no communication),
* ``AllToAll`` (PermuteByAxis: one device axis moves from one tensor dim to another),
* ``AllGather`` (ConcatByAxis: a device axis stops splitting a dim),
* ``AllReduce`` / ``ReduceScatter`` (partial sums reduced; the scatter when the target splits a dim
  by that same axis next).

Order (MindSpore 2.9.0's graphs, not its stored source -- see docs/notes/communication.md): first, in
each dim split over several device axes, every axis after the outermost one (or after the prefix the target keeps)
is gathered in ONE AllGather over their product (adjacent axes: contiguous ranks), whether the target drops those
axes or wants them elsewhere (then sliced where the all-to-all would have been, in the order of the dims they
split); then local splits, an AllToAll where an axis leaves one dim for another, else an AllGather of the innermost
device axis left -- MindSpore's split -> permute -> concat loop, generalised to dimensions split over several axes
(``mindspore.Layout``'s ``("dp", "cp")``).

Two costs per plan:

* :meth:`Redistribution.mindspore_cost` — MindSpore's cost model (``tensor_redistribution.cc``, spec §3):
  forward/backward communication and computation in bytes, refined with the threshold/const/bias
  rule; this is what sharding propagation minimises. It is computed by :func:`ms_elements`, which
  re-runs MindSpore's own cost-mode inference (expanded layouts, permute = AllGather + Split, Reshape
  pair), not from the steps above; calibrated on 167 edge costs MindSpore printed.
* :meth:`Redistribution.physical` — what each device actually sends, and the time under a
  :class:`~strategist.vocab.mesh.Hardware` profile (alpha-beta per link class, ring algorithms).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ..vocab.comm import AS_ALLGATHER, AS_REDUCESCATTER, CommStep
from ..memo import lru
from ..vocab.layout import Layout, unify

#: MindSpore CostModelContext defaults (costmodel_context.h).
COMMUNI_THRESHOLD = 2048.0
COMMUNI_CONST = 3072.0
COMMUNI_BIAS = 1024.0
ALLTOALL_SCALE_FACTOR = 2.0
ALLGATHER_REDUCESCATTER_SCALE_FACTOR = 0.5
#: Computation charged for the Reshape pair TensorRedistribution inserts when unification expands the
#: tensor shape, per element of the source slice (fitted to MindSpore 2.9.0's printed edge costs).
RESHAPE_COST_FACTOR = 2.0


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

    @property
    def where(self) -> str:
        """The tensor dims it works on, as its label prints them."""
        if self.kind == "AllToAll":
            return f"split_dim={self.dim} concat_dim={self.concat_dim}"
        return "" if self.kind == "AllReduce" else f"dim={self.dim}"

    def step(self, nbytes: float = 0.0, seconds: float = 0.0, runs_as: str = "", dtype: str = "") -> CommStep:
        """This step as the cost model carries it (:class:`~strategist.vocab.comm.CommStep`)."""
        return CommStep(self.kind, self.group(0), nbytes, seconds, where=self.where, runs_as=runs_as, dtype=dtype)

    def __str__(self) -> str:
        return self.step().label

    def transposed(self) -> "Collective | None":
        """This step's backward as MindSpore's autodiff writes it (``grad_comm_ops``' bprops): an AllGather's
        is a ReduceScatter over the same group, a ReduceScatter's an AllGather, an AllToAll's the AllToAll back,
        an AllReduce's an AllReduce; a Split's (a StridedSlice) is StridedSliceGrad, no communication (None).
        Each moves the bytes of the forward step."""
        if self.kind == "Split":
            return None
        if self.kind == "AllGather":
            full = tuple(d * self.n if i == self.dim else d for i, d in enumerate(self.slice_shape))
            return replace(self, kind="ReduceScatter", slice_shape=full)
        if self.kind == "ReduceScatter":
            part = tuple(d // self.n if i == self.dim else d for i, d in enumerate(self.slice_shape))
            return replace(self, kind="AllGather", slice_shape=part)
        if self.kind == "AllToAll":
            after = tuple(d // self.n if i == self.dim else d * self.n if i == self.concat_dim else d
                          for i, d in enumerate(self.slice_shape))
            return replace(self, dim=self.concat_dim, concat_dim=self.dim, slice_shape=after)
        return self

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
        return ring_bytes(self.kind, self.n, self.slice_numel * type_len)

    def steps(self) -> int:
        """Latency terms: on a power-of-two group, recursive halving-doubling (HCCL's RHD, as NCCL's trees
        for small messages): log2(n) rounds, twice for an AllReduce, at the ring's bandwidth term; otherwise
        the ring's n - 1 (twice for an AllReduce). AllToAll is pairwise: n - 1.

        >>> Collective("AllReduce", 0, 0, -1, 64, (1,), (64,)).steps(), Collective("AllGather", 0, 0, -1, 6, (1,), (6,)).steps()
        (12, 5)
        """
        n = self.n
        if self.kind == "Split" or n <= 1:
            return 0
        rounds = n.bit_length() - 1 if n & (n - 1) == 0 and self.kind != "AllToAll" else n - 1
        return 2 * rounds if self.kind == "AllReduce" else rounds


def ring_bytes(kind: str, n: int, input_bytes: float) -> float:
    """Bytes one device sends in a ring collective of ``n`` devices whose input on each device is ``input_bytes``
    (a Split sends nothing)."""
    if kind == "AllGather":
        return (n - 1) * input_bytes            # pass n-1 shards of the input's size
    if kind in ("ReduceScatter", "AllToAll"):
        return (n - 1) / n * input_bytes        # the input is the full local slice
    if kind == "AllReduce":
        return 2 * (n - 1) / n * input_bytes    # ReduceScatter + AllGather
    return 0.0


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
    steps: tuple[CommStep, ...] = field(default=())


@dataclass(frozen=True)
class Redistribution:
    src: Layout
    dst: Layout
    ops: tuple[Collective, ...]
    #: the backward of a forward redistribution (:meth:`transposed`)
    backward: bool = False
    #: a backward one's forward ops (what its collectives' sizes follow)
    forward_ops: tuple[Collective, ...] = ()

    @property
    def is_identity(self) -> bool:
        return not self.ops

    @property
    def has_communication(self) -> bool:
        return any(op.kind != "Split" for op in self.ops)

    def transposed(self) -> "Redistribution":
        """The backward MindSpore's autodiff runs for this redistribution: each step's transpose
        (:meth:`Collective.transposed`), last step first, from ``dst`` back to ``src``. Gradients stay partial
        sums where a slice's transpose pads zeros; the transposes of later collectives (an operator's AllReduce,
        a Parameter's mirror) sum them, so no gradient reduction of its own is inserted."""
        ops = tuple(t for t in (op.transposed() for op in reversed(self.ops)) if t is not None)
        return Redistribution(self.dst, self.src, ops, backward=True, forward_ops=self.ops)

    def mindspore_cost(self, type_len: int = 4, dtype: str = "") -> MsCost:
        """MindSpore's edge cost (bytes): :func:`ms_elements` when it applies, else the per-step sum."""
        m = ms_elements(self.src, self.dst) if self.ops else None
        if m is not None:
            f, b, c = m
        else:
            f = b = c = 0.0
            for op in self.ops:
                of, ob, oc = op.ms_cost()
                f, b, c = f + of, b + ob, c + oc
        if dtype == "bool" and f + b > 0:
            return MsCost(math.inf, math.inf, math.inf)  # "Communication Operators don't support bool dtype!"
        return MsCost(f * type_len, b * type_len, c * type_len)

    def physical(self, type_len: int, hardware=None, alltoall: bool = False, dtype: str = "") -> Physical:
        """Bytes each device sends and the time on ``hardware``. ``alltoall``: MindSpore's ``enable_alltoall``.
        Off (MindSpore's default), its redistribution writes an all-to-all as an AllGather of each device's whole
        slice, then a local Split and Concat (``redistribution_operator_infer``: AllConcat + AllSplit instead of
        PermuteByAxis; measured in its step_parallel_end graph): n - 1 slices sent, not (n - 1) / n of one. In the
        backward (:meth:`transposed`) that AllGather's transpose runs: Split + Concat back, then a ReduceScatter of
        the n slices over the same group -- the same bytes (random net 42's validate graph)."""
        total_b, total_t, steps = 0.0, 0.0, []
        # without enable_alltoall MindSpore's graph runs a redistribution's local slices after its collectives
        # (:func:`_sliced_last`); each transpose in the backward moves its forward collective's bytes
        sized = None if alltoall or (self.backward and not self.forward_ops) else \
            _sliced_last(self.forward_ops if self.backward else self.ops, type_len)
        if sized is not None and self.backward:
            sized.reverse()
        k = 0
        for op in self.ops:
            written, runs_as = op, ""
            if op.kind == "AllToAll" and not alltoall:
                if self.backward:
                    whole = tuple(d * op.n if i == op.dim else d for i, d in enumerate(op.slice_shape))
                    op = replace(op, kind="ReduceScatter", slice_shape=whole)
                    runs_as = AS_REDUCESCATTER
                else:
                    op = replace(op, kind="AllGather")
                    runs_as = AS_ALLGATHER
            nb = op.bytes_sent(type_len)
            if sized is not None and op.kind != "Split":
                nb = sized[k]
                k += 1
            t = hardware.collective_seconds(op, nb) if hardware is not None and nb else 0.0
            steps.append(written.step(nb, t, runs_as, dtype))
            total_b += nb
            total_t += t
        return Physical(total_b, total_t, tuple(steps))

    def __str__(self) -> str:
        return " -> ".join(map(str, self.ops)) or "(identity)"


def _sliced_last(ops, type_len: int) -> list[float]:
    """The bytes each device sends in every collective of ``ops`` (a forward redistribution, in order) as MindSpore
    2.9.0's graph runs it without ``enable_alltoall``: every local slice -- a Split, and the slice of the dim an
    all-to-all (an AllGather of the concat dim) moves its axis into -- after the collectives, so each AllGather
    gathers the slice as the collectives before it left it, unsliced. Measured (live ``verify --communication``):
    relu (2, 1, 1) -> mul (1, 2, 4) on 8 devices gathers the outer axis on relu's whole [8, 8, 8] slice (2048 B, not
    512 B after slicing dim 2 by 4), the dataset's [2, 8, 8] into the same Mul gathers 4 then 2 (1536 B, 2048 B,
    not 512 B); random net 515's Reshape [16, 2, 4, 8] (2, 1, 1, 1) -> [32, 4, 8] (1, 4, 2): AllGather over
    ranks 0, 4 (2048 B), then three StridedSlices. (The stored redistribution_operator_infer.cc splits first.)"""
    grow: dict[int, int] = {}
    out = []
    for op in ops:
        if op.kind == "Split":
            grow[op.dim] = grow.get(op.dim, 1) * op.n
            continue
        shape = tuple(d * grow.get(i, 1) for i, d in enumerate(op.slice_shape))
        kind = "AllGather" if op.kind == "AllToAll" else op.kind
        out.append(ring_bytes(kind, op.n, math.prod(shape) * type_len))
        if op.kind == "AllToAll":
            grow[op.dim] = grow.get(op.dim, 1) * op.n        # its split dim: sliced after the collectives
    return out


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
    # size: MindSpore's redistribution_operator_infer transcribed in its order, to be checked against it line by line
    dm = src.dev_matrix
    state = [list(d) for d in src.dims]
    tgt = dst.dims
    ops: list[Collective] = []

    def slice_shape():
        return tuple(n // math.prod(dm[a] for a in d) for n, d in zip(src.shape, state))

    def emit(kind, axis, dim, concat=-1):
        ops.append(Collective(kind, axis, dim, concat, dm[axis], slice_shape(), dm))

    def all_to_all(a, d, c):
        # device axis a moves from dim c (its innermost) onto dim d
        emit("AllToAll", a, d, c)
        state[c].pop()
        state[d].append(a)

    reduce: list[int] = []
    for a in sorted(src.partial):
        d = next((d for d in range(len(state))
                  if _is_prefix(state[d], tgt[d]) and len(state[d]) < len(tgt[d])
                  and tgt[d][len(state[d])] == a), None)
        if d is None:
            reduce.append(a)
        else:
            emit("ReduceScatter", a, d)
            state[d].append(a)
    # partial sums over adjacent device axes reduce in ONE AllReduce over their product group (MindSpore's
    # gradient AllReduce over every device sharing a parameter), not one per axis
    runs: list[list[int]] = []
    for a in reduce:
        if runs and runs[-1][-1] == a - 1:
            runs[-1].append(a)
        else:
            runs.append([a])
    for run in runs:
        ops.append(Collective("AllReduce", run[-1], -1, -1, math.prod(dm[a] for a in run), slice_shape(), dm))

    # MindSpore 2.9.0 gathers the inner axes of a split dim first, in ONE AllGather over their product (adjacent
    # device axes: contiguous ranks), on the tensor as it is: every axis after the dim's outermost one (or after the
    # prefix the target keeps), whether the target drops them or wants them on another dim (which then is a local
    # slice, at the place in the order the all-to-all would have taken). Measured in its validate graphs: a batch
    # split over 8 into (dp, cp, tp) or into a MatMul's (1, 2) runs one AllGather over 4 (CoreAttention and
    # FlashAttention with cp, random net 16), a dim split 2 x 8 gathered whole runs 8 then 2 (random net 30).
    pending: set[int] = set()       # gathered already, still to be sliced where the target wants them
    wanted = {a for d in tgt for a in d}
    for c in range(len(state)):
        k = 0
        while k < min(len(state[c]), len(tgt[c])) and state[c][k] == tgt[c][k]:
            k += 1
        tail = state[c][max(k, 1):]
        if len(tail) > 1 and all(b == a + 1 for a, b in zip(tail, tail[1:])):
            ops.append(Collective("AllGather", tail[-1], c, -1, math.prod(dm[a] for a in tail), slice_shape(), dm))
            del state[c][max(k, 1):]
            pending.update(a for a in tail if a in wanted)

    while True:
        used = {a for d in state for a in d} | pending
        wants = {d: tgt[d][len(state[d])] for d in range(len(state))
                 if _is_prefix(state[d], tgt[d]) and len(state[d]) < len(tgt[d])}
        free = [(d, a) for d, a in wants.items() if a not in used]
        if free:
            for d, a in free:
                emit("Split", a, d)
                state[d].append(a)
            continue
        bad = [c for c in range(len(state)) if state[c] and not _is_prefix(state[c], tgt[c])]
        if not bad and not pending:
            break
        moved = False
        if pending:
            # MindSpore's permutes in the order of the dims they split (InferPermuteByAxis walks its map): a pending
            # axis' slice, or an all-to-all
            for d in sorted(wants):
                a = wants[d]
                if a in pending:
                    emit("Split", a, d)
                    state[d].append(a)
                    pending.discard(a)
                    moved = True
                    break
                c = next((c for c in bad if c != d and state[c][-1] == a), None)
                if c is not None:
                    all_to_all(a, d, c)
                    moved = True
                    break
            if not moved and not bad:
                pending.clear()             # wanted behind a prefix that never forms: slice them as free axes
                continue
        for c in ([] if moved else bad):
            a = state[c][-1]
            d = next((d for d, w in wants.items() if w == a and d != c), None)
            if d is not None:
                all_to_all(a, d, c)
                moved = True
                break
        if not moved:
            # the innermost device axis first (MindSpore's graphs: random nets 22, 23)
            c = max(bad, key=lambda c: state[c][-1])
            emit("AllGather", state[c][-1], c)
            state[c].pop()
    assert tuple(map(tuple, state)) == tgt, (state, tgt)
    return ops


# --------------------------------------------------------------------------------------
# MindSpore's own cost-mode inference (TensorRedistribution::ComputeCost, MindSpore 2.9.0)
#
# Calibrated against the edge costs MindSpore prints (edge_costmodel.cc InitNotIdentityEdgeCost,
# GLOG_v=0) for 167 (from, to) layout pairs of random nets 21 and 88: computation and communication
# match on all of them. What MindSpore does, and plan()'s steps do not:
# * both layouts are unified over one device matrix AND one expanded tensor shape: a tensor dim split
#   over several device axes becomes one sub-dim per axis (the innermost axis keeps the remainder);
#   device axes are subdivided further until every sub-dim is split by at most one axis of each side;
# * RedistributionOperatorInfer then runs its split -> permute -> concat loop over the sub-dims; with
#   enable_all2all off (the default) a permute is a ConcatByAxis (AllGather) plus a SplitByAxis;
# * in cost mode the current layout is never updated, so every operator's slice is the SOURCE slice s;
# * ComputeCost's `if (op == PERMUTE && Cost() != SUCCESS) ... else if (op == CONCAT && ...) ... else
#   computation += s` falls through on success, so every operator also pays +s;
# * a Reshape pair (from-side and to-side, InferReshape) is inserted when the expansion changed the
#   tensor's rank and some operator exists: + RESHAPE_COST_FACTOR * s.
# Per operator (elements): Split: computation s. Concat (AllGather, n, sub-dim k): forward 0.5*s*n,
# backward 0.5*s, computation (s if k == 0 else s + 2*s*n) + s.


def _starts(axes, sizes) -> list[int]:
    out, p = [], 1
    for x in axes:
        out.append(p)
        p *= sizes[x]
    return out


def cut_axis(x: int, p: int, q: int, e: int, sizes: dict, fresh: int, maps) -> tuple[bool | None, int]:
    """Device axis ``x`` splits blocks from element stride ``p`` to ``e``; ``q`` is the next cut after ``p``.
    A cut inside (q < e) subdivides the axis into two new axes of sizes q/p (outer) and e/q (inner), in
    every tensor map of ``maps``: (True, next free id). No cut inside: (False, fresh). A cut that does not
    divide the blocks (the layouts cannot be expanded to one shape): (None, fresh)."""
    if q >= e:
        return (None if q % e else False), fresh
    if e % q:
        return None, fresh
    x1, x2 = fresh, fresh + 1
    sizes[x1], sizes[x2] = q // p, e // q
    for m in maps:
        for dd in m:
            if x in dd:
                i = dd.index(x)
                dd[i:i + 1] = [x1, x2]
    return True, fresh + 2


def _ms_expand(ua: Layout, ub: Layout):
    """MindSpore's expanded tensor maps: [(in axis, out axis)] per sub-dim (-1 = unsplit), axis sizes."""
    sizes = dict(enumerate(ua.dev_matrix))
    A = [list(d) for d in ua.dims]
    B = [list(d) for d in ub.dims]
    fresh = len(sizes)

    def cuts_of(d):
        return sorted({1, ua.shape[d]} | set(_starts(A[d], sizes)) | set(_starts(B[d], sizes)))

    changed = True
    while changed:
        changed = False
        for d, n in enumerate(ua.shape):
            cuts = cuts_of(d)
            if any(b % a for a, b in zip(cuts, cuts[1:])):
                return None
            for side in (A, B):
                for x, p in zip(side[d], _starts(side[d], sizes)):
                    q = next((c for c in cuts if c > p), n)
                    e = p * sizes[x]
                    cut, fresh = cut_axis(x, p, q, e, sizes, fresh, (A, B))
                    if cut is None:
                        return None
                    if cut:                         # another cut inside this axis' blocks: subdivided
                        changed = True
                        break
                if changed:
                    break
            if changed:
                break
    subs, extents = [], []
    for d in range(len(ua.shape)):
        cuts = cuts_of(d)
        sa = dict(zip(_starts(A[d], sizes), A[d]))
        sb = dict(zip(_starts(B[d], sizes), B[d]))
        for p, q in zip(cuts[:-1] or [1], cuts[1:] or [1]):
            subs.append((sa.get(p, -1), sb.get(p, -1)))
            extents.append(q // p)
    return subs, sizes, extents


def ms_infer(subs, sizes) -> list[tuple[str, int, int]]:
    """RedistributionOperatorInfer::InferRedistributionOperator in cost mode: [(kind, sub-dim, n)]."""
    none = -1
    in_map = [i for i, _ in subs]
    out = [o for _, o in subs]
    mp = dict(enumerate(in_map))            # std::map: iterated in sub-dim order
    ops: list[tuple[str, int, int]] = []
    while mp:
        n_global = len(ops)
        while mp:
            n_split = len(ops)
            for idx in sorted(mp):                                   # InferSplitByAxis
                if idx not in mp:
                    continue
                i, o = mp[idx], out[idx]
                if i == o:
                    del mp[idx]
                elif i == none and o not in mp.values():
                    ops.append(("Split", idx, sizes[o]))
                    del mp[idx]
            while mp:                                                # InferPermuteByAxis
                n_perm = len(ops)
                for idx in sorted(mp):
                    if idx not in mp:
                        continue
                    i, o = mp[idx], out[idx]
                    if i == o:
                        del mp[idx]
                    elif i == none and o in mp.values():
                        cat = in_map.index(o)
                        ops.append(("Concat", cat, sizes[o]))
                        ops.append(("Split", idx, sizes[o]))
                        del mp[idx]
                        mp[cat] = none
                if n_perm == len(ops):
                    break
            if n_split == len(ops):
                break
        for idx in sorted(mp):                                       # InferConcatByAxis
            if idx not in mp:
                continue
            i, o = mp[idx], out[idx]
            if i != none and i not in out:
                ops.append(("Concat", idx, sizes[i]))
                if o == none:
                    del mp[idx]
                else:
                    mp[idx] = none
        if n_global == len(ops) and mp:                              # break the cycle
            idx = min(mp)
            i, mp[idx] = mp[idx], none
            ops.append(("Concat", idx, sizes[i]))
    return ops


@lru("engine.redistribution.ms_elements", 1 << 16)
def ms_elements(src: Layout, dst: Layout) -> tuple[float, float, float] | None:
    """(forward, backward, computation) in elements as MindSpore 2.9.0's cost mode counts them, or None
    where the model does not apply (partial sums, no common device matrix, unexpandable shapes)."""
    if src.partial or dst.partial or src == dst:
        return None
    u = unify(squeeze_shape(src), squeeze_shape(dst))
    if u is None:
        return None
    e = _ms_expand(*u)
    if e is None:
        return None
    subs, sizes, extents = e
    ops = ms_infer(subs, sizes)
    if not ops:
        return None
    s = float(src.slice_numel)
    f = b = c = 0.0
    for kind, k, n in ops:
        if kind == "Concat":
            f += ALLGATHER_REDUCESCATTER_SCALE_FACTOR * s * n
            b += ALLGATHER_REDUCESCATTER_SCALE_FACTOR * s
            c += (s if k == 0 else s + 2 * s * n) + s
        else:
            c += s
    # InferReshape: a Reshape pair where a side's slice as the operator holds it (unsqueezed, unexpanded) differs
    # from its slice in the expanded layout, as a shape (rank included)
    from_slice = tuple(x // (sizes[i] if i >= 0 else 1) for (i, _), x in zip(subs, extents))
    to_slice = tuple(x // (sizes[o] if o >= 0 else 1) for (_, o), x in zip(subs, extents))
    if from_slice != tuple(src.slice_shape) or to_slice != tuple(dst.slice_shape):
        c += RESHAPE_COST_FACTOR * s
    return f, b, c


def squeeze_shape(layout: Layout) -> Layout:
    """``TensorLayout::SqueezeShape`` (TensorRedistribution::Init): the tensor's size-1 dimensions dropped (all of
    them: shape ``[1]``); the expansion, the operators' sub-dim indices and the Reshape check work on what is left."""
    keep = [d for d, n in enumerate(layout.shape) if n != 1]
    if len(keep) == len(layout.shape):
        return layout
    if not keep:
        return Layout((1,), layout.dev_matrix, ((),))
    return Layout(tuple(layout.shape[d] for d in keep), layout.dev_matrix, tuple(layout.dims[d] for d in keep))
