"""Re-expressions of Split and Concat UTs in MindSpore's tests/ut/python/parallel/test_split.py and test_concat.py.
All: auto_parallel, search_mode="sharding_propagation", global_rank 0, 8 devices, dataset_strategy "full_batch"
(setup_function), nothing configured unless noted. The UTs compile TrainOneStepCell(net, Momentum) under
semi_auto_parallel with every operator shard()ed, except test_split_auto_parallel and test_concat_auto_parallel*
(auto_parallel + sharding_propagation, nothing configured, as here); the wrappers are dropped, and one operator's
shard() per net is kept as the anchor (named below), the others dropped.

* SplitTensor8        <- test_split.py, test_split_tensor (Net: x [48,64] * w1 [48,64] -> Split(0, 3) -> MatMul(out1,
  out2^T) -> MatMul(., out3); the two MatMuls' ((1,8),(1,8)) and ((1,1),(1,8)) kept, the split's ((1,8),) and the
  mul's ((1,8),(1,8)) dropped)
* SplitParameter8     <- test_split.py, test_split_parameter (Net1: Split(0, 2) of w1 [96,64,32] -> x [48,64,32] * out1
  * out2 (one Mul primitive twice); the split's ((1,4,2),) kept, the mul's ((1,4,2),(1,4,2)) dropped)
* SplitOutput8        <- test_split.py, test_split_output (Net2: x [48,64,32] * w1 [48,64,32] -> Split(0, 2), out1
  returned; the split's ((1,4,2),) kept, the mul's dropped)
* SplitNoStrategy8    <- test_split.py, test_split_no_strategy (Net2; the UT configures only the mul ((1,4,2),(1,4,2)),
  kept: MindSpore propagates to the Split)
* SplitAuto8          <- test_split.py, test_split_auto_parallel (Net2, nothing configured)
* ConcatParameter8    <- test_concat.py, test_concat_parameter (Net: Concat(0) of w1 [96,64,32], w2 [32,64,32]
  -> x [128,64,32] * out; the concat's ((1,4,2),(1,4,2)) kept, the mul's ((1,4,2),(1,4,2)) dropped; b unused)
* ConcatTensorParam8  <- test_concat.py, test_concat_tensor_and_parameter (as above with w1 a constant Tensor and
  the concat's ((1,2,2),(1,2,2)))
* ConcatOutput8       <- test_concat.py, test_concat_output (Net2: x * b [128,64,32] -> Concat(0) with w [96,64,32]; the
  concat's ((1,4,2),(1,4,2)) kept, the mul's ((2,2,2),(2,2,2)) dropped)
* ConcatNoStrategy8   <- test_concat.py, test_concat_no_strategy (Net2 with w [128,16,32], Concat(1); the UT configures
  only the mul ((2,2,2),(2,2,2)), kept)
* ConcatAuto8         <- test_concat.py, test_concat_auto_parallel (Net2 with w [32,64,32], Concat(0); nothing
  configured)
* ConcatAuto2_8       <- test_concat.py, test_concat_auto_parallel2 (Net2 with w [128,16,32], Concat(1))
* Concat3Auto8        <- test_concat.py, test_concat_auto_parallel_3_tensor (Net3: Concat(0) of w1 [48,64,32],
  w2 [16,64,32], w3 [64,64,32] -> x [128,64,32] * out; nothing configured)
"""
import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, nn
from mindspore.ops import operations as P


def _t(shape):
    return Tensor(np.ones(shape), dtype=ms.float32)


def _spec(shape):
    return "float32[" + ",".join(map(str, shape)) + "]"


class SplitTensor8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.split = P.Split(0, 3)
        self.mul = P.Mul()
        self.matmul = P.MatMul(transpose_b=True).shard(((1, 8), (1, 8)))
        self.matmul2 = P.MatMul().shard(((1, 1), (1, 8)))
        self.weight = Parameter(_t([48, 64]), "w1")
        self.example_inputs = {"x": _spec([48, 64])}

    def construct(self, x):
        out = self.mul(x, self.weight)
        out1, out2, out3 = self.split(out)
        out = self.matmul(out1, out2)
        return self.matmul2(out, out3)


class SplitParameter8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.split = P.Split(0, 2).shard(((1, 4, 2),))
        self.mul = P.Mul()
        self.weight = Parameter(_t([96, 64, 32]), "w1")
        self.example_inputs = {"x": _spec([48, 64, 32])}

    def construct(self, x):
        out1, out2 = self.split(self.weight)
        out = self.mul(x, out1)
        return self.mul(out, out2)


class _SplitOut(nn.Cell):
    SPLIT = None
    MUL = None

    def __init__(self):
        super().__init__()
        self.split = P.Split(0, 2)
        if self.SPLIT is not None:
            self.split.shard(self.SPLIT)
        self.mul = P.Mul()
        if self.MUL is not None:
            self.mul.shard(self.MUL)
        self.weight = Parameter(_t([48, 64, 32]), "w1")
        self.example_inputs = {"x": _spec([48, 64, 32])}

    def construct(self, x):
        out = self.mul(x, self.weight)
        out1, _ = self.split(out)
        return out1


class SplitOutput8(_SplitOut):
    SPLIT = ((1, 4, 2),)


class SplitNoStrategy8(_SplitOut):
    MUL = ((1, 4, 2), (1, 4, 2))


class SplitAuto8(_SplitOut):
    pass


class _ConcatParams(nn.Cell):
    CONCAT = ((1, 4, 2), (1, 4, 2))
    IS_PARAMETER = True

    def __init__(self):
        super().__init__()
        self.concat = P.Concat(axis=0).shard(self.CONCAT)
        self.weight = Parameter(_t([96, 64, 32]), "w1") if self.IS_PARAMETER else _t([96, 64, 32])
        self.mul = P.Mul()
        self.weight2 = Parameter(_t([32, 64, 32]), "w2")
        self.example_inputs = {"x": _spec([128, 64, 32]), "b": _spec([128, 64, 32])}

    def construct(self, x, b):
        out = self.concat((self.weight, self.weight2))
        return self.mul(x, out)


class ConcatParameter8(_ConcatParams):
    pass


class ConcatTensorParam8(_ConcatParams):
    CONCAT = ((1, 2, 2), (1, 2, 2))
    IS_PARAMETER = False


class _MulConcat(nn.Cell):
    MUL = None
    CONCAT = None
    W = (96, 64, 32)
    AXIS = 0

    def __init__(self):
        super().__init__()
        self.mul = P.Mul()
        if self.MUL is not None:
            self.mul.shard(self.MUL)
        self.concat = P.Concat(axis=self.AXIS)
        if self.CONCAT is not None:
            self.concat.shard(self.CONCAT)
        self.weight = Parameter(_t(list(self.W)), "w")
        self.example_inputs = {"x": _spec([128, 64, 32]), "b": _spec([128, 64, 32])}

    def construct(self, x, b):
        out = self.mul(x, b)
        return self.concat((out, self.weight))


class ConcatOutput8(_MulConcat):
    CONCAT = ((1, 4, 2), (1, 4, 2))


class ConcatNoStrategy8(_MulConcat):
    MUL = ((2, 2, 2), (2, 2, 2))
    W = (128, 16, 32)
    AXIS = 1


class ConcatAuto8(_MulConcat):
    W = (32, 64, 32)


class ConcatAuto2_8(_MulConcat):
    W = (128, 16, 32)
    AXIS = 1


class Concat3Auto8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.concat = P.Concat(axis=0)
        self.weight = Parameter(_t([48, 64, 32]), "w1")
        self.mul = P.Mul()
        self.weight2 = Parameter(_t([16, 64, 32]), "w2")
        self.weight3 = Parameter(_t([64, 64, 32]), "w3")
        self.example_inputs = {"x": _spec([128, 64, 32]), "b": _spec([128, 64, 32])}

    def construct(self, x, b):
        out = self.concat((self.weight, self.weight2, self.weight3))
        return self.mul(x, out)
