"""Reshape in the search, as MindSpore's ReshapeInfo models it: its strategies-with-cost (swcs) are pairs of
its producer's output layouts and its consumers' input layouts under their candidates, priced through
MindSpore's shape-blind Reshape cost cache; the layout on the side the search reaches it from picks the swc
(``GetSWCIndexBy{Input,Output}LayoutWith{ZeroComm,MiniComm}``). Where that model does not apply the layout
is mapped through the Reshape (:meth:`~strategist.engine.search.result.SearchQueries.reshape_through`)."""
from __future__ import annotations


from ...memo import lru
from ...errors import StrategyError
from ...vocab.graph import Op
from ...vocab.layout import Layout
from ..rules.candidates import candidates, swc_strategies
from ..rules.registry import rule_for
from ..rules.reshape import reshape_layout
from ..rules.sharding import shard
from ...vocab.anchors import DATASET
from ..redistribution import ms_elements, plan
from ..reshape_cost import reshape_swc_logged
from ..stdsort import std_sort
from .caches import CHOICES, FINGERPRINTS, SWC_STRATS, cached_rule, cached_shard
from .kinds import NO_SWC
from .layout_eq import edge_cache_id, gather_variants, ms_standard_equal, same_placement, type_len, without_partial
from .orders import dfs_from_output
from .structure import per_graph


@lru("engine.search.reshape.reshape_pair_cost", 1 << 16)
def reshape_pair_cost(src: Layout, dst: Layout, type_len: int = 4) -> tuple[float, float]:
    """(communication_without_parameter_, computation_cost_) of a Reshape from ``src`` to ``dst``
    (different shapes) as MindSpore's ReshapeInfo prices its strategies-with-cost, in bytes after its
    data-parallel tie-break and practical-cost refinement (:mod:`strategist.engine.reshape_cost`); a
    gather-then-reshape estimate where that model does not apply."""
    c = reshape_swc_logged(src, dst, type_len)
    if c is not None:
        return c[2], c[0]
    s = float(src.slice_numel)
    for g in gather_variants(src):
        nat = reshape_layout(g, dst.shape)
        if nat is None:
            continue
        comm = comp = 0.0
        if g != src:
            e = ms_elements(src, g)
            comm += e[0] if e else s * src.device_num
            comp += e[2] if e else s
        if not same_placement(nat, dst):
            e = ms_elements(nat, dst) if nat.device_num == dst.device_num else None
            if e is None:
                r = plan(nat, dst)
                comm += 0.0 if r.is_identity else s * dst.device_num
                comp += s
            else:
                comm, comp = comm + e[0], comp + e[2]
        comp += 2 * s
        return comm * type_len, comp * type_len
    return float("inf"), float("inf")



class ReshapeCostCache:
    """MindSpore's Reshape cost cache, filled in its order and read lazily: every Reshape's own strategies (one
    layout pair each), then each Reshape's producer layouts x consumer layouts. A pair of keys
    (:func:`~.layout_eq.edge_cache_key`) belongs to its first claimant: the first own pair of those keys, else the
    first producer layout and first consumer layout of those keys in the first product holding both -- what
    inserting every pair in order, first come first kept, gives, without building the product."""

    def __init__(self):
        self._own: dict = {}
        self._products: list = []        # ({producer key: first layout}, {consumer key: first layout}, type length)

    def own(self, p: Layout, q: Layout, tl: int) -> None:
        self._own.setdefault((edge_cache_id(p), edge_cache_id(q)), (p, q, tl))

    def pairs(self, pre: dict, nxt: dict, tl: int) -> None:
        """A Reshape's product: its producer layouts and consumer layouts, each as :func:`first_by_key` gives."""
        self._products.append((pre, nxt, tl))

    def get(self, p: Layout, q: Layout, tl: int) -> tuple[Layout, Layout, int]:
        """(input layout, output layout, type length) of the first claimant of ``(p, q)``'s keys; ``(p, q, tl)``
        where none priced them."""
        kp, kq = edge_cache_id(p), edge_cache_id(q)
        hit = self._own.get((kp, kq))
        if hit is not None:
            return hit
        for pre, nxt, t in self._products:
            a = pre.get(kp)
            if a is not None:
                b = nxt.get(kq)
                if b is not None:
                    return a, b, t
        return p, q, tl


def first_by_key(layouts) -> dict[int, Layout]:
    """``{edge_cache_id: the first layout of that key}``."""
    seen: dict = {}
    for lay in layouts:
        seen.setdefault(edge_cache_id(lay), lay)
    return seen

class ReshapeSearch:
    """Reshape as MindSpore models it: strategies-with-cost over its neighbours' candidates."""

    def reshape_swc(self, name: str, fixed: Layout, side: str) -> tuple[Layout, Layout] | None:
        """MindSpore's choice of a Reshape's (input, output) layouts given the layout on one side
        (``GetSWCIndexBy{Input,Output}LayoutWith{ZeroComm,MiniComm}``): among the swcs whose layout on
        that side equals ``fixed``, the one without communication of the least computation, else the
        one of least communication, ranked as MindSpore ranks them: libstdc++'s std::sort over the swcs in
        their order (producer candidates outer, consumer candidates inner), which is not stable past 16
        (:mod:`strategist.engine.stdsort`). None: the model does not apply (strategist's own reshape rule).
        :data:`NO_SWC`: it applies but no swc has ``fixed`` on that side (MindSpore: swc index -1, the BFS
        stops at the Reshape without visiting it)."""
        if self.op(name).attrs.get("strategist_local_rows"):
            return None
        sig = self._reshape_sig(name)
        mk = ("swc", self.key(name), fixed, side, self.n, self.fully_use_devices, sig, self.reshape_costs()[0])
        if mk not in CHOICES:
            CHOICES[mk] = self._reshape_swc(name, fixed, side)
        return CHOICES[mk]

    def _reshape_sig(self, name: str) -> tuple:
        """:meth:`_reshape_signature`, once per search."""
        sig = self.reshape_sigs.get(name)
        if sig is None:
            sig = self.reshape_sigs[name] = self._reshape_signature(name)
        return sig

    def _reshape_signature(self, name: str) -> tuple:
        """What a Reshape's swc list depends on: its producer's and consumers' signatures, and the layouts
        of those that are configured (repeated layers share their Reshapes' choices)."""
        sig = []
        for src, j, slot in self.prev.get(name, ()):
            if slot == 0:
                sig.append(("p", src if src == DATASET or self.is_reshape(src) else self.key(src), j,
                            self.out_layout(src, j) if self._swc_configured(src) or src == DATASET else None))
        for _, dst, slot in self.node_users(name):
            sig.append(("c", self.is_reshape(dst), self.key(dst), slot,
                        self.in_layout(dst, slot) if self._swc_configured(dst) else None))
        return tuple(sig)

    def _reshape_swc(self, name: str, fixed: Layout, side: str) -> tuple[Layout, Layout] | None:
        match = self._reshape_matches(name, fixed, side)
        if match is None:
            return None
        if not match:
            return NO_SWC
        tl = type_len(self.op(name).inputs[0].spec)
        cache = self.reshape_costs()[1]
        # (communication, computation): the first cost MindSpore computed for the layout pair, whatever its shape
        # a pair of layouts met again (several consumers' candidates alike) is priced once
        priced: dict = {}
        costs = []
        for pq in match:
            c = priced.get(pq)
            if c is None:
                c = priced[pq] = reshape_pair_cost(*cache.get(pq[0], pq[1], tl))
            costs.append(c)
        zero = [(i, c[1]) for i, c in enumerate(costs) if c[0] == 0]
        # GetSWCIndexBy*LayoutWithZeroComm, else ...WithMiniComm: std::sort by the cost, take the first
        ranked = std_sort(zero, key=lambda t: t[1]) if zero else \
            std_sort([(i, c[0]) for i, c in enumerate(costs)], key=lambda t: t[1])
        return match[ranked[0][0]]

    def _reshape_matches(self, name: str, fixed: Layout, side: str) -> list[tuple[Layout, Layout]] | None:
        """The swcs whose layout on ``side`` equals ``fixed``, in swc order; None where the model does not apply.
        They depend on the Reshape's neighbours and their configured layouts (its signature), not on the cost
        cache: memoised on those, across the propagations of one advice."""
        mk = ("swc matches", self.key(name), fixed, side, self.n, self.fully_use_devices, self._reshape_sig(name))
        hit = CHOICES.get(mk, False)
        if hit is not False:
            return hit
        pre, nxt, _firsts = self._reshape_sides(name)
        if pre is None or nxt is None:
            CHOICES[mk] = None
            return None
        side_of = 0 if side == "in" else 1
        # "equals" is TensorLayout::operator== (device arrangement, tensor map and shape), not equal data
        match = [pq for pq in self._reshape_own_swcs(name) if ms_standard_equal(pq[side_of], fixed)]
        if side == "in":          # the swcs whose input equals ``fixed``, in swc order (producer-major)
            match += [(p, q) for p in pre if ms_standard_equal(p, fixed) for q in nxt]
        else:
            ok = [q for q in nxt if ms_standard_equal(q, fixed)]
            match += [(p, q) for p in pre for q in ok]
        CHOICES[mk] = match
        return match

    def reshape_costs(self) -> tuple[int, ReshapeCostCache]:
        """MindSpore's Reshape cost cache (``ReshapeInfo::SetCostForReshape``, "Find the same cost in cache, skip
        calculation"): keyed like the edge-cost cache by the (device arrangement, tensor map) of the input and
        output layouts only, so the first Reshape that prices a layout pair fixes its cost for every later
        Reshape, whatever their shapes (deepseek3's router: ``reshape#1`` [1, S, 8] -> [1, S, 8, 1] reads the
        costs ``reshape`` [1, S, 256] -> [1, S, 8, 32] stored, 32 times its own, except for the pairs only it
        has). The cache fills in MindSpore's order: every Reshape's own strategies as it is created
        (``GenerateStrategies``), then, Reshape by Reshape in creation order, its (producer, consumer) pairs
        (``ReshapeCostCompute`` -> ``GenerateStrategyCosts``). Returns (fingerprint, the :class:`ReshapeCostCache` of the first
        (input layout, output layout, type length) that priced each key pair), priced when read by ``reshape_pair_cost``);
        memoised on what it depends on: every Reshape's signature in order."""
        if self.reshape_cache is None:
            names = sorted((n for n in self.reshapes if n in self.created and n not in self.anchors
                            and not self.op(n).attrs.get("strategist_local_rows")), key=self.created.__getitem__)
            mk = ("rcache", tuple((self.key(n), self._reshape_sig(n)) for n in names), self.n, self.fully_use_devices)
            hit = CHOICES.get(mk)
            if hit is None:
                cache = ReshapeCostCache()
                # a Reshape whose signature an earlier one had (a repeated layer's) prices the same pairs at the
                # same costs: every one of them is in the cache already, first-come
                done = set()
                for n in names:
                    if self.key(n) not in done:
                        done.add(self.key(n))
                        tl = type_len(self.op(n).inputs[0].spec)
                        for p, q in self._reshape_own_swcs(n):
                            cache.own(p, q, tl)
                done = set()
                for n in names:
                    if (self.key(n), self.reshape_sigs[n]) in done:
                        continue
                    done.add((self.key(n), self.reshape_sigs[n]))
                    firsts = self._reshape_sides(n)[2]
                    if firsts is not None:
                        cache.pairs(*firsts, type_len(self.op(n).inputs[0].spec))
                hit = CHOICES[mk] = (next(FINGERPRINTS), cache)
            self.reshape_cache = hit
        return self.reshape_cache

    def _reshape_sides(self, name: str) -> tuple:
        """(:meth:`_reshape_pre_layouts`, :meth:`_reshape_next_layouts`, both by :func:`first_by_key` -- what the
        cost cache keeps of them -- or None where the model does not apply), memoised on the Reshape's signature
        (its neighbours and their configured layouts): the propagations of one advice list them once."""
        mk = ("swc sides", self.key(name), self.n, self.fully_use_devices, self._reshape_sig(name))
        hit = CHOICES.get(mk)
        if hit is None:
            pre, nxt = self._reshape_pre_layouts(name), self._reshape_next_layouts(name)
            firsts = (first_by_key(pre), first_by_key(nxt)) if pre is not None and nxt is not None else None
            hit = CHOICES[mk] = (pre, nxt, firsts)
        return hit

    # -- Reshape as MindSpore models it: strategies-with-cost over its neighbours' candidates --------
    def _reshape_pre_layouts(self, name: str) -> list[Layout] | None:
        """The input layouts of MindSpore's Reshape swc list (``ReshapeCostCompute``): the producer's
        output layout under each of its candidates (a configured producer: its own strategy; the
        dataset: its layout). None where the model does not apply (no producer with candidates, or
        a Reshape producer)."""
        prev = next((p for p in self.prev.get(name, ()) if p[2] == 0), None)
        if prev is None:
            return None
        src, j, _ = prev
        if src == DATASET:
            return [self.out_layout(DATASET, j)]
        if self.is_reshape(src):
            return None
        if self._swc_configured(src):
            lay = self.out_layout(src, j)
            return [lay] if lay is not None else None
        out = [without_partial(sh.outputs[j]) for sh in self.swc_shardings(src) if j < len(sh.outputs)]
        return out or None

    def _reshape_next_layouts(self, name: str) -> list[Layout] | None:
        """The output layouts of the swc list: every consumer's input layout under each of its candidates,
        consumer by consumer (``FindReshapeNextNodeStraCosts``). None when a consumer is a Reshape or
        there is no consumer with candidates (a graph output). A consumer taking the output in a tuple
        (``Concat((t, t))``) adds none: MindSpore 2.9 stops at the MakeTuple ("FindNextLayout prim is MakeTuple,
        stop searching.", random net 1152: a Reshape read by a MatMul and a Concat lists the MatMul's 30 input
        layouts only, and its least-communication swc is another)."""
        out = []
        for _, dst, slot in self.node_users(name):
            if getattr(self.op(dst).inputs[slot], "packed", False):
                continue
            if self.is_reshape(dst):
                return None
            k = self.in_index(dst, slot)
            if k is None:
                continue
            if self._swc_configured(dst):
                lay = self.in_layout(dst, slot)
                if lay is not None:
                    out.append(lay)
                continue
            out.extend(sh.inputs[k] for sh in self.swc_shardings(dst) if k < len(sh.inputs))
        return out or None

    def _swc_configured(self, name: str) -> bool:
        """A neighbour whose strategies-with-cost are its configured strategy alone when MindSpore builds a
        Reshape's swc list (``ReshapeCostCompute``): a user's anchor. A Cast configured by
        ``PreProcessPreCastForSP`` is not one yet: that pass runs after every Reshape's list is built
        (measured: deepseek3's ``q_layernorm`` Cast, its 20 candidates in the list of the Reshape before it)."""
        a = self.anchors.get(name)
        return a is not None and a.origin != "cast"

    def swc_shardings(self, name: str):
        """The operator's strategies-with-cost as MindSpore lists them (duplicates included, see
        :func:`strategist.engine.ops.swc_strategies`), as shardings; invalid ones skipped."""
        op = self.op(name)
        key = (self.key(name), self.n, self.fully_use_devices)
        strats = SWC_STRATS.get(key)
        if strats is None:
            strats = SWC_STRATS[key] = swc_strategies(op, self.n, cached_rule(op), self.fully_use_devices)
        for strat in strats:
            try:
                yield cached_shard(op, strat, self.n, self.key(name))
            except StrategyError:
                continue

    def node_users(self, name: str) -> list[tuple[int, str, int]]:
        """``name``'s successors in the order of the graph manager's ``node_users`` (an ordered set filled as the
        manager acquires the graph's nodes: ``DeepScopedGraphSearch`` from the output, the last input explored
        first), which ``FindReshapeNextNodeStraCosts`` walks. In the compile of the Cell as built that is the
        creation order; in a training compile (TopoSort creation order) it is not. Measured: random net 10
        compiled for training, a Reshape read by a MatMul (t2) and a ReduceMean (t3), TopoSort creates the
        ReduceMean first, and MindSpore's swc index 4473 is the MatMul-first list's (the same index as in the
        compile as built)."""
        succ = self.succ.get(name, ())
        if len(succ) < 2:
            return succ
        order = self._dfs_order()
        return sorted(succ, key=lambda e: order.get(e[1], 1 << 30))

    def _dfs_order(self) -> dict[str, int]:
        return per_graph("dfs_order", self.graph, dfs_from_output)

    def _reshape_own_swcs(self, name: str) -> list[tuple[Layout, Layout]]:
        """The strategies-with-cost a Reshape has before ``ReshapeCostCompute`` appends the neighbour pairs
        (its own ``GenerateStrategies``, which nothing clears): one per split of its input (the candidates
        of an element-wise operator on that shape), each with a replicated output over the same device
        matrix (measured: MindSpore's INFO log lists these 31 first for a [32, 4, 16] input on 16 devices)."""
        key = ("own", self.key(name), self.n)
        hit = CHOICES.get(key)
        if hit is None:
            op = self.op(name)
            x = op.inputs[0]
            ident = Op(name=f"{name}<own>", type="Identity", cell_path="", cell_class="", instance_name="",
                       full_name="", inputs=(x,), outputs=(x.spec,))
            rule = rule_for(ident)
            out_shape = tuple(op.outputs[0].shape)
            hit = []
            for strat in candidates(ident, self.n, rule, self.fully_use_devices):
                try:
                    sh = shard(ident, strat, self.n, None, rule)
                except StrategyError:
                    continue
                lin = sh.inputs[0]
                hit.append((lin, Layout(out_shape, lin.dev_matrix, tuple(() for _ in out_shape))))
            CHOICES[key] = hit
        return hit

    def reshape_reached(self, name: str, fixed: Layout, side: str, edge: str):
        """Reshape ``name`` reached with ``fixed`` on its ``side`` ("in": from its producer, "out": from its
        consumer): its (input, output) layouts, or None where MindSpore's search stops there --
        BFSNextNodeIfNextIsReshape / BFSPrevNodeIfPrevIsReshape find no swc with that layout
        (GetSWCIndexBy{Input,Output}LayoutWith{ZeroComm,MiniComm} both return -1: "No available strategy found
        at edge"), the Reshape stays unvisited and may be reached later from its other side."""
        swc = self.reshape_swc(name, fixed, side)
        if swc == NO_SWC:
            self.warnings.append(f"No available strategy found at edge: {edge} (propagation stops at the Reshape)")
            return None
        return swc or (self.reshape_from_input if side == "in" else self.reshape_from_output)(name, fixed)
