"""The operator registry: primitive name -> rule builder, filled from the family modules, each name once.

Each family module lists what it registers in ``REGISTRATIONS``, ``(builder, primitive names)`` pairs;
:func:`default_registry` adds them family by family, and a name registered twice raises
:class:`DuplicateRuleError` (no family overrides another's rule). An operator no family registers gets
:func:`~strategist.engine.rules.common.unknown_rule` from :func:`rule_for`: batch-parallel, as MindSpore runs an
operator it has no OperatorInfo for, with a warning.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping

from ...vocab.graph import Op
from . import (attention, conv_pool, elementwise, gather, loss, matmul, misc, reduce, reshape, scatter_index, shape,
               softmax_norm)
from .common import Builder, unknown_rule
from .factor import FactorRule

log = logging.getLogger("strategist")

#: the family modules, in registration order
FAMILIES = (elementwise, matmul, reduce, softmax_norm, gather, attention, shape, reshape, conv_pool, loss,
            scatter_index, misc)


class DuplicateRuleError(ValueError):
    """A primitive registered twice."""


class Registry(Mapping):
    """Primitive name -> rule builder; :meth:`register` refuses a name already registered.

    >>> reg = Registry()
    >>> reg.register(unknown_rule, ("Foo",), family="a")
    >>> reg.register(unknown_rule, ("Foo",), family="b")
    Traceback (most recent call last):
    ...
    strategist.engine.rules.registry.DuplicateRuleError: Foo is registered twice: by a and by b
    """

    def __init__(self) -> None:
        self._builders: dict[str, Builder] = {}
        self._families: dict[str, str] = {}

    def register(self, builder: Builder, names: Iterable[str], family: str = "") -> None:
        for name in names:
            if name in self._builders:
                raise DuplicateRuleError(f"{name} is registered twice: by {self._families[name]} and by {family}")
            self._builders[name] = builder
            self._families[name] = family

    def family(self, name: str) -> str:
        """The family module that registered ``name``."""
        return self._families[name]

    def __getitem__(self, name: str) -> Builder:
        return self._builders[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._builders)

    def __len__(self) -> int:
        return len(self._builders)


def default_registry() -> Registry:
    """A registry of every family's rules."""
    reg = Registry()
    for mod in FAMILIES:
        for builder, names in mod.REGISTRATIONS:
            reg.register(builder, names, family=mod.__name__.rsplit(".", 1)[-1])
    return reg


#: the registry :func:`rule_for` reads
RULES: Registry = default_registry()


#: operators MindSpore 2.9's parallel pass creates no OperatorInfo for and links no cost-graph edge through: no
#: creation index, no edge in or out, so the search stops at them (measured, mindone LLaMA's ``Contiguous`` between
#: the attention output's Reshape and o_proj's: verify's GLOG_v=1 log "Successfully created 0 edges for:
#: ReshapeInfo7171", the Reshape before it "FindNextLayout prim Contiguous" and no edge out, the two Reshapes
#: ReshapeInfo7070 and ReshapeInfo7171 numbered one after the other)
NO_OPERATOR_INFO = frozenset({"Contiguous"})


def rule_for(op: Op) -> FactorRule:
    """The operator's factor rule (the conservative :func:`unknown_rule` if none is registered)."""
    builder = RULES.get(op.type)
    if builder is None and op.type in NO_OPERATOR_INFO:
        log.warning("no sharding rule for %s (%s): MindSpore creates no OperatorInfo for it and links no cost-graph "
                    "edge through it, so nothing propagates across it", op.name, op.type)
        return unknown_rule(op)
    if builder is None:
        log.warning("no sharding rule for %s (%s): batch-parallel, as MindSpore runs an operator it has no "
                    "OperatorInfo for", op.name, op.type)
        return unknown_rule(op)
    return builder(op)
