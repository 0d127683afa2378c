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


@pytest.mark.parametrize("text, needle", [
    ("dp2", "write NAME=SIZE"), ("dp=0", "write NAME=SIZE"), ("dp=2,dp=2", "must be unique"),
    ("None=2", "reserved by mindspore.Layout")])
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
