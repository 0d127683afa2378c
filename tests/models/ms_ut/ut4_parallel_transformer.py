"""Re-expression of test_transformer_model_head_parallel_only_encoder_sp in MindSpore's UT
tests/ut/python/parallel/test_parallel_transformer.py. The UT builds mindspore.parallel._transformer's
Transformer(encoder_layers=2, decoder_layers=0, batch_size=2, src_seq_length=20, hidden_size=64, num_heads=8,
ffn_hidden_size=64) with TransformerOpParallelConfig(data_parallel=1, model_parallel=8) plus CrossEntropyLoss,
wrapped in _VirtualDatasetCell/TrainOneStepCell; auto_parallel, search_mode="sharding_propagation", 8 devices,
full_batch=True, set_algo_parameters(elementwise_op_strategy_follow=False, fully_use_devices=False) (both are
MindSpore 2.9.0's defaults); it only checks that training compiles. That package is gone from MindSpore 2.9.0, so
its sharding-propagation branch is re-expressed here (forward encoder only; the CrossEntropyLoss head, the
dropout-free inference flags and the TrainOneStepCell are dropped):

* per layer (TransformerEncoderLayer, pre-LayerNorm): x[2,20,64] -> reshape (-1,64) -> LayerNorm1 (unconfigured)
  -> cast fp16 -> MultiHeadAttention -> Add ((dp,1),(dp,1)) residual -> LayerNorm2 -> cast fp16 -> FeedForward
  -> reshape to 3-D -> Add ((dp,1,1),(dp,1,1)) residual.
* MultiHeadAttention (sharding-propagation branch: only the output projection is configured): dense1/2/3 =
  _Linear (MatMul(transpose_b) + Add bias, fp16, unconfigured) -> reshape (2,20,8,8) -> Transpose (0,2,1,3) /
  (0,2,3,1) -> RealDiv by sqrt(sqrt(8)) -> BatchMatMul -> cast fp32 -> mask: ExpandDims, Sub(1.0, mask),
  Mul(-10000), Add -> Softmax (fp32) -> cast -> Dropout -> BatchMatMul -> Transpose (0,2,1,3) -> reshape (-1,64)
  -> projection MatMul ((dp,mp),(mp,1)), Add bias ((dp,1),(1,)) -> Dropout.
* FeedForward (sharding-propagation branch): mapping _Linear(64,64, GeLU, unconfigured) -> projection MatMul
  ((dp,mp),(mp,1)) (bias Add unconfigured) -> Dropout.
With dp=1, mp=8. _Linear and _LayerNorm (P.LayerNorm) follow mindspore/parallel/_transformer/layers.py.
Inputs: x float32[2,20,64], mask float16[2,20,20]. Verify with --mesh dp=8 --dataset-strategy full_batch.

* ParallelTransformerEncoderSP <- test_transformer_model_head_parallel_only_encoder_sp (2 layers)
"""
import math

import mindspore as ms
from mindspore import Parameter, Tensor, nn
from mindspore.common import dtype as mstype
from mindspore.common.initializer import initializer
from mindspore.ops import functional as F
from mindspore.ops import operations as P

DP, MP = 1, 8


class _Linear(nn.Cell):
    def __init__(self, in_channels, out_channels, activation=None, transpose_b=True):
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        shape = [out_channels, in_channels] if transpose_b else [in_channels, out_channels]
        self.weight = Parameter(initializer("normal", shape, mstype.float32), name="weight")
        self.bias = Parameter(initializer("zeros", [out_channels], mstype.float32), name="bias")
        self.matmul = P.MatMul(transpose_b=transpose_b)
        self.bias_add = P.Add()
        self.activation = nn.GELU() if activation == "gelu" else None
        self.cast = P.Cast()
        self.dtype = mstype.float16

    def shard(self, strategy_matmul, strategy_bias=None):
        self.matmul.shard(strategy_matmul)
        if strategy_bias is not None:
            self.bias_add.shard(strategy_bias)
        return self

    def construct(self, x):
        out_shape = P.Shape()(x)[:-1] + (self.out_channels,)
        x = P.Reshape()(x, (-1, self.in_channels))
        x = self.matmul(x, self.cast(self.weight, self.dtype))
        x = self.bias_add(x, self.cast(self.bias, self.dtype))
        if self.activation is not None:
            x = self.activation(x)
        return P.Reshape()(x, out_shape)


class _LayerNorm(nn.Cell):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.gamma = Parameter(initializer("ones", normalized_shape, mstype.float32), name="gamma")
        self.beta = Parameter(initializer("zeros", normalized_shape, mstype.float32), name="beta")
        self.layer_norm = P.LayerNorm(begin_norm_axis=-1, begin_params_axis=-1, epsilon=eps)

    def construct(self, x):
        output, _, _ = self.layer_norm(x, self.gamma, self.beta)
        return output


class MultiHeadAttention(nn.Cell):
    def __init__(self, batch_size, seq_length, hidden_size, num_heads):
        super().__init__()
        self.batch_size = batch_size
        self.seq_length = seq_length
        self.n_head = num_heads
        self.size_per_head = hidden_size // num_heads
        self.projection = _Linear(hidden_size, hidden_size, transpose_b=False)
        self.projection.shard(strategy_bias=((DP, 1), (1,)), strategy_matmul=((DP, MP), (MP, 1)))
        self.transpose = P.Transpose()
        self.merger_head_transpose = P.Transpose()
        self.reshape = P.Reshape()
        self.multiply_data = Tensor([-10000.0], dtype=mstype.float32)
        self.batch_matmul = P.BatchMatMul()
        self.real_div = P.RealDiv()
        self.sub = P.Sub()
        self.mul = P.Mul()
        self.add = P.Add()
        self.scale_factor = Tensor(math.sqrt(math.sqrt(self.size_per_head)))
        self.dropout = nn.Dropout(p=0.1)
        self.prob_dropout = nn.Dropout(p=0.1)
        self.softmax = nn.Softmax().to_float(mstype.float32)
        self.expand_dims = P.ExpandDims()
        self.dense1 = _Linear(hidden_size, hidden_size)
        self.dense2 = _Linear(hidden_size, hidden_size)
        self.dense3 = _Linear(hidden_size, hidden_size)
        self.dtype = mstype.float16
        self.softmax_dtype = mstype.float32

    def construct(self, query_tensor, key_tensor, value_tensor, attention_mask):
        ori_shape = F.shape(query_tensor)
        query_tensor = F.reshape(query_tensor, (-1, F.shape(query_tensor)[-1]))
        key_tensor = F.reshape(key_tensor, (-1, F.shape(key_tensor)[-1]))
        value_tensor = F.reshape(value_tensor, (-1, F.shape(value_tensor)[-1]))
        ori_dtype = F.dtype(query_tensor)
        query_tensor = F.cast(query_tensor, self.dtype)
        key_tensor = F.cast(key_tensor, self.dtype)
        value_tensor = F.cast(value_tensor, self.dtype)
        query = self.dense1(query_tensor)
        key = self.dense2(key_tensor)
        value = self.dense3(value_tensor)
        shape4 = (self.batch_size, self.seq_length, self.n_head, self.size_per_head)
        query = self.transpose(F.reshape(query, shape4), (0, 2, 1, 3))
        key = self.transpose(F.reshape(key, shape4), (0, 2, 3, 1))
        value = self.transpose(F.reshape(value, shape4), (0, 2, 1, 3))
        attention_mask = self.expand_dims(attention_mask, 1)
        attention = self._attn(query, key, value, attention_mask)
        output = self.projection(attention)
        output = self.dropout(output)
        output = F.reshape(output, ori_shape)
        return F.cast(output, ori_dtype)

    def _attn(self, query, key, value, attention_mask):
        factor = P.Cast()(self.scale_factor, P.DType()(query))
        query = self.real_div(query, factor)
        key = self.real_div(key, factor)
        score = self.batch_matmul(query, key)
        ori_dtype = P.DType()(score)
        attention_scores = P.Cast()(score, self.softmax_dtype)
        multiplu_out = self.sub(P.Cast()(F.tuple_to_array((1.0,)), P.DType()(attention_scores)),
                                P.Cast()(attention_mask, P.DType()(attention_scores)))
        adder = self.mul(multiplu_out, self.multiply_data)
        attention_scores = self.add(adder, attention_scores)
        attention_probs = self.softmax(attention_scores)
        attention_probs = P.Cast()(attention_probs, ori_dtype)
        attention_probs = self.prob_dropout(attention_probs)
        weighted_values = self.batch_matmul(attention_probs, value)
        x = self.merger_head_transpose(weighted_values, (0, 2, 1, 3))
        x_shape = P.Shape()(x)
        return self.reshape(x, (-1, x_shape[-2] * x_shape[-1]))


class FeedForward(nn.Cell):
    def __init__(self, hidden_size, ffn_hidden_size):
        super().__init__()
        self.mapping = _Linear(hidden_size, ffn_hidden_size, activation="gelu", transpose_b=False)
        self.projection = _Linear(ffn_hidden_size, hidden_size, transpose_b=False)
        self.projection.shard(strategy_matmul=((DP, MP), (MP, 1)))
        self.dropout = nn.Dropout(p=0.1)
        self.cast = P.Cast()

    def construct(self, x):
        x = self.cast(x, mstype.float16)
        hidden = self.mapping(x)
        output = self.projection(hidden)
        return self.dropout(output)


class TransformerEncoderLayer(nn.Cell):
    def __init__(self, batch_size, hidden_size, ffn_hidden_size, num_heads, seq_length):
        super().__init__()
        self.layernorm1 = _LayerNorm((hidden_size,)).to_float(mstype.float32)
        self.layernorm2 = _LayerNorm((hidden_size,)).to_float(mstype.float32)
        self.attention = MultiHeadAttention(batch_size, seq_length, hidden_size, num_heads)
        self.output = FeedForward(hidden_size, ffn_hidden_size)
        self.add = P.Add().shard(((DP, 1), (DP, 1)))
        self.add_3d = P.Add().shard(((DP, 1, 1), (DP, 1, 1)))
        self.dtype = mstype.float16

    def construct(self, x, input_mask):
        x_shape = F.shape(x)
        x = F.reshape(x, (-1, x_shape[-1]))
        input_x = self.layernorm1(x)
        input_x = F.cast(input_x, self.dtype)
        attention = self.attention(input_x, input_x, input_x, input_mask)
        x = self.add(x, attention)
        output_x = self.layernorm2(x)
        output_x = F.cast(output_x, self.dtype)
        mlp_logit = self.output(output_x)
        mlp_logit = P.Reshape()(mlp_logit, x_shape)
        x = P.Reshape()(x, x_shape)
        return self.add_3d(x, mlp_logit)


class ParallelTransformerEncoderSP(nn.Cell):
    def __init__(self, layers=2):
        super().__init__()
        self.blocks = nn.CellList([TransformerEncoderLayer(2, 64, 64, 8, 20) for _ in range(layers)])
        self.example_inputs = {"x": "float32[2,20,64]", "mask": "float16[2,20,20]"}

    def construct(self, x, mask):
        for block in self.blocks:
            x = block(x, mask)
        return x
