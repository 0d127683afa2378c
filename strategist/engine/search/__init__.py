"""The search: MindSpore's ``sharding_propagation``, in pure Python.

``search(graph, mesh, anchors)`` gives every operator a strategy, starting from the configured
operators (anchors), as ``graph_costmodel.cc::StrategyPropagate`` does (spec §2):

* **Seeds.** The dataset (MindSpore's VirtualDataset, always a seed) and every configured operator:
  the model's own ``shard()`` calls (unless disabled) and the user's anchors, which override them.
  A strategy on Reshape is an error ("Setting strategy for Reshape goes for nothing!"); one on Cast
  is ignored, as MindSpore ignores it.
* **Order.** Configured operators run in topological order, then the dataset. MindSpore orders its
  configured-op map by operator name (a newer version also compares topological indices); our op
  names are cell paths, so topological order stands in for it, and ``VirtualDataset`` sorts after
  nearly every operator type name, so the dataset seed runs last (which is what makes the
  "sharding techniques" page's FlashAttention ALiBi Mul follow FlashAttentionScore).
* **BFS** from each seed: a FIFO queue; at each operator, successors first, then predecessors. A
  neighbour already visited, or configured, is only checked for consistency (a non-zero
  redistribution is recorded as an inconsistency, as MindSpore's WARNING); otherwise its candidate
  with the least cost on that one edge is chosen, by MindSpore's ``CompareSwcCost`` chain:
  (1) refined redistribution communication, (2) redistribution computation, (3) the neighbour's own
  forward communication, (4) larger ``PartitionNum``, then the lexicographically larger strategy.
  The first seed's BFS wins every operator it reaches. A configured operator it meets is checked,
  never overwritten, and the search continues through it (the spec leaves this open; continuing
  makes anchoring an operator at the strategy propagation gave it a no-op).
* **Candidates** are MindSpore's generated strategies (:func:`strategist.engine.ops.candidates`) plus the
  strategy that follows the fixed neighbour's layout exactly (its device matrix, repeated devices
  where the neighbour has them) — our reading of the newer ``AddSwcUnderPrevOpDevMatrix``, which lets a
  data-parallel front propagate with its repeated ``tp`` copies instead of being re-split.
* **Reshape** has no strategy; it maps layouts through itself without communication where it can
  (:func:`strategist.engine.ops.reshape_layout`), else the redistribution lands on its input edge.
* **Shared parameters** (one Parameter read by several operators): after the search, users whose
  layout of the parameter differs are re-chosen to match it (``ParamPropagation``); two configured
  users that disagree are an error ("Incorrect strategy configuration ...").
* **Unreached** operators get their first generated candidate.
* **MindSpore's own failures** are refused the same way (:class:`~strategist.errors.PropagationError`): a
  shared parameter's reader with no strategy taking the parameter's layout unchanged ("Edge cost
  initialization failed."), and a MatMul of one tensor with itself transposed whose follow-the-producers
  candidate has an invalid output map ("tensor_redistribution init failed.").

The search never looks at end-to-end time: like MindSpore it minimises one edge at a time.
:func:`search` returns a :class:`~strategist.engine.search.result.SearchResult`; :mod:`strategist.cost.pricing` then
prices it (every edge's redistribution forward and backward, each operator's own communication, in MindSpore's
cost units and in bytes and seconds on a hardware profile); :func:`strategist.propagate.propagate` does both.

The search by concern, one module each: ``bfs`` (seeds and BFS), ``chooser`` (the choices and their
tie-breaks), ``reshape`` (Reshape's strategies-with-cost), ``orders`` (creation orders), ``structure`` (the
graph as the cost graph sees it), ``caches``, ``layout_eq`` (the layout equality notions), ``local_rows``
(device-local Reshapes), ``kinds`` (the operator types treated apart), ``dataset`` (VirtualDataset layouts);
``api`` assembles the engine from them and runs it; ``result`` is what leaves it (:class:`SearchResult`). The
engine class stays inside this package: pricing, the reports and verify read a :class:`SearchResult`, or call
:func:`alternatives`.
"""
from __future__ import annotations

from .api import alternatives, clear_caches, search
from .result import SearchQueries, SearchResult

__all__ = ["search", "alternatives", "clear_caches", "SearchResult", "SearchQueries"]
