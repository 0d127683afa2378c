"""Re-expressions of the Reshape sharding-propagation tests in a MindSpore UT file under tests/ut/python/parallel/
(its tests are test_reshape_reshape, test_reshape_auto_1..6/8/9, test_reshape_depend_reshape; "Feature: Sharding
propagation for Reshape"; file name not confirmed). All: auto_parallel, search_mode="sharding_propagation",
8 devices, global_rank 0, dataset_strategy "full_batch" (setup_function). The UTs wrap the Net in
GradWrap(NetWithLoss(VirtualLoss)) (depend_reshape: ReduceMean loss) and only check compilation, except where noted.

* ReshapeReshape     <- test_reshape_reshape (x[64,28,1,1]; ReLU ((1,1,1,1),) -> Reshape (64,28) -> Reshape (64,28,1))
* ReshapeAuto1       <- test_reshape_auto_1 (ReLU ((1,1,1,1),) -> Reshape (64,28) -> MatMul ((2,1),(1,4)) w[28,64])
* ReshapeAuto2       <- test_reshape_auto_2 (ReLU -> ReLU -> Reshape (64,28) -> MatMul ((2,1),(1,4)) -> Reshape
  (128,32) -> Add ((2,4),(2,4)) w[128,32])
* ReshapeAuto3       <- test_reshape_auto_3 (x[2048,30,1024]; Mul ((8,1,1),(1,)) gamma, Add ((8,1,1),(1,)) beta ->
  Cast fp16 -> Reshape (-1,1024) -> Cast fp32 -> ReduceMean(keep_dims) ((8,1),) axis -1)
* ReshapeAuto4       <- test_reshape_auto_4 (as 3, ReduceMean unconfigured)
* ReshapeAuto5       <- test_reshape_auto_5 (Mul unconfigured, Add ((8,1,1),(1,)), no Casts, ReduceMean ((2,4),))
* ReshapeAuto6       <- test_reshape_auto_6 (x[8,8192,1], y[8,8192]; wide&deep: Reshape y -> mask, ReLU, Mul
  ((8,1,1),(8,1,1)) used twice, ReduceSum axis 1, Reshape (-1,1), x + w[8,8192,64], Reshape (-1,8192*64), add)
* ReshapeDependReshape <- test_reshape_depend_reshape (x[128,96], y[256,48]; Mul ((2,4),(2,4)), ReLU, Reshape
  (96,32,4), Depend, Reshape (128,96), `+`); the UT expects RuntimeError
* ReshapeAuto8       <- test_reshape_auto_8 (gamma[2048,2048] read by ReLU ((1,1),) and MatMul ((1,1),(1,8));
  x + relu(gamma) -> MatMul -> ReduceMean); the UT expects RuntimeError
* ReshapeAuto9       <- test_reshape_auto_9 (as 8, MatMul ((8,1),(1,1))); compiles
"""
import mindspore as ms
from mindspore import Parameter, nn
from mindspore.common import dtype as mstype
from mindspore.common.initializer import initializer
from mindspore.ops import functional as F
from mindspore.ops import operations as P


def _ones(shape, name):
    return Parameter(initializer("ones", shape, ms.float32), name=name)


class ReshapeReshape(nn.Cell):
    def __init__(self):
        super().__init__()
        self.reshape = P.Reshape()
        self.relu = P.ReLU().shard(((1, 1, 1, 1),))
        self.example_inputs = {"x": "float32[64,28,1,1]"}

    def construct(self, x):
        x = self.relu(x)
        out = self.reshape(x, (64, 28))
        return self.reshape(out, (64, 28, 1))


class ReshapeAuto1(nn.Cell):
    def __init__(self):
        super().__init__()
        self.relu = P.ReLU().shard(((1, 1, 1, 1),))
        self.reshape = P.Reshape()
        self.matmul = P.MatMul().shard(((2, 1), (1, 4)))
        self.matmul_weight = _ones((28, 64), "weight")
        self.example_inputs = {"x": "float32[64,28,1,1]"}

    def construct(self, x):
        x = self.relu(x)
        out = self.reshape(x, (64, 28))
        return self.matmul(out, self.matmul_weight)


class ReshapeAuto2(nn.Cell):
    def __init__(self):
        super().__init__()
        self.relu = P.ReLU()
        self.relu2 = P.ReLU()
        self.reshape = P.Reshape()
        self.matmul = P.MatMul().shard(((2, 1), (1, 4)))
        self.matmul_weight = _ones((28, 64), "weight")
        self.add = P.Add().shard(((2, 4), (2, 4)))
        self.add_weight = _ones((128, 32), "weight1")
        self.example_inputs = {"x": "float32[64,28,1,1]"}

    def construct(self, x):
        out = self.relu(x)
        out = self.relu2(out)
        out = self.reshape(out, (64, 28))
        out = self.matmul(out, self.matmul_weight)
        out = self.reshape(out, (128, 32))
        return self.add(out, self.add_weight)


class ReshapeAuto3(nn.Cell):
    mean_strategy = ((8, 1),)
    mul_strategy = ((8, 1, 1), (1,))
    casts = True

    def __init__(self):
        super().__init__()
        self.gamma = _ones((1024,), "gamma")
        self.beta = _ones((1024,), "beta")
        self.add = P.Add().shard(((8, 1, 1), (1,)))
        self.mul = P.Mul()
        if self.mul_strategy:
            self.mul.shard(self.mul_strategy)
        self.mean = P.ReduceMean(keep_dims=True)
        if self.mean_strategy:
            self.mean.shard(self.mean_strategy)
        self.reshape = P.Reshape()
        self.dtype1 = mstype.float16
        self.dtype2 = mstype.float32
        self.example_inputs = {"x": "float32[2048,30,1024]"}

    def construct(self, x):
        out = self.add(self.mul(x, self.gamma), self.beta)
        if self.casts:
            out = F.cast(out, self.dtype1)
        out = self.reshape(out, (-1, 1024))
        if self.casts:
            out = F.cast(out, self.dtype2)
        return self.mean(out, -1)


class ReshapeAuto4(ReshapeAuto3):
    mean_strategy = None


class ReshapeAuto5(ReshapeAuto3):
    mean_strategy = ((2, 4),)
    mul_strategy = None
    casts = False


class ReshapeAuto6(nn.Cell):
    def __init__(self):
        super().__init__()
        self.relu = P.ReLU()
        self.mul = P.Mul().shard(((8, 1, 1), (8, 1, 1)))
        self.reshape = P.Reshape()
        self.reduce_sum = P.ReduceSum()
        self.wide_w = _ones((8, 1024 * 8, 64), "weight")
        self.example_inputs = {"x": "float32[8,8192,1]", "y": "float32[8,8192]"}

    def construct(self, x, y):
        mask = self.reshape(y, (8, 1024 * 8, 1))
        w_id = self.relu(x)
        wx = self.mul(w_id, mask)
        wide_out = self.reshape(self.reduce_sum(wx, 1), (-1, 1))
        deep_id = x + self.wide_w
        vx = self.mul(deep_id, mask)
        deep_in = self.reshape(vx, (-1, 1024 * 8 * 64))
        return wide_out + deep_in


class ReshapeDependReshape(nn.Cell):
    def __init__(self):
        super().__init__()
        self.reshape1 = P.Reshape()
        self.reshape2 = P.Reshape()
        self.relu = P.ReLU()
        self.depend = P.Depend()
        self.mul = P.Mul().shard(((2, 4), (2, 4)))
        self.mul_weight = _ones((128, 96), "weight")
        self.add = P.Add().shard(((4, 2), (4, 2)))
        self.example_inputs = {"x": "float32[128,96]", "y": "float32[256,48]"}

    def construct(self, x, y):
        out1 = self.mul(x, self.mul_weight)
        y = self.relu(y)
        out2 = self.reshape1(y, (96, 32, 4))
        out3 = self.depend(out2, out1)
        out3 = self.reshape2(out3, (128, 96))
        return out1 + out3


class ReshapeAuto8(nn.Cell):
    matmul_strategy = ((1, 1), (1, 8))

    def __init__(self):
        super().__init__()
        self.gamma = _ones((2048, 2048), "gamma")
        self.add = P.Add()
        self.relu = P.ReLU().shard(((1, 1),))
        self.mul2 = P.MatMul().shard(self.matmul_strategy)
        self.mean = P.ReduceMean(keep_dims=True)
        self.example_inputs = {"x": "float32[2048,2048]"}

    def construct(self, x):
        out = self.add(x, self.relu(self.gamma))
        out = self.mul2(out, self.gamma)
        return self.mean(out, -1)


class ReshapeAuto9(ReshapeAuto8):
    matmul_strategy = ((8, 1), (1, 1))
