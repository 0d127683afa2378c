"""LLaMA-style decoder: embedding Gather, N x (RMSNorm + attention (GQA, FlashAttentionScore)
+ RMSNorm + SwiGLU MLP), final RMSNorm, LM head, masked cross-entropy loss.

No shard() calls anywhere: this is the model the advisor is asked to configure.
Presets: ``tiny`` (fast tests), ``llama2_7b``, ``llama2_70b`` (hidden 8192, FFN 28672, 64 heads,
8 KV heads, vocab 32000, seq 4096); any of them takes ``layers=1..80``.

    strategist inspect examples/llama.py:tiny
    strategist inspect examples/llama.py:llama2_70b --kwargs layers=80
"""
import mindspore as ms
from mindspore import Parameter, nn, ops
from mindspore.common.initializer import initializer
from mindspore.ops.auto_generate.gen_ops_prim import SiLU

from attention import Attention
from common import Linear, RMSNorm, as_dtype

PRESETS = {
    "tiny": dict(vocab=1024, hidden=256, ffn=688, heads=8, kv_heads=4, layers=2, batch=2, seq=128),
    "llama2_7b": dict(vocab=32000, hidden=4096, ffn=11008, heads=32, kv_heads=32, layers=32, batch=1,
                      seq=4096),
    "llama2_70b": dict(vocab=32000, hidden=8192, ffn=28672, heads=64, kv_heads=8, layers=80, batch=1,
                       seq=4096),
}


class Embedding(nn.Cell):
    """Token embedding: Gather rows of a [vocab, hidden] table."""

    def __init__(self, vocab, hidden, dtype=ms.float16, param_dtype=None):
        super().__init__()
        dtype, param_dtype = as_dtype(dtype), as_dtype(param_dtype or dtype)
        self.weight = Parameter(initializer("normal", (vocab, hidden), param_dtype), name="weight")
        self.gather = ops.Gather()
        self.dtype = dtype
        self.cast_out = param_dtype != dtype
        if self.cast_out:
            self.cast = ops.Cast()

    def construct(self, ids):
        h = self.gather(self.weight, ids, 0)
        return self.cast(h, self.dtype) if self.cast_out else h


class FeedForward(nn.Cell):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, hidden, ffn, dtype=ms.float16, param_dtype=None):
        super().__init__()
        self.w1 = Linear(hidden, ffn, has_bias=False, dtype=dtype, param_dtype=param_dtype)
        self.w3 = Linear(hidden, ffn, has_bias=False, dtype=dtype, param_dtype=param_dtype)
        self.w2 = Linear(ffn, hidden, has_bias=False, dtype=dtype, param_dtype=param_dtype)
        self.silu = SiLU()
        self.mul = ops.Mul()
        self.reshape = ops.Reshape()

    def construct(self, x):
        bs, seq, hidden = x.shape
        x2 = self.reshape(x, (bs * seq, hidden))
        y = self.w2(self.mul(self.silu(self.w1(x2)), self.w3(x2)))
        return self.reshape(y, (bs, seq, hidden))


class DecoderLayer(nn.Cell):
    """h = x + attention(norm(x)); out = h + feed_forward(norm(h))."""

    def __init__(self, hidden, ffn, heads, kv_heads, dtype=ms.float16, causal=False, param_dtype=None):
        super().__init__()
        self.attention_norm = RMSNorm(hidden, dtype=dtype)
        self.attention = Attention(hidden, heads, kv_heads, dtype=dtype, causal=causal, param_dtype=param_dtype)
        self.ffn_norm = RMSNorm(hidden, dtype=dtype)
        self.feed_forward = FeedForward(hidden, ffn, dtype=dtype, param_dtype=param_dtype)
        self.add = ops.Add()

    def construct(self, x):
        h = self.add(x, self.attention(self.attention_norm(x)))
        return self.add(h, self.feed_forward(self.ffn_norm(h)))


class LlamaModel(nn.Cell):
    def __init__(self, vocab, hidden, ffn, heads, kv_heads, layers, dtype=ms.float16, causal=False,
                 param_dtype=None):
        super().__init__()
        self.tok_embeddings = Embedding(vocab, hidden, dtype, param_dtype)
        self.layers = nn.CellList([DecoderLayer(hidden, ffn, heads, kv_heads, dtype, causal, param_dtype)
                                   for _ in range(layers)])
        self.norm_out = RMSNorm(hidden, dtype=dtype)

    def construct(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h)
        return self.norm_out(h)


class CrossEntropyLoss(nn.Cell):
    """Mean over unmasked tokens of softmax cross-entropy (fp32)."""

    def __init__(self, vocab):
        super().__init__()
        self.vocab = vocab
        self.cast = ops.Cast()
        self.one_hot = ops.OneHot()
        self.softmax_cross_entropy = ops.SoftmaxCrossEntropyWithLogits()
        self.mul = ops.Mul()
        self.sum = ops.ReduceSum(keep_dims=False)
        self.div = ops.RealDiv()

    def construct(self, logits, labels, mask):
        logits = self.cast(logits, ms.float32)
        onehot = self.one_hot(labels, self.vocab, ms.Tensor(1.0, ms.float32), ms.Tensor(0.0, ms.float32))
        loss, _ = self.softmax_cross_entropy(logits, onehot)
        return self.div(self.sum(self.mul(loss, mask)), self.sum(mask))


class VocabParallelCrossEntropyLoss(nn.Cell):
    """The same loss written as MindFormers' ``CrossEntropyLoss`` and Megatron's vocab-parallel cross-entropy
    write it: a log-softmax of reductions over the vocabulary (max, sum of exponentials) and the one-hot's
    product, so a vocabulary split by tp costs two small reductions per token rather than gathering the logits
    (``SoftmaxCrossEntropyWithLogits`` splits only its rows)."""

    def __init__(self, vocab):
        super().__init__()
        self.vocab = vocab
        self.cast = ops.Cast()
        self.one_hot = ops.OneHot()
        self.max = ops.ReduceMax(keep_dims=True)
        self.sub_max = ops.Sub()
        self.exp = ops.Exp()
        self.sum_exp = ops.ReduceSum(keep_dims=True)
        self.log = ops.Log()
        self.sub_log = ops.Sub()
        self.mul_onehot = ops.Mul()
        self.sum_vocab = ops.ReduceSum(keep_dims=False)
        self.neg = ops.Neg()
        self.mul = ops.Mul()
        self.sum = ops.ReduceSum(keep_dims=False)
        self.div = ops.RealDiv()

    def construct(self, logits, labels, mask):
        logits = self.cast(logits, ms.float32)
        shifted = self.sub_max(logits, self.max(logits, -1))
        log_softmax = self.sub_log(shifted, self.log(self.sum_exp(self.exp(shifted), -1)))
        onehot = self.one_hot(labels, self.vocab, ms.Tensor(1.0, ms.float32), ms.Tensor(0.0, ms.float32))
        loss = self.neg(self.sum_vocab(self.mul_onehot(log_softmax, onehot), -1))
        return self.div(self.sum(self.mul(loss, mask)), self.sum(mask))


LOSSES = {"fused": CrossEntropyLoss, "vocab_parallel": VocabParallelCrossEntropyLoss}


class LlamaForCausalLM(nn.Cell):
    """input_ids[B, S+1] -> tokens = ids[:, :-1], labels = ids[:, 1:] -> loss (scalar). ``dtype``: the compute
    dtype (``float16``, ``bfloat16``); ``param_dtype``: the weights' (MindFormers' ``param_init_type``; None: the
    compute dtype), cast to the compute dtype where read. ``loss``: ``fused``
    (``SoftmaxCrossEntropyWithLogits``) or ``vocab_parallel`` (MindFormers' and Megatron's formulation).
    ``causal``: the attention causal as MindFormers' LLaMA trains it (a compressed causal mask, sparse_mode 2: the
    kernel computes the blocks on and below the diagonal only); off, every query attends to every key."""

    def __init__(self, vocab=32000, hidden=4096, ffn=11008, heads=32, kv_heads=None, layers=2, batch=1,
                 seq=4096, pad_token_id=0, dtype=ms.float16, loss="fused", causal=False, param_dtype=None):
        super().__init__()
        dtype = as_dtype(dtype)
        if not 1 <= layers <= 80:
            raise ValueError(f"layers must be 1..80, got {layers}")
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {', '.join(LOSSES)}, got {loss!r}")
        self.hidden = hidden
        self.pad_token_id = pad_token_id
        self.model = LlamaModel(vocab, hidden, ffn, heads, kv_heads or heads, layers, dtype, causal, param_dtype)
        self.lm_head = Linear(hidden, vocab, has_bias=False, transpose_b=True, dtype=dtype, param_dtype=param_dtype)
        self.loss = LOSSES[loss](vocab)
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
        h = self.model(tokens)
        logits = self.lm_head(self.reshape(h, (bsz * (seqlen - 1), self.hidden)))
        n = bsz * (seqlen - 1)
        return self.loss(logits, self.reshape(labels, (n,)), self.reshape(input_mask, (n,)))


def build(preset="tiny", **overrides):
    """A LlamaForCausalLM from a preset, e.g. ``build("llama2_70b", layers=10)``."""
    return LlamaForCausalLM(**{**PRESETS[preset], **overrides})


def tiny(**overrides):
    return build("tiny", **overrides)


def llama2_7b(**overrides):
    return build("llama2_7b", **overrides)


def llama2_70b(**overrides):
    return build("llama2_70b", **overrides)
