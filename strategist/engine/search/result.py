"""What the search hands on: :class:`SearchResult`, every operator's choice and what pricing, the reports and
verify read of it, through the read-only queries of :class:`SearchQueries` (shared with the search itself, so
that both answer alike)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ...memo import lru
from ...vocab.graph import Op, OpGraph
from ...vocab.layout import Layout
from ...vocab.mesh import Hardware, Mesh
from ..rules.factor import FactorRule
from ..rules.reshape import reshape_layout
from ...vocab.anchors import DATASET, Anchor
from ..plan import OpChoice
from .caches import CHOICES, cached_rule, signature
from .layout_eq import gather_variants, without_partial
from .local_rows import local_rows_layout


@lru("engine.search.result.seq_axes", 4096)
def seq_axes(dev_matrix: tuple[int, ...], names: tuple[str, ...], shape: tuple[int, ...]) -> frozenset | None:
    """The axes of ``dev_matrix`` that are the ``cp`` and ``tp`` of a mesh with axis ``names`` and ``shape``
    (MindFormers splits the sequence of its ``[S, B, H]`` tensors by them, never the batch): by position where
    ``dev_matrix`` is the mesh's shape, else matching its axes of size > 1 to the mesh's in order. None where
    they do not match (a mesh without those names: the rows' axes go to B while they divide it)."""
    if tuple(dev_matrix) == tuple(shape):
        pairs = [(i, i) for i in range(len(shape))]
    else:
        mine = [i for i, d in enumerate(dev_matrix) if d > 1]
        theirs = [i for i, d in enumerate(shape) if d > 1]
        same = [dev_matrix[i] for i in mine] == [shape[i] for i in theirs]
        pairs = list(zip(mine, theirs)) if same else []
    return frozenset(i for i, j in pairs if names[j] in ("cp", "tp")) or None


class SearchQueries:
    """The read-only queries of a search's state, by operator name (TmpIdentity operators included). Read from
    ``graph``, ``mesh``, ``n`` (devices), ``ops``, ``reshapes``, ``chosen``, ``anchors``, ``dataset`` and the
    memos ``rules``, ``keys`` and ``slot_index`` (filled as asked; ``rules`` records a missing sharding rule in
    ``warnings`` the first time)."""

    def op(self, name: str) -> Op:
        return self.ops[name]

    def rule(self, name: str) -> FactorRule:
        r = self.rules.get(name)
        if r is None:
            r = self.rules[name] = cached_rule(self.op(name), self.key(name))
            if not r.known:
                self.warnings.append(f"no sharding rule for {name} ({self.op(name).type}): inputs gathered to replicated")
        return r

    def key(self, name: str) -> tuple:
        """The operator's signature (:func:`~strategist.engine.search.caches.signature`)."""
        k = self.keys.get(name)
        if k is None:
            k = self.keys[name] = signature(self.op(name))
        return k

    def is_reshape(self, name: str) -> bool:
        return name in self.reshapes

    def in_index(self, name: str, slot: int) -> int | None:
        """Strategy-input index of input slot ``slot`` (None: not a strategy input)."""
        k = (name, slot)
        if k not in self.slot_index:
            if self.is_reshape(name):
                self.slot_index[k] = 0 if slot == 0 else None
            else:
                slots = self.rule(name).slots
                self.slot_index[k] = slots.index(slot) if slot in slots else None
        return self.slot_index[k]

    def out_layout(self, name: str, j: int, priced: bool = False) -> Layout | None:
        """Output ``j``'s layout as the search sees it: after the operator's own forward communication
        (a MatMul with a split contraction has reduced its partial sums: MindSpore's output tensor
        info has no partial axis); ``priced=True``: as strategist prices it (partial sums still to be
        reduced on the edge, so that a ReduceScatter can serve a split consumer)."""
        if name == DATASET:
            return list(self.dataset.values())[j]
        ch = self.chosen.get(name)
        if ch is None or j >= len(ch.outputs):
            return None
        return ch.outputs[j] if priced else without_partial(ch.outputs[j])

    def in_layout(self, name: str, slot: int) -> Layout | None:
        ch = self.chosen.get(name)
        k = self.in_index(name, slot)
        if ch is None or k is None or k >= len(ch.inputs):
            return None
        return ch.inputs[k]

    def user_anchors(self) -> dict[str, Anchor]:
        """The anchors but the Casts the search configured itself (``PreProcessPreCastForSP``)."""
        return {k: a for k, a in self.anchors.items() if a.origin != "cast"}

    def seq_axes(self, dev_matrix: tuple[int, ...]) -> frozenset | None:
        """:func:`seq_axes` on this search's mesh."""
        return seq_axes(tuple(dev_matrix), tuple(self.mesh.names), tuple(self.mesh.shape))

    def reshape_from_input(self, name: str, src: Layout) -> tuple[Layout, Layout]:
        """(input layout, output layout) of Reshape ``name`` following its producer's ``src`` (memoised)."""
        mk = ("ri", self.key(name), src, self.mesh.names)      # names: local rows deal S's axes by name
        if mk not in CHOICES:
            CHOICES[mk] = self.reshape_through(name, src, forward=True)
        return CHOICES[mk]

    def reshape_from_output(self, name: str, dst: Layout) -> tuple[Layout, Layout]:
        """(input layout, output layout) of Reshape ``name`` following its consumer's ``dst`` (memoised)."""
        mk = ("ro", self.key(name), dst, self.mesh.names)
        if mk not in CHOICES:
            CHOICES[mk] = self.reshape_through(name, dst, forward=False)
        return CHOICES[mk]

    def reshape_through(self, name: str, fixed: Layout, forward: bool) -> tuple[Layout, Layout]:
        """``fixed`` (or, where it does not map, ever more of it gathered) mapped through the Reshape: device-
        local rows first on MindFormers' Morph reshapes, then an ordinary reshape of the data. (input layout,
        output layout), ``fixed`` on the input side when ``forward``."""
        op = self.op(name)
        other = tuple(op.outputs[0].shape) if forward else tuple(op.inputs[0].spec.shape)
        rows = op.attrs.get("strategist_local_rows")
        for local in ((True, False) if rows else (False,)):
            for cand in gather_variants(fixed):
                mapped = local_rows_layout(cand, other, tuple(rows), self.seq_axes(cand.dev_matrix)) if local \
                    else reshape_layout(cand, other)
                if mapped is not None:
                    return (cand, mapped) if forward else (mapped, cand)
        raise AssertionError("replicated layouts always reshape")


@dataclass(frozen=True, eq=False)
class SearchResult(SearchQueries):
    """A finished search (:func:`strategist.engine.search.search`): every operator's choice, unpriced, and
    what was found on the way. Its fields are never reassigned and its mappings are read-only views; the
    memos of :class:`SearchQueries` (``rules``, ``keys``, ``slot_index``) still fill as asked, and a missing
    sharding rule first asked for here (by pricing) is recorded in ``warnings``, as during the search."""

    graph: OpGraph
    mesh: Mesh
    hardware: Hardware | None
    dataset_strategy: Any
    n: int
    chosen: Mapping[str, OpChoice]
    #: every configured operator: the user's and the model's anchors, and the Casts the search configured
    anchors: Mapping[str, Anchor]
    warnings: list[str]
    #: the edges where searches met with a redistribution: (producer, consumer, MindSpore cost), once each
    inconsistencies: tuple[tuple[str, str, float], ...]
    #: the graph inputs' VirtualDataset layouts, in input order
    dataset: Mapping[str, Layout]
    #: every tensor flowing between two operators, per consumer: (producer, output, input slot)
    data_prev: Mapping[str, list[tuple[str, int, int]]]
    ops: Mapping[str, Op]
    reshapes: frozenset
    rules: dict
    keys: dict
    slot_index: dict
