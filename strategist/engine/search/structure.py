"""The graph as MindSpore's cost graph sees it, computed once per graph and shared by every search over it:
adjacency in MindSpore's order, the TmpIdentity operators of shared Parameters, the ``@lazy_inline`` folding,
the stand-alone and device-local-rows markings, the sibling calls of a Cell-held primitive."""
from __future__ import annotations

import dataclasses

from ...memo import ByIdentity, table
from ...vocab.graph import Op, OpGraph
from ...vocab.anchors import DATASET
from .caches import cached_rule
from ..rules.registry import NO_OPERATOR_INFO
from .kinds import RESHAPES
from .orders import creation_order


#: per graph (the most recent few): its adjacency, creation order and TmpIdentity operators, read-only
STRUCTURES = table("search: structure per graph", 8)
#: per graph: the scans every propagation over it would otherwise repeat
_SCANS = ByIdentity("per-graph scans", 512)


def per_graph(what: str, graph: OpGraph, compute):
    """``compute(graph)``, once per graph (kept with its structure): a scan every propagation over it would
    otherwise repeat (the advisor runs some fifty)."""
    return _SCANS.get((graph,), what, lambda: compute(graph))


def reshape_names(graph: OpGraph) -> frozenset:
    return per_graph("reshapes", graph, lambda g: frozenset(op.name for op in g if op.type in RESHAPES))


def local_rows_marked(graph: OpGraph) -> bool:
    """Whether ``graph``'s Morph rows are device-local (:func:`strategist.frontend.mindformers.mark_local_rows`)."""
    return any(op.attrs.get("strategist_local_rows") for op in graph)


def self_defined_ops(graph: OpGraph) -> frozenset:
    """The operators marked ``self_define_shard`` (MindFormers' MTP Concat): MindSpore builds a SelfDefineShardInfo
    for them, a "new shape" operator ("IsSupportNewShapeBaseNode ... supports new shape base", a tuple input or
    not), and its search propagates over none of their edges (``IsOpNotPropagate``: "New shape op in edge ...
    doesn't propagate strategy"). Their neighbours are decided from elsewhere, or take their defaults."""
    return frozenset(op.name for op in graph if op.attrs.get("self_define_shard"))


def lazy_copies(graph: OpGraph, forward: bool = False) -> dict[str, str]:
    """``{operator of a later call: the same operator of the first call}`` for the ``@lazy_inline`` Cells of
    ``graph`` (``graph.lazy_groups``), when the compile collects its nodes in ``TopoSort`` order (a training compile,
    or a tuple dataset strategy: ``forward``); else empty. See :func:`lazy_fold`."""
    return lazy_fold(graph, forward)[0]


def lazy_fold(graph: OpGraph, forward: bool) -> tuple[dict[str, str], tuple[str, ...]]:
    """(:func:`lazy_copies`, the first call's Cell path of each reused graph), or ``({}, ())``.

    MindSpore 2.9 keeps the instances of one ``@lazy_inline`` class (equal ``__init__`` arguments) one func graph
    called once per instance (even once): one OperatorInfo per operator of it, named after the first instance, so
    one strategy for every call (measured with verify: a GPT's lazy-inline blocks at 1 to 4 layers give the 1-layer
    plan). Its cost graph (``ConstructCNodeCostGraphEdges``): an input that is the reused graph's parameter is the
    argument of the first call in node order (``FindRealInputByFormalParameter``: the first layer's); a consumer of
    any call's output reads the body's return operator; the later calls' arguments make no edge. The body is created
    first (``TopoSort`` enters a call at its callee's return). Each copy must have its first-call counterpart (the
    same name after the instance path), or its group is not folded. The compile as built (``DeepScopedGraphSearch``)
    resolves the parameter to the last call's argument instead (self-loops); not modelled."""
    if not (forward or graph.training) or not graph.lazy_groups:
        return {}, ()

    def compute(g):
        by_path: dict[str, list] = {}
        for op in g:
            by_path.setdefault(op.cell_path, []).append(op)
        copies: dict[str, str] = {}
        reps: list[str] = []
        for group in g.lazy_groups:
            per = {p: [op for q, ops in by_path.items() if q == p or q.startswith(p + ".") for op in ops]
                   for p in group}
            first = min((p for p in group if per[p]), key=lambda p: min(op.topo_index for op in per[p]), default=None)
            if first is None:
                continue
            rep_names = {op.name[len(first):] for op in per[first]}
            found: dict[str, str] | None = {}
            for p in group:
                if p == first:
                    continue
                for op in per[p]:
                    suffix = op.name[len(p):]
                    if not op.name.startswith(p) or suffix not in rep_names:
                        found = None
                        break
                    found[op.name] = first + suffix
                if found is None:
                    break
            if found is not None:
                copies.update(found)
                reps.append(first)
        return copies, tuple(reps)
    return per_graph("lazy_fold", graph, compute)


def folded_graph(graph: OpGraph, forward: bool) -> OpGraph:
    """``graph`` as MindSpore's cost graph sees its reused ``@lazy_inline`` graphs (:func:`lazy_fold`): the later
    calls' operators gone, every reader of one of them outside the copies reading the first call's operator, and
    the first calls' Cells deferred (``topo_sort_order`` creates a body first, at the first call met). ``graph``
    itself when nothing folds."""
    copies, reps = lazy_fold(graph, forward)
    if not reps:
        return graph

    def compute(g):
        def moved(x):
            return dataclasses.replace(x, ref=copies[x.ref]) if x.kind == "op" and x.ref in copies else x
        ops = []
        for op in g:
            if op.name in copies:
                continue
            ins = [moved(x) for x in op.inputs]
            ops.append(dataclasses.replace(op, inputs=ins) if ins != list(op.inputs) else op)
        fg = OpGraph(ops, g.inputs, g.params, [moved(x) for x in g.outputs], g.cells, g.model)
        fg.meta = dataclasses.replace(g.meta, deferred_cells=tuple(g.deferred_cells or ()) + tuple(sorted(reps)),
                                      lazy_groups=())
        return fg
    return per_graph(f"lazy_folded{int(bool(forward))}", graph, compute)


def _input_edge(x, slot: int, dataset: tuple) -> tuple | None:
    """``(source, output index, slot)`` of an operator input from another operator or the dataset, else None."""
    if x.kind == "op":
        return (x.ref, x.index, slot)
    if x.kind == "input" and x.ref in dataset:
        return (DATASET, dataset.index(x.ref), slot)
    return None


def graph_structure(graph: OpGraph, dataset: tuple[str, ...], forward: bool):
    """``(succ, prev, data_prev, created, idents, ops, edge_specs)`` of ``graph``: adjacency in MindSpore's order
    (successors by consumer creation order, predecessors by input slot), every tensor flowing between two
    operators (``data_prev``, priced: a superset of the search's edges), the creation order, the TmpIdentity
    operators (:func:`tmp_identities`), every operator by name, and a memo of the engine's ``edge_spec``.
    Shared by every engine over ``graph``: never mutated (but for that memo, a function of the graph)."""
    key = (id(graph), dataset, forward)
    hit = STRUCTURES.get(key)
    if hit is not None and hit[0] is graph:
        return hit[1]
    succ: dict[str, list[tuple[int, str, int]]] = {n: [] for n in [DATASET] + [op.name for op in graph]}
    prev: dict[str, list[tuple[str, int, int]]] = {op.name: [] for op in graph}
    data_prev: dict[str, list[tuple[str, int, int]]] = {op.name: [] for op in graph}
    copies = lazy_copies(graph, forward)
    cost_graph = folded_graph(graph, forward)        # the search's edges and order: one reused graph per lazy class
    for op in graph:
        for slot, x in enumerate(op.inputs):
            e = _input_edge(x, slot, dataset)
            if e is not None:
                data_prev[op.name].append(e)
    absent = frozenset(op.name for op in cost_graph if op.type in NO_OPERATOR_INFO)
    for op in cost_graph:
        for slot, x in enumerate(op.inputs):
            e = _input_edge(x, slot, dataset)
            if e is None:
                continue
            if x.edge and op.name not in absent and e[0] not in absent:
                prev[op.name].append(e)
                succ[e[0]].append((e[1], op.name, slot))
    created = creation_order(cost_graph, forward=forward)
    if absent:                      # no OperatorInfo, no creation index: the operators after them move up
        ranked = sorted((k, n) for n, k in created.items() if n != DATASET)
        gone = 0
        for k, n in ranked:
            if n in absent:
                gone += 1
            else:
                created[n] = k - gone
        for n in absent:            # after everything (they take their defaults)
            created[n] = len(ranked) + 1
    for name in copies:             # no OperatorInfo of their own: after everything (they take the first call's)
        created[name] = len(created) + 1
    idents = tmp_identities(cost_graph, succ, prev, created)
    # MindSpore creates edges per consumer in creation order: a producer's successors follow it
    for n, lst in succ.items():
        lst.sort(key=lambda e: created.get(e[1], 1 << 30))
    ops = {op.name: op for op in graph}
    ops.update(idents)
    out = (succ, prev, data_prev, created, idents, ops, {})
    STRUCTURES[key] = (graph, out)
    return out


def no_generated_strategy(op: Op) -> str | None:
    """Why MindSpore 2.9 generates no strategy for ``op`` left unconfigured (its compile then fails), or None:
    ApplyRotaryPosEmbInfo::GenerateOpStrategies returns none ("Edge cost initialization failed"), and
    CrossEntropyLossInfo hands its three inputs (with the class weight) to GenerateStrategiesWithBroadcast, which
    takes two ("Generate strategies failed"). Measured on the UT nets ``ut6_triu_rope.ApplyRopeAuto8`` and
    ``ut6_transpose_loss.CrossEntropyAuto8``."""
    if op.type == "ApplyRotaryPosEmb":
        return "Edge cost initialization failed"
    if op.type == "CrossEntropyLoss" and len(cached_rule(op).inputs) == 3:
        return "Generate strategies failed (a CrossEntropyLoss with a class weight)"
    return None


def shared_param_users(graph: OpGraph) -> dict[str, list[tuple[str, int]]]:
    """Each Parameter's readers ``(operator, input slot)`` as MindSpore's ``FindParameterUsers`` sees them
    (parameter_manager.cc): readers inside a ``@lazy_inline`` Cell (``graph.lazy_inline_cells``) are left out --
    the parallel passes see that Cell as a reused func graph whose weights are graph parameters without a default
    value, which ``FindParameterUsers`` skips (no TmpIdentity, no shared-parameter check). MindFormers' ``GPTModel``
    is one (:func:`strategist.frontend.mindformers.mf_lazy_inline_cells`): the qwen3_moe router's ``fi_accu``, read by
    ``add_accu`` and ``assignadd``, gets no TmpIdentity there."""
    lazy = tuple(graph.lazy_inline_cells or ())
    users: dict[str, list[tuple[str, int]]] = {}
    for op in graph:
        if lazy and any(op.cell_path == c or op.cell_path.startswith(c + ".") for c in lazy):
            continue
        for slot, x in enumerate(op.inputs):
            if x.kind == "param":
                users.setdefault(x.ref, []).append((op.name, slot))
    return users


def tmp_identities(graph: OpGraph, succ, prev, created) -> dict[str, Op]:
    """MindSpore's ``AugmentCostGraph``: a Parameter read by two or more (operator, input) pairs gets a
    TmpIdentity operator with an edge to each reader. Propagation crosses it: a reader decided
    backward fixes the parameter's layout, which then reaches the other readers (and counts as
    a visited input edge of a multi-input reader, so it need not wait for the queue to drain)."""
    users = {p: [(n, k) for n, k in us if graph.op(n).inputs[k].spec is not None]
             for p, us in shared_param_users(graph).items()}
    idents: dict[str, Op] = {}
    k = len(created)
    for param, us in users.items():
        if len(set(us)) < 2:
            continue
        name = f"{param}<TmpIdentity>"
        x = graph.op(us[0][0]).inputs[us[0][1]]
        idents[name] = Op(name=name, type="TmpIdentity", cell_path="", cell_class="", instance_name=name,
                          full_name=name, inputs=(x,), outputs=(x.spec,))
        succ[name] = []
        created[name] = k
        k += 1
        for user, slot in us:
            prev[user].append((name, 0, slot))
            succ[name].append((0, user, slot))
        succ[name].sort(key=lambda e: created.get(e[1], 1 << 30))
    if DATASET in created:
        created[DATASET] = max(created[DATASET], k)
    return idents


def sibling_calls(graph: OpGraph) -> dict[str, tuple[str, ...]]:
    """Operator -> the other calls of the same Cell-held primitive (same Cell, attribute and type), Casts and
    Reshapes left out (MindSpore ignores or refuses their strategies). Kept with the graph's structure."""
    def compute(g):
        groups: dict[tuple, list[str]] = {}
        for op in g:
            if op.held and op.type not in RESHAPES and op.type != "Cast":
                groups.setdefault((op.cell_path, op.instance_name, op.type), []).append(op.name)
        return {n: tuple(m for m in names if m != n) for names in groups.values() if len(names) > 1 for n in names}
    return per_graph("siblings", graph, compute)
