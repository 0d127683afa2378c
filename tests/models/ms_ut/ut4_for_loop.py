"""Re-expressions of MindSpore's for-loop sharding-propagation UTs in tests/ut/python/parallel/ (auto_parallel,
search_mode="sharding_propagation", global_rank 0; no operator configured in any of them: the Nets are built with
strategy1=strategy2=None). Forward nets only (the UTs compile train graphs).

* ForLoopLayerNorm16 <- test_auto_parallel_for_loop.py, test_auto_parallel (16 devices, dataset_strategy
  "full_batch", _set_algo_single_loop(True) -- a private setting verify cannot pass; x[512,128]; 3 SubNets each
  a hand-written LayerNorm (ReduceMean/Sub/Square/Add/Sqrt/RealDiv/Mul/Add, to_float fp32) -> MatMul w[128,128] ->
  ReLU; then Mul w1[512,128] -> Neg -> ReLU); the UT asserts 16 parallel ops.
* ForLoopReshape16   <- test_auto_parallel_for_loop_reshape.py, test_auto_parallel (as above without the MatMul;
  x[512,128,1], LayerNorm reshapes to drop/add the last dim; w1[512,128,1]); asserts 17 parallel ops.
* ForLoopSimplify16  <- test_auto_parallel_for_loop_simplify.py, test_auto_parallel (16 devices, no
  setup_function so the default dataset strategy; 3 x (MatMul w[128,128] -> ReLU) -> Mul w1 -> Neg; the UT trains
  through Model with SoftmaxCrossEntropyWithLogits(sparse) on x[32,128]; its w1 is [512,128], which does not
  broadcast with [32,128] in 2.9.0 ("For 'Mul', input1.shape and input2.shape need to broadcast"), so w1 is
  [32,128] here).
* ForLoopBatchMatMul8 <- test_auto_parallel_for_loop_multi_subgraph.py, test_double_subgraphs (8 devices,
  "full_batch"; x[8,8,8,8]; 3 x (BatchMatMul w[8,8,8,8] -> ReLU), Mul wd, Mul wt, ReLU, then NetWithLoss's
  ReduceSum(-1) and ReduceMean(-1) as two outputs); asserts 14 parallel ops.
"""
import mindspore as ms
from mindspore import Parameter, nn
from mindspore.common import dtype as mstype
from mindspore.common.initializer import initializer
from mindspore.ops import operations as P


def _ones(shape, name):
    return Parameter(initializer("ones", shape, ms.float32), name=name)


class LayerNorm(nn.Cell):
    def __init__(self, normalized_shape, eps=1e-5, reshapes=False):
        super().__init__()
        self.gamma = Parameter(initializer("ones", normalized_shape), name="gamma")
        self.beta = Parameter(initializer("zeros", normalized_shape), name="beta")
        self.mean = P.ReduceMean(keep_dims=True)
        self.eps = eps
        self.sub = P.Sub()
        self.add = P.Add()
        self.mul = P.Mul()
        self.div = P.RealDiv()
        self.square = P.Square()
        self.sqrt = P.Sqrt()
        self.reshape = P.Reshape()
        self.shape = P.Shape()
        self.reshapes = reshapes

    def construct(self, x):
        if self.reshapes:
            x_origin_shape = self.shape(x)
            x_target_shape = x_origin_shape[:-1]
            x_shape = x_origin_shape + (1,)
            x = self.reshape(x, x_shape)
            x = self.reshape(x, x_target_shape)
        mean = self.mean(x, -1)
        variance = self.mean(self.square(self.sub(x, mean)))
        output = self.div(self.sub(x, mean), self.sqrt(self.add(variance, self.eps)))
        out = self.add(self.mul(output, self.gamma), self.beta)
        if self.reshapes:
            out = self.reshape(out, self.shape(out) + (1,))
        return out


class SubNet(nn.Cell):
    def __init__(self, index, layernorm=True, matmul=True, reshapes=False):
        super().__init__()
        self.matmul = P.MatMul() if matmul else None
        self.relu = P.ReLU()
        if matmul:
            self.weight = _ones((128, 128), "matmul_w" + str(index))
        self.layernorm1 = LayerNorm((128,), reshapes=reshapes).to_float(mstype.float32) if layernorm else None

    def construct(self, x):
        if self.layernorm1 is not None:
            x = self.layernorm1(x)
        if self.matmul is not None:
            x = self.matmul(x, self.weight)
        return self.relu(x)


class Net(nn.Cell):
    def __init__(self, w_shape, num_layers, **sub):
        super().__init__()
        self.mul = P.Mul()
        self.neg = P.Neg()
        self.mul_weight = _ones(w_shape, "w1")
        self.num_layers = num_layers
        self.layers = nn.CellList([SubNet(i, **sub) for i in range(num_layers)])

    def construct(self, x):
        for i in range(self.num_layers):
            x = self.layers[i](x)
        out = self.mul(x, self.mul_weight)
        return self.neg(out)


class ForLoopLayerNorm16(nn.Cell):
    def __init__(self):
        super().__init__()
        self.network = Net((512, 128), 3)
        self.relu = P.ReLU()
        self.example_inputs = {"x": "float32[512,128]"}

    def construct(self, x):
        return self.relu(self.network(x))


class ForLoopReshape16(nn.Cell):
    def __init__(self):
        super().__init__()
        self.network = Net((512, 128, 1), 3, matmul=False, reshapes=True)
        self.relu = P.ReLU()
        self.example_inputs = {"x": "float32[512,128,1]"}

    def construct(self, x):
        return self.relu(self.network(x))


class ForLoopSimplify16(Net):
    def __init__(self):
        super().__init__((32, 128), 3, layernorm=False)
        self.example_inputs = {"x": "float32[32,128]"}


class BmmSubNet(nn.Cell):
    def __init__(self, index):
        super().__init__()
        self.matmul = P.BatchMatMul()
        self.relu = P.ReLU()
        self.weight = _ones((8, 8, 8, 8), "matmul_w" + str(index))

    def construct(self, x):
        return self.relu(self.matmul(x, self.weight))


class ForLoopBatchMatMul8(nn.Cell):
    def __init__(self):
        super().__init__()
        self.mul = P.Mul()
        self.relu = P.ReLU()
        self.wd = _ones((8, 8, 8, 8), "wide")
        self.wt = _ones((8, 8, 8, 8), "l")
        self.layers = nn.CellList([BmmSubNet(i) for i in range(3)])
        self.sum = P.ReduceSum()
        self.mean = P.ReduceMean()
        self.example_inputs = {"x": "float32[8,8,8,8]"}

    def construct(self, x):
        for i in range(3):
            x = self.layers[i](x)
        out = self.mul(x, self.wd)
        out = self.mul(out, self.wt)
        predict = self.relu(out)
        return self.sum(predict, -1), self.mean(predict, -1)
