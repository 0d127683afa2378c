"""Operator registry: strategy validity, implied layouts, candidates and the operator's own
communication, against the spec's facts (§2, §4, §5) and hand derivations."""
import pytest

from strategist.errors import StrategyError
from strategist.vocab.graph import Input, Op, ShardLayout, TensorSpec
from strategist.vocab.layout import Layout
from strategist.engine.rules.candidates import candidates, partition_num, strategy_better
from strategist.engine.rules.registry import rule_for
from strategist.engine.rules.reshape import reshape_layout
from strategist.engine.rules.sharding import output_partial, shard, shard_layout
from strategist.engine.redistribution import plan


def T(*shape, dtype="float32"):
    return TensorSpec(tuple(shape), dtype)


def op(type_, ins, outs, name="op", **attrs):
    inputs = tuple(x if isinstance(x, Input) else
                   Input("const", value=x) if not isinstance(x, TensorSpec) else Input("op", "p", spec=x)
                   for x in ins)
    return Op(name, type_, "", "", name, "", inputs, tuple(outs), attrs)


def matmul(a, b, out, ta=False, tb=False, name="matmul"):
    return op("MatMul", [a, Input("param", "w", spec=b), ta, tb], [out], name)


def test_spec_fact_partition_num_and_compare():
    assert partition_num(((2, 1), (1, 4))) == 8
    assert strategy_better(((8, 1), (1, 1)), ((2, 1), (1, 4)))       # equal PN, lexicographically larger
    assert not strategy_better(((2, 1), (1, 4)), ((8, 1), (1, 1)))


def test_docs_ffn_example_layouts_are_consistent():
    """sharding_propagation.md: MatMul1 ((2,1),(1,4)) -> Add1 ((2,4),(4,)) -> ReLU -> MatMul2
    ((2,4),(4,1)); slices (128,784),(784,16) -> (128,16); MatMul2 reduces its split k by AllReduce."""
    mm1 = matmul(T(256, 784), T(784, 64), T(256, 64))
    s1 = shard(mm1, ((2, 1), (1, 4)), 8)
    assert [l.slice_shape for l in s1.inputs] == [(128, 784), (784, 16)]
    assert s1.outputs[0].slice_shape == (128, 16) and s1.dev_matrix == (2, 1, 4)
    add = op("Add", [T(256, 64), Input("param", "b", spec=T(64))], [T(256, 64)], "add")
    s_add = shard(add, ((2, 4), (4,)), 8)
    assert s_add.inputs[1].slice_shape == (16,)
    assert plan(s1.outputs[0], s_add.inputs[0]).is_identity
    mm2 = matmul(T(256, 64), T(64, 10), T(256, 10), name="mm2")
    s2 = shard(mm2, ((2, 4), (4, 1)), 8)
    assert plan(s_add.outputs[0], s2.inputs[0]).is_identity
    assert s2.inputs[1].slice_shape == (16, 10)
    assert [o.kind for o in plan(s2.outputs[0].__class__(s2.outputs[0].shape, s2.dev_matrix,
                                                        s2.outputs[0].dims, output_partial(s2)),
                                 s2.outputs[0]).ops] == ["AllReduce"]


def test_repeated_calculation_appends_the_repeat_on_the_right():
    """dev_num 8, strategy using 4 devices: repeat 2 appended; 3 devices on 8: invalid (spec §1 facts 2-3)."""
    mm = matmul(T(256, 784), T(784, 64), T(256, 64))
    s = shard(mm, ((2, 1), (1, 2)), 8)
    assert s.dev_matrix == (2, 1, 2, 2) and s.repeat == 2
    assert s.outputs[0].dims == ((0,), (2,))
    add = op("Add", [T(6, 64), T(6, 64)], [T(6, 64)])
    with pytest.raises(StrategyError, match=r"requires 3 devices, but the device number 8 is not divisible by 3"):
        shard(add, ((3, 1), (3, 1)), 8)


def test_invalid_strategies_name_the_op_and_dimension():
    mm = matmul(T(256, 784), T(784, 64), T(256, 64))
    with pytest.raises(StrategyError, match=r"matmul \(MatMul\) input 0: strategy \(2, 1, 1\) has rank 3"):
        shard(mm, ((2, 1, 1), (1, 4)), 8)
    with pytest.raises(StrategyError, match=r"matmul \(MatMul\) input 1 dimension 1: split 3 does not divide size 64"):
        shard(mm, ((1, 1), (1, 3)), 3)
    with pytest.raises(StrategyError, match=r"input 1 dimension 0: split 2 conflicts with split 4 .* factor 'k'"):
        shard(mm, ((1, 4), (2, 1)), 8)
    with pytest.raises(StrategyError, match=r"has 1 inputs, the operator takes 2"):
        shard(mm, ((2, 1),), 8)


def test_matmul_transpose_and_own_communication():
    # ((dp*cp, 1), (tp, 1)) with transpose_b: W [out, in] split on out -> column parallel
    mm = matmul(T(4096, 1024), T(4096, 1024), T(4096, 4096), tb=True)
    s = shard(mm, ((2, 1), (4, 1)), 8)
    assert s.outputs[0].strategy == (2, 4) and s.partial_axes == ()
    # the activation's gradient is partial over tp (dX = dY W^T sums over the split j)
    # ... and the weight's gradient is partial over dp: the data-parallel gradient AllReduce
    assert s.grad_partial[0] == (2,) and s.grad_partial[1] == (0,)
    # row parallel: k split -> partial output -> forward AllReduce; ReduceScatter under out_strategy
    mm2 = matmul(T(4096, 4096), T(4096, 1024), T(4096, 1024), name="fc2")
    s2 = shard(mm2, ((2, 4), (4, 1)), 8)
    assert output_partial(s2) == (1,)
    s3 = shard(mm2, ((2, 4), (4, 1)), 8, out_strategy=((8, 1),))
    assert s3.outputs[0].strategy == (8, 1) and output_partial(s3) == ()


def test_nd_tp_matmul_2d_and_3d_layouts():
    """enable_nd_tp (matmul_info.cc Check2DTPInputLayout / Check3DTPInputLayout, InferNDTPOutputLayout; MindSpore
    2.9.0's INFO log "the output tensor map is ..." for tests/models/ms_ut/ut6_bmm_high_dim.py). Worked by hand:

    2D, BatchMatMul x [128, 64, 32] ("b", None, ("x", "y")), w [128, 32, 64] ("b", "x", "y") over (1, 2, 4): x is
    gathered over y on K (K/2 left), the local [64, 16] @ [16, 16] is partial over x, a ReduceScatter over x puts it
    on N after y: ("b", None, ("y", "x")), MindSpore's map [2, -1, 0, 1]; slice [128, 64, 8]. Strategy rows
    (1, 1, 8), (1, 2, 4) (MindSpore's in_strategy). Per device 2*128*64*32*64 / 8 FLOPs forward (k by 2, j by 4).

    3D, MatMul x [64, 32] (("z", "x"), "y"), w [32, 64] (("y", "z"), "x") over (2, 2, 4) named ("x", "y", "z"): x is
    gathered over x on M, w over z on K, the product is partial over y, scattered onto M in x's place: ((z, y), x),
    MindSpore's map [0, 1, 2]; slice [8, 32]. Strategy (8, 2), (8, 2)."""
    from strategist.engine.rules.flops import training_flops
    from strategist.engine.rules.sharding import nd_tp_sharding, output_scattered, pre_reduce_layout
    x, w = T(128, 64, 32), Input("param", "w", spec=T(128, 32, 64))
    bmm = op("BatchMatMul", [x, w, False, False], [T(128, 64, 64)], "bmm", enable_nd_tp=True)
    lay = lambda *t: ShardLayout((1, 2, 4), ("b", "x", "y"), t)             # noqa: E731 (axes counted from the right)
    s = shard_layout(bmm, (lay((2,), (), (1, 0)), lay((2,), (1,), (0,))), 8)
    assert s.strategy == ((1, 1, 8), (1, 2, 4)) and s.dev_matrix == (1, 2, 4)
    out = s.outputs[0]
    assert out.dims == ((0,), (), (2, 1)) and out.tensor_map() == (2, -1, (0, 1)) and out.slice_shape == (128, 64, 8)
    # the operator's own ReduceScatter over x (axis 1) lies on the output: nothing partial is left after it
    assert output_partial(s) == () and output_scattered(s) == (1,)
    assert [o.kind for o in plan(pre_reduce_layout(s), out).ops] == ["ReduceScatter"]
    assert s.grad_partial == ((), ())
    # its replace graph's AllGather: x over y on K (K/2 left), w as laid out
    assert s.gathered[0].dims == ((0,), (), (1,)) and s.gathered[0].slice_shape == (128, 64, 16) and s.gathered[1] is None
    assert training_flops(bmm, rule_for(bmm), s) == 3 * 2.0 * 128 * 64 * 32 * 64 / 8
    # transpose_b: w [128, 64, 32] ("b", "y", "x") is the same 2D split
    bmm_t = op("BatchMatMul", [x, Input("param", "w", spec=T(128, 64, 32)), False, True], [T(128, 64, 64)], "bt",
               enable_nd_tp=True)
    assert shard_layout(bmm_t, (lay((2,), (), (1, 0)), lay((2,), (0,), (1,))), 8).outputs[0] == out
    # 3D MatMul
    mm = op("MatMul", [T(64, 32), Input("param", "w", spec=T(32, 64)), False, False], [T(64, 64)], "mm",
            enable_nd_tp=True)
    lay3 = lambda *t: ShardLayout((2, 2, 4), ("x", "y", "z"), t)            # noqa: E731 x=2, y=1, z=0
    s3 = shard_layout(mm, (lay3((0, 2), (1,)), lay3((1, 0), (2,))), 16)
    assert s3.strategy == ((8, 2), (8, 2))
    assert s3.outputs[0].dims == ((2, 1), (0,)) and s3.outputs[0].tensor_map() == ((0, 1), 2)
    assert s3.outputs[0].slice_shape == (8, 32) and output_scattered(s3) == (1,)
    # every output axis is one either input holds: no gradient is left partial
    assert s3.grad_partial == ((), ())
    # x gathered over x on M (z left), w over z on K (y left)
    assert [g.dims for g in s3.gathered] == [((2,), (1,)), ((1,), (0,))]
    # a configured output Layout must be the inferred one (MindSpore: SetCostUnderLayout failed otherwise)
    assert nd_tp_sharding(mm, (lay3((0, 2), (1,)), lay3((1, 0), (2,))), 16, (lay3((0, 1), (2,)),)).outputs[0] == \
        s3.outputs[0]
    with pytest.raises(StrategyError, match="output Layout must be the one MindSpore infers"):
        nd_tp_sharding(mm, (lay3((0, 2), (1,)), lay3((1, 0), (2,))), 16, (lay3((1, 0), (2,)),))
    # a contraction split alike in both inputs (no 2D/3D pattern): MindSpore's NDTP replace graph fails
    with pytest.raises(StrategyError, match="only 2D/3D tensor parallel layouts"):
        shard_layout(bmm, (lay((2,), (), (0,)), lay((2,), (0,), (1,))), 8)
    # without the attribute the same Layouts are an ordinary MatMul's, which refuses k split two ways
    plain = op("BatchMatMul", [x, w, False, False], [T(128, 64, 64)], "plain")
    with pytest.raises(StrategyError, match="conflict with another input's split of the same dimension factor 'k'"):
        shard_layout(plain, (lay((2,), (), (1, 0)), lay((2,), (1,), (0,))), 8)


def test_candidates_are_mindspore_29s_lists():
    """MindSpore 2.9.0's own GenerateStrategies logs (GLOG_v=1, 8 devices, fully_use_devices=False):
    powers of two, lexicographically ascending over the loop dims, all-ones first, any product dividing 8."""
    mm = matmul(T(32, 16), T(16, 24), T(32, 24))
    assert candidates(mm, 8) == [
        ((1, 1), (1, 1)), ((1, 1), (1, 2)), ((1, 1), (1, 4)), ((1, 1), (1, 8)), ((1, 2), (2, 1)), ((1, 2), (2, 2)),
        ((1, 2), (2, 4)), ((1, 4), (4, 1)), ((1, 4), (4, 2)), ((1, 8), (8, 1)), ((2, 1), (1, 1)), ((2, 1), (1, 2)),
        ((2, 1), (1, 4)), ((2, 2), (2, 1)), ((2, 2), (2, 2)), ((2, 4), (4, 1)), ((4, 1), (1, 1)), ((4, 1), (1, 2)),
        ((4, 2), (2, 1)), ((8, 1), (1, 1))]
    add = op("Add", [T(32, 24), T(24)], [T(32, 24)])
    assert candidates(add, 8) == [((1, 1), (1,)), ((1, 2), (2,)), ((1, 4), (4,)), ((1, 8), (8,)), ((2, 1), (1,)),
                                  ((2, 2), (2,)), ((2, 4), (4,)), ((4, 1), (1,)), ((4, 2), (2,)), ((8, 1), (1,))]
    sm = op("Softmax", [T(32, 24), (-1,)], [T(32, 24)])
    assert candidates(sm, 8) == [((1, 1),), ((2, 1),), ((4, 1),), ((8, 1),)]
    # fully_use_devices=True keeps the products equal to the device count, and the all-ones strategy:
    # PrepareStrategyBase refuses only ``product != 1 && product != dev_num`` (MindSpore 2.9.0 lists [[1, 1], [1, 1]]
    # first for an Add under fully_use_devices: its UT sharding_strategy_save_and_load6; the spec's §5 misses it)
    mm2 = matmul(T(256, 784), T(784, 64), T(256, 64))
    c = candidates(mm2, 8, fully_use_devices=True)
    assert len(c) == 11 and c[:2] == [((1, 1), (1, 1)), ((1, 1), (1, 8))] and ((2, 1), (1, 4)) in c
    add2 = op("Add", [T(256, 64), T(64)], [T(256, 64)])
    assert candidates(add2, 8, fully_use_devices=True) == [((1, 1), (1,)), ((1, 8), (8,)), ((2, 4), (4,)),
                                                           ((4, 2), (2,)), ((8, 1), (1,))]


def test_broadcast_candidates_of_inputs_of_different_ranks():
    """MindSpore 2.9.0 (GLOG_v=1 "Successfully generated the Nth strategy", 8 devices): for two inputs
    of different ranks GenerateStrategiesForBroadcast{Right,Left} enumerates the longer input's shape
    and resets only the shorter input's LEADING size-1 dims; a later size-1 dim keeps the split and the
    candidate fails CheckStrategy (random nets 190, 259). So: a dim that is 1 in the longer input, or
    a non-leading size-1 dim of the shorter one, is never split by the search."""
    p = lambda *s: Input("param", "w", spec=T(*s))      # noqa: E731
    sub = op("Sub", [T(8, 6, 8), p(6, 1)], [T(8, 6, 8)])              # [6, 1]: its trailing 1 keeps the split
    assert candidates(sub, 8) == [((1, 1, 1), (1, 1)), ((1, 2, 1), (2, 1)), ((2, 1, 1), (1, 1)), ((2, 2, 1), (2, 1)),
                                  ((4, 1, 1), (1, 1)), ((4, 2, 1), (2, 1)), ((8, 1, 1), (1, 1))]
    mul = op("Mul", [p(1, 8), T(8, 6, 8)], [T(8, 6, 8)])              # [1, 8]: a leading 1 is reset, dim 1 splits
    c = candidates(mul, 8)
    assert len(c) == 16 and c[4] == ((1, 1), (1, 2, 1)) and c[-1] == ((1, 1), (8, 1, 1))
    add = op("Add", [T(8, 1, 8), p(6, 8)], [T(8, 6, 8)])              # the longer input's 1 is never split
    assert candidates(add, 8) == [((1, 1, 1), (1, 1)), ((1, 1, 2), (1, 2)), ((1, 1, 4), (1, 4)), ((1, 1, 8), (1, 8)),
                                  ((2, 1, 1), (1, 1)), ((2, 1, 2), (1, 2)), ((2, 1, 4), (1, 4)), ((4, 1, 1), (1, 1)),
                                  ((4, 1, 2), (1, 2)), ((8, 1, 1), (1, 1))]
    mn = op("Minimum", [T(8, 8, 2), p(8, 1)], [T(8, 8, 2)])           # random net 259, 2 devices
    assert candidates(mn, 2) == [((1, 1, 1), (1, 1)), ((1, 2, 1), (2, 1)), ((2, 1, 1), (1, 1))]
    # a configured strategy may still split them (only the search is limited)
    assert shard(sub, ((1, 1, 2), (1, 1)), 8).dev_matrix


def test_candidates_for_non_power_of_two_devices():
    """MindSpore 2.9.0 on 24 = 8 * 3 devices (its log): every power-of-two candidate with one dim
    multiplied by 3 where the shape allows, and the all-ones strategy last."""
    relu = op("ReLU", [T(48, 24)], [T(48, 24)])
    assert candidates(relu, 24) == [
        ((3, 1),), ((1, 3),), ((3, 2),), ((1, 6),), ((3, 4),), ((1, 12),), ((3, 8),), ((1, 24),), ((6, 1),), ((2, 3),),
        ((6, 2),), ((2, 6),), ((6, 4),), ((2, 12),), ((12, 1),), ((4, 3),), ((12, 2),), ((4, 6),), ((24, 1),), ((8, 3),),
        ((1, 1),)]
    sm = op("Softmax", [T(48, 24), (-1,)], [T(48, 24)])
    assert candidates(sm, 24) == [((3, 1),), ((6, 1),), ((12, 1),), ((24, 1),), ((1, 1),)]


def test_unknown_operator_is_batch_parallel():
    """MindSpore 2.9.0: "FlattenInfo is not register yet ... Operator Flatten use Batch Parallel":
    one candidate splitting dim 0 of every input over all devices ((8, 1, 1, 1) in the Docs FFN)."""
    fl = op("Flatten", [T(256, 1, 28, 28)], [T(256, 784)])
    assert candidates(fl, 8) == [((8, 1, 1, 1),)]
    # only the FIRST input's dim 0 is split (MindSpore: Dense(x, w) runs as ((8, 1), (1, 1)))
    odd = op("NoSuchOp", [T(16, 4), T(16)], [T(16, 4)])
    assert not rule_for(odd).known and candidates(odd, 8) == [((8, 1), (1,))]
    # dim 0 not divisible by the device count, or a scalar output: StandAlone, everything whole
    assert candidates(op("NoSuchOp", [T(12, 4)], [T(12, 4)]), 8) == [((1, 1),)]
    assert candidates(op("NoSuchOp", [T(16, 4)], [T()]), 8) == [((1, 1),)]


def test_elementwise_scalar_and_broadcast_strategies():
    # MindSpore turns Mul's / NotEqual's scalar operand into a rank-0 tensor constant: a strategy input ()
    scalar = Input("const", spec=T(), value={"tensor": "float32[]"})
    mul = op("Mul", [T(2, 8, 1024, 1024), scalar], [T(2, 8, 1024, 1024)])
    s = shard(mul, ((2, 4, 1, 1), ()), 8)                          # CoreAttention's ((dp,tp,cp,1), ())
    assert s.outputs[0].strategy == (2, 4, 1, 1)
    ne = op("NotEqual", [T(8, 4096, dtype="int32"), scalar], [T(8, 4096, dtype="bool")])
    assert shard(ne, ((2, 1), ()), 8).outputs[0].strategy == (2, 1)
    # a Python scalar argument (Muls' value, as MindSpore 2.9 reports: strategy ((8, 1),)) is not
    muls = op("Muls", [T(128, 64), 2.0], [T(128, 64)])
    assert rule_for(muls).slots == (0,) and shard(muls, ((8, 1),), 8).outputs[0].strategy == (8, 1)
    bias = op("Add", [T(2, 16, 8), T(1, 16, 1)], [T(2, 16, 8)])
    with pytest.raises(StrategyError, match=r"op \(Add\) input 1 dimension 0: split 2 does not divide size 1"):
        shard(bias, ((2, 2, 2), (2, 2, 2)), 8)
    assert shard(bias, ((2, 2, 2), (1, 2, 1)), 8).inputs[1].strategy == (1, 2, 1)


def test_reduce_softmax_transpose_rules():
    rm = op("ReduceMean", [T(64, 2048, 7, 7), (2, 3), False], [T(64, 2048)])
    s = shard(rm, ((8, 1, 1, 1),), 8)
    assert s.outputs[0].strategy == (8, 1) and s.partial_axes == ()
    rm8 = op("ReduceMean", [T(64, 2048, 8, 8), (2, 3), False], [T(64, 2048)])
    s = shard(rm8, ((2, 1, 4, 1),), 8)                              # a reduced dim split: partial sums
    assert output_partial(s) == (2,)
    sm = op("Softmax", [T(2, 8, 128, 128), (-1,)], [T(2, 8, 128, 128)])
    with pytest.raises(StrategyError, match="cannot split this dimension"):
        shard(sm, ((1, 1, 1, 8),), 8)
    tr = op("Transpose", [T(2, 8, 1024, 128), (0, 2, 1, 3)], [T(2, 1024, 8, 128)])
    assert shard(tr, ((2, 4, 1, 1),), 8).outputs[0].strategy == (2, 1, 4, 1)


def test_gather_vocab_parallel_embedding():
    g = op("Gather", [Input("param", "emb", spec=T(32000, 4096)), T(8, 4096, dtype="int32"), 0],
           [T(8, 4096, 4096)])
    s = shard(g, ((4, 1), (2, 1)), 8)                               # vocab by tp=4, batch by dp=2
    # partial sums over the vocabulary's 4-way device axis (GatherInfo: dev matrix [indices..., param...])
    assert s.outputs[0].strategy == (2, 1, 1) and s.dev_matrix == (2, 1, 4, 1)
    assert [s.dev_matrix[a] for a in output_partial(s)] == [4]
    s = shard(g, ((1, 4), (2, 1)), 8)                               # hidden split: no partial sums
    assert s.outputs[0].strategy == (2, 1, 4) and output_partial(s) == ()


def test_flash_attention_rules():
    q = T(2, 4096, 1024, dtype="float16")
    kv = T(2, 4096, 512, dtype="float16")                           # GQA: 8 query heads, 4 kv heads
    outs = [T(2, 8, 4096, 8), T(2, 8, 4096, 8), T(1, dtype="float16"), q]
    fa = op("FlashAttentionScore", [q, kv, kv] + [None] * 7 + [8, 1.0, 0.1, 2147483647, 2147483647, 0, 0, 0], outs)
    s = shard(fa, ((2, 1, 4), (2, 1, 4), (2, 1, 4)), 8)             # heads by tp
    assert s.outputs[3].strategy == (2, 1, 4) and s.outputs[0].strategy == (2, 4, 1, 1)
    s = shard(fa, ((2, 2, 2), (2, 1, 2), (2, 1, 2)), 8)             # query sequence by cp
    assert s.outputs[3].strategy == (2, 2, 2)
    with pytest.raises(StrategyError, match="cannot split this dimension"):
        shard(fa, ((1, 1, 2), (1, 4, 2), (1, 4, 2)), 8)              # kv sequence never split
    with pytest.raises(StrategyError, match="split 8 of 'n' does not divide 4"):
        shard(fa, ((1, 1, 8), (1, 1, 8), (1, 1, 8)), 8)              # 4 kv heads cannot split 8 ways
    # BNSD with pse, the page's FlashAttention: ((dp, mp, cp, 1), (dp, mp, 1, 1), (dp, mp, 1, 1), (dp, mp, cp, 1))
    q4 = T(2, 8, 1024, 128, dtype="float16")
    pse = T(2, 8, 1024, 1024, dtype="float16")
    fa = op("FlashAttentionScore", [q4, q4, q4, pse] + [None] * 6 + [8, 1.0, 0.1, 2147483647, 2147483647, 0, 1, 0],
            [T(2, 8, 1024, 8), T(2, 8, 1024, 8), T(1), q4])
    s = shard(fa, ((2, 2, 2, 1), (2, 2, 1, 1), (2, 2, 1, 1), (2, 2, 2, 1)), 8)
    assert s.inputs[3].strategy == (2, 2, 2, 1) and s.outputs[3].strategy == (2, 2, 2, 1)



def test_flash_attention_device_matrix_is_mindspores_per_input_layout():
    """FlashAttentionScoreInfo::InferDevMatrixShape (flash_attention_score_info.cc): BSH/BSND/TND lay the device
    matrix out [batch, s1, n1], SBH [s1, batch, n1], BNSD [batch, n1, s1]. Measured on MindFormers' glm4 (BSH,
    dp=2,cp=2,tp=2, FA ((2, 2, 2), (2, 1, 2), (2, 1, 2), (2, 1, 2, 1))): MindSpore's INFO log "FlashAttentionScoreInfo:
    The dev matrix shape is [2, 2, 2], the output[0]'s tensor map is [2, 0, 1, -1]" (softmax_max [B, N, S, 8]:
    heads innermost, sequence in the middle), and the causal mask's Cast before it, configured by
    PreProcessPreCastForSP with the zero-cost layout (GetPrevOpSwcByNextOpStrategyWithMiniComm), "CastInfo: Set
    strategy [[2, 1, 2, 1]]" -- which the Less building the mask follows, ((2, 2, 1), ()). Under strategist's former
    [batch, n1, s1] order (2, 1, 2, 1) put the sequence on other devices than the FA and (2, 1, 1, 1) won."""
    q, kv = T(2, 512, 4096, dtype="bfloat16"), T(2, 512, 256, dtype="bfloat16")
    mask = T(2, 1, 512, 512, dtype="uint8")
    outs = [T(2, 32, 512, 8), T(2, 32, 512, 8), T(1, dtype="bfloat16"), q]
    fa = op("FlashAttentionScore", [q, kv, kv, None, None, None, mask] + [None] * 3
            + [32, 1.0, 0.088, 2147483647, 2147483647, 0, 0, 0], outs)
    s = shard(fa, ((2, 2, 2), (2, 1, 2), (2, 1, 2), (2, 1, 2, 1)), 8)
    assert [d for d in s.dev_matrix if d > 1] == [2, 2, 2]
    # softmax_max: batch outermost, heads innermost, the query sequence between them (MindSpore's [2, 0, 1, -1]
    # over its [2, 2, 2], here with the size-1 axes of the unsplit factors dropped)
    inner = [a for a in range(len(s.dev_matrix)) if s.dev_matrix[a] > 1]
    rank_of = {a: len(inner) - 1 - inner.index(a) for a in inner}
    sm = s.outputs[0]
    assert [tuple(rank_of[a] for a in d) for d in sm.dims] == [(2,), (0,), (1,), ()]
    assert [tuple(rank_of[a] for a in d) for d in s.inputs[3].dims] == [(2,), (), (1,), ()]
    # the mask's Cast at (2, 1, 2, 1) (device matrix [2, 1, 2, 1, 2], repeats on the right) lands on the FA's own
    # devices: no redistribution, which is why MindSpore's PreProcessPreCastForSP picks it
    cast = op("Cast", [mask, None], [mask])
    c = shard(cast, ((2, 1, 2, 1),), 8)
    r = plan(c.outputs[0], s.inputs[3])
    assert r.mindspore_cost(1, "uint8").communication == 0
    # BNSD keeps [batch, n1, s1]: the query (dp, mp, cp, 1) heads outside the sequence
    q4 = T(2, 8, 1024, 128, dtype="float16")
    fa4 = op("FlashAttentionScore", [q4, q4, q4] + [None] * 7 + [8, 1.0, 0.1, 2147483647, 2147483647, 0, 1, 0],
             [T(2, 8, 1024, 8), T(2, 8, 1024, 8), T(1), q4])
    s4 = shard(fa4, ((2, 2, 2, 1), (2, 2, 1, 1), (2, 2, 1, 1)), 8)
    d4 = s4.inputs[0].dims
    assert d4[0][0] < d4[1][0] < d4[2][0]

def test_norms_and_loss_rules():
    rms = op("RmsNorm", [T(2, 128, 256), Input("param", "g", spec=T(256)), 1e-6], [T(2, 128, 256), T(2, 128, 1)])
    s = shard(rms, ((2, 4, 1), (1,)), 8)
    assert s.outputs[1].strategy == (2, 4, 1)
    with pytest.raises(StrategyError):
        shard(rms, ((1, 1, 8), (8,)), 8)
    ce = op("SoftmaxCrossEntropyWithLogits", [T(256, 1024), T(256, 1024)], [T(256), T(256, 1024)])
    assert shard(ce, ((8, 1), (8, 1)), 8).outputs[0].strategy == (8,)


def test_layout_form_multi_axis_dims():
    """Layout((2,2,2), ("dp","cp","tp")): x(("dp","cp"), "None"), w("tp","None"), transpose_b."""
    mm = matmul(T(16, 32), T(64, 32), T(16, 64), tb=True)
    dm, names = (2, 2, 2), ("dp", "cp", "tp")
    s = shard_layout(mm, (ShardLayout(dm, names, ((2, 1), ())), ShardLayout(dm, names, ((0,), ()))), 8)
    assert s.strategy == ((4, 1), (2, 1))
    assert s.outputs[0].dims == ((0, 1), (2,)) and s.outputs[0].slice_shape == (4, 32)


def test_unknown_operator_warns_and_runs_batch_parallel(caplog):
    weird = op("SomethingNew", [T(8, 8)], [T(8, 8)])
    r = rule_for(weird)
    assert not r.known and "no sharding rule for op (SomethingNew)" in caplog.text
    assert candidates(weird, 8) == [((8, 1),)]
    s = shard(weird, ((8, 1),), 8)
    assert s.outputs[0].strategy == (8, 1) and s.repeat == 1


def test_reshape_layouts():
    x = Layout((4, 128, 256), (2, 4), ((0,), (), ()))
    assert reshape_layout(x, (512, 256)).dims == ((0,), ())          # [B,S,H] -> [B*S,H], B split
    y = Layout((512, 256), (2, 4), ((0,), (1,)))
    assert reshape_layout(y, (4, 128, 256)).dims == ((0,), (), (1,))
    assert reshape_layout(Layout((4, 128, 256), (2, 4), ((0,), (1,), ())), (512, 256)) is None
    # heads: [B*S, N*D] -> [B, S, N, D] with N*D split by tp keeps heads split
    z = Layout((512, 1024), (2, 4), ((0,), (1,)))
    assert reshape_layout(z, (4, 128, 8, 128)).dims == ((0,), (), (1,), ())


def test_conv2d_rule():
    conv = op("Conv2D", [T(64, 256, 56, 56), Input("param", "w", spec=T(512, 256, 3, 3))], [T(64, 512, 28, 28)])
    s = shard(conv, ((8, 1, 1, 1), (1, 1, 1, 1)), 8)              # data parallel
    assert s.outputs[0].strategy == (8, 1, 1, 1) and s.partial_axes == () and s.grad_partial[1] == (0,)
    s = shard(conv, ((2, 4, 1, 1), (1, 4, 1, 1)), 8)              # input channels split: partial sums
    assert output_partial(s) == (1,)
    with pytest.raises(StrategyError, match="cannot split this dimension"):
        shard(conv, ((1, 1, 8, 1), (1, 1, 1, 1)), 8)


def test_tile_candidates_come_from_the_multiples():
    """MindSpore 2.9.0's TileInfo (random net 4's log: "TileInfo44 ... Successfully generated the 4th strategy:
    [[2, 2, 1]]"): the strategy has one entry per multiple; candidates divide the multiples, so a dimension
    with multiple 1 is never split by the search; a tiled dimension splits the output and keeps the input
    whole. A configured strategy may split a multiple-1 dimension (CheckStrategy checks it on the input)."""
    tile = op("Tile", [T(32, 4, 12), (2, 2, 1)], [T(64, 8, 12)])
    assert candidates(tile, 16) == [((1, 1, 1),), ((1, 2, 1),), ((2, 1, 1),), ((2, 2, 1),)]
    s = shard(tile, ((2, 1, 1),), 16)
    assert s.inputs[0].strategy == (1, 1, 1) and s.outputs[0].strategy == (2, 1, 1)
    s = shard(tile, ((2, 2, 4),), 16)          # configured: the multiple-1 dim splits input and output
    assert s.inputs[0].strategy == (1, 1, 4) and s.outputs[0].strategy == (2, 2, 4)
    with pytest.raises(StrategyError):
        shard(tile, ((4, 1, 1),), 16)           # 4 does not divide the multiple 2


def test_sparse_softmax_cross_entropy_is_batch_parallel():
    """SparseSoftmaxCrossEntropyWithLogitsInfo is a BatchParallelInfo with every input's split flag set:
    one candidate, the batch over all devices (random nets 15/146: MindSpore ((16, 1), (16,)) / ((8, 1), (8,))),
    a scalar loss notwithstanding; a batch the devices do not divide runs StandAlone."""
    ce = op("SparseSoftmaxCrossEntropyWithLogits", [T(32, 10), T(32, dtype="int32")], [T()])
    assert candidates(ce, 16) == [((16, 1), (16,))]
    assert candidates(op("SparseSoftmaxCrossEntropyWithLogits", [T(12, 10), T(12, dtype="int32")], [T()]), 8) == \
        [((1, 1), (1,))]


def test_broadcast_right_candidates_never_split_a_trailing_size1_dim_of_the_smaller_input():
    """MindSpore 2.9 (GenerateStrategiesForBroadcastRight): RealDiv(x[8,2,4,4], w[4,1]) on 4 devices lists
    9 strategies, none splitting x's last dim (w's inner size-1 dim would inherit the split and fail
    CheckStrategy); a LEADING size-1 dim of the smaller input is reset and does not block (random net 190)."""
    rd = op("RealDiv", [T(8, 2, 4, 4), Input("param", "w", spec=T(4, 1))], [T(8, 2, 4, 4)])
    assert candidates(rd, 4) == [((1, 1, 1, 1), (1, 1)), ((1, 1, 2, 1), (2, 1)), ((1, 1, 4, 1), (4, 1)),
                                 ((1, 2, 1, 1), (1, 1)), ((1, 2, 2, 1), (2, 1)), ((2, 1, 1, 1), (1, 1)),
                                 ((2, 1, 2, 1), (2, 1)), ((2, 2, 1, 1), (1, 1)), ((4, 1, 1, 1), (1, 1))]
    lead = op("Mul", [T(8, 4, 4), Input("param", "w", spec=T(1, 4))], [T(8, 4, 4)])
    assert ((1, 2, 1), (1, 1)) in candidates(lead, 4)
    # the strategy is still valid when configured
    assert shard(rd, ((1, 1, 1, 2), (1, 1)), 4).inputs[0].strategy == (1, 1, 1, 2)


def test_bias_add_swc_list_repeats_strategies_as_mindspore_does():
    """BiasAddInfo::GenerateOpStrategies enumerates two independent copies of x's shape and keeps the
    first: over 16 devices and x [32, 4, 16] MindSpore's INFO log lists 196 strategies, [[1,1,1],[1]] 31
    times, [[1,1,2],[1]] 19 times, ... (random net 10); the distinct candidates are unchanged."""
    from strategist.engine.rules.candidates import swc_strategies
    ba = op("BiasAdd", [T(32, 4, 16), Input("param", "b", spec=T(4))], [T(32, 4, 16)])
    lst = swc_strategies(ba, 16)
    assert len(lst) == 196
    assert lst[:32] == [((1, 1, 1), (1,))] * 31 + [((1, 1, 2), (1,))]
    assert lst.count(((1, 2, 2), (2,))) == 10 and lst[-1] == ((16, 1, 1), (1,))
    assert list(dict.fromkeys(lst)) == candidates(ba, 16)


def test_concat_strategy_has_a_row_for_a_constant_tensor_element():
    # MindFormers' MoE padding concat((pad_tokens, tokens), axis=1): MindSpore 2.9 reports ConcatInfo's strategy
    # ((1, 1, 1), (1, 1, 1)) for [1, 128, 2048] (a constant tensor) and [1, 32768, 2048] (strategist verify,
    # qwen3_moe); the axis is a Python scalar, not a strategy input
    pad = Input("const", spec=T(1, 128, 2048), value={"tensor": "float32[1,128,2048]"})
    cat = op("Concat", [pad, T(1, 32768, 2048), 1], [T(1, 32896, 2048)])
    assert rule_for(cat).slots == (0, 1)
    assert shard(cat, ((1, 1, 4), (1, 1, 4)), 8).outputs[0].strategy == (1, 1, 4)


def test_outer_generates_equal_splits_but_takes_any():
    """Outer(x[4096], y[64]): MindSpore's generator (ArithmeticBase's broadcast, the two 1-D inputs as one
    dimension) offers only equal splits, while OuterInfo's device matrix is [m, n]: on 8 devices (1)/(1) and
    (2)/(2) -- (4)/(4) would need 16 (measured: MindSpore's INFO log, qwen3_moe's rotary table). A configured
    ((2,), (4,)) is still taken."""
    x, y = TensorSpec((4096,), "float32"), TensorSpec((64,), "float32")
    op = Op("outer", "Outer", "", "", "outer", "", (Input("op", "a", spec=x), Input("op", "b", spec=y)),
            (TensorSpec((4096, 64), "float32"),))
    assert candidates(op, 8) == [((1,), (1,)), ((2,), (2,))]
    assert candidates(op, 64)[-1] == ((8,), (8,))
    s = shard(op, ((2,), (4,)), 8)
    assert s.outputs[0].dims and tuple(len(d) for d in s.outputs[0].dims) == (1, 1)


def test_masked_fill_value_is_no_strategy_input():
    """MaskedFill(x, mask, value) with a 0-d tensor value: MindSpore 2.9's MaskedFillInfo pops the value's shape,
    so its generated strategies have two rows (measured: deepseek3's router, ((1, 8, 1), (1, 8, 1))); a configured
    third row () is accepted (its CheckStrategy pops it too) and kept as configured."""
    x, m = TensorSpec((1, 64, 16), "float32"), TensorSpec((1, 64, 16), "bool")
    op = Op("mf", "MaskedFill", "", "", "mf", "", (Input("op", "x", spec=x), Input("op", "m", spec=m),
                                                 Input("const", "", spec=TensorSpec((), "float32"), value=0.0)),
            (x,))
    assert rule_for(op).slots == (0, 1)
    assert all(len(s) == 2 for s in candidates(op, 8)) and ((1, 8, 1), (1, 8, 1)) in candidates(op, 8)
    s = shard(op, ((1, 8, 1), (1, 8, 1), ()), 8)
    assert s.strategy == ((1, 8, 1), (1, 8, 1), ()) and s.inputs == shard(op, ((1, 8, 1), (1, 8, 1)), 8).inputs


def test_flash_attention_layout_splits_kv_heads_by_fewer_axes_than_the_query():
    """MindFormers' legacy glm4 (ChatGLM2 GQA, dp=2, tp=4 with 2 kv heads: shard_fa) configures, over
    Layout((2, 1, 2, 2), ("dp", "cp", "mp1", "mp2")), q ("dp", "cp", ("mp1", "mp2")), k and v ("dp", "None",
    "mp1"), the mask ("dp", "None", "cp", "None"). MindSpore 2.9 takes it as given (the Layout path runs no
    CheckStrategy: its "split num of N1-dim and N2-dim must be equal" is the tuple path's): verify of glm4 reported
    ((2, 1, 4), (2, 1, 2), (2, 1, 2), (2, 1, 1, 1)), and its INFO log for the same Layout on
    examples/attention.py (8 q heads, 2 kv heads) "the dev matrix shape is [2, 2, 2], the output tensor map is
    [2, -1, 1, 0]": the output is the query's layout, heads over mp1 then mp2. k and v are repeated over mp2
    (their gradient mirrors: MindSpore created two mirror groups of ranks 0-1). The propagated neighbours
    followed: wq ((2, 1), (1, 4)), wk/wv ((2, 1), (1, 2)), wo ((2, 4), (4, 1)) (verify: all agree)."""
    q, kv = T(2, 512, 4096, dtype="float16"), T(2, 512, 256, dtype="float16")
    mask = T(2, 1, 512, 512, dtype="uint8")
    outs = [T(2, 32, 512, 8), T(2, 32, 512, 8), T(1, dtype="float16"), q]
    fa = op("FlashAttentionScore", [q, kv, kv, None, None, None, mask] + [None] * 3
            + [32, 1.0, 0.088, 2147483647, 2147483647, 0, 0, 0], outs)
    dm, names = (2, 1, 2, 2), ("dp", "cp", "mp1", "mp2")      # right-indexed: dp 3, cp 2, mp1 1, mp2 0
    lay = lambda *t: ShardLayout(dm, names, tuple(t))
    layouts = (lay((3,), (2,), (1, 0)), lay((3,), (), (1,)), lay((3,), (), (1,)), lay((3,), (), (2,), ()))
    s = shard_layout(fa, layouts, 8)
    assert s.strategy == ((2, 1, 4), (2, 1, 2), (2, 1, 2), (2, 1, 1, 1))
    assert s.dev_matrix == dm
    out = s.outputs[3]
    assert out.strategy == (2, 1, 4) and out.dims == s.inputs[0].dims and out.dims[2] == (2, 3)
    assert s.inputs[1].dims[2] == (2,) and s.inputs[1] == s.inputs[2]
    assert s.outputs[0].strategy == (2, 4, 1, 1) and s.outputs[0].dims[1] == (2, 3)      # softmax_max: q's heads
    assert s.partial_axes == () and output_partial(s, 3) == ()     # the kv heads are no reduction
    real = lambda axes: tuple(a for a in axes if dm[a] > 1)
    assert real(s.grad_partial[1]) == real(s.grad_partial[2]) == (3,)      # k, v repeated over mp2 (not mp1)
    # the same rows as a tuple: MindSpore's CheckStrategy refuses them (SetCostUnderStrategy failed), so does strategist
    with pytest.raises(StrategyError, match="conflicts with split 4"):
        shard(fa, s.strategy, 8)
    # k and v split differently: MindSpore's compile fails after the operator (a Reshape's shape check)
    with pytest.raises(StrategyError, match="conflict with another input's split"):
        shard_layout(fa, layouts[:2] + (lay((3,), (), ()),) + layouts[3:], 8)
    # 2 kv heads split 4 ways: MindSpore crashes (SIGFPE)
    with pytest.raises(StrategyError, match="split 4 of 'n2' does not divide 2"):
        shard_layout(fa, (layouts[0], lay((3,), (), (1, 0)), lay((3,), (), (1, 0)), layouts[3]), 8)
    # kv over an axis of their own (measured on examples/attention.py: accepted, ((2, 1, 4), (2, 1, 2), (2, 1, 2)))
    s = shard_layout(fa, (layouts[0], lay((3,), (), (0,)), lay((3,), (), (0,)), layouts[3]), 8)
    assert s.strategy == ((2, 1, 4), (2, 1, 2), (2, 1, 2), (2, 1, 1, 1)) and real(s.grad_partial[1]) == (2,)
