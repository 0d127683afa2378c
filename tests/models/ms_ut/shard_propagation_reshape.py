"""Re-expressions of MindSpore's UT tests/ut/python/parallel/test_auto_parallel_shard_propagation_reshape.py
(auto_parallel, search_mode="sharding_propagation", dataset_strategy="full_batch" from setup_function).

* ReshapeTupleConcat   <- test_reshape_tuple_concat   (MyTestNet, device_num=1; inputs int64 as np.array of ints)
* ReshapeTupleConcat2  <- test_reshape_tuple_concat2  (MyTestNet2, device_num=8, max ((8,1),), sub ((1,8),(1,1)))
* ReshapeTupleConcat3  <- test_reshape_tuple_concat3  (max ((4,2),), sub ((2,4),(1,1)))
* ReshapeTupleConcat4  <- test_reshape_tuple_concat4  (max ((2,4),), sub ((4,2),(1,1)))
* ReshapeTupleConcat5  <- test_reshape_tuple_concat5  (max ((1,8),), sub ((8,1),(1,1)))

The UT wraps MyTestNet2 in TrainOneStepCell(Momentum); here the forward net only.
"""
import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, nn, ops
from mindspore.common.initializer import initializer


class ReshapeTupleConcat(nn.Cell):
    def __init__(self):
        super().__init__()
        self.add = ops.Add().shard(((1, 1), (1, 1)))
        self.reshape_x = ops.Reshape()
        self.reshape_sum = ops.Reshape()
        self.concat = ops.Concat(0)
        self.reshape_out = ops.Reshape()
        self.example_inputs = {"x": "int64[1,2,2]", "y": "int64[2,4]", "z": "int64[2,4]"}

    def construct(self, x, y, z):
        a = self.reshape_x(x, (2, 2))
        s = self.reshape_sum(self.add(y, z), (4, 2))
        return self.reshape_out(self.concat((a, s)), (2, 6))


class _ConcatThenSub(nn.Cell):
    MAX = None
    SUB = None

    def __init__(self, relu_strategy=None):
        super().__init__()
        self.reshape = ops.Reshape()
        self.concat = ops.Concat(0)
        self.add = ops.Add()
        self.relu = ops.ReLU().shard(relu_strategy)
        self.max = ops.ReduceMax(keep_dims=True).shard(self.MAX)
        self.sub = ops.Sub().shard(self.SUB)
        self.w1 = Parameter(initializer("normal", (64, 32000), ms.float32), name="w1")
        self.zeros = Tensor(np.zeros([32000, 32]), dtype=ms.float32)
        self.example_inputs = {"x": "float32[64,32000]", "b": "float32[32000,32]"}

    def construct(self, x, b):
        dead = self.add(b, self.zeros)
        dead = self.reshape(dead, (32, 32000))
        dead = self.concat((dead, x))
        h = self.relu(self.add(x, self.w1))
        return self.sub(h, self.max(h))


class ReshapeTupleConcat2(_ConcatThenSub):
    MAX = ((8, 1),)
    SUB = ((1, 8), (1, 1))


class ReshapeTupleConcat3(_ConcatThenSub):
    MAX = ((4, 2),)
    SUB = ((2, 4), (1, 1))


class ReshapeTupleConcat4(_ConcatThenSub):
    MAX = ((2, 4),)
    SUB = ((4, 2), (1, 1))


class ReshapeTupleConcat5(_ConcatThenSub):
    MAX = ((1, 8),)
    SUB = ((8, 1), (1, 1))
