"""Converters of the Loihi-exact training modules (``spikec.nn.loihi``) and their IR ops.

Every value these modules compute is an integer, so the IR can hold them exactly in float64:

``loihi.Dense``    ``linear`` with the integer weights ``W << weight_exp`` and the integer bias, when
                   ``weight_exp >= 0`` (an integer matrix product is exact in float64); with a negative exponent,
                   ``linear`` on ``W`` (no bias) then ``loihi_shift`` (``floor(a / 2^-weight_exp) + bias``).
``loihi.Conv2d``   ``conv2d`` with the integer weights ``W << weight_exp``, no bias.
``loihi.LIF``      ``loihi_lif``: Lava's fixed-point LIF step (``spikec.nn.loihi`` documents it line by line),
                   whose decay rounds toward zero (``sgn(x f) (|x f| >> 12)``), wraps the current and saturates
                   the voltage: ``lif``'s ``beta * H`` cannot repeat it, hence its own op.

Each node records in ``attrs["loihi"]`` what the module was (``"dense"`` / ``"conv2d"`` with its
``weight_exp`` and sign mode, ``"lif"``), so that the Lava target can deploy these integers as they are
(``spikec.targets.lava.exact_source``).

Ops::

  loihi_lif    du, dv, vth, bias_mant, bias_exp: () or (C,) integers (bias_mant already rounded and clipped);
               attrs reset "zero" | "subtract", read "spikes" | "u" | "v" (the state after the step's reset).
               Kernel: ``spikec.nn.loihi.step`` in float64 (exact); margins ``|v - theta - 1/2|``.
  loihi_shift  attr exp (< 0), optional bias (N,): ``y = floor(x / 2^-exp) + bias`` (Lava's arithmetic right
               shift of the dendritic sum).
"""
import torch

from spikec.ir.graph import TensorType
from spikec.frontend.exact_neurons import float_only, multi_step_only
from spikec.frontend.registry import refuse, register_converter
from spikec.nn import loihi
from spikec.ops import Param, PER_CHANNEL, define, register_kernel
from spikec.ops.common import channel, per_channel, sizes
from spikec.ops.registry import need

LIF_PARAMS = ("du", "dv", "vth", "bias_mant", "bias_exp")
READS = ("spikes", "u", "v")
LIF_DOCS = {"du": "current decay: factor 4095 - du (Lava's ds_offset 1)", "dv": "voltage decay: factor 4096 - dv",
            "vth": "threshold mantissa (compared as v > vth << 6)", "bias_mant": "bias mantissa (integer, 13-bit)",
            "bias_exp": "bias exponent (0..7): bias = bias_mant << bias_exp"}


# -- ops -------------------------------------------------------------------------------------------------
def _infer_lif(node, ins):
    (t,) = ins
    per_channel(node, t, LIF_PARAMS)
    need(all(k in node.params for k in LIF_PARAMS), node, f"loihi_lif needs params {LIF_PARAMS}")
    need(node.attrs.get("reset") in loihi.RESETS, node, f"reset must be one of {loihi.RESETS}")
    read = node.attrs.get("read", "spikes")
    need(read in READS, node, f"read must be one of {READS}, got {read!r}")
    return TensorType(t.shape, "binary") if read == "spikes" else TensorType(t.shape)


def _lif_kernel(node, p, x):
    """``spikec.nn.loihi.step`` over the steps, in float64: exact (all values are integers below 2^53)."""
    float_only(node, x)
    nd = x.dim() - 1
    du, dv, vth, bm, be = (channel(p[k].to(x.dtype), nd) for k in LIF_PARAMS)
    theta = vth * 64
    params = {"fu": 4095 - du, "fv": 4096 - dv, "theta": theta, "bias": bm * torch.pow(2.0, be),
              "scale": torch.clamp(theta, min=64.0)}
    read = node.attrs.get("read", "spikes")
    out, margins = torch.empty_like(x), torch.empty_like(x)
    u, v = torch.zeros_like(x[0]), torch.zeros_like(x[0])
    for t in range(x.shape[0]):
        u, pre_v, s = _step(u, v, x[t], params, node.attrs["reset"])
        margins[t] = (pre_v - theta - 0.5).abs()
        v = pre_v * (1 - s) if node.attrs["reset"] == "zero" else pre_v - theta * s
        out[t] = {"spikes": s, "u": u, "v": v}[read]
    return (out, margins) if read == "spikes" else out


def _step(u, v, a, p, reset):
    """The sub-threshold update and the spike of ``spikec.nn.loihi.step`` (the reset is applied by the caller)."""
    u = loihi.wrap_current(loihi.decay(u, p["fu"]) + a * 64)
    v = loihi.clip_voltage(loihi.decay(v, p["fv"]) + u + p["bias"])
    return u, v, (v > p["theta"]).to(v.dtype)


def _lif_count(node) -> int:
    return sizes(node, *LIF_PARAMS) if node.attrs.get("read", "spikes") == "spikes" else 0


def _infer_shift(node, ins):
    (t,) = ins
    exp = node.attrs.get("exp")
    need(isinstance(exp, int) and exp < 0, node, f"exp must be a negative int, got {exp!r}")
    if "bias" in node.params:
        need(node.params["bias"].shape == (t.shape[0],), node, f"bias must have shape ({t.shape[0]},)")
    return TensorType(t.shape)


def _shift_kernel(node, p, x):
    y = torch.floor(x / float(2 ** -node.attrs["exp"]))
    return y + channel(p["bias"], x.dim() - 1) if "bias" in p else y


define("loihi_lif", 1, _infer_lif, count=_lif_count, stateful=True, neuron=True,
       params=tuple(Param(k, PER_CHANNEL, LIF_DOCS[k]) for k in LIF_PARAMS),
       doc="Loihi 2's fixed-point LIF (Lava's PyLifModelBitAcc; subtract reset: SpikecLIF); attrs reset, read")
define("loihi_shift", 1, _infer_shift, count=lambda n: sizes(n, "bias"),
       params=(Param("bias", "(N,)", "integer added after the shift", required=False),),
       doc="floor(x / 2^-exp) + bias: Lava Dense's right shift of the sum (weight_exp < 0); attr exp")
register_kernel("loihi_lif", _lif_kernel)
register_kernel("loihi_shift", _shift_kernel)


# -- converters -------------------------------------------------------------------------------------------
def _np_int(t: torch.Tensor):
    return t.detach().double().cpu().numpy()


def dense(ctx, m: loihi.Dense, name, x):
    multi_step_only(ctx, m, name)
    w = m.integer_weights().detach()
    b = m.integer_bias()
    info = {"kind": "dense", "weight_exp": m.weight_exp, "sign_mode": loihi.sign_mode(w)}
    if m.weight_exp >= 0:
        return ctx.emit(name, "linear", [x], {"loihi": info},
                        {"weight": _np_int(w) * 2.0 ** m.weight_exp, "bias": None if b is None else _np_int(b)},
                        scope=name)
    a = ctx.emit(name + ".sum", "linear", [x], {"loihi": dict(info, summed_only=True)}, {"weight": _np_int(w)},
                 scope=name)
    return ctx.emit(name, "loihi_shift", [a], {"exp": m.weight_exp, "loihi": dict(info, kind="shift")},
                    {"bias": None if b is None else _np_int(b)}, scope=name)


def conv2d(ctx, m: loihi.Conv2d, name, x):
    multi_step_only(ctx, m, name)
    w = m.integer_weights().detach()
    info = {"kind": "conv2d", "weight_exp": m.weight_exp,
            "sign_mode": loihi.sign_mode(loihi.effective_weights(m.weight).detach())}
    attrs = {"stride": m.stride, "padding": m.padding, "dilation": (1, 1), "groups": 1, "loihi": info}
    return ctx.emit(name, "conv2d", [x], attrs, {"weight": _np_int(w), "bias": None}, scope=name)


def lif(ctx, m: loihi.LIF, name, x):
    multi_step_only(ctx, m, name)
    if m.return_state:
        refuse(name, m, "return_state=True returns (spikes, u, v); the converter maps the spikes only",
               "trace the module with return_state=False")
    params = {"du": m.du, "dv": m.dv, "vth": m.vth, "bias_mant": m.integer_bias_mant(), "bias_exp": m.bias_exp}
    return ctx.emit(name, "loihi_lif", [x], {"reset": m.reset, "loihi": {"kind": "lif"}},
                    {k: _np_int(v) for k, v in params.items()}, scope=name)


register_converter(loihi.Dense, dense)
register_converter(loihi.Conv2d, conv2d)
register_converter(loihi.LIF, lif)
