"""``@lazy_inline`` Cells under sharding propagation: MindSpore 2.9.0 keeps instances of one lazy-inline class (equal
``__init__`` arguments) one reused func graph, called once per instance, with one OperatorInfo per operator of it
(:func:`strategist.engine.search.lazy_copies`). Each net here pins a part of that against MindSpore's recorded answer
(the training compile, where MindSpore collects its nodes in TopoSort order).

* ``LazyGPT``: examples/gpt_nn.py's GPT with its blocks' ``__init__`` under ``@lazy_inline``; ``q`` anchors the q
  projection inside the block (column-parallel, as a user writes it in the class), ``gather``/``head`` anchor the
  token embedding's Gather / the head's MatMul outside it. With ``q`` and ``gather`` the block's anchor seeds first
  (the body is created first), unlike the same model without ``@lazy_inline``.
* ``LazyStack``: x -> ``pre`` Mul -> N blocks [MatMul, GeLU, MatMul, Add(., x)] -> ``post`` Mul; ``mid`` a Mul between
  the first and second calls (it reads the body's return and feeds the next call, whose argument makes no edge);
  ``side`` an Add reading the first call's output after the last; ``rin`` the block's input reshaped first.
"""
import ast
import os
import sys

import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, nn, ops

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
import gpt_nn  # noqa: E402


def _s(x):
    return ast.literal_eval(x) if isinstance(x, str) else x


class _LazyBlock(gpt_nn.Block):
    @ms.lazy_inline
    def __init__(self, hidden, heads, ffn, seq, dtype=ms.float32):
        super().__init__(hidden, heads, ffn, seq, dtype)
        if _LazyBlock.q:
            self.attn.q_proj.matmul.shard(((2, 1), (4, 1)))

    q = False


class _PlainBlock(gpt_nn.Block):
    def __init__(self, hidden, heads, ffn, seq, dtype=ms.float32):
        super().__init__(hidden, heads, ffn, seq, dtype)
        if _LazyBlock.q:
            self.attn.q_proj.matmul.shard(((2, 1), (4, 1)))


def LazyGPT(layers=2, batch=8, q=False, gather=False, head=False, lazy=True):
    """A factory: the GPT with its blocks swapped for the lazy-inline (or, ``lazy=False``, plain) subclass."""
    saved, saved_q = gpt_nn.Block, _LazyBlock.q
    gpt_nn.Block, _LazyBlock.q = (_LazyBlock if lazy else _PlainBlock), bool(q)
    try:
        net = gpt_nn.GPT(layers=layers, batch=batch)
    finally:
        gpt_nn.Block, _LazyBlock.q = saved, saved_q
    if gather:
        net.wte.gather.shard(((1, 1), (8,)))
    if head:
        net.lm_head.matmul.shard(((8, 1), (1, 1)))
    return net


T, H, F = 256, 64, 128
B, S = 8, 32


class _Blk(nn.Cell):
    def __init__(self, m1=None, m2=None, rin=0):
        super().__init__()
        self.rin = rin
        self.w1 = Parameter(Tensor(np.zeros((H, F), np.float32)), name="w1")
        self.w2 = Parameter(Tensor(np.zeros((F, H), np.float32)), name="w2")
        self.m1 = ops.MatMul()
        self.m2 = ops.MatMul()
        self.act = ops.GeLU()
        self.add = ops.Add()
        self.r1 = ops.Reshape()
        self.r2 = ops.Reshape()
        if m1:
            self.m1.shard(_s(m1))
        if m2:
            self.m2.shard(_s(m2))

    def construct(self, x):
        y = self.r1(x, (B * S, H)) if self.rin else x
        y = self.m2(self.act(self.m1(y, self.w1)), self.w2)
        if self.rin:
            y = self.r2(y, (B, S, H))
        return self.add(y, x)


class _LazyBlk(_Blk):
    @ms.lazy_inline
    def __init__(self, m1=None, m2=None, rin=0):
        super().__init__(m1, m2, rin)


class LazyStack(nn.Cell):
    def __init__(self, layers=2, lazy=1, pre=None, m1=None, m2=None, rin=0, side=0, mid=None):
        super().__init__()
        self.mid = ops.Mul()
        self.has_mid = bool(mid)
        if isinstance(mid, str) and mid.startswith("("):
            self.mid.shard(_s(mid))
        self.wpre = Parameter(Tensor(np.ones((H,), np.float32)), name="wpre")
        self.wpost = Parameter(Tensor(np.ones((H,), np.float32)), name="wpost")
        self.wmid = Parameter(Tensor(np.ones((H,), np.float32)), name="wmid")
        self.pre = ops.Mul()
        self.post = ops.Mul()
        self.side_add = ops.Add()
        self.side = side
        if pre:
            self.pre.shard(_s(pre))
        cls = _LazyBlk if lazy else _Blk
        self.blocks = nn.CellList([cls(m1, m2, rin) for _ in range(layers)])
        shape = (B, S, H) if rin else (T, H)
        self.example_inputs = {"x": "float32[" + ",".join(map(str, shape)) + "]"}

    def construct(self, x):
        y = self.pre(x, self.wpre)
        first = None
        k = 0
        for b in self.blocks:
            if self.has_mid and k == 1:
                y = self.mid(y, self.wmid)
            y = b(y)
            k += 1
            if first is None:
                first = y
        if self.side:
            y = self.side_add(y, first)
        return self.post(y, self.wpost)
