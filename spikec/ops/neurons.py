"""Neurons: membrane dynamics, a threshold, spikes, and the firing margin ``|U - boundary|``.

Parameters are a scalar or one value per channel, ``()`` or ``(C,)`` (``shape[0]`` of the step).
  lif        beta, alpha, bias, threshold, v_reset; attr reset "subtract" | "zero"
             U_t = beta H_{t-1} + alpha X_t + bias; S_t = [U_t >= threshold];
             H_t = U_t - threshold S_t (subtract) or U_t (1 - S_t) + v_reset S_t (zero)
  intfire    beta, alpha, threshold, optional bias; attrs max_spikes D, rounding "round" | "floor"
             q_t = clamp(floor(U_t / threshold + 1/2 or 0), 0, D); H_t = U_t - threshold q_t
  silif      decay, b, threshold, (C,) as trained; attr kappa u_t = decay (u_{t-1} - kappa s_{t-1}) + b x_t
  csilif     a_re, a_im, b, threshold (C,) as trained; kappa  complex m_t = a (m_{t-1} - kappa s_{t-1}) + b x_t, u = 2 Re m
  intfire_unrolled  as intfire, its count replayed as D binary sub-step spikes (a new time base)
  substep_sum       sums the D sub-steps of each physical step, plus an optional per-channel bias once
Neurons take attr ``output``: "spikes" (default) or "membrane" (the pre-reset ``U``, real).
"""
import numpy as np
import torch

from spikec.ir.graph import TensorType
from spikec.ops.common import NeuronOut, channel, float_only, per_channel, sizes
from spikec.ops.registry import PER_CHANNEL, Decay, Param, decay_params, define, f64, need

LIF_PARAMS = ("beta", "alpha", "bias", "threshold", "v_reset")
INTFIRE_PARAMS = ("beta", "alpha", "threshold")
THRESHOLD = Param("threshold", PER_CHANNEL, "firing threshold")
LIF_SCHEMA = (Param("beta", PER_CHANNEL, "membrane decay"), Param("alpha", PER_CHANNEL, "input gain"),
              Param("bias", PER_CHANNEL, "constant input per step"), THRESHOLD,
              Param("v_reset", PER_CHANNEL, "membrane after a spike (reset 'zero')"))
INTFIRE_SCHEMA = LIF_SCHEMA[:2] + (THRESHOLD, Param("bias", PER_CHANNEL, "constant input (a folded BN's shift)",
                                                    required=False),
                                   Param("v_min", PER_CHANNEL, "lower bound of the residual after the reset, "
                                         "relu(h - v_min) + v_min (Sinabs's min_v_mem)", required=False))
SILIF_SCHEMA = (Param("decay", PER_CHANNEL, "membrane decay a"), Param("b", PER_CHANNEL, "input gain"), THRESHOLD)
CSILIF_SCHEMA = (Param("a_re", PER_CHANNEL, "real part of the complex decay"),
                 Param("a_im", PER_CHANNEL, "imaginary part of the complex decay"),
                 Param("b", PER_CHANNEL, "input gain"), Param("threshold", PER_CHANNEL, "firing threshold on 2 Re m"))


def neuron_type(names, spikes):
    """Type inference of a neuron: per-channel parameters, and spikes or the real membrane."""
    def infer(node, ins):
        (t,) = ins
        per_channel(node, t, names)
        output = node.attrs.get("output", "spikes")
        need(output in ("spikes", "membrane"), node, f"output must be 'spikes' or 'membrane', got {output!r}")
        return spikes(node, t) if output == "spikes" else TensorType(t.shape)
    return infer


def _binary(node, t):
    return TensorType(t.shape, "binary")


def lif(ctx, node, p, x):
    """``U_t = (beta H + alpha X_t) + bias`` written in place (``alpha X`` of every step first, into ``membrane``):
    the values of the literal per-step expressions (``tests/ops/test_neurons.py`` checks the bits)."""
    float_only(ctx, node)
    beta, alpha, bias, theta, v_reset = (channel(p[k], x.dim() - 1) for k in LIF_PARAMS)
    out = NeuronOut(x)
    torch.mul(alpha, x, out=out.membrane)
    h, tmp = torch.zeros_like(x[0]), torch.empty_like(x[0])
    subtract = node.attrs["reset"] == "subtract"
    for t in range(x.shape[0]):
        u = out.membrane[t].add_(torch.mul(beta, h, out=tmp)).add_(bias)
        s = out.fire(t, theta)
        if subtract:  # H = U - theta S
            torch.sub(u, torch.mul(theta, s, out=tmp), out=h)
        else:  # H = U (1 - S) + v_reset S; 1 - S is -S + 1 exactly for S in {0, 1}
            torch.mul(u, torch.mul(s, -1, out=tmp).add_(1), out=h).add_(torch.mul(v_reset, s, out=tmp))
    return out.finish()


def _integer_update(node, p, x):
    """The integer neuron's per-step count ``q``, residual and margin, as a generator over t."""
    beta, alpha, theta = (channel(p[k], x.dim() - 1) for k in INTFIRE_PARAMS)
    offset = 0.5 if node.attrs["rounding"] == "round" else 0.0
    bias = channel(p["bias"], x.dim() - 1) if "bias" in p else None
    v_min = channel(p["v_min"], x.dim() - 1) if "v_min" in p else None
    h = torch.zeros_like(x[0])
    for t in range(x.shape[0]):
        u = beta * h + alpha * x[t] if bias is None else beta * h + alpha * x[t] + bias
        z = u / theta
        q = torch.clamp(torch.floor(z + offset), 0, node.attrs["max_spikes"])
        h = u - theta * q
        if v_min is not None:   # Sinabs's own formula (not max(h, v_min)): the same float64 rounding
            h = torch.relu(h - v_min) + v_min
        frac = z + offset - torch.floor(z + offset)
        yield t, q, u, torch.minimum(frac, 1 - frac) * theta


def intfire(ctx, node, p, x):
    float_only(ctx, node)
    out = NeuronOut(x)
    for t, q, u, margin in _integer_update(node, p, x):
        out.put(t, q, u, margin)
    return out


def intfire_unrolled(ctx, node, p, x):
    """The integer neuron's physical-step update, its count replayed as D binary sub-step spikes.

    The count ``q`` and residual are computed exactly as ``intfire`` computes them, and the sub-step
    spikes are the thermometer code ``s_d = [d < q]``: what the sub-step neuron (``v = U + theta/2``;
    ``s_d = [v >= theta]``; ``v -= theta s_d``) emits in exact arithmetic. In float64 that neuron's
    repeated subtraction can round a decimal tie differently from ``floor(U/theta + 1/2)``; the
    fixed-point targets run it in integers, where both agree.
    """
    float_only(ctx, node)
    d_max = node.attrs["max_spikes"]
    spikes = torch.empty((x.shape[0] * d_max, *x.shape[1:]), dtype=x.dtype)
    margin = torch.empty_like(spikes)
    for t, q, _, m in _integer_update(node, p, x):
        for d in range(d_max):
            spikes[t * d_max + d] = (q > d).to(x.dtype)
            margin[t * d_max + d] = m
    return spikes, margin


def silif(ctx, node, p, x):
    """In place, as ``lif``: ``b x`` of every step first into ``membrane``, then ``U_t = a (U_{t-1} - kappa S_{t-1})
    + b x_t`` over it."""
    float_only(ctx, node)
    a, b, v_th = (channel(p[k], x.dim() - 1) for k in ("decay", "b", "threshold"))
    kappa = node.attrs["kappa"]
    out = NeuronOut(x)
    torch.mul(b, x, out=out.membrane)
    u, s, tmp = torch.zeros_like(x[0]), torch.zeros_like(x[0]), torch.empty_like(x[0])
    for t in range(x.shape[0]):
        z = torch.sub(u, torch.mul(s, kappa, out=tmp), out=tmp)
        u = out.membrane[t].add_(z.mul_(a))
        s = out.fire(t, v_th)
    return out.finish()


def csilif(ctx, node, p, x):
    """In place, as ``silif``, over four step buffers: ``z = m_re - kappa s``; ``m_re' = (a_re z - a_im m_im) + b x_t``;
    ``m_im' = a_re m_im + a_im z``; ``U = 2 m_re'``."""
    float_only(ctx, node)
    a_re, a_im, b, v_th = (channel(p[k], x.dim() - 1) for k in ("a_re", "a_im", "b", "threshold"))
    kappa = node.attrs["kappa"]
    out = NeuronOut(x)
    torch.mul(b, x, out=out.membrane)
    m_re, m_im, s = torch.zeros_like(x[0]), torch.zeros_like(x[0]), torch.zeros_like(x[0])
    z, re, im = (torch.empty_like(x[0]) for _ in range(3))
    for t in range(x.shape[0]):
        torch.sub(m_re, torch.mul(s, kappa, out=z), out=z)
        torch.mul(a_re, z, out=re).sub_(torch.mul(a_im, m_im, out=im)).add_(out.membrane[t])
        torch.mul(a_re, m_im, out=im).add_(z.mul_(a_im))
        m_re, re, m_im, im = re, m_re, im, m_im
        torch.mul(m_re, 2, out=out.membrane[t])
        s = out.fire(t, v_th)
    return out.finish()


def substep_sum(ctx, node, p, x):
    d = ctx.substeps[node.inputs[0]]
    y = x.reshape(x.shape[0] // d, d, *x.shape[1:]).sum(1)
    return y + channel(p["bias"], y.dim() - 1) if "bias" in p else y


def infer_unrolled(node, ins):
    (t,) = ins
    per_channel(node, t, INTFIRE_PARAMS + ("bias", "v_min"))
    need(t.substeps == 1, node, "an unrolled integer neuron integrates physical steps")
    return TensorType(t.shape, "binary", None, node.attrs["max_spikes"])


def infer_substep_sum(node, ins):
    (t,) = ins
    need(t.substeps >= 1, node, "substep_sum needs a sub-step input")
    if "bias" in node.params:
        need(node.params["bias"].shape == (t.shape[0],), node, f"bias must have shape ({t.shape[0]},)")
    if t.kind == "real" or "bias" in node.params:
        return TensorType(t.shape)
    return TensorType(t.shape, "integer", (t.ceiling or 1) * t.substeps)


# Other modules name these ops through the constants below (the card is the one place an op is named by string).
LIF = define("lif", 1, neuron_type(LIF_PARAMS, _binary), kernel=lif, stateful=True, neuron=True, params=LIF_SCHEMA,
             decay=decay_params("beta", zero_ok=True), state=("h",), threshold_margin=True,
             doc="leaky integrate-and-fire, binary spikes; attr reset 'subtract' | 'zero'").name
INTFIRE = define("intfire", 1, neuron_type(INTFIRE_PARAMS + ("bias", "v_min"),
                                           lambda n, t: TensorType(t.shape, "integer", n.attrs["max_spikes"])),
                 kernel=intfire, stateful=True, neuron=True, params=INTFIRE_SCHEMA,
                 decay=decay_params("beta", zero_ok=True), state=("h",),
                 doc="integer-firing neuron, spike counts 0..D; attrs max_spikes D, rounding 'round' | 'floor'").name
SILIF = define("silif", 1, neuron_type(("decay", "b", "threshold"), _binary), count=lambda n: 3 * n.params["b"].size,
               kernel=silif, stateful=True, neuron=True, params=SILIF_SCHEMA, decay=decay_params("decay"),
               state=("u", "s"), threshold_margin=True,
               doc="SiLIF: reset before the decay, u_t = decay (u_{t-1} - kappa s_{t-1}) + b x_t; attr kappa").name
CSILIF = define("csilif", 1, neuron_type(("a_re", "a_im", "b", "threshold"), _binary),
                count=lambda n: 5 * n.params["b"].size, kernel=csilif, stateful=True, neuron=True,
                params=CSILIF_SCHEMA, state=("m_re", "m_im", "s"), threshold_margin=True,
                decay=Decay(lambda n: [("|a| = hypot(a_re, a_im)", np.hypot(f64(n, "a_re"), f64(n, "a_im")))]),
                doc="complex SiLIF (a resonator), fires on 2 Re m; attr kappa").name
# no one-step form: each physical step is D sub-steps
INTFIRE_UNROLLED = define("intfire_unrolled", 1, infer_unrolled, kernel=intfire_unrolled, stateful=True, neuron=True,
                          time_base=True, params=INTFIRE_SCHEMA, decay=decay_params("beta", zero_ok=True),
                          doc="intfire's count replayed as D binary sub-step spikes (a new time base)").name
SUBSTEP_SUM = define("substep_sum", 1, infer_substep_sum, count=lambda n: sizes(n, "bias"), kernel=substep_sum,
                     time_base=True, params=(Param("bias", "(C,)", "added once per physical step", required=False),),
                     doc="sums the D sub-steps of each physical step").name
