"""Test model file with a variety of faults, one per name."""
import mindspore as ms
from mindspore import nn, ops

NOT_CALLABLE = 42


def not_a_cell():
    return "hello"


def raises():
    raise RuntimeError("boom in factory")


class NeedsArg(nn.Cell):
    def __init__(self, size):
        super().__init__()
        self.size = size

    def construct(self, x):
        return x


class GraphSyntaxError(nn.Cell):
    """Graph mode cannot compile a call to an arbitrary Python object."""

    def __init__(self):
        super().__init__()
        self.relu = ops.ReLU()

    def construct(self, x):
        import random
        return self.relu(x) * random.random()


class TwoInputs(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul = ops.MatMul()

    def construct(self, a, b):
        return self.matmul(a, b)
