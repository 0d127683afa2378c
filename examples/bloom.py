"""BLOOM-style decoder: embedding Gather + LayerNorm, N x (LayerNorm + attention with ALiBi, unfused + LayerNorm +
GeLU MLP), final LayerNorm, LM head, vocab-parallel cross-entropy.

The attention is written out as BLOOM's reference code and MindSpeed's BLOOM scripts run it (no fused kernel for
ALiBi): the scores ``Q K^T`` of every head as a BatchMatMul, scaled, the ALiBi bias and the causal mask added, a
softmax in fp32, and the BatchMatMul with ``V``. No shard() calls anywhere.
Presets: ``tiny``, ``bloom_7b`` (hidden 4096, 32 heads, 30 layers, vocab 250880, seq 2048), ``bloom_176b`` (hidden
14336, 112 heads, 70 layers); any of them takes ``layers=1..80``.

    strategist inspect examples/bloom.py:tiny
"""
import math

import mindspore as ms
import numpy as np
from mindspore import Parameter, nn, ops
from mindspore.common.initializer import initializer

from common import Linear
from llama import Embedding, VocabParallelCrossEntropyLoss

PRESETS = {
    "tiny": dict(vocab=1024, hidden=256, heads=8, layers=2, batch=2, seq=128),
    "bloom_7b": dict(vocab=250880, hidden=4096, heads=32, layers=30, batch=1, seq=2048),
    "bloom_176b": dict(vocab=250880, hidden=14336, heads=112, layers=70, batch=1, seq=2048),
}


class LayerNorm(nn.Cell):
    """LayerNorm over the last dimension (MindSpore's ``ops.LayerNorm``), with its gain and bias."""

    def __init__(self, hidden, dtype=ms.float16):
        super().__init__()
        self.gamma = Parameter(initializer("ones", (hidden,), dtype), name="gamma")
        self.beta = Parameter(initializer("zeros", (hidden,), dtype), name="beta")
        self.norm = ops.LayerNorm(begin_norm_axis=-1, begin_params_axis=-1, epsilon=1e-5)

    def construct(self, x):
        y, _, _ = self.norm(x, self.gamma, self.beta)
        return y


def alibi_slopes(heads: int) -> list[float]:
    """BLOOM's per-head ALiBi slopes: a geometric sequence from 2^(-8/n) for the nearest power of two n, then the
    odd steps of the next one."""
    n = 2 ** math.floor(math.log2(heads))
    base = [2 ** (-8 * (i + 1) / n) for i in range(n)]
    extra = [2 ** (-4 * (2 * i + 1) / n) for i in range(heads - n)]
    return base + extra


class AlibiAttention(nn.Cell):
    """x[B,S,H] -> o[B,S,H]: q, k, v projections, scores per head with the ALiBi bias and causal mask, softmax,
    context, output projection (BLOOM's query_key_value as three projections of the same FLOPs)."""

    def __init__(self, hidden, heads, seq, dtype=ms.float16):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.wq = Linear(hidden, hidden, dtype=dtype)
        self.wk = Linear(hidden, hidden, dtype=dtype)
        self.wv = Linear(hidden, hidden, dtype=dtype)
        self.dense = Linear(hidden, hidden, dtype=dtype)
        # the bias grows with the key's position (the softmax is invariant to a per-row constant); the mask puts
        # a large negative value above the diagonal; both constants of the graph (MindSpore's parallel compile
        # does not take untrained Parameters here)
        slopes = np.array(alibi_slopes(heads), np.float32).reshape(1, heads, 1, 1)
        self.alibi = ms.Tensor(slopes * np.arange(seq, dtype=np.float32).reshape(1, 1, 1, seq), dtype)
        self.causal = ms.Tensor(np.triu(np.full((1, 1, seq, seq), -10000.0, np.float32), 1), dtype)
        self.reshape = ops.Reshape()
        self.transpose = ops.Transpose()
        self.scores = ops.BatchMatMul(transpose_b=True)
        self.scale = ops.Mul()
        self.add_alibi = ops.Add()
        self.add_mask = ops.Add()
        self.cast = ops.Cast()
        self.softmax = ops.Softmax(-1)
        self.context = ops.BatchMatMul()
        self.inv_sqrt = 1.0 / math.sqrt(self.head_dim)

    def _heads(self, x, bs, seq):
        return self.transpose(self.reshape(x, (bs, seq, self.heads, self.head_dim)), (0, 2, 1, 3))

    def construct(self, x):
        bs, seq, hidden = x.shape
        x2 = self.reshape(x, (bs * seq, hidden))
        q, k, v = (self._heads(p(x2), bs, seq) for p in (self.wq, self.wk, self.wv))
        s = self.add_mask(self.add_alibi(self.scale(self.scores(q, k), self.inv_sqrt), self.alibi), self.causal)
        probs = self.cast(self.softmax(self.cast(s, ms.float32)), x.dtype)
        ctx = self.transpose(self.context(probs, v), (0, 2, 1, 3))
        out = self.dense(self.reshape(ctx, (bs * seq, hidden)))
        return self.reshape(out, (bs, seq, hidden))


class MLP(nn.Cell):
    """dense_4h_to_h(gelu(dense_h_to_4h(x)))."""

    def __init__(self, hidden, dtype=ms.float16):
        super().__init__()
        self.dense_h_to_4h = Linear(hidden, 4 * hidden, dtype=dtype)
        self.gelu = ops.GeLU()
        self.dense_4h_to_h = Linear(4 * hidden, hidden, dtype=dtype)
        self.reshape = ops.Reshape()

    def construct(self, x):
        bs, seq, hidden = x.shape
        y = self.dense_4h_to_h(self.gelu(self.dense_h_to_4h(self.reshape(x, (bs * seq, hidden)))))
        return self.reshape(y, (bs, seq, hidden))


class BloomBlock(nn.Cell):
    """h = x + attention(ln(x)); out = h + mlp(ln(h))."""

    def __init__(self, hidden, heads, seq, dtype=ms.float16):
        super().__init__()
        self.input_layernorm = LayerNorm(hidden, dtype)
        self.self_attention = AlibiAttention(hidden, heads, seq, dtype)
        self.post_attention_layernorm = LayerNorm(hidden, dtype)
        self.mlp = MLP(hidden, dtype)
        self.add = ops.Add()

    def construct(self, x):
        h = self.add(x, self.self_attention(self.input_layernorm(x)))
        return self.add(h, self.mlp(self.post_attention_layernorm(h)))


class BloomModel(nn.Cell):
    def __init__(self, vocab, hidden, heads, layers, seq, dtype=ms.float16):
        super().__init__()
        self.word_embeddings = Embedding(vocab, hidden, dtype)
        self.word_embeddings_layernorm = LayerNorm(hidden, dtype)
        self.h = nn.CellList([BloomBlock(hidden, heads, seq, dtype) for _ in range(layers)])
        self.ln_f = LayerNorm(hidden, dtype)

    def construct(self, tokens):
        h = self.word_embeddings_layernorm(self.word_embeddings(tokens))
        for block in self.h:
            h = block(h)
        return self.ln_f(h)


class BloomForCausalLM(nn.Cell):
    """input_ids[B, S+1] -> tokens = ids[:, :-1], labels = ids[:, 1:] -> loss (scalar)."""

    def __init__(self, vocab=250880, hidden=4096, heads=32, layers=2, batch=1, seq=2048, pad_token_id=3,
                 dtype=ms.float16):
        super().__init__()
        if not 1 <= layers <= 80:
            raise ValueError(f"layers must be 1..80, got {layers}")
        self.hidden = hidden
        self.pad_token_id = pad_token_id
        self.transformer = BloomModel(vocab, hidden, heads, layers, seq, dtype)
        self.lm_head = Linear(hidden, vocab, has_bias=False, transpose_b=True, dtype=dtype)
        self.loss = VocabParallelCrossEntropyLoss(vocab)
        self.slice = ops.StridedSlice()
        self.not_equal = ops.NotEqual()
        self.cast = ops.Cast()
        self.reshape = ops.Reshape()
        self.example_inputs = {"input_ids": f"int32[{batch},{seq + 1}]"}

    def construct(self, input_ids):
        bsz, seqlen = input_ids.shape
        tokens = self.slice(input_ids, (0, 0), (bsz, seqlen - 1), (1, 1))
        labels = self.slice(input_ids, (0, 1), (bsz, seqlen), (1, 1))
        input_mask = self.cast(self.not_equal(tokens, self.pad_token_id), ms.float32)
        h = self.transformer(tokens)
        logits = self.lm_head(self.reshape(h, (bsz * (seqlen - 1), self.hidden)))
        n = bsz * (seqlen - 1)
        return self.loss(logits, self.reshape(labels, (n,)), self.reshape(input_mask, (n,)))


def build(preset="tiny", **overrides):
    """A BloomForCausalLM from a preset, e.g. ``build("bloom_176b", layers=4)``."""
    return BloomForCausalLM(**{**PRESETS[preset], **overrides})


def tiny(**overrides):
    return build("tiny", **overrides)


def bloom_7b(**overrides):
    return build("bloom_7b", **overrides)


def bloom_176b(**overrides):
    return build("bloom_176b", **overrides)
