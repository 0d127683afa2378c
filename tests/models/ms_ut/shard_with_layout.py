"""Re-expressions of MindSpore's UT tests/ut/python/parallel/test_auto_parallel_shard_with_layout.py
(auto_parallel, search_mode="sharding_propagation", device_num=16, default dataset strategy; the UT wraps the net
in GradWrap(NetWithLoss(VirtualLoss)); here the forward NetTwoMatMul).

* LayoutInNodeAttrs   <- test_layout_in_node_prim_attrs_correct (Layout (2,4,2,2) dp,mp,sp,interleaved_parallel)
* LayoutPropTwoMatMul <- test_layout_propagation_in_two_matmul_net (Layout (2,4,2) dp,mp,sp; matmul1 in/out
  layouts, matmul2 unconfigured; fully_use_devices=False)
* LayoutMixedStrategy <- test_layout_propagation_with_mixed_strategy (matmul1 Layout, matmul2 tuple ((8,2),(2,1)))
"""
import mindspore as ms
from mindspore import Layout, Parameter, nn, ops
from mindspore.common.initializer import initializer


class _NetTwoMatMul(nn.Cell):
    def __init__(self, in1=None, in2=None, out1=None, out2=None):
        super().__init__()
        self.matmul1 = ops.MatMul()
        self.matmul2 = ops.MatMul()
        if in1:
            self.matmul1.shard(in_strategy=in1, out_strategy=out1)
        if in2:
            self.matmul2.shard(in_strategy=in2, out_strategy=out2)
        self.relu = ops.ReLU()
        self.gelu = ops.GeLU()
        self.w1 = Parameter(initializer("normal", (1024, 1024), ms.float32), name="w1")
        self.w2 = Parameter(initializer("normal", (1024, 1024), ms.float32), name="w2")
        self.example_inputs = {"y": "float32[1024,1024]"}

    def construct(self, y):
        y = self.relu(y)
        y_new = self.gelu(y)
        out1 = self.matmul1(y, self.w1)
        out2 = self.matmul2(out1, self.w2)
        return self.relu(out2) + y_new


class LayoutInNodeAttrs(_NetTwoMatMul):
    def __init__(self):
        lay = Layout((2, 4, 2, 2), ("dp", "mp", "sp", "interleaved_parallel"))
        super().__init__((lay(("dp", "interleaved_parallel"), "mp"), lay("mp", "sp")),
                         (lay(("dp", "interleaved_parallel", "mp"), "sp"), lay("sp", "None")),
                         (lay(("dp", "interleaved_parallel", "mp"), "sp"),),
                         (lay(("dp", "interleaved_parallel", "mp", "sp"), "None"),))


class LayoutPropTwoMatMul(_NetTwoMatMul):
    def __init__(self):
        lay = Layout((2, 4, 2), ("dp", "mp", "sp"))
        super().__init__((lay("dp", "mp"), lay("mp", "sp")), None, (lay("dp", "sp"),))


class LayoutMixedStrategy(_NetTwoMatMul):
    def __init__(self):
        lay = Layout((2, 4, 2), ("dp", "mp", "sp"))
        super().__init__((lay("dp", "mp"), lay("mp", "sp")), ((8, 2), (2, 1)))
