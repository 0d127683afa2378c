"""Re-expressions of small-graph sharding-propagation UTs in MindSpore's tests/ut/python/parallel/. All:
auto_parallel, search_mode="sharding_propagation", 8 devices, global_rank 0, dataset_strategy "full_batch"
(setup_function). Forward nets only (the UTs compile NetWithLoss(VirtualLoss) or a two-optimizer train step).

test_auto_parallel_star_partial_strategy.py (set_algo_parameters(fully_use_devices=False) -- MindSpore 2.9.0's
default; x[128,1000]; one weight[128,1000] read by Mul1..Mul4, BiasAdd bias[1000]; Mul3 and Mul4 never
configured; only compilation checked):
* StarConsistency1 <- test_star_strategy_consistency1 (mul1 ((2,4),(2,4)), relu1 ((4,1),), bias_add ((8,1),(1,)),
  relu2 ((2,2),), add ((1,8),(1,8)))
* StarConsistency2 <- test_star_strategy_consistency2 (mul2 ((1,4),(1,4)), relu1 ((2,1),), bias_add ((4,2),(2,)),
  relu2 ((2,2),), add ((8,1),(8,1)))
* StarConsistency3 <- test_star_strategy_consistency3 (relu1 ((8,1),), bias_add ((1,4),(4,)), relu2 ((4,1),),
  add ((2,2),(2,2)))
* StarConsistency4 <- test_star_strategy_consistency4 (mul1 ((1,8),(1,8)), mul2 ((1,4),(1,4)) on the shared
  weight); the UT expects RuntimeError

test_auto_parallel_triangle_overwrite.py:
* TriangleOverwrite <- test_triangle_strategy_consistency (mul1 ((2,4),(2,4)) -> {mul2 (weight), bias_add} ->
  add ((1,8),(1,8)) -> relu; weight shared by mul1 and mul2)

test_auto_parallel_double_subgraphs.py:
* DoubleSubgraphs8 <- test_double_subgraphs (_set_multi_subgraphs() -- a private setting verify cannot pass;
  x[8,8,8,8]: Mul wd -> Mul wt -> ReLU, then NetWithLoss's ReduceSum(-1) and ReduceMean(-1) as two outputs;
  nothing configured; the UT's TrainStepWarp (FTRL + Adam over the same weights) is dropped)
"""
import mindspore as ms
from mindspore import Parameter, nn
from mindspore.common.initializer import initializer
from mindspore.ops import operations as P


def _ones(shape, name):
    return Parameter(initializer("ones", shape, ms.float32), name=name)


class StarConsistency1(nn.Cell):
    strategies = {"mul1": ((2, 4), (2, 4)), "mul2": None, "relu1": ((4, 1),), "bias_add": ((8, 1), (1,)),
                  "relu2": ((2, 2),), "add": ((1, 8), (1, 8))}

    def __init__(self):
        super().__init__()
        self.mul1 = P.Mul()
        self.mul2 = P.Mul()
        self.mul3 = P.Mul()
        self.mul4 = P.Mul()
        self.relu1 = P.ReLU()
        self.relu2 = P.ReLU()
        self.ba1 = P.BiasAdd()
        self.add = P.Add()
        self.weight = _ones((128, 1000), "weight")
        self.bias = _ones((1000,), "bias")
        s = self.strategies
        self.mul1.shard(s["mul1"])
        self.mul2.shard(s["mul2"])
        self.relu1.shard(s["relu1"])
        self.relu2.shard(s["relu2"])
        self.ba1.shard(s["bias_add"])
        self.add.shard(s["add"])
        self.example_inputs = {"inputs": "float32[128,1000]"}

    def construct(self, inputs):
        x = self.mul1(inputs, self.weight)
        y = self.relu1(x)
        y = self.mul2(y, self.weight)
        z = self.mul3(x, self.weight)
        z = self.ba1(z, self.bias)
        x = self.add(y, z)
        x = self.mul4(x, self.weight)
        return self.relu2(x)


class StarConsistency2(StarConsistency1):
    strategies = {"mul1": None, "mul2": ((1, 4), (1, 4)), "relu1": ((2, 1),), "bias_add": ((4, 2), (2,)),
                  "relu2": ((2, 2),), "add": ((8, 1), (8, 1))}


class StarConsistency3(StarConsistency1):
    strategies = {"mul1": None, "mul2": None, "relu1": ((8, 1),), "bias_add": ((1, 4), (4,)),
                  "relu2": ((4, 1),), "add": ((2, 2), (2, 2))}


class StarConsistency4(StarConsistency1):
    strategies = {"mul1": ((1, 8), (1, 8)), "mul2": ((1, 4), (1, 4)), "relu1": None, "bias_add": None,
                  "relu2": None, "add": None}


class TriangleOverwrite(nn.Cell):
    def __init__(self):
        super().__init__()
        self.mul1 = P.Mul().shard(((2, 4), (2, 4)))
        self.mul2 = P.Mul()
        self.ba1 = P.BiasAdd()
        self.weight = _ones((128, 1000), "weight")
        self.bias = _ones((1000,), "bias")
        self.add = P.Add().shard(((1, 8), (1, 8)))
        self.relu = P.ReLU()
        self.example_inputs = {"x": "float32[128,1000]"}

    def construct(self, x):
        out = self.mul1(x, self.weight)
        mul_out = self.mul2(out, self.weight)
        ba_out = self.ba1(out, self.bias)
        return self.relu(self.add(mul_out, ba_out))


class DoubleSubgraphs8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.mul = P.Mul()
        self.relu = P.ReLU()
        self.wd = _ones((8, 8, 8, 8), "wide")
        self.wt = _ones((8, 8, 8, 8), "l")
        self.sum = P.ReduceSum()
        self.mean = P.ReduceMean()
        self.example_inputs = {"x": "float32[8,8,8,8]"}

    def construct(self, x):
        out = self.mul(x, self.wd)
        out = self.mul(out, self.wt)
        predict = self.relu(out)
        return self.sum(predict, -1), self.mean(predict, -1)
