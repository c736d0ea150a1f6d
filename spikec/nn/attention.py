"""Dense attention ops that appear inside spiking models (semantics.md section 3). Not spike-driven.

``ds_mpa`` is the single definition used by both the module and the reference interpreter.
"""
import torch
import torch.nn.functional as F
from torch import nn

from spikec.nn._common import check_multistep


def _phi(z: torch.Tensor) -> torch.Tensor:
    return F.elu(z) + 1


def ds_mpa(u, s_prev, x, wq, wk, wv, gamma, eps: float):
    """DS-MPA per time step over the H*W tokens of ``[T, B, C, H, W]`` tensors.

    ``Q = W_Q U``, ``K = W_K U``, ``V = W_V S_prev``, ``A = phi(Q)(phi(K)^T V) / (phi(Q)(phi(K)^T 1) + eps)``,
    output ``X + gamma * (A * X)``. Weights are ``(C, C)`` (1x1 convs, no bias), ``gamma`` is ``(C,)``.
    """
    shape = x.shape
    flat = lambda z: z.flatten(0, 1).flatten(2)       # [T*B, C, L]
    uu, ss, xx = flat(u), flat(s_prev), flat(x)
    q, k, v = _phi(wq @ uu), _phi(wk @ uu), wv @ ss   # [T*B, C, L]
    kv = k @ v.transpose(1, 2)                         # [T*B, C_k, C_v] = phi(K)^T V
    num = kv.transpose(1, 2) @ q                       # [T*B, C_v, L]
    den = k.sum(2, keepdim=True).transpose(1, 2) @ q   # [T*B, 1, L]   = phi(Q) phi(K)^T 1
    attn = num / (den + eps)
    out = xx + gamma.view(1, -1, 1) * (attn * xx)
    return out.reshape(shape)


class DSMPA(nn.Module):
    """Dense per-step linear attention of RIPE-MambaSpike: ``forward(u, s_prev, x)``; ``3*C^2 + C`` parameters."""

    def __init__(self, channels: int, eps: float = 1e-6):
        super().__init__()
        scale = channels ** -0.5
        self.wq = nn.Parameter(torch.randn(channels, channels) * scale)
        self.wk = nn.Parameter(torch.randn(channels, channels) * scale)
        self.wv = nn.Parameter(torch.randn(channels, channels) * scale)
        self.gamma = nn.Parameter(torch.zeros(channels))
        self.eps = float(eps)

    def forward(self, u, s_prev, x):
        check_multistep(x, "DSMPA", min_dim=5)
        return ds_mpa(u, s_prev, x, self.wq, self.wk, self.wv, self.gamma, self.eps)
