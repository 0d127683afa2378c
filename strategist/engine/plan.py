"""What a propagation produces: the anchors it starts from, every operator's choice with its provenance, and
(once priced) every redistribution and each operator's own communication. Shared by the search
(:mod:`strategist.engine.search`), the pricing (:mod:`strategist.cost.pricing`) and the reports.

These are builders, not frozen values: the search fills a :class:`Provenance` and an :class:`OpChoice` per
operator as it decides them, pricing fills :class:`EdgeCost` and :class:`OpCost` records and a :class:`Plan`
from them, and the advisor sets a plan's ``anchors`` to the order it gave them. Once a plan is returned to a
caller of :func:`strategist.propagate.propagate` nothing changes it; readers treat every record as
read-only. The anchors themselves (:class:`strategist.vocab.anchors.Anchor`) are frozen."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..vocab.anchors import Anchor, Direction, Origin
from ..vocab.graph import Op, OpGraph
from ..vocab.layout import Layout
from ..vocab.mesh import Hardware, Mesh
from .rules.factor import Sharding
from .redistribution import Redistribution

#: the plan's names for these members (``Anchor.origin``, ``Provenance.direction``)
SEMI_AUTO = Origin.SEMI_AUTO
PARALLEL_ONLY = Origin.PARALLEL_ONLY
CAST_PASS = Direction.CAST_PASS


@dataclass
class Provenance:
    """Why an operator has its strategy."""

    root: str                     # the seed: an anchor's op name, DATASET, or "" (unreached default)
    parent: str | None            # the neighbour it was chosen against
    depth: int
    direction: Direction          # how the search reached it (a plain string equal to a member is the same)
    cost: float = 0.0             # refined redistribution communication on the deciding edge
    rejected: tuple | None = None  # best rejected alternative: (strategy, its refined communication)


@dataclass
class EdgeCost:
    src: str
    dst: str
    out_index: int
    in_slot: int
    src_layout: Layout
    dst_layout: Layout
    forward: Redistribution
    backward: Redistribution | None
    dtype: str
    ms_communication: float
    ms_computation: float
    fwd_bytes: float
    fwd_seconds: float
    bwd_bytes: float
    bwd_seconds: float

    @property
    def bytes(self) -> float:
        return self.fwd_bytes + self.bwd_bytes

    @property
    def seconds(self) -> float:
        return self.fwd_seconds + self.bwd_seconds


@dataclass
class OpCost:
    """An operator's own communication: partial sums it reduces (forward) and that reduction's transpose
    (backward), the gradient reduction of its Parameters (their mirrors, backward)."""

    fwd_bytes: float = 0.0
    fwd_seconds: float = 0.0
    grad_bytes: float = 0.0
    grad_seconds: float = 0.0
    steps: tuple = ()
    bwd_bytes: float = 0.0
    bwd_seconds: float = 0.0

    @property
    def bytes(self) -> float:
        return self.fwd_bytes + self.bwd_bytes + self.grad_bytes

    @property
    def seconds(self) -> float:
        return self.fwd_seconds + self.bwd_seconds + self.grad_seconds


@dataclass
class Conflict:
    src: str
    dst: str
    anchors: tuple[str, str]
    cost: float                   # refined MindSpore communication of the redistribution inserted
    seconds: float


@dataclass
class OpChoice:
    op: Op
    sharding: Sharding | None                 # None for Reshape
    inputs: tuple[Layout, ...]
    outputs: tuple[Layout, ...]
    provenance: Provenance
    configured: bool = False

    @property
    def strategy(self) -> tuple | None:
        return self.sharding.strategy if self.sharding is not None else None


@dataclass
class Plan:
    """The result of :func:`strategist.propagate.propagate`: a strategy for every operator, every tensor's layout, every
    redistribution, each operator's own communication, totals, provenance and conflicts."""

    graph: OpGraph
    mesh: Mesh
    hardware: Hardware | None
    anchors: dict[str, Anchor]
    choices: dict[str, OpChoice]
    edges: list[EdgeCost]
    op_costs: dict[str, OpCost]
    conflicts: list[Conflict]
    inconsistencies: list[tuple[str, str, float]]
    warnings: list[str] = field(default_factory=list)
    flops: dict[str, float] = field(default_factory=dict)   # per device, training step, per op
    priced: bool = True
    dataset_strategy: Any = "data_parallel"
    traffic: dict[str, float] = field(default_factory=dict)  # memory-bound operators' device-memory bytes per step
    #: plan -> the step's seconds as scheduled (strategist.cost.step) where the advisor is to choose by it, or
    #: None: totals()' step_seconds; otherwise the step is the serial sum
    step_model: Any = None
    #: an unpriced plan's search (:class:`~strategist.engine.search.result.SearchResult`), which
    #: :func:`strategist.propagate.price_plan` prices; None once priced
    search: Any = field(default=None, repr=False, compare=False)

    def strategy(self, name: str) -> tuple | None:
        return self.choices[name].strategy

    def layout(self, name: str, out_index: int = 0) -> Layout:
        return self.choices[name].outputs[out_index]

    def totals(self) -> dict[str, float]:
        e_fwd_b = sum(e.fwd_bytes for e in self.edges)
        e_bwd_b = sum(e.bwd_bytes for e in self.edges)
        e_fwd_s = sum(e.fwd_seconds for e in self.edges)
        e_bwd_s = sum(e.bwd_seconds for e in self.edges)
        o_fwd_b = sum(c.fwd_bytes for c in self.op_costs.values())
        o_fwd_s = sum(c.fwd_seconds for c in self.op_costs.values())
        o_bwd_b = sum(c.bwd_bytes for c in self.op_costs.values())
        o_bwd_s = sum(c.bwd_seconds for c in self.op_costs.values())
        g_b = sum(c.grad_bytes for c in self.op_costs.values())
        g_s = sum(c.grad_seconds for c in self.op_costs.values())
        flops = sum(self.flops.values())
        compute = self.hardware.compute_seconds(flops) if self.hardware else 0.0
        traffic = sum(self.traffic.values())
        mem_s = self.hardware.memory_seconds(traffic) if self.hardware else 0.0
        comm_s = e_fwd_s + e_bwd_s + o_fwd_s + o_bwd_s + g_s
        serial = comm_s + compute + mem_s
        step = self.step_model(self) if self.step_model is not None else None
        return {
            "compute_flops": flops, "compute_seconds": compute,
            "memory_bound_bytes": traffic, "memory_bound_seconds": mem_s,
            "step_seconds": serial if step is None else step, "serial_step_seconds": serial,
            "redistribution_ms_cost": sum(e.ms_communication for e in self.edges),
            "redistribution_bytes": e_fwd_b + e_bwd_b, "redistribution_seconds": e_fwd_s + e_bwd_s,
            "forward_bytes": e_fwd_b + o_fwd_b, "forward_seconds": e_fwd_s + o_fwd_s,
            "backward_bytes": e_bwd_b + o_bwd_b, "backward_seconds": e_bwd_s + o_bwd_s,
            "operator_bytes": o_fwd_b + o_bwd_b, "operator_seconds": o_fwd_s + o_bwd_s,
            "gradient_bytes": g_b, "gradient_seconds": g_s,
            "total_bytes": e_fwd_b + e_bwd_b + o_fwd_b + o_bwd_b + g_b,
            "total_seconds": comm_s,
        }

    def by_group(self, key) -> dict[str, dict[str, float]]:
        """Communication bytes/seconds summed per ``key(op)`` (edges count at their consumer)."""
        out: dict[str, dict[str, float]] = {}

        def add(k, b, s):
            d = out.setdefault(k, {"bytes": 0.0, "seconds": 0.0})
            d["bytes"] += b
            d["seconds"] += s
        for e in self.edges:
            add(key(self.graph.op(e.dst)), e.bytes, e.seconds)
        for name, c in self.op_costs.items():
            if c.bytes:
                add(key(self.graph.op(name)), c.bytes, c.seconds)
        return dict(sorted(out.items()))

    def per_layer(self):
        return self.by_group(lambda op: op.layer or "(outside layers)")

    def per_cell(self):
        return self.by_group(lambda op: op.cell_path or "(root)")

    def chain(self, name: str) -> list[str]:
        """Provenance path from the seed to ``name``."""
        out, cur, seen = [], name, set()
        while cur is not None and cur not in seen:
            seen.add(cur)
            out.append(cur)
            cur = self.choices[cur].provenance.parent if cur in self.choices else None
        return list(reversed(out))


# --------------------------------------------------------------------------------------


def parallel_only_anchors(graph: OpGraph, mesh: Mesh, warnings: list | None = None) -> dict[str, Anchor]:
    """The strategies ``graph``'s own code sets, at ``mesh``, in every parallel build, on operators no shard() or
    sharding_propagation() method reconfigures (``graph.parallel_only``: MindFormers' CrossEntropyLoss adds
    ``logits + 0`` and ``labels + 0`` in any semi/auto parallel mode and configures them, its softmax, NLL and
    reductions in ``__init__``). Configured operators end MindSpore's BFS, so every plan of the model
    (propagated, semi_auto, advised) starts from them, as the real parallel run does; they are the model's, not
    anchors anyone writes. ``graph.parallel_only_strategies(graph, mesh)`` reads them (cached by the front end);
    ``{}`` for a graph without such operators. A reading that fails leaves them unconfigured, with a warning."""
    if not graph.parallel_only:
        return {}
    read = graph.parallel_only_strategies
    if read is None:
        return {}
    got, notes = read(graph, mesh)
    if warnings is not None:
        warnings.extend(n for n in notes if n not in warnings)
    return dict(got)


def model_anchors(graph: OpGraph) -> dict[str, Anchor]:
    """The model's own ``shard()`` calls, as anchors (Cast's are ignored, as MindSpore does)."""
    out = {}
    for op in graph:
        if not op.configured or op.type == "Cast":
            continue
        out[op.name] = Anchor(op.name, op.in_strategy, op.in_layout, op.out_strategy, op.out_layout, "model")
    return out
