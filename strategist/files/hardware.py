"""Hardware profiles: the YAML files under ``rules/hardware/`` (or a user's path) read into a
:class:`strategist.vocab.mesh.Hardware`."""
from __future__ import annotations

import os

from ..errors import MeshError
from ..vocab.mesh import Hardware, Link
from .schema import validate_hardware
from .yamlio import compose_file

HARDWARE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "rules", "hardware")


def load_hardware(name_or_path: str) -> Hardware:
    """A profile by file path or by name under ``rules/hardware/`` (``atlas-800t-a2``)."""
    path = name_or_path
    if not isinstance(path, str) or not path.strip():
        raise MeshError("bad --hardware '': give a profile name (atlas-800t-a2, gpu-8x-nvlink) or a YAML path")
    if not os.path.isfile(path):
        # a name as the vendor writes it ("Atlas 900 A2 PoDc") is the file's ("atlas-900-a2-podc")
        name = "-".join(name_or_path.strip().lower().replace("_", " ").split())
        path = os.path.join(HARDWARE_DIR, name + ".yaml")
    if not os.path.isfile(path):
        known = sorted(f[:-5] for f in os.listdir(HARDWARE_DIR) if f.endswith(".yaml"))
        raise MeshError(f"hardware profile not found: {name_or_path} (known: {', '.join(known)}, or a YAML path)")
    try:
        root = compose_file(path, "hardware profile")
    except Exception as err:  # RulesError from the YAML reader: same words, hardware's error class
        raise MeshError(f"bad hardware profile {err}") from None
    d = validate_hardware(root, path)
    links = {k: Link(getattr(d, k).bandwidth_GBps * 1e9, getattr(d, k).latency_us / 1e6)
             for k in ("intra_node", "inter_node")}
    return Hardware(d.name or os.path.basename(path), d.devices_per_node, links["intra_node"], links["inter_node"],
                    d.peak_tflops * 1e12, d.mfu, d.memory_GB * 2**30, d.hbm_GBps * d.hbm_efficiency * 1e9,
                    tuple((d.step_model or {}).items()))
