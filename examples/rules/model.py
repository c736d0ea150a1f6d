"""A rules example: one small network holding every pattern a pass rewrites or must refuse.

The trained examples exercise what their architectures need; this one exists so that the runtime checks
of `spikec compile` (not only the unit tests) see every rule of every pass at least once: a BN before a
Heaviside neuron with negative gammas, a BN before an unpadded conv (folded) and before a padded one
(refused), a BNTT whose scale is constant and whose shift varies, RepConv units with biased branch
convs, with unpadded (uncentred) branches, with an average pool that excludes padding, and with a bias
between a 1x1 and a 3x3 conv (all three refused), and spike attention where ``Q (K^T V)`` is the cheaper
order. Weights are seeded, BatchNorm statistics set, no training: what matters is that each rule runs.
"""
import torch
from torch import nn

import spikec.nn as snn

T, SIDE = 4, 8


def _bn(c: int, seed: int, negative: bool = False) -> nn.BatchNorm2d:
    g = torch.Generator().manual_seed(seed)
    bn = nn.BatchNorm2d(c)
    with torch.no_grad():
        bn.weight.copy_(torch.rand(c, generator=g) + 0.5)
        if negative:
            bn.weight[::2] *= -1                       # every other channel flips its comparison
        bn.bias.copy_(torch.randn(c, generator=g) * 0.3)
        bn.running_mean.copy_(torch.randn(c, generator=g) * 0.3)
        bn.running_var.copy_(torch.rand(c, generator=g) + 0.5)
    return bn.eval()


def _td(*modules):
    return snn.TimeDistributed(*modules)


class Branches(nn.Module):
    """An addition tree of branches on one input, as a RepConv-style unit is written by hand."""

    def __init__(self, *branches):
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, x):
        out = self.branches[0](x)
        for b in self.branches[1:]:
            out = out + b(x)
        return out


class SpikeAttention(nn.Module):
    """Softmax-free attention over the pixels of a map, (Q K^T) V: with many tokens and a small head
    (N > d) ``Q (K^T V)`` is cheaper and the pass re-associates; with few tokens and a wide head it keeps
    the order; with ``shared`` the product Q K^T is also read by a second product, so it must stay."""

    def __init__(self, c: int = 4, d: int = 2, shared: bool = False):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(c, d), nn.Linear(c, d), nn.Linear(c, d)
        self.q_spike, self.k_spike, self.v_spike = (snn.LIF(beta=0.5, threshold=0.25) for _ in range(3))
        self.shared = shared

    def forward(self, x):
        t, b, c, h, w = x.shape
        tokens = x.reshape(t, b, c, h * w).transpose(-2, -1)          # [T, B, N, C]
        q, k, v = self.q_spike(self.q(tokens)), self.k_spike(self.k(tokens)), self.v_spike(self.v(tokens))
        scores = q @ k.transpose(-2, -1)
        out = scores @ v                                              # [T, B, N, d], integer valued
        return out + scores @ q if self.shared else out


class Rules(nn.Module):
    input_shape, steps = (1, SIDE, SIDE), T

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        c = 4
        # BN -> Heaviside (a LIF with beta = 0), gammas of both signs
        self.stem = _td(nn.Conv2d(1, c, 3, padding=1), _bn(c, 1, negative=True))
        self.heaviside = snn.LIF(beta=0.0, threshold=0.1)
        # BN before an unpadded conv (folds into it) and before a padded one (refused: padding moves)
        self.pre_unpadded = _td(_bn(c, 2), nn.Conv2d(c, c, 1))
        self.lif_a = snn.LIF(beta=0.5, threshold=0.5)
        self.pre_padded = _td(_bn(c, 3), nn.Conv2d(c, c, 3, padding=1))
        self.lif_b = snn.LIF(beta=0.5, threshold=0.5)
        # BNTT with one scale at every step and a different shift at each: a bias schedule
        self.conv_t = _td(nn.Conv2d(c, c, 3, padding=1))
        self.bntt = snn.BNTT(c, T)
        with torch.no_grad():   # weight and running_var the same at every step, so the scale is constant
            self.bntt.weight.copy_((torch.rand(1, c) + 0.5).repeat(T, 1))
            self.bntt.running_var.copy_((torch.rand(1, c) + 0.5).repeat(T, 1))
            self.bntt.bias.copy_(torch.randn(T, c) * 0.3)
            self.bntt.running_mean.copy_(torch.randn(T, c) * 0.2)
        self.lif_c = snn.LIF(beta=0.5, threshold=0.5, reset="zero")
        # RepConv-style units: biased branch convs (fused), and three patterns that must be refused
        self.biased = Branches(_td(nn.Conv2d(c, c, 3, padding=1), _bn(c, 4)), _td(nn.Conv2d(c, c, 1), _bn(c, 5)))
        self.lif_d = snn.LIF(beta=0.5, threshold=0.5)
        self.uncentred = Branches(_td(nn.Conv2d(c, c, 3)), _td(nn.Conv2d(c, c, 3, bias=False)))
        self.lif_e = snn.LIF(beta=0.5, threshold=0.5)
        self.no_pad_count = Branches(_td(nn.Conv2d(c, c, 3, padding=1)),
                                     _td(nn.AvgPool2d(3, 1, 1, count_include_pad=False)))
        self.lif_f = snn.LIF(beta=0.5, threshold=0.5)
        self.bias_between = Branches(_td(nn.Conv2d(c, c, 3, padding=1)),
                                     _td(nn.Conv2d(c, c, 1, bias=True), nn.Conv2d(c, c, 3, padding=1, bias=False)))
        self.lif_g = snn.LIF(beta=0.5, threshold=0.5)
        self.attention = SpikeAttention(c)                           # N = 64 > d = 2: re-associated
        self.attention_shared = SpikeAttention(c, shared=True)        # Q K^T read twice: left alone
        self.pool4 = _td(nn.AvgPool2d(4))
        self.attention_wide = SpikeAttention(c, d=8)                  # N = 4 < d = 8: pairwise stays
        # BN after a pool (no conv to fold into) before a Heaviside: the sign-aware threshold rule
        self.pool2 = _td(nn.AvgPool2d(2), _bn(c, 6, negative=True))
        self.heaviside_pooled = snn.LIF(beta=0.0, threshold=0.05)
        self.head_maps = _td(nn.Flatten(), nn.Linear(c * (SIDE - 2) ** 2, 10))
        self.head_tokens = _td(nn.Flatten(), nn.Linear(2 * SIDE * SIDE, 10))
        self.head_shared = _td(nn.Flatten(), nn.Linear(2 * SIDE * SIDE, 10))
        self.head_wide = _td(nn.Flatten(), nn.Linear(4 * 8, 10))
        self.head_pooled = _td(nn.Flatten(), nn.Linear(c * (SIDE // 2) ** 2, 10))

    def forward(self, x):
        s = self.heaviside(self.stem(x))
        s = self.lif_a(self.pre_unpadded(s))
        s = self.lif_b(self.pre_padded(s))
        s = self.lif_c(self.bntt(self.conv_t(s)))
        s = self.lif_d(self.biased(s))
        s = self.lif_f(self.no_pad_count(s))
        s = self.lif_g(self.bias_between(s))
        attended = self.attention(s)                                   # [T, B, 64, 2]
        small = self.lif_e(self.uncentred(s))                          # [T, B, 4, 6, 6]
        shared = self.attention_shared(s)
        wide = self.attention_wide(self.pool4(s))                      # 4 tokens of a 2x2 map
        pooled = self.heaviside_pooled(self.pool2(s))
        return (self.head_maps(small) + self.head_tokens(attended) + self.head_shared(shared)
                + self.head_wide(wide) + self.head_pooled(pooled))


def rules() -> Rules:
    return Rules().eval()
