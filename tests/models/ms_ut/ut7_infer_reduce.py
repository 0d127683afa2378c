"""Re-expressions of the layout-inference UTs of reducing operators in MindSpore's
tests/ut/python/parallel/parallel_ops_infer/ (test_parallel_sum_mean_ext.py, test_parallel_argmax_with_value_ops.py,
test_parallel_topk.py, test_parallel_softmax.py, test_parallel_norm.py).
All: auto_parallel, search_mode="sharding_propagation", global_rank 0, 8 devices, dataset_strategy "full_batch",
nothing configured unless noted. The UTs call the python-shard DistributedOp's ``infer_layout`` on one input Layout
(no graph); here each becomes a graph net: the operator with the UT's input Layout as its ``shard(in_strategy=...)``
(the anchor; for SumExt, MeanExt, ArgMaxWithValue and TopkExt, whose Layout strategy MindSpore 2.9 refuses
("SetCostUnderLayout failed"), in tuple form -- each dim split by the product of its aliases' sizes -- with one
``...Lay`` variant each keeping the Layout, a refusal both sides must agree on), followed by an unconfigured ``Mul`` with a Parameter of the output's shape, so MindSpore propagates
the operator's output layout onward. ``...Up`` variants anchor an upstream ``Mul(x, w)`` with the UT's Layout
instead (both inputs) and leave the operator itself unconfigured: MindSpore propagates onto it. Shapes are not in
the UTs (only Layouts); they are chosen divisible. Layouts keep the UT's device matrix and alias names (the mesh
in netgen.MS_UT names them); a UT that expects a ValueError is kept as is (MindSpore's graph checker refuses the
anchor, or not: recorded).

* SumExtDp / MeanExtDp        <- test_sum_ext_data_parallel_1 (Layout (2,2,2) dp,cp,mp: x ("dp",None,None) [8,8,8],
  dim 0, keepdim False)
* SumExtMp / MeanExtMp        <- test_sum_ext_model_parallel_2 (x (None,None,"mp"), dim 2, keepdim True)
* SumExtHybrid / MeanExtHybrid <- test_sum_ext_hybrid_parallel_3 (x ("dp","cp","mp"), dim 1, keepdim False)
* SumExtMulti                 <- test_sum_ext_reduce_multiple_dims_4 (x ("dp","cp","mp"), dim (0,2), keepdim True)
* SumExtAll                   <- test_sum_ext_reduce_all_dims_5 (x ("dp","cp","mp"), dim None, keepdim False)
* SumExtTupleKeep             <- test_sum_ext_tuple_alias_dim_8 (x (None,("dp","cp"),"mp"), dim (0,2), keepdim True)
* MeanExtTuple                <- test_sum_ext_tuple_alias_dim_10 (MeanExt; x (None,("dp","cp"),"mp"), dim (0,1),
  keepdim False)
* SumExtHybridUp / MeanExtTupleUp / SumExtMultiUp <- the tests above, anchor upstream (the Layout)
* SumExtHybridLay             <- test_sum_ext_hybrid_parallel_3 with its Layout as the anchor
* SumExtDpLay / MeanExtDpLay / SumExtMpLay / SumExtMultiLay / SumExtAllLay / SumExtTupleKeepLay / MeanExtTupleLay
  <- tests 1 (both ops), 2, 4, 5, 8 and 10 with their Layouts as the anchor: MindSpore 2.9 takes a SumExt Layout
  only when every reduced dim is split (test 8's dim 0 is not: refused), a MeanExt one when some reduced dim is
* SumExtTupleKeepUp           <- test_sum_ext_tuple_alias_dim_8, anchor upstream: the unconfigured SumExt follows
  the Mul's Layout, reduced dim 0 whole there (MindSpore's compile throws)
* ArgMaxKeep / ArgMaxNoKeep   <- test_parallel_1 / test_parallel_2 (ArgMaxWithValue; Layout (2,4,1) a,b,c:
  x ("a",None,"c") [8,8,8], axis 0, keep_dims True / False; the values output kept)
* ArgMaxNoKeepUp              <- test_parallel_2, anchor upstream
* ArgMaxKeepLay               <- test_parallel_1 with its Layout as the anchor
* TopkDp / TopkMp / TopkDpMp  <- test_topk_layout_data_parallel / _tensor_parallel / _tensor_and_data_parallel
  (TopkExt along the last dim, k 4; Layout (2,4) dp,mp: x ("dp",None) / ("mp",None) / ("dp","mp") [16,32]; the
  values output kept)
* TopkDpMpUp                  <- test_topk_layout_tensor_and_data_parallel, anchor upstream
* TopkDpLay                   <- test_topk_layout_data_parallel with its Layout as the anchor
* SoftmaxDp                   <- test_softmax_layout_data_parallel (Layout (8,) dp: x ("dp",None) [16,32], axis -1)
* SoftmaxAxis0                <- test_softmax_layout_data_parallel_value_failed (axis 0, the split one: the UT
  expects a ValueError)
* SoftmaxAxis0Up              <- the same, anchor upstream (the Softmax must leave axis 0 whole)
* RmsNormDp                   <- test_rmsnorm_layout_data_parallel (Layout (8,) dp: x ("dp",None) [16,32], gamma
  (None,) [32])
* RmsNormTp                   <- test_rmsnorm_layout_tensor_parallel (Layout (2,4) dp,mp: x ("dp","mp",None)
  [4,8,32], gamma (None,))
* RmsNormMixed                <- test_rmsnorm_layout_mixed_parallel (Layout (4,2) dp,mp: x (("dp","mp"),None)
  [16,32], gamma (None,))
* RmsNormInvalid              <- test_rmsnorm_invalid_layout (Layout (2,4) dp,mp: x (None,"mp") [16,32], gamma
  ("mp",): the UT expects a ValueError)
* RmsNormTpUp / RmsNormInvalidUp <- the tests above, anchor upstream (x only; gamma a Parameter)
"""
import numpy as np
import mindspore as ms
from mindspore import Layout, Parameter, Tensor, nn
from mindspore.ops.auto_generate.gen_ops_prim import (ArgMaxWithValue, MeanExt, Mul, RmsNorm, Softmax, SumExt,
                                                      TopkExt)


def _t(shape):
    return Tensor(np.ones(shape), dtype=ms.float32)


def _spec(shape):
    return "float32[" + ",".join(map(str, shape)) + "]"


class _Key(nn.Cell):
    """x -> [Mul(x, w0) anchored, if UP] -> key operator (anchored with IN unless UP) -> Mul(out, w_out)."""
    MESH = ((2, 2, 2), ("dp", "cp", "mp"))
    X = (8, 8, 8)
    IN = (("dp", "None", "None"),)
    OUT = (8, 8)
    UP = False
    TUPLE = False       # the Layouts in tuple form (each dim split by the product of its aliases' sizes)

    def make(self):
        raise NotImplementedError

    def __init__(self):
        super().__init__()
        ly = Layout(*self.MESH)
        lays = tuple(ly(*s) for s in self.IN)
        if self.TUPLE:
            size = dict(zip(self.MESH[1], self.MESH[0]))
            lays = tuple(tuple(int(np.prod([size.get(a, 1) for a in (d if isinstance(d, tuple) else (d,))]))
                               for d in s) for s in self.IN)
        self.key = self.make()
        if self.UP:
            self.pre = Mul().shard(in_strategy=(lays[0], lays[0]))
            self.w0 = Parameter(_t(self.X), "w0")
        else:
            self.key.shard(in_strategy=lays)
        self.post = Mul()
        self.w_out = Parameter(_t(self.OUT), "w_out")
        self.example_inputs = {"x": _spec(self.X)}

    def apply(self, x):
        raise NotImplementedError

    def construct(self, x):
        if self.UP:
            x = self.pre(x, self.w0)
        return self.post(self.apply(x), self.w_out)


# ---- SumExt / MeanExt


class _Reduce(_Key):
    TUPLE = True
    DIM = 0
    KEEP = False

    def make(self):
        return SumExt()

    def apply(self, x):
        return self.key(x, self.DIM, self.KEEP)


class _Mean:
    def make(self):
        return MeanExt()


class SumExtDp(_Reduce):
    pass


class MeanExtDp(_Mean, _Reduce):
    pass


class SumExtMp(_Reduce):
    IN = (("None", "None", "mp"),)
    DIM, KEEP, OUT = 2, True, (8, 8, 1)


class MeanExtMp(_Mean, SumExtMp):
    pass


class SumExtHybrid(_Reduce):
    IN = (("dp", "cp", "mp"),)
    DIM = 1


class MeanExtHybrid(_Mean, SumExtHybrid):
    pass


class SumExtHybridUp(SumExtHybrid):
    UP = True


class SumExtMulti(_Reduce):
    IN = (("dp", "cp", "mp"),)
    DIM, KEEP, OUT = (0, 2), True, (1, 8, 1)


class SumExtMultiUp(SumExtMulti):
    UP = True


class SumExtAll(_Reduce):
    IN = (("dp", "cp", "mp"),)
    DIM, OUT = None, ()


class SumExtTupleKeep(_Reduce):
    IN = (("None", ("dp", "cp"), "mp"),)
    DIM, KEEP, OUT = (0, 2), True, (1, 8, 1)


class MeanExtTuple(_Mean, _Reduce):
    IN = (("None", ("dp", "cp"), "mp"),)
    DIM, OUT = (0, 1), (8,)


class MeanExtTupleUp(MeanExtTuple):
    UP = True


class SumExtHybridLay(SumExtHybrid):
    TUPLE = False


class SumExtDpLay(SumExtDp):
    TUPLE = False


class MeanExtDpLay(MeanExtDp):
    TUPLE = False


class SumExtMpLay(SumExtMp):
    TUPLE = False


class SumExtMultiLay(SumExtMulti):
    TUPLE = False


class SumExtAllLay(SumExtAll):
    TUPLE = False


class SumExtTupleKeepLay(SumExtTupleKeep):
    TUPLE = False


class SumExtTupleKeepUp(SumExtTupleKeep):
    UP = True


class MeanExtTupleLay(MeanExtTuple):
    TUPLE = False


# ---- ArgMaxWithValue


class ArgMaxKeep(_Key):
    TUPLE = True
    MESH = ((2, 4, 1), ("a", "b", "c"))
    IN = (("a", "None", "c"),)
    KEEP, OUT = True, (1, 8, 8)

    def make(self):
        return ArgMaxWithValue(axis=0, keep_dims=self.KEEP)

    def apply(self, x):
        return self.key(x)[1]


class ArgMaxNoKeep(ArgMaxKeep):
    KEEP, OUT = False, (8, 8)


class ArgMaxNoKeepUp(ArgMaxNoKeep):
    UP = True


class ArgMaxKeepLay(ArgMaxKeep):
    TUPLE = False


# ---- TopkExt


class TopkDp(_Key):
    TUPLE = True
    MESH = ((2, 4), ("dp", "mp"))
    X = (16, 32)
    IN = (("dp", "None"),)
    OUT = (16, 4)

    def make(self):
        return TopkExt()

    def apply(self, x):
        return self.key(x, 4, -1, True, True)[0]


class TopkMp(TopkDp):
    IN = (("mp", "None"),)


class TopkDpMp(TopkDp):
    IN = (("dp", "mp"),)


class TopkDpMpUp(TopkDpMp):
    UP = True


class TopkDpLay(TopkDp):
    TUPLE = False


# ---- Softmax


class SoftmaxDp(_Key):
    MESH = ((8,), ("dp",))
    X = OUT = (16, 32)
    IN = (("dp", "None"),)
    AXIS = -1

    def make(self):
        return Softmax(axis=self.AXIS)

    def apply(self, x):
        return self.key(x)


class SoftmaxAxis0(SoftmaxDp):
    AXIS = 0


class SoftmaxAxis0Up(SoftmaxAxis0):
    UP = True


# ---- RmsNorm


class RmsNormDp(_Key):
    MESH = ((8,), ("dp",))
    X = OUT = (16, 32)
    IN = (("dp", "None"), ("None",))

    def make(self):
        return RmsNorm(1e-6)

    def __init__(self):
        super().__init__()
        self.gamma = Parameter(_t(self.X[-1:]), "gamma")

    def apply(self, x):
        return self.key(x, self.gamma)[0]


class RmsNormTp(RmsNormDp):
    MESH = ((2, 4), ("dp", "mp"))
    X = OUT = (4, 8, 32)
    IN = (("dp", "mp", "None"), ("None",))


class RmsNormTpUp(RmsNormTp):
    UP = True


class RmsNormMixed(RmsNormDp):
    MESH = ((4, 2), ("dp", "mp"))
    IN = ((("dp", "mp"), "None"), ("None",))


class RmsNormInvalid(RmsNormDp):
    MESH = ((2, 4), ("dp", "mp"))
    IN = (("None", "mp"), ("mp",))


class RmsNormInvalidUp(RmsNormInvalid):
    UP = True
