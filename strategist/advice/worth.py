"""Whether configuration pays for itself: every comparison of two step estimates the advisor and ``compare`` make
goes through here, so one rule and one tolerance decide them all.

* A shard() line (an anchor, or one pattern across repeated layers) pays when the step is slower without it by more
  than the step model resolves -- :data:`PAY_WORTH` of the step, at most :data:`PAY_FLOOR` per line -- or when it
  shards at least :data:`MEMORY_WORTH` of weight, gradient and optimizer state per device (:func:`pays`).
* Two steps are the same within :data:`TIE` of the larger; one is faster or slower only beyond it
  (:func:`faster`, :func:`slower`, :func:`same_step`): the first of equals is kept.

    >>> pays(0.2e-3, 1.0), pays(50e-6, 1.0), pays(50e-6, 0.01), pays(0.0, 1.0, saved=2**31)
    (True, False, True, True)
"""
from __future__ import annotations

from .footprint import MEMORY_WORTH

#: a line saving less than this fraction of the step, or than PAY_FLOOR seconds, is within what the step model
#: resolves on a large step (it prices no kernel launch and no overlap; 100 us is ten collective latency steps, a few
#: launches): the labels' mask split by dp behind the loss, a 64 KiB gather, saves 17-65 us of a 136-600 ms step. A
#: small model's step is its own scale (an encoder's 25 us of 1 ms pays)
PAY_WORTH = 1e-3
PAY_FLOOR = 100e-6
#: two step estimates within this fraction of the larger are the same step (rounding in the schedule's sums)
TIE = 1e-9

__all__ = ["PAY_WORTH", "PAY_FLOOR", "TIE", "MEMORY_WORTH", "line_worth", "pays", "faster", "slower", "same_step"]


def line_worth(step_s: float, lines: int = 1) -> float:
    """What ``lines`` shard() lines must save of a ``step_s`` step to be worth writing."""
    return min(PAY_WORTH * step_s, PAY_FLOOR) * lines


def pays(dt: float, step_s: float, lines: int = 1, saved: float = 0.0) -> bool:
    """Do ``lines`` shard() lines pay, the step being ``dt`` seconds slower without them (of ``step_s`` with them)
    and ``saved`` bytes of state per device more without them?"""
    return dt > line_worth(step_s, lines) or saved >= MEMORY_WORTH


def faster(a: float, b: float) -> bool:
    """Step ``a`` faster than step ``b`` beyond :data:`TIE`."""
    return a < b * (1 - TIE)


def slower(a: float, b: float) -> bool:
    """Step ``a`` slower than step ``b`` beyond :data:`TIE`."""
    return a > b * (1 + TIE)


def same_step(a: float, b: float) -> bool:
    """Steps ``a`` and ``b`` the same within :data:`TIE` of the larger."""
    return abs(a - b) <= TIE * max(a, b)
