"""One collective step as the cost model and the reports carry it: a typed value from the redistribution planner
(:meth:`strategist.engine.redistribution.Redistribution.physical`) and the pricing of an operator's own collectives
(:mod:`strategist.cost.pricing`) to the step model and every report, printed (:attr:`CommStep.label`) only where
it is shown.

    >>> s = CommStep("AllToAll", (0, 1), 512.0, 0.0, where="split_dim=0 concat_dim=1",
    ...              runs_as="AllGather + Split + Concat")
    >>> s.label, s.collective, s.n
    ('AllToAll(n=2, group=[0, 1], split_dim=0 concat_dim=1) as AllGather + Split + Concat', 'AllGather', 2)
    >>> s.toward("backward").label.split("(")[0]
    'backward AllToAll'
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

#: a step's direction: in the forward, in the backward (a redistribution's transpose), a Parameter's gradient
#: reduction (its mirror)
DIRECTIONS = ("forward", "backward", "grad")
#: what MindSpore runs an all-to-all as without ``enable_alltoall`` (forward, backward)
AS_ALLGATHER = "AllGather + Split + Concat"
AS_REDUCESCATTER = "Split + Concat + ReduceScatter"


@dataclass(frozen=True)
class CommStep:
    """One step on one device: its kind (``AllGather``, ``ReduceScatter``, ``AllReduce``, ``AllToAll``, ``Split``),
    rank 0's group, the bytes each device sends, its seconds on the hardware it was priced on (0: unpriced), its
    direction, the tensor dims it works on (``dim=0``), what MindSpore runs it as where that differs, and the
    dtype moved where known."""

    kind: str
    group: tuple[int, ...]
    nbytes: float
    seconds: float
    direction: str = "forward"
    where: str = ""
    runs_as: str = ""
    dtype: str = ""

    @property
    def n(self) -> int:
        return len(self.group)

    @property
    def collective(self) -> str | None:
        """The collective MindSpore runs (an all-to-all without enable_alltoall: the AllGather or ReduceScatter it
        is written as), None for a local Split."""
        if self.kind == "Split":
            return None
        if self.runs_as == AS_ALLGATHER:
            return "AllGather"
        if self.runs_as == AS_REDUCESCATTER:
            return "ReduceScatter"
        return self.kind

    def intra(self, per_node: int) -> bool:
        """Whether its group stays within one node of ``per_node`` devices."""
        return not self.group or min(self.group) // per_node == max(self.group) // per_node

    def toward(self, direction: str) -> "CommStep":
        return dataclasses.replace(self, direction=direction)

    def text(self, group: str | None = None) -> str:
        """Its label, the group written as ``group`` (a name, ``tp group of 8``) where given, else listed."""
        head = "" if self.direction == "forward" else self.direction + " "
        inner = group if group is not None else f"n={self.n}, group={list(self.group)}"
        return (f"{head}{self.kind}({inner}{', ' + self.where if self.where else ''})"
                f"{' as ' + self.runs_as if self.runs_as else ''}")

    @property
    def label(self) -> str:
        """``grad AllReduce(n=8, group=[0, 8, ...])``, ``AllToAll(n=2, group=[0, 1], split_dim=0 concat_dim=1) as
        AllGather + Split + Concat``."""
        return self.text()
