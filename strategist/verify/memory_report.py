"""``strategist verify --memory``'s report: MindSpore's DryRun peak memory beside strategist's estimate, per rank."""
from __future__ import annotations

import json
from dataclasses import dataclass

from ..report.render import render_table
from .dryrun import MIB, MemoryAnswer


@dataclass(frozen=True)
class MemoryCheck:
    """One simulated rank: MindSpore's answer, and strategist's estimate of the same stage (``estimate_bytes``,
    the step model's ``memory.total``; ``estimate_optimizer``: the optimizer states it assumes)."""

    answer: MemoryAnswer
    estimate_bytes: float | None
    estimate_optimizer: str

    @property
    def ratio(self) -> float | None:
        """strategist's estimate over MindSpore's used peak."""
        if self.estimate_bytes is None or not self.answer.used_peak_bytes:
            return None
        return self.estimate_bytes / self.answer.used_peak_bytes

    def to_dict(self) -> dict:
        a = self.answer
        ratio = self.ratio
        return {"used_peak_bytes": a.used_peak_bytes, "actual_peak_bytes": a.actual_peak_bytes,
                "weight_bytes": a.weight_bytes, "estimate_bytes": None if self.estimate_bytes is None
                else int(round(self.estimate_bytes)), "ratio": None if ratio is None else round(ratio, 4),
                "rank": a.rank, "stage": a.stage, "device_num": a.device_num, "seconds": a.seconds,
                "mindspore_version": a.mindspore_version, "optimizer": a.optimizer,
                "estimate_optimizer": self.estimate_optimizer}


def _mib(n) -> str:
    return "-" if n is None else f"{n / MIB:,.1f} MiB"


def memory_json(checks: list[MemoryCheck], model: str, mesh: str) -> str:
    return json.dumps({"model": model, "mesh": mesh, "ranks": [c.to_dict() for c in checks]}, indent=1,
                      sort_keys=True) + "\n"


def memory_text(checks: list[MemoryCheck], model: str, mesh: str, markdown: bool = False) -> str:
    """The table: per simulated rank, MindSpore's used and actual peak, strategist's estimate and their ratio."""
    first = checks[0].answer
    out = [f"strategist verify --memory: {model}", f"mesh {mesh} ({first.device_num} devices); MindSpore "
           f"{first.mindspore_version} DryRun (MS_SIMULATION_LEVEL=1), one training step, optimizer {first.optimizer}",
           ""]
    rows = [(str(c.answer.rank), str(c.answer.stage), _mib(c.answer.used_peak_bytes), _mib(c.answer.actual_peak_bytes),
             _mib(c.answer.weight_bytes), _mib(c.estimate_bytes), "-" if c.ratio is None else f"{c.ratio:.2f}",
             f"{c.answer.seconds:.1f} s") for c in checks]
    out += render_table(["rank", "stage", "MindSpore used peak", "actual peak", "weights + states",
                         "strategist estimate", "estimate / used", "DryRun"], rows, markdown)
    out += ["", f"strategist's estimate assumes: {checks[0].estimate_optimizer}; MindSpore's used peak is its device "
                f"pool's without fragments, weights + states what the pool held for Parameters"]
    return "\n".join(out) + "\n"
