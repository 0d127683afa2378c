"""Pipeline parallelism (MindSpore ``pipeline_stages``, MindFormers ``pipeline_stage``): the model's repeated
layers split evenly over ``pp`` stages (what comes before the first layer on the first stage, after the last
on the last), one micro-batch's time per stage, and the 1F1B schedule's makespan and bubble."""
from __future__ import annotations

from ..errors import InputSpecError


def layer_order(graph) -> list[str]:
    """The repeated layers (``Op.layer``: ``model.layers.3``) in graph order."""
    seen: dict[str, None] = {}
    for op in graph:
        if op.layer:
            seen.setdefault(op.layer, None)
    return list(seen)


def stage_of_ops(graph, pp: int, offset=None) -> dict[str, int]:
    """Each operator's stage: layers split evenly over ``pp`` stages (``offset``: MindFormers' per-stage extra
    layers, summing to 0), the operators before the first layer on stage 0, the others outside layers on
    the last stage. A one-line error when ``pp`` does not divide the layers."""
    if pp <= 1:
        return {op.name: 0 for op in graph}
    layers = layer_order(graph)
    if not layers:
        raise InputSpecError(f"pp={pp}: the model has no repeated layers to split into stages; "
                             f"drop pp from --mesh")
    n = len(layers)
    offset = list(offset or [0] * pp)
    if len(offset) != pp or sum(offset) != 0 or (n % pp and not any(offset)):
        raise InputSpecError(f"pp={pp} does not split the model's {n} layers evenly: pick a pp dividing {n} "
                             f"(or give a per-stage offset summing to 0)")
    sizes = [n // pp + o for o in offset]
    if any(s < 1 for s in sizes) or sum(sizes) != n:
        raise InputSpecError(f"pp={pp} with offset {offset}: every stage needs at least one of the {n} layers")
    where, k = {}, 0
    for s, size in enumerate(sizes):
        for name in layers[k:k + size]:
            where[name] = s
        k += size
    out, started = {}, False
    for op in graph:
        if op.layer:
            started = True
            out[op.name] = where[op.layer]
        else:
            out[op.name] = 0 if not started else pp - 1
    return out


def one_f_one_b(stage_times: list[float], micro_batches: int, chunks: int = 1) -> tuple[float, list[float]]:
    """(makespan, bubble per stage) of the 1F1B schedule whose stage ``s`` spends ``stage_times[s]`` per
    micro-batch (forward and backward): the first micro-batch's forward down the stages and the last one's
    backward up them, the other ``m - 1`` micro-batches at the pace of the slowest stage. Equal stages give
    the bubble fraction ``(p - 1) / (m + p - 1)``. With ``chunks`` model chunks per stage (interleaved 1F1B,
    MindSpore's ``pipeline_interleave``, MindFormers' ``pp_interleave_num``) the fill and drain run on
    ``1/chunks`` of a stage's layers: ``(p - 1) / (chunks m + p - 1)``.

    >>> span, bubble = one_f_one_b([1.0] * 4, 8)
    >>> span, bubble[0] / span
    (11.0, 0.2727272727272727)
    >>> span, bubble = one_f_one_b([1.0] * 4, 8, chunks=2)
    >>> span, bubble[0] / span
    (9.5, 0.15789473684210525)
    """
    m = max(int(micro_batches), 1)
    slow = max(stage_times)
    span = m * slow + (sum(stage_times) - slow) / max(chunks, 1)
    return span, [span - m * t for t in stage_times]


def in_flight(stage: int, pp: int, micro_batches: int) -> int:
    """Micro-batches whose activations stage ``stage`` holds at once under 1F1B: ``pp - stage``, at most
    ``micro_batches``."""
    return max(1, min(pp - stage, micro_batches))


def p2p_intra(stage: int, stage_devices: int, per_node: int) -> bool:
    """Whether stage ``stage``'s first device and the next stage's (``stage_devices`` ranks on) share a node
    (the pipeline axis is the outermost: a stage is ``stage_devices`` consecutive ranks)."""
    r = stage * stage_devices
    return r // per_node == (r + stage_devices) // per_node
