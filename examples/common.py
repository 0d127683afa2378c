"""Building blocks shared by the examples: a Linear (MatMul + optional bias Add) and an RMSNorm.

Plain MindSpore Cells; parameters are created lazily (``initializer``) so strategist can build
80-layer models without allocating their weights.
"""
import mindspore as ms
from mindspore import Parameter, nn, ops
from mindspore.common.initializer import initializer


class Linear(nn.Cell):
    """y = x @ W (+ b). ``x`` is 2-D; ``W`` is [in, out], or [out, in] with ``transpose_b``."""

    def __init__(self, in_features, out_features, has_bias=True, transpose_b=False, dtype=ms.float16):
        super().__init__()
        shape = (out_features, in_features) if transpose_b else (in_features, out_features)
        self.weight = Parameter(initializer("normal", shape, dtype), name="weight")
        self.matmul = ops.MatMul(transpose_b=transpose_b)
        self.has_bias = has_bias
        if has_bias:
            self.bias = Parameter(initializer("zeros", (out_features,), dtype), name="bias")
            self.add = ops.Add()

    def construct(self, x):
        y = self.matmul(x, self.weight)
        if self.has_bias:
            y = self.add(y, self.bias)
        return y


class RMSNorm(nn.Cell):
    """RmsNorm over the last dimension (MindSpore's fused ``ops.RmsNorm``)."""

    def __init__(self, hidden, eps=1e-6, dtype=ms.float16):
        super().__init__()
        self.weight = Parameter(initializer("ones", (hidden,), dtype), name="weight")
        self.norm = ops.RmsNorm(eps)

    def construct(self, x):
        y, _ = self.norm(x, self.weight)
        return y
