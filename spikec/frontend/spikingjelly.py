"""SpikingJelly ``LIFNode`` / ``IFNode`` onto the ``lif`` op or the ``lif_sj`` op defined here; registered only
when SpikingJelly imports.

The mapping is exact: a float64 run of the module and of its IR agree bit for bit. ``IFNode`` with a soft or
zero reset is the built-in ``lif`` op (semantics.md 1.1); ``LIFNode`` and ``IFNode`` with a non-zero hard reset
become ``lif_sj``, which repeats SpikingJelly's arithmetic literally. Params ``threshold``, ``tau`` (absent: IF
charge ``v + x``), ``v_reset`` (absent: soft reset), all (); attr ``decay_input``. The state starts at
``v_reset`` (0 for soft reset), as after ``reset_net``.
"""
import logging

import torch

from spikec.frontend.exact_neurons import float_only, infer_neuron, multi_step_only
from spikec.frontend.registry import refuse, register_converter
from spikec.ops import define, register_kernel


# Surrogates whose spiking forward is spikingjelly's heaviside, [x >= 0] (PoissonPass and
# MultiLevelSpikeCount are not).
SJ_HEAVISIDE = {"Sigmoid", "ATan", "PiecewiseQuadratic", "PiecewiseExp", "SoftSign", "SuperSpike", "Erf",
                "NonzeroSignLogAbs", "PiecewiseLeakyReLU", "SquarewaveFourierSeries", "S2NN", "QPseudoSpike",
                "LeakyKReLU", "FakeNumericalGradient", "LogTailedReLU", "Rect"}


def sj_node(ctx, m, name, x):
    from spikingjelly.activation_based import neuron, surrogate
    multi_step_only(ctx, m, name)
    if type(m) not in (neuron.LIFNode, neuron.IFNode):
        refuse(name, m, "subclasses of LIFNode/IFNode change the neuron step",
               f"register a converter for {type(m).__qualname__}")
    if m.step_mode != "m":
        refuse(name, m, f"step_mode={m.step_mode!r} treats T as the batch of one step", "build it with step_mode='m'")
    if m._neuron_precision is not None:
        refuse(name, m, "a reduced neuron precision is not supported", "leave the neuron precision unset")
    sg = m.surrogate_function
    if type(sg).__module__ != surrogate.__name__ or type(sg).__name__ not in SJ_HEAVISIDE or not sg.spiking:
        refuse(name, m, f"surrogate {type(sg).__qualname__} may not fire on [U >= threshold]",
               "use a built-in heaviside surrogate (e.g. surrogate.Sigmoid()) with spiking=True")
    theta, v_reset = float(m.v_threshold), None if m.v_reset is None else float(m.v_reset)
    if type(m) is neuron.IFNode and v_reset in (None, 0.0):
        # v + x and the resets are the lif op's with beta = alpha = 1, bias = 0 (up to the sign of zero)
        params = {"beta": 1.0, "alpha": 1.0, "bias": 0.0, "threshold": theta, "v_reset": 0.0}
        return ctx.emit(name, "lif", [x], {"reset": "subtract" if v_reset is None else "zero"}, params, scope=name)
    params = {"threshold": theta, "v_reset": v_reset}
    if type(m) is neuron.LIFNode:
        params["tau"] = float(m.tau)
    attrs = {"decay_input": bool(getattr(m, "decay_input", False))}  # IFNode has none; unused without tau
    return ctx.emit(name, "lif_sj", [x], attrs, params, scope=name)


def lif_sj_kernel(node, p, x):
    """SpikingJelly's torch reference step (charge, heaviside, reset) with Python-float parameters."""
    float_only(node, x)
    theta = float(p["threshold"])
    tau = float(p["tau"]) if "tau" in p else None
    v_reset = float(p["v_reset"]) if "v_reset" in p else None
    rest = 0.0 if v_reset is None else v_reset
    v, spikes, margins = torch.full_like(x[0], rest), [], []
    for x_t in x:
        if tau is None:
            h = v + x_t
        elif node.attrs["decay_input"]:
            h = v + (x_t - (v - rest)) / tau
        else:
            h = v - (v - rest) / tau + x_t
        s = (h - theta >= 0).to(h)
        v = h - s * theta if v_reset is None else s * v_reset + (1.0 - s) * h
        spikes.append(s)
        margins.append((h - theta).abs())
    return torch.stack(spikes), torch.stack(margins)


_SJ = ("threshold", "tau", "v_reset")
define("lif_sj", 1, infer_neuron(_SJ), ("threshold",), ("tau", "v_reset"), stateful=True)
register_kernel("lif_sj", lif_sj_kernel)


# -- registration, only where the package imports -----------------------------------------
_triton_log = logging.getLogger("torch._library.triton")
_level = _triton_log.level
_triton_log.setLevel(logging.ERROR)  # spikingjelly's custom ops warn "Triton not available" on import
try:
    from spikingjelly.activation_based import neuron as _sj_neuron
except ImportError:
    pass
else:
    register_converter(_sj_neuron.LIFNode, sj_node)
    register_converter(_sj_neuron.IFNode, sj_node)
finally:
    _triton_log.setLevel(_level)
