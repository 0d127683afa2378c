"""Re-expressions of PReLU sharding-propagation UTs in MindSpore's tests/ut/python/parallel/.
All: auto_parallel, search_mode="sharding_propagation", global_rank 0, dataset_strategy "full_batch", nothing
configured; wrappers (GradWrap, NetWithLoss(VirtualLoss)) dropped.

* MulPReLU16       <- test_auto_parallel_matmul_prelu.py, test_matmul_prelu (16 devices; x, y [16,3,128,32],
  b[3] a construct() input; Mul -> PReLU(out, b))
* BnPReLU8         <- test_auto_parallel_BN_PReLU.py, test_auto_parallel_bn_with_prelu (8 devices;
  x[16,16,32,64]; nn.BatchNorm2d(16, momentum=0.1, eps=1e-5) with add_flags_recursive(fp32=True) -> nn.PReLU(16))
* PReLUCell8       <- test_auto_parallel_assign_sub_with_ref_key.py, test_auto_parallel_assign_sub_with_ref_key
  (8 devices; x[4,4,32,64]; nn.PReLU(4) alone; the UT asserts PReLU [[1,1,1,1],[1]])
"""
from mindspore import nn
from mindspore.ops import operations as P


class MulPReLU16(nn.Cell):
    def __init__(self):
        super().__init__()
        self.mul1 = P.Mul()
        self.prelu = P.PReLU()
        self.example_inputs = {"x": "float32[16,3,128,32]", "y": "float32[16,3,128,32]", "b": "float32[3]"}

    def construct(self, x, y, b):
        out = self.mul1(x, y)
        return self.prelu(out, b)


class BnPReLU8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(16, momentum=0.1, eps=1e-5).add_flags_recursive(fp32=True)
        self.prelu = nn.PReLU(16)
        self.example_inputs = {"x": "float32[16,16,32,64]"}

    def construct(self, x):
        out = self.bn(x)
        return self.prelu(out)


class PReLUCell8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.prelu = nn.PReLU(4)
        self.example_inputs = {"x": "float32[4,4,32,64]"}

    def construct(self, x):
        return self.prelu(x)


class BnPReLU8DP(BnPReLU8):
    """BnPReLU8 under dataset_strategy "data_parallel" (a variant; the UT's is "full_batch")."""
