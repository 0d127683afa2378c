"""The operator registry: every family registers into one registry, each primitive once."""
import pytest

from strategist.engine.rules import elementwise
from strategist.engine.rules.common import unknown_rule
from strategist.engine.rules.registry import FAMILIES, RULES, DuplicateRuleError, Registry, default_registry


def test_a_primitive_registered_twice_raises():
    reg = Registry()
    reg.register(unknown_rule, ("Foo", "Bar"), family="one")
    with pytest.raises(DuplicateRuleError, match="Foo is registered twice: by one and by two"):
        reg.register(unknown_rule, ("Foo",), family="two")


def test_every_family_registers_into_one_registry():
    reg = default_registry()
    assert dict(reg) == dict(RULES)
    assert len(reg) == sum(len(names) for mod in FAMILIES for _, names in mod.REGISTRATIONS)
    assert reg.family("MatMul") == "matmul" and reg.family("Add") == "elementwise"
    # the rule in force for the primitives that once had two
    assert reg.family("StridedSlice") == "shape" and reg.family("OneHot") == "scatter_index"
    assert reg.family("Conv2D") == "conv_pool"


def test_the_elementwise_table_is_sorted_and_names_each_primitive_once():
    names = [name for name, _ in elementwise.ELEMENTWISE]
    assert names == sorted(names) and len(names) == len(set(names))
    assert elementwise.ARITHMETIC_BASE <= {n for n, b in elementwise.ELEMENTWISE if b is elementwise.elementwise}
