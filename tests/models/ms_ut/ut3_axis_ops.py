"""Re-expressions of sharding-propagation tests in MindSpore's UT folder tests/ut/python/parallel/ whose operators
carry an axis that may not be split (cumulative ops, Softmax over two axes, Cholesky). File names marked (?) were
inferred from the contents, not confirmed.

* CumOps8         <- test_cum_ops.py: test_cum_ops (auto_parallel, search_mode="sharding_propagation", 8 devices,
  dataset_strategy "full_batch"; the UT compiles the forward net directly; CumSum ((2,2,1,2),) over axis -2,
  everything else unconfigured). The UT asserts [[2,2,1,2]] for CumProd, Cummax, Cummin, ReverseV2, Lgamma,
  Trunc, LogSoftmax, Softmax and Elu.
* CholeskySoftmax8 <- test_element_wise_ops_with_axis.py (?): test_element_wise_ops_with_axis (8 devices,
  full_batch, Softmax(axis=(-1,-2)) ((2,4,1,1),), Add and Cholesky unconfigured). The UT asserts Cholesky
  [[2,4,1,1]].
"""
import mindspore as ms
from mindspore import Parameter, nn
from mindspore.common.initializer import initializer
from mindspore.ops import operations as P


class CumOps8(nn.Cell):
    def __init__(self, strategy=((2, 2, 1, 2),)):
        super().__init__()
        self.add = P.Add()
        self.weight = Parameter(initializer("ones", (4, 8, 4, 8), ms.float32), "w1")
        self.cum_sum = P.CumSum().shard(strategy)
        self.cum_prod = P.CumProd()
        self.cum_max = P.Cummax(axis=-2)
        self.cum_min = P.Cummin(axis=-2)
        self.reversev2 = P.ReverseV2(axis=[-2])
        self.log_softmax = P.LogSoftmax(axis=-2)
        self.softmax = P.Softmax(axis=-2)
        self.lgamma = P.Lgamma()
        self.trunc = P.Trunc()
        self.elu_act = P.Elu(alpha=1.0)
        self.example_inputs = {"x": "float32[4,8,4,8]", "y": "float32[4,8,4,8]"}

    def construct(self, x, y):
        out = self.add(x, self.weight)
        out = self.cum_sum(out, -2)
        out = self.cum_prod(out, -2)
        out, _ = self.cum_max(out)
        out, _ = self.cum_min(out)
        out = self.reversev2(out)
        out = self.lgamma(out)
        out = self.trunc(out)
        out = self.log_softmax(out)
        out = self.softmax(out)
        return self.elu_act(out)


class CholeskySoftmax8(nn.Cell):
    def __init__(self, strategy=((2, 4, 1, 1),)):
        super().__init__()
        self.add = P.Add()
        self.weight = Parameter(initializer("ones", (4, 8, 8, 8), ms.float32), "w1")
        self.softmax = P.Softmax(axis=(-1, -2)).shard(strategy)
        self.cholesky = P.Cholesky()
        self.example_inputs = {"x": "float32[4,8,8,8]", "y": "float32[4,8,8,8]"}

    def construct(self, x, y):
        out = self.add(x, self.weight)
        out = self.softmax(out)
        return self.cholesky(out)
