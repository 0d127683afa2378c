"""A sequence classifier on MindSpore's own ``nn.TransformerEncoder``: token ``nn.Embedding`` plus a
learned position table, ``layers`` x ``nn.TransformerEncoderLayer`` (batch-first, post-LN, ReLU FFN),
mean pooling over the sequence and an ``nn.Dense`` classifier.

    strategist inspect examples/encoder.py:EncoderClassifier
    strategist advise examples/encoder.py:EncoderClassifier --kwargs layers=2 --mesh dp=2,tp=4
"""
import mindspore as ms
from mindspore import Parameter, nn, ops
from mindspore.common.initializer import initializer


class EncoderClassifier(nn.Cell):
    """input_ids[B,S] -> embedding + positions -> TransformerEncoder -> mean over S -> logits[B, classes]."""

    def __init__(self, vocab=1024, d_model=256, heads=8, ffn=1024, layers=2, seq=128, classes=16, batch=8,
                 dropout=0.0, dtype=ms.float32):
        super().__init__()
        self.embedding = nn.Embedding(vocab, d_model, dtype=dtype)
        self.position = Parameter(initializer("normal", (1, seq, d_model), dtype), name="position")
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=ffn, dropout=dropout,
                                           batch_first=True, dtype=dtype)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.pool = ops.ReduceMean(keep_dims=False)
        self.classifier = nn.Dense(d_model, classes, dtype=dtype)
        self.example_inputs = {"input_ids": f"int32[{batch},{seq}]"}

    def construct(self, input_ids):
        x = self.embedding(input_ids) + self.position
        x = self.encoder(x)
        return self.classifier(self.pool(x, 1))
