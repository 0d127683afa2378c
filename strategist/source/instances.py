"""Anchors no source line of the user's can carry, set on the built model instead: ``apply_strategies(model)``.

An operator created inside an installed package (MindSpore's ``nn.Dense``, mindone's LLaMA layers) is never
configured by editing that package. When no class of the user's owns it either (a ``mindone:`` model, an owner
reached through a ``CellList`` index), :func:`apply_function` writes a module the user imports and calls once the
model is built, before its first compile::

    from strategist_strategies import apply_strategies
    model = LlamaForCausalLM(config)
    apply_strategies(model)

Each line configures one operator by its cell path (``model.model.layers[0].self_attn.q_proj.matmul.shard(...)``).
An operator its Cell does not hold (a functional call) has no primitive to configure there: it is listed as a comment
with its strategy, for the anchors file or MindSpore's strategy file.
"""
from __future__ import annotations

import os

from .shard_text import layout_decl
from .locate import strategy_of
from ..report.render import strategy_text

#: the module ``--diff``/``--apply`` create, in the working directory
FILE = "strategist_strategies.py"


def attribute_path(cell_path: str, root: str = "model") -> str:
    """``model.layers.0.self_attn`` -> ``model.model.layers[0].self_attn`` (indices of CellLists as ``[i]``).

    >>> attribute_path("model.layers.0.self_attn.q_proj")
    'model.model.layers[0].self_attn.q_proj'
    """
    out = root
    for part in cell_path.split(".") if cell_path else ():
        out += f"[{part}]" if part.isdigit() else f".{part}" if part.isidentifier() else f".name_cells()[{part!r}]"
    return out


def apply_function(advice, names: list[str]) -> str:
    """The module text of ``apply_strategies(model)`` configuring the anchors ``names`` of ``advice``."""
    g = advice.graph
    lines, notes, needs_layout = [], [], False
    for name in names:
        op = g.op(name)
        st = strategy_of(advice, name)
        where = f"{op.cell_class}, {_short(op.source)}" if op.source else op.cell_class
        if not op.held:
            notes.append(f"    # {name} ({op.type}, {where}): a functional call its Cell holds no primitive for; "
                         f"its strategy {strategy_text(st.strategy)} goes in the anchors file or MindSpore's "
                         f"strategy file")
            continue
        arg = strategy_text(st.strategy) if st.tuple_ok or not st.layout else st.layout
        needs_layout |= not (st.tuple_ok or not st.layout)
        lines.append(f"    {attribute_path(op.cell_path)}.{op.instance_name}.shard({arg})  # {op.type}, {where}")
    head = [f'"""Strategies strategist advised for {g.model} on --mesh {advice.mesh}: call apply_strategies(model)',
            'once the model is built, before its first compile."""']
    if needs_layout:
        head.append("from mindspore import Layout")
    body = ["", "", "def apply_strategies(model):", f'    """Configure the {len(lines)} advised operators of '
            f'model (a {_root_class(g)})."""']
    if needs_layout:
        body.append(f"    {layout_decl(advice.mesh)}")
    body += lines + notes + ["    return model"]
    return "\n".join(head + body) + "\n"


def _root_class(g) -> str:
    return g.cells.get("", "Cell") if hasattr(g, "cells") else "Cell"


def _short(source: str) -> str:
    file, _, line = source.rpartition(":")
    marker = os.sep + "site-packages" + os.sep
    short = file.split(marker, 1)[1] if marker in file else os.path.basename(file)
    return f"{short}:{line}"
