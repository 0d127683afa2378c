"""A model file's repeated blocks compiled three at a time and the graph grown (strategist.frontend.blocks,
strategist.frontend.layers.grow_layers): the grown graph is the whole compile's, op for op, on every example with
repeated layers; blocks that are not alike, a construct that counts its blocks and a block reading two back are
compiled whole."""
import contextlib
import os
import textwrap

import pytest

from strategist import load_graph
import strategist.frontend.blocks as blocks
import strategist.frontend.loader as loader

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def compiles(monkeypatch):
    """The layer counts of the graphs MindSpore compiled during a load."""
    seen = []
    real = loader.extract

    def counting(cell, *args, **kwargs):
        g = real(cell, *args, **kwargs)
        seen.append(len({op.layer for op in g if op.layer}))
        return g
    monkeypatch.setattr(loader, "extract", counting)
    return seen


def _same(a, b):
    assert [op.name for op in a] == [op.name for op in b]
    assert list(a) == list(b)       # every field: type, paths, scope names, inputs, shapes, attrs, source, position
    assert a.params == b.params and a.cells == b.cells and list(a.outputs) == list(b.outputs)
    assert a.meta == b.meta


CASES = [
    pytest.param("examples/llama.py:tiny", ["layers=5"], True, id="llama-train"),
    pytest.param("examples/gpt_nn.py:GPT", ["layers=4"], True, id="gpt-train"),
    pytest.param("examples/llama.py:tiny", ["layers=5"], False, id="llama-eval", marks=pytest.mark.slow),
    pytest.param("examples/bloom.py:tiny", ["layers=4"], True, id="bloom-train",
                 marks=[pytest.mark.slow, pytest.mark.ci_sample]),
    pytest.param("examples/vit.py:ViT", ["layers=4"], True, id="vit-train", marks=pytest.mark.slow),
    pytest.param("examples/vit.py:ViT", ["layers=4"], False, id="vit-eval", marks=pytest.mark.slow),
    pytest.param("examples/encoder.py:EncoderClassifier", ["layers=4"], True, id="encoder-train",
                 marks=pytest.mark.slow),
]


@pytest.mark.parametrize("target,kwargs,training", CASES)
def test_grown_graph_is_the_whole_compile(target, kwargs, training, compiles):
    whole = load_graph(os.path.join(ROOT, target), None, kwargs, training=training, replicate=False)
    assert compiles == [len({op.layer for op in whole if op.layer})]
    compiles.clear()
    grown = load_graph(os.path.join(ROOT, target), None, kwargs, training=training)
    assert compiles == [3]          # one compile, of three blocks
    _same(grown, whole)


def test_llama_70b_shape_compiles_three_of_eighty(compiles):
    g = load_graph(os.path.join(ROOT, "examples/llama.py:llama2_70b"), None, ["layers=80", "batch=1", "seq=512"])
    assert compiles == [3]
    assert len({op.layer for op in g if op.layer}) == 80
    assert sum(1 for p in g.params if ".layers.79." in p) == sum(1 for p in g.params if ".layers.0." in p) == 9
    last = [op for op in g if op.layer == "model.layers.79"]
    assert last[0].inputs[0].ref == "model.layers.78.add#1"
    assert "/layers-CellList/79-DecoderLayer/" in last[0].full_name
    assert g.op("model.norm_out.norm").inputs[0].ref == "model.layers.79.add#1"


_MODELS = '''
import mindspore as ms
from mindspore import nn, ops


class Block(nn.Cell):
    def __init__(self, scale=1.0):
        super().__init__()
        self.scale = scale
        self.w = ms.Parameter(ms.Tensor(ms.numpy.ones((16, 16)), ms.float32), name="w")
        self.matmul = ops.MatMul()
        self.mul = ops.Mul()
        self.add = ops.Add()

    def construct(self, x):
        return self.add(self.mul(self.matmul(x, self.w), self.scale), x)


class Alike(nn.Cell):
    def __init__(self, n=5):
        super().__init__()
        self.layers = nn.CellList([Block() for _ in range(n)])
        self.example_inputs = {"x": "float32[8,16]"}

    def construct(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Scaled(Alike):
    """Each block's own scale: blocks that are not alike."""
    def __init__(self, n=5):
        super().__init__(n)
        self.layers = nn.CellList([Block(1.0 / (i + 1)) for i in range(n)])


class Counting(Alike):
    """A construct that counts its blocks itself."""
    def __init__(self, n=5):
        super().__init__(n)
        self.n = n

    def construct(self, x):
        for i in range(self.n):
            x = self.layers[i](x)
        return x


class Pair(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w = ms.Parameter(ms.Tensor(ms.numpy.ones((16, 16)), ms.float32), name="w")
        self.matmul = ops.MatMul()
        self.add = ops.Add()

    def construct(self, x, prev):
        return self.add(self.matmul(x, self.w), prev), x


class TwoBack(Alike):
    """Each block adds the output of the block two before it: a layer that reads two layers back."""
    def __init__(self, n=5):
        super().__init__(n)
        self.layers = nn.CellList([Pair() for _ in range(n)])

    def construct(self, x):
        prev = x
        for layer in self.layers:
            x, prev = layer(x, prev)
        return x
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    path = tmp_path_factory.mktemp("blocks") / "blocks_models.py"
    path.write_text(textwrap.dedent(_MODELS))
    return str(path)


@pytest.mark.parametrize("name,grown", [("Alike", True), ("Scaled", False), ("Counting", False),
                                        ("TwoBack", False)])
def test_only_alike_blocks_are_grown(models, name, grown, compiles):
    """Alike blocks compile three and grow; blocks with their own scale are seen to differ before any compile; a
    construct indexing its blocks by a count fails the small compile; a block reading two back fails the third
    block's check. Each of the last three is then compiled whole, and every result is the whole compile's."""
    whole = load_graph(f"{models}:{name}", replicate=False)
    compiles.clear()
    g = load_graph(f"{models}:{name}")
    _same(g, whole)
    assert len({op.layer for op in g if op.layer}) == 5
    assert compiles == ([3] if grown else {"Scaled": [5], "Counting": [5], "TwoBack": [3, 5]}[name])


def test_blocks_restored_after_the_small_compile(models):
    from strategist.frontend.loader import ModelRef, build_cell
    cell = build_cell(ModelRef.parse(f"{models}:Alike"))
    path, lst, n = blocks.repeated_list(cell)
    assert (path, n) == ("layers", 5)
    with contextlib.suppress(RuntimeError), blocks.first_blocks(lst):
        assert len(lst) == 3
        raise RuntimeError
    assert list(lst._cells) == ["0", "1", "2", "3", "4"]
