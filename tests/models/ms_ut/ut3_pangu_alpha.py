"""Re-expression of test_pangu_alpha_shard_propagation in MindSpore's UT folder tests/ut/python/parallel/ (a
PanGu-alpha model with its loss; file name not confirmed).

* PanguAlphaWithLoss16 <- test_pangu_alpha_shard_propagation (auto_parallel, search_mode="sharding_propagation",
  16 devices, the default dataset strategy (data_parallel: the UT feeds per-device batches of 2, i.e. a global
  batch of 32), set_algo_parameters(elementwise_op_strategy_follow=False, fully_use_devices=False) -- both the
  defaults). The UT trains PanGUAlphaWithLoss inside _VirtualDatasetCell/Model; here the loss net itself is the
  forward net (its StridedSlices, NotEqual, OneHot, ArgMaxWithValue ... kept). Configured: the FeedForward and
  attention output projections' MatMul ((2,8),(8,1)), the embedding GatherV2s ((1,1),(2,1)), the head MatMul
  (transpose_b) ((2,1),(1,1)), the loss's ArgMaxWithValue ((2,8),); all else (the self-defined LayerNorm of
  ReduceMean/Sub/Square/Sqrt/RealDiv, the Q/K/V projections, BatchMatMul, Softmax, Transpose, Reshape, the
  mask arithmetic, the loss's reductions) is propagated. Dropped: pipeline-stage / comm-fusion settings (no effect
  on strategies) and TransformerEncoder's unused Add. hidden 2560, ffn 10240, 32 heads, seq 1024, vocab 40000,
  one encoder layer plus the top query layer. The UT asserts MultiHeadAttention's mask Add [[2,1,1,1],[2,8,1,1]],
  ReduceMean [[2,1]], BatchMatMul [[2,8,1,1],[2,8,1,1]].
"""
import math

import mindspore as ms
import mindspore.common.dtype as mstype
from mindspore import Parameter, Tensor, nn
from mindspore.common.initializer import initializer
from mindspore.nn.layer.activation import get_activation
from mindspore.ops import functional as F
from mindspore.ops import operations as P


class _LayerNorm(nn.Cell):
    def __init__(self, normalized_shape, eps=1e-5, param_init_type=mstype.float32):
        super().__init__()
        if normalized_shape[0] <= 1024:
            self.layer_norm = P.LayerNorm(begin_norm_axis=-1, begin_params_axis=-1, epsilon=eps)
        self.is_self_defined = normalized_shape[0] > 1024
        self.gamma = Parameter(initializer("ones", normalized_shape, param_init_type), name="gamma",
                               parallel_optimizer=False)
        self.beta = Parameter(initializer("zeros", normalized_shape, param_init_type), name="beta",
                              parallel_optimizer=False)
        self.mean = P.ReduceMean(keep_dims=True)
        self.square = P.Square()
        self.sqrt = P.Sqrt()
        self.sub1 = P.Sub()
        self.add = P.Add()
        self.eps = eps
        self.mul = P.Mul()
        self.add2 = P.Add()
        self.real_div = P.RealDiv()

    def construct(self, x):
        if self.is_self_defined:
            mean = self.mean(x, -1)
            diff = self.sub1(x, mean)
            variance = self.mean(self.square(diff), -1)
            variance_eps = self.sqrt(self.add(variance, self.eps))
            output = self.real_div(diff, variance_eps)
            output = self.add2(self.mul(output, self.gamma), self.beta)
        else:
            output, _, _ = self.layer_norm(x, self.gamma, self.beta)
        return output


class _Linear(nn.Cell):
    def __init__(self, in_channels, out_channels, weight_init="normal", bias_init="zeros", has_bias=True,
                 activation=None, transpose_b=True, param_init_type=mstype.float32, compute_dtype=mstype.float16):
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        weight_shape = [out_channels, in_channels] if transpose_b else [in_channels, out_channels]
        self.weight = Parameter(initializer(weight_init, weight_shape, param_init_type), name="weight")
        self.matmul = P.MatMul(transpose_b=transpose_b)
        self.has_bias = has_bias
        if has_bias:
            self.bias = Parameter(initializer(bias_init, [out_channels], param_init_type), name="bias")
            self.bias_add = P.Add()
        self.activation = get_activation(activation) if isinstance(activation, str) else activation
        self.activation_flag = self.activation is not None
        self.dtype = compute_dtype
        self.cast = P.Cast()

    def construct(self, x):
        out_shape = P.Shape()(x)[:-1] + (self.out_channels,)
        x = P.Reshape()(x, (-1, self.in_channels))
        weight = self.cast(self.weight, self.dtype)
        x = self.matmul(x, weight)
        if self.has_bias:
            x = self.bias_add(x, self.cast(self.bias, self.dtype))
        if self.activation_flag:
            x = self.activation(x)
        return P.Reshape()(x, out_shape)

    def shard(self, strategy_matmul, strategy_bias=None):
        self.matmul.shard(strategy_matmul)
        if self.has_bias:
            self.bias_add.shard(strategy_bias)
        return self


class FeedForward(nn.Cell):
    def __init__(self, hidden_size, ffn_hidden_size, dropout_rate, hidden_act="gelu",
                 param_init_type=mstype.float32):
        super().__init__()
        dp, mp = 2, 8
        self.mapping = _Linear(hidden_size, ffn_hidden_size, activation=hidden_act, transpose_b=False,
                               param_init_type=param_init_type)
        self.projection = _Linear(ffn_hidden_size, hidden_size, transpose_b=False, param_init_type=param_init_type)
        self.projection.shard(strategy_matmul=((dp, mp), (mp, 1)))
        self.projection.bias.parallel_optimizer = False
        self.dropout = nn.Dropout(p=dropout_rate)
        self.dropout_3d = nn.Dropout(p=dropout_rate)
        self.cast = P.Cast()

    def construct(self, x):
        x = self.cast(x, mstype.float16)
        hidden = self.mapping(x)
        output = self.projection(hidden)
        if len(F.shape(output)) == 3:
            output = self.dropout_3d(output)
        else:
            output = self.dropout(output)
        return output


class MultiHeadAttention(nn.Cell):
    def __init__(self, hidden_size, num_heads, hidden_dropout_rate=0.1, attention_dropout_rate=0.1,
                 compute_dtype=mstype.float16, softmax_compute_type=mstype.float32, param_init_type=mstype.float32):
        super().__init__()
        self.hidden_size = hidden_size
        self.projection = _Linear(hidden_size, hidden_size, transpose_b=False,
                                  param_init_type=param_init_type).to_float(compute_dtype)
        self.projection.shard(strategy_matmul=((2, 8), (8, 1)))
        self.projection.bias.parallel_optimizer = False
        self.transpose = P.Transpose()
        self.merger_head_transpose = P.Transpose()
        self.reshape = P.Reshape()
        self.n_head = num_heads
        self.size_per_head = hidden_size // num_heads
        self.multiply_data = Tensor([-10000.0], dtype=softmax_compute_type)
        self.batch_matmul = P.BatchMatMul()
        self.real_div = P.RealDiv()
        self.sub = P.Sub()
        self.mul = P.Mul()
        self.add = P.Add()
        self.scale_factor = Tensor(math.sqrt(self.size_per_head))
        self.dropout = nn.Dropout(p=hidden_dropout_rate)
        self.prob_dropout = nn.Dropout(p=attention_dropout_rate)
        self.softmax = nn.Softmax().to_float(softmax_compute_type)
        self.expand_dims = P.ExpandDims()
        self.dense1 = _Linear(hidden_size, hidden_size, param_init_type=param_init_type).to_float(compute_dtype)
        self.dense2 = _Linear(hidden_size, hidden_size, param_init_type=param_init_type).to_float(compute_dtype)
        self.dense3 = _Linear(hidden_size, hidden_size, param_init_type=param_init_type).to_float(compute_dtype)
        self.dtype = compute_dtype
        self.softmax_dtype = softmax_compute_type

    def construct(self, query_tensor, key_tensor, value_tensor, attention_mask):
        query_shape = F.shape(query_tensor)
        query_tensor = F.reshape(query_tensor, (-1, query_shape[-1]))
        key_tensor = F.reshape(key_tensor, (-1, F.shape(key_tensor)[-1]))
        value_tensor = F.reshape(value_tensor, (-1, F.shape(value_tensor)[-1]))
        batch_size = F.shape(attention_mask)[0]
        query = self.dense1(query_tensor)
        key = self.dense2(key_tensor)
        value = self.dense3(value_tensor)
        query = self.transpose(F.reshape(query, (batch_size, -1, self.n_head, self.size_per_head)), (0, 2, 1, 3))
        key = self.transpose(F.reshape(key, (batch_size, -1, self.n_head, self.size_per_head)), (0, 2, 3, 1))
        value = self.transpose(F.reshape(value, (batch_size, -1, self.n_head, self.size_per_head)), (0, 2, 1, 3))
        if len(F.shape(attention_mask)) == 3:
            attention_mask = self.expand_dims(attention_mask, 1)
        attention = self._attn(query, key, value, attention_mask)
        output = self.projection(attention)
        output = self.dropout(output)
        return F.reshape(output, query_shape)

    def _merge_heads(self, x):
        x = self.merger_head_transpose(x, (0, 2, 1, 3))
        x_shape = P.Shape()(x)
        return self.reshape(x, (-1, x_shape[-2] * x_shape[-1]))

    def _attn(self, query, key, value, attention_mask):
        score = self.batch_matmul(query, key)
        score = self.real_div(score, P.Cast()(self.scale_factor, P.DType()(score)))
        ori_dtype = P.DType()(score)
        score = P.Cast()(score, self.softmax_dtype)
        multiplu_out = self.sub(P.Cast()(F.tuple_to_array((1.0,)), P.DType()(score)),
                                P.Cast()(attention_mask, P.DType()(score)))
        adder = self.mul(multiplu_out, self.multiply_data)
        attention_scores = self.add(adder, score)
        shape = F.shape(attention_scores)
        attention_probs = self.softmax(F.reshape(attention_scores, (shape[0], -1, shape[-1])))
        attention_probs = P.Cast()(attention_probs, ori_dtype)
        attention_probs = F.reshape(attention_probs, shape)
        attention_probs = self.prob_dropout(attention_probs)
        weighted_values = self.batch_matmul(attention_probs, value)
        return self._merge_heads(weighted_values)


class TransformerEncoderLayer(nn.Cell):
    def __init__(self, hidden_size, ffn_hidden_size, num_heads, attention_dropout_rate=0.1, hidden_dropout_rate=0.1,
                 layernorm_compute_type=mstype.float32, softmax_compute_type=mstype.float32,
                 param_init_type=mstype.float32, hidden_act="gelu"):
        super().__init__()
        self.layernorm1 = _LayerNorm((hidden_size,)).to_float(layernorm_compute_type)
        self.layernorm2 = _LayerNorm((hidden_size,)).to_float(layernorm_compute_type)
        self.attention = MultiHeadAttention(hidden_size=hidden_size, num_heads=num_heads,
                                            hidden_dropout_rate=hidden_dropout_rate,
                                            attention_dropout_rate=attention_dropout_rate,
                                            softmax_compute_type=softmax_compute_type,
                                            param_init_type=param_init_type)
        self.output = FeedForward(hidden_size=hidden_size, dropout_rate=hidden_dropout_rate,
                                  ffn_hidden_size=ffn_hidden_size, param_init_type=param_init_type,
                                  hidden_act=hidden_act)
        self.add = P.Add()
        self.add_3d = P.Add()
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
        if len(x_shape) == 3:
            mlp_logit = P.Reshape()(mlp_logit, x_shape)
            x = P.Reshape()(x, x_shape)
            output = self.add_3d(x, mlp_logit)
        else:
            output = self.add(x, mlp_logit)
            output = F.reshape(output, x_shape)
        return output


class VocabEmbedding(nn.Cell):
    def __init__(self, vocab_size, embedding_size, param_init="normal"):
        super().__init__()
        self.embedding_table = Parameter(initializer(param_init, [vocab_size, embedding_size]),
                                         name="embedding_table", parallel_optimizer=False)
        self.gather = P.GatherV2().shard(((1, 1), (2, 1)))

    def construct(self, input_ids):
        output = self.gather(self.embedding_table, input_ids, 0)
        return output, self.embedding_table.value()


class EmbeddingLayer(nn.Cell):
    def __init__(self):
        super().__init__()
        self.word_embedding = VocabEmbedding(vocab_size=40000, embedding_size=2560)
        self.position_embedding = VocabEmbedding(vocab_size=40000, embedding_size=2560)
        self.add = P.Add()
        self.dropout = nn.Dropout(p=0.1)

    def construct(self, input_ids, input_position):
        word_embedding, word_table = self.word_embedding(input_ids)
        position_embedding, _ = self.position_embedding(input_position)
        embed = self.add(word_embedding, position_embedding)
        embed = self.dropout(embed)
        return embed, word_table


class QueryLayer(TransformerEncoderLayer):
    def construct(self, x, query_vector, input_mask):
        input_x = self.layernorm1(x)
        input_x = F.cast(input_x, self.dtype)
        attention = self.attention(query_vector, input_x, input_x, input_mask)
        x = self.add(x, attention)
        output_x = self.layernorm2(x)
        output_x = F.cast(output_x, self.dtype)
        mlp_logit = self.output(output_x)
        return self.add(x, mlp_logit)


class PanGuHead(nn.Cell):
    def __init__(self, hidden_size, compute_type=mstype.float16):
        super().__init__()
        self.matmul = P.MatMul(transpose_b=True).shard(((2, 1), (1, 1)))
        self.hidden_size = hidden_size
        self.dtype = compute_type
        self.cast = P.Cast()

    def construct(self, state, embed):
        state = P.Reshape()(state, (-1, self.hidden_size))
        return self.matmul(self.cast(state, self.dtype), self.cast(embed, self.dtype))


class PanguAlphaRawModel(nn.Cell):
    def __init__(self):
        super().__init__()
        self.embedding = EmbeddingLayer()
        self.layernorm = _LayerNorm((2560,)).to_float(mstype.float32)
        self.block = TransformerEncoderLayer(hidden_size=2560, ffn_hidden_size=10240, num_heads=32,
                                             softmax_compute_type=mstype.float16)
        self.top_query_embedding = VocabEmbedding(vocab_size=1024, embedding_size=2560)
        self.top_query_layer = QueryLayer(hidden_size=2560, ffn_hidden_size=10240, num_heads=32,
                                          hidden_act="fast_gelu")
        self.dtype = mstype.float16

    def construct(self, input_ids, input_position, encoder_masks):
        embed, word_table = self.embedding(input_ids, input_position)
        hidden_state = P.Cast()(embed, self.dtype)
        hidden_state = self.reshape_to_2d(hidden_state)
        hidden_state = self.block(hidden_state, encoder_masks)
        hidden_state = self.reshape_to_2d(hidden_state)
        encoder_output = self.layernorm(hidden_state)
        encoder_output = P.Cast()(encoder_output, self.dtype)
        top_query_hidden_states, _ = self.top_query_embedding(input_position)
        top_query_hidden_states = self.reshape_to_2d(top_query_hidden_states)
        encoder_output = self.top_query_layer(encoder_output, top_query_hidden_states, encoder_masks)
        return encoder_output, word_table

    def reshape_to_2d(self, x):
        shape = F.shape(x)
        if len(shape) <= 2:
            return x
        return F.reshape(x, (-1, shape[-1]))


class PanguAlphaModel(nn.Cell):
    def __init__(self):
        super().__init__()
        self.head = PanGuHead(hidden_size=2560)
        self.backbone = PanguAlphaRawModel()

    def construct(self, input_ids, input_position, attention_mask):
        output_states, word_table = self.backbone(input_ids, input_position, attention_mask)
        return self.head(output_states, word_table)


class CrossEntropyLoss(nn.Cell):
    def __init__(self):
        super().__init__()
        dp, mp = 2, 8
        self.sum = P.ReduceSum()
        self.onehot = P.OneHot()
        self.on_value = Tensor(1.0, mstype.float32)
        self.off_value = Tensor(0.0, mstype.float32)
        self.max = P.ArgMaxWithValue(axis=-1, keep_dims=True).shard(((dp, mp),))
        self.eps_const = Tensor(1e-24, mstype.float32)
        self.sub = P.Sub()
        self.exp = P.Exp()
        self.div = P.RealDiv()
        self.log = P.Log()
        self.add = P.Add()
        self.mul = P.Mul()
        self.neg = P.Neg()
        self.sum2 = P.ReduceSum()
        self.mul2 = P.Mul()
        self.add2 = P.Add()
        self.div2 = P.RealDiv()

    def construct(self, logits, label, input_mask):
        logits = F.cast(logits, mstype.float32)
        _, logit_max = self.max(logits)
        logit_sub = self.sub(logits, logit_max)
        logit_exp = self.exp(logit_sub)
        exp_sum = self.sum(logit_exp, -1)
        exp_sum = P.Reshape()(exp_sum, (F.shape(exp_sum)[0], 1))
        softmax_result = self.div(logit_exp, exp_sum)
        log_softmax_result = self.log(self.add(softmax_result, self.eps_const))
        label = P.Reshape()(label, (-1,))
        one_hot_label = self.onehot(label, F.shape(logits)[-1], self.on_value, self.off_value)
        loss = self.mul(log_softmax_result, one_hot_label)
        loss_unsum = self.neg(loss)
        loss_reduce = self.sum(loss_unsum, -1)
        input_mask = P.Reshape()(input_mask, (-1,))
        numerator = self.sum2(self.mul2(loss_reduce, input_mask))
        denominator = self.add2(self.sum2(input_mask), P.Cast()(F.tuple_to_array((1e-5,)), mstype.float32))
        return self.div2(numerator, denominator)


class PanguAlphaWithLoss16(nn.Cell):
    def __init__(self):
        super().__init__(auto_prefix=False)
        self.batch_size = 32
        self.seq_length = 1024
        self.network = PanguAlphaModel()
        self.eod_token = True
        self.loss = CrossEntropyLoss()
        self.slice = P.StridedSlice()
        self.not_equal = P.NotEqual()
        self.len = self.seq_length
        self.slice2 = P.StridedSlice()
        self.example_inputs = {"input_ids": "int32[32,1025]", "input_position": "int32[32,1024]",
                               "attention_mask": "float16[32,1024,1024]"}

    def construct(self, input_ids, input_position, attention_mask):
        tokens = self.slice(input_ids, (0, 0), (self.batch_size, -1), (1, 1))
        input_position = self.slice(input_position, (0, 0), (self.batch_size, self.len), (1, 1))
        decoder_attention_masks = self.slice2(attention_mask, (0, 0, 0), (self.batch_size, self.len, self.len),
                                              (1, 1, 1))
        input_mask = F.cast(self.not_equal(tokens, self.eod_token), mstype.float32)
        logits = self.network(tokens, input_position, decoder_attention_masks)
        labels = self.slice(input_ids, (0, 1), (self.batch_size, self.len + 1), (1, 1))
        labels = P.Reshape()(labels, (-1,))
        input_mask = P.Reshape()(input_mask, (-1,))
        return self.loss(logits, labels, input_mask)
