"""``strategist compare``: the advice beside the experts who wrote a MindFormers model.

Three plans of one graph on one mesh, side by side:

(a) strategist's advice (:func:`strategist.advice.advisor.advise`);
(b) MindFormers' ``sharding_propagation()`` anchors, propagated by strategist -- and, with
    ``verify=True``, by MindSpore itself in a child process (:mod:`strategist.verify`);
(c) MindFormers' full ``shard()`` strategies, taken as the reference plan, as MindFormers runs them: in
    ``semi_auto_parallel`` (its configs' ``parallel_mode: 1``). Every operator the experts configured keeps its
    strategy; every other one takes MindSpore's batch strategy, and an unconfigured Cast passes its input's
    layout on (:mod:`strategist.engine.semi_auto`). Nothing is propagated.

For each: the anchors, communication bytes and time, the step estimate, per-device memory
(:func:`strategist.advice.advisor.memory`), and the share of operators whose layouts equal (c)'s, with every
disagreement listed with both strategies and what the operator costs under each.

Dataset strategy. MindFormers feeds ``[B, S]`` token ids split ``(dp, 1)`` and replicated over tp; MindSpore's
auto_parallel refuses a dataset strategy that leaves devices unused, and ``data_parallel`` splits the batch over
*every* device, which none of the three plans does (the ids are reshaped to ``[B*S]`` and the Embedding refuses
split indices, so that split stops at the first operator). The comparison therefore uses ``full_batch`` for all
three: every device holds the whole micro-batch and the first operators take their slice locally, without
communication -- the same bytes as MindFormers' ``(dp, 1)`` input, and the same for (a), (b) and (c), so the
columns differ only in the operators' strategies. ``dataset_strategy=`` overrides it.

>>> cmp = compare_model("mindformers:qwen3/pretrain_qwen3_32b_4k.yaml", "dp=2,tp=4", layers=2)  # doctest: +SKIP
>>> print(cmp.text())                                                                          # doctest: +SKIP

The package: the result types (:mod:`.model`), the agreement of a plan with the reference and its regions
(:mod:`.agreement`), what (c)'s layouts would cost on top of the advice (:mod:`.what_if`), and the run
(:mod:`.run`); the text report is :mod:`strategist.report.compare`.
"""
from ..report.compare import COLUMNS, TITLES, patterns_text
from .agreement import agreement, op_costs, regions, same_choice
from .model import DEFAULT_DATASET, Column, Comparison3, Disagreement, Region, Step
from .run import compare_model
from .what_if import steps_toward_reference, what_if_plan, what_if_regions

__all__ = ["COLUMNS", "TITLES", "DEFAULT_DATASET", "Column", "Comparison3", "Disagreement", "Region", "Step",
           "agreement", "compare_model", "op_costs", "patterns_text", "regions", "same_choice",
           "steps_toward_reference", "what_if_plan", "what_if_regions"]
