"""Re-expressions of 2D/3D tensor-parallel (BatchMatMul/MatMul with Layouts) UTs in MindSpore's
tests/ut/python/parallel/test_batch_matmul_high_dimension.py.
All: auto_parallel, search_mode="sharding_propagation", global_rank 0, dataset_strategy "full_batch"
(setup_function). The UTs compile TrainOneStepCell(net, Momentum) under semi_auto_parallel with both (Batch)MatMuls
configured by Layouts and the prim attr enable_nd_tp=True (kept here on both); the wrapper is dropped, and only the
first (Batch)MatMul's Layout is kept as the anchor (the second's is dropped: MindSpore propagates to it). Meshes
name the Layout's axes.

BatchNet: x [128,64,32] -> BatchMatMul w1 -> BatchMatMul w2 (w1 [128,32,64], w2 [128,64,64]; transposed:
w1 [128,64,32], w2 [128,32,64]). Net: x [64,32] -> MatMul w1 -> MatMul w2 (w1 [32,64], w2 [64,64]; transposed:
w1 [64,32], w2 [32,64]).

* BmmTP2D8      <- test_batch_matmul_2D_TP (8 devices, Layout((1,2,4), ("b","x","y")); bmm1 (("b",None,("x","y")),
  ("b","x","y")) kept, bmm2 (("b",None,("y","x")), ("b","y","x")) dropped)
* BmmTP2DT8     <- test_batch_matmul_2D_TP_transpose_b (transpose_b; bmm1 (("b",None,("x","y")), ("b","y","x")) kept)
* BmmTP2DR1D8   <- test_batch_matmul_2D_TP_reduce_1D (Layout((1,1,8), ("b","x","y")); bmm1 as BmmTP2D8's)
* BmmTP3D16     <- test_batch_matmul_3D_TP (16 devices, Layout((2,2,4), ("z","x","y")); bmm1 ((None,("z","x"),"y"),
  (None,("y","z"),"x")) kept, bmm2 ((None,("z","y"),"x"), (None,("x","z"),"y")) dropped)
* BmmTP3DT16    <- test_batch_matmul_3D_TP_transpose_b (bmm1 ((None,("z","x"),"y"), (None,"x",("y","z"))) kept)
* MatMulTP2D8   <- test_matmul_2D_TP (8 devices, Layout((2,4), ("x","y")); mul1 ((None,("x","y")), ("x","y")) kept,
  mul2 ((None,("y","x")), ("y","x")) dropped)
* MatMulTP3D16  <- test_matmul_3D_TP (16 devices, Layout((2,2,4), ("x","y","z")); mul1 ((("z","x"),"y"),
  (("y","z"),"x")) kept, mul2 dropped)
* BmmTP2DBoth8  <- test_batch_matmul_2D_TP with both Layouts kept (the UT's configuration entire; a variant)
* BmmTP2DNdAnchor8 <- test_batch_matmul_2D_TP, bmm1's Layout kept, enable_nd_tp on bmm1 only (a variant)
* <Port>Nd1 (BmmTP2DT8Nd1, BmmTP2DR1D8Nd1, BmmTP3D16Nd1, BmmTP3DT16Nd1, MatMulTP2D8Nd1, MatMulTP3D16Nd1) <- the other
  one-anchor ports the same way: enable_nd_tp on the anchor only, MindSpore propagates from its 2D/3D output layout
  (variants)
* BmmTP2DBatch8, BmmTP2DRows8 <- BmmTP2DNdAnchor8 on Layout((2, 2, 2), ("b", "x", "y")) with the batch, or the rows,
  split by "b" besides the 2D contraction (variants)
* BmmNdTuple8 <- enable_nd_tp on bmm1 only, bmm1 configured by a tuple strategy ((1, 1, 8), (1, 8, 1)): MindSpore
  fails as on the ports (variant)
* BmmNdMegatron8 <- enable_nd_tp on bmm1 only, a Layout splitting the contraction alike in both inputs
  (("b", None, "y"), ("b", "y", "x")): MindSpore's 2D check passes it, its NDTP replace graph then fails ("The
  dimension 18446744073709551585 is out of the size of the device shape!") (variant)
* BmmTP2DOut8, BmmTP2DOutOther8 <- BmmTP2DNdAnchor8 with bmm1's out_strategy the Layout MindSpore infers
  ("b", None, ("y", "x")) (propagation then follows its splits), or another one ("b", None, ("x", "y")): refused,
  SetCostUnderLayout failed (variants)
* BmmTP2DTA8, BmmTP3DTA16 <- bmm1 with transpose_a (x [128, 32, 64]), its 2D / 3D Layout transposed, enable_nd_tp on
  bmm1 only (variants)

MindSpore 2.9 rejects the seven one-anchor ports as they stand: propagating onto the unconfigured (Batch)MatMul that
carries enable_nd_tp fails ("The dimension 18446744073709551586 is out of the size of the device shape!"); without
that attribute on it (BmmTP2DNdAnchor8) it propagates. Without enable_nd_tp on the anchor MindSpore refuses the
anchor itself (SetCostUnderLayout failed: the contraction dim split differently in the two inputs).
"""
import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, nn
from mindspore.parallel.shard import Layout
from mindspore.ops import operations as P


def _t(shape):
    return Tensor(np.ones(shape), dtype=ms.float32)


class _TwoMM(nn.Cell):
    BATCH = True
    TRANSPOSE_B = False
    DEV = (1, 2, 4)
    NAMES = ("b", "x", "y")

    def strategies(self, layout):
        return (layout("b", "None", ("x", "y")), layout("b", "x", "y")), None

    def __init__(self):
        super().__init__()
        prim = P.BatchMatMul if self.BATCH else P.MatMul
        self.mul1 = prim(transpose_b=self.TRANSPOSE_B)
        self.mul2 = prim(transpose_b=self.TRANSPOSE_B)
        s1, s2 = self.strategies(Layout(self.DEV, self.NAMES))
        self.mul1.shard(in_strategy=s1)
        if s2 is not None:
            self.mul2.shard(in_strategy=s2)
        self.mul1.add_prim_attr("enable_nd_tp", True)
        self.mul2.add_prim_attr("enable_nd_tp", True)
        b = [128] if self.BATCH else []
        w1, w2 = ([64, 32], [32, 64]) if self.TRANSPOSE_B else ([32, 64], [64, 64])
        self.w1 = Parameter(_t(b + w1), "w1")
        self.w2 = Parameter(_t(b + w2), "w2")
        self.example_inputs = {"x": "float32[" + ",".join(map(str, b + [64, 32])) + "]"}

    def construct(self, x):
        out = self.mul1(x, self.w1)
        return self.mul2(out, self.w2)


class BmmTP2D8(_TwoMM):
    pass


class BmmTP2DT8(_TwoMM):
    TRANSPOSE_B = True

    def strategies(self, layout):
        return (layout("b", "None", ("x", "y")), layout("b", "y", "x")), None


class BmmTP2DR1D8(_TwoMM):
    DEV = (1, 1, 8)


class BmmTP3D16(_TwoMM):
    DEV = (2, 2, 4)
    NAMES = ("z", "x", "y")

    def strategies(self, layout):
        return (layout("None", ("z", "x"), "y"), layout("None", ("y", "z"), "x")), None


class BmmTP3DT16(BmmTP3D16):
    TRANSPOSE_B = True

    def strategies(self, layout):
        return (layout("None", ("z", "x"), "y"), layout("None", "x", ("y", "z"))), None


class MatMulTP2D8(_TwoMM):
    BATCH = False
    DEV = (2, 4)
    NAMES = ("x", "y")

    def strategies(self, layout):
        return (layout("None", ("x", "y")), layout("x", "y")), None


class MatMulTP3D16(_TwoMM):
    BATCH = False
    DEV = (2, 2, 4)
    NAMES = ("x", "y", "z")

    def strategies(self, layout):
        return (layout(("z", "x"), "y"), layout(("y", "z"), "x")), None


class BmmTP2DBoth8(_TwoMM):
    def strategies(self, layout):
        return ((layout("b", "None", ("x", "y")), layout("b", "x", "y")),
                (layout("b", "None", ("y", "x")), layout("b", "y", "x")))


class BmmTP2DNdAnchor8(_TwoMM):
    """BmmTP2D8 with enable_nd_tp on the anchored bmm1 only (a variant): MindSpore propagates to bmm2."""

    def __init__(self):
        super().__init__()
        self.mul2.del_prim_attr("enable_nd_tp")


class _NdAnchorOnly:
    """enable_nd_tp on the anchor (mul1) only."""

    def __init__(self):
        super().__init__()
        self.mul2.del_prim_attr("enable_nd_tp")


class BmmTP2DT8Nd1(_NdAnchorOnly, BmmTP2DT8):
    pass


class BmmTP2DR1D8Nd1(_NdAnchorOnly, BmmTP2DR1D8):
    pass


class BmmTP3D16Nd1(_NdAnchorOnly, BmmTP3D16):
    pass


class BmmTP3DT16Nd1(_NdAnchorOnly, BmmTP3DT16):
    pass


class MatMulTP2D8Nd1(_NdAnchorOnly, MatMulTP2D8):
    pass


class MatMulTP3D16Nd1(_NdAnchorOnly, MatMulTP3D16):
    pass


class BmmTP2DBatch8(_NdAnchorOnly, _TwoMM):
    DEV = (2, 2, 2)


class BmmTP2DRows8(_NdAnchorOnly, _TwoMM):
    DEV = (2, 2, 2)

    def strategies(self, layout):
        return (layout("None", "b", ("x", "y")), layout("None", "x", "y")), None


class BmmNdTuple8(_NdAnchorOnly, _TwoMM):
    def strategies(self, layout):
        return ((1, 1, 8), (1, 8, 1)), None


class BmmNdMegatron8(_NdAnchorOnly, _TwoMM):
    def strategies(self, layout):
        return (layout("b", "None", "y"), layout("b", "y", "x")), None


class BmmTP2DOut8(_NdAnchorOnly, _TwoMM):
    OUT = ("b", "None", ("y", "x"))

    def __init__(self):
        super().__init__()
        lay = Layout(self.DEV, self.NAMES)
        self.mul1.shard(in_strategy=(lay("b", "None", ("x", "y")), lay("b", "x", "y")), out_strategy=(lay(*self.OUT),))


class BmmTP2DOutOther8(BmmTP2DOut8):
    OUT = ("b", "None", ("x", "y"))


class BmmTP2DTA8(nn.Cell):
    """bmm1 = BatchMatMul(transpose_a=True) on x [128, 32, 64]."""
    DEV = (1, 2, 4)
    NAMES = ("b", "x", "y")

    def strategies(self, layout):
        return layout("b", ("x", "y"), "None"), layout("b", "x", "y")

    def __init__(self):
        super().__init__()
        self.mul1 = P.BatchMatMul(transpose_a=True)
        self.mul2 = P.BatchMatMul()
        self.mul1.shard(in_strategy=self.strategies(Layout(self.DEV, self.NAMES)))
        self.mul1.add_prim_attr("enable_nd_tp", True)
        self.w1 = Parameter(_t([128, 32, 64]), "w1")
        self.w2 = Parameter(_t([128, 64, 64]), "w2")
        self.example_inputs = {"x": "float32[128,32,64]"}

    def construct(self, x):
        return self.mul2(self.mul1(x, self.w1), self.w2)


class BmmTP3DTA16(BmmTP2DTA8):
    DEV = (2, 2, 4)
    NAMES = ("z", "x", "y")

    def strategies(self, layout):
        return layout("None", "y", ("z", "x")), layout("None", ("y", "z"), "x")
