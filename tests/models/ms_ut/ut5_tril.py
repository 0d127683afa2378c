"""Re-expression of MindSpore's UT tests/ut/python/parallel/test_auto_parallel_tril.py, test_auto_parallel_tril:
auto_parallel, search_mode="sharding_propagation", 8 devices (global_rank 2 in the UT, 0 here), default dataset
strategy; x[16,64,32]; Mul w1[64,32] -> Tril ((2,4,1),) -> Sigmoid. The UT compiles TrainOneStepCell(Momentum);
dropped here.

* TrilAuto8 <- test_auto_parallel_tril
"""
import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, nn
from mindspore.ops import operations as P


class TrilAuto8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.tril = P.Tril().shard(((2, 4, 1),))
        self.mul = P.Mul()
        self.mul_weight = Parameter(Tensor(np.ones([64, 32]), dtype=ms.float32), "w1")
        self.sigmoid = P.Sigmoid()
        self.example_inputs = {"x": "float32[16,64,32]"}

    def construct(self, x):
        out = self.mul(x, self.mul_weight)
        out = self.tril(out)
        return self.sigmoid(out)


class TrilAuto8FullBatch(TrilAuto8):
    """TrilAuto8 under dataset_strategy "full_batch" (a variant; the UT's is the default, data_parallel)."""
