"""Re-expression of a test in MindSpore's UT folder tests/ut/python/parallel/, a file of element-wise two-input
operators (Hypot, Igamma, Igammac, NextAfter, Zeta, Polar, RemainderTensorTensor, LeftShift, RightShift, Gcd ...;
name not confirmed).

* ElementWiseTwoInputs64 <- test_element_wise_two_inputs_ops (auto_parallel, search_mode="sharding_propagation",
  64 devices, dataset_strategy "full_batch"; the UT compiles the forward net directly; hypot ((1,2,4,8),(1,2,4,8)),
  everything else unconfigured). The UT asserts [[1,2,4,8],[1,2,4,8]] for Igamma, Igammac, NextAfter, Zeta, Polar,
  RemainderTensorTensor and [[1,2,4,8],[1,2,1,8]] for LeftShift, RightShift, Gcd (int32 weights [4,8,1,8]).
"""
import mindspore as ms
from mindspore import Parameter, nn, ops
from mindspore.common.initializer import initializer
from mindspore.ops import operations as P
from mindspore.ops.auto_generate.gen_ops_prim import Polar, RemainderTensorTensor


class ElementWiseTwoInputs64(nn.Cell):
    def __init__(self, strategy=((1, 2, 4, 8), (1, 2, 4, 8))):
        super().__init__()

        def w(name):
            return Parameter(initializer("ones", (4, 8, 4, 8), ms.float32), name=name)

        def wi(name):
            return Parameter(initializer("ones", (4, 8, 1, 8), ms.int32), name=name)

        self.hypot_w, self.igamma_w, self.igammac_w = w("w1"), w("w2"), w("w3")
        self.next_after_w, self.zeta_w = w("w4"), w("w5")
        self.left_shift_w, self.right_shift_w = wi("w6"), wi("w7")
        self.gcd_weight = wi("w8")
        self.polar_w, self.remainder_w = w("w9"), w("w11")
        self.hypot = P.Hypot().shard(strategy)
        self.igamma = P.Igamma()
        self.igammac = P.Igammac()
        self.next_after = P.NextAfter()
        self.zeta = P.Zeta()
        self.polar = Polar()
        self.remainder = RemainderTensorTensor()
        self.cast = P.Cast()
        self.left_shift = P.LeftShift()
        self.right_shift = P.RightShift()
        self.gcd = P.Gcd()
        self.example_inputs = {"x": "float32[4,8,4,8]"}

    def construct(self, x):
        out = self.hypot(x, self.hypot_w)
        out = self.igamma(out, self.igamma_w)
        out = self.igammac(out, self.igammac_w)
        out = self.next_after(out, self.next_after_w)
        out = self.zeta(out, self.zeta_w)
        out = self.polar(out, self.polar_w)
        out = self.remainder(out, self.remainder_w)
        out = self.cast(out, ms.int32)
        out = self.left_shift(out, self.left_shift_w)
        out = self.right_shift(out, self.right_shift_w)
        return self.gcd(out, self.gcd_weight)
