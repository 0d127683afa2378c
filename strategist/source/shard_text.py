"""A placement as the ``shard()`` call written into the source: its tuple or ``Layout`` text over the mesh axes the
class already names, and the ``Layout`` declaration it needs."""
from __future__ import annotations

import math

from ..errors import SourceEditError
from .locate import AXIS_VARS, Placement


LAYOUT_VAR = "strategist_layout"


def render(placement: Placement, mesh, scope: dict[str, int], mf_layout: bool = False) -> tuple[str, bool]:
    """The shard() argument text and whether it needs the Layout declaration.

    ``scope``: the class's parallel-config variables visible at the edit, with their known values (a
    MindFormers config's attributes as ``config.data_parallel_size``, used where no variable holds the axis).
    ``mf_layout``: a Layout is written with MindFormers' own ``layout`` (its device matrix built from the
    config), which needs no declaration."""
    st = placement.strategy
    if not st.tuple_ok:
        if st.layout is None:
            raise SourceEditError(f"{st.op}: neither the tuple nor the Layout form expresses the advised layout")
        if mf_layout:
            return st.layout, False
        return st.layout.replace("layout(", f"{LAYOUT_VAR}("), True
    size = dict(zip(mesh.names, mesh.shape))
    by_axis = {}
    # the method's own names first, then the class's (``self.dp``), then the config's attributes
    for var, value in sorted(scope.items(), key=lambda kv: ("." in kv[0], not kv[0].startswith("self."), kv[0])):
        axis = AXIS_VARS.get(var.rsplit(".", 1)[-1])
        if axis is not None and size.get(axis) == value and axis not in by_axis:
            by_axis[axis] = var
    rows = []
    for i, row in enumerate(st.strategy):
        cells = []
        for j, v in enumerate(row):
            axes = st.axes[i][j] if i < len(st.axes) and j < len(st.axes[i]) else ()
            if v != 1 and axes and all(a in by_axis for a in axes) and math.prod(size[a] for a in axes) == v:
                cells.append(" * ".join(by_axis[a] for a in axes))
            else:
                cells.append(str(v))
        rows.append("(" + ", ".join(cells) + ("," if len(cells) == 1 else "") + ")")
    return "(" + ", ".join(rows) + ("," if len(rows) == 1 else "") + ")", False


def layout_decl(mesh) -> str:
    return f"{LAYOUT_VAR} = Layout({tuple(mesh.shape)}, {tuple(mesh.names)})"


MF_LAYOUT_MODULE = "mindformers.parallel_core.training_graph.device_matrix"


def mf_mesh(mesh) -> bool:
    """Is the mesh laid out as MindFormers' ``layout`` lays its devices: axes in its order (dp, cp, tp), no ep?"""
    order = ("dp", "cp", "tp")
    return all(n in order for n in mesh.names) and list(mesh.names) == sorted(mesh.names, key=order.index)
