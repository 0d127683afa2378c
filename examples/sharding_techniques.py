"""Re-creations, as plain MindSpore Cells, of the four classes on MindSpore's "sharding techniques"
page (configuring operators for sharding propagation), with the page's strategies.

Each class takes ``dp``, ``tp`` (``mp``) and ``cp`` and a ``mode``:
``"semi"`` configures every operator as the page's semi-auto version does; ``"propagate"``
configures only the operators the page keeps under sharding propagation. Later issues check
that propagating from the ``"propagate"`` set reproduces the ``"semi"`` strategies.

    strategist inspect examples/sharding_techniques.py:RowParallelLinear
"""
import math

import mindspore as ms
from mindspore import Parameter, nn, ops
from mindspore.common.initializer import initializer
from mindspore.ops.operations.nn_ops import FlashAttentionScore


class RowParallelLinear(nn.Cell):
    """The page's linear layer: MatMul configured; the bias Add follows ``((dp*cp, tp), (tp,))``."""

    def __init__(self, in_features=1024, out_features=4096, transpose_b=True, skip_bias_add=False,
                 dp=2, tp=4, cp=1, mode="propagate", tokens=4096, dtype=ms.float16):
        super().__init__()
        shape = (out_features, in_features) if transpose_b else (in_features, out_features)
        self.weight = Parameter(initializer("normal", shape, dtype), name="weight")
        self.skip_bias_add = skip_bias_add
        self.matmul = ops.MatMul(transpose_b=transpose_b)
        if transpose_b:
            self.matmul.shard(((dp * cp, 1), (tp, 1)))
        else:
            self.matmul.shard(((dp * cp, 1), (1, tp)))
        if not skip_bias_add:
            self.bias = Parameter(initializer("zeros", (out_features,), dtype), name="bias")
            self.add = ops.Add()
            if mode == "semi":
                self.add.shard(((dp * cp, tp), (tp,)))
        self.example_inputs = {"x": f"float16[{tokens},{in_features}]"}

    def construct(self, x):
        y = self.matmul(x, self.weight)
        if not self.skip_bias_add:
            y = self.add(y, self.bias)
        return y


class CoreAttention(nn.Cell):
    """softmax(q k^T * scale) v with dropout, then merge heads: [B,N,S,D] -> [B,S,N*D].

    Under propagation only bmm_qk, bmm_qkv and merge_head_transpose are configured.
    """

    def __init__(self, batch=2, heads=8, seq=1024, head_dim=128, dp=2, tp=4, cp=1, mode="propagate",
                 dropout_rate=0.1, dtype=ms.float16):
        super().__init__()
        self.hidden = heads * head_dim
        self.scale = 1.0 / math.sqrt(head_dim)
        self.bmm_qk = ops.BatchMatMul(transpose_b=True).shard(((dp, tp, cp, 1), (dp, tp, 1, 1)))
        self.mul = ops.Mul()
        self.softmax = ops.Softmax(axis=-1)
        self.dropout = ops.Dropout(keep_prob=1.0 - dropout_rate)
        self.bmm_qkv = ops.BatchMatMul().shard(((dp, tp, cp, 1), (dp, tp, 1, 1)))
        self.merge_head_transpose = ops.Transpose().shard(((dp, tp, cp, 1),))
        self.reshape = ops.Reshape()
        if mode == "semi":
            self.mul.shard(((dp, tp, cp, 1), ()))
            self.softmax.shard(((dp, tp, cp, 1),))
            self.dropout.shard(((dp, tp, cp, 1),))
        self.example_inputs = {n: f"float16[{batch},{heads},{seq},{head_dim}]" for n in ("q", "k", "v")}

    def construct(self, q, k, v):
        scores = self.mul(self.bmm_qk(q, k), self.scale)
        probs, _ = self.dropout(self.softmax(scores))
        context = self.bmm_qkv(probs, v)
        context = self.merge_head_transpose(context, (0, 2, 1, 3))
        bs, seq, _, _ = context.shape
        return self.reshape(context, (bs, seq, self.hidden))


class FlashAttention(nn.Cell):
    """FlashAttentionScore (BNSD) with an ALiBi bias rescaled by ``alibi_rescale_mul``.

    Only FlashAttentionScore is configured under propagation; the Mul follows
    ``((dp, mp, cp, 1), (1,))``.
    """

    def __init__(self, batch=2, heads=8, seq=1024, head_dim=128, dp=2, mp=4, cp=1, mode="propagate",
                 dtype=ms.float16):
        super().__init__()
        self.flash_attention = FlashAttentionScore(
            head_num=heads, input_layout="BNSD", scale_value=1.0 / math.sqrt(head_dim))
        self.flash_attention.shard(((dp, mp, cp, 1), (dp, mp, 1, 1), (dp, mp, 1, 1), (dp, mp, cp, 1)))
        self.alibi_rescale_factor = Parameter(initializer("ones", (1,), dtype), name="alibi_rescale_factor",
                                              requires_grad=False)
        self.alibi_rescale_mul = ops.Mul()
        if mode == "semi":
            self.alibi_rescale_mul.shard(((dp, mp, cp, 1), (1,)))
        self.example_inputs = {**{n: f"float16[{batch},{heads},{seq},{head_dim}]" for n in ("q", "k", "v")},
                               "alibi": f"float16[{batch},{heads},{seq},{seq}]"}

    def construct(self, q, k, v, alibi):
        alibi = self.alibi_rescale_mul(alibi, self.alibi_rescale_factor)
        _, _, _, out = self.flash_attention(q, k, v, alibi, None, None, None)
        return out


class LlamaForCausalLMHead(nn.Cell):
    """The causal-LM head's input handling: tokens/labels slices, pad masks, their product.

    Nothing is configured under propagation; the page expects data-parallel ``((dp, 1),)`` for
    the slice, ``((dp, 1), ())`` for not_equal and ``((dp, 1), (dp, 1))`` for mul.
    """

    def __init__(self, batch=8, seq=4096, vocab=32000, hidden=1024, pad_token_id=0, ignore_token_id=-100,
                 dp=2, tp=4, cp=1, mode="propagate", dtype=ms.float16):
        super().__init__()
        self.pad_token_id = pad_token_id
        self.ignore_token_id = ignore_token_id
        self.hidden = hidden
        self.embedding = Parameter(initializer("normal", (vocab, hidden), dtype), name="embedding")
        self.gather = ops.Gather()
        self.slice = ops.StridedSlice()
        self.not_equal = ops.NotEqual()
        self.mul = ops.Mul()
        self.cast = ops.Cast()
        if mode == "semi":
            self.slice.shard(((dp, 1),))
            self.not_equal.shard(((dp, 1), ()))
            self.mul.shard(((dp, 1), (dp, 1)))
        self.example_inputs = {"input_ids": f"int32[{batch},{seq + 1}]"}

    def construct(self, input_ids):
        bsz, seqlen = input_ids.shape
        tokens = self.slice(input_ids, (0, 0), (bsz, seqlen - 1), (1, 1))
        labels = self.slice(input_ids, (0, 1), (bsz, seqlen), (1, 1))
        input_mask = self.cast(self.not_equal(tokens, self.pad_token_id), ms.float32)
        label_mask = self.cast(self.not_equal(labels, self.ignore_token_id), ms.float32)
        mask = self.mul(input_mask, label_mask)
        h = self.gather(self.embedding, tokens, 0)
        return h, mask


class DocsFFN(nn.Cell):
    """The FFN of MindSpore's sharding-propagation tutorial: Flatten -> MatMul(x[256,784], W1[784,64])
    -> Add(bias1) -> ReLU -> MatMul(., W2[64,10]) -> Add(bias2), only MatMul1 configured
    ((2, 1), (1, 4)) on 8 devices. Expected: Add1 ((2,4),(4)), ReLU ((2,4)), MatMul2 ((2,4),(4,1))."""

    def __init__(self, mode="propagate", dtype=ms.float32):
        super().__init__()
        self.flatten = ops.Flatten()
        self.w1 = Parameter(initializer("normal", (784, 64), dtype), name="w1")
        self.b1 = Parameter(initializer("zeros", (64,), dtype), name="b1")
        self.w2 = Parameter(initializer("normal", (64, 10), dtype), name="w2")
        self.b2 = Parameter(initializer("zeros", (10,), dtype), name="b2")
        self.matmul1 = ops.MatMul().shard(((2, 1), (1, 4)))
        self.add1 = ops.Add()
        self.relu = ops.ReLU()
        self.matmul2 = ops.MatMul()
        self.add2 = ops.Add()
        if mode == "semi":
            self.add1.shard(((2, 4), (4,)))
            self.relu.shard(((2, 4),))
            self.matmul2.shard(((2, 4), (4, 1)))
        self.example_inputs = {"x": "float32[256,1,28,28]"}

    def construct(self, x):
        y = self.relu(self.add1(self.matmul1(self.flatten(x), self.w1), self.b1))
        return self.add2(self.matmul2(y, self.w2), self.b2)
