"""The search's caches, kept across propagations (the advisor runs hundreds over one graph): operator
signatures, rules, candidates and shardings per signature, redistribution plans per layout pair, and the memo
of choices (``CHOICES``: neighbour choices, Reshape mappings and seed shardings, each keyed by what decides it).
:func:`strategist.memo.clear_caches` forgets them all (for cold timings), with every other cache."""
from __future__ import annotations

import contextlib
import gc
import itertools

from ... import memo
from ...memo import lru, table
from ...vocab.graph import Op
from ...vocab.layout import Layout
from ..rules.candidates import candidates
from ..rules.factor import FactorRule, Sharding
from ..rules.registry import rule_for
from ..rules.sharding import shard
from ..redistribution import Redistribution, plan


class _Sig(tuple):
    """An operator signature: a tuple that hashes once (it is part of nearly every memo key)."""

    def __new__(cls, items):
        self = super().__new__(cls, items)
        self._h = tuple.__hash__(self)
        return self

    def __hash__(self) -> int:
        return self._h


def _op_key(op: Op):
    return _Sig((op.type, tuple((x.kind == "const", str(x.spec) if x.spec else None,
                                 repr(x.value) if x.kind == "const" else None) for x in op.inputs),
                 tuple(map(str, op.outputs)), repr(sorted(op.attrs.items()))))


_RULES = table("search: rule per operator signature", 1 << 16)
_SHARDS = table("search: sharding per signature and strategy", 1 << 18)
_CANDS = table("search: candidates per signature", 1 << 16)
SWC_STRATS = table("search: swc strategies per signature", 1 << 16)   # (signature, devices, fully_use) -> ...
CHOICES = table("search: choices", 1 << 21)     # memoised neighbour choices, reshape mappings and seed shardings
FINGERPRINTS = itertools.count()   # tells Reshape cost caches apart in the choices' memo keys (a counter: no cache)
_KEYS = table("search: signature per operator", 1 << 18)   # id(op) -> (op, signature): the op kept, its id not reused
EDGE_KEYS = table("search: edge keys", 1 << 18)   # (id(src), id(dst), dtype) -> (src, dst, (comm, comp)), likewise


def cached_rule(op: Op, opkey=None) -> FactorRule:
    key = opkey or _op_key(op)
    r = _RULES.get(key)
    if r is None:
        r = _RULES[key] = rule_for(op)
    return r


def cached_candidates(op: Op, n: int, opkey=None, fully_use_devices: bool = False):
    key = (opkey or _op_key(op), n, fully_use_devices)
    c = _CANDS.get(key)
    if c is None:
        c = _CANDS[key] = candidates(op, n, cached_rule(op), fully_use_devices)
    return c


def cached_shard(op: Op, strategy, n: int, opkey=None) -> Sharding:
    key = (opkey or _op_key(op), strategy, n)
    s = _SHARDS.get(key)
    if s is None:
        s = _SHARDS[key] = shard(op, strategy, n, rule=cached_rule(op))
    return s


@lru("search: redistribution plan per layout pair", 1 << 16)
def cached_plan(src: Layout, dst: Layout) -> Redistribution:
    return plan(src, dst)


def signature(op: Op) -> tuple:
    """``op``'s signature (its type, input and output tensors and attributes), computed once per operator object:
    the key of every per-operator cache and part of nearly every memo key."""
    hit = _KEYS.get(id(op))
    if hit is None or hit[0] is not op:
        hit = _KEYS[id(op)] = (op, _op_key(op))
    return hit[1]


def clear_caches() -> None:
    """Forget every cache (:func:`strategist.memo.clear_caches`)."""
    memo.clear_caches()


@contextlib.contextmanager
def no_cyclic_gc():
    """Pause Python's cyclic garbage collector (reference counting still frees everything acyclic).

    Propagation allocates hundreds of thousands of small tuples, layouts and choices, nearly all
    acyclic; each allocation burst triggers a collection that walks every tracked object, MindSpore's
    and the graph's included: a third of ``advise``'s time on the 80-layer LLaMA shape went there (more
    after a MindSpore compile in the same process), for about two thousand cyclic objects collected."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
