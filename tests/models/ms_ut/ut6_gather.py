"""Re-expressions of Gather UTs in MindSpore's tests/ut/python/parallel/test_gather_v2.py.
All: auto_parallel, search_mode="sharding_propagation", global_rank 0, 8 devices, dataset_strategy "full_batch"
(setup_function), nothing configured unless noted. The UTs compile GradWrap(NetWithLoss(VirtualLoss)) (or the bare
Net2) under semi_auto_parallel (auto_parallel with search_mode="dynamic_programming" for test_gatherv2_auto0/1);
the wrappers are dropped, and only the Gather's shard() is kept as the anchor (the Mul's/Sub's ((4, 2, 1), (4, 2, 1))
and the like are dropped: MindSpore propagates to them), except where the UT configures the Mul alone.

Net:  Gather(x, index, axis) (index a constant int32 [64, 64] tensor) -> Mul(out, y)
Net2: Gather(w, x, axis) (w a float32 [64, 64] Parameter table, x int32 ids) -> Sub(out, y)

* GatherAxis0Table8  <- test_gatherv2_semi_auto0 (Net, axis 0; x [64,64], y [64,64,64]; gather ((1,8),(1,1)) kept,
  mul ((4,2,1),(4,2,1)) dropped)
* GatherAxis1Rows8   <- test_gatherv2_semi_auto4 (Net, axis 1; x [64,32], y [64,64,64]; gather ((8,1),(1,1)) kept,
  mul dropped)
* GatherMulOnly8     <- test_gatherv2_semi_auto6 (Net, axis 0; x [64,32], y [64,64,32]; the UT configures only the
  mul ((4,2,1),(4,2,1)), kept as the one anchor: MindSpore propagates back to the Gather)
* Gather1d8          <- test_gatherv2_semi_auto8 (Net, axis 0, index [64, 64]; x [64], y [64,64]; gather
  ((8,),(1,1)) kept, mul ((4,2),(4,2)) dropped)
* GatherAuto0_8      <- test_gatherv2_auto0 (Net, axis 0; x [64,32], y [64,64,32]; nothing configured)
* GatherAuto1_8      <- test_gatherv2_auto1 (Net, axis 1; x [64,32], y [64,64,64]; nothing configured)
* GatherIdsBatch8    <- test_gatherv2_no_shard_axis_and_set_out_strategy (Net2, axis 0; x int32[8,64],
  y [8,64,64]; gather ((1,1),(8,1)) kept, its out_strategy ((8,1,1),) and the sub's ((8,1,1),(8,1,1)) dropped)
* GatherTableRows8   <- test_gatherv2_bs_1_and_set_out_strategy_allreduce (Net2, axis 0; x int32[1,64],
  y [64,64,64]; gather ((8,1),(1,1)) kept, its out_strategy ((1,1,1),) and the sub's ((1,8,1),(1,8,1)) dropped)
"""
import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, nn
from mindspore.ops import operations as P


class _GatherMul(nn.Cell):
    AXIS = 0
    GATHER = None
    MUL = None
    INDEX = (64, 64)
    X, Y = "float32[64,32]", "float32[64,64,32]"

    def __init__(self):
        super().__init__()
        self.gatherv2 = P.Gather()
        if self.GATHER is not None:
            self.gatherv2.shard(self.GATHER)
        self.mul = P.Mul()
        if self.MUL is not None:
            self.mul.shard(self.MUL)
        self.index = Tensor(np.ones(self.INDEX), dtype=ms.int32)
        self.example_inputs = {"x": self.X, "y": self.Y}

    def construct(self, x, y):
        out = self.gatherv2(x, self.index, self.AXIS)
        return self.mul(out, y)


class GatherAxis0Table8(_GatherMul):
    GATHER = ((1, 8), (1, 1))
    X, Y = "float32[64,64]", "float32[64,64,64]"


class GatherAxis1Rows8(_GatherMul):
    AXIS = 1
    GATHER = ((8, 1), (1, 1))
    Y = "float32[64,64,64]"


class GatherMulOnly8(_GatherMul):
    MUL = ((4, 2, 1), (4, 2, 1))


class Gather1d8(_GatherMul):
    GATHER = ((8,), (1, 1))
    X, Y = "float32[64]", "float32[64,64]"


class GatherAuto0_8(_GatherMul):
    pass


class GatherAuto1_8(_GatherMul):
    AXIS = 1
    Y = "float32[64,64,64]"


class _TableSub(nn.Cell):
    GATHER = None
    X, Y = "int32[8,64]", "float32[8,64,64]"

    def __init__(self):
        super().__init__()
        self.gatherv2 = P.Gather().shard(self.GATHER)
        self.sub = P.Sub()
        self.index = Parameter(Tensor(np.ones((64, 64)), dtype=ms.float32), "w")
        self.example_inputs = {"x": self.X, "y": self.Y}

    def construct(self, x, y):
        out = self.gatherv2(self.index, x, 0)
        return self.sub(out, y)


class GatherIdsBatch8(_TableSub):
    GATHER = ((1, 1), (8, 1))


class GatherTableRows8(_TableSub):
    GATHER = ((8, 1), (1, 1))
    X, Y = "int32[1,64]", "float32[64,64,64]"
