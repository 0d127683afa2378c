"""Re-expressions of convolution sharding-propagation tests in MindSpore's UT folder tests/ut/python/parallel/.
File names marked (?) were inferred from the contents, not confirmed. All: auto_parallel,
search_mode="sharding_propagation", dataset_strategy "full_batch" (setup_function); the UTs wrap the net in
TrainOneStepCell(Momentum), here the forward net. The unused construct() input ``b`` of the UT is kept.

Conv2D -> BatchNorm2d -> MaxPool -> Conv2DTranspose chain, from a UT file of conv2d/bn/maxpool/conv2d_transpose
sharding-propagation tests (?; 8 devices; a ReLU with the configured strategy is applied first and last -- the same
primitive instance, so both calls carry the strategy):

* ConvBnPool8111 <- test_sharding_propagation_8x1x1x1 (relu ((8,1,1,1),)); the UT asserts Conv2D
  [[8,1,1,1],[1,1,1,1]], BatchNorm [[8,1,1,1],[1],[1],[1],[1]], MaxPool [[8,1,1,1]], Conv2DTranspose
  [[8,1,1,1],[1,1,1,1]]
* ConvBnPool1118 <- test_sharding_propagation_1x1x1x8 (relu ((1,1,1,8),)); asserts the same with [1,1,1,8] on
  every first input
* ConvBnPool1121 <- test_sharding_propagation_1x1x2x1 (relu ((1,1,2,1),), set_algo_parameters(
  fully_use_devices=False)); asserts [1,1,2,1] on every first input

Conv2D -> Neg, from tests/ut/python/parallel/test_conv2d.py (?):

* Conv2dKernelLtStride <- test_conv2d_kernel_size_smaller_than_stride_and_split_hw (16 devices; conv2d
  kernel 1, pad_mode same, stride 2, ((1,1,4,4),(1,1,1,1)); neg unconfigured; the UT's assert looks for a ReLU
  the net does not have, so it asserts nothing)
"""
import mindspore as ms
from mindspore import Parameter, nn, ops
from mindspore.common.initializer import initializer


def _w(shape, name):
    return Parameter(initializer("ones", shape, ms.float32), name=name)


class _ConvBnPool(nn.Cell):
    def __init__(self, strategy):
        super().__init__()
        self.relu = ops.ReLU().shard(strategy)
        self.conv2d = ops.Conv2D(out_channel=8, kernel_size=3, pad_mode="same", stride=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2d_transpose = ops.Conv2DTranspose(out_channel=8, kernel_size=4, pad_mode="same", stride=2)
        self.max_pool = ops.MaxPool(kernel_size=2, strides=2)
        self.conv2d_weight = _w((8, 16, 3, 3), "w1")
        self.conv2d_transpose_weight = _w((8, 16, 4, 4), "w2")
        self.example_inputs = {"x": "float32[32,16,64,64]", "b": "float32[32,16,8,8]"}

    def construct(self, x, b):
        out = self.relu(x)                                   # (32, 16, 64, 64)
        out = self.conv2d(out, self.conv2d_weight)           # (32, 8, 64, 64)
        out = self.bn(out)
        out = self.max_pool(out)                             # (32, 8, 32, 32)
        out = self.conv2d_transpose(out, self.conv2d_transpose_weight, (32, 16, 64, 64))
        return self.relu(out)                                # (32, 16, 64, 64)


class ConvBnPool8111(_ConvBnPool):
    def __init__(self):
        super().__init__(((8, 1, 1, 1),))


class ConvBnPool1118(_ConvBnPool):
    def __init__(self):
        super().__init__(((1, 1, 1, 8),))


class ConvBnPool1121(_ConvBnPool):
    def __init__(self):
        super().__init__(((1, 1, 2, 1),))


class Conv2dKernelLtStride(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv2d = ops.Conv2D(out_channel=8, kernel_size=1, pad_mode="same", stride=2).shard(
            ((1, 1, 4, 4), (1, 1, 1, 1)))
        self.neg = ops.Neg()
        self.conv2d_weight = _w((8, 16, 1, 1), "w1")
        self.example_inputs = {"x": "float32[32,16,8,8]", "b": "float32[32,16,8,8]"}

    def construct(self, x, b):
        return self.neg(self.conv2d(x, self.conv2d_weight))
