"""Expert parallelism in the step and the memory: MindFormers' MoE FFN (its dispatcher and experts, one ``MorphFFN``
operator: :mod:`strategist.frontend.mindformers.morph`) on a mesh with an ``ep`` axis.

The operator's rule keeps the expert weights whole (its propagation has no expert factor), but the run does not:
MindFormers lays the experts over the ep devices (``FFNGroupedGEMM``'s Morph ``in_strategy``: weights by ep), and its
token dispatcher (``MoEAlltoAllTokenDispatcher``, mindformers 1.9.0 ``parallel_core/training_graph/transformer/moe``)
exchanges each device's routed tokens with the expert owners by explicit all-to-alls inside the Morph:

* each device holds ``E / ep`` experts: their weights, gradients and optimizer states are divided by ep, and their
  gradients are reduced over the ``devices / ep`` replicas of each expert, not over every device;
* per micro-batch, forward: the dispatch (an AlltoAllV over the ep group of the device's ``k N`` routed token rows of
  ``h`` elements, ``(ep - 1) / ep`` of them leaving the device) and the combine (the same rows back); backward: the
  two again, sends and receives swapped. The compute stream waits on each (the experts need their tokens, the
  next operator the combined rows). The small exchanges of the per-expert counts and of the routing map are left
  out.
"""
from __future__ import annotations


from ..engine.search.structure import per_graph
from ..vocab.graph import DTYPE_BYTES, MORPH_FFN, OpGraph

#: the operators an expert weight passes through on its way into the MoE FFN operator
_VIEWS = ("Cast", "Reshape")


def expert_ways(plan) -> int:
    """The ep size of ``plan``'s mesh, an axis or drawn from the stage's devices (1: no expert parallelism)."""
    return max(1, plan.mesh.ways("ep"))


def _experts_of(graph: OpGraph) -> tuple[dict[str, int], frozenset[str]]:
    """(``{parameter: its experts}``, the operators carrying them): the Parameters entering a MoE FFN operator's weight
    inputs through Casts and Reshapes, their first dimension the experts; and those Casts and Reshapes with the FFN
    operators themselves."""
    params: dict[str, int] = {}
    chain: set[str] = set()
    for op in graph:
        if op.type != MORPH_FFN:
            continue
        chain.add(op.name)
        for x, d in zip(op.inputs, op.attrs.get("strategist_token_dims", ())):
            if d is not None or x.spec is None or len(x.spec.shape) < 3:
                continue
            src, passed = x, []
            while src.kind == "op" and src.ref in graph:
                prev = graph.op(src.ref)
                if prev.type not in _VIEWS or not prev.inputs:
                    break
                passed.append(prev.name)
                src = prev.inputs[0]
            if src.kind == "param" and src.ref in graph.params:
                params[src.ref] = x.spec.shape[0]
                chain.update(passed)
    return params, frozenset(chain)


def expert_params(graph: OpGraph) -> dict[str, int]:
    """``{parameter: its experts}``: the Parameters entering a MoE FFN operator's weight inputs (through Casts and
    Reshapes), their first dimension the experts. Once per graph."""
    return per_graph("expert parameters", graph, _experts_of)[0]


def expert_chain(plan) -> dict[str, int]:
    """``{operator: ep}``: the operators between an expert Parameter and its MoE FFN operator (Casts, Reshapes) and
    the FFN operators themselves, whichever of them carries the weight's gradient reduction; {} without ep."""
    ep = expert_ways(plan)
    if ep <= 1:
        return {}
    return dict.fromkeys(per_graph("expert parameters", plan.graph, _experts_of)[1], ep)


def expert_shares(plan) -> dict[str, int]:
    """``{Parameter or operator: ep}``: the expert Parameters and the Casts and Reshapes carrying them to their MoE
    FFN operator, whose propagated (whole) slices each device holds ``1 / ep`` of; {} without ep. Once per graph
    and ep: the result is shared, do not change it."""
    ep = expert_ways(plan)

    def shares(g):
        if ep <= 1:
            return {}
        params, chain = per_graph("expert parameters", g, _experts_of)
        return {**dict.fromkeys(params, ep), **{n: ep for n in chain if g.op(n).type != MORPH_FFN}}
    return per_graph(f"expert shares at ep {ep}", plan.graph, shares)


def expert_slice(plan, name: str, shape: tuple) -> tuple:
    """A Parameter's slice shape with its experts divided over the ep devices (``shape`` as propagated: whole; the
    experts outermost in its first dimension, ``[E, ...]`` or MindFormers' ``[E * h, f]``)."""
    ep = expert_ways(plan)
    experts = expert_params(plan.graph).get(name) if ep > 1 else None
    if not experts or not shape or experts % ep or shape[0] % experts:
        return shape
    return (shape[0] // ep,) + tuple(shape[1:])


def dispatch_bytes(plan, op) -> float:
    """Bytes one device sends in one all-to-all of ``op``'s routed tokens over the ep group (dispatch or combine),
    for the whole step's batch: ``k N h`` elements of the tokens' dtype, ``(ep - 1) / ep`` of them leaving; 0
    without expert parallelism."""
    ep = expert_ways(plan)
    if op.type != MORPH_FFN or ep <= 1:
        return 0.0
    ch = plan.choices.get(op.name)
    dims = op.attrs.get("strategist_token_dims", ())
    acts = [(k, x, d) for k, (x, d) in enumerate(zip(op.inputs, dims)) if d is not None and x.spec is not None]
    if ch is None or not acts:
        return 0.0
    k0, tokens, d0 = acts[0]
    lay = ch.inputs[k0] if k0 < len(ch.inputs) else None
    rows = lay.slice_shape[d0] if lay is not None else tokens.spec.shape[d0]
    hidden = tokens.spec.shape[-1]
    # the routing map: [..., N, k] integer expert ids beside the tokens
    top_k = next((x.spec.shape[-1] for _k, x, _d in acts[1:] if "int" in x.spec.dtype), 1)
    per = DTYPE_BYTES.get(tokens.spec.dtype, 2)
    return top_k * rows * hidden * per * (ep - 1) / ep


def ep_group_intra(plan, devices_per_node: int) -> bool:
    """Does the ep group stay within a node? MindFormers' dispatcher exchanges over ep consecutive ranks
    (``get_ep_group_name``: ``rank // ep * ep`` onwards), whichever mesh axes ep is spelled with."""
    ep = expert_ways(plan)
    return ep <= devices_per_node and devices_per_node % ep == 0
