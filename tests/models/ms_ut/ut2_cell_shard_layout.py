"""Re-expressions of Cell.shard / mindspore.shard-with-Layout tests from MindSpore's UT
tests/ut/python/parallel/test_functional_cell_shard.py (auto_parallel, search_mode="sharding_propagation",
global_rank 0, dataset_strategy "full_batch" (setup_function); the UTs wrap ShardNet in GradWrap(NetWithLoss(
VirtualLoss)), here the forward ShardNet: subnet(matmul1 x@w1 -> add bias -> matmul2 @w2) -> relu, x[1024,1024]).
Verify with the Layout's alias names as the mesh: --mesh dp=2,sp=4,mp=1 (16-device class: dp=2,mp=4,sp=2,
interleaved_parallel=2 -- see its note).

* CellShardLayout     <- test_cell_shard_with_layout_be_set_and_propagate (8 devices, Layout (2,4,1) (dp,sp,mp),
  subnet.shard(in (dp,mp))); the UT asserts AShardIdentity in_layout tensor_map (2,0) and MatMul (the first in the
  subnet) in_strategy ((2,1),(1,4))
* MsShardLayout       <- test_ms_shard_with_layout_be_set_and_propagate (the same through ms.shard(subnet, ...));
  same asserts
* MsShardInterleaved  <- test_ms_shard_with_multi_dim_and_interleaved_parallel_layout (16 devices, Layout (2,4,2,2)
  (dp,mp,sp,interleaved_parallel), in ((dp,interleaved_parallel,mp),sp)); asserts MatMul in_strategy ((8,2),(2,1))
* CellShardOutLayout  <- test_cell_shard_with_out_layout_be_set_and_propagate (8 devices, in (dp,mp), out (dp,mp),
  parameter_plan {"self.subnet.w1": (mp,sp)}); asserts the last MatMul's out_strategy ((2,1)) and an AllReduce over
  ranks (0,1,2,3)
* CellShardOutStrategyRS <- test_cell_shard_with_out_strategy_be_set_and_propagate_reduce_scatter (out_strategy
  ((8,1),) as a tuple, parameter_plan as above); asserts out_strategy ((8,1)) and a ReduceScatter over (0,1,2,3)

strategist ignores ``parameter_plan``.
"""
import mindspore as ms
from mindspore import Layout, Parameter, nn, ops
from mindspore.common.initializer import initializer


class _ShardSubNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w1 = Parameter(initializer("ones", (1024, 1024), ms.float32), "w1")
        self.w2 = Parameter(initializer("ones", (1024, 1024), ms.float32), "w2")
        self.b = Parameter(initializer("ones", (1024,), ms.float32), "bias")
        self.matmul1 = ops.MatMul()
        self.add = ops.Add()
        self.matmul2 = ops.MatMul()

    def construct(self, x):
        return self.matmul2(self.add(self.matmul1(x, self.w1), self.b), self.w2)


class _ShardNet(nn.Cell):
    def __init__(self, in_strategy=None, out_strategy=None, shard_key=None, parameter_plan=None):
        super().__init__()
        self.subnet = _ShardSubNet()
        if shard_key == "ms":
            self.subnet_shard = ms.shard(self.subnet, in_strategy, out_strategy, parameter_plan=parameter_plan)
        else:
            if shard_key == "cell":
                self.subnet.shard(in_strategy, out_strategy, parameter_plan=parameter_plan)
            self.subnet_shard = self.subnet
        self.relu = nn.ReLU()
        self.example_inputs = {"x": "float32[1024,1024]"}

    def construct(self, x):
        return self.relu(self.subnet_shard(x))


def _lay3():
    return Layout((2, 4, 1), ("dp", "sp", "mp"))


class CellShardLayout(_ShardNet):
    def __init__(self):
        lay = _lay3()
        super().__init__((lay("dp", "mp"),), shard_key="cell")


class MsShardLayout(_ShardNet):
    def __init__(self):
        lay = _lay3()
        super().__init__((lay("dp", "mp"),), shard_key="ms")


class MsShardInterleaved(_ShardNet):
    def __init__(self):
        lay = Layout((2, 4, 2, 2), ("dp", "mp", "sp", "interleaved_parallel"))
        super().__init__((lay(("dp", "interleaved_parallel", "mp"), "sp"),), shard_key="ms")


class CellShardOutLayout(_ShardNet):
    def __init__(self):
        lay = _lay3()
        super().__init__((lay("dp", "mp"),), (lay("dp", "mp"),), "cell", {"self.subnet.w1": lay("mp", "sp")})


class CellShardOutStrategyRS(_ShardNet):
    def __init__(self):
        lay = _lay3()
        super().__init__((lay("dp", "mp"),), ((8, 1),), "cell", {"self.subnet.w1": lay("mp", "sp")})
