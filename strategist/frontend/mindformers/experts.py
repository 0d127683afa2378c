"""The strategies MindFormers' experts wrote, read from builds at a mesh as anchors on the tp=1 graph.

Nothing is compiled: a build at the mesh (``semi_auto``: every ``shard()``; ``propagation``: the
``sharding_propagation()`` anchors) leaves the strategies as its primitives' attributes, which are mapped onto the
graph's operators by cell path and attribute, adapted exactly where the tp=1 graph's shapes differ
(:func:`_variants`), and translated from a Morph's per-device layout onto its inlined operator (:func:`_morph`). The
loss's own primitives' strategies are read once per model, options and mesh (:func:`loss_own_strategies`). MindSpore
and MindFormers are imported inside the functions that use them: importing this module loads neither.
"""
from __future__ import annotations

import dataclasses
import json
import time

from ...memo import table
from ...engine.rules.sharding import shard, shard_layout
from ...engine.plan import PARALLEL_ONLY, SEMI_AUTO
from ...vocab.anchors import Anchor
from ...errors import InputSpecError, StrategistError, StrategyError
from ...vocab.graph import OpGraph, ShardLayout
from ...vocab.mesh import Mesh
from ..proto import shard_layouts
from .build import build_model, clear_strategies, prims_of
from .config import load_yaml, mesh_sizes, mesh_warnings, resolve_config
from .morph import MORPH_FFN, ffn_name
from .rewrites import layer_of, replicate_anchors, shift_layers
from .world import mindformers_world, undefined_sharding_propagation


class Experts(dict):
    """Operator name -> :class:`~strategist.vocab.anchors.Anchor` read from MindFormers' own code.

    ``notes`` lists what MindFormers breaks or what could not be mapped (the report prints them);
    ``unmapped`` the configured primitives that have no operator in the graph.
    """

    def __init__(self, mode: str, mesh: Mesh):
        super().__init__()
        self.mode = mode
        self.mesh = mesh
        self.notes: list[str] = []
        self.unmapped: list[str] = []
        self.build_seconds = 0.0
        #: propagation mode: (class name, source file) of the model's classes that MindFormers calls
        #: ``sharding_propagation()`` on without defining it (FlashAttention, MoELayer)
        self.undefined: list[tuple[str, str]] = []
        #: what MindFormers' code sets on an operator that cannot take it (read, not anchored; MindSpore refuses
        #: it): (operator, the strategy, the note saying so)
        self.refused: list[tuple[str, Anchor, str]] = []


def _strategy_of(prim):
    a = prim.attrs
    ins = a.get("in_layout") or a.get("in_strategy")
    if ins is None:
        return None
    return {"in_strategy": a.get("in_strategy"), "out_strategy": a.get("out_strategy"),
            "in_layout": a.get("in_layout"), "out_layout": a.get("out_layout")}


def _to_layouts(v) -> tuple[ShardLayout, ...] | None:
    if v is None:
        return None
    flat = []
    for d in v:      # a tuple input (Concat's list) carries a tuple of layouts: its slots are flattened
        flat.extend(d if isinstance(d, tuple) else (d,))
    if not all(isinstance(d, dict) for d in flat):
        return None
    return shard_layouts(tuple(flat))


def _tensor_inputs(op) -> list:
    return [x for x in op.inputs if x.spec is not None and x.kind != "const"] or \
        [x for x in op.inputs if x.spec is not None]


def _merge_rows(lay: ShardLayout) -> ShardLayout:
    """``[S, B, h]`` -> ``[S*B, h]``: the leading dimensions' axes, outer first, become one dimension."""
    lead = tuple(a for t in lay.tensor_map[:-1] for a in t)
    return ShardLayout(lay.device_matrix, lay.alias_name, (lead, lay.tensor_map[-1]))


def _param_reader(graph: OpGraph):
    """Parameter name -> operators reading it directly or through Cast/Load-like unary ops."""
    readers: dict[str, list] = {}
    for op in graph:
        for slot, x in enumerate(op.inputs):
            if x.kind == "param":
                readers.setdefault(x.ref, []).append((op, slot))
    out: dict[str, list] = {}
    for pname, lst in readers.items():
        res = []
        for op, slot in lst:
            res.append((op, slot))
            if op.type == "Cast":
                for e in graph.out_edges(op.name):
                    res.append((graph.op(e.dst), e.in_slot))
        out[pname] = res
    return out


#: (model, build options, mesh, operators) -> (anchors, notes): loss_own_strategies' readings
_LOSS_OWN_STRATEGIES = table("mindformers: the loss's own strategies per model and mesh", 4096)


def _loss_own_key(graph: OpGraph, mesh: Mesh) -> tuple:
    """The reading's key: the model, its options, MindFormers' data, model and context parallel sizes at ``mesh``
    (what the loss's ``shard()`` calls read; the expert parallel size is not among them, so an ep axis or a drawn ep
    shares the reading of the mesh without it) and the loss's operators."""
    opts = json.dumps(graph.mf_options or {}, sort_keys=True, default=str)
    try:
        sizes = mesh_sizes(mesh)
        at = (sizes["dp"], sizes["tp"], sizes["cp"])
    except InputSpecError:                  # axes MindFormers does not know: the reading's note says so
        at = str(mesh)
    return graph.model, opts, at, tuple(sorted(graph.parallel_only or ()))


def loss_own_strategies(graph: OpGraph, mesh: Mesh) -> tuple[dict[str, Anchor], list[str]]:
    """The strategies MindFormers' CrossEntropyLoss gives its own primitives (``graph.parallel_only``,
    :data:`LOSS_OWN`) at ``mesh`` -- e.g. ``self.add.shard(((dp * cp, mp), ()))``,
    ``self.add_label.shard(((dp * cp,), ()))``, ``self.sum2.shard(((1,),))`` in ``__init__`` in any semi/auto
    parallel mode, with the dp/mp of the loss's own parallel config (ChatGLM2's is vocabulary-parallel:
    ``((1, dp*cp*mp), ())``) -- read from the model built at the mesh (:func:`loss_build`, once per model, options
    and MindFormers' dp, tp and cp), origin :data:`~strategist.engine.plan.PARALLEL_ONLY`.
    Returns (anchors, notes); a mesh MindFormers cannot build leaves them unconfigured, with a note."""
    key = _loss_own_key(graph, mesh)
    if key not in _LOSS_OWN_STRATEGIES:
        names = key[3]
        try:
            ex = _read_loss(graph, mesh, names)
            got = {n: dataclasses.replace(ex[n], origin=PARALLEL_ONLY) for n in names if n in ex}
            failed = None
        except StrategistError as err:
            got, failed = {}, str(err).splitlines()[0]
        _LOSS_OWN_STRATEGIES[key] = (got, failed)
    got, failed = _LOSS_OWN_STRATEGIES[key]
    if failed is not None:
        notes = [f"MindFormers' loss primitives left to propagation: their strategies at {mesh} could not be read "
                 f"({failed})"]
    else:
        miss = [n for n in key[3] if n not in got]
        notes = [f"MindFormers configures no strategy strategist could read on {', '.join(miss)} at {mesh}: left "
                 f"to propagation"] if miss else []
    return dict(got), notes


#: the shortest sequence a loss reading builds at (the causal mask MindFormers builds is ``[seq, seq]``); and the
#: shortest where a model refuses that: MindFormers' compressed attention mask (DeepSeek-V3's
#: ``use_attn_mask_compression``) refuses a sequence below 2048
LOSS_SEQ, LOSS_SEQ_REFUSED = 256, 2048
#: the models (and their options) whose build refused :data:`LOSS_SEQ`: read at :data:`LOSS_SEQ_REFUSED` since
_SHORT_REFUSED = table("mindformers: models refusing a short loss build", 64)


def loss_build(options: dict, mesh: Mesh, shortest: int = LOSS_SEQ) -> dict:
    """The build options :func:`loss_own_strategies` reads the loss at: ``options`` (the graph's) at one layer
    and, where the sequence halves evenly at ``mesh`` (a multiple of its dp, tp and cp devices, ``shortest``
    tokens at least), at the shortest such sequence. The loss's ``shard()`` calls read the parallel config alone,
    never the layer count or the sequence; a shorter build skips the layers and most of MindFormers' ``[seq, seq]``
    causal mask.

    >>> loss_build({"seq": 8192, "batch": 8}, Mesh.parse("dp=4,tp=2,cp=2"), 2048)
    {'seq': 2048, 'batch': 8, 'layers': 1}
    >>> loss_build({"seq": 8192}, Mesh.parse("dp=4,tp=2,cp=2"))["seq"]
    256
    >>> loss_build({"seq": 4096}, Mesh.parse("dp=3,tp=2"))["seq"]     # 4096 / 2 is no multiple of 6
    4096
    """
    seq, n = options.get("seq"), mesh.size
    if seq:
        while seq % 2 == 0 and seq // 2 >= shortest and (seq // 2) % n == 0:
            seq //= 2
    return {**options, "seq": seq, "layers": 1}


def _read_loss(graph: OpGraph, mesh: Mesh, names) -> Experts:
    """The loss's own operators' (``names``) strategies, read from a one-layer build at a short sequence
    (:func:`loss_build`); where that build fails on a mesh MindFormers does not refuse as such
    (:func:`~.config.mesh_warnings`), a reading of the build as the graph's options give it."""
    opts = dict(graph.mf_options or {})
    ids = graph.inputs.get("input_ids")      # [batch, seq]: the sequence the graph was built at
    seq = ids.shape[1] if ids is not None else opts.get("seq")
    model = _loss_own_key(graph, mesh)[:2]             # the model and its options
    for shortest in ((LOSS_SEQ_REFUSED,) if model in _SHORT_REFUSED else (LOSS_SEQ, LOSS_SEQ_REFUSED)):
        try:
            return read_expert_strategies(graph.model, mesh, "propagation", graph, only=frozenset(names),
                                          **loss_build({**opts, "seq": seq}, mesh, shortest))
        except StrategistError:
            if mesh_warnings(graph, mesh):  # MindFormers refuses the mesh itself (heads, experts), at any length
                raise
            _SHORT_REFUSED[model] = True
    return read_expert_strategies(graph.model, mesh, "propagation", graph, only=frozenset(names), **opts)


def note_loss_own_strategies(graph: OpGraph, mesh: Mesh, experts) -> None:
    """Record the loss adds' strategies from experts read at ``mesh`` (either mode: MindFormers configures the adds
    in ``__init__`` alike), so that :func:`loss_own_strategies` builds nothing more. :func:`expert_strategies` calls
    it on every reading."""
    names = graph.parallel_only
    if not names or experts is None:
        return
    key = _loss_own_key(graph, mesh)
    if key not in _LOSS_OWN_STRATEGIES and all(n in experts for n in names):
        _LOSS_OWN_STRATEGIES[key] = ({n: dataclasses.replace(experts[n], origin=PARALLEL_ONLY) for n in names}, None)


def _validate(graph: OpGraph, anchor: Anchor, n: int):
    op = graph.op(anchor.op)
    if anchor.layouts is not None:
        shard_layout(op, tuple(anchor.layouts), n, anchor.out_layouts)
    else:
        shard(op, anchor.strategy, n, anchor.out_strategy)


def read_expert_strategies(ref: str, mesh: Mesh | str, mode: str, graph: OpGraph, *, layers: int | None = None,
                           seq: int | None = None, batch: int | None = None,
                           overrides: dict | None = None, only: frozenset | None = None) -> Experts:
    """:func:`strategist.frontend.mindformers.expert_strategies` on ``graph``, ``ref``'s graph already loaded
    (``mode`` ``"semi_auto"`` or ``"propagation"``); ``only``: those operators' strategies alone, read from a build
    at ``layers`` as given (the graph's extracted layers are not copied)."""
    mesh = Mesh.parse(mesh) if isinstance(mesh, str) else mesh
    sizes = mesh_sizes(mesh)
    n = sizes["dp"] * sizes["tp"] * sizes["cp"]
    if n != mesh.size:
        raise InputSpecError(f"mesh {mesh} has {mesh.size} devices but MindFormers' dp*cp*tp = {n} "
                             f"(ep splits the data-parallel devices, it adds none)")
    out = Experts(mode, mesh)
    path = resolve_config(ref)
    # a replicated graph (load_mindformers): read the experts at the extracted layer count, copy the last layer's
    ext = graph.mf_extracted_layers if only is None else None
    total = max((layer_of(op.cell_path) or 0 for op in graph), default=0) + 1
    t0 = time.perf_counter()
    with mindformers_world(mode=mode, device_num=n, notes=out.notes):
        cfg = load_yaml(path, ext or layers, seq, overrides or {})
        net = build_model(cfg, **sizes)
        cells = list(net.cells_and_names())
        if mode == "propagation" and only is None:
            out.undefined = undefined_sharding_propagation(cells)
        found = []
        for cpath, cell in cells:
            for attr, prim in prims_of(cell).items():
                st = _strategy_of(prim)
                if st is not None:
                    found.append((cpath, cell, attr, prim, st))
        # MindFormers shares some primitive objects between builds (TopKRouter's gating activation is one
        # object for every router of every model): a strategy left on it would reach the next build, where
        # the mode calls no shard() (a propagation build read the router's semi_auto strategy). Leave none.
        clear_strategies(net)
    out.build_seconds = time.perf_counter() - t0
    if only is not None:
        wanted: dict[tuple[str, str], list] = {}
        for name in sorted(only):
            op = graph.op(name)
            wanted.setdefault((op.cell_path, op.instance_name), []).append(op)
        for cpath, _cell, attr, _prim, st in found:
            for op in wanted.get((cpath, attr), ()):
                _add(graph, out, op, st, f"{cpath}.{attr}" if cpath else attr, n)
        return out
    readers = _param_reader(graph)
    by_key: dict[tuple[str, str], list] = {}
    for op in graph:
        by_key.setdefault((op.cell_path, op.instance_name), []).append(op)
    for cpath, cell, attr, prim, st in found:
        where = f"{cpath}.{attr}" if cpath else attr
        if prim.name == "Morph":
            _morph(graph, readers, cell, cpath, attr, st, out, where)
            continue
        ops = by_key.get((cpath, attr)) or _by_params(graph, readers, cell, prim.name)
        if not ops:
            out.unmapped.append(where)
            continue
        for op in ops:
            _add(graph, out, op, st, where, n)
    if ext and total > ext:
        copied = replicate_anchors(dict(out), graph, ext, total)
        out.clear()
        out.update(copied)
        t = ext - 1
        out.unmapped += [shift_layers(w, t, t, k - t) for k in range(ext, total) for w in list(out.unmapped)
                         if layer_of(w) == t]
    # the loss's own primitives are configured alike in either mode: read here, loss_own_strategies builds nothing more
    note_loss_own_strategies(graph, mesh, out)
    return out


def _by_params(graph, readers, cell, op_type):
    """Operators of ``op_type`` reading one of ``cell``'s own parameters (Morph bodies lose their scope)."""
    res = []
    for p in cell.get_parameters(expand=False) if hasattr(cell, "get_parameters") else []:
        for op, _ in readers.get(p.name, []):
            if op.type == op_type and not op.cell_path and op not in res:
                res.append(op)
    return res


def _origin(out: Experts) -> str:
    return SEMI_AUTO if out.mode == "semi_auto" else "mindformers"


def _add(graph, out: Experts, op, st, where, n, in_layouts=None, out_layouts=None):
    """Record ``op``'s expert strategy, adapted to the tp=1 graph where it must be (each adaptation exact)."""
    if op.type == "Cast":
        return      # MindSpore ignores Cast strategies
    if in_layouts is not None:
        anchor = Anchor(op.name, None, tuple(in_layouts), None, tuple(out_layouts) if out_layouts else None,
                        origin=_origin(out))
    elif st.get("in_layout") is not None:
        lays = _to_layouts(st["in_layout"])
        if lays is None:
            out.notes.append(f"{where}: layouts for tuple inputs on {op.name} ({op.type}); skipped")
            return
        anchor = Anchor(op.name, None, lays, None, _to_layouts(st.get("out_layout")), origin=_origin(out))
    else:
        rows = tuple(tuple(r) for r in st["in_strategy"])
        outs = tuple(tuple(r) for r in st["out_strategy"]) if st.get("out_strategy") else None
        anchor = Anchor(op.name, rows, None, outs, None, origin=_origin(out))
    first = None
    for cand, how in _variants(op, anchor):
        try:
            _validate(graph, cand, n)
        except StrategyError as err:
            first = first or err
            continue
        except Exception as err:  # an operator strategist has no rule for
            first = first or err
            continue
        if how:
            out.notes.append(f"{where}: on {op.name} {how}")
        out[op.name] = cand
        return
    why = str(first).removeprefix(f"{op.name} ({op.type}) ").removeprefix(f"{op.name} ({op.type}): ")
    note = f"{where}: {op.name} ({op.type}) cannot take {anchor.describe()}: {why}; skipped"
    out.notes.append(note)
    out.refused.append((op.name, anchor, note))


def _variants(op, a: Anchor):
    """The strategy as written, then exact adaptations to the tp=1 graph's shapes:
    rows for scalar inputs dropped; a split of a dimension that is 1 here (MindFormers' MoE reshapes
    tokens to ``[dp*tp, -1, H]``, the tp=1 graph to ``[1, -1, H]``) folded into the next dimension,
    outermost first, which is the same row-major partition; last, without the output strategy."""
    ins = _tensor_inputs(op)
    specs = [x for x in op.inputs if x.spec is not None]
    yield a, ""
    rows = a.layouts if a.layouts is not None else a.strategy
    seen = [a]
    folded = _fold_units(a, specs if len(rows) == len(specs) else ins)
    if folded is not None:
        seen.append(folded)
        yield folded, "splits of size-1 dimensions folded into the next dimension (MoE token reshape at tp=1)"
    k = len(ins)
    if rows is not None and len(rows) > k:
        if len(rows) == len(op.inputs):
            kept = [r for r, x in zip(rows, op.inputs) if x.kind != "const" and x.spec is not None]
        else:
            kept = list(rows[:k])
        t = _replace(a, kept)
        seen.append(t)
        yield t, f"rows for scalar inputs dropped ({len(rows)} -> {len(kept)})"
        tf = _fold_units(t, ins)
        if tf is not None:
            seen.append(tf)
            yield tf, (f"rows for scalar inputs dropped ({len(rows)} -> {len(kept)}), splits of size-1 "
                       f"dimensions folded into the next dimension")
    for v in seen:
        if v.out_layouts is not None or v.out_strategy is not None:
            yield Anchor(v.op, v.strategy, v.layouts, None, None, v.origin), "output strategy dropped"
    if op.type == "Embedding" and a.layouts is not None:
        # MindSpore's EmbeddingInfo refuses split indices; MindFormers' Morph runs the lookup per device on
        # its own slice of ids (dp, cp), which the inlined operator cannot say: the table's split stays
        ids = a.layouts[0]
        whole = ShardLayout(ids.device_matrix, ids.alias_name, tuple(() for _ in ids.tensor_map))
        yield (Anchor(a.op, None, (whole,) + tuple(a.layouts[1:]), None, None, a.origin),
               "the ids' split dropped (MindSpore's Embedding refuses split indices; MindFormers' Morph "
               "looks up each device's own ids)")


def _replace(a: Anchor, rows) -> Anchor:
    if a.layouts is not None:
        return Anchor(a.op, None, tuple(rows), None, a.out_layouts, a.origin)
    return Anchor(a.op, tuple(rows), None, a.out_strategy, None, a.origin)


def _fold_units(a: Anchor, ins) -> Anchor | None:
    changed = False
    rows = []
    src = a.layouts if a.layouts is not None else a.strategy
    for r, x in zip(src, ins):
        shape = x.spec.shape
        if a.layouts is not None:
            tm = [list(t) for t in r.tensor_map]
            if len(tm) != len(shape):
                rows.append(r)
                continue
            for d in range(len(tm) - 1):
                if shape[d] == 1 and tm[d]:
                    tm[d + 1] = tm[d] + tm[d + 1]
                    tm[d] = []
                    changed = True
            rows.append(ShardLayout(r.device_matrix, r.alias_name, tuple(tuple(t) for t in tm)))
        else:
            st = list(r)
            if len(st) != len(shape):
                rows.append(tuple(r))
                continue
            for d in range(len(st) - 1):
                if shape[d] == 1 and st[d] > 1:
                    st[d + 1] *= st[d]
                    st[d] = 1
                    changed = True
            rows.append(tuple(st))
    if not changed:
        return None
    rows += list(src[len(rows):])
    return Anchor(a.op, None if a.layouts is not None else tuple(rows),
                  tuple(rows) if a.layouts is not None else None, None, None, a.origin)


def _morph(graph, readers, cell, cpath, attr, st, out: Experts, where):
    """Translate a Morph's layout onto its inlined compute operator (MatMul / Embedding)."""
    lays = _to_layouts(st.get("in_layout"))
    outs = _to_layouts(st.get("out_layout"))
    n = out.mesh.size
    if lays is None:
        out.notes.append(f"{where}: Morph with a tuple strategy; not translated")
        return
    ffn = graph.op(ffn_name(cpath)) if ffn_name(cpath) in graph else None
    if ffn is not None and ffn.type == MORPH_FFN and len(lays) >= 4:
        # the MoE dispatcher + experts (strategist.frontend.mindformers.morph): tokens over the tokens' axes; the
        # expert weights whole (the operator's rule: their ep split is the Morph's own all-to-all, not a layout
        # strategist prices)
        tok = tuple(a for t in lays[0].tensor_map for a in t)
        dm = lays[0].device_matrix
        exp = [a for a in (lays[3].tensor_map[0] if lays[3].tensor_map else ()) if dm[len(dm) - 1 - a] > 1]
        if exp:
            out.notes.append(f"{where}: the experts' split by ep is not carried onto {ffn.name} (its rule keeps the "
                             f"expert weights whole)")
        dims = ffn.attrs.get("strategist_token_dims", ())
        ins = []
        for k, x in enumerate(ffn.inputs):
            tm = [()] * len(x.spec.shape)
            if dims[k] is not None:
                tm[dims[k]] = tok
            ins.append(ShardLayout(dm, lays[0].alias_name, tuple(tm)))
        _add(graph, out, ffn, st, where, n, tuple(ins), None)
        return
    weight = getattr(cell, "weight", None)
    wname = getattr(weight, "name", None)
    if weight is None or wname is None or len(lays) < 2:
        out.notes.append(f"{where}: Morph of {type(cell).__name__} (layout-only reshape or dispatcher body) "
                         f"has no single operator to carry its layout; not translated")
        return
    targets = [(op, slot) for op, slot in readers.get(wname, [])
               if op.type in ("MatMul", "BatchMatMul", "Embedding", "Gather", "GatherV2")]
    if not targets:
        out.unmapped.append(where)
        return
    for op, slot in targets:
        if op.type in ("MatMul", "BatchMatMul"):
            if slot != 1 or len(lays[0].tensor_map) < 2:
                out.notes.append(f"{where}: {op.name} reads the weight in slot {slot}; not translated")
                continue
            x = _merge_rows(lays[0])
            ins = (x, lays[1])
            o = _merge_rows(outs[0]) if outs else None
            natural = (x.tensor_map[0], lays[1].tensor_map[0] if getattr(cell, "transpose_b", True) else
                       lays[1].tensor_map[-1])
            out_l = (o,) if o is not None and o.tensor_map != natural else None
            _add(graph, out, op, st, where, n, ins, out_l)
            bias = getattr(cell, "bias", None)
            if bias is not None and len(lays) >= 3:
                for bop, bslot in readers.get(bias.name, []):
                    if bop.type in ("AddExt", "Add", "BiasAdd") and o is not None:
                        _add(graph, out, bop, st, where, n, (o, lays[2]) if bslot == 1 else (lays[2], o), None)
        else:  # embedding: ids [B, S] -> [B*S]; weight [V, H]
            ids = lays[0]
            flat = ShardLayout(ids.device_matrix, ids.alias_name, (tuple(a for t in ids.tensor_map for a in t),))
            ins = (flat, lays[1]) if slot == 1 else (lays[1], flat)
            o = None
            if outs:
                lead = tuple(a for t in outs[0].tensor_map[:-1] for a in t)
                o = ShardLayout(outs[0].device_matrix, outs[0].alias_name, (lead, outs[0].tensor_map[-1]))
            natural = (flat.tensor_map[0], ())
            out_l = (o,) if o is not None and o.tensor_map != natural else None
            _add(graph, out, op, st, where, n, ins, out_l)
