"""Every cache strategist keeps is made here: each bounded, and all forgotten together by :func:`clear_caches`
(``bench/`` cold timings are cold). Three kinds:

- :func:`table`: a dict the search's hot loops read directly (``t.get(key)``), emptied when it reaches its size;
  its values depend on the key alone;
- :class:`ByIdentity`: values computed from objects (a graph, a plan, a hardware profile), keyed by the objects'
  identity and a plain key; the objects are held while cached, so an id is never taken for another object's; the
  most recently used ``size`` kept;
- :func:`lru`: functools' ``lru_cache`` of a pure function, registered here.

A cache only saves time: clearing one at any moment changes no result.

    >>> m = ByIdentity("example", 2)
    >>> m.get((len,), "x", lambda: 3), m.get((len,), "x", lambda: 4)
    (3, 3)
"""
from __future__ import annotations

import functools
from collections import OrderedDict
from typing import Any, Callable

#: every cache made here, by name (the registry itself: not a cache)
REGISTRY: dict[str, Any] = {}


def _register(name: str, cache) -> None:
    if name in REGISTRY:
        raise ValueError(f"a cache named {name!r} exists already")
    REGISTRY[name] = cache


class Table(dict):
    """A dict emptied when a new key would take it past ``size`` entries."""
    __slots__ = ("name", "size")

    def __init__(self, name: str, size: int):
        super().__init__()
        self.name, self.size = name, size

    def __setitem__(self, key, value) -> None:
        if len(self) >= self.size and key not in self:
            self.clear()
        dict.__setitem__(self, key, value)

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]


def table(name: str, size: int) -> Table:
    t = Table(name, size)
    _register(name, t)
    return t


class ByIdentity:
    """Values computed from objects, keyed by their identity and a plain key, the last ``size`` used kept."""
    __slots__ = ("name", "size", "_d")

    def __init__(self, name: str, size: int):
        self.name, self.size = name, size
        self._d: OrderedDict = OrderedDict()
        _register(name, self)

    def get(self, objs: tuple, key, compute: Callable[[], Any]):
        """``compute()``, or its value cached for the same objects (``is``) and an equal ``key``."""
        k = (tuple(map(id, objs)), key)
        hit = self._d.get(k)
        if hit is not None and all(a is b for a, b in zip(hit[0], objs)):
            self._d.move_to_end(k)
            return hit[1]
        value = compute()
        self._d[k] = (objs, value)
        if len(self._d) > self.size:
            self._d.popitem(last=False)
        return value

    def clear(self) -> None:
        self._d.clear()

    def __len__(self) -> int:
        return len(self._d)


def lru(name: str, size: int):
    """``functools.lru_cache(maxsize=size)``, registered: for a pure function of hashable arguments."""
    def wrap(fn):
        cached = functools.lru_cache(maxsize=size)(fn)
        _register(name, cached)
        return cached
    return wrap


def clear_caches() -> None:
    """Forget every cache (rules, candidates, shardings, redistribution plans, choices, prices, the step and memory
    models' memos, the front end's tables)."""
    for cache in REGISTRY.values():
        (cache.cache_clear if hasattr(cache, "cache_clear") else cache.clear)()


def sizes() -> dict[str, int]:
    """Entries held per cache (``bench/`` prints them)."""
    return {name: (c.cache_info().currsize if hasattr(c, "cache_info") else len(c)) for name, c in REGISTRY.items()}
