"""Integer IR ops of the Lava target: the *integer reference* Lava's fixed-point models must match.

Each kernel repeats, in exact int64 numpy arithmetic, what the corresponding Lava 0.10.0
``fixed_pt`` ProcessModel computes for one logical step (the one-step latency of every Lava
synapse process is *not* part of these ops: the target accounts for it when comparing, see
``lava/emit.py``). Written independently of Lava's code, so comparing the two checks both.

  lava_dense    weight (N_out, N_in) int64: the values handed to ``lava.proc.dense.Dense``
                attrs weight_exp, num_message_bits.
                PyDenseModelBitAcc: sign mode from the weights (all >= 0 / all <= 0 / mixed);
                clip to 8 bits (mixed [-256, 255]); drop the lowest bit when mixed
                (``(w >> 1) << 1``); ``a = W[:, s != 0].sum(1)`` for binary input (``W @ s`` when
                num_message_bits > 0); ``a << weight_exp`` or floor ``a >> -weight_exp``.
  lava_conv     weight (C_out, C_in/groups, kH, kW) int64, *PyTorch* layout and orientation (the
                emitter flips and transposes it for Lava's true convolution in (W, H, C) layout)
                attrs stride, padding, dilation, groups, num_message_bits. PyConvModelFixed:
                binary input read as ``s != 0``; the sum wraps to signed 24 bits; weight_exp and
                weight truncation do not apply.
  lava_lif      du, dv, vth, bias_mant, bias_exp: () or (C,) int64; optional v_reset (hard reset);
                attr reset "zero" | "subtract"; attr output "spikes" | "v" | "u" | "flags".
                PyLifModelBitAcc, one step (input a = synaptic sum of this step):
                  u = sgn(u*(4096-(du+1))) (|.| >> 12) + (a << 6)   wrapped once into (-2^23, 2^23]
                  v = sgn(v*(4096-dv)) (|.| >> 12) + u + (bias_mant << bias_exp)  clipped to +-(2^23-1)
                  s = v > (vth << 6)                                 (strict)
                  v[s] = v_reset (zero)   |   v[s] -= vth << 6 (subtract: spikec's custom process)
                "v"/"u" read out the state after the step; "flags" is a per-step bit mask:
                1 = u wrapped, 2 = v saturated, 4 = ``a << 6`` left 24 bits (so overflow is reported,
                never silent).
  lava_readout  bias (N,) int64: ``y = a + bias`` (spikec's non-spiking read-out process).
"""
import numpy as np
import torch

from spikec.compiler import interpreter
from spikec.compiler.errors import IRError
from spikec.compiler.ir import TensorType
from spikec.compiler.ops import OPS, _infer_conv, _need, _per_channel, _sizes, define

STATE_BITS = 24
M = 2 ** (STATE_BITS - 1)
FLAG_U_WRAP, FLAG_V_SAT, FLAG_ACT = 1, 2, 4
LIF_PARAMS = ("du", "dv", "vth", "bias_mant", "bias_exp")
READOUTS = ("spikes", "v", "u", "flags")


def _np(t: torch.Tensor) -> np.ndarray:
    return t.numpy().astype(np.int64, copy=False)


def _channel(p: np.ndarray, ndim: int) -> np.ndarray:
    """A () or (C,) parameter broadcast against one step ``[B, C, ...]``."""
    return p if p.ndim == 0 else p.reshape(1, -1, *([1] * (ndim - 2)))


# -- synapses ---------------------------------------------------------------------------
def _infer_dense(node, ins):
    (t,) = ins
    w = node.params["weight"]
    _need(len(t.shape) == 1 and w.ndim == 2 and w.shape[1] == t.shape[0], node,
          f"weight {w.shape} expects a ({w.shape[1]},) input, got {t.shape}")
    return TensorType((w.shape[0],))


def sign_mode(w: np.ndarray) -> str:
    """Lava's ``determine_sign_mode``: excitatory, inhibitory or mixed."""
    if w.min() >= 0:
        return "excitatory"
    if w.max() <= 0:
        return "inhibitory"
    return "mixed"


def dense_effective_weights(w: np.ndarray) -> np.ndarray:
    """The weights PyDenseModelBitAcc really multiplies: clipped to 8 bits, mixed sign loses its LSB."""
    w = np.asarray(w, dtype=np.int64)
    mode = sign_mode(w)
    if mode == "inhibitory":
        return -np.clip(-w, 0, 255)
    if mode == "excitatory":
        return np.clip(w, 0, 255)
    return (np.clip(w, -256, 255) >> 1) << 1


def _dense(node, p, x):
    w = dense_effective_weights(_np(p["weight"]))
    xs = _np(x)
    if node.attrs.get("num_message_bits", 0) == 0:
        xs = (xs != 0).astype(np.int64)
    bound = float(np.abs(w).sum(1).max(initial=0)) * float(np.abs(xs).max(initial=0))
    if bound >= 2 ** 62:
        raise IRError(f"dense sums may reach {bound:.3g} and overflow int64", where=f"node {node.name!r}")
    a = xs @ w.T
    e = node.attrs.get("weight_exp", 0)
    a = a << e if e > 0 else a >> -e
    return torch.from_numpy(np.ascontiguousarray(a))


def signed_wrap(x: np.ndarray, bits: int) -> np.ndarray:
    base = 1 << bits
    return (x + base // 2) % base - base // 2


def _conv(node, p, x):
    a = node.attrs
    xs = _np(x)
    if a.get("num_message_bits", 0) == 0:
        xs = (xs != 0).astype(np.int64)
    w = _np(p["weight"])
    bound = float(np.abs(w).reshape(w.shape[0], -1).sum(1).max(initial=0)) * float(np.abs(xs).max(initial=0))
    if bound >= interpreter.EXACT_FLOAT:
        raise IRError(f"conv sums may reach {bound:.3g} >= 2**53 and lose exactness", where=f"node {node.name!r}")
    z = torch.from_numpy(xs.astype(np.float64))
    y = torch.nn.functional.conv2d(z.flatten(0, 1), torch.from_numpy(w.astype(np.float64)), None,
                                   a["stride"], a["padding"], a["dilation"], a["groups"])
    y = torch.round(y).long().numpy().reshape(xs.shape[0], xs.shape[1], *y.shape[1:])
    return torch.from_numpy(signed_wrap(y, STATE_BITS))


# -- neurons ----------------------------------------------------------------------------
def _infer_lif(node, ins):
    (t,) = ins
    _per_channel(node, t, LIF_PARAMS + ("v_reset",))
    out = node.attrs.get("output", "spikes")
    _need(out in READOUTS, node, f"output must be one of {READOUTS}, got {out!r}")
    _need(node.attrs.get("reset") in ("zero", "subtract"), node, "reset must be 'zero' or 'subtract'")
    return TensorType(t.shape, "binary") if out == "spikes" else TensorType(t.shape)


def decay(x: np.ndarray, factor) -> np.ndarray:
    """``sgn(x * factor) * (|x * factor| >> 12)``: Lava's decay, rounding toward zero."""
    y = x * factor
    return np.sign(y) * (np.abs(y) >> 12)


class _LifOut(interpreter._NeuronOut):
    """Spikes, post-step states u and v, and overflow flags of one run; each read-out node picks one."""

    def __init__(self, shape):
        self.spikes, self.v, self.u, self.flags, self.margin = (
            torch.empty(shape, dtype=torch.int64) for _ in range(5))

    def output(self, node):
        return getattr(self, node.attrs.get("output", "spikes"))


def _lif(node, p, x):
    xs = _np(x)
    nd = xs.ndim - 1
    du, dv, vth, bm, be = (_channel(_np(p[k]), nd) for k in LIF_PARAMS)
    hard = node.attrs["reset"] == "zero"
    v_reset = _channel(_np(p["v_reset"]), nd) if "v_reset" in p else np.int64(0)
    bias = np.where(be >= 0, bm << np.maximum(be, 0), bm >> np.maximum(-be, 0))
    eff_vth = vth << 6
    fu = 4096 - ((du + 1) & 0xFFFF)   # du is a uint16 register: du = -1 gives factor 4096 (integrator)
    fv = 4096 - dv
    out = _LifOut(xs.shape)
    u = np.zeros(xs.shape[1:], dtype=np.int64)
    v = np.zeros_like(u)
    for t in range(xs.shape[0]):
        act = xs[t] << 6
        flags = np.where(np.abs(act) >= M, FLAG_ACT, 0)
        pre = decay(u, fu) + act
        u = np.where(pre > M, pre - 2 * M, pre)
        u = np.where(u <= -M, pre + 2 * M, u)
        flags |= np.where(u != pre, FLAG_U_WRAP, 0)
        pre = decay(v, fv) + u + bias
        v = np.clip(pre, -(M - 1), M - 1)
        flags |= np.where(v != pre, FLAG_V_SAT, 0)
        s = v > eff_vth
        margin = np.abs(v - eff_vth)
        v = np.where(s, v_reset if hard else v - eff_vth, v)
        for name, val in (("spikes", s.astype(np.int64)), ("v", v), ("u", u), ("flags", flags),
                          ("margin", margin)):
            getattr(out, name)[t] = torch.as_tensor(np.asarray(val, dtype=np.int64))
    return out


def _infer_readout(node, ins):
    (t,) = ins
    _need(node.params["bias"].shape == (t.shape[0],), node, f"bias must have shape ({t.shape[0]},)")
    return TensorType(t.shape)


def _readout(node, p, x):
    return x + interpreter._channel(p["bias"], x.dim() - 1)


def register() -> None:
    if "lava_lif" in OPS:
        return
    define("lava_dense", 1, _infer_dense, ("weight",), count=lambda n: _sizes(n, "weight"), synaptic=True)
    define("lava_conv", 1, _infer_conv, ("weight",), count=lambda n: _sizes(n, "weight"), synaptic=True)
    define("lava_lif", 1, _infer_lif, LIF_PARAMS, ("v_reset",), stateful=True,
           count=lambda n: 0 if n.attrs.get("output", "spikes") != "spikes" else _sizes(n, *LIF_PARAMS, "v_reset"))
    define("lava_readout", 1, _infer_readout, ("bias",), count=lambda n: _sizes(n, "bias"))
    interpreter.register_kernel("lava_dense", _dense)
    interpreter.register_kernel("lava_conv", _conv)
    interpreter.register_kernel("lava_lif", _lif)
    interpreter.register_kernel("lava_readout", _readout)


register()
