"""Device groups by name rather than by rank list: ``tp group of 8``, ``all 64``, ``8 ranks, stride 4``.

A collective step (:class:`~strategist.vocab.comm.CommStep`) holds rank 0's group; its label lists the ranks
(``AllGather(n=8, group=[0, 8, 16, ...], dim=0)``, kept for ``--format json``), the text report names the mesh
axes it runs along instead.
"""
from __future__ import annotations

import math
from itertools import combinations

from ..memo import lru



@lru("report.groups.axis_groups", 256)
def axis_groups(shape: tuple[int, ...], names: tuple[str, ...]) -> dict[tuple[int, ...], str]:
    """Rank 0's group along each set of mesh axes (of size > 1) -> its name, the inner axes first within a size.

    >>> axis_groups((2, 4), ("dp", "tp"))[(0, 4)]
    'dp'
    """
    out: dict[tuple[int, ...], str] = {}
    axes = [a for a, n in enumerate(shape) if n > 1]
    for k in range(1, len(axes) + 1):
        for combo in combinations(axes, k):
            ranks = [0]
            for a in combo:
                stride = math.prod(shape[a + 1:])
                ranks = [r + j * stride for r in ranks for j in range(shape[a])]
            out.setdefault(tuple(sorted(ranks)), "+".join(names[a] for a in combo))
    return out


def group_name(ranks, mesh) -> str:
    """A group of ranks (rank 0's, as the labels list it) named over ``mesh``.

    >>> from strategist.vocab.mesh import Mesh
    >>> m = Mesh.parse("dp=8,tp=8")
    >>> group_name(range(8), m), group_name(range(0, 64, 8), m), group_name(range(64), m)
    ('tp group of 8', 'dp group of 8', 'all 64')
    >>> group_name([0, 2, 4, 6], m), group_name([0, 1, 5], m)
    ('4 ranks, stride 2', '3 ranks')
    """
    ranks = tuple(sorted(ranks))
    n = len(ranks)
    if n == mesh.size and n > 1:
        return f"all {n}"
    named = axis_groups(tuple(mesh.shape), tuple(mesh.names)).get(ranks)
    if named is not None:
        return f"{named} group of {n}"
    steps = {b - a for a, b in zip(ranks, ranks[1:])}
    if len(steps) == 1:
        return f"{n} ranks, stride {steps.pop()}"
    return f"{n} ranks"


def short_label(step, mesh) -> str:
    """A collective step's label with its group named instead of listed.

    >>> from strategist.vocab.comm import CommStep
    >>> from strategist.vocab.mesh import Mesh
    >>> short_label(CommStep("AllReduce", tuple(range(0, 64, 8)), 0.0, 0.0, "grad"), Mesh.parse("dp=8,tp=8"))
    'grad AllReduce(dp group of 8)'
    """
    return step.text(group_name(step.group, mesh)) if step.group else step.label
