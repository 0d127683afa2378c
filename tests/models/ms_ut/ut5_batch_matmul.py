"""Re-expression of MindSpore's UT tests/ut/python/parallel/test_batch_matmul.py, test_batch_matmul_auto_parallel:
auto_parallel, search_mode="sharding_propagation", 16 devices, global_rank 0, dataset_strategy "full_batch"
(setup_function); x[128,64,32] (b[128,64,16] is an unused construct() input in the UT, dropped here); Mul
w1[128,64,32] -> BatchMatMul w2[128,32,32]; nothing configured. The UT compiles TrainOneStepCell(Momentum);
dropped here.

* BatchMatMulAuto16  <- test_batch_matmul_auto_parallel
* BatchMatMulAutoT16 <- the same net with transpose_b=True (w2 [128,32,32] is square, so the shapes hold), as
  test_batch_matmul_transpose_b builds it under semi_auto_parallel
"""
import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, nn
from mindspore.ops import operations as P


class BatchMatMulAuto16(nn.Cell):
    TRANSPOSE_B = False

    def __init__(self):
        super().__init__()
        self.mul = P.Mul()
        self.batch_matmul = P.BatchMatMul(transpose_b=self.TRANSPOSE_B)
        self.mul_weight = Parameter(Tensor(np.ones([128, 64, 32]), dtype=ms.float32), "w1")
        self.batch_matmul_weight = Parameter(Tensor(np.ones([128, 32, 32]), dtype=ms.float32), "w2")
        self.example_inputs = {"x": "float32[128,64,32]"}

    def construct(self, x):
        out = self.mul(x, self.mul_weight)
        return self.batch_matmul(out, self.batch_matmul_weight)


class BatchMatMulAutoT16(BatchMatMulAuto16):
    TRANSPOSE_B = True


class BatchMatMulAuto16DP(BatchMatMulAuto16):
    """BatchMatMulAuto16 under dataset_strategy "data_parallel" (a variant; the UT's is "full_batch")."""
