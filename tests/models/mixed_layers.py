"""Two layers of different Cell classes whose operators share names: a dense block (its ``transpose`` permutes a
4-d [B, S, N, D] view) and a routed block (its ``transpose`` permutes a 3-d [B, S, H] tensor), as telechat3_moe's
dense layer 0 and MoE layer 1 both hold an ``mlp.transpose``. One name pattern (``layers.*.mlp.transpose``), two
operators: an anchors-file glob over both would give the second the first's layout."""
import mindspore as ms
from mindspore import Parameter, nn, ops
from mindspore.common.initializer import initializer


class DenseMLP(nn.Cell):
    def __init__(self, h, heads):
        super().__init__()
        self.heads = heads
        self.w = Parameter(initializer("normal", (h, h), ms.float32), name="w")
        self.matmul = ops.MatMul()
        self.reshape = ops.Reshape()
        self.transpose = ops.Transpose()
        self.relu = ops.ReLU()

    def construct(self, x):
        b, s, h = x.shape
        y = self.reshape(self.matmul(self.reshape(x, (b * s, h)), self.w), (b, s, self.heads, h // self.heads))
        y = self.relu(self.transpose(y, (0, 2, 1, 3)))
        return self.reshape(self.transpose(y, (0, 2, 1, 3)), (b, s, h))


class RoutedMLP(nn.Cell):
    def __init__(self, h):
        super().__init__()
        self.w = Parameter(initializer("normal", (h,), ms.float32), name="w")
        self.transpose = ops.Transpose()
        self.mul = ops.Mul()
        self.transpose2 = ops.Transpose()

    def construct(self, x):
        y = self.mul(self.transpose(x, (1, 0, 2)), self.w)
        return self.transpose2(y, (1, 0, 2))


class Layer(nn.Cell):
    def __init__(self, mlp):
        super().__init__()
        self.mlp = mlp
        self.add = ops.Add()

    def construct(self, x):
        return self.add(x, self.mlp(x))


class MixedLayers(nn.Cell):
    def __init__(self, h=256, heads=8):
        super().__init__()
        self.layers = nn.CellList([Layer(DenseMLP(h, heads)), Layer(RoutedMLP(h))])
        self.example_inputs = {"x": f"float32[8,64,{h}]"}

    def construct(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
