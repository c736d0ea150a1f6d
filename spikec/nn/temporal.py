"""Stateful non-neuron ops over time: TDM, per-time-step BN (BNTT), Delay."""
import torch
import torch.nn.functional as F
from torch import nn

from spikec.nn._common import check_multistep, per_channel


class TDM(nn.Module):
    """``TDM(x)_t = (1 + lambda_c) x_t - lambda_c x_{t-1}``, ``x_0 = 0``; one lambda per input channel."""

    def __init__(self, channels: int, init=0.0):
        super().__init__()
        self.lam = nn.Parameter(torch.full((channels,), float(init)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_multistep(x, "TDM")
        lam = per_channel(self.lam, x[0])
        prev = torch.cat([torch.zeros_like(x[:1]), x[:-1]])
        return (1 + lam) * x - lam * prev


class BNTT(nn.Module):
    """Per-time-step BatchNorm: separate ``(gamma_t, beta_t, mu_t, var_t)`` for every step; 2*T*C parameters.

    Inference: ``y_t = x_t * a_t + (beta_t - mu_t * a_t)`` with ``a_t = gamma_t / sqrt(var_t + eps)``.
    """

    def __init__(self, num_features: int, steps: int, eps=1e-5, momentum=0.1):
        super().__init__()
        self.steps, self.eps, self.momentum = int(steps), float(eps), float(momentum)
        self.weight = nn.Parameter(torch.ones(steps, num_features))
        self.bias = nn.Parameter(torch.zeros(steps, num_features))
        self.register_buffer("running_mean", torch.zeros(steps, num_features))
        self.register_buffer("running_var", torch.ones(steps, num_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_multistep(x, "BNTT")
        if x.shape[0] != self.steps:
            raise ValueError(f"BNTT was built for T={self.steps} steps, got an input with T={x.shape[0]}")
        if self.training:
            return torch.stack([F.batch_norm(x[t], self.running_mean[t], self.running_var[t], self.weight[t],
                                             self.bias[t], True, self.momentum, self.eps)
                                for t in range(self.steps)])
        scale = self.weight / torch.sqrt(self.running_var + self.eps)
        shift = self.bias - self.running_mean * scale
        return torch.stack([x[t] * per_channel(scale[t], x[t]) + per_channel(shift[t], x[t])
                            for t in range(self.steps)])


class Delay(nn.Module):
    """``y_t = x_{t-k}``, zero for ``t <= k``."""

    def __init__(self, steps: int = 1):
        super().__init__()
        if int(steps) != steps or steps < 0:
            raise ValueError(f"Delay steps must be a non-negative integer, got {steps!r}")
        self.steps = int(steps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_multistep(x, "Delay", min_dim=2)
        k = min(self.steps, x.shape[0])
        return torch.cat([torch.zeros_like(x[:k]), x[: x.shape[0] - k]])

    def extra_repr(self) -> str:
        return f"steps={self.steps}"
