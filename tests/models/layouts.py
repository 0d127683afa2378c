"""Test model: shard() with Layout (multi-axis dims, out_strategy) and with tuples."""
import mindspore as ms
from mindspore import Layout, Parameter, nn, ops
from mindspore.common.initializer import initializer

LAYOUT = Layout((2, 2, 2), ("dp", "cp", "tp"))


class LayoutNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w = Parameter(initializer("normal", (64, 32), ms.float16), name="w")
        self.mm = ops.MatMul(transpose_b=True).shard(
            in_strategy=(LAYOUT(("dp", "cp"), "None"), LAYOUT("tp", "None")),
            out_strategy=(LAYOUT(("dp", "cp"), "tp"),))
        self.relu = ops.ReLU().shard(((4, 2),))
        self.example_inputs = {"x": "float16[16,32]"}

    def construct(self, x):
        return self.relu(self.mm(x, self.w))


class CastBeforeLayout(nn.Cell):
    """A Cast feeding a Layout-configured operator (MindFormers' final_layernorm: B over dp, S over tp on a
    sequence-first [S, B, H]); the ReLU before the Cast is decided backward from the Cast."""

    def __init__(self):
        super().__init__()
        lay = Layout((2, 4), ("dp", "tp"))
        self.relu = ops.ReLU()
        self.cast = ops.Cast()
        self.gelu = ops.GeLU().shard((lay("tp", "dp", "None"),))
        self.example_inputs = {"x": "float32[64,8,32]"}

    def construct(self, x):
        return self.gelu(self.cast(self.relu(x), ms.float16))
