"""Simplified re-expression of MindSpore's UT tests/ut/python/parallel/auto_parallel_interface/
test_auto_parallel_reshard.py (?), test_reshard_with_layout_propagation: the tail of its Net -- ms.reshard of
the activation to Layout (4,2,1) ("dp","mp","sp") ("dp","mp") and of a constant [128,128] to ("mp","sp"), then an
unconfigured MatMul (the UT expects ((4,2),(2,1))). 8 devices, sharding_propagation, default dataset strategy.
The UT's nested ms.shard(Cell) blocks with parameter_plan before it are left out (ReshardTail keeps a Dense+GeLU
before the reshard).
"""
import numpy as np
import mindspore as ms
from mindspore import Layout, Tensor, nn, ops


class ReshardTail(nn.Cell):
    def __init__(self):
        super().__init__()
        lay = Layout((4, 2, 1), ("dp", "mp", "sp"))
        self.l1 = lay("dp", "mp")
        self.l2 = lay("mp", "sp")
        self.flatten = nn.Flatten()
        self.dense = nn.Dense(28 * 28, 128)
        self.gelu = nn.GELU()
        self.matmul = ops.MatMul()
        self.y = Tensor(np.ones((128, 128)), dtype=ms.float32)
        self.example_inputs = {"x": "float32[32,1,28,28]"}

    def construct(self, x):
        h = self.gelu(self.dense(self.flatten(x)))
        return self.matmul(ms.reshard(h, self.l1), ms.reshard(self.y, self.l2))


class ReshardDocExample(nn.Cell):
    """The example of ``mindspore.reshard``'s own docstring (MindSpore 2.9.0, parallel/function/reshard_func.py):
    ReLU, the activation resharded to Layout (4, 2) ("dp", "mp") ("dp", "mp"), an unconfigured MatMul with a constant
    [128, 128]. The Layout is an attribute here, not a construct() argument."""

    def __init__(self):
        super().__init__()
        self.layout = Layout((4, 2), ("dp", "mp"))("dp", "mp")
        self.matmul = ops.MatMul()
        self.relu = ops.ReLU()
        self.y = Tensor(np.ones((128, 128)), dtype=ms.float32)
        self.example_inputs = {"x": "float32[128,128]"}

    def construct(self, x):
        x = self.relu(x)
        return self.matmul(ms.reshard(x, self.layout), self.y)


class ReshardBetweenDense(nn.Cell):
    """strategist's variation (not in the UT): ms.reshard between two Dense layers, the activation laid out
    ("mp", "dp") before the second Dense and ("dp", None) after it; nothing else configured. (A dimension over two
    axes, ``lay(("dp", "mp"), "None")``, fails in ms.reshard's own Python in 2.9.0: "tuple indices must be integers
    or slices, not tuple".)"""

    def __init__(self):
        super().__init__()
        lay = Layout((4, 2), ("dp", "mp"))
        self.tokens = lay("mp", "dp")
        self.rows = lay("dp", "None")
        self.dense1 = nn.Dense(64, 256)
        self.gelu = nn.GELU()
        self.dense2 = nn.Dense(256, 64)
        self.add = ops.Add()
        self.example_inputs = {"x": "float32[64,64]"}

    def construct(self, x):
        h = ms.reshard(self.gelu(self.dense1(x)), self.tokens)
        return self.add(ms.reshard(self.dense2(h), self.rows), x)
