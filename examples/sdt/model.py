"""Spike-driven Transformer (models.md section 3) on 8x8 scikit-learn digits, T = 4 (static input repeated).

Patch splitting: conv -> BN -> spike, max-pool to downsample (no strided convs), then a 3x3 conv -> BN
embedding (the published relative position embedding) that makes the residual stream real-valued.
Blocks with membrane shortcuts: every branch starts with a spike of the real stream,
``x <- x + SDSA(SN(x))``, ``x <- x + MLP(SN(x))``. SDSA: per head ``Q, K, V = SN(BN(Linear(.)))``,
``out = scale * (Q K^T) V`` written in the pairwise order (as the published code does; the compiler
reassociates it), no softmax, then Linear -> BN. MLP: Linear -> BN -> SN -> Linear -> BN -> SN.
Token-wise Linear + BN over channels is written as 1x1 Conv2d + BatchNorm2d on the (C, H, W) token
grid, which is the same function. SN is the stateless "BN then spike at 0": ``[x >= 0]``
(``spikec.nn.LIF(beta=0, threshold=0)``).
"""
from torch import nn

import spikec.nn as snn


def spike():
    return snn.LIF(beta=0.0, threshold=0.0)


def conv_bn(c_in, c_out):
    return snn.TimeDistributed(nn.Conv2d(c_in, c_out, 1, bias=False), nn.BatchNorm2d(c_out))


class SDSA(nn.Module):
    def __init__(self, dim: int, heads: int, hw: tuple[int, int]):
        super().__init__()
        self.heads, self.head_dim, self.hw = heads, dim // heads, hw
        self.scale = self.head_dim ** -0.5
        self.q, self.k, self.v = conv_bn(dim, dim), conv_bn(dim, dim), conv_bn(dim, dim)
        self.q_spike, self.k_spike, self.v_spike = spike(), spike(), spike()
        self.proj = conv_bn(dim, dim)

    def _heads(self, x):  # [T, B, C, H, W] -> [T, B, heads, N, head_dim]
        n = self.hw[0] * self.hw[1]
        return x.reshape(x.shape[0], x.shape[1], self.heads, self.head_dim, n).transpose(-1, -2)

    def forward(self, x):
        q = self._heads(self.q_spike(self.q(x)))
        k = self._heads(self.k_spike(self.k(x)))
        v = self._heads(self.v_spike(self.v(x)))
        attn = (q @ k.transpose(-2, -1)) @ v            # [T, B, heads, N, head_dim], integer valued
        out = attn * self.scale
        out = out.transpose(-1, -2).reshape(x.shape[0], x.shape[1], self.heads * self.head_dim, *self.hw)
        return self.proj(out)


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1, self.spike1 = conv_bn(dim, hidden), spike()
        self.fc2, self.spike2 = conv_bn(hidden, dim), spike()

    def forward(self, x):
        return self.spike2(self.fc2(self.spike1(self.fc1(x))))


class Block(nn.Module):
    def __init__(self, dim, heads, hw, mlp_ratio=2):
        super().__init__()
        self.attn_spike, self.attn = spike(), SDSA(dim, heads, hw)
        self.mlp_spike, self.mlp = spike(), MLP(dim, dim * mlp_ratio)

    def forward(self, x):
        x = x + self.attn(self.attn_spike(x))
        return x + self.mlp(self.mlp_spike(x))


class SpikeDrivenTransformer(nn.Module):
    def __init__(self, dim=16, heads=2, depth=1, classes=10, steps=4, input_hw=(8, 8)):
        super().__init__()
        self.input_shape, self.steps = (1, *input_hw), steps
        hw = (input_hw[0] // 2, input_hw[1] // 2)
        self.patch = snn.TimeDistributed(nn.Conv2d(1, dim, 3, padding=1, bias=False), nn.BatchNorm2d(dim))
        self.patch_spike = spike()
        self.pool = snn.TimeDistributed(nn.MaxPool2d(2))
        self.embed = snn.TimeDistributed(nn.Conv2d(dim, dim, 3, padding=1, bias=False), nn.BatchNorm2d(dim))
        self.blocks = nn.Sequential(*[Block(dim, heads, hw) for _ in range(depth)])
        self.head_spike = spike()
        self.head = snn.TimeDistributed(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(dim, classes))

    def forward(self, x):
        x = self.embed(self.pool(self.patch_spike(self.patch(x))))
        x = self.blocks(x)
        return self.head(self.head_spike(x))


def small() -> SpikeDrivenTransformer:
    """What is trained and shipped: dim 32, 4 heads (head_dim 8 < 16 tokens), one block, T = 4."""
    return SpikeDrivenTransformer(dim=32, heads=4)
