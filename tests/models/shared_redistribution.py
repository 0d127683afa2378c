"""Test models: one tensor redistributed alike for two consumers, and how many transposes the backward runs.

``p = mm0(x, w0)`` is laid out ((2, 1), (1, 4)) on dp=2,tp=4: its columns by tp. Both consumers want it (2, 1),
whole columns: an AllGather over tp (4 devices) in the forward, and its transpose, a ReduceScatter, in the backward.

* :func:`read_twice`: ONE node ``p`` read by a MatMul ((2, 1), (1, 1)) and an Add ((2, 1), (2, 1)): MindSpore
  inserts one redistribution at ``p`` for both, the autodiff sums the two gradients and transposes it once -- ONE
  ReduceScatter (LLaMA's embedding read by the residual Add and the first RmsNorm alike).
* :func:`called_twice`: ``relu0(p)`` called twice (one primitive object, one input), each result read by one
  consumer. strategist's stand-alone compile merges the two calls (opt_a's CSE); MindSpore's parallel passes run
  before that CSE and see two ReLU nodes, each redistributed and each redistribution transposed: the CSE after the
  autodiff merges the two forward AllGathers, not the two ReduceScatters (their inputs differ) -- TWO
  ReduceScatters (``nn.MultiheadAttention``'s ``[x.swapaxes(1, 0) for x in (query, key, value)]`` alike: three).

tests/fixtures/ir/shared_{read,called}_twice_step.validate.ir are MindSpore 2.9.0's ``validate`` graphs of one
training step of each (``verify --semi-auto --communication``, dp=2,tp=4, full_batch, inputs ``x, y:
float32[64,128]``; source-location comments trimmed).
"""
import numpy as np
from mindspore import Parameter, Tensor, nn, ops


class SharedRedistribution(nn.Cell):
    """``p = mm0(x, w0)`` by tp on its columns; ``o1``, ``o2`` want it whole; the output is ``o1 * o2``."""

    def __init__(self, twice=False, d=128):
        super().__init__()
        self.twice = twice
        self.w0 = Parameter(Tensor(np.ones((d, d), np.float32)), name="w0")
        self.w1 = Parameter(Tensor(np.ones((d, d), np.float32)), name="w1")
        self.mm0 = ops.MatMul().shard(((2, 1), (1, 4)))
        self.relu0 = ops.ReLU().shard(((2, 4),))
        self.mm1 = ops.MatMul().shard(((2, 1), (1, 1)))
        self.add = ops.Add().shard(((2, 1), (2, 1)))
        self.mul = ops.Mul().shard(((2, 1), (2, 1)))
        self.example_inputs = {"x": "float32[64,128]", "y": "float32[64,128]"}

    def construct(self, x, y):
        p = self.mm0(x, self.w0)
        if self.twice:
            q1 = self.relu0(p)
            q2 = self.relu0(p)
        else:
            q1 = q2 = p
        return self.mul(self.mm1(q1, self.w1), self.add(q2, y))


def read_twice():
    return SharedRedistribution(twice=False)


def called_twice():
    return SharedRedistribution(twice=True)
