"""GPT-2-style decoder written with MindSpore's own layers: ``nn.Embedding`` (tokens and positions),
``nn.LayerNorm``, ``nn.Dense`` (separate q/k/v projections, output, MLP, LM head), ``nn.GELU``,
``nn.Softmax``, a ``BatchMatMul`` primitive, and tensor-method attention (``x * scale``, ``.reshape``,
``.transpose``, slicing the causal mask); the loss is ``nn.SoftmaxCrossEntropyWithLogits``.

No shard() calls: this is how a user writes a GPT, and what strategist is asked to configure.

    strategist inspect examples/gpt_nn.py:GPT
    strategist advise examples/gpt_nn.py:GPT --kwargs layers=2 --mesh dp=2,tp=4
"""
import math

import numpy as np

import mindspore as ms
from mindspore import Parameter, Tensor, nn, ops


class CausalSelfAttention(nn.Cell):
    """x[B,S,H] -> multi-head causal self-attention -> [B,S,H]."""

    def __init__(self, hidden, heads, seq, dtype=ms.float32):
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.q_proj = nn.Dense(hidden, hidden, dtype=dtype)
        self.k_proj = nn.Dense(hidden, hidden, dtype=dtype)
        self.v_proj = nn.Dense(hidden, hidden, dtype=dtype)
        self.out_proj = nn.Dense(hidden, hidden, dtype=dtype)
        self.qk = ops.BatchMatMul(transpose_b=True)
        self.pv = ops.BatchMatMul()
        self.softmax = nn.Softmax(axis=-1)
        mask = np.triu(np.full((seq, seq), -1e4, np.float32), k=1).reshape(1, 1, seq, seq)
        self.causal_mask = Parameter(Tensor(mask, dtype), name="causal_mask", requires_grad=False)

    def construct(self, x):
        b, s, h = x.shape
        q = self.q_proj(x).reshape(b, s, self.heads, self.head_dim).transpose(0, 2, 1, 3)
        k = self.k_proj(x).reshape(b, s, self.heads, self.head_dim).transpose(0, 2, 1, 3)
        v = self.v_proj(x).reshape(b, s, self.heads, self.head_dim).transpose(0, 2, 1, 3)
        scores = self.qk(q, k) * self.scale
        scores = scores + self.causal_mask[:, :, :s, :s]
        probs = self.softmax(scores)
        ctx = self.pv(probs, v).transpose(0, 2, 1, 3).reshape(b, s, h)
        return self.out_proj(ctx)


class MLP(nn.Cell):
    def __init__(self, hidden, ffn, dtype=ms.float32):
        super().__init__()
        self.fc = nn.Dense(hidden, ffn, dtype=dtype)
        self.act = nn.GELU()
        self.proj = nn.Dense(ffn, hidden, dtype=dtype)

    def construct(self, x):
        return self.proj(self.act(self.fc(x)))


class Block(nn.Cell):
    """Pre-LN transformer block: x + attn(ln_1(x)); x + mlp(ln_2(x))."""

    def __init__(self, hidden, heads, ffn, seq, dtype=ms.float32):
        super().__init__()
        self.ln_1 = nn.LayerNorm((hidden,), epsilon=1e-5, dtype=dtype)
        self.attn = CausalSelfAttention(hidden, heads, seq, dtype)
        self.ln_2 = nn.LayerNorm((hidden,), epsilon=1e-5, dtype=dtype)
        self.mlp = MLP(hidden, ffn, dtype)

    def construct(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Cell):
    """input_ids[B,S], labels[B,S] -> mean cross-entropy of the next-token logits."""

    def __init__(self, vocab=1024, hidden=256, heads=8, layers=2, seq=128, batch=8, ffn=None, dtype=ms.float32):
        super().__init__()
        ffn = ffn or 4 * hidden
        self.vocab = vocab
        self.wte = nn.Embedding(vocab, hidden, dtype=dtype)
        self.wpe = nn.Embedding(seq, hidden, dtype=dtype)
        self.positions = Tensor(np.arange(seq, dtype=np.int32).reshape(1, seq))
        self.h = nn.CellList([Block(hidden, heads, ffn, seq, dtype) for _ in range(layers)])
        self.ln_f = nn.LayerNorm((hidden,), epsilon=1e-5, dtype=dtype)
        self.lm_head = nn.Dense(hidden, vocab, has_bias=False, dtype=dtype)
        self.loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
        self.example_inputs = {"input_ids": f"int32[{batch},{seq}]", "labels": f"int32[{batch},{seq}]"}

    def construct(self, input_ids, labels):
        b, s = input_ids.shape
        x = self.wte(input_ids) + self.wpe(self.positions)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return self.loss(logits.reshape(b * s, self.vocab), labels.reshape(b * s))
