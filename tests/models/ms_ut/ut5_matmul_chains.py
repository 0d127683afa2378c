"""Re-expressions of MatMul-chain sharding-propagation UTs in MindSpore's tests/ut/python/parallel/.
All: auto_parallel, search_mode="sharding_propagation", global_rank 0, dataset_strategy "full_batch"
(setup_function), nothing configured unless noted. The UTs compile GradWrap(NetWithLoss(VirtualLoss)) (or
NetWithLoss alone) and only check compilation; the wrappers are dropped here.

* FourMatMulLinear16   <- test_auto_parallel_four_matmul.py, test_four_matmul_linear (16 devices; x[128,32]
  y[32,64] z[64,32] w[32,32] b[32,256]; four MatMuls in a chain)
* FourMatMulOnePrim16  <- test_auto_parallel_four_matmul.py, test_four_matmul1 (as above, one MatMul primitive
  called four times)
* FourMatMulSub16      <- test_auto_parallel_four_matmul.py, test_four_matmul2 (16 devices; x[128,32] y[32,64]
  z[128,64] w[64,32] b[128,32]; one MatMul primitive twice with `-` (Sub) after each)
* FcNoBias16           <- test_auto_parallel_fc_nobias.py, test_two_matmul (16 devices; MatMul(transpose_b)
  x[128,32] y[64,32], MatMul b[64,64])
* CommonParameter16    <- test_auto_parallel_common_parameter.py, test_common_parameter (16 devices; x[128,32]
  read by two MatMuls with y[32,64] and z[32,128], a third MatMul of their results)
* ZigZag8              <- test_auto_parallel_zig_zag.py, test_zig_zag_graph (8 devices; x..w [32,32] a[32,23];
  matmul3's result is unused in the UT (`_ = ...`), as here)
* DoubleSource8        <- test_auto_parallel_double_sources.py, test_double_source_graph (8 devices; all [32,32])
* DoubleSourceComplex8 <- test_auto_parallel_double_sources.py, test_double_source_complex_graph (8 devices)
* PartialStrategy64    <- test_auto_parallel_partial_strategy.py, test_four_matmul_linear (64 devices; matmul1
  ((2,4),(4,8)), three unconfigured MatMuls; shapes as FourMatMulLinear16)
* MarginCE4            <- test_auto_star_elimination.py, test_marin_loss (4 devices; feature, label [512,512];
  five CustomMatMul(transpose_b) cells, two requires_grad=False [512,512] Parameters, both named "param" in the
  UT, named param/param2 here)
* TwoMatMulTranspose16 <- test_auto_parallel_transpose.py, test_two_matmul_transpose (16 devices; x[128,32]
  y[32,64] b[64,64]; MatMul, MatMul, Transpose (1,0))
* TwoMatMulDropout8    <- test_auto_parallel_matmul_drop.py, test_two_matmul_dropout (8 devices; x[128,32]
  y[32,64] b[64,64]; MatMul, nn.Dropout(p=0.5), MatMul; the Dropout exists only in the training compile)
"""
import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, nn
from mindspore.ops import operations as P

_FOUR = {"x": "float32[128,32]", "y": "float32[32,64]", "z": "float32[64,32]", "w": "float32[32,32]",
         "b": "float32[32,256]"}
_SQ5 = {k: "float32[32,32]" for k in ("x", "y", "z", "w", "a")}


class FourMatMulLinear16(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul1 = P.MatMul()
        self.matmul2 = P.MatMul()
        self.matmul3 = P.MatMul()
        self.matmul4 = P.MatMul()
        self.example_inputs = dict(_FOUR)

    def construct(self, x, y, z, w, b):
        out = self.matmul1(x, y)
        out = self.matmul2(out, z)
        out = self.matmul3(out, w)
        return self.matmul4(out, b)


class FourMatMulOnePrim16(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul = P.MatMul()
        self.example_inputs = dict(_FOUR)

    def construct(self, x, y, z, w, b):
        out = self.matmul(x, y)
        out = self.matmul(out, z)
        out = self.matmul(out, w)
        return self.matmul(out, b)


class FourMatMulSub16(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul = P.MatMul()
        self.example_inputs = {"x": "float32[128,32]", "y": "float32[32,64]", "z": "float32[128,64]",
                               "w": "float32[64,32]", "b": "float32[128,32]"}

    def construct(self, x, y, z, w, b):
        out = self.matmul(x, y)
        out = out - z
        out = self.matmul(out, w)
        return out - b


class FcNoBias16(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul1 = P.MatMul(transpose_b=True)
        self.matmul2 = P.MatMul()
        self.example_inputs = {"x": "float32[128,32]", "y": "float32[64,32]", "b": "float32[64,64]"}

    def construct(self, x, y, b):
        out = self.matmul1(x, y)
        return self.matmul2(out, b)


class CommonParameter16(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul1 = P.MatMul()
        self.matmul2 = P.MatMul()
        self.matmul3 = P.MatMul()
        self.example_inputs = {"x": "float32[128,32]", "y": "float32[32,64]", "z": "float32[32,128]"}

    def construct(self, x, y, z):
        w = self.matmul1(x, y)
        b = self.matmul2(x, z)
        return self.matmul3(b, w)


class ZigZag8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul1 = P.MatMul()
        self.matmul2 = P.MatMul()
        self.matmul3 = P.MatMul()
        self.matmul4 = P.MatMul()
        self.example_inputs = dict(_SQ5, a="float32[32,23]")

    def construct(self, x, y, z, w, a):
        m1_result = self.matmul1(x, y)
        m2_result = self.matmul2(z, w)
        _ = self.matmul3(m2_result, m1_result)
        return self.matmul4(m2_result, a)


class DoubleSource8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul1 = P.MatMul()
        self.matmul2 = P.MatMul()
        self.matmul3 = P.MatMul()
        self.matmul4 = P.MatMul()
        self.matmul5 = P.MatMul()
        self.example_inputs = dict(_SQ5)

    def construct(self, x, y, z, w, a):
        m1_result = self.matmul1(x, y)
        m2_result = self.matmul2(z, w)
        m3_result = self.matmul3(m2_result, m1_result)
        m4_result = self.matmul4(m2_result, m1_result)
        return self.matmul5(m3_result, m4_result)


class DoubleSourceComplex8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul1 = P.MatMul()
        self.matmul2 = P.MatMul()
        self.matmul3 = P.MatMul()
        self.matmul4 = P.MatMul()
        self.matmul5 = P.MatMul()
        self.matmul6 = P.MatMul()
        self.example_inputs = dict(_SQ5)

    def construct(self, x, y, z, w, a):
        m1_result = self.matmul1(x, y)
        m6_result = self.matmul6(m1_result, a)
        m2_result = self.matmul2(z, w)
        m3_result = self.matmul3(m2_result, m6_result)
        m4_result = self.matmul4(m2_result, m1_result)
        return self.matmul5(m3_result, m4_result)


class PartialStrategy64(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul1 = P.MatMul().shard(((2, 4), (4, 8)))
        self.matmul2 = P.MatMul()
        self.matmul3 = P.MatMul()
        self.matmul4 = P.MatMul()
        self.example_inputs = dict(_FOUR)

    def construct(self, x, y, z, w, b):
        out = self.matmul1(x, y)
        out = self.matmul2(out, z)
        out = self.matmul3(out, w)
        return self.matmul4(out, b)


class CustomMatMul(nn.Cell):
    def __init__(self, transpose_a=False, transpose_b=False):
        super().__init__()
        self.fc = P.MatMul(transpose_a=transpose_a, transpose_b=transpose_b)

    def construct(self, x1, x2):
        return self.fc(x1, x2)


class MarginCE4(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = CustomMatMul(transpose_b=True)
        self.fc1 = CustomMatMul(transpose_b=True)
        self.fc2 = CustomMatMul(transpose_b=True)
        self.fc3 = CustomMatMul(transpose_b=True)
        self.fc4 = CustomMatMul(transpose_b=True)
        self.param = Parameter(Tensor(np.ones([512, 512]), dtype=ms.float32), name="param", requires_grad=False)
        self.param2 = Parameter(Tensor(np.ones([512, 512]), dtype=ms.float32), name="param2", requires_grad=False)
        self.example_inputs = {"feature": "float32[512,512]", "label": "float32[512,512]"}

    def construct(self, feature, label):
        fc_out = self.fc(feature, label)
        fc1_out = self.fc1(self.param2, self.param)
        fc2_out = self.fc2(fc1_out, fc_out)
        fc3_out = self.fc3(fc1_out, fc_out)
        return self.fc4(fc2_out, fc3_out)


class TwoMatMulTranspose16(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul1 = P.MatMul()
        self.matmul2 = P.MatMul()
        self.transpose1 = P.Transpose()
        self.example_inputs = {"x": "float32[128,32]", "y": "float32[32,64]", "b": "float32[64,64]"}

    def construct(self, x, y, b):
        out = self.matmul1(x, y)
        out = self.matmul2(out, b)
        return self.transpose1(out, (1, 0))


class TwoMatMulDropout8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul1 = P.MatMul()
        self.dropout = nn.Dropout(p=0.5)
        self.matmul2 = P.MatMul()
        self.example_inputs = {"x": "float32[128,32]", "y": "float32[32,64]", "b": "float32[64,64]"}

    def construct(self, x, y, b):
        out = self.matmul1(x, y)
        out = self.dropout(out)
        return self.matmul2(out, b)


class FourMatMulLinear16DS(FourMatMulLinear16):
    """FourMatMulLinear16 under dataset_strategy ((16,1),(1,1),(1,1),(1,1),(1,1)) (a variant)."""


class CommonParameter16DS(CommonParameter16):
    """CommonParameter16 under dataset_strategy ((16,1),(16,1),(16,1)) (a variant)."""


class ZigZag8DP(ZigZag8):
    """ZigZag8 under dataset_strategy "data_parallel" (a variant; the UT's is "full_batch")."""


class MarginCE4DP(MarginCE4):
    """MarginCE4 under dataset_strategy "data_parallel" (a variant; the UT's is "full_batch")."""
