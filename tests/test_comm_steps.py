"""Collective steps as typed values (strategist.vocab.comm.CommStep): what a priced plan carries and how a label
prints, worked by hand."""
import os

from strategist.vocab.comm import AS_ALLGATHER, AS_REDUCESCATTER, CommStep
from strategist.vocab.layout import Layout

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_step_prints_as_its_label_and_runs_as_what_mindspore_writes():
    ag = CommStep("AllGather", (0, 8, 16, 24), 4096.0, 0.0, where="dim=0", dtype="float16")
    assert ag.label == "AllGather(n=4, group=[0, 8, 16, 24], dim=0)" and ag.collective == "AllGather"
    assert ag.toward("backward").label == "backward AllGather(n=4, group=[0, 8, 16, 24], dim=0)"
    assert ag.text("dp group of 4") == "AllGather(dp group of 4, dim=0)"
    # an all-to-all without enable_alltoall: the AllGather (forward) or ReduceScatter (backward) it is written as
    assert CommStep("AllToAll", (0, 1), 1.0, 0.0, runs_as=AS_ALLGATHER).collective == "AllGather"
    assert CommStep("AllToAll", (0, 1), 1.0, 0.0, "backward", runs_as=AS_REDUCESCATTER).collective == "ReduceScatter"
    assert CommStep("Split", (0, 1), 0.0, 0.0).collective is None
    # 8 devices a node: ranks 0-7 stay in one, 0 and 8 do not
    assert ag.intra(8) is False and CommStep("AllReduce", tuple(range(8)), 1.0, 0.0).intra(8) is True


def test_a_redistribution_gives_typed_steps_with_their_bytes_and_dtype():
    # [8, 8] fp16 split (2, 1) over dp=2 -> replicated: one AllGather over the 2 devices, each sending its 4x8 slice
    src = Layout((8, 8), (2,), ((0,), ()))
    dst = Layout((8, 8), (2,), ((), ()))
    from strategist.engine.redistribution import plan
    r = plan(src, dst)
    (st,) = r.physical(2, None, False, "float16").steps
    assert (st.kind, st.group, st.nbytes, st.direction, st.dtype) == ("AllGather", (0, 1), 4 * 8 * 2, "forward",
                                                                     "float16")
    (back,) = r.transposed().physical(2, None, False, "float16").steps
    assert back.kind == "ReduceScatter" and back.nbytes == 64


def test_a_priced_plans_steps_carry_direction_and_dtype():
    """The MLP data parallel on 2 devices: each float32 weight's gradient all-reduced over both ("grad" steps)."""
    from strategist import load_graph
    from strategist.propagate import propagate
    from strategist.vocab.mesh import Mesh
    g = load_graph(os.path.join(ROOT, "examples/mlp.py:MegatronMLP"))
    plan = propagate(g, Mesh.parse("dp=2"), {})
    grads = [st for c in plan.op_costs.values() for st in c.steps if st.direction == "grad"]
    assert grads and all(st.kind == "AllReduce" and st.group == (0, 1) for st in grads)
    weights = {x.spec.dtype for op in g for x in op.inputs if x.kind == "param"}
    assert {st.dtype for st in grads} <= weights and all(st.dtype for st in grads)
