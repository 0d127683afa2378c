"""Re-expression of MindSpore's UT tests/ut/python/parallel/test_auto_parallel_resnet_sharding_propagation2.py,
test_train_32k_8p: ResNet-50 (batch 32, 224x224, 32768 classes) with the head MatMul configured ((8,1),(1,1)),
followed by the test's SoftmaxCrossEntropyExpand loss (sparse labels via OneHot; ReduceMax ((8,1),),
Sub ((8,1),(1,1)) configured). auto_parallel, sharding_propagation, 8 devices,
set_algo_parameters(elementwise_op_strategy_follow=True), dataset strategy data_parallel (default).
The UT trains through Model(net, loss_fn, Momentum); here net + loss as one forward Cell (ResNet50WithLoss).
"""
import mindspore as ms
import mindspore.common.dtype as mstype
import mindspore.ops.functional as F
from mindspore import Tensor, nn, ops


def _conv(cin, cout, k, stride=1):
    return nn.Conv2d(cin, cout, kernel_size=k, stride=stride, padding=0, pad_mode="same", weight_init="normal")


def _bn(c, momentum=0.9):
    return nn.BatchNorm2d(c, momentum=momentum)


class _Bottleneck(nn.Cell):
    expansion = 4

    def __init__(self, cin, cout, stride=1):
        super().__init__()
        mid = cout // self.expansion
        self.conv1 = _conv(cin, mid, 1)
        self.bn1 = _bn(mid)
        self.conv2 = _conv(mid, mid, 3, stride)
        self.bn2 = _bn(mid)
        self.conv3 = _conv(mid, cout, 1)
        self.bn3 = _bn(cout)
        self.relu = ops.ReLU()
        self.downsample = cin != cout
        self.stride = stride
        if self.downsample:
            self.conv_down_sample = _conv(cin, cout, 1, stride)
            self.bn_down_sample = _bn(cout)
        elif stride != 1:
            self.maxpool_down = nn.MaxPool2d(kernel_size=1, stride=2, pad_mode="same")
        self.add = ops.Add()

    def construct(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample:
            identity = self.bn_down_sample(self.conv_down_sample(identity))
        elif self.stride != 1:
            identity = self.maxpool_down(identity)
        return self.relu(self.add(out, identity))


def _stage(n, cin, cout, stride):
    blocks = [_Bottleneck(cin, cout, 1)]
    for _ in range(1, n - 1):
        blocks.append(_Bottleneck(cout, cout, 1))
    blocks.append(_Bottleneck(cout, cout, stride))
    return nn.SequentialCell(blocks)


class _ResNet50(nn.Cell):
    def __init__(self, num_classes, matmul_stra, squeeze_stra=None):
        super().__init__()
        self.conv1 = _conv(3, 64, 7, 2)
        self.bn1 = _bn(64)
        self.relu = ops.ReLU()
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, pad_mode="same")
        self.layer1 = _stage(3, 64, 256, 2)
        self.layer2 = _stage(4, 256, 512, 2)
        self.layer3 = _stage(6, 512, 1024, 2)
        self.layer4 = _stage(3, 1024, 2048, 1)
        self.mean = ops.ReduceMean(keep_dims=True)
        self.end_point = nn.Dense(2048, num_classes, has_bias=True, weight_init="normal",
                                  bias_init="normal").add_flags_recursive(fp16=True)
        self.end_point.matmul.shard(matmul_stra)
        self.squeeze = ops.Squeeze().shard(squeeze_stra)

    def construct(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.end_point(self.squeeze(self.mean(x, (2, 3))))


class _SoftmaxCrossEntropyExpand(nn.Cell):
    def __init__(self):
        super().__init__()
        self.exp = ops.Exp()
        self.sum = ops.ReduceSum(keep_dims=True)
        self.onehot = ops.OneHot()
        self.on_value = Tensor(1.0, mstype.float32)
        self.off_value = Tensor(0.0, mstype.float32)
        self.div = ops.Div()
        self.log = ops.Log()
        self.sum_cross_entropy = ops.ReduceSum(keep_dims=False)
        self.mul = ops.Mul()
        self.mul2 = ops.Mul()
        self.mean = ops.ReduceMean(keep_dims=False).add_prim_attr("cross_batch", True)
        self.max = ops.ReduceMax(keep_dims=True).shard(((8, 1),))
        self.sub = ops.Sub().shard(((8, 1), (1, 1)))
        self.cast1 = ops.Cast()

    def construct(self, logit, label):
        logit = self.cast1(logit, mstype.float32)
        exp = self.exp(self.sub(logit, self.max(logit)))
        softmax = self.div(exp, self.sum(exp, -1))
        label = self.onehot(label, F.shape(logit)[1], self.on_value, self.off_value)
        loss = self.sum_cross_entropy(self.mul(self.log(softmax), label), -1)
        loss = self.mul2(F.scalar_to_tensor(-1.0), loss)
        return self.mean(loss, -1)


class ResNet50WithLoss(nn.Cell):
    def __init__(self, num_classes=32768, dev_num=8):
        super().__init__()
        self.net = _ResNet50(num_classes, ((dev_num, 1), (1, 1)))
        self.loss = _SoftmaxCrossEntropyExpand()
        self.example_inputs = {"x": "float32[32,3,224,224]", "label": "int32[32]"}

    def construct(self, x, label):
        return self.loss(self.net(x), label)
