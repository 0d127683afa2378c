"""The step estimate of a priced :class:`~strategist.engine.plan.Plan`: per-operator times
(:mod:`.optime`) scheduled on one device's streams (:mod:`.schedule`) for every micro-batch, the pipeline's
1F1B schedule over its stages (:mod:`.pipeline`), the optimizer step, and the memory each stage keeps
(:mod:`.memory`). :func:`estimate` is memoised per plan; the advisor's trials call it through
``Plan.totals()``."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from .attention import load_balance
from .experts import dispatch_bytes, ep_group_intra, expert_chain, expert_shares, expert_ways
from .memory import OPTIMIZERS, RECOMPUTE, comm_recompute_ops, selective_ops, stage_memory
from ..engine.search.structure import per_graph
from ..memo import ByIdentity, table
from ..vocab.graph import DTYPE_BYTES
from .optime import (
    Comm,
    OpTime,
    batch_free,
    cached_rule,
    comms_of_steps,
    needs_grad,
    op_time,
    redistribution_comms,
    whole_input_bytes,
)
from .pipeline import in_flight, one_f_one_b, p2p_intra, stage_of_ops
from .profile import step_profile
from .schedule import Item, Overlap, added, not_overlapped, scaled, simulate, stage_signature, summarize


def optimizer_bytes(per: int) -> int:
    """Bytes Adam's update moves per parameter element of ``per`` bytes: the weight read and written, its gradient
    (in the weight's dtype) read twice (the global-norm clip, then the update), two fp32 moments read and written
    (24 for a 16-bit weight, 32 for a float32 one)."""
    return 4 * per + 16


#: gradient accumulation's add per micro-batch, in passes over the gradients' bytes: the micro-batch's gradient and
#: the accumulated sum read, the sum written
ACCUMULATE_PASSES = 3


@dataclass(frozen=True)
class StepOptions:
    """What the run sets beside the plan: pipeline stages (``pp``, MindSpore ``pipeline_stages``), the
    micro-batches a step's batch is split into (``micro_batches``: the pipeline's, or gradient accumulation
    without one), ``recompute`` (none | selective | full), ``optimizer_parallel`` (None: as the model's
    config says), profile figure overrides."""

    pp: int = 1
    micro_batches: int = 1
    recompute: str = "none"
    optimizer_parallel: bool | None = None
    overrides: tuple = ()
    #: MindFormers' ``model_config.offset``: per stage, the layers beyond ``layers // (pp pp_interleave)`` (one row,
    #: or one row per model chunk), summing to the remainder (:func:`~.pipeline.stage_sizes`); () an even split
    offset: tuple = ()
    interleave: int = 1
    #: model chunks per pipeline stage (interleaved 1F1B: MindSpore pipeline_interleave, MindFormers
    #: pp_interleave_num)
    pp_interleave: int = 1
    #: per stage, how many of its first layers the selective recompute takes (MindFormers' select_recompute
    #: list, e.g. (8, 4, 4, 1, 1, 1, 1, 1)); () every layer
    select_layers: tuple = ()
    #: per stage, how many of its first layers recompute fully (MindFormers' ``recompute: [4, 0]``; the others as
    #: ``recompute`` says, but "full"); () every layer when ``recompute`` is "full"
    recompute_layers: tuple = ()
    #: per stage, how many of its first layers recompute their norms and the communication after them
    #: (MindFormers' select_comm_recompute); () none
    comm_recompute_layers: tuple = ()
    #: MindSpore's ``parallel_speed_up_json`` ``grad_computation_allreduce_overlap`` (the data-parallel gradient
    #: reductions beside the backward) and ``computation_allgather_overlap`` (the parallel optimizer's AllGathers
    #: beside the forward); MindSpore's default is neither (:class:`~.schedule.Overlap`)
    grad_comm_overlap: bool = False
    allgather_overlap: bool = False
    #: MindSpore's ``parallel_speed_up_json`` ``enable_flash_attention_load_balance``: a FlashAttentionScore whose
    #: query sequence is split (context parallelism) balances the causal work over the devices (:mod:`.attention`);
    #: MindSpore's default is off
    fa_load_balance: bool = False
    #: what the graph's batch is: "step", the step's whole batch, split into ``micro_batches`` (each operator's work
    #: divided among them); "micro", one micro-batch's -- the layers' shapes as MindSpore compiles them under a
    #: pipeline or gradient accumulation -- run ``micro_batches`` times
    graph_batch: str = "step"
    #: the advisor's choices (minimality, rule-3 boundaries, "configure nothing") by this schedule's step rather
    #: than the serial sum (Plan.totals()' step_seconds)
    choose_by_schedule: bool = True
    #: the optimizer whose states the memory holds (:data:`~.memory.OPTIMIZERS`: adamw, MindFormers' AdamW with
    #: fp32 moments; adam-weight-decay, MindSpore's nn.AdamWeightDecay; momentum); None: as the model's config says
    #: (a MindFormers config's ``optimizer.type``), else adamw
    optimizer: str | None = None
    #: MindFormers' AdamW ``swap`` (the config's ``optimizer.swap``): its moments are Parameters on the host
    #: (``device='CPU'``), not on the device; each weight's are on the device only while its update runs
    optimizer_swap: bool = False
    #: MindSpore's ``max_device_memory`` (a MindFormers config's ``context.max_device_memory``): the GB (of 2**30
    #: bytes, as MindSpore counts them) its memory pool may take on a device, what a step must fit in; None: the
    #: profile's device memory less what it reserves
    max_device_memory: float | None = None
    #: per setting, (name, value as shown, where it came from: "command line", "config KEY", "default"); what the
    #: report says of the run (:func:`strategist.run_settings.resolve_run`); not part of the options' identity
    origins: tuple = field(default=(), compare=False, hash=False)

    @property
    def split_by(self) -> int:
        """What the graph's work is divided by for one micro-batch: ``micro_batches``, or 1 where the graph holds
        one micro-batch (``graph_batch`` "micro")."""
        return self.micro_batches if self.graph_batch == "step" else 1

    @property
    def repeats(self) -> int:
        """How many times a step runs the graph's batch: ``micro_batches`` where it holds one micro-batch, else 1."""
        return self.micro_batches // self.split_by

    def check(self) -> StepOptions:
        from ..errors import InputSpecError
        if self.graph_batch not in ("step", "micro"):
            raise InputSpecError(f"bad graph_batch {self.graph_batch!r}: step or micro")
        if self.optimizer is not None and self.optimizer not in OPTIMIZERS:
            raise InputSpecError(f"bad --optimizer {self.optimizer!r}: write one of {', '.join(OPTIMIZERS)}")
        if self.recompute not in RECOMPUTE:
            raise InputSpecError(f"bad --recompute {self.recompute!r}: write none, selective or full")
        for name, v in (("select_layers", self.select_layers), ("comm_recompute_layers", self.comm_recompute_layers),
                        ("recompute_layers", self.recompute_layers)):
            if v and (len(v) != self.pp or any(not isinstance(n, int) or n < 0 for n in v)):
                raise InputSpecError(f"bad {name} {list(v)}: give one layer count >= 0 per pipeline stage "
                                     f"({self.pp})")
        if self.offset:
            from .pipeline import normal_offset
            if self.pp < 2:
                raise InputSpecError(f"an offset ({list(self.offset)}) places layers on pipeline stages: give a pp "
                                     f"axis in --mesh, or drop it")
            rows = normal_offset(self.offset, self.pp, self.pp_interleave)
            flat = all(isinstance(x, int) for x in self.offset)
            written = tuple(self.offset) if flat else rows      # hashable, as MindFormers sums it
            if written != self.offset:
                return replace(self, offset=written).check()
        if not isinstance(self.interleave, int) or self.interleave not in (1, 2, 4, 8):
            raise InputSpecError(f"bad interleave {self.interleave!r}: MindFormers' fine_grain_interleave is 1, 2, 4 or 8")
        if not isinstance(self.pp_interleave, int) or self.pp_interleave < 1:
            raise InputSpecError(f"bad --pp-interleave {self.pp_interleave!r}: give a whole number >= 1")
        if self.pp_interleave > 1 and (self.pp < 2 or self.micro_batches % self.pp):
            raise InputSpecError(f"--pp-interleave {self.pp_interleave} needs pp >= 2 and micro-batches a multiple "
                                 f"of pp (MindSpore's interleaved pipeline); got pp={self.pp}, "
                                 f"{self.micro_batches} micro-batches")
        if not isinstance(self.micro_batches, int) or self.micro_batches < 1:
            raise InputSpecError(f"bad --micro-batches {self.micro_batches!r}: give a whole number >= 1")
        if self.pp > 1 and self.micro_batches < self.pp:
            raise InputSpecError(f"--micro-batches {self.micro_batches} is fewer than pp={self.pp} stages: "
                                 f"MindSpore needs micro_batch_num >= pipeline_stages; give at least {self.pp}")
        return self


def stage_options(opts: StepOptions) -> StepOptions:
    """``opts`` for a graph of a few of the model's layers priced as one pipeline stage (the advice on repeated
    layers): no pipeline, and each per-stage setting the first stage's."""
    def first(v):
        return v[:1] if v else v
    return replace(opts, pp=1, offset=(), pp_interleave=1, recompute_layers=first(opts.recompute_layers),
                   select_layers=first(opts.select_layers),
                   comm_recompute_layers=first(opts.comm_recompute_layers)).check()


def _plain(v):
    return [_plain(x) for x in v] if isinstance(v, tuple) else v


def options_of(plan) -> StepOptions:
    return plan.graph.step_options or StepOptions()


_PROFILES = table("step model: profile per hardware and overrides", 64)
_COMMS = table("step model: collectives per redistribution", 1 << 16)


def step_profile_of(hw, overrides: tuple):
    key = (id(hw), overrides)
    hit = _PROFILES.get(key)
    if hit is None or hit[0] is not hw:
        hit = _PROFILES[key] = (hw, step_profile(hw, {k: v for k, v in overrides}))
    return hit[1]


def _redist(r, dtype, prof, a2a):
    if r is None:
        return ()
    key = (id(r), dtype, id(prof), a2a)
    hit = _COMMS.get(key)
    if hit is None or hit[0] is not r:
        hit = _COMMS[key] = (r, tuple(redistribution_comms(r, dtype, prof, a2a)))
    return hit[1]


def _scale(comms, m: int, prof) -> float:
    """Seconds of ``comms`` for one micro-batch's share of their bytes."""
    return sum(prof.collective_seconds(c.kind, c.n, c.nbytes / m, c.intra) for c in comms)


_GRAPHS = table("step model: facts per graph", 256)


def _graph_facts(g) -> tuple[dict, dict]:
    """(operators a gradient flows through, each operator's layer), per graph."""
    hit = _GRAPHS.get(id(g))
    if hit is None or hit[0] is not g:
        hit = _GRAPHS[id(g)] = (g, needs_grad(g), {op.name: op.layer for op in g})
    return hit[1], hit[2]


_BASES = table("step model: base rows per plan", 8)


def _base_rows(plan, prof, m: int, balance: bool = False) -> list[tuple]:
    """Per operator, what its schedule item takes whatever the memory options: (operator, choice, its times,
    its inputs' dependencies with their redistribution seconds, its own collectives by phase and their seconds
    for one micro-batch). ``balance``: FlashAttention's load balance (:mod:`.attention`). Memoised for the last
    few (plan, profile, micro-batch count, balance): a sweep prices one plan under many options."""
    key = (id(plan), id(prof), m, balance)
    hit = _BASES.get(key)
    if hit is not None and hit[0] is plan and hit[1] is prof:
        return hit[2]
    g = plan.graph
    grad, _layer_of = _graph_facts(g)
    free = batch_free(g)        # a weight's Cast: whole in every micro-batch, and what it hands on
    shares = expert_shares(plan)    # ... of the device's experts alone
    a2a = bool(getattr(g, "enable_alltoall", False))
    edge_of: dict = {}
    for e in plan.edges:
        fwd = _redist(e.forward, e.dtype, prof, a2a) if e.fwd_bytes > 0 else ()
        bwd = _redist(e.backward, e.dtype, prof, a2a) if e.bwd_bytes > 0 and e.backward is not None else ()
        k = 1 if e.src in free else m
        edge_of[(e.dst, e.in_slot)] = (_scale(fwd, k, prof), _scale(bwd, k, prof))
    rows = []
    for op in g:
        ch = plan.choices[op.name]
        lb = load_balance(op, ch) if balance else None
        t = op_time(op, ch, plan.flops.get(op.name, 0.0) if lb is None else lb.flops, plan.traffic.get(op.name, 0.0),
                    grad[op.name], prof, m, whole_input_bytes(op, ch, free, shares))
        if op.name in free and op.name in shares:
            t = OpTime(t.forward / shares[op.name], t.backward / shares[op.name], t.bound)
        deps = []
        for slot, x in enumerate(op.inputs):
            if x.kind not in ("op", "input"):
                continue
            fc, bc = edge_of.get((op.name, slot), (0.0, 0.0))
            src = x.ref if x.kind == "op" else None
            deps.append((src, x.index or 0, fc, bc if src is not None and grad.get(src) else 0.0))
        c = plan.op_costs.get(op.name)
        ph = own_fwd = own_bwd = None
        if c is not None:
            ph = comms_of_steps(c.steps, prof)
            k = 1 if op.name in free else m
            own_fwd, own_bwd = _scale(ph.get("forward", ()), k, prof), _scale(ph.get("backward", ()), k, prof)
        a2a_s = _dispatch_seconds(plan, op, prof, m)
        if a2a_s:
            ph = ph if ph is not None else {}
            own_fwd, own_bwd = (own_fwd or 0.0) + a2a_s, (own_bwd or 0.0) + a2a_s
        if lb is not None:
            ph = ph if ph is not None else {}
            ex = comms_of_steps(lb.steps, prof)
            own_fwd = (own_fwd or 0.0) + _scale(ex.get("forward", ()), m, prof)
            own_bwd = (own_bwd or 0.0) + (_scale(ex.get("backward", ()), m, prof) if grad[op.name] else 0.0)
        rows.append((op, ch, t, tuple(deps), ph, own_fwd, own_bwd))
    _BASES[key] = (plan, prof, rows)
    return rows


def _dispatch_seconds(plan, op, prof, m: int) -> float:
    """A MoE FFN's dispatch and combine all-to-alls over the ep group for one micro-batch (:mod:`.experts`): each
    way, forward and again backward."""
    nb = dispatch_bytes(plan, op)
    if not nb:
        return 0.0
    intra = ep_group_intra(plan, prof.devices_per_node)
    return 2 * prof.collective_seconds("AllToAll", expert_ways(plan), nb / m, intra)


_ITEMS = table("step model: items of the last plans, profile and options", 8)


def build_items(plan, prof, opts: StepOptions, zero) -> list[Item]:
    """The schedule's view of every operator for one micro-batch: those of one copy, memoised for the last few
    plans, profile and options but the copies (a sweep prices each option set on two cut-down plans, with one copy
    and with two, with and without the load balance, in turn), then its copies (:func:`interleaved`)."""
    key = (id(plan), id(prof), replace(opts, interleave=1), zero)
    hit = _ITEMS.get(key)
    if hit is not None and hit[0] is plan and hit[1] is prof:
        items = hit[2]
    else:
        items = _one_copy(plan, prof, opts, zero)
        _ITEMS[key] = (plan, prof, items)
    return interleaved(items, opts.interleave) if opts.interleave > 1 else items


def _one_copy(plan, prof, opts: StepOptions, zero) -> list[Item]:
    g, m = plan.graph, opts.split_by
    grad, layer_of = _graph_facts(g)
    full = full_layers(g, opts)
    recompute = (_in_layers(g) if full is None else _ops_in(g, full)) | selective_drop(g, opts) \
        if full != frozenset() else selective_drop(g, opts)
    items = []
    experts = expert_chain(plan)
    for op, ch, t, deps, ph, own_fwd, own_bwd in _base_rows(plan, prof, m, opts.fa_load_balance):
        it = Item(op.name, layer_of[op.name] or "(outside layers)", t.forward, 0.0, grad[op.name], deps, op=op.name)
        if ph is not None:
            it.own_fwd, it.own_bwd = own_fwd, own_bwd
            grads = ph.get("grad", ())
            if grads and op.name in experts:
                grads = _expert_grads(grads, experts[op.name], prof)
            it.mirrors, it.prefetch = _mirrors(op, ch, grads, zero, prof, g)
        it.bwd = t.backward
        if op.name in recompute:
            it.bwd += it.fwd
            it.recompute_comm = it.own_fwd + sum(d[2] for d in deps)
        items.append(it)
    return items


def _expert_grads(comms, ep: int, prof) -> tuple:
    """The gradient reductions of an expert weight held ``E / ep`` per device: over each expert's ``n / ep`` replicas
    (none where ep covers them all), the ring's bytes of a slice ep times smaller."""
    out = []
    for c in comms:
        if c.n % ep:             # a group the ep devices do not divide: as priced
            out.append(c)
            continue
        n = c.n // ep
        if n <= 1:
            continue
        nb = c.nbytes / ep * ((n - 1) / n) / ((c.n - 1) / c.n)
        out.append(Comm(c.kind, n, c.intra, nb, prof.collective_seconds(c.kind, n, nb, c.intra), ("experts", n)))
    return tuple(out)


def _in_layers(graph) -> frozenset[str]:
    """The operators inside the repeated layers (what a full recompute recomputes), per graph."""
    key = (id(graph), "in layers")
    hit = _DROPS.get(key)
    if hit is None or hit[0] is not graph:
        hit = _DROPS[key] = (graph, frozenset(n for n, layer in _graph_facts(graph)[1].items() if layer))
    return hit[1]


def full_layers(graph, opts: StepOptions) -> frozenset[str] | None:
    """The layers recomputed fully: None for every layer (``recompute`` "full" without per-stage counts), else the
    first ``recompute_layers[s]`` of each stage (empty: none)."""
    if opts.recompute_layers:
        key = (id(graph), "full", opts.pp, tuple(opts.offset or ()), opts.pp_interleave, opts.recompute_layers)
        hit = _DROPS.get(key)
        if hit is None or hit[0] is not graph:
            hit = _DROPS[key] = (graph, frozenset(_first_layers(graph, opts, opts.recompute_layers)))
        return hit[1]
    return None if opts.recompute == "full" else frozenset()


def _ops_in(graph, layers: frozenset[str]) -> frozenset[str]:
    key = (id(graph), "ops in", id(layers))
    hit = _DROPS.get(key)
    if hit is None or hit[0] is not graph or hit[2] is not layers:
        hit = _DROPS[key] = (graph, frozenset(op.name for op in graph if op.layer in layers), layers)
    return hit[1]


def _first_layers(graph, opts, counts) -> set[str]:
    """The first ``counts[s]`` layers of each pipeline stage ``s``."""
    from .pipeline import main_layers, stage_sizes
    layers = main_layers(graph)
    sizes = stage_sizes(len(layers), opts.pp, opts.offset or None, opts.pp_interleave) if opts.pp > 1 \
        else [len(layers)]
    out, k = set(), 0
    for s, size in enumerate(sizes):
        out.update(layers[k:k + min(counts[s], size)])
        k += size
    return out


_DROPS = table("step model: selective recompute per graph and options", 64)


def selective_drop(graph, opts: StepOptions) -> frozenset[str]:
    """Operators recomputed short of a full recompute: MindFormers' selective recompute (on the stages' first
    ``select_layers``, else every layer) and its communication recompute of norms (``comm_recompute_layers``).
    Memoised per graph and the options it reads (one object per set: the memory's memo keys on it)."""
    key = (id(graph), opts.recompute, opts.pp, tuple(opts.offset or ()), opts.pp_interleave, tuple(opts.select_layers),
           tuple(opts.comm_recompute_layers), tuple(opts.recompute_layers))
    hit = _DROPS.get(key)
    if hit is None or hit[0] is not graph:
        hit = _DROPS[key] = (graph, frozenset(_selective_drop(graph, opts)))
    return hit[1]


def _selective_drop(graph, opts: StepOptions) -> set[str]:
    full = full_layers(graph, opts)
    if full is None:
        return set()
    out = set()
    if opts.recompute == "selective":
        out |= selective_ops(graph, _first_layers(graph, opts, opts.select_layers) if opts.select_layers else None)
    if opts.comm_recompute_layers:
        out |= comm_recompute_ops(graph, _first_layers(graph, opts, opts.comm_recompute_layers))
    # a layer recomputed fully recomputes all of it: its selective recompute adds nothing
    return {n for n in out if graph.op(n).layer not in full} if full else out


def _clone(x: Item) -> Item:
    """A shallow copy of ``x`` (neither dataclasses.replace, which re-runs __init__, nor copy.copy's reduce
    protocol: a sweep makes hundreds of thousands)."""
    y = object.__new__(Item)
    y.__dict__.update(x.__dict__)
    return y


def interleaved(items: list[Item], k: int) -> list[Item]:
    """Fine-grained multi-copy (MindSpore's ``interleaved_parallel``, MindFormers' ``fine_grain_interleave``):
    each layer's operators as ``k`` copies on ``1/k`` of the batch. A layer is cut after every operator with a
    collective of its own; the copies run each piece in turn, so one copy's collective runs beside the next
    copy's piece of computation."""
    out: list[Item] = []
    copies: dict[str, list[str]] = {}
    i = 0
    while i < len(items):
        it = items[i]
        if it.layer == "(outside layers)":
            deps = []
            for d in it.deps:
                if d[0] in copies:
                    deps.extend((c, d[1], d[2] / k, d[3] / k) for c in copies[d[0]])
                else:
                    deps.append(d)
            out.append(replace(it, deps=tuple(deps)))
            i += 1
            continue
        j = i
        while j < len(items) and items[j].layer == it.layer:
            j += 1
        pieces, cur = [], []
        for x in items[i:j]:
            cur.append(x)
            if x.own_fwd or x.own_bwd:
                pieces.append(cur)
                cur = []
        if cur:
            pieces.append(cur)
        for piece in pieces:
            for c in range(k):
                for x in piece:
                    deps = tuple((copies[d[0]][c] if d[0] in copies else d[0], d[1], d[2] / k, d[3] / k)
                                 for d in x.deps)
                    y = _clone(x)
                    y.name, y.fwd, y.bwd, y.deps = f"{x.name} (copy {c})", x.fwd / k, x.bwd / k, deps
                    y.own_fwd, y.own_bwd, y.recompute_comm = x.own_fwd / k, x.own_bwd / k, x.recompute_comm / k
                    y.prefetch, y.mirrors = (x.prefetch, x.mirrors) if c == 0 else (0.0, ())
                    copies.setdefault(x.name, []).append(y.name)
                    out.append(y)
        i = j
    return out


_MIRRORS = table("step model: gradient reductions per operator", 1 << 16)


def _mirrors(op, ch, comms, zero, prof, g):
    """(gradient reductions, optimizer-parallel AllGather seconds) of an operator's Parameters: with the
    parallel optimizer a sharded weight's AllReduce becomes a ReduceScatter (half its ring bytes) and its
    AllGather runs before the forward. Memoised per operator, sharding, profile and optimizer sharding."""
    if not comms:
        return (), 0.0
    key = (id(op), id(ch.sharding), id(comms), id(prof), zero)
    hit = _MIRRORS.get(key)
    if hit is not None and hit[0] is op and hit[1] is ch.sharding and hit[2] is comms:
        return hit[3]
    out = _MIRRORS[key] = (op, ch.sharding, comms, _mirrors_of(op, ch, comms, zero, prof, g))
    return out[3]


def _mirrors_of(op, ch, comms, zero, prof, g):
    out, pre = [], 0.0
    params = [(p, op.inputs[slot], ch.inputs[k]) for k, slot in enumerate(_slots(op))
              if k < len(ch.inputs) and (p := _weight_read(g, op.inputs[slot])) is not None]
    sharded, scale = False, 1.0
    if zero is not None and params:
        p, x, lay = params[0]
        if lay is not None:
            per = DTYPE_BYTES.get(p.spec.dtype, 4)
            sharded = zero.ways(max(c.n for c in comms) if comms else 1, lay.slice_shape[0] if lay.slice_shape else 1,
                                lay.slice_numel * per) > 1
            if sharded and x.kind == "op" and x.spec is not None:
                # a float32 weight read only by its Cast to fp16/bf16 is gathered after the Cast (MindSpore's
                # optimize_parallel_all_gather_comm moves the Cast in front of the AllGather, whatever the
                # pipeline), its gradient reduce-scattered in float32 (MindSpore 2.9's IR: the AllGather
                # Float16 [32,256] -> [256,256] fed by the Cast, the ReduceScatter Float32)
                scale = DTYPE_BYTES.get(x.spec.dtype, 4) / per
    for c in comms:
        if sharded:
            out.append(((c.group, "ReduceScatter"), "ReduceScatter", c.n, c.intra, c.nbytes / 2))
            pre += prof.collective_seconds("AllGather", c.n, c.nbytes * scale / 2, c.intra)
        else:
            out.append(((c.group, c.kind), c.kind, c.n, c.intra, c.nbytes))
    return tuple(out), pre


def _weight_read(g, x):
    """The Parameter an operator's input ``x`` is: itself, or the float32 weight a Cast reads, that Cast its only
    reader (MindFormers' param_init_type float32); None for any other input."""
    if x.kind == "param":
        return g.params.get(x.ref)
    if x.kind == "op" and x.ref in g:
        src = g.op(x.ref)
        if src.type == "Cast" and src.inputs and src.inputs[0].kind == "param" \
                and _param_readers(g).get(src.inputs[0].ref) == 1:
            return g.params.get(src.inputs[0].ref)
    return None


def _param_readers(g) -> dict[str, int]:
    """Per Parameter, how many operators read it (once per graph)."""
    def count(graph):
        out: dict[str, int] = {}
        for op in graph:
            for name in {x.ref for x in op.inputs if x.kind == "param"}:
                out[name] = out.get(name, 0) + 1
        return out
    return per_graph("parameter readers", g, count)


def _slots(op) -> tuple:
    return cached_rule(op).slots


def _zero(plan, opts):
    from ..vocab.graph import OptimizerSharding
    z = getattr(plan.graph, "optimizer_sharding", None)
    if opts.optimizer_parallel is False:
        return None
    if opts.optimizer_parallel and z is None:
        return OptimizerSharding()
    return z


def _optimizer_seconds(plan, names, zero, prof, devices, micro_batches: int = 1) -> float:
    """The optimizer step's device-memory time over the stage's parameters (each one's shard), and with
    ``micro_batches`` > 1 the accumulation of every micro-batch's gradients into MindFormers' whole accumulated
    gradients (its training cell's accu_grads, one add per micro-batch: the gradient and the sum read, the sum
    written -- the buffers the memory model holds, checked against MindSpore's DryRun)."""
    from .memory import param_slices
    total = 0.0
    for name, shape in param_slices(plan, names).items():
        p = plan.graph.params.get(name)
        if p is None or not p.requires_grad:
            continue
        n = math.prod(shape)
        per = DTYPE_BYTES.get(p.spec.dtype, 4)
        w = zero.ways(devices * n // max(p.spec.numel, 1), shape[0], n * per) if zero is not None and shape else 1
        total += n / w * optimizer_bytes(per)
        if micro_batches > 1:
            total += micro_batches * ACCUMULATE_PASSES * n * per
    return prof.memory_seconds(total)


def boundary_bytes(plan, stage) -> dict[int, float]:
    """``{s: bytes one device sends to stage s + 1 per step}``: the slices of the tensors stage ``s + 1`` reads
    from ``s``."""
    g, out, seen = plan.graph, {}, set()
    for op in g:
        s = stage.get(op.name, 0) - 1
        if s < 0:
            continue
        for x in op.inputs:
            if x.kind == "op" and stage.get(x.ref) == s and (x.ref, x.index) not in seen:
                seen.add((x.ref, x.index))
                spec = g.op(x.ref).outputs[x.index or 0]
                lay = plan.choices[x.ref].outputs[x.index or 0] if plan.choices[x.ref].outputs else None
                if spec is not None and lay is not None:
                    out[s] = out.get(s, 0.0) + lay.slice_numel * DTYPE_BYTES.get(spec.dtype, 4)
    return out


def pipeline_step(ends: list[tuple[float, float]], opts: StepOptions) -> tuple[float, list[float], int]:
    """(the step, each stage's bubble, the stage reported) from each stage's timeline ends -- one micro-batch
    without the gradient reductions, one with them and the optimizer step: the 1F1B schedule of the first, and the
    slowest stage's tail of gradients and optimizer after it."""
    span, bubbles = one_f_one_b([a for a, _b in ends], opts.micro_batches, opts.pp_interleave)
    tails = [b - a for a, b in ends]
    worst = max(range(len(ends)), key=lambda s: (ends[s][0] + tails[s], s))
    return span + max(tails), bubbles, worst


class StepEstimate:
    """A plan's step as scheduled: ``step_s`` at once (what the advisor's trials read); the msprof-style
    breakdown (:attr:`schedule`, :attr:`per_layer`), the memory and the per-stage figures on first use."""

    def __init__(self, plan, prof, opts, zero, stages, same, held=None):
        """``stages``: (operators, items, pipeline p2p, optimizer seconds) per stage; ``same``: per stage, an
        earlier stage of its signature (its timelines' ends are that one's), or None; ``held``: ``opts`` as the
        plan's own stages read them (:func:`held_options`; ``opts`` where the plan holds every stage)."""
        self.plan, self.prof, self.opts, self.zero = plan, prof, opts, zero
        self.held = held or opts
        self._stage_items, self._timelines = stages, {}
        ends = []
        for s, rep in enumerate(same):
            if rep is None:
                a, b = self._simulated(s)
                ends.append((a.end, b.end))
            else:
                ends.append(ends[rep])
        self._ends = ends
        self.step_s, self.bubbles, self.worst = pipeline_step(ends, opts)
        self.throughput = throughput(plan, self.step_s, plan.mesh.size * opts.pp, opts.repeats)
        self.options = {"pp": opts.pp, "micro_batches": opts.micro_batches, "recompute": opts.recompute,
                        "optimizer_parallel": zero is not None, "interleave": opts.interleave,
                        "pp_interleave": opts.pp_interleave, "offset": _plain(opts.offset),
                        "recompute_layers": list(opts.recompute_layers), "select_layers": list(opts.select_layers),
                        "comm_recompute_layers": list(opts.comm_recompute_layers),
                        "grad_comm_overlap": opts.grad_comm_overlap, "allgather_overlap": opts.allgather_overlap,
                        "fa_load_balance": opts.fa_load_balance, "optimizer_swap": opts.optimizer_swap,
                        "settings": [{"setting": n, "value": v, "from": o} for n, v, o in opts.origins],
                        "stage_reported": self.worst, "profile": prof.name, "overrides": dict(opts.overrides)}
        self._summarized: dict = {}
        self._totals = self._per_layer = None
        self._memory = None

    def _simulated(self, s: int):
        """Stage ``s``'s timelines: one micro-batch without the gradient reductions, and one with them and the
        optimizer step."""
        hit = self._timelines.get(s)
        if hit is None:
            _names, mine, p2p, optimizer_s = self._stage_items[s]
            ov = Overlap(grad_reduce=self.opts.grad_comm_overlap, param_gather=self.opts.allgather_overlap)
            hit = self._timelines[s] = (simulate(mine, self.prof, grads=False, extra_exposed=p2p, overlap=ov),
                                        simulate(mine, self.prof, grads=True, optimizer_s=optimizer_s,
                                                 extra_exposed=p2p, overlap=ov))
        return hit

    @property
    def runs(self) -> list:
        """(operators, timeline without the gradients, timeline with them) per stage."""
        return [(self._stage_items[s][0], *self._simulated(s)) for s in range(len(self._stage_items))]

    @property
    def timeline(self):
        """The reported stage's timeline of the micro-batch with the gradient reductions."""
        return self._simulated(self.worst)[1]

    @property
    def stage_ends(self) -> list[tuple[float, float]]:
        """Per stage, the ends of its two timelines: one micro-batch without the gradient reductions, and one
        with them and the optimizer step."""
        return list(self._ends)

    def stage_totals(self, s: int) -> dict:
        """Stage ``s``'s schedule totals over the step (its micro-batches, the last with the gradients)."""
        return self._summary(s)[0]

    def stage_not_overlapped(self, s: int) -> float:
        """Stage ``s``'s Communication not overlapped over the step (:meth:`stage_totals`' alone, read off its
        timelines without summarising them)."""
        a, b = self._simulated(s)
        return not_overlapped(a) * (self.opts.micro_batches - 1) + not_overlapped(b)

    def _summary(self, s: int):
        """Stage ``s``'s (totals, per-layer rows) for the step: ``m - 1`` micro-batches' forward and backward
        without the gradient reductions, and the last one's with them."""
        hit = self._summarized.get(s)
        if hit is None:
            m = self.opts.micro_batches
            a, b = self._simulated(s)
            ta, pa = summarize(a)
            tb, pb = summarize(b)
            rows = {k: added(scaled(pa.get(k, {}), m - 1), pb.get(k, {})) for k in set(pa) | set(pb)}
            hit = self._summarized[s] = (added(scaled(ta, m - 1), tb), rows)
        return hit

    @property
    def schedule(self) -> dict:
        """The reported stage's totals (that stage's timelines alone are summarised)."""
        if self._totals is None:
            total = dict(self._summary(self.worst)[0])
            total["bubble_s"] = max(self.step_s - total["step_s"], 0.0)
            total["step_s"] = self.step_s
            self._totals = total
        return self._totals

    @property
    def per_layer(self) -> dict:
        """Each layer's row from the stage holding it (rows outside layers, the optimizer's and the pipeline's
        from the reported stage)."""
        if self._per_layer is None:
            per = {}
            for s in sorted(range(len(self._stage_items)), key=lambda i: i == self.worst):
                rows = self._summary(s)[1]
                per.update(rows if s == self.worst else {k: v for k, v in rows.items() if not k.startswith("(")})
            per = {k: dict(v) for k, v in per.items()}
            for row in per.values():
                row["step_s"] = row["computing_s"] + row["communication_not_overlapped_s"] + row["free_s"]
            self._per_layer = dict(sorted(per.items()))
        return self._per_layer

    def _stage_memory(self, s: int) -> dict:
        return _memory_of_stage(self.plan, self._stage_items[s][0], _in_flight(s, self.opts), self.held, self.zero,
                                self.prof)

    def _stages(self) -> list:
        if self._memory is None:
            self._memory = [self._stage_memory(s) for s in range(len(self._stage_items))]
        return self._memory

    @property
    def memory(self) -> dict:
        """The memory of the stage that keeps the most (every stage's: :attr:`per_stage`)."""
        mems = self._stages()
        s = max(range(len(mems)), key=lambda i: mems[i]["total"])
        return {**mems[s], "stage": s}

    @property
    def per_stage(self) -> list:
        return [{"stage": s, "micro_batch_s": a, "bubble_s": self.bubbles[s], "memory_total": ms["total"],
                 "fits": ms["fits"]} for s, ((a, _b), ms) in enumerate(zip(self._ends, self._stages()))]

    def to_dict(self) -> dict:
        return {"schedule": self.schedule, "per_layer": self.per_layer, "memory": self.memory,
                "throughput": self.throughput, "options": self.options, "per_stage": self.per_stage}


def _in_flight(s: int, opts: StepOptions) -> int:
    return in_flight(s, opts.pp, opts.micro_batches) if opts.pp > 1 else 1


def _memory_of_stage(plan, names: set, flight: int, held: StepOptions, zero, prof) -> dict:
    """The memory of the stage of ``plan`` holding ``names`` with ``flight`` micro-batches in flight (``held``:
    the options as the plan's stages read them)."""
    full = full_layers(plan.graph, held)
    return stage_memory(plan, names, devices=plan.mesh.size, recompute="full" if full != frozenset() else
                        held.recompute, full_layers=full,
                        optimizer_parallel=zero is not None, micro_batches=held.split_by,
                        in_flight=flight, profile=prof, drop=selective_drop(plan.graph, held),
                        accumulate=held.micro_batches > 1,
                        optimizer=held.optimizer or plan.graph.optimizer or "adamw", swap=held.optimizer_swap,
                        max_device_memory=held.max_device_memory, pipeline=held.pp > 1)


#: the stages a stand-in plan holds for a longer pipeline: the first, one of the middle ones, the last
STAND_IN_STAGES = 3


def held_stages(pp: int, stand_in: bool = False) -> list[int]:
    """Per stage of a ``pp``-stage pipeline, the stage of the plan that stands for it: itself; or, on a stand-in
    plan (the layers of :data:`STAND_IN_STAGES` stages: the first, one middle stage, the last -- where every
    middle stage holds the same layers with the same strategies), the first, the middle one for every middle
    stage, the last."""
    if not stand_in or pp <= STAND_IN_STAGES:
        return list(range(pp))
    return [0] + [1] * (pp - 2) + [2]


def held_options(opts: StepOptions, stand_in: bool = False) -> StepOptions:
    """``opts`` as a stand-in plan's own stages read them (:func:`held_stages`): its stages, and its per-stage
    layer counts of the stages held; ``opts`` where the plan holds every stage. A one-line error where the
    middle stages' counts differ or an offset makes the stages unequal (no plan stands for them)."""
    held = held_stages(opts.pp, stand_in)
    if len(held) == len(set(held)):
        return opts
    from ..errors import InputSpecError
    if opts.offset or any(len(set(v[1:-1])) > 1 for v in (opts.select_layers, opts.comm_recompute_layers) if v):
        raise InputSpecError("a stand-in plan stands for middle stages of one shape: give every middle stage the "
                             "same layers and recompute counts (no offset)")

    def kept(v):
        return (v[0], v[1], v[-1]) if v else v
    return replace(opts, pp=STAND_IN_STAGES, select_layers=kept(opts.select_layers),
                   comm_recompute_layers=kept(opts.comm_recompute_layers))


def stage_memories(plan, opts: StepOptions, stand_in: bool = False) -> list[dict]:
    """Each pipeline stage's memory (:func:`~.memory.stage_memory`) of ``plan`` under ``opts``, without scheduling
    the step (the memory a stage keeps does not depend on the schedule); ``stand_in``: ``plan`` stands for the
    pipeline's stages (:func:`held_stages`)."""
    opts = opts.check()
    held = held_options(opts, stand_in)
    prof = step_profile_of(plan.hardware, opts.overrides)
    zero = _zero(plan, opts)
    names = _stage_names(plan.graph, held.pp, held.offset or None, held.pp_interleave)
    return [_memory_of_stage(plan, names[h], _in_flight(s, opts), held, zero, prof)
            for s, h in enumerate(held_stages(opts.pp, stand_in))]


def memory_with(plan, opts: StepOptions, stand_in: bool = False) -> dict:
    """:attr:`StepEstimate.memory` of ``plan`` under ``opts`` without scheduling the step: a sweep schedules only
    the configurations that fit."""
    mems = stage_memories(plan, opts, stand_in)
    k = max(range(len(mems)), key=lambda i: mems[i]["total"])
    return {**mems[k], "stage": k}


#: the estimates of the plans last estimated (:func:`estimate`): kept beside the plans, not on them, so that a plan
#: and its estimate (which holds it) make no reference cycle and go with their last reference, not at the cyclic
#: collector's next walk of everything an advice made
_ESTIMATES = ByIdentity("step: the plans' own estimates", 16)


def estimate(plan) -> StepEstimate | None:
    """The step estimate of ``plan`` under its own options (None without a hardware profile); memoised."""
    if plan.hardware is None:
        return None
    return _ESTIMATES.get((plan,), None, lambda: estimate_with(plan, options_of(plan)))


def estimate_with(plan, opts: StepOptions, stand_in: bool = False) -> StepEstimate:
    """The step estimate of ``plan`` under ``opts`` (not memoised: a sweep prices one plan under many options);
    ``stand_in``: ``plan`` holds three stages' layers standing for the pipeline's ``opts.pp`` (:func:`held_stages`:
    a sweep prices a deep pipeline of identical layers on the plan of three stages)."""
    from ..engine.search.caches import no_cyclic_gc
    with no_cyclic_gc():
        return _estimate(plan, opts.check(), stand_in)


_STAGES = table("step model: stage per operator", 64)


def _stages(graph, pp: int, offset, chunks: int = 1) -> dict[str, int]:
    """:func:`~.pipeline.stage_of_ops`, memoised per graph, pp, offset and chunks per stage."""
    key = (id(graph), pp, tuple(offset or ()), chunks)
    hit = _STAGES.get(key)
    if hit is None or hit[0] is not graph:
        hit = _STAGES[key] = (graph, stage_of_ops(graph, pp, offset, chunks))
    return hit[1]


_NAMES = table("step model: operators per stage", 64)


def _stage_names(graph, pp: int, offset, chunks: int = 1) -> list[frozenset[str]]:
    """Each stage's operators (one set object per graph, pp, offset and chunks: the memory's memo keys on it)."""
    key = (id(graph), pp, tuple(offset or ()), chunks)
    hit = _NAMES.get(key)
    if hit is None or hit[0] is not graph:
        stage = _stages(graph, pp, offset, chunks)
        names = [frozenset(op.name for op in graph if stage[op.name] == k) for k in range(pp)] if pp > 1 else \
            [frozenset(op.name for op in graph)]
        hit = _NAMES[key] = (graph, names)
    return hit[1]


def _estimate(plan, opts: StepOptions, stand_in: bool = False) -> StepEstimate:
    prof = step_profile_of(plan.hardware, opts.overrides)
    zero = _zero(plan, opts)
    held, of = held_options(opts, stand_in), held_stages(opts.pp, stand_in)
    items = build_items(plan, prof, held, zero)
    stage = _stages(plan.graph, held.pp, held.offset or None, held.pp_interleave)
    devices = plan.mesh.size
    m = opts.split_by
    sent = boundary_bytes(plan, stage) if held.pp > 1 else {}       # by the sending stage of the plan
    by_stage: list[list[Item]] = [[] for _ in range(held.pp)]
    if held.pp > 1:
        for it in items:
            by_stage[stage[it.op]].append(it)
    else:
        by_stage[0] = items
    names_of = _stage_names(plan.graph, held.pp, held.offset or None, held.pp_interleave)
    stages, same, seen, rows_of, optimizer_of = [], [], {}, {}, {}
    for s, h in enumerate(of):
        mine = by_stage[h]
        p2p = []
        for b, ph in ((s - 1, "forward"), (s, "backward")):
            if 0 <= b < opts.pp - 1:
                nb = sent.get(of[b], 0.0) / m
                t = prof.p2p_seconds(nb, p2p_intra(b, devices, prof.devices_per_node))
                p2p.append((ph, t * opts.pp_interleave, "(pipeline p2p)"))     # one boundary per chunk
        if h not in optimizer_of:
            optimizer_of[h] = _optimizer_seconds(plan, names_of[h], zero, prof, devices, opts.micro_batches)
        stages.append((names_of[h], mine, p2p, optimizer_of[h]))
        # the middle stages of a pipeline of identical layers schedule alike: each shape of stage simulated once
        # (another of its shape when its own timelines are read: StepEstimate.runs)
        # (a stand-in's stages are told apart by the stage of the plan that stands for them)
        sig = None
        if opts.pp > 2:
            if h not in rows_of:
                rows_of[h] = h if held is not opts else stage_signature(mine)[0]
            sig = (rows_of[h], tuple((ph, secs) for ph, secs, _layer in p2p), optimizer_of[h])
        rep = seen.get(sig) if sig is not None else None
        same.append(rep)
        if rep is None and sig is not None:
            seen[sig] = s
    est = StepEstimate(plan, prof, opts, zero, stages, same, held)
    est.items = items
    return est


def throughput(plan, step: float, devices: int, repeats: int = 1) -> dict:
    """Tokens per second per device, where the model's first input is token ids ``[batch, seq]``; ``repeats``: the
    graph's batch runs that many times in a step (it holds one micro-batch)."""
    ins = list(getattr(plan.graph, "inputs", {}).values())
    if not ins or step <= 0:
        return {}
    spec = ins[0]
    out = {"samples_per_s": spec.shape[0] * repeats / step if spec.shape else None, "devices": devices}
    if len(spec.shape) == 2 and spec.dtype.startswith("int"):
        tokens = spec.shape[0] * spec.shape[1] * repeats
        out["tokens_per_step"] = tokens
        out["tokens_per_s_per_device"] = tokens / step / devices
    return out


def step_seconds(plan) -> float | None:
    est = estimate(plan)
    return est.step_s if est is not None else None


def step_measure(graph) -> str:
    """What the advisor's choices on ``graph`` weigh, as its notes name it: the scheduled "step estimate"
    (``choose_by_schedule``), else the "serial sum" of communication and compute."""
    opts = getattr(graph, "step_options", None) or StepOptions()
    return "step estimate" if opts.choose_by_schedule else "serial sum"


def chosen_step_seconds(plan) -> float | None:
    """``Plan.totals()``' step_seconds: the scheduled step where the options ask the advisor to choose by it
    (``choose_by_schedule``), else None (the serial sum)."""
    return step_seconds(plan) if options_of(plan).choose_by_schedule else None
