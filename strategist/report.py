"""Text renderings of graphs and plans (console tables). Pure functions of their inputs."""
from __future__ import annotations

import os

from .graph import OpGraph


def human_bytes(n: float) -> str:
    """``1536`` -> ``1.50 KiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} TiB"


def human_count(n: int) -> str:
    """``70553706496`` -> ``70.55 B``."""
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return str(n)


def rel(path: str | None) -> str:
    """A source location relative to the working directory when it lies below it."""
    if not path:
        return "-"
    file, _, line = path.rpartition(":")
    try:
        r = os.path.relpath(file)
    except ValueError:
        r = file
    return f"{file if r.startswith('..') else r}:{line}"


def inspect_text(graph: OpGraph, depth: int = 3) -> str:
    """The ``strategist inspect`` report: ops by type, parameters, cell tree with op counts."""
    out = [f"model: {graph.model}",
           "inputs: " + ", ".join(f"{k}:{v}" for k, v in graph.inputs.items()),
           f"operators: {len(graph)}   edges: {graph.nx.number_of_edges()}",
           f"parameters: {len(graph.params)} tensors, {human_count(graph.param_count)} elements, "
           f"{human_bytes(graph.param_bytes)}",
           f"configured in source (shard): {sum(op.configured for op in graph)}",
           "", "operators by type:"]
    for t, n in graph.count_by_type().items():
        out.append(f"  {t:<32}{n:>8}")
    out += ["", "cell tree (operators inside each cell):"]
    counts = graph.cell_op_counts()
    for path in sorted(counts, key=_path_key):
        level = 0 if not path else path.count(".") + 1
        if level > depth:
            continue
        label = path.rsplit(".", 1)[-1] if path else "(root)"
        out.append(f"  {'  ' * level}{label} [{graph.cells.get(path, '?')}] {counts[path]}")
    return "\n".join(out) + "\n"


def _path_key(path: str):
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in path.split(".")] if path else []
