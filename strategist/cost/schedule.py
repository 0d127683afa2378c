"""One device's training step as streams, not a sum: a compute stream running the operators in graph order
(forward, then backward in reverse), a communication stream for the collectives the next operator waits on
(redistributions, an operator's own partial-sum reduction, their transposes), a data-parallel stream for the
gradient reductions in MindSpore's gradient-fusion buckets, and the optimizer-parallel AllGathers ahead of
the forward. An operator starts when the compute stream is free and its inputs have arrived; a collective
starts when its stream is free and its input is computed. So a collective the next operator needs is
exposed unless other independent work runs meanwhile. The gradient reductions run after the backward and each
weight's AllGather right before its user, the compute stream waiting, as MindSpore runs them by default; with its
overlap options (:class:`Overlap`) a gradient reduction overlaps the rest of the backward and a weight's AllGather
the forward before it. The step is the makespan. Linear in operators and edges.

:func:`summarize` reads the intervals in msprof-analyze's cluster-analysis vocabulary: Computing,
Communication (not overlapped), Overlapped, Free; per layer and in total."""
from __future__ import annotations

from dataclasses import dataclass, field

#: MindSpore's gradient AllReduce fusion in its "auto" mode: buckets of this many bytes (comm_fusion's
#: default threshold, 64 MB)
FUSION_BYTES = 64 * 2**20

KEYS = ("computing_s", "communication_not_overlapped_s", "overlapped_s", "free_s", "bubble_s", "step_s")


@dataclass
class Item:
    """One operator as the schedule sees it (times for one micro-batch)."""

    name: str
    layer: str
    fwd: float
    bwd: float                      # backward compute (recompute's forward again included)
    grad: bool
    deps: tuple                     # ((producer name or None, output index, fwd comm s, bwd comm s), ...)
    own_fwd: float = 0.0            # its own collective after it (a partial sum's AllReduce), forward
    own_bwd: float = 0.0            # that collective's transpose, before its backward
    recompute_comm: float = 0.0     # forward collectives run again when its forward is recomputed
    prefetch: float = 0.0           # optimizer-parallel AllGather of its weights, before its forward
    mirrors: tuple = ()             # ((group key, kind, n, intra, bytes), ...) gradient reductions
    op: str = ""                    # the graph operator (a fine-grained copy's is its original's)


@dataclass(frozen=True)
class Overlap:
    """Which data-parallel collectives MindSpore runs beside computation: the gradient reductions beside the
    backward's input-gradient operators (``grad_reduce``: ``parallel_speed_up_json``'s
    ``grad_computation_allreduce_overlap``) and the parallel optimizer's weight AllGathers beside the forward
    operators before their users (``param_gather``: ``computation_allgather_overlap``). MindSpore's default is
    neither (mindspore.parallel.auto_parallel.AutoParallel.transformer_opt's documentation: both "Default:
    False"): the reductions run after the backward, each AllGather before its user, the compute stream waiting."""

    grad_reduce: bool = True
    param_gather: bool = True


def _split_buckets(b: list) -> list[list]:
    """A group's gradient bytes ``b`` as MindSpore's fusion cuts them: buckets of :data:`FUSION_BYTES`, the rest in
    the last."""
    nb, kind, n, intra, layer, last = b
    full, rest = divmod(nb, FUSION_BYTES)
    sizes = [float(FUSION_BYTES)] * int(full) + ([rest] if rest else [])
    return [[x, kind, n, intra, layer, last] for x in sizes]


@dataclass
class Timeline:
    compute: list = field(default_factory=list)     # (start, end, layer), in order
    comm: list = field(default_factory=list)        # (start, end, layer, operator, what), any stream
    end: float = 0.0
    forward_end: float = 0.0


def simulate(items: list[Item], prof, *, grads: bool, optimizer_s: float = 0.0, extra_exposed=(),
             overlap: Overlap | None = None) -> Timeline:
    """The schedule of one micro-batch's forward and backward over ``items`` (graph order); with ``grads``
    the gradient reductions in fusion buckets and the optimizer step after them. ``extra_exposed``:
    ((phase, seconds, layer), ...) collectives every micro-batch waits on (pipeline send/receive). ``overlap``:
    which data-parallel collectives run beside computation (:class:`Overlap`; None: both)."""
    # size: the schedule's event loop: streams, ready lists and clocks change together at each event
    overlap = overlap or Overlap()
    tl = Timeline()
    tc = tcomm = tpre = 0.0
    ready: dict = {}
    for ph, secs, layer in extra_exposed:
        if ph == "forward" and secs:
            tl.comm.append((tc, tc + secs, layer, "", "p2p"))
            tc = tcomm = tc + secs
    for it in items:
        start = tc
        for src, j, fc, _bc in it.deps:
            t = ready.get(src, 0.0) if src is not None else 0.0
            if fc:
                s = max(tcomm, t)
                tcomm = s + fc
                tl.comm.append((s, tcomm, it.layer, it.op, "input"))
                t = tcomm
            start = max(start, t)
        if it.prefetch and grads:
            s = tpre if overlap.param_gather else max(tpre, tc)
            tpre = s + it.prefetch
            tl.comm.append((s, tpre, it.layer, it.op, "prefetch"))
            start = max(start, tpre)
        end = start + it.fwd
        if it.fwd:
            tl.compute.append((start, end, it.layer))
        tc = end
        out = end
        if it.own_fwd:
            s = max(tcomm, end)
            tcomm = s + it.own_fwd
            tl.comm.append((s, tcomm, it.layer, it.op, "output"))
            out = tcomm
        ready[it.name] = out
    tl.forward_end = tc
    for ph, secs, layer in extra_exposed:
        if ph == "backward" and secs:
            tc = max(tc, tcomm)
            tl.comm.append((tc, tc + secs, layer, "", "p2p"))
            tc = tcomm = tc + secs
    gready: dict = {}
    buckets: dict = {}          # group key -> [bytes, kind, n, intra, layer]
    tdp = 0.0
    for it in reversed(items):
        if not it.grad:
            continue
        start = max(tc, gready.get(it.name, 0.0))
        if it.recompute_comm:
            s = max(tcomm, start)
            tcomm = s + it.recompute_comm
            tl.comm.append((s, tcomm, it.layer, it.op, "recompute"))
        if it.own_bwd:
            s = max(tcomm, start)
            tcomm = s + it.own_bwd
            tl.comm.append((s, tcomm, it.layer, it.op, "output gradient"))
            start = tcomm
        end = start + it.bwd
        if it.bwd:
            tl.compute.append((start, end, it.layer))
        tc = end
        for src, _j, _fc, bc in it.deps:
            if src is None:
                continue
            t = end
            if bc:
                s = max(tcomm, end)
                tcomm = s + bc
                tl.comm.append((s, tcomm, it.layer, it.op, "input gradient"))
                t = tcomm
            if t > gready.get(src, 0.0):
                gready[src] = t
        if grads:
            for key, kind, n, intra, nb in it.mirrors:
                b = buckets.setdefault(key, [0.0, kind, n, intra, it.layer, 0.0])
                b[0] += nb
                b[5] = end
                if b[0] >= FUSION_BYTES and overlap.grad_reduce:
                    s = max(tdp, end)
                    tdp = s + prof.collective_seconds(kind, n, b[0], intra)
                    tl.comm.append((s, tdp, b[4], "", "gradient"))
                    del buckets[key]
    # the last bucket of each group: launched once its last gradient is computed; without the overlap, every
    # bucket after the backward, in the order of their last gradients
    if not overlap.grad_reduce:
        buckets = {k: _split_buckets(b) for k, b in buckets.items()}
        buckets = {(k, i): b for k, bs in buckets.items() for i, b in enumerate(bs)}
    for nb, kind, n, intra, layer, last in sorted(buckets.values(), key=lambda b: b[5]):
        s = max(tdp, last if overlap.grad_reduce else tc)
        tdp = s + prof.collective_seconds(kind, n, nb, intra)
        tl.comm.append((s, tdp, layer, "", "gradient"))
    end = max(tc, tcomm, tdp if grads else 0.0)
    if grads and optimizer_s:
        tl.compute.append((end, end + optimizer_s, "(optimizer)"))
        end += optimizer_s
    tl.end = end
    return tl


def stage_signature(items: list[Item], extra_exposed=(), optimizer_s: float = 0.0) -> tuple:
    """What :func:`simulate` of ``items`` depends on besides the names and layers it labels the intervals with:
    every item's times, its dependencies (as positions among ``items``; a producer outside them is ready at 0),
    its gradient reductions, and the collectives every micro-batch waits on. Two stages of the same signature
    have the same timelines but for those labels."""
    at = {it.name: k for k, it in enumerate(items)}
    rows = tuple((it.fwd, it.bwd, it.grad, tuple((None if src is None else at.get(src, -1), j, fc, bc)
                                                 for src, j, fc, bc in it.deps),
                  it.own_fwd, it.own_bwd, it.recompute_comm, it.prefetch, it.mirrors) for it in items)
    return rows, tuple((ph, secs) for ph, secs, _layer in extra_exposed), optimizer_s


def summarize(tl: Timeline) -> tuple[dict, dict]:
    """(totals, per layer) of a timeline in msprof-analyze's vocabulary: Computing (compute stream busy),
    Communication not overlapped (a collective running, no computation), Overlapped (a collective running
    beside computation), Free (neither); step = Computing + not overlapped + Free. Overlapped and
    not-overlapped time is the collective's layer's, Free the layer of the computation it waits before."""
    ev = []
    for s, e, layer in tl.compute:
        if e > s:
            ev.append((s, 1, 0, layer))
            ev.append((e, -1, 0, layer))
    for s, e, layer, *_what in tl.comm:
        if e > s:
            ev.append((s, 1, 1, layer))
            ev.append((e, -1, 1, layer))
    ev.sort(key=lambda x: (x[0], x[1]))
    per: dict = {}

    def add(layer, key, d):
        row = per.get(layer)
        if row is None:
            row = per[layer] = dict.fromkeys(KEYS, 0.0)
        row[key] += d
    comp: dict = {}             # active layer -> count (insertion order: the oldest first)
    comm: dict = {}
    t = 0.0
    pending_free = 0.0
    for when, sign, kind, layer in ev:
        d = when - t
        if d > 0:
            if comp:
                add(next(iter(comp)), "computing_s", d)
                if comm:
                    add(next(iter(comm)), "overlapped_s", d)
            elif comm:
                add(next(iter(comm)), "communication_not_overlapped_s", d)
            else:
                pending_free += d
        t = when
        active = comp if kind == 0 else comm
        if sign > 0:
            if kind == 0 and pending_free:
                add(layer, "free_s", pending_free)
                pending_free = 0.0
            active[layer] = active.get(layer, 0) + 1
        else:
            left = active[layer] - 1
            if left:
                active[layer] = left
            else:
                del active[layer]
    if tl.end > t:
        pending_free += tl.end - t
    if pending_free:
        add("(optimizer)", "free_s", pending_free)
    total = dict.fromkeys(KEYS, 0.0)
    for row in per.values():
        row["step_s"] = row["computing_s"] + row["communication_not_overlapped_s"] + row["free_s"] + row["bubble_s"]
        for k in KEYS:
            total[k] += row[k]
    return total, per


def _union(intervals) -> list[tuple[float, float]]:
    out: list = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def not_overlapped(tl: Timeline) -> float:
    """:func:`summarize`'s total Communication not overlapped alone: the time some collective runs and no
    computation does."""
    comp = _union((s, e) for s, e, _layer in tl.compute if e > s)
    total, k = 0.0, 0
    for s, e in _union((c[0], c[1]) for c in tl.comm if c[1] > c[0]):
        total += e - s
        while k < len(comp) and comp[k][1] <= s:
            k += 1
        j = k
        while j < len(comp) and comp[j][0] < e:
            total -= min(e, comp[j][1]) - max(s, comp[j][0])
            j += 1
    return total


def exposed(tl: Timeline) -> list[tuple]:
    """Each collective's time with no computation beside it: ((operator, what, layer, exposed seconds,
    seconds), ...), in start order."""
    comp = sorted((s, e) for s, e, _l in tl.compute if e > s)
    out, k = [], 0
    for s, e, layer, name, what in sorted(tl.comm, key=lambda c: c[0]):
        if e <= s:
            continue
        while k < len(comp) and comp[k][1] <= s:
            k += 1
        covered, j = 0.0, k
        while j < len(comp) and comp[j][0] < e:
            covered += max(0.0, min(e, comp[j][1]) - max(s, comp[j][0]))
            j += 1
        out.append((name, what, layer, (e - s) - covered, e - s))
    return out


def scaled(a: dict, k: float) -> dict:
    return {key: v * k for key, v in a.items()}


def added(a: dict, b: dict) -> dict:
    return {key: a.get(key, 0.0) + b.get(key, 0.0) for key in KEYS}
