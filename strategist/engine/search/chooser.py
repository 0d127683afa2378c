"""The search's chooser: which option an operator takes when the search reaches it.

**One fixed edge** (``BFSNextNode`` / ``BFSPrevNode`` reaching a single-input neighbour): every option -- the
generated candidates in MindSpore's order, plus the one following the fixed neighbour's layout where MindSpore
adds it (``AddSwcUnder{Prev,Next}OpDevMatrixSingle``) -- is keyed (edge communication, edge computation, own
forward communication) and the least wins by MindSpore's ``CompareSwcCost`` chain (:func:`better`):

1. refined redistribution communication on that edge, then
2. its computation, then
3. the operator's own forward communication (``communication_without_parameter``), each compared with
   ``math.isclose`` (relative 1e-12, absolute 1e-9): values that close are a tie;
4. on a tie, the larger ``PartitionNum`` (more devices split), then
5. the lexicographically larger strategy (``Strategy::Compare``).

**Visited edges** (a multi-input operator, every input reached or the queue drained:
``GetStrategyByVisitedEdges``): the least (communication, computation) summed over the visited edges, then the
least own computation cost (:func:`less`, the same closeness); an exact tie keeps the FIRST option in candidate
order (no strategy comparison).

**Leaving a Reshape** (``GetStrategyFromSWCBy{Input,Output}Layout``): the first option whose tensor has exactly
the Reshape's layout (:func:`~strategist.engine.search.layout_eq.ms_standard_equal`), no cost read.

Every choice is memoised across propagations with the edge-cost cache entries it read (:meth:`Chooser.memo`):
MindSpore's cache is shape-blind, so a pair's cost depends on which edge priced it first."""
from __future__ import annotations

import math

from ...errors import PropagationError, StrategyError
from ...vocab.layout import Layout
from ..rules.candidates import partition_num
from ..rules.computation import BATCH_PARALLEL_COST, computation_cost
from ..rules.factor import FactorRule, Sharding
from ..rules.interleaved import with_interleaved_axis
from ..rules.sharding import build_sharding, output_partial, output_scattered, pre_reduce_layout, shard
from ...vocab.anchors import DATASET
from ..redistribution import refine_cost
from .caches import CHOICES, EDGE_KEYS, cached_plan, cached_shard
from .kinds import LAYOUT_REJECTED, MATMUL_COST_TYPES, OWN_LAYOUT_INFER, whole_reduced_dim
from .layout_eq import edge_cache_key, ms_standard_equal, type_len, without_partial


#: two costs this close are a tie (see the module docstring)
REL_TOL, ABS_TOL = 1e-12, 1e-9


def better(s1: Sharding, k1: tuple, s2: Sharding, k2: tuple) -> bool:
    """MindSpore's CompareSwcCost: edge comm, edge comp, own forward comm, then Strategy::Compare (the larger
    PartitionNum, then the lexicographically larger strategy); see the module docstring."""
    for a, b in zip(k1, k2):
        if not math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL):
            return a < b
    pa, pb = partition_num(s1.strategy), partition_num(s2.strategy)
    if pa != pb:
        return pa > pb
    return [list(x) for x in s1.strategy] > [list(x) for x in s2.strategy]


def less(k1: tuple, k2: tuple) -> bool:
    """Key ``k1`` strictly below ``k2``, compared in order with the tie tolerance (``GetStrategyByVisitedEdges``:
    an exact tie keeps the option met first)."""
    for a, b in zip(k1, k2):
        if not math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL):
            return a < b
    return False


def follow(rule: FactorRule, fixed: Layout, k: int, side: str, n: int) -> Sharding | None:
    """The sharding whose tensor ``k`` (input or output) has exactly ``fixed``'s layout: factors of that
    tensor take its device axes, every other factor stays unsplit."""
    return follow_all(rule, {k: fixed}, side, n)


def follow_all(rule: FactorRule, fixed: dict[int, Layout], side: str, n: int) -> Sharding | None:
    """The sharding whose tensors ``k`` (inputs or outputs) have exactly the layouts ``fixed[k]``, all on one
    device matrix: their factors take those device axes (one factor, one set of axes), every other factor stays
    unsplit; None where they conflict or do not divide."""
    tensors = rule.inputs if side == "in" else rule.outputs
    dms = {lay.dev_matrix for lay in fixed.values()}
    if len(dms) != 1:
        return None
    axis: dict[str, tuple[int, ...]] = {}
    for k, lay in fixed.items():
        if lay.partial or lay.device_num != n or k >= len(tensors):
            return None
        for f, axes in zip(tensors[k], lay.dims):
            if not axes:
                continue
            if f is None or f in rule.unsplittable or axis.setdefault(f, axes) != axes:
                return None
    dm = dms.pop()
    splits = {f: math.prod(dm[a] for a in ax) for f, ax in axis.items()}
    sizes = dict(rule.sizes)
    if any(f in sizes and sizes[f] % x for f, x in splits.items()):
        return None
    strategy = tuple(tuple(splits.get(f, 1) if f else 1 for f in t) for t in rule.strategy_rows)
    for shape, st in zip(rule.strategy_shapes, strategy):
        if any(d % x for d, x in zip(shape, st)):
            return None
    try:
        return build_sharding(rule, strategy, dm, splits, axis, n // math.prod(splits.values() or [1]), None)
    except StrategyError:
        return None


class Chooser:
    """The search's choices: a neighbour's option against the one fixed edge (MindSpore's
    ``CompareSwcCost`` chain), a multi-input operator's from its visited edges, the option leaving a Reshape."""

    # -- choosing ------------------------------------------------------------------------
    def own_forward_comm(self, name: str, s: Sharding) -> float:
        """MindSpore's communication_without_parameter: the refined forward comm of the operator
        itself (partial outputs reduced), minus 1 when the batch is split over every device."""
        op = self.op(name)
        c = 0.0
        if op.type in BATCH_PARALLEL_COST:
            # BatchParallelCost (Conv2DInfo...): no forward communication whatever the split, so a Conv2D
            # with its input channels split costs less computation and, for MindSpore, nothing more
            return 0.0
        if op.type in MATMUL_COST_TYPES and s.inputs:
            # MatMulCost::GetForwardCommCost: output bytes when input 0's last STORED dimension is split,
            # which with transpose_a is i, not the contracted k (measured: random nets 318, 331, 478, 486)
            a = s.inputs[0]
            if a.shape and a.split(len(a.shape) - 1) > 1 and s.outputs:
                c += s.outputs[0].slice_numel * type_len(op.outputs[0] if op.outputs else None)
        else:
            for j, out in enumerate(s.outputs):
                if output_partial(s, j):
                    c += out.slice_numel * type_len(op.outputs[j] if j < len(op.outputs) else None)
                elif output_scattered(s, j):
                    # GatherV2PCost::GetForwardCommCost: the slice before the ReduceScatter
                    c += pre_reduce_layout(s, j).slice_numel * type_len(op.outputs[j] if j < len(op.outputs) else None)
        c = refine_cost(c)
        if s.strategy and s.strategy[0] and s.strategy[0][0] == self.n and c > 1.0:
            c -= 1.0
        return c

    def edge_key(self, src: Layout, dst: Layout, spec) -> tuple[float, float]:
        if src is None or dst is None or src.shape != dst.shape:
            return (0.0, 0.0)
        src = without_partial(src)
        if src.device_num != dst.device_num:
            # an interleaved consumer's input over its Layout's whole device matrix (interleaved_priced): the
            # producer's candidate gains an innermost axis of repeated copies (with_interleaved_axis)
            n = max(src.device_num, dst.device_num)
            src, dst = with_interleaved_axis(src, n), with_interleaved_axis(dst, n)
            if src is None or dst is None:
                return (0.0, 0.0)
        ck = (edge_cache_key(src), edge_cache_key(dst))
        hit = self.ms_edge_cache.get(ck)
        if hit is not None:
            if self.memo_deps is not None and ck not in self.memo_deps:
                self.memo_deps[ck] = (hit, True)
            return hit
        dtype = spec.dtype if spec is not None else ""
        hit = EDGE_KEYS.get((id(src), id(dst), dtype))
        if hit is not None and hit[0] is src and hit[1] is dst:
            out = hit[2]
        else:
            r = cached_plan(src, dst)
            c = r.mindspore_cost(type_len(spec), dtype)
            out = (c.communication, c.computation)
            EDGE_KEYS[(id(src), id(dst), dtype)] = (src, dst, out)   # keeps both alive: ids stay unique
        self.ms_edge_cache[ck] = out
        if self.memo_deps is not None:
            self.memo_deps[ck] = (out, False)
        return out

    def pick(self, options: list[tuple[Sharding, tuple]]) -> tuple[Sharding, tuple, tuple | None]:
        """The best (sharding, key) under MindSpore's CompareSwcCost chain, and the runner-up."""
        best = second = None
        for s, k in options:
            if best is None or better(s, k, *best):
                if best is not None and (second is None or better(best[0], best[1], *second)):
                    second = best
                best = (s, k)
            elif second is None or better(s, k, *second):
                second = (s, k)
        rejected = (second[0].strategy, second[1][0]) if second is not None else None
        return best[0], best[1], rejected

    def options(self, name: str, fixed: Layout | None, k: int, side: str, follow_ok: bool = False) -> list[Sharding]:
        """Generated candidates, plus the one following ``fixed`` on strategy tensor ``k``."""
        rule = self.rule(name)
        op = self.op(name)
        out = []
        for strat in self.candidates(name):
            try:
                out.append(cached_shard(op, strat, self.n, self.key(name)))
            except StrategyError:
                continue
        if fixed is not None and not rule.batch_parallel and (fixed in self.layout_sources or follow_ok) \
                and op.type not in LAYOUT_REJECTED:
            # MindSpore's AddSwcUnder{Prev,Next}OpDevMatrixSingle: one more candidate on the neighbour's own
            # device matrix and tensor map, after a Layout-configured neighbour and after any neighbour a
            # tuple seed or a candidate initialised (not after a Reshape). Backward, MindSpore puts the
            # consumer's input tensor map on this operator's INPUT. An operator whose CheckInputLayout refuses
            # layouts gets none (SetCostUnderLayout fails: "Current op ReduceMeanInfo33 does not support config
            # layout", UT test_mint_add_layout_222 compiled for training: the mean after a Layout-laid Add
            # takes a generated (1, 1), not the Add's layout).
            f = None
            if side == "out" and not (fixed in self.layout_sources):
                x = op.inputs[0].spec if op.inputs else None
                if x is not None and len(x.shape) == len(fixed.shape):
                    try:
                        f = follow(rule, Layout(tuple(x.shape), fixed.dev_matrix, fixed.dims), 0, "in", self.n)
                    except StrategyError:
                        f = None
            else:
                f = follow(rule, without_partial(fixed), k, side, self.n)
            if f is not None and not any(o.inputs == f.inputs and o.outputs == f.outputs for o in out):
                out.append(f)
        elif fixed is not None and side == "in" and op.type == "SumExt" and fixed in self.layout_sources \
                and not rule.batch_parallel:
            # SumExt does take the follow candidate after a Layout-configured producer, and MindSpore 2.9 throws
            # building it when a reduced dim is left whole there, whichever candidate would win ("The dimension N
            # is out of the size of the device shape!"; UT net ut7_infer_shape.RepeatNum384, and SumExt(dim) after a
            # Mul laid ("a", "c", None), (("a", "b"), "c", None), ("a", "b", None) over (2, 2, 2) / (2, 4),
            # ("a", None, None) over (8,); following ("a", "b", "c") it compiles). MeanExt not: it compiled after
            # (None, ("dp", "cp"), "mp") with dim 0 whole and threw after ("dp", None, "mp") with dim 1 whole
            # ("Invalid rank string for a parameter") -- its condition is not pinned down, so it is left as before
            d = whole_reduced_dim(rule, fixed.dims)
            if d is not None:
                raise StrategyError(f"{name} (SumExt): MindSpore 2.9 fails following its Layout-configured producer's "
                                    f"layout, reduced dim {d} not split there (its compile throws \"The dimension "
                                    f"{len(fixed.dev_matrix)} is out of the size of the device shape!\"); configure "
                                    f"{name} in tuple form, or split dim {d} in the producer's Layout")
            f = follow(rule, without_partial(fixed), k, side, self.n)
            if f is not None and not any(o.inputs == f.inputs and o.outputs == f.outputs for o in out):
                out.append(f)
        return out

    def choose_forward(self, name: str, slot: int, src: Layout, spec):
        """Memoised on (operator signature, slot, fixed layout, device count): repeated layers and
        repeated searches (the advisor's minimality checks) choose by lookup."""
        mk = ("f", self.key(name), slot, src, self.n, self.fully_use_devices, src in self.layout_sources,
              self.follow_ok)
        return self.memo(mk, lambda: self._choose_forward(name, slot, src, spec))

    def choose_backward(self, name: str, j: int, dst: Layout, spec):
        mk = ("b", self.key(name), j, dst, self.n, self.fully_use_devices, dst in self.layout_sources,
              self.follow_ok)
        return self.memo(mk, lambda: self._choose_backward(name, j, dst, spec))

    def memo(self, mk, compute):
        """A choice memoised across propagations (repeated layers, the advisor's many runs) together with
        the edge-cost cache entries it read: reused only where this propagation's cache agrees with them
        (MindSpore's cache is shape-blind, so a pair's cost depends on which edge priced it first). An entry
        the choice priced itself may be missing (this propagation's edge prices it the same); one it read from
        the cache (another edge priced it first) must be there with that cost, or the choice is made again."""
        # this propagation's own memo first: its cache only grows and never changes an entry, so a choice
        # checked (or computed) against it once stays right for the rest of the propagation
        mine = self.memo_local.get(mk, self)
        if mine is not self:
            self._read_deps(mine[1], True)      # (read, to be safe: it may predate the outer choice)
            return mine[0]
        hit = CHOICES.get(mk)
        if hit is not None:
            result, deps = hit
            cache = self.ms_edge_cache
            if all(cache.get(ck) == v if read else cache.get(ck, v) == v for ck, v, read in deps):
                outer = self.memo_deps
                for ck, v, _read in deps:
                    if outer is not None and ck not in outer:
                        outer[ck] = (v, ck in cache)
                    cache.setdefault(ck, v)
                self.memo_local[mk] = (result, deps)
                return result
        outer, self.memo_deps = self.memo_deps, {}
        try:
            result = compute()
        finally:
            deps, self.memo_deps = self.memo_deps, outer
        deps = tuple((ck, v, read) for ck, (v, read) in deps.items())
        self._read_deps(deps, False)
        CHOICES[mk] = (result, deps)
        self.memo_local[mk] = (result, deps)
        return result

    def _read_deps(self, deps, read_all: bool) -> None:
        """A memoised choice made inside another's: the outer one depends on the cache entries it depends on
        (``read_all``: each as read from the cache)."""
        outer = self.memo_deps
        if outer is not None:
            for ck, v, read in deps:
                if ck not in outer:
                    outer[ck] = (v, read or read_all)

    def forward_options(self, name: str, k: int, src: Layout, spec) -> list[tuple[Sharding, tuple]]:
        """Every option of ``name`` with its key against ``src`` fixed on strategy input ``k``:
        (edge communication, edge computation, own forward communication)."""
        out = []
        for s in self.options(name, src, k, "in", self.follow_ok):
            ek = self.edge_key(src, s.inputs[k], spec)
            out.append((s, (ek[0], ek[1], self.own_forward_comm(name, s))))
        return out

    def backward_options(self, name: str, j: int, dst: Layout, spec) -> list[tuple[Sharding, tuple]]:
        """Every option of ``name`` with its key against ``dst`` fixed on the consumer of output ``j``."""
        out = []
        # CostGraph::AddSwcUnderNextOpDevMatrix returns first for a multi-input producer, whatever its consumer
        # (Layout-configured or not): applied telechat3_moe's MoE add before the Layout-configured residual add
        # keeps its generated candidates only
        follow = None if self.multi_input(name) else dst
        for s in self.options(name, follow, j, "out", self.follow_ok):
            if j < len(s.outputs):
                ek = self.edge_key(s.outputs[j], dst, spec)
                out.append((s, (ek[0], ek[1], self.own_forward_comm(name, s))))
        return out

    def _choose_forward(self, name: str, slot: int, src: Layout, spec) -> tuple[Sharding, tuple, tuple | None] | None:
        k = self.in_index(name, slot)
        if k is None:
            return None
        return self.pick(self.forward_options(name, k, src, spec))

    def _choose_backward(self, name: str, j: int, dst: Layout, spec) -> tuple[Sharding, tuple, tuple | None] | None:
        opts = self.backward_options(name, j, dst, spec)
        return self.pick(opts) if opts else None

    def exact(self, name: str, idx: int, layout: Layout, side: str) -> Sharding | None:
        """Leaving a Reshape: the first option whose input (output) ``idx`` has exactly the Reshape's
        layout (``GetStrategyFromSWCBy{Input,Output}Layout``); None (the op stays undecided) if none.
        Memoised like the other choices: repeated layers leave their Reshapes the same way."""
        mk = ("x", self.key(name), idx, layout, side, self.n, self.fully_use_devices, layout in self.layout_sources)
        if mk not in CHOICES:
            CHOICES[mk] = self._exact_uncached(name, idx, layout, side)
        return CHOICES[mk]

    def _exact_uncached(self, name: str, idx: int, layout: Layout, side: str) -> Sharding | None:
        k = self.in_index(name, idx) if side == "in" else idx
        if k is None:
            return None
        for o in self.options(name, layout, k, side):
            tensors = o.inputs if side == "in" else o.outputs
            if k < len(tensors) and ms_standard_equal(without_partial(tensors[k]), layout):
                return o
        return None

    def by_visited_edges(self, name: str) -> tuple[Sharding, tuple]:
        """``OperatorInfo::GetStrategyByVisitedEdges``: the option with the least redistribution
        (communication, then computation) summed over the operator's visited input edges, then the
        least computation cost of its own; ties go to the first in candidate order."""
        op = self.op(name)
        edges = [(src, j, slot) for src, j, slot in self.visited_edges.get(name, ())
                 if self.out_layout(src, j) is not None and self.in_index(name, slot) is not None]
        # memoised across propagations on what decides it: each visited edge's layout, input and priced tensor
        sig = tuple(self._edge_rows(name, op, edges))
        all_in = len(self.visited_edges.get(name, ())) >= len(self.rule(name).slots)
        before = tuple(self.has_before(src) for src, _j, _slot in edges) if all_in else ()
        mk = ("v", self.key(name), sig, self.n, self.fully_use_devices,
              bool(edges) and sig[0][0] in self.layout_sources, all_in, before)
        return self.memo(mk, lambda: self._by_visited_edges(name, op, edges, sig, all_in))

    def _edge_rows(self, name, op, edges):
        """Per visited edge: the producer's output layout, the input it enters, the priced tensor, and the layout
        MindSpore's cost model prices it as when the producer's Layout is interleaved (else None)."""
        for src, j, slot in edges:
            yield (self.out_layout(src, j), self.in_index(name, slot), self.edge_spec(src, j, op.inputs[slot].spec),
                   self.interleaved_out.get(src, {}).get(j))

    def _by_visited_edges(self, name, op, edges, rows, all_in: bool) -> tuple[Sharding, tuple]:
        # the candidate following the producers' layout exists only once EVERY input was reached forward
        # (CostGraph::AddSwcUnderPrevOpDevMatrix: a multi-input operator gets no single-edge follow candidate,
        # only AddSwcUnderPrevOpDevMatrixMulti when AllInputsVisited); an operator decided from the waiting list
        # with some inputs unreached (a Parameter, an input not reached yet) chooses among its generated ones
        fixed = edges[0] if edges and all_in else None
        opts = self.options(name, self.out_layout(fixed[0], fixed[1]) if fixed else None,
                             self.in_index(name, fixed[2]) if fixed else 0, "in")
        if all_in and edges:
            multi = self._multi_follow(name, edges)
            if multi is not None and not any(o.inputs == multi.inputs and o.outputs == multi.outputs for o in opts):
                opts = opts + [multi]
        # OperatorInfo::InitVisitedEdges runs Edge::InitEdgeCost edge by edge, each over every candidate, before
        # GetStrategyByVisitedEdges sums them: the shape-blind edge-cost cache fills edge-major. A key pair the
        # first edge prices for any candidate serves the later edges too (VirtualDatasetAuto: x [128, 32]'s
        # (1, 8) -> (8, 1) under ((8, 1), (1, 1)) prices y [32, 64]'s (1, 8) -> (8, 1) under ((1, 8), (8, 1)))
        priced = [(a if inter is None else inter, k, spec) for a, k, spec, inter in rows]
        for a, k, spec in priced:
            for s in opts:
                self.edge_key(a, s.inputs[k], spec)
        best = None
        for s in opts:
            comm = comp = 0.0
            for a, k, spec in priced:
                c1, c2 = self.edge_key(a, s.inputs[k], spec)
                comm, comp = comm + c1, comp + c2
            key = (comm, comp, computation_cost(op, self.rule(name), s, self.n))
            if best is None or less(key, best[1]):
                best = (s, key)
        return best

    def _multi_follow(self, name: str, edges) -> Sharding | None:
        """``OperatorInfo::AddSwcUnderPrevOpDevMatrixMulti`` (every input of a multi-input operator reached): when
        every producer carries a layout to follow (``CheckPrevOpStatus``) on ONE device matrix, a generated
        strategy equal to the splits the producers' tensor maps imply is added once more, at the end, with the
        producers' own layouts on its inputs (``InferLayoutsByStrategy``, then ``SetCostUnderLayout``: a layout
        the operator's Init refuses adds nothing). It wins only where it is strictly cheaper: a generated
        candidate with the same splits on the canonical device matrix comes first. Measured, UT
        test_mint_matmul_layout_222 compiled for training: MatMulExt after two configured AShardIdentities,
        x (axis3, axis1) and y (axis1, axis0), takes [[1, 2], [2, 2]] on their layouts."""
        rule = self.rule(name)
        fixed: dict[int, Layout] = {}
        for src, j, slot in edges:
            k = self.in_index(name, slot)
            lay = self.out_layout(src, j)
            if k is None or lay is None or not self.has_before(src):
                return None
            fixed[k] = without_partial(lay)
        if set(fixed) != set(range(len(rule.inputs))) or any(len(lay.dims) != len(rule.inputs[k])
                                                              for k, lay in fixed.items()):
            return None
        s = follow_all(rule, fixed, "in", self.n)
        if s is None or s.strategy not in set(self.candidates(name)):
            return None
        return s if all(without_partial(s.inputs[k]) == lay for k, lay in fixed.items()) else None

    def check_multi_follow(self, name: str) -> None:
        """MindSpore's ``AddSwcUnderPrevOpDevMatrixMulti``: when every input of a multi-input operator has
        been reached forward, it adds one more candidate whose inputs keep the producers' own layouts.
        For a MatMul/BatchMatMul the output tensor map then takes i from input a and j from input b; when
        both sit on ONE device axis (``x @ x.T``: i and j are the same dimension of one tensor) that map is
        invalid (map.cc "invalid map"), the candidate's output layout is left empty and it costs as a
        scalar output. It has no redistribution, so it wins whenever it is strictly cheaper than the best
        generated candidate (a split contraction: the output counts in the MatMul's computation cost);
        the first edge priced out of it then fails (TensorRedistribution::Init: "from shape size must be
        equal to to shape size", edge_costmodel.cc GetRedistributionCost: "Failure: tensor_redistribution
        init failed.")."""
        op = self.op(name)
        rule = self.rule(name)
        if op.type not in ("MatMul", "BatchMatMul") or len(rule.slots) != 2:
            return
        srcs: dict[int, tuple[str, int]] = {}
        for src, j, slot in self.visited_edges.get(name, ()):
            k = self.in_index(name, slot)
            if k is None or src == DATASET or src not in self.chosen or not self.has_before(src) or not (
                    src in self.anchors or self.op(src).type in OWN_LAYOUT_INFER):
                return          # CheckPrevOpStatus: every producer must carry a layout to follow
            srcs[k] = (src, j)
        if set(srcs) != {0, 1}:
            return
        lays = [self.out_layout(*srcs[k]) for k in (0, 1)]
        if lays[0] is None or lays[1] is None or lays[0].dev_matrix != lays[1].dev_matrix:
            return
        try:        # the strategy the producers' layouts imply must pass the operator's own check
            follow = shard(op, (lays[0].strategy, lays[1].strategy), self.n, rule=rule)
        except StrategyError:
            return
        maps = [self._ms_out_map(*srcs[k]) for k in (0, 1)]
        # MatMul::CheckInputLayout first: a's i and b's j may share a device axis only if it is the LAST axis
        # of the arrangement (tensor-map value 0, which its duplicate check skips); any other shared axis
        # fails the check ("axis ... has been shard for more than once and not sharding the reduce_dim") and
        # the candidate is not added (random net 136: i and j on a size-1 middle axis, accepted by MindSpore)
        fi = next((f for f in rule.outputs[0][-2:-1] if f in rule.inputs[0]), None)
        fj = next((f for f in rule.outputs[0][-1:] if f in rule.inputs[1]), None)
        if fi is not None and fj is not None:
            ai = maps[0][rule.inputs[0].index(fi)] or ()
            aj = maps[1][rule.inputs[1].index(fj)] or ()
            dm0 = self.chosen[srcs[0][0]].sharding.dev_matrix if self.chosen[srcs[0][0]].sharding is not None \
                else lays[0].dev_matrix
            if any(a in aj and a != len(dm0) - 1 for a in ai):
                return
        out_map = []
        for f in rule.outputs[0]:
            k = 0 if f in rule.inputs[0] else 1
            out_map.append(maps[k][rule.inputs[k].index(f)] if f is not None and f in rule.inputs[k] else None)
        used = [a for m in out_map if m is not None for a in m]
        if len(set(used)) == len(used):
            return

        def ms_cost(sh: Sharding, out_numel: int) -> float:
            # MatMulCost::GetForwardComputationCost: both input slices, plus the output slice when input
            # a's LAST stored dim is split (k, or i under transpose_a); BreakingTiesForPreferringDataParallel
            c = sum(l.slice_numel * type_len(op.inputs[sl].spec) for l, sl in zip(sh.inputs, rule.slots))
            if sh.strategy[0] and sh.strategy[0][-1] > 1:
                c += out_numel * (type_len(op.outputs[0]) if op.outputs else 4)
            if sh.strategy[0] and sh.strategy[0][0] == self.n and c > 1.0:
                c -= 1.0
            return float(c)

        best, best_key = self.by_visited_edges(name)
        mine = (0.0, 0.0, ms_cost(follow, 1))       # no redistribution; a "scalar" output
        if less(mine, (best_key[0], best_key[1], ms_cost(best, best.outputs[0].slice_numel))):
            names = ", ".join(dict.fromkeys(s for s, _ in srcs.values()))
            raise PropagationError(
                f"tensor_redistribution init failed: {name} ({op.type}) follows the layout of {names}, which "
                f"puts both output dims i and j on one device axis (invalid tensor map); MindSpore picks that "
                f"candidate {[list(r) for r in follow.strategy]} and cannot build the redistribution after "
                f"it (anchor {name} or its producer to another split)")

    def _ms_out_map(self, name: str, j: int) -> tuple:
        """Output ``j``'s tensor map as MindSpore holds it: per dimension its device axes, size-1 axes
        included (a dimension of an operator set from a generated candidate keeps its factor's axis even
        unsplit); None where unknown or unmapped. strategist's layouts drop size-1 axes, so only a
        generated candidate's unsplit dimensions can be recovered (from the rule's factor order)."""
        ch = self.chosen[name]
        out = ch.outputs[j]
        s, rule = ch.sharding, self.rule(name)
        regular = None
        if s is not None and not rule.rows:
            try:
                regular = cached_shard(self.op(name), s.strategy, self.n, self.key(name))
            except StrategyError:
                regular = None
        # a generated candidate, repeat (if any) on the right: factor i sits on device axis i
        if regular is not None and regular.dev_matrix == s.dev_matrix and regular.outputs == s.outputs \
                and j < len(rule.outputs) and s.dev_matrix[:len(rule.factors)] == tuple(
                    s.splits.get(f, 1) for f in rule.factors):
            return tuple((rule.factors.index(f),) if f is not None else None for f in rule.outputs[j])
        return tuple(d if d else None for d in out.dims)

    def candidate_shardings(self, name: str):
        """The operator's generated candidates as shardings, in candidate order (invalid ones skipped)."""
        op = self.op(name)
        for strat in self.candidates(name):
            try:
                yield cached_shard(op, strat, self.n, self.key(name))
            except StrategyError:
                continue
