"""SDNA backbone (models.md section 2): a hierarchical spiking transformer with spike-driven neighborhood attention.

Layout ``[T, B, C, H, W]``; the output is ``[T, B, classes]`` logits per step (class score: mean over T,
done by the caller).

* Patch embedding (downsamples): ``TimeDistributed(conv 3x3, BN) -> IntFire(D=4) -> TimeDistributed(MaxPool2d(2))``.
* Stages of identical blocks, each with a 3x3 attention window and its own dilation:
  ``x <- x + CPE(SN(x))``   CPE = BN(depthwise conv 3x3)                       (positional encoding)
  ``x <- x + SDNA(SN(x))``  Q, K, V = IntFire(BN(1x1 conv(.))); window op (Pairwise or Linear); out = BN(1x1 conv(.))
  ``x <- x + SMLP(SN(x))``  1x1 conv -> BN -> IntFire -> 1x1 conv -> BN
  Between stages of different width: ``SN -> TimeDistributed(conv 3x3, BN, MaxPool2d(2))``.
* Head: ``SN -> TimeDistributed(AdaptiveAvgPool2d(1), Flatten, Linear(C, classes))``.

Design choice (membrane shortcut): the residual stream ``x`` is real-valued -- there is no neuron on the
shortcut, the additions are plain sums of branch outputs -- and every branch *starts* with its own
integer-firing neuron ``SN`` on ``x`` (D = 4). So every convolution and every window op reads an integer spike
tensor (values 0..4; the compiler sees integer kind, ceiling 4), except: the stem convolution (it reads
the raw input: pixel intensities or event counts); the attention output projection, which reads the window
op's output -- ``Q * G``, integer with ceiling 16, for Linear; multiples of 1/9 (real) for Pairwise,
by definition of the window ops; and the classifier ``Linear`` after average pooling.

``SN`` is the integer-firing neuron of semantics.md 1.2. Static models: ``T = 1``, ``beta = alpha = 1``. Event
models: the leaky form ``beta = 1 - 1/tau``, ``alpha = 1 - beta`` with ``tau = 1.5`` (semantics.md 1.1), on every
neuron, and a channel-wise gate BN before the gate neuron of the window op.

Pairwise and Linear SDNA share every parameter (same state_dict keys): the factories ``static_pairwise`` /
``static_linear`` load one checkpoint (``static.pt``), ``event_pairwise`` / ``event_linear`` another (``event.pt``).
The checkpoints were trained with the Linear form; Pairwise is a different function, so its accuracy
with those weights is lower (see train.py's report).

The compiler CLI loads this file by path (``model.py:static_linear``): it imports only ``torch`` and ``spikec``.
Converters for the SDNA modules: ``import spikec.frontend.sdna`` (done below).
"""
from torch import nn

import spikec.frontend.sdna  # noqa: F401  (registers the SDNA converters with the frontend)
import spikec.nn as snn
from spikec.nn.sdna import SDNALinear, SDNAPairwise

TAU = 1.5


def neuron_kwargs(leaky: bool, tau: float = TAU) -> dict:
    """Integer-firing neuron parameters: IF for static models, the leaky SDNA form for event models."""
    if not leaky:
        return {"beta": 1.0, "alpha": 1.0}
    beta = 1.0 - 1.0 / tau
    return {"beta": beta, "alpha": 1.0 - beta}


def conv_bn(c_in, c_out, kernel=1, groups=1, *extra):
    return snn.TimeDistributed(nn.Conv2d(c_in, c_out, kernel, padding=kernel // 2, groups=groups, bias=False),
                               nn.BatchNorm2d(c_out), *extra)


class CPE(nn.Module):
    """``BN(depthwise conv 3x3(SN(x)))``."""

    def __init__(self, c, sn):
        super().__init__()
        self.sn = sn()
        self.conv = conv_bn(c, c, 3, c)

    def forward(self, x):
        return self.conv(self.sn(x))


class SDNABranch(nn.Module):
    """``BN(1x1 conv(window_op(Q, K, V)))`` with ``Q, K, V = SN(BN(1x1 conv(SN(x))))``."""

    def __init__(self, c, sn, window_cls, dilation, gate_bn: bool, gate_threshold: float, leaky: bool,
                 kernel_size=3):
        super().__init__()
        self.sn = sn()
        self.q, self.k, self.v = conv_bn(c, c), conv_bn(c, c), conv_bn(c, c)
        self.q_sn, self.k_sn, self.v_sn = sn(), sn(), sn()
        self.attn = window_cls(kernel_size, dilation, threshold=gate_threshold, max_spikes=4,
                               gate_bn=c if gate_bn else None, **neuron_kwargs(leaky))
        self.proj = conv_bn(c, c)

    def forward(self, x):
        s = self.sn(x)
        return self.proj(self.attn(self.q_sn(self.q(s)), self.k_sn(self.k(s)), self.v_sn(self.v(s))))


class SMLP(nn.Module):
    """``BN(1x1 conv(SN(BN(1x1 conv(SN(x))))))``."""

    def __init__(self, c, sn, ratio):
        super().__init__()
        self.sn = sn()
        self.fc1 = conv_bn(c, c * ratio)
        self.sn1 = sn()
        self.fc2 = conv_bn(c * ratio, c)

    def forward(self, x):
        return self.fc2(self.sn1(self.fc1(self.sn(x))))


class Block(nn.Module):
    def __init__(self, c, sn, window_cls, dilation, gate_bn, gate_threshold, leaky, mlp_ratio):
        super().__init__()
        self.cpe = CPE(c, sn)
        self.sdna = SDNABranch(c, sn, window_cls, dilation, gate_bn, gate_threshold, leaky)
        self.mlp = SMLP(c, sn, mlp_ratio)

    def forward(self, x):
        x = x + self.cpe(x)
        x = x + self.sdna(x)
        return x + self.mlp(x)


class Downsample(nn.Module):
    """Between stages: ``MaxPool2d(2)(BN(conv 3x3(SN(x))))``; keeps the stream real."""

    def __init__(self, c_in, c_out, sn):
        super().__init__()
        self.sn = sn()
        self.conv = conv_bn(c_in, c_out, 3, 1, nn.MaxPool2d(2))

    def forward(self, x):
        return self.conv(self.sn(x))


class SDNABackbone(nn.Module):
    """``window="linear" | "pairwise"``; ``channels``, ``depths`` and ``dilations`` per stage (3x3 windows)."""

    def __init__(self, in_channels=1, input_hw=(16, 16), steps=1, classes=10, channels=(16, 32), depths=(1, 1),
                 dilations=(1, 2), window="linear", leaky=False, gate_bn=False, gate_threshold=1.0,
                 threshold=1.0, mlp_ratio=2):
        super().__init__()
        if window not in ("linear", "pairwise"):
            raise ValueError(f"window must be 'linear' or 'pairwise', got {window!r}")
        if not (len(channels) == len(depths) == len(dilations)):
            raise ValueError("channels, depths and dilations need one entry per stage")
        self.input_shape = (in_channels, *input_hw)
        self.steps = steps
        window_cls = SDNALinear if window == "linear" else SDNAPairwise
        kw = neuron_kwargs(leaky)
        sn = lambda: snn.IntFire(threshold=threshold, max_spikes=4, **kw)
        self.embed = conv_bn(in_channels, channels[0], 3)
        self.embed_sn = sn()
        self.embed_pool = snn.TimeDistributed(nn.MaxPool2d(2))
        stages, c_prev = [], channels[0]
        for i, (c, depth, dilation) in enumerate(zip(channels, depths, dilations)):
            layers = [Downsample(c_prev, c, sn)] if c != c_prev else []
            layers += [Block(c, sn, window_cls, dilation, gate_bn, gate_threshold, leaky, mlp_ratio) for _ in range(depth)]
            stages.append(nn.Sequential(*layers))
            c_prev = c
        self.stages = nn.Sequential(*stages)
        self.head_sn = sn()
        self.head = snn.TimeDistributed(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c_prev, classes))

    def forward(self, x):
        x = self.embed_pool(self.embed_sn(self.embed(x)))
        x = self.stages(x)
        return self.head(self.head_sn(x))


STATIC = dict(in_channels=1, input_hw=(16, 16), steps=1, classes=10, channels=(16, 32), depths=(1, 1),
              dilations=(1, 2), leaky=False, gate_bn=False)
EVENT = dict(in_channels=2, input_hw=(16, 16), steps=4, classes=4, channels=(16, 32), depths=(1, 1),
             dilations=(1, 2), leaky=True, gate_bn=True)


def static_linear() -> SDNABackbone:
    """Digits upscaled to 16x16 (pixel values in [0, 1]), T = 1, 10 classes, Linear SDNA. Checkpoint: static.pt."""
    return SDNABackbone(window="linear", **STATIC)


def static_pairwise() -> SDNABackbone:
    """As ``static_linear`` with Pairwise SDNA; loads the same static.pt."""
    return SDNABackbone(window="pairwise", **STATIC)


def event_linear() -> SDNABackbone:
    """Synthetic moving-bar events 2x16x16, T = 4, 4 classes, leaky neurons (tau = 1.5), gate BN. Checkpoint: event.pt."""
    return SDNABackbone(window="linear", **EVENT)


def event_pairwise() -> SDNABackbone:
    """As ``event_linear`` with Pairwise SDNA; loads the same event.pt."""
    return SDNABackbone(window="pairwise", **EVENT)
