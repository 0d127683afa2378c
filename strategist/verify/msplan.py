"""What passes between strategist and the verify child: MindSpore's answer for one model (its operators'
strategies, the dataset's, and on request the redistributions and collectives of its parallel graph), and the
output layouts a training step's request hands the child."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class MsOp:
    """One operator as MindSpore's sharding propagation left it."""

    name: str                        # MindSpore's fullname_with_scope: "Default/fc1-Dense/MatMul-op0"
    type: str
    path: str | None                 # cell attribute path + primitive instance name, like strategist's op names
    in_strategy: tuple
    out_strategy: tuple | None = None
    configured: bool = False         # a user shard() (the model's or an anchor), not propagated
    input_shapes: tuple | None = None    # global tensor shapes, as MindSpore's parallel pass sees them
    output_shapes: tuple | None = None
    in_layout: str | None = None     # MindSpore's text, for operators configured with a Layout
    scope: str | None = None

    @classmethod
    def from_dict(cls, d: dict) -> "MsOp":
        return cls(name=d["name"], type=d["type"], path=d.get("path"), in_strategy=as_tuples(d.get("in_strategy")),
                   out_strategy=as_tuples(d.get("out_strategy")), configured=bool(d.get("configured")),
                   input_shapes=as_tuples(d.get("input_shapes")), output_shapes=as_tuples(d.get("output_shapes")),
                   in_layout=d.get("in_layout"), scope=d.get("scope"))


@dataclass
class MsPlan:
    """MindSpore's answer for one model, mesh, anchors and dataset strategy."""

    ops: list[MsOp]                  # in graph order; the dataset and output are below, not here
    dataset_strategy: object         # what was asked: "data_parallel", "full_batch" or {input: split}
    device_num: int
    compile_seconds: float
    process_seconds: float
    dataset: tuple | None = None     # _VirtualDataset's strategy: one row per model input
    output: tuple | None = None      # _VirtualOutput's strategy (None when the output is a scalar)
    backend: str = "stub"            # "stub" (GPU plugin on CUDA stubs, CPU only), "gpu" or "ascend"
    mindspore_version: str = ""
    compile_inputs: list[str] = field(default_factory=list)   # per-device shapes the child compiled with
    model: str = ""
    notes: list[str] = field(default_factory=list)   # MindFormers builds: its bugs worked around, late failures
    #: with ``redistributions=True``: what MindSpore's parallel graph moves between operators, per consumer input
    #: (``{"src": path, "dst": path, "src_type", "dst_type", "also": [other consumers' paths], "ops": [...],
    #: "collectives": [...]}``)
    redistributions: list[dict] | None = None
    #: with ``training=True``: every collective of one training step of the model (MindSpore's graph after autodiff,
    #: ``validate``): ``{"kind", "n", "bytes", "phase": "forward" | "backward" | "mirror", "instance", "scope"}``
    collectives: list[dict] | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "MsPlan":
        d = dict(d)
        d["ops"] = [MsOp.from_dict(o) for o in d["ops"]]
        d["dataset"] = as_tuples(d.get("dataset"))
        d["output"] = as_tuples(d.get("output"))
        return cls(**d)


def as_tuples(v):
    """Lists (as JSON gives them) back to tuples, at every depth."""
    return tuple(as_tuples(x) for x in v) if isinstance(v, (list, tuple)) else v


def output_strategies(plan) -> list | bool:
    """Per model output, the splits of its layout in ``plan`` (a tuple strategy for the training step's loss
    sums: configured so, they hand the propagation each output as the plan lays it out instead of joining it with
    a layout of their own), or True where an output's layout is unknown."""
    out = []
    for x in plan.graph.outputs:
        if x.kind != "op" or x.ref not in plan.choices:
            return True
        ch = plan.choices[x.ref]
        j = getattr(x, "index", 0) or 0
        if j >= len(ch.outputs) or ch.outputs[j] is None:
            return True
        lay = ch.outputs[j]
        out.append([lay.split(d) for d in range(len(lay.shape))])
    return out or True
