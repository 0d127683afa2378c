"""Test models: a weight read by a MatMul that repeats its computation, for the weight's gradient reduction.

MindSpore's ``_MirrorOperator`` on a Parameter groups every device holding the same slice of it, repeated
computation included. tests/fixtures/ir/mirror_*.step_parallel_end.ir are MindSpore 2.9.0's own dumps of the
``trained_*`` factories below (semi_auto_parallel, 8 devices, full_batch, inputs x:float32[32,64] -- float16 for
``trained_castrep`` -- ``MS_DEV_DUMP_IR_PASSES=step_parallel_end``); strategist extracts the forward nets.
"""
import numpy as np
import mindspore as ms
from mindspore import Parameter, ParameterTuple, Tensor, nn, ops


class WeightMatMul(nn.Cell):
    """x @ w with ``mm`` as its MatMul strategy (ReLU alike), then a sum (the loss)."""

    def __init__(self, mm=((2, 1), (1, 1))):
        super().__init__()
        mm = tuple(tuple(s) for s in mm)
        self.w = Parameter(Tensor(np.ones((64, 128), np.float32)), name="w")
        self.mm = ops.MatMul().shard(mm)
        self.relu = ops.ReLU().shard(((mm[0][0], mm[1][1]),))
        self.sum = ops.ReduceSum()
        self.example_inputs = {"x": "float32[32,64]"}

    def construct(self, x):
        return self.sum(self.relu(self.mm(x, self.w)))


class CastWeightMatMul(nn.Cell):
    """A float16 copy of a float32 weight (a Cast) read by a MatMul ``((2, 1), (1, 1))``."""

    def __init__(self):
        super().__init__()
        self.w = Parameter(Tensor(np.ones((64, 128), np.float32)), name="w")
        self.cast = ops.Cast()
        self.mm = ops.MatMul().shard(((2, 1), (1, 1)))
        self.relu = ops.ReLU().shard(((2, 1),))
        self.sum = ops.ReduceSum()
        self.example_inputs = {"x": "float16[32,64]"}

    def construct(self, x):
        return self.sum(self.relu(self.mm(x, self.cast(self.w, ms.float16))))


def repeated():
    """Rows split by 2 on 8 devices: the MatMul repeats over the other 4."""
    return WeightMatMul(((2, 1), (1, 1)))


def column():
    """Rows by 2, the weight's columns by 4: no repetition."""
    return WeightMatMul(((2, 1), (1, 4)))


class _Train(nn.Cell):
    def __init__(self, net):
        super().__init__()
        self.net = net
        self.weights = ParameterTuple(net.trainable_params())
        self.grad = ops.GradOperation(get_by_list=True)

    def construct(self, x):
        return self.grad(self.net, self.weights)(x)


def trained_rep():
    return _Train(repeated())


def trained_col():
    return _Train(column())


def trained_castrep():
    return _Train(CastWeightMatMul())
