"""MindFormers' MoE FFN ``Morph`` as one device-local operator (issue 11).

``FFNGroupedGEMM`` (MindFormers 1.9.0, ``moe/ffn.py``) runs the token dispatcher and the experts inside one
``ops.Morph``: every device sorts, permutes and un-permutes *its own* tokens (an all-to-all to the expert owners
when ``ep`` > 1) and the Morph's layout (``in_strategy``: tokens over ``dp_cp``, weights by ``ep``) is the only
thing a strategy decides there. The tp=1 graph strategist extracts inlines that body as global operators: a
sort over every token of the batch and ``IndexSelect``s reading rows of the whole batch, where splitting the
tokens is priced as gathering them back (296 ms on deepseek3's permutation at dp=8,tp=8) and no device-local
order exists. For advising and pricing, :func:`collapse_moe_ffn` puts one operator of type :data:`MORPH_FFN` in
the body's place:

* its inputs are what enters the body (tokens ``[N, h]``, routing map and probabilities ``[1, N, k]``, the
  expert weights ``[E, ...]``); its output is what leaves it (``[1, N, h]``);
* its rule (:func:`strategist.engine.rules.matmul.morph_ffn_rule`) has one token factor ``n`` shared by every activation
  and the output; the expert weights are whole (MindSpore's GroupedMatmulInfo never splits them either, and
  the Morph's own ep all-to-all takes no part in propagation: the step and the memory price both,
  :mod:`strategist.cost.experts`);
* its FLOPs are the two GroupedMatmuls' (``strategist_flops``), per token split.

``strategist verify`` still compiles the inlined body on both sides (MindSpore's own view:
:mod:`strategist.frontend.mindformers.standin`), where an anchor on the collapsed operator has nothing to configure: it
is not ``held`` (no ``shard()`` line; MindFormers' ``FFNGroupedGEMM.shard()`` sets the Morph's layout on its own
inputs), so the file MindSpore is given leaves it out, as it left out the body's functional GroupedMatmuls.
"""
from __future__ import annotations

import dataclasses
import math

from ...vocab.graph import MORPH_FFN, Input, Op, OpGraph
#: MindFormers Cells whose Morph body is dispatcher + experts
FFN_CLASSES = ("FFNGroupedGEMM",)


def ffn_name(cell: str) -> str:
    """The collapsed operator's name in ``cell`` (the Cell's ``morphed_forward`` attribute)."""
    return f"{cell}.morphed_forward" if cell else "morphed_forward"


def _body(ops: list[Op], cell: str) -> list[Op] | None:
    """The operators of ``cell``'s Morph body, in graph order: the cell's own operators minus the weights'
    Casts (``construct`` casts the Parameters before the Morph) and minus the Reshapes entering the body
    (``forward_func`` reshapes the tokens to rows and the weights to ``[E, ...]``: ordinary layout changes)."""
    own = [op for op in ops if op.cell_path == cell
           and not (op.type == "Cast" and op.inputs and op.inputs[0].kind == "param")]
    names = {op.name for op in own}
    changed = True
    while changed:
        changed = False
        for op in own:
            if op.name in names and op.type == "Reshape" and op.inputs and op.inputs[0].kind == "op" \
                    and op.inputs[0].ref not in names:
                names.discard(op.name)
                changed = True
    body = [op for op in own if op.name in names]
    return body or None


def collapse_moe_ffn(graph: OpGraph) -> OpGraph:
    """``graph`` with each MoE FFN Morph body replaced by one :data:`MORPH_FFN` operator (module doc);
    ``graph`` itself when it has none. A body that does not have exactly one output tensor leaving it, or
    whose tokens cannot be matched to the output's, is left inlined."""
    ops = list(graph)
    cells = sorted({op.cell_path for op in ops if op.cell_class in FFN_CLASSES and op.type == "GroupedMatmul"})
    if not cells:
        return graph
    replace: dict[str, Op] = {}         # last body op -> the collapsed op
    drop: set[str] = set()
    rewire: dict[tuple[str, int], Input] = {}
    for cell in cells:
        body = _body(ops, cell)
        if body is None:
            continue
        names = {op.name for op in body}
        entering: list[Input] = []
        seen = set()
        for op in body:
            for x in op.inputs:
                if x.kind in ("op", "param", "input") and x.ref not in names and (x.kind, x.ref, x.index) not in seen:
                    seen.add((x.kind, x.ref, x.index))
                    entering.append(Input(x.kind, x.ref, x.index, x.spec, None, True))
        leaving = {(op.name, j) for op in body
                   for _, dst, j in graph.nx.out_edges(op.name, data="out_index") if dst not in names}
        leaving = sorted(leaving | {(x.ref, x.index) for x in graph.outputs if x.kind == "op" and x.ref in names})
        if len(leaving) != 1:
            continue
        exit_name, exit_index = leaving[0]
        exit_op = graph.op(exit_name)
        out = exit_op.outputs[exit_index]
        if out is None or len(out.shape) < 2:
            continue
        tokens = out.shape[-2]
        dims = []
        for x in entering:
            shape = tuple(x.spec.shape) if x.spec is not None else ()
            src = graph.op(x.ref) if x.kind == "op" and x.ref in graph else None
            # the expert weights (a Parameter through Casts and Reshapes) stay whole; activations by their tokens
            dims.append(None if _reads_param(graph, src) else next((i for i, n in enumerate(shape) if n == tokens), None))
        if not any(d is not None for d in dims):
            continue
        flops = 0.0
        for g in (op for op in body if op.type == "GroupedMatmul"):
            x, w = g.inputs[0].spec.shape, g.inputs[1].spec.shape
            flops += 2.0 * math.prod(x) * w[-1]
        first = body[0]
        new = Op(name=ffn_name(cell), type=MORPH_FFN, cell_path=cell,
                 cell_class=first.cell_class, instance_name="morphed_forward", full_name=first.full_name,
                 inputs=tuple(entering), outputs=(out,),
                 attrs={"strategist_body": tuple(op.name for op in body), "strategist_flops": flops,
                        "strategist_token_dims": tuple(dims)},
                 # not a primitive shard() can be called on as written: MindFormers' FFNGroupedGEMM.shard() sets
                 # the Morph's layout over its own inputs ([B, S, h] tokens, ...), not this operator's
                 source=first.source, topo_index=body[-1].topo_index, held=False)
        replace[body[-1].name] = new
        drop |= names
        rewire[(exit_name, exit_index)] = Input("op", new.name, 0, out, None, True)
    if not replace:
        return graph
    kept = []
    for op in ops:
        if op.name in replace:
            kept.append(replace[op.name])
        if op.name in drop:
            continue
        ins = tuple(rewire.get((x.ref, x.index), x) if x.kind == "op" else x for x in op.inputs)
        kept.append(op if ins == op.inputs else dataclasses.replace(op, inputs=ins))
    outputs = [rewire.get((x.ref, x.index), x) if x.kind == "op" else x for x in graph.outputs]
    return graph.derived(kept, outputs)


def _reads_param(graph: OpGraph, op: Op | None) -> bool:
    """``op`` is a Parameter seen through Casts and Reshapes (the expert weights entering the body)."""
    while op is not None:
        if not op.inputs:
            return False
        x = op.inputs[0]
        if x.kind == "param":
            return True
        if op.type not in ("Cast", "Reshape") or x.kind != "op" or x.ref not in graph:
            return False
        op = graph.op(x.ref)
    return False
