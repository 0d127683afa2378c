"""Re-expressions of Triu and ApplyRotaryPosEmb UTs in MindSpore's tests/ut/python/parallel/ (test_auto_parallel_triu.py,
test_apply_rotary_pos_emb.py). All: auto_parallel, search_mode="sharding_propagation", 8 devices; the UTs run
semi_auto_parallel on the single operator (compile_net of parallel.utils.utils); its shard() is kept as the anchor.

* TriuStrat124_8   <- test_auto_parallel_triu.py, test_semi_auto_parallel_triu_1 (x [16,64,32], diagonal 0, ((1,2,4),);
  the UT's global_rank 4 (only its check of the local diagonal depends on it); no setup_function: dataset_strategy
  "data_parallel", the default)
* TriuStrat214_8   <- test_semi_auto_parallel_triu_2 (diagonal -2, ((2,1,4),); the UT's global_rank 7)
* TriuAuto8        <- test_semi_auto_parallel_triu_0 (diagonal 2, nothing configured; semi_auto's default there is
  data parallel, here sharding_propagation from the dataset alone)
* ApplyRope8       <- test_apply_rotary_pos_emb.py, test_rope (ApplyRotaryPosEmb(cos_format=1); dataset_strategy
  "full_batch"; query/key [4,1024,16,128] (Parameters passed as inputs in the UT) cut to [4,128,16,64], cos/sin
  [4,128,1,64], batch_valid_length a constant int32 [4]; ((2,1,4,1), (2,1,4,1), (1,1,1,1), (1,1,1,1), (1,)) kept;
  the UT returns the operator's output tuple itself, here unpacked and returned as (q, k): MindSpore 2.9's compile
  of the former fails here, "The pointer[tuple_shape] is null")
* ApplyRopeAuto8   <- as ApplyRope8, nothing configured (a variant)
"""
import numpy as np
import mindspore as ms
from mindspore import Tensor, nn
from mindspore.ops import operations as P
from mindspore.ops.auto_generate import ApplyRotaryPosEmb


class _Triu(nn.Cell):
    DIAGONAL = 0
    STRATEGY = None

    def __init__(self):
        super().__init__()
        self.triu = P.Triu(self.DIAGONAL)
        if self.STRATEGY is not None:
            self.triu.shard(self.STRATEGY)
        self.example_inputs = {"x": "float32[16,64,32]"}

    def construct(self, x):
        return self.triu(x)


class TriuStrat124_8(_Triu):
    STRATEGY = ((1, 2, 4),)


class TriuStrat214_8(_Triu):
    DIAGONAL = -2
    STRATEGY = ((2, 1, 4),)


class TriuAuto8(_Triu):
    DIAGONAL = 2


class _Rope(nn.Cell):
    STRATEGY = None

    def __init__(self):
        super().__init__()
        self.applyrotaryposemb = ApplyRotaryPosEmb(cos_format=1)
        if self.STRATEGY is not None:
            self.applyrotaryposemb.shard(self.STRATEGY)
        self.batch_valid_length = Tensor(np.ones((4,)), ms.int32)
        self.example_inputs = {"query": "float16[4,128,16,64]", "key": "float16[4,128,16,64]",
                               "cos": "float16[4,128,1,64]", "sin": "float16[4,128,1,64]"}

    def construct(self, query, key, cos, sin):
        q, k = self.applyrotaryposemb(query, key, cos, sin, self.batch_valid_length)
        return q, k


class ApplyRope8(_Rope):
    STRATEGY = ((2, 1, 4, 1), (2, 1, 4, 1), (1, 1, 1, 1), (1, 1, 1, 1), (1,))


class ApplyRopeAuto8(_Rope):
    pass
