"""Re-expressions of an (older) version of MindSpore's UT tests/ut/python/parallel/test_auto_parallel_activation.py:
Mul -> Sigmoid -> ReLU, 16 devices, full_batch, sharding_propagation (TrainOneStepCell wrapper dropped).

* Activation1 <- test_auto_parallel_activation1 (mul ((4,4),(4,4)))
* Activation2 <- test_auto_parallel_activation2 (sigmoid ((4,4),))
* Activation3 <- auto_parallel_activation3 (not collected by pytest; mul ((4,4),(4,4)), relu ((4,4),))
* Activation4 <- test_auto_parallel_activation4 (mul ((4,4),(4,4)), relu ((8,2),); the UT passes the old
  auto_parallel_search_mode= spelling)
"""
import mindspore as ms
from mindspore import Parameter, nn, ops
from mindspore.common.initializer import initializer


class _MulSigmoidRelu(nn.Cell):
    def __init__(self, s1=None, s2=None, s3=None):
        super().__init__()
        self.mul = ops.Mul().shard(s1)
        self.sigmoid = ops.Sigmoid().shard(s2)
        self.relu = ops.ReLU().shard(s3)
        self.w1 = Parameter(initializer("normal", (64, 32), ms.float32), name="w1")
        self.example_inputs = {"x": "float32[64,32]", "b": "float32[64,32]"}

    def construct(self, x, b):
        return self.relu(self.sigmoid(self.mul(x, self.w1)))


class Activation1(_MulSigmoidRelu):
    def __init__(self):
        super().__init__(((4, 4), (4, 4)))


class Activation2(_MulSigmoidRelu):
    def __init__(self):
        super().__init__(None, ((4, 4),))


class Activation3(_MulSigmoidRelu):
    def __init__(self):
        super().__init__(((4, 4), (4, 4)), None, ((4, 4),))


class Activation4(_MulSigmoidRelu):
    def __init__(self):
        super().__init__(((4, 4), (4, 4)), None, ((8, 2),))
