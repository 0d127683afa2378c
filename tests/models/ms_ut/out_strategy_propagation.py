"""Re-expressions of MindSpore's UT tests/ut/python/parallel/test_auto_parallel_out_strategy_propagation.py
(auto_parallel, search_mode="sharding_propagation", device_num=8, default dataset strategy data_parallel).

* OutStrategy1 <- test_out_strategy_propagate1 (fully_use_devices=True; matmul in ((4,2),(1,2)), no out_strategy)
* OutStrategy2 <- test_out_strategy_propagate2 (relu -> matmul in ((4,2),(1,2)) out ((8,1),) -> add)
* OutStrategy3 <- test_out_strategy_propagate3 (reshape x[32,64] to (-1,32) -> matmul -> relu)
* OutStrategy4 <- test_out_strategy_propagate4 (matmul -> reshape (4,-1) -> relu)
* OutStrategy5 <- test_out_strategy_propagate5 (matmul -> reshape (16,-1) -> relu)
* OutStrategy6 <- test_out_strategy_propagate6 (matmul -> reshape (-1,16) -> add b[32,16] -> relu)
* SaveLoad1    <- test_sharding_strategy_save_and_load1 (SAVE compile: matmul1 ((4,2),(1,2)), matmul2 ((2,4),(1,4)))
* SaveLoad2    <- test_sharding_strategy_save_and_load2 (SAVE compile, fully_use_devices=True, with out_strategy)
* SaveLoad4    <- test_sharding_strategy_save_and_load4 (Layout (2,2,2,2) dp,mp,sp,interleaved_parallel)
* SaveLoad5    <- test_sharding_strategy_save_and_load5 (Layout (2,2,2) dp,mp,sp)
* SaveLoad6    <- test_sharding_strategy_save_and_load6 (as 5, fully_use_devices=True)

The reshape target, a construct() argument in the UT, is a constructor argument here.
"""
import mindspore as ms
from mindspore import Layout, Parameter, nn, ops
from mindspore.common.initializer import initializer

DP, MP = 4, 2


def _w(shape, name):
    return Parameter(initializer("normal", shape, ms.float32), name=name)


class OutStrategy1(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul = ops.MatMul(transpose_b=True).shard(in_strategy=((DP, MP), (1, MP)), out_strategy=None)
        self.add = ops.Add()
        self.relu = ops.ReLU()
        self.w = _w((8, 32), "w")
        self.example_inputs = {"x": "float32[64,32]", "b": "float32[64,8]"}

    def construct(self, x, b):
        return self.relu(self.add(self.matmul(x, self.w), b))


class OutStrategy2(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul = ops.MatMul(transpose_b=True).shard(in_strategy=((DP, MP), (1, MP)),
                                                          out_strategy=((DP * MP, 1),))
        self.relu = ops.ReLU()
        self.add = ops.Add()
        self.w = _w((8, 32), "w")
        self.example_inputs = {"x": "float32[64,32]", "b": "float32[64,8]"}

    def construct(self, x, b):
        return self.add(self.matmul(self.relu(x), self.w), b)


class _ReshapeOutStrategy(nn.Cell):
    """A Reshape before (OutStrategy3) or after (OutStrategy4, 5) a MatMul with an out_strategy."""

    def __init__(self, shape, x):
        super().__init__()
        self.shape = shape
        self.reshape = ops.Reshape()
        self.matmul = ops.MatMul(transpose_b=True).shard(in_strategy=((DP, MP), (1, MP)),
                                                          out_strategy=((DP * MP, 1),))
        self.relu = ops.ReLU()
        self.w = _w((8, 32), "w")
        self.example_inputs = {"x": x}


class OutStrategy3(_ReshapeOutStrategy):
    def __init__(self, shape=(-1, 32)):
        super().__init__(shape, "float32[32,64]")

    def construct(self, x):
        return self.relu(self.matmul(self.reshape(x, self.shape), self.w))


class OutStrategy4(_ReshapeOutStrategy):
    def __init__(self, shape=(4, -1)):
        super().__init__(shape, "float32[64,32]")

    def construct(self, x):
        return self.relu(self.reshape(self.matmul(x, self.w), self.shape))


class OutStrategy5(OutStrategy4):
    def __init__(self, shape=(16, -1)):
        super().__init__(shape)


class OutStrategy6(nn.Cell):
    def __init__(self, shape=(-1, 16)):
        super().__init__()
        self.shape = shape
        self.reshape = ops.Reshape()
        self.matmul = ops.MatMul(transpose_b=True).shard(in_strategy=((DP, MP), (1, MP)),
                                                          out_strategy=((DP * MP, 1),))
        self.add = ops.Add()
        self.relu = ops.ReLU()
        self.w = _w((8, 32), "w")
        self.example_inputs = {"x": "float32[64,32]", "b": "float32[32,16]"}

    def construct(self, x, b):
        return self.relu(self.add(self.reshape(self.matmul(x, self.w), self.shape), b))


class _TwoMatMulThreeAdds(nn.Cell):
    TRANSPOSE_B = True

    def __init__(self, in1=None, in2=None, out1=None, out2=None):
        super().__init__()
        self.matmul1 = ops.MatMul(transpose_b=self.TRANSPOSE_B)
        self.matmul2 = ops.MatMul(transpose_b=self.TRANSPOSE_B)
        if in1 is not None:
            self.matmul1.shard(in_strategy=in1, out_strategy=out1)
        if in2 is not None:
            self.matmul2.shard(in_strategy=in2, out_strategy=out2)
        self.add1 = ops.Add()
        self.add2 = ops.Add()
        self.add3 = ops.Add()
        if self.TRANSPOSE_B:
            self.w1 = _w((8, 32), "w1")
            self.w2 = _w((16, 8), "w2")
        else:
            self.w1 = _w((32, 8), "w1")
            self.w2 = _w((8, 16), "w2")
        self.example_inputs = {"x": "float32[64,32]", "b1": "float32[64,32]", "b2": "float32[64,8]",
                               "b3": "float32[64,16]"}

    def construct(self, x, b1, b2, b3):
        h = self.matmul1(self.add1(x, b1), self.w1)
        h = self.matmul2(self.add2(h, b2), self.w2)
        return self.add3(h, b3)


class SaveLoad1(_TwoMatMulThreeAdds):
    def __init__(self):
        super().__init__(((4, 2), (1, 2)), ((2, 4), (1, 4)))


class SaveLoad2(_TwoMatMulThreeAdds):
    def __init__(self):
        super().__init__(((4, 2), (1, 2)), ((2, 4), (1, 4)), ((8, 1),), ((8, 1),))


class SaveLoad4(_TwoMatMulThreeAdds):
    TRANSPOSE_B = False

    def __init__(self):
        lay = Layout((2, 2, 2, 2), ("dp", "mp", "sp", "interleaved_parallel"))
        super().__init__((lay(("dp", "interleaved_parallel"), "mp"), lay("mp", "sp")),
                         (lay(("dp", "interleaved_parallel", "mp"), "sp"), lay("sp", "None")),
                         (lay(("dp", "interleaved_parallel", "mp"), "sp"),),
                         (lay(("dp", "interleaved_parallel", "mp", "sp"), "None"),))


class SaveLoad5(_TwoMatMulThreeAdds):
    TRANSPOSE_B = False

    def __init__(self):
        lay = Layout((2, 2, 2), ("dp", "mp", "sp"))
        super().__init__((lay("dp", "mp"), lay("mp", "sp")),
                         (lay(("dp", "mp"), "sp"), lay("sp", "None")),
                         (lay(("dp", "mp"), "sp"),),
                         (lay(("dp", "mp", "sp"), "None"),))


class SaveLoad6(SaveLoad5):
    """Same net as SaveLoad5; the UT sets fully_use_devices=True."""
