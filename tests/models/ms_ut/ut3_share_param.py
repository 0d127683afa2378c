"""Re-expressions of test_sp_share_param1..3 in MindSpore's UT folder tests/ut/python/parallel/ (a file of
"share_param case with sharding_propagation"; name not confirmed). All: auto_parallel,
search_mode="sharding_propagation", 8 devices, dataset_strategy "full_batch", Mul1 ((2,4),(2,4)),
Add ((8,1),(8,1)), Mul2 and ReLU unconfigured; one [64,32] weight read by both Muls. The UT wraps the net in
TrainOneStepCell and only asserts that compilation succeeds.

* ShareParam1 <- test_sp_share_param1 (no Cast)
* ShareParam2 <- test_sp_share_param2 (a Cast of the weight feeds Mul1)
* ShareParam3 <- test_sp_share_param3 (a Cast of the weight feeds Mul2)
"""
import mindspore as ms
from mindspore import Parameter, nn
from mindspore.common.initializer import initializer
from mindspore.ops import operations as P


class ShareParam1(nn.Cell):
    cast_on = None

    def __init__(self, strategy1=((2, 4), (2, 4)), strategy2=((8, 1), (8, 1))):
        super().__init__()
        self.mul1 = P.Mul().shard(strategy1)
        self.mul2 = P.Mul()
        self.cast = P.Cast()
        self.add = P.Add().shard(strategy2)
        self.relu = P.ReLU()
        self.mul_weight = Parameter(initializer("ones", (64, 32), ms.float32), "w1")
        self.example_inputs = {"x": "float32[64,32]", "b": "float32[64,32]"}

    def construct(self, x, b):
        w1 = self.mul_weight
        w2 = self.mul_weight
        if self.cast_on == 1:
            w1 = self.cast(self.mul_weight, ms.float32)
        if self.cast_on == 2:
            w2 = self.cast(self.mul_weight, ms.float32)
        out = self.mul1(x, w1)
        out1 = self.mul2(b, w2)
        out = self.add(out, out1)
        return self.relu(out)


class ShareParam2(ShareParam1):
    cast_on = 1


class ShareParam3(ShareParam1):
    cast_on = 2
