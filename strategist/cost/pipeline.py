"""Pipeline parallelism (MindSpore ``pipeline_stages``, MindFormers ``pipeline_stage``): the model's repeated
layers split evenly over ``pp`` stages (what comes before the first layer on the first stage, after the last
on the last), one micro-batch's time per stage, and the 1F1B schedule's makespan and bubble."""
from __future__ import annotations

from ..errors import InputSpecError
from ..frontend.layers import main_block


def main_layers(graph) -> list[str]:
    """The layers the stages split: those of the largest Cell list (``model.layers.*``); a second list's (DeepSeek's
    multi-token-prediction ``mtp.layers.*``) runs with the head, on the last stage, as MindFormers places it."""
    prefix, idx = main_block(graph)
    return [f"{prefix}.{i}" for i in idx]


def normal_offset(offset, pp: int, chunks: int = 1) -> tuple[tuple[int, ...], ...]:
    """MindFormers' ``model_config.offset`` as one row of ``pp`` per model chunk: an int for every stage, one row
    for every chunk (numpy's broadcast, as its LayerSetting does), or one row per chunk.

    >>> normal_offset([1, -1], 2, chunks=2)
    ((1, -1), (1, -1))
    >>> normal_offset(0, 4)
    ((0, 0, 0, 0),)
    """
    if offset is None or offset == () or offset == []:
        offset = 0
    if isinstance(offset, int) and not isinstance(offset, bool):
        return tuple((offset,) * pp for _ in range(chunks))
    rows = [offset] if all(isinstance(x, int) and not isinstance(x, bool) for x in offset) else list(offset)
    if len(rows) == 1:
        rows = rows * chunks
    if len(rows) != chunks or any(not isinstance(r, (list, tuple)) or len(r) != pp
                                  or any(not isinstance(x, int) or isinstance(x, bool) for x in r) for r in rows):
        raise InputSpecError(f"bad offset {_show(offset)}: give {pp} whole numbers (one per stage)"
                             + (f", or {chunks} rows of {pp} (one per model chunk of --pp-interleave {chunks})"
                                if chunks > 1 else ""))
    return tuple(tuple(r) for r in rows)


def _sum(offset) -> int:
    """The offsets as written, summed (MindFormers checks this sum before it broadcasts a row over the chunks)."""
    return offset if isinstance(offset, int) else sum(_sum(x) for x in offset)


def _show(offset) -> str:
    return str(offset).replace(" ", "").replace("(", "[").replace(")", "]")


def stage_sizes(n: int, pp: int, offset=None, chunks: int = 1) -> list[int]:
    """Layers per stage, as MindFormers' LayerSetting splits ``n`` layers: each of the ``pp x chunks`` model chunks
    holds ``n // (pp chunks)`` plus its offset, the offsets (as written) summing to the remainder
    ``n % (pp chunks)``; a stage holds its chunks' layers. A one-line error for a split MindFormers refuses.

    >>> stage_sizes(61, 8, [[1] * 8, [1] * 7 + [-2]], chunks=2)        # DeepSeek-V3's pretraining config
    [8, 8, 8, 8, 8, 8, 8, 5]
    >>> stage_sizes(32, 4)
    [8, 8, 8, 8]
    """
    total = pp * chunks
    base, rest = divmod(n, total)
    given = offset not in (None, 0, (), [])
    if not given and rest:
        fit = [d for d in range(1, n + 1) if n % (d * chunks) == 0 and d > 1]
        raise InputSpecError(f"pp={pp}" + (f" with {chunks} chunks per stage" if chunks > 1 else "")
                             + f" does not split the model's {n} layers evenly: give --offset (MindFormers' "
                             f"model_config.offset, per-stage extra layers summing to {n} % {total} = {rest}) or "
                             f"a pp dividing {n}" + (f" ({', '.join(map(str, fit[:6]))})" if fit else ""))
    rows = normal_offset(offset, pp, chunks)
    written = _sum(offset) if given else 0
    chunk = [base + x for r in rows for x in r]
    if written != rest or sum(chunk) != n:
        raise InputSpecError(f"bad offset {_show(offset)}: MindFormers needs the offsets to sum to {n} % {total} = "
                             f"{rest} (the layers pp={pp}" + (f" x {chunks} chunks" if chunks > 1 else "")
                             + f" leave over), and they sum to {written}")
    if chunk[0] < 0 or chunk[-1] < 0 or any(c < 1 for c in chunk[1:-1]):
        raise InputSpecError(f"bad offset {_show(offset)}: every middle chunk needs at least one of the {n} layers "
                             f"({base} each before the offset), the first and last at least none")
    return [sum(chunk[v * pp + s] for v in range(chunks)) for s in range(pp)]


def stage_of_ops(graph, pp: int, offset=None, chunks: int = 1) -> dict[str, int]:
    """Each operator's stage: the layers split as :func:`stage_sizes` says (``offset``: MindFormers' per-stage
    extra layers; ``chunks``: model chunks per stage), in order, the operators before the first layer on stage 0,
    a second Cell list's layers (:func:`main_layers`) on the last stage, and the other operators after the first
    layer on the latest stage of the layers' operators they read, directly or through others (MindSpore's
    ``BroadCastColoring``: an operator of no staged Cell takes its producers' stage, as DeepSeek's router's
    ``repeat_interleave`` compiled outside the router's scope does), the last where they read none (the head's
    loss mask from the input ids)."""
    if pp <= 1:
        return {op.name: 0 for op in graph}
    layers = main_layers(graph)
    if not layers:
        raise InputSpecError(f"pp={pp}: the model has no repeated layers to split into stages; "
                             f"drop pp from --mesh")
    sizes = stage_sizes(len(layers), pp, offset, chunks)
    where, k = {}, 0
    for s, size in enumerate(sizes):
        for name in layers[k:k + size]:
            where[name] = s
        k += size
    out, started, staged = {}, False, set()
    for op in graph:
        if op.layer in where:
            started = True
            out[op.name] = where[op.layer]
            staged.add(op.name)
        elif not started:
            out[op.name] = 0
        elif op.layer:
            out[op.name] = pp - 1
        else:
            # (MindSpore leaves an operator reading only unstaged ones -- the labels' mask from a slice of the
            # input ids -- unstaged, run where it is used: the loss, on the last stage)
            read = [out[x.ref] for x in op.inputs if x.kind == "op" and x.ref in staged]
            out[op.name] = max(read) if read else pp - 1
            if read:
                staged.add(op.name)
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
