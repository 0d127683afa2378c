"""Meshes and hardware profiles."""
import pytest

from strategist.errors import MeshError
from strategist.vocab.mesh import Mesh
from strategist.files.hardware import load_hardware


def test_mesh_parse_and_device_ordering():
    m = Mesh.parse("dp=2, tp=8")
    assert m.names == ("dp", "tp") and m.shape == (2, 8) and m.size == 16 and str(m) == "dp=2,tp=8"
    hw = load_hardware("atlas-800t-a2")
    # the innermost axis (tp, stride 1) stays inside an 8-device node; dp (stride 8) crosses nodes
    assert hw.is_intra_node(m.shape, m.index("tp")) and not hw.is_intra_node(m.shape, m.index("dp"))
    m = Mesh.parse("dp=8,tp=8")
    assert hw.is_intra_node(m.shape, 1) and not hw.is_intra_node(m.shape, 0)
    assert hw.is_intra_node((16, 4, 2), 1) and not hw.is_intra_node((4, 2, 8), 1)


def test_an_axis_drawn_from_others_adds_no_devices():
    # DeepSeek-V3's pretraining mesh: ep 32 of the 4 x 8 devices of dp and tp
    m = Mesh.parse("pp=8,dp=4,tp=8,ep=32@dp*tp")
    assert m.size == 256 and m.shape == (8, 4, 8) and m.names == ("pp", "dp", "tp")
    assert m.ways("ep") == 32 and m.get("ep") == 1 and m.ways("tp") == 8 and m.ways("cp") == 1
    assert str(m) == "pp=8,dp=4,tp=8,ep=32@dp*tp" and Mesh.parse(str(m)) == m
    assert str(m.without("pp")) == "dp=4,tp=8,ep=32@dp*tp"
    assert Mesh.parse("dp=2,tp=4,ep=2@tp").ways("ep") == 2


@pytest.mark.parametrize("text, needle", [
    ("dp2", "write NAME=SIZE"), ("dp=0", "write NAME=SIZE"), ("dp=2,dp=2", "must be unique"),
    ("None=2", "reserved by mindspore.Layout"), ("dp=2,ep=2@pp", "drawn from axes of the mesh other than pp"),
    ("dp=2,tp=4,ep=2@dp", "drawn from the innermost axes, outer first .*: tp"),
    ("dp=4,tp=8,ep=3@dp*tp", "ep=3 does not divide the 32 devices of dp\\*tp"),
    ("dp=4,tp=8,ep=4@dp*tp", "ep=4 fits in tp: draw it from tp alone"), ("dp=2,ep=2,ep=4@dp", "must be unique")])
def test_bad_meshes(text, needle):
    with pytest.raises(MeshError, match=needle):
        Mesh.parse(text)


def test_hardware_profiles(tmp_path):
    gpu = load_hardware("gpu-8x-nvlink")
    assert gpu.devices_per_node == 8 and gpu.intra.bandwidth == 300e9 and gpu.inter.latency == 10e-6
    with pytest.raises(MeshError, match="hardware profile not found: nope .known: atlas-800t-a2, atlas-900-a2-podc, gpu-8x-nvlink"):
        load_hardware("nope")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ndevices_per_node: 8\n")
    with pytest.raises(MeshError, match="bad hardware profile .*needs devices_per_node"):
        load_hardware(str(bad))
