"""Device meshes (named axes, MindSpore device-matrix semantics) and hardware topologies.

A :class:`Mesh` is ``mindspore.Layout``'s device matrix with alias names: ``Mesh.parse("dp=2,tp=4")``
is ``Layout((2, 4), ("dp", "tp"))``. Device rank ``r`` sits at the row-major coordinates of ``r``
(the last axis varies fastest), so the innermost axes are the ones that stay inside a node.

A :class:`Hardware` profile (YAML under ``rules/hardware/``) gives devices per node and, per link
class, bandwidth and latency; ``collective_seconds`` prices one collective with the alpha-beta model.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from functools import lru_cache

import yaml

from .errors import MeshError

HARDWARE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "rules", "hardware")


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

    def compute_seconds(self, flops: float) -> float:
        return flops / (self.peak_flops * self.mfu) if self.peak_flops else 0.0

    def is_intra_node(self, dev_matrix: tuple[int, ...], axis: int) -> bool:
        """True when every group along ``axis`` of ``dev_matrix`` lies inside one node."""
        return _intra(dev_matrix, axis, self.devices_per_node)

    def collective_seconds(self, op, nbytes: float) -> float:
        """Alpha-beta time of one :class:`~strategist.redistribution.Collective` sending ``nbytes``
        per device: ``steps * latency + bytes / bandwidth`` on the slowest link its group crosses."""
        link = self.intra if self.is_intra_node(op.dev_matrix, op.axis) else self.inter
        return op.steps() * link.latency + nbytes / link.bandwidth


@lru_cache(maxsize=1024)
def _intra(dev_matrix: tuple[int, ...], axis: int, per_node: int) -> bool:
    n = math.prod(dev_matrix)
    stride = math.prod(dev_matrix[axis + 1:])
    size = dev_matrix[axis]
    for base in range(n):
        if (base // stride) % size:
            continue
        nodes = {(base + k * stride) // per_node for k in range(size)}
        if len(nodes) > 1:
            return False
    return True


def load_hardware(name_or_path: str) -> Hardware:
    """A profile by file path or by name under ``rules/hardware/`` (``atlas-800t-a2``)."""
    path = name_or_path
    if not os.path.isfile(path):
        path = os.path.join(HARDWARE_DIR, name_or_path + ".yaml")
    if not os.path.isfile(path):
        known = sorted(f[:-5] for f in os.listdir(HARDWARE_DIR) if f.endswith(".yaml"))
        raise MeshError(f"hardware profile not found: {name_or_path} (known: {', '.join(known)}, or a YAML path)")
    try:
        with open(path) as f:
            d = yaml.safe_load(f)
        links = {}
        for k in ("intra_node", "inter_node"):
            links[k] = Link(float(d[k]["bandwidth_GBps"]) * 1e9, float(d[k]["latency_us"]) / 1e6)
        return Hardware(str(d.get("name", os.path.basename(path))), int(d["devices_per_node"]),
                        links["intra_node"], links["inter_node"], float(d.get("peak_tflops", 0)) * 1e12,
                        float(d.get("mfu", 0.5)), float(d.get("memory_GB", 0)) * 1e9)
    except (KeyError, TypeError, ValueError, yaml.YAMLError) as err:
        raise MeshError(f"bad hardware profile {path}: {type(err).__name__}: {err} "
                        f"(needs devices_per_node and intra_node/inter_node bandwidth_GBps, latency_us)") from None
