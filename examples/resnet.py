"""ResNet-like CNN whose head is a large MatMul: the data-parallel -> model-parallel boundary case.

Convolutions (small weights, big activations) prefer data parallelism; the classifier
(2048 x 65536 weights = 256 MiB in fp16, tiny activations) prefers model parallelism.

    strategist inspect examples/resnet.py:ResNetLike
"""
import mindspore as ms
from mindspore import Parameter, nn, ops
from mindspore.common.initializer import initializer

from common import Linear


class Conv(nn.Cell):
    """Conv2D (NCHW, 'same' padding) + ReLU."""

    def __init__(self, cin, cout, k, stride=1, relu=True, dtype=ms.float32):
        super().__init__()
        self.weight = Parameter(initializer("normal", (cout, cin, k, k), dtype), name="weight")
        self.conv = ops.Conv2D(cout, k, pad_mode="same", stride=stride)
        self.use_relu = relu
        self.relu = ops.ReLU()

    def construct(self, x):
        y = self.conv(x, self.weight)
        if self.use_relu:
            y = self.relu(y)
        return y


class Bottleneck(nn.Cell):
    """1x1 -> 3x3 -> 1x1 convolutions with a projected residual Add."""

    def __init__(self, cin, mid, cout, stride, dtype=ms.float32):
        super().__init__()
        self.conv1 = Conv(cin, mid, 1, dtype=dtype)
        self.conv2 = Conv(mid, mid, 3, stride=stride, dtype=dtype)
        self.conv3 = Conv(mid, cout, 1, relu=False, dtype=dtype)
        self.downsample = Conv(cin, cout, 1, stride=stride, relu=False, dtype=dtype)
        self.add = ops.Add()
        self.relu = ops.ReLU()

    def construct(self, x):
        return self.relu(self.add(self.conv3(self.conv2(self.conv1(x))), self.downsample(x)))


class ResNetLike(nn.Cell):
    """Stem conv, four bottleneck stages (256..2048 channels), global mean pool, big linear head."""

    def __init__(self, classes=65536, batch=64, image=224, dtype=ms.float32):
        super().__init__()
        self.stem = Conv(3, 64, 7, stride=4, dtype=dtype)
        self.layer1 = Bottleneck(64, 64, 256, 1, dtype=dtype)
        self.layer2 = Bottleneck(256, 128, 512, 2, dtype=dtype)
        self.layer3 = Bottleneck(512, 256, 1024, 2, dtype=dtype)
        self.layer4 = Bottleneck(1024, 512, 2048, 2, dtype=dtype)
        self.pool = ops.ReduceMean(keep_dims=False)
        self.head = Linear(2048, classes, dtype=dtype)
        self.example_inputs = {"x": f"float32[{batch},3,{image},{image}]"}

    def construct(self, x):
        y = self.layer4(self.layer3(self.layer2(self.layer1(self.stem(x)))))
        return self.head(self.pool(y, (2, 3)))
