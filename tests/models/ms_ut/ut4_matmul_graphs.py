"""Re-expressions of small MatMul/Add-graph sharding-propagation UTs in MindSpore's tests/ut/python/parallel/.
All: auto_parallel, search_mode="sharding_propagation", global_rank 0, dataset_strategy "full_batch"
(setup_function). The UTs compile GradWrap(NetWithLoss(VirtualLoss)) and only check compilation.

* DoubleStar8      <- test_auto_parallel_double_star.py, test_double_star_graph (8 devices; six unconfigured
  MatMuls over seven inputs x[32,8] y[8,16] z[8,16] w[16,32] a[16,8] b[8,32] c[32,32])
* TwoPartialMatMul8 <- test_auto_parallel_two_partial_matmul.py, test_four_matmul_linear (8 devices; matmul1
  ((8,1),(1,1)) on x[8,16] @ y[16,512], then unconfigured matmul2 @ w[512,256])
* Rhombus1_16 / Rhombus2_16 / Rhombus3_16 <- test_auto_parallel_rhombus.py, test_rhombus1..3 (16 devices;
  nothing configured; x, y, z [128,128]; MatMul with w[128,128] and Adds in a rhombus; Rhombus2's two weights
  are both named "w" in the UT, renamed w1/w2 here; Rhombus3 adds a constant tensor)
"""
import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, nn
from mindspore.common.initializer import initializer
from mindspore.ops import operations as P


def _ones(shape, name):
    return Parameter(initializer("ones", shape, ms.float32), name=name)


class DoubleStar8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul1 = P.MatMul()
        self.matmul2 = P.MatMul()
        self.matmul3 = P.MatMul()
        self.matmul4 = P.MatMul()
        self.matmul5 = P.MatMul()
        self.matmul6 = P.MatMul()
        self.example_inputs = {"x": "float32[32,8]", "y": "float32[8,16]", "z": "float32[8,16]",
                               "w": "float32[16,32]", "a": "float32[16,8]", "b": "float32[8,32]",
                               "c": "float32[32,32]"}

    def construct(self, x, y, z, w, a, b, c):
        m1_result = self.matmul1(x, y)
        m2_result = self.matmul2(z, w)
        m3_result = self.matmul3(m2_result, m1_result)
        m4_result = self.matmul4(a, b)
        m5_result = self.matmul5(m3_result, m4_result)
        return self.matmul6(m5_result, c)


class TwoPartialMatMul8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul1 = P.MatMul().shard(((8, 1), (1, 1)))
        self.weight = _ones((512, 256), "w")
        self.matmul2 = P.MatMul()
        self.example_inputs = {"x": "float32[8,16]", "y": "float32[16,512]"}

    def construct(self, x, y):
        out = self.matmul1(x, y)
        return self.matmul2(out, self.weight)


_XYZ = {"x": "float32[128,128]", "y": "float32[128,128]", "z": "float32[128,128]"}


class Rhombus1_16(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul = P.MatMul()
        self.tadd1 = P.Add()
        self.tadd2 = P.Add()
        self.weight = _ones((128, 128), "w")
        self.example_inputs = dict(_XYZ)

    def construct(self, x, y, z):
        mm_out = self.matmul(x, self.weight)
        ta1_out = self.tadd1(y, z)
        return self.tadd2(ta1_out, mm_out)


class Rhombus2_16(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul1 = P.MatMul()
        self.matmul2 = P.MatMul()
        self.tadd1 = P.Add()
        self.tadd2 = P.Add()
        self.tadd3 = P.Add()
        self.weight1 = _ones((128, 128), "w1")
        self.weight2 = _ones((128, 128), "w2")
        self.example_inputs = dict(_XYZ)

    def construct(self, x, y, z):
        mm1_out = self.matmul1(x, self.weight1)
        ta1_out = self.tadd1(y, z)
        ta2_out = self.tadd2(mm1_out, ta1_out)
        mm2_out = self.matmul2(ta1_out, self.weight2)
        return self.tadd3(ta2_out, mm2_out)


class Rhombus3_16(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul1 = P.MatMul()
        self.tadd1 = P.Add()
        self.tadd2 = P.Add()
        self.tadd3 = P.Add()
        self.tadd4 = P.Add()
        self.weight1 = _ones((128, 128), "w")
        self.t = Tensor(np.ones([128, 128]).astype(np.float32) * 0.01)
        self.example_inputs = dict(_XYZ)

    def construct(self, x, y, z):
        mm1_out = self.matmul1(x, self.weight1)
        ta1_out = self.tadd1(y, z)
        ta2_out = self.tadd2(mm1_out, ta1_out)
        ta3_out = self.tadd3(ta1_out, self.t)
        return self.tadd4(ta2_out, ta3_out)
