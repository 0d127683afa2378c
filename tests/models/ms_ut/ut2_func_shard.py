"""Re-expressions of mindspore.shard (functional / Cell) sharding-propagation tests with mint operators, from a
file in MindSpore's UT folder tests/ut/python/parallel/ (its tests are named test_mint_*; file name not confirmed).
All: auto_parallel, search_mode="sharding_propagation", 8 devices, dataset_strategy "full_batch" (setup_function),
no algo settings. The UTs wrap the net in GradWrap(NetWithLossTwoInput(...)), whose loss is a ReduceMean over
all axes: kept here as the net's last operator (``mean``); GradWrap dropped. Layouts use the UT's alias names, so
verify with --mesh axis0=4,axis1=2 (or the 4-axis meshes named per class).

* MintFuncMul           <- test_mint_func (ms.shard(fn: mint.abs -> mint.mul, in_strategy ((4,2),(4,1))),
  x[128,96], y[128,1]); asserts Mul [[4,2],[4,1]]
* MintMatMulLayout      <- test_mint_matmul_layout (ms.shard(mint.matmul, Layout (4,2) (axis0,axis1):
  (axis0,axis1),(axis1,None)); x[128,96], y[96,96]); asserts MatMulExt [[4,2],[2,1]]
* MintMatMulLayout222   <- test_mint_matmul_layout_222 (Layout (2,2,2,1) axis0..3: (axis3,axis1),(axis1,axis0));
  asserts MatMulExt [[1,2],[2,2]]  -- mesh axis0=2,axis1=2,axis2=2,axis3=1
* MintAddLayout222      <- test_mint_add_layout_222 (Layout (2,1,2,2): mint.add (axis3,axis1),(axis3,axis1);
  x,y [96,96]); asserts AddExt [[2,1],[2,1]]  -- mesh axis0=2,axis1=1,axis2=2,axis3=2
* MintAddBroadcast      <- test_mint_add_layout_broadcast (Layout (4,2): (axis0,axis1),(None,axis1); x[128,96],
  y[1,96]; the UT has no GradWrap here); asserts AddExt [[4,2],[1,2]]
* ReluReluMatMulLayout  <- test_relu_relu_matmul_layout (ms.shard(Cell RMANet, in (axis0,axis1),(axis1,None),
  parameter_plan gamma/beta (axis0,axis1)); add(x,gamma) -> relu; relu(y); matmul; relu(beta); add);
  asserts AddExt-op0 [[4,2],[4,2]], MatMulExt-op0 [[4,2],[2,1]], AddExt-op1 [[4,1],[4,2]]
* MintAddMatMulDiv      <- test_mint_waitting (ms.shard(Cell, in (axis0,axis1),(axis0,axis1), parameter_plan
  alpha (axis0,axis1)); add(x,y) -> matmul(., relu(beta[96,1])) -> div(., relu(alpha[128,96])));
  asserts AddExt-op0 [[4,2],[4,2]], MatMulExt-op0 [[4,2],[2,1]], Div-op0 [[4,1],[4,2]]
* MintRmaSoftmaxCE      <- test_mint_rma_softmaxcrossentropywithlogits (ms.shard(Cell, in (axis0,axis1),
  parameter_plan gamma (axis0,axis1)); add(x,gamma) -> matmul(., relu(beta)); then the UT's
  NetWithLossSoftmax: SoftmaxCrossEntropyWithLogits(out, b)[0]; x,b [16,16]); asserts AddExt-op0 [[4,2],[4,2]],
  MatMulExt-op0 [[4,2],[2,1]]
* MintReluPropagateBack <- test_mint_relu_layout_propagate_back (relu(y) -> ms.shard(mint.matmul, (axis0,axis1),
  (axis1,None))); asserts ReLU-op0 [[2,1]]

strategist ignores ``parameter_plan`` (MindSpore applies it to the named Parameters).
"""
import mindspore as ms
from mindspore import Layout, Parameter, mint, nn, ops
from mindspore.common.initializer import initializer


def _p(shape, name):
    return Parameter(initializer("ones", shape, ms.float32), name=name)


class _MeanLoss(nn.Cell):
    """The UT's NetWithLossTwoInput: ReduceMean over all axes of the net's output."""

    def __init__(self):
        super().__init__()
        self.mean = ops.ReduceMean(keep_dims=False)

    def loss(self, out):
        return self.mean(out, ())


class MintFuncMul(_MeanLoss):
    def __init__(self):
        super().__init__()
        self.gamma = _p((128, 96), "gamma")

        def mul_func(x, y):
            return mint.mul(mint.abs(x), y)
        self.mul_shard = ms.shard(mul_func, in_strategy=((4, 2), (4, 1)))
        self.example_inputs = {"x": "float32[128,96]", "y": "float32[128,1]"}

    def construct(self, x, y):
        return self.loss(self.mul_shard(x, y))


class MintMatMulLayout(_MeanLoss):
    def __init__(self):
        super().__init__()
        self.gamma = _p((128, 96), "gamma")
        ly = Layout((4, 2), ("axis0", "axis1"))
        self.matmul_shard = ms.shard(mint.matmul, in_strategy=(ly("axis0", "axis1"), ly("axis1", "None")))
        self.example_inputs = {"x": "float32[128,96]", "y": "float32[96,96]"}

    def construct(self, x, y):
        return self.loss(self.matmul_shard(x, y))


class MintMatMulLayout222(_MeanLoss):
    def __init__(self):
        super().__init__()
        self.gamma = _p((128, 96), "gamma")
        ly = Layout((2, 2, 2, 1), ("axis0", "axis1", "axis2", "axis3"))
        self.matmul_shard = ms.shard(mint.matmul, in_strategy=(ly("axis3", "axis1"), ly("axis1", "axis0")))
        self.example_inputs = {"x": "float32[128,96]", "y": "float32[96,96]"}

    def construct(self, x, y):
        return self.loss(self.matmul_shard(x, y))


class MintAddLayout222(_MeanLoss):
    def __init__(self):
        super().__init__()
        self.gamma = _p((128, 96), "gamma")
        ly = Layout((2, 1, 2, 2), ("axis0", "axis1", "axis2", "axis3"))
        self.add_shard = ms.shard(mint.add, in_strategy=(ly("axis3", "axis1"), ly("axis3", "axis1")))
        self.example_inputs = {"x": "float32[96,96]", "y": "float32[96,96]"}

    def construct(self, x, y):
        return self.loss(self.add_shard(x, y))


class MintAddBroadcast(_MeanLoss):
    def __init__(self):
        super().__init__()
        self.gamma = _p((128, 96), "gamma")
        ly = Layout((4, 2), ("axis0", "axis1"))
        self.add_shard = ms.shard(mint.add, in_strategy=(ly("axis0", "axis1"), ly("None", "axis1")))
        self.example_inputs = {"x": "float32[128,96]", "y": "float32[1,96]"}

    def construct(self, x, y):
        return self.loss(self.add_shard(x, y))


class _RMANet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.gamma = _p((128, 96), "gamma")
        self.beta = _p((128, 96), "beta")

    def construct(self, x, y):
        out1 = ops.relu(mint.add(x, self.gamma))
        out3 = mint.matmul(out1, ops.relu(y))
        return mint.add(out3, ops.relu(self.beta))


class ReluReluMatMulLayout(_MeanLoss):
    def __init__(self):
        super().__init__()
        self.rma_net = _RMANet()
        ly = Layout((4, 2), ("axis0", "axis1"))
        self.rma_net_shard = ms.shard(self.rma_net, in_strategy=(ly("axis0", "axis1"), ly("axis1", "None")),
                                      parameter_plan={"self.rma_net.gamma": ly("axis0", "axis1"),
                                                      "self.rma_net.beta": ly("axis0", "axis1")})
        self.example_inputs = {"x": "float32[128,96]", "y": "float32[96,1]"}

    def construct(self, x, y):
        return self.loss(self.rma_net_shard(x, y))


class _RMASDNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.beta = _p((96, 1), "beta")
        self.alpha = _p((128, 96), "alpha")

    def construct(self, x, y):
        out5 = mint.matmul(mint.add(x, y), ops.relu(self.beta))
        return mint.div(out5, ops.relu(self.alpha))


class MintAddMatMulDiv(_MeanLoss):
    def __init__(self):
        super().__init__()
        self.rmasd_net = _RMASDNet()
        ly = Layout((4, 2), ("axis0", "axis1"))
        self.rmasd_net_shard = ms.shard(self.rmasd_net, in_strategy=(ly("axis0", "axis1"), ly("axis0", "axis1")),
                                        parameter_plan={"self.rmasd_net.alpha": ly("axis0", "axis1")})
        self.example_inputs = {"x": "float32[128,96]", "y": "float32[128,96]"}

    def construct(self, x, y):
        return self.loss(self.rmasd_net_shard(x, y))


class _RMANetSmall(nn.Cell):
    def __init__(self):
        super().__init__()
        self.gamma = _p((16, 16), "gamma")
        self.beta = _p((16, 16), "beta")
        self.relu = mint.nn.ReLU()

    def construct(self, x):
        return mint.matmul(mint.add(x, self.gamma), self.relu(self.beta))


class MintRmaSoftmaxCE(nn.Cell):
    def __init__(self):
        super().__init__()
        self.rma_net = _RMANetSmall()
        ly = Layout((4, 2), ("axis0", "axis1"))
        self.rma_net_shard = ms.shard(self.rma_net, in_strategy=(ly("axis0", "axis1"),),
                                      parameter_plan={"self.rma_net.gamma": ly("axis0", "axis1")})
        self.loss = ops.SoftmaxCrossEntropyWithLogits()
        self.example_inputs = {"x": "float32[16,16]", "b": "float32[16,16]"}

    def construct(self, x, b):
        return self.loss(self.rma_net_shard(x), b)[0]


class MintReluPropagateBack(_MeanLoss):
    def __init__(self):
        super().__init__()
        self.relu = mint.nn.ReLU()
        ly = Layout((4, 2), ("axis0", "axis1"))
        self.matmul_shard = ms.shard(mint.matmul, in_strategy=(ly("axis0", "axis1"), ly("axis1", "None")))
        self.example_inputs = {"x": "float32[128,96]", "y": "float32[96,96]"}

    def construct(self, x, y):
        return self.loss(self.matmul_shard(x, self.relu(y)))
