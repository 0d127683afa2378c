"""Re-expressions of Transpose-chain and cross-entropy-loss UTs in MindSpore's tests/ut/python/parallel/
(test_transpose.py; auto_parallel_interface/test_auto_parallel_cross_entropy_info.py).
All: auto_parallel, search_mode="sharding_propagation", global_rank 0, 8 devices; the UTs run semi_auto_parallel
with every operator shard()ed; here one anchor per net (named below), the other shard() calls dropped.

* TransposeCE8        <- test_transpose.py, test_transpose1 (Model.train of TransposeNet with
  nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean") (a SparseSoftmaxCrossEntropyWithLogits), Momentum;
  dataset_strategy "data_parallel" (the UT resets the context, full_batch False); predict [32,128], label int32[32];
  MatMul w [128,256] -> Transpose (1,0) -> Transpose (1,0) -> the loss. The matmul's ((8,1),(1,1)) kept; the
  transposes' ((1,8),) and the loss's ((8,1),(8,1)) dropped; Model/optimizer dropped, the loss called in construct)
* TransposeCEKeepT8   <- test_transpose.py, test_transpose2 (as above; the matmul's ((8,1),(1,1)) and transpose1's
  ((1,4),) kept, transpose2's ((1,8),) and the loss's dropped)
* CrossEntropy8       <- test_auto_parallel_cross_entropy_info.py, test_cross_entropy_semi_auto_parallel_with_strategy
  (AutoParallel(net, parallel_mode="semi_auto"), dataset_strategy "data_parallel" (FakeData3 batch 16 per device:
  inputs float16[128,96], target int64[128], weight float16[96]); Mul w [128,96] -> CrossEntropyLoss(x, target,
  weight, "mean", -100, 0.0); the loss's ((2,1),(2,),(1,)) kept, the mul's ((2,1),(2,1)) dropped; stop_gradient
  on the label dropped)
* CrossEntropyAuto8   <- test_cross_entropy_semi_auto_parallel_without_strategy (as above, nothing configured)
"""
import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, nn
from mindspore.ops import operations as P
from mindspore.ops.auto_generate import gen_ops_prim


class _TransposeCE(nn.Cell):
    T1 = None

    def __init__(self):
        super().__init__()
        self.matmul = P.MatMul().shard(((8, 1), (1, 1)))
        self.matmul_weight = Parameter(Tensor(np.ones([128, 256]), dtype=ms.float32), name="weight")
        self.transpose1 = P.Transpose()
        if self.T1 is not None:
            self.transpose1.shard(self.T1)
        self.transpose2 = P.Transpose()
        self.loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
        self.example_inputs = {"predict": "float32[32,128]", "label": "int32[32]"}

    def construct(self, predict, label):
        x = self.matmul(predict, self.matmul_weight)
        x = self.transpose1(x, (1, 0))
        x = self.transpose2(x, (1, 0))
        return self.loss(x, label)


class TransposeCE8(_TransposeCE):
    pass


class TransposeCEKeepT8(_TransposeCE):
    T1 = ((1, 4),)


class _CrossEntropy(nn.Cell):
    CROSS = None

    def __init__(self):
        super().__init__()
        self.mul_weight = Parameter(Tensor(np.full((128, 96), 0.5, dtype=np.float16), dtype=ms.float16),
                                    name="mul_weight")
        self.mul = P.Mul()
        self.cross_entropy = gen_ops_prim.CrossEntropyLoss()
        if self.CROSS is not None:
            self.cross_entropy.shard(self.CROSS)
        self.example_inputs = {"inputs": "float16[128,96]", "label": "int64[128]", "cross_weight": "float16[96]"}

    def construct(self, inputs, label, cross_weight):
        x = self.mul(inputs, self.mul_weight)
        return self.cross_entropy(x, label, cross_weight, "mean", -100, 0.0)


class CrossEntropy8(_CrossEntropy):
    CROSS = ((2, 1), (2,), (1,))


class CrossEntropyAuto8(_CrossEntropy):
    pass
