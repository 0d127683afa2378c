"""Re-expressions of MindSpore's UT tests/ut/python/parallel/test_auto_parallel_reshape.py (a different file from
the one ut4_reshape_prop.py ports). All: auto_parallel, search_mode="sharding_propagation" (compile_graph's
default), 8 devices, global_rank 0, dataset_strategy "full_batch" (setup_function), nothing configured; the UTs'
GradWrap(NetWithLoss(VirtualLoss)) is dropped.

* ReshapeMatMul8   <- test_reshape_matmul (x[64,28,1,1]; Reshape (64,28) -> MatMul weight[28,64])
* ReshapeReshape8  <- test_reshape_reshape (x[64,28,1,1]; ReLU -> Reshape (64,28) -> Reshape (64,28,1))
* ReshapeAuto1_8   <- test_reshape_auto_1 (ReLU -> Reshape (64,28) -> MatMul weight[28,64])
* ReshapeAuto2_8   <- test_reshape_auto_2 (as 1, then Reshape (128,32) and `+` weight1[128,32])
* ReshapeAuto3_8   <- test_reshape_auto_3 (x[64,28]; ReLU -> MatMul weight[28,64] -> Reshape (8,8,8,8))
* ReshapeAuto4_8   <- test_reshape_auto_4 (x[64,28,1,1]; ReLU -> Reshape (64,28); weight[1792] Reshape (28,64);
  MatMul)
* ReshapeWideDeep5 <- test_reshape_auto_5 (x[4,8192,1], y[4,8192]; wide&deep: Reshape y (4,8192,1), ReLU, Mul,
  ReduceSum axis 1 (keep_dims=False), Reshape (-1,1); x + weight[4,8192,64], Mul, Reshape (-1,8192*64); `+`)
* ReshapeWideDeep6 <- test_reshape_auto_6 (x[4,1024,1], y[4,1024]; x + weight[4,1024,1], Reshape weight
  (4,1024), ReduceMean axis 1 (keep_dims=False), `-`, Mul y, `+`)
"""
import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, nn
from mindspore.ops import operations as P


def _w(shape, name):
    return Parameter(Tensor(np.ones(shape), dtype=ms.float32), name=name)


class ReshapeMatMul8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.reshape = P.Reshape()
        self.matmul = P.MatMul()
        self.matmul_weight = _w([28, 64], "weight")
        self.example_inputs = {"x": "float32[64,28,1,1]"}

    def construct(self, x):
        out = self.reshape(x, (64, 28))
        return self.matmul(out, self.matmul_weight)


class ReshapeReshape8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.reshape = P.Reshape()
        self.relu = P.ReLU()
        self.example_inputs = {"x": "float32[64,28,1,1]"}

    def construct(self, x):
        x = self.relu(x)
        out = self.reshape(x, (64, 28))
        return self.reshape(out, (64, 28, 1))


class ReshapeAuto1_8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.relu = P.ReLU()
        self.reshape = P.Reshape()
        self.matmul = P.MatMul()
        self.matmul_weight = _w([28, 64], "weight")
        self.example_inputs = {"x": "float32[64,28,1,1]"}

    def construct(self, x):
        out = self.relu(x)
        out = self.reshape(out, (64, 28))
        return self.matmul(out, self.matmul_weight)


class ReshapeAuto2_8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.relu = P.ReLU()
        self.reshape = P.Reshape()
        self.matmul = P.MatMul()
        self.add_weight = _w([128, 32], "weight1")
        self.matmul_weight = _w([28, 64], "weight")
        self.example_inputs = {"x": "float32[64,28,1,1]"}

    def construct(self, x):
        out = self.relu(x)
        out = self.reshape(out, (64, 28))
        out = self.matmul(out, self.matmul_weight)
        out = self.reshape(out, (128, 32))
        return out + self.add_weight


class ReshapeAuto3_8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.relu = P.ReLU()
        self.reshape = P.Reshape()
        self.matmul = P.MatMul()
        self.matmul_weight = _w([28, 64], "weight")
        self.example_inputs = {"x": "float32[64,28]"}

    def construct(self, x):
        out = self.relu(x)
        out = self.matmul(out, self.matmul_weight)
        return self.reshape(out, (8, 8, 8, 8))


class ReshapeAuto4_8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.relu = P.ReLU()
        self.reshape = P.Reshape()
        self.matmul = P.MatMul()
        self.matmul_weight = _w([28 * 64], "weight")
        self.example_inputs = {"x": "float32[64,28,1,1]"}

    def construct(self, x):
        out = self.relu(x)
        out = self.reshape(out, (64, 28))
        w = self.reshape(self.matmul_weight, (28, 64))
        return self.matmul(out, w)


class ReshapeWideDeep5(nn.Cell):
    def __init__(self):
        super().__init__()
        self.relu = P.ReLU()
        self.mul = P.Mul()
        self.reshape = P.Reshape()
        self.reduce_sum = P.ReduceSum()
        self.wide_w = _w([4, 1024 * 8, 64], "weight")
        self.example_inputs = {"x": "float32[4,8192,1]", "y": "float32[4,8192]"}

    def construct(self, x, y):
        mask = self.reshape(y, (4, 1024 * 8, 1))
        w_id = self.relu(x)
        wx = self.mul(w_id, mask)
        wide_out = self.reshape(self.reduce_sum(wx, 1), (-1, 1))
        deep_id = x + self.wide_w
        vx = self.mul(deep_id, mask)
        deep_in = self.reshape(vx, (-1, 1024 * 8 * 64))
        return wide_out + deep_in


class ReshapeWideDeep6(nn.Cell):
    def __init__(self):
        super().__init__()
        self.relu = P.ReLU()
        self.mul = P.Mul()
        self.reshape = P.Reshape()
        self.reduce_mean = P.ReduceMean()
        self.wide_w = _w([4, 1024, 1], "weight")
        self.example_inputs = {"x": "float32[4,1024,1]", "y": "float32[4,1024]"}

    def construct(self, x, y):
        out1 = x + self.wide_w
        w = self.reshape(self.wide_w, (4, 1024))
        out1 = self.reduce_mean(out1, 1)
        out1 = out1 - w
        out2 = self.mul(y, w)
        return out1 + out2


class ReshapeAuto2_8DP(ReshapeAuto2_8):
    """ReshapeAuto2_8 under dataset_strategy "data_parallel" (a variant; the UT's is "full_batch")."""
