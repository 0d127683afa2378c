"""Per-device memory of a plan (weights, gradients, optimizer states, activations) and the memory rule
(:data:`MEMORY_WORTH`)."""
from __future__ import annotations

import math

from ..engine.plan import Plan
from ..engine.search.caches import cached_rule
from ..engine.search.structure import per_graph


#: an anchor that does not speed the step up is still kept when it shards at least this much weight,
#: gradient and optimizer state per device (a vocabulary-parallel embedding table, a large head)
MEMORY_WORTH = 2**30


def state_bytes(plan: Plan) -> float:
    m = memory(plan)
    return m["parameters"] + m["gradients"] + m["optimizer_states"]


def _layer_params(g) -> frozenset:
    """The Parameters read by operators of the graph's repeated layers (once per graph)."""
    return per_graph("layer params", g, lambda g: frozenset(x.ref for op in g if op.layer for x in op.inputs
                                                             if x.kind == "param"))


def memory(plan: Plan, optimizer_bytes_per_param: int = 8) -> dict[str, float]:
    """Per-device bytes of parameters, gradients and optimizer states (Adam: two fp32 moments) under
    ``plan`` (a repeated layer's counted ``graph.layer_repeats`` times: on a few layers advised for the whole, what
    the stage's layers will hold), and an activation estimate (every operator output kept for backward: an upper
    bound). With the model's parallel optimizer (``graph.optimizer_sharding``, a MindFormers config's
    ``enable_parallel_optimizer``) a replicated weight's slice is split further over its replicas, as
    :class:`~strategist.frontend.graph.OptimizerSharding` says; its communication (the gradient's reduce-scatter and
    the weight's all-gather) moves what the gradient's all-reduce would, so the step is priced as without."""
    g = plan.graph
    zero = g.optimizer_sharding
    seen: dict[str, tuple[int, ...]] = {}     # parameter -> its slice's shape
    for op in g:
        ch = plan.choices[op.name]
        if ch.sharding is None:
            continue
        rule = cached_rule(op)
        for k, slot in enumerate(rule.slots):
            x = op.inputs[slot]
            if x.kind == "param" and x.ref not in seen and k < len(ch.inputs):
                seen[x.ref] = ch.inputs[k].slice_shape
    repeats = g.layer_repeats
    layered = _layer_params(g) if repeats != 1 else frozenset()
    params = grads = opt = 0.0
    for name, p in g.params.items():
        shape = seen.get(name, tuple(p.spec.shape))
        n = math.prod(shape)
        per = p.spec.nbytes / max(p.spec.numel, 1)
        w = 1
        if zero is not None and p.requires_grad and shape:
            w = zero.ways(plan.mesh.size * n // max(p.spec.numel, 1), shape[0], n * per)
        r = repeats if name in layered else 1       # a repeated layer's weight stands for that many on the stage
        params += r * n * per / w
        if p.requires_grad:
            grads += r * (n * per / (w if zero.shards_gradients else 1) if zero is not None else n * per)
            opt += r * n * optimizer_bytes_per_param / w
    act = 0.0
    for op in g:
        for j, lay in enumerate(plan.choices[op.name].outputs):
            if j < len(op.outputs) and op.outputs[j] is not None:
                act += lay.slice_numel * op.outputs[j].nbytes / max(op.outputs[j].numel, 1)
    return {"parameters": params, "gradients": grads, "optimizer_states": opt, "activations": act,
            "total": params + grads + opt + act}
