"""Test models for the propagation engine."""
import mindspore as ms
from mindspore import Parameter, nn, ops
from mindspore.common.initializer import initializer
from mindspore.ops.auto_generate import IndexSelect, Muls


class Unreached(nn.Cell):
    """A MatMul of two Parameters: no path from the dataset or any anchor."""

    def __init__(self):
        super().__init__()
        self.a = Parameter(initializer("normal", (256, 784), ms.float32), name="a")
        self.b = Parameter(initializer("normal", (784, 64), ms.float32), name="b")
        self.matmul = ops.MatMul()
        self.relu = ops.ReLU()
        self.example_inputs = {"x": "float32[16,8]"}

    def construct(self, x):
        return self.relu(x), self.matmul(self.a, self.b)


class SharedWeight(nn.Cell):
    """One Parameter read by two MatMuls."""

    def __init__(self, s1=None, s2=None):
        super().__init__()
        self.w = Parameter(initializer("normal", (64, 64), ms.float32), name="w")
        self.mm1 = ops.MatMul()
        self.mm2 = ops.MatMul()
        if s1:
            self.mm1.shard(s1)
        if s2:
            self.mm2.shard(s2)
        self.example_inputs = {"x": "float32[64,64]"}

    def construct(self, x):
        return self.mm2(self.mm1(x, self.w), self.w)


class NoInputs(nn.Cell):
    def __init__(self):
        super().__init__()
        self.a = Parameter(initializer("normal", (8, 8), ms.float32), name="a")
        self.relu = ops.ReLU()

    def construct(self):
        return self.relu(self.a)


class Experts(nn.Cell):
    """Expert MLPs as batched MatMuls over an expert dimension: x[E, T, H] @ w1[E, H, F] -> GeLU -> @ w2[E, F, H]."""

    def __init__(self, experts=4, tokens=256, hidden=512, ffn=2048):
        super().__init__()
        self.w1 = Parameter(initializer("normal", (experts, hidden, ffn), ms.float16), name="w1")
        self.w2 = Parameter(initializer("normal", (experts, ffn, hidden), ms.float16), name="w2")
        self.bmm1 = ops.BatchMatMul()
        self.gelu = ops.GeLU()
        self.bmm2 = ops.BatchMatMul()
        self.example_inputs = {"x": f"float16[{experts},{tokens},{hidden}]"}

    def construct(self, x):
        return self.bmm2(self.gelu(self.bmm1(x, self.w1)), self.w2)


class ShardedInner(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w = Parameter(initializer("normal", (16, 32), ms.float32), name="w")
        self.mm = ops.MatMul()
        self.relu = ops.ReLU()

    def construct(self, x):
        return self.relu(self.mm(x, self.w))


class CellShard(nn.Cell):
    """``inner.shard(in_strategy=((2, 4),))``: MindSpore inserts a configured AShardIdentity at inner's input."""

    def __init__(self, functional=False):
        super().__init__()
        self.inner = ShardedInner()
        if functional:
            self.inner = ms.shard(self.inner, in_strategy=((2, 4),))
        else:
            self.inner.shard(in_strategy=((2, 4),))
        self.gelu = ops.GeLU()
        self.example_inputs = {"x": "float32[8,16]"}

    def construct(self, x):
        return self.gelu(self.inner(x))


class TupleEdges(nn.Cell):
    """concat((x, relu(x))) and a Muls attribute next to a tensor-method ``* 0.5`` (also a Muls)."""

    def __init__(self):
        super().__init__()
        self.relu = ops.ReLU()
        self.concat = ops.Concat(1)
        self.split = ops.Split(1, 2)
        self.concat2 = ops.Concat(1)
        self.muls = Muls()
        self.example_inputs = {"x": "float32[16,8]"}

    def construct(self, x):
        y = self.concat((x, self.relu(x)))
        a, b = self.split(y)
        z = self.concat2((a, b))
        return self.muls(z * 0.5, 2.0)


class SelfGram(nn.Cell):
    """``t @ t.T`` (transpose_b) or ``t.T @ t`` (transpose_a) of one Transpose output: MindSpore's
    follow-the-producers candidate maps the MatMul's i and j to one device axis (random net 265)."""

    def __init__(self, transpose_a=False):
        super().__init__()
        self.tr = ops.Transpose()
        self.mm = ops.MatMul(transpose_a=transpose_a, transpose_b=not transpose_a)
        self.relu = ops.ReLU()
        self.example_inputs = {"x": "float32[64,32]"}

    def construct(self, x):
        t = self.tr(x, (1, 0))
        return self.relu(self.mm(t, t))


class SharedTable(nn.Cell):
    """An embedding table read by a Gather and by the output MatMul (tied weights, random net 397)."""

    def __init__(self, s=None):
        super().__init__()
        self.w = Parameter(initializer("normal", (50, 16), ms.float32), name="w")
        self.gather = ops.Gather()
        self.reshape = ops.Reshape()
        self.matmul = ops.MatMul(transpose_b=True)
        if s:
            self.matmul.shard(s)
        self.example_inputs = {"idx": "int32[8,4]"}

    def construct(self, idx):
        h = self.reshape(self.gather(self.w, idx, 0), (32, 16))
        return self.matmul(h, self.w)


def _sharded_block(x, y, w):
    return ops.relu(ops.matmul(x + y, w))


class ShardedFunction(nn.Cell):
    """``mindspore.shard`` on a plain function taking two activations and a Parameter."""

    def __init__(self):
        super().__init__()
        self.w = Parameter(initializer("normal", (64, 64), ms.float32), name="w")
        self.f = ms.shard(_sharded_block, in_strategy=((8, 1), (4, 2), (1, 1)))
        self.example_inputs = {"x": "float32[64,64]", "y": "float32[64,64]"}

    def construct(self, x, y):
        return self.f(ops.exp(x), ops.sin(y), self.w) * 2.0


class ReshapeGather(nn.Cell):
    """A row-split ReLU, flattened by a Reshape, read by a replicated Mul: the rows are gathered once,
    before, inside or after the Reshape."""

    def __init__(self):
        super().__init__()
        self.relu = ops.ReLU()
        self.reshape = ops.Reshape()
        self.mul = ops.Mul()
        self.sum = ops.ReduceSum()
        self.example_inputs = {"x": "float32[8,64]", "y": "float32[512]"}

    def construct(self, x, y):
        z = self.reshape(self.relu(x), (512,))
        return self.mul(z, y), self.sum(z)


class TwoCalls(nn.Cell):
    """One Transpose primitive called on two tensors (as MindFormers' attention transposes q, k and v)."""

    def __init__(self):
        super().__init__()
        self.transpose = ops.Transpose()
        self.add = ops.Add()
        self.example_inputs = {"x": "float32[8,16,32]", "y": "float32[8,16,32]"}

    def construct(self, x, y):
        return self.add(self.transpose(x, (1, 0, 2)), self.transpose(y, (1, 0, 2)))


class ReshapeCostCache(nn.Cell):
    """MindSpore's Reshape cost cache (deepseek3's MoE router): the cost of a Reshape strategy-with-cost is cached
    by the (device arrangement, tensor map) of its input and output layouts, whatever the shapes. ``big`` is
    created first and prices ``[1, 64, 256] -> [1, 64, 8, 32]`` replicated-to-replicated; ``small``
    (``[1, 64, 8] -> [1, 64, 8, 1]``) then reads that cost, 32 times its own, for its replicated pairs, while its
    pair from the ReduceSum's reduced-axis split (output replicated over [2, 4]) is priced afresh. Reached
    backward from the replicated ReLU, ``small`` takes the cheapest zero-communication pair: the ReduceSum splits
    its reduced axis ((1, 1, 2, 1), MindSpore 2.9.0); without the cache all tie and it stays whole."""

    def __init__(self):
        super().__init__()
        self.relu1 = ops.ReLU()
        self.relu2 = ops.ReLU()
        self.sum = ops.ReduceSum(keep_dims=False)
        self.relu3 = ops.ReLU().shard(((1, 1, 1, 1),))
        self.example_inputs = {"x": "float32[1,64,256]", "y": "float32[1,64,4,8]"}

    def construct(self, x, y):
        big = self.relu2(ops.reshape(self.relu1(x), (1, 64, 8, 32)))
        small = self.relu3(ops.reshape(self.sum(y, 2), (1, 64, 8, 1)))
        return small, big


class IndexSelectRows(nn.Cell):
    """IndexSelect(x, 0, idx) between ReLUs, a Sigmoid beside the second (deepseek3's MoE token permutation, the
    experts' stand-in). MindSpore's IndexSelectInfo is a GatherInfo: Gather's candidates (18 on 8 devices: a split
    ``axis`` beside any other split must use every device), device matrix [idx, x...], ReduceScatter of a split
    ``axis``; and, set from a candidate, no layout for its neighbours to follow. MindSpore 2.9.0 (verify, dp=2,tp=4,
    full_batch): ``s1=((2, 1),)``: isel ((2, 4), (1,)), relu2 and sigmoid (2, 4); ``s2=((2, 2),)``: isel
    ((1, 2), (2,)), relu1 (1, 1) (a generated candidate: nothing to follow), sigmoid (2, 2)."""

    def __init__(self, s1=None, s2=None):
        super().__init__()
        self.relu1 = ops.ReLU()
        self.isel = IndexSelect()
        self.relu2 = ops.ReLU()
        self.sigmoid = ops.Sigmoid()
        if s1:
            self.relu1.shard(s1)
        if s2:
            self.relu2.shard(s2)
        self.example_inputs = {"x": "float32[64,16]", "idx": "int32[32]"}

    def construct(self, x, idx):
        y = self.isel(self.relu1(x), 0, idx)
        return self.relu2(y), self.sigmoid(y)


class _AccumBlock(nn.Cell):
    """``y = add(acc, x)`` and ``assignadd(acc, relu(b))``: the Parameter ``acc`` read by two operators (the qwen3_moe
    router's ``fi_accu``: ``add_accu`` and ``assignadd``); ``relu(b)`` is reachable through the AssignAdd only."""

    def __init__(self, s=None):
        super().__init__()
        self.acc = Parameter(initializer("zeros", (64,), ms.float32), name="acc", requires_grad=False)
        self.b = Parameter(initializer("normal", (64,), ms.float32), name="b")
        self.add = ops.Add()
        self.assignadd = ops.AssignAdd()
        self.relu = ops.ReLU()
        if s:
            self.add.shard(s)

    def construct(self, x):
        self.assignadd(self.acc, self.relu(self.b))
        return self.add(self.acc, x)


class _LazyAccumBlock(_AccumBlock):
    @ms.lazy_inline
    def __init__(self, s=None):
        super().__init__(s)


class LazyAccum(nn.Cell):
    """:class:`_AccumBlock` inside a ``@lazy_inline`` Cell (``lazy=True``, MindFormers' ``GPTModel``) or a plain one.
    Plain: ``acc`` gets a TmpIdentity; from the anchored Add it reaches the AssignAdd, decided from the waiting list
    with that layout, and ReLU backward from it. Lazy: the parallel passes see the block as a reused func graph whose
    weights are graph parameters without a default value; ``FindParameterUsers`` skips them, so no TmpIdentity, the
    AssignAdd and the ReLU are never reached and keep their first candidates. MindSpore 2.9.0 (verify, dp=2,tp=4,
    full_batch, ``s=((8,), (8,))``): see test_propagate.LAZY_ACCUM_MS."""

    def __init__(self, lazy=True, s=None):
        super().__init__()
        self.block = (_LazyAccumBlock if lazy else _AccumBlock)(s)
        self.example_inputs = {"x": "float32[64]"}

    def construct(self, x):
        return self.block(x)
