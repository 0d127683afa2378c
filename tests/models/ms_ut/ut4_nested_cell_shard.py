"""Re-expressions of the nested Cell.shard tests of MindSpore's UT tests/ut/python/parallel/
test_functional_cell_shard.py (ut2_cell_shard_layout.py ports its other tests). All: auto_parallel,
search_mode="sharding_propagation", 8 devices, global_rank 0, dataset_strategy "full_batch" (setup_function),
Layout (2,4,1) ("dp","sp","mp"); x float32[1024,1024]. The UTs wrap ShardNet in GradWrap(NetWithLoss(VirtualLoss))
and shard net.network.network (ShardNet) and its subnet; here a root Cell holds ShardNet and applies the same
.shard() calls to it in __init__. ShardNet: subnet (matmul1 x@w1 -> add bias -> matmul2 @w2) -> ReLU.
Verify with --mesh dp=2,sp=4,mp=1.

* NestedCellShard1 <- test_cell_nested_shard_with_layout_be_set_and_propagate_1 (subnet.shard(in (dp,mp)),
  ShardNet.shard(in (mp,sp))); the UT asserts the two Shard nodes' in_layouts in the 04_inline IR.
* NestedCellShard2 <- test_cell_nested_shard_with_layout_be_set_and_propagate_2 (subnet.shard(in (dp,mp)),
  ShardNet.shard(in ((1,8),), out ((4,2),))); asserts the same for the tuple strategies.
* NestedCellShard3 <- test_cell_nested_and_repeated_shard_with_layout_be_set_and_propagate_3 (subnet.shard
  (dp,mp) then (sp,mp); ShardNet.shard (mp,sp) then in ((1,8),) out ((4,2),)); asserts the last call of each wins.
"""
import mindspore as ms
from mindspore import Layout, Parameter, nn, ops
from mindspore.common.initializer import initializer


class ShardSubNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w1 = Parameter(initializer("ones", (1024, 1024), ms.float32), "w1")
        self.w2 = Parameter(initializer("ones", (1024, 1024), ms.float32), "w2")
        self.b = Parameter(initializer("ones", (1024,), ms.float32), "bias")
        self.matmul1 = ops.MatMul()
        self.add = ops.Add()
        self.matmul2 = ops.MatMul()

    def construct(self, x):
        y = self.matmul1(x, self.w1)
        y = self.add(y, self.b)
        return self.matmul2(y, self.w2)


class ShardNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.subnet = ShardSubNet()
        self.relu = nn.ReLU()

    def construct(self, x):
        return self.relu(self.subnet(x))


class NestedCellShard1(nn.Cell):
    def _apply(self, lay):
        self.network.subnet.shard((lay("dp", "mp"),))
        self.network.shard((lay("mp", "sp"),))

    def __init__(self):
        super().__init__()
        self.network = ShardNet()
        self._apply(Layout((2, 4, 1), ("dp", "sp", "mp")))
        self.example_inputs = {"x": "float32[1024,1024]"}

    def construct(self, x):
        return self.network(x)


class NestedCellShard2(NestedCellShard1):
    def _apply(self, lay):
        self.network.subnet.shard((lay("dp", "mp"),))
        self.network.shard(((1, 8),), ((4, 2),))


class NestedCellShard3(NestedCellShard1):
    def _apply(self, lay):
        self.network.subnet.shard((lay("dp", "mp"),))
        self.network.shard((lay("mp", "sp"),))
        self.network.subnet.shard((lay("sp", "mp"),))
        self.network.shard(((1, 8),), ((4, 2),))
