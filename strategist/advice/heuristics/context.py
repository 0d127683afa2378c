"""What the heuristics read of a model beside its operators: the rules' templates and categories, each weight
operator's role and preference, the sequence-parallel templates, the vocabularies, the attention projections and
the parallelism boundaries."""
from __future__ import annotations

from dataclasses import dataclass

from ...vocab.graph import OpGraph
from ...vocab.mesh import Mesh
from ..anatomy import (attention_projections, flippable, op_roles, preferences, sp_templates, uses_sequence_parallel,
                       weight_params)
from ...files.rules import Rules
from .boundaries import boundary_ops


@dataclass(frozen=True)
class Context:
    """One proposal's view of the model (built by :func:`context`)."""

    graph: OpGraph
    mesh: Mesh
    rules: Rules
    boundaries: dict
    roles: dict          # weight operator -> "column" / "row" (Megatron's pairs)
    prefs: dict          # weight operator -> "dp" / "tp" / "" (which its weight and activations favour)
    sp: bool             # the config asks for sequence parallelism on sequence-first rows
    sp_norm: dict        # the norms' templates with sequence parallelism ...
    plain_norm: dict     # ... and without it
    vocabularies: set    # the embedding tables' row counts
    attention: set       # the attention projections
    boundary_ops: dict   # rule 3's cut: operator -> "dp" (the cut in front) / "tp" (the first model-parallel op)

    @property
    def templates(self) -> dict:
        return self.rules.templates

    @property
    def categories(self) -> dict:
        return self.rules.categories


def context(graph: OpGraph, mesh: Mesh, rules: Rules, boundaries: dict | None, megatron: bool) -> Context:
    """``megatron``: the linears of column/row pairs that prefer data parallelism are proposed as Megatron's pair
    (their preference cleared)."""
    roles = op_roles(graph, rules)
    prefs = preferences(graph, rules, boundaries or {})
    if megatron:
        for n in flippable(graph, rules, prefs, boundaries):
            prefs[n] = ""
    sp = uses_sequence_parallel(graph, mesh)
    sp_norm, plain_norm = sp_templates(graph, rules.templates, mesh)
    # the embedding tables' row counts: a weight MatMul producing that many features is a language-model head
    # (a wide MLP linear is not: its features are the intermediate size)
    vocabularies = {op.inputs[s].spec.shape[0] for op in graph if op.type in ("Embedding", "Gather", "GatherV2")
                    for s in weight_params(graph, op)
                    if op.inputs[s].spec is not None and len(op.inputs[s].spec.shape) == 2}
    attention = attention_projections(graph, roles, rules.categories.get("norm", ()))
    return Context(graph, mesh, rules, boundaries or {}, roles, prefs, sp, sp_norm, plain_norm, vocabularies,
                   attention, boundary_ops(graph, mesh, prefs))
