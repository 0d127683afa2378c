"""``strategist sweep``: which mesh, which memory options and which anchors, for N devices.

Every factorisation of N into dp x tp x cp x ep x pp the model's shapes allow is tried (an axis that divides
nothing it splits -- the batch, the attention heads and key/value heads, the sequence, the experts, the layers --
is reported infeasible with the reason, never dropped). For each mesh the graph, extracted once, is advised on
the mesh without its pp axis (the plan of one pipeline stage: MindSpore propagates within a stage); then each
memory option -- recompute none/selective/full, the parallel optimizer on/off where dp > 1, the micro-batch
count (the pipeline's, a multiple of pp that splits the batch) -- is priced by the step model
(:mod:`strategist.cost.step`) on the same plan (a plan of many layers per stage: on its cut-down plans, extrapolated,
:func:`pricing_plans`). Configurations that fit the profile's device memory are ranked
by step time (tokens/s per device where the first input is token ids).

The advice runs in worker processes (a standard ``concurrent.futures`` pool over the distinct meshes); a
progress bar shows on a terminal, and Ctrl-C stops the sweep with what it ranked so far.

    >>> result = sweep_model("examples/llama.py:tiny", 8, kwargs=["layers=4"])   # doctest: +SKIP
    >>> result.ranked[0].mesh                                                   # doctest: +SKIP
    'dp=8'
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import gc
import itertools
import math
import multiprocessing
import os
from dataclasses import dataclass, field
from typing import NamedTuple

from . import progress
from .advice.carry import carry_anchors, told_apart_from_dp
from .cost.attention import splits_attention
from .cost.extrapolate import memory_at, step_at
from .cost.pipeline import main_layers, stage_sizes
from .cost.step import STAND_IN_STAGES, StepOptions, estimate_with, memory_with, stage_memories
from .engine.rules.attention import FA_LAYOUTS
from .engine.rules.common import const_arg
from .engine.search.caches import no_cyclic_gc
from .errors import InputSpecError, StrategistError
from .advice.anatomy import uses_sequence_parallel
from .advice.repeated import copied_anchors
from .frontend.layers import alike_from, layer_block, truncate_layers
from .frontend.loader import load_graph
from .sweep_ray import ray_runner
from .vocab.graph import OpGraph
from .vocab.mesh import Mesh, drawn_from

AXES = ("dp", "tp", "cp", "ep", "pp")
#: a mesh's ep drawn from its innermost axes (MindFormers' expert_parallel beyond data_parallel: ``ep=8@tp``), no
#: axis of its own: the key of its size in a sweep's mesh
DRAWN_EP = "ep drawn"
RECOMPUTE = ("none", "selective", "full")
#: the repeated layers each mesh is advised on; the anchors advised there are copied onto the others
ADVISE_LAYERS = 2
#: the repeated layers per pipeline stage each configuration is priced at where the stages hold more: its step and
#: memory at the stage's whole layer count are extrapolated from these two (:mod:`strategist.cost.extrapolate`)
PRICE_LAYERS = (2, 3)
#: the meshes advised on their own whatever their family: the fastest this many (by their fastest configuration)
REFINE = 8


@dataclass(frozen=True)
class Shapes:
    """What bounds each axis: the batch (dp and the micro-batches), the attention's heads and key/value heads (tp),
    its sequence (cp), the experts (ep), the repeated layers the stages split (pp); None where the model has none."""

    batch: int | None
    heads: int | None
    kv_heads: int | None
    seq: int | None
    experts: int | None
    layers: int
    widths: frozenset       # every dimension of the weights: tp must split one where there is no attention


@dataclass
class Config:
    """One configuration of the sweep: its mesh (as ``--mesh`` takes it), the step model's options, and what the
    advice and the step model gave for it -- or why it cannot run."""

    mesh: str
    options: dict
    step_s: float | None = None
    tokens_per_s_per_device: float | None = None
    samples_per_s: float | None = None
    memory_bytes: float | None = None
    exposed_s: float | None = None
    anchors: int | None = None
    fits: bool = False
    reason: str = ""
    anchors_from: str = ""       # the mesh whose advice its anchors are: its own, or its family's advised one

    def to_dict(self) -> dict:
        return {"mesh": self.mesh, "options": self.options, "step_s": self.step_s,
                "tokens_per_s_per_device": self.tokens_per_s_per_device, "samples_per_s": self.samples_per_s,
                "memory_bytes": self.memory_bytes, "communication_not_overlapped_s": self.exposed_s,
                "anchors": self.anchors, "anchors_from": self.anchors_from, "fits": self.fits,
                "reason": self.reason}

    @classmethod
    def from_dict(cls, d: dict) -> "Config":
        """The configuration :meth:`to_dict` wrote (``sweep --format json``'s rows)."""
        return cls(mesh=d["mesh"], options=dict(d["options"]), step_s=d.get("step_s"),
                   tokens_per_s_per_device=d.get("tokens_per_s_per_device"), samples_per_s=d.get("samples_per_s"),
                   memory_bytes=d.get("memory_bytes"), exposed_s=d.get("communication_not_overlapped_s"),
                   anchors=d.get("anchors"), fits=bool(d.get("fits")), reason=d.get("reason", ""),
                   anchors_from=d.get("anchors_from", ""))


@dataclass
class SweepResult:
    model: str
    devices: int
    hardware: str
    ranked: list[Config] = field(default_factory=list)       # fitting, fastest first
    unfit: list[Config] = field(default_factory=list)        # ran, but out of memory
    infeasible: list[Config] = field(default_factory=list)   # cannot run, with the reason
    best: list[dict] = field(default_factory=list)           # the best meshes' advice, as advise --format json
    interrupted: bool = False
    meshes_advised: int = 0                                  # advised on their own
    meshes_carried: int = 0                                  # priced with their family's advice
    usable_bytes: float | None = None                        # the card's usable memory (max_device_memory)

    def to_dict(self) -> dict:
        return {"model": self.model, "devices": self.devices, "hardware": self.hardware,
                "ranked": [c.to_dict() for c in self.ranked], "unfit": [c.to_dict() for c in self.unfit],
                "infeasible": [c.to_dict() for c in self.infeasible], "best": self.best,
                "interrupted": self.interrupted, "meshes_advised": self.meshes_advised,
                "meshes_carried": self.meshes_carried, "usable_bytes": self.usable_bytes}

    @classmethod
    def from_dict(cls, d: dict) -> "SweepResult":
        """The result :meth:`to_dict` wrote (``sweep --format json``)."""
        rows = {k: [Config.from_dict(c) for c in d.get(k) or ()] for k in ("ranked", "unfit", "infeasible")}
        return cls(d["model"], d["devices"], d["hardware"], **rows, best=list(d.get("best") or ()),
                   interrupted=bool(d.get("interrupted")), meshes_advised=d.get("meshes_advised", 0),
                   meshes_carried=d.get("meshes_carried", 0), usable_bytes=d.get("usable_bytes"))


# ---------------------------------------------------------------------------------------------------------------
# the model's shapes and the meshes they allow


def shapes_of(graph: OpGraph) -> Shapes:
    """The sizes each axis must divide, read off the graph."""
    first = next(iter(graph.inputs.values()), None)
    batch = first.shape[0] if first is not None and first.shape else None
    heads = kv = seq = None
    for op in graph:
        if op.type == "FlashAttentionScore":
            # head_num and input_layout are the primitive's inputs 10 and 16 (as its rule reads them)
            heads = heads or int(const_arg(op, 10, 0) or op.attrs.get("head_num", 0) or 0) or None
            q, k = (op.inputs[i].spec for i in (0, 1))
            code = const_arg(op, 16, op.attrs.get("input_layout", 0))
            layout = FA_LAYOUTS.get(code, code if isinstance(code, str) else "BSH")
            if q is not None and k is not None and heads:
                if layout == "BNSD":
                    kv, seq = k.shape[1], q.shape[2]
                elif layout in ("BSH", "SBH"):
                    kv = heads * k.shape[-1] // q.shape[-1]
                    seq = q.shape[1] if layout == "BSH" else q.shape[0]
                elif layout == "BSND":
                    kv, seq = k.shape[2], q.shape[1]
            break
    if seq is None and first is not None and len(first.shape) == 2 and first.dtype.startswith("int"):
        seq = first.shape[1]                 # token ids [batch, seq]
    experts = None
    for op in graph:
        for slot, name in op.params.items():
            spec = graph.params[name].spec
            if op.type in ("GroupedMatmul", "BatchMatMul") and len(spec.shape) == 3:
                experts = max(experts or 0, spec.shape[0])
    # a MindFormers MoE FFN's experts (its weights enter the collapsed operator through Casts and Reshapes)
    from .cost.experts import expert_params
    for n in expert_params(graph).values():
        experts = max(experts or 0, n)
    layers = len(main_layers(graph))          # the layers the stages split (DeepSeek's MTP layer rides on the last)
    widths = frozenset(d for p in graph.params.values() for d in p.spec.shape)
    return Shapes(batch, heads, kv, seq, experts, layers, widths)


def factorisations(n: int, axes=AXES, max_tp: int | None = None, max_pp: int | None = None):
    """Every ``{axis: size}`` whose sizes multiply to ``n``, in a fixed order (dp-major)."""
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    for sizes in itertools.product(divisors, repeat=len(axes)):
        if math.prod(sizes) != n:
            continue
        mesh = dict(zip(axes, sizes))
        if max_tp and mesh.get("tp", 1) > max_tp or max_pp and mesh.get("pp", 1) > max_pp:
            continue
        yield mesh


def devices_of(mesh: dict) -> int:
    """The devices of a sweep's mesh: its axes' sizes multiplied (a drawn ep adds none)."""
    return math.prod(mesh.get(a, 1) for a in AXES)


def drawn_ep_meshes(meshes: list[dict], experts: int | None) -> list[dict]:
    """Each mesh without an ep axis again with every ep MindFormers would draw from its data-, tensor- and
    context-parallel devices beyond its data parallel (an ep dividing the experts and those devices, not dp: one
    dividing dp is the ep axis' mesh), spelled as :class:`~strategist.vocab.mesh.Mesh` takes it."""
    out = []
    for mesh in meshes:
        span = mesh.get("dp", 1) * mesh.get("tp", 1) * mesh.get("cp", 1)
        if mesh.get("ep", 1) > 1 or not experts:
            continue
        for ep in range(2, span + 1):
            if span % ep or experts % ep or mesh.get("dp", 1) % ep == 0:
                continue
            drawn = dict(mesh, **{DRAWN_EP: ep})
            try:
                Mesh.parse(mesh_text(drawn))
            except StrategistError:                 # not drawn from whole innermost axes
                continue
            out.append(drawn)
    return out


def infeasible_reason(mesh: dict, s: Shapes, dataset_strategy="data_parallel") -> str:
    """Why ``mesh`` cannot run the model ("" if it can)."""
    dp, tp, cp, ep, pp = (mesh.get(a, 1) for a in AXES)
    if s.batch is not None and s.batch % dp:
        return f"dp={dp} does not divide the batch of {s.batch}"
    inner = devices_of(mesh) // pp
    if dataset_strategy == "data_parallel" and s.batch is not None and s.batch % inner:
        return (f"MindSpore's data_parallel dataset splits the batch of {s.batch} over all {inner} devices of a "
                f"stage, which it does not divide (--dataset-strategy full_batch, or a larger batch)")
    if tp > 1:
        if s.heads is not None and s.heads % tp:
            return f"tp={tp} does not divide the {s.heads} attention heads"
        if s.kv_heads is not None and s.kv_heads % tp and tp % s.kv_heads:
            return f"tp={tp} neither divides nor is a multiple of the {s.kv_heads} key/value heads"
        if s.heads is None and not any(w % tp == 0 for w in s.widths):
            return f"tp={tp} divides no weight dimension of the model"
    if cp > 1:
        if s.seq is None:
            return f"cp={cp}: the model has no attention sequence to split"
        if s.seq % cp:
            return f"cp={cp} does not divide the sequence of {s.seq}"
    if ep > 1:
        if s.experts is None:
            return f"ep={ep}: the model has no experts"
        if s.experts % ep:
            return f"ep={ep} does not divide the {s.experts} experts"
    if pp > 1 and s.layers < pp:
        return f"pp={pp} is more stages than the {s.layers} repeated layers"
    return ""


def balanced_offset(layers: int, pp: int) -> tuple[int, ...]:
    """MindFormers' ``model_config.offset`` for ``pp`` stages whose count does not divide ``layers``: each stage holds
    ``layers // pp``, the ``layers % pp`` left over one each on the middle stages, the last but one first (a later
    stage keeps fewer micro-batches' activations in flight; the last holds the head and the loss, the first the
    embedding), then on the first and the last; ``()`` where pp divides the layers.

    >>> balanced_offset(61, 8)
    (0, 0, 1, 1, 1, 1, 1, 0)
    >>> balanced_offset(7, 4)
    (1, 1, 1, 0)
    """
    rest = layers % pp if pp > 1 else 0
    if not rest:
        return ()
    order = list(range(pp - 2, 0, -1)) + [0, pp - 1]
    extra = set(order[:rest])
    return tuple(int(k in extra) for k in range(pp))


def mesh_text(mesh: dict) -> str:
    """The mesh as ``--mesh`` takes it: its axes above 1 (``dp=1`` for one device), pp last; a drawn ep after them,
    from the fewest innermost axes whose devices it divides (``dp=4,tp=2,ep=8@dp*tp``)."""
    shown = [f"{a}={mesh[a]}" for a in AXES if mesh.get(a, 1) > 1]
    ep = mesh.get(DRAWN_EP, 1)
    if ep > 1:
        shown.append(f"ep={ep}@{'*'.join(drawn_from([(a, mesh.get(a, 1)) for a in AXES if a != 'ep'], ep))}")
    return ",".join(shown) or "dp=1"


def inner_mesh(mesh: dict) -> Mesh:
    """The mesh of one pipeline stage: ``mesh`` without its pp axis (what each mesh is advised and propagated on)."""
    return Mesh.parse(mesh_text({a: v for a, v in mesh.items() if a != "pp"}))


def option_sets(mesh: dict, s: Shapes, micro_batches: tuple[int, ...] | None = None,
                dataset_strategy="data_parallel", optimizer_swap: bool = False,
                max_device_memory: float | None = None) -> list[StepOptions]:
    """The memory options tried on ``mesh``: recompute none/selective/full x the parallel optimizer (where dp > 1)
    x the micro-batch count (``micro_batches``, by default 1 without pp and pp, 2 pp, 4 pp ... up to the batch with
    it), each count one whose micro-batch still splits as the dataset strategy splits the batch; ``optimizer_swap``:
    the optimizer's states on the host in every one (MindFormers' AdamW ``swap``, as the model's config sets it);
    ``max_device_memory``: the GB every one must fit in (MindSpore's max_device_memory; None: the profile's)."""
    dp, pp = mesh.get("dp", 1), mesh.get("pp", 1)
    split = devices_of(mesh) // pp if dataset_strategy == "data_parallel" else dp
    if micro_batches:
        counts = tuple(micro_batches)
    elif pp == 1:
        counts = (1,)
    else:
        counts = tuple(pp << i for i in range(3 if s.batch is None else max(1, (s.batch // pp).bit_length())))
    counts = tuple(m for m in counts if m >= pp and (s.batch is None or (s.batch % m == 0 and (s.batch // m) % split == 0)))
    inner = devices_of(mesh) // pp
    # the parallel optimizer shards every weight over the devices holding the same slice of it: the dp replicas,
    # and for a weight tp leaves whole (a norm's), its tp peers too
    zero = (False, True) if inner > 1 else (False,)
    # fine-grained multi-copy (MindFormers' fine_grain_interleave) hides a layer's tp collectives behind its other copy
    copies = (1, 2) if mesh.get("tp", 1) > 1 else (1,)
    # a pp that does not divide the layers: the stages balanced by an offset (:func:`balanced_offset`)
    offset = balanced_offset(s.layers, pp) if s.layers else ()
    counts_of = tuple(s.layers // pp + x for x in offset) if offset else (s.layers // pp,) * pp if s.layers else ()
    # a context-parallel axis: FlashAttention's causal work as MindSpore splits it, and with its load balance
    balance = (False, True) if mesh.get("cp", 1) > 1 else (False,)
    return [StepOptions(pp=pp, micro_batches=m, recompute=r, optimizer_parallel=z, interleave=k, fa_load_balance=b,
                        offset=offset, optimizer_swap=optimizer_swap, max_device_memory=max_device_memory,
                        # MindFormers' selective recompute with its communication recompute of the norms, every layer
                        comm_recompute_layers=counts_of if r == "selective" and counts_of else ())
            for m in counts for r in RECOMPUTE for z in zero for k in copies for b in balance]


# ---------------------------------------------------------------------------------------------------------------
# one mesh: advise, then price every option set on the plan

@dataclass
class WorkerState:
    """What a worker advises and prices every mesh with: the whole graph, the graph the meshes are advised on (its
    first :data:`ADVISE_LAYERS` repeated layers), the hardware's and the rules' names, the dataset strategy, and
    the graph cut to other layer counts, once each (:meth:`truncated`)."""

    graph: OpGraph
    base: OpGraph
    hardware: str
    dataset_strategy: object
    rules: object
    #: the first of the graph's layers from which every later one is alike
    #: (:func:`~strategist.frontend.layers.alike_from`): a cut-down plan's first stage holds those before it
    alike: int | None = None
    #: the fewest layers a cut-down graph can hold (:meth:`truncated`): MindFormers' built layers where it grows
    #: them; None where it cannot be cut down (several Cell lists, not MindFormers' build)
    fewest: int | None = None
    #: the repeated layers :attr:`base` holds (one Cell list's)
    base_layers: int = 0
    cut: dict = field(default_factory=dict)
    views: dict = field(default_factory=dict)

    def advised(self, pp: int) -> OpGraph:
        """The graph a mesh of ``pp`` stages is advised on: :attr:`base`, each of its layers standing for its share
        of a stage (:func:`~strategist.advice.repeated.layer_repeats`); one view per stage count."""
        if self.base is self.graph:
            return self.base
        if pp not in self.views:
            from .advice.repeated import layer_repeats
            self.views[pp] = self.base.with_meta(layer_repeats=layer_repeats(self.base, self.graph, pp))
        return self.views[pp]

    @classmethod
    def of(cls, graph, hardware, dataset_strategy, rules, advise_layers=ADVISE_LAYERS) -> "WorkerState":
        base = truncate_layers(graph, advise_layers) if advise_layers else graph
        if base is graph and advise_layers and getattr(graph, "mf_base_graph", None) is not None:
            # layers that are not one Cell list of alike blocks (DeepSeek's dense layers first, its MTP layer):
            # the layers MindFormers built, as ``advise`` advises them
            base = graph.mf_base_graph
        if layer_block(graph)[0]:
            fewest = 1
        elif getattr(graph, "mf_base_graph", None) is not None:
            fewest = graph.mf_extracted_layers
        else:
            fewest = None
        return cls(graph, base, hardware, dataset_strategy, rules, alike_from(graph), fewest,
                   len(layer_block(base)[1]))

    def truncated(self, layers: int) -> OpGraph:
        """The graph cut down to its first ``layers`` repeated layers (the advised graph where it has as many): one
        Cell list of layers cut down (:func:`~strategist.frontend.layers.truncate_layers`), or the layers MindFormers
        built grown to that many (DeepSeek's, beside its MTP layer: :func:`~strategist.frontend.mindformers.rewrites.
        replicate_layers`, the graph a build of that many gives), with the whole graph's meta."""
        if self.base_layers == layers:
            return self.base
        if layers not in self.cut:
            if self.fewest == 1:                # one Cell list of layers: cut down
                self.cut[layers] = truncate_layers(self.graph, layers)
            else:
                from .frontend.mindformers.rewrites import replicate_layers
                base = self.graph.mf_base_graph
                grown = replicate_layers(base, layers)
                if grown is base:           # (as many as were built: a graph of its own, to take the whole one's meta)
                    grown = base.derived(list(base.ops))
                grown.meta = self.graph.meta
                self.cut[layers] = grown
        return self.cut[layers]



#: a pool or Ray worker process's state, set by its initialiser and read only by the task entry points below
#: (:func:`_mesh_task`, :func:`advise_mesh_task`): a process of the pool holds one sweep's graph between tasks
_WORKER: dict = {}


def _init_pool_worker(*state) -> None:
    """A worker process's set-up: out of the run's exit machinery (:func:`strategist.progress.detach_worker`), the
    sweep's state, and what it holds moved out of the cyclic collector's sight (``gc.freeze``): each estimate
    allocates a burst the collector would otherwise walk the whole graph for. The collector then runs once after
    each mesh (:func:`_mesh_task`), not when allocations trigger it."""
    progress.detach_worker()
    _WORKER.clear()
    _WORKER["worker"] = WorkerState.of(*state)
    gc.freeze()
    gc.disable()


def _mesh_task(task: "Task") -> dict:
    """:func:`advise_mesh` in a pool worker, then the mesh's cyclic garbage collected and what it leaves (the
    caches' new entries) moved out of later collections' sight: each mesh's collection walks only the objects it
    made."""
    out = advise_mesh(_WORKER["worker"], task)
    gc.collect()
    gc.freeze()
    return out


def mesh_plan(graph: OpGraph, base: OpGraph, mesh: Mesh, rules, hw, dataset_strategy):
    """(the advice on ``base``, the plan of ``graph`` it leads to, that plan's anchors): where ``base`` is ``graph`` cut down to its
    first layers (:func:`~strategist.frontend.layers.truncate_layers`), the anchors advised there copied onto every
    layer and propagated over the whole graph."""
    from .advice.advisor import advise
    advice = advise(base, mesh, rules=rules, hardware=hw, dataset_strategy=dataset_strategy)
    return advice, plan_on(graph, base, advice, mesh, hw, dataset_strategy), whole_anchors(advice, base, graph)


def whole_anchors(advice, base: OpGraph, graph: OpGraph) -> dict:
    """The advice on ``base`` as anchors of ``graph``: those of its last layer copied onto every later layer."""
    return copied_anchors(advice.anchors, base, graph)


def plan_on(g: OpGraph, base: OpGraph, advice, mesh: Mesh, hw, dataset_strategy):
    """The plan of ``g`` (``base``, the graph, or the graph cut down) under the advice's anchors copied onto its
    layers: the advice's own plan on ``base``."""
    from .propagate import propagate
    if g is base and advice.plan is not None:
        return advice.plan
    return propagate(g, mesh, whole_anchors(advice, base, g), use_model_strategies=False,
                     dataset_strategy=dataset_strategy, hardware=hw)


def advise_mesh_task(state: tuple, task: "Task") -> dict:
    """One mesh of the sweep in a process that may not have the sweep's state yet (a Ray task): ``state`` is
    ``(graph, hardware, dataset_strategy, rules)``, set up again whenever the task receives another state object
    (Ray may hand each task its own deserialised copy)."""
    if _WORKER.get("state") is not state:
        _init_pool_worker(*state)
        _WORKER["state"] = state
    return _mesh_task(task)


@dataclass
class Carried:
    """A family's advice carried onto another of its meshes: the anchors on the graph the mesh is advised on
    (:func:`strategist.advice.carry.carry_anchors`); their plan is propagated on the graphs priced
    (:func:`plan_on`), the advised graph's only where it is one of them."""

    anchors: dict
    plan: object = None


def _carried(carry, inner: Mesh) -> Carried | None:
    """``carry`` -- (the family's advised mesh, its anchors on the advised graph) -- on ``inner``; None where the
    anchors do not carry over (the mesh is then advised on its own, as where their plans fail)."""
    src, anchors = carry
    moved = carry_anchors(anchors, Mesh.parse(src), inner)
    return None if moved is None else Carried(moved)


class Task(NamedTuple):
    """One mesh for a worker (:func:`advise_mesh`): the mesh, its option sets, whether the advice is returned
    (``with_advice``), priced on the whole graph (``whole``), carried from its family (``carry``) or shared
    (``share``); carried anchors that price badly there are followed by the mesh's own advice (``own_if_bad``) or
    reported back (``{"bad_carry": why}``: the sweep seeds such meshes among themselves, :func:`sweep_graph`)."""

    mesh: dict
    options: list
    with_advice: bool = False
    whole: bool = False
    carry: tuple | None = None
    share: bool = False
    own_if_bad: bool = True


def advise_mesh(w: WorkerState, task: Task) -> dict:
    """The advice for ``task.mesh`` without its pp axis (or ``task.carry``'s, its family's, carried onto it) and each
    option set's step on its plan (``whole``: on the whole graph's plan, never extrapolated; ``share``: the
    advice's anchors returned too, for the family's other meshes)."""
    from .advice.advisor import advise, load_rules
    from .files.hardware import load_hardware
    from .report.render import advice_dict
    mesh, options, with_advice, whole, carry, share, own_if_bad = task
    graph, base = w.graph, w.base
    inner = inner_mesh(mesh)
    hw = load_hardware(w.hardware)
    # one collection after the mesh's advice and options, not one per propagation and estimate
    with no_cyclic_gc():
        try:
            advice = _carried(carry, inner) if carry else None
            own = advice is None
            if own:
                advice = advise(w.advised(mesh.get("pp", 1)), inner, rules=load_rules(w.rules), hardware=hw,
                                dataset_strategy=w.dataset_strategy)
            anchors = whole_anchors(advice, base, graph)
            sizes, plans, stand_in = pricing_plans(w, advice, inner, mesh.get("pp", 1), options, hw, whole)
        except StrategistError as err:
            if not own and not own_if_bad:
                return {"bad_carry": str(err).splitlines()[0]}
            if not own:          # the family's anchors priced badly here: the mesh's own advice instead
                return advise_mesh(w, task._replace(carry=None))
            return {"error": str(err).splitlines()[0], "own": True}
        # the load balance priced only where a FlashAttention's query sequence is split: elsewhere it is the same step
        balance = any(splits_attention(p) for p in plans.values())
        priced = iter(_price_options(sizes, plans, [o for o in options if balance or not o.fa_load_balance], stand_in))
        rows = [next(priced) if balance or not o.fa_load_balance else {"skip": True} for o in options]
    out = {"anchors": len(anchors), "rows": rows, "own": own}
    if share and own:
        out["shared"] = (str(inner), advice.anchors)
    if with_advice:
        out["advice"] = advice_dict(advice)
        if base is not graph:
            layers = len(main_layers(graph))
            out["advice"]["advised_on"] = (f"the first {len(main_layers(base))} of the {layers} repeated "
                                           f"layers; the anchors of the last one copied onto the others "
                                           f"({len(anchors)} anchors on the whole graph)")
    return out


def pricing_plans(w: WorkerState, advice, inner: Mesh, pp: int, options: list[StepOptions], hw,
                  whole: bool = False) -> tuple[tuple[int, ...], dict, bool]:
    """(the repeated layers of each pipeline stage, ``{layers per stage: plan}``, whether the plans stand in for the
    pipeline's stages): the plans a mesh's options are priced on -- the whole graph's (keyed None: priced with the
    options as given); or, where every layer takes the same options, the plans of the graph cut down to three
    stages of equal layers (the first, one middle stage and the last standing for a deeper pipeline's:
    :func:`~strategist.cost.step.held_stages`), of :data:`PRICE_LAYERS` layers per stage where its stages hold more,
    else of its stages' own counts, the advice's anchors copied onto every layer of each. Each stage is then read at
    its own count (:mod:`strategist.cost.extrapolate`): an offset's uneven stages too."""
    graph, base = w.graph, w.base
    layers = len(main_layers(graph))
    offsets = {o.offset for o in options}
    try:
        sizes = tuple(stage_sizes(layers, pp, next(iter(offsets)) or None)) if layers and len(offsets) == 1 else ()
    except InputSpecError:
        sizes = ()
    if not options:
        return sizes, {}, False
    held = min(pp, STAND_IN_STAGES)
    first = w.alike if not whole and base is not graph and sizes and w.fewest else None
    # the first stage holds the layers unlike the rest (DeepSeek's dense layers, its first MoE layer) in the plans
    # and in the pipeline; the plans hold no fewer layers than the graph can be cut to
    at = _price_at(sizes, max(first or 0, -(-w.fewest // held))) if first is not None and sizes[0] >= first else []
    if not at or sum(at) * held >= layers or not all(_every_layer(o, sizes) for o in options):
        return sizes, {None: plan_on(graph, base, advice, inner, hw, w.dataset_strategy)}, False
    return sizes, {k: plan_on(graph if k * held == layers else w.truncated(k * held), base, advice, inner, hw,
                              w.dataset_strategy) for k in at}, held < pp


def _price_at(sizes: tuple[int, ...], least: int = 0) -> list[int]:
    """The layers per stage of the plans stages of ``sizes`` layers are read off, each at least ``least``: their one
    count; or the two counts of an offset's stages (or of one more layer); or :data:`PRICE_LAYERS` (or ``least`` and
    one more) where a stage holds more.

    >>> _price_at((8, 8)), _price_at((2, 3, 3, 2)), _price_at((1, 2, 1)), _price_at((3, 4, 4), least=4)
    ([2, 3], [2, 3], [1, 2], [4, 5])
    """
    ka, kb = PRICE_LAYERS
    least = max(least, 1)
    lo, hi = min(sizes), max(sizes)
    if lo == hi and hi <= max(kb, least):
        return [max(hi, least)] if hi >= least else [least, least + 1]
    if hi <= max(kb, least + 1):
        a = max(lo, least)
        return [a, hi] if hi > a else [a, a + 1]
    a = max(ka, least)
    return [a, a + 1]


def _every_layer(opts: StepOptions, sizes: tuple[int, ...]) -> bool:
    """Whether each stage's recompute counts in ``opts`` are all its layers or none (what a plan of fewer layers per
    stage reads as its own)."""
    return all(c in (0, n) for v in (opts.comm_recompute_layers, opts.select_layers) if v for c, n in zip(v, sizes))


def _at_layers(opts: StepOptions, k: int | None, sizes: tuple[int, ...]) -> StepOptions:
    """``opts`` on a plan of ``k`` layers per stage (None: the whole graph's, ``opts`` itself): its every-layer
    recompute counts counting ``k``, its stages equal (no offset)."""
    if k is None:
        return opts
    def scaled(v):
        return tuple(k if c == n else c for c, n in zip(v, sizes))
    return dataclasses.replace(opts, comm_recompute_layers=scaled(opts.comm_recompute_layers),
                               select_layers=scaled(opts.select_layers), offset=())


def _price_options(sizes: tuple[int, ...], plans: dict, options: list[StepOptions], stand_in: bool = False):
    """Each option set's row: its memory first, and its step where it fits; on the whole graph's plan, or
    read off one or two cut-down plans at each stage's own layers (:func:`pricing_plans`; ``stand_in``: theirs are
    three stages standing for the pipeline's)."""
    if not plans:
        return
    if len(plans) == 1 and (None in plans or all(n == next(iter(plans)) for n in sizes)):
        yield from _priced(*plans.items(), options, sizes, stand_in)
        return
    (ka, pa), (kb, pb) = sorted(plans.items())
    for opts in options:
        oa, ob = _at_layers(opts, ka, sizes), _at_layers(opts, kb, sizes)
        try:
            mem = memory_at(stage_memories(pa, oa, stand_in), stage_memories(pb, ob, stand_in), ka, kb, sizes)
            if not mem["fits"]:
                yield {"step_s": None, "throughput": {}, "memory": mem["total"], "capacity": mem["capacity"],
                       "fits": False, "exposed_s": None}
                continue
            est = step_at(estimate_with(pa, oa, stand_in), estimate_with(pb, ob, stand_in), ka, kb, sizes)
        except StrategistError as err:
            yield {"error": str(err).splitlines()[0]}
            continue
        yield {"step_s": est["step_s"], "throughput": dict(est["throughput"]), "memory": mem["total"],
               "capacity": mem["capacity"], "fits": True, "exposed_s": est["communication_not_overlapped_s"]}


def _priced(at: tuple, options: list[StepOptions], sizes: tuple[int, ...], stand_in: bool = False):
    """Each option set's row on ``at``'s plan (of ``at[0]`` layers per stage, or the whole graph's): its memory
    first, and its step where it fits."""
    k, plan = at
    for opts in options:
        opts = _at_layers(opts, k, sizes)
        try:
            mem = memory_with(plan, opts, stand_in)
            if not mem.get("fits"):        # out of memory: not scheduled, its memory says by how much
                yield {"step_s": None, "throughput": {}, "memory": mem.get("total"), "capacity": mem.get("capacity"),
                       "fits": False, "exposed_s": None}
                continue
            est = estimate_with(plan, opts, stand_in)
        except StrategistError as err:
            yield {"error": str(err).splitlines()[0]}
            continue
        sched = est.schedule            # (its memory is ``mem``, read above: the estimate's, not computed again)
        yield {"step_s": est.step_s, "throughput": dict(est.throughput), "memory": mem.get("total"),
               "capacity": mem.get("capacity"), "fits": bool(mem.get("fits")),
               "exposed_s": sched.get("communication_not_overlapped_s")}


def _options_dict(o: StepOptions) -> dict:
    return {"recompute": o.recompute, "optimizer_parallel": bool(o.optimizer_parallel),
            "micro_batches": o.micro_batches, "interleave": o.interleave, "fa_load_balance": o.fa_load_balance,
            **({"offset": list(o.offset)} if o.offset else {})}


# ---------------------------------------------------------------------------------------------------------------
# the sweep


def sweep_graph(graph: OpGraph, devices: int, *, hardware: str = "atlas-800t-a2", axes=AXES,
                max_tp: int | None = None, max_pp: int | None = None, dataset_strategy="data_parallel",
                rules=None, micro_batches: tuple[int, ...] | None = None, workers: int | None = None,
                best: int = 3, ray: str | None = None, sequence_parallel: bool = False,
                exhaustive: bool = False, refine: int = REFINE, optimizer_swap: bool = False,
                max_device_memory: float | None = None) -> SweepResult:
    """Sweep ``graph`` over ``devices`` (the module's doc). ``workers``: processes for the advice (default: every core;
    1 runs here); ``ray``: a Ray cluster's address or ``local`` (:mod:`.sweep_ray`); ``sequence_parallel``: every tp
    mesh advised with it where the layout allows (``options`` says where); ``exhaustive``: every mesh advised on its
    own, not each family's one and the ``refine`` fastest; ``optimizer_swap``, ``max_device_memory``: option_sets'."""
    if not isinstance(devices, int) or devices < 1:
        raise InputSpecError(f"bad --devices {devices!r}: give a whole number of devices >= 1")
    bad = [a for a in axes if a not in AXES]
    if bad:
        raise InputSpecError(f"bad --axes {','.join(axes)}: axes are {', '.join(AXES)}")
    shapes = shapes_of(graph)
    if sequence_parallel:
        graph = graph.with_meta(sequence_parallel=True)     # a view: the caller's graph left as it is
    result = SweepResult(graph.model, devices, hardware)
    todo = []
    meshes = list(factorisations(devices, tuple(a for a in AXES if a in axes), max_tp, max_pp))
    if "ep" in axes:
        from .cost.experts import expert_params
        meshes += drawn_ep_meshes(meshes, shapes.experts if expert_params(graph) else None)
    for mesh in meshes:
        why = infeasible_reason(mesh, shapes, dataset_strategy)
        opts = option_sets(mesh, shapes, micro_batches, dataset_strategy, optimizer_swap, max_device_memory)
        if not why and not opts:
            why = (f"no micro-batch count of at least pp={mesh.get('pp', 1)} splits the batch of {shapes.batch} "
                   f"as the dataset strategy needs")
        if why:
            result.infeasible.append(Config(mesh_text(mesh), {}, reason=why))
        else:
            todo.append((mesh, opts))
    workers = workers or min(len(todo), os.cpu_count() or 1) or 1
    if workers > 1 or ray:
        _prepare_front_end(graph, todo)
    results: dict[int, dict] = {}
    seeds = family_seeds(todo, exhaustive)
    option_of = None
    try:
        with progress.interrupt_raises(), \
                _executor(graph, hardware, dataset_strategy, rules, workers, ray) as run:   # Ctrl-C: rank so far
            _price_meshes(todo, seeds, results, run, refine)
            option_of = _rank(result, todo, results, seeds, graph)
            _advise_best(result, option_of, best, run)      # by the workers, whose caches hold those meshes
    except KeyboardInterrupt:
        result.interrupted = True
    result.meshes_advised = sum(1 for out in results.values() if out.get("own"))
    result.meshes_carried = sum(1 for out in results.values() if not out.get("own") and "bad_carry" not in out)
    if option_of is None:
        _rank(result, todo, results, seeds, graph)
    return result


def _price_meshes(todo, seeds: dict[int, int], results: dict, run, refine: int) -> None:
    """Every mesh of ``todo`` advised or priced into ``results`` on ``run``'s workers, in rounds: each family's
    advised mesh (``seeds``), then its other meshes with those anchors (those the anchors do not carry to, or price
    badly on, seeded anew among themselves: ``seeds`` updated), then the ``refine`` fastest on their own."""
    def run_round(ks, tasks, label):
        for j, out in progress.bar(run(tasks), label, total=len(ks)):
            results[ks[j]] = out
    # each family's advised mesh, then its other meshes with those anchors, then the fastest on their own
    first = by_devices(todo, set(seeds.values()))
    carried_to = {s for k, s in seeds.items() if k != s}        # the advised meshes with others to price
    run_round(first, [Task(*todo[k], share=k in carried_to) for k in first], "sweep: advising each family")
    rest = by_devices(todo, (k for k in range(len(todo)) if k not in results))
    # the meshes the family's anchors do not carry to (a size of the seed's that names no one set of its
    # axes): their own family seeds, advised beside the carried meshes, their other meshes carried after
    again = reseeded(todo, rest, seeds, results)
    later = [k for k in rest if again.get(k, k) != k]
    now = [k for k in rest if again.get(k, k) == k]
    shared = {again[k] for k in later}
    # a carried mesh whose anchors price badly (a split its dimension does not divide) is reported back
    tasks = [Task(*todo[k], carry=None if k in again else results[seeds[k]].get("shared"), share=k in shared,
                  own_if_bad=False) for k in now]
    run_round(now, tasks, "sweep: pricing their meshes")
    seeds.update({k: again[k] for k in later})
    # ... and seeded anew among the others of its kind (reseeded's rule), advised beside the carried again
    bad = [k for k in now if "bad_carry" in results[k]]
    bad_seeds = seeded_among(todo, bad)
    first = by_devices(todo, set(bad_seeds.values()))
    shared = {s for k, s in bad_seeds.items() if k != s}
    tasks = [Task(*todo[k], carry=results[seeds[k]].get("shared")) for k in later] + \
        [Task(*todo[k], share=k in shared) for k in first]
    run_round(later + first, tasks, "sweep: pricing their meshes (carried again)")
    seeds.update(bad_seeds)
    last = [k for k in bad if bad_seeds[k] != k]
    tasks = [Task(*todo[k], carry=results[bad_seeds[k]].get("shared")) for k in last]
    run_round(last, tasks, "sweep: pricing the meshes their anchors priced badly on")
    for _round in range(len(todo)):
        redo = [k for k in fastest_meshes(todo, results, refine) if not results[k].get("own")]
        if not redo:
            break
        run_round(redo, [Task(*todo[k]) for k in redo], "sweep: advising the fastest")


def by_devices(todo, ks) -> list[int]:
    """The indices ``ks`` of ``todo``'s meshes in the order the workers take them: by their stage's device count,
    largest first (a worker's caches of one count serve its next mesh of that count), then as listed."""
    return sorted(ks, key=lambda k: (-inner_mesh(todo[k][0]).size, k))


def family_of(mesh: dict) -> tuple:
    """A mesh's family: its tp, cp and ep axes (the meshes of one family differ in dp and pp alone, and in a drawn
    ep, which propagation never sees: it is priced, not placed)."""
    return tuple(mesh.get(a, 1) for a in ("tp", "cp", "ep"))


def family_seeds(todo, exhaustive: bool = False) -> dict[int, int]:
    """``{index: the index of the mesh advised for its family}`` over ``todo``'s meshes: the family's middle mesh by
    pp, among those with dp > 1 (dp stays an axis of every mesh the anchors are carried to) and, first, those
    whose axis sizes tell the sets with dp from those without (:func:`~strategist.advice.carry.told_apart_from_dp`:
    the family's meshes differ in dp alone); each mesh its own with ``exhaustive``."""
    if exhaustive:
        return {k: k for k in range(len(todo))}
    families: dict = {}
    for k, (mesh, _opts) in enumerate(todo):
        families.setdefault(family_of(mesh), []).append(k)
    seeds = {}
    for members in families.values():
        members.sort(key=lambda k: todo[k][0].get("pp", 1))
        inner = [inner_mesh(todo[k][0]) for k in members]
        pick = [k for k, m in zip(members, inner) if m.get("dp") > 1 and told_apart_from_dp(m)] or \
            [k for k, m in zip(members, inner) if m.get("dp") > 1] or members
        seed = pick[len(pick) // 2]
        seeds.update({k: seed for k in members})
    return seeds


def reseeded(todo, rest, seeds: dict[int, int], results: dict) -> dict[int, int]:
    """``{index: its new seed}`` for the meshes of ``rest`` their family's anchors do not carry to
    (:func:`~strategist.advice.carry.carry_anchors` fails on a size the seed's axes do not name), seeded anew among
    themselves (:func:`family_seeds`): each such mesh is then advised on its own once per family and dp, not once
    per mesh. A mesh whose seed's advice failed is left out (advised on its own)."""
    stuck = []
    for k in rest:
        carry = results[seeds[k]].get("shared")
        if carry is not None and _carried(carry, inner_mesh(todo[k][0])) is None:
            stuck.append(k)
    return seeded_among(todo, stuck)


def seeded_among(todo, ks: list[int]) -> dict[int, int]:
    """``{index: its seed}`` for the meshes ``ks`` of ``todo``, seeded among themselves (:func:`family_seeds`)."""
    return {ks[i]: ks[j] for i, j in family_seeds([todo[k] for k in ks]).items()}


def fastest_meshes(todo, results: dict, n: int) -> list[int]:
    """The indices of the ``n`` meshes whose fastest fitting configuration is fastest, equal steps ordered as the
    ranking orders them (:func:`_rank_key`: fewer axes besides dp first)."""
    best = []
    for k, out in results.items():
        steps = [r["step_s"] for r in out.get("rows", ()) if r.get("fits") and r.get("step_s") is not None]
        if steps:
            text = mesh_text(todo[k][0])
            best.append((round(min(steps), 12), _axes_besides_dp(text), text, k))
    return [k for *_key, k in sorted(best)[:n]]


@contextlib.contextmanager
def _executor(graph, hardware, dataset_strategy, rules, workers, ray):
    """``run(tasks)``: ``(position, result)`` of each :class:`Task` as it completes -- in
    this process (one worker, in order), on a process pool kept for the sweep's rounds, or as Ray tasks."""
    state = (graph, hardware, dataset_strategy, rules)
    if ray:
        with ray_runner(ray, state, advise_mesh_task) as run:
            yield run
        return
    if workers <= 1:
        w = WorkerState.of(*state)
        yield lambda tasks: ((j, advise_mesh(w, t)) for j, t in enumerate(tasks))
        return
    ctx = multiprocessing.get_context("fork")
    pool = cf.ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_pool_worker, initargs=state)
    pids: list[int] = []

    def run(tasks):
        futures = {pool.submit(_mesh_task, t): j for j, t in enumerate(tasks)}
        for pid in [p.pid for p in (getattr(pool, "_processes", None) or {}).values()]:
            if pid not in pids:           # killed with the run if it is interrupted on its way out
                pids.append(pid)
                progress.add_worker(pid)
        for f in cf.as_completed(futures):
            yield futures[f], f.result()
    try:
        yield run
    except BaseException:                          # Ctrl-C: the meshes still being advised are not waited for
        for proc in list((getattr(pool, "_processes", None) or {}).values()):
            proc.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        for pid in pids:
            progress.remove_worker(pid)
    pool.shutdown(wait=True)


def _prepare_front_end(graph: OpGraph, todo) -> None:
    """What the search asks the front end for per mesh, asked once here before the workers start: a MindFormers
    model's loss configures its own primitives at each mesh (read from the model built there), a build the workers
    would otherwise repeat each for itself, with MindSpore forked in a state it does not expect."""
    if graph.mf_options is None or not graph.parallel_only:
        return
    from .frontend.mindformers import loss_own_strategies
    for mesh in sorted({str(inner_mesh(m)) for m, _opts in todo}):
        loss_own_strategies(graph, Mesh.parse(mesh))


def _rank(result: SweepResult, todo, results, seeds, graph) -> dict:
    """``result``'s ranked, out-of-memory and infeasible configurations from each mesh's rows, ranked; returns
    ``{id(configuration): (mesh, options)}``."""
    option_of: dict = {}
    ranked, unfit, infeasible = [], [], []
    for k, (mesh, opts) in enumerate(todo):
        out = results.get(k)
        if out is None or "bad_carry" in out:       # (not priced yet, or not advised yet after its family's anchors)
            infeasible.append(Config(mesh_text(mesh), {}, reason="not run (the sweep was interrupted)"))
            continue
        if "error" in out:
            infeasible.append(Config(mesh_text(mesh), {}, reason=out["error"]))
            continue
        sp = graph.sequence_parallel and uses_sequence_parallel(graph, inner_mesh(mesh))
        source = mesh_text(mesh) if out.get("own") else mesh_text(todo[seeds[k]][0])
        for o, row in zip(opts, out["rows"]):
            if row.get("skip"):
                continue
            c = Config(mesh_text(mesh), dict(_options_dict(o), sequence_parallel=sp), anchors=out["anchors"],
                       anchors_from=source)
            option_of[id(c)] = (mesh, o)
            if "error" in row:
                c.reason = row["error"]
                infeasible.append(c)
                continue
            _fill(c, row)
            result.usable_bytes = row.get("capacity") or result.usable_bytes
            if c.fits:
                ranked.append(c)
            else:
                over = (row["memory"] or 0) - (row["capacity"] or 0)
                c.reason = f"out of memory by {over / 2**30:.1f} GiB per device"
                unfit.append(c)
    ranked.sort(key=_rank_key)
    unfit.sort(key=lambda c: (c.memory_bytes or 0, c.mesh))
    result.ranked, result.unfit = ranked, unfit
    result.infeasible.extend(infeasible)
    return option_of


def _axes_besides_dp(mesh: str) -> int:
    """How many axes ``mesh`` (as :func:`mesh_text` writes it) has besides dp: the plainer of two equal steps has
    fewer."""
    return sum(1 for a in mesh.split(",") if a.split("=")[0] != "dp")


def _rank_key(c: Config) -> tuple:
    # equal steps (a plan MindSpore lays out alike under two meshes' names: no anchor, the dataset split over
    # every device) rank the plainer configuration first: fewer axes besides dp, then less memory
    return (round(c.step_s, 12), _axes_besides_dp(c.mesh), c.memory_bytes or 0, c.mesh,
            c.options["micro_batches"], RECOMPUTE.index(c.options["recompute"]), c.options["optimizer_parallel"],
            c.options["interleave"], c.options.get("fa_load_balance", False))


#: the configurations of a best mesh priced again on its whole graph beside its fastest: those whose step (read off
#: cut-down plans, :func:`pricing_plans`) is within this fraction of the fastest's, which the whole graph's prices
#: could put ahead of it
REPRICE_WITHIN = 0.10


def _advise_best(result: SweepResult, option_of: dict, best: int, run) -> None:
    """The fastest configuration of each of the ``best`` fastest meshes advised again with its advice reported, and
    priced on the whole graph's plan (as ``advise`` prices it), with the mesh's other fitting configurations within
    :data:`REPRICE_WITHIN` of its step (so that the mesh's own ranking is the whole graph's), on ``run``'s
    workers; the ranking sorted again."""
    seen: set = set()
    firsts = [c for c in result.ranked if c.mesh not in seen and not seen.add(c.mesh)][:best]
    if not firsts:
        return
    try:
        tasks, members = [], []
        for c in firsts:
            near = [c] + [x for x in result.ranked if x.mesh == c.mesh and x is not c
                          and x.step_s <= c.step_s * (1 + REPRICE_WITHIN)]
            tasks.append(Task(option_of[id(c)][0], [option_of[id(x)][1] for x in near], with_advice=True,
                              whole=True))
            members.append(near)
        outs = dict(run(tasks))
        for j, c in enumerate(firsts):
            out = outs[j]
            for x, row in zip(members[j], out.get("rows") or ()):
                if row.get("fits"):
                    _fill(x, row)
            if "advice" in out:         # (the mesh's advice, one for all its configurations; its fastest now)
                top = min(members[j], key=_rank_key)
                result.best.append({"mesh": c.mesh, "options": top.options, "advice": out["advice"],
                                    "parallel_config": parallel_config(top)})
    finally:
        result.ranked.sort(key=_rank_key)


def _fill(c: Config, row: dict) -> None:
    """``c``'s figures from its priced row."""
    c.step_s, c.memory_bytes, c.exposed_s, c.fits = row["step_s"], row["memory"], row["exposed_s"], row["fits"]
    c.tokens_per_s_per_device = row["throughput"].get("tokens_per_s_per_device")
    c.samples_per_s = row["throughput"].get("samples_per_s")


def parallel_config(c: Config) -> dict:
    """The MindSpore / MindFormers settings of a configuration: ``parallel_config`` and the context keys."""
    m = Mesh.parse(c.mesh)
    mesh = {a: m.get(a) for a in AXES}
    o = c.options
    # MindFormers' data_parallel counts an ep axis' devices (ep inside data parallel); a drawn ep adds none
    return {"mindformers": {"parallel_config": {"data_parallel": mesh["dp"] * mesh["ep"], "model_parallel": mesh["tp"],
                                                "context_parallel": mesh["cp"], "expert_parallel": m.ways("ep"),
                                                "pipeline_stage": mesh["pp"], "micro_batch_num": o["micro_batches"],
                                                "use_seq_parallel": bool(o.get("sequence_parallel"))},
                            "recompute_config": {"recompute": o["recompute"] == "full",
                                                 "select_recompute": o["recompute"] == "selective",
                                                 "select_comm_recompute": o["recompute"] == "selective"},
                            "model_config": {"fine_grain_interleave": o.get("interleave", 1),
                                             **({"offset": o["offset"]} if o.get("offset") else {})},
                            "parallel": {"enable_parallel_optimizer": o["optimizer_parallel"]}},
            "mindspore": {"pipeline_stages": mesh["pp"], "enable_parallel_optimizer": o["optimizer_parallel"],
                          **({"parallel_speed_up_json": {"enable_flash_attention_load_balance": True}}
                             if o.get("fa_load_balance") else {})}}


def sweep_model(model: str, devices: int, *, inputs=None, kwargs=None, training: bool = True, **kw) -> SweepResult:
    """``strategist sweep`` as a call: extract ``model`` once, then :func:`sweep_graph`."""
    graph = load_graph(model, inputs, kwargs, training=training)
    return sweep_graph(graph, devices, **kw)
