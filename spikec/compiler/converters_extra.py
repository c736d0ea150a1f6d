"""Optional converters for third-party neurons: snnTorch ``Leaky`` and SpikingJelly ``LIFNode``/``IFNode``.

Each is registered only when its package imports. Every mapping is exact: a float64 run of the
source module and of its IR agree bit for bit. Where the built-in ``lif`` op (semantics.md 1.1)
repeats the library's arithmetic it is used; otherwise an op below repeats it literally:

* ``lif_snntorch`` -- snnTorch ``Leaky``, used as ``SnnTorchMultiStep(Leaky(...))`` on ``[T, B, ...]``:
  strict ``U > threshold``, the reset is the *previous* step's spike applied after the decay, ``beta``
  clamped to [0, 1]. Params ``beta, threshold``: () or (C,); attrs ``reset`` ("subtract" | "zero" |
  "none") and ``reset_delay``. Zero reset with ``reset_delay`` maps onto ``lif`` instead.
* ``lif_sj`` -- SpikingJelly ``LIFNode`` (and ``IFNode`` with a non-zero hard reset). Params
  ``threshold``, ``tau`` (absent: IF charge ``v + x``), ``v_reset`` (absent: soft reset), all ();
  attr ``decay_input``. The state starts at ``v_reset`` (0 for soft reset), as after ``reset_net``.
"""
import logging

import numpy as np
import torch
from torch import nn

from spikec.compiler.errors import IRError, ShapeError, UnsupportedOp
from spikec.compiler.frontend import register_converter
from spikec.compiler.ir import TensorType
from spikec.ops import define, register_kernel


def _refuse(name, module, why, remedy):
    raise UnsupportedOp(why, where=f"module {name!r} ({type(module).__qualname__})", remedy=remedy)


def _multi_step_only(ctx, module, name):
    if ctx.per_step:
        _refuse(name, module, "a multi-step neuron inside TimeDistributed would see T*B as time",
                "apply it to the [T, B, ...] tensor, outside TimeDistributed")


def _infer_neuron(names):
    def infer(node, ins):
        (t,) = ins
        for n in names:
            if n in node.params and node.params[n].shape not in ((), (t.shape[0],)):
                raise ShapeError(f"parameter {n} has shape {node.params[n].shape}; expected () or ({t.shape[0]},)",
                                 where=f"node {node.name!r} ({node.op})")
        return TensorType(t.shape, "binary")
    return infer


def _view(p: torch.Tensor, ndim: int) -> torch.Tensor:
    """A scalar, or a per-channel vector broadcast against one step ``[B, C, ...]``."""
    return p if p.dim() == 0 else p.view(1, -1, *([1] * (ndim - 2)))


def _float_only(node, x):
    if not x.is_floating_point():
        raise IRError(f"op {node.op} has no exact integer kernel", where=f"node {node.name!r}",
                      remedy="run this graph in float64")


# -- snnTorch -----------------------------------------------------------------------------
class SnnTorchMultiStep(nn.Module):
    """Runs a single-step ``snntorch.Leaky`` over ``[T, B, ...]`` from rest; returns spikes ``[T, B, ...]``.

    snnTorch neurons take one step per call; this loop makes the whole sequence one fx leaf.
    """

    def __init__(self, leaky: nn.Module):
        super().__init__()
        self.leaky = leaky

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.leaky.mem = torch.zeros_like(x[0])  # start from rest; works with and without init_hidden
        spikes = []
        for x_t in x:
            out = self.leaky(x_t)
            spikes.append(out[0] if isinstance(out, tuple) else out)
        return torch.stack(spikes).to(x.dtype)  # snnTorch's spikes are float32 whatever the input dtype


def _channelwise(p: torch.Tensor, shape, what, name, module) -> torch.Tensor:
    """Keep a 0-dim value 0-dim (it rounds differently in snnTorch, see the kernel); else a (C,) vector."""
    p = p.detach()
    if p.dim() == 0:
        return p
    try:
        full = torch.broadcast_to(p, (1, *shape)).reshape(shape[0], -1)
    except RuntimeError:
        full = None
    if full is None or not bool((full == full[:, :1]).all()):
        _refuse(name, module, f"{what} of shape {tuple(p.shape)} is not a scalar or per-channel for a step of "
                f"shape {tuple(shape)}", "use a scalar or one value per channel (dim 1 of [B, C, ...])")
    return full[:, 0].clone()


def snntorch_leaky(ctx, m: SnnTorchMultiStep, name, x):
    import snntorch
    leaky = m.leaky
    _multi_step_only(ctx, m, name)
    if type(leaky) is not snntorch.Leaky:
        _refuse(name, m, f"{type(leaky).__qualname__} is not snntorch.Leaky (subclasses change its step)",
                "wrap a plain snntorch.Leaky")
    if leaky.inhibition or leaky.state_quant:
        _refuse(name, m, "inhibition and state_quant are not supported", "build the Leaky without them")
    if not (leaky.surrogate_disable or getattr(leaky.spike_grad, "__module__", "") == "snntorch.surrogate"):
        _refuse(name, m, "a custom spike_grad may not fire on [U > threshold]",
                "use a surrogate from snntorch.surrogate (all fire on U > threshold)")
    reset = {snntorch.Leaky._base_sub: "subtract", snntorch.Leaky._base_zero: "zero",
             snntorch.Leaky._base_int: "none"}[leaky.state_function.__func__]
    if int(leaky.reset_mechanism_val) != snntorch.SpikingNeuron.reset_dict[reset]:
        _refuse(name, m, "reset_mechanism was changed after construction; snnTorch then mixes two resets",
                "pass reset_mechanism to the constructor")
    g = leaky.graded_spikes_factor.detach()
    # the value snnTorch outputs for a spike: float32 spikes times g, promoted as in Leaky.fire
    graded = float((torch.ones(1, dtype=torch.float32) * g).reshape(-1)[0]) if g.numel() == 1 else None
    if graded is None or graded == 0.0:
        _refuse(name, m, f"graded_spikes_factor {g.tolist()} is not a non-zero scalar",
                "use a non-zero scalar graded_spikes_factor")
    shape = ctx.type(x).shape
    beta = _channelwise(leaky.beta.clamp(0, 1), shape, "beta", name, m)
    theta = _channelwise(leaky.threshold, shape, "threshold", name, m)
    if reset == "zero" and leaky.reset_delay:
        # Exactly the lif op: U > theta is U >= nextafter(theta, +inf) in float64, and
        # beta*((1-S)*U) + X equals beta*(U*(1-S) + 0*S) + 1*X + 0 up to the sign of zero.
        params = {"beta": beta, "alpha": 1.0, "bias": 0.0, "v_reset": 0.0,
                  "threshold": np.nextafter(theta.double().numpy(), np.inf)}
        y = ctx.emit(name, "lif", [x], {"reset": "zero"}, params, scope=name)
    else:
        y = ctx.emit(name, "lif_snntorch", [x], {"reset": reset, "reset_delay": bool(leaky.reset_delay)},
                     {"beta": beta, "threshold": theta}, scope=name)
    if graded != 1.0:
        y = ctx.emit(f"{name}.graded", "scale", [y], {"a": graded, "b": 0.0}, scope=name)
    return y


def lif_snntorch_kernel(node, p, x):
    """snnTorch ``Leaky.forward`` step by step, in its order of operations."""
    _float_only(node, x)
    beta, theta = (_view(p[k], x.dim() - 1) for k in ("beta", "threshold"))
    kind, delay = node.attrs["reset"], node.attrs["reset_delay"]
    mem, spikes, margins = torch.zeros_like(x[0]), [], []
    for x_t in x:
        # Spikes stay float32 as snnTorch's surrogates return them, so `reset * theta` promotes as
        # there: a 0-dim theta is rounded to float32, a per-channel one is not.
        reset = (mem - theta > 0).float()
        if kind == "zero":
            mem = (1 - reset) * mem
        mem = beta * mem + x_t
        if kind == "subtract":
            mem = mem - reset * theta
        spk = (mem - theta > 0).float()
        margins.append((mem - theta).abs())
        if not delay:
            do_reset = spk - reset  # snnTorch's spk / graded_spikes_factor - reset; that division gives 1 exactly
            if kind == "subtract":
                mem = mem - do_reset * theta
            elif kind == "zero":
                mem = mem - do_reset * mem
        spikes.append(spk)
    return torch.stack(spikes).to(x.dtype), torch.stack(margins)


define("lif_snntorch", 1, _infer_neuron(("beta", "threshold")), ("beta", "threshold"), stateful=True)
register_kernel("lif_snntorch", lif_snntorch_kernel)


# -- SpikingJelly ---------------------------------------------------------------------------
# Surrogates whose spiking forward is spikingjelly's heaviside, [x >= 0] (PoissonPass and
# MultiLevelSpikeCount are not).
SJ_HEAVISIDE = {"Sigmoid", "ATan", "PiecewiseQuadratic", "PiecewiseExp", "SoftSign", "SuperSpike", "Erf",
                "NonzeroSignLogAbs", "PiecewiseLeakyReLU", "SquarewaveFourierSeries", "S2NN", "QPseudoSpike",
                "LeakyKReLU", "FakeNumericalGradient", "LogTailedReLU", "Rect"}


def sj_node(ctx, m, name, x):
    from spikingjelly.activation_based import neuron, surrogate
    _multi_step_only(ctx, m, name)
    if type(m) not in (neuron.LIFNode, neuron.IFNode):
        _refuse(name, m, "subclasses of LIFNode/IFNode change the neuron step",
                f"register a converter for {type(m).__qualname__}")
    if m.step_mode != "m":
        _refuse(name, m, f"step_mode={m.step_mode!r} treats T as the batch of one step", "build it with step_mode='m'")
    if m._neuron_precision is not None:
        _refuse(name, m, "a reduced neuron precision is not supported", "leave the neuron precision unset")
    sg = m.surrogate_function
    if type(sg).__module__ != surrogate.__name__ or type(sg).__name__ not in SJ_HEAVISIDE or not sg.spiking:
        _refuse(name, m, f"surrogate {type(sg).__qualname__} may not fire on [U >= threshold]",
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
    _float_only(node, x)
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
define("lif_sj", 1, _infer_neuron(_SJ), ("threshold",), ("tau", "v_reset"), stateful=True)
register_kernel("lif_sj", lif_sj_kernel)


# -- registration, only where the package imports -----------------------------------------
try:
    import snntorch  # noqa: F401
except ImportError:
    pass
else:
    register_converter(SnnTorchMultiStep, snntorch_leaky)

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
