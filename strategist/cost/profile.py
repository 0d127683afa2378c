"""The step model's hardware figures: achievable MatMul rate, element-wise bandwidth, device memory and, per
collective kind and group size, the bus bandwidth of the intra-node fabric; the inter-node link; each figure
with the source it was taken from.

A hardware profile YAML (``rules/hardware/*.yaml``) gives them under ``step_model:``, one mapping per figure
with ``value`` and ``source``::

    step_model:
      matmul_tflops: {value: 328, source: "..."}
      intra_bus_GBps:
        AllGather: {value: {2: 38, 4: 64, 8: 149}, source: "..."}

A profile without that section is read from its plain figures (``peak_tflops x mfu``, ``hbm_GBps x
hbm_efficiency``, the link bandwidths for every kind). Any figure can be overridden
(:func:`step_profile`'s ``overrides``, the CLI's ``--step-set KEY=VALUE``): the override's source reads
"user override".
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

from ..errors import MeshError

#: collective kinds the fabric tables are given for; a ReduceScatter moves what an AllGather does, an AllToAll
#: is priced as an AllGather of its slices (MindSpore's default, enable_alltoall off)
KINDS = ("AllGather", "ReduceScatter", "AllReduce", "AllToAll")
_SAME_AS = {"ReduceScatter": "AllGather", "AllToAll": "AllGather"}

#: a device memory's GB as MindSpore counts it: ``max_device_memory="59GB"`` is 59 x 2**30 bytes, and its DryRun's
#: simulated 64 GB 910B has 65536 MiB ("Device MOC memory size: 65536M")
MEMORY_GB = 2**30
#: figures a profile may give (scalars), with their unit conversion to SI
SCALARS = {
    "peak_tflops": 1e12, "matmul_tflops": 1e12, "flash_attention_efficiency": 1.0, "fp32_matmul_ratio": 1.0,
    "elementwise_GBps": 1e9, "memory_GB": MEMORY_GB, "intra_latency_us": 1e-6, "inter_bus_GBps": 1e9,
    "inter_latency_us": 1e-6, "p2p_intra_GBps": 1e9, "p2p_inter_GBps": 1e9, "kernel_launch_us": 1e-6,
    "memory_reserved_GB": MEMORY_GB, "flash_attention_key_overhead": 1.0,
}
TABLES = ("intra_bus_GBps",)


@dataclass(frozen=True)
class StepProfile:
    """Figures in SI units (FLOP/s, bytes/s, seconds, bytes); ``sources`` names each figure's origin."""

    name: str
    devices_per_node: int
    peak_tflops: float                  # FLOP/s, dense bf16/fp16 (reference only)
    matmul_tflops: float                # FLOP/s a bf16/fp16 MatMul of a large shape reaches
    elementwise_GBps: float             # bytes/s an element-wise kernel moves through HBM
    memory_GB: float                    # bytes of device memory
    intra_bus_GBps: tuple               # ((kind, ((n, bytes/s), ...)), ...) bus bandwidth inside a node
    intra_latency_us: float             # seconds per collective algorithm step inside a node
    inter_bus_GBps: float               # bytes/s bus bandwidth of a group crossing nodes
    inter_latency_us: float             # seconds per step across nodes
    p2p_intra_GBps: float               # bytes/s of a pipeline send/receive inside a node
    p2p_inter_GBps: float               # bytes/s across nodes
    flash_attention_efficiency: float = 1.0   # FlashAttention's rate at long keys as a fraction of matmul_tflops
    flash_attention_key_overhead: float = 0.0   # its fixed cost per query tile, in keys' work (0: none)
    fp32_matmul_ratio: float = 0.25     # an fp32 MatMul's rate as a fraction of matmul_tflops
    kernel_launch_us: float = 0.0       # fixed seconds per kernel (task sink: small)
    memory_reserved_GB: float = 0.0     # bytes the runtime keeps for itself (workspace, communication buffers)
    sources: dict = field(default_factory=dict, compare=False, hash=False)
    _memo: dict = field(default_factory=dict, init=False, compare=False, hash=False, repr=False)

    def bus_bandwidth(self, kind: str, n: int, intra: bool) -> float:
        """Bus bandwidth (bytes/s) of a ``kind`` collective over ``n`` devices; between the table's group sizes
        the next smaller size's figure (a larger group is never faster per byte than measured)."""
        if not intra:
            return self.inter_bus_GBps
        table = dict(self.intra_bus_GBps)
        rows = table.get(kind) or table.get(_SAME_AS.get(kind, ""), ()) or table.get("AllGather", ())
        if not rows:
            return self.inter_bus_GBps
        best = rows[0][1]
        for size, bw in rows:
            if size <= n:
                best = bw
        return best

    def collective_seconds(self, kind: str, n: int, nbytes_sent: float, intra: bool) -> float:
        """Time of one collective whose every device sends ``nbytes_sent`` (the ring's bytes: an AllReduce's
        ``2 (n-1)/n`` of its input, an AllGather's ``(n-1)`` input slices): the latency of its algorithm's
        steps plus those bytes at the bus bandwidth (nccl-tests' definition: bus bandwidth x time = the bytes
        a ring sends per device)."""
        if n <= 1 or nbytes_sent <= 0:
            return 0.0
        key = (kind, n, nbytes_sent, intra)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = self._collective_seconds(kind, n, nbytes_sent, intra)
        return hit

    def _collective_seconds(self, kind: str, n: int, nbytes_sent: float, intra: bool) -> float:
        rounds = n.bit_length() - 1 if n & (n - 1) == 0 else n - 1
        steps = 2 * rounds if kind == "AllReduce" else rounds
        lat = self.intra_latency_us if intra else self.inter_latency_us
        return steps * lat + nbytes_sent / self.bus_bandwidth(kind, n, intra)

    def p2p_seconds(self, nbytes: float, intra: bool) -> float:
        if nbytes <= 0:
            return 0.0
        bw = self.p2p_intra_GBps if intra else self.p2p_inter_GBps
        return (self.intra_latency_us if intra else self.inter_latency_us) + nbytes / bw

    def matmul_seconds(self, flops: float, dtype: str = "bfloat16", attention: bool = False,
                       keys: float | None = None) -> float:
        """Seconds of ``flops`` of MatMul work (``attention``: a FlashAttention's, whose query rows attend ``keys``
        keys on average: its rate ``flash_attention_efficiency x keys / (keys + flash_attention_key_overhead)``
        of the MatMul rate, the fixed cost of each query tile spread over the keys it attends)."""
        rate = self.matmul_tflops * (self.flash_attention_efficiency if attention else 1.0)
        if attention and keys and self.flash_attention_key_overhead:
            rate *= keys / (keys + self.flash_attention_key_overhead)
        if dtype.startswith("float32") or dtype == "float64":
            rate *= self.fp32_matmul_ratio
        return flops / rate if rate else 0.0

    def memory_seconds(self, nbytes: float) -> float:
        return nbytes / self.elementwise_GBps if self.elementwise_GBps else 0.0

    def to_dict(self) -> dict:
        """Figures in the YAML's units, with their sources."""
        out = {}
        for k, unit in SCALARS.items():
            out[k] = {"value": getattr(self, k) / unit, "source": self.sources.get(k, "")}
        out["intra_bus_GBps"] = {"value": {kind: {n: bw / 1e9 for n, bw in rows} for kind, rows in self.intra_bus_GBps},
                                 "source": self.sources.get("intra_bus_GBps", "")}
        return out


def _from_plain(hw) -> StepProfile:
    """A profile without a ``step_model`` section: its plain figures."""
    src = f"profile {hw.name}: derived from its plain figures"
    table = tuple((k, ((2, hw.intra.bandwidth),)) for k in KINDS)
    return StepProfile(hw.name, hw.devices_per_node, hw.peak_flops, hw.peak_flops * hw.mfu, hw.hbm_bandwidth,
                       hw.memory_bytes, table, hw.intra.latency, hw.inter.bandwidth, hw.inter.latency,
                       hw.intra.bandwidth, hw.inter.bandwidth, sources={k: src for k in list(SCALARS) + list(TABLES)})


def _number(v, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise MeshError(f"bad step_model figure {where}: {v!r} is not a non-negative number")
    return float(v)


def _table(v, where: str) -> tuple:
    if not isinstance(v, dict) or not v:
        raise MeshError(f"bad step_model figure {where}: give {{KIND: {{GROUP_SIZE: GB/s, ...}}, ...}} "
                        f"with KIND one of {', '.join(KINDS)}")
    out = []
    for kind, rows in v.items():
        if kind not in KINDS or not isinstance(rows, dict) or not rows:
            raise MeshError(f"bad step_model figure {where}.{kind}: give {{GROUP_SIZE: GB/s, ...}} for a KIND "
                            f"of {', '.join(KINDS)}")
        pairs = []
        for n, bw in rows.items():
            if isinstance(n, bool) or not isinstance(n, int) or n < 2:
                raise MeshError(f"bad step_model figure {where}.{kind}: group size {n!r} is not an integer >= 2")
            b = _number(bw, f"{where}.{kind}.{n}")
            if b <= 0:
                raise MeshError(f"bad step_model figure {where}.{kind}.{n}: a bandwidth must be positive")
            pairs.append((n, b * 1e9))
        out.append((kind, tuple(sorted(pairs))))
    return tuple(out)


def _apply(base: StepProfile, figures: dict, origin: str | None) -> StepProfile:
    """``base`` with ``figures`` ({key: {value, source}} or, for overrides, {key: value}) applied."""
    changes, sources = {}, dict(base.sources)
    for key, item in figures.items():
        if key not in SCALARS and key not in TABLES:
            known = ", ".join(sorted(list(SCALARS) + list(TABLES)))
            raise MeshError(f"unknown step_model figure {key!r} (known: {known})")
        if origin is None:
            if not isinstance(item, dict) or set(item) != {"value", "source"} or not isinstance(item["source"], str) \
                    or not item["source"].strip():
                raise MeshError(f"bad step_model figure {key}: write {{value: ..., source: \"where it is from\"}}")
            value, src = item["value"], item["source"]
        else:
            value, src = item, origin
        if key in TABLES:
            changes[key] = _table(value, key)
        else:
            changes[key] = _number(value, key) * SCALARS[key]
        sources[key] = src
    return replace(base, sources=sources, **changes)


def step_profile(hw, overrides: dict | None = None) -> StepProfile:
    """The step model's figures of a :class:`~strategist.vocab.mesh.Hardware` profile (its ``step_model``
    section over its plain figures), then ``overrides`` ({figure: value}, the YAML's units)."""
    base = _from_plain(hw)
    figures = getattr(hw, "step_model", None)
    if figures:
        base = _apply(base, dict(figures), None)
    if overrides:
        base = _apply(base, merge_table(base, overrides), "user override")
    return base


_SET = re.compile(r"\s*([A-Za-z_0-9]+)(?:\.([A-Za-z]+)\.([0-9]+))?\s*=\s*([0-9.eE+-]+)\s*")


def parse_overrides(items) -> dict:
    """``--step-set`` values -> overrides: ``matmul_tflops=300``, ``intra_bus_GBps.AllReduce.8=80``.

    >>> parse_overrides(["matmul_tflops=300", "intra_bus_GBps.AllReduce.8=80"])
    {'matmul_tflops': 300.0, 'intra_bus_GBps': {'AllReduce': {8: 80.0}}}
    """
    out: dict = {}
    for it in items or ():
        m = _SET.fullmatch(it)
        try:
            v = float(m.group(4)) if m else None
        except ValueError:
            v = None
        if m is None or v is None:
            raise MeshError(f"bad --step-set {it!r}: write FIGURE=VALUE (matmul_tflops=300) or "
                            f"intra_bus_GBps.KIND.N=VALUE (intra_bus_GBps.AllReduce.8=80)")
        if m.group(2):
            out.setdefault(m.group(1), {}).setdefault(m.group(2), {})[int(m.group(3))] = v
        else:
            out[m.group(1)] = v
    return out


def merge_table(base: StepProfile, overrides: dict) -> dict:
    """Overrides of a table merged over the profile's own rows (an override of one group size keeps the rest)."""
    out = dict(overrides)
    for key in TABLES:
        if key in out:
            mine = {k: {n: bw / 1e9 for n, bw in rows} for k, rows in getattr(base, key)}
            for kind, rows in out[key].items():
                mine.setdefault(kind, {}).update(rows)
            out[key] = mine
    return out
