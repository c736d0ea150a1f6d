"""Spike-driven neighborhood attention (SDNA), passes.md "Spike-driven neighborhood attention (SDNA) lowering".

Both modules take integer spike tensors ``(q, k, v)`` laid out ``[T, B, C, H, W]`` and return ``[T, B, C, H, W]``.
``W(i)`` is the ``k x k`` window of pixel ``i`` (dilation allowed) with zero padding; ``SN`` is the
integer-firing neuron of semantics.md 1.2 (``U = beta*H + alpha*X``, ``S = clip(R(U/theta), 0, D)``,
``H = U - theta*S``), optionally preceded by a channel-wise "gate BN" (event models).

* Linear:   ``M_j = K_j * V_j``;  ``L_i = (1/k^2) sum_{j in W(i)} M_j``;  ``out_i = Q_i * SN(L_i)``.
* Pairwise: ``s_ij = Q_i * K_j``; ``a_ij = SN(s_ij)`` with one neuron state per (i, j, channel) pair;
  ``out_i = (1/k^2) sum_{j in W(i)} a_ij * V_j``.

The two are different functions (no rewrite turns one into the other) but share their parameters:
the gate BN (``gate_bn.*``) and the gate neuron (``gate.threshold``, ``gate.beta``, ``gate.alpha``),
so one ``state_dict`` loads into either.

The arithmetic lives in the pure functions below, written in the order the reference interpreter
repeats it: ``sdna_linear`` is exactly the chain of existing IR ops ``mul -> windowsum -> scale ->
[batchnorm] -> intfire -> mul``, and ``sdna_pairwise`` is called as-is by the ``sdna_pairwise`` IR
kernel (spikec/frontend/sdna.py), so a float64 run of a module and of its IR agree bit for bit.
"""
import torch
import torch.nn.functional as F
from torch import nn

from spikec.nn._common import check_multistep, per_channel
from spikec.nn.neurons import ROUNDINGS, IntFire
from spikec.nn.surrogate import straight_through


def _check_window(kernel_size: int, dilation: int, who: str) -> None:
    if int(kernel_size) != kernel_size or kernel_size % 2 != 1 or kernel_size < 1:
        raise ValueError(f"{who} needs an odd kernel_size >= 1, got {kernel_size!r}")
    if int(dilation) != dilation or dilation < 1:
        raise ValueError(f"{who} needs an integer dilation >= 1, got {dilation!r}")


def window_sum(x: torch.Tensor, kernel_size: int, dilation: int) -> torch.Tensor:
    """Box sum over the ``k x k`` dilated window, zero padding: ``[T, B, C, H, W]`` -> same.

    The same depthwise all-ones convolution as the interpreter's ``windowsum`` kernel.
    """
    t, b, c = x.shape[:3]
    w = torch.ones(c, 1, kernel_size, kernel_size, dtype=x.dtype, device=x.device)
    pad = dilation * (kernel_size - 1) // 2
    y = F.conv2d(x.flatten(0, 1), w, padding=pad, dilation=dilation, groups=c)
    return y.reshape(t, b, *y.shape[1:])


def window_scale(kernel_size: int) -> float:
    """The ``1/k^2`` of both SDNA forms, as the Python float the IR's ``scale`` node holds."""
    return 1.0 / (kernel_size * kernel_size)


def per_step(fn, x: torch.Tensor) -> torch.Tensor:
    """Apply a per-step op (the gate BN) to ``[T, B, ...]`` by merging T and B, as TimeDistributed does."""
    y = fn(x.flatten(0, 1))
    return y.reshape(x.shape[0], x.shape[1], *y.shape[1:])


def int_fire_steps(x: torch.Tensor, threshold, beta, alpha, max_spikes: int, rounding: str = "round",
                   grad: bool = False, margins: bool = False):
    """The integer-firing neuron of ``spikec.nn.IntFire`` over ``x`` ``[T, B, C, ...]``, one state per element.

    Returns ``(spikes, margins)``; ``margins`` (``|U/theta + offset - nearest integer| * theta``, as the
    interpreter's ``intfire`` kernel reports them) is None unless asked for. ``grad=True`` gives the
    straight-through gradient of ``IntFire`` (the forward values are the same).
    """
    beta, alpha, theta = (per_channel(p, x[0]) for p in (beta, alpha, threshold))
    h = torch.zeros_like(x[0])
    # without autograd the results go straight into preallocated tensors (no list + stack copy)
    spikes = [] if grad else torch.empty_like(x)
    margin = torch.empty_like(x) if margins else None
    for t in range(x.shape[0]):
        u = beta * h + alpha * x[t]
        z = u / theta
        r = torch.floor(z + 0.5) if rounding == "round" else torch.floor(z)
        q = torch.clamp(r.detach(), 0, max_spikes)
        h = u - theta * q
        if grad:
            spikes.append(straight_through(q, torch.clamp(z, 0, max_spikes)))
        else:
            spikes[t] = q
        if margins:
            zo = z + 0.5 if rounding == "round" else z
            frac = zo - torch.floor(zo)
            margin[t] = torch.minimum(frac, 1 - frac) * theta
    return (torch.stack(spikes) if grad else spikes), margin


def unfold_window(x: torch.Tensor, kernel_size: int, dilation: int) -> torch.Tensor:
    """``[N, C, H, W]`` -> ``[N, C, k*k, H*W]``: entry ``[n, c, j, i]`` is ``x`` at the j-th window
    position of pixel ``i`` (row-major over the window), 0 where the window leaves the image."""
    n, c, h, w = x.shape
    pad = dilation * (kernel_size - 1) // 2
    cols = F.unfold(x, kernel_size, dilation=dilation, padding=pad)   # [N, C*k*k, H*W], channel-major
    return cols.view(n, c, kernel_size * kernel_size, h * w)


def sdna_linear(q, k, v, kernel_size: int, dilation: int, gate, gate_bn=None) -> torch.Tensor:
    """Linear SDNA on ``[T, B, C, H, W]``: ``out = Q * SN([BN](window_sum(K * V) * (1/k^2)))``.

    ``gate`` maps ``[T, B, C, H, W]`` to integer spikes (an ``IntFire``); ``gate_bn`` (optional) is a
    per-step op on ``[N, C, H, W]``. Each line is one IR node: mul, windowsum, scale, batchnorm, intfire, mul.
    """
    m = k * v
    s = window_sum(m, kernel_size, dilation)
    l = s * window_scale(kernel_size) + 0.0          # the IR's scale node: x*a + b with b = 0
    if gate_bn is not None:
        l = per_step(gate_bn, l)
    return q * gate(l)


def sdna_pairwise(q, k, v, kernel_size: int, dilation: int, threshold, beta, alpha, max_spikes: int,
                  rounding: str = "round", gate_bn=None, grad: bool = False, margins: bool = False):
    """Pairwise SDNA on ``[T, B, C, H, W]``; returns ``(out, margin)``.

    ``s_ij = Q_i * K_j`` for the ``k*k`` window positions ``j`` of every pixel ``i`` (``K_j = 0`` outside the
    image); ``gate_bn`` (optional) maps ``[N, C, k*k, H*W]`` channel-wise (a BatchNorm2d or its inference
    form), applied to all steps at once so that training statistics are shared over ``t``; ``a_ij`` is
    an integer-firing neuron per (i, j, channel), stateful over ``t`` (``int_fire_steps``);
    ``out_i = (sum_j a_ij * V_j) * (1/k^2)``.

    ``margin`` (with ``margins=True``) is ``[T, B, C, H, W]``: the smallest firing margin among the pair
    neurons of the window whose ``V_j`` is non-zero (the only ones that reach the output); ``inf`` if none.
    """
    t, b, c, h, w = q.shape
    kk = kernel_size * kernel_size
    # s_ij = Q_i * K_j: [N, C, kk, HW] (the unfolded keys are a temporary, freed at once)
    s = q.reshape(t * b, c, 1, h * w) * unfold_window(k.flatten(0, 1), kernel_size, dilation)
    if gate_bn is not None:
        s = gate_bn(s)
    a, m = int_fire_steps(s.view(t, b, c, kk, h * w), threshold, beta, alpha, max_spikes, rounding,
                          grad=grad, margins=margins)
    del s
    values = unfold_window(v.flatten(0, 1), kernel_size, dilation).view(t, b, c, kk, h * w)
    if margins:
        m = torch.where(values != 0, m, torch.full_like(m, float("inf"))).amin(3).view(t, b, c, h, w)
    prod = a * values if grad else a.mul_(values)   # in place without autograd: same values, one buffer less
    del a, values
    out = prod.sum(3) * window_scale(kernel_size)
    return out.view(t, b, c, h, w), m


class _SDNA(nn.Module):
    """Parameters common to both forms: the optional gate BN and the gate neuron (same names in both)."""

    def __init__(self, kernel_size: int = 3, dilation: int = 1, threshold=1.0, max_spikes: int = 4, beta=1.0,
                 gate_bn: int | None = None, alpha=1.0, rounding: str = "round", bn_eps: float = 1e-5):
        super().__init__()
        _check_window(kernel_size, dilation, type(self).__name__)
        if rounding not in ROUNDINGS:
            raise ValueError(f"{type(self).__name__} rounding must be one of {ROUNDINGS}, got {rounding!r}")
        self.kernel_size, self.dilation = int(kernel_size), int(dilation)
        self.gate_bn = nn.BatchNorm2d(gate_bn, eps=bn_eps) if gate_bn else None
        self.gate = IntFire(threshold=threshold, max_spikes=max_spikes, beta=beta, alpha=alpha, rounding=rounding)

    def _check(self, q, k, v):
        check_multistep(q, type(self).__name__, min_dim=5)
        if not (q.shape == k.shape == v.shape):
            raise ValueError(f"{type(self).__name__} needs q, k, v of one shape [T, B, C, H, W], got "
                             f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
        if self.gate_bn is not None and q.shape[2] != self.gate_bn.num_features:
            raise ValueError(f"{type(self).__name__} gate BN has {self.gate_bn.num_features} channels, "
                             f"the input has {q.shape[2]}")

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, dilation={self.dilation}"


class SDNALinear(_SDNA):
    """Linear SDNA: ``out = Q * SN([gate BN](window_sum(K * V) / k^2))`` (the BN applied per step)."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        self._check(q, k, v)
        return sdna_linear(q, k, v, self.kernel_size, self.dilation, self.gate, self.gate_bn)


class SDNAPairwise(_SDNA):
    """Pairwise SDNA: ``out_i = (1/k^2) sum_j SN([gate BN](Q_i * K_j)) * V_j``, one neuron per (i, j, channel).

    Memory grows with ``k^2``: the scores, neuron states and products are ``[T, B, C, k*k, H*W]``.
    """

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        self._check(q, k, v)
        g = self.gate
        out, _ = sdna_pairwise(q, k, v, self.kernel_size, self.dilation, g.threshold, g.beta, g.alpha,
                               g.max_spikes, g.rounding, self.gate_bn, grad=torch.is_grad_enabled())
        return out
