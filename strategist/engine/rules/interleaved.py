"""MindSpore's ``interleaved_parallel`` Layout axis: dropped for sharding propagation, kept for the edge costs."""
from __future__ import annotations

from ...errors import StrategyError
from ...vocab.graph import ShardLayout
from ...vocab.layout import Layout


#: the Layout axis MindSpore reserves for interleaved (micro-sliced) parallelism
INTERLEAVED = "interleaved_parallel"


def without_interleaved(layouts: tuple[ShardLayout, ...]) -> tuple[ShardLayout, ...]:
    """Layouts over a device matrix with an ``interleaved_parallel`` axis, that axis dropped: it slices a dimension
    further on the same devices (run interleaved), and MindSpore's strategy leaves it out (measured, 2.9.0:
    ``Layout((2, 2, 2, 2), ("dp", "mp", "sp", "interleaved_parallel"))`` ``(("dp", "interleaved_parallel"), "mp")``
    configures MatMul's ``(2, 2)``; its UT test_layout_propagation_save_and_load4). So sharding propagation sees
    the layout without it -- except in the edge costs, which lay it out with the axis (:func:`interleaved_priced`).

    >>> lay = ShardLayout((2, 2, 2, 2), ("dp", "mp", "sp", "interleaved_parallel"), ((3, 0), (2,)))
    >>> without_interleaved((lay,))
    (ShardLayout(device_matrix=(2, 2, 2), alias_name=('dp', 'mp', 'sp'), tensor_map=((2,), (1,))),)
    """
    out = []
    for sl in layouts:
        if not isinstance(sl, ShardLayout) or INTERLEAVED not in sl.alias_name:
            out.append(sl)
            continue
        n = len(sl.device_matrix)
        i = sl.alias_name.index(INTERLEAVED)
        rev = n - 1 - i                     # its index counted from the right, as tensor maps count
        dm = sl.device_matrix[:i] + sl.device_matrix[i + 1:]
        names = sl.alias_name[:i] + sl.alias_name[i + 1:]
        tmap = tuple(tuple(k - (k > rev) for k in t if k != rev) for t in sl.tensor_map)
        out.append(ShardLayout(dm, names, tmap))
    return tuple(out)


def interleaved_priced(layouts, shapes) -> dict[int, Layout]:
    """The inputs whose Layout has an ``interleaved_parallel`` axis, laid out as MindSpore's cost model prices an
    edge into them: over the Layout's whole device matrix, the interleaved axis a device axis like any other
    (index -> :class:`Layout` over ``shapes[index]``). MindSpore 2.9.0's edge cost (``InitNotIdentityEdgeCost``)
    takes a consumer's interleaved input as such a layout -- ``(("dp", "interleaved_parallel", "mp"), "sp")`` over
    (2, 2, 2, 2) is device arrangement [2, 2, 2, 2], tensor shape [2, 2, rows/4, cols], map [3, 0, 2, 1] -- and
    the producer's candidate over its own device matrix with one more innermost axis of the interleaved size
    (``device arrangement origin = [1 1 8 2]``; :func:`with_interleaved_axis`). The rows a device holds are then
    not one block where the interleaved axis sits between two of a dimension's axes, so a candidate splitting that
    dimension over both pays communication (UT test_sharding_strategy_save_and_load4 compiled as built: the Add
    before the second MatMul takes (2, 1), not (4, 2))."""
    out = {}
    for k, sl in enumerate(layouts):
        if not isinstance(sl, ShardLayout) or INTERLEAVED not in sl.alias_name or k >= len(shapes):
            continue
        dm = tuple(sl.device_matrix)
        n = len(dm)
        try:
            out[k] = Layout(tuple(shapes[k]), dm, tuple(tuple(n - 1 - r for r in rev) for rev in sl.tensor_map))
        except StrategyError:
            continue
    return out


def with_interleaved_axis(layout: Layout, device_num: int) -> Layout | None:
    """``layout`` over ``device_num`` devices, a multiple of its own: one more innermost device axis holding repeated
    copies (how MindSpore's cost model lays a producer's candidate against an interleaved consumer's layout)."""
    if layout.device_num == device_num:
        return layout
    if device_num % layout.device_num:
        return None
    return Layout(layout.shape, tuple(layout.dev_matrix) + (device_num // layout.device_num,), layout.dims,
                  layout.partial)
