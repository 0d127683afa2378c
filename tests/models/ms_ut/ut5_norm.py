"""Re-expressions of normalisation sharding-propagation UTs in MindSpore's tests/ut/python/parallel/.
All: auto_parallel, search_mode="sharding_propagation", global_rank 0, dataset_strategy "full_batch"
(setup_function), nothing configured unless noted; wrappers (TrainOneStepCell, GradWrap, NetWithLoss) dropped.

* LayerNormAuto16  <- test_layer_norm.py, test_layer_norm_auto_parallel (16 devices; x, b [16,64,32,16];
  Mul w1[16,64,32,16] -> LayerNorm(begin_norm_axis=2, begin_params_axis=1) gamma/beta [64,32,16] -> Mul b)
* RmsNormAuto16    <- test_rms_norm.py, test_rms_norm_auto_parallel (16 devices; x, b [16,64,32]; Mul
  w1[16,64,32] -> RmsNorm gamma[64,32] -> Mul b). NB the UT compiles with search_mode="dynamic_programming";
  here, like every case of this corpus, with sharding_propagation
* RmsNormAuto2d16  <- test_rms_norm.py, test_rms_norm_auto_parallel_2d (as above with x, w, b [16,64],
  gamma[64]; the UT's search_mode is dynamic_programming too)
* L2Normalize8     <- test_auto_parallel_l2normalize.py, test_auto_parallel_l2normalize (8 devices; x, y, b
  [128,64,64]; two L2Normalize (axis 0) on y and x, Mul, Mul b)
* TwoBN8           <- test_auto_parallel_two_bn.py, test_two_bn (8 devices; set_algo_parameters(
  elementwise_op_strategy_follow=True); x[64,64]; BatchNorm1d(64) -> ReLU -> Add a constant [64,64] ->
  BatchNorm1d(64), each BatchNorm in its own Blockcell; the UT asserts 5 strategies)
"""
import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, nn
from mindspore.common.initializer import initializer
from mindspore.ops import operations as P


class LayerNormAuto16(nn.Cell):
    def __init__(self):
        super().__init__()
        self.mul = P.Mul()
        self.layer_norm = P.LayerNorm(begin_norm_axis=2, begin_params_axis=1)
        self.mul2 = P.Mul()
        self.mul_weight = Parameter(Tensor(np.ones([16, 64, 32, 16]), dtype=ms.float32), "w1")
        self.gamma = Parameter(initializer('ones', [64, 32, 16]), name="gamma")
        self.beta = Parameter(initializer('zeros', [64, 32, 16]), name="beta")
        self.example_inputs = {"x": "float32[16,64,32,16]", "b": "float32[16,64,32,16]"}

    def construct(self, x, b):
        out = self.mul(x, self.mul_weight)
        out, _, _ = self.layer_norm(out, self.gamma, self.beta)
        return self.mul2(out, b)


class _RmsNormNet(nn.Cell):
    SHAPE = (16, 64, 32)

    def __init__(self):
        super().__init__()
        self.mul = P.Mul()
        self.rms_norm = P.RmsNorm()
        self.mul2 = P.Mul()
        self.mul_weight = Parameter(Tensor(np.ones(self.SHAPE), dtype=ms.float32), "w1")
        self.gamma = Parameter(initializer('ones', list(self.SHAPE[1:])), name="gamma")
        spec = f"float32[{','.join(map(str, self.SHAPE))}]"
        self.example_inputs = {"x": spec, "b": spec}

    def construct(self, x, b):
        out = self.mul(x, self.mul_weight)
        out, _ = self.rms_norm(out, self.gamma)
        return self.mul2(out, b)


class RmsNormAuto16(_RmsNormNet):
    pass


class RmsNormAuto2d16(_RmsNormNet):
    SHAPE = (16, 64)


class L2Normalize8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.norm1 = P.L2Normalize()
        self.norm2 = P.L2Normalize()
        self.mul1 = P.Mul()
        self.mul2 = P.Mul()
        self.example_inputs = {k: "float32[128,64,64]" for k in ("x", "y", "b")}

    def construct(self, x, y, b):
        y = self.norm1(y)
        x = self.norm2(x)
        out = self.mul1(x, y)
        return self.mul2(out, b)


class Blockcell(nn.Cell):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(64, momentum=0.9)

    def construct(self, x):
        return self.bn(x)


class TwoBN8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.block1 = Blockcell()
        self.block2 = Blockcell()
        self.relu = P.ReLU()
        self.add = P.Add()
        self.bias = Tensor(np.ones([64, 64]), dtype=ms.float32)
        self.example_inputs = {"x": "float32[64,64]"}

    def construct(self, x):
        out = self.block1(x)
        out = self.relu(out)
        out = self.add(out, self.bias)
        return self.block2(out)


class L2Normalize8DP(L2Normalize8):
    """L2Normalize8 under dataset_strategy "data_parallel" (a variant; the UT's is "full_batch")."""


class RmsNormAuto16DP(RmsNormAuto16):
    """RmsNormAuto16 under dataset_strategy "data_parallel" (a variant; the UT's is "full_batch")."""
