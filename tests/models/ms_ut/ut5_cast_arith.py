"""Re-expressions of Cast and broadcasting-arithmetic sharding-propagation UTs in MindSpore's
tests/ut/python/parallel/. All: auto_parallel, search_mode="sharding_propagation", 8 devices, global_rank 0,
dataset_strategy "full_batch" (setup_function), nothing configured. The UTs compile NetWithLoss(VirtualLoss)
(phase 'train'); the wrapper is dropped here.

* CastDoubleStar8     <- test_auto_parallel_cast.py, test_double_star_graph (x[32,8] y[8,16] z[8,16] w[16,32];
  two MatMuls, each result Cast to float16, a third MatMul of the casts; the UT asserts only the
  _VirtualDataset's strategy, all ones)
* ParameterCast8      <- test_auto_parallel_parameter_cast.py, test_common_parameter
  (set_algo_parameters(elementwise_op_strategy_follow=True); x, y [64,64]; a float16 [64,64] Parameter "w" Cast
  to float32 twice, read by two MatMuls, a third MatMul of their results)
* FloorDiv8           <- test_auto_parallel_arithmetic.py, test_auto_parallel_arithmetic (x[64,32] y[32,128]
  b[64,128]; MatMul -> FloorDiv)
* FloorDivBcastBoth8  <- test_auto_parallel_arithmetic_broadcast_both (y[32,1], b[1,64])
* FloorDivBcastRight8 <- test_auto_parallel_arithmetic_broadcast_right (y[32,32], b[32])
* FloorDivBcastLeft8  <- test_auto_parallel_arithmetic_broadcast_left (y[32,32], b[128,64,32]; the UT asserts
  FloorDiv [[1,1],[1,1,1]], MatMul [[1,1],[1,1]], _VirtualDataset [[1,1],[1,1],[1,1,1]])
"""
import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, nn
from mindspore.ops import operations as P


class CastDoubleStar8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul1 = P.MatMul()
        self.matmul2 = P.MatMul()
        self.matmul3 = P.MatMul()
        self.cast1 = P.Cast()
        self.cast2 = P.Cast()
        self.example_inputs = {"x": "float32[32,8]", "y": "float32[8,16]", "z": "float32[8,16]",
                               "w": "float32[16,32]"}

    def construct(self, x, y, z, w):
        m1_result = self.matmul1(x, y)
        m2_result = self.matmul2(z, w)
        return self.matmul3(self.cast1(m2_result, ms.float16), self.cast2(m1_result, ms.float16))


class ParameterCast8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul1 = P.MatMul()
        self.matmul2 = P.MatMul()
        self.matmul3 = P.MatMul()
        self.weight1 = Parameter(Tensor(np.ones([64, 64]).astype(np.float16) * 0.01), "w", requires_grad=True)
        self.cast1 = P.Cast()
        self.cast2 = P.Cast()
        self.example_inputs = {"x": "float32[64,64]", "y": "float32[64,64]"}

    def construct(self, x, y):
        m1_result = self.matmul1(x, self.cast1(self.weight1, ms.float32))
        m2_result = self.matmul2(y, self.cast2(self.weight1, ms.float32))
        return self.matmul3(m2_result, m1_result)


class _FloorDivNet(nn.Cell):
    Y, B = "float32[32,128]", "float32[64,128]"

    def __init__(self):
        super().__init__()
        self.matmul = P.MatMul()
        self.floordiv = P.FloorDiv()
        self.example_inputs = {"x": "float32[64,32]", "y": self.Y, "b": self.B}

    def construct(self, x, y, b):
        out = self.matmul(x, y)
        return self.floordiv(out, b)


class FloorDiv8(_FloorDivNet):
    pass


class FloorDivBcastBoth8(_FloorDivNet):
    Y, B = "float32[32,1]", "float32[1,64]"


class FloorDivBcastRight8(_FloorDivNet):
    Y, B = "float32[32,32]", "float32[32]"


class FloorDivBcastLeft8(_FloorDivNet):
    Y, B = "float32[32,32]", "float32[128,64,32]"


class FloorDivBcastLeft8DP(FloorDivBcastLeft8):
    """FloorDivBcastLeft8 under dataset_strategy "data_parallel" (a variant; the UT's is "full_batch")."""


class CastDoubleStar8DP(CastDoubleStar8):
    """CastDoubleStar8 under dataset_strategy "data_parallel" (a variant; the UT's is "full_batch")."""
