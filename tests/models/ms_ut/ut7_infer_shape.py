"""Re-expressions of the layout-inference UTs of shape and elementwise operators in MindSpore's
tests/ut/python/parallel/parallel_ops_infer/ (test_parallel_transpose.py, test_parallel_reshape.py,
test_parallel_slice_ext.py, test_parallel_split.py, test_parallel_concat.py, test_parallel_arithmetic.py) and of
tests/ut/python/parallel/spmd/shard/test_layout_repeat_num.py. Conventions as in ut7_infer_reduce:
auto_parallel, search_mode="sharding_propagation", global_rank 0, dataset_strategy "full_batch", 8 devices unless
noted; the UT's input Layouts become the operator's ``shard(in_strategy=...)`` (the anchor), followed by an
unconfigured ``Mul`` with a Parameter of the output's shape; ``...Up`` variants anchor upstream ``Mul``s with the
UT's Layouts and leave the operator unconfigured. Reshape takes no strategy: its nets are all ``Up``. Concat's
Layout strategy MindSpore 2.9 refuses ("SetCostUnderLayout failed"): its anchored nets use the tuple form. Shapes
are the UT's where it gives them (the Reshape ones scaled down where noted), else chosen.

* Transpose2d        <- test_basic_transpose_operation (Layout (2,2) dp,tp (4 devices): x ("tp","dp") [8,16],
  perm (1,0))
* Transpose3d        <- test_3d_transpose_operation (Layout (2,2,2) dp,cp,tp: x ("tp","cp","dp") [8,16,4],
  perm (2,0,1))
* TransposeIdentity  <- test_identity_transpose (x ("cp","tp","dp"), perm (0,1,2))
* Transpose3dUp      <- test_3d_transpose_operation, anchor upstream
* ReshapeKeepUp      <- test_reshape_layout_not_change_sharded_axis (Layout (2,4) dp,mp: x ("dp",None,None);
  [1024,512,512] -> [1024,2,256,512] scaled to [16,8,8] -> [16,2,4,8])
* ReshapeMergeUp     <- test_reshape_layout_merge_sharded_axis (x ("dp",None,None) [4,4,8] -> [16,8])
* ReshapeSplitUp     <- test_reshape_layout_split_sharded_axis (x ("dp",None) [32,128] -> [4,8,128]; the UT's
  Layout has three dims for a 2-D x, one dropped)
* ReshapeMultiUp     <- test_reshape_layout_multi_axes_shared (Layout (2,2,2) dp,mp,cp: x ("cp","dp",None,"mp",None)
  [32,6,128,28,10] -> [4,8,2,384,280])
* ReshapeNoReshape1Up <- test_reshape_layout_can_not_reshape1 (x (None,None,None,"mp") [4,8,4,12] -> [4,8,12,4]:
  the UT's layout inference refuses; the graph redistributes)
* ReshapeNoReshape2Up <- test_reshape_layout_can_not_reshape2 (Layout (2,4): x (None,None,"mp",None) [4,8,12,7]
  -> [4,8,2,42])
* SliceExtNormal     <- test_parallel_slice_ext.py, test_infer_layout_normal (Layout (2,2,2) dp,mp,cp: x
  ("mp",None,"cp") [8,4,8], SliceExt dim 1, 0:2:1)
* SliceExtInvalid    <- test_infer_layout_invalid_axis (dim 0 sliced while split: the UT expects a ValueError)
* SliceExtInvalidUp  <- the same, anchor upstream (the SliceExt must leave dim 0 whole)
* SplitNormal        <- test_parallel_split.py, test_infer_layout_normal (SplitTensor; x ("mp",None,"cp") [4,6,8],
  split size 2 on axis 1; the first output kept)
* SplitInvalid       <- test_infer_layout_invalid_axis (x ("mp","cp",None), axis 0: the UT expects a ValueError)
* SplitInvalidUp     <- the same, anchor upstream
* SplitSections      <- test_infer_layout_with_sections (SplitWithSize (2,3,3) on axis 2; x (None,"mp",None))
* SplitRemainder     <- test_infer_layout_with_remainder (SplitTensor size 3 on axis 1 of [5,7,8] (the UT's [5,7,9]
  has its split dim 9 on cp=2); x (None,None,"cp"); three outputs, the last one of 1)
* Concat1 / Concat2 / Concat3 <- test_concat_parallel_1/2/3 (Concat; Layout (2,4,1) a,b,c; [8,8,8] each; dim 0:
  ("a","b","c"), (None,"b","c"); dim 1: ("a","b","c"), ("a",None,"c"); dim 2: ("a","b",None) twice; tuple form)
* Concat1Up / Concat2Up / Concat3Up <- the same Layouts on two upstream Muls, the Concat unconfigured
* Concat3Lay         <- test_concat_parallel_3 with its Layouts as the anchor
* AddHybrid          <- test_add_layout_hybrid_parallel (Layout (2,4) dp,mp: Add x ("dp","mp") [16,32], y ("dp","mp")
  [16,32])
* AddBcast / MulBcast / SubBcast / DivBcast <- test_add/mul/sub/div_layout_broadcast (x ("dp","mp") [16,32], y
  ("dp",None) [16,1])
* AddTupleBcast      <- test_tuple_layout_broadcast (Layout (2,2,2) dp,mp,cp: x (("dp","mp"),"cp") [16,32], y
  (("dp","mp"),None) [16,1])
* AddMultislice      <- test_multislice_layout_broadcast (Layout (2,1,4) dp,cp,tp: x ("cp","dp",None) [8,8,8], y
  (("cp","tp"),"dp",None) [8,8,8]: the UT expects a ValueError)
* AddBcastUp         <- test_add_layout_broadcast, anchor upstream
* RepeatNum384       <- test_layout_repeat_num (Layout (2,4,6,8) a,b,c,d: 384 devices; x ("a","c") [16,24], y
  ("b",None) [16,24], z (("a","b"),"c",None) [16,24,8], each on a Mul with a Parameter; then (x*wx + y*wy) * (z*wz)
  summed on its last axis, unconfigured: the SumExt follows z's Layout, its reduced dim whole there, and MindSpore's
  compile throws)
* RepeatNum384Split  <- the same with z ("a","b"),"c","d") (its last axis split over d: the SumExt compiles)
"""
import numpy as np
import mindspore as ms
from mindspore import Layout, Parameter, Tensor, nn
from mindspore.ops.auto_generate.gen_ops_prim import (Add, Concat, Div, Mul, Reshape, SliceExt, SplitTensor,
                                                      SplitWithSize, Sub, SumExt, Transpose)


def _t(shape):
    return Tensor(np.ones(shape), dtype=ms.float32)


def _spec(shape):
    return "float32[" + ",".join(map(str, shape)) + "]"


def _tuple(mesh, spec):
    size = dict(zip(mesh[1], mesh[0]))
    return tuple(int(np.prod([size.get(a, 1) for a in (d if isinstance(d, tuple) else (d,))])) for d in spec)


class _Key(nn.Cell):
    """x -> [Mul(x, w0) anchored, if UP] -> key (anchored with IN unless UP) -> Mul(out, w_out)."""
    MESH = ((2, 2, 2), ("dp", "cp", "tp"))
    X = (8, 16, 4)
    IN = (("tp", "cp", "dp"),)
    OUT = (4, 8, 16)
    UP = False

    def make(self):
        raise NotImplementedError

    def __init__(self):
        super().__init__()
        ly = Layout(*self.MESH)
        lays = tuple(ly(*s) for s in self.IN)
        self.key = self.make()
        if self.UP:
            self.pre = Mul().shard(in_strategy=(lays[0], lays[0]))
            self.w0 = Parameter(_t(self.X), "w0")
        elif self.IN is not None:
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


# ---- Transpose


class Transpose3d(_Key):
    PERM = (2, 0, 1)

    def make(self):
        return Transpose()

    def apply(self, x):
        return self.key(x, self.PERM)


class Transpose2d(Transpose3d):
    MESH = ((2, 2), ("dp", "tp"))
    X, IN, OUT, PERM = (8, 16), (("tp", "dp"),), (16, 8), (1, 0)


class TransposeIdentity(Transpose3d):
    IN, OUT, PERM = (("cp", "tp", "dp"),), (8, 16, 4), (0, 1, 2)


class Transpose3dUp(Transpose3d):
    UP = True


# ---- Reshape (anchored upstream only)


class ReshapeKeepUp(_Key):
    MESH = ((2, 4), ("dp", "mp"))
    X, IN, OUT = (16, 8, 8), (("dp", "None", "None"),), (16, 2, 4, 8)
    UP = True

    def make(self):
        return Reshape()

    def apply(self, x):
        return self.key(x, self.OUT)


class ReshapeMergeUp(ReshapeKeepUp):
    X, OUT = (4, 4, 8), (16, 8)


class ReshapeSplitUp(ReshapeKeepUp):
    X, IN, OUT = (32, 128), (("dp", "None"),), (4, 8, 128)


class ReshapeMultiUp(ReshapeKeepUp):
    MESH = ((2, 2, 2), ("dp", "mp", "cp"))
    X, IN, OUT = (32, 6, 128, 28, 10), (("cp", "dp", "None", "mp", "None"),), (4, 8, 2, 384, 280)


class ReshapeNoReshape1Up(ReshapeMultiUp):
    X, IN, OUT = (4, 8, 4, 12), (("None", "None", "None", "mp"),), (4, 8, 12, 4)


class ReshapeNoReshape2Up(ReshapeKeepUp):
    X, IN, OUT = (4, 8, 12, 7), (("None", "None", "mp", "None"),), (4, 8, 2, 42)


# ---- SliceExt


class SliceExtNormal(_Key):
    MESH = ((2, 2, 2), ("dp", "mp", "cp"))
    X, IN, OUT = (8, 4, 8), (("mp", "None", "cp"),), (8, 2, 8)
    DIM = 1

    def make(self):
        return SliceExt()

    def apply(self, x):
        return self.key(x, self.DIM, 0, 2, 1)


class SliceExtInvalid(SliceExtNormal):
    DIM, OUT = 0, (2, 4, 8)


class SliceExtInvalidUp(SliceExtInvalid):
    UP = True


# ---- Split


class SplitNormal(_Key):
    MESH = ((2, 2, 2), ("dp", "mp", "cp"))
    X, IN, OUT = (4, 6, 8), (("mp", "None", "cp"),), (4, 2, 8)
    SIZE, AXIS = 2, 1

    def make(self):
        return SplitTensor()

    def apply(self, x):
        return self.key(x, self.SIZE, self.AXIS)[0]


class SplitInvalid(SplitNormal):
    IN, AXIS, OUT = (("mp", "cp", "None"),), 0, (2, 6, 8)


class SplitInvalidUp(SplitInvalid):
    UP = True


class SplitSections(SplitNormal):
    IN, SIZE, AXIS, OUT = (("None", "mp", "None"),), (2, 3, 3), 2, (4, 6, 2)

    def make(self):
        return SplitWithSize()


class SplitRemainder(SplitNormal):
    X, IN, SIZE, OUT = (5, 7, 8), (("None", "None", "cp"),), 3, (5, 1, 8)

    def apply(self, x):
        return self.key(x, self.SIZE, self.AXIS)[2]


# ---- Concat (two Parameters' products with x)


class Concat1(nn.Cell):
    MESH = ((2, 4, 1), ("a", "b", "c"))
    IN = (("a", "b", "c"), ("None", "b", "c"))
    DIM = 0
    MODE = "tuple"      # the anchor: "tuple" (on the Concat), "layout" (on the Concat), "up" (two upstream Muls)

    def __init__(self):
        super().__init__()
        ly = Layout(*self.MESH)
        self.concat = Concat(self.DIM)
        self.mul1, self.mul2 = Mul(), Mul()
        if self.MODE == "tuple":
            self.concat.shard(in_strategy=tuple(_tuple(self.MESH, s) for s in self.IN))
        elif self.MODE == "layout":
            self.concat.shard(in_strategy=tuple(ly(*s) for s in self.IN))
        else:
            self.mul1.shard(in_strategy=(ly(*self.IN[0]), ly(*self.IN[0])))
            self.mul2.shard(in_strategy=(ly(*self.IN[1]), ly(*self.IN[1])))
        self.w1 = Parameter(_t((8, 8, 8)), "w1")
        self.w2 = Parameter(_t((8, 8, 8)), "w2")
        out = [8, 8, 8]
        out[self.DIM] = 16
        self.post = Mul()
        self.w_out = Parameter(_t(out), "w_out")
        self.example_inputs = {"x": _spec((8, 8, 8)), "y": _spec((8, 8, 8))}

    def construct(self, x, y):
        return self.post(self.concat((self.mul1(x, self.w1), self.mul2(y, self.w2))), self.w_out)


class Concat2(Concat1):
    IN, DIM = (("a", "b", "c"), ("a", "None", "c")), 1


class Concat3(Concat1):
    IN, DIM = (("a", "b", "None"), ("a", "b", "None")), 2


class Concat1Up(Concat1):
    MODE = "up"


class Concat2Up(Concat2):
    MODE = "up"


class Concat3Up(Concat3):
    MODE = "up"


class Concat3Lay(Concat3):
    MODE = "layout"


# ---- arithmetic


class AddHybrid(nn.Cell):
    MESH = ((2, 4), ("dp", "mp"))
    X, Y = (16, 32), (16, 32)
    IN = (("dp", "mp"), ("dp", "mp"))
    UP = False

    def make(self):
        return Add()

    def __init__(self):
        super().__init__()
        ly = Layout(*self.MESH)
        self.key = self.make()
        if self.UP:
            self.pre_x = Mul().shard(in_strategy=(ly(*self.IN[0]), ly(*self.IN[0])))
            self.pre_y = Mul().shard(in_strategy=(ly(*self.IN[1]), ly(*self.IN[1])))
        else:
            self.pre_x, self.pre_y = Mul(), Mul()
            self.key.shard(in_strategy=tuple(ly(*s) for s in self.IN))
        self.wx = Parameter(_t(self.X), "wx")
        self.wy = Parameter(_t(self.Y), "wy")
        self.post = Mul()
        self.w_out = Parameter(_t(self.X), "w_out")
        self.example_inputs = {"x": _spec(self.X), "y": _spec(self.Y)}

    def construct(self, x, y):
        return self.post(self.key(self.pre_x(x, self.wx), self.pre_y(y, self.wy)), self.w_out)


class AddBcast(AddHybrid):
    Y, IN = (16, 1), (("dp", "mp"), ("dp", "None"))


class MulBcast(AddBcast):
    def make(self):
        return Mul()


class SubBcast(AddBcast):
    def make(self):
        return Sub()


class DivBcast(AddBcast):
    def make(self):
        return Div()


class AddTupleBcast(AddHybrid):
    MESH = ((2, 2, 2), ("dp", "mp", "cp"))
    Y, IN = (16, 1), ((("dp", "mp"), "cp"), (("dp", "mp"), "None"))


class AddMultislice(AddHybrid):
    MESH = ((2, 1, 4), ("dp", "cp", "tp"))
    X = Y = (8, 8, 8)
    IN = (("cp", "dp", "None"), (("cp", "tp"), "dp", "None"))


class AddBcastUp(AddBcast):
    UP = True


# ---- Layout repeat num


class RepeatNum384(nn.Cell):
    Z = (("a", "b"), "c", "None")

    def __init__(self):
        super().__init__()
        ly = Layout((2, 4, 6, 8), ("a", "b", "c", "d"))
        self.mx = Mul().shard(in_strategy=(ly("a", "c"), ly("a", "c")))
        self.my = Mul().shard(in_strategy=(ly("b", "None"), ly("b", "None")))
        self.mz = Mul().shard(in_strategy=(ly(*self.Z), ly(*self.Z)))
        self.add = Add()
        self.sum = SumExt()
        self.mul = Mul()
        self.wx = Parameter(_t((16, 24)), "wx")
        self.wy = Parameter(_t((16, 24)), "wy")
        self.wz = Parameter(_t((16, 24, 8)), "wz")
        self.example_inputs = {"x": _spec((16, 24)), "y": _spec((16, 24)), "z": _spec((16, 24, 8))}

    def construct(self, x, y, z):
        xy = self.add(self.mx(x, self.wx), self.my(y, self.wy))
        return self.mul(xy, self.sum(self.mz(z, self.wz), -1, False))


class RepeatNum384Split(RepeatNum384):
    Z = (("a", "b"), "c", "d")
