"""Building blocks shared by the examples: a Linear (MatMul + optional bias Add) and an RMSNorm.

Plain MindSpore Cells; parameters are created lazily (``initializer``) so strategist can build
80-layer models without allocating their weights. ``param_dtype`` (MindFormers' ``param_init_type``): the weights
kept in that dtype and cast to the compute ``dtype`` where they are read, as MindFormers' Linear does.
"""
import mindspore as ms
from mindspore import Parameter, nn, ops
from mindspore.common.initializer import initializer


class Linear(nn.Cell):
    """y = x @ W (+ b). ``x`` is 2-D; ``W`` is [in, out], or [out, in] with ``transpose_b``."""

    def __init__(self, in_features, out_features, has_bias=True, transpose_b=False, dtype=ms.float16,
                 param_dtype=None):
        super().__init__()
        dtype, param_dtype = as_dtype(dtype), as_dtype(param_dtype or dtype)
        shape = (out_features, in_features) if transpose_b else (in_features, out_features)
        self.weight = Parameter(initializer("normal", shape, param_dtype), name="weight")
        self.matmul = ops.MatMul(transpose_b=transpose_b)
        self.has_bias = has_bias
        self.dtype = dtype
        self.cast_weight = param_dtype != dtype
        if self.cast_weight:
            self.cast = ops.Cast()
        if has_bias:
            self.bias = Parameter(initializer("zeros", (out_features,), param_dtype), name="bias")
            self.add = ops.Add()

    def construct(self, x):
        w = self.cast(self.weight, self.dtype) if self.cast_weight else self.weight
        y = self.matmul(x, w)
        if self.has_bias:
            b = self.cast(self.bias, self.dtype) if self.cast_weight else self.bias
            y = self.add(y, b)
        return y


def as_dtype(dtype):
    """A MindSpore dtype from itself or its name (``--kwargs param_dtype=float32``)."""
    return getattr(ms, dtype) if isinstance(dtype, str) else dtype


class RMSNorm(nn.Cell):
    """RmsNorm over the last dimension (MindSpore's fused ``ops.RmsNorm``)."""

    def __init__(self, hidden, eps=1e-6, dtype=ms.float16):
        super().__init__()
        self.weight = Parameter(initializer("ones", (hidden,), dtype), name="weight")
        self.norm = ops.RmsNorm(eps)

    def construct(self, x):
        y, _ = self.norm(x, self.weight)
        return y
