"""MindSpore's ANF ``ModelProto`` of a compiled graph folded into an :class:`~strategist.vocab.graph.OpGraph`.

:func:`from_proto` decodes the proto (:mod:`strategist.frontend.protowire`, or MindSpore's generated class),
names the operators (:func:`strategist.frontend.owners.name_operators`) and links their inputs through the
plumbing nodes (``Load``, ``Depend``, ``MakeTuple``, ``TupleGetItem``). MindSpore is imported inside the
functions: importing this module does not load it.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ..memo import lru
from ..vocab.graph import PLUMBING, Input, Op, OpGraph, Param, ShardLayout, TensorSpec
from .irtext import tuple_shapes_from_text
from .owners import OWNER_ATTR, name_operators, source_of


_DT = {
    "DT_BOOL": "bool", "DT_INT8": "int8", "DT_INT16": "int16", "DT_INT32": "int32",
    "DT_INT64": "int64", "DT_UINT8": "uint8", "DT_UINT16": "uint16", "DT_UINT32": "uint32",
    "DT_UINT64": "uint64", "DT_FLOAT16": "float16", "DT_FLOAT32": "float32",
    "DT_FLOAT64": "float64", "DT_BFLOAT16": "bfloat16", "DT_BASE_FLOAT": "float32",
    "DT_COMPLEX64": "complex64", "DT_COMPLEX128": "complex128",
}




def _enum_name(v: int) -> str:
    """``anf_ir_pb2.DataType.Name`` through a table (the enum lookup is slow in the Python runtime)."""
    return _enum_names().get(v, "DT_UNDEFINED")


@lru("front end: proto dtype names", 1)
def _enum_names() -> dict[int, str]:
    from mindspore.train import anf_ir_pb2
    return {e.number: e.name for e in anf_ir_pb2.DataType.DESCRIPTOR.values}


def _dtype_name(pb_enum_value) -> str:
    return _DT.get(_enum_name(pb_enum_value), "unknown")


def _value(v) -> Any:
    """ValueProto -> Python value (tuples, scalars, strings, None, dicts)."""
    dt = _enum_name(v.dtype)
    if dt in ("DT_TUPLE", "DT_LIST"):
        return tuple(_value(x) for x in v.values)
    if dt == "DT_DICT":
        return {kv.key: _value(kv.value) for kv in v.dict_val}
    if dt == "DT_NONE":
        return None
    if dt == "DT_BOOL":
        return bool(v.bool_val)
    if dt.startswith(("DT_INT", "DT_UINT")):
        return int(v.int_val)
    if dt.startswith(("DT_FLOAT", "DT_BFLOAT")):
        return float(v.float_val) if v.float_val else float(v.double_val)
    if dt == "DT_TYPE":
        return _dtype_name(v.type_val.data_type) if v.HasField("type_val") else "type"
    if dt == "DT_TENSOR" and v.HasField("tensor_val"):
        t = v.tensor_val
        return {"tensor": str(TensorSpec(tuple(t.dims), _dtype_name(t.data_type)))}
    if v.str_val:
        return v.str_val
    return None


def _spec_of(type_proto) -> TensorSpec | tuple | None:
    """TypeProto -> TensorSpec, or a tuple of (TensorSpec|dtype str) for tuple outputs."""
    dt = _enum_name(type_proto.data_type)
    if dt == "DT_TENSOR":
        tt = type_proto.tensor_type
        if tt.HasField("shape"):
            return TensorSpec(tuple(int(d.size) for d in tt.shape.dim), _dtype_name(tt.elem_type))
        return TensorSpec((), _dtype_name(tt.elem_type))
    if dt in ("DT_TUPLE", "DT_LIST"):
        return tuple(_spec_of(e) for e in type_proto.sequence_type.elem_types)
    if dt in _DT:  # a scalar
        return TensorSpec((), _DT[dt])
    return None


def shard_layouts(value) -> tuple[ShardLayout, ...]:
    """The Layouts of an operator's tensors; a tuple input's own tuple of Layouts (``Concat.shard(in_strategy=
    ((lay(...), lay(...)),))``, MindFormers' MTP Concat) gives one per element, as a tuple strategy does."""
    out = []
    for d in (x for v in value for x in (v if isinstance(v, (tuple, list)) else (v,))):
        tmap = tuple(tuple(t) if isinstance(t, tuple) else (() if t == -1 else (t,))
                     for t in d["tensor_map"])
        tmap = tuple(tuple(k for k in t if k != -1) for t in tmap)
        out.append(ShardLayout(tuple(d["device_matrix"]), tuple(d["alias_name"]), tmap))
    return tuple(out)


def from_proto(proto: bytes, ir_text: str | None, cell, model: str, parser: str = "wire",
               owners: dict[int, list[tuple[str, str]]] | None = None,
               calls: dict[str, str] | None = None) -> OpGraph:
    """``parser``: ``"wire"`` (strategist.frontend.protowire, fast) or ``"protobuf"`` (MindSpore's generated class;
    the tests check both give the same graph). ``owners``: the tags of
    :func:`strategist.frontend.owners.owned_primitives`; ``calls``: node full name -> ``file:line`` of its call in
    the user's code (:func:`strategist.frontend.compile.call_stacks`)."""
    from mindspore.train import anf_ir_pb2     # MindSpore's generated class, loaded only when a graph is read

    g = _decode(proto, parser, anf_ir_pb2).graph
    data_edge = anf_ir_pb2.InputProto.DATA_EDGE
    consts = {c.key: _value(c.value) for c in g.const_vals}
    params, graph_inputs = _parameters(g, cell)
    nodes = {n.name: n for n in g.node}
    cells = {name: type(c).__name__ for name, c in cell.cells_and_names()}
    cell_objs = dict(cell.cells_and_names())
    real = [n for n in g.node if n.op_type not in PLUMBING]
    where, op_name, explicit = name_operators(real, nodes, cell, owners)
    resolve = _Resolver(nodes, consts, params, graph_inputs, op_name, data_edge)
    ops = _operators(real, resolve, data_edge, ir_text, where, op_name, explicit, cell_objs, calls)
    _fill_tuple_outputs(ops)
    outputs_ = []
    for o in g.outputs:
        r = resolve(o.name)
        outputs_.extend(x for x in (r if isinstance(r, tuple) else (r,)) if x is not None)
    return OpGraph(ops, graph_inputs, params, outputs_, cells, model)


def _decode(proto: bytes, parser: str, anf_ir_pb2):
    """The ``ModelProto`` of ``proto``'s bytes, by strategist's wire decoder or MindSpore's generated class."""
    if parser == "wire":
        # imported here, not at the top: protowire picks protobuf's runtime for MindSpore, which must come first
        from .protowire import decode
        return decode(proto, anf_ir_pb2.ModelProto.DESCRIPTOR)
    m = anf_ir_pb2.ModelProto()
    m.ParseFromString(proto)
    return m


def _parameters(g, cell) -> tuple[dict[str, Param], dict[str, TensorSpec]]:
    """The graph's parameters: the Cell's weights, and its inputs (the rest)."""
    weights = cell.parameters_dict()
    params: dict[str, Param] = {}
    graph_inputs: dict[str, TensorSpec] = {}
    for p in g.parameters:
        spec = _spec_of(p.type)
        if p.name in weights:
            params[p.name] = Param(p.name, spec, bool(weights[p.name].requires_grad))
        else:
            graph_inputs[p.name] = spec
    return params, graph_inputs


class _Resolver:
    """A node name -> what an operator reading it takes: an :class:`Input` (an operator's output, a parameter, a
    graph input, a constant), a tuple of them (a MakeTuple/MakeList), or None (a monad); through the plumbing
    nodes. Memoised."""

    def __init__(self, nodes, consts, params, graph_inputs, op_name, data_edge):
        self.nodes, self.consts, self.params, self.graph_inputs = nodes, consts, params, graph_inputs
        self.op_name, self.data_edge = op_name, data_edge
        self.memo: dict[str, Any] = {}

    def _packed(self, x, name: str, tuple_: bool):
        """An element of a MakeTuple/MakeList: MindSpore links it only if it is a real op itself; a MakeTuple's
        elements are marked ``packed``."""
        nodes = self.nodes
        direct = name in nodes and nodes[name].op_type not in PLUMBING
        if isinstance(x, Input) and x.kind in ("op", "input") and (not direct or tuple_):
            return dataclasses.replace(x, edge=x.edge and direct, packed=x.packed or tuple_)
        return x

    def __call__(self, name: str):
        if name in self.memo:
            return self.memo[name]
        consts, nodes = self.consts, self.nodes
        if name in consts:
            v = consts[name]
            if isinstance(v, dict) and "tensor" in v:      # a tensor constant (scalars become rank 0)
                r = Input("const", spec=TensorSpec.parse(v["tensor"]), value=v)
            else:
                r = None if v in ("U", "IO") else Input("const", value=v)
        elif name in self.params:
            r = Input("param", name, spec=self.params[name].spec)
        elif name in self.graph_inputs:
            r = Input("input", name, spec=self.graph_inputs[name])
        elif name in nodes:
            r = self._node(name, nodes[name])
        else:
            r = None
        self.memo[name] = r
        return r

    def _node(self, name: str, n):
        ins = [i.name for i in n.input if i.type == self.data_edge]
        if n.op_type in ("Load", "Depend"):
            return self(ins[0])
        if n.op_type in ("MakeTuple", "MakeList"):
            return tuple(self._packed(self(i), i, n.op_type == "MakeTuple") for i in ins)
        if n.op_type in ("TupleGetItem", "ListGetItem"):
            src, idx = self(ins[0]), self.consts.get(ins[1], 0)
            spec = _spec_of(n.output_type)
            if isinstance(src, tuple):
                r = src[idx]
                if isinstance(r, Input) and not r.edge:
                    r = dataclasses.replace(r, edge=True)
                return r
            if src is not None and src.kind == "op":
                return Input("op", src.ref, idx, spec if isinstance(spec, TensorSpec) else None)
            return src
        if n.op_type in ("UpdateState", "Return"):
            return None
        spec = _spec_of(n.output_type)
        return Input("op", self.op_name[name], 0, spec if isinstance(spec, TensorSpec) else None)


def _operators(real, resolve, data_edge, ir_text, where, op_name, explicit, cell_objs, calls) -> list[Op]:
    """One :class:`Op` per real node, in graph order; tuple output shapes from the IR text where it matches."""
    ir_nodes = tuple_shapes_from_text(ir_text)
    ir_nodes = [x for x in ir_nodes if x[0] not in PLUMBING]
    use_ir = len(ir_nodes) == len(real) and all(a == n.op_type for (a, _), n in zip(ir_nodes, real))

    ops: list[Op] = []
    for idx, n in enumerate(real):
        slots: list[Input] = []
        for i in n.input:
            if i.type != data_edge:
                continue
            slots.extend(_flat(resolve(i.name)))
        out = _spec_of(n.output_type)
        if isinstance(out, TensorSpec):
            outputs: tuple = (out,)
        elif isinstance(out, tuple):
            shapes = ir_nodes[idx][1] if use_ir else None
            outputs = tuple(
                TensorSpec(tuple(shapes[k]), e.dtype) if shapes and k < len(shapes) and isinstance(e, TensorSpec)
                else None for k, e in enumerate(out))
        else:
            outputs = ()
        attrs = {a.name: _value(a.value) for a in n.attribute if a.name != OWNER_ATTR}
        path, klass, inst = where[n.name]
        name = op_name[n.name]
        op = Op(
            # mindspore.reshard's primitive: MindSpore's step_parallel turns it into a configured AShardIdentity
            name=name, type="AShardIdentity" if n.op_type == "Reshard" else n.op_type, cell_path=path, cell_class=klass,
            instance_name=inst, full_name=n.full_name, inputs=tuple(slots), outputs=outputs,
            attrs={k: v for k, v in attrs.items()
                   if k not in ("in_strategy", "out_strategy", "in_layout", "out_layout")},
            in_strategy=attrs.get("in_strategy"), out_strategy=attrs.get("out_strategy"),
            in_layout=shard_layouts(attrs["in_layout"]) if "in_layout" in attrs else None,
            out_layout=shard_layouts(attrs["out_layout"]) if "out_layout" in attrs else None,
            source=(source_of(cell_objs.get(path), inst) if explicit[n.name] or not calls
                    else calls.get(n.full_name) or source_of(cell_objs.get(path), inst)),
            topo_index=idx, held=bool(explicit[n.name]),
        )
        ops.append(op)
    return ops


def _flat(r) -> list[Input]:
    """A resolved input as the operator's slots: a tuple (of tuples: a MakeTuple of MakeTuples) flattened."""
    if isinstance(r, tuple):
        return [x for item in r for x in _flat(item)]
    return [] if r is None else [r]


def _fill_tuple_outputs(ops: list[Op]) -> None:
    """Fill tuple-output shapes seen only through TupleGetItem."""
    by_name = {op.name: op for op in ops}
    for op in ops:
        for x in op.inputs:
            if x.kind == "op" and x.spec is not None:
                src = by_name[x.ref]
                if x.index < len(src.outputs) and src.outputs[x.index] is None:
                    outs = list(src.outputs)
                    outs[x.index] = x.spec
                    src.outputs = tuple(outs)
