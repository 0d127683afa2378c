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
