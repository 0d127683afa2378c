"""Which edges move data: MindSpore's step_parallel_end graph read (strategist.verify.ir.parse_redistributions)
and paired with strategist's priced plan (strategist.verify.compare.compare_moves; ``verify --redistributions``).

The recorded dumps are MindSpore 2.9.0's own (tests/fixtures/ir/): ``CastBetweenLayouts`` (tests/models/layouts.py)
on dp=2,tp=4, and random net 6 (tests/netgen.py: a RmsNorm MindSpore replaces by its pieces, feeding a Concat
with the dataset) on dp=4,cp=2,tp=2."""
import os

import pytest

from strategist.vocab.mesh import Mesh
from strategist.propagate import propagate
from strategist.verify.compare import compare_moves
from strategist.verify.ir import parse_redistributions
from strategist.verify.msplan import MsPlan

HERE = os.path.dirname(os.path.abspath(__file__))
IR = os.path.join(HERE, "fixtures", "ir")
CAST_MODEL = os.path.join(HERE, "models", "layouts.py:CastBetweenLayouts")


def _read(name):
    with open(os.path.join(IR, name)) as f:
        return f.read()


def _moves(found):
    return [(r["src"]["instance"], r["dst"]["instance"], r["collectives"]) for r in found if r["collectives"]]


def test_the_redistribution_after_a_cast():
    found = parse_redistributions(_read("cast_between_layouts.step_parallel_end.ir"))
    # the dataset's slices (StridedSlice only: no data moves), the one redistribution after the Cast (an all-to-all
    # written as AllGather + Split + Concat, then the dp slice), the output's gather
    assert [(r["src"]["instance"], r["dst"]["instance"]) for r in found] == [
        ("_VirtualDataset", "add"), ("_VirtualDataset", "add"), ("cast", "gelu"), ("gelu", "_VirtualOutput")]
    r = found[2]
    assert r["ops"] == ("Reshape", "AllGather", "Split", "Concat", "Reshape", "StridedSlice")
    assert r["collectives"] == ("AllGather",)
    assert found[0]["collectives"] == ()


def test_a_concat_reads_each_element_of_its_tuple():
    found = parse_redistributions(_read("netgen6.step_parallel_end.ir"))
    # Concat((x0, rms_norm(x0)[0])): each element is gathered on its own; the RmsNorm is MindSpore's replacement
    # graph there (Square, ReduceMean, AllReduce, ..., a MakeTuple): its output is that MakeTuple, not an operator
    # strategist names -- the pairing goes by the consumer
    concat = [(r["src"]["type"], r["collectives"]) for r in found if r["dst"]["instance"] == "concat"]
    assert concat == [("_VirtualDataset", ("AllGather",)), ("MakeTuple", ("AllGather",))]
    # the replaced RmsNorm's own AllReduce is not a redistribution
    assert not any("AllReduce" in r["collectives"] for r in found)
    assert _moves(found) == [("bias_add", "erf", ("AllGather",)), ("_VirtualDataset", "concat", ("AllGather",)),
                             ("149871652253904240699", "concat", ("AllGather",))]


def _ms(found, device_num=8):
    reds = [{"src": r["src"]["instance"], "dst": r["dst"]["instance"], "src_type": r["src"]["type"], "also": [],
             "dst_type": r["dst"]["type"], "ops": list(r["ops"]), "collectives": list(r["collectives"])} for r in found]
    return MsPlan([], "full_batch", device_num, 0.0, 0.0, redistributions=reds)


def test_moves_pair_with_strategist_priced_plan(graph_of):
    p = propagate(graph_of(CAST_MODEL), Mesh.parse("dp=2,tp=4"), dataset_strategy="full_batch")
    m = compare_moves(p, _ms(parse_redistributions(_read("cast_between_layouts.step_parallel_end.ir"))))
    assert m.agree and [(a, b) for a, b, _, _ in m.both] == [("cast", "gelu")]
    # priced as the search left it (the Cast's own (1, 2, 1)), strategist would move the data into the Cast, in
    # float16, and only slice it after; MindSpore moves it after the Cast, in float32
    from strategist.engine.redistribution import plan as plan_redistribution
    searched = propagate(graph_of(CAST_MODEL), Mesh.parse("dp=2,tp=4"), dataset_strategy="full_batch", price=False)
    cast = searched.choices["cast"]
    assert cast.strategy == ((1, 2, 1),)
    assert plan_redistribution(searched.choices["add"].outputs[0], cast.inputs[0]).has_communication
    assert not plan_redistribution(cast.outputs[0], searched.choices["gelu"].inputs[0]).has_communication
    # and a plan without MindSpore's answer read is refused in one line
    with pytest.raises(ValueError, match="redistributions=True"):
        compare_moves(p, MsPlan([], "full_batch", 8, 0.0, 0.0))


def test_a_move_only_one_side_makes_is_listed(graph_of):
    p = propagate(graph_of(CAST_MODEL), Mesh.parse("dp=2,tp=4"), dataset_strategy="full_batch")
    found = parse_redistributions(_read("cast_between_layouts.step_parallel_end.ir"))
    ms = _ms(found)
    ms.redistributions.append({"src": "add", "dst": "cast", "src_type": "Add", "dst_type": "Cast",
                               "ops": ["AllGather"], "collectives": ["AllGather"]})
    m = compare_moves(p, ms)
    assert not m.agree and m.only_theirs == [("add", "cast", ("AllGather",))] and not m.only_ours
    assert "only MindSpore: add -> cast  AllGather" in m.text()


@pytest.mark.verify_live
def test_verify_redistributions_cli(tmp_path):
    """``strategist verify --redistributions``: MindSpore compiled (2.9.0 or 2.10.0: make test runs it on both), its
    step_parallel_end read; exit 0 when operators and moves agree; the JSON carries the moves; the text and the JSON
    name the MindSpore that answered."""
    import json
    import subprocess
    import sys
    from importlib.metadata import version
    ms = version("mindspore")
    cmd = [sys.executable, "-m", "strategist", "verify", CAST_MODEL, "--mesh", "dp=2,tp=4",
           "--dataset-strategy", "full_batch", "--redistributions"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "edges moving data: 1 in both, 0 only strategist, 0 only MindSpore -> AGREE" in r.stdout
    assert r.stdout.splitlines()[1] == f"MindSpore {ms} (GPU plugin on CUDA stubs, CPU only)", r.stdout
    r = subprocess.run(cmd + ["--format", "json"], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    d = json.loads(r.stdout)
    assert d["mindspore"]["version"] == ms
    assert d["redistributions"]["both"][0]["src"] == "cast" and d["redistributions"]["both"][0]["mindspore"] == ["AllGather"]
    assert os.listdir(tmp_path) == []


@pytest.mark.verify_live
@pytest.mark.parametrize("seed", [6, 8, 10, 11, 30, 46, 89])
def test_random_nets_move_data_where_mindspore_does(seed, tmp_path):
    """Random nets (tests/netgen.py) where the pairing was learnt, against MindSpore 2.9.0 itself: a RmsNorm and a
    OneHot MindSpore replaces by their pieces (6, 30), a Concat's tuple (6, 10), an edge into a Reshape plus the
    Reshape's own redistribution as one MindSpore chain (11), one redistributed tensor read by three MatMuls (46),
    a Concat reading a Reshape's output twice, redistributed once inside the Reshape (89: strategist priced it
    twice), and reading another operator's output twice, redistributed twice in step_parallel_end (8: both edges
    move data) but priced once: the training step's graph runs one AllGather both read (measured: random net 507's
    bmm(x0, x0), tests/test_communication.py; relu -> mul(t, t) and concat((t, t)) on dp=8)."""
    import sys
    sys.path.insert(0, HERE)
    import netgen
    from strategist.files.anchors import load_anchors
    from strategist.frontend.loader import load_graph
    from strategist.verify import mindspore_plan
    spec = netgen.generate(seed)
    model, anchors_file = spec.write(str(tmp_path / f"net{seed}"))
    mesh = Mesh.parse(spec.mesh)
    g = load_graph(f"{model}:Net", list(spec.inputs), None)
    anchors = load_anchors(anchors_file, g, mesh) if anchors_file else {}
    p = propagate(g, mesh, anchors, dataset_strategy=spec.dataset_strategy)
    ms = mindspore_plan(f"{model}:Net", mesh, inputs=list(spec.inputs), strategies=anchors_file,
                        dataset_strategy=spec.dataset_strategy, redistributions=True, graph=g)
    m = compare_moves(p, ms)
    assert m.agree and m.both, m.text()
    into = [bool(e.fwd_bytes) for e in p.edges if e.dst == "concat"]
    if seed in (8, 89):
        assert into == [True, False]
