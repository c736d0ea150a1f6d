"""The framework-exact ops of SpikingJelly 2.0's nonlinear neurons: ``qif_sj`` (``QIFNode``), ``eif_sj``
(``EIFNode``) and ``izhikevich_sj`` (``IzhikevichNode``). Their converters are in ``spikec.frontend.spikingjelly``.

A float64 run of these neurons always takes SpikingJelly's torch reference (``spikingjelly/_ops/{qif,eif,
izhikevich}/reference.py``: the registered kernels serve float32/16/bf16 only), in both step modes (a
single step is the multi-step function on one step). The kernels repeat it literally, Python-float parameters
and all, so a float64 run of the module and of its op agree bit for bit. Per step, with ``θ = v_threshold``,
``r = v_reset`` (None: soft reset), from ``V = r`` (0 for a soft reset) and ``W = w_rest``::

    QIF         H = V + (X + a0 * (V - v_rest) * (V - v_c)) / tau
    EIF         H = V + (X + v_rest - V + delta_T * exp((V - theta_rh) / delta_T)) / tau
    Izhikevich  H = V + (X + a0 * (V - v_rest) * (V - v_c) - W) / tau
    S = [H - θ >= 0]                                     heaviside: every built-in surrogate's spiking forward
    Izhikevich  W = W + (a * (H - v_rest) - W) / tau_w + b * S
    V = H - S θ   (soft)    or    V = S r + (1 - S) H   (hard)

(products and sums left to right, as Python evaluates them). Params, all ``()``: ``threshold``, ``tau``,
``v_rest``, ``v_reset`` (absent: soft reset); QIF and Izhikevich ``a0``, ``v_c``; EIF ``delta_T``, ``theta_rh``;
Izhikevich ``tau_w``, ``a``, ``b``, ``w_rest``. Binary spikes; the margin is ``|H - θ|``.
"""
import torch

from spikec.ir.graph import TensorType
from spikec.frontend.exact_neurons import float_only
from spikec.ops import Param, define, need, register_kernel

QIF_SJ, EIF_SJ, IZHIKEVICH_SJ = "qif_sj", "eif_sj", "izhikevich_sj"   # the ops' names, for the converter
CHARGE = {QIF_SJ: ("tau", "v_rest", "a0", "v_c"), EIF_SJ: ("tau", "v_rest", "delta_T", "theta_rh"),
          IZHIKEVICH_SJ: ("tau", "v_rest", "a0", "v_c", "tau_w", "a", "b", "w_rest")}


def _infer(node, ins):
    (t,) = ins
    for n, v in node.params.items():
        need(v.shape == (), node, f"parameter {n} has shape {v.shape}; expected ()")
    return TensorType(t.shape, "binary")


def nonlinear_sj_kernel(node, p, x):
    """SpikingJelly's reference step of QIF / EIF / Izhikevich with Python-float parameters."""
    float_only(node, x)
    q = {k: float(v) for k, v in p.items()}
    theta, reset, op = q["threshold"], q.get("v_reset"), node.op
    v = torch.full_like(x[0], 0.0 if reset is None else reset)
    w = torch.full_like(x[0], q["w_rest"]) if op == IZHIKEVICH_SJ else None
    spikes, margins = [], []
    for x_t in x:
        if op == QIF_SJ:
            h = v + (x_t + q["a0"] * (v - q["v_rest"]) * (v - q["v_c"])) / q["tau"]
        elif op == EIF_SJ:
            d = q["delta_T"]
            h = v + (x_t + q["v_rest"] - v + d * torch.exp((v - q["theta_rh"]) / d)) / q["tau"]
        else:
            h = v + (x_t + q["a0"] * (v - q["v_rest"]) * (v - q["v_c"]) - w) / q["tau"]
        s = (h - theta >= 0).to(h)
        if w is not None:
            w = w + (q["a"] * (h - q["v_rest"]) - w) / q["tau_w"] + q["b"] * s
        v = h - s * theta if reset is None else s * reset + (1.0 - s) * h
        spikes.append(s)
        margins.append((h - theta).abs())
    return torch.stack(spikes), torch.stack(margins)


DOCS = {"threshold": "v_threshold (θ)", "tau": "membrane time constant", "v_rest": "resting potential",
        "v_reset": "hard-reset potential and rest state (absent: soft reset, from 0)", "a0": "quadratic coefficient",
        "v_c": "critical voltage", "delta_T": "sharpness of the exponential", "theta_rh": "rheobase threshold",
        "tau_w": "time constant of the adaptation current w", "a": "subthreshold coupling of w",
        "b": "jump of w per spike", "w_rest": "resting (initial) value of w"}


def _schema(op):
    return tuple(Param(n, "()", DOCS[n]) for n in ("threshold",) + CHARGE[op]) + (Param("v_reset", "()",
                                                                                       DOCS["v_reset"], False),)


define(QIF_SJ, 1, _infer, stateful=True, neuron=True, state=("v",), threshold_margin=True, params=_schema(QIF_SJ),
       doc="SpikingJelly QIFNode, its torch reference step")
define(EIF_SJ, 1, _infer, stateful=True, neuron=True, state=("v",), threshold_margin=True, params=_schema(EIF_SJ),
       doc="SpikingJelly EIFNode, its torch reference step")
define(IZHIKEVICH_SJ, 1, _infer, stateful=True, neuron=True, state=("v", "w"), threshold_margin=True,
       params=_schema(IZHIKEVICH_SJ),
       doc="SpikingJelly IzhikevichNode, its torch reference step")
for _op in CHARGE:
    register_kernel(_op, nonlinear_sj_kernel)
