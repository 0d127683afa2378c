"""Re-expressions of OneHot / softmax-loss sharding-propagation UTs in MindSpore's tests/ut/python/parallel/.
All: auto_parallel, search_mode="sharding_propagation", 8 devices, global_rank 0.

* SoftmaxLossAuto <- test_auto_parallel_softmax_loss.py, test_softmax_cross_entropy_loss_auto_parallel
  (dataset_strategy "full_batch"; x[64,32] y[64,32] b[64,64]; MatMul(transpose_b) -> GeLU -> the UT's
  NetWithLoss P.SoftmaxCrossEntropyWithLogits(predict, b)[0], kept since it is an operator; nothing configured;
  the GradWrap is dropped)
* OneHotArith     <- test_auto_parallel_onehot.py, test_auto_parallel_arithmetic ("full_batch"; x[64,32] y[32,64]
  b int32[64]; MatMul, OneHot(b, 64, 1.0, 0.0), MatMul; nothing configured; VirtualLoss/GradWrap dropped)
* OneHotModel     <- test_auto_parallel_onehot.py, test_auto_parallel_arithmetic_model (dataset_strategy
  "data_parallel"; x[8,32] b int32[8]; MatMul w[32,64] -> OneHot ((1,8),(),()) -> MatMul; the UT trains through
  Model with Momentum; its matmul2 multiplies [8,64] by the [8,64] one-hot, which 2.9.0 rejects ("For 'MatMul'
  the input dimensions must be equal, but got 'x1_col': 64 and 'x2_row': 8"), so matmul2 has transpose_b=True
  here)
"""
import mindspore as ms
from mindspore import Parameter, Tensor, nn
from mindspore.common.initializer import initializer
from mindspore.ops import operations as P


class SoftmaxLossAuto(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul = P.MatMul(transpose_b=True)
        self.gelu = P.GeLU()
        self.loss = P.SoftmaxCrossEntropyWithLogits()
        self.example_inputs = {"x": "float32[64,32]", "y": "float32[64,32]", "b": "float32[64,64]"}

    def construct(self, x, y, b):
        predict = self.gelu(self.matmul(x, y))
        return self.loss(predict, b)[0]


class OneHotArith(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul = P.MatMul()
        self.one_hot = P.OneHot()
        self.on_value = Tensor(1.0, ms.float32)
        self.off_value = Tensor(0.0, ms.float32)
        self.matmul2 = P.MatMul()
        self.example_inputs = {"x": "float32[64,32]", "y": "float32[32,64]", "b": "int32[64]"}

    def construct(self, x, y, b):
        out = self.matmul(x, y)
        out1 = self.one_hot(b, 64, self.on_value, self.off_value)
        return self.matmul2(out, out1)


class OneHotModel(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul = P.MatMul()
        self.one_hot = P.OneHot().shard(((1, 8), (), ()))
        self.on_value = Tensor(1.0, ms.float32)
        self.off_value = Tensor(0.0, ms.float32)
        self.matmul2 = P.MatMul(transpose_b=True)
        self.w = Parameter(initializer("zeros", (32, 64), ms.float32), "weight")
        self.example_inputs = {"x": "float32[8,32]", "b": "int32[8]"}

    def construct(self, x, b):
        out = self.matmul(x, self.w)
        out1 = self.one_hot(b, 64, self.on_value, self.off_value)
        return self.matmul2(out, out1)
