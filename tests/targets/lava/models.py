"""Seeded random spiking networks for the Lava target tests (loaded by path: ``models.py:factory``).

Every factory is argument-free and deterministic. They cover: dense and conv, hard and soft reset,
per-channel thresholds, leaks and biases, mixed-sign and single-sign weights, non-square inputs and
kernels (to catch (W, H) transpositions), strides, padding, dilation, groups, average pools folded
before and after a conv and before a linear, read-out heads and spike outputs; integer-firing neurons
(round and floor, several D), max pooling over spikes, residual sums of streams from different depths,
TDM before a conv (the dual kernel's Delay(1)) and a Delay(2) stream, SiLIF and CSiLIF with per-channel
trained-looking parameters, and host partitions (DS-MPA reading a membrane, delayed spikes and a conv
sum; per-time-step BN), also on a sub-step schedule. ``with_*`` factories are not mappable.
"""
import torch
from torch import nn

import spikec.nn as snn


def _lif(c, seed, reset, per_channel=True, leak=True, bias=True):
    g = torch.Generator().manual_seed(seed)
    rnd = lambda lo, hi: lo + (hi - lo) * torch.rand(c, generator=g, dtype=torch.float64)
    return snn.LIF(beta=rnd(0.6, 1.0) if (leak and per_channel) else (0.875 if leak else 1.0),
                   threshold=rnd(0.5, 1.5) if per_channel else 1.0,
                   bias=rnd(-0.05, 0.08) if bias else 0.0, alpha=1.0, reset=reset)


def _init(model, seed, gain=1.0, positive=()):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            fan = p[0].numel() if p.dim() > 1 else 1
            v = (torch.rand(p.shape, generator=g) * 2 - 1) * gain * (3.0 / fan) ** 0.5 * 1.7
            if any(name.startswith(k) for k in positive):
                v = v.abs()
            p.copy_(v)
    return model


class Seq(nn.Module):
    def __init__(self, *mods, input_shape, steps):
        super().__init__()
        self.layers = nn.ModuleList(mods)
        self.input_shape, self.steps = input_shape, steps

    def forward(self, x):
        for m in self.layers:
            x = m(x)
        return x


TD = snn.TimeDistributed


def dense_soft():
    """Dense, soft reset, per-channel thresholds/leaks/biases, T = 32, read-out head."""
    m = Seq(TD(nn.Linear(20, 24)), _lif(24, 1, "subtract"),
            TD(nn.Linear(24, 16)), _lif(16, 2, "zero", per_channel=False),
            TD(nn.Linear(16, 5)), input_shape=(20,), steps=32)
    return _init(m, 11)


def dense_hard_excitatory():
    """Dense, hard reset everywhere (Lava's own LIF), one excitatory-only (single-sign) layer, spike output."""
    m = Seq(TD(nn.Linear(12, 10)), _lif(10, 3, "zero", per_channel=False),
            TD(nn.Linear(10, 7)), _lif(7, 4, "zero", per_channel=False, leak=False),
            input_shape=(12,), steps=20)
    return _init(m, 12, positive=("layers.0",))


def conv_mixed():
    """Non-square input and kernel, hard then soft reset, stride/padding/dilation/groups, flatten, head."""
    m = Seq(TD(nn.Conv2d(2, 6, (3, 2), padding=(1, 0))), _lif(6, 5, "zero", per_channel=False),
            TD(nn.Conv2d(6, 8, 3, stride=2, padding=1, dilation=(1, 2), groups=2)), _lif(8, 6, "subtract"),
            TD(nn.Flatten(), nn.Linear(8 * 5 * 2, 4)), input_shape=(2, 9, 7), steps=12)
    return _init(m, 13, gain=1.3)


def conv_pools():
    """Average pools folded after a conv, before a conv and before a linear; spike output."""
    m = Seq(TD(nn.Conv2d(1, 4, 3, padding=1), nn.AvgPool2d(2)), _lif(4, 7, "subtract"),
            TD(nn.AvgPool2d(2), nn.Conv2d(4, 6, (3, 1), padding=(1, 0))), _lif(6, 8, "zero"),
            TD(nn.AvgPool2d(2), nn.Flatten(), nn.Linear(6 * 1 * 2, 3)), _lif(3, 9, "zero", per_channel=False),
            input_shape=(1, 8, 16), steps=10)
    return _init(m, 14, gain=1.6)


def with_silif():
    """Not mappable: a SiLIF neuron."""
    return Seq(TD(nn.Linear(6, 4)), snn.SiLIF(4), input_shape=(6,), steps=4)


def with_maxpool():
    """Not mappable: a max pool over spikes."""
    return Seq(TD(nn.Conv2d(1, 2, 3, padding=1)), _lif(2, 1, "zero"), TD(nn.MaxPool2d(2), nn.Flatten(),
                                                                           nn.Linear(2 * 2 * 2, 3)),
               input_shape=(1, 4, 4), steps=4)


def conv_hard():
    """netx's vocabulary: conv and dense layers of hard-reset LIFs with scalar leak, spike output."""
    m = Seq(TD(nn.Conv2d(2, 4, 3, padding=1)), _lif(4, 10, "zero", per_channel=False),
            TD(nn.Conv2d(4, 6, (3, 2), stride=(2, 1))), _lif(6, 11, "zero", per_channel=False),
            TD(nn.Flatten(), nn.Linear(6 * 2 * 4, 5)), _lif(5, 12, "zero", per_channel=False),
            input_shape=(2, 6, 5), steps=10)
    return _init(m, 15, gain=1.5)


def dense_flat_image():
    """netx's vocabulary fed an image its first Dense reads flattened (the netx run flattens the input port)."""
    m = Seq(TD(nn.Flatten(), nn.Linear(2 * 4 * 3, 6)), _lif(6, 21, "zero", per_channel=False),
            TD(nn.Linear(6, 4)), _lif(4, 22, "zero", per_channel=False), input_shape=(2, 4, 3), steps=8)
    return _init(m, 23, gain=1.5)


# -- integer-firing neurons, delays, residual sums, SiLIF/CSiLIF, host partitions, max pooling -----------------
def _intfire(c, seed, d=4, rounding="round", leak=True):
    g = torch.Generator().manual_seed(seed)
    rnd = lambda lo, hi: lo + (hi - lo) * torch.rand(c, generator=g, dtype=torch.float64)
    return snn.IntFire(threshold=rnd(0.4, 1.2), max_spikes=d, beta=rnd(0.7, 1.0) if leak else 1.0,
                       rounding=rounding)


def intfire_dense():
    """Integer-firing neurons (D = 4 round, D = 3 floor) between dense layers, a LIF, a read-out head."""
    m = Seq(TD(nn.Linear(16, 12)), _intfire(12, 21),
            TD(nn.Linear(12, 10)), _intfire(10, 22, d=3, rounding="floor"),
            TD(nn.Linear(10, 8)), _lif(8, 23, "subtract"),
            TD(nn.Linear(8, 4)), input_shape=(16,), steps=8)
    return _init(m, 24, gain=1.2)


def intfire_conv_pool():
    """A conv integer neuron (D = 3) max-pooled (an OR of binary spikes once unrolled), then a conv LIF whose
    spikes are max-pooled too, flattened into an integer-neuron output (D = 2)."""
    m = Seq(TD(nn.Conv2d(2, 4, 3, padding=1)), _intfire(4, 31, d=3),
            TD(nn.MaxPool2d(2)), TD(nn.Conv2d(4, 6, (3, 2), padding=(1, 0))), _lif(6, 32, "zero"),
            TD(nn.MaxPool2d(2, stride=1), nn.Flatten(), nn.Linear(6 * 2 * 2, 5)), _intfire(5, 33, d=2),
            input_shape=(2, 6, 8), steps=6)
    return _init(m, 34, gain=1.5)


class _Residual(nn.Module):
    """``s3 = LIF(W3 s2 + W4 s1)``: two synaptic streams from populations at different depths into one neuron."""

    def __init__(self):
        super().__init__()
        self.fc1, self.lif1 = TD(nn.Linear(14, 12)), _lif(12, 41, "subtract")
        self.fc2, self.lif2 = TD(nn.Linear(12, 10)), _lif(10, 42, "zero")
        self.fc3, self.skip = TD(nn.Linear(10, 8)), TD(nn.Linear(12, 8))
        self.lif3 = _lif(8, 43, "subtract")
        self.input_shape, self.steps = (14,), 10

    def forward(self, x):
        s1 = self.lif1(self.fc1(x))
        s2 = self.lif2(self.fc2(s1))
        return self.lif3(self.fc3(s2) + self.skip(s1))


def residual_dense():
    return _init(_Residual(), 44)


class _TdmNet(nn.Module):
    """RIPE-style: conv -> LIF, then TDM -> conv -> LIF (tdm_dual_kernel: W_a x_t - W_b x_{t-1}, a Delay(1)),
    then a Delay(2) stream added to a dense layer; LIF neurons throughout."""

    def __init__(self):
        super().__init__()
        self.conv1, self.lif1 = TD(nn.Conv2d(2, 4, 3, padding=1)), _lif(4, 51, "zero", per_channel=False)
        self.tdm = snn.TDM(4, init=0.3)
        self.conv2, self.lif2 = TD(nn.Conv2d(4, 6, 3, stride=2, padding=1)), _lif(6, 52, "subtract")
        self.delay = snn.Delay(2)
        self.fc, self.fc_late = TD(nn.Flatten(), nn.Linear(6 * 3 * 4, 5)), TD(nn.Flatten(), nn.Linear(6 * 3 * 4, 5))
        self.lif3 = _lif(5, 53, "subtract")
        self.input_shape, self.steps = (2, 6, 7), 9

    def forward(self, x):
        s1 = self.lif1(self.conv1(x))
        s2 = self.lif2(self.conv2(self.tdm(s1)))
        return self.lif3(self.fc(s2) + self.fc_late(self.delay(s2)))


def tdm_dual_kernel_net():
    m = _init(_TdmNet(), 54, gain=1.4)
    with torch.no_grad():
        m.tdm.lam.copy_(torch.tensor([0.3, -0.2, 0.5, 0.1]))
    return m


def silif_csilif():
    """CSiLIF (complex resonator) then SiLIF conv layers, a dense SiLIF, a read-out head."""
    m = Seq(TD(nn.Conv2d(2, 4, 3, padding=1)), snn.CSiLIF(4, l_init=-1.5, omega_init=0.8, v_th_init=0.6),
            TD(nn.Conv2d(4, 6, 3, stride=2, padding=1)), snn.SiLIF(6, l_init=-1.0, v_th_init=0.8),
            TD(nn.Flatten(), nn.Linear(6 * 3 * 3, 7)), snn.SiLIF(7, l_init=-2.0, v_th_init=0.7),
            TD(nn.Linear(7, 3)), input_shape=(2, 6, 5), steps=10)
    _init(m, 61, gain=1.5)
    g = torch.Generator().manual_seed(62)
    with torch.no_grad():   # trained-looking neuron parameters: per channel, mixed
        for mod in m.layers:
            if isinstance(mod, (snn.SiLIF, snn.CSiLIF)):
                c = mod.b.numel()
                mod.l.copy_(-2.5 + 2 * torch.rand(c, generator=g))
                mod.b.copy_(0.5 + torch.rand(c, generator=g))
                mod.v_th.copy_(0.4 + 0.8 * torch.rand(c, generator=g))
                if isinstance(mod, snn.CSiLIF):
                    mod.omega.copy_(2 * torch.rand(c, generator=g) - 1)
                    mod.log_dt.copy_(0.5 * torch.rand(c, generator=g) - 0.25)
    return m


class _HostNet(nn.Module):
    """A RIPE stage in miniature: a SiLIF whose membrane, delayed spikes and a conv sum feed DS-MPA (host),
    whose output drives a LIF; a per-time-step BN (host) between a conv and a neuron; a head."""

    def __init__(self):
        super().__init__()
        self.conv1 = TD(nn.Conv2d(2, 4, 3, padding=1))
        self.n1 = snn.SiLIF(4, l_init=-1.0, v_th_init=0.5, return_membrane=True)
        self.conv2 = TD(nn.Conv2d(4, 4, 3, padding=1))
        self.delay = snn.Delay(1)
        self.attn = snn.DSMPA(4)
        self.n2 = _lif(4, 71, "subtract")
        self.conv3, self.bn = TD(nn.Conv2d(4, 5, 3, stride=2, padding=1)), snn.BNTT(5, 6)
        self.n3 = _lif(5, 72, "zero")
        self.head = TD(nn.Flatten(), nn.Linear(5 * 3 * 3, 3))
        self.input_shape, self.steps = (2, 6, 6), 6

    def forward(self, x):
        s1, u1 = self.n1(self.conv1(x))
        s2 = self.n2(self.attn(u1, self.delay(s1), self.conv2(s1)))
        return self.head(self.n3(self.bn(self.conv3(s2))))


def host_partition():
    m = _init(_HostNet(), 73, gain=1.5)
    g = torch.Generator().manual_seed(74)
    with torch.no_grad():
        m.attn.gamma.copy_(torch.rand(4, generator=g) + 0.5)
        m.bn.weight.copy_(0.5 + torch.rand(6, 5, generator=g))
        m.bn.bias.copy_(0.2 * torch.rand(6, 5, generator=g) - 0.1)
        m.bn.running_mean.copy_(0.3 * torch.rand(6, 5, generator=g))
        m.bn.running_var.copy_(0.5 + torch.rand(6, 5, generator=g))
    return m.eval()


def with_graded_maxpool():
    """Not mappable without unrolling: max pooling of integer (graded) spikes is a max, not an OR."""
    return Seq(TD(nn.Conv2d(1, 2, 3, padding=1)), _intfire(2, 81), TD(nn.MaxPool2d(2), nn.Flatten(),
                                                                      nn.Linear(2 * 2 * 2, 3)),
               input_shape=(1, 4, 4), steps=4)


class _Product(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = TD(nn.Linear(6, 4)), TD(nn.Linear(6, 4))
        self.la, self.lb = _lif(4, 82, "zero"), _lif(4, 83, "zero")
        self.input_shape, self.steps = (6,), 4

    def forward(self, x):
        return self.la(self.a(x)) * self.lb(self.b(x))


def with_spike_product():
    """A product of two spike tensors: AND neurons on the Lava target (products.py)."""
    return _Product()


class _IntHost(nn.Module):
    """Host partitions on a sub-step schedule: an integer neuron (D = 3, unrolled) whose membrane, delayed
    count and a conv sum feed DS-MPA; a per-time-step BN before a second integer neuron (D = 2); a head."""

    def __init__(self):
        super().__init__()
        self.conv1 = TD(nn.Conv2d(2, 4, 3, padding=1))
        self.n1 = snn.IntFire(threshold=0.5, max_spikes=3, beta=0.9, return_membrane=True)
        self.conv2 = TD(nn.Conv2d(4, 4, 3, padding=1))
        self.delay = snn.Delay(1)
        self.attn = snn.DSMPA(4)
        self.n2 = _lif(4, 91, "subtract")
        self.conv3, self.bn = TD(nn.Conv2d(4, 5, 3, stride=2, padding=1)), snn.BNTT(5, 6)
        self.n3 = _intfire(5, 92, d=2)
        self.head = TD(nn.Flatten(), nn.Linear(5 * 3 * 3, 3))
        self.input_shape, self.steps = (2, 6, 6), 6

    def forward(self, x):
        s1, u1 = self.n1(self.conv1(x))
        s2 = self.n2(self.attn(u1, self.delay(s1), self.conv2(s1)))
        return self.head(self.n3(self.bn(self.conv3(s2))))


def intfire_host():
    m = _init(_IntHost(), 93, gain=1.5)
    g = torch.Generator().manual_seed(94)
    with torch.no_grad():
        m.bn.running_var.copy_(0.5 + torch.rand(6, 5, generator=g))
        m.attn.gamma.copy_(torch.rand(4, generator=g) + 0.5)
    return m.eval()
