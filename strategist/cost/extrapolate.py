"""A plan's step and memory at ``k`` repeated layers per pipeline stage, read off the same anchors' plans at two
smaller layer counts. Where every repeated layer after the first carries the same strategies (the anchors of one
layer copied onto the others), each added layer adds the same schedule items and the same collectives to its
stage: the ends of a stage's timelines, its schedule totals and its memory are linear in the stage's layer
count. The pipeline's schedule (:func:`~.step.pipeline_step`) and the memory's maximum are then taken over the
extrapolated stages, as :class:`~.step.StepEstimate` takes them over the scheduled ones -- what a sweep prices
each configuration of an 80-layer model with, on its plans of 2 and 3 layers per stage. Each stage is read at its
own layer count (``ks``, one per stage): an uneven pipeline (MindFormers' ``offset``) is priced on the same plans of
equal stages."""
from __future__ import annotations

from collections.abc import Sequence

from .step import StepEstimate, pipeline_step, throughput


def linear(a: float, b: float, ka: int, kb: int, k: int) -> float:
    """The value at ``k`` of the line through ``(ka, a)`` and ``(kb, b)``."""
    return a + (b - a) * (k - ka) / (kb - ka)


def memory_at(mems_a: list[dict], mems_b: list[dict], ka: int, kb: int, ks: Sequence[int]) -> dict:
    """The memory of the stage that keeps the most, each stage at its own ``ks`` layers, from every stage's memory
    (:func:`~.step.stage_memories`) at ``ka`` and ``kb`` layers per stage: its ``total``, the ``capacity``,
    ``fits``, ``stage``."""
    # each moment of a stage's step (the end of the forward, the optimizer step, ...) is linear in its layers; the
    # peak, their maximum, is not
    totals = [max(linear(x["moments"][m], y["moments"][m], ka, kb, n) for m in x["moments"])
              for x, y, n in zip(mems_a, mems_b, ks, strict=True)]
    s = max(range(len(totals)), key=totals.__getitem__)
    cap = mems_a[s]["capacity"]
    return {"total": totals[s], "capacity": cap, "fits": totals[s] <= cap, "stage": s}


def step_at(est_a: StepEstimate, est_b: StepEstimate, ka: int, kb: int, ks: Sequence[int]) -> dict:
    """The step, each stage at its own ``ks`` layers, from the estimates at ``ka`` and ``kb`` layers per stage (the
    same options): ``step_s``, ``throughput`` (as the estimate gives it), the reported stage's
    ``communication_not_overlapped_s`` and ``stage``."""
    opts = est_a.opts
    ends = [(linear(a0, b0, ka, kb, n), linear(a1, b1, ka, kb, n))
            for (a0, a1), (b0, b1), n in zip(est_a.stage_ends, est_b.stage_ends, ks, strict=True)]
    step, _bubbles, worst = pipeline_step(ends, opts)
    key = "communication_not_overlapped_s"
    exposed = linear(est_a.stage_not_overlapped(worst), est_b.stage_not_overlapped(worst), ka, kb, ks[worst])
    return {"step_s": step, "throughput": throughput(est_a.plan, step, est_a.plan.mesh.size * opts.pp, opts.repeats),
            key: exposed, "stage": worst}
