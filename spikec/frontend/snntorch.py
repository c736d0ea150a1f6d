"""snnTorch neurons onto IR ops; registered only when snnTorch imports. The ops, their exact semantics and
parameter layouts are in ``spikec.frontend.snntorch_neurons``.

Converted, stepping ``"step"`` (snnTorch's own modules, called once per time step on ``[B, ...]``; the tracer
carries their state): ``Leaky``, ``Lapicque``, ``Synaptic``, ``RLeaky``, ``RSynaptic``, ``Alpha``. Stepping
``"multistep"``: ``SnnTorchMultiStep(Leaky)`` (or of a ``Lapicque``) on ``[T, B, ...]``, which returns the spikes.
The mapping is exact: a float64 run of the module and of its IR agree bit for bit, spikes and every returned state. Each returned tensor is one node;
the built-in ``lif`` op (semantics.md 1.1, the one that reaches Lava) is used wherever it computes snnTorch's
value identically, the framework-exact ops elsewhere::

    Leaky      reset "zero", reset_delay=True          spk: lif;  mem: lif output "membrane"
               reset "zero", reset_delay=False, θ >= 0  spk: lif;  mem: lif_snntorch read "mem"
               otherwise                                lif_snntorch (read "spikes" / "mem")
    Lapicque   the input times R, 1 / (R C), time_step (scale nodes), then with beta = 1 - time_step / (R C):
               subtract, none: lif_snntorch;  zero: synaptic_snntorch, alpha 0, no recurrence (``_lapicque``)
    Synaptic   syn: lif with threshold NEVER, output "membrane" (alpha * syn + x; it never fires or resets)
               reset "zero", reset_delay=False, θ >= 0  spk: lif on syn;  mem: synaptic_snntorch read "mem"
               otherwise                                synaptic_snntorch (read "spikes" / "mem")
    RSynaptic  synaptic_snntorch with its recurrence (read "spikes" / "syn" / "mem")
    RLeaky     rleaky_snntorch (read "spikes" / "mem")
    Alpha      alpha_snntorch (read "spikes" / "syn_exc" / "syn_inh" / "mem")

``lif`` fires on ``U >= θ'``; with ``θ' = nextafter(θ, +inf)`` that is snnTorch's ``U > θ`` in float64. Zero reset
with ``reset_delay=True``: snnTorch's ``beta * ((1 - r) * mem) + x`` is lif's ``beta * H + 1 * x + 0`` with
``H = U (1 - S) + 0 S`` (equal up to the sign of zero), and the mem snnTorch returns is lif's pre-reset ``U``.
Zero reset with ``reset_delay=False`` and every ``θ >= 0``: the delayed reset ``r`` is always 0 (after a spike
the immediate reset leaves ``mem = 0 <= θ``, and without one ``mem <= θ``), so the step is ``b = beta * mem + x``,
``s = [b > θ]``, ``mem = b - s b``: lif's, but the mem returned is lif's post-reset ``H``, which lif does not
output. A graded ``spk`` (``graded_spikes_factor`` g != 1) is a ``scale`` node ``a = float32(g)`` after the
spikes.

A converter returns what the module's call returns, with node names for tensors: ``spk`` alone when
``init_hidden=True`` and ``output=False``, else ``(spk, mem)`` (Leaky, RLeaky), ``(spk, syn, mem)`` (Synaptic,
RSynaptic) or ``(spk, syn_exc, syn_inh, mem)`` (Alpha). State nodes are emitted only when returned.

Refused, by name: subclasses (they change the step); ``inhibition``; ``state_quant``; a ``spike_grad`` not from
``snntorch.surrogate``; a ``graded_spikes_factor`` that is not a finite non-zero 0-dim scalar, or not 1 on
RLeaky/RSynaptic; parameters that are not one value or one per channel; ``reset_mechanism`` changed after
construction; RSynaptic's ``reset_delay=False`` (snnTorch 1.0 applies it to the call's arguments, not its state);
a recurrent layer other than the ``nn.Linear``/``nn.Conv2d``/``RecurrentOneToOne`` snnTorch builds; an ``Alpha``
whose ``tau`` is not finite; ``SLSTM`` (it cannot run in float64, see ``slstm``); snnTorch neurons with no
converter here.
"""
import functools

import numpy as np
import torch
from torch import nn

from spikec.ir.errors import UnsupportedOp
from spikec.frontend.snntorch_neurons import ALPHA_SNNTORCH, LIF_SNNTORCH, RLEAKY_SNNTORCH, SYNAPTIC_SNNTORCH
from spikec.frontend.exact_neurons import require_stepping
from spikec.frontend.registry import on_framework, refuse, register_converter
from spikec.ops.neurons import LIF

NEVER = float(np.finfo(np.float64).max)  # the threshold of a lif read out as its membrane only
CONVERTED = ("Leaky", "Lapicque", "Synaptic", "RLeaky", "RSynaptic", "Alpha")


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


# -- checks shared by every neuron -------------------------------------------------------------
def _channelwise(p, shape, what, name, module) -> torch.Tensor:
    """Keep a 0-dim value 0-dim (it rounds differently in snnTorch, see the kernels); else a (C,) vector."""
    p = torch.as_tensor(p).detach()
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


def _checked(m, cls, name, who=None):
    """The refusals every snnTorch neuron shares; returns its reset kind and the value of one spike."""
    import snntorch
    who = m if who is None else who
    if type(m) is not cls:
        refuse(name, who, f"{type(m).__qualname__} is not snntorch.{cls.__name__} (subclasses change its step)",
               f"use a plain snntorch.{cls.__name__}")
    if m.inhibition:
        refuse(name, who, "inhibition=True lets only the neuron with the largest membrane of each sample fire (a "
               "winner-take-all along dim 1), which no spikec op computes", "build the neuron with inhibition=False")
    if m.state_quant:
        refuse(name, who, "state_quant quantizes the state with a user-supplied function at every step, whose "
               "arithmetic spikec does not know", "build the neuron without state_quant")
    if not (m.surrogate_disable or getattr(m.spike_grad, "__module__", "") == "snntorch.surrogate"):
        refuse(name, who, "a custom spike_grad may not fire on [U > threshold]",
               "use a surrogate from snntorch.surrogate (all fire on U > threshold)")
    kinds = {"_base_sub": "subtract", "_base_zero": "zero", "_base_int": "none"}
    reset = kinds.get(getattr(getattr(m.state_function, "__func__", None), "__name__", None))
    if reset is None or int(m.reset_mechanism_val) != snntorch.SpikingNeuron.reset_dict[reset]:
        refuse(name, who, "reset_mechanism was changed after construction; snnTorch then mixes two resets",
               "pass reset_mechanism to the constructor")
    g = torch.as_tensor(m.graded_spikes_factor).detach()
    if g.dim() != 0 or not bool(torch.isfinite(g)) or float(g) == 0.0:
        refuse(name, who, f"graded_spikes_factor {g.tolist()} is not a finite non-zero 0-dim scalar (spikec "
               "models one spike value on snnTorch's float32 spikes; a 1-element or per-neuron factor changes the "
               "spikes' dtype or value per neuron)", "use a non-zero Python float or 0-dim tensor")
    # the value snnTorch outputs for a spike: float32 spikes times g, promoted as in SpikingNeuron.fire
    return reset, float(torch.ones(1, dtype=torch.float32) * g)


def _require_step(ctx, m, name, hint=""):
    try:
        require_stepping(ctx, m, name, "step")
    except UnsupportedOp as e:
        raise UnsupportedOp(e.what, where=e.where, remedy=e.remedy + hint) from None


def _graded(ctx, name, spikes, graded):
    if graded == 1.0:
        return spikes
    return ctx.emit(f"{name}.graded", "scale", [spikes], {"a": graded, "b": 0.0}, scope=name)


def _lif_params(beta, theta):
    """The lif op firing on ``U > theta`` (``U >= nextafter(theta, +inf)``) with ``U = beta H + 1 X + 0``."""
    return {"beta": beta, "alpha": 1.0, "bias": 0.0, "v_reset": 0.0,
            "threshold": np.nextafter(theta.double().numpy(), np.inf)}


def _returns(m, spikes, *states):
    """What the module's call returns: ``spk`` alone with init_hidden and not output, else ``(spk, *states)``.
    ``states`` are thunks, so a state node is emitted only when the call returns it."""
    if m.init_hidden and not m.output:
        return spikes
    return (spikes, *(state() for state in states))


# -- Leaky -------------------------------------------------------------------------------------
def _leaky(ctx, leaky, name, x, who):
    """The spike node (graded) and a thunk emitting the mem node of a Leaky."""
    import snntorch
    reset, graded = _checked(leaky, snntorch.Leaky, name, who)
    shape = ctx.type(x).shape
    beta = _channelwise(leaky.beta.clamp(0, 1), shape, "beta", name, who)
    theta = _channelwise(leaky.threshold, shape, "threshold", name, who)
    delay = bool(leaky.reset_delay)
    attrs, params = {"reset": reset, "reset_delay": delay}, {"beta": beta, "threshold": theta}

    def exact_mem():
        return ctx.emit(f"{name}.mem", LIF_SNNTORCH, [x], {**attrs, "read": "mem"}, params, scope=name)
    if reset == "zero" and (delay or bool((theta >= 0).all())):
        lif = _lif_params(beta, theta)
        spikes = ctx.emit(name, LIF, [x], {"reset": "zero"}, lif, scope=name)
        mem = exact_mem if not delay else \
            lambda: ctx.emit(f"{name}.mem", LIF, [x], {"reset": "zero", "output": "membrane"}, lif, scope=name)
    else:
        spikes, mem = ctx.emit(name, LIF_SNNTORCH, [x], attrs, params, scope=name), exact_mem
    return _graded(ctx, name, spikes, graded), mem


def snntorch_leaky(ctx, m: SnnTorchMultiStep, name, x):
    """``SnnTorchMultiStep(Leaky)`` (or of a ``Lapicque``) on ``[T, B, ...]``: its spikes."""
    import snntorch
    require_stepping(ctx, m, name, "multistep")
    if type(m.leaky) is snntorch.Lapicque:
        return _lapicque(ctx, m.leaky, name, x, m)[0]
    return _leaky(ctx, m.leaky, name, x, m)[0]


def leaky(ctx, m, name, x):
    _require_step(ctx, m, name, "; or wrap the Leaky in spikec.frontend.snntorch.SnnTorchMultiStep")
    spikes, mem = _leaky(ctx, m, name, x, m)
    return _returns(m, spikes, mem)


# -- Lapicque ----------------------------------------------------------------------------------
def _lapicque_scalar(m, key, name, who) -> float:
    """R, C or time_step as the float64 run of the module holds it (an int64 buffer, as snnTorch makes R = 1 and
    time_step = 1, converts to float64 exactly where torch promotes it)."""
    v = getattr(m, key).detach()
    if v.numel() != 1:
        refuse(name, who, f"Lapicque's {key} has shape {tuple(v.shape)}; spikec scales the input by R, "
               "1 / (R * C) and time_step as scalars", "use scalar R, C and time_step (or beta alone)")
    return v.double().reshape(())


def _lapicque(ctx, m, name, x, who):
    """The spike node (graded) and a thunk emitting the mem node of a ``Lapicque``.

    snnTorch 1.0 steps ``base = x * R * (1 / (R * C)) * time_step + (1 - time_step / (R * C)) * mem`` (beta only
    derives C when R or C is missing; the step never reads it), then ``base - r θ`` (subtract), ``base - r base``
    (zero) or ``base``, with ``r = [mem_prev > θ]``; no reset_delay. The input gain is three ``scale`` nodes in
    that order (each ``x * a + 0``, exact up to the sign of zero; a factor 1 is left out), and with ``d = 1 -
    time_step / (R * C)`` computed in float64 as the float64 run does: subtract and none are ``lif_snntorch``
    (``d * mem + g``: the sum commutes exactly) with beta ``d``; zero is ``synaptic_snntorch`` with alpha 0 and no
    recurrence (``syn = 0 * syn + g = g``, ``mem = d * mem + syn``, ``mem - mem * r``: Lapicque zeroes after the
    step, which Leaky's ``(1 - r) * mem`` before the decay does not)."""
    import snntorch
    reset, graded = _checked(m, snntorch.Lapicque, name, who)
    shape = ctx.type(x).shape
    r, c, dt = (_lapicque_scalar(m, k, name, who) for k in ("R", "C", "time_step"))
    theta = _channelwise(m.threshold, shape, "threshold", name, who)
    decay = 1 - dt / (r * c)
    gain = x
    for label, a in (("R", r), ("inv_RC", 1 / (r * c)), ("time_step", dt)):
        if float(a) != 1.0:
            gain = ctx.emit(f"{name}.gain_{label}", "scale", [gain], {"a": float(a), "b": 0.0}, scope=name)
    if reset == "zero":
        op, attrs = SYNAPTIC_SNNTORCH, {"reset": reset, "reset_delay": True, "recurrent": "none"}
        params = {"alpha": torch.zeros((), dtype=torch.float64), "beta": decay, "threshold": theta}
    else:
        op, attrs = LIF_SNNTORCH, {"reset": reset, "reset_delay": True}
        params = {"beta": decay, "threshold": theta}
    spikes = ctx.emit(name, op, [gain], attrs, params, scope=name)
    mem = lambda: ctx.emit(f"{name}.mem", op, [gain], {**attrs, "read": "mem"}, params, scope=name)
    return _graded(ctx, name, spikes, graded), mem


def lapicque(ctx, m, name, x):
    _require_step(ctx, m, name, "; or wrap the Lapicque in spikec.frontend.snntorch.SnnTorchMultiStep")
    spikes, mem = _lapicque(ctx, m, name, x, m)
    return _returns(m, spikes, mem)


# -- Synaptic, RSynaptic, RLeaky -----------------------------------------------------------------
def synaptic(ctx, m, name, x):
    import snntorch
    _require_step(ctx, m, name)
    reset, graded = _checked(m, snntorch.Synaptic, name)
    shape = ctx.type(x).shape
    alpha, beta = (_channelwise(getattr(m, k).clamp(0, 1), shape, k, name, m) for k in ("alpha", "beta"))
    theta = _channelwise(m.threshold, shape, "threshold", name, m)
    delay = bool(m.reset_delay)
    attrs = {"reset": reset, "reset_delay": delay, "recurrent": "none"}
    params = {"alpha": alpha, "beta": beta, "threshold": theta}
    syn = functools.cache(lambda: ctx.emit(f"{name}.syn", LIF, [x], {"reset": "subtract", "output": "membrane"},
                                           {"beta": alpha, "alpha": 1.0, "bias": 0.0, "threshold": NEVER,
                                            "v_reset": 0.0}, scope=name))
    if reset == "zero" and not delay and bool((theta >= 0).all()):
        spikes = ctx.emit(name, LIF, [syn()], {"reset": "zero"}, _lif_params(beta, theta), scope=name)
    else:
        spikes = ctx.emit(name, SYNAPTIC_SNNTORCH, [x], attrs, params, scope=name)
    mem = lambda: ctx.emit(f"{name}.mem", SYNAPTIC_SNNTORCH, [x], {**attrs, "read": "mem"}, params, scope=name)
    return _returns(m, _graded(ctx, name, spikes, graded), syn, mem)


def _recurrence(m, shape, name):
    """The attrs and params of the recurrent layer snnTorch built (``all_to_all`` and its arguments)."""
    rec = m.recurrent
    if not m.all_to_all:
        if type(rec).__name__ != "RecurrentOneToOne" or not hasattr(rec, "V"):
            refuse(name, m, f"recurrent is a {type(rec).__qualname__}, not the RecurrentOneToOne snnTorch builds",
                   "keep the recurrent module snnTorch builds")
        # rec.V is what forward multiplies by (a float32 buffer V stays float32 there under .double())
        return {"recurrent": "one_to_one"}, {"V": _channelwise(rec.V, shape, "V", name, m)}
    if type(rec) is nn.Linear:
        return {"recurrent": "linear"}, {"weight": rec.weight, "bias": rec.bias}
    if type(rec) is nn.Conv2d:
        if rec.stride != (1, 1) or rec.dilation != (1, 1) or rec.groups != 1 or rec.padding_mode != "zeros" \
                or isinstance(rec.padding, str):
            refuse(name, m, f"the recurrent Conv2d has stride {rec.stride}, dilation {rec.dilation}, groups "
                   f"{rec.groups}, padding {rec.padding!r} ({rec.padding_mode}); spikec's recurrence is the "
                   "stride-1 zero-padded Conv2d snnTorch builds", "keep the recurrent Conv2d snnTorch builds")
        return {"recurrent": "conv2d", "padding": list(rec.padding)}, {"weight": rec.weight, "bias": rec.bias}
    refuse(name, m, f"recurrent is a {type(rec).__qualname__}, not the nn.Linear or nn.Conv2d snnTorch builds",
           "keep the recurrent layer snnTorch builds from linear_features or conv2d_channels and kernel_size")


def _recurrent(ctx, m, name, x, cls, op, synaptic_):
    """RLeaky (op rleaky_snntorch) or RSynaptic (synaptic_snntorch): the spike node and the state thunks."""
    _require_step(ctx, m, name)
    reset, graded = _checked(m, cls, name)
    if graded != 1.0:
        refuse(name, m, f"graded_spikes_factor {graded} also scales the spikes {cls.__name__} feeds back through "
               "its recurrent layer, which spikec's recurrent ops do not model",
               f"leave graded_spikes_factor at 1 ({cls.__name__} takes none in its constructor)")
    if synaptic_ and not m.reset_delay:
        refuse(name, m, "snnTorch 1.0's RSynaptic applies reset_delay=False to the spk and mem arguments of the call "
               "instead of its state: it raises TypeError when they are None (init_hidden=True, or no state "
               "passed) and otherwise leaves the result unchanged", "build the RSynaptic with reset_delay=True "
               "(what it computes whenever the call succeeds)")
    shape = ctx.type(x).shape
    rec_attrs, rec_params = _recurrence(m, shape, name)
    attrs = {"reset": reset, "reset_delay": bool(m.reset_delay), **rec_attrs}
    params = {"beta": _channelwise(m.beta.clamp(0, 1), shape, "beta", name, m),
              "threshold": _channelwise(m.threshold, shape, "threshold", name, m), **rec_params}
    if synaptic_:
        params["alpha"] = _channelwise(m.alpha.clamp(0, 1), shape, "alpha", name, m)
    spikes = ctx.emit(name, op, [x], attrs, params, scope=name)
    state = lambda read: lambda: ctx.emit(f"{name}.{read}", op, [x], {**attrs, "read": read}, params, scope=name)
    return spikes, state


def rleaky(ctx, m, name, x):
    import snntorch
    spikes, state = _recurrent(ctx, m, name, x, snntorch.RLeaky, RLEAKY_SNNTORCH, False)
    return _returns(m, spikes, state("mem"))


def rsynaptic(ctx, m, name, x):
    import snntorch
    spikes, state = _recurrent(ctx, m, name, x, snntorch.RSynaptic, SYNAPTIC_SNNTORCH, True)
    return _returns(m, spikes, state("syn"), state("mem"))


# -- Alpha -------------------------------------------------------------------------------------
def alpha(ctx, m, name, x):
    import snntorch
    _require_step(ctx, m, name)
    reset, graded = _checked(m, snntorch.Alpha, name)
    shape = ctx.type(x).shape
    a, b = m.alpha.detach().double().clamp(0, 1), m.beta.detach().double().clamp(0, 1)
    tau = torch.log(a) / (torch.log(b) - torch.log(a)) + 1  # as Alpha._base_state_function computes it
    if not bool(torch.isfinite(tau).all()):
        refuse(name, m, f"tau_alpha = log(alpha) / (log(beta) - log(alpha)) + 1 is {tau.tolist()} for the clamped "
               f"alpha {a.tolist()} and beta {b.tolist()}: not finite", "use 0 < beta < alpha <= 1")
    params = {"alpha": _channelwise(a, shape, "alpha", name, m), "beta": _channelwise(b, shape, "beta", name, m),
              "threshold": _channelwise(m.threshold, shape, "threshold", name, m),
              "tau": _channelwise(tau, shape, "tau", name, m)}
    attrs = {"reset": reset}
    spikes = ctx.emit(name, ALPHA_SNNTORCH, [x], attrs, params, scope=name)
    state = lambda read: lambda: ctx.emit(f"{name}.{read}", ALPHA_SNNTORCH, [x], {**attrs, "read": read}, params,
                                          scope=name)
    return _returns(m, _graded(ctx, name, spikes, graded), state("syn_exc"), state("syn_inh"), state("mem"))


def slstm(ctx, m, name, x):
    refuse(name, m, "snnTorch 1.0's SLSTM rebuilds its state with torch.zeros in the default dtype (float32) whenever "
           "the state's shape differs from the input's, which is at its first step and, with input_size != "
           "hidden_size, at later steps too: it cannot run in float64 (its nn.LSTMCell raises on float32 state), so "
           "no converter of it can be proved against the module in spikec's float64 reference",
           "use a Leaky / RLeaky (or Synaptic / RSynaptic) after an nn.Linear, or register a converter for SLSTM "
           "with spikec.frontend.register_converter (an approximation, checked in float32)")


def other_neuron(ctx, m, name, x):
    refuse(name, m, f"snnTorch's {type(m).__qualname__} has no converter (converted: {', '.join(CONVERTED)})",
           f"use one of {', '.join(CONVERTED)}, or register a converter for {type(m).__qualname__} with "
           "spikec.frontend.register_converter")


# -- registration, only where the package imports -----------------------------------------
@on_framework("snntorch")  # imported only for a model whose code imported it
def _register():
    try:
        import snntorch as _snntorch
    except ImportError:
        return
    for _cls, _fn in [(SnnTorchMultiStep, snntorch_leaky), (_snntorch.Leaky, leaky), (_snntorch.Lapicque, lapicque),
                      (_snntorch.Synaptic, synaptic),
                      (_snntorch.RLeaky, rleaky), (_snntorch.RSynaptic, rsynaptic), (_snntorch.Alpha, alpha),
                      (_snntorch.SLSTM, slstm), (_snntorch.SpikingNeuron, other_neuron)]:
        register_converter(_cls, _fn)
