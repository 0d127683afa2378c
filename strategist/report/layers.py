"""Repeated layers as one: a plan's layers (``model.layers.3``) in graph order, grouped in runs of consecutive
layers of one kind -- the same operators, relative to the layer, of the same types with the same strategies and
layouts. The reports show a run once, marked ``xN``."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Run:
    """Consecutive layers of one kind; ``layers[0]`` stands for them all."""

    layers: list[str] = field(default_factory=list)
    ops: int = 0                        # operators in each layer

    @property
    def first(self) -> str:
        return self.layers[0]

    @property
    def label(self) -> str:
        if len(self.layers) == 1:
            return self.first
        return f"{self.first} .. {self.layers[-1]} \u00d7{len(self.layers)}"


def layer_ops(plan) -> dict[str, list]:
    """Each layer's operators, graph order, the layers in the order they first appear."""
    out: dict[str, list] = {}
    for op in plan.graph:
        if op.layer:
            out.setdefault(op.layer, []).append(op)
    return out


def signature(plan, layer: str, ops) -> tuple:
    """What two layers of one kind share: each operator's name past the layer, type, strategy and layouts."""
    choices = plan.choices
    return tuple((op.name[len(layer):], op.type, choices[op.name].strategy,
                  tuple(str(x) for x in choices[op.name].inputs), tuple(str(x) for x in choices[op.name].outputs))
                 for op in ops)


def layer_runs(plan) -> list[Run]:
    """The layers in runs of consecutive layers of one kind."""
    runs: list[Run] = []
    last = None
    for layer, ops in layer_ops(plan).items():
        sig = signature(plan, layer, ops)
        if runs and sig == last:
            runs[-1].layers.append(layer)
        else:
            runs.append(Run([layer], len(ops)))
            last = sig
    return runs


def repeated(plan) -> dict[str, str]:
    """Each layer that repeats the one before it in its run -> the run's first layer."""
    return {layer: run.first for run in layer_runs(plan) for layer in run.layers[1:]}
