"""Loihi-exact training modules: the forward IS Loihi 2's fixed-point arithmetic (as Lava 0.10.0's bit-accurate
process models compute it), with straight-through / surrogate gradients for training.

Every value of the forward is an integer held in a float tensor. In float32 the arithmetic is exact while
every value (weights times inputs summed, currents, voltages) stays below 2^24 in magnitude, which Loihi's
24-bit states guarantee for ``u`` and ``v``; the decay is computed in two 12-bit halves so that no product
exceeds 2^24 either. float64 is exact everywhere. A float64 run of a module and of its IR ops
(``spikec.frontend.loihi``) agree bit for bit, and so does Lava's fixed-point simulation of the deployment.

Multi-step like the other ``spikec.nn`` modules: ``[T, B, ...]`` in, ``[T, B, ...]`` out.

``Dense(in_features, out_features, weight_exp=0, bias=False)`` -- Lava's ``Dense`` (PyDenseModelBitAcc,
``lava/proc/dense/models.py``), ``weight`` a float parameter in *mantissa units*::

    m     = floor(weight + 0.5)                  round half up to an integer mantissa
    W     = rule(rule(m))                        Lava's clip_weights + truncate_weights (lava/utils/weightutils.py):
            rule: all m >= 0 ("excitatory"):     clip(m, 0, 255)
                  all m <= 0 ("inhibitory"):     -clip(-m, 0, 255)
                  mixed signs:                   (clip(m, -256, 255) >> 1) << 1   (the LSB is dropped)
            (applied twice: a mixed matrix whose positives were all 1 becomes inhibitory once truncated, and
            Lava, handed W, applies the rule again; rule(rule(.)) is a fixed point of it, so W is what Lava
            multiplies. It differs from rule(m) only when it clips such a -256 to -255.)
    a_acc = x @ W.T                              Lava: W[:, s].sum(1) for spikes (num_message_bits 0), W.dot(s)
                                                 for graded inputs; the same for 0/1 inputs
    a     = a_acc << weight_exp                  (weight_exp >= 0), or floor(a_acc / 2^-weight_exp)
                                                 (Lava: np.right_shift, an arithmetic shift: floor)
    a    += bias                                 optional, floor(bias + 0.5): an integer added to the sum (spikec
                                                 deploys it as a read-out's bias or a SpikecLIF current bias)

``Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0, weight_exp=0)`` -- the same mantissas and
rule per layer, a true 2-D cross-correlation (PyTorch's orientation) of the integer weights ``W << weight_exp``:
Lava's Conv process (PyConvModelFixed) has no weight exponent, so spikec hands it ``W << weight_exp``;
``weight_exp`` must be in [0, 7] here (a floor shift of a conv sum has no Lava form). No bias.

``LIF(du, dv, vth, bias_mant=0, bias_exp=0, reset="zero", channels=None)`` -- Lava's ``PyLifModelBitAcc``
(``lava/proc/lif/models.py``, AbstractPyLifModelFixed.subthr_dynamics and run_spk), one step per ``t``, the
synaptic input ``a`` being the integer output of the synapse of the same step::

    u = sgn(u (4095 - du)) (|u (4095 - du)| >> 12) + (a << 6)   decay_const_u = du + ds_offset (1): factor
                                                                 4096 - (du + 1); a << 6: the act_shift
    u = u - 2^24 if u > 2^23;  u = u + 2^24 if u <= -2^23       the 24-bit wrap of wrapped_curr
    v = sgn(v (4096 - dv)) (|v (4096 - dv)| >> 12) + u + bias   decay_const_v = dv + dm_offset (0);
                                                                 bias = bias_mant << bias_exp (scale_bias)
    v = clip(v, -(2^23 - 1), 2^23 - 1)                          neg/pos_voltage_limit
    s = v > (vth << 6)                                          spiking_activation, strict; vth_shift 6
    reset "zero":     v[s] = 0                                  reset_voltage (Lava's LIF)
    reset "subtract": v[s] -= vth << 6                          spikec's SpikecLIF process, reset "subtract"
                                                                 (procs/models.py PySpikecLIFModelFixed)

``du``, ``dv`` in [0, 4095], ``vth`` in [0, 2^17 - 1], ``bias_exp`` in [0, 7] (Lava's 3-bit unsigned exponent):
integer buffers, scalars or per-channel (dim 2). ``bias_mant`` is a trainable parameter (shape () or
(channels,)) rounded half up and clipped to Lava's signed 13 bits [-4096, 4095]. States start at zero.

Gradients: rounding, floor shifts, decays, the wrap and the clip pass the gradient of their real-valued
counterpart straight through (``x f / 4096`` for the decay); the spike is ``heaviside((v - theta - 1/2) / theta)``
(exactly ``v > theta`` on integers) with the fast-sigmoid surrogate of ``spikec.nn.surrogate``, the membrane
normalized by the threshold; the reset uses the detached spike, as ``spikec.nn.LIF`` does.
"""
import torch
import torch.nn.functional as F
from torch import nn

from spikec.nn._common import check_multistep, per_channel
from spikec.nn.surrogate import heaviside, straight_through

STATE_LIMIT = 2 ** 23          # u and v are signed 24-bit (max_uv_val)
RESETS = ("zero", "subtract")
BIAS_MANT_RANGE = (-4096, 4095)


# -- integer arithmetic on float tensors ---------------------------------------------------------------
def round_half_up(x: torch.Tensor) -> torch.Tensor:
    """``floor(x + 1/2)`` forward, identity gradient."""
    return straight_through(torch.floor(x.detach() + 0.5), x)


def _rule(m: torch.Tensor) -> torch.Tensor:
    """Lava's clip_weights + truncate_weights (8 bits) for the sign mode of ``m`` (determine_sign_mode)."""
    if bool((m >= 0).all()):
        return m.clamp(0, 255)
    if bool((m <= 0).all()):
        return m.clamp(-255, 0)
    return torch.floor(m.clamp(-256, 255) / 2) * 2


def effective_weights(weight: torch.Tensor) -> torch.Tensor:
    """The integer weights Lava multiplies: ``rule(rule(floor(weight + 1/2)))``, straight-through gradient."""
    w = weight.detach()
    return straight_through(_rule(_rule(torch.floor(w + 0.5))), weight)


def sign_mode(w: torch.Tensor) -> str:
    if bool((w >= 0).all()):
        return "excitatory"
    return "inhibitory" if bool((w <= 0).all()) else "mixed"


def shift(a: torch.Tensor, exp: int) -> torch.Tensor:
    """``a << exp`` or ``floor(a / 2^-exp)`` (an arithmetic right shift), straight-through gradient."""
    if exp >= 0:
        return a * float(2 ** exp)
    y = a / float(2 ** -exp)
    return straight_through(torch.floor(y.detach()), y)


def decay(x: torch.Tensor, factor) -> torch.Tensor:
    """``sgn(x f) (|x f| >> 12)``, 0 <= f <= 4096: exact in float32 for |x| < 2^24 (x split at 2^12 so that no
    product exceeds 2^24); the gradient is that of ``x f / 4096``."""
    xd = x.detach()
    ax = xd.abs()
    hi = torch.floor(ax / 4096)
    lo = ax - hi * 4096
    d = torch.sign(xd) * (hi * factor + torch.floor(lo * factor / 4096))
    return straight_through(d, x * factor / 4096)


def wrap_current(u: torch.Tensor) -> torch.Tensor:
    """Lava's wrapped_curr: once into (-2^23, 2^23]; identity gradient."""
    m = STATE_LIMIT
    ud = u.detach()
    w = torch.where(ud > m, ud - 2 * m, ud)
    w = torch.where(w <= -m, ud + 2 * m, w)
    return straight_through(w, u)


def clip_voltage(v: torch.Tensor) -> torch.Tensor:
    lim = STATE_LIMIT - 1
    return straight_through(v.detach().clamp(-lim, lim), v)


def bias_value(mant: torch.Tensor, exp: torch.Tensor) -> torch.Tensor:
    """``bias_mant << bias_exp`` on the rounded, clipped mantissa (exp >= 0)."""
    m = round_half_up(mant)
    m = straight_through(m.detach().clamp(*BIAS_MANT_RANGE), m)
    return m * torch.pow(2.0, exp.to(m.dtype))


def _int_buffer(value, name: str, lo: int, hi: int) -> torch.Tensor:
    t = torch.as_tensor(value, dtype=torch.get_default_dtype()).detach().clone()
    if t.dim() > 1:
        raise ValueError(f"LIF {name} must be a scalar or a 1-D per-channel vector, got shape {tuple(t.shape)}")
    if not torch.isfinite(t).all() or bool((t != torch.round(t)).any()):
        raise ValueError(f"LIF {name} must be integers, got {value!r}")
    if bool(((t < lo) | (t > hi)).any()):
        raise ValueError(f"LIF {name} must lie in [{lo}, {hi}], got {value!r}")
    return t


def _check_exp(weight_exp, lo: int, hi: int, who: str) -> int:
    if int(weight_exp) != weight_exp or not lo <= weight_exp <= hi:
        raise ValueError(f"{who} weight_exp must be an integer in [{lo}, {hi}], got {weight_exp!r}")
    return int(weight_exp)


# -- synapses --------------------------------------------------------------------------------------------
class Dense(nn.Module):
    """Lava's Dense: 8-bit mantissas (sign-mode rule), ``weight_exp``, integer output (see the module doc)."""

    def __init__(self, in_features: int, out_features: int, weight_exp: int = 0, bias: bool = False,
                 init_scale: float = 64.0):
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.weight_exp = _check_exp(weight_exp, -8, 7, "Dense")
        bound = init_scale / max(self.in_features, 1) ** 0.5
        self.weight = nn.Parameter(torch.empty(self.out_features, self.in_features).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.zeros(self.out_features)) if bias else None

    def integer_weights(self) -> torch.Tensor:
        return effective_weights(self.weight)

    def integer_bias(self):
        return None if self.bias is None else round_half_up(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_multistep(x, "loihi.Dense")
        w = self.integer_weights().to(x.dtype)
        a = shift(torch.matmul(x, w.t()), self.weight_exp)
        b = self.integer_bias()
        return a if b is None else a + b.to(x.dtype)

    def extra_repr(self) -> str:
        return f"{self.in_features}, {self.out_features}, weight_exp={self.weight_exp}, bias={self.bias is not None}"


def _pair(v) -> tuple:
    return tuple(int(i) for i in v) if isinstance(v, (tuple, list)) else (int(v), int(v))


class Conv2d(nn.Module):
    """Lava's Conv on integer weights ``W << weight_exp`` (W: the Dense mantissa rule), no bias."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, weight_exp: int = 0,
                 init_scale: float = 64.0):
        super().__init__()
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size, self.stride, self.padding = _pair(kernel_size), _pair(stride), _pair(padding)
        if min(self.kernel_size) < 1 or min(self.stride) < 1 or min(self.padding) < 0:
            raise ValueError("loihi.Conv2d kernel_size and stride must be >= 1, padding >= 0")
        self.weight_exp = _check_exp(weight_exp, 0, 7, "Conv2d")
        fan_in = self.in_channels * self.kernel_size[0] * self.kernel_size[1]
        bound = init_scale / fan_in ** 0.5
        self.weight = nn.Parameter(torch.empty(self.out_channels, self.in_channels, *self.kernel_size)
                                   .uniform_(-bound, bound))

    def integer_weights(self) -> torch.Tensor:
        """The weights Lava's Conv multiplies: ``W << weight_exp``."""
        return effective_weights(self.weight) * float(2 ** self.weight_exp)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_multistep(x, "loihi.Conv2d", 5)
        w = self.integer_weights().to(x.dtype)
        y = F.conv2d(x.flatten(0, 1), w, None, self.stride, self.padding)
        return y.unflatten(0, x.shape[:2])

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}, weight_exp={self.weight_exp}")


# -- neuron ----------------------------------------------------------------------------------------------
class LIF(nn.Module):
    """Lava's fixed-point LIF (hard reset), or SpikecLIF's subtract reset; see the module doc, line by line."""

    def __init__(self, du=4095, dv=0, vth=64, bias_mant=0.0, bias_exp=0, reset: str = "zero", channels=None,
                 surrogate_slope: float = 5.0, return_state: bool = False):
        super().__init__()
        if reset not in RESETS:
            raise ValueError(f"loihi.LIF reset must be one of {RESETS}, got {reset!r}")
        self.reset = reset
        self.register_buffer("du", _int_buffer(du, "du", 0, 4095))
        self.register_buffer("dv", _int_buffer(dv, "dv", 0, 4095))
        self.register_buffer("vth", _int_buffer(vth, "vth", 0, 2 ** 17 - 1))
        self.register_buffer("bias_exp", _int_buffer(bias_exp, "bias_exp", 0, 7))
        shape = () if channels is None else (int(channels),)
        mant = torch.as_tensor(bias_mant, dtype=torch.get_default_dtype())
        self.bias_mant = nn.Parameter(torch.broadcast_to(mant, shape).clone() if shape else mant.clone().reshape(()))
        self.surrogate_slope = float(surrogate_slope)
        self.return_state = return_state

    def integer_bias_mant(self) -> torch.Tensor:
        return round_half_up(self.bias_mant).detach().clamp(*BIAS_MANT_RANGE)

    def params(self, x0: torch.Tensor) -> dict:
        """Per-step broadcast parameters for one step ``x0`` of shape ``[B, C, ...]``."""
        theta = per_channel(self.vth, x0) * 64
        return {"fu": per_channel(4095 - self.du, x0), "fv": per_channel(4096 - self.dv, x0), "theta": theta,
                "bias": per_channel(bias_value(self.bias_mant, self.bias_exp), x0),
                "scale": torch.clamp(theta, min=64.0)}

    def forward(self, x: torch.Tensor):
        check_multistep(x, "loihi.LIF")
        p = self.params(x[0])
        u = torch.zeros_like(x[0])
        v = torch.zeros_like(x[0])
        spikes, us, vs = [], [], []
        for t in range(x.shape[0]):
            u, v, s = step(u, v, x[t], p, self.reset, self.surrogate_slope)
            spikes.append(s)
            us.append(u)
            vs.append(v)
        s = torch.stack(spikes)
        return (s, torch.stack(us), torch.stack(vs)) if self.return_state else s

    def extra_repr(self) -> str:
        return f"reset={self.reset!r}"


def step(u, v, a, p: dict, reset: str, slope: float = 5.0):
    """One Loihi LIF step (module doc): ``(u, v after the reset, spikes)``."""
    u = wrap_current(decay(u, p["fu"]) + a * 64)
    v = clip_voltage(decay(v, p["fv"]) + u + p["bias"])
    s = heaviside((v - p["theta"] - 0.5) / p["scale"], slope)
    sd = s.detach()
    v = v * (1 - sd) if reset == "zero" else v - p["theta"] * sd
    return u, v, s
