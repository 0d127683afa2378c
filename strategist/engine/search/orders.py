"""The orders MindSpore creates its OperatorInfos in (the ``k`` of ``MatMulInfo<k><k>``), which order the
search's seeds and waiting operators: ``DeepScopedGraphSearch`` from the output (:func:`dfs_from_output`) or
``TopoSort(ret, SuccDeeperSimple)`` (:func:`topo_sort_order`), as :func:`creation_order` picks."""
from __future__ import annotations

from ...vocab.graph import OpGraph
from ...vocab.anchors import DATASET


def creation_order(graph: OpGraph, forward: bool = False) -> dict[str, int]:
    """The order MindSpore creates OperatorInfos in: their ``topo_index`` (the ``k`` of ``MatMulInfo<k><k>``),
    which orders seeds and waiting operators. ``InferParallelStrategy`` (step_auto_parallel.cc) inserts a
    VirtualOutput only when ``IsInsertVirtualOutput``: the root graph is not a training graph (kTraining,
    from ``set_train(True)``) and no dataset strategy tuple is set. Then it re-collects the nodes with
    ``DeepScopedGraphSearch``: VirtualOutput k = 0, depth-first from the output with a stack, the last input
    explored first. Otherwise (a tuple dataset strategy, or ``graph.training``: a training compile, ``--train``
    or MindFormers' training networks) the nodes stay in ``GetAllNodesForParallel``'s
    ``TopoSort(ret, SuccDeeperSimple)`` order (:func:`topo_sort_order`). VirtualDataset's topo index is the maximum either way."""
    if forward or graph.training:
        return topo_sort_order(graph)
    return dfs_from_output(graph)


def dfs_from_output(graph: OpGraph) -> dict[str, int]:
    """``DeepScopedGraphSearch`` from the output as operator indices: depth-first with a stack, pre-order, the
    last input explored first; operators the output does not reach after the rest, VirtualDataset last."""
    order: dict[str, int] = {}
    k = 1
    stack = [x for x in graph.outputs]
    seen: set = set()
    while stack:
        x = stack.pop()
        key = x.ref if x.kind == "op" else None
        if key is None or key in seen:
            continue
        seen.add(key)
        order[key] = k
        k += 1
        stack.extend(graph.op(key).inputs)
    for op in graph:               # unreachable from the output: after everything else
        if op.name not in order:
            order[op.name] = k
            k += 1
    order[DATASET] = 1 << 40
    return order


def topo_sort_order(graph: OpGraph) -> dict[str, int]:
    """MindSpore's ``TopoSort(ret, SuccDeeperSimple)`` (ir/graph_utils.cc) as operator creation indices: a
    post-order depth-first walk from the output, inputs left to right (``FetchCNodeSuccessors`` pushes them
    reversed). A call of a sub-graph that is not inlined yet (``graph.deferred_cells``: Cells with a custom
    ``bprop``) has that graph as its input 0, and ``SuccDeeperSimple`` enters a graph at its return node: the
    callee's operators come first, its parameters (the caller's arguments) being leaves there, then the
    arguments in order. Measured on MindFormers' qwen3 (verify's child, GLOG_v=1 "Successfully created
    operator"): the loss' ``_NLLLoss`` then ``_LogSoftmax`` bodies are operators 0-9, then the model from its
    embedding on, in execution order."""
    ops = {op.name: op for op in graph}
    deferred = sorted(graph.deferred_cells or (), key=len)    # outermost first

    def callee(name: str):
        path = ops[name].cell_path
        return next((d for d in deferred if path == d or path.startswith(d + ".")), None)

    members: dict[str, list[str]] = {}
    for name in ops:
        d = callee(name)
        if d is not None:
            members.setdefault(d, []).append(name)
    order: dict[str, int] = {}
    called: set = set()
    effects = side_effects_by_reader(graph)

    def walk(start: str, scope) -> None:
        """Post-order from ``start`` inside ``scope`` (None: the root graph; else a deferred cell's body,
        whose inputs from outside are its parameters)."""
        stack = [(start, False)]
        while stack:
            name, done = stack.pop()
            if name in order:
                continue
            d = callee(name)
            if d != scope:
                if scope is None and d not in called:      # a call: the callee's body, then its arguments
                    called.add(d)
                    call(d)
                continue
            if done:
                order[name] = len(order) + 1
                continue
            stack.append((name, True))
            later = effects.get(name, {})
            for k in reversed(range(len(ops[name].inputs))):
                x = ops[name].inputs[k]
                if x.kind == "op" and x.ref not in order:
                    stack.append((x.ref, False))
                stack.extend((e, False) for e in reversed(later.get(k, ())) if e not in order)

    def call(d: str) -> None:
        body = set(members[d])
        outputs = [n for n in members[d] if any(e.dst not in body for e in graph.out_edges(n))
                   or any(x.kind == "op" and x.ref == n for x in graph.outputs)]
        for n in outputs:
            walk(n, d)
        args: list[str] = []        # the arguments in the order the body first reads them
        for n in sorted(members[d], key=lambda n: order.get(n, 1 << 30)):
            args.extend(x.ref for x in ops[n].inputs if x.kind == "op" and x.ref not in body and x.ref not in args)
        for a in args:
            walk(a, None)

    for x in graph.outputs:
        if x.kind == "op":
            walk(x.ref, None)
    walk = None                    # the closures' hold on each other (walk, call): freed on return, not by gc
    for name in ops:               # unreachable from the output: after everything else
        if name not in order:
            order[name] = len(order) + 1
    order[DATASET] = 1 << 40
    return order


#: operators that write a Parameter: MindSpore threads them through the UpdateState monad chain, not the data flow
SIDE_EFFECTS = frozenset({"Assign", "AssignAdd", "AssignSub"})


def side_effects_by_reader(graph: OpGraph) -> dict[str, dict[int, list[str]]]:
    """Where MindSpore's TopoSort reaches each Parameter-writing operator (:data:`SIDE_EFFECTS`, e.g. a MoE
    router's ``AssignAdd`` of its token counts): through the monad of the next Parameter ``Load`` in execution
    order, i.e. at the Parameter input of the next operator reading one. {reader: {input slot: [writers]}}.
    Measured on qwen3_moe (verify's child, GLOG_v=1): the router's aux-loss ``Reshape`` / ``OneHot`` / ``MeanExt``
    / ``ReduceMean`` / ``AssignAdd`` are operators 100-105, just before the experts' weight Cast (106), not after
    the output layer where a walk of the data flow alone puts them -- and the first Reshape created claims
    MindSpore's Reshape cost cache entries (:meth:`~strategist.engine.search.reshape.ReshapeSearch.reshape_costs`)."""
    ops = sorted(graph, key=lambda op: op.topo_index)
    out: dict[str, dict[int, list[str]]] = {}
    pending: list[str] = []
    for op in ops:
        if op.type in SIDE_EFFECTS and not graph.out_edges(op.name):
            pending.append(op.name)
            continue
        slot = next((k for k, x in enumerate(op.inputs) if x.kind == "param"), None)
        if pending and slot is not None:
            out.setdefault(op.name, {})[slot] = pending
            pending = []
    return out
