"""Re-expressions of sharding-propagation UTs about the dataset / virtual-dataset boundary in MindSpore's
tests/ut/python/parallel/. All: auto_parallel, search_mode="sharding_propagation", 8 devices, global_rank 0,
nothing configured.

* VirtualDataset3Input8 <- test_auto_parallel_tuple_depend.py, test_virtual_dataset_3_input (dataset_strategy
  "full_batch"; x[128,32] y[32,64] b[64,2048]; the UT's Net calls _VirtualDataset(x, y, b) itself, here it is
  left to the framework; MatMul -> GeLU, BatchNorm1d(2048) on b, MatMul; GradWrap(NetWithLoss) dropped)
* InferenceDense8       <- test_auto_parallel_inference.py, test_inference_phase (dataset_strategy "full_batch";
  set_cost_model_context(run_phase=1) is not expressed; predict[64,512] label[64,128]; nn.Dense(512,128) -> ReLU
  -> nn.SoftmaxCrossEntropyWithLogits() (sparse=False, reduction "none") as WithLossCell builds it; the UT runs
  TrainOneStepCell(Momentum), dropped here)
The netgen entries add dataset-strategy variants of UT nets: the UT's "full_batch" net given a tuple dataset
strategy (batch split over all devices for some inputs, unsplit for the others), which MindSpore accepts.
"""
from mindspore import nn
from mindspore.ops import operations as P


class VirtualDataset3Input8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.matmul1 = P.MatMul()
        self.matmul2 = P.MatMul()
        self.gelu = P.GeLU()
        self.bn1 = nn.BatchNorm1d(2048, momentum=0.1, eps=1e-5)
        self.example_inputs = {"x": "float32[128,32]", "y": "float32[32,64]", "b": "float32[64,2048]"}

    def construct(self, x, y, b):
        out = self.gelu(self.matmul1(x, y))
        b = self.bn1(b)
        return self.matmul2(out, b)


class InferenceDense8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.dense = nn.Dense(512, 128)
        self.relu = P.ReLU()
        self.loss = nn.SoftmaxCrossEntropyWithLogits()
        self.example_inputs = {"predict": "float32[64,512]", "label": "float32[64,128]"}

    def construct(self, predict, label):
        out = self.relu(self.dense(predict))
        return self.loss(out, label)


class VirtualDataset3Input8DS(VirtualDataset3Input8):
    """VirtualDataset3Input8 under dataset_strategy ((8,1),(1,1),(1,1)) (a variant)."""


class InferenceDense8DS(InferenceDense8):
    """InferenceDense8 under dataset_strategy ((8,1),(8,1)) (a variant)."""
