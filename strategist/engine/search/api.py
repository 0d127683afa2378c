"""The search engine assembled from its concerns (:mod:`strategist.engine.search`): ``_Engine``, one search's
state, and :func:`search`, which builds and runs it; :func:`alternatives`, a decided operator's candidates
against the edge that decided it; :func:`clear_caches`."""
from __future__ import annotations

import functools
from types import MappingProxyType
from typing import Any

from ...errors import PropagationError, StrategyError
from ...vocab.graph import OpGraph, lazy_note
from ...vocab.layout import Layout
from ...vocab.mesh import Hardware, Mesh
from ..rules.factor import FactorRule, Sharding
from ..rules.sharding import nd_tp, shard_anchor
from ...vocab.anchors import DATASET, Anchor
from ..plan import OpChoice, Provenance, model_anchors, parallel_only_anchors
from . import caches
from .bfs import Propagation
from .caches import cached_candidates, cached_rule
from .chooser import Chooser, better
from .dataset import dataset_layouts
from .layout_eq import type_len
from .reshape import ReshapeSearch
from .result import SearchQueries, SearchResult
from .structure import graph_structure, lazy_fold, local_rows_marked, no_generated_strategy, per_graph, \
    reshape_names, self_defined_ops, sibling_calls


class _Engine(Propagation, Chooser, ReshapeSearch, SearchQueries):
    """One search's state: the choices so far, the BFS's visited and waiting operators, the per-search memos.
    Built and run by :func:`search` only; what it found leaves as a :class:`SearchResult` (:meth:`result`)."""

    def __init__(self, graph: OpGraph, mesh: Mesh, anchors: dict[str, Anchor], dataset_strategy, hardware,
                 fully_use_devices: bool = False):
        self.graph = graph
        self.dataset_strategy = dataset_strategy
        self.fully_use_devices = fully_use_devices
        self.mesh = mesh
        self.n = mesh.size
        self.hardware = hardware
        self.anchors = anchors
        self.rules: dict[str, FactorRule] = {}
        self.keys: dict[str, tuple] = {}
        self.slot_index: dict[tuple[str, int], int | None] = {}
        self.reshapes = reshape_names(graph)
        self.cands: dict[str, list] = {}
        self.chosen: dict[str, OpChoice] = {}
        self.visited: set[str] = set()
        self.waiting: dict[str, int] = {}                 # multi-input ops waiting for their inputs
        self.waiting_heap: list[tuple[int, str]] = []     # the same by creation order (stale entries skipped)
        self.layout_sources: set[Layout] = set()          # tensors of Layout-configured operators
        # a Layout-configured operator's inputs laid with an interleaved_parallel axis, as MindSpore's cost model
        # prices an edge into them: name -> {input index: Layout over the whole device matrix, that axis kept}
        self.interleaved_in: dict[str, dict[int, Layout]] = {}
        # and its outputs so laid (its sharding over the whole device matrix): name -> {output index: Layout}
        self.interleaved_out: dict[str, dict[int, Layout]] = {}
        self.follow_ok = False                            # the neighbour being left has a layout to follow
        self.no_before: set[str] = set()                  # operators set by strategy alone (after a Reshape)
        # a MindFormers graph whose Morph rows are device-local: an out_strategy there is the Morph body's own
        # collective (a row linear's reduce-scatter), which MindSpore refuses as an out_strategy on the global rows;
        # its successors follow its layout, not GetNextOpStrategyByOutStrategy's strategy alone
        self.local_rows = per_graph("local_rows", graph, local_rows_marked)
        self.stand_alone = per_graph("self_defined", graph, self_defined_ops)  # IsOpNotPropagate: no propagation
        # MindSpore's edge-cost cache: keyed by the two layouts' (device arrangement, tensor map) only, so
        # the first cost computed for a pair serves every later edge with that pair, whatever its shape
        self.ms_edge_cache: dict = {}
        self.memo_deps: dict | None = None                # cache entries a memoised choice read
        self.memo_local: dict = {}                        # memoised choices already checked against that cache
        self.reshape_sigs: dict[str, tuple] = {}          # Reshape -> what its swc list depends on
        self.reshape_cache: tuple | None = None           # (fingerprint, MindSpore's Reshape cost cache)
        self.visited_edges: dict[str, list[tuple[str, int, int]]] = {}
        self.inconsistent: list[tuple[str, str, float]] = []
        self.warnings: list[str] = []
        self.dataset = dataset_layouts(graph, self.n, dataset_strategy)
        # the graph's adjacency, creation order and TmpIdentity operators: the same for every propagation
        # over this graph (the advisor runs about twenty), so built once
        st = graph_structure(graph, tuple(self.dataset), isinstance(dataset_strategy, dict))
        self.succ, self.prev, self.data_prev, self.created, self.idents, ops, self.edge_specs = st
        self.ops = ops
        self.op = ops.__getitem__         # name -> Op, TmpIdentities included (the method, as a dict lookup)

    def edge_spec(self, src: str, j: int, default=None):
        """The tensor an edge out of ``src``'s output ``j`` prices: its own, but for an up-casting Cast the
        Cast's input: MindSpore prices the redistribution after a float16 -> float32 Cast at 2 bytes per
        element (measured on the Megatron anchors' loss: every candidate's edge cost is half of float32's),
        and after a float32 -> float16 Cast at 2 as well (random net 374)."""
        if default is not None:
            return self._edge_spec(src, j, default)
        k = (src, j)
        try:
            return self.edge_specs[k]        # a function of the graph: shared by its propagations
        except KeyError:
            out = self.edge_specs[k] = self._edge_spec(src, j, None)
            return out

    def _edge_spec(self, src: str, j: int, default):
        if src == DATASET:
            return self.graph.inputs[list(self.dataset)[j]]
        op = self.op(src)
        out = op.outputs[j] if j < len(op.outputs) else default
        if op.type == "Cast" and op.inputs and op.inputs[0].spec is not None and out is not None \
                and type_len(op.inputs[0].spec) < type_len(out):
            return op.inputs[0].spec
        return out

    def candidates(self, name: str) -> list:
        c = self.cands.get(name)
        if c is None:
            c = self.cands[name] = cached_candidates(self.op(name), self.n, self.key(name),
                                                      self.fully_use_devices)
        return c

    def info_name(self, name: str) -> str:
        """MindSpore's OperatorInfo name, ``<Prim>Info<k><k>`` with k the creation index: the
        configured-operator map (seed order) compares these strings."""
        if name == DATASET:
            k = self.created[DATASET]
            return f"VirtualDatasetInfo{k}{k}"
        k = self.created.get(name, 0)
        op = self.op(name)
        r = self.rule(name)
        prim = "BatchParallel" if r.batch_parallel and not r.batch_info else op.type
        return f"{prim}Info{k}{k}"

    def multi_input(self, name: str) -> bool:
        """MindSpore's ``IsMultiInput``: more than one tensor input (Parameters and tensor constants
        count, though they bring no edge: such an operator waits until the queue drains)."""
        return not self.is_reshape(name) and len(self.rule(name).slots) > 1

    def set_choice(self, name: str, s: Sharding, prov: Provenance, configured=False):
        self.chosen[name] = OpChoice(self.op(name), s, s.inputs, s.outputs, prov, configured)

    def set_reshape(self, name: str, in_l: Layout, out_l: Layout, prov: Provenance):
        self.chosen[name] = OpChoice(self.op(name), None, (in_l,), (out_l,), prov)

    def result(self) -> SearchResult:
        """The finished search, read-only."""
        return SearchResult(self.graph, self.mesh, self.hardware, self.dataset_strategy, self.n,
                            MappingProxyType(self.chosen), MappingProxyType(self.anchors), self.warnings,
                            tuple(self.inconsistencies()), MappingProxyType(self.dataset),
                            MappingProxyType(self.data_prev), MappingProxyType(self.ops), self.reshapes, self.rules,
                            self.keys, self.slot_index)


def search(graph: OpGraph, mesh: Mesh, anchors: dict[str, Any] | None = None, *, use_model_strategies=True,
           dataset_strategy="data_parallel", hardware: Hardware | None = None,
           fully_use_devices: bool = False) -> SearchResult:
    """MindSpore's search from ``anchors`` (see the module docstring): every operator's choice, unpriced.
    :func:`strategist.propagate.propagate` searches and prices."""
    # the operators the model's code configures in every parallel build (MindFormers' loss): in every plan
    fixed_notes: list[str] = []
    all_anchors: dict[str, Anchor] = parallel_only_anchors(graph, mesh, fixed_notes)
    if use_model_strategies:
        all_anchors.update(model_anchors(graph))
    for name, a in (anchors or {}).items():
        if name not in graph:
            close = [op.name for op in graph if op.name.endswith(name.rsplit(".", 1)[-1])][:5]
            raise StrategyError(f"anchor {name!r} names no operator of the model"
                                + (f" (did you mean: {', '.join(close)})" if close else " (see strategist inspect --json)"))
        all_anchors[name] = a if isinstance(a, Anchor) else Anchor(name, tuple(tuple(x) for x in a))
    explicit = set(anchors or ())
    siblings = sibling_calls(graph)
    eng = _Engine(graph, mesh, all_anchors, dataset_strategy, hardware, fully_use_devices)
    eng.warnings.extend(graph.notes)
    eng.warnings.extend(fixed_notes)
    # a strategy lives on the primitive: configuring a Cell-held primitive configures every call of it
    # (``self.transpose.shard(...)`` reaches q's, k's and v's transposes alike), as in MindSpore
    for name in sorted(explicit, key=lambda n: graph.op(n).topo_index):
        a = all_anchors[name]
        for sib in siblings.get(name, ()):
            if sib in explicit or sib in all_anchors and all_anchors[sib].origin != "model":
                continue
            cand = Anchor(sib, a.strategy, a.layouts, a.out_strategy, a.out_layouts, a.origin)
            try:
                op = graph.op(sib)
                shard_anchor(op, a, mesh.size, cached_rule(op))
            except StrategyError as err:
                eng.warnings.append(f"{name}'s primitive is called again as {sib}, which cannot take its strategy "
                                    f"({err}); MindSpore would refuse the configuration")
                continue
            all_anchors[sib] = cand
    if not all_anchors and not eng.dataset:
        raise StrategyError("There is no operator that is configured sharding strategy. "
                            "(give anchors with --anchors, or a model input)")
    for op, why in per_graph("no_generated_strategy", graph,
                              lambda g: [(op, w) for op in g if (w := no_generated_strategy(op))]):
        if op.name not in all_anchors:
            raise PropagationError(f"{op.name} ({op.type}): {why} -- MindSpore generates no strategy for it "
                                   f"unconfigured; configure it (an anchor, or shard() in the model)")
    for op in graph:
        if nd_tp(op) and (op.name not in all_anchors or all_anchors[op.name].layouts is None):
            raise PropagationError(
                f"{op.name} ({op.type}) carries enable_nd_tp but no Layout configures it: MindSpore 2.9 builds its "
                f"2D/3D tensor-parallel graph from a strategy's layout and fails (\"The dimension "
                f"18446744073709551586 is out of the size of the device shape!\"); configure it with a 2D/3D Layout "
                f"or drop the attribute")
    copies, reps = lazy_fold(graph, isinstance(dataset_strategy, dict))
    note = lazy_note(graph, bool(reps))
    if note:
        eng.warnings.append(note)
    for name in [n for n in all_anchors if n in copies]:
        # a later call of a reused @lazy_inline graph: the first call's operator holds the one strategy
        a = all_anchors.pop(name)
        first = all_anchors.get(copies[name])
        if name in explicit and (first is None or first.strategy != a.strategy or first.layouts != a.layouts):
            eng.warnings.append(f"the anchor of {name} is ignored: it is a later call of a @lazy_inline Cell, whose "
                                f"operators take the first call's strategy ({copies[name]}); anchor that one")
    for a in all_anchors.values():
        eng.seed(a)
    eng.configure_casts()
    # MindSpore's configured-operator map is ordered by topo_index, the OperatorInfo creation counter;
    # VirtualDataset's is TOTAL_OPS_MAX, so the dataset's BFS runs last
    seeds = sorted(eng.anchors, key=lambda n: eng.created[n]) + ([DATASET] if eng.dataset else [])
    for i, root in enumerate(seeds):
        eng.bfs(root, seeds[i + 1:])
    eng.shared_parameters()
    eng.defaults()
    for name, first in copies.items():
        eng.chosen[name] = eng.chosen[first]
    return eng.result()


def alternatives(plan, name: str) -> list[tuple[Sharding, tuple]]:
    """(sharding, (edge comm, edge comp, own forward comm)) for each candidate of ``name`` in ``plan``, best first
    (MindSpore's order of preference, :func:`~strategist.engine.search.chooser.better`), against the neighbour that
    decided it; empty for an operator without a strategy (a Reshape)."""
    ch = plan.choices[name]
    if ch.sharding is None:
        return []
    eng = _Engine(plan.graph, plan.mesh, plan.anchors, plan.dataset_strategy, plan.hardware)
    eng.chosen = dict(plan.choices)
    p = ch.provenance
    opts = []
    if p.parent is not None and p.direction in ("forward", "parameter"):
        edge = next(((src, j, slot) for src, j, slot in eng.prev[name] if src == p.parent), None)
        if edge is not None:
            src, j, slot = edge
            opts = eng.forward_options(name, eng.in_index(name, slot), eng.out_layout(src, j),
                                       ch.op.inputs[slot].spec)
    elif p.parent is not None and p.direction == "backward":
        edge = next(((j, dst, slot) for j, dst, slot in eng.succ[name] if dst == p.parent), None)
        if edge is not None:
            j, dst, slot = edge
            opts = eng.backward_options(name, j, eng.in_layout(dst, slot), ch.op.outputs[j])
    else:
        opts = [(s, (0.0, 0.0, eng.own_forward_comm(name, s))) for s in eng.options(name, None, 0, "in")]
    cmp = functools.cmp_to_key(lambda a, b: -1 if better(a[0], a[1], b[0], b[1]) else
                               1 if better(b[0], b[1], a[0], a[1]) else 0)
    return sorted(opts, key=cmp)


def clear_caches() -> None:
    """Forget every cache strategist keeps (:func:`strategist.memo.clear_caches`), the search's among them."""
    caches.clear_caches()
