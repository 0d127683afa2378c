"""Pricing a searched plan: every edge's redistribution forward and backward (gradients of one tensor's
consumers summed where their layouts agree), each operator's own communication (partial sums it reduces,
gradient reduction of its Parameters, the redistribution inside a Reshape), FLOPs per device; in
MindSpore's cost units and in bytes and seconds on a hardware profile. It reads the search's result only
(:class:`~strategist.engine.search.result.SearchResult`); the search (:mod:`strategist.engine.search`) never reads
these prices: like MindSpore it minimises one edge at a time."""
from __future__ import annotations

import math

from ..memo import lru, table
from ..errors import StrategyError
from ..vocab.graph import OpGraph, ShardLayout
from ..vocab.comm import CommStep
from ..vocab.layout import Layout
from ..engine.rules.flops import COMPUTE_TYPES, training_flops
from ..engine.rules.sharding import output_partial, output_scattered, pre_reduce_layout, shard_layout
from ..engine.redistribution import Collective, Physical
from ..vocab.anchors import DATASET
from ..engine.plan import CAST_PASS, Conflict, EdgeCost, OpChoice, OpCost, Plan, Provenance
from ..engine.search.caches import cached_plan
from ..engine.search.kinds import RESHAPES
from ..engine.search.layout_eq import same_placement, type_len
from ..engine.search.local_rows import local_rows_layout
from ..engine.search.result import SearchResult
from ..engine.search.structure import per_graph

_PRICES = table("pricing: edge and operator prices", 1 << 20)


# operators that pass a Parameter on unchanged to MindSpore's parallel pass: a weight read through them gets its
# mirror operator where it is consumed (a Cast has no OperatorInfo after the search; a Load is plumbing)
PARAM_CASTS = frozenset({"Cast", "Load"})


def grad_flow(g: OpGraph) -> tuple[dict[str, bool], dict[str, tuple[bool, ...]], frozenset]:
    """Per operator: whether its outputs need a gradient (they depend on a trainable Parameter), per input
    whether it is a trainable Parameter, and the operators whose output is a trainable Parameter seen through
    :data:`PARAM_CASTS` only (a bf16 Cast of a weight). A function of the graph, computed once per graph."""
    return per_graph("gradient flow", g, _grad_flow)


def _grad_flow(g: OpGraph) -> tuple[dict[str, bool], dict[str, tuple[bool, ...]], frozenset]:
    needs_grad: dict[str, bool] = {}
    grads_on: dict[str, tuple[bool, ...]] = {}
    casts: set[str] = set()
    for op in g:
        grads_on[op.name] = tuple(_trainable(g, x, casts) for x in op.inputs)
        needs_grad[op.name] = any(grads_on[op.name]) or any(x.kind == "op" and needs_grad.get(x.ref, False)
                                                            for x in op.inputs)
        tensors = [x for x in op.inputs if x.kind in ("param", "op", "input")]
        if op.type in PARAM_CASTS and len(tensors) == 1 and _trainable(g, tensors[0], casts):
            casts.add(op.name)
    return needs_grad, grads_on, frozenset(casts)


def _trainable(g: OpGraph, x, casts) -> bool:
    """Input ``x`` is a trainable Parameter, directly or through :data:`PARAM_CASTS` (in ``casts``)."""
    if x.kind == "param":
        return x.ref not in g.params or g.params[x.ref].requires_grad
    return x.kind == "op" and x.ref in casts


def _replica_axes(layout: Layout) -> tuple[int, ...]:
    """Device axes (of size > 1) that split no dimension of ``layout``: the devices holding the same slice, over
    which MindSpore's mirror operator reduces a Parameter's gradient -- repeated computation included. Measured
    (MindSpore 2.9.0, a MatMul ``((2, 1), (1, 1))`` with a weight on 8 devices, trained): the ``MirrorOperator``
    groups all 8 devices (``nccl_world_group``), not the 2 that compute different rows; ``((2, 1), (1, 4))``
    groups 2."""
    return tuple(a for a, n in enumerate(layout.dev_matrix) if n > 1 and all(a not in d for d in layout.dims))


def mirrored_spec(g: OpGraph, x):
    """The tensor a Parameter's mirror reduces the gradient of, where an operator reads the Parameter as input ``x``:
    ``x`` itself, or, where ``x`` is a Cast to anything but float32 (a float32 weight read in bf16 or fp16),
    the Cast's input: MindSpore's ``gradient_fp32_sync`` (on by default) puts the mirror before such a Cast
    (``IsCastBeforMirror``), so the gradient is reduced in float32 (``verify --communication``: a float32 LLaMA
    cast to float16, each weight's AllReduce twice the bytes of its float16 input)."""
    if x.kind == "op" and x.ref in g and x.spec is not None and x.spec.dtype != "float32":
        src = g.op(x.ref)
        if src.type == "Cast" and src.inputs and src.inputs[0].spec is not None:
            return src.inputs[0].spec
    return x.spec


def _root_param(g: OpGraph, x, casts) -> str:
    """The Parameter input ``x`` reads, directly or through :data:`PARAM_CASTS`."""
    while x.kind == "op" and x.ref in casts:
        x = next(i for i in g.op(x.ref).inputs if i.kind in ("param", "op"))
    return x.ref


def _mirror(lay: Layout, type_len: int, hw, dtype: str = ""):
    """The physical price of a Parameter's mirror on ``lay``, or None where no device holds a copy: ONE AllReduce
    over every device holding the same slice, however many device axes they span. Measured (random net 30,
    MindSpore 2.9.0): a MatMul ``((2, 2), (1, 2))`` on dp=4,tp=4 repeats over 2 devices and the weight's rows
    are split by none of the 4 of the first input's rows -- ``_MirrorOperator`` group ``(0-3, 8-11)``, dev_num 8,
    one AllReduce; not one per replica axis (the redistribution planner's AllReduce over 2, then over 4)."""
    axes = _replica_axes(lay)
    if not axes:
        return None
    n = math.prod(lay.dev_matrix[a] for a in axes)
    step = Collective("AllReduce", axes[-1], -1, -1, n, lay.slice_shape, lay.dev_matrix)
    nb = step.bytes_sent(type_len)
    t = hw.collective_seconds(step, nb, axes) if hw is not None and nb else 0.0
    ranks = group_of_rank0(lay.dev_matrix, axes)
    return Physical(nb, t, (CommStep("AllReduce", tuple(ranks), nb, t, dtype=dtype),))


@lru("cost.pricing.group_of_rank0", 4096)
def group_of_rank0(dev_matrix: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    """Ranks sharing rank 0's coordinates on every device axis but ``axes``."""
    ranks = [0]
    for a in axes:
        stride = math.prod(dev_matrix[a + 1:])
        ranks = [r + k * stride for r in ranks for k in range(dev_matrix[a])]
    return tuple(sorted(ranks))


def _backward(fwd, type_len: int, hw, a2a: bool, dtype: str = ""):
    """(backward redistribution, its physical price) of a forward one: its transpose, as MindSpore's autodiff
    writes it (:meth:`~strategist.engine.redistribution.Redistribution.transposed`)."""
    bwd = fwd.transposed()
    return bwd, bwd.physical(type_len, hw, a2a, dtype)


def differentiable(spec) -> bool:
    """A tensor a gradient flows through (floating point)."""
    return spec is not None and spec.dtype.startswith(("float", "bfloat"))


def cast_overlay(res: SearchResult) -> dict[str, OpChoice]:
    """The Casts as MindSpore's parallel graph runs them: after the search every Cast's OperatorInfo is dropped
    (``AddOperatorToIgnoreCandidates`` puts each Cast in ``ignore_candidate_``, ``IgnoreOperatorsInCostGraph``
    clears them), so a Cast is no ``IsParallelCareNode``: it casts its input in the layout that arrives, and the
    redistribution to each consumer is inserted after it, on the cast dtype. Its searched strategy only steered
    the search. Measured (``tests/test_pricing.py``): ``Add`` ``(1, 8, 1)`` -> Cast -> a Layout-configured GeLU;
    MindSpore sets the Cast ``[[1, 2, 1]]`` (``PreProcessPreCastForSP``) and then redistributes once, after the
    Cast, from the Add's layout to the GeLU's.

    Returns the choice of every Cast whose searched layout differs from the one its input arrives in (a Cast of
    a Parameter keeps its own: the Parameter is sliced as it says)."""
    out: dict[str, OpChoice] = {}
    for op in res.graph:
        if op.type != "Cast":
            continue
        src = next(((s, j) for s, j, slot in res.data_prev[op.name] if slot == 0), None)
        if src is None:
            continue
        s, j = src
        prev = out.get(s) or res.chosen.get(s)          # (None for the dataset)
        # what arrives: a Cast before it as it runs, else the producer's output with its own reduction done
        lay = (prev.outputs[j] if j < len(prev.outputs) else None) if s in out else res.out_layout(s, j)
        mine = res.chosen[op.name]
        if lay is None or mine.sharding is None or (mine.inputs and same_placement(mine.inputs[0], lay)):
            continue
        pk = ("cast", res.key(op.name), lay, res.n)
        sh = _PRICES.get(pk)
        if sh is None:
            try:
                sh = _PRICES[pk] = shard_layout(op, (ShardLayout.of(lay),), res.n, None, res.rule(op.name))
            except StrategyError:
                continue
        unreached = prev is not None and prev.provenance.direction == "default"
        out[op.name] = OpChoice(op, sh, sh.inputs, sh.outputs,
                                Provenance(prev.provenance.root if prev is not None else DATASET, s, 0,
                                           "default" if unreached else CAST_PASS), mine.configured)
    return out


def _before_local_rows(res: SearchResult, chosen: dict, name: str, dst: Layout) -> tuple[Layout, Layout] | None:
    """A MindFormers Morph's device-local ``[S, B, H] -> [S*B, H]`` Reshape ``name`` feeding a consumer that
    wants its rows as ``dst``: where ``dst`` is the local rows of an ``[S, B, H]`` layout, the (from, to) of the
    redistribution on the Reshape's INPUT that gives the consumer its rows. MindFormers redistributes there
    (the Morph's in_layout, e.g. a column-parallel linear's sequence AllGather); on the merged rows the same
    placement can only be written as another split of S (rows by dp are contiguous halves of S*B, not B by
    dp), and moving to it would cost a gather over dp the Morph never does."""
    op = res.op(name)
    rows = op.attrs.get("strategist_local_rows")
    ch = chosen[name]
    if not rows or len(rows) > 2 or not ch.inputs or ch.inputs[0] is None or op.inputs[0].spec is None:
        return None
    a = ch.inputs[0]
    seq_axes = res.seq_axes(dst.dev_matrix)
    back = local_rows_layout(dst, tuple(op.inputs[0].spec.shape), tuple(rows), seq_axes)
    if back is None or back.shape != a.shape or back.device_num != a.device_num:
        return None
    again = local_rows_layout(back, tuple(dst.shape), tuple(rows), seq_axes)
    return (a, back) if again is not None and same_placement(again, dst) else None


#: operators whose gradient with respect to an input is the output's gradient reshaped, broadcast, summed over
#: broadcast axes or negated (MindSpore's bprop expander folds these on a constant into a constant: random nets
#: 12, 19, 26; a Tile's: random net 43); a product or quotient is not among them even by a constant (random net 37:
#: ``realdiv(t6, 3.0)``'s bprop is a RealDiv node of the constant, the Add's weight before it keeps its mirror), nor
#: a mean (a division), nor a Transpose (random net 42: ``Transpose(Tensor[4, 2])`` stays a node, add1's weight
#: before it keeps its mirror)
CONST_GRAD_OPS = frozenset({"Add", "AddExt", "Sub", "SubExt", "Neg", "Cast", "Reshape", "Flatten", "ExpandDims",
                            "Squeeze", "Identity", "ReduceSum", "SumExt", "BroadcastTo", "BiasAdd", "Tile"})


def _const_passes(op, slot: int) -> bool:
    """``op``'s gradient for input ``slot`` is a constant when its output's gradient is (:data:`CONST_GRAD_OPS`);
    a BiasAdd's only for its input (the bias's gradient is a BiasAddGrad node: random net 37)."""
    return op.type in CONST_GRAD_OPS and (op.type != "BiasAdd" or slot == 0)


def _sum_layout(lay: Layout) -> Layout:
    """The layout a training step's loss sum configured with ``lay``'s splits reads (verify's child: ReduceSum
    ``shard((splits,))``): device matrix the splits, repeated computation appended on the right. Where it places
    the data otherwise than ``lay`` (random net 16: a MatMul ``((1, 2), (2, 2))`` repeating on 8 devices), MindSpore
    redistributes into the sum, and the transpose of that redistribution (a ReduceScatter) computes the gradient."""
    splits = tuple(lay.split(d) for d in range(len(lay.shape)))
    used = math.prod(splits)
    dm = splits + ((lay.device_num // used,) if lay.device_num > used else ())
    return Layout(lay.shape, dm, tuple((d,) if n > 1 else () for d, n in enumerate(splits)))


def constant_gradients(res: SearchResult, chosen: dict, casts: dict) -> tuple[set, set]:
    """(operator outputs ``(name, j)``, Parameters) whose gradient in one training step is a compile-time
    constant in MindSpore's graph after autodiff; the collectives MindSpore would run on it are folded away.

    A model output's gradient is the loss's sens (ones: the training step's loss sums every output; a tensor no
    operator reads back has a constant gradient so), and stays a
    constant through the bprops of :data:`CONST_GRAD_OPS` on an edge that moves nothing (a redistribution's
    transpose, a ReduceScatter or a StridedSliceGrad, is a computed node again); a tensor several operators read
    is constant when every reader's gradient is. On a constant, MindSpore's ``AllReduceConstElim`` (irpass
    ``special_op_eliminate.h``) replaces an AllReduce by a Mul by the group size: the transpose of an operator's
    own AllReduce and a Parameter's ``_MirrorOperator`` AllReduce disappear. Measured (MindSpore 2.9.0, the
    validate dump): random net 12's ``add1(t4, w5)`` output -- w5's gradient ``Mul(Tensor[32], 16)``, no mirror;
    random net 19's broadcast Add ``(2, 26, 3) + w1 (26, 3)``; random net 26's ``sub(t6, w1)`` (a Neg folded);
    random net 40's row-split MatMul output: its AllReduce has no transpose."""
    g = res.graph
    if len(g.outputs) < 2:
        # one output: the training step's loss node is its sum, a scalar on every device; MindSpore inserts a
        # _VirtualDiv by the device count before it (OperatorInfo::InferVirtualDivOps, loss_repeated_mean) whose
        # bprop, a RealDiv of the sens, is a computed node (random net 7: the Add's weight keeps its mirror)
        return set(), set()
    def out_layout(name: str, j: int):
        return casts[name].outputs[j] if name in casts else res.out_layout(name, j, priced=True)

    readers: dict = {}          # (producer, j) or ("param", name) -> [(reader, slot)]
    wrapped = {}                # model output -> the step's loss sum reads it as laid out (no redistribution)
    for x in g.outputs:
        if x.kind == "op":
            lay = out_layout(x.ref, x.index or 0)
            wrapped[(x.ref, x.index or 0)] = lay is None or same_placement(lay, _sum_layout(lay))
    for op in g:
        for slot, x in enumerate(op.inputs):
            if x.kind == "op":
                readers.setdefault((x.ref, x.index or 0), []).append((op.name, slot))
            elif x.kind == "param":
                readers.setdefault(("param", x.ref), []).append((op.name, slot))
    const_out: dict[tuple, bool] = {}
    op_const: dict[str, bool] = {}

    def passes(name: str, slot: int, src: tuple | None) -> bool:
        op = g.op(name)
        if not op_const.get(name) or not _const_passes(op, slot):
            return False
        if src is None:
            return True
        a = out_layout(*src)
        b = casts[name].inputs[0] if name in casts and slot == 0 else res.in_layout(name, slot)
        return a is None or b is None or a.shape != b.shape or same_placement(a, b)
    for op in reversed(list(g)):
        s = chosen[op.name].sharding
        mine = True
        for j in range(len(op.outputs)):
            c = wrapped.get((op.name, j), True) and all(passes(r, slot, (op.name, j))
                                                         for r, slot in readers.get((op.name, j), ()))
            const_out[(op.name, j)] = c
            mine = mine and c
            if s is not None and j < len(s.outputs) and output_scattered(s, j):
                mine = False        # its ReduceScatter's transpose, an AllGather, is computed
        op_const[op.name] = mine
    params = {p for p in g.params if all(passes(r, slot, None) for r, slot in readers.get(("param", p), ()))
              and readers.get(("param", p))}
    return {k for k, v in const_out.items() if v}, params


def price(res: SearchResult) -> Plan:
    """The priced :class:`~strategist.engine.plan.Plan` of a finished search."""
    g, hw = res.graph, res.hardware
    needs_grad, grads_on_of, param_casts = grad_flow(g)
    casts = cast_overlay(res)
    a2a = bool(g.enable_alltoall)      # MindSpore's enable_alltoall (a MindFormers config's)
    chosen = {op.name: casts.get(op.name) or res.chosen[op.name] for op in g}
    const_out, const_params = constant_gradients(res, chosen, casts)
    edges = _edge_costs(res, g, hw, chosen, casts, needs_grad, a2a)
    op_costs = _operator_costs(res, g, hw, chosen, a2a, needs_grad, grads_on_of, param_casts, const_out,
                               const_params)
    conflicts, incons, flops, traffic = _conflicts_and_work(res, g, chosen, edges, needs_grad)
    return Plan(g, res.mesh, hw, res.user_anchors(), chosen, edges, op_costs,
                conflicts, incons, res.warnings, flops, traffic=traffic)


def _edge_costs(res: SearchResult, g: OpGraph, hw, chosen: dict, casts: dict, needs_grad: dict,
                a2a: bool) -> list[EdgeCost]:
    """Every edge's redistribution, forward and backward (a tensor redistributed alike for several consumers sent once)."""
    edges: list[EdgeCost] = []
    sent: dict = {}          # (producer, output, layouts) -> the first consumer whose redistribution sends it
    transposed: dict = {}    # (producer, output, layouts) -> its transposes priced so far (<= strategist_copies)
    alike: dict = {}         # (producer, output, src layout) -> the dst layouts it is redistributed into
    for op in g:
        once: set = set()
        for src, j, slot in res.data_prev[op.name]:
            a = casts[src].outputs[j] if src in casts else res.out_layout(src, j, priced=True)
            b = casts[op.name].inputs[0] if op.name in casts and slot == 0 else res.in_layout(op.name, slot)
            if a is None or b is None or a.shape != b.shape:
                continue
            spec = op.inputs[slot].spec
            tl, dtype = type_len(spec), spec.dtype if spec else ""
            if src != DATASET and not same_placement(a, b) and res.op(src).attrs.get("strategist_local_rows"):
                alt = _before_local_rows(res, chosen, src, b)
                if alt is not None and cached_plan(*alt).physical(tl, hw, a2a).bytes_sent \
                        < cached_plan(a, b).physical(tl, hw, a2a).bytes_sent:
                    a, b = alt
            pk = ("e", id(a), id(b), dtype, id(hw), a2a)
            hit = _PRICES.get(pk)
            if hit is None or hit[0] is not a or hit[1] is not b or hit[2] is not hw:
                r = cached_plan(a, b)
                hit = _PRICES[pk] = (a, b, hw, r, r.mindspore_cost(tl, dtype), r.physical(tl, hw, a2a, dtype),
                                     _backward(r, tl, hw, a2a, dtype))
            fwd, ms, pf, back = hit[3:]
            if fwd.has_communication and (src, j, a, b) in once and src != DATASET and res.is_reshape(src):
                # a Reshape's output read twice by one operator (Concat((t, t))): MindSpore replaces the Reshape by
                # the redistribution once, both elements read it (netgen 89's step_parallel_end). Any other
                # producer is redistributed per input (netgen 8: two AllGathers)
                fwd = cached_plan(b, b)
                ms, pf, back = fwd.mindspore_cost(tl, dtype), fwd.physical(tl, hw, a2a, dtype), None
            once.add((src, j, a, b))
            # one redistribution node for the consumers wanting the same data on every device, however their
            # layouts are written (a MatMul's (2, 1) input and an Add's: one AllGather, one ReduceScatter)
            seen = alike.setdefault((src, j, a), [])
            bk = next((x for x in seen if x is b or same_placement(x, b)), None)
            if bk is None:
                seen.append(b)
                bk = b
            key = (src, j, a, bk)
            fb, fs = pf.bytes_sent, pf.seconds
            if fwd.has_communication and sent.setdefault(key, (op.name, slot)) != (op.name, slot):
                # one tensor redistributed alike for several consumers: MindSpore's graph runs the forward
                # collectives once, every consumer reads the result (step_parallel_end; measured in its graph
                # after autodiff: the encoder's q/k/v read one AllGather); its transposes: below. So for one
                # consumer reading it twice (mul(t, t), bmm(x, x) on the dataset's x: random net 507): the
                # step_parallel_end graph has two chains (netgen 8), the training step's graph one
                fb, fs = 0.0, 0.0
            bwd, bb, bs = None, 0.0, 0.0
            if src != DATASET and needs_grad.get(src) and fwd.has_communication and differentiable(spec):
                # the gradient flows back through the redistribution: MindSpore's autodiff transposes each of its
                # collectives (measured in its graph after autodiff: tests/test_communication.py) -- once per
                # redistribution node of its graph: one per producer node and layout pair, the consumers'
                # gradients summed before it (LLaMA's embedding read by the residual Add and the first norm: one
                # ReduceScatter). A producer the stand-alone CSE merged from k equal calls (strategist_copies:
                # nn.MultiheadAttention's q, k, v swapaxes) is k nodes there, each redistributed for its own
                # consumers: up to k transposes (the encoder's three ReduceScatters per layer)
                bwd, pb = back
                transposed[key] = transposed.get(key, 0) + 1
                if transposed[key] <= res.op(src).attrs.get("strategist_copies", 1):
                    bb, bs = pb.bytes_sent, pb.seconds
            edges.append(EdgeCost(src, op.name, j, slot, a, b, fwd, bwd, dtype, ms.communication, ms.computation,
                                  fb, fs, bb, bs))
    return edges


def _operator_costs(res: SearchResult, g: OpGraph, hw, chosen: dict, a2a: bool, needs_grad: dict, grads_on_of: dict,
                    param_casts, const_out, const_params) -> dict[str, OpCost]:
    """Each operator's own communication: partial sums it reduces, its Parameters' mirrors, the redistribution
    inside a Reshape."""
    # size: one pass pricing each operator's own collectives, gathers and mirrors beside their memo
    op_costs: dict[str, OpCost] = {}
    mirrored: set[str] = set()      # a Parameter read by several operators has one mirror (its gradients summed)
    for op in g:
        ch = chosen[op.name]
        s = ch.sharding
        if s is None:
            continue
        grads_on = grads_on_of[op.name]
        if any(grads_on) and op.type not in PARAM_CASTS:
            roots = [_root_param(g, x, param_casts) if on else None for x, on in zip(op.inputs, grads_on)]
            grads_on = tuple(r is not None and r not in mirrored and r not in const_params for r in roots)
            mirrored.update(r for r in roots if r is not None)
        folded = tuple((op.name, j) in const_out for j in range(len(s.outputs)))
        pk = ("o", id(res.key(op.name)), id(s), grads_on, id(hw), a2a, needs_grad.get(op.name, False), folded)
        hit = _PRICES.get(pk)
        if hit is not None and (hit[0] is not res.key(op.name) or hit[1] is not s or hit[2] is not hw):
            _PRICES.pop(pk)
        if pk in _PRICES:
            if _PRICES[pk][3] is not None:
                op_costs[op.name] = _PRICES[pk][3]
            continue
        c = OpCost()
        steps = []
        for j, out in enumerate(s.outputs):
            if not (output_partial(s, j) or output_scattered(s, j)) or j >= len(op.outputs) or op.outputs[j] is None:
                continue
            tl, dt = type_len(op.outputs[j]), op.outputs[j].dtype
            # its own AllReduce, or ReduceScatter onto the output's dims (Gather's table row split)
            r = cached_plan(pre_reduce_layout(s, j), out)
            p = r.physical(tl, hw, a2a, dt)
            c.fwd_bytes += p.bytes_sent
            c.fwd_seconds += p.seconds
            steps.extend(p.steps)
            if needs_grad.get(op.name) and differentiable(op.outputs[j]) and not (
                    folded[j] and all(st.kind == "AllReduce" for st in r.ops)):
                # its transpose in the backward (an AllReduce's is an AllReduce of the output's gradient; on a
                # constant gradient MindSpore folds it: constant_gradients)
                bwd, pb = _backward(r, tl, hw, a2a, dt)
                c.bwd_bytes += pb.bytes_sent
                c.bwd_seconds += pb.seconds
                steps.extend(st.toward("backward") for st in pb.steps)
        for k, gl in enumerate(s.gathered):
            # its own AllGather of an input before computing (an enable_nd_tp MatMul's replace graph), and its
            # transpose, a ReduceScatter of that input's gradient
            if gl is None or k >= len(s.inputs):
                continue
            x = op.inputs[res.rule(op.name).slots[k]]
            spec = x.spec
            tl, dt = type_len(spec), spec.dtype if spec else ""
            r = cached_plan(s.inputs[k], gl)
            p = r.physical(tl, hw, a2a, dt)
            c.fwd_bytes += p.bytes_sent
            c.fwd_seconds += p.seconds
            steps.extend(p.steps)
            if differentiable(spec) and (_trainable(g, x, param_casts) or
                                          (x.kind == "op" and needs_grad.get(x.ref, False))):
                _bwd, pb = _backward(r, tl, hw, a2a, dt)
                c.bwd_bytes += pb.bytes_sent
                c.bwd_seconds += pb.seconds
                steps.extend(st.toward("backward") for st in pb.steps)
        if op.type not in PARAM_CASTS:
            # the mirror of each Parameter it reads (through a Cast too: a Cast has no OperatorInfo after the
            # search, MindSpore mirrors the weight where it is consumed)
            for k, slot in enumerate(res.rule(op.name).slots):
                if k >= len(s.inputs) or not grads_on[slot]:
                    continue
                spec = mirrored_spec(g, op.inputs[slot])
                p = _mirror(s.inputs[k], type_len(spec), hw, spec.dtype if spec else "")
                if p is not None:
                    c.grad_bytes += p.bytes_sent
                    c.grad_seconds += p.seconds
                    steps.extend(st.toward("grad") for st in p.steps)
        c.steps = tuple(steps)
        _PRICES[pk] = (res.key(op.name), s, hw, c if c.bytes else None)
        if c.bytes:
            op_costs[op.name] = c
    _reshape_costs(res, g, hw, chosen, a2a, needs_grad, grads_on_of, param_casts, const_params, op_costs, mirrored)
    return op_costs


def _reshape_costs(res: SearchResult, g: OpGraph, hw, chosen: dict, a2a: bool, needs_grad: dict, grads_on_of: dict,
                   param_casts, const_params, op_costs: dict, mirrored: set) -> None:
    """Into ``op_costs``: the redistribution inside each Reshape whose output layout is not its input's data, and
    its transpose for the gradient (``mirrored``: the Parameters whose mirror is already priced)."""
    # a Reshape whose output layout is not its input's data (MindSpore's ReshapeInfo picks the pair from its
    # producer's and consumer's candidates): the redistribution inside it, into the input-shape layout of
    # what it hands on, and its transpose for the gradient; a Reshape of a weight carries the weight's mirror
    for op in g:
        if op.type not in RESHAPES:
            continue
        ch = chosen[op.name]
        if not ch.inputs or not ch.outputs or ch.inputs[0] is None or ch.outputs[0] is None:
            continue
        a = ch.inputs[0]
        spec = op.inputs[0].spec
        tl, dt = type_len(spec), spec.dtype if spec else ""
        c = OpCost()
        steps = []
        on = grads_on_of[op.name]
        root = _root_param(g, op.inputs[0], param_casts) if on and on[0] else None
        if root is not None and root not in mirrored and root not in const_params:
            mirrored.add(root)
            p = _mirror(a, tl, hw, dt)
            if p is not None:
                c.grad_bytes, c.grad_seconds = p.bytes_sent, p.seconds
                steps.extend(st.toward("grad") for st in p.steps)
        inp = None
        if op.attrs.get("strategist_local_rows"):
            # a device-local Morph reshape is free when its output is its input's own rows: dealing rows back
            # to [S, B] is ambiguous ((S by tp, B by dp) and (B by tp x dp) merge to the same rows), so the
            # forward mapping, the search's own, is asked first
            cand, mapped = res.reshape_from_input(op.name, a)
            if cand == a and same_placement(mapped, ch.outputs[0]):
                inp = a
        if inp is None:
            inp, _cand = res.reshape_through(op.name, ch.outputs[0], forward=False)
        if a.shape == inp.shape and not same_placement(a, inp):
            r = cached_plan(a, inp)
            p = r.physical(tl, hw, a2a, dt)
            c.fwd_bytes, c.fwd_seconds = p.bytes_sent, p.seconds
            steps.extend(p.steps)
            if needs_grad.get(op.name) and differentiable(op.inputs[0].spec):
                bwd, pb = _backward(r, tl, hw, a2a, dt)
                c.bwd_bytes, c.bwd_seconds = pb.bytes_sent, pb.seconds
                steps.extend(st.toward("backward") for st in pb.steps)
        c.steps = tuple(steps)
        if c.bytes:
            op_costs[op.name] = c


def _conflicts_and_work(res: SearchResult, g: OpGraph, chosen: dict, edges: list, needs_grad: dict):
    """The conflicts between two anchors' searches, and each operator's FLOPs or memory traffic."""
    conflicts = []
    for e in edges:
        if not e.forward.has_communication:
            continue
        ra, rb = chosen[e.src].provenance.root if e.src in res.chosen else DATASET, chosen[e.dst].provenance.root
        if ra and rb and ra != rb and (ra in res.anchors or ra == DATASET) and rb in res.anchors:
            conflicts.append(Conflict(e.src, e.dst, (ra, rb), e.ms_communication, e.seconds))
    incons = list(res.inconsistencies)
    flops, traffic = {}, {}
    for op in g:
        s = chosen[op.name].sharding
        if s is None:
            continue
        if op.type in COMPUTE_TYPES:
            f = training_flops(op, res.rule(op.name), s)
            if f:
                flops[op.name] = f
        else:
            t = memory_traffic(op, res.rule(op.name), s, needs_grad.get(op.name, False))
            if t:
                traffic[op.name] = t
    return conflicts, incons, flops, traffic


#: operators that read only the rows they return from their table (its slice is not streamed whole)
LOOKUPS = frozenset({"Gather", "GatherV2", "Embedding", "EmbeddingLookup", "SparseGatherV2"})


def memory_traffic(op, rule, s, needs_grad: bool) -> float:
    """Device-memory bytes one device moves for memory-bound ``op`` (element-wise operators, norms, casts,
    transposes, routing) in a training step under ``s``: every input slice read and every output slice
    written, three times over when a gradient flows back through it (the backward reads the saved inputs
    and the output's gradient and writes the inputs' gradients), once otherwise. Replicated work is
    charged in full on each device, as its FLOPs are for MatMuls.

    >>> from strategist.vocab.graph import Input, Op, TensorSpec
    >>> from strategist.engine.rules.registry import rule_for
    >>> from strategist.engine.rules.sharding import shard
    >>> x = TensorSpec((8, 1024), "float32")
    >>> op = Op("relu", "ReLU", "", "", "relu", "", (Input("input", "x", spec=x),), (x,))
    >>> r = rule_for(op)
    >>> memory_traffic(op, r, shard(op, ((1, 1),), 8, None, r), True)      # 32 KiB in, 32 KiB out, x3
    196608.0
    >>> memory_traffic(op, r, shard(op, ((8, 1),), 8, None, r), True)
    24576.0
    """
    total = 0.0
    for k, slot in enumerate(rule.slots):
        x = op.inputs[slot]
        if x.spec is None or k >= len(s.inputs) or (x.kind == "param" and op.type in LOOKUPS):
            continue
        total += s.inputs[k].slice_numel * x.spec.nbytes / max(x.spec.numel, 1)
    for j, lay in enumerate(s.outputs):
        spec = op.outputs[j] if j < len(op.outputs) else None
        if spec is not None:
            total += lay.slice_numel * spec.nbytes / max(spec.numel, 1)
    return total * (3.0 if needs_grad else 1.0)
