"""The graph a model is read into: operators, the tensors between them, weights and inputs, with the
metadata the front ends record. The bottom of strategist: it imports nothing of MindSpore or the search.

An :class:`OpGraph` is built by a front end (:mod:`strategist.frontend.graph` compiles a MindSpore Cell;
:mod:`strategist.frontend.mindformers` builds a MindFormers model; tests build graphs by hand) and read
by every later step of the data path."""
from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

import networkx as nx

from ..errors import InputSpecError


#: Bytes per element of each dtype name used in specs.
DTYPE_BYTES = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
    "int64": 8, "uint64": 8, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8,
    "complex64": 8, "complex128": 16,
}

#: strategist's own operator type for MindFormers' MoE FFN Morph (its dispatcher and experts as one device-local
#: operator: :mod:`strategist.frontend.mindformers.morph`); no MindSpore primitive
MORPH_FFN = "MorphFFN"

#: ANF nodes that only route data or order side effects; folded away.
PLUMBING = frozenset({"Load", "UpdateState", "Depend", "MakeTuple", "TupleGetItem", "Return",
                      "MakeList", "ListGetItem"})



@dataclass(frozen=True)
class TensorSpec:
    """Shape and dtype of one tensor; ``str()`` gives ``float16[2,4096]``."""

    shape: tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPE_BYTES.get(self.dtype, 4)

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.shape))}]"

    @classmethod
    def parse(cls, text: str) -> "TensorSpec":
        """Parse ``int32[2,4096]`` (the ``--input`` syntax, without the ``name:``).

        >>> TensorSpec.parse("float16[2, 8]")
        TensorSpec(shape=(2, 8), dtype='float16')
        """
        m = re.fullmatch(r"\s*([a-z0-9]+)\s*\[\s*([0-9,\s]*)\]\s*", text)
        if not m or m.group(1) not in DTYPE_BYTES:
            raise InputSpecError(
                f"bad tensor spec {text!r}: write DTYPE[d0,d1,...] with DTYPE one of "
                f"{', '.join(sorted(DTYPE_BYTES))}, e.g. int32[2,4096]")
        dims = [d.strip() for d in m.group(2).split(",") if d.strip()]
        return cls(tuple(int(d) for d in dims), m.group(1))


@dataclass(frozen=True)
class Param:
    """A weight (``mindspore.Parameter``) the graph reads."""

    name: str
    spec: TensorSpec
    requires_grad: bool = True


@dataclass(frozen=True)
class Input:
    """Where one input slot of an operator comes from.

    ``kind`` is ``"op"`` (output ``index`` of operator ``ref``), ``"input"`` (graph input
    ``ref``), ``"param"`` (Parameter ``ref``) or ``"const"`` (``value``).
    """

    kind: str
    ref: str = ""
    index: int = 0
    spec: TensorSpec | None = None
    value: Any = None
    #: MindSpore's cost graph has an edge for this input. An element of a tuple argument (Concat's,
    #: AddN's) gets one only when it is a real operator's output itself; a graph input (a
    #: TupleGetItem of the VirtualDataset there) or an output taken from a tuple (TupleGetItem) gets
    #: none (``CreateEdgeAccrossMakeList``), so sharding propagation never crosses it.
    edge: bool = True
    #: the input is an element of a MakeTuple (a tuple argument: ``ops.Concat()((a, b))``, AddN's). MindSpore
    #: 2.9's ``FindReshapeNextNodeStraCosts`` (graph_util/node_info.cc) does not look past a MakeTuple ("FindNextLayout
    #: prim is MakeTuple, stop searching."): such a consumer of a Reshape adds no output layouts to its strategies-with-
    #: cost. (A MakeList is searched through: only the MakeTuple has that test.)
    packed: bool = False

    def to_dict(self) -> dict:
        d: dict[str, Any] = {"kind": self.kind}
        if not self.edge:
            d["edge"] = False
        if self.packed:
            d["packed"] = True
        if self.ref:
            d["ref"] = self.ref
        if self.kind == "op":
            d["index"] = self.index
        if self.spec is not None:
            d["spec"] = str(self.spec)
        if self.kind == "const":
            d["value"] = jsonable(self.value)
        return d


@dataclass(frozen=True)
class ShardLayout:
    """One tensor's layout as ``mindspore.Layout`` records it.

    ``tensor_map`` has one entry per tensor dimension: the device-matrix axes it is split
    over, each counted from the right as MindSpore does (``()`` = not split).
    """

    device_matrix: tuple[int, ...]
    alias_name: tuple[str, ...]
    tensor_map: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, lay, names: tuple[str, ...] | None = None, dev_matrix=None) -> "ShardLayout":
        """A :class:`strategist.vocab.layout.Layout` (its ``dims`` count device axes from the left) in this form, over
        its own device matrix or ``dev_matrix`` (a mesh of as many axes); its axes named ``names`` (default
        ``a0``, ``a1``, ...)."""
        dm = tuple(dev_matrix if dev_matrix is not None else lay.dev_matrix)
        k = len(dm)
        return cls(dm, tuple(names) if names is not None else tuple(f"a{i}" for i in range(k)),
                   tuple(tuple(k - 1 - a for a in d) for d in lay.dims))

    def axes(self) -> tuple[tuple[str, ...], ...]:
        """Axis names per dimension, e.g. ``(("dp", "cp"), ())``."""
        n = len(self.device_matrix)
        return tuple(tuple(self.alias_name[n - 1 - k] for k in dim) for dim in self.tensor_map)

    def __str__(self) -> str:
        def one(names: tuple[str, ...]) -> str:
            if not names:
                return '"None"'
            if len(names) == 1:
                return f'"{names[0]}"'
            return "(" + ", ".join(f'"{x}"' for x in names) + ")"
        return ", ".join(one(a) for a in self.axes())


@dataclass
class Op:
    """One real operator of the graph, with everything a user needs to find it again."""

    name: str                   # unique, as a user writes it: "layers.0.attention.wq.matmul"
    type: str                   # primitive name: "MatMul"
    cell_path: str              # owning Cell's attribute path: "layers.0.attention.wq"
    cell_class: str             # owning Cell's class name: "Linear"
    instance_name: str          # the primitive's attribute name in its Cell: "matmul"
    full_name: str              # MindSpore's scope name: "Default/layers-CellList/0-Blk/MatMul-op0"
    inputs: tuple[Input, ...]
    outputs: tuple[TensorSpec | None, ...]
    attrs: dict = field(default_factory=dict)
    in_strategy: tuple | None = None
    out_strategy: tuple | None = None
    in_layout: tuple[ShardLayout, ...] | None = None
    out_layout: tuple[ShardLayout, ...] | None = None
    source: str | None = None   # "path/to/model.py:42": where the primitive is created (or, not held, called)
    topo_index: int = 0
    held: bool = True           # the primitive is a Cell attribute (``self.<instance_name>``), not a functional call

    @property
    def params(self) -> dict[int, str]:
        """Input slot -> name of the Parameter it reads."""
        return {i: x.ref for i, x in enumerate(self.inputs) if x.kind == "param"}

    @property
    def configured(self) -> bool:
        """True when the model's source already gives this operator a strategy."""
        return self.in_strategy is not None or self.in_layout is not None

    @property
    def layer(self) -> str:
        """The repeated-block prefix of the cell path (``layers.3``), or ``""`` (read at every operator by the step
        model and the reports: kept beside the cell path it was read from)."""
        hit = self.__dict__.get("_layer")
        if hit is not None and hit[0] is self.cell_path:
            return hit[1]
        parts = self.cell_path.split(".") if self.cell_path else []
        out = next((".".join(parts[: i + 1]) for i, p in enumerate(parts) if p.isdigit()), "")
        self.__dict__["_layer"] = (self.cell_path, out)
        return out

    def to_dict(self) -> dict:
        d = {
            "name": self.name, "type": self.type, "cell_path": self.cell_path,
            "cell_class": self.cell_class, "instance_name": self.instance_name,
            "full_name": self.full_name, "source": self.source,
            "inputs": [x.to_dict() for x in self.inputs],
            "outputs": [str(s) if s is not None else None for s in self.outputs],
            "attrs": jsonable(self.attrs),
        }
        for k in ("in_strategy", "out_strategy"):
            if getattr(self, k) is not None:
                d[k] = jsonable(getattr(self, k))
        for k in ("in_layout", "out_layout"):
            v = getattr(self, k)
            if v is not None:
                d[k] = [{"device_matrix": list(x.device_matrix), "alias_name": list(x.alias_name),
                         "tensor_map": [list(t) for t in x.tensor_map]} for x in v]
        return d


@dataclass(frozen=True)
class Edge:
    """A tensor flowing from output ``out_index`` of ``src`` into input ``in_slot`` of ``dst``."""

    src: str
    dst: str
    out_index: int
    in_slot: int
    spec: TensorSpec | None


@dataclass(frozen=True)
class OptimizerSharding:
    """MindSpore's parallel optimizer (``enable_parallel_optimizer``, ``parallel_optimizer_config``): a
    parameter whose slice is repeated on ``r`` devices is kept as ``r``-th slices (split along its first
    dimension, which ``r`` must divide), ``shard_size`` of them at most (-1: all), when its slice is at least
    ``threshold_kb`` KiB; ``level1`` shards weights and optimizer states, ``level2`` and ``level3`` the
    gradients too.

    >>> z = OptimizerSharding(threshold_kb=64)
    >>> z.ways(replicas=8, first_dim=7168, slice_bytes=2**20), z.ways(8, 7168, 2**10), z.ways(8, 3, 2**20)
    (8, 1, 1)
    >>> OptimizerSharding(shard_size=4).ways(8, 7168, 2**20)
    4
    """
    shard_size: int = -1
    threshold_kb: float = 64.0
    level: str = "level1"

    @property
    def shards_gradients(self) -> bool:
        return self.level in ("level2", "level3")

    def ways(self, replicas: int, first_dim: int, slice_bytes: float) -> int:
        if replicas <= 1 or slice_bytes < self.threshold_kb * 1024:
            return 1
        k = replicas if self.shard_size is None or self.shard_size <= 0 else min(replicas, self.shard_size)
        return k if k > 1 and first_dim % k == 0 else 1

    @classmethod
    def from_config(cls, parallel: dict) -> "OptimizerSharding | None":
        """From a MindFormers config's ``parallel`` section (None when the parallel optimizer is off)."""
        if not (parallel or {}).get("enable_parallel_optimizer"):
            return None
        c = parallel.get("parallel_optimizer_config") or {}
        return cls(int(c.get("optimizer_weight_shard_size", -1) or -1),
                   float(c.get("parallel_optimizer_threshold", 64)), str(c.get("optimizer_level", "level1")))


#: MindFormers' and MindSpore's optimizer class names (a config's ``optimizer.type``) -> the step model's optimizer
#: (strategist.cost.memory.OPTIMIZERS: what its states keep per parameter element)
OPTIMIZER_TYPES = {"AdamW": "adamw", "FP32StateAdamWeightDecay": "adamw", "AdamWeightDecay": "adam-weight-decay",
                   "Momentum": "momentum"}


@dataclass(frozen=True)
class GraphMeta:
    """What a front end records about a graph beside its operators: how MindSpore compiles it, its
    ``@lazy_inline`` Cells, the MindFormers options it was built with. Frozen: a graph's record is replaced,
    never changed in place (``graph.training = True`` replaces ``graph.meta`` with an updated copy); every
    field reads as an attribute of the :class:`OpGraph`."""

    #: the MindSpore compile the engine emulates: the Cell compiled after ``set_train(True)``, as a training run
    #: compiles it (no VirtualOutput, operators created in ``TopoSort`` order; what the loader sets unless
    #: ``--eval``) or, False, compiled as built, as inference compiles it (a VirtualOutput,
    #: ``DeepScopedGraphSearch`` order; :func:`strategist.engine.search.orders.creation_order`). A graph built by hand
    #: (tests, netgen's cases) says which itself; unset, it is the as-built compile.
    training: bool = False
    #: paths of sub-Cells with a custom ``bprop`` (separate func graphs through the parallel passes)
    deferred_cells: tuple[str, ...] = ()
    #: paths of the ``@lazy_inline`` Cells, their groups of calls sharing one reused graph, and their classes
    lazy_inline_cells: tuple[str, ...] = ()
    lazy_groups: tuple[tuple[str, ...], ...] = ()
    lazy_classes: Any = None
    #: the front end's notes, shown with every plan
    notes: tuple[str, ...] = ()
    #: operators MindFormers builds only in a parallel run (the loss's own), with why, and how to read their
    #: strategies: ``(graph, mesh) -> {name: strategy}``
    parallel_only: Any = None
    parallel_only_strategies: Any = None
    #: MindFormers: the build's options (layers, seq, batch, overrides), the batch, the model config fitted to
    #: them, the layers extracted, the compiled base graph (before replication), the legacy (batch-first) layers
    mf_options: Any = None
    mf_batch: int | None = None
    mf_model_config: Any = None
    mf_extracted_layers: Any = None
    mf_base_graph: Any = None
    mf_legacy: bool = False
    #: MindFormers' ``use_seq_parallel``; activations laid out ``[S, B, H]`` (None: not known)
    sequence_parallel: bool = False
    sequence_first: bool | None = None
    #: MindSpore's parallel optimizer as configured (None: off)
    optimizer_sharding: OptimizerSharding | None = None
    #: MindFormers' ``enable_alltoall`` (MoE dispatch by AllToAll)
    enable_alltoall: bool = False
    #: the optimizer a config names (``optimizer.type`` as strategist.cost.memory.OPTIMIZERS keys it; None: not said)
    optimizer: str | None = None
    #: the step model's options its plans are estimated with (:class:`strategist.cost.step.StepOptions`; None: the
    #: defaults)
    step_options: Any = None
    #: a graph of a few of a model's repeated layers, advised for the whole (strategist.advice.repeated, the sweep):
    #: how many layers of one pipeline stage each of its layers stands for. The advisor's memory rule weighs a
    #: repeated layer's weight state by it, as every layer of the stage will hold it (1.0: the graph is whole)
    layer_repeats: float = 1.0


def _meta_property(name: str) -> property:
    def get(self):
        return getattr(self.meta, name)

    def put(self, value):
        self.meta = dataclasses.replace(self.meta, **{name: value})

    def reset(self):
        self.meta = dataclasses.replace(self.meta, **{name: _META_DEFAULTS[name]})
    return property(get, put, reset, doc=f"``meta.{name}`` (:class:`GraphMeta`); ``del`` restores its default")


class OpGraph:
    """Operators of one model and the tensors between them (a ``networkx.MultiDiGraph``).

    Nodes are operator names; ``graph.nx.nodes[name]["op"]`` is the :class:`Op`. Edge data
    holds ``out_index``, ``in_slot`` and ``spec``. Graph inputs and Parameters are not nodes:
    each op's ``inputs`` says where every slot comes from.
    """

    def __init__(self, ops: list[Op], inputs: dict[str, TensorSpec], params: dict[str, Param],
                 outputs: list[Input], cells: dict[str, str], model: str = ""):
        self.model = model
        self.meta = GraphMeta()
        self.inputs = inputs
        self.params = params
        self.outputs = outputs
        self.cells = cells
        self.nx = nx.MultiDiGraph()
        self._ops = {op.name: op for op in ops}
        for op in ops:
            self.nx.add_node(op.name, op=op)
        for op in ops:
            for slot, x in enumerate(op.inputs):
                if x.kind == "op":
                    self.nx.add_edge(x.ref, op.name, out_index=x.index, in_slot=slot, spec=x.spec)

    def derived(self, ops: list[Op], outputs: list[Input] | None = None, params: dict[str, Param] | None = None,
                cells: dict[str, str] | None = None) -> "OpGraph":
        """A graph of ``ops`` (and ``outputs``, ``params``, ``cells`` where given) otherwise this one's: its inputs,
        model and its :class:`GraphMeta` (``training``, ``sequence_parallel`` ...)."""
        g = OpGraph(ops, dict(self.inputs), dict(self.params) if params is None else params,
                    list(self.outputs) if outputs is None else outputs,
                    dict(self.cells) if cells is None else cells, model=self.model)
        g.meta = self.meta
        return g

    def with_meta(self, **changes) -> "OpGraph":
        """This graph with ``changes`` to its :class:`GraphMeta` (e.g. ``step_options``, ``sequence_parallel``), left
        as it is: a view sharing the operators, its MindFormers base graph (``mf_base_graph``) viewed with the same
        changes -- how a run's options reach the plans of a graph without writing onto the caller's."""
        import copy
        g = copy.copy(self)
        base = self.meta.mf_base_graph
        if base is not None and "mf_base_graph" not in changes:
            changes = {**changes, "mf_base_graph": base.with_meta(**changes)}
        g.meta = dataclasses.replace(self.meta, **changes)
        return g

    def __len__(self) -> int:
        return len(self._ops)

    def __iter__(self) -> Iterator[Op]:
        return iter(self._ops.values())

    def __contains__(self, name: str) -> bool:
        return name in self._ops

    @property
    def ops(self) -> list[Op]:
        """Operators in topological (MindSpore's execution) order."""
        return list(self._ops.values())

    def op(self, name: str) -> Op:
        return self._ops[name]

    def edges(self) -> list[Edge]:
        return [Edge(u, v, d["out_index"], d["in_slot"], d["spec"])
                for u, v, d in self.nx.edges(data=True)]

    def in_edges(self, name: str) -> list[Edge]:
        return sorted((Edge(u, v, d["out_index"], d["in_slot"], d["spec"])
                       for u, v, d in self.nx.in_edges(name, data=True)), key=lambda e: e.in_slot)

    def out_edges(self, name: str) -> list[Edge]:
        return [Edge(u, v, d["out_index"], d["in_slot"], d["spec"])
                for u, v, d in self.nx.out_edges(name, data=True)]

    def consumers_through_reshapes(self, name: str) -> tuple[set[str], list[str]]:
        """Where ``name``'s outputs go through Reshapes and Flattens: every operator on the way (``name`` and the
        Reshapes passed included) and the first other operators reached, in topological order."""
        passed, out, todo = {name}, [], [name]
        while todo:
            for e in self.out_edges(todo.pop()):
                if e.dst in passed:
                    continue
                passed.add(e.dst)
                (todo if self.op(e.dst).type in ("Reshape", "Flatten") else out).append(e.dst)
        return passed, sorted(out, key=lambda n: self.op(n).topo_index)

    def count_by_type(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for op in self:
            counts[op.type] = counts.get(op.type, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def cell_op_counts(self) -> dict[str, int]:
        """Cell path -> operators inside it (its own and its sub-cells'), for every cell."""
        counts = {path: 0 for path in self.cells}
        for op in self:
            parts = op.cell_path.split(".") if op.cell_path else []
            for i in range(len(parts) + 1):
                prefix = ".".join(parts[:i])
                counts[prefix] = counts.get(prefix, 0) + 1
        return counts

    @property
    def param_count(self) -> int:
        return sum(p.spec.numel for p in self.params.values())

    @property
    def param_bytes(self) -> int:
        return sum(p.spec.nbytes for p in self.params.values())

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "inputs": {k: str(v) for k, v in self.inputs.items()},
            "params": {k: {"spec": str(p.spec), "requires_grad": p.requires_grad}
                       for k, p in self.params.items()},
            "outputs": [x.to_dict() for x in self.outputs],
            "cells": self.cells,
            "ops": [op.to_dict() for op in self],
            "edges": [{"src": e.src, "dst": e.dst, "out_index": e.out_index, "in_slot": e.in_slot,
                       "spec": str(e.spec) if e.spec else None} for e in self.edges()],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True)



def jsonable(v):
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in sorted(v.items(), key=lambda kv: str(kv[0]))}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


_META_DEFAULTS = {f.name: f.default for f in dataclasses.fields(GraphMeta)}
for _name in _META_DEFAULTS:
    setattr(OpGraph, _name, _meta_property(_name))
del _name


def lazy_note(graph, folded: bool) -> str | None:
    """What a plan of ``graph`` says of its ``@lazy_inline`` Cells sharing a reused graph (None: none share one)."""
    groups = graph.lazy_groups or ()
    if not groups:
        return None
    classes = graph.lazy_classes or {}
    parts = []
    for g in groups:
        shown = ", ".join(g[:3]) + (f" and {len(g) - 3} more" if len(g) > 3 else "")
        parts.append(f"{classes.get(g[0], '?')}: {shown}")
    head = (f"@lazy_inline Cells ({'; '.join(parts)}): MindSpore's parallel compile keeps them one reused graph per "
            f"class, whose operators take one strategy for every call")
    if folded:
        return (head + "; planned so (the first call's operators stand for all, with its inputs and every call's "
                "consumers); MindSpore 2.9 may still fail later in its compile of such a graph")
    return (head + "; in the compile as built (--eval) that is not modelled: strategist plans every call on its "
            "own (compare with `strategist verify`)")
