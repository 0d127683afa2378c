"""Re-expressions of the sharding-propagation tests of MaxDim and Max in MindSpore's UT folder
tests/ut/python/parallel/ (one file per operator; names not confirmed). All: auto_parallel,
search_mode="sharding_propagation", 8 devices, dataset_strategy "full_batch"; the UT compiles the forward net
directly: Mul(x, x) configured, then the reduction unconfigured. For MaxDim, dim and keepdim are construct()
inputs in the UT (scalars) and the net returns out[0] (the values); here dim/keepdim are constants.

* MaxDim0 <- test_max_dim_auto_parallel_sharding_propagation0 (x [8,8,8], Mul ((1,2,4),(1,2,4)), dim 0,
  keepdim True); asserts MaxDim [[1,2,4]]
* MaxDim1 <- test_max_dim_auto_parallel_sharding_propagation1 (Mul ((2,1,4),(2,1,4)), dim 1, keepdim False);
  asserts MaxDim [[2,1,4]]
* MaxAll2d <- test_max_auto_parallel_sharding_propagation0 (x [32,16], Mul ((2,4),(2,4)), Max over all
  elements); asserts Max [[2,4]]
* MaxAll3d <- test_max_auto_parallel_sharding_propagation1 (x [8,8,8], Mul ((2,2,2),(2,2,2))); asserts Max
  [[2,2,2]]
"""
from mindspore import nn
from mindspore.ops.auto_generate.gen_ops_prim import Max, MaxDim, Mul


class MaxDim0(nn.Cell):
    strategy = ((1, 2, 4), (1, 2, 4))
    dim = 0
    keepdim = True

    def __init__(self):
        super().__init__()
        self.mul = Mul().shard(self.strategy)
        self.max_dim_op = MaxDim()
        self.example_inputs = {"x": "float32[8,8,8]"}

    def construct(self, x):
        out = self.mul(x, x)
        out = self.max_dim_op(out, self.dim, self.keepdim)
        return out[0]


class MaxDim1(MaxDim0):
    strategy = ((2, 1, 4), (2, 1, 4))
    dim = 1
    keepdim = False


class MaxAll2d(nn.Cell):
    strategy = ((2, 4), (2, 4))
    shape = "float32[32,16]"

    def __init__(self):
        super().__init__()
        self.mul = Mul().shard(self.strategy)
        self.max_op = Max()
        self.example_inputs = {"x": self.shape}

    def construct(self, x):
        return self.max_op(self.mul(x, x))


class MaxAll3d(MaxAll2d):
    strategy = ((2, 2, 2), (2, 2, 2))
    shape = "float32[8,8,8]"
