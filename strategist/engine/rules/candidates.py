"""An operator's candidate strategies as MindSpore 2.9 generates them (``GenerateStrategies``), its
strategies-with-cost list, and MindSpore's order of strategies (``Strategy::Compare``)."""
from __future__ import annotations

import math

from ...vocab.graph import Op
from .factor import FactorRule
from .gather import gather_axis_refused
from .registry import rule_for

#: operators whose GenerateOpStrategies enumerates two independent copies of input 0's shape and keeps each strategy
#: once per copy, so that its strategies-with-cost list holds duplicates (``BiasAddInfo::GenerateOpStrategies``)
TWO_COPIES = frozenset({"BiasAdd"})


def candidates(op: Op, device_num: int, rule: FactorRule | None = None,
               fully_use_devices: bool = False) -> list[tuple[tuple[int, ...], ...]]:
    """Candidate strategies in MindSpore 2.9's enumeration order (``GenerateStrategies``).

    Each splittable factor takes powers of two (1, 2, 4, ...) dividing its size, and the
    factors are enumerated lexicographically ascending (the first factor outermost), so the
    all-ones strategy comes first. With MindSpore's default ``fully_use_devices=False`` every
    product dividing the device count is a candidate (the rest of the devices repeat the
    computation); with ``fully_use_devices=True`` only products equal to it, and the all-ones
    strategy (``PrepareStrategyBase`` accepts ``product == 1`` either way: measured, an Add of two
    [64, 32] on 8 devices lists [[1, 1], [1, 1]] first and takes it backward from a MatMul
    Layout-configured (2, 2) with sp repeated, MindSpore's UT sharding_strategy_save_and_load6). For
    ``device_num = 2^p * q`` (q odd), the power-of-two part is enumerated, one factor at a time
    is multiplied by ``q``, and the all-ones strategy is added.
    """
    rule = rule or rule_for(op)
    if rule.batch_parallel:     # BatchParallelInfo: one strategy, input 0's dim 0 over all devices
        first_in = rule.input_shapes[0] if rule.input_shapes else ()
        first_out = rule.output_shapes[0] if rule.output_shapes else ()
        if rule.batch_info:
            stand_alone = not first_in or first_in[0] % device_num
        else:
            stand_alone = not first_in or not first_out or first_in[0] % device_num or first_out[0] % device_num
        return [tuple(tuple(1 if stand_alone or not f else device_num for f in t) for t in rule.inputs)]
    free = [f for f in (rule.enum or rule.factors)
            if f not in rule.unsplittable and any(f in t for t in rule.strategy_rows)]
    csizes = dict(rule.cand_sizes)
    sizes = [csizes[f] if f in csizes else rule.factor_size(f) for f in free]
    tied = [f for f in rule.tied if f in free]
    if len(tied) > 1:       # one enumerated split for the group (gcd of their sizes), then each member takes it
        lead = tied[0]
        sizes[free.index(lead)] = math.gcd(*(sizes[free.index(f)] for f in tied))
        keep = [i for i, f in enumerate(free) if f not in tied[1:]]
        free, sizes = [free[i] for i in keep], [sizes[i] for i in keep]
    out = [dict(zip(free, c)) for c in _enumerate_splits(sizes, device_num, fully_use_devices,
                                                                        keep_unsplit=True)] or [{}]
    if len(tied) > 1:       # each member is an axis of the device matrix: their product must fit the devices
        out = [dict(c, **{f: c.get(tied[0], 1) for f in tied[1:]}) for c in out]
        out = [c for c in out if device_num % math.prod(c.values()) == 0] or [{}]
    strategies = []
    for c in out:
        strategies.append(tuple(tuple(c.get(f, 1) if f else 1 for f in t) for t in rule.strategy_rows))
    seen, uniq = set(), []
    for s in strategies:
        if s not in seen:
            seen.add(s)
            uniq.append(s)
    if rule.must_split or rule.split_uses_all or rule.gather_axis:
        kept = [s for s in uniq if _generated_ok(rule, s, device_num)]
        uniq = kept or uniq
    return uniq


def _generated_ok(rule: FactorRule, strategy, device_num: int) -> bool:
    """``rule.must_split`` / ``rule.split_uses_all`` for one generated strategy."""
    splits: dict[str, int] = {}
    for row, t in zip(strategy, rule.strategy_rows):
        for x, f in zip(row, t):
            if f:
                splits[f] = x
    if any(splits.get(f, 1) == 1 for f in rule.must_split):
        return False
    if rule.gather_axis and gather_axis_refused(rule.gather_axis, splits, device_num):
        return False
    used = math.prod(splits.values())
    return used == device_num or not any(splits.get(f, 1) > 1 for f in rule.split_uses_all)


def _enumerate_splits(sizes: list[int], device_num: int, fully_use_devices: bool,
                      keep_unsplit: bool = False) -> list[list[int]]:
    """MindSpore's enumeration of splits over ``sizes``, in its order and with its duplicates: each size takes
    powers of two (1, 2, 4, ...) dividing it and the remaining power-of-two budget, the first size outermost;
    with ``fully_use_devices`` only splits using the whole budget (and, with ``keep_unsplit``, the all-ones
    one too, as ``GenerateStrategiesForIndependentInputs`` keeps it). For ``device_num = 2^p * q`` (q odd) the
    power-of-two part is enumerated, one size at a time takes the factor ``q``, and all-ones is added."""
    odd, pow2 = device_num, 1
    while odd % 2 == 0:
        odd //= 2
        pow2 *= 2
    out: list[list[int]] = []

    def rec(i, budget, cur):
        if i == len(sizes):
            if not fully_use_devices or budget == 1 or (keep_unsplit and budget == pow2):
                out.append(cur)
            return
        x = 1
        while x <= budget:
            if budget % x == 0 and sizes[i] % x == 0:
                rec(i + 1, budget // x, cur + [x])
            x *= 2

    rec(0, pow2, [])
    rec = None              # the recursive closure's hold on itself: freed on return, not by gc
    if odd > 1:
        out = [c[:k] + [c[k] * odd] + c[k + 1:] for c in out for k, n in enumerate(sizes) if n % (c[k] * odd) == 0]
        out.append([1] * len(sizes))
    return out


def _independent_inputs(shapes, device_num: int, fully_use_devices: bool) -> list[tuple[tuple[int, ...], ...]]:
    """MindSpore's ``GenerateStrategiesForIndependentInputs`` (operator_info.cc) over every dim of every
    shape in ``shapes`` (all splittable), duplicates and order as MindSpore lists them."""
    dims = [n for s in shapes for n in s]

    def unflat(flat):
        out, i = [], 0
        for s in shapes:
            out.append(tuple(flat[i:i + len(s)]))
            i += len(s)
        return tuple(out)

    return [unflat(c) for c in _enumerate_splits(dims, device_num, fully_use_devices, keep_unsplit=True)]


def swc_strategies(op: Op, device_num: int, rule: FactorRule | None = None,
                   fully_use_devices: bool = False) -> list[tuple[tuple[int, ...], ...]]:
    """The operator's strategies-with-cost list as MindSpore builds it, duplicates included: the
    distinct :func:`candidates`, except for an operator whose ``GenerateOpStrategies`` lists a strategy
    more than once. BiasAdd enumerates two independent copies of x's shape and keeps the first
    (``BiasAddInfo::GenerateOpStrategies``): [[1,1,1],[1]] 31 times over 16 devices (random net 10).
    The copies matter only where MindSpore sorts the list with an unstable std::sort: a Reshape's
    strategies-with-cost, built from its neighbours' lists."""
    rule = rule or rule_for(op)
    cands = candidates(op, device_num, rule, fully_use_devices)
    if op.type not in TWO_COPIES or rule.batch_parallel or len(rule.strategy_rows) != 2:
        return cands
    x = rule.input_shapes[0]
    c = rule.strategy_rows[0].index(rule.strategy_rows[1][0]) if rule.strategy_rows[1] else None
    if c is None:
        return cands
    out = [(s, (s[c],)) for s, _ in _independent_inputs([x, x], device_num, fully_use_devices)]
    return out if set(out) == set(cands) else cands


def partition_num(strategy) -> int:
    """MindSpore's ``Strategy::PartitionNum``: product of every split of every input."""
    return math.prod(x for s in strategy for x in s)


def strategy_better(a, b) -> bool:
    """MindSpore's ``Strategy::Compare(a, b)``: larger PartitionNum wins, then the lexicographically
    larger dims."""
    pa, pb = partition_num(a), partition_num(b)
    if pa != pb:
        return pa > pb
    return [list(x) for x in a] > [list(x) for x in b]
