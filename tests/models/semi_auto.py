"""Nets for tests/test_semi_auto.py: what MindSpore's semi_auto_parallel gives operators nobody configured."""
import mindspore as ms
from mindspore import Parameter, Tensor, nn, ops
import numpy as np


class CastFollows(nn.Cell):
    """Mul configured (2, 4) -> Cast -> ReLU (unconfigured) -> Neg configured (1, 8) -> Square (unconfigured)."""

    def __init__(self):
        super().__init__()
        self.mul = ops.Mul().shard(((2, 4), (2, 4)))
        self.cast = ops.Cast()
        self.relu = ops.ReLU()
        self.neg = ops.Neg().shard(((1, 8),))
        self.sq = ops.Square()

    def construct(self, x):
        y = self.cast(self.mul(x, x), ms.float16)
        return self.sq(self.neg(self.relu(y)))


class SplitFlags(nn.Cell):
    """One operator per batch-strategy rule of MindSpore's OperatorInfos, none configured but the first MatMul (8 devices):
    x [12, 16] -> MatMul (configured) -> Add of a [1, 16] row -> MatMul by a weight -> Gather rows of a table by the
    [12] ids -> Concat on axis 0 -> StridedSlice of the first 8 rows."""

    def __init__(self):
        super().__init__()
        self.w0 = Parameter(Tensor(np.ones((16, 16), np.float32)), name="w0")
        self.row = Parameter(Tensor(np.ones((1, 16), np.float32)), name="row")
        self.w1 = Parameter(Tensor(np.ones((16, 16), np.float32)), name="w1")
        self.table = Parameter(Tensor(np.ones((32, 16), np.float32)), name="table")
        self.mm0 = ops.MatMul().shard(((1, 8), (8, 1)))
        self.add = ops.Add()
        self.mm1 = ops.MatMul()
        self.gather = ops.Gather()
        self.add2 = ops.Add()
        self.concat = ops.Concat(0)
        self.slice = ops.StridedSlice()

    def construct(self, x, ids):
        h = self.mm1(self.add(self.mm0(x, self.w0), self.row), self.w1)
        e = self.gather(self.table, ids, 0)
        c = self.concat((self.add2(h, e), h))
        return self.slice(c, (0, 0), (8, 16), (1, 1))
