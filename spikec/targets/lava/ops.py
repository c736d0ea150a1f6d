"""Integer IR ops of the Lava target: the *integer reference* Lava's fixed-point models must match.

Each kernel repeats, in exact int64 numpy arithmetic, what the corresponding Lava 0.10.0
``fixed_pt`` ProcessModel computes for one logical step (the latency of every Lava synapse
process and the sub-step schedule are *not* part of these ops: the target accounts for them when
lowering and comparing, see ``lava/lower.py`` and ``lava/compare.py``). Written independently of Lava's
code, so comparing the two checks both. A synapse's input may be binary spikes, graded payloads
(``num_message_bits > 0``) or a sub-step stream (the ops are stateless and run on any time base).

  lava_dense    weight (N_out, N_in) int64: the values handed to ``lava.proc.dense.Dense``
                (or ``DelayDense`` when a ``delay`` node precedes it) attrs weight_exp, num_message_bits.
                PyDenseModelBitAcc: sign mode from the weights (all >= 0 / all <= 0 / mixed);
                clip to 8 bits (mixed [-256, 255]); drop the lowest bit when mixed
                (``(w >> 1) << 1``); ``a = W[:, s != 0].sum(1)`` for binary input (``W @ s`` when
                num_message_bits > 0); ``a << weight_exp`` or floor ``a >> -weight_exp``.
  lava_conv     weight (C_out, C_in/groups, kH, kW) int64, *PyTorch* layout and orientation (the
                emitter flips and transposes it for Lava's true convolution in (W, H, C) layout)
                attrs stride, padding, dilation, groups, num_message_bits. PyConvModelFixed:
                binary input read as ``s != 0``; the sum wraps to signed 24 bits; weight_exp and
                weight truncation do not apply.
  lava_lif      du, dv, vth, bias_mant, bias_exp: () or (C,) int64; optional v_reset (hard reset) and
                bias_u (a current bias: added to the synaptic sum a, before ``<< 6``);
                attr reset (below); attr fire "gt" (default) | "ge" | "never" (a read-out integrator: its
                population node has attr primary and reads state "v"); attr output "spikes" | "membrane"
                (the IR's vocabulary) and, for a read of a state after the step, attr state "v" | "u" |
                "flags" with output "membrane" (``output_of``). PyLifModelBitAcc, one step (input a =
                synaptic sum of this step):
                  r = v > theta                     (theta = vth << 6; the previous step's state: delayed resets)
                  u = sgn(u*(4096-(du+1))) (|.| >> 12) + ((a + bias_u) << 6)   wrapped once into (-2^23, 2^23]
                  v = sgn(v*(4096-dv)) (|.| >> 12) + u + (bias_mant << bias_exp)  clipped to +-(2^23-1)
                  delayed_subtract: v = max(v - r theta, -(2^23-1))   delayed_zero: v[r] = 0
                  s = v > theta   (fire "ge": v >= theta);   snntorch_subtract: s = v - r theta > theta
                  reset zero: v[s] = v_reset;  subtract: v[s] -= theta;  snntorch_subtract: v -= s theta;
                  none, delayed_*: no reset after the spike
                recurrence (snnTorch RLeaky / RSynaptic): optional rec_weight, attr recurrent "dense" (N, N),
                [out, in], with rec_weight_exp, as Lava's Dense applies them) | "conv" ((C, C, kh, kw), PyTorch
                layout, stride 1, attr rec_padding, wrapped to 24 bits like lava_conv): the synapse from the
                population's s_out back to its own a_in. Lava's Dense and Conv send the sum of the spikes they
                received one Lava step before, so the loop's latency is one Lava step, inside the next window:
                step t's input is ``a = x_t + rec(s_{t-1})`` (s_{-1} = 0), before ``+ bias_u``. A subtract
                reset with the membrane in u (current_reset.py): optional scalar reset_weight (8-bit, one sign)
                << attr reset_weight_exp from each neuron onto itself, Lava's Sparse identity with the same
                one-step latency: ``a = x_t + rec(s_{t-1}) + (reset_weight << e) s_{t-1}``; with attr ladder D
                (count_ladder.py: D copies, copy-major on the first axis) from every copy of a neuron onto every
                copy of it: ``(reset_weight << e) sum_q s_{q, t-1}``.
                ("zero" is Lava's LIF; the rest spikec's SpikecLIF. The delayed kinds are snnTorch's reset_delay:
                the reset of a spike acts after the next step's decay.) "v"/"u" read out the state after the
                step, "membrane" v before the reset that follows the spike (after a delayed one); "flags" is a
                per-step bit mask: 1 = u wrapped, 2 = v saturated, 4 = ``a << 6`` left 24 bits (so
                overflow is reported, never silent).
  lava_intfire  the integer-firing neuron (semantics.md 1.2) on LIF's sub-threshold arithmetic (same
                params; vth > 0); attrs max_spikes D, rounding "round" | "floor", unrolled (bool):
                  theta = vth << 6;  S = clip(floor((v + theta/2) / theta), 0, D)  (floor: no theta/2)
                  v -= S * theta;  v = max(v, v_min)  (optional v_min: Sinabs's min_v_mem)
                ``unrolled=False``: the spikes are the graded payload S (integer <= D) on physical steps;
                ``unrolled=True``: binary spikes on D sub-steps per step, the thermometer code
                ``s_d = [d < S]`` (the unrolled form of passes.md; its sum over the D sub-steps is S).
  lava_silif    SiLIF (semantics.md 1.3) in fixed point: decay A (12-bit fraction, 4096 = 1), kappa K
                (the reset in v units), vth, bias_mant, bias_exp; states v and the previous spike:
                  v = sgn((v - K s)*A) (|.| >> 12) + (a << 6) + bias, clipped;  s = v >= (vth << 6)
  lava_csilif   CSiLIF: the complex state as two integer states v (real) and w (imaginary),
                decays a_re, a_im (signed 12-bit fractions), kappa, vth, bias:
                  z = v - K s;  v = dec(z, a_re) - dec(w, a_im) + (a << 6) + bias;  w = dec(w, a_re) + dec(z, a_im)
                  s = v >= (vth << 6)            (dec(x, f) = sgn(x f) (|x f| >> 12); both clipped)
  lava_or       max pooling over binary spikes: ``s = a > 0`` on the sum of an all-ones window (exactly
                Lava's LIF with du = dv = 4095, vth = 0 on non-negative input; stateless, any time base).
  lava_readout  bias (N,) int64: ``y = a + bias`` (spikec's non-spiking read-out process).
  lava_host     a dense float op on the host (attrs op, attrs, per input ``gain{i}``): chip inputs are
                integers divided by their gain; evaluated step by step and sample by sample by
                ``host.host_step`` (the very function the Lava host process calls); float64 out.
  lava_quant    gain () or (C,) float, attr bits: ``round_half_up(x * gain)`` to integers (clipped to a
                signed ``bits``-bit payload when bits > 0): what a host process sends to the chip.
"""
import numpy as np
import torch

from spikec.ir.errors import IRError
from spikec.ir.graph import Graph, TensorType
from spikec.ops import OPS, PER_CHANNEL, Param, define, register_kernel
from spikec.ops.common import EXACT_FLOAT, NeuronOut, channel, per_channel as _per_channel, sizes as _sizes
from spikec.ops.registry import need as _need
from spikec.ops.synapses import infer_conv as _infer_conv

STATE_BITS = 24
M = 2 ** (STATE_BITS - 1)
FLAG_U_WRAP, FLAG_V_SAT, FLAG_ACT = 1, 2, 4
LIF_PARAMS = ("du", "dv", "vth", "bias_mant", "bias_exp")
SILIF_PARAMS = ("decay", "vth", "kappa", "bias_mant", "bias_exp")
CSILIF_PARAMS = ("a_re", "a_im", "vth", "kappa", "bias_mant", "bias_exp")
READOUTS = ("spikes", "v", "u", "flags", "membrane")
STATE_AFTER = ("v", "u", "flags")   # attr ``state``: read after the step (``membrane`` alone: v before the reset)
LIF_RESETS = ("zero", "subtract", "none", "delayed_subtract", "delayed_zero", "snntorch_subtract")
LAVA_DOCS = {"du": "current decay (4096 = all)", "dv": "voltage decay (4096 = all)", "vth": "threshold mantissa "
             "(compared as vth << 6)", "bias_mant": "bias mantissa", "bias_exp": "bias exponent",
             "v_reset": "voltage after a spike (hard reset)", "bias_u": "current bias (added to a, weight units)", "decay": "decay A (12-bit fraction, 4096 = 1)",
             "kappa": "reset K in v units", "a_re": "real decay (signed 12-bit fraction)",
             "a_im": "imaginary decay (signed 12-bit fraction)"}


def _schema(names) -> tuple:
    """Integer neuron parameters: a scalar or one value per channel."""
    return tuple(Param(n, PER_CHANNEL, LAVA_DOCS[n]) for n in names)
# the populations with state: op -> state variables compared at the end of a run (Lava Var names)
STATES = {"lava_lif": ("v", "u"), "lava_intfire": ("v", "u"), "lava_silif": ("v",), "lava_csilif": ("v", "w")}


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


def weight_shift(a: np.ndarray, e: int) -> np.ndarray:
    """Lava's Dense / Sparse ``weight_exp`` on the accumulated sum: ``a << e``, or a floor ``a >> -e``."""
    return a << e if e > 0 else a >> -e


def _dense(node, p, x):
    w = dense_effective_weights(_np(p["weight"]))
    xs = _np(x)
    if node.attrs.get("num_message_bits", 0) == 0:
        xs = (xs != 0).astype(np.int64)
    bound = float(np.abs(w).sum(1).max(initial=0)) * float(np.abs(xs).max(initial=0))
    if bound >= 2 ** 62:
        raise IRError(f"dense sums may reach {bound:.3g} and overflow int64", where=f"node {node.name!r}")
    a = weight_shift(xs @ w.T, node.attrs.get("weight_exp", 0))
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
    if bound >= EXACT_FLOAT:
        raise IRError(f"conv sums may reach {bound:.3g} >= 2**53 and lose exactness", where=f"node {node.name!r}")
    z = torch.from_numpy(xs.astype(np.float64))
    y = torch.nn.functional.conv2d(z.flatten(0, 1), torch.from_numpy(w.astype(np.float64)), None,
                                   a["stride"], a["padding"], a["dilation"], a["groups"])
    y = torch.round(y).long().numpy().reshape(xs.shape[0], xs.shape[1], *y.shape[1:])
    return torch.from_numpy(signed_wrap(y, STATE_BITS))


# -- neurons ----------------------------------------------------------------------------
def _infer_neuron(names, spikes):
    def infer(node, ins):
        (t,) = ins
        _per_channel(node, t, names)
        out = node.attrs.get("output", "spikes")
        _need(out in ("spikes", "membrane"), node, f"output must be 'spikes' or 'membrane', got {out!r}")
        _need(node.attrs.get("state", "v") in STATE_AFTER and ("state" not in node.attrs or out == "membrane"),
              node, f"state must be one of {STATE_AFTER}, read with output 'membrane'")
        _need(t.substeps == 1, node, "a neuron population integrates physical steps")
        return spikes(node, t) if out == "spikes" else TensorType(t.shape)
    return infer


def _infer_lif(node, ins):
    _need(node.attrs.get("reset") in LIF_RESETS, node, f"reset must be one of {LIF_RESETS}")
    _need(node.attrs.get("fire", "gt") in ("gt", "ge", "never"), node, "fire must be 'gt', 'ge' or 'never'")
    kind, w = node.attrs.get("recurrent"), node.params.get("rec_weight")
    _need(kind in (None, "dense", "conv") and (kind is None) == (w is None), node,
          "a recurrence needs attr recurrent ('dense' | 'conv') and param rec_weight together")
    _need(np.ndim(node.params.get("reset_weight", 0)) == 0, node, "reset_weight is one scalar weight")
    _need(ins[0].shape[0] % int(node.attrs.get("ladder", 1)) == 0, node, "a ladder's copies split its first axis")
    if kind is not None:
        shape = ins[0].shape
        want = (int(np.prod(shape)),) * 2 if kind == "dense" else (shape[0], shape[0])
        _need(tuple(w.shape[:2]) == want and w.ndim == (2 if kind == "dense" else 4), node,
              f"rec_weight {tuple(w.shape)} does not map the population {shape} onto itself")
    return _infer_neuron(LIF_PARAMS + ("v_reset", "bias_u"), lambda n, t: TensorType(t.shape, "binary"))(node, ins)


def _intfire_spikes(node, t):
    d = node.attrs["max_spikes"]
    return TensorType(t.shape, "binary", None, d) if node.attrs.get("unrolled") else TensorType(t.shape, "integer", d)


def decay(x: np.ndarray, factor) -> np.ndarray:
    """``sgn(x * factor) * (|x * factor| >> 12)``: Lava's decay, rounding toward zero."""
    y = x * factor
    return np.sign(y) * (np.abs(y) >> 12)


class _StateOut(NeuronOut):
    """Per-step outputs of one population run (spikes, states, flags, margin); each read-out node picks one."""

    def __init__(self, shape, names, spike_steps=None):
        for name in names + ("spikes", "flags", "margin", "membrane"):
            steps = spike_steps if name in ("spikes", "margin") and spike_steps else shape[0]
            setattr(self, name, torch.empty((steps,) + tuple(shape[1:]), dtype=torch.int64))

    def output(self, node):
        return getattr(self, output_of(node))

    def put(self, t, **values):
        for name, val in values.items():
            getattr(self, name)[t] = torch.as_tensor(np.asarray(val, dtype=np.int64))


def bias_value(bm, be):
    """The bias Lava's LIF adds to ``v`` every step: ``bias_mant << bias_exp`` (a floor shift for a negative exponent)."""
    return np.where(be >= 0, bm << np.maximum(be, 0), bm >> np.maximum(-be, 0))


def _lif_subthreshold(u, v, xs_t, fu, fv, bias):
    """Lava's LIF sub-threshold update of one step; returns (u, v, flags)."""
    act = xs_t << 6
    flags = np.where(np.abs(act) >= M, FLAG_ACT, 0)
    pre = decay(u, fu) + act
    u = np.where(pre > M, pre - 2 * M, pre)
    u = np.where(u <= -M, pre + 2 * M, u)
    flags |= np.where(u != pre, FLAG_U_WRAP, 0)
    pre = decay(v, fv) + u + bias
    v = np.clip(pre, -(M - 1), M - 1)
    flags |= np.where(v != pre, FLAG_V_SAT, 0)
    return u, v, flags


def _lif_params(node, p, nd):
    du, dv, vth, bm, be = (_channel(_np(p[k]), nd) for k in LIF_PARAMS)
    fu = 4096 - ((du + 1) & 0xFFFF)   # du is a uint16 register: du = -1 gives factor 4096 (integrator)
    return fu, 4096 - dv, vth << 6, bias_value(bm, be)


def _recurrence(node, p):
    """``rec(s)``: the integer sum the population's self-synapse delivers for spikes ``s`` ``[B, ...]``, or None."""
    kind = node.attrs.get("recurrent")
    if not kind:
        return None
    w = _np(p["rec_weight"])
    if kind == "dense":
        w, e = dense_effective_weights(w), int(node.attrs.get("rec_weight_exp", 0))
        return lambda s: weight_shift((s != 0).astype(np.int64) @ w.T, e)
    wt, pad = torch.from_numpy(w.astype(np.float64)), tuple(node.attrs["rec_padding"])
    return lambda s: signed_wrap(torch.round(torch.nn.functional.conv2d(
        torch.from_numpy((s != 0).astype(np.float64)), wt, None, 1, pad)).long().numpy(), STATE_BITS)


def _reset_synapse(node, p):
    """``(reset_weight << e) s``: the diagonal self-synapse of a subtract reset with the membrane in u (Lava's Sparse
    identity, its weight clipped to 8 bits of one sign as Lava applies it), or None."""
    if "reset_weight" not in p:
        return None
    w, e = dense_effective_weights(_np(p["reset_weight"])), int(node.attrs.get("reset_weight_exp", 0))
    d = int(node.attrs.get(LADDER, 1))   # count_ladder.py: every copy of a neuron onto every copy of it
    if d == 1:
        return lambda s: weight_shift((s != 0).astype(np.int64) * w, e)

    def ladder(s):
        n = (s != 0).astype(np.int64).reshape(s.shape[0], d, -1).sum(1, keepdims=True)
        return weight_shift(np.broadcast_to(n * w, (s.shape[0], d, n.shape[2])).reshape(s.shape), e)
    return ladder


def _lif(node, p, x):
    xs = _np(x)
    nd = xs.ndim - 1
    fu, fv, eff_vth, bias = _lif_params(node, p, nd)
    rec, rst = _recurrence(node, p), _reset_synapse(node, p)
    kind = node.attrs["reset"]
    fire = node.attrs.get("fire", "gt")
    level = eff_vth - 1 if fire == "ge" else np.int64(2 ** 62) if fire == "never" else eff_vth   # s = v > level
    v_reset = _channel(_np(p["v_reset"]), nd) if "v_reset" in p else np.int64(0)
    bias_u = _channel(_np(p["bias_u"]), nd) if "bias_u" in p else np.int64(0)
    out = _StateOut(xs.shape, ("v", "u"))
    u = np.zeros(xs.shape[1:], dtype=np.int64)
    v = np.zeros_like(u)
    s = np.zeros_like(u)
    for t in range(xs.shape[0]):
        r = v > level
        a = xs[t] if rec is None else xs[t] + rec(s)   # the self-synapse: the previous step's spikes
        if rst is not None:
            a = a + rst(s)
        u, v, flags = _lif_subthreshold(u, v, a + bias_u, fu, fv, bias)
        if kind == "delayed_subtract":
            pre = np.where(r, v - eff_vth, v)
            v = np.maximum(pre, -(M - 1))
            flags |= np.where(v != pre, FLAG_V_SAT, 0)
        elif kind == "delayed_zero":
            v = np.where(r, 0, v)
        fired = np.where(r, v - eff_vth, v) if kind == "snntorch_subtract" else v
        s = fired > level
        out.put(t, membrane=v, margin=np.abs(fired - eff_vth))
        if kind == "zero":
            v = np.where(s, v_reset, v)
        elif kind in ("subtract", "snntorch_subtract"):
            v = np.where(s, v - eff_vth, v)
        out.put(t, spikes=s, v=v, u=u, flags=flags)
    return out


def _intfire(node, p, x):
    xs = _np(x)
    nd = xs.ndim - 1
    fu, fv, theta, bias = _lif_params(node, p, nd)
    d_max = node.attrs["max_spikes"]
    half = theta // 2 if node.attrs["rounding"] == "round" else 0
    unrolled = bool(node.attrs.get("unrolled"))
    v_min = _channel(_np(p["v_min"]), nd) if "v_min" in p else None   # Sinabs's min_v_mem, after the reset
    t_steps = xs.shape[0]
    out = _StateOut(xs.shape, ("v", "u"), t_steps * d_max if unrolled else None)
    u = np.zeros(xs.shape[1:], dtype=np.int64)
    v = np.zeros_like(u)
    for t in range(t_steps):
        u, v, flags = _lif_subthreshold(u, v, xs[t], fu, fv, bias)
        z = v + half
        q = np.clip(np.floor_divide(z, theta), 0, d_max)
        r = np.mod(z, theta)
        margin = np.minimum(r, theta - r)
        out.put(t, membrane=v)
        v = v - q * theta if v_min is None else np.maximum(v - q * theta, v_min)
        out.put(t, v=v, u=u, flags=flags)
        if unrolled:
            for d in range(d_max):
                out.put(t * d_max + d, spikes=q > d, margin=margin)
        else:
            out.put(t, spikes=q, margin=margin)
    return out


def _silif(node, p, x):
    xs = _np(x)
    nd = xs.ndim - 1
    a, vth, k, bm, be = (_channel(_np(p[n]), nd) for n in SILIF_PARAMS)
    bias, theta = bias_value(bm, be), vth << 6
    out = _StateOut(xs.shape, ("v",))
    v = np.zeros(xs.shape[1:], dtype=np.int64)
    s = np.zeros_like(v)
    for t in range(xs.shape[0]):
        act = xs[t] << 6
        flags = np.where(np.abs(act) >= M, FLAG_ACT, 0)
        pre = decay(v - k * s, a) + act + bias
        v = np.clip(pre, -(M - 1), M - 1)
        flags |= np.where(v != pre, FLAG_V_SAT, 0)
        s = (v >= theta).astype(np.int64)
        out.put(t, spikes=s, v=v, flags=flags, membrane=v, margin=np.abs(v - theta))
    return out


def _csilif(node, p, x):
    xs = _np(x)
    nd = xs.ndim - 1
    are, aim, vth, k, bm, be = (_channel(_np(p[n]), nd) for n in CSILIF_PARAMS)
    bias, theta = bias_value(bm, be), vth << 6
    out = _StateOut(xs.shape, ("v", "w"))
    v = np.zeros(xs.shape[1:], dtype=np.int64)
    w = np.zeros_like(v)
    s = np.zeros_like(v)
    for t in range(xs.shape[0]):
        act = xs[t] << 6
        flags = np.where(np.abs(act) >= M, FLAG_ACT, 0)
        z = v - k * s
        pre_v = decay(z, are) - decay(w, aim) + act + bias
        pre_w = decay(w, are) + decay(z, aim)
        v = np.clip(pre_v, -(M - 1), M - 1)
        w = np.clip(pre_w, -(M - 1), M - 1)
        flags |= np.where((v != pre_v) | (w != pre_w), FLAG_V_SAT, 0)
        s = (v >= theta).astype(np.int64)
        out.put(t, spikes=s, v=v, w=w, flags=flags, membrane=v, margin=np.abs(v - theta))
    return out


def _or(node, p, x):
    return (x > 0).long()


def _infer_readout(node, ins):
    (t,) = ins
    _need(node.params["bias"].shape == (t.shape[0],), node, f"bias must have shape ({t.shape[0]},)")
    return TensorType(t.shape)


def _readout(node, p, x):
    return x + channel(p["bias"], x.dim() - 1)


# -- host partition ----------------------------------------------------------------------
def _infer_host(node, ins):
    from spikec.targets.lava import host
    return TensorType(host.out_shape(node.attrs["op"], node, ins))


def _host(node, p, *xs):
    from spikec.targets.lava import host
    ins = []
    for i, x in enumerate(xs):
        v = x.numpy().astype(np.float64)
        g = p.get(f"gain{i}")
        ins.append(v if g is None else v / channel(g, v.ndim - 1).numpy())
    steps = ins[0].shape[0]
    past = host.stateful(node.attrs["op"])   # a stateful host op is given its inputs' history
    outs = [host.host_step(node.attrs["op"], dict(node.attrs["attrs"]), host.params_of(node), t,
                           [v[:t + 1] if past else v[t] for v in ins]) for t in range(steps)]
    return torch.from_numpy(np.stack(outs))


def quantize_values(x: np.ndarray, gain, bits: int) -> np.ndarray:
    """Round half up ``x * gain`` to int64; clipped to a signed ``bits``-bit payload when ``bits > 0``."""
    y = np.floor(np.asarray(x, dtype=np.float64) * gain + 0.5)
    if bits > 0:
        lim = 2 ** (bits - 1) - 1
        y = np.clip(y, -lim, lim)
    return y.astype(np.int64)


def _quant(node, p, x):
    g = channel(p["gain"], x.dim() - 1).numpy()
    return torch.from_numpy(quantize_values(x.numpy(), g, node.attrs.get("bits", 0)))


def _infer_quant(node, ins):
    (t,) = ins
    _per_channel(node, t, ("gain",))
    return TensorType(t.shape)


def register() -> None:
    if "lava_lif" in OPS:
        return
    define("lava_dense", 1, _infer_dense, count=lambda n: _sizes(n, "weight"), synaptic=True,
           params=(Param("weight", "(N_out, N_in)", "int64 values handed to Lava's Dense"),),
           doc="Lava's Dense / DelayDense (PyDenseModelBitAcc); attrs weight_exp, num_message_bits")
    define("lava_conv", 1, _infer_conv, count=lambda n: _sizes(n, "weight"), synaptic=True,
           params=(Param("weight", "(C_out, C_in/groups, kH, kW)", "int64, PyTorch layout and orientation"),),
           doc="Lava's Conv (PyConvModelFixed); attrs stride, padding, dilation, groups, num_message_bits")
    neuron_count = lambda *names: (lambda n: 0 if not primary(n)
                                   else _sizes(n, *names))
    define("lava_lif", 1, _infer_lif, stateful=True,
           count=neuron_count(*LIF_PARAMS, "v_reset", "bias_u", "rec_weight", "reset_weight"),
           params=_schema(LIF_PARAMS) + tuple(Param(k, PER_CHANNEL, LAVA_DOCS[k], required=False)
                                              for k in ("v_reset", "bias_u"))
           + (Param("rec_weight", "(N, N) or (C, C, kH, kW)", "int64 self-synapse weights (recurrence)",
                    required=False),
              Param("reset_weight", "()", "int64 weight of the subtract reset's self-synapse (membrane in u; "
                    "diagonal, or a count ladder's copies onto copies)",
                    required=False)),
           doc="Lava's LIF (PyLifModelBitAcc) or spikec's SpikecLIF; attrs reset, output, process")
    # like intfire_unrolled, lava_intfire defines its output's time base (D sub-steps)
    define("lava_intfire", 1, _infer_neuron(LIF_PARAMS + ("v_min",), _intfire_spikes), stateful=True,
           count=neuron_count(*LIF_PARAMS, "v_min"), time_base=True,
           params=_schema(LIF_PARAMS) + (Param("v_min", PER_CHANNEL, "lower clamp of v after the reset (Sinabs's "
                                               "min_v_mem)", required=False),),
           doc="the integer-firing neuron on LIF's arithmetic; attrs max_spikes, rounding, unrolled")
    define("lava_silif", 1, _infer_neuron(SILIF_PARAMS, lambda n, t: TensorType(t.shape, "binary")),
           stateful=True, count=neuron_count(*SILIF_PARAMS), params=_schema(SILIF_PARAMS),
           doc="SiLIF in fixed point (SpikecSiLIF)")
    define("lava_csilif", 1, _infer_neuron(CSILIF_PARAMS, lambda n, t: TensorType(t.shape, "binary")),
           stateful=True, count=neuron_count(*CSILIF_PARAMS), params=_schema(CSILIF_PARAMS),
           doc="CSiLIF as two integer states (SpikecCSiLIF)")
    define("lava_or", 1, lambda n, i: TensorType(i[0].shape, "binary"), doc="max pooling over binary spikes (OR)")
    define("lava_readout", 1, _infer_readout, count=lambda n: _sizes(n, "bias"),
           params=(Param("bias", "(C,)", "int64, added to the synaptic sum"),), doc="y = a + bias (a read-out)")
    for arity in (1, 2, 3):
        define(f"lava_host{arity}" if arity > 1 else "lava_host", arity, _infer_host, (),
               tuple(f"gain{i}" for i in range(arity)) + HOST_PARAMS, dense=True, stateful=True,
               doc="a dense float op on the host; attrs op, attrs, region")
    define("lava_quant", 1, _infer_quant, count=lambda n: 0,
           params=(Param("gain", PER_CHANNEL, "integer units per float unit"),),
           doc="round_half_up(x * gain): what a host sends to the chip; attr bits")
    register_kernel("lava_dense", _dense)
    register_kernel("lava_conv", _conv)
    register_kernel("lava_lif", _lif)
    register_kernel("lava_intfire", _intfire)
    register_kernel("lava_silif", _silif)
    register_kernel("lava_csilif", _csilif)
    register_kernel("lava_or", _or)
    register_kernel("lava_readout", _readout)
    for op in ("lava_host", "lava_host2", "lava_host3"):
        register_kernel(op, _host)
    register_kernel("lava_quant", _quant)


# parameters a wrapped host op may carry (prefixed "p_" to keep them apart from the input gains)
HOST_PARAMS = tuple(f"p_{k}" for k in ("wq", "wk", "wv", "gamma", "beta", "mean", "var", "lam", "bias", "weight",
                                        "threshold", "alpha", "bn_gamma", "bn_beta", "bn_mean", "bn_var"))
HOST_OPS = ("lava_host", "lava_host2", "lava_host3")


def host_op(arity: int) -> str:
    return "lava_host" if arity == 1 else f"lava_host{arity}"


LADDER = "ladder"   # attr of a count ladder's lava_lif (count_ladder.py): its D copies, copy-major on the first axis


def ladder_counts(graph, values: dict) -> dict:
    """``values`` with each count ladder's D copies summed back into the neuron's count (``[T, B, D C, ...]`` ->
    ``[T, B, C, ...]``), as the host reads a ladder's output."""
    out = dict(values)
    for n in graph.nodes:
        if n.attrs.get(LADDER) and n.name in values:
            out[n.name] = sum_copies(values[n.name], int(n.attrs[LADDER]))
    return out


def sum_copies(s, d: int) -> np.ndarray:
    """``[T, B, D C, ...]`` copy-major spikes of a count ladder -> the counts ``[T, B, C, ...]``."""
    s = np.asarray(s)
    return s.reshape(s.shape[:2] + (d, -1)).astype(np.int64).sum(2).reshape(
        s.shape[:2] + (s.shape[2] // d,) + s.shape[3:])


def output_of(n) -> str:
    """What population node ``n`` outputs (one of ``READOUTS``): ``spikes``, ``membrane`` (v before the reset), or
    the state ``v`` / ``u`` / ``flags`` after the step. A state is written ``output="membrane", state=...``: the IR
    verifier knows only spikes and membranes as outputs, and every consumer of the IR reads it as a membrane (no
    spikes, no parameters of its own)."""
    return n.attrs.get("state") or n.attrs.get("output", "spikes")


def output_attrs(attrs: dict, what: str) -> dict:
    """``attrs`` of a population node set to output ``what`` (one of ``READOUTS``)."""
    attrs = {k: v for k, v in attrs.items() if k != "state"}
    return dict(attrs, output="membrane", state=what) if what in STATE_AFTER else dict(attrs, output=what)


def primary(n) -> bool:
    """The node that is a population (not a state read-out twin of one): its spikes, or a read-out integrator."""
    return output_of(n) == "spikes" or bool(n.attrs.get("primary"))


def twin(n, name: str, output: str):
    """The state read-out twin ``name`` of population node ``n``: the same run, output ``output`` (``READOUTS``)."""
    attrs = {k: v for k, v in n.attrs.items() if k != "primary"}
    return n.with_(name=name, attrs=output_attrs(attrs, output), type=TensorType(n.type.shape))


def with_readouts(qgraph: Graph, what=None) -> Graph:
    """``qgraph`` plus state read-out twins ``<population>.<state>`` (states of ``STATES``, ``flags``,
    ``membrane``) of every neuron population (the same dynamics run once)."""
    nodes, names = [], {n.name for n in qgraph.nodes}
    for n in qgraph.nodes:
        nodes.append(n)
        if n.op in STATES and primary(n):
            for w in (what or STATES[n.op] + ("flags", "membrane")):
                if w not in STATES[n.op] + ("flags", "membrane") or f"{n.name}.{w}" in names:
                    continue
                nodes.append(twin(n, f"{n.name}.{w}", w))
    return Graph(tuple(nodes), qgraph.outputs, qgraph.meta)


register()
