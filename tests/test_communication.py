"""One training step's collectives: strategist's priced plan beside MindSpore's graph after autodiff
(``verify --communication``; strategist.verify.ir.parse_collectives, strategist.verify.compare.compare_communication).

MindSpore differentiates its parallel graph mechanically: each forward collective gets its transpose in the
backward (an AllGather's is a ReduceScatter over the same group, an AllReduce's an AllReduce, a slice's none), and
each Parameter its mirror, an AllReduce over the devices holding the same slice. The recorded dump
(tests/fixtures/ir/megatron_mlp_step.validate.ir) is MindSpore 2.9.0's ``validate`` graph of examples/mlp.py's
MegatronMLP (hidden 256, ffn 1024, 512 tokens, fp16) as one training step in semi_auto_parallel on dp=2,tp=4,
full_batch, anchored by tests/fixtures/anchors/megatron_mlp_dp2_tp4.yaml (fc1 column, fc2 row)."""
import os

import pytest

from strategist.files.anchors import load_anchors
from strategist.cli import main
from strategist.vocab.layout import Layout
from strategist.vocab.mesh import Mesh
from strategist.files.hardware import load_hardware
from strategist.engine.redistribution import plan as plan_redistribution
from strategist.propagate import semi_auto_plan
from strategist.verify.compare import compare_communication
from strategist.verify.ir import parse_collectives
from strategist.verify.msplan import MsPlan

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MLP = os.path.join(ROOT, "examples", "mlp.py:MegatronMLP")
ANCHORS = os.path.join(HERE, "fixtures", "anchors", "megatron_mlp_dp2_tp4.yaml")
KW = ("hidden=256", "ffn=1024", "tokens=512")


def _step(collectives):
    """MindSpore's answer for the training step as verify's child returns it (strategies not read here)."""
    return MsPlan([], "full_batch", 8, 0.0, 0.0, collectives=collectives)


def _recorded():
    with open(os.path.join(HERE, "fixtures", "ir", "megatron_mlp_step.validate.ir")) as f:
        return parse_collectives(f.read(), 8, wrapper="/strategist_loss-", model="/strategist_net-")


def test_collectives_of_a_recorded_training_step():
    """fc2's row-parallel AllReduce of its [256, 256] fp16 output slice over tp (2 * 3/4 * 128 KiB), its transpose
    in the backward, and four mirrors: fc1's weight and bias (split by tp: mirrored over dp), fc2's weight (rows
    by tp: over dp), fc2's bias (its Add takes the batch strategy (8, 1): replicated on all 8). The loss the
    training step adds (a ReduceSum over all 8 devices) is left out."""
    got = [(c["phase"], c["kind"], c["n"], c["bytes"]) for c in _recorded()]
    act = 2 * 3 / 4 * 256 * 256 * 2
    assert got == [("forward", "AllReduce", 4, act), ("backward", "AllReduce", 4, act),
                   ("mirror", "AllReduce", 2, 2 * 1 / 2 * 256 * 256 * 2), ("mirror", "AllReduce", 2, 256 * 2.0),
                   ("mirror", "AllReduce", 2, 2 * 1 / 2 * 256 * 256 * 2), ("mirror", "AllReduce", 8, 2 * 7 / 8 * 256 * 2)]


def test_strategist_prices_the_recorded_step(graph_of):
    g = graph_of(MLP, *KW)
    mesh = Mesh.parse("dp=2,tp=4")
    plan = semi_auto_plan(g, mesh, load_anchors(ANCHORS, g, mesh), dataset_strategy="full_batch",
                          hardware=load_hardware("atlas-800t-a2"))
    c = compare_communication(plan, _step(_recorded()))
    assert c.agree, c.text()
    assert c.bytes("strategist", "backward") == c.bytes("mindspore", "backward") == 2 * 3 / 4 * 256 * 256 * 2
    # one changed collective is found, on its side
    theirs = _recorded()
    theirs[1] = dict(theirs[1], n=8)
    c = compare_communication(plan, _step(theirs))
    assert not c.agree and c.to_dict()["backward"]["only_mindspore"] == [["AllReduce", 8, round(theirs[1]["bytes"])]]


def test_a_step_mindspore_cannot_compile_is_said_not_compared():
    from strategist.verify.compare import Communication
    c = Communication({}, {}, error="MindSpore could not compile m.yaml as a training step: RuntimeError: x")
    assert not c.agree and c.to_dict()["error"].startswith("MindSpore could not compile")
    assert c.text() == "communication of one training step: not compared: " + c.error + "\n"


@pytest.mark.parametrize("src, dst, kinds", [
    (((0,), ()), ((), ()), ["ReduceScatter"]),          # AllGather rows -> ReduceScatter rows
    (((), ()), ((0,), ()), []),                         # a slice: StridedSliceGrad, nothing sent
    (((0,), ()), ((), (0,)), ["AllToAll"]),             # rows -> columns: the all-to-all back
])
def test_a_redistribution_transposes_with_its_bytes(src, dst, kinds):
    a, b = Layout((64, 32), (8,), src), Layout((64, 32), (8,), dst)
    fwd = plan_redistribution(a, b)
    bwd = fwd.transposed()
    assert [op.kind for op in bwd.ops] == kinds
    assert bwd.physical(2).bytes_sent == fwd.physical(2).bytes_sent
    if kinds == ["AllToAll"]:
        f, t = fwd.ops[0], bwd.ops[0]
        assert (t.dim, t.concat_dim) == (f.concat_dim, f.dim) and bwd.src == b and bwd.dst == a


@pytest.mark.slow
@pytest.mark.verify_live
def test_verify_communication_live(capsys):
    """MindSpore compiles the step itself: the Megatron MLP above, and nn.TransformerEncoder on dp=8 under
    sharding propagation, whose q, k and v read one AllGather of the attention input (forward, once) and
    transpose it three times (one ReduceScatter each) -- the step compiled as built (--eval). In the training
    compile the step's loss sum, configured with the plan's replicated output, is a seed created before the
    dataset's: its search lays 21 operators (the embedding, layer 0's attention) out before the dataset's does,
    and verify says so (the forward plan itself agrees)."""
    args = ["verify", MLP, "--kwargs", *KW, "--mesh", "dp=2,tp=4", "--strategies", ANCHORS, "--dataset-strategy",
            "full_batch", "--semi-auto", "--communication"]
    assert main(args) == 0
    assert "communication agrees" in capsys.readouterr().out
    enc = os.path.join(ROOT, "examples", "encoder.py:EncoderClassifier")
    enc_args = ["verify", enc, "--kwargs", "vocab=128", "d_model=64", "heads=8", "ffn=128", "seq=16", "batch=8",
                "--mesh", "dp=8", "--communication", "--format", "json"]
    assert main(enc_args + ["--eval"]) == 0
    import json
    d = json.loads(capsys.readouterr().out)["communication"]
    assert d["agree"] and d["forward"]["mindspore_count"] == 2 and d["backward"]["mindspore_count"] == 6
    assert main(enc_args) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["agreed"] == d["total"] == 75
    assert any(n.startswith("MindSpore's training step chose other strategies than strategist for 21 operator(s)")
               for n in d["notes"]), d["notes"]


# ---- random nets' training steps, recorded (tests/netgen.py; MindSpore 2.9.0's validate dump, source-location
# comments trimmed): each strategist plan agrees with every collective of MindSpore's graph after autodiff

def _netgen_step(seed, tmp_path):
    """(strategist's plan of random net ``seed``, MindSpore's recorded training step of it)."""
    import sys
    sys.path.insert(0, HERE)
    import netgen
    from strategist.frontend.loader import load_graph
    from strategist.propagate import propagate
    spec = netgen.generate(seed)
    model, anchors_file = spec.write(str(tmp_path / f"net{seed}"))
    mesh = Mesh.parse(spec.mesh)
    # recorded before training became the default: the step compiled without set_train(True), whose forward
    # propagates as the Cell compiled as built (--eval)
    g = load_graph(f"{model}:Net", list(spec.inputs), None, training=False)
    plan = propagate(g, mesh, load_anchors(anchors_file, g, mesh) if anchors_file else {},
                     dataset_strategy=spec.dataset_strategy)
    with open(os.path.join(HERE, "fixtures", "ir", f"netgen{seed}_step.validate.ir")) as f:
        found = parse_collectives(f.read(), mesh.size, wrapper="/strategist_loss-", model="/strategist_net-",
                                  outputs_configured=True)
    return plan, MsPlan([], spec.dataset_strategy, mesh.size, 0.0, 0.0, collectives=found)


@pytest.mark.parametrize("seed, why", [
    (30, "a MatMul ((2, 2), (1, 2)) on dp=4,tp=4: w2's mirror is ONE AllReduce over the 8 devices holding its slice "
         "(group 0-3, 8-11), not one over 2 and one over 4"),
    (12, "add1(t4, w5) is a model output: w5's gradient is the sens, a constant; MindSpore's AllReduceConstElim "
         "folds its mirror into Mul(Tensor[32], 16)"),
    (40, "matmul1 ((1, 4), (1, 4)) is a model output: its forward AllReduce over 4 has no transpose (the AllReduce "
         "of a constant gradient is folded); w3's mirror stays (t3^T @ dout is computed)"),
    (46, "two MatMuls ((1, 4), (4, 1)) reduce over 4: their backward AllReduces share the forward ones' instance "
         "name with the loss sums' AllReduces; the transpose is told by forward_unique_id, so they are kept"),
    (20, "the output t9 comes out of a Reshape chain; the sum configured with its layout reads what MindSpore "
         "gathers before the Reshape (credited to the edge into the sum): the model's own, kept"),
    (43, "tile(t3) feeds an output through expand_dims: the transpose of the AllGather into the Tile is a "
         "ReduceScatter of a constant (Tensor[2, 64], signature '<Tensor[Float32], (2, 64), value=...>'), not folded"),
    (42, "maximum -> add1 is an all-to-all, written as AllGather + Split + Concat (no enable_alltoall): its transpose "
         "is a ReduceScatter over the same group, not the AllGather of an all-to-all back; add1's weight feeds an "
         "output through a Transpose, whose bprop MindSpore does not fold: the weight keeps its mirror"),
    (37, "t9 = realdiv(add(bias_add(t4, w2), w3), 3.0): RealDiv's bprop is a RealDiv node of the constant, so w3 "
         "and w2 keep their mirrors"),
    (22, "relu's [16, 32] on dp=8 as (4, 2) is gathered whole into a Reshape: MindSpore gathers the inner device "
         "axis (dim 1, over 2) first, then dim 0 over 4 (innermost device axis first; same bytes, other sizes)"),
    (23, "[16, 8] split (8, 2) on 16 devices into dim 1 over the last 4: the AllGathers run innermost device axis "
         "first (dim 1 over 2, then dim 0 over 2 and over 4), then one local slice"),
    (7, "one output: the step's loss node is its sum, a _VirtualDiv by 8 goes before it (loss_repeated_mean), and "
        "the RealDiv of the sens is computed: the Add's scalar weight keeps its mirror over 8"),
    (507, "bmm(x0, x0) reads the dataset's x0 twice, both inputs gathered alike over 16: the training step runs ONE "
          "AllGather both read (strategist priced two)"),
    (515, "the Reshape [16, 2, 4, 8] (2, 1, 1, 1) -> [32, 4, 8] (1, 4, 2) on dp=8: MindSpore reshapes into "
          "[8, 2, 2, 2, 8], gathers dim 0 over ranks 0, 4 on the whole slice (2048 B), then slices three dims; "
          "strategist sliced dim 3 first and gathered 1024 B"),
])


def test_random_net_step_agrees_with_recorded_collectives(seed, why, tmp_path):
    plan, ms = _netgen_step(seed, tmp_path)
    c = compare_communication(plan, ms)
    assert c.agree, why + "\n" + c.text()


def test_local_slices_run_after_the_collectives():
    """Without enable_alltoall MindSpore 2.9.0's graph runs a redistribution's local slices after its AllGathers
    (live ``verify --communication`` on 8 devices, float32 [16, 8, 8]): relu (2, 1, 1) -> mul (1, 2, 4) moves the
    outer axis from dim 0 to dim 1 and slices dim 2 by the inner 4 -- one AllGather over ranks 0, 4 of relu's whole
    [8, 8, 8] slice, 2048 B (not 512 B after the slice), and its transpose a ReduceScatter of as many bytes; the
    dataset's batch over 8 into the same Mul: AllGather over 4 (1536 B), then over 2 of [8, 8, 8] (2048 B)."""
    src = Layout((16, 8, 8), (2, 4), ((0,), (), ()))
    dst = Layout((16, 8, 8), (2, 4), ((), (0,), (1,)))
    r = plan_redistribution(src, dst)
    assert [op.kind for op in r.ops] == ["Split", "AllToAll"]
    assert [st.nbytes for st in r.physical(4).steps] == [0.0, 2048]
    assert [st.nbytes for st in r.transposed().physical(4).steps] == [2048]
    data = Layout((16, 8, 8), (2, 4), ((0, 1), (), ()))
    assert [st.nbytes for st in plan_redistribution(data, dst).physical(4).steps] == [1536, 2048]
    # with enable_alltoall the all-to-alls move (n - 1) / n of the slice as it is
    assert [st.nbytes for st in plan_redistribution(data, dst).physical(4, alltoall=True).steps] == [384, 256]


def test_mirror_over_two_device_axes_is_one_allreduce(tmp_path):
    """Random net 30's w2, float32 (4, 32) sliced (1, 2) on 16 devices: one AllReduce(n=8) of its 256-byte slice."""
    from strategist.verify.compare import our_collectives
    plan, ms = _netgen_step(30, tmp_path)
    theirs = sorted((c["n"], c["bytes"]) for c in ms.collectives if c["phase"] == "mirror")
    ours = sorted((n, b) for _k, n, b in our_collectives(plan)["mirror"])
    assert ours == theirs and (8, 2 * 7 / 8 * 256) in ours


def test_a_redistribution_into_the_loss_sum_keeps_the_output_gradient_computed(tmp_path):
    """Random net 16: matmul ((1, 2), (2, 2)) repeats on 8 devices and its output is a model output; the loss sum
    configured with the output's splits lays them on other devices (repeated computation on the right of its device
    matrix), MindSpore redistributes into the sum, and the ReduceScatter transposing that computes the output's
    gradient: the MatMul's AllReduce keeps its transpose. Forward, x0's batch split over 8 into the MatMul's
    (1, 2): the inner 4 devices gathered in one AllGather, then the outer axis' all-to-all."""
    plan, ms = _netgen_step(16, tmp_path)
    c = compare_communication(plan, ms)
    assert c.agree, c.text()
    assert c.ours["backward"] == [("AllReduce", 2, 2 * 1 / 2 * 128 * 4 * 4.0)]


def test_a_dim_keeping_its_outer_axis_sheds_the_inner_ones_in_one_allgather():
    """FlashAttention / CoreAttention under data_parallel on dp=2,cp=2,tp=2 (MindSpore 2.9.0's validate graph, fp16
    [8, 8, 16, 8]): the dataset splits the batch over all 8 devices; the attention keeps dp on it and wants cp / tp
    on heads and sequence. MindSpore runs ONE AllGather over the 4 devices of cp x tp (ranks 0-3, 3 x 2048 B =
    6144 B), then slices locally -- not two all-to-alls over 2 (2048 + 4096 B)."""
    src = Layout((8, 8, 16, 8), (8, 1, 1, 1), ((0,), (), (), ()))
    dst = Layout((8, 8, 16, 8), (2, 2, 2, 1), ((0,), (1,), (2,), ()))
    r = plan_redistribution(src, dst)
    assert [(op.kind, op.n, op.group(0)) for op in r.ops if op.kind != "Split"] == [("AllGather", 4, (0, 1, 2, 3))]
    assert r.physical(2).bytes_sent == 3 * 1024 * 2
    # heads only (one of FlashAttention's inputs): the same one AllGather over 4, then one slice
    r = plan_redistribution(src, Layout((8, 8, 16, 8), (2, 2, 2, 1), ((0,), (1,), (), ())))
    assert [(op.kind, op.n) for op in r.ops] == [("AllGather", 4), ("Split", 2)]
    assert r.physical(2).bytes_sent == 3 * 1024 * 2


@pytest.mark.parametrize("dst, steps, sent", [
    # (1, 2, 2, 1) on dp=2,cp=2,tp=2 (the Mul's repeat on the right: heads by the outer axis, sequence by the
    # middle one): cp x tp gathered first (12 KiB), then dp's all-to-all of the batch into heads on the gathered
    # slice (16 KiB), the sequence sliced after it (MindSpore 2.9.0, live: 28 KiB in 2)
    (Layout((8, 8, 16, 8), (2, 2, 2), ((), (0,), (1,), ())),
     [("AllGather", 4, 0), ("AllToAll", 2, 1), ("Split", 2, 2)], 12288 + 16384),
    # (2, 2, 1, 1): dp kept, cp x tp gathered in one (12 KiB), heads sliced
    (Layout((8, 8, 16, 8), (2, 2, 2), ((0,), (1,), (), ())), [("AllGather", 4, 0), ("Split", 2, 1)], 12288),
])
def test_inner_axes_of_a_dim_gather_first_in_one(dst, steps, sent):
    """relu (8, 1, 1, 1) -> mul on dp=2,cp=2,tp=2, float32 [8, 8, 16, 8] (MindSpore 2.9.0 validate graphs, compiled
    while this rule was worked out): every axis of the batch split after its outermost one (or after the prefix
    the target keeps) is gathered first as ONE AllGather over ranks 0-3, on the tensor as it is."""
    r = plan_redistribution(Layout((8, 8, 16, 8), (8,), ((0,), (), (), ())), dst)
    assert [(op.kind, op.n, op.dim) for op in r.ops] == steps
    assert r.physical(4).bytes_sent == sent


def test_a_dim_split_in_two_gathers_inner_then_outer():
    """Random net 30 (recorded): a [16] split over 16 devices gathered whole into a (1, 2, 8) layout runs an
    AllGather over the 8 inner devices, then one over 2 -- the outermost axis never joins the inner ones."""
    r = plan_redistribution(Layout((16,), (16,), ((0,),)), Layout((16,), (2, 8), ((),)))
    assert [(op.kind, op.n, op.group(0)) for op in r.ops] == [
        ("AllGather", 8, tuple(range(8))), ("AllGather", 2, (0, 8))]


def test_allgathers_run_innermost_device_axis_first():
    """Random net 22 (recorded): [16, 32] split (4, 2) gathered whole: dim 1 over ranks 0-1 first (a 4 x 16 slice,
    256 B), then dim 0 over 0-2-4-6 (4 x 32, 3 x 512 B)."""
    r = plan_redistribution(Layout((16, 32), (4, 2), ((0,), (1,))), Layout((16, 32), (4, 2), ((), ())))
    assert [(op.kind, op.n, op.dim, op.group(0)) for op in r.ops] == [
        ("AllGather", 2, 1, (0, 1)), ("AllGather", 4, 0, (0, 2, 4, 6))]
    assert [st.nbytes for st in r.physical(4).steps] == [256.0, 1536.0]


# ---- one tensor redistributed alike for several consumers: one transpose per redistribution NODE of MindSpore's
# graph (tests/models/shared_redistribution.py; recorded validate graphs, source-location comments trimmed)

SHARED = os.path.join(HERE, "models", "shared_redistribution.py")


def _shared_step(name, graph_of):
    g = graph_of(f"{SHARED}:{name}")
    mesh = Mesh.parse("dp=2,tp=4")
    plan = semi_auto_plan(g, mesh, {}, dataset_strategy="full_batch")
    with open(os.path.join(HERE, "fixtures", "ir", f"shared_{name}_step.validate.ir")) as f:
        found = parse_collectives(f.read(), 8, wrapper="/strategist_loss-", model="/strategist_net-")
    return g, plan, _step(found)


@pytest.mark.parametrize("name, copies, transposes, why", [
    ("read_twice", None, 1, "mm0's output, ONE node, read by a MatMul and an Add that both want it whole: one "
     "AllGather, the two gradients summed (AddN) and ONE ReduceScatter (LLaMA's embedding Gather read by the "
     "residual Add and attention_norm alike); strategist priced one per consumer before"),
    ("called_twice", 2, 2, "relu0(p) twice: one node in strategist's stand-alone graph (CSE), two in MindSpore's "
     "parallel graph, each redistributed: the CSE after the autodiff merges the two AllGathers (forward "
     "AllGather_3555 and AllGather_3564 -> one), not the two ReduceScatters transposing them"),
])
def test_a_shared_redistribution_is_transposed_once_per_node(name, copies, transposes, why, graph_of):
    g, plan, ms = _shared_step(name, graph_of)
    producer = "relu0" if name == "called_twice" else "mm0"
    assert g.op(producer).attrs.get("strategist_copies") == copies
    c = compare_communication(plan, ms)
    assert c.agree, why + "\n" + c.text()
    act = 3 / 4 * 64 // 2 * 128 * 4        # [32, 128] float32 gathered over 4: 3 x a [32, 32] slice
    assert c.ours["forward"] == [("AllGather", 4, act)]
    assert c.ours["backward"] == [("ReduceScatter", 4, act)] * transposes
    assert sorted(c.theirs["backward"]) == sorted(c.ours["backward"])


def test_cse_copies_of_a_pre_cse_graph():
    """The graph MindSpore's parallel passes see, as the stand-alone compile dumps it before opt_a's CSE: the three
    equal swapaxes of nn.MultiheadAttention's query, key, value (one Add's output) are one group of 3; their
    consumers, MatMuls of different weights, are not equal."""
    from strategist.frontend.irtext import cse_copies
    scope = "Default/encoder-TransformerEncoder/layers-CellList/0-TransformerEncoderLayer/self_attn-MultiheadAttention"
    lines = ["  %0(a) = Load(%para1_w, UMonad[U])", "      : (<Ref[Tensor[Float32]]>) -> (<Tensor[Float32], (8, 64)>)",
             "  %1(b) = PrimFunc_Add(%para2_x, %para3_y)",
             "      : (<Tensor[Float32], (8, 16, 64)>) -> (<Tensor[Float32], (8, 16, 64)>)"]
    for i in range(3):
        t, m = 2 + 2 * i, 3 + 2 * i
        lines += [f"  %{t}(CNode_{t}$x) = PrimFunc_Transpose(%1, (I64(1), I64(0), I64(2)))",
                  "      : (<Tensor[Float32], (8, 16, 64)>, <Tuple[Int64*3]>) -> (<Tensor[Float32], (16, 8, 64)>)",
                  f"      # Scope: ({scope})",
                  f"  %{m}(CNode_{m}) = PrimFunc_MatMulExt(%{t}, %para{4 + i}_w{i})",
                  "      : (<Tensor[Float32], (16, 8, 64)>) -> (<Tensor[Float32], (16, 8, 64)>)",
                  f"      # Scope: ({scope})"]
    assert cse_copies("\n".join(lines)) == {(scope, "Transpose", (16, 8, 64)): [3]}


@pytest.mark.slow
@pytest.mark.verify_live
def test_llama_embedding_read_by_two_consumers_is_transposed_once(capsys):
    """examples/llama.py (2 layers, batch 8) on dp=2,tp=4, the embedding table split on the hidden dim by tp: its
    output feeds layer 0's residual Add and attention_norm, both wanting the hidden dim whole. MindSpore's step has
    one AllGather(n=4) and ONE ReduceScatter for both (7 backward collectives); strategist priced 8. The step
    compiled as built (--eval): set to training, MindSpore's GPU plugin expands RmsNorm in the step's graph and
    rejects the expansion's float16 + float32 Add (Ascend has the kernel)."""
    import json
    anchors = os.path.join(HERE, "fixtures", "anchors", "llama_embedding_hidden_tp.yaml")
    assert main(["verify", os.path.join(ROOT, "examples", "llama.py:llama2_70b"), "--kwargs", "layers=2", "batch=8",
                 "--mesh", "dp=2,tp=4", "--dataset-strategy", "full_batch", "--strategies", anchors,
                 "--communication", "--format", "json", "--eval"]) == 0
    d = json.loads(capsys.readouterr().out)["communication"]
    assert d["agree"] and d["backward"]["mindspore_count"] == d["backward"]["strategist_count"] == 7


@pytest.mark.parametrize("mode", ["propagate", "semi"])
def test_the_loss_sum_regathers_an_interleaved_reshape_output(mode, graph_of):
    """CoreAttention on dp=2,cp=2,tp=2: its output is a Reshape laid out sequence by tp outside features by cp.
    verify's training step configures the loss sum with the output's splits as a tuple, (2, 2, 2), which MindSpore
    lays out in canonical order (sequence by the middle axis, cp; features by the inner one, tp): it redistributes
    into the sum before the Reshape, in the model -- two AllGathers over 2, 2 KiB and 4 KiB of fp16 (MindSpore 2.9.0,
    live, both modes: forward 24 KiB in 5, strategist 18 KiB in 3 until the sum's layout was priced). No backward:
    the net has no weights. Any other output's redistribution into the sum is the wrapper's, left out."""
    from strategist.propagate import price_plan, propagate
    from strategist.verify.compare import loss_sum_collectives
    g = graph_of("examples/sharding_techniques.py:CoreAttention", "batch=8", "heads=8", "seq=16", "head_dim=8",
                 "dp=2", "tp=2", "cp=2", f"mode={mode!r}")
    mesh = Mesh.parse("dp=2,cp=2,tp=2")
    plan = price_plan(semi_auto_plan(g, mesh) if mode == "semi" else propagate(g, mesh))
    out = g.op(g.outputs[0].ref)
    assert out.type == "Reshape" and out.outputs[0].shape == (8, 16, 64)
    assert loss_sum_collectives(plan) == {"forward": [("AllGather", 2, 2048.0), ("AllGather", 2, 4096.0)],
                                          "backward": [], "mirror": []}
    # the output laid out in canonical order: nothing to add
    g = graph_of("examples/sharding_techniques.py:CoreAttention", "batch=8", "heads=8", "seq=16", "head_dim=8",
                 "dp=2", "tp=4", "cp=1", f"mode={mode!r}")
    mesh = Mesh.parse("dp=2,tp=4")
    plain = price_plan(semi_auto_plan(g, mesh) if mode == "semi" else propagate(g, mesh))
    assert loss_sum_collectives(plain) == {"forward": [], "backward": [], "mirror": []}


ND_TP = os.path.join(HERE, "models", "ms_ut", "ut6_bmm_high_dim.py:")


def test_nd_tp_matmul_prices_its_own_input_all_gathers(graph_of):
    """An enable_nd_tp (Batch)MatMul's replace graph all-gathers its inputs before the local product (MindSpore 2.9's
    ComputeNDTPReplaceGraph). Worked by hand, 2D (BmmTP2DNdAnchor8, b=1,x=2,y=4): x float32[128, 64, 32] laid out
    ("b", None, ("x", "y")) holds K/8 = 4 columns; gathered over y (4 devices, ranks 0-3) to K/2 = 16, each device
    receives 3 slices of 128*64*4*4 B = 393216 B. x is the net's input: no gradient, so no backward ReduceScatter.
    3D (BmmTP3D16Nd1, z=2,x=2,y=4, ranks: z strides 8, x 4, y 1): x ("None", ("z", "x"), "y") is gathered over x on
    M (its slice [128, 16, 8] of 4 B: 65536 B from the other device, group [0, 4]); w1 float32[128, 32, 64]
    ("None", ("y", "z"), "x") over z on K (slice [128, 4, 32]: 65536 B, group [0, 8]); w1 is a weight, so its
    gradient is reduce-scattered back, the same bytes; x's is not. MindSpore's training step (verify
    --communication, live below) agrees on every collective with these and disagreed without them."""
    from strategist.propagate import propagate
    hw = load_hardware("atlas-800t-a2")
    p = propagate(graph_of(ND_TP + "BmmTP2DNdAnchor8"), Mesh.parse("b=1,x=2,y=4"), dataset_strategy="full_batch",
                  hardware=hw)
    steps = {s.label: s.nbytes for s in p.op_costs["mul1"].steps}
    assert steps["AllGather(n=4, group=[0, 1, 2, 3], dim=2)"] == 393216
    assert not any(k.startswith("backward ReduceScatter(n=4") for k in steps)
    p = propagate(graph_of(ND_TP + "BmmTP3D16Nd1"), Mesh.parse("z=2,x=2,y=4"), dataset_strategy="full_batch",
                  hardware=hw)
    assert [(s.label, s.nbytes) for s in p.op_costs["mul1"].steps if s.n == 2] == [
        ("AllGather(n=2, group=[0, 4], dim=1)", 65536), ("AllGather(n=2, group=[0, 8], dim=1)", 65536),
        ("backward ReduceScatter(n=2, group=[0, 8], dim=1)", 65536)]


@pytest.mark.verify_live
def test_nd_tp_training_step_collectives_live(capsys):
    """MindSpore 2.9.0 compiles the training step of the 2D and 3D enable_nd_tp nets: every collective agrees (the
    2D one: forward 2.38 MiB in 4, MindSpore's AllGather(n=4) of 384 KiB was strategist's only miss before)."""
    for cls, mesh in (("BmmTP2DNdAnchor8", "b=1,x=2,y=4"), ("BmmTP3D16Nd1", "z=2,x=2,y=4")):
        assert main(["verify", ND_TP + cls, "--mesh", mesh, "--dataset-strategy", "full_batch",
                     "--communication"]) == 0
        assert "communication agrees" in capsys.readouterr().out


@pytest.mark.verify_live
@pytest.mark.parametrize("model, mesh, forward, backward", [
    # MindSpore's UT nets (test_flash_attention_score_info): the query, the uncompressed mask, the output; with a
    # real_shift that too -- half of each device's slice over the pair, forward
    # B 8, N 8, S 128, D 64, fp16: the query's slice [64, 4, 256] (SBH, sp x dp x mp) 128 KiB, its half 64 KiB; the
    # output alike; the mask [4, 1, 64, 128] uint8, half 16 KiB; a real_shift [4, 4, 64, 128] fp16, half 128 KiB
    ("ms_ut/ut6_flash_attention.py:FaSBHSp8", "dp=2,sp=2,mp=2", [65536, 65536, 16384], []),
    ("ms_ut/ut6_flash_attention.py:FaBSNDSp8", "dp=2,sp=2,mp=2", [65536, 65536, 131072, 16384], []),
    # a query from a weight: [2, 128, 128] fp16 a device, half 32 KiB, and the gradients' ReduceScatters too (a
    # compressed causal mask is not swapped)
    ("attention_nets.py:FaQueryFromWeights", "cp=2", [32768, 32768], [32768, 32768]),
])
def test_flash_attention_load_balance_exchanges_are_mindspores(model, mesh, forward, backward, capsys):
    """With MindSpore's FlashAttention load balance on, its training step's collectives (the replace graph's
    2-device AllGathers, their ReduceScatters backward) are the ones strategist prices, collective for collective;
    their bytes by hand."""
    import json
    args = ["verify", os.path.join(HERE, "models", model), "--mesh", mesh, "--dataset-strategy", "full_batch",
            "--communication", "--fa-load-balance", "--format", "json"]
    assert main(args) == 0
    d = json.loads(capsys.readouterr().out)["communication"]
    assert d["agree"]
    for phase, want in (("forward", forward), ("backward", backward)):
        assert (d[phase]["mindspore_count"], d[phase]["mindspore_bytes"]) == (len(want), sum(want)), (phase, d)
