"""Spiking neurons (semantics.md section 1). Each maps ``[T, B, C, ...]`` to spikes of the same shape.

The arithmetic is written out in the order the reference interpreter repeats it, so
that a float64 run of a module and of its IR node agree bit for bit.
"""
import torch
from torch import nn

from spikec.nn._common import as_param_tensor, check_multistep, per_channel
from spikec.nn.surrogate import heaviside, straight_through

RESETS = ("subtract", "zero")


def _result(module, spikes, membrane):
    """Spikes ``[T, B, ...]``; with ``return_membrane=True`` also the pre-reset membrane ``U``."""
    s = torch.stack(spikes)
    return (s, torch.stack(membrane)) if module.return_membrane else s
ROUNDINGS = ("round", "floor")


class LIF(nn.Module):
    """LIF family: ``U = beta*H + alpha*X + bias``, ``S = [U >= threshold]``, soft or hard reset.

    ``reset="subtract"``: ``H = U - threshold*S``; ``reset="zero"``: ``H = U*(1-S) + v_reset*S``.
    IF is ``beta=1``; the stateless "spike after BN" is ``beta=0, threshold=0``.
    Parameters are scalars or per-channel vectors (buffers: not trained).
    Every neuron here takes ``return_membrane=True`` to also return the pre-reset membrane ``U``.
    """

    def __init__(self, beta=1.0, threshold=1.0, alpha=1.0, bias=0.0, reset="subtract",
                 v_reset=0.0, surrogate_slope=5.0, return_membrane=False):
        super().__init__()
        self.return_membrane = return_membrane
        if reset not in RESETS:
            raise ValueError(f"LIF reset must be one of {RESETS}, got {reset!r}")
        for name, value in (("beta", beta), ("threshold", threshold), ("alpha", alpha),
                            ("bias", bias), ("v_reset", v_reset)):
            self.register_buffer(name, as_param_tensor(value, f"LIF {name}"))
        self.reset = reset
        self.surrogate_slope = surrogate_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_multistep(x, "LIF")
        beta, alpha, bias, theta, v_reset = (per_channel(p, x[0]) for p in
                                             (self.beta, self.alpha, self.bias, self.threshold, self.v_reset))
        h = torch.zeros_like(x[0])
        spikes, membrane = [], []
        for t in range(x.shape[0]):
            u = beta * h + alpha * x[t] + bias
            s = heaviside(u - theta, self.surrogate_slope)
            sd = s.detach()
            h = u - theta * sd if self.reset == "subtract" else u * (1 - sd) + v_reset * sd
            spikes.append(s)
            membrane.append(u)
        return _result(self, spikes, membrane)

    def extra_repr(self) -> str:
        return f"reset={self.reset!r}"


class IntFire(nn.Module):
    """Integer-firing neuron: ``S = clip(R(U/threshold), 0, max_spikes)``, soft reset.

    ``U = beta*H + alpha*X``; ``R`` is round-half-up (``floor(z + 0.5)``) or floor.
    Backward is straight-through on ``clip(U/threshold, 0, max_spikes)``.
    """

    def __init__(self, threshold=1.0, max_spikes=4, beta=1.0, alpha=1.0, rounding="round", return_membrane=False):
        super().__init__()
        self.return_membrane = return_membrane
        if rounding not in ROUNDINGS:
            raise ValueError(f"IntFire rounding must be one of {ROUNDINGS}, got {rounding!r}")
        if int(max_spikes) != max_spikes or max_spikes < 1:
            raise ValueError(f"IntFire max_spikes must be a positive integer, got {max_spikes!r}")
        for name, value in (("threshold", threshold), ("beta", beta), ("alpha", alpha)):
            self.register_buffer(name, as_param_tensor(value, f"IntFire {name}"))
        if (self.threshold <= 0).any():
            raise ValueError("IntFire threshold must be > 0")
        self.max_spikes = int(max_spikes)
        self.rounding = rounding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_multistep(x, "IntFire")
        beta, alpha, theta = (per_channel(p, x[0]) for p in (self.beta, self.alpha, self.threshold))
        h = torch.zeros_like(x[0])
        spikes, membrane = [], []
        for t in range(x.shape[0]):
            u = beta * h + alpha * x[t]
            z = u / theta
            r = torch.floor(z + 0.5) if self.rounding == "round" else torch.floor(z)
            q = torch.clamp(r.detach(), 0, self.max_spikes)
            h = u - theta * q
            spikes.append(straight_through(q, torch.clamp(z, 0, self.max_spikes)))
            membrane.append(u)
        return _result(self, spikes, membrane)

    def extra_repr(self) -> str:
        return f"max_spikes={self.max_spikes}, rounding={self.rounding!r}"


class SiLIF(nn.Module):
    """Real resonate-free SiLIF: ``u[t] = a (u[t-1] - kappa s[t-1]) + b x[t]``, ``a = exp(-exp(l))``.

    Trainable per channel: ``l``, ``b``, ``v_th`` (3 parameters per channel).
    """

    def __init__(self, channels: int, l_init=-1.0, b_init=1.0, v_th_init=1.0, kappa=0.5,
                 surrogate_slope=5.0, return_membrane=False):
        super().__init__()
        self.return_membrane = return_membrane
        self.l = nn.Parameter(torch.full((channels,), float(l_init)))
        self.b = nn.Parameter(torch.full((channels,), float(b_init)))
        self.v_th = nn.Parameter(torch.full((channels,), float(v_th_init)))
        self.kappa = float(kappa)
        self.surrogate_slope = surrogate_slope

    def decay(self) -> torch.Tensor:
        return torch.exp(-torch.exp(self.l))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_multistep(x, "SiLIF")
        a, b, v_th = (per_channel(p, x[0]) for p in (self.decay(), self.b, self.v_th))
        u = torch.zeros_like(x[0])
        s = torch.zeros_like(x[0])
        spikes, membrane = [], []
        for t in range(x.shape[0]):
            u = a * (u - self.kappa * s.detach()) + b * x[t]
            s = heaviside(u - v_th, self.surrogate_slope)
            spikes.append(s)
            membrane.append(u)
        return _result(self, spikes, membrane)


class CSiLIF(nn.Module):
    """Complex resonate-and-fire CSiLIF (semantics.md 1.3), written in real arithmetic.

    ``a = exp((-exp(l) + j omega) exp(log_dt))``; ``m[t] = a (m[t-1] - kappa s[t-1]) + b x[t]``;
    ``U = 2 Re(m)``; ``s = [U >= v_th]``. Trainable per channel: ``l, omega, log_dt, b, v_th``.
    """

    def __init__(self, channels: int, l_init=-1.0, omega_init=0.5, log_dt_init=0.0, b_init=1.0,
                 v_th_init=1.0, kappa=0.5, surrogate_slope=5.0, return_membrane=False):
        super().__init__()
        self.return_membrane = return_membrane
        self.l = nn.Parameter(torch.full((channels,), float(l_init)))
        self.omega = nn.Parameter(torch.full((channels,), float(omega_init)))
        self.log_dt = nn.Parameter(torch.full((channels,), float(log_dt_init)))
        self.b = nn.Parameter(torch.full((channels,), float(b_init)))
        self.v_th = nn.Parameter(torch.full((channels,), float(v_th_init)))
        self.kappa = float(kappa)
        self.surrogate_slope = surrogate_slope

    def decay(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Real and imaginary parts of ``a_c`` (|a_c| < 1 for every parameter value)."""
        dt = torch.exp(self.log_dt)
        r = torch.exp(-torch.exp(self.l) * dt)
        return r * torch.cos(self.omega * dt), r * torch.sin(self.omega * dt)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_multistep(x, "CSiLIF")
        a_re, a_im = self.decay()
        a_re, a_im, b, v_th = (per_channel(p, x[0]) for p in (a_re, a_im, self.b, self.v_th))
        m_re = torch.zeros_like(x[0])
        m_im = torch.zeros_like(x[0])
        s = torch.zeros_like(x[0])
        spikes, membrane = [], []
        for t in range(x.shape[0]):
            z_re = m_re - self.kappa * s.detach()
            m_re, m_im = a_re * z_re - a_im * m_im + b * x[t], a_re * m_im + a_im * z_re
            u = 2 * m_re
            s = heaviside(u - v_th, self.surrogate_slope)
            spikes.append(s)
            membrane.append(u)
        return _result(self, spikes, membrane)
