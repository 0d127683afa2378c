"""Megatron-style MLP: a column-parallel Linear (MatMul + bias Add), GeLU, a row-parallel Linear.

No shard() calls: the advisor is expected to find Megatron's column -> row split itself
(fc1 splits its output dim by tp, fc2 its contracted dim).

    strategist inspect examples/mlp.py:MegatronMLP
    strategist inspect examples/mlp.py:MegatronMLP --kwargs hidden=4096 ffn=16384 --input x:float16[8192,4096]
"""
import mindspore as ms
from mindspore import nn, ops

from common import Linear


class MegatronMLP(nn.Cell):
    """x[tokens, hidden] -> fc1 (hidden->ffn, bias) -> GeLU -> fc2 (ffn->hidden, bias)."""

    def __init__(self, hidden=1024, ffn=4096, tokens=4096, dtype=ms.float16):
        super().__init__()
        self.linear_fc1 = Linear(hidden, ffn, dtype=dtype)
        self.gelu = ops.GeLU()
        self.linear_fc2 = Linear(ffn, hidden, dtype=dtype)
        self.example_inputs = {"x": f"{'float16' if dtype == ms.float16 else 'float32'}[{tokens},{hidden}]"}

    def construct(self, x):
        return self.linear_fc2(self.gelu(self.linear_fc1(x)))
