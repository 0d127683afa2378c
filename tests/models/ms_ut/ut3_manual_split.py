"""Re-expressions of sharding-propagation tests in MindSpore's UT file
tests/ut/python/parallel/test_manual_gatherv2.py (a Gather whose table is split unevenly through the
"manual_split" primitive attribute). Both: auto_parallel, search_mode="sharding_propagation",
dataset_strategy "full_batch", split_tuple (10,20,30,4) on the table's axis 0, indices int32 [8,8,8], a second
input [64,8] unused, Gather -> ReLU (ReLU unconfigured). The UT wraps the net in TrainOneStepCell and asserts the
ReLU's strategy.

* ManualSplit2x3 <- test_manual_split_2x3 (8 devices; table [64,64], Gather ((4,2),(1,1,4))); asserts ReLU
  [[1,1,4,2]]
* ManualSplit3x3 <- test_manual_split_3x3 (16 devices; table [64,8,64], Gather ((4,2,2),(1,1,4))); asserts ReLU
  [[1,1,4,2,2]]
"""
import mindspore as ms
from mindspore import Parameter, nn
from mindspore.common.initializer import initializer
from mindspore.ops import operations as P


class ManualSplit2x3(nn.Cell):
    strategy = ((4, 2), (1, 1, 4))
    param_shape = (64, 64)

    def __init__(self, split_tuple=(10, 20, 30, 4)):
        super().__init__()
        self.gatherv2 = P.Gather().shard(self.strategy)
        self.gatherv2.add_prim_attr("manual_split", split_tuple)
        self.relu = P.ReLU()
        self.param = Parameter(initializer("ones", self.param_shape, ms.float32), name="gatherv2_param")
        self.axis = 0
        self.example_inputs = {"x": "int32[8,8,8]", "b": "float32[64,8]"}

    def construct(self, x, b):
        out = self.gatherv2(self.param, x, self.axis)
        return self.relu(out)


class ManualSplit3x3(ManualSplit2x3):
    strategy = ((4, 2, 2), (1, 1, 4))
    param_shape = (64, 8, 64)
