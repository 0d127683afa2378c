"""Device meshes (named axes, MindSpore device-matrix semantics) and hardware topologies.

A :class:`Mesh` is ``mindspore.Layout``'s device matrix with alias names: ``Mesh.parse("dp=2,tp=4")``
is ``Layout((2, 4), ("dp", "tp"))``. Device rank ``r`` sits at the row-major coordinates of ``r``
(the last axis varies fastest), so the innermost axes are the ones that stay inside a node.

A :class:`Hardware` profile (YAML under ``rules/hardware/``) gives devices per node and, per link
class, bandwidth and latency; ``collective_seconds`` prices one collective with the alpha-beta model.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ..memo import lru
from ..errors import MeshError

MAX_DEVICES = 2 ** 20   # more devices than any real cluster: a typo, refused


@dataclass(frozen=True)
class Mesh:
    """Named device axes, outer -> inner, e.g. ``(("dp", 2), ("tp", 4))``."""

    axes: tuple[tuple[str, int], ...]

    @classmethod
    def parse(cls, text: str) -> "Mesh":
        """``"dp=2,tp=4"`` -> Mesh.

        >>> Mesh.parse("dp=2,tp=4").shape
        (2, 4)
        """
        axes = []
        for part in text.split(","):
            m = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*([0-9]+)\s*", part)
            if not m or int(m.group(2)) < 1:
                raise MeshError(f"bad mesh {text!r}: write NAME=SIZE[,NAME=SIZE...], e.g. dp=2,tp=4")
            axes.append((m.group(1), int(m.group(2))))
        names = [n for n, _ in axes]
        if math.prod(s for _, s in axes) > MAX_DEVICES:
            raise MeshError(f"bad mesh {text!r}: {math.prod(s for _, s in axes)} devices is more than any real "
                            f"cluster (at most {MAX_DEVICES}); check the sizes")
        if len(set(names)) != len(names):
            raise MeshError(f"bad mesh {text!r}: axis names must be unique")
        if "None" in names or "interleaved_parallel" in names:
            raise MeshError(f"bad mesh {text!r}: 'None' and 'interleaved_parallel' are reserved by mindspore.Layout")
        return cls(tuple(axes))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.axes)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(s for _, s in self.axes)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def index(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError:
            raise MeshError(f"mesh has no axis {name!r} (axes: {', '.join(self.names)})") from None

    def get(self, name: str, default: int = 1) -> int:
        return dict(self.axes).get(name, default)

    def __str__(self) -> str:
        return ",".join(f"{n}={s}" for n, s in self.axes)


@dataclass(frozen=True)
class Link:
    bandwidth: float   # bytes per second, one direction, per device
    latency: float     # seconds per step


@dataclass(frozen=True)
class Hardware:
    name: str
    devices_per_node: int
    intra: Link
    inter: Link
    peak_flops: float = 0.0      # dense fp16/bf16 FLOP/s per device (0: computation not priced)
    mfu: float = 0.5             # fraction of peak a large MatMul reaches
    memory_bytes: float = 0.0
    hbm_bandwidth: float = 0.0   # device-memory bytes/s a memory-bound kernel sustains (0: not priced)
    # the step model's figures with their sources (the profile's step_model section: strategist.cost.profile)
    step_model: tuple = field(default=(), compare=False)

    def compute_seconds(self, flops: float) -> float:
        return flops / (self.peak_flops * self.mfu) if self.peak_flops else 0.0

    def memory_seconds(self, nbytes: float) -> float:
        """Time of memory-bound work (element-wise operators, norms, casts) moving ``nbytes``."""
        return nbytes / self.hbm_bandwidth if self.hbm_bandwidth else 0.0

    def is_intra_node(self, dev_matrix: tuple[int, ...], axis: int, size: int | None = None) -> bool:
        """True when every group along ``axis`` of ``dev_matrix`` lies inside one node (``size``: a group over
        ``axis`` and the axes before it, of that many ranks)."""
        axes, n = [axis], dev_matrix[axis]
        while n < (size or dev_matrix[axis]) and axes[0] > 0:
            axes.insert(0, axes[0] - 1)
            n *= dev_matrix[axes[0]]
        return _intra_axes(dev_matrix, tuple(axes), self.devices_per_node)

    def collective_seconds(self, op, nbytes: float, axes: tuple[int, ...] | None = None) -> float:
        """Alpha-beta time of one :class:`~strategist.engine.redistribution.Collective` sending ``nbytes``
        per device: ``steps * latency + bytes / bandwidth`` on the slowest link its group crosses. ``axes``: the
        device axes its group spans, where they are not ``op.axis`` and those before it (a Parameter's mirror over
        every device holding the same slice)."""
        intra = _intra_axes(op.dev_matrix, axes, self.devices_per_node) if axes is not None else \
            self.is_intra_node(op.dev_matrix, op.axis, op.n)
        link = self.intra if intra else self.inter
        return op.steps() * link.latency + nbytes / link.bandwidth


@lru("vocab.mesh._intra_axes", 1024)
def _intra_axes(dev_matrix: tuple[int, ...], axes: tuple[int, ...], per_node: int) -> bool:
    """Every group spanning the device ``axes`` of ``dev_matrix`` lies inside one node (nodes hold consecutive
    ranks, so a group's first and last rank decide)."""
    strides = [math.prod(dev_matrix[a + 1:]) for a in axes]
    span = sum((dev_matrix[a] - 1) * st for a, st in zip(axes, strides))
    n = math.prod(dev_matrix)
    for base in range(n):
        if any((base // st) % dev_matrix[a] for a, st in zip(axes, strides)):
            continue
        if base // per_node != (base + span) // per_node:
            return False
    return True


def mesh_fit_warning(graph, mesh: Mesh) -> str | None:
    """A warning when some mesh axis (size > 1) divides no dimension of any tensor of the model: every
    operator is then replicated along it and the plan is an all-replicated "0 B" plan."""
    dims = set()
    for spec in list(getattr(graph, "inputs", {}).values()) + [p.spec for p in getattr(graph, "params", {}).values()]:
        dims.update(spec.shape)
    for op in graph:
        for t in list(getattr(op, "outputs", ()) or ()) + list(getattr(op, "inputs", ()) or ()):
            shape = getattr(t, "shape", None) or getattr(getattr(t, "spec", None), "shape", None)
            if shape:
                dims.update(shape)
    dead = [n for n, s in mesh.axes if s > 1 and not any(d and d % s == 0 for d in dims)]
    if not dead:
        return None
    return (f"mesh axis {', '.join(f'{n}={mesh.get(n)}' for n in dead)} divides no dimension of the model: "
            f"every operator is replicated along it (pick sizes that divide the batch or hidden sizes)")
