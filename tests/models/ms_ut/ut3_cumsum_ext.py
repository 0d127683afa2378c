"""Re-expressions of the sharding-propagation tests of CumsumExt in MindSpore's UT folder
tests/ut/python/parallel/ (file name not confirmed). Both: auto_parallel, search_mode="sharding_propagation",
8 devices, dataset_strategy "full_batch"; the UT compiles the forward net directly (CumsumExtNet1: Mul(x, x)
configured, CumsumExt unconfigured, then out[0]); x [8,8,8]; dim is a construct() input in the UT, a constant
here.

* CumsumExt0 <- test_cumsum_ext_auto_parallel_sharding_propagation0 (Mul ((1,2,4),(1,2,4)), dim 0); asserts
  CumsumExt [[1,2,4]]
* CumsumExt1 <- test_cumsum_ext_auto_parallel_sharding_propagation1 (Mul ((2,1,4),(2,1,4)), dim 1); asserts
  CumsumExt [[2,1,4]]
"""
from mindspore import nn
from mindspore.ops.auto_generate.gen_ops_prim import CumsumExt, Mul


class CumsumExt0(nn.Cell):
    strategy = ((1, 2, 4), (1, 2, 4))
    dim = 0

    def __init__(self):
        super().__init__()
        self.mul = Mul().shard(self.strategy)
        self.cumsum_ext_op = CumsumExt()
        self.example_inputs = {"x": "float32[8,8,8]"}

    def construct(self, x):
        out = self.mul(x, x)
        out = self.cumsum_ext_op(out, self.dim)
        return out[0]


class CumsumExt1(CumsumExt0):
    strategy = ((2, 1, 4), (2, 1, 4))
    dim = 1
