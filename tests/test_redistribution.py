"""Redistribution planner: executed by a numpy collective simulator, checked against the spec's
hand-computed costs and Megatron's closed-form communication volumes."""
import math

import pytest
from hypothesis import given, settings, strategies as st

from strategist.vocab.layout import Layout, common_matrix, refine
from strategist.files.hardware import load_hardware
from strategist.engine.redistribution import plan, refine_cost

from collectives import check

L = Layout


# --- spec §3 "facts a test can check" (mindspore-sharding-propagation.md) -------------------------

def test_spec_fact1_allgather_on_dim1_cost():
    """[256,64] fp32, dev [2,4], map (1,0) -> (1,-1): one ConcatByAxis over the 4-axis;
    fwd 0.5*2048*4, bwd 0.5*2048, comp 2048 + 2*2048*4 elements, plus the s every operator pays
    (ComputeCost's fall-through, measured: see test_mindspore_printed_edge_costs); x4 bytes; refined 22528."""
    src, dst = L((256, 64), (2, 4), ((0,), (1,))), L((256, 64), (2, 4), ((0,), ()))
    p = plan(src, dst)
    assert [(o.kind, o.n, o.dim, o.slice_shape) for o in p.ops] == [("AllGather", 4, 1, (128, 16))]
    c = p.mindspore_cost(4)
    assert (c.forward, c.backward, c.computation) == (16384, 4096, 73728 + 8192)
    assert c.communication == 17408 + 5120 == 22528
    check(src, dst, p)


def test_spec_fact2_split_is_free():
    """The reverse is a SplitByAxis only: comm 0, computation s = 128*64 elements = 32768 bytes."""
    src, dst = L((256, 64), (2, 4), ((0,), ())), L((256, 64), (2, 4), ((0,), (1,)))
    p = plan(src, dst)
    assert [o.kind for o in p.ops] == ["Split"] and not p.has_communication
    c = p.mindspore_cost(4)
    assert (c.forward, c.backward, c.computation, c.communication) == (0, 0, 32768, 0)
    check(src, dst, p)


def test_spec_fact3_identity_and_refinement_constants():
    a = L((256, 64), (2, 4), ((0,), (1,)))
    p = plan(a, a)
    assert p.is_identity and p.mindspore_cost(4).communication == 0
    # same placement over a different device matrix is also the identity
    assert plan(L((64,), (8,), ((0,),)), L((64,), (2, 4), ((0, 1),))).is_identity
    assert refine_cost(1) == 3072 and refine_cost(2048) == 3072 and refine_cost(2049) == 3073 and refine_cost(0) == 0


# MindSpore 2.9.0's own per-edge costs, printed by edge_costmodel.cc InitNotIdentityEdgeCost (GLOG_v=0,
# "The redistribution cost: computation_cost: C, communication_cost: K", bytes, fp32) for random nets
# 88 and 21 (tests/netgen.py) on 8 devices. K is comm_cost_ = forward + backward before refinement.
# Layouts are strategist's (dev matrix, dims); "R" marks edges where MindSpore inserted the Reshape pair.
MS_PRINTED = [
    # (shape, src dev, src dims, dst dev, dst dims, computation, communication)
    ((32, 8), (8,), ((), (0,)), (8,), ((), ()), 2304, 576),                  # AllGather dim 1: 2s + 2sn
    ((32, 8), (8,), ((), (0,)), (8,), ((0,), ()), 2432, 576),                # permute = Concat + Split
    ((32, 8), (8,), ((0,), ()), (8,), ((), (0,)), 384, 576),                 # permute, concat dim 0: 3s
    ((32,), (8,), ((0,),), (8,), ((),), 32, 72),                             # AllGather dim 0: 2s
    ((32, 16), (8,), ((), ()), (2, 4), ((0,), (1,)), 4096, 0),               # two splits of s each
    ((32, 8), (8,), ((), (0,)), (2, 4), ((0,), ()), 2432, 512),              # R: + 2s
    ((32, 8), (8,), ((), (0,)), (4, 2), ((), (0,)), 1024, 192),              # R
    ((32, 8), (2, 4), ((0,), (1,)), (8,), ((), (0,)), 2432, 576),            # R, axis subdivided to [2,2,2]
    ((32, 8), (4, 2), ((), (0,)), (8,), ((), (0,)), 768, 0),                 # R, split only
    ((32, 8), (2, 2, 2), ((0,), (1,)), (8,), ((), (0,)), 3328, 768),         # R
    ((32, 2, 4, 32), (8,), ((0,), (), (), ()), (2, 4), ((0,), (), (), ()), 49152, 10240),   # R
    ((32, 2, 4, 32), (8,), ((0,), (), (), ()), (2, 2, 2), ((), (0,), (1,), (2,)), 77824, 18432),  # R
    ((16, 10), (8,), ((0,), ()), (2, 4), ((0,), ()), 960, 200),              # R
    ((16, 8, 8), (4, 2), ((0,), (), (1,)), (2, 4), ((), (0,), (1,)), 9728, 2304),   # R
    ((16, 8, 8), (4, 2), ((0,), (), ()), (4, 2), ((), (0,), (1,)), 4096, 2560),
    ((16, 8, 16), (4, 2), ((), (0,), (1,)), (4, 2), ((0,), (), ()), 17408, 4096),
    # size-1 dims: TensorRedistribution::Init squeezes them out (TensorLayout::SqueezeShape) before the expansion,
    # and InferReshape adds the pair where a side's slice as held differs from its expanded slice, rank included
    # (random[810] on 16 devices, random+[38]; all 191 pairs printed there match)
    ((32, 1, 8, 32), (4, 2, 2), ((0,), (), (1,), (2,)), (4, 2, 2), ((0,), (), (1,), ()), 16384, 3072),  # R: squeezed
    ((32, 1, 8, 32), (4, 2, 2), ((0,), (), (1,), (2,)), (4, 4), ((0,), (), (1,), ()), 14336, 3072),   # expanded slice
    # [8,1,4,16] equals the held one: no Reshape
    ((32, 1, 8, 32), (4, 2, 2), ((0,), (), (1,), (2,)), (8, 2), ((), (), (0,), (1,)), 24576, 8192),
    ((32, 1, 8, 8), (4, 4), ((0,), (), (1,), ()), (16,), ((0,), (), (), ()), 6656, 1280),
    ((1, 16, 16), (16,), ((), (), (0,)), (16,), ((), (), ()), 2304, 544),    # concat dim 1 counts as dim 0 squeezed
]


@pytest.mark.parametrize("shape,sd,sdims,dd,ddims,comp,comm", MS_PRINTED)
def test_mindspore_printed_edge_costs(shape, sd, sdims, dd, ddims, comp, comm):
    c = plan(L(shape, sd, sdims), L(shape, dd, ddims)).mindspore_cost(4)
    assert (c.computation, c.forward + c.backward) == (comp, comm)


def test_bool_communication_is_infinite():
    p = plan(L((8, 8), (8,), ((0,), ())), L((8, 8), (8,), ((), ())))
    assert p.mindspore_cost(1, "bool").communication == math.inf


def test_alltoall_moves_an_axis_between_dims():
    src, dst = L((8, 16), (4,), ((0,), ())), L((8, 16), (4,), ((), (0,)))
    p = plan(src, dst)
    assert [(o.kind, o.dim, o.concat_dim) for o in p.ops] == [("AllToAll", 1, 0)]
    # MindSpore (enable_all2all off) costs the permute as ConcatByAxis(n=4, dim 0) + SplitByAxis:
    # forward 0.5*s*n, backward 0.5*s, computation (s + s) + s; s = 2*16 elements, x2 bytes
    c = p.mindspore_cost(2)
    assert (c.forward, c.backward, c.computation) == (0.5 * 32 * 4 * 2, 0.5 * 32 * 2, 3 * 32 * 2)
    check(src, dst, p)


def test_partial_sums_reduce_scatter_or_allreduce():
    # partial over the 4-axis, target splits dim 0 by it -> ReduceScatter; else AllReduce
    src = L((8, 16), (2, 4), ((0,), ()), partial=(1,))
    p = plan(src, L((8, 16), (2, 4), ((0, 1), ())))
    assert [o.kind for o in p.ops] == ["ReduceScatter"]
    check(src, L((8, 16), (2, 4), ((0, 1), ())), p)
    p = plan(src, L((8, 16), (2, 4), ((0,), ())))
    assert [o.kind for o in p.ops] == ["AllReduce"]
    check(src, L((8, 16), (2, 4), ((0,), ())), p)


def test_partial_sums_over_adjacent_axes_reduce_in_one_allreduce():
    """A gradient partial over every device (a replicated weight, tokens split by dp and tp) is ONE AllReduce over
    the product group, as MindSpore's parameter-gradient AllReduce: 2*(8-1)/8 of the slice sent, not 2*(2-1)/2 +
    2*(4-1)/4 (one per axis). Non-adjacent axes stay one AllReduce each. The group's link: a group over two
    adjacent axes lies in one node only when all its ranks do (8 per node: ranks 0..7 yes, a 16-rank group no)."""
    src = L((8, 16), (2, 4), ((), ()), partial=(0, 1))
    p = plan(src, L((8, 16), (2, 4), ((), ())))
    assert [(o.kind, o.n, o.group(0)) for o in p.ops] == [("AllReduce", 8, tuple(range(8)))]
    assert p.physical(4, load_hardware("atlas-800t-a2")).bytes_sent == 2 * 7 / 8 * 8 * 16 * 4
    check(src, L((8, 16), (2, 4), ((), ())), p)
    src = L((8, 16), (2, 2, 2), ((), ()), partial=(0, 2))
    assert [(o.kind, o.n) for o in plan(src, L((8, 16), (2, 2, 2), ((), ()))).ops] == [("AllReduce", 2)] * 2
    hw = load_hardware("atlas-800t-a2")
    assert hw.is_intra_node((2, 4), 1, 8) and not hw.is_intra_node((2, 8), 1, 16) and hw.is_intra_node((2, 8), 1)


def test_multi_axis_dims_and_unrefinable_matrices():
    # Layout(("dp","cp"), "None") -> ("cp", "tp")-style moves over a [2,2,2] matrix
    src, dst = L((16, 8), (2, 2, 2), ((0, 1), (2,))), L((16, 8), (2, 2, 2), ((1,), (2, 0)))
    check(src, dst, plan(src, dst))
    # [2,3] and [3,2] have no common refinement: gather then split, still exact
    src, dst = L((6, 6), (2, 3), ((0,), (1,))), L((6, 6), (3, 2), ((0,), (1,)))
    assert common_matrix((2, 3), (3, 2)) is None
    check(src, dst, plan(src, dst))


def test_refine_keeps_placement():
    a = L((64, 8), (8,), ((0,), ()))
    assert refine(a, (2, 2, 2)).dims == ((0, 1, 2), ())
    assert refine(a, (2, 2, 2)).placement() == a.placement()


# --- Megatron closed forms ----------------------------------------------------------------------

def test_megatron_row_parallel_allreduce_volume():
    """Row-parallel MatMul on tp=4 (dp=2): output [b*s, h] partial over tp -> one AllReduce of the
    local b*s*h/dp activations; ring AllReduce sends 2(n-1)/n of it per device."""
    b_s, h, tl = 4096, 1024, 2
    src = L((b_s, h), (2, 4), ((0,), ()), partial=(1,))
    dst = L((b_s, h), (2, 4), ((0,), ()))
    p = plan(src, dst)
    assert [o.kind for o in p.ops] == ["AllReduce"] and p.ops[0].group(0) == (0, 1, 2, 3)
    local = b_s // 2 * h * tl
    assert p.physical(tl).bytes_sent == 2 * 3 / 4 * local


def test_sequence_parallel_equals_one_allreduce():
    """SP: AllGather (seq-split -> replicated) + ReduceScatter (partial -> seq-split) move exactly
    the bytes of one AllReduce."""
    b_s, h, tl = 4096, 1024, 2
    seq_split = L((b_s, h), (2, 4), ((0, 1), ()))
    full = L((b_s, h), (2, 4), ((0,), ()))
    partial = L((b_s, h), (2, 4), ((0,), ()), partial=(1,))
    ag, rs, ar = plan(seq_split, full), plan(partial, seq_split), plan(partial, full)
    assert [o.kind for o in ag.ops] == ["AllGather"] and [o.kind for o in rs.ops] == ["ReduceScatter"]
    assert ag.physical(tl).bytes_sent + rs.physical(tl).bytes_sent == ar.physical(tl).bytes_sent
    for s, d, p in ((seq_split, full, ag), (partial, seq_split, rs)):
        check(s, d, p)


def test_time_uses_intra_or_inter_node_links():
    hw = load_hardware("atlas-800t-a2")
    # tp=8 inner axis of dp=2,tp=8: inside a node; dp axis (stride 8): across nodes
    src = L((1024, 1024), (2, 8), ((), ()), partial=(1,))
    t_intra = plan(src, L((1024, 1024), (2, 8), ((), ()))).physical(2, hw)
    src = L((1024, 1024), (2, 8), ((), ()), partial=(0,))
    t_inter = plan(src, L((1024, 1024), (2, 8), ((), ()))).physical(2, hw)
    s = 1024 * 1024 * 2
    # AllReduce over 8 (a power of two): 2 x log2(8) halving-doubling rounds, the ring's bandwidth term
    assert t_intra.seconds == pytest.approx(2 * 3 * 10e-6 + 2 * 7 / 8 * s / 56e9)
    assert t_inter.seconds == pytest.approx(2 * 1 * 20e-6 + 2 * 1 / 2 * s / 25e9)
    # over 6 (not a power of two): the ring's 2 x (n - 1) rounds
    src = L((1024, 1020), (6,), ((), ()), partial=(0,))
    t6 = plan(src, L((1024, 1020), (6,), ((), ()))).physical(2, hw)
    assert t6.seconds == pytest.approx(2 * 5 * 10e-6 + 2 * 5 / 6 * 1024 * 1020 * 2 / 56e9)


# --- randomised: every plan is exact on the simulator ---------------------------------------------

@st.composite
def layout_pairs(draw):
    base = draw(st.sampled_from([(2,), (2, 2), (2, 2, 2), (2, 2, 2, 2), (2, 2, 2, 2, 2), (2,) * 6, (2, 3), (3, 2, 2)]))

    def coarsen():
        m, out = list(base), []
        while m:
            k = draw(st.integers(1, len(m)))
            out.append(math.prod(m[:k]))
            m = m[k:]
        return tuple(out)

    rank = draw(st.integers(1, 4))
    layouts = []
    for partial_ok in (True, False):
        dm = coarsen()
        axes = list(range(len(dm)))
        order = draw(st.permutations(axes))
        dims = [[] for _ in range(rank)]
        partial = []
        for a in order:
            where = draw(st.integers(-1 if not partial_ok else -2, rank - 1))
            if where >= 0:
                dims[where].append(a)
            elif where == -2:
                partial.append(a)
        layouts.append((dm, tuple(tuple(d) for d in dims), tuple(sorted(partial))))
    shape = []
    for d in range(rank):
        need = math.lcm(*(math.prod(dm[a] for a in dims[d]) for dm, dims, _ in layouts))
        shape.append(need * draw(st.integers(1, 2)))
    (dm1, d1, p1), (dm2, d2, _) = layouts
    return L(tuple(shape), dm1, d1, p1), L(tuple(shape), dm2, d2)


@settings(max_examples=300, deadline=None)
@given(layout_pairs())
def test_random_plans_are_exact(pair):
    src, dst = pair
    p = plan(src, dst)
    check(src, dst, p)
    assert plan(src, dst) == p                                   # deterministic
    assert (p.mindspore_cost(4).communication == 0) == (not p.has_communication)


@settings(max_examples=100, deadline=None)
@given(layout_pairs())
def test_cost_zero_exactly_when_equal(pair):
    src, dst = pair
    src = Layout(src.shape, src.dev_matrix, src.dims)            # drop partial
    p = plan(src, dst)
    assert (p.is_identity) == src.same_as(dst)
    assert plan(dst, dst).is_identity
