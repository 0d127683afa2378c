"""Re-expressions of sharding-propagation tests in MindSpore's UT file tests/ut/python/parallel/test_stridedslice.py
(the new_axis_mask / shrink_axis_mask cases). All: auto_parallel, search_mode="sharding_propagation",
dataset_strategy "full_batch"; the UT compiles the forward net directly (Net3: StridedSlice(x) -> ReLU, the
StridedSlice configured, the ReLU unconfigured; x [2,4,8,16], a second input [128,64,32] unused). The UT asserts
the ReLU's strategy.

* NewAxisMask1024      <- test_new_axis_mask (1024 devices; begin (0,0,0,0) end (2,4,8,16) strides 1,
  new_axis_mask=7, StridedSlice ((2,4,8,16),)); asserts ReLU [[1,1,1,2,4,8,16]]
* NewAxisMaskOOR1024   <- test_new_axis_mask_out_of_range (1024 devices; new_axis_mask=20); asserts ReLU
  [[2,4,1,8,16]]
* ShrinkAxisMask16     <- test_shrink_axis_mask (16 devices; StridedSlice ((1,1,1,16),), shrink_axis_mask=7);
  asserts ReLU [[16]]
* NewShrinkMask512     <- test_new_axis_mask_and_shrink_axis_mask (512 devices; begin (1,1) end (2,4) strides
  (1,1), new_axis_mask=6, shrink_axis_mask=1, StridedSlice ((1,4,8,16),)); asserts ReLU [[1,4,8,16]]
* NewShrinkBeginMask512 <- test_new_axis_mask_and_shrink_axis_mask_and_begin_mask (512 devices; begin (1,1,3)
  end (2,4,8) strides (1,1,1), new_axis_mask=2, shrink_axis_mask=1, begin_mask=4); asserts ReLU [[1,4,8,16]]
"""
from mindspore import nn
from mindspore.ops import operations as P


class _SliceRelu(nn.Cell):
    cfg = {}

    def __init__(self):
        super().__init__()
        c = dict(self.cfg)
        strategy = c.pop("strategy")
        self.begin, self.end, self.strides = c.pop("begin"), c.pop("end"), c.pop("strides")
        self.strided_slice = P.StridedSlice(**c).shard(strategy)
        self.relu = P.ReLU()
        self.example_inputs = {"x": "float32[2,4,8,16]", "b": "float32[128,64,32]"}

    def construct(self, x, b):
        out = self.strided_slice(x, self.begin, self.end, self.strides)
        return self.relu(out)


class NewAxisMask1024(_SliceRelu):
    cfg = dict(strategy=((2, 4, 8, 16),), begin=(0, 0, 0, 0), end=(2, 4, 8, 16), strides=(1, 1, 1, 1),
               new_axis_mask=7)


class NewAxisMaskOOR1024(_SliceRelu):
    cfg = dict(strategy=((2, 4, 8, 16),), begin=(0, 0, 0, 0), end=(2, 4, 8, 16), strides=(1, 1, 1, 1),
               new_axis_mask=20)


class ShrinkAxisMask16(_SliceRelu):
    cfg = dict(strategy=((1, 1, 1, 16),), begin=(0, 0, 0, 0), end=(2, 4, 8, 16), strides=(1, 1, 1, 1),
               shrink_axis_mask=7)


class NewShrinkMask512(_SliceRelu):
    cfg = dict(strategy=((1, 4, 8, 16),), begin=(1, 1), end=(2, 4), strides=(1, 1), new_axis_mask=6,
               shrink_axis_mask=1)


class NewShrinkBeginMask512(_SliceRelu):
    cfg = dict(strategy=((1, 4, 8, 16),), begin=(1, 1, 3), end=(2, 4, 8), strides=(1, 1, 1), new_axis_mask=2,
               shrink_axis_mask=1, begin_mask=4)
