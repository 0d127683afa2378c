"""The advice as MindSpore 2.9's operator-strategy file (no source edit at all).

Format, as MindSpore's C++ reads it (``StrategyJsonInfo::FromJson``, ``strategy_checkpoint_info.cc``)::

    {"current_stage": 0,
     "parallel_strategy_item": {"<cnode fullname_with_scope>": {"stage": 0, "parallel_strategy": [[2, 1], [1, 4]]},
                                "Default/_VirtualDataset-op0": ..., "Default/_VirtualOutput-op0": ..., ...}}

(the keys and fields MindSpore's own SAVE mode writes; tests compare the two and check that MindSpore, loading
this file, compiles exactly the advised plan)

loaded by ``AutoParallel(net, parallel_mode="sharding_propagation").load_operator_strategy_file(path)``
(or ``mindspore.parallel.set_op_strategy_config(mode="LOAD", path=path)``); the path must be absolute
and end in ``.json``. MindSpore then *skips its search* and requires a strategy for every operator
(``StrategyLoader::LoadStrategyFromFile``: "Not found strategy for ..." fails the compile), so the file
carries the whole advised plan, not only the anchors. The documented interface has no Layout form:
operators whose advised layout the tuple form does not express are listed as not carried.
"""
from __future__ import annotations

import json

from ..advice.choice import tuple_equivalent


def strategy_file(advice) -> tuple[dict, list[str]]:
    """(the JSON document, names of operators it cannot carry with the reason)."""
    items: dict[str, dict] = {}
    missing: list[str] = []
    for name, ch in advice.plan.choices.items():
        if ch.sharding is None or not ch.strategy:
            continue                         # Reshape and constant-only operators: no strategy of their own
        key = ch.op.full_name or name
        if not tuple_equivalent(ch, advice.mesh):
            missing.append(f"{name}: its advised layout has no tuple form (Layout only)")
            continue
        if key in items:
            missing.append(f"{name}: shares MindSpore's scope name {key} with another operator")
            continue
        items[key] = {"stage": 0, "parallel_strategy": [list(s) for s in ch.strategy]}
    # MindSpore's own operators at the boundary, named as its SAVE mode names them: the dataset's split of
    # every input, and the model's outputs as the plan leaves them
    g, n = advice.graph, advice.mesh.size
    how = advice.plan.dataset_strategy
    rows = []
    for name, spec in g.inputs.items():
        shape = tuple(spec.shape)
        if isinstance(how, dict) and name in how:
            rows.append(list(how[name]))
        elif how == "full_batch" or not shape:
            rows.append([1] * len(shape))
        else:
            rows.append([n] + [1] * (len(shape) - 1))
    items["Default/_VirtualDataset-op0"] = {"stage": 0, "parallel_strategy": rows}
    outs = []
    for x in g.outputs:
        ch = advice.plan.choices.get(x.ref) if getattr(x, "kind", "op") == "op" else None
        if ch is not None and x.index < len(ch.outputs):
            outs.append(list(ch.outputs[x.index].strategy))
    if outs:
        items["Default/_VirtualOutput-op0"] = {"stage": 0, "parallel_strategy": outs}
    return {"current_stage": 0, "parallel_strategy_item": dict(sorted(items.items()))}, missing


def write_strategy_file(advice, path: str) -> list[str]:
    """Write :func:`strategy_file` to ``path`` (deterministic); returns what it cannot carry."""
    doc, missing = strategy_file(advice)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    return missing
