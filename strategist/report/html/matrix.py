"""The rank x rank communication matrix of one training step: the bytes each device sends each other device,
from every collective of the plan -- the redistributions forward and backward, the operators' own partial sums
and the gradient reductions. A collective's label names rank 0's group; every other rank's group is its coset
(rank ``r``'s group is rank 0's group moved to the first rank not yet in a group). Each device's bytes in a
collective are spread evenly over its group's other ranks (the algorithm's own pattern, ring or halving-doubling,
is not modelled)."""
from __future__ import annotations

from ...vocab.graph import DTYPE_BYTES


def collective_steps(plan) -> list:
    """Every step (:class:`~strategist.vocab.comm.CommStep`) of one training step that sends bytes."""
    a2a = bool(getattr(plan.graph, "enable_alltoall", False))
    out: list = []
    for e in plan.edges:
        size = DTYPE_BYTES.get(e.dtype, 4)
        for r in (e.forward, e.backward):
            if r is not None and r.ops:
                out.extend(st for st in r.physical(size, None, a2a, e.dtype).steps if st.nbytes > 0)
    for name in sorted(plan.op_costs):
        out.extend(st for st in plan.op_costs[name].steps if st.nbytes > 0)
    return out


def cosets(group: tuple[int, ...], devices: int) -> list[tuple[int, ...]]:
    """Every rank's group, rank 0's group ``group`` moved over the devices; [group] alone when the moves do not
    partition the devices.

    >>> cosets((0, 4), 8)
    [(0, 4), (1, 5), (2, 6), (3, 7)]
    """
    base = min(group)
    offsets = [g - base for g in group]
    taken: set[int] = set()
    out = []
    for r in range(devices):
        if r in taken:
            continue
        g = tuple(r + o for o in offsets)
        if any(x >= devices or x in taken for x in g):
            return [group]
        taken.update(g)
        out.append(g)
    return out


def comm_matrix(plan) -> list[list[float]]:
    """``m[i][j]``: bytes device ``i`` sends device ``j`` in one training step."""
    n = plan.mesh.size
    m = [[0.0] * n for _ in range(n)]
    for st in collective_steps(plan):
        group = st.group
        if st.collective is None or st.n < 2:
            continue
        share = st.nbytes / (len(group) - 1)
        for g in cosets(tuple(group), n):
            for i in g:
                row = m[i]
                for j in g:
                    if j != i:
                        row[j] += share
    return m
