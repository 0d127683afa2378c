"""Attention block: RMSNorm -> Q/K/V projections -> FlashAttentionScore (BSH) -> output projection,
with a residual Add. Grouped-query attention when ``kv_heads < heads``.

The fused FlashAttentionScore and RmsNorm are the operators whose propagated layout is rarely
what users want (rule 4 of the sharding-techniques guidance).

    strategist inspect examples/attention.py:AttentionBlock
"""
import math

import numpy as np
import mindspore as ms
from mindspore import nn, ops
from mindspore.ops.operations.nn_ops import FlashAttentionScore

from common import Linear, RMSNorm


class Attention(nn.Cell):
    """x[B,S,H] -> o[B,S,H]; q has ``heads`` heads, k and v ``kv_heads`` heads of size H/heads."""

    def __init__(self, hidden, heads, kv_heads=None, dtype=ms.float16, causal=False, param_dtype=None):
        super().__init__()
        kv_heads = kv_heads or heads
        self.head_dim = hidden // heads
        self.kv_hidden = kv_heads * self.head_dim
        self.wq = Linear(hidden, hidden, has_bias=False, dtype=dtype, param_dtype=param_dtype)
        self.wk = Linear(hidden, self.kv_hidden, has_bias=False, dtype=dtype, param_dtype=param_dtype)
        self.wv = Linear(hidden, self.kv_hidden, has_bias=False, dtype=dtype, param_dtype=param_dtype)
        self.wo = Linear(hidden, hidden, has_bias=False, dtype=dtype, param_dtype=param_dtype)
        self.reshape = ops.Reshape()
        # causal: MindFormers' compressed causal mask (use_attn_mask_compression, sparse_mode 2): a [2048, 2048]
        # upper-triangle tile the kernel reads for the diagonal blocks, skipping the blocks above it
        self.mask = ms.Tensor(np.triu(np.ones((2048, 2048), np.uint8), k=1)) if causal else None
        self.flash_attention = FlashAttentionScore(
            head_num=heads, input_layout="BSH", scale_value=1.0 / math.sqrt(self.head_dim),
            **({"sparse_mode": 2, "next_tokens": 0} if causal else {}))

    def construct(self, x):
        bs, seq, hidden = x.shape
        x2 = self.reshape(x, (bs * seq, hidden))
        q = self.reshape(self.wq(x2), (bs, seq, hidden))
        k = self.reshape(self.wk(x2), (bs, seq, self.kv_hidden))
        v = self.reshape(self.wv(x2), (bs, seq, self.kv_hidden))
        _, _, _, context = self.flash_attention(q, k, v, None, None, None, self.mask)
        out = self.wo(self.reshape(context, (bs * seq, hidden)))
        return self.reshape(out, (bs, seq, hidden))


class AttentionBlock(nn.Cell):
    """y = x + Attention(RMSNorm(x))."""

    def __init__(self, hidden=1024, heads=8, kv_heads=None, batch=2, seq=4096, dtype=ms.float16):
        super().__init__()
        self.attention_norm = RMSNorm(hidden, dtype=dtype)
        self.attention = Attention(hidden, heads, kv_heads, dtype=dtype)
        self.add = ops.Add()
        self.example_inputs = {"x": f"float16[{batch},{seq},{hidden}]"}

    def construct(self, x):
        return self.add(x, self.attention(self.attention_norm(x)))
