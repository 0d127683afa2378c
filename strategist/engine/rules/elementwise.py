"""Element-wise operators: one sorted table (:data:`ELEMENTWISE`) of every element-wise primitive and its builder.

The builders differ only in which inputs are strategy inputs, which is MindSpore's quirk per OperatorInfo:

* :func:`elementwise` (ArithmeticBase: every tensor input, a tensor constant too, as a rank-0 input when 0-d; a Python
  scalar converted to a 0-d tensor is one);
* :func:`unary` (the first non-constant tensor input only);
* :func:`tensor_elementwise` (every tensor input; scalar-typed extra inputs such as ``alpha`` are not);
* :func:`scalar_arith` / :func:`identity_rule` (the first tensor input, a constant tensor included);
* a few with a rule of their own (BiasAdd, PReLU, MaskedFill, Dropout, Tril/Triu).
"""
from __future__ import annotations

import dataclasses

from ...vocab.graph import Op
from .common import (Builder, letters, make_rule, nonconst_tensor_slots, out_shapes, shape_of, tensor_slots,
                     unknown_rule)
from .factor import FactorRule


def elementwise(op: Op, slots: list[int] | None = None) -> FactorRule:
    """Broadcasting element-wise operator: output dims are factors; inputs align right, size-1 dims
    (broadcast) are ``None``; scalar constants are rank-0 inputs. Every output has the output's factors."""
    if slots is None:
        # tensors (a tensor constant too, as a rank-0 input); a Python scalar argument (Muls' value,
        # AddExt's alpha) is not a strategy input in MindSpore
        slots = [i for i, x in enumerate(op.inputs) if x.kind != "const" or x.spec is not None]
    out = out_shapes(op)[0] if op.outputs else ()
    factors = letters(len(out))
    ins = []
    for s in slots:
        shp = shape_of(op, s)
        off = len(out) - len(shp)
        ins.append([None if (n == 1 and out[off + i] != 1) else factors[off + i] for i, n in enumerate(shp)])
    outs = [factors if len(o) == len(out) else [None] * len(o) for o in out_shapes(op)]
    r = make_rule(op, factors, ins, outs, slots)
    fixed = _broadcast_unsearched(r)
    return dataclasses.replace(r, cand_sizes=tuple((f, 1) for f in fixed)) if fixed else r


def _broadcast_unsearched(rule: FactorRule) -> list[str]:
    """Factors MindSpore's candidate search never splits for two inputs of different ranks.

    ``GenerateStrategiesForBroadcast{Right,Left}`` (operator_info.cc, behind
    ``ArithmeticBase::GenerateOpStrategies``' ``GenerateStrategiesWithBroadcast``) enumerates the
    splits of the LONGER input's shape, copies its trailing dims to the shorter input and resets to 1
    only the shorter input's LEADING run of size-1 dims. So (a) a dim that is 1 in the longer input
    is never split, and (b) a size-1 dim of the shorter input after its first non-1 dim keeps the
    longer input's split: ``SetCostUnderStrategy`` then fails ("shape value 1 at dim index 1 cannot be
    divisible by strategy value 2") and the candidate is dropped. Both leave that factor at 1 in
    every generated candidate (random net 259: Minimum([8,8,2], w[8,1]) has no ((1,1,2),(1,1))).
    Equal ranks (``...BroadcastBoth``: every size-1 dim reset) and a rank-0 input search freely.
    Only candidate generation is limited; a configured strategy may still split these factors."""
    if len(rule.inputs) != 2:
        return []
    sa, sb = rule.input_shapes
    if len(sa) == len(sb) or not sa or not sb:
        return []
    sbig, ssmall = (sa, sb) if len(sa) > len(sb) else (sb, sa)
    if len(sbig) != len(rule.factors):
        return []
    off = len(sbig) - len(ssmall)
    lead = next((i for i, n in enumerate(ssmall) if n != 1), len(ssmall))   # leading run of 1s
    fixed = []
    for j, (n, f) in enumerate(zip(sbig, rule.factors)):
        i = j - off
        if n == 1 or (i >= lead and ssmall[i] == 1):
            fixed.append(f)
    return fixed


def unary(op: Op) -> FactorRule:
    return elementwise(op, nonconst_tensor_slots(op)[:1])


def tensor_elementwise(op: Op) -> FactorRule:
    """Broadcasting element-wise over the tensor inputs only (``AddExt(x, y, alpha)``,
    ``MaskedFill(x, mask, value)``, ``Lerp(start, end, weight)``, the ``Inplace*`` ops ...)."""
    return elementwise(op, tensor_slots(op))


def scalar_arith(op: Op) -> FactorRule:
    """ArithmeticScalarBase (``Muls``, ``FmodScalar``, ``RemainderTensorScalar``, ...): one strategy
    input, the tensor; the scalar is not one (checked: ``Muls`` takes ``((2, 4),)``)."""
    return elementwise(op, tensor_slots(op)[:1])


def identity_rule(op: Op) -> FactorRule:
    """Identity-like (TensorMove, Identity, Depend-free copies, AShardIdentity): output = input. Its input may be a
    constant tensor (``mindspore.reshard(self.y, layout)`` on a Tensor attribute: MindSpore's AShardIdentity of it
    takes the layout, 2.9.0's UT ``ReshardTail``)."""
    return elementwise(op, tensor_slots(op)[:1])


def assign_rule(op: Op) -> FactorRule:
    """Assign/AssignAdd/AssignSub(param, value): same-shape element-wise (checked: AssignAdd)."""
    return tensor_elementwise(op)


def masked_fill_rule(op: Op) -> FactorRule:
    """MaskedFill(x, mask, value): MindSpore 2.9's MaskedFillInfo drops a 0-d tensor ``value`` from its inputs
    (``GetAttrs`` pops the third shape), so its strategies have two rows (measured: deepseek3's router
    MaskedFill, propagated, reports ``((1, 8, 1), (1, 8, 1))``); a configured third row ``()`` is accepted and
    kept (``FactorRule.dropped_rows``)."""
    return dataclasses.replace(elementwise(op, tensor_slots(op)[:2]), dropped_rows=1)


def bias_add_rule(op: Op) -> FactorRule:
    """BiasAdd(x, bias[, data_format]): bias follows x's channel dim (dim 1 for NCHW inputs of rank
    > 2, the last dim otherwise); data_format is not a strategy input (checked: ``((2, 4), (4,))``)."""
    x = shape_of(op, 0)
    f = letters(len(x))
    fmt = op.attrs.get("data_format", op.attrs.get("format", "NCHW"))
    c = 1 if len(x) > 2 and str(fmt).upper().startswith("NC") else len(x) - 1
    return make_rule(op, f, [f, [f[c]]], [f], [0, 1])


def prelu_rule(op: Op) -> FactorRule:
    """PReLU(x[N, C, ...], w[C] or [1]): w follows the channel dim."""
    x, w = shape_of(op, 0), shape_of(op, 1)
    f = letters(len(x))
    c = f[1] if len(x) > 1 else f[0]
    return make_rule(op, f, [f, [c if w and w[0] != 1 else None]], [f], [0, 1])


def dropout_rule(op: Op) -> FactorRule:
    """Dropout / DropoutExt: the input's dims split freely; outputs of the input's shape follow it
    (the bit mask of DropoutExt/DropoutGenMask is not a layout-carrying output)."""
    rule = _dropout_first(op)
    slots = tensor_slots(op)
    if op.type == "DropoutExt" and len(slots) > 1:
        # DropoutExt(input, p, seed, offset): the seed and offset tensors are strategy rows too, unsplit
        # (MindSpore 2.9.0 reports ((1, 1), (), ()); its UT test_dropout_ext's net)
        f = rule.inputs[0]
        return make_rule(op, f, [f] + [[None] * len(shape_of(op, k)) for k in slots[1:]], rule.outputs, slots)
    return rule


def dropout_do_mask_rule(op: Op) -> FactorRule:
    """DropoutDoMask(x, mask, keep_prob): only x is a strategy input (the mask is regenerated)."""
    return _dropout_first(op)


def _dropout_first(op: Op) -> FactorRule:
    slots = tensor_slots(op)
    x = shape_of(op, slots[0])
    f = letters(len(x))
    outs = [f if tuple(o) == tuple(x) else [None] * len(o) for o in out_shapes(op)]
    return make_rule(op, f, [f], outs, [slots[0]])


def tril_rule(op: Op) -> FactorRule:
    """Tril/Triu(x, diagonal): one strategy input, every dim splittable, generated strategies included
    (MindSpore's TrilInfo/TriuInfo rewrite ``diagonal`` per rank from its row/column slice, GetDiag); only
    ranks 2 to 6 have a strategy (TrilInfo::CheckStrategy)."""
    if not 2 <= len(shape_of(op, tensor_slots(op)[0])) <= 6:
        return unknown_rule(op)
    return elementwise(op, tensor_slots(op)[:1])


#: every element-wise primitive and its builder, sorted by name, each once
ELEMENTWISE: tuple[tuple[str, Builder], ...] = (
    ("ACos", unary), ("AShardIdentity", identity_rule), ("Abs", unary), ("Acosh", unary), ("Add", elementwise),
    ("AddExt", elementwise), ("AddN", elementwise), ("AddcmulExt", tensor_elementwise),
    ("AntiQuant", tensor_elementwise), ("ApproximateEqual", elementwise), ("Asin", unary), ("Asinh", unary),
    ("Assign", assign_rule), ("AssignAdd", assign_rule), ("AssignSub", assign_rule), ("Atan", unary),
    ("Atan2", elementwise), ("Atanh", unary), ("BesselI0", unary), ("BesselI0e", unary), ("BesselI1", unary),
    ("BesselI1e", unary), ("BesselJ0", unary), ("BesselJ1", unary), ("Betainc", tensor_elementwise),
    ("BiasAdd", bias_add_rule), ("BitwiseAnd", elementwise), ("BitwiseOr", elementwise), ("BitwiseXor", elementwise),
    ("Cast", unary), ("Ceil", unary), ("ClampScalar", unary), ("Cos", unary), ("Cosh", unary),
    ("Dequant", tensor_elementwise), ("Div", elementwise), ("DivMod", elementwise), ("DivNoNan", elementwise),
    ("Dropout", dropout_rule), ("DropoutDoMask", dropout_do_mask_rule), ("DropoutExt", dropout_rule), ("Elu", unary),
    ("EluExt", unary), ("Equal", elementwise), ("Erf", unary), ("Erfc", unary), ("Erfinv", unary), ("Exp", unary),
    ("Expm1", unary), ("FakeQuantPerLayer", tensor_elementwise), ("FastGeLU", unary), ("Floor", unary),
    ("FloorDiv", elementwise), ("FloorMod", elementwise), ("FmodScalar", scalar_arith),
    ("FmodTensor", tensor_elementwise), ("Gcd", elementwise), ("GeLU", unary), ("Greater", elementwise),
    ("GreaterEqual", elementwise), ("HShrink", unary), ("HSigmoid", unary), ("HSwish", unary),
    ("Hypot", elementwise), ("Identity", unary), ("Igamma", elementwise), ("Igammac", elementwise),
    ("InplaceAdd", tensor_elementwise), ("InplaceAddExt", tensor_elementwise), ("InplaceAddsExt", scalar_arith),
    ("InplaceCopy", tensor_elementwise), ("InplaceDiv", tensor_elementwise), ("InplaceDivs", scalar_arith),
    ("InplaceFloorDivide", tensor_elementwise), ("InplaceFloorDivides", scalar_arith),
    ("InplaceMul", tensor_elementwise), ("InplaceMuls", scalar_arith), ("InplaceSub", tensor_elementwise),
    ("InplaceSubExt", tensor_elementwise), ("InplaceSubScalar", scalar_arith), ("InplaceUpdate", tensor_elementwise),
    ("Inv", unary), ("Invert", unary), ("IsClose", tensor_elementwise), ("IsFinite", unary), ("LeakyReLU", unary),
    ("LeakyReLUExt", unary), ("LeftShift", elementwise), ("Lerp", tensor_elementwise), ("Less", elementwise),
    ("LessEqual", elementwise), ("Lgamma", unary), ("Log", unary), ("Log1p", unary), ("LogicalAnd", elementwise),
    ("LogicalNot", unary), ("LogicalOr", elementwise), ("MaskedFill", masked_fill_rule), ("Maximum", elementwise),
    ("MinMaxUpdatePerLayer", tensor_elementwise), ("Minimum", elementwise), ("Mish", unary), ("Mod", elementwise),
    ("Mul", elementwise), ("MulNoNan", elementwise), ("Muls", elementwise), ("NanToNum", unary), ("Neg", unary),
    ("NextAfter", elementwise), ("NotEqual", elementwise), ("Ones", unary), ("OnesLike", unary),
    ("PReLU", prelu_rule), ("Polar", elementwise), ("PopulationCount", unary), ("Pow", elementwise),
    ("QuantV2", tensor_elementwise), ("ReLU", unary), ("ReLU6", unary), ("RealDiv", elementwise),
    ("Reciprocal", unary), ("RemainderScalarTensor", scalar_arith), ("RemainderTensorScalar", scalar_arith),
    ("RemainderTensorTensor", tensor_elementwise), ("RightShift", elementwise), ("Rint", unary), ("Round", unary),
    ("Rsqrt", unary), ("SeLU", unary), ("Select", elementwise), ("SiLU", unary), ("Sigmoid", unary),
    ("SigmoidCrossEntropyWithLogits", elementwise), ("Sign", unary), ("Sin", unary), ("Sinh", unary),
    ("SoftShrink", unary), ("Softplus", unary), ("SoftplusExt", unary), ("Softsign", unary), ("Sqrt", unary),
    ("Square", unary), ("SquareSumAll", unary), ("SquaredDifference", elementwise), ("Sub", elementwise),
    ("SubExt", elementwise), ("Tan", unary), ("Tanh", unary), ("TensorMove", identity_rule), ("TmpIdentity", unary),
    ("Tril", tril_rule), ("Triu", tril_rule), ("Trunc", unary), ("TruncateDiv", elementwise),
    ("TruncateMod", elementwise), ("Where", elementwise), ("Xdivy", elementwise), ("Xlogy", elementwise),
    ("Zeros", unary), ("ZerosLike", unary), ("Zeta", elementwise),
)

#: MindSpore's ArithmeticBase primitives whose operands are tensor-typed: a Python scalar operand is converted to a
#: 0-d tensor and IS a strategy input (checked: ``Add(x, 2.0)`` takes ``((2, 4), ())``, refuses ``((2, 4),)``)
ARITHMETIC_BASE = frozenset("""
Add AddN ApproximateEqual Atan2 BitwiseAnd BitwiseOr BitwiseXor Div DivNoNan Equal FloorDiv FloorMod Gcd
Greater GreaterEqual Hypot Igamma Igammac LeftShift Less LessEqual LogicalAnd LogicalOr Maximum Minimum Mod Mul
MulNoNan NextAfter NotEqual Polar Pow RealDiv RightShift Select SigmoidCrossEntropyWithLogits SquaredDifference
Sub TruncateDiv TruncateMod Xdivy Xlogy Zeta""".split())

#: element-wise primitives with scalar-typed extra inputs (``alpha``, a float ``weight``/``value``, tolerances): only
#: the tensor inputs are strategy inputs (checked: ``AddExt`` takes ``((2, 4), (2, 4))``)
SCALAR_EXTRA_INPUTS = frozenset("""
AddExt AddcmulExt FmodTensor InplaceAdd InplaceAddExt InplaceCopy InplaceDiv InplaceFloorDivide InplaceMul
InplaceSub InplaceSubExt InplaceUpdate IsClose Lerp MaskedFill RemainderTensorTensor SubExt""".split())

#: (builder, primitive names) pairs this family registers (:mod:`strategist.engine.rules.registry`)
REGISTRATIONS = tuple((builder, (name,)) for name, builder in ELEMENTWISE)
