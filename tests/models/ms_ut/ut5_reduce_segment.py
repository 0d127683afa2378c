"""Re-expressions of reduce / segment-reduce sharding-propagation UTs in MindSpore's tests/ut/python/parallel/.
All: auto_parallel, search_mode="sharding_propagation", 8 devices, global_rank 0, dataset_strategy "full_batch"
(setup_function), nothing configured; the UTs' GradWrap(NetWithLoss(VirtualLoss)) is dropped.

* SumMul1_8   <- test_auto_parallel_reduce_method.py, test_sum_mul (x, y [128,32,64], b[32,64]; Mul ->
  ReduceSum(keep_dims=False) axis (0,) -> Mul b)
* SumMul2_8   <- test_sum_mul2 (x, y [128,128,64,64], b[64,64]; ReduceSum axes (0, 1))
* SumMul3_8   <- test_sum_mul3 (x, y [128,32,64], b[128,32]; ReduceSum axis -1)
* SegmentSum8 <- test_auto_parallel_segment_sum.py, test_auto_parallel_unsortedsegmentsum (x[16,16,32,64],
  indices int64 [16,16] (np.random.randint's default), UnsortedSegmentSum num_segments 16)
* SegmentMin8 <- test_auto_parallel_segment_min.py, test_auto_parallel_unsortedsegmentmin (x[16,16,32,64],
  indices int32 [16], UnsortedSegmentMin num_segments 16)
"""
import mindspore.ops as ops
from mindspore import nn
from mindspore.ops import operations as P


class _SumMul(nn.Cell):
    AXIS, X, B = (0,), "float32[128,32,64]", "float32[32,64]"

    def __init__(self):
        super().__init__()
        self.mul1 = P.Mul()
        self.reduce_sum = P.ReduceSum(keep_dims=False)
        self.mul2 = P.Mul()
        self.example_inputs = {"x": self.X, "y": self.X, "b": self.B}

    def construct(self, x, y, b):
        out = self.mul1(x, y)
        out = self.reduce_sum(out, self.AXIS)
        return self.mul2(out, b)


class SumMul1_8(_SumMul):
    pass


class SumMul2_8(_SumMul):
    AXIS, X, B = (0, 1), "float32[128,128,64,64]", "float32[64,64]"


class SumMul3_8(_SumMul):
    AXIS, X, B = -1, "float32[128,32,64]", "float32[128,32]"


class SegmentSum8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.merge_op = ops.UnsortedSegmentSum()
        self.num_segments = 16
        self.example_inputs = {"vectors": "float32[16,16,32,64]", "index": "int64[16,16]"}

    def construct(self, vectors, index):
        return self.merge_op(vectors, index, self.num_segments)


class SegmentMin8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.merge_op = ops.UnsortedSegmentMin()
        self.num_segments = 16
        self.example_inputs = {"vectors": "float32[16,16,32,64]", "index": "int32[16]"}

    def construct(self, vectors, index):
        return self.merge_op(vectors, index, self.num_segments)


class SumMul1_8DP(SumMul1_8):
    """SumMul1_8 under dataset_strategy "data_parallel" (a variant; the UT's is "full_batch")."""


class SegmentSum8DP(SegmentSum8):
    """SegmentSum8 under dataset_strategy "data_parallel" (a variant; the UT's is "full_batch")."""


class SegmentMin8DP(SegmentMin8):
    """SegmentMin8 under dataset_strategy "data_parallel" (a variant; the UT's is "full_batch")."""
