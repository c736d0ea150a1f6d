"""snnTorch ``Leaky``, used as ``SnnTorchMultiStep(Leaky(...))`` on ``[T, B, ...]``, onto the ``lif`` op or the
``lif_snntorch`` op defined here; registered only when snnTorch imports.

The mapping is exact: a float64 run of the module and of its IR agree bit for bit. Where the built-in ``lif``
op (semantics.md 1.1) repeats snnTorch's arithmetic it is used; otherwise ``lif_snntorch`` repeats it literally:
strict ``U > threshold``, the reset is the *previous* step's spike applied after the decay, ``beta`` clamped to
[0, 1]. Params ``beta, threshold``: () or (C,); attrs ``reset`` ("subtract" | "zero" | "none") and
``reset_delay``. Zero reset with ``reset_delay`` maps onto ``lif`` instead.
"""
import numpy as np
import torch
from torch import nn

from spikec.frontend.exact_neurons import float_only, infer_neuron, multi_step_only
from spikec.frontend.registry import refuse, register_converter
from spikec.ops import define, register_kernel
from spikec.ops.common import channel


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
        refuse(name, module, f"{what} of shape {tuple(p.shape)} is not a scalar or per-channel for a step of "
               f"shape {tuple(shape)}", "use a scalar or one value per channel (dim 1 of [B, C, ...])")
    return full[:, 0].clone()


def snntorch_leaky(ctx, m: SnnTorchMultiStep, name, x):
    import snntorch
    leaky = m.leaky
    multi_step_only(ctx, m, name)
    if type(leaky) is not snntorch.Leaky:
        refuse(name, m, f"{type(leaky).__qualname__} is not snntorch.Leaky (subclasses change its step)",
               "wrap a plain snntorch.Leaky")
    if leaky.inhibition or leaky.state_quant:
        refuse(name, m, "inhibition and state_quant are not supported", "build the Leaky without them")
    if not (leaky.surrogate_disable or getattr(leaky.spike_grad, "__module__", "") == "snntorch.surrogate"):
        refuse(name, m, "a custom spike_grad may not fire on [U > threshold]",
               "use a surrogate from snntorch.surrogate (all fire on U > threshold)")
    reset = {snntorch.Leaky._base_sub: "subtract", snntorch.Leaky._base_zero: "zero",
             snntorch.Leaky._base_int: "none"}[leaky.state_function.__func__]
    if int(leaky.reset_mechanism_val) != snntorch.SpikingNeuron.reset_dict[reset]:
        refuse(name, m, "reset_mechanism was changed after construction; snnTorch then mixes two resets",
               "pass reset_mechanism to the constructor")
    g = leaky.graded_spikes_factor.detach()
    # the value snnTorch outputs for a spike: float32 spikes times g, promoted as in Leaky.fire
    graded = float((torch.ones(1, dtype=torch.float32) * g).reshape(-1)[0]) if g.numel() == 1 else None
    if graded is None or graded == 0.0:
        refuse(name, m, f"graded_spikes_factor {g.tolist()} is not a non-zero scalar",
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
    float_only(node, x)
    beta, theta = (channel(p[k], x.dim() - 1) for k in ("beta", "threshold"))
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


define("lif_snntorch", 1, infer_neuron(("beta", "threshold")), ("beta", "threshold"), stateful=True)
register_kernel("lif_snntorch", lif_snntorch_kernel)


# -- registration, only where the package imports -----------------------------------------
try:
    import snntorch  # noqa: F401
except ImportError:
    pass
else:
    register_converter(SnnTorchMultiStep, snntorch_leaky)
