"""Reading MindSpore's ``step_parallel_begin`` IR dump: every operator the parallel pass gave a strategy.

A node line looks like::

  %4(CNode_6) = PrimFunc_MatMul(%2, %3, Bool(0), Bool(0)) {instance name: matmul1} primitive_attrs:
      {in_strategy: ((2, 1), (1, 4))} cnode_attrs: {op_info_created: Bool(1)} {in_strategy: ((2, 1), (1, 4))}
        : (<Tensor[Float32], (256, 784)>, <Tensor[Float32], (784, 64)>, ...) -> (<Tensor[Float32], (256, 64)>)
        # Scope: (Default/fc1-Dense)

The trailing ``{in_strategy: ...}`` block is the strategy the parallel pass chose (printed only for
operators with parallel info: Reshape and Cast have none); ``primitive_attrs`` carries the user's
``shard()``; shapes are global (MindSpore has already multiplied the dataset slices back). Pure text
functions, so the matching can be tested on recorded dumps without MindSpore.
"""
from __future__ import annotations

import math
import re

_NODE = re.compile(r"^\s+%\d+\([^)]*\) = ([\w.]+)\(")
_INSTANCE = re.compile(r"\{instance name: ([^}]*)\}")
_TENSOR = re.compile(r"<(?:Ref\[)?Tensor\[\w+\]\]?, \(([^)]*)\)")


def closing(s: str, i: int) -> int:
    """``s[i]`` opens a bracket; the index just after its match."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = []
    for j in range(i, len(s)):
        c = s[j]
        if c in pairs:
            stack.append(pairs[c])
        elif stack and c == stack[-1]:
            stack.pop()
            if not stack:
                return j + 1
    return len(s)


def parse_tuple(text: str):
    """``'((2, 1), (1, 4))'`` -> ``((2, 1), (1, 4))``; ``'((8, 1))'`` -> ``((8, 1),)`` (MindSpore prints no
    trailing comma, so one row is still a tuple of rows); ``'()'`` -> ``()``.

    >>> parse_tuple("((2, 1), (1, 4))")
    ((2, 1), (1, 4))
    >>> parse_tuple("((8, 1, 1, 1))")
    ((8, 1, 1, 1),)
    >>> parse_tuple("((8, 1), (), ())")
    ((8, 1), (), ())
    """
    pos = 0

    def value():
        nonlocal pos
        while pos < len(text) and text[pos] in " ,":
            pos += 1
        if pos < len(text) and text[pos] in "([":
            close = ")" if text[pos] == "(" else "]"
            pos += 1
            items = []
            while True:
                while pos < len(text) and text[pos] in " ,":
                    pos += 1
                if pos >= len(text) or text[pos] == close:
                    pos += 1
                    return tuple(items)
                items.append(value())
        m = re.match(r"-?\d+|[A-Za-z_]\w*", text[pos:])
        pos += m.end() if m else 1
        if m is None:
            return None
        return int(m.group(0)) if m.group(0).lstrip("-").isdigit() else m.group(0)

    return value()


def field(block: str | None, name: str) -> str | None:
    """The text of ``name: <value>`` inside an attribute block (a bracketed group or one token)."""
    if not block:
        return None
    m = re.search(r"(?:^|[\s,{])" + re.escape(name) + r": ", block)
    if not m:
        return None
    i = m.end()
    if i < len(block) and block[i] in "([{":
        return block[i:closing(block, i)]
    j, depth = i, 0
    while j < len(block) and not (block[j] == "," and depth == 0):
        depth += block[j] in "([{"
        depth -= block[j] in ")]}"
        j += 1
    return block[i:j].strip()


def _block_after(line: str, key: str) -> str | None:
    i = line.find(key)
    if i < 0:
        return None
    b = line.find("{", i)
    return line[b + 1:closing(line, b) - 1] if b >= 0 else None


def _shapes(sig: str | None) -> tuple[list | None, list | None]:
    """``': (<Tensor[F32], (256, 64)>, <Bool, NoShape>) -> (<Tensor[F32], (256, 128)>)'`` -> tensor shapes
    of the inputs and outputs (scalars are not tensors; tuple outputs give each element)."""
    if not sig:
        return None, None
    ins, sep, outs = sig.partition(") -> (")
    if not sep:
        return None, None

    def tensors(txt):
        found = [tuple(int(x) for x in re.findall(r"-?\d+", shp)) for shp in _TENSOR.findall(txt)]
        if not found:
            m = re.search(r"TupleShape\((.*)\)>", txt)
            if m:
                found = [tuple(int(x) for x in re.findall(r"-?\d+", shp)) for shp in re.findall(r"\(([^()]*)\)", m.group(1))]
        return found
    return tensors(ins), tensors(outs)


def _strategy_of_layouts(text: str | None) -> tuple | None:
    """The strategy tuple a configured ``in_layout`` amounts to: per tensor dimension, the product of the device
    matrix axes its tensor map names (counted from the right; -1 none). ``step_parallel_end`` records a Layout-
    configured operator by its primitive's ``in_layout`` alone.

    >>> _strategy_of_layouts("({'device_matrix': (2, 4), 'tensor_map': (1, -1), 'interleaved_parallel': false}, "
    ...                      "{'device_matrix': (2, 4), 'tensor_map': ((1, 0), -1), 'interleaved_parallel': false})")
    ((2, 1), (8, 1))
    """
    if not text:
        return None
    rows = []
    for m in re.finditer(r"'device_matrix': (\([^)]*\)), 'tensor_map': ", text):
        dm = parse_tuple(m.group(1))
        i = m.end()
        tm = parse_tuple(text[i:closing(text, i)])
        row = []
        for d in tm:
            axes = d if isinstance(d, tuple) else (d,)
            row.append(math.prod(dm[len(dm) - 1 - a] for a in axes if a >= 0))
        rows.append(tuple(row))
    return tuple(rows) or None


def _node_blocks(text: str):
    """Each node of a dump, in graph order: (its line's match, the line, its signature ``: (...) -> (...)``, its
    scope), the last two from the indented lines under it."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _NODE.match(line)
        if not m:
            i += 1
            continue
        j = i + 1
        sig = scope = None
        while j < len(lines) and not _NODE.match(lines[j]) and lines[j].startswith("      "):
            t = lines[j].strip()
            if t.startswith(": ") and sig is None:
                sig = t[2:]
            elif t.startswith(("# Scope: (", "# Fullname with scope: (")) and scope is None:
                scope = t[t.index("(") + 1:-1]
            j += 1
        yield m, line, sig, scope
        i = j


def _prim(name: str) -> str:
    return name[len("PrimFunc_"):] if name.startswith("PrimFunc_") else name


def parse_ir(text: str) -> list[dict]:
    """The operators with parallel info, in graph order, each a dict: ``type``, ``instance``, ``scope``,
    ``in_strategy``, ``out_strategy``, ``in_layout``/``out_layout`` (MindSpore's text), ``configured``
    (a user ``shard()`` on the primitive), ``input_shapes``, ``output_shapes``."""
    nodes = []
    for m, line, sig, scope in _node_blocks(text):
        k = line.rfind(" {in_strategy: ")
        if k < 0:
            k = line.rfind(" {in_layout: ")
        if k >= 0 and m.group(1) in ("MakeTuple", "MakeList"):
            k = -1        # the end dump's strategy on Concat's tuple argument: an input, not an operator
        if k >= 0:
            pinfo = line[k + 2:closing(line, k + 1) - 1]
            op = m.group(1)
            inst = _INSTANCE.search(line)
            prim_attrs = _block_after(line[:k], "primitive_attrs: {")
            ins, outs = _shapes(sig)
            in_s, out_s = field(pinfo, "in_strategy"), field(pinfo, "out_strategy")
            in_l = field(pinfo, "in_layout")
            in_strategy = parse_tuple(in_s) if in_s else _strategy_of_layouts(in_l)
            nodes.append({
                "type": _prim(op),
                "instance": inst.group(1) if inst else None,
                "scope": scope,
                "in_strategy": in_strategy,
                "out_strategy": parse_tuple(out_s) if out_s else None,
                "in_layout": in_l,
                "out_layout": field(pinfo, "out_layout"),
                "configured": bool(prim_attrs and re.search(r"(?:^|[\s,])(?:in_strategy|in_layout): ", prim_attrs))
                              or line[:k].endswith("primitive_attrs:"),   # the end dump's in_layout block
                "input_shapes": ins,
                "output_shapes": outs,
            })
    return nodes


_ID = re.compile(r"^\s+%(\d+)\(")
#: graph plumbing a redistribution's operators are threaded through
_PLUMBING = frozenset({"TupleGetItem", "MakeTuple", "MakeList", "Depend"})
#: the operators that move data between devices
COLLECTIVES = frozenset({"AllGather", "AllToAll", "AlltoAll", "AllToAllv", "ReduceScatter", "AllReduce",
                         "NeighborExchange", "NeighborExchangeV2", "Send", "Receive", "Broadcast"})


def _node_table(text: str) -> list[dict]:
    """The dump's numbered nodes in graph order: ``id``, ``type``, ``instance`` (None without one), ``scope``,
    ``args`` (the ids its call reads), ``line`` and ``sig`` (its signature)."""
    out = []
    for m, line, sig, scope in _node_blocks(text):
        mid = _ID.match(line)
        if not mid:
            continue
        a = m.end() - 1
        inst = _INSTANCE.search(line)
        out.append({"id": mid.group(1), "type": _prim(m.group(1)), "instance": inst.group(1) if inst else None,
                    "scope": scope, "args": re.findall(r"%(\d+)\b", line[a:closing(line, a)]), "line": line,
                    "sig": sig})
    return out


def parse_redistributions(text: str) -> list[dict]:
    """The tensor redistributions MindSpore's ``step_parallel_end`` graph carries, in graph order: per consumer
    input fed through operators whose instance name starts ``redistribution_op``, a dict with ``src`` and ``dst``
    (each ``type``, ``instance``, ``scope`` of the nodes at its ends) and ``ops`` (the redistribution's operator
    types, producer side first) and ``collectives`` (those of them that move data between devices); ``also``: the
    other consumers reading the same redistributed tensor (listed once).
    An operator's own communication (a MatMul's AllReduce, a Parameter's mirror) is not among them."""
    order = _node_table(text)
    nodes = {n["id"]: n for n in order}

    def redist(n):
        return (n["instance"] or "").startswith("redistribution_op")

    def own(n):        # an operator's own forward communication (a MatMul's AllReduce): part of its producer
        return (n["instance"] or "").startswith("forward_op")

    def walk(arg, top):
        """(source node, redistribution operators) per tensor feeding a consumer through ``arg``."""
        ops, cur, seen, after_redist = [], nodes.get(arg), [], False
        while cur is not None and cur["id"] not in seen:
            seen.append(cur["id"])
            if cur["type"] in ("MakeTuple", "MakeList") and top and not ops:
                # a consumer's tuple argument (Concat's): each element has its own redistribution
                return [x for a in cur["args"] for x in walk(a, False)]
            if redist(cur):
                ops.append(cur["type"])
            elif not (own(cur) or cur["type"] in ("TupleGetItem", "Depend")
                      or (cur["type"] in ("MakeTuple", "MakeList") and after_redist)):
                break               # (a tuple a redistribution's Concat joins: its Split's pieces)
            after_redist = redist(cur)
            cur = nodes.get(cur["args"][0]) if cur["args"] else None
            top = False
        first = next((i for i in seen if redist(nodes[i])), None)     # the chain's last operator, by id
        return [(cur, ops[::-1], first)] if cur is not None and ops else []

    out, by_chain = [], {}
    for node in order:
        if redist(node) or own(node) or node["type"] in _PLUMBING:
            continue
        for arg in node["args"]:
            for src, ops, chain in walk(arg, True):
                dst = {k: node[k] for k in ("type", "instance", "scope")}
                if chain in by_chain:       # one redistribution several consumers read (a replaced Reshape's)
                    by_chain[chain]["also"].append(dst)
                    continue
                by_chain[chain] = {"src": {k: src[k] for k in ("type", "instance", "scope")}, "dst": dst,
                                   "ops": tuple(ops), "collectives": tuple(o for o in ops if o in COLLECTIVES),
                                   "also": []}
                out.append(by_chain[chain])
    return out


_MIRROR_USER = re.compile(r'mirror_user_id: "([^"]*)"')
_DEV_NUM = re.compile(r"\bdev_num: I64\((\d+)\)")


def parse_mirrors(text: str) -> dict[str, int]:
    """The Parameters' gradient reductions in a trained net's ``step_parallel_end`` graph: per Parameter
    (``mirror_user_id``, e.g. ``net.w``), the number of devices its ``_MirrorOperator`` groups -- the devices
    holding the same slice of it, whose gradients its backward all-reduces."""
    out: dict[str, int] = {}
    for m, line, _sig, _scope in _node_blocks(text):
        if _prim(m.group(1)) != "_MirrorOperator":
            continue
        user, n = _MIRROR_USER.search(line), _DEV_NUM.search(line)
        if user and n:
            out[user.group(1)] = int(n.group(1))
    return out


_TENSOR_SIG = re.compile(r"<Tensor\[(\w+)\], \(([\d, ]*)\)(?:, value=[^>]*)?>")
_RANK_SIZE = re.compile(r"\brank_size: I64\((\d+)\)")
_RANK_IDS = re.compile(r"\bgroup_rank_ids: \(([\d, ]*)\)")
_GROUP_RANKS = re.compile(r'\bgroup_ranks: "([^"]*)"')


_UNIQUE_ID = re.compile(r'cnode_primal_attrs: \{[^}]*?\bunique_id: "(\d+)"')
_FORWARD_ID = re.compile(r'\bforward_unique_id: "(\d+)"')


def _group_size(line: str, device_num: int) -> int:
    """Devices in a collective's group: ``rank_size``, else ``group_rank_ids``, else ``group_ranks``."""
    if m := _RANK_SIZE.search(line):
        return int(m.group(1))
    if m := _RANK_IDS.search(line):
        return len([x for x in m.group(1).split(",") if x.strip()])
    if m := _GROUP_RANKS.search(line):
        return device_num if m.group(1) == "WORLD_GROUP" else len(m.group(1).split("-"))
    return 1


def _input_bytes(sig: str | None) -> float:
    """Bytes of a node's (first) tensor input, from its signature."""
    t = _TENSOR_SIG.search(sig.split("->")[0]) if sig else None
    if t is None:
        return 0.0
    from ..vocab.graph import DTYPE_BYTES
    shape = [int(x) for x in t.group(2).split(",") if x.strip()]
    return float(math.prod(shape) * DTYPE_BYTES.get(t.group(1).lower(), 4))


def parse_collectives(text: str, device_num: int, wrapper: str | None = None, model: str | None = None,
                      outputs_configured: bool = False) -> list[dict]:
    """Every collective of a trained net's graph after autodiff (the ``validate`` dump), in graph order: ``kind``,
    ``n`` (devices in its group), ``bytes`` (what one device sends, ring volumes as strategist prices them:
    :func:`strategist.engine.redistribution.ring_bytes`), ``phase`` -- ``"forward"``, ``"backward"`` (the transpose of a
    forward collective: its scope starts ``Gradients/``) or ``"mirror"`` (a Parameter's gradient reduction,
    ``grad_mirror``) -- ``instance`` and ``scope``. ``wrapper``/``model``: scope segments of a training wrapper's
    cell and of the model's inside it; the wrapper's own collectives (forward ones under ``wrapper`` but not
    ``model``, or whose result only the wrapper reads, and their transposes, ``grad`` + the forward's instance
    name) are left out (autodiff credits some backward and mirror nodes to no cell: ``Gradients/Default/Grad_...``).
    ``outputs_configured``: the wrapper's loss sums were configured with the layouts the plan compared gives the
    model's outputs, so a redistribution only they read turns an output into that layout -- the model's own (a
    Reshape at the output has no layout of its own in MindSpore: the redistribution before it is credited to the
    edge into the sum; CoreAttention with a cp axis, random net 20) -- and is kept."""
    from ..engine.redistribution import ring_bytes
    table = _node_table(text)
    feeds_wrapper = _feeding_only(table, wrapper, model) if wrapper and model and not outputs_configured else set()
    out, theirs, their_ids = [], set(), set()
    for node in table:
        kind, inst, scope = node["type"], node["instance"] or "", node["scope"]
        if kind not in COLLECTIVES:
            continue
        phase = ("mirror" if inst.startswith("grad_mirror") else
                 "backward" if scope and scope.startswith("Gradients/") else "forward")
        if wrapper and phase == "forward" and ((scope and wrapper in scope and not (model and model in scope))
                                               or node["id"] in feeds_wrapper):
            theirs.add(inst)
            if m := _UNIQUE_ID.search(node["line"]):
                their_ids.add(m.group(1))
            continue
        if phase == "backward":
            # a transpose names its forward node (forward_unique_id); the instance name does not tell: every
            # operator's forward AllReduce may share one (random net 46: the model's MatMuls' and the loss sums')
            fwd = _FORWARD_ID.search(node["line"])
            if (fwd.group(1) in their_ids if fwd else
                    (inst[len("grad"):] in theirs or inst[len("grad_"):] in theirs)):
                continue
        n = _group_size(node["line"], device_num)
        ring = "AllToAll" if kind in ("AlltoAll", "AllToAllv") else kind
        out.append({"kind": kind, "n": n, "bytes": ring_bytes(ring, n, _input_bytes(node["sig"])), "phase": phase,
                    "instance": inst, "scope": scope})
    return out


def _feeding_only(table: list[dict], wrapper: str, model: str) -> set[str]:
    """Ids of the redistribution collectives whose result only the wrapper's operators read (through other
    redistribution operators and plumbing): the model's outputs gathered for a training wrapper's loss. MindSpore
    credits them to the producer's cell, so the scope does not tell."""
    nodes = {n["id"]: n for n in table}
    users: dict[str, list[str]] = {}
    for n in table:
        for arg in n["args"]:
            users.setdefault(arg, []).append(n["id"])
    out = set()
    for nid, node in nodes.items():
        if node["type"] not in COLLECTIVES or not (node["instance"] or "").startswith("redistribution_op"):
            continue
        seen, todo, ends = set(), [nid], []
        while todo:
            for u in users.get(todo.pop(), []):
                if u in seen:
                    continue
                seen.add(u)
                if (nodes[u]["instance"] or "").startswith("redistribution_op") or nodes[u]["type"] in _PLUMBING:
                    todo.append(u)
                else:
                    ends.append(nodes[u]["scope"] or "")
        if ends and all(wrapper in sc and model not in sc for sc in ends):
            out.add(nid)
    return out
