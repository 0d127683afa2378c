"""ResNet-50 on MindSpore's own layers: ``nn.Conv2d`` + ``nn.BatchNorm2d`` + ``nn.ReLU``, a 3x3
``nn.MaxPool2d`` after the stem, bottleneck stages (3, 4, 6, 3) with projection shortcuts, global
average pooling (``ReduceMean``) and an ``nn.Dense`` classifier.

``depth`` picks the blocks per stage: 50 -> (3, 4, 6, 3), 26 -> (2, 2, 2, 2), 14 -> (1, 1, 1, 1);
``width`` scales the channels (64 is ResNet-50's), so tests can build a small one.

    strategist inspect examples/resnet50.py:ResNet50
    strategist inspect examples/resnet50.py:ResNet50 --kwargs depth=14 width=16 image=64 batch=8
"""
import mindspore as ms
from mindspore import nn, ops

DEPTHS = {50: (3, 4, 6, 3), 26: (2, 2, 2, 2), 14: (1, 1, 1, 1)}


def conv_bn(cin, cout, k, stride=1, dtype=ms.float32):
    return nn.SequentialCell([
        nn.Conv2d(cin, cout, k, stride=stride, pad_mode="same", dtype=dtype),
        nn.BatchNorm2d(cout, dtype=dtype),
    ])


class Bottleneck(nn.Cell):
    """1x1 reduce -> 3x3 (stride) -> 1x1 expand, + (projected) shortcut, ReLU."""

    expansion = 4

    def __init__(self, cin, mid, stride=1, dtype=ms.float32):
        super().__init__()
        cout = mid * self.expansion
        self.conv1 = conv_bn(cin, mid, 1, dtype=dtype)
        self.conv2 = conv_bn(mid, mid, 3, stride, dtype=dtype)
        self.conv3 = conv_bn(mid, cout, 1, dtype=dtype)
        self.relu = nn.ReLU()
        self.downsample = conv_bn(cin, cout, 1, stride, dtype=dtype) if (stride != 1 or cin != cout) else None

    def construct(self, x):
        y = self.relu(self.conv1(x))
        y = self.relu(self.conv2(y))
        y = self.conv3(y)
        shortcut = self.downsample(x) if self.downsample is not None else x
        return self.relu(y + shortcut)


class ResNet50(nn.Cell):
    """images[B,3,I,I] -> logits[B, classes]."""

    def __init__(self, depth=50, width=64, classes=1000, batch=32, image=224, dtype=ms.float32):
        super().__init__()
        if depth not in DEPTHS:
            raise ValueError(f"depth must be one of {sorted(DEPTHS)}, got {depth}")
        self.stem = conv_bn(3, width, 7, 2, dtype=dtype)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, pad_mode="same")
        stages, cin = [], width
        for i, n in enumerate(DEPTHS[depth]):
            mid = width * 2 ** i
            blocks = []
            for j in range(n):
                blocks.append(Bottleneck(cin, mid, stride=2 if (j == 0 and i > 0) else 1, dtype=dtype))
                cin = mid * Bottleneck.expansion
            stages.append(nn.SequentialCell(blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.pool = ops.ReduceMean(keep_dims=False)
        self.fc = nn.Dense(cin, classes, dtype=dtype)
        self.example_inputs = {"images": f"float32[{batch},3,{image},{image}]"}

    def construct(self, images):
        x = self.maxpool(self.relu(self.stem(images)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.pool(x, (2, 3)))
