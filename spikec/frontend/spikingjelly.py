"""SpikingJelly 2.0 neurons (``IFNode``, ``LIFNode``, ``ParametricLIFNode``) onto the built-in ``lif`` op or the
framework-exact ``lif_sj`` op defined here; ``QIFNode``, ``EIFNode``, ``IzhikevichNode`` onto ``qif_sj``,
``eif_sj``, ``izhikevich_sj`` (defined, with their formulas, in ``spikec.frontend.spikingjelly_nonlinear``; the
same checks as below, and for Izhikevich a ``w`` restored to ``w_rest``); the layer wrappers and containers are in
``spikec.frontend.spikingjelly_layers``. Registered only when SpikingJelly imports.

The mapping is exact: a float64 run of the module and of its IR agree bit for bit, in both step modes. A float64
run of these neurons always takes SpikingJelly's torch reference (``spikingjelly/_ops/{if_,lif,plif}/reference.py``;
the fused CPU/CUDA/Triton kernels serve float32/16/bf16 only; on CUDA, an implementation forced by environment
variable makes a float64 run raise rather than change its arithmetic). SpikingJelly 2.0 has no per-module
``backend``: there is nothing to refuse by name. Per step, with ``r = v_reset`` (0 for soft reset),
``θ = v_threshold`` and the state starting at ``V = r`` (what ``reset_net`` restores)::

    IFNode             H = V + X
    LIFNode            H = V + (X - (V - r)) / tau        decay_input=True
                       H = V - (V - r) / tau + X          decay_input=False
    ParametricLIFNode  H = V + (X - (V - r)) * k          decay_input=True,   k = sigmoid(w) in float64
                       H = V - (V - r) * k + X            decay_input=False
    S = [H - θ >= 0]                                      heaviside: every built-in surrogate's spiking forward
    V = H - S θ   (v_reset None: soft)    or    V = S r + (1 - S) H   (hard)

``lif_sj`` repeats these literally. Params, all ``()``: ``threshold``; ``tau`` (LIF) or ``decay`` (``k``, PLIF),
at most one, neither for IF; ``v_reset`` (absent: soft reset). Attr ``decay_input``. Its margin is ``|H - θ|``.
The built-in ``lif`` op (``U = beta H + alpha X + bias``) takes the cases it computes identically:

* ``IFNode`` with ``v_reset`` None or 0: beta = alpha = 1, bias = 0 (equal up to the sign of zero);
* ``LIFNode(tau=2.0, decay_input=False)`` with ``v_reset`` None or 0: beta = 1/2, alpha = 1, bias = 0, since
  ``V - V / 2 = V / 2 = 0.5 V`` exactly for every ``|V| >= 2**-1021`` (below that, a subnormal ``V / 2`` rounds
  and the two can differ by one subnormal unit).

``detach_reset`` only cuts a gradient and ``store_v_seq`` only records ``V``: neither changes the forward.
Refused: subclasses (they may change the step), a surrogate whose spiking forward is not heaviside, a reduced
neuron precision (``_neuron_precision``), non-scalar ``v_threshold``/``v_reset``/``tau``/``w``, and a state whose
reset value is not ``v_reset``.
"""
import logging
import numbers

import numpy as np
import torch

from spikec.ir.errors import UnsupportedOp
from spikec.ir.graph import TensorType
from spikec.frontend.exact_neurons import float_only, require_stepping
from spikec.frontend.spikingjelly_nonlinear import CHARGE, EIF_SJ, IZHIKEVICH_SJ, QIF_SJ
from spikec.frontend.registry import on_framework, refuse, register_converter
from spikec.ops import Decay, define, need, register_kernel
from spikec.ops.registry import f64
from spikec.ops.neurons import LIF

# Surrogates whose spiking forward is spikingjelly's heaviside, (x >= 0).to(x) (read in SpikingJelly 2.0's
# surrogate.py; PoissonPass and MultiLevelSpikeCount are not).
SJ_HEAVISIDE = {"Sigmoid", "ATan", "PiecewiseQuadratic", "PiecewiseExp", "SoftSign", "SuperSpike", "Erf",
                "NonzeroSignLogAbs", "PiecewiseLeakyReLU", "SquarewaveFourierSeries", "S2NN", "QPseudoSpike",
                "LeakyKReLU", "FakeNumericalGradient", "LogTailedReLU", "Rect", "DeterministicPass"}


def sj_node(ctx, m, name, x):
    from spikingjelly.activation_based import neuron
    exact = (neuron.IFNode, neuron.LIFNode, neuron.ParametricLIFNode)
    if type(m) not in exact:
        base = next(c for c in exact if isinstance(m, c))
        refuse(name, m, f"subclasses of {base.__name__} may change the neuron step",
               f"register a converter for {type(m).__qualname__} with spikec.frontend.register_converter, "
               f"or use {base.__name__} itself")
    _check_stepping(ctx, m, name)
    _check_forward(m, name)
    theta = _scalar(m, name, "v_threshold")
    v_reset = None if m.v_reset is None else _scalar(m, name, "v_reset")
    _check_initial_state(m, name, v_reset)
    lif_reset = v_reset in (None, 0.0)  # the lif op starts at 0: its hard reset must return there too
    if type(m) is neuron.IFNode and lif_reset:
        return _lif(ctx, name, x, 1.0, theta, v_reset)
    params = {"threshold": theta, "v_reset": v_reset}
    if type(m) is neuron.LIFNode:
        params["tau"] = _scalar(m, name, "tau")
        if params["tau"] == 2.0 and not m.decay_input and lif_reset:
            return _lif(ctx, name, x, 0.5, theta, v_reset)
    elif type(m) is neuron.ParametricLIFNode:
        if m.w.numel() != 1:
            refuse(name, m, f"w has shape {tuple(m.w.shape)}; ParametricLIFNode's w is one scalar",
                   "keep w a scalar parameter")
        params["decay"] = m.w.detach().reshape(()).double().sigmoid()  # as a float64 run computes w.sigmoid()
    attrs = {"decay_input": bool(getattr(m, "decay_input", False))}  # IFNode has none; unused without a decay
    return ctx.emit(name, "lif_sj", [x], attrs, params, scope=name)


def sj_nonlinear_node(ctx, m, name, x):
    """QIFNode, EIFNode, IzhikevichNode: their parameters as Python floats, as SpikingJelly computes with them."""
    from spikingjelly.activation_based import neuron
    ops = {neuron.QIFNode: QIF_SJ, neuron.EIFNode: EIF_SJ, neuron.IzhikevichNode: IZHIKEVICH_SJ}
    if type(m) not in ops:
        base = next(c for c in ops if isinstance(m, c))
        refuse(name, m, f"subclasses of {base.__name__} may change the neuron step",
               f"register a converter for {type(m).__qualname__} with spikec.frontend.register_converter, "
               f"or use {base.__name__} itself")
    _check_stepping(ctx, m, name)
    _check_forward(m, name)
    v_reset = None if m.v_reset is None else _scalar(m, name, "v_reset")
    _check_initial_state(m, name, v_reset)
    op = ops[type(m)]
    params = {"threshold": _scalar(m, name, "v_threshold"), "v_reset": v_reset,
              **{k: _scalar(m, name, k) for k in CHARGE[op]}}
    if op == IZHIKEVICH_SJ and m._memories_rv.get("w") != params["w_rest"]:
        refuse(name, m, f"reset_net restores w to {m._memories_rv.get('w')!r}, not to w_rest={m.w_rest!r}",
               "construct the neuron with the w_rest it uses")
    return ctx.emit(name, op, [x], {}, params, scope=name)


def _lif(ctx, name, x, beta, theta, v_reset):
    params = {"beta": beta, "alpha": 1.0, "bias": 0.0, "threshold": theta, "v_reset": 0.0}
    return ctx.emit(name, LIF, [x], {"reset": "subtract" if v_reset is None else "zero"}, params, scope=name)


def _check_stepping(ctx, m, name):
    """The module's step_mode must be how the trace calls it; the refusal says which step_mode would be."""
    try:
        require_stepping(ctx, m, name, "multistep" if m.step_mode == "m" else "step")
    except UnsupportedOp as e:
        if ctx.stepping == "multistep" and ctx.per_step:
            hint = "in SpikingJelly: neurons go outside layer.SeqToANNContainer, or in layer.MultiStepContainer"
        else:
            hint = f"in SpikingJelly: functional.set_step_mode(net, {'s' if ctx.stepping == 'step' else 'm'!r})"
        raise UnsupportedOp(f"step_mode={m.step_mode!r}: {e.what}", where=e.where,
                            remedy=f"{e.remedy} ({hint})") from None


def _check_forward(m, name):
    from spikingjelly.activation_based import surrogate
    if m.step_mode == "m" and m._neuron_precision is not None:
        refuse(name, m, f"a reduced neuron precision {m._neuron_precision} runs the neuron in Triton kernels with "
               "other arithmetic", "leave the neuron precision unset (configure the precision policy with "
               "neuron_storage=None, or set module._neuron_precision = None)")
    sg = m.surrogate_function
    heaviside = sg is surrogate.heaviside or (type(sg).__module__ == surrogate.__name__
                                              and type(sg).__name__ in SJ_HEAVISIDE and sg.spiking is True)
    if not heaviside:
        refuse(name, m, f"the surrogate {type(sg).__qualname__} may not fire on [H >= v_threshold] in its forward "
               "(only SpikingJelly's built-in heaviside surrogates in spiking mode are known to)",
               "deploy with a built-in heaviside surrogate such as surrogate.Sigmoid() (spiking=True): inference "
               "uses only its forward, so if yours fires on [H >= v_threshold] the swap changes nothing")


def _scalar(m, name, attr) -> float:
    v = getattr(m, attr)
    if isinstance(v, torch.Tensor) and v.numel() == 1 and v.is_floating_point():
        return float(v)
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        refuse(name, m, f"{attr}={v!r} is not one real number", f"give {attr} as a Python float")
    return float(v)


def _check_initial_state(m, name, v_reset):
    """``reset_net`` restores ``v`` to the value registered at construction; the ops start at ``v_reset``."""
    rest = 0.0 if v_reset is None else v_reset
    start = m._memories_rv.get("v")
    if not isinstance(start, float) or start != rest:
        refuse(name, m, f"reset_net restores the membrane to {start!r}, not to v_reset={m.v_reset!r} "
               "(v_reset was changed after construction)", "construct the neuron with the v_reset it uses")


# -- the framework-exact op -----------------------------------------------------------------
_SJ_PARAMS = ("threshold", "tau", "decay", "v_reset")


def infer_lif_sj(node, ins):
    (t,) = ins
    for n in _SJ_PARAMS:
        if n in node.params:
            need(node.params[n].shape == (), node, f"parameter {n} has shape {node.params[n].shape}; expected ()")
    need(not ("tau" in node.params and "decay" in node.params), node, "give tau (LIF) or decay (PLIF), not both")
    need(isinstance(node.attrs.get("decay_input"), bool), node, "attr decay_input must be a bool")
    return TensorType(t.shape, "binary")


def lif_sj_kernel(node, p, x):
    """SpikingJelly's torch reference step (charge, heaviside, reset) with Python-float parameters."""
    float_only(node, x)
    theta = float(p["threshold"])
    v_reset = float(p["v_reset"]) if "v_reset" in p else None
    rest = 0.0 if v_reset is None else v_reset
    tau = float(p["tau"]) if "tau" in p else None
    k = float(p["decay"]) if "decay" in p else None
    decay_input = node.attrs["decay_input"]
    v, spikes, margins = torch.full_like(x[0], rest), [], []
    for x_t in x:
        if tau is not None:
            h = v + (x_t - (v - rest)) / tau if decay_input else v - (v - rest) / tau + x_t
        elif k is not None:
            h = v + (x_t - (v - rest)) * k if decay_input else v - (v - rest) * k + x_t
        else:
            h = v + x_t
        s = (h - theta >= 0).to(h)
        v = h - s * theta if v_reset is None else s * v_reset + (1.0 - s) * h
        spikes.append(s)
        margins.append((h - theta).abs())
    return torch.stack(spikes), torch.stack(margins)


def lif_sj_decays(n) -> list:
    """``H = V - (V - r)/tau + X`` (LIFNode) or ``H = V - (V - r) k + X`` (ParametricLIFNode, param ``decay`` = k):
    either way the membrane keeps ``1 - 1/tau`` or ``1 - k`` of itself. IF: none."""
    if "tau" in n.params:
        with np.errstate(divide="ignore", invalid="ignore"):
            return [("1 - 1/tau", 1 - 1 / f64(n, "tau"))]
    return [("1 - k (param decay = sigmoid(w))", 1 - f64(n, "decay"))] if "decay" in n.params else []


define("lif_sj", 1, infer_lif_sj, ("threshold",), ("tau", "decay", "v_reset"), stateful=True, neuron=True,
       decay=Decay(lif_sj_decays), state=("v",), threshold_margin=True)
register_kernel("lif_sj", lif_sj_kernel)


# -- registration, only where the package imports -----------------------------------------
@on_framework("spikingjelly")  # imported only for a model whose code imported it
def _register():
    triton_log = logging.getLogger("torch._library.triton")
    level = triton_log.level
    triton_log.setLevel(logging.ERROR)  # spikingjelly's custom ops warn "Triton not available" on import
    try:
        from spikingjelly.activation_based import neuron as _sj_neuron
    except ImportError:
        return
    else:
        for _cls in (_sj_neuron.IFNode, _sj_neuron.LIFNode, _sj_neuron.ParametricLIFNode):
            register_converter(_cls, sj_node)
        for _cls in (_sj_neuron.QIFNode, _sj_neuron.EIFNode, _sj_neuron.IzhikevichNode):
            register_converter(_cls, sj_nonlinear_node)
        from spikec.frontend import spikingjelly_layers  # noqa: F401  (registers the layer wrappers)
    finally:
        triton_log.setLevel(level)
