"""A model's repeated blocks as Cells: the one Cell list whose blocks after the first are alike (``model.layers``),
compiled with its first three blocks only and the graph grown to the whole list
(:func:`strategist.frontend.layers.grow_layers`). The compile is most of an extraction's time and grows with the
layers (80 LLaMA-70B layers: 6 s, three: under one), while the grown graph is the one the whole compile gives, op
for op (tests, on every example with repeated layers). The third block checks the copy: grown from the first two,
it must be the compiled one (:func:`strategist.frontend.layers.grows_alike`).

Alike means the same class, the same sub-Cells, parameters (relative name, shape, dtype) and primitive attributes,
and the same plain attributes (a per-layer ``layer_id``, a per-layer drop rate: not alike): a block whose
``construct`` could compile differently from the second one's is never copied.
"""
from __future__ import annotations

import contextlib
import re

#: the repeated blocks compiled: the last of them is copied for the rest, after checking it is the one before copied
COMPILED = 3

#: a Cell's bookkeeping attributes that differ between alike instances
_OWN = frozenset({"_create_time", "_id", "_param_prefix", "_cells", "_params", "_params_list", "_tensor_list",
                  "_primitives", "_scope", "_cell_init_args", "_phase_cache", "_exist_objs", "_exist_names"})
_PLAIN = (int, float, str, bool, tuple, type(None))


def repeated_list(cell) -> tuple[str, object, int] | None:
    """(path, the list Cell, its length) of ``cell``'s one outermost list of more than :data:`COMPILED` blocks that
    are alike after the first, or None: no such list, several, or blocks that differ."""
    from mindspore import nn
    found = []
    for path, c in cell.cells_and_names():
        if not path or not isinstance(c, (nn.CellList, nn.SequentialCell)):
            continue
        if any(path.startswith(p + ".") for p, _, _ in found):
            continue
        blocks = list(c._cells.values())
        if len(blocks) <= COMPILED or list(c._cells) != [str(i) for i in range(len(blocks))]:
            continue
        found.append((path, c, len(blocks)))
    if len(found) != 1:
        return None
    path, lst, n = found[0]
    blocks = list(lst._cells.values())
    first = _signature(blocks[1])
    if first is None or any(_signature(b) != first for b in blocks[2:]):
        return None
    return path, lst, n


def _signature(block):
    """What of ``block`` its compile reads: per sub-Cell its class, plain attributes and primitives' attributes,
    per parameter its relative name, shape, dtype and whether it trains; None for a block with a custom bprop or
    hooks (compiled apart)."""
    from mindspore.ops.primitive import Primitive
    out = []
    for rel, sub in block.cells_and_names():
        if callable(getattr(sub, "bprop", None)):
            return None
        items = []
        for k, v in sorted(vars(sub).items()):
            if k in _OWN:
                continue
            if isinstance(v, Primitive):
                items.append((k, type(v).__name__, repr(sorted((a, repr(b)) for a, b in v.attrs.items()))))
            elif isinstance(v, _PLAIN):
                items.append((k, repr(v)))
        params = tuple((k, tuple(p.shape), str(p.dtype), bool(p.requires_grad))
                       for k, p in sub._params.items() if p is not None)
        out.append((rel, type(sub).__name__, tuple(items), params))
    return tuple(out)


@contextlib.contextmanager
def first_blocks(lst, keep: int = COMPILED):
    """``lst`` holding its first ``keep`` blocks only while the context lasts (restored after, whatever happens)."""
    saved = list(lst._cells.items())
    for k, _ in saved[keep:]:
        del lst._cells[k]
    try:
        yield lst
    finally:
        lst._cells.clear()
        lst._cells.update(saved)


def scope_pattern(path: str, lst) -> re.Pattern:
    """A block's index in MindSpore's scope names (``.../layers-CellList/2-DecoderLayer/...``)."""
    last = path.rpartition(".")[2]
    return re.compile(rf"(?<=/{re.escape(last)}-{re.escape(type(lst).__name__)}/)(\d+)(?=-)")
