"""strategist's plan next to MindSpore's, operator by operator.

Matching is the hard part. MindSpore names operators called as functions or tensor methods by type
only, credits the functional operators of repeated layers to the first layer's scope, and gives
identical primitives one name; so names alone do not pair operators. Both graphs, though, come from
MindSpore's own front end in execution order. Per operator type, the two sequences (strategist's
topological order, MindSpore's ``step_parallel_begin`` order) are aligned order-preservingly, pairing
only operators whose global tensor shapes agree and preferring equal names (cell path + instance
name). Reshape and Cast have no strategy in MindSpore's report and are left out; MindSpore's
``_VirtualDataset`` is compared with strategist's dataset layout.
"""
from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field

from ..vocab.anchors import DATASET
from ..engine.search.layout_eq import type_len
from ..engine.search.dataset import dataset_layouts
from ..engine.rules.registry import NO_OPERATOR_INFO
from .msplan import MsOp, MsPlan, output_strategies


def _base(name: str) -> str:
    """strategist's operator name as MindSpore names it: without the ``#k`` of a repeated call (its cell path +
    instance), the dataset as ``_VirtualDataset``."""
    return "_VirtualDataset" if name == DATASET else re.sub(r"#\d+$", "", name)


#: strategist operators MindSpore's report never lists: these, and the operators it creates no OperatorInfo for
#: (:data:`strategist.engine.rules.registry.NO_OPERATOR_INFO`)
UNREPORTED = frozenset({"Reshape", "Cast", "DropoutGenMask"}) | NO_OPERATOR_INFO


@dataclass
class Row:
    op: str                      # strategist's operator name
    type: str
    ours: tuple | None
    theirs: tuple
    ms_name: str
    ms_path: str | None
    configured: bool             # MindSpore took it from a user shard()

    @property
    def agree(self) -> bool:
        return self.ours == self.theirs


@dataclass
class Comparison:
    rows: list[Row]                          # one per strategist operator MindSpore reports
    only_ours: list[tuple[str, str, tuple | None]]   # (name, type, strategy) MindSpore does not report
    only_theirs: list[MsOp]                  # MindSpore operators matched to none of ours
    dataset_ours: tuple | None
    dataset_theirs: tuple | None
    ms: MsPlan
    model: str = ""
    mesh: str = ""
    dataset_strategy: object = "data_parallel"
    strategist_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    #: MindSpore operators that are copies of one of ours which strategist's stand-alone compile merged
    #: (common-subexpression elimination: ``q = k = v = x.transpose(...)`` three times in MindSpore's
    #: parallel graph, once in the stand-alone one): (MindSpore's operator, our operator). They carry the
    #: strategy of the operator they copy, so they agree.
    merged: list = field(default_factory=list)
    #: MindSpore operators a MindFormers model creates only in a parallel mode, missing from strategist's graph:
    #: CrossEntropyLoss's ``logits + 0`` and ``labels + 0`` (loss_func.py: AddExt with a scalar 0, ``keep_alive``,
    #: built only when the parallel mode is semi/auto). ``load_mindformers`` puts them in its graph (configured as
    #: MindFormers configures them: ``graph.parallel_only``), so they are paired like any operator; only a graph
    #: loaded with ``loss_adds=False`` leaves them here. Listed, not counted.
    parallel_only: list = field(default_factory=list)
    #: strategist's operators marked ``self_define_shard`` (MindFormers' MTP Concat) that MindSpore does not report:
    #: its SelfDefineShardInfo takes the user's layouts as they are and records no strategy. With each, the
    #: MindSpore entries of an operator kind strategist reports by layout (a Reshape) at its consumers' cell paths:
    #: MindSpore records one on the Reshape after such an operator. (our name, type, our strategy, [MsOp]).
    #: Listed, not counted.
    self_defined: list = field(default_factory=list)
    #: strategist's operators of the later calls of a reused ``@lazy_inline`` graph
    #: (:func:`strategist.engine.search.structure.lazy_copies`): MindSpore has one OperatorInfo for all the calls, reported
    #: once under the first call's name; each takes that operator's strategy. (our name, the first call's). Listed,
    #: not counted.
    lazy_copies: list = field(default_factory=list)
    #: with ``verify --redistributions``: the edges that move data on both sides
    moves: "Moves | None" = None
    #: with ``verify --communication``: every collective of a training step, strategist's priced plan beside
    #: MindSpore's graph after autodiff
    communication: "Communication | None" = None

    @property
    def agreed(self) -> int:
        return sum(r.agree for r in self.rows)

    @property
    def total(self) -> int:
        return len(self.rows)

    @property
    def dataset_agrees(self) -> bool:
        return self.dataset_theirs is None or self.dataset_ours == self.dataset_theirs

    @property
    def all_agree(self) -> bool:
        return (self.agreed == self.total and not self.only_ours and not self.only_theirs and self.dataset_agrees
                and (self.moves is None or self.moves.agree)
                and (self.communication is None or self.communication.agree))

    def disagreements(self) -> list[Row]:
        return [r for r in self.rows if not r.agree]

    def to_dict(self) -> dict:
        return {
            "model": self.model, "mesh": self.mesh, "device_num": self.ms.device_num,
            "dataset_strategy": self.dataset_strategy,
            "dataset": {"strategist": _lists(self.dataset_ours), "mindspore": _lists(self.dataset_theirs),
                        "agree": self.dataset_agrees},
            "all_agree": self.all_agree, "agreed": self.agreed, "total": self.total,
            "operators": [{"op": r.op, "type": r.type, "agree": r.agree, "strategist": _lists(r.ours),
                           "mindspore": _lists(r.theirs), "mindspore_name": r.ms_name,
                           "mindspore_configured": r.configured} for r in self.rows],
            "only_strategist": [{"op": n, "type": t, "strategist": _lists(s)} for n, t, s in self.only_ours],
            "only_mindspore": [{"name": o.name, "type": o.type, "path": o.path, "mindspore": _lists(o.in_strategy)}
                               for o in self.only_theirs],
            "only_mindspore_parallel_build": [{"name": o.name, "type": o.type, "path": o.path,
                                               "mindspore": _lists(o.in_strategy)} for o in self.parallel_only],
            "self_defined": [{"op": n, "type": t, "strategist": _lists(st),
                              "mindspore_after": [{"name": o.name, "type": o.type, "mindspore": _lists(o.in_strategy)}
                                                  for o in after]} for n, t, st, after in self.self_defined],
            "merged_by_cse": [{"name": o.name, "type": o.type, "copy_of": ours, "mindspore": _lists(o.in_strategy)}
                              for o, ours in self.merged],
            "lazy_inline_copies": [{"op": n, "copy_of": first} for n, first in self.lazy_copies],
            "mindspore": {"version": self.ms.mindspore_version, "backend": self.ms.backend,
                          "compile_inputs": self.ms.compile_inputs, "output": _lists(self.ms.output)},
            "notes": self.notes,
            "redistributions": self.moves.to_dict() if self.moves is not None else None,
            "communication": self.communication.to_dict() if self.communication is not None else None,
        }

    def timings(self) -> str:
        """How long each side took, one line (kept out of the report: the same inputs give the same report)."""
        return (f"verify: MindSpore compile {self.ms.compile_seconds:.2f} s, its process {self.ms.process_seconds:.2f} s; "
                f"strategist propagate {self.strategist_seconds:.2f} s")

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    def text(self, max_rows: int = 0, markdown: bool = False) -> str:
        return comparison_text(self, max_rows, markdown)


def _lists(v):
    return [_lists(x) for x in v] if isinstance(v, (list, tuple)) else v


def fmt(s) -> str:
    """``((2, 1), (1, 4))`` -> ``((2,1),(1,4))``; None -> ``-``."""
    if s is None:
        return "-"
    if isinstance(s, (list, tuple)):
        return "(" + ",".join(fmt(x) for x in s) + ")"
    return str(s)


def _norm(s):
    return tuple(_norm(x) for x in s) if isinstance(s, (list, tuple)) else s


# --------------------------------------------------------------------------------------
# matching


def _shapes(specs) -> tuple:
    return tuple(tuple(x.shape) for x in specs if x is not None and len(x.shape) > 0)


def _our_shapes(op) -> tuple[tuple, tuple]:
    ins = _shapes([x.spec for x in op.inputs if x.spec is not None])
    return ins, _shapes(op.outputs)


def _their_shapes(m: MsOp) -> tuple[tuple | None, tuple | None]:
    ins = tuple(tuple(s) for s in m.input_shapes if len(s) > 0) if m.input_shapes is not None else None
    outs = tuple(tuple(s) for s in m.output_shapes if len(s) > 0) if m.output_shapes is not None else None
    return ins, outs


def _score(name: str, ours_shapes, path: str | None, theirs_shapes) -> int:
    """0 when the two cannot be the same operator; higher for a better pair (``name`` without its ``#k``)."""
    (oi, oo), (ti, to) = ours_shapes, theirs_shapes
    out_eq = to is not None and oo == to        # scalars are not compared: () == () for scalar-only ops
    in_eq = ti is not None and oi == ti
    if not (out_eq or in_eq):
        return 0
    return 4 + 2 * (name == path) + out_eq + in_eq


def _align(ours: list, theirs: list[MsOp]) -> list[tuple[int, int]]:
    """Order-preserving pairs (i, j) maximising the summed score (a weighted LCS)."""
    os_ = [(_base(o.name), _our_shapes(o)) for o in ours]
    ts_ = [(t.path, _their_shapes(t)) for t in theirs]
    if len(ours) == len(theirs):        # the usual case: the same operators in the same order
        pairs = [(i, i) for i in range(len(ours))]
        if all(_score(*os_[i], *ts_[i]) for i in range(len(ours))):
            return pairs
    n, m = len(ours), len(theirs)
    score = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        row, prev = score[i], score[i - 1]
        for j in range(1, m + 1):
            s = _score(*os_[i - 1], *ts_[j - 1])
            best = prev[j] if prev[j] >= row[j - 1] else row[j - 1]
            if s and prev[j - 1] + s > best:
                best = prev[j - 1] + s
            row[j] = best
    pairs, i, j = [], n, m
    while i and j:
        s = _score(*os_[i - 1], *ts_[j - 1])
        if s and score[i][j] == score[i - 1][j - 1] + s:
            pairs.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif score[i][j] == score[i - 1][j]:
            i -= 1
        else:
            j -= 1
    return pairs[::-1]


def _our_strategy(choice) -> tuple | None:
    if choice.sharding is not None:
        return _norm(choice.sharding.strategy)
    # Flatten and friends have no Sharding in strategist; MindSpore reports their input's split
    return tuple(layout.strategy for layout in choice.inputs) if choice.inputs else None


def _our_dataset(plan) -> tuple | None:
    try:
        dataset = dataset_layouts(plan.graph, plan.mesh.size, plan.dataset_strategy)
    except Exception:   # noqa: BLE001 - a dataset strategy strategist cannot lay out shows as "-"
        return None
    return tuple(dataset[name].strategy for name in plan.graph.inputs if name in dataset) or None


def compare(plan, ms: MsPlan) -> Comparison:
    """Pair strategist's operators with MindSpore's and compare their strategies (see the module doc)."""
    from ..engine.search.structure import lazy_fold
    copies, reps = lazy_fold(plan.graph, isinstance(plan.dataset_strategy, dict))
    ours_by_type: dict[str, list] = {}
    for op in plan.graph.ops:
        if op.type not in UNREPORTED and op.name in plan.choices and op.name not in copies:
            ours_by_type.setdefault(op.type, []).append(op)
    if reps:
        # MindSpore's report follows its creation order, which takes a reused graph's body first: pair in that order
        from ..engine.search.orders import creation_order
        from ..engine.search.structure import folded_graph
        forward = isinstance(plan.dataset_strategy, dict)
        created = creation_order(folded_graph(plan.graph, forward), forward=forward)
        for ours in ours_by_type.values():
            ours.sort(key=lambda op: created.get(op.name, 1 << 30))
    theirs_by_type: dict[str, list[MsOp]] = {}
    for m in ms.ops:
        theirs_by_type.setdefault(m.type, []).append(m)
    rows, only_ours, used = [], [], set()
    for typ, ours in ours_by_type.items():
        theirs = theirs_by_type.get(typ, [])
        matched = dict(_align(ours, theirs))
        # fallback by name: shapes that differ (a model computing shapes from its per-device inputs) but one
        # unpaired operator of this type and name on each side
        taken = set(matched.values())
        left = {}
        for j, t in enumerate(theirs):
            if j not in taken and t.path is not None:
                left.setdefault(t.path, []).append(j)
        mine_left = {}
        for i, op in enumerate(ours):
            if i not in matched:
                mine_left.setdefault(_base(op.name), []).append(i)
        for name, idx in mine_left.items():
            js = left.get(name, ())
            if len(idx) == 1 and len(js) == 1:
                matched[idx[0]] = js[0]
            elif len(idx) == len(js) and all(_score(name, _our_shapes(ours[i]), name, _their_shapes(theirs[j]))
                                             for i, j in zip(idx, js)):
                # several calls of one primitive the order-preserving pass left out: MindSpore's report can hold a
                # Cell's operators elsewhere in its order (glm4's loss _LogSoftmax's two Subs come before the
                # model's, strategist's after: the rotary Subs won the alignment); paired by name in order
                matched.update(zip(idx, js))
        for i, op in enumerate(ours):
            mine = _our_strategy(plan.choices[op.name])
            if i in matched:
                t = theirs[matched[i]]
                used.add(id(t))
                rows.append(Row(op.name, typ, mine, _norm(t.in_strategy), t.name, t.path, t.configured))
            else:
                only_ours.append((op.name, typ, mine))
    order = {op.name: op.topo_index for op in plan.graph.ops}
    rows.sort(key=lambda r: order[r.op])
    only_ours.sort(key=lambda x: order[x[0]])
    only_theirs = [m for m in ms.ops if id(m) not in used]
    # CSE: a MindSpore-only operator identical (type, scope, shapes, strategy) to one we matched and agree on
    twins = {}
    by_name = {m.name: m for m in ms.ops}
    for r in rows:
        t = by_name.get(r.ms_name)
        if t is not None and r.agree:
            twins.setdefault((t.type, t.path, _their_shapes(t), _norm(t.in_strategy)), r.op)
    merged = [(m, twins[k]) for m in only_theirs
              if (k := (m.type, m.path, _their_shapes(m), _norm(m.in_strategy))) in twins]
    only_theirs = [m for m in only_theirs if all(m is not x for x, _ in merged)]
    parallel_only = [m for m in only_theirs if _mindformers_parallel_only(m)]
    only_theirs = [m for m in only_theirs if not any(m is x for x in parallel_only)]
    self_defined, only_ours, only_theirs = _self_defined(plan.graph, only_ours, only_theirs)
    mesh = str(plan.mesh)
    return Comparison(rows, only_ours, only_theirs, _our_dataset(plan), _norm(ms.dataset), ms,
                      model=ms.model or plan.graph.model, mesh=mesh, dataset_strategy=ms.dataset_strategy,
                      merged=merged, parallel_only=parallel_only, self_defined=self_defined,
                      lazy_copies=[(n, copies[n]) for n in sorted(copies, key=lambda n: order[n])])


def _self_defined(graph, only_ours: list, only_theirs: list) -> tuple[list, list, list]:
    """Split off :attr:`Comparison.self_defined`: our unmatched ``self_define_shard`` operators, each with the
    unmatched MindSpore entries of a kind strategist does not report (Reshape, Cast) at the cell path of one of its
    consumers. Returns (self_defined, only_ours, only_theirs) without them."""
    out, mine, taken = [], [], set()
    for name, typ, st in only_ours:
        op = graph.op(name)
        if not op.attrs.get("self_define_shard"):
            mine.append((name, typ, st))
            continue
        paths = {_base(e.dst) for e in graph.out_edges(name)}
        after = [m for m in only_theirs if m.type in UNREPORTED and m.path in paths and id(m) not in taken]
        taken.update(id(m) for m in after)
        out.append((name, typ, st, after))
    return out, mine, [m for m in only_theirs if id(m) not in taken]


def _mindformers_parallel_only(m) -> bool:
    """MindFormers' CrossEntropyLoss's ``x + 0`` (its logits and labels: AddExt, or Add in the legacy loss, with a
    scalar), which it creates only in a parallel mode: in MindSpore's report, and in strategist's graph unless it
    was loaded stand-alone (``load_mindformers(loss_adds=False)``)."""
    st = _norm(m.in_strategy)
    return (m.type in ("AddExt", "Add") and "-CrossEntropyLoss/" in m.name and st is not None and len(st) == 2
            and st[1] == ())


# --------------------------------------------------------------------------------------
# redistributions: which edges move data


@dataclass
class Moves:
    """The edges whose redistribution moves data between devices (a collective, not only local slicing), in
    strategist's priced plan and in MindSpore's ``step_parallel_end`` graph, paired by the consumer's name
    (strategist's name without ``#k`` = MindSpore's cell path + instance; through a Reshape chain, any operator
    on it), preferring the producer's too, then by the producer's name, then by the consumer's type. What moves
    into or inside a Reshape counts for the consumers it feeds (MindSpore replaces such a Reshape by the
    redistribution's operators); the output's gathering is left out."""

    both: list[tuple[str, str, str, tuple]]             # (src, dst, ours, MindSpore's collectives)
    only_ours: list[tuple[str, str, str]]              # (src, dst, our redistribution)
    only_theirs: list[tuple[str, str, tuple]]          # (MindSpore's src path, dst path, collectives)

    @property
    def agree(self) -> bool:
        return not self.only_ours and not self.only_theirs

    def to_dict(self) -> dict:
        return {"both": [{"src": a, "dst": b, "strategist": o, "mindspore": list(t)} for a, b, o, t in self.both],
                "only_strategist": [{"src": a, "dst": b, "strategist": o} for a, b, o in self.only_ours],
                "only_mindspore": [{"src": a, "dst": b, "mindspore": list(t)} for a, b, t in self.only_theirs]}

    def text(self) -> str:
        out = [f"edges moving data: {len(self.both)} in both, {len(self.only_ours)} only strategist, "
               f"{len(self.only_theirs)} only MindSpore -> {'AGREE' if self.agree else 'DIFFER'}"]
        out += [f"  only strategist: {a} -> {b}  {o}" for a, b, o in self.only_ours]
        out += [f"  only MindSpore: {a} -> {b}  {' + '.join(t)}" for a, b, t in self.only_theirs]
        return "\n".join(out) + "\n"


def _our_moves(plan) -> list[tuple[str, str, str, frozenset]]:
    """strategist's moves, as (src, dst shown, redistribution text, names the consumer may have on MindSpore's
    side): an edge into a Reshape, and a Reshape's own redistribution, move data for the consumers the Reshape
    chain feeds (MindSpore turns such a Reshape into redistribution operators of the edge into them)."""
    g = plan.graph
    consumers = g.consumers_through_reshapes
    moves = []
    for e in plan.edges:
        if not e.forward.has_communication:
            continue
        if g.op(e.dst).type in ("Reshape", "Flatten"):
            names, out = consumers(e.dst)
            if not out:
                continue          # into the graph's output: left out, as MindSpore's _VirtualOutput is
            moves.append((e.src, ",".join(out), str(e.forward), frozenset(map(_base, names)), e.dst))
        else:
            moves.append((e.src, e.dst, str(e.forward), frozenset({_base(e.dst)}), (e.dst, e.in_slot)))
    for name, c in plan.op_costs.items():
        op = g.op(name)
        if op.type not in ("Reshape", "Flatten") or not c.fwd_bytes:
            continue
        names, out = consumers(name)
        src = next((x.ref for x in op.inputs if x.kind == "op"), DATASET)
        steps = " ; ".join(st.label for st in c.steps if st.direction != "grad")
        if out and steps:
            moves.append((src, ",".join(out), f"{name}: {steps}", frozenset(map(_base, names)), name))
    # an edge into a Reshape and the Reshape's own redistribution are one chain of MindSpore's
    merged: dict[tuple, list] = {}
    for src, dst, text, names, key in moves:
        if key in merged:
            merged[key][2] += " ; " + text
        else:
            merged[key] = [src, dst, text, names]
    return [tuple(m) for m in merged.values()]


def compare_moves(plan, ms: MsPlan) -> Moves:
    """Pair the edges that move data in ``plan`` (priced) with the redistributions MindSpore inserted (an
    :class:`MsPlan` read with ``redistributions=True``)."""
    if ms.redistributions is None:
        raise ValueError("MindSpore's plan was read without its redistributions (mindspore_plan(redistributions=True))")
    g = plan.graph
    theirs = [(r["src"], r["dst"], tuple(r["collectives"]), r["src_type"], r["dst_type"], {r["dst"], *r.get("also", ())})
              for r in ms.redistributions if r["collectives"] and r["dst_type"] != "_VirtualOutput"]
    left = list(range(len(theirs)))
    both, only_ours = [], []
    for src, dst, text, names in _our_moves(plan):
        # the consumer by name (and the producer, where MindSpore kept it: a replaced operator's pieces, a
        # RmsNorm's Mul, are named apart), else the producer by name, else the consumer by type
        by_dst = [j for j in left if theirs[j][5] & names]
        j = next((j for j in by_dst if theirs[j][0] == _base(src)), by_dst[0] if by_dst else None)
        if j is None:
            j = next((j for j in left if theirs[j][0] == _base(src)), None)
        if j is None:
            dst_types = {g.op(n).type for n in dst.split(",")}
            j = next((j for j in left if theirs[j][4] in dst_types), None)
        if j is None:
            only_ours.append((src, dst, text))
            continue
        left.remove(j)
        both.append((src, dst, text, theirs[j][2]))
    return Moves(both, only_ours, [theirs[j][:3] for j in left])


# --------------------------------------------------------------------------------------
# text


def _strategies(r, gap: str = " ") -> str:
    """A row's strategy (strategist's | MindSpore's where they differ), and whether it was configured."""
    strat = fmt(r.theirs) if r.agree else f"{fmt(r.ours)} | {fmt(r.theirs)}"
    return strat + (f"{gap}(configured)" if r.configured else "")


def comparison_text(c: Comparison, max_rows: int = 0, markdown: bool = False) -> str:
    """verify's report: console text, or Markdown (``markdown``: the operators as a Markdown table)."""
    ds = c.dataset_strategy if isinstance(c.dataset_strategy, str) else json.dumps(c.dataset_strategy)
    backend = {"stub": "GPU plugin on CUDA stubs, CPU only", "gpu": "GPU", "ascend": "Ascend"}.get(c.ms.backend,
                                                                                                  c.ms.backend)
    out = [f"strategist verify {c.model}  mesh {c.mesh} ({c.ms.device_num} devices)  dataset strategy {ds}",
           f"MindSpore {c.ms.mindspore_version} ({backend})",
           f"dataset: strategist {fmt(c.dataset_ours)}  MindSpore {fmt(c.dataset_theirs)}  "
           f"{'agree' if c.dataset_agrees else 'DIFFER'}", ""]
    rows = c.rows
    shown = rows if not max_rows else (c.disagreements() + [r for r in rows if r.agree])[:max_rows]
    shown_set = {id(r) for r in shown}
    shown = [r for r in rows if id(r) in shown_set]
    if shown and markdown:
        from ..report.render import render_table
        out += render_table(["operator", "type", "agree", "strategy (strategist | MindSpore where they differ)"],
                            [[r.op, r.type, "yes" if r.agree else "NO", _strategies(r)] for r in shown], True)
        if len(shown) < len(rows):
            out.append(f"... {len(rows) - len(shown)} more agreeing operators (--max-rows 0 shows all)")
    elif shown:
        w = max(len(r.op) for r in shown)
        tw = max(len(r.type) for r in shown)
        out.append(f"{'operator':<{w}}  {'type':<{tw}}  agree  strategy (strategist | MindSpore where they differ)")
        for r in shown:
            mark = "yes" if r.agree else "NO"
            out.append(f"{r.op:<{w}}  {r.type:<{tw}}  {mark:<5}  {_strategies(r, '  ')}")
        if len(shown) < len(rows):
            out.append(f"... {len(rows) - len(shown)} more agreeing operators (--max-rows 0 shows all)")
    if c.only_ours:
        out += ["", "only in strategist's plan (MindSpore reports no strategy):"]
        out += [f"  {n}  {t}  {fmt(s)}" for n, t, s in c.only_ours]
    if c.only_theirs:
        out += ["", "only in MindSpore's report (matched to no strategist operator):"]
        out += [f"  {m.name}  {m.type}  {fmt(m.in_strategy)}" for m in c.only_theirs]
    if c.parallel_only:
        out += ["", "only in MindSpore's parallel build (MindFormers' CrossEntropyLoss adds logits + 0 and labels + 0 "
                    "only in a parallel mode; strategist's stand-alone graph cannot hold them): not compared"]
        out += [f"  {m.name}  {m.type}  {fmt(m.in_strategy)}" for m in c.parallel_only]
    if c.self_defined:
        out += ["", "self-defined layouts (self_define_shard: MindSpore's SelfDefineShardInfo takes the layouts as set "
                    "and records no strategy), with what MindSpore records after them: not compared"]
        for n, t, st, after in c.self_defined:
            out.append(f"  {n}  {t}  {fmt(st)}" + "".join(f"; MindSpore: {m.name}  {m.type}  {fmt(m.in_strategy)}"
                                                          for m in after))
    if c.lazy_copies:
        out += ["", f"{len(c.lazy_copies)} operators of later calls of @lazy_inline Cells take the first call's "
                    f"strategy (one reused graph: MindSpore reports each operator once, under the first call): not "
                    f"compared"]
    if c.merged:
        out += ["", "in MindSpore's graph twice, merged in strategist's stand-alone compile (CSE); same strategy:"]
        out += [f"  {m.name}  {m.type}  {fmt(m.in_strategy)}  = {ours}" for m, ours in c.merged]
    if c.moves is not None:
        out += ["", c.moves.text().rstrip("\n")]
    if c.communication is not None:
        out += ["", c.communication.text().rstrip("\n")]
    pct = 100.0 * c.agreed / c.total if c.total else 100.0
    out += ["", f"{c.agreed}/{c.total} operators agree ({pct:.1f} %); {len(c.only_ours)} only strategist, "
                f"{len(c.only_theirs)} only MindSpore"
                + (f" ({len(c.parallel_only)} more only in its parallel build)" if c.parallel_only else "")
                + (f" ({len(c.self_defined)} self-defined, not compared)" if c.self_defined else "")
                + f"; dataset {'agrees' if c.dataset_agrees else 'differs'}"
                + (f"; edges moving data {'agree' if c.moves.agree else 'differ'}" if c.moves is not None else "")
                + (f"; communication {'not compared' if c.communication.error else 'agrees' if c.communication.agree else 'differs'}"
                   if c.communication is not None else "")
                + f" -> {'ALL AGREE' if c.all_agree else 'DISAGREE'}"]
    out += [f"note: {n}" for n in c.notes]
    return "\n".join(out) + "\n"


PHASES = ("forward", "backward", "mirror")


@dataclass
class Communication:
    """One training step's collectives, strategist's priced plan beside MindSpore's graph after autodiff: per phase
    (``forward``; ``backward``, the transposes of forward collectives; ``mirror``, the Parameters' gradient
    reductions) the collectives as (kind, group size, bytes one device sends), compared as multisets. MindSpore
    writes an all-to-all as AllGather + Split + Concat without ``enable_alltoall``; both sides count it so."""

    ours: dict[str, list[tuple[str, int, float]]]
    theirs: dict[str, list[tuple[str, int, float]]]
    error: str | None = None          # the training step could not be compiled (one line): nothing compared
    #: operators MindSpore's training step laid out otherwise than the plan (the loss the step adds joined its
    #: propagation): there the comparison covers another plan
    strategies_differ: list[str] = field(default_factory=list)

    def diff(self, phase):
        """(only strategist, only MindSpore): the collectives of ``phase`` one side has, as sorted keys."""
        a, b = Counter(_key(x) for x in self.ours.get(phase, [])), Counter(_key(x) for x in self.theirs.get(phase, []))
        return sorted((a - b).elements()), sorted((b - a).elements())

    @property
    def agree(self) -> bool:
        return self.error is None and all(not x and not y for x, y in (self.diff(p) for p in PHASES))

    def bytes(self, side: str, phase: str) -> float:
        return sum(x[2] for x in (self.ours if side == "strategist" else self.theirs).get(phase, []))

    def to_dict(self) -> dict:
        out = {"agree": self.agree, "error": self.error}
        for p in PHASES:
            only_ours, only_theirs = self.diff(p)
            out[p] = {"strategist_bytes": self.bytes("strategist", p), "mindspore_bytes": self.bytes("mindspore", p),
                      "strategist_count": len(self.ours.get(p, [])), "mindspore_count": len(self.theirs.get(p, [])),
                      "only_strategist": [list(x) for x in only_ours], "only_mindspore": [list(x) for x in only_theirs]}
        return out

    def text(self) -> str:
        from ..report.render import human_bytes
        if self.error is not None:
            return f"communication of one training step: not compared: {self.error}\n"
        out = ["communication of one training step (bytes per device; MindSpore's graph after autodiff):",
               f"  {'phase':<9} {'strategist':>22} {'MindSpore':>22}"]
        for p in PHASES:
            out.append(f"  {p:<9} {human_bytes(self.bytes('strategist', p)) + f' in {len(self.ours.get(p, []))}':>22} "
                       f"{human_bytes(self.bytes('mindspore', p)) + f' in {len(self.theirs.get(p, []))}':>22}")
            only_ours, only_theirs = self.diff(p)
            out += [f"    only strategist: {k}(n={n}) {human_bytes(b)}" for k, n, b in only_ours]
            out += [f"    only MindSpore: {k}(n={n}) {human_bytes(b)}" for k, n, b in only_theirs]
        out.append(f"  -> {'AGREE' if self.agree else 'DIFFER'}")
        return "\n".join(out) + "\n"


def _key(x) -> tuple[str, int, float]:
    kind, n, b = x
    return ("AllToAll" if kind in ("AlltoAll", "AllToAllv") else kind, int(n), round(float(b)))


def our_collectives(plan) -> dict[str, list[tuple[str, int, float]]]:
    """strategist's priced collectives of one training step, by phase: every edge's redistribution and its
    transpose, every operator's own reduction and its transpose, every Parameter's mirror (a MindSpore-style
    all-to-all without ``enable_alltoall`` counted as the AllGather it is written as), and under the plan's step
    options' FlashAttention load balance its exchanges."""
    a2a = bool(plan.graph.enable_alltoall)
    out: dict[str, list] = {p: [] for p in PHASES}
    for e in plan.edges:
        tl = type_len(plan.graph.op(e.dst).inputs[e.in_slot].spec)
        if e.fwd_bytes:         # (a redistribution shared with an earlier consumer is sent once)
            _add_steps(out["forward"], e.forward.physical(tl, None, a2a).steps)
        if e.backward is not None and e.bwd_bytes:      # (one transpose for the consumers sharing it)
            _add_steps(out["backward"], e.backward.physical(tl, None, a2a).steps)
    for c in plan.op_costs.values():
        for st in c.steps:
            _add_steps(out["mirror" if st.direction == "grad" else st.direction], [st])
    if getattr(plan.graph.step_options, "fa_load_balance", False):
        # FlashAttention's load balance: its replace graph's exchanges, the gradients' where a gradient flows
        from ..cost.attention import load_balance
        from ..cost.optime import needs_grad
        grad = needs_grad(plan.graph)
        for op in plan.graph:
            lb = load_balance(op, plan.choices[op.name])
            for st in lb.steps if lb is not None else ():
                if st.direction == "forward" or grad[op.name]:
                    _add_steps(out[st.direction], [st])
    return out


def _add_steps(into: list, steps) -> None:
    """Priced steps (:class:`~strategist.vocab.comm.CommStep`) as collectives ``(kind, n, bytes)`` onto ``into``:
    an all-to-all written without ``enable_alltoall`` counts as the AllGather (or ReduceScatter) it is written as."""
    for st in steps:
        if st.nbytes:
            into.append((st.collective or st.kind, st.n, float(st.nbytes)))


def loss_sum_collectives(plan) -> dict[str, list[tuple[str, int, float]]]:
    """The collectives verify's training step adds at the model's outputs, as MindSpore runs them: each output's
    loss sum (and the Cast before it) is configured with the output's splits as a tuple strategy
    (:func:`strategist.verify.msplan.output_strategies`; MindSpore refuses a Layout on ReduceSum), which MindSpore
    lays out in its canonical device order, repeated computation on the right of the device matrix. An output
    the plan lays out in another order (CoreAttention with cp: the sequence by tp outside the features by cp) is
    redistributed into that layout, and the gradient back out of it. Only a Reshape's output counts: a Reshape
    has no layout of its own in MindSpore, so the redistribution runs before it, in the model (the training
    step's graph has it: :func:`strategist.verify.ir.parse_collectives` keeps it); any other output is
    redistributed on the edge into the sum, the wrapper's, which the comparison leaves out on both sides."""
    from ..cost.pricing import differentiable, grad_flow
    from ..vocab.layout import Layout
    from ..engine.redistribution import plan as plan_redistribution
    out: dict[str, list] = {p: [] for p in PHASES}
    splits = output_strategies(plan)
    if splits is True:
        return out
    a2a = bool(plan.graph.enable_alltoall)
    n = plan.mesh.size
    needs_grad = grad_flow(plan.graph)[0]
    for x, sp in zip(plan.graph.outputs, splits):
        op = plan.graph.op(x.ref)
        if op.type != "Reshape":
            continue
        j = getattr(x, "index", 0) or 0
        lay = plan.choices[x.ref].outputs[j]
        # the tuple's layout as MindSpore's shard() of an element-wise operator gives it (engine.rules.sharding.shard)
        rep = n // math.prod(sp)
        dm = tuple(sp) + ((rep,) if rep > 1 else ())
        canonical = Layout(lay.shape, dm, tuple((i,) if v > 1 else () for i, v in enumerate(sp)))
        if canonical.same_as(lay):
            continue
        spec = op.outputs[j]
        r = plan_redistribution(lay, canonical)
        back = needs_grad.get(x.ref) and differentiable(spec)
        for phase, red in (("forward", r),) + ((("backward", r.transposed()),) if back else ()):
            _add_steps(out[phase], red.physical(type_len(spec), None, a2a).steps)
    return out


def compare_communication(plan, ms: MsPlan) -> Communication:
    """strategist's priced ``plan`` beside the collectives of MindSpore's training step (:attr:`MsPlan.collectives`);
    strategist's side also has what the step's loss sums add at the outputs (:func:`loss_sum_collectives`)."""
    theirs: dict[str, list] = {p: [] for p in PHASES}
    for c in ms.collectives or []:
        if c["bytes"]:
            theirs[c["phase"]].append((c["kind"], int(c["n"]), float(c["bytes"])))
    ours = our_collectives(plan)
    for p, cs in loss_sum_collectives(plan).items():
        ours[p] = ours.get(p, []) + cs
    return Communication(ours, theirs, strategies_differ=[r.op for r in compare(plan, ms).rows if not r.agree])
