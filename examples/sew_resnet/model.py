"""SEW-ResNet-18 (Fang et al., "Deep Residual Learning in Spiking Neural Networks", NeurIPS 2021) written as
SpikingJelly users write it: ``layer.*`` wrappers, ``layer.SeqToANNContainer`` around each conv + BN pair,
``neuron.IFNode`` (hard reset to 0, threshold 1, the default), multi-step mode (``functional.set_step_mode(net,
'm')``, inputs ``[T, B, 3, H, W]``), and SEW basic blocks whose connect function is ADD (``out + identity``, so a
block's output is an integer spike count). The layout is ResNet-18's (64/128/256/512 channels, 2 blocks per
stage, 7x7 stride-2 stem, 3x3 max-pool, global average pool, a 1000-way ``layer.Linear``): 11,689,512 parameters
at 1000 classes. It is written here, not imported from SpikingJelly's model zoo, whose module imports torchvision
(which cannot be imported beside this torch).

Untrained: torch's initialisation after ``torch.manual_seed(seed)``, then each BatchNorm's affine parameters are
randomised (gamma ~ U(0.5, 1.5), beta ~ N(0.3, 0.2)) and its running statistics are calibrated on one random
binary event batch (``calibrate``): the statistics an untrained network has (mean 0, variance 1) would leave most
IF neurons after the stem silent or saturated, and a proof over silent neurons proves nothing. Calibrated, every
neuron layer fires at roughly 10-40 % (``tests/examples/test_sew_resnet.py`` checks that none is silent).

    spikec compile examples/sew_resnet/model.py:sew_resnet18 OUTDIR            # 3x224x224, T = 4, 1000 classes
    spikec compile examples/sew_resnet/model.py:small OUTDIR                   # 3x32x32, T = 2, 10 classes

``benchmarks/bench_sew_resnet.py`` times the compile of ``sew_resnet18`` against one float64 forward.
"""
import torch
from spikingjelly.activation_based import functional, layer, neuron
from torch import nn


def _conv_bn(c_in: int, c_out: int, kernel: int, stride: int) -> layer.SeqToANNContainer:
    return layer.SeqToANNContainer(nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, bias=False),
                                   nn.BatchNorm2d(c_out))


class SEWBasicBlock(nn.Module):
    """``out = sn2(bn2(conv2(sn1(bn1(conv1(x)))))) + identity``; with a stride or a width change the identity
    is ``downsample_sn(bn(conv1x1(x)))``, spikes as in SEW-ResNet (``connect_f='ADD'``)."""

    def __init__(self, c_in: int, c_out: int, stride: int = 1):
        super().__init__()
        self.conv1 = _conv_bn(c_in, c_out, 3, stride)
        self.sn1 = neuron.IFNode(detach_reset=True)
        self.conv2 = _conv_bn(c_out, c_out, 3, 1)
        self.sn2 = neuron.IFNode(detach_reset=True)
        self.downsample = _conv_bn(c_in, c_out, 1, stride) if stride != 1 or c_in != c_out else None
        self.downsample_sn = neuron.IFNode(detach_reset=True) if self.downsample is not None else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.sn1(self.conv1(x))
        out = self.sn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample_sn(self.downsample(x))
        return out + identity  # the ADD connect function


class SEWResNet18(nn.Module):
    def __init__(self, num_classes: int = 1000, image_size: int = 224, steps: int = 4):
        super().__init__()
        self.input_shape = (3, image_size, image_size)
        self.steps = steps
        self.conv1 = layer.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = layer.BatchNorm2d(64)
        self.sn1 = neuron.IFNode(detach_reset=True)
        self.maxpool = layer.MaxPool2d(kernel_size=3, stride=2, padding=1)
        widths, c_in = (64, 128, 256, 512), 64
        for k, c in enumerate(widths, start=1):
            stride = 1 if k == 1 else 2
            setattr(self, f"layer{k}", nn.Sequential(SEWBasicBlock(c_in, c, stride), SEWBasicBlock(c, c)))
            c_in = c
        self.avgpool = layer.AdaptiveAvgPool2d((1, 1))
        self.fc = layer.Linear(512, num_classes)
        functional.set_step_mode(self, "m")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.sn1(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = torch.flatten(self.avgpool(x), 2)  # [T, B, 512]: as SpikingJelly's sew_resnet does in step mode 'm'
        return self.fc(x)


@torch.no_grad()
def calibrate(model: SEWResNet18, batch: int = 2, seed: int = 1, p: float = 0.3) -> SEWResNet18:
    """Randomise every BatchNorm's affine parameters, then set its running statistics to the batch statistics of
    one random binary event input ``[T, batch, *input_shape]`` (density ``p``); returns the model in eval mode."""
    g = torch.Generator().manual_seed(seed)
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    for bn in bns:
        bn.weight.copy_(torch.rand(bn.num_features, generator=g) + 0.5)
        bn.bias.copy_(torch.randn(bn.num_features, generator=g) * 0.2 + 0.3)
        bn.reset_running_stats()
        bn.momentum = None  # a cumulative average: after one batch, exactly that batch's statistics
    x = (torch.rand(model.steps, batch, *model.input_shape, generator=g) < p).float()
    model.train()
    model(x)
    functional.reset_net(model)
    for bn in bns:
        bn.momentum = 0.1
    return model.eval()


def sew_resnet18(steps: int = 4, image_size: int = 224, num_classes: int = 1000, seed: int = 0) -> SEWResNet18:
    """SEW-ResNet-18 at ImageNet size (3x224x224, T = 4, 1000 classes), untrained, BN calibrated."""
    torch.manual_seed(seed)
    return calibrate(SEWResNet18(num_classes, image_size, steps))


def small(steps: int = 2, image_size: int = 32, num_classes: int = 10, seed: int = 0) -> SEWResNet18:
    """The same network on 3x32x32 inputs, T = 2, 10 classes (the tests' size)."""
    torch.manual_seed(seed)
    return calibrate(SEWResNet18(num_classes, image_size, steps))
