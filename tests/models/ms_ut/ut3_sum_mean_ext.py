"""Re-expressions of the sharding-propagation tests of SumExt and MeanExt in MindSpore's UT folder
tests/ut/python/parallel/ (two files, one per operator; names not confirmed). All: auto_parallel,
search_mode="sharding_propagation", 8 devices, dataset_strategy "full_batch"; the UT compiles the forward net
directly (SumNet1 / MeanNet1: Mul(x, x) configured, then SumExt / MeanExt unconfigured, then out[0]); x [8,8,8].
In the UT dim and keepdim are construct() inputs (scalars); here they are constants of the net.

* SumExtKeepDim   <- test_sum_ext_auto_parallel_sharding_propagation_keepdims_true (Mul ((1,2,4),(1,2,4)),
  dim 1, keepdim True); asserts SumExt [[1,2,4]]
* SumExtDim0      <- test_sum_ext_auto_parallel_sharding_propagation_keepdims_false (Mul ((2,1,4),(2,1,4)),
  dim 0, keepdim False); asserts SumExt [[2,1,4]]
* SumExtDimList   <- test_sum_ext_auto_parallel_sharding_propagation_dim_list (Mul ((1,2,4),(1,2,4)), dim (0,1),
  keepdim True); asserts SumExt [[1,2,4]]
* SumExtDimNone   <- test_sum_ext_auto_parallel_sharding_propagation_dim_none (dim None, keepdim True); asserts
  SumExt [[1,2,4]]
* MeanExtKeepDim / MeanExtDim0 / MeanExtDimList / MeanExtDimNone <- the four
  test_mean_ext_auto_parallel_sharding_propagation_* tests (same settings; MeanExt asserted as SumExt above)
"""
from mindspore import nn
from mindspore.ops.auto_generate.gen_ops_prim import MeanExt, Mul, SumExt


class _MulReduce(nn.Cell):
    op = SumExt
    strategy = ((1, 2, 4), (1, 2, 4))
    dim = 1
    keepdim = True

    def __init__(self):
        super().__init__()
        self.mul = Mul().shard(self.strategy)
        self.reduce = self.op()
        self.example_inputs = {"x": "float32[8,8,8]"}

    def construct(self, x):
        out = self.mul(x, x)
        out = self.reduce(out, self.dim, self.keepdim)
        return out[0]


class SumExtKeepDim(_MulReduce):
    pass


class SumExtDim0(_MulReduce):
    strategy = ((2, 1, 4), (2, 1, 4))
    dim = 0
    keepdim = False


class SumExtDimList(_MulReduce):
    dim = (0, 1)


class SumExtDimNone(_MulReduce):
    dim = None


class MeanExtKeepDim(_MulReduce):
    op = MeanExt


class MeanExtDim0(SumExtDim0):
    op = MeanExt


class MeanExtDimList(SumExtDimList):
    op = MeanExt


class MeanExtDimNone(SumExtDimNone):
    op = MeanExt
