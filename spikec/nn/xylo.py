"""Xylo-exact training modules: the forward IS Xylo's integer neuron arithmetic (as SynSense's bit-accurate
simulator ``xylosim.v2`` computes it, ``spikec/targets/xylo/reference.py``), with surrogate gradients for training.

Xylo's synapses and neurons are one population on the chip (its weights are stored per population), and its
16-bit states saturate after each source's contribution, which a summed input cannot repeat; so one module is
one population *with the weights into it*: ``Hidden`` (input and recurrent weights, up to 31 spikes a step) and
``Output`` (weights from the hidden population, at most one spike a step, its input one step late). A network
for Xylo is ``Sequential(Hidden(C, N), Output(N, M))`` on spike counts ``[T, B, C]``; spikec deploys it as it is
(``spikec.frontend.xylo``: op ``xylo_lif``) and ``--target xylo`` checks XyloSim against the module's own forward,
every state of every step (``bit_exact_vs_source``).

Every value is an integer held in a float tensor (float32 is exact: every partial sum the chip keeps is below
2^24; float64 everywhere). Parameters, per population (``dash_*`` and ``threshold`` scalars or per-neuron)::

    W       = clip(floor(weight + 1/2), -128, 127) << shift     8-bit weights, one shift 0..7 per matrix
    bias    = clip(floor(bias + 1/2), -32768, 32767)            trainable, 16 bits
    dash_syn, dash_mem in 0..15 (decay 1 - 2**-dash), threshold in 1..32767 (integer buffers)

One step ``t`` of a population (``leak``, ``sat``, ``wrap`` as in ``reference.py``)::

    Isyn  = acc(Isyn, [x[t] events of W_in; s[t-1] events of W_rec])   per source, saturating after each
    Isyn  = Isyn - leak(Isyn, dash_syn)                                 leak(x, d) = x >> d, >= 1 for x > 0
    Vmem  = sat(Vmem + sat(sat(Isyn + wrap(-leak(Vmem, dash_mem))) + bias))
    s[t]  = clip(floor(Vmem / threshold), 0, max_spikes)                Hidden 31, Output 1 (Vmem >= threshold)
    Vmem  = Vmem - s[t] * threshold                                     the subtractive reset, same step

``Output`` runs that on its input delayed by one step (``x[t-1]``, zero at ``t = 0``): the chip's output
neurons receive the hidden spikes of the previous step. States start at zero.

Gradients: rounding, clipping, saturation and shifts pass the gradient of their real-valued counterpart
straight through (``x (1 - 2**-dash)`` for a decay); the spike count's gradient is the fast-sigmoid surrogate
of ``spikec.nn.surrogate`` at the first threshold, the membrane normalized by the threshold; the reset uses the
detached count, as ``spikec.nn.loihi`` does.
"""
import torch
from torch import nn

from spikec.nn._common import check_multistep
from spikec.nn.surrogate import straight_through

STATE_MIN, STATE_MAX = -(2 ** 15), 2 ** 15 - 1
WEIGHT_MIN, WEIGHT_MAX = -128, 127
SHIFT_MAX, DASH_MAX = 7, 15
HIDDEN_MAX_SPIKES, OUTPUT_MAX_SPIKES = 31, 1
READS = ("spikes", "isyn", "vmem")


# -- Xylo's integer arithmetic on float tensors ------------------------------------------------------------
def _ste(exact: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return straight_through(exact.detach(), x)


def integer_weights(weight: torch.Tensor, shift: int) -> torch.Tensor:
    """``clip(floor(w + 1/2), -128, 127) << shift``, straight-through gradient."""
    w = torch.floor(weight.detach() + 0.5).clamp(WEIGHT_MIN, WEIGHT_MAX) * float(2 ** shift)
    return _ste(w, weight * float(2 ** shift))


def integer_bias(bias: torch.Tensor) -> torch.Tensor:
    return _ste(torch.floor(bias.detach() + 0.5).clamp(STATE_MIN, STATE_MAX), bias)


def leak(x: torch.Tensor, dash: torch.Tensor) -> torch.Tensor:
    """``x >> dash`` (floor), and at least 1 off a positive value; gradient ``x 2**-dash``."""
    real = x * torch.pow(2.0, -dash)
    step = torch.floor(real.detach())
    return _ste(torch.where((x.detach() > 0) & (step == 0), torch.ones_like(step), step), real)


def sat(x: torch.Tensor) -> torch.Tensor:
    return _ste(x.detach().clamp(STATE_MIN, STATE_MAX), x)


def wrap(x: torch.Tensor) -> torch.Tensor:
    """16-bit two's complement (``-(-32768)`` is ``-32768``), identity gradient."""
    return _ste(torch.remainder(x.detach() - STATE_MIN, 2.0 ** 16) + STATE_MIN, x)


def accumulate(state: torch.Tensor, contributions: torch.Tensor) -> torch.Tensor:
    """``state [B, N]`` plus ``contributions [B, J, N]`` source by source, saturating after each (Xylo's order).

    When no partial sum leaves 16 bits the saturating adds are the plain sum (the common case, one cumsum);
    otherwise the sources are added one at a time. Gradient: that of the plain sum."""
    plain = state + contributions.sum(1)
    prefix = state.detach().unsqueeze(1) + contributions.detach().cumsum(1)
    if contributions.shape[1] == 0 or bool(((prefix >= STATE_MIN) & (prefix <= STATE_MAX)).all()):
        return _ste(prefix[:, -1] if contributions.shape[1] else state.detach(), plain)
    s = state.detach()
    for j in range(contributions.shape[1]):
        s = (s + contributions[:, j].detach()).clamp(STATE_MIN, STATE_MAX)
    return _ste(s, plain)


class _SpikeCount(torch.autograd.Function):
    """``clip(floor(v / theta), 0, max)`` forward; the fast-sigmoid surrogate of ``(v - theta) / theta`` back."""

    @staticmethod
    def forward(ctx, v, theta, max_spikes, slope):
        ctx.save_for_backward(v, theta)
        ctx.slope = slope
        return torch.floor(v / theta).clamp(0, max_spikes)

    @staticmethod
    def backward(ctx, grad):
        v, theta = ctx.saved_tensors
        x = (v - theta) / theta
        return grad / theta / (1.0 + ctx.slope * x.abs()) ** 2, None, None, None


def step(isyn, vmem, contributions, p: dict, slope: float = 5.0):
    """One Xylo population step (module doc): ``(Isyn, Vmem after the reset, spike counts)``."""
    isyn = accumulate(isyn, contributions)
    isyn = isyn - leak(isyn, p["dash_syn"])
    vmem = sat(vmem + sat(sat(isyn + wrap(-leak(vmem, p["dash_mem"]))) + p["bias"]))
    n = _SpikeCount.apply(vmem, p["threshold"], float(p["max_spikes"]), slope)
    return isyn, vmem - n.detach() * p["threshold"], n


def run(x: torch.Tensor, w_in: torch.Tensor, w_rec, p: dict, delay: bool, slope: float = 5.0):
    """A population over ``x [T, B, C]`` of event counts: ``(spikes, isyn, vmem)``, each ``[T, B, N]``.

    ``w_in [N, C]`` and ``w_rec [N, N]`` (or None) are the integer weights already shifted; ``p`` holds
    ``dash_syn``, ``dash_mem``, ``threshold``, ``bias`` (broadcast to ``[N]``) and ``max_spikes``; ``delay``: the
    input one step late (an output population)."""
    if delay:
        x = torch.cat([torch.zeros_like(x[:1]), x[:-1]])
    n = w_in.shape[0]
    isyn = torch.zeros(x.shape[1], n, dtype=x.dtype)
    vmem, prev = torch.zeros_like(isyn), torch.zeros_like(isyn)
    out = {k: [] for k in READS}
    for t in range(x.shape[0]):
        c = x[t].unsqueeze(-1) * w_in.t().unsqueeze(0)                       # [B, C, N], source by source
        if w_rec is not None:
            c = torch.cat([c, prev.unsqueeze(-1) * w_rec.t().unsqueeze(0)], 1)  # then last step's spikes
        isyn, vmem, prev = step(isyn, vmem, c, p, slope)
        for k, v in zip(READS, (prev, isyn, vmem)):
            out[k].append(v)
    return tuple(torch.stack(out[k]) for k in READS)


def _int_buffer(value, name: str, lo: int, hi: int, n: int) -> torch.Tensor:
    t = torch.as_tensor(value, dtype=torch.get_default_dtype()).detach().clone()
    if t.dim() > 1 or (t.dim() == 1 and t.shape[0] != n):
        raise ValueError(f"xylo {name} must be a scalar or a vector of {n} (one per neuron), got shape "
                         f"{tuple(t.shape)}")
    if not torch.isfinite(t).all() or bool((t != torch.round(t)).any()):
        raise ValueError(f"xylo {name} must be integers, got {value!r}")
    if bool(((t < lo) | (t > hi)).any()):
        raise ValueError(f"xylo {name} must lie in [{lo}, {hi}], got {value!r}")
    return t


def _shift(value, name: str) -> int:
    if int(value) != value or not 0 <= value <= SHIFT_MAX:
        raise ValueError(f"xylo {name} must be an integer in [0, {SHIFT_MAX}], got {value!r}")
    return int(value)


# -- populations --------------------------------------------------------------------------------------------
class _Population(nn.Module):
    max_spikes = HIDDEN_MAX_SPIKES
    delay = False

    def __init__(self, in_features, out_features, dash_mem=4, dash_syn=1, threshold=64, bias=0.0,
                 weight_shift=0, init_scale=64.0, surrogate_slope=5.0, return_state=False):
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        n = self.out_features
        self.weight_shift = _shift(weight_shift, "weight_shift")
        bound = init_scale / max(self.in_features, 1) ** 0.5
        self.weight = nn.Parameter(torch.empty(n, self.in_features).uniform_(-bound, bound))
        self.register_buffer("dash_mem", _int_buffer(dash_mem, "dash_mem", 0, DASH_MAX, n))
        self.register_buffer("dash_syn", _int_buffer(dash_syn, "dash_syn", 0, DASH_MAX, n))
        self.register_buffer("threshold", _int_buffer(threshold, "threshold", 1, STATE_MAX, n))
        b = torch.as_tensor(bias, dtype=torch.get_default_dtype())
        self.bias = nn.Parameter(torch.broadcast_to(b, (n,)).clone())
        self.surrogate_slope = float(surrogate_slope)
        self.return_state = return_state

    def integer_weights(self) -> torch.Tensor:
        """The weights the chip adds (``W << weight_shift``), [out, in]."""
        return integer_weights(self.weight, self.weight_shift)

    def recurrent_weights(self):
        return None

    def params(self, dtype) -> dict:
        n = self.out_features
        b = lambda t: torch.broadcast_to(t.to(dtype), (n,))
        return {"dash_mem": b(self.dash_mem), "dash_syn": b(self.dash_syn), "threshold": b(self.threshold),
                "bias": b(integer_bias(self.bias)), "max_spikes": self.max_spikes}

    def forward(self, x: torch.Tensor):
        check_multistep(x, f"xylo.{type(self).__name__}")
        if x.dim() != 3 or x.shape[2] != self.in_features:
            raise ValueError(f"xylo.{type(self).__name__} expects [T, B, {self.in_features}] event counts, got "
                             f"shape {tuple(x.shape)}")
        w_rec = self.recurrent_weights()
        s, isyn, vmem = run(x, self.integer_weights().to(x.dtype), None if w_rec is None else w_rec.to(x.dtype),
                            self.params(x.dtype), self.delay, self.surrogate_slope)
        return (s, isyn, vmem) if self.return_state else s

    def extra_repr(self) -> str:
        return f"{self.in_features}, {self.out_features}, weight_shift={self.weight_shift}"


class Hidden(_Population):
    """Xylo's hidden population: input weights, optional recurrent weights (``recurrent=True``: the spikes of the
    previous step through ``weight_rec << rec_shift``), up to 31 spikes a step (module doc)."""

    def __init__(self, in_features, out_features, recurrent=False, rec_shift=0, **kw):
        super().__init__(in_features, out_features, **kw)
        self.rec_shift = _shift(rec_shift, "rec_shift")
        n, scale = self.out_features, kw.get("init_scale", 64.0)
        self.weight_rec = (nn.Parameter(torch.empty(n, n).uniform_(-scale / n ** 0.5, scale / n ** 0.5))
                           if recurrent else None)

    def recurrent_weights(self):
        return None if self.weight_rec is None else integer_weights(self.weight_rec, self.rec_shift)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", recurrent={self.weight_rec is not None}, rec_shift={self.rec_shift}"


class Output(_Population):
    """Xylo's output population: weights from the hidden spikes (one step late, as on the chip), at most one
    spike a step (``Vmem >= threshold``), no recurrence (module doc)."""
    max_spikes = OUTPUT_MAX_SPIKES
    delay = True
