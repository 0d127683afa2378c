"""The seeds and the BFS: MindSpore's ``CostGraph::BFS`` from each configured operator (and the dataset), each
neighbour decided by :class:`~strategist.engine.search.chooser.Chooser` or, a Reshape, by
:class:`~strategist.engine.search.reshape.ReshapeSearch`; then ``ParamPropagation`` over shared Parameters and the
first candidate of every operator no search reached (see :mod:`strategist.engine.search`)."""
from __future__ import annotations

import dataclasses
import heapq
import math
from collections import deque

from ...errors import PropagationError, StrategyError
from ...vocab.layout import Layout
from ..rules.factor import Sharding
from ..rules.gather import gather_axis_refused, table_split_refused
from ..rules.interleaved import interleaved_priced
from ..rules.sharding import layout_strategy, self_defined_sharding, shard, shard_anchor, shard_layout
from ...vocab.anchors import DATASET, Anchor
from ..plan import SEMI_AUTO, Provenance
from .caches import CHOICES, cached_shard
from .kinds import (AFTER_RESHAPE_UNSET, GATHER_INFO, LAYOUT_REDUCED_SPLIT, LAYOUT_REJECTED, NO_LAYOUT_INIT,
                    RESHAPES, whole_reduced_dim)
from .layout_eq import layout_text, ms_layout_equal, same_placement, without_partial
from .structure import shared_param_users


class Propagation:
    """The seeds and MindSpore's BFS from each, then the shared parameters and the defaults."""

    # -- the search ---------------------------------------------------------------------
    def seed(self, anchor: Anchor) -> None:
        name = anchor.op
        op = self.op(name)
        if op.type in RESHAPES:
            raise StrategyError(f"{name}: Setting strategy for Reshape goes for nothing! (remove its anchor)")
        # the experts' own anchors are a yardstick, propagated as MindFormers writes them (verify's (b') column
        # is MindSpore's own verdict on them)
        if anchor.layouts is not None and op.type in LAYOUT_REJECTED and anchor.origin not in (SEMI_AUTO, "mindformers") \
                and not op.attrs.get("self_define_shard"):      # SelfDefineShardInfo takes any layouts as set
            if op.type in LAYOUT_REDUCED_SPLIT:
                d = whole_reduced_dim(self.rule(name), anchor.layouts[0].tensor_map if anchor.layouts else (),
                                       every=op.type == "SumExt")
                if d is not None:
                    how = ("every reduced dim is split", f"\"The dimension {len(anchor.layouts[0].device_matrix)} "
                           "is out of the size of the device shape!\"") if op.type == "SumExt" else \
                        ("some reduced dim is split", "\"Invalid rank string for a parameter\"")
                    raise StrategyError(f"{name}: MindSpore 2.9 takes a Layout strategy on {op.type} only when "
                                        f"{how[0]} (dim {d} is not: its compile fails with {how[1]}); give the tuple "
                                        f"form, e.g. {self._tuple_hint(anchor)}")
            else:
                why = "vector::_M_range_check" if op.type in ("Gather", "GatherV2", "IndexSelect", "Embedding") \
                    else "SetCostUnderLayout failed"
                raise StrategyError(f"{name}: MindSpore 2.9 rejects a Layout strategy on {op.type} (its compile fails "
                                    f"with {why}); give the tuple form, e.g. {self._tuple_hint(anchor)}")
        rule = self.rule(name)
        if anchor.layouts is not None and op.type == "RmsNorm" and rule.unsplittable:
            # RmsNormInfo::CheckInputLayout in 2.9 takes a split of the normalised dims (gamma laid out as x's
            # tail): it replaces the RmsNorm by a decomposed graph reducing over them ("Start to get nodes for split
            # NormAxis RmsNorm"; the big kernel disabled); the tuple form's CheckStrategy still refuses it
            # (measured: ut7_infer_reduce.RmsNormInvalid, x ("None", "mp"), gamma ("mp",) over (2, 4), taken)
            rule = dataclasses.replace(rule, unsplittable=frozenset())
        mk = ("seed", self.key(name), anchor.strategy, anchor.layouts, anchor.out_strategy, anchor.out_layouts, self.n)
        s = CHOICES.get(mk)
        if s is None:
            try:
                s = shard_anchor(op, anchor, self.n, rule)
            except StrategyError:
                if anchor.layouts is None or name not in self.stand_alone:
                    raise
                s = self_defined_sharding(op, tuple(anchor.layouts), self.n, anchor.out_layouts)
            why = (gather_axis_refused(rule.gather_axis, s.splits, self.n) if rule.gather_axis else None) or \
                table_split_refused(rule, s.splits, self.n)
            if why:
                raise StrategyError(f"{name} ({op.type}) strategy {tuple(map(tuple, s.strategy))}: MindSpore 2.9 "
                                    f"rejects it, its compile fails with SetCostUnderStrategy failed: {why}")
            CHOICES[mk] = s
        self.set_choice(name, s, Provenance(name, None, 0, "seed"), configured=True)
        if anchor.layouts is not None:
            self.layout_sources.update(s.inputs + s.outputs)
            priced = interleaved_priced(anchor.layouts, [x.shape for x in s.inputs])
            if priced:
                self.interleaved_in[name] = priced
                dm = tuple(anchor.layouts[0].device_matrix)
                try:
                    full = shard_layout(op, tuple(anchor.layouts), math.prod(dm),
                                        tuple(anchor.out_layouts) if anchor.out_layouts else None, rule)
                    self.interleaved_out[name] = {j: without_partial(o) for j, o in enumerate(full.outputs)
                                                  if o is not None and math.prod(o.dev_matrix) != self.n}
                except StrategyError:
                    pass

    def configure_casts(self) -> None:
        """MindSpore's ``PreProcessPreCastForSP``: building the cost graph, a Cast feeding a configured
        operator is configured too, with the Cast strategy of least redistribution to that operator's
        input (so a weight is sliced before it is cast). It then seeds a search of its own."""
        for name in sorted(self.anchors, key=lambda n: self.op(n).topo_index):
            if self.anchors[name].origin == "cast":
                continue
            for src, j, slot in self.prev.get(name, ()):
                if src == DATASET or src in self.idents or src in self.anchors or self.op(src).type != "Cast":
                    continue
                dst = self.in_layout(name, slot)
                if dst is None:
                    continue
                spec = self.op(src).outputs[j] if self.op(src).outputs else None
                # the Cast's GENERATED candidates only (GetPrevOpSwcByNextOpStrategyWithMiniComm over its
                # strategy costs): no candidate following the consumer's device matrix is added here, that is
                # BFSPrevNode's AddSwcUnderNextOpDevMatrixSingle (measured: qwen3_moe's final_layernorm Cast
                # before the Layout-configured RmsNorm (dp on B, tp on S) is (1,2,1) in MindSpore, not the
                # zero-cost follow of the layout)
                # the Cast of a MatMul's weight repeats on the LEFT of its device matrix (MindSpore:
                # set_repeated_num_in_dev_matrix_right(false)), which lines its slices up with the weight's
                left = self.op(name).type == "MatMul" and slot == 1
                # memoised across propagations like the searches' own choices (the advisor runs hundreds)
                mk = ("c", self.key(src), j, dst, self.n, left, self.fully_use_devices)
                s = self.memo(mk, lambda: self._cast_choice(src, j, dst, spec, left))
                if s is None:
                    continue
                self.anchors[src] = Anchor(src, s.strategy, origin="cast")
                self.set_choice(src, s, Provenance(src, name, 0, "seed"), configured=True)

    def _cast_choice(self, src: str, j: int, dst: Layout, spec, left: bool) -> Sharding | None:
        opts = []
        for strat in self.candidates(src):
            try:
                sh = (shard(self.op(src), strat, self.n, None, self.rule(src), repeat_left=True) if left
                      else cached_shard(self.op(src), strat, self.n, self.key(src)))
            except StrategyError:
                continue
            if j < len(sh.outputs):
                own = 0.0 if left else self.own_forward_comm(src, sh)
                opts.append((sh, self.edge_key(sh.outputs[j], dst, spec) + (own,)))
        return self.pick(opts)[0] if opts else None

    def _tuple_hint(self, anchor: Anchor) -> str:
        try:
            s = shard_layout(self.op(anchor.op), tuple(anchor.layouts), self.n, None, self.rule(anchor.op))
            return str([list(r) for r in s.strategy])
        except StrategyError:
            # the split counts the Layouts name, one row per input (a rule refusing them still shows the form)
            return str([[math.prod(lay.device_matrix[len(lay.device_matrix) - 1 - a] for a in dim)
                         for dim in lay.tensor_map] for lay in anchor.layouts])

    def bfs(self, root: str, later_seeds: list[str]) -> None:
        """``CostGraph::BFS``: a FIFO queue from ``root``; at each operator its successors, then its
        predecessors. When the queue drains, the first waiting multi-input operator (in creation
        order) is decided from its visited edges and the search goes on from it, unless it was
        reached meanwhile or a later seed precedes it topologically; then this BFS ends and the
        entry stays (MindSpore leaves it at the head of its waiting list)."""
        queue = deque([(root, 0)])
        while True:
            while queue:
                cur, depth = queue.popleft()
                self.visited.add(cur)
                for j, nb, slot in self.succ.get(cur, []):
                    self._next(cur, nb, depth, j, slot, root, queue)
                for nb, j, slot in self.prev.get(cur, []):
                    self._prev(cur, nb, depth, j, slot, root, queue)
            if not self.waiting:
                return
            heap = self.waiting_heap
            while heap[0][1] not in self.waiting:
                heapq.heappop(heap)
            op = heap[0][1]             # the first waiting operator in creation order
            if op in self.visited or any(self.created[op] > self.created[s] for s in later_seeds[:1]):
                return
            s, key = self.by_visited_edges(op)
            parent = self.visited_edges[op][-1][0] if self.visited_edges.get(op) else None
            self.set_choice(op, s, Provenance(root, parent, 0, "inputs", key[0]))
            del self.waiting[op]
            queue.append((op, 0))

    def inconsistencies(self) -> list[tuple[str, str, float]]:
        """The edges where searches met with a redistribution, once each (the first record kept)."""
        seen: dict[tuple[str, str], tuple[str, str, float]] = {}
        for t in self.inconsistent:
            seen.setdefault((t[0], t[1]), t)
        return list(seen.values())

    def _check(self, a: Layout | None, b: Layout | None, spec, edge: tuple[str, str]) -> None:
        if edge[0] in self.idents or edge[1] in self.idents:
            return
        if a is not None and b is not None and a.shape == b.shape:
            c = self.edge_key(a, b, spec)[0]
            if c > 0:
                self.inconsistent.append((edge[0], edge[1], c))

    def _next(self, cur, nb, depth, j, slot, root, queue):
        """``BFSNextNode``: decide successor ``nb`` of ``cur`` over ``cur``'s output ``j``."""
        # size: one step of MindSpore's propagation BFS transcribed in its order: the order decides its ties
        if cur in self.stand_alone or nb in self.stand_alone:
            return
        src = self.out_layout(cur, j)
        spec = self.edge_spec(cur, j)
        if src is None:
            return
        has = nb in self.visited or nb in self.anchors
        # CostGraph::AddSwcUnderPrevOpDevMatrix returns first when either end is a Reshape: an edge out of a
        # Reshape is never a visited edge of a multi-input consumer (it neither counts for AllInputsVisited nor
        # is priced in GetStrategyByVisitedEdges); random+[38]'s MatMul fed by a Reshape and by a MatMul
        if not has and self.multi_input(nb) and not self.is_reshape(cur) and not self.is_reshape(nb):
            self.visited_edges.setdefault(nb, []).append((cur, j, slot))
        if nb in self.visited or nb in self.anchors:
            if nb in self.visited or depth > 0:
                self._check(src, self.in_layout(nb, slot), spec, (cur, nb))
            return
        if self.is_reshape(nb):
            if slot != 0:
                return
            if self.is_reshape(cur):
                self.warnings.append(f"the edge {cur} -> {nb} has two Reshapes: propagation stops there "
                                     f"(MindSpore: please set the strategy for at least one)")
                return
            pair = self.reshape_reached(nb, src, "in", f"{cur} -> {nb}")
            if pair is None:
                return
            in_l, out_l = pair
            self.set_reshape(nb, in_l, out_l, Provenance(root, cur, depth + 1, "forward",
                                                         self.edge_key(src, in_l, spec)[0]))
        elif self.is_reshape(cur):
            if self.op(nb).type in AFTER_RESHAPE_UNSET:
                # BFSNextNodeIfCurrIsReshape: a Concat after a Reshape is marked visited without a
                # strategy; it keeps its first candidate (the defaults pass)
                self.visited.add(nb)
                return
            s = self.exact(nb, slot, src, "in")
            if s is None:
                return
            self.set_choice(nb, s, Provenance(root, cur, depth + 1, "forward", 0.0))
            self.no_before.add(nb)
        elif not self.local_rows and self.out_strategy(cur) is not None:
            # BFSNextNode: a current operator configured with an out_strategy (tuple or Layout) sets every
            # successor it reaches by Edge::GetNextOpStrategyByOutStrategy -- the first of the successor's
            # strategies-with-cost whose strategy row for this input equals the out_strategy's first row, else
            # its first -- multi-input or not (no waiting for its other inputs), costs unread, and by strategy
            # alone (SetCostUnderStrategy: no layout to follow after it). Measured, MindSpore's UT
            # layout_propagation_in_two_matmul_net: matmul1 out Layout (dp, sp) -> matmul2 [[2, 2], [2, 1]]
            s = self._by_out_strategy(cur, nb, slot, src)
            if s is None:
                return
            self.set_choice(nb, s, Provenance(root, cur, depth + 1, "forward", self.edge_key(
                src, s.inputs[self.in_index(nb, slot)], spec)[0]))
            self.no_before.add(nb)
        elif self.multi_input(nb):
            k = self.in_index(nb, slot)
            if k is None:
                return
            if len(self.visited_edges.get(nb, ())) < len(self.rule(nb).slots):
                if nb not in self.waiting:
                    self.waiting[nb] = depth
                    heapq.heappush(self.waiting_heap, (self.created.get(nb, 1 << 30), nb))
                return
            s, key = self.by_visited_edges(nb)
            self.check_multi_follow(nb)
            self.waiting.pop(nb, None)
            self.visited_edges[nb] = []
            self.set_choice(nb, s, Provenance(root, cur, depth + 1, "forward", key[0]))
        else:
            self.follow_ok = self._forward_follow(cur, nb)
            inter = self.interleaved_out.get(cur)
            if inter and j in inter:
                src = inter[j]          # priced as MindSpore's cost model lays it (interleaved_priced)
                self.follow_ok = False
            picked = self.choose_forward(nb, slot, src, spec)
            self.follow_ok = False
            if not self._take(nb, picked, root, cur, depth, "forward"):
                return
        self.visited.add(nb)
        queue.append((nb, depth + 1))

    def out_strategy(self, name: str) -> tuple | None:
        """The out_strategy MindSpore's OperatorInfo keeps for a configured operator (``out_strategy()``): the
        anchor's tuple, or its out Layouts' per-dimension splits; None without one."""
        a = self.anchors.get(name)
        if a is None:
            # an operator no strategy configures, given an out_strategy by its Cell's shard(out_strategy=...)
            # (strategist.frontend.cellshard): MindSpore's OperatorInfo keeps it (UT test_cell_shard_with_out_strategy_
            # be_set_and_propagate_reduce_scatter: the Cell's last MatMul's ((8, 1),), the ReLU after it (8, 1))
            op = self.graph.op(name) if name in self.graph else None
            if op is not None and not op.configured and op.out_strategy is not None:
                return tuple(tuple(r) for r in op.out_strategy)
            return None
        if a.origin == "cast":
            return None
        if a.out_strategy is not None:
            return tuple(tuple(r) for r in a.out_strategy)
        if a.out_layouts and a.layouts:
            return layout_strategy(a.out_layouts)      # (one device matrix: the in and out Layouts share it)
        return None

    def _by_out_strategy(self, cur: str, nb: str, slot: int, src: Layout) -> Sharding | None:
        """``Edge::GetNextOpStrategyByOutStrategy``: ``nb``'s first strategy-with-cost (generated candidates in
        MindSpore's order, then the one AddSwcUnderPrevOpDevMatrixSingle appended) whose row for this input is
        ``cur``'s out_strategy row 0; with none, its first."""
        k = self.in_index(nb, slot)
        if k is None:
            return None
        want = self.out_strategy(cur)[0]
        opts = self.options(nb, None if self.multi_input(nb) else src, k, "in", self._forward_follow(cur, nb))
        if not opts:
            return None
        return next((o for o in opts if k < len(o.strategy) and tuple(o.strategy[k]) == tuple(want)), opts[0])

    def _prev(self, cur, nb, depth, j, slot, root, queue):
        """``BFSPrevNode``: decide predecessor ``nb`` of ``cur`` over ``cur``'s input ``slot``."""
        if cur in self.stand_alone or nb in self.stand_alone:
            return
        if nb == DATASET:
            return
        src = self.in_layout(cur, slot)
        spec = self.edge_spec(nb, j)
        if src is None:
            return
        if nb in self.visited or nb in self.anchors:
            if nb in self.visited or depth > 0:
                self._check(self.out_layout(nb, j), src, spec, (nb, cur))
            return
        if self.is_reshape(nb):
            if self.is_reshape(cur):
                self.warnings.append(f"the edge {nb} -> {cur} has two Reshapes: propagation stops there "
                                     f"(MindSpore: please set the strategy for at least one)")
                return
            if self.op(cur).type in AFTER_RESHAPE_UNSET:
                self.visited.add(nb)        # BFSPrevNodeIfPrevIsReshape: visited, no layouts chosen
                return
            pair = self.reshape_reached(nb, src, "out", f"{nb} -> {cur}")
            if pair is None:
                return
            in_l, out_l = pair
            self.set_reshape(nb, in_l, out_l, Provenance(root, cur, depth + 1, "backward",
                                                         self.edge_key(out_l, src, spec)[0]))
        elif self.is_reshape(cur):
            s = self.exact(nb, j, src, "out")
            if s is None:
                return
            self.set_choice(nb, s, Provenance(root, cur, depth + 1, "backward", 0.0))
            self.no_before.add(nb)
        else:
            self.follow_ok = (self.has_before(cur) and not self.multi_input(nb)
                               and self.op(nb).type not in NO_LAYOUT_INIT)
            inter = self.interleaved_in.get(cur)
            if inter:
                # an interleaved input: priced as MindSpore's cost model lays it (interleaved_priced); no
                # candidate follows it (MindSpore lists the producer's generated candidates only)
                k = self.in_index(cur, slot)
                if k in inter:
                    src = inter[k]
                    self.follow_ok = False
            picked = self.choose_backward(nb, j, src, spec)
            self.follow_ok = False
            if not self._take(nb, picked, root, cur, depth, "backward"):
                return
        self.visited.add(nb)
        queue.append((nb, depth + 1))

    def _forward_follow(self, cur: str, nb: str) -> bool:
        """``nb``, reached forward from ``cur``, gets a candidate following ``cur``'s output layout
        (AddSwcUnderPrevOpDevMatrixSingle): ``cur`` carries one, and ``nb`` can be initialised from a layout."""
        return self.has_before(cur) and self.op(nb).type not in NO_LAYOUT_INIT

    def has_before(self, name: str) -> bool:
        """MindSpore's operator carries a layout to follow (``outputs_tensor_map_before``): set for a tuple
        seed (SetDefaultLayoutInfo) and for an operator chosen from its candidates (initialised under
        layouts); not for the dataset, a Reshape, an operator set by strategy alone after a Reshape, or an
        unconfigured operator MindSpore cannot initialise from a layout or a Gather's (:data:`GATHER_INFO`)."""
        if name == DATASET or self.is_reshape(name) or name in self.no_before or name in self.idents:
            return False
        t = self.op(name).type
        return not ((t in NO_LAYOUT_INIT or t in GATHER_INFO) and name not in self.anchors)

    def _take(self, nb, picked, root, cur, depth, direction) -> bool:
        """Set ``nb`` to the option chosen against ``cur`` (False: no option fits that edge)."""
        if picked is None:
            return False
        s, key, rejected = picked
        self.set_choice(nb, s, Provenance(root, cur, depth + 1, direction, key[0], rejected))
        return True

    def shared_parameters(self) -> None:
        for param, us in shared_param_users(self.graph).items():
            us = [(n, s) for n, s in us if n in self.chosen and self.in_layout(n, s) is not None]
            if len(us) < 2:
                continue
            layouts = [self.in_layout(n, s) for n, s in us]
            if all(same_placement(layouts[0], l) for l in layouts[1:]):
                continue
            conf = [(n, s, l) for (n, s), l in zip(us, layouts) if self.chosen[n].configured]
            for (n1, _, l1), (n2, _, l2) in zip(conf, conf[1:]):
                if not same_placement(l1, l2):
                    raise StrategyError(
                        f"Incorrect strategy configuration, it may be caused by configuring inconsistent strategies "
                        f"for operators: {n1} and {n2} shard the shared parameter {param} differently")
            # MindSpore's ProcessDiffStraParams propagates from the parameter's TmpIdentity as the searches left it
            # (decided by whichever search reached it first), re-decided from a configured reader first: its users
            # follow it (UT test_star_strategy_consistency3: relu2's search sets mul4 (4, 1) and the identity, then
            # mul1-mul3, set (1, 4) by later searches, take (4, 1)). Without an identity decided: the first reader's
            ident = f"{param}<TmpIdentity>"
            ref = conf[0][2] if conf else (self.out_layout(ident, 0) if ident in self.chosen else None) or layouts[0]
            for (n, s), l in zip(us, layouts):
                if same_placement(l, ref) or self.chosen[n].configured:
                    continue
                k = self.in_index(n, s)
                opts = self.forward_options(n, k, ref, self.op(n).inputs[s].spec)
                # ParamPropagation crosses the TmpIdentity's identity edge: Edge::InitEdgeCost admits only
                # the reader's candidates whose input layout equals the parameter's (TensorLayout::operator==);
                # with none, MindSpore raises "Edge cost initialization failed."
                opts = [(o, key) for o, key in opts if ms_layout_equal(without_partial(o.inputs[k]), without_partial(ref))]
                if not opts:
                    raise PropagationError(
                        f"Edge cost initialization failed: the shared parameter {param} reaches {n} "
                        f"({self.op(n).type}) over an identity edge with layout {layout_text(ref)}, and no "
                        f"strategy of {n} takes that layout unchanged (MindSpore's ParamPropagation); "
                        f"anchor {n} to match the parameter's other readers")
                best, key, rejected = self.pick(opts)
                prov = self.chosen[n].provenance
                self.set_choice(n, best, Provenance(prov.root, prov.parent, prov.depth, "parameter", key[0], rejected))

    def defaults(self) -> None:
        for op in self.graph:
            if op.name in self.chosen:
                continue
            if op.type in RESHAPES:
                prev = next((p for p in self.prev[op.name] if p[2] == 0), None)
                src = self.out_layout(prev[0], prev[1]) if prev else None
                if src is None:
                    src = Layout(tuple(op.inputs[0].spec.shape), (self.n,), tuple(() for _ in op.inputs[0].spec.shape))
                in_l, out_l = self.reshape_from_input(op.name, src)
                self.set_reshape(op.name, in_l, out_l, Provenance("", prev[0] if prev else None, 0, "default"))
                continue
            first = self.candidates(op.name)[0]
            self.set_choice(op.name, cached_shard(op, first, self.n, self.key(op.name)),
                            Provenance("", None, 0, "default"))
