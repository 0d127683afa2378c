"""Small attention nets checked against MindSpore 2.9.0's compiled training step (tests/test_communication.py, live).

* FlashAttentionScoreInfo's load balance (``parallel_speed_up_json`` ``enable_flash_attention_load_balance``): the
  exchanges of its replace graph and, a gradient flowing back through the query, their transposes.
"""
from mindspore import Parameter, nn
from mindspore.common import dtype as mstype
from mindspore.common.initializer import initializer
from mindspore.ops import operations as P
from mindspore.ops.operations.nn_ops import FlashAttentionScore


class FaQueryFromWeights(nn.Cell):
    """A causal FlashAttentionScore (BSH, sparse_mode 2) whose query and key come from MatMuls of Parameters, its
    query's sequence split ((1, 2, 1))."""

    def __init__(self, batch=2, seq=256, hidden=128, heads=2):
        super().__init__()
        self.wq = Parameter(initializer("ones", [hidden, hidden], mstype.float16), "wq")
        self.wk = Parameter(initializer("ones", [hidden, hidden], mstype.float16), "wk")
        self.q = P.MatMul()
        self.k = P.MatMul()
        self.rows = P.Reshape()
        self.shape = (batch, seq, hidden)
        self.fa = FlashAttentionScore(head_num=heads, input_layout="BSH", sparse_mode=2, next_tokens=0,
                                      scale_value=1.0)
        self.fa.shard(((1, 2, 1), (1, 1, 1), (1, 1, 1), (1, 1)))
        self.example_inputs = {"x": f"float16[{batch * seq},{hidden}]", "mask": "uint8[2048,2048]"}

    def construct(self, x, mask):
        q, k = self.rows(self.q(x, self.wq), self.shape), self.rows(self.k(x, self.wk), self.shape)
        _, _, _, out = self.fa(q, k, k, None, None, None, mask, None)
        return out
