"""Re-expressions of small sharding-propagation tests in MindSpore's UT folder tests/ut/python/parallel/
(each auto_parallel with search_mode="sharding_propagation"; dataset_strategy="full_batch" from each file's
setup_function unless noted). File names marked (?) were inferred from the contents, not confirmed.

* ActivationMulSigmoid   <- test_auto_parallel_activation.py (?): test_auto_parallel_activation, 16 devices,
  mul ((4,4),(4,4)), sigmoid unconfigured (TrainOneStepCell wrapper dropped)
* DropoutExtChain        <- test_dropout_ext.py (?): test_dropout_ext_auto_parallel, 16 devices, nothing configured
* TraceV2Auto            <- test_tracev2.py: test_tracev2_auto_parallel, 2 devices, nothing configured
  (GradWrap/NetWithLoss dropped; input int64 as np.array of ints)
* LstsqV2Auto            <- test_lstsqv2.py (?): test_lstsqv2_auto_parallel, 2 devices, nothing configured
* SwigluAuto             <- test_swiglu.py (?): test_swiglu_auto_parallel, 8 devices, nothing configured
* GatherMatMulMul24      <- (?) test_auto_parallel_device_num_24_prop_search, 24 devices, matmul ((3,8),(8,1))
* SelectBetainc64        <- (?) test_element_wise_three_inputs_ops, 64 devices, select ((1,2,4,8),)*3
* ScatterAddAdd24        <- test_scatter_ops.py: test_scatter_add_mix_split_auto_parallel_sharding_prop, 24 devices,
  full_batch=True, add ((3,2,4),(3,2,4))
* PadV3Auto              <- test_pad_v3 (?): test_pad_v3_auto_rank0, 8 devices, add ((2,4,1),(2,4,1)), paddings [2,2]
* OuterAfterMul          <- test_outer.py: test_outer_auto_parallel_sharding_propagation0, 8 devices, mul ((2,),(2,))
"""
import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, nn, ops
from mindspore.common.initializer import initializer
from mindspore.ops import auto_generate as gen
from mindspore.ops.auto_generate import dropout_ext_op
from mindspore.ops.auto_generate.gen_ops_prim import Outer, Mul as MulPrim


def _w(shape, name, dtype=ms.float32):
    return Parameter(initializer("normal", shape, dtype), name=name)


class ActivationMulSigmoid(nn.Cell):
    def __init__(self):
        super().__init__()
        self.mul = ops.Mul().shard(((4, 4), (4, 4)))
        self.sigmoid = ops.Sigmoid()
        self.w1 = _w((64, 32), "w1")
        self.example_inputs = {"x": "float32[64,32]", "b": "float32[64,32]"}

    def construct(self, x, b):
        return self.sigmoid(self.mul(x, self.w1))


class DropoutExtChain(nn.Cell):
    def __init__(self):
        super().__init__()
        self.mul = ops.Mul()
        self.dropout1 = dropout_ext_op
        self.relu1 = ops.ReLU()
        self.dropout2 = dropout_ext_op
        self.relu2 = ops.ReLU()
        self.w1 = _w((128, 64), "w1")
        self.seed = Parameter(Tensor(42), name="seed")
        self.offset = Parameter(Tensor(2), name="offset")
        self.example_inputs = {"x": "float32[128,64]"}

    def construct(self, x):
        out = self.mul(x, self.w1)
        out, _ = self.dropout1(out, 0.5, Tensor(1), Tensor(1))
        out = self.relu1(out)
        out, _ = self.dropout2(out, 0.6, self.seed, self.offset)
        return self.relu2(out)


class TraceV2Auto(nn.Cell):
    def __init__(self):
        super().__init__()
        self.tracev2 = gen.TraceV2()
        self.example_inputs = {"x": "int64[2,3,3]"}

    def construct(self, x):
        return self.tracev2(x, 0, -2, -1)


class LstsqV2Auto(nn.Cell):
    def __init__(self):
        super().__init__()
        self.lstsq = gen.LstsqV2()
        self.example_inputs = {"x": "float32[2,4,2]", "y": "float32[2,4]"}

    def construct(self, x, y):
        return self.lstsq(x, y, "gelsd")


class SwigluAuto(nn.Cell):
    def __init__(self):
        super().__init__()
        self.swiglu = gen.gen_ops_prim.Swiglu()
        self.example_inputs = {"x": "float32[2,4]"}

    def construct(self, x):
        return self.swiglu(x, -1)


class GatherMatMulMul24(nn.Cell):
    def __init__(self):
        super().__init__()
        self.mul = ops.Mul()
        self.matmul = ops.MatMul().shard(((3, 8), (8, 1)))
        self.gather = ops.Gather()
        self.reduce_sum = ops.ReduceSum()
        self.mul_weight = _w((192, 96), "w1")
        self.matmul_weight = _w((96, 96), "w2")
        self.embedding_table = _w((192, 96), "embedding_table")
        self.example_inputs = {"x": "int32[192]", "b": "float32[192,96]"}

    def construct(self, x, b):
        out = self.gather(self.embedding_table, x, 0)
        out = self.matmul(out, self.matmul_weight)
        out = self.mul(out, self.mul_weight)
        out = out + b
        return self.reduce_sum(out)


class SelectBetainc64(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w1 = _w((4, 8, 4, 8), "w1")
        self.w2 = _w((4, 8, 4, 8), "w2")
        self.w3 = _w((4, 8, 4, 8), "w3")
        self.w4 = _w((4, 8, 4, 8), "w4")
        self.select = ops.Select().shard(((1, 2, 4, 8),) * 3)
        self.betainc = ops.Betainc()
        self.example_inputs = {"x": "bool[4,8,4,8]"}

    def construct(self, x):
        return self.betainc(self.select(x, self.w1, self.w2), self.w3, self.w4)


class ScatterAddAdd24(nn.Cell):
    def __init__(self):
        super().__init__()
        self.inputs = _w((96, 64, 128), "input")
        self.indices = Tensor(np.ones([4, 8]).astype(np.int32))
        self.updates = Tensor(np.ones([4, 8, 64, 128]).astype(np.float32))
        self.scatter = ops.ScatterAdd()
        self.add = ops.Add().shard(((3, 2, 4), (3, 2, 4)))
        self.relu = ops.ReLU()
        self.example_inputs = {"x": "float32[96,64,128]"}

    def construct(self, x):
        out = self.scatter(self.inputs, self.indices, self.updates)
        return self.relu(self.add(x, out))


class PadV3Auto(nn.Cell):
    def __init__(self):
        super().__init__()
        self.add = ops.Add().shard(((2, 4, 1), (2, 4, 1)))
        self.pad = ops.PadV3()
        self.w1 = _w((32, 16, 8), "w1")
        self.paddings = Tensor([2, 2])
        self.value = Tensor(0.5)
        self.example_inputs = {"x": "float32[32,16,8]", "b": "float32[32,16,12]"}

    def construct(self, x, b):
        return self.pad(self.add(x, self.w1), self.paddings, self.value)


class OuterAfterMul(nn.Cell):
    def __init__(self):
        super().__init__()
        self.mul = MulPrim().shard(((2,), (2,)))
        self.outer = Outer()
        self.example_inputs = {"x": "float32[4]", "vec2": "float32[8]"}

    def construct(self, x, vec2):
        return self.outer(self.mul(x, x), vec2)[0]
