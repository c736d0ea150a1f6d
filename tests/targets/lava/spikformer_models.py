"""A Spikformer SSA block as its users write it (Zhou et al. 2023, the published ``SSA`` / ``MLP`` modules),
on a ``(T, B, N, D)`` token tensor, with SpikingJelly's multi-step LIF (``MultiStepLIFNode`` is
``neuron.LIFNode(step_mode="m")``): q, k, v each a token-wise ``nn.Linear`` + ``nn.BatchNorm1d`` + LIF,
``attn = q @ k.transpose(-2, -1) * 0.125``, ``x = attn @ v``, ``.contiguous()``, a Linear projection and a
``.mean(2)`` head over the tokens. Loaded by path (``spikformer_models.py:factory``); every factory is argument-free
and deterministic, with weights and BatchNorm statistics set so that every LIF fires and rests on binary inputs.
"""
import torch
from torch import nn

T, N, D, HEADS, CLASSES = 4, 6, 8, 2, 5


def _lif(threshold=1.0, soft=False):
    from spikingjelly.activation_based import neuron
    return neuron.LIFNode(tau=2.0, v_threshold=threshold, detach_reset=True, step_mode="m",
                          v_reset=None if soft else 0.0)


class LinearBNLIF(nn.Module):
    """Spikformer's ``x_linear`` -> ``x_bn`` -> ``x_lif`` on ``(T, B, N, C)``: BatchNorm1d over the channels."""

    def __init__(self, d_in, d_out, threshold=1.0, soft=False):
        super().__init__()
        self.linear, self.bn, self.lif = nn.Linear(d_in, d_out), nn.BatchNorm1d(d_out), _lif(threshold, soft)

    def forward(self, x):
        t, b, n, _ = x.shape
        y = self.linear(x.flatten(0, 1))                      # (T B, N, C): the same Linear on every token
        y = self.bn(y.transpose(-1, -2)).transpose(-1, -2).reshape(t, b, n, -1).contiguous()
        return self.lif(y)


class SSA(nn.Module):
    def __init__(self, dim=D, heads=HEADS, soft=False):
        super().__init__()
        self.heads, self.scale = heads, 0.125
        self.q, self.k, self.v = (LinearBNLIF(dim, dim, soft=soft) for _ in range(3))
        self.attn_lif = _lif(0.25, soft)
        self.proj = LinearBNLIF(dim, dim, soft=soft)

    def _split(self, x):   # (T, B, N, C) -> (T, B, heads, N, C / heads)
        t, b, n, c = x.shape
        return x.reshape(t, b, n, self.heads, c // self.heads).permute(0, 1, 3, 2, 4).contiguous()

    def forward(self, x):
        t, b, n, c = x.shape
        q, k, v = self._split(self.q(x)), self._split(self.k(x)), self._split(self.v(x))
        attn = q @ k.transpose(-2, -1) * self.scale
        x = attn @ v
        x = x.transpose(2, 3).reshape(t, b, n, c).contiguous()
        return self.proj(self.attn_lif(x))


class Spikformer(nn.Module):
    """One SSA block and Spikformer's head: ``x.mean(2)`` over the tokens, then a Linear classifier."""

    def __init__(self, soft=False):
        super().__init__()
        self.attn = SSA(soft=soft)
        self.head = nn.Linear(D, CLASSES)

    def forward(self, x):
        x = self.attn(x)
        return self.head(x.mean(2))


def _init(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Linear):
                m.weight.copy_((torch.rand(m.weight.shape, generator=g) * 2 - 0.7) * 2.5 / m.in_features ** 0.5)
                m.bias.copy_((torch.rand(m.bias.shape, generator=g) * 2 - 1) * 0.2)
            elif isinstance(m, nn.BatchNorm1d):
                m.running_mean.copy_((torch.rand(m.running_mean.shape, generator=g) - 0.5) * 0.4)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) * 0.5 + 0.75)
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) * 0.6 + 0.8)
                m.bias.copy_((torch.rand(m.bias.shape, generator=g) - 0.3) * 0.5)
    return model.eval()


def _lively(model):
    """The projection's BatchNorm shifted up: the sparse attention spikes still drive it."""
    with torch.no_grad():
        model.attn.proj.bn.bias.add_(0.9)
    return model


def spikformer():
    """SpikingJelly's default hard reset (to 0)."""
    torch.manual_seed(0)
    return _lively(_init(Spikformer(), 1))


def spikformer_soft():
    """``v_reset=None``: SpikingJelly's soft (subtract) reset, as several Spikformer variants train."""
    torch.manual_seed(0)
    return _lively(_init(Spikformer(soft=True), 1))


def token_spikes(steps=T, batch=2, seed=0):
    """Binary token inputs ``(T, B, N, D)``."""
    import numpy as np
    return (np.random.default_rng(seed).random((steps, batch, N, D)) < 0.5).astype(np.float64)
