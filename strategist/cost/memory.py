"""Per-device memory a training step holds at its peak, per pipeline stage, as MindSpore 2.9's allocator holds it
(validated against its DryRun, ``strategist verify --memory``; docs/design/cost-model.md, "Memory").

What is held all step (the weights' slices, the optimizer's states, with gradient accumulation or a pipeline the
accumulated gradients) plus the largest of the step's moments, never their sum:

* the end of the forward: the activations every micro-batch in flight saved for its backward (what each operator's
  bprop reads; recompute drops what it recomputes), the loss's largest output, and with the parallel optimizer the
  gathered weights the backward reads again (a table read only by a Gather is freed after the forward);
* under full recompute, the backward's rebuilding of one layer beside the layers' inputs;
* the optimizer step: the gradients (the local ones and the AllReduce's output, which is not in place; with the
  parallel optimizer the whole gradients and their reduce-scattered shards) and the optimizer's fp32 temporaries of
  the largest parameter; with accumulation, the parameters updated in order, the peak while one is updated: its
  temporaries beside the scaled gradients of those after it (:func:`update_peak`);
* with accumulation, the clipping of the accumulated gradients' global norm (an fp32 copy of each).

MindSpore frees each activation once its backward has read it and each gathered weight after its gradient, so the
gradients never meet the forward's activations at the peak."""
from __future__ import annotations

import math

from ..memo import table
from ..vocab.graph import DTYPE_BYTES, OptimizerSharding
from .experts import expert_shares, expert_slice
from .optime import batch_free, cached_rule

#: operators whose backward reads none of their inputs (a sum, a view, a cast, a copy)
NOTHING_SAVED = frozenset({"Add", "AddExt", "Sub", "SubExt", "Neg", "Reshape", "Cast", "Transpose", "StridedSlice",
                           "Concat", "Split", "ExpandDims", "Squeeze", "Identity", "BroadcastTo", "Tile", "Flatten",
                           "Slice", "Load", "OneHot", "NotEqual", "Equal", "ReduceSum", "SumExt"})
#: element-wise activations MindFormers' selective recompute recomputes (its default select_recompute patterns
#: ``feed_forward\.mul``, ``feed_forward\.w1\.activation\.silu``: the MLP's activation and its gating product)
ACTIVATIONS = frozenset({"SiLU", "Silu", "GeLU", "FastGeLU", "Gelu", "Swish", "ReLU", "Sigmoid"})
RECOMPUTE = ("none", "selective", "full")
#: the optimizer's states, per parameter element: (description, bytes given the weight's element size, the fp32
#: temporaries of the largest parameter slice its step holds without accumulation -- MindSpore 2.9 DryRun, llama2_7b
#: width, dp=8: MindFormers' AdamW two, nn.AdamWeightDecay, computing its fp16 moments in fp32, four)
OPTIMIZERS = {
    "adamw": ("MindFormers' AdamW: two fp32 moments per parameter", lambda per: 8, 2),
    "adam-weight-decay": ("MindSpore's nn.AdamWeightDecay: two moments in the weights' dtype", lambda per: 2 * per, 4),
    "momentum": ("MindSpore's nn.Momentum: one accumulator in the weights' dtype", lambda per: per, 2),
}
#: the optimizer step's fp32 temporaries of the parameter slice being updated with accumulation, beside the scaled
#: copies of the accumulated gradients not yet updated (MindSpore 2.9 DryRun, MindFormers' AdamW: :func:`update_peak`)
ACCUMULATION_TEMPORARIES = 5
#: with gradient accumulation or a pipeline MindFormers' training cell (MFPipelineWithLossScaleCell, which its trainer
#: builds for both) keeps each gradient accumulated whole, the parallel optimizer not sharding it (DryRun, llama2_7b
#: width, 2 layers, dp=8: 1272 MiB of accu_grads with and without the parallel optimizer). MindSpore's own
#: ``_TrainGradAccuStepCell`` keeps beside them the zeros its clearing Assigns read, folded to constants (2544 MiB
#: there): strategist models MindFormers' cell, what its published runs train with.


def saved_inputs(op) -> tuple[int, ...]:
    """Input slots ``op``'s backward reads."""
    if op.type in NOTHING_SAVED:
        return ()
    if op.type == "Gather" or op.type == "GatherV2":
        return (1,)
    if op.type in ("RmsNorm", "LayerNorm"):
        return (0,)
    if op.type == "FlashAttentionScore":
        return (0, 1, 2)
    return tuple(i for i, x in enumerate(op.inputs) if x.kind in ("op", "input"))


def saved_outputs(op) -> tuple[int, ...]:
    """Output slots ``op``'s own backward reads (FlashAttentionScore's softmax max and sum)."""
    return (0, 1) if op.type == "FlashAttentionScore" and len(op.outputs) >= 2 else ()


NORMS = frozenset({"RmsNorm", "LayerNorm"})
VIEWS = frozenset({"Reshape", "ExpandDims", "Squeeze", "Flatten"})


def selective_ops(graph, layers=None) -> set[str]:
    """MindFormers' selective recompute: an activation inside a repeated layer and the product reading it
    (``layers``: only those layers; None: every one)."""
    act = {op.name for op in graph if op.layer and op.type in ACTIVATIONS and (layers is None or op.layer in layers)}
    gate = {op.name for op in graph if op.layer and op.type == "Mul" and (layers is None or op.layer in layers)
            and any(x.kind == "op" and x.ref in act for x in op.inputs)}
    return act | gate


def comm_recompute_ops(graph, layers) -> set[str]:
    """MindFormers' ``select_comm_recompute`` (its default pattern ``.*\\.norm``): the norms of ``layers``,
    recomputed with the communication after them."""
    return {op.name for op in graph if op.layer in layers and op.type in NORMS}


def _bytes(choice, j: int, spec) -> float:
    if spec is None or j >= len(choice.outputs) or choice.outputs[j] is None:
        return 0.0
    return choice.outputs[j].slice_numel * DTYPE_BYTES.get(spec.dtype, 4)


_ACTIVATIONS = table("memory: activations per plan and operator set", 1024)


def frozen(names):
    """``names`` as a frozenset (None as it is): a memo's key by content, its hash computed once per object."""
    return names if names is None or isinstance(names, frozenset) else frozenset(names)


def activation_bytes(plan, names: set[str], recompute: str, micro_batches: int,
                     drop: set | None = None, full_layers: frozenset | None = None) -> tuple[float, float, float, float]:
    """(activations saved at the end of one micro-batch's forward, what its forward holds beyond them at its fullest
    instant, activations held while full recompute rebuilds its largest layer: 0 without it, the part of the first
    no batch sizes: the weights' Casts) over operators ``names``; ``drop``: the operators
    recomputed selectively (their outputs not kept). Memoised per plan, operator set and dropped set (by content:
    a sweep's memory options read the same stages under each micro-batch count). ``full_layers``: with
    ``recompute`` "full", the layers recomputed fully (None: every one)."""
    key = (id(plan), frozen(names), recompute, frozen(drop), frozen(full_layers))
    hit = _ACTIVATIONS.get(key)
    if hit is None or hit[0] is not plan:
        hit = _ACTIVATIONS[key] = (plan, _activation_bytes(plan, names, recompute, drop, full_layers))
    kept, peaks, inputs, layers = hit[1]
    at = lambda z: _per_micro_batch(z, micro_batches)
    rebuild = at(inputs) + max((at(z) for z in layers), default=0.0) if recompute == "full" else 0.0
    return at(kept), max(at(z) for z in peaks) - at(kept), rebuild, kept.imag


def shared_bytes(plan, names: set[str]) -> float:
    """The bytes of the tensors no batch sizes (:func:`~.optime.batch_free`: the weights' Casts to the compute dtype)
    that operators ``names`` make, views left out: a pipeline's micro-batches share one of each, made once a step and
    kept (MindSpore 2.9 DryRun's memory tracker, Yi-34B's width on tp=4 and pp=4 at 4 micro-batches: one Cast of each
    weight live at the first stage's fullest instant, beside the four micro-batches' activations). Memoised with the
    plan's stages."""
    key = (id(plan), frozen(names), "shared")
    hit = _ACTIVATIONS.get(key)
    if hit is None or hit[0] is not plan:
        g, ch, times = plan.graph, plan.choices, _whole_times(plan)
        total = sum(_bytes(ch[op.name], j, spec) * times[op.name].imag for op in stage_ops(g, names)
                    if op.name in times and op.type not in VIEWS for j, spec in enumerate(op.outputs))
        hit = _ACTIVATIONS[key] = (plan, total)
    return hit[1]


def casts_shared(g) -> bool:
    """Whether a pipeline's micro-batches share one Cast of each weight (:func:`shared_bytes`): where the network is
    inlined, MindSpore merges the micro-batches' identical Casts of a Parameter into one, which its
    ``SetCastForParamNotRecompute`` also keeps through a full recompute. A ``@lazy_inline`` network (MindFormers'
    GPTModel and LlamaForCausalLM, whose trainer keeps it lazy wherever a step runs several micro-batches) is one
    func graph called per micro-batch, its weights that graph's formal parameters: each call makes its own Casts,
    held until that micro-batch's backward, and a full recompute makes them again (MindSpore 2.9 DryRun's memory
    tracker, MindFormers' Qwen3-MoE on pp=2 with four micro-batches: a copy of every expert and dense weight's Cast
    per micro-batch in flight; with full recompute each made again in its layer's recompute, none held between,
    where the same network inlined holds each from the forward to the backward; llama2_7b's width, fp32 weights, dp=8,
    full recompute: the four layers' Casts, 1544 MiB, held through the backward)."""
    return not g.lazy_inline_cells


def _per_micro_batch(z: complex, m: int) -> float:
    """One micro-batch's bytes of ``z``: its real part the batch's tensors, split among the ``m`` micro-batches; its
    imaginary part the tensors no batch sizes (a weight's Cast), whole in every micro-batch."""
    return z.real / m + z.imag


def _whole_times(plan) -> dict[str, complex]:
    """``{operator: factor}`` of its outputs' bytes: ``1j`` for a tensor no batch sizes (counted apart, whole in
    every micro-batch: :func:`_per_micro_batch`), of the device's experts alone where it carries expert weights
    (:func:`~.experts.expert_shares`)."""
    shares = expert_shares(plan)
    return {n: 1j / shares.get(n, 1) for n in batch_free(plan.graph)}


_STAGE_OPS = table("memory: a stage's operators in the graph's order", 256)


def stage_ops(g, names: set[str]) -> list:
    """The operators of ``g`` named in ``names``, in the graph's order (memoised per graph and name set: every
    memory option of a sweep walks the same stages)."""
    key = (id(g), frozen(names))
    hit = _STAGE_OPS.get(key)
    if hit is None or hit[0] is not g:
        hit = _STAGE_OPS[key] = (g, [op for op in g if op.name in names])
    return hit[1]


_MOVES = table("memory: each redistributed input's peaks per plan", 64)


def _moves(plan) -> dict:
    """``{(consumer, slot): (edge, bytes beside its source, bytes once the source may go, its copy's bytes)}`` of
    ``plan``'s redistributed inputs (:func:`redistribution_peak`), per plan."""
    hit = _MOVES.get(id(plan))
    if hit is None or hit[0] is not plan:
        alltoall = plan.graph.enable_alltoall
        hit = _MOVES[id(plan)] = (plan, {
            (e.dst, e.in_slot): (e, *redistribution_peak(e, alltoall),
                                 e.dst_layout.slice_numel * DTYPE_BYTES.get(e.dtype, 4))
            for e in (plan.edges or ()) if e.forward.ops})
    return hit[1]


def _saved(plan, names: set[str], drop: set, times: dict) -> tuple[dict, dict]:
    """({(producer, j): bytes} saved for the backward, {(producer, j): (its layer, its reader's layer)}) over
    operators ``names``, for the whole batch (complex, ``times``: :func:`_whole_times`)."""
    g, ch = plan.graph, plan.choices
    saved: dict = {}
    layer_of: dict = {}
    for op in stage_ops(g, names):
        for j in saved_outputs(op):
            if op.name not in drop:
                saved[(op.name, j)] = _bytes(ch[op.name], j, op.outputs[j]) * times.get(op.name, 1)
                layer_of[(op.name, j)] = (op.layer, op.layer)
        for slot in saved_inputs(op):
            x = op.inputs[slot] if slot < len(op.inputs) else None
            if x is None or x.kind != "op" or x.ref in drop or x.ref not in ch:
                continue
            spec = g.op(x.ref).outputs[x.index or 0] if x.index is not None else None
            key = (x.ref, x.index or 0)
            if key not in saved:
                saved[key] = _bytes(ch[x.ref], x.index or 0, spec) * times.get(x.ref, 1)
                layer_of[key] = (g.op(x.ref).layer, op.layer)
    return saved, layer_of


def _activation_bytes(plan, names: set[str], recompute: str, drop: set | None,
                      full_layers: frozenset | None = None) -> tuple[complex, tuple, complex, tuple]:
    """:func:`activation_bytes` for the whole batch, each figure complex (:func:`_per_micro_batch`): (saved at the
    end of the forward, the forward's candidate peaks, with full recompute the layers' inputs kept and each
    layer's rebuilt activations)."""
    g = plan.graph
    drop = set(drop if drop is not None else selective_ops(g) if recompute == "selective" else ())
    for op in g:
        # a view of a recomputed tensor is recomputed with it (MindFormers' fine-grained configs list the
        # Reshapes beside the operators for this reason)
        if op.type in VIEWS and any(x.kind == "op" and x.ref in drop for x in op.inputs):
            drop.add(op.name)
    times = _whole_times(plan)
    saved, layer_of = _saved(plan, names, drop, times)
    per_layer: dict = {}
    inputs = 0j
    if recompute == "full":
        for key, b in list(saved.items()):
            mine, reader = layer_of[key]
            if full_layers is not None and reader not in full_layers:
                continue                                                # a layer that keeps its activations
            if reader and mine == reader:
                per_layer[reader] = per_layer.get(reader, 0j) + b       # recomputed inside the layer
                del saved[key]
            elif reader:
                inputs += b                                             # a layer's input, kept
    # the backward rebuilds one layer at a time, after the head's and the loss's backward have freed theirs
    return sum(saved.values(), 0j), _forward_peak(plan, names, saved, times), inputs, _frontier(per_layer.values())


def _frontier(values) -> tuple[complex, ...]:
    """The complex byte counts some micro-batch count makes the largest (:func:`_per_micro_batch`): none that another
    exceeds in both parts."""
    out: list[complex] = []
    for z in sorted(values, key=lambda z: (-z.real, -z.imag)):
        if not out or z.imag > max(w.imag for w in out):
            out.append(z)
    return tuple(out)


def redistribution_peak(edge, alltoall: bool = False) -> tuple[float, float]:
    """(the bytes a redistribution holds at once beside its source, the bytes it holds once its source may be
    freed), per device. Each step's output; an AllGather along another dim than the first is MindSpore's AllGather
    along the first, then a Split of the gathered tensor into the pieces a Concat joins: the gathered tensor beside
    the source, then the gathered tensor and its pieces (DryRun, llama2_7b's logits gathered over tp=4 for the loss:
    2000 MiB gathered beside 4 x 500 MiB pieces, the source freed). An all-to-all is such an AllGather, Split and
    Concat too unless MindSpore's ``enable_alltoall`` (``alltoall``) sends it as one AllToAll."""
    per = DTYPE_BYTES.get(edge.dtype, 4)
    first = later = 0.0
    for step in edge.forward.ops:
        s = step.slice_numel * per
        if step.kind == "AllGather" or (step.kind == "AllToAll" and not alltoall):
            first = max(first, step.n * s)
            if step.kind == "AllToAll" or step.dim != 0:
                later = max(later, 2 * step.n * s)
        elif step.kind == "AllToAll":
            first = max(first, 2 * s)
        elif step.kind == "Split":
            first = max(first, s / step.n)
        else:
            first = max(first, s)
    return first, later


def _forward_peak(plan, names: set[str], saved: dict, times_of: dict) -> tuple[complex, ...]:
    """The most the forward over operators ``names`` holds at once, as MindSpore's allocator frees: walking the
    operators in order, every tensor lives from its operator to its last reader (a redistribution reading it for its
    consumer frees it there) and, saved for the backward, to the end of the forward; a redistributed input lives
    from its redistribution to its consumer (to the end when the consumer saves it), beside the redistribution's own
    steps while it runs; an operator's outputs are allocated beside its inputs. The instants that can be the
    fullest, complex (:func:`_per_micro_batch`)."""
    g, ch = plan.graph, plan.choices
    ops = stage_ops(g, names)
    moved = _moves(plan)
    saving = {(x.ref, x.index or 0, op.name) for op in ops for slot in saved_inputs(op)
              if slot < len(op.inputs) and (x := op.inputs[slot]).kind in ("op", "input")}
    # the tensors every reader saving them reads through a redistribution: each saves its own copy, counted there
    moved_pairs = {(m[0].src, m[0].dst) for m in moved.values()}
    copied: dict = {}
    for p, j, r in saving:
        copied[(p, j)] = copied.get((p, j), True) and (p, r) in moved_pairs
    reads: dict = {}
    for op in ops:
        for x in op.inputs:
            if x.kind == "op":
                reads[(x.ref, x.index or 0)] = reads.get((x.ref, x.index or 0), 0) + 1
    # a collective redistributing a tensor its consumer alone reads is launched once the tensor is made: its output
    # lives from there to the consumer, the operators between running beside it (_launched)
    launched = _launched(ops, moved, reads)
    flying: dict = {}
    live: dict = {}
    live_bytes = held = 0j
    peaks: list[complex] = []

    def read(key):
        nonlocal live_bytes
        reads[key] -= 1
        if reads[key] == 0 and key in live:
            live_bytes -= live.pop(key)

    for op in ops:
        copies = kept = 0j
        direct = []
        # the inputs a launched collective brings last: the compute stream waits for it only there
        for slot in sorted(range(len(op.inputs)), key=lambda k: (op.name, k) in flying):
            x = op.inputs[slot]
            if x.kind not in ("op", "input"):
                continue
            key = (x.ref, x.index or 0)
            live_bytes -= flying.pop((op.name, slot), 0j)       # counted in its steps below
            m = moved.get((op.name, slot))
            if m is None:
                if x.kind == "op":
                    direct.append(key)
                continue
            # a redistributed input: its steps beside the source, the source freed after its last read (a net input
            # lives all step), its copy kept to the end of the forward where the consumer's backward reads it
            _e, first, later, b = m
            times = times_of.get(x.ref, 1) if x.kind == "op" else 1
            first, later, b = first * times, later * times, b * times
            peaks.append(held + live_bytes + copies + first)
            if x.kind == "op":
                read(key)
            peaks.append(held + live_bytes + copies + later)
            copies += b
            if (x.ref, x.index or 0, op.name) in saving and (key in saved or x.kind == "input"):
                kept += b
        out = [_bytes(ch[op.name], j, spec) * times_of.get(op.name, 1) for j, spec in enumerate(op.outputs)]
        peaks.append(held + live_bytes + copies + sum(out))
        for key in direct:
            read(key)
        held += kept
        for j, b in enumerate(out):
            key = (op.name, j)
            if key in saved and not copied.get(key, False):
                held += saved[key]
            elif reads.get(key):
                live[key] = b
                live_bytes += b
            for dst in launched.get(key, ()):
                flying[dst] = moved[dst][1] * times_of.get(op.name, 1)
                live_bytes += flying[dst]
    return _frontier(peaks + [held])


COLLECTIVE_STEPS = frozenset({"AllGather", "AllToAll", "AllReduce", "ReduceScatter"})


def _launched(ops: list, moved: dict, reads: dict) -> dict:
    """``{(producer, j): [(consumer, slot)]}``: the redistributions starting with a collective of a tensor its one
    reader reads after other operators. MindSpore launches the collective on its communication stream once the
    tensor is made, and its compute stream waits for it only at the reader: the collective's output is held, beside
    its source, while the operators between run (DryRun memory tracker, llama2_7b's loss on dp=2,tp=4: the head's
    logits gathered for the loss, 2000 MiB, live beside their 500 MiB source while the labels' 4000 MiB OneHot and its
    2000 MiB slice are made)."""
    at = {op.name: k for k, op in enumerate(ops)}
    out: dict = {}
    for (dst, slot), m in moved.items():
        e = m[0]
        if e.src not in at or dst not in at or at[dst] - at[e.src] < 2 or e.forward.ops[0].kind not in COLLECTIVE_STEPS:
            continue
        x = ops[at[dst]].inputs[slot]
        key = (x.ref, x.index or 0)
        if x.kind == "op" and reads.get(key) == 1:
            out.setdefault(key, []).append((dst, slot))
    return out


_SLICES = table("memory: parameter slices per plan and operator set", 32)


def param_slices(plan, names: set[str]) -> dict[str, tuple]:
    """Parameter -> its slice shape, for the Parameters operators ``names`` read (memoised per plan and operator
    set: every memory option of a sweep reads the same stages). The result is shared: do not change it."""
    key = (id(plan), frozen(names))
    hit = _SLICES.get(key)
    if hit is not None and hit[0] is plan:
        return hit[1]
    out = _SLICES[key] = (plan, _param_slices(plan, names))
    return out[1]


def _param_slices(plan, names: set[str]) -> dict[str, tuple]:
    seen: dict[str, tuple] = {}
    for op in stage_ops(plan.graph, names):
        ch = plan.choices[op.name]
        if ch.sharding is None:
            continue
        for k, slot in enumerate(cached_rule(op).slots):
            x = op.inputs[slot]
            if x.kind == "param" and x.ref not in seen and k < len(ch.inputs):
                seen[x.ref] = expert_slice(plan, x.ref, ch.inputs[k].slice_shape)
    return seen


def stage_memory(plan, names: set[str], *, devices: int, recompute: str, optimizer_parallel: bool,
                 micro_batches: int, in_flight: int, profile, drop: set | None = None, accumulate: bool = False,
                 optimizer: str = "adamw", full_layers: frozenset | None = None, swap: bool = False,
                 max_device_memory: float | None = None, pipeline: bool = False) -> dict:
    """The peak bytes one device of the stage holding operators ``names`` keeps, how they divide at that peak, and
    what is assumed. ``accumulate``: the step accumulates gradients over micro-batches (gradient accumulation, or a
    pipeline); ``optimizer``: a key of :data:`OPTIMIZERS`; ``swap``: the optimizer's states kept on the host
    (MindFormers' AdamW ``swap``), on the device only the largest weight's, while its update runs;
    ``max_device_memory``: the GB (2**30 bytes) MindSpore's pool may take (None: the profile's memory less its
    reserve); ``pipeline``: the stage is one of a pipeline's, whose micro-batches share the weights' Casts where the
    network is inlined (:func:`casts_shared`)."""
    # size: the step's memory moments, each a sum of the same per-parameter figures gathered in one pass
    g = plan.graph
    zero = getattr(g, "optimizer_sharding", None)
    if optimizer_parallel and zero is None:
        zero = OptimizerSharding()
    if not optimizer_parallel:
        zero = None
    describe, state_bytes, temporaries_of = OPTIMIZERS[optimizer]
    key = (id(plan), frozen(names), devices, zero is not None, accumulate, optimizer)
    hit = _PARAMS.get(key)
    if hit is None or hit[0] is not plan:
        figures = _param_bytes(plan, names, devices, zero, accumulate, state_bytes)
        # the update's peak read off the parameters' order once per entry, not per option set a sweep prices
        hit = _PARAMS[key] = (plan, figures, update_peak(figures[-1], optimizer))
    params, gathered, grads, shards, shard_elements, opt, largest, _order = hit[1]
    act, transient, rebuild, whole = activation_bytes(plan, names, recompute, micro_batches, drop, full_layers)
    # a pipeline's micro-batches in flight share one Cast of each weight (shared_bytes), and a full recompute keeps
    # them, unless the network is lazy inlined (casts_shared); a micro-batch of gradient accumulation makes its own
    shared = casts_shared(g) and (pipeline or recompute == "full")
    once = shared_bytes(plan, names) if shared else 0.0
    per_micro = act - whole if shared else act
    # swapped: the states on the host, the largest weight's (its fp32 shard's elements' share) brought in for its update
    on_host = opt if swap else 0.0
    brought = opt * (largest / 4) / shard_elements if swap and shard_elements else 0.0
    held_states = 0.0 if swap else opt
    persistent = params + held_states
    accumulated = 0.0
    if accumulate:
        accumulated = grads
        persistent += accumulated
    forward_end = {"activations": per_micro * in_flight + once, "transient": transient, "gathered_weights": gathered}
    rebuilding = {"activations": per_micro * (in_flight - 1) + rebuild + once,
                  "transient": 0.0, "gathered_weights": gathered} if recompute == "full" else None
    if accumulate:
        step_grads, temporaries = hit[2]
    elif zero is not None:
        step_grads, temporaries = grads + shards, temporaries_of * largest
    else:
        # the local gradients beside their all-reduced copies as the update starts; then the Parameters updated in
        # order, the reduced gradients not yet updated beside the temporaries (update_peak): the larger (DryRun
        # memory tracker, llama2_7b's width on dp=8: fp16 weights peak at the first, 3544 MiB of gradients and
        # temporaries; fp32 weights in the update, 2044 MiB of reduced gradients beside 4588 MiB of temporaries)
        step_grads, temporaries = max((2 * grads, temporaries_of * largest), hit[2], key=sum)
    optimizer_step = {"gradients": step_grads, "optimizer_temporaries": temporaries + brought}
    moments = [("end of the forward", forward_end), ("optimizer step", optimizer_step)]
    if accumulate:
        # MindFormers' training cell clips the accumulated gradients' global norm first: an fp32 copy of every
        # gradient (shard) it reads is kept until the clip applies the norm, beside an fp32 temporary of the largest
        # (DryRun: 2544 + 500 MiB for 1272 MiB of fp16 gradients, 2 layers at llama2_7b's width)
        moments.append(("gradient clipping", {"gradients": 4 * shard_elements, "optimizer_temporaries": largest}))
    if rebuilding is not None:
        moments.insert(1, ("full recompute's rebuilding of a layer", rebuilding))
    peak_at, held = max(moments, key=lambda m: sum(m[1].values()))
    total = persistent + sum(held.values())
    cap = profile.memory_GB - profile.memory_reserved_GB if max_device_memory is None else \
        min(profile.memory_GB, max_device_memory * 2**30)
    parts = {"activations": 0.0, "transient": 0.0, "gathered_weights": 0.0, "gradients": 0.0,
             "optimizer_temporaries": 0.0, **held}
    return {"parameters": params, "optimizer_states": held_states, "optimizer_states_on_host": on_host,
            "accumulated_gradients": accumulated,
            **parts, "activations_per_micro_batch": act,
            "peak_at": peak_at, "moments": {name: sum(m.values()) + persistent for name, m in moments},
            "total": total, "capacity": cap, "margin": cap - total, "device_memory": profile.memory_GB,
            "max_device_memory_GB": max_device_memory, "fits": total <= cap,
            "assumed": {"recompute": recompute, "optimizer_parallel": bool(zero is not None),
                        "optimizer_level": zero.level if zero is not None else None,
                        "micro_batches_in_flight": in_flight, "optimizer": describe, "optimizer_key": optimizer,
                        "capacity": f"max_device_memory {max_device_memory:g} GB" if max_device_memory is not None
                                    else "the profile's device memory less its reserve",
                        "optimizer_swap": "its states on the host (optimizer.swap); the largest weight's on the "
                                          "device during its update, with the optimizer's temporaries (MindSpore "
                                          "2.9's DryRun keeps them in its device pool instead: not confirmed)"
                                          if swap else None,
                        "peak": f"held all step plus the largest moment ({peak_at})",
                        "gradients": "at the optimizer step: "
                                     + ("the scaled copies of the accumulated gradients not yet updated" if accumulate else
                                        "the whole gradients and their reduce-scattered shards" if zero is not None
                                        else "the local gradients and the AllReduce's output"),
                        "gathered_weights": "optimizer-parallel AllGather outputs kept until each weight's gradient "
                                            "(a table read only by a Gather freed after the forward)"
                                            if zero is not None else None,
                        "activations": "what each operator's backward reads, per micro-batch in flight"
                                       + (("; the weights' Casts once, shared by the pipeline's micro-batches"
                                           if pipeline else "; the weights' Casts kept through the recompute")
                                          if shared else "")
                                       + {"none": "", "selective": "; the MLP activation and its product "
                                          "recomputed", "full": "; each layer's input kept, one layer rebuilt at "
                                          "a time in the backward"}[recompute]
                                       + (f" ({len(full_layers & _layers_of(plan, names))} of the stage's layers "
                                          f"recomputed fully, the rest keeping theirs)"
                                          if recompute == "full" and full_layers is not None else "")
                                       + ("; norms recomputed with their communication (select_comm_recompute)"
                                          if drop and any(plan.graph.op(n).type in NORMS for n in drop) else "")}}


_PARAMS = table("memory: the parameters' bytes per plan, operator set and optimizer options", 256)


def _param_bytes(plan, names: set[str], devices: int, zero, accumulate: bool, state_bytes) -> tuple:
    """(the weights' slices, the gathered weights kept, the gradients, their shards and their shards' elements, the
    optimizer's states, the largest fp32 shard) of the Parameters operators ``names`` read, in bytes."""
    g = plan.graph
    reread = _reread_params(plan, names)
    cast_only = _cast_only_params(plan, names)
    params = gathered = grads = shards = shard_elements = opt = largest = 0.0
    order = []          # per trainable Parameter in the optimizer's order: (its gradient, its fp32 shard, its dtype's)
    for name, shape in param_slices(plan, names).items():
        p = g.params.get(name)
        if p is None:
            continue
        n = math.prod(shape)
        per = DTYPE_BYTES.get(p.spec.dtype, 4)
        w = 1
        if zero is not None and p.requires_grad and shape:
            w = zero.ways(devices * n // max(p.spec.numel, 1), shape[0], n * per)
        params += n * per / w
        if w > 1 and (name in reread or (accumulate and name not in cast_only)):
            # the AllGather's output, kept until the weight's gradient is made; accumulating, every one is gathered
            # once for all the micro-batches and kept -- but a weight read only by its Cast, whose output each
            # micro-batch keeps (DryRun, llama2_7b width, 2 layers, dp=8, bf16 compute of fp16 weights, the parallel
            # optimizer, accumulation 2: the peak 1020 MiB under keeping both, the size of the gathered fp16 weights)
            gathered += n * per
        if p.requires_grad:
            grads += n * per
            shards += n * per / w
            shard_elements += n / w
            opt += n * state_bytes(per) / w
            largest = max(largest, n * 4 / w)
            order.append((n * per, n * 4 / w, per))
    return params, gathered, grads, shards, shard_elements, opt, largest, tuple(order)


def update_peak(order, optimizer: str) -> tuple[float, float]:
    """(the gradients, the optimizer's temporaries) a step holds at the peak of its optimizer update, from ``order`` --
    per trainable Parameter in the optimizer's order (the network's ``trainable_params``): (its accumulated (or
    all-reduced) gradient's bytes, its fp32 shard's, its element size). The Parameters are updated one after another:
    while Parameter ``i`` is, the scaled gradients of those after it wait beside its :data:`ACCUMULATION_TEMPORARIES`
    fp32 temporaries, and under MindFormers' AdamW each float32 weight after it has its first temporary made already
    (its ``beta1 * m`` reads the moment alone). MindSpore 2.9 DryRun's memory tracker (``MS_ALLOC_CONF=
    memory_tracker:True``), llama2_7b width: the peak's blocks to the MiB at dp=8 with 2 micro-batches and at the
    first and the last stage of pp=4 with 8 (fp32 weights), at dp=8 and pp=2's first stage (fp16 weights)."""
    upfront = optimizer == "adamw"
    best = (0.0, 0.0)
    after_grads = after_first = 0.0
    for g, s, per in reversed(order):
        here = (after_grads, after_first + ACCUMULATION_TEMPORARIES * s)
        if sum(here) > sum(best):
            best = here
        after_grads += g
        after_first += s if upfront and per == 4 else 0.0
    return best


def _layers_of(plan, names: set[str]) -> set[str]:
    return {plan.graph.op(n).layer for n in names if plan.graph.op(n).layer}


def _cast_only_params(plan, names: set[str]) -> set[str]:
    """The Parameters operators ``names`` read through a Cast alone (MindFormers' weights kept in another dtype than
    the compute's)."""
    readers: dict[str, set] = {}
    for op in stage_ops(plan.graph, names):
        for x in op.inputs:
            if x.kind == "param":
                readers.setdefault(x.ref, set()).add(op.type)
    return {p for p, types in readers.items() if types == {"Cast"}}


def _reread_params(plan, names: set[str]) -> set[str]:
    """The Parameters an operator of ``names`` reads again in its backward: every one it reads, but a table read only
    by a Gather (whose backward reads the indices) and a weight read only by a Cast (MindFormers' float32 weights
    read in fp16 or bf16: the backward reads the Cast's output, an activation, and the gathered float32 weight is
    freed once cast -- DryRun, llama2_7b width, dp=8, parallel optimizer: the same peak as fp16 weights)."""
    return {x.ref for op in stage_ops(plan.graph, names) if op.type not in ("Gather", "GatherV2")
            and op.type not in NOTHING_SAVED for x in op.inputs if x.kind == "param"}
