"""Vision Transformer (ViT) on MindSpore's own layers: patch embedding by an ``nn.Conv2d`` whose kernel
and stride are the patch size (or, with ``patch_embed="dense"``, by reshape + transpose + ``nn.Dense``),
a class token and learned positions, ``layers`` pre-LN blocks (``nn.LayerNorm``, a fused q/k/v
``nn.Dense`` split into heads with tensor methods, ``BatchMatMul``, ``nn.Softmax``, ``nn.GELU`` MLP),
and an ``nn.Dense`` head on the class token.

    strategist inspect examples/vit.py:ViT
    strategist inspect examples/vit.py:ViT --kwargs patch_embed='"dense"'
"""
import math

import mindspore as ms
from mindspore import Parameter, nn, ops
from mindspore.common.initializer import initializer


class Attention(nn.Cell):
    def __init__(self, hidden, heads, dtype=ms.float32):
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.qkv = nn.Dense(hidden, 3 * hidden, dtype=dtype)
        self.proj = nn.Dense(hidden, hidden, dtype=dtype)
        self.qk = ops.BatchMatMul(transpose_b=True)
        self.pv = ops.BatchMatMul()
        self.softmax = nn.Softmax(axis=-1)

    def construct(self, x):
        b, n, h = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, self.head_dim).transpose(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        probs = self.softmax(self.qk(q, k) * self.scale)
        return self.proj(self.pv(probs, v).transpose(0, 2, 1, 3).reshape(b, n, h))


class Block(nn.Cell):
    def __init__(self, hidden, heads, mlp_ratio=4, dtype=ms.float32):
        super().__init__()
        self.norm1 = nn.LayerNorm((hidden,), epsilon=1e-6, dtype=dtype)
        self.attn = Attention(hidden, heads, dtype)
        self.norm2 = nn.LayerNorm((hidden,), epsilon=1e-6, dtype=dtype)
        self.fc1 = nn.Dense(hidden, mlp_ratio * hidden, dtype=dtype)
        self.act = nn.GELU()
        self.fc2 = nn.Dense(mlp_ratio * hidden, hidden, dtype=dtype)

    def construct(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(self.act(self.fc1(self.norm2(x))))


class ViT(nn.Cell):
    """images[B,3,I,I] -> logits[B, classes]."""

    def __init__(self, image=32, patch=4, hidden=192, heads=4, layers=2, classes=10, batch=8,
                 patch_embed="conv", dtype=ms.float32):
        super().__init__()
        if image % patch:
            raise ValueError(f"image {image} is not a multiple of patch {patch}")
        self.patch = patch
        self.grid = image // patch
        self.hidden = hidden
        self.patch_embed_kind = patch_embed
        if patch_embed == "conv":
            self.patch_embed = nn.Conv2d(3, hidden, patch, stride=patch, pad_mode="valid", has_bias=True,
                                         dtype=dtype)
        else:
            self.patch_embed = nn.Dense(3 * patch * patch, hidden, dtype=dtype)
        self.cls_token = Parameter(initializer("zeros", (1, 1, hidden), dtype), name="cls_token")
        self.pos_embed = Parameter(initializer("normal", (1, self.grid * self.grid + 1, hidden), dtype),
                                   name="pos_embed")
        self.concat = ops.Concat(axis=1)
        self.blocks = nn.CellList([Block(hidden, heads, dtype=dtype) for _ in range(layers)])
        self.norm = nn.LayerNorm((hidden,), epsilon=1e-6, dtype=dtype)
        self.head = nn.Dense(hidden, classes, dtype=dtype)
        self.example_inputs = {"images": f"float32[{batch},3,{image},{image}]"}

    def construct(self, images):
        b = images.shape[0]
        g, p = self.grid, self.patch
        if self.patch_embed_kind == "conv":
            x = self.patch_embed(images).reshape(b, self.hidden, g * g).transpose(0, 2, 1)
        else:
            x = images.reshape(b, 3, g, p, g, p).transpose(0, 2, 4, 1, 3, 5).reshape(b, g * g, 3 * p * p)
            x = self.patch_embed(x)
        cls = ops.broadcast_to(self.cls_token, (b, 1, self.hidden))
        x = self.concat((cls, x)) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        x = self.norm(x)
        return self.head(x[:, 0])
