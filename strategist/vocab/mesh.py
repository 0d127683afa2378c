"""Device meshes (named axes, MindSpore device-matrix semantics) and hardware topologies.

A :class:`Mesh` is ``mindspore.Layout``'s device matrix with alias names: ``Mesh.parse("dp=2,tp=4")``
is ``Layout((2, 4), ("dp", "tp"))``. Device rank ``r`` sits at the row-major coordinates of ``r``
(the last axis varies fastest), so the innermost axes are the ones that stay inside a node.

An axis may instead be *drawn* from the stage's devices, as MindFormers draws expert parallelism: ``ep=32@dp*tp``
on ``dp=4,tp=8`` is 32 consecutive ranks of the 32 devices ``dp`` and ``tp`` span (MindFormers' ``ep`` group:
``get_ep_group_name``, consecutive ranks; its MoE layout's device matrix ``(dp * cp * tp / ep, ep)``). It adds no
devices: the device matrix is the axes' alone.

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
    #: axes drawn from the innermost devices of a stage, adding none: (name, size, the axes spanned, outer first)
    drawn: tuple[tuple[str, int, tuple[str, ...]], ...] = ()

    @classmethod
    def parse(cls, text: str) -> "Mesh":
        """``"dp=2,tp=4"`` -> Mesh; ``"dp=4,tp=8,ep=32@dp*tp"``: ep drawn from the devices of dp and tp.

        >>> Mesh.parse("dp=2,tp=4").shape
        (2, 4)
        >>> Mesh.parse("dp=2,tp=4,ep=8@dp*tp").ways("ep")
        8
        """
        axes, drawn = [], []
        for part in text.split(","):
            m = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*([0-9]+)\s*(?:@\s*([A-Za-z0-9_*\s]+))?", part)
            if not m or int(m.group(2)) < 1:
                raise MeshError(f"bad mesh {text!r}: write NAME=SIZE[,NAME=SIZE...], e.g. dp=2,tp=4 (an axis drawn "
                                f"from others: NAME=SIZE@AXIS*AXIS, e.g. ep=8@dp*tp)")
            if m.group(3):
                drawn.append((m.group(1), int(m.group(2)), tuple(a.strip() for a in m.group(3).split("*"))))
            else:
                axes.append((m.group(1), int(m.group(2))))
        names = [n for n, _ in axes] + [n for n, _, _ in drawn]
        if math.prod(s for _, s in axes) > MAX_DEVICES:
            raise MeshError(f"bad mesh {text!r}: {math.prod(s for _, s in axes)} devices is more than any real "
                            f"cluster (at most {MAX_DEVICES}); check the sizes")
        if len(set(names)) != len(names):
            raise MeshError(f"bad mesh {text!r}: axis names must be unique")
        if "None" in names or "interleaved_parallel" in names:
            raise MeshError(f"bad mesh {text!r}: 'None' and 'interleaved_parallel' are reserved by mindspore.Layout")
        mesh = cls(tuple(axes), tuple(drawn))
        for name, size, over in drawn:
            _check_drawn(text, mesh, name, size, over)
        return mesh

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
        """The size of axis ``name`` of the device matrix (a drawn axis is none of it: ``default``)."""
        return dict(self.axes).get(name, default)

    def ways(self, name: str) -> int:
        """How many ways ``name`` splits: its axis' size, or its drawn size (1 without either)."""
        return next((s for n, s, _ in self.drawn if n == name), self.get(name))

    def without(self, *names: str) -> "Mesh":
        """This mesh without the axes ``names`` (its drawn axes kept: they span none of them)."""
        return Mesh(tuple((n, s) for n, s in self.axes if n not in names), self.drawn)

    def __str__(self) -> str:
        return ",".join([f"{n}={s}" for n, s in self.axes] + [f"{n}={s}@{'*'.join(o)}" for n, s, o in self.drawn])


def drawn_from(axes, size: int) -> tuple[str, ...]:
    """The axes an axis of ``size`` is drawn from over ``axes`` (``(name, size)`` pairs, outer first): the fewest
    innermost of them (pp and size-1 axes left out) whose devices ``size`` divides, or all of them.

    >>> drawn_from([("pp", 8), ("dp", 4), ("tp", 8)], 32)
    ('dp', 'tp')
    """
    inner = [(n, s) for n, s in axes if n != "pp" and s > 1]
    over, n = [], 1
    while inner and n % size:
        name, s = inner.pop()
        over.insert(0, name)
        n *= s
    return tuple(over)


def _check_drawn(text: str, mesh: Mesh, name: str, size: int, over: tuple[str, ...]) -> None:
    """A drawn axis spans the innermost axes it names, adjacent and not pp, and divides their devices."""
    names = [n for n in mesh.names if n != "pp"]
    if not over or any(a not in mesh.names or a == "pp" for a in over):
        raise MeshError(f"bad mesh {text!r}: {name} is drawn from axes of the mesh other than pp (e.g. "
                        f"{name}={size}@{'*'.join(names[-2:]) or 'dp'})")
    if list(over) != names[len(names) - len(over):]:
        raise MeshError(f"bad mesh {text!r}: {name} is drawn from the innermost axes, outer first "
                        f"(consecutive ranks, as MindFormers draws ep): {'*'.join(names[len(names) - len(over):])}")
    span = math.prod(mesh.get(a) for a in over)
    if span % size:
        raise MeshError(f"bad mesh {text!r}: {name}={size} does not divide the {span} devices of {'*'.join(over)}")
    if size <= math.prod(mesh.get(a) for a in over[1:]):
        raise MeshError(f"bad mesh {text!r}: {name}={size} fits in {'*'.join(over[1:])}: draw it from "
                        f"{'*'.join(over[1:])} alone")


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
