"""How a sweep's ranking compares with another's of the same configurations: the sweep (each family of meshes
advised at one mesh, its anchors carried to the others) against every mesh advised on its own (``--exhaustive``).
Pure functions of two :class:`~strategist.sweep.SweepResult` values."""
from __future__ import annotations


def _key(c) -> tuple:
    # (an option may be a list: a pipeline's offset, its per-stage recompute counts)
    return c.mesh, tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in c.options.items()))


def _meshes(rows, n: int) -> list[str]:
    seen: list[str] = []
    for c in rows:
        if c.mesh not in seen:
            seen.append(c.mesh)
    return seen[:n]


def compare_rankings(result, every) -> dict:
    """How ``result``'s ranking compares with ``every``'s (the same sweep with every mesh advised on its own): the same
    first configuration (and step), the same ten fastest meshes in order, the rows of meshes advised on their own in
    both and how many are equal, the rows in one sweep only, and how far the carried rows' steps are from their own
    advice's (median, 90th percentile, most), and how many rows fit in one ranking only."""
    want = {_key(c): c for c in every.ranked + every.unfit}
    # a FlashAttention load-balance twin is priced only where the mesh's plan splits the attention's query: a carried
    # plan may where the mesh's own does not (or the other way), so such a row is in one sweep alone
    both = [c for c in result.ranked + result.unfit if _key(c) in want]
    only = len(result.ranked) + len(result.unfit) - len(both) + len(want) - len(both)
    own = [c for c in both if c.anchors_from == c.mesh]
    dev = sorted(abs(c.step_s / want[_key(c)].step_s - 1) for c in both
                 if c.anchors_from != c.mesh and c.step_s and want[_key(c)].step_s)
    first = result.ranked[0] if result.ranked else None
    first_all = every.ranked[0] if every.ranked else None
    return {"same_first": first is not None and first_all is not None and _key(first) == _key(first_all)
            and first.step_s == first_all.step_s,
            "same_top10_meshes": _meshes(result.ranked, 10) == _meshes(every.ranked, 10),
            "own_rows": len(own), "own_rows_equal": sum(1 for c in own if c.step_s == want[_key(c)].step_s),
            "rows_in_one_sweep_only": only,
            "carried_rows": len(dev), "fits_differ": sum(1 for c in both if c.fits != want[_key(c)].fits),
            "carried_median": dev[len(dev) // 2] if dev else 0.0, "carried_p90": dev[int(0.9 * len(dev))] if dev else 0.0,
            "carried_max": dev[-1] if dev else 0.0}
