"""Seeded random spiking networks for the Lava target tests (loaded by path: ``models.py:factory``).

Every factory is argument-free and deterministic. They cover: dense and conv, hard and soft reset,
per-channel thresholds, leaks and biases, mixed-sign and single-sign weights, non-square inputs and
kernels (to catch (W, H) transpositions), strides, padding, dilation, groups, average pools folded
before and after a conv and before a linear, read-out heads and spike outputs.
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
