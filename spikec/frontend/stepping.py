"""The three model conventions (``--stepping``), each made a multi-step module the rest of spikec takes as is.

``multistep``  ``forward`` maps ``[T, B, ...]`` to ``[T, B, ...]`` (spikec's own contract): the model itself; a
               Norse ``SequentialState`` returns ``(y, state)``: ``StateDropped`` returns its ``y`` (the state it
               returns is the last step's, which no ``[T, B, ...]`` output holds).
``step``       ``forward`` computes one time step on ``[B, ...]`` and keeps state in its neurons (snnTorch
               ``init_hidden=True``, SpikingJelly ``step_mode='s'``, a Norse ``SequentialState`` whose
               ``forward(x, state)`` returns ``(y, state)``): ``Stepped`` resets the state the framework's own
               way and runs ``forward(x[t])`` for each t, threading a returned state, and stacks every output.
``loop``       ``forward`` runs its own time loop (``spikec.frontend.loop``).

An adapter is an ``nn.Module`` with a converter of its own: tracing it traces the user's model in the
convention's stepping and emits one multi-step graph; running it is the user's model run as its users run it.
"""
import inspect

import torch
from torch import nn

from spikec.ir.errors import BadInput

STEPPINGS = ("multistep", "step", "loop")


def reset_state(model: nn.Module) -> None:
    """Reset every neuron's state the way its framework does (snnTorch ``utils.reset``, SpikingJelly
    ``functional.reset_net``); spikec's and Norse's modules keep no state between calls."""
    modules = [type(m).__module__ for m in model.modules()]
    for m in model.modules():
        if type(m).__module__.startswith("snntorch"):
            _reset_snntorch(m)
    if any(m.startswith("spikingjelly") for m in modules):
        from spikingjelly.activation_based import functional
        functional.reset_net(model)


def cast_inputs_to_params(model: nn.Module) -> None:
    """Give every module holding floating parameters its floating inputs in the parameters' dtype, and every
    snnTorch neuron's outputs its input's dtype.

    snnTorch's neurons return float32 spikes whatever their input (and feed them to their own recurrent
    layers): in the float64 reference run the next Linear or Conv2d would raise a dtype error, and an op between
    them (``spk.mean(-1)``, ``torch.stack(spk_rec).mean(0)``) would compute in float32. Spikes (0, 1, or a float32
    graded value) are exact in float64, so the casts change no value; in a run in the model's own dtype they do
    nothing. (The float32 run of ``source_precision`` is the model as its framework computes it.)
    """
    for m in model.modules():
        if any(True for _ in m.parameters(recurse=False)) and not getattr(m, "_spikec_cast", False):
            m.register_forward_pre_hook(_cast_to_params)
            m._spikec_cast = True
        if _snntorch_neuron(m) and not getattr(m, "_spikec_spikes_cast", False):
            m.register_forward_hook(_spikes_in_input_dtype)
            m._spikec_spikes_cast = True


def _snntorch_neuron(m: nn.Module) -> bool:
    if not type(m).__module__.startswith("snntorch"):
        return False
    from snntorch._neurons.neurons import SpikingNeuron
    return isinstance(m, SpikingNeuron)


def _spikes_in_input_dtype(module, args, out):
    """An snnTorch neuron's float32 spikes (``fire``: ``(mem > threshold).float()``, times its float32 graded
    factor) in the dtype of its floating input: in the float64 run the ops after it (a ``mean``, a scale, a ``cat``
    with a float64 tensor) then compute in float64, as the proof does, instead of torch promoting nothing and
    computing them in float32. Every spike value is a float32 number, exact in float64: the cast changes no value;
    in a float32 run it does nothing."""
    dtype = next((a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), None)
    if dtype is None:
        return None
    cast = lambda o: o.to(dtype) if isinstance(o, torch.Tensor) and o.is_floating_point() and o.dtype != dtype \
        else o  # noqa: E731
    return tuple(cast(o) for o in out) if isinstance(out, tuple) else cast(out)


def _cast_to_params(module, args):
    p = next(module.parameters(recurse=False))
    if not p.is_floating_point():
        return None
    return tuple(a.to(p.dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() and a.dtype != p.dtype
                 else a for a in args)


SNNTORCH_HIDDEN = ("spk", "syn", "syn_exc", "syn_inh", "mem")


def _reset_snntorch(m: nn.Module) -> None:
    """What ``snntorch.utils.reset`` does to one neuron (``reset_hidden``: each hidden state to zeros like
    itself), for this model's neurons only: snnTorch's own reset walks every instance ever created in the
    process (a class-level list) and fails on one whose state is gone."""
    for name in SNNTORCH_HIDDEN:
        value = getattr(m, name, None)
        if isinstance(value, torch.Tensor):
            setattr(m, name, torch.zeros_like(value))


def _threads_state(model: nn.Module) -> bool:
    """``forward(x, state=None)`` returning ``(y, state)``: Norse's way to step a network (SequentialState)."""
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return False
    return len(params) >= 2 and params[1].default is None


def _tensors(out, where: str) -> tuple[torch.Tensor, ...]:
    items = out if isinstance(out, (tuple, list)) else (out,)
    if not items or not all(isinstance(o, torch.Tensor) for o in items):
        raise BadInput(f"forward returned {type(out).__name__} for one time step, not a tensor [B, ...] or a flat "
                       "tuple of tensors", where=where,
                       remedy="return the step's output tensor(s) from forward (a state, if any, as (y, state))")
    return tuple(items)


class Stepped(nn.Module):
    """A per-step model run over ``[T, B, ...]`` from its reset state; returns its outputs stacked over T."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.threads_state = _threads_state(model)

    def forward(self, x: torch.Tensor):
        reset_state(self.model)
        where = f"model {type(self.model).__qualname__} (--stepping step)"
        state, steps = None, []
        for x_t in x:
            out = self.model(x_t, state) if self.threads_state else self.model(x_t)
            if self.threads_state and isinstance(out, tuple) and len(out) == 2 \
                    and not isinstance(out[1], torch.Tensor):
                out, state = out
            steps.append(_tensors(out, where))
        outs = tuple(torch.stack([s[i] for s in steps]) for i in range(len(steps[0])))
        reset_state(self.model)  # leave no state behind for the next user of the module
        return outs[0] if len(outs) == 1 else outs


class StateDropped(nn.Module):
    """A Norse ``SequentialState`` called once on ``[T, B, ...]`` from ``state=None``; returns its output ``y``."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor):
        return self.model(x)[0]


def _norse_sequential(model: nn.Module) -> bool:
    return type(model).__name__ == "SequentialState" and type(model).__module__.startswith("norse.")


def adapt(model: nn.Module, stepping: str) -> nn.Module:
    """The multi-step module that runs ``model`` in convention ``stepping`` (``multistep``: the model itself, or
    the ``y`` of a Norse ``SequentialState``'s ``(y, state)``)."""
    if stepping == "multistep":
        return StateDropped(model) if _norse_sequential(model) else model
    if stepping == "step":
        return Stepped(model)
    if stepping == "loop":
        raise BadInput("a loop model is adapted on its inputs", remedy="use spikec.frontend.loop.bind(model, x, leaf)")
    raise BadInput(f"--stepping {stepping!r} is not a model convention", remedy=f"use one of: auto, {', '.join(STEPPINGS)}")
