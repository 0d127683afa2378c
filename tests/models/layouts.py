"""Test model: shard() with Layout (multi-axis dims, out_strategy) and with tuples."""
import mindspore as ms
from mindspore import Layout, Parameter, nn, ops
from mindspore.common.initializer import initializer

LAYOUT = Layout((2, 2, 2), ("dp", "cp", "tp"))


class LayoutNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w = Parameter(initializer("normal", (64, 32), ms.float16), name="w")
        self.mm = ops.MatMul(transpose_b=True).shard(
            in_strategy=(LAYOUT(("dp", "cp"), "None"), LAYOUT("tp", "None")),
            out_strategy=(LAYOUT(("dp", "cp"), "tp"),))
        self.relu = ops.ReLU().shard(((4, 2),))
        self.example_inputs = {"x": "float16[16,32]"}

    def construct(self, x):
        return self.relu(self.mm(x, self.w))


class CastBeforeLayout(nn.Cell):
    """A Cast feeding a Layout-configured operator (MindFormers' final_layernorm: B over dp, S over tp on a
    sequence-first [S, B, H]); the ReLU before the Cast is decided backward from the Cast."""

    def __init__(self):
        super().__init__()
        lay = Layout((2, 4), ("dp", "tp"))
        self.relu = ops.ReLU()
        self.cast = ops.Cast()
        self.gelu = ops.GeLU().shard((lay("tp", "dp", "None"),))
        self.example_inputs = {"x": "float32[64,8,32]"}

    def construct(self, x):
        return self.gelu(self.cast(self.relu(x), ms.float16))


class AddBeforeLayoutAdd(nn.Cell):
    """MindFormers' MoELayer (telechat3_moe, shared experts): the routed experts' output, transposed back to
    sequence-first, is added to the shared experts' output, and that sum to the residual by an Add configured
    with a Layout (S over tp, B over dp). The first Add is decided backward from the configured one."""

    def __init__(self):
        super().__init__()
        lay = Layout((2, 4), ("dp", "tp"))
        self.transpose = ops.Transpose()
        self.add = ops.Add()
        self.residual = ops.Add().shard((lay("tp", "dp", "None"), lay("tp", "dp", "None")))
        self.example_inputs = {"x": "float32[8,64,32]", "y": "float32[64,8,32]", "z": "float32[64,8,32]"}

    def construct(self, x, y, z):
        return self.residual(self.add(self.transpose(x, (1, 0, 2)), y), z)


class SelfDefinedConcat(nn.Cell):
    """MindFormers' MultiTokenPredictionLayer: a Concat marked ``self_define_shard`` with Layouts on its tuple
    input and output (S over tp, B over dp), then a Reshape to rows and a MatMul configured rows over (tp, dp). A
    ReLU before the Concat has no other neighbour."""

    def __init__(self):
        super().__init__()
        lay = Layout((2, 4), ("dp", "tp"))
        self.concat = ops.Concat(axis=-1)
        self.concat.add_prim_attr("self_define_shard", True)
        self.concat.shard(in_strategy=((lay("tp", "dp", "None"), lay("tp", "dp", "None")),),
                          out_strategy=(lay("tp", "dp", "None"),))
        self.reshape = ops.Reshape()
        self.relu = ops.ReLU()
        self.w = Parameter(initializer("normal", (16, 64), ms.float32), name="w")
        self.matmul = ops.MatMul(transpose_b=True).shard(((8, 1), (1, 1)))
        self.example_inputs = {"x": "float32[64,8,32]", "y": "float32[64,8,32]"}

    def construct(self, x, y):
        return self.matmul(self.reshape(self.concat((self.relu(x), y)), (-1, 64)), self.w)


class _CastNorm(nn.Cell):
    """MindFormers' FusedRMSNorm: Cast to float32, then the Layout-configured norm (here a GeLU)."""

    def __init__(self, lay):
        super().__init__()
        self.cast = ops.Cast()
        self.gelu = ops.GeLU().shard((lay("tp", "dp", "None"),))

    def construct(self, x):
        return self.cast(self.gelu(self.cast(x, ms.float32)), ms.float16)


class ResidualCastCopies(nn.Cell):
    """MindFormers' TransformerLayer with fp32_residual_connection (telechat3): the norm and the residual each
    Cast the same hidden states to float32, in two Cells; a row-parallel MatMul's output, reshaped back to
    [S, B, H], is added to the residual. MindSpore's parallel graph keeps both Casts (no CSE before
    step_parallel_begin): the residual's Cast follows the ReLU, the norm's is configured from the GeLU."""

    def __init__(self, residual_first=True):
        super().__init__()
        lay = Layout((2, 4), ("dp", "tp"))
        self.residual_first = residual_first
        self.relu = ops.ReLU().shard((lay("tp", "dp", "None"),))
        self.norm = _CastNorm(lay)
        self.cast = ops.Cast()
        self.w = Parameter(initializer("normal", (32, 32), ms.float16), name="w")
        self.mm = ops.MatMul().shard(((2, 4), (4, 1)))
        self.add = ops.Add()
        self.example_inputs = {"x": "float16[64,8,32]"}

    def construct(self, x):
        h = self.relu(x)
        y = self.norm(h)
        residual = self.cast(h, ms.float32)
        y = self.mm(y.reshape((-1, 32)), self.w).reshape((64, 8, 32))
        y = self.cast(y, ms.float32)
        if self.residual_first:
            return self.add(residual, y)
        return self.add(y, residual)


class CastBetweenLayouts(nn.Cell):
    """An Add split by the batch (dim 1) -> Cast -> a GeLU Layout-configured sequence parallel (S by tp, B by dp).
    MindSpore's search sets the Cast (1, 2, 1) (PreProcessPreCastForSP); its parallel graph then drops the
    Cast's strategy: one redistribution, after the Cast, from the Add's layout into the GeLU's."""

    def __init__(self):
        super().__init__()
        lay = Layout((2, 4), ("dp", "tp"))
        self.add = ops.Add().shard(((1, 8, 1), (1, 8, 1)))
        self.cast = ops.Cast()
        self.gelu = ops.GeLU().shard((lay("tp", "dp", "None"),))
        self.example_inputs = {"x": "float16[64,8,32]", "y": "float16[64,8,32]"}

    def construct(self, x, y):
        return self.gelu(self.cast(self.add(x, y), ms.float32))


class MaskCastBeforeCpFlashAttention(nn.Cell):
    """MindFormers' legacy glm4 (ChatGLM2Model.get_masks): a constant lower triangle, ``Less(tri, 0.5)``, a
    Reshape to [B, 1, S, S] and a Cast to uint8 feed a FlashAttentionScore (BSH) configured with context
    parallelism, ((dp, cp, tp), (dp, 1, tp), (dp, 1, tp), (dp, 1, cp, 1)). The Cast is configured from the FA
    (PreProcessPreCastForSP) and the Less follows it backward."""

    def __init__(self, seq=64, heads=8, hidden=256, batch=2):
        super().__init__()
        import numpy as np
        from mindspore import Tensor
        from mindspore.ops.operations.nn_ops import FlashAttentionScore
        self.tri = Tensor(np.tril(np.ones((batch, seq, seq))), ms.int32)
        self.less = ops.Less()
        self.reshape = ops.Reshape()
        self.cast = ops.Cast()
        self.fa = FlashAttentionScore(head_num=heads, input_layout="BSH", scale_value=0.125).shard(
            ((2, 2, 2), (2, 1, 2), (2, 1, 2), (2, 1, 2, 1)))
        self.shape = (batch, 1, seq, seq)
        self.example_inputs = {n: f"float16[{batch},{seq},{hidden}]" for n in ("q", "k", "v")}

    def construct(self, q, k, v):
        mask = self.cast(self.reshape(self.less(self.tri, 0.5), self.shape), ms.uint8)
        _, _, _, out = self.fa(q, k, v, None, None, None, mask)
        return out
