"""Building on a CPU: init-time kernels the CPU backend lacks run on the host, shapes, dtypes and values exact; a
kernel still missing is one line naming it and the model's line; what a model prints never reaches stdout."""
import json
import os
import textwrap

import numpy as np
import pytest

from strategist.cli import main
from strategist.errors import ModelLoadError

INIT_KERNELS = textwrap.dedent('''
    import mindspore as ms
    from mindspore import mint, nn, ops

    print("importing the model prints this")


    class Net(nn.Cell):
        def __init__(self, dim=64):
            super().__init__()
            print("building the model prints this")
            self.inv_freq = 1.0 / (10000 ** (mint.arange(0, dim, 2, dtype=ms.int64).float() / dim))
            self.steps = mint.arange(5)
            self.ramp = mint.linspace(0.0, 1.0, 5)
            self.fill = mint.full((2, 3), 7)
            self.csum = mint.cumsum(mint.ones((4,), dtype=ms.int32), 0)
            self.dense = nn.Dense(dim, dim)
            self.dense.weight.data.normal_(mean=0.0, std=0.02)
            self.dense.bias.data.zero_()
            self.dense.bias.data.fill_(1.0)
            self.relu = ops.ReLU()
            self.example_inputs = {"x": "float32[8,64]"}

        def construct(self, x):
            return self.relu(self.dense(x))
''')

MISSING = textwrap.dedent('''
    import mindspore as ms
    from mindspore import mint, nn, ops


    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.table = mint.randperm(8).float() + mint.outer(mint.ones(8), mint.ones(8)).sum()
            self.center = mint.median(mint.ones((4,)))
            self.relu = ops.ReLU()

        def construct(self, x):
            return self.relu(x)
''')


def _model(tmp_path, text, name="net.py"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_init_time_kernels_run_on_the_host_exactly(tmp_path):
    from strategist.frontend.loader import ModelRef, build_cell
    cell = build_cell(ModelRef.parse(_model(tmp_path, INIT_KERNELS) + ":Net"))
    dim = 64
    want = 1.0 / (10000 ** (np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / dim))
    assert cell.inv_freq.shape == (32,) and str(cell.inv_freq.dtype) == "Float32"
    np.testing.assert_allclose(cell.inv_freq.asnumpy(), want, rtol=1e-6)
    assert str(cell.steps.dtype) == "Int64" and cell.steps.asnumpy().tolist() == [0, 1, 2, 3, 4]
    assert str(cell.ramp.dtype) == "Float32"
    np.testing.assert_allclose(cell.ramp.asnumpy(), np.linspace(0, 1, 5), rtol=1e-6)
    assert str(cell.fill.dtype) == "Int64" and cell.fill.asnumpy().tolist() == [[7] * 3] * 2
    assert str(cell.csum.dtype) == "Int32" and cell.csum.asnumpy().tolist() == [1, 2, 3, 4]
    assert cell.dense.weight.shape == (64, 64) and cell.dense.bias.shape == (64,)


def test_host_kernels_are_restored_after_the_build():
    import mindspore as ms
    from mindspore import mint
    from strategist.frontend.hostinit import host_kernels, missing_kernel
    ms.set_context(mode=ms.GRAPH_MODE)
    with host_kernels():
        assert mint.arange(3).asnumpy().tolist() == [0, 1, 2]
    with pytest.raises(RuntimeError) as err:
        mint.arange(3).asnumpy()
    assert missing_kernel(err.value) == "Arange"


def test_a_kernel_still_missing_is_one_line_naming_it_and_the_model_line(tmp_path, capsys):
    path = _model(tmp_path, MISSING)
    rc = main(["inspect", path + ":Net", "--input", "x:float32[2,8]"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    lines = [ln for ln in err.splitlines() if ln.startswith("strategist: error")]
    assert len(lines) == 1, err
    assert "no MedianExt kernel" in lines[0] and "net.py:10 (__init__)" in lines[0]
    assert "Traceback" not in err


def test_a_kernel_error_out_of_a_build_is_not_one():
    from strategist.frontend.hostinit import kernel_error
    assert kernel_error("x", ValueError("bad shape")) is None


@pytest.mark.parametrize("command", [["inspect"], ["advise", "--mesh", "dp=2,tp=4"],
                                     ["propagate", "--mesh", "dp=2,tp=4"]])
def test_what_the_model_prints_goes_to_stderr_and_json_stays_json(tmp_path, capsys, command):
    path = _model(tmp_path, INIT_KERNELS, name=f"printing_{command[0]}.py")
    rc = main([command[0], path + ":Net", *command[1:], "--format", "json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    json.loads(out)
    assert "importing the model prints this" in err and "building the model prints this" in err
    assert "prints this" not in out


def test_model_load_error_names_no_traceback(tmp_path):
    from strategist.frontend.loader import ModelRef, build_cell
    with pytest.raises(ModelLoadError) as err:
        build_cell(ModelRef.parse(_model(tmp_path, MISSING) + ":Net"))
    assert os.linesep not in str(err.value)
