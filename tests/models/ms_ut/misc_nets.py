"""More re-expressions of sharding-propagation tests in MindSpore's UT folder tests/ut/python/parallel/.
File names marked (?) were inferred from the contents, not confirmed.

* Conv3dNegAuto        <- test_conv3d.py (?): test_conv3d_pad_mode_unet_3d_auto_rank0 (8 devices, full_batch,
  Conv3D pad_mode="pad" stride 2 pad 1 unconfigured, Neg ((1,1,2,4,1),))
* EmbeddingMulAuto     <- test_embedding.py (?): test_embedding_auto0 (8 devices, full_batch, nothing configured;
  the embedding weight is a construct() input in the UT)
* VirtualDatasetAuto   <- test_virtual_dataset*.py (?): test_without_virtual_dataset_model_parallel_auto_parallel
  (8 devices, dataset_strategy ((1,8),(1,8),(1,8)), nothing configured; inputs given globally: the UT feeds
  per-device slices [128,4],[32,8],[64,256])
* VirtualDatasetStrat  <- test_virtual_dataset_model_parallel_auto_parallel_with_strategy (same, matmul1/matmul2
  ((2,2),(2,2)), gelu ((2,4),)); the UT's Net1 calls _VirtualDataset explicitly, here it is left to the framework
* VirtualDatasetExplicit <- test_virtual_dataset_model_parallel_auto_parallel (Net1 with an explicit
  _VirtualDataset, nothing configured)
"""
import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, nn, ops
from mindspore.common.initializer import initializer
from mindspore.ops.auto_generate import Embedding
from mindspore.ops.operations.comm_ops import _VirtualDataset


class Conv3dNegAuto(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv3d = ops.Conv3D(out_channel=8, kernel_size=3, pad_mode="pad", pad=1, stride=2)
        self.neg = ops.Neg().shard(((1, 1, 2, 4, 1),))
        self.w1 = Parameter(initializer("normal", (8, 16, 3, 3, 3), ms.float32), name="w1")
        self.example_inputs = {"x": "float32[2,16,56,56,24]", "b": "float32[32,16,8,8,8]"}

    def construct(self, x, b):
        return self.neg(self.conv3d(x, self.w1))


class EmbeddingMulAuto(nn.Cell):
    def __init__(self):
        super().__init__()
        self.embedding = Embedding()
        self.mul = ops.Mul()
        self.ids = Tensor(np.ones([64, 64]), dtype=ms.int32)
        self.example_inputs = {"x": "float32[64,32]", "y": "float32[64,64,32]"}

    def construct(self, x, y):
        return self.mul(self.embedding(self.ids, x), y)


class VirtualDatasetAuto(nn.Cell):
    def __init__(self, s1=None, s2=None, s3=None):
        super().__init__()
        self.matmul1 = ops.MatMul().shard(s1)
        self.matmul2 = ops.MatMul().shard(s2)
        self.gelu = ops.GeLU().shard(s3)
        self.example_inputs = {"x": "float32[128,32]", "y": "float32[32,64]", "b": "float32[64,2048]"}

    def construct(self, x, y, b):
        return self.matmul2(self.gelu(self.matmul1(x, y)), b)


class VirtualDatasetStrat(VirtualDatasetAuto):
    def __init__(self):
        super().__init__(((2, 2), (2, 2)), ((2, 2), (2, 2)), ((2, 4),))


class VirtualDatasetExplicit(VirtualDatasetAuto):
    def __init__(self):
        super().__init__()
        self.virtual_dataset = _VirtualDataset()

    def construct(self, x, y, b):
        x, y, b = self.virtual_dataset(x, y, b)
        return self.matmul2(self.gelu(self.matmul1(x, y)), b)
