"""Small nets that pin one operator rule of strategist's against MindSpore 2.9.0 (netgen.rule_cases, answers
recorded in tests/fixtures/ms/).

* Tril / Triu: MindSpore's TrilInfo and TriuInfo accept a split of any dim (each rank rewrites ``diagonal``
  for its row/column slice, GetDiag), configured or generated.
* VirtualDatasetInfo: per-input dataset strategies that split one dim each by one shard number; unsplit
  inputs beside split ones are taken; in auto_parallel the shard number must be the device count.
"""
from mindspore import Parameter, nn, ops
from mindspore.common.initializer import initializer
from mindspore.ops import operations as P


class TrilConfigured(nn.Cell):
    """A MatMul into a Tril configured ((2, 4, 1)): rows of the last two dims split by 4."""

    def __init__(self, strategy=((2, 4, 1),), diagonal=1):
        super().__init__()
        self.bmm = P.BatchMatMul()
        self.tril = P.Tril(diagonal=diagonal).shard(strategy)
        self.sig = P.Sigmoid()
        self.w = Parameter(initializer("ones", [4, 16, 16]), "w")
        self.example_inputs = {"x": "float32[4,16,16]"}

    def construct(self, x):
        return self.sig(self.tril(self.bmm(x, self.w)))


class TrilColumns(TrilConfigured):
    """The same net, the Tril's columns split by 8."""

    def __init__(self):
        super().__init__(strategy=((1, 1, 8),), diagonal=-2)


class TriuFollows(nn.Cell):
    """A MatMul configured ((2, 4), (4, 1)) feeding ops.triu, nothing configured on it: it follows the
    MatMul's output, both dims split."""

    def __init__(self):
        super().__init__()
        self.mm = P.MatMul().shard(((2, 4), (4, 1)))
        self.relu = P.ReLU()
        self.w = Parameter(initializer("ones", [32, 16]), "w")
        self.example_inputs = {"x": "float32[16,32]"}

    def construct(self, x):
        return self.relu(ops.triu(self.mm(x, self.w), 1))


class MulReLUBias(nn.Cell):
    """x * w, ReLU, + b: a 4-D input and a 1-D bias, for per-input dataset strategies."""

    def __init__(self):
        super().__init__()
        self.mul = P.Mul()
        self.relu = P.ReLU()
        self.add = P.Add()
        self.w = Parameter(initializer("ones", [16, 16, 8, 8]), "w")
        self.example_inputs = {"x": "float32[16,16,8,8]", "b": "float32[8]"}

    def construct(self, x, b):
        return self.add(self.relu(self.mul(x, self.w)), b)


class BiasFirst(MulReLUBias):
    """MulReLUBias with the bias as the first input."""

    def __init__(self):
        super().__init__()
        self.example_inputs = {"b": "float32[8]", "x": "float32[16,16,8,8]"}

    def construct(self, b, x):
        return self.add(self.relu(self.mul(x, self.w)), b)
