"""Re-expressions of the full Net of MindSpore's UT tests/ut/python/parallel/auto_parallel_interface/
test_auto_parallel_reshard.py (auto_parallel, search_mode="sharding_propagation", default dataset strategy; the UT
compiles the forward net only). reshard.py ports just the tail of it; here the whole structure is kept: Flatten ->
Dense(784,128) -> ms.shard(NetForward, in (4,1), parameter_plan block0 dense weight) -> ms.shard(NetForward,
in (2,2)) -> ms.reshard(activation, layout1) x ms.reshard(const [128,128], layout2) -> unconfigured MatMul. Each
NetForward runs BasicBlock block0 (GELU, Mul, Dense, GELU, ms.shard(abs+add, in ((2,2),(1,4)), out ((4,1),)))
and a nested ms.shard(BasicBlock block2, in ((4,1),(1,4)), out ((4,1),), parameter_plan dense weight (4,1)).
The Layouts, construct() arguments in the UT, are attributes here. Input x float32[32,1,28,28].

* NestedShardReshard4   <- test_shard_with_in_strategy_4x1 and test_parameter_plan_with_strategy_4x1 (4 devices,
  Layout (2,2) ("dp","mp"): layout1 ("dp","None"), layout2 ("None","mp")); the UT asserts the AShardIdentity
  in_strategy ((4,1)) and the MatMul fed by the block2 weight ((4,1),(1,1)).
* NestedShardLayoutPlan4 <- test_parameter_plan_with_layout_4x1 (Net2: the outer parameter_plan is a Layout
  (4,1) ("dp","mp") ("dp","mp") instead of the tuple (4,1); same reshard layouts); asserts the same MatMul.
* NestedShardReshard8   <- test_reshard_with_layout_propagation (8 devices, Layout (4,2,1) ("dp","mp","sp"):
  layout3 ("dp","mp"), layout4 ("mp","sp")); asserts the final MatMul in_strategy ((4,2),(2,1)).
"""
import numpy as np
import mindspore as ms
from mindspore import Layout, Tensor, nn, ops


class BasicBlock(nn.Cell):
    def __init__(self):
        super().__init__()
        self.layer1_dense1 = nn.Dense(128, 128)
        self.layer1_gelu = nn.GELU()

        def test_function(x, y):
            x = ops.abs(x)
            return x + y
        self.test_fn = ms.shard(test_function, in_strategy=((2, 2), (1, 4)), out_strategy=((4, 1),))

    def construct(self, x, u):
        x1 = self.layer1_gelu(x)
        y = self.layer1_gelu(u)
        y = x1 * y
        x = self.layer1_dense1(x)
        x = self.layer1_gelu(x)
        return self.test_fn(x, y)


class NetForward(nn.Cell):
    def __init__(self):
        super().__init__()
        self.layer2_block0 = BasicBlock()
        self.layer2_block1 = BasicBlock()
        self.layer2_block2 = BasicBlock()
        self.layer2_block2_graph = ms.shard(self.layer2_block2, in_strategy=((4, 1), (1, 4)), out_strategy=((4, 1),),
                                            parameter_plan={"self.layer2_block2.layer1_dense1.weight": (4, 1)})
        self.layer2_block3 = BasicBlock()

    def construct(self, x):
        x = self.layer2_block0(x, x)
        return self.layer2_block2_graph(x, x)


class NestedShardReshard4(nn.Cell):
    layout_plan = False
    mesh = ((2, 2), ("dp", "mp"), ("dp", "None"), ("None", "mp"))

    def __init__(self):
        super().__init__()
        shape, names, l1, l2 = self.mesh
        lay = Layout(shape, names)
        self.layout1 = lay(*l1)
        self.layout2 = lay(*l2)
        self.layer3_net = NetForward()
        plan = (4, 1)
        if self.layout_plan:
            plan = Layout((4, 1), ("dp", "mp"))("dp", "mp")
        self.layer3_net_graph = ms.shard(self.layer3_net, in_strategy=((4, 1),),
                                         parameter_plan={"self.layer3_net.layer2_block0.layer1_dense1.weight": plan})
        self.layer3_net1 = NetForward()
        self.layer3_net1_graph = ms.shard(self.layer3_net1, in_strategy=((2, 2),))
        self.layer3_flatten = nn.Flatten()
        self.layer3_layer1 = nn.Dense(28 * 28, 128)
        self.layer3_layer2 = nn.Dense(128, 10)
        self.layer3_add = ops.Add()
        self.matmul = ops.MatMul()
        self.y = Tensor(np.ones(shape=(128, 128)), dtype=ms.float32)
        self.example_inputs = {"x": "float32[32,1,28,28]"}

    def construct(self, x):
        x1 = self.layer3_flatten(x)
        x2 = self.layer3_layer1(x1)
        x3 = self.layer3_net_graph(x2)
        x4 = self.layer3_net1_graph(x3)
        x4_reshard = ms.reshard(x4, self.layout1)
        y_reshard = ms.reshard(self.y, self.layout2)
        return self.matmul(x4_reshard, y_reshard)


class NestedShardLayoutPlan4(NestedShardReshard4):
    layout_plan = True


class NestedShardReshard8(NestedShardReshard4):
    mesh = ((4, 2, 1), ("dp", "mp", "sp"), ("dp", "mp"), ("mp", "sp"))
