"""Re-expressions of the layout-inference UTs of two-input operators in MindSpore's
tests/ut/python/parallel/parallel_ops_infer/ (test_parallel_batch_matmul_ext.py, test_parallel_embedding.py,
test_parallel_gather.py). Conventions as in ut7_infer_reduce: auto_parallel, search_mode="sharding_propagation",
global_rank 0, 8 devices, dataset_strategy "full_batch"; the UT's input Layouts become the operator's
``shard(in_strategy=...)`` (the anchor), followed by an unconfigured ``Mul`` with a Parameter of the output's shape;
``...Up`` variants anchor upstream ``Mul``s with the UT's Layouts instead and leave the operator unconfigured (the
second input a Parameter where noted). GatherD's Layout strategy MindSpore 2.9 refuses ("SetCostUnderLayout
failed"): its nets use the tuple form (each dim split by the product of its aliases' sizes). Shapes are chosen.

* BmmExtDp       <- test_bmm_ext_data_parallel (BatchMatMulExt; Layout (2,2,2) dp,cp,mp; x ("dp",None,None)
  [8,16,32], w ("dp",None,None) [8,32,16])
* BmmExtMp       <- test_bmm_ext_model_parallel (x (None,None,None), w (None,None,"mp"))
* BmmExtHybrid   <- test_bmm_ext_hybrid_parallel (x ("dp","cp",None), w ("dp",None,"mp"))
* BmmExtTp       <- test_bmm_ext_tensor_parallel (x ("dp",None,"mp"), w (None,"mp",None): the batch split in x
  only, the UT's layout inference accepts it)
* BmmExtHybridTp <- test_bmm_ext_hybrid_tensor_parallel (x ("dp","cp","mp"), w (None,"mp",None))
* BmmExtMulti    <- test_bmm_ext_multi_shard_tensor_parallel (x ("dp",None,"mp"), w ("dp","mp","cp"))
* BmmExtTupleDim <- test_bmm_ext_multi_shard_one_dim_tensor_parallel (Layout (2,2,2) dp,tp,mp; x (None,("dp","tp"),
  None), w (None,None,"mp"))
* BmmExtHybridUp / BmmExtMultiUp / BmmExtTupleDimUp <- the tests above, x's Layout on an upstream Mul, w a
  Parameter, the BatchMatMulExt unconfigured
* EmbeddingVocabSplit <- test_embedding_layout_parallel_1 (Embedding; Layout (2,4) a,b: ids (None,None) int32[8,16],
  table ("a","b") [64,32]: the UT expects a ValueError)
* EmbeddingHidden8    <- test_embedding_layout_parallel_2 (Layout (1,8) a,b: ids (None,None), table (None,"b"))
* EmbeddingHidden8Out <- the same net with only the Mul after it anchored ((None,None,"b"), twice): propagated back
* IndexSelect1        <- test_index_select_parallel_1 (IndexSelect axis 0; Layout (2,4) a,b: table (None,"a")
  [64,32], index ("b",) int32[16])
* IndexSelect2        <- test_index_select_parallel_2 (table ("b","a"), index ("b",): the UT expects a ValueError)
* IndexSelect1Up      <- test_index_select_parallel_1, the table's Layout on an upstream Mul, index unconfigured
* GatherD1            <- test_gather_parallel_1 (GatherD dim 0; Layout (2,4) a,b: x (None,"a") [16,32], index
  ("b","a") int32[16,32]; tuple form ((1,2),(4,2)))
* GatherD1Lay         <- the same with its Layouts as the anchor
* GatherD1Up          <- the same, x's Layout on an upstream Mul, the GatherD unconfigured
"""
import numpy as np
import mindspore as ms
from mindspore import Layout, Parameter, Tensor, nn
from mindspore.ops.auto_generate.gen_ops_prim import BatchMatMulExt, Embedding, GatherD, IndexSelect, Mul


def _t(shape):
    return Tensor(np.ones(shape), dtype=ms.float32)


def _spec(shape, dt="float32"):
    return dt + "[" + ",".join(map(str, shape)) + "]"


def _tuple(mesh, spec):
    size = dict(zip(mesh[1], mesh[0]))
    return tuple(int(np.prod([size.get(a, 1) for a in (d if isinstance(d, tuple) else (d,))])) for d in spec)


class _Two(nn.Cell):
    """x, y -> key(x, y) (anchored with IN) -> Mul(out, w_out); UP: x (and y unless Y_PARAM) through Mul(., w)
    anchored with IN's Layouts, the key unconfigured."""
    MESH = ((2, 2, 2), ("dp", "cp", "mp"))
    X, Y = (8, 16, 32), (8, 32, 16)
    YDT = "float32"
    IN = (("dp", "None", "None"), ("dp", "None", "None"))
    OUT = (8, 16, 16)
    UP = False
    TUPLE = False
    Y_PARAM = False      # y a Parameter of the net (not an input)
    POST = None          # the Mul after the key anchored with this Layout (both inputs) instead

    def make(self):
        return BatchMatMulExt()

    def __init__(self):
        super().__init__()
        ly = Layout(*self.MESH)
        lays = tuple(ly(*s) for s in self.IN)
        if self.TUPLE:
            lays = tuple(_tuple(self.MESH, s) for s in self.IN)
        self.key = self.make()
        self.pre_x = self.pre_y = None
        if self.UP:
            self.pre_x = Mul().shard(in_strategy=(lays[0], lays[0]))
            self.wx = Parameter(_t(self.X), "wx")
            if not self.Y_PARAM and self.YDT == "float32":
                self.pre_y = Mul().shard(in_strategy=(lays[1], lays[1]))
                self.wy = Parameter(_t(self.Y), "wy")
        elif self.POST is None:
            self.key.shard(in_strategy=lays)
        self.post = Mul()
        if self.POST is not None:
            self.post.shard(in_strategy=(ly(*self.POST), ly(*self.POST)))
        self.w_out = Parameter(_t(self.OUT), "w_out")
        self.example_inputs = {"x": _spec(self.X)}
        if self.Y_PARAM:
            self.y = Parameter(_t(self.Y), "y")
        else:
            self.example_inputs["y"] = _spec(self.Y, self.YDT)

    def apply(self, x, y):
        return self.key(x, y)

    def construct(self, x, y=None):
        if self.Y_PARAM:
            y = self.y
        if self.pre_x is not None:
            x = self.pre_x(x, self.wx)
        if self.pre_y is not None:
            y = self.pre_y(y, self.wy)
        return self.post(self.apply(x, y), self.w_out)


# ---- BatchMatMulExt


class BmmExtDp(_Two):
    pass


class BmmExtMp(_Two):
    IN = (("None", "None", "None"), ("None", "None", "mp"))


class BmmExtHybrid(_Two):
    IN = (("dp", "cp", "None"), ("dp", "None", "mp"))


class BmmExtHybridUp(BmmExtHybrid):
    UP, Y_PARAM = True, True


class BmmExtTp(_Two):
    IN = (("dp", "None", "mp"), ("None", "mp", "None"))


class BmmExtHybridTp(_Two):
    IN = (("dp", "cp", "mp"), ("None", "mp", "None"))


class BmmExtMulti(_Two):
    IN = (("dp", "None", "mp"), ("dp", "mp", "cp"))


class BmmExtMultiUp(BmmExtMulti):
    UP, Y_PARAM = True, True


class BmmExtTupleDim(_Two):
    MESH = ((2, 2, 2), ("dp", "tp", "mp"))
    IN = (("None", ("dp", "tp"), "None"), ("None", "None", "mp"))


class BmmExtTupleDimUp(BmmExtTupleDim):
    UP, Y_PARAM = True, True


# ---- Embedding (ids first, the table second)


class EmbeddingVocabSplit(_Two):
    MESH = ((2, 4), ("a", "b"))
    X, Y, YDT = (8, 16), (64, 32), "float32"
    IN = (("None", "None"), ("a", "b"))
    OUT = (8, 16, 32)
    Y_PARAM = True

    def make(self):
        return Embedding()

    def __init__(self):
        super().__init__()
        self.example_inputs["x"] = _spec(self.X, "int32")


class EmbeddingHidden8(EmbeddingVocabSplit):
    MESH = ((1, 8), ("a", "b"))
    IN = (("None", "None"), ("None", "b"))


class EmbeddingHidden8Out(EmbeddingHidden8):
    POST = ("None", "None", "b")


# ---- IndexSelect(table, 0, index) / GatherD(x, 0, index)


class IndexSelect1(_Two):
    MESH = ((2, 4), ("a", "b"))
    X, Y, YDT = (64, 32), (16,), "int32"
    IN = (("None", "a"), ("b",))
    OUT = (16, 32)

    def make(self):
        return IndexSelect()

    def apply(self, x, y):
        return self.key(x, 0, y)


class IndexSelect2(IndexSelect1):
    IN = (("b", "a"), ("b",))


class IndexSelect1Up(IndexSelect1):
    UP = True


class GatherD1(IndexSelect1):
    X, Y = (16, 32), (16, 32)
    IN = (("None", "a"), ("b", "a"))
    OUT = (16, 32)
    TUPLE = True

    def make(self):
        return GatherD()


class GatherD1Lay(GatherD1):
    TUPLE = False


class GatherD1Up(GatherD1):
    UP = True
