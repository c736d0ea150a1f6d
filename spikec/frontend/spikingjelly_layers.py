"""SpikingJelly 2.0's stateless layer wrappers and containers (``spikingjelly.activation_based.layer``) onto the
torch converters of ``spikec.frontend.torch_modules``; registered by ``spikec.frontend.spikingjelly`` when
SpikingJelly imports. These classes subclass torch modules: registering them takes precedence over the torch
converters found through the MRO.

* A wrapper in ``step_mode='m'`` maps ``[T, B, ...]`` to ``[T, B, ...]`` by merging T and B for torch
  (``functional.seq_to_ann_forward``): converted in a per-step context (``ctx.per_step``, as ``TimeDistributed``),
  so ``layer.Flatten``'s ``start_dim`` counts from the merged ``[T*B, ...]`` tensor. Only in a multi-step trace.
* In ``step_mode='s'`` a wrapper is its torch module: delegated unchanged (in a step trace, or inside a container).
* ``layer.Linear`` has no forward of its own: ``nn.Linear`` on the last dim in either mode.
* ``layer.Conv1d``: ``conv2d`` on the step viewed as ``(C, 1, L)`` with the kernel ``(1, k)``, between two
  ``reshape`` nodes; ATen computes a 1-d convolution as exactly this 2-d one.
* ``layer.VotingLayer``: the means of its groups as a ``linear`` (weights ``1 / voting_size``).
* ``layer.Dropout`` / ``Dropout2d``: identity (the trace runs in eval mode, where no mask is applied).
* Every other stateless wrapper (``layer.MaxPool1d``, ``AvgPool1d``, ``AdaptiveAvgPool1d``, ``Conv3d``, ``Upsample``,
  ...): its torch base module's own forward on its attributes, captured to core ATen (``as_torch``), per step.
* Subclasses of these classes (``layer.WSConv2d`` and ``WSLinear`` standardize their weights) are refused.
* ``SeqToANNContainer``: its children per step, T and B merged (``TimeDistributed``). ``MultiStepContainer``: its
  ``step_mode='s'`` children called once per time step (``functional.multi_step_forward``); converted as a step
  trace of the children (stepping ``"step"``), so a neuron inside emits its multi-step op over the sequence, which
  equals the per-step loop because every child is causal. ``StepModeContainer`` is one of the two (or, in
  ``'s'``, a plain Sequential). The T-last containers are refused (spikec's tensors are ``[T, B, ...]``).
"""
import copy

import torch
from torch import nn

from spikec.frontend.aten import capture_module
from spikec.frontend.registry import on_framework, refuse, register_converter
from spikec.frontend.torch_modules import (adaptive_avgpool2d, avgpool2d, batchnorm, conv2d, flatten, identity,
                                           linear, maxpool2d, sequential, time_distributed)

SET_M = "functional.set_step_mode(net, 'm') on a model called on [T, B, ...]"


def _sequence_only(ctx, m, name, what):
    """Refuse a module that treats dim 0 of its input as time where the call sees one step."""
    if ctx.stepping != "multistep" or ctx.per_step:
        seen = "one time step [B, ...]" if ctx.stepping == "step" else "T*B merged (inside a per-step container)"
        refuse(name, m, f"{what} takes dim 0 of its input for time, but here it is called on {seen}",
               "give modules called once per time step step_mode='s' (functional.set_step_mode(net, 's')), "
               "and use multi-step modules only on the [T, B, ...] sequence")


def _step_mode_m(ctx, m, name, x, convert):
    """step_mode 'm': seq_to_ann_forward merges T and B, as TimeDistributed does."""
    _sequence_only(ctx, m, name, "step_mode='m'")
    outer, ctx.per_step = ctx.per_step, True
    try:
        return convert(ctx, m, name, x)
    finally:
        ctx.per_step = outer


def _stateless(convert, spatial=True):
    """A wrapper of a per-step torch module (``spatial``: it needs the step's own leading dims, unlike Flatten)."""
    def wrapper(ctx, m, name, x):
        if m.step_mode == "m":
            return _step_mode_m(ctx, m, name, x, convert)
        if spatial and not ctx.per_step:
            refuse(name, m, "step_mode='s' applied to the [T, B, ...] sequence: torch would take T for the batch "
                   "and B for the channels", f"call {SET_M}, or wrap it in layer.SeqToANNContainer")
        return convert(ctx, m, name, x)
    wrapper.__name__ = f"sj_{convert.__name__}"
    return wrapper


def conv1d(ctx, m, name, x):
    """A Conv1d as the Conv2d ATen runs it: the step ``(C, L)`` as ``(C, 1, L)``, the kernel ``(1, k)``."""
    if len(ctx.type(x).shape) != 2 or ctx.type(x).shape[0] != m.in_channels:
        refuse(name, m, f"expects a per-step (C={m.in_channels}, L) input, got {ctx.type(x).shape}",
               "check the input shape")
    c, length = ctx.type(x).shape
    padding = m.padding if isinstance(m.padding, str) else (0, m.padding[0])
    as2d = nn.Conv2d(m.in_channels, m.out_channels, (1, m.kernel_size[0]), (1, m.stride[0]), padding,
                     (1, m.dilation[0]), m.groups, m.bias is not None, m.padding_mode, device="meta")
    as2d.weight, as2d.bias = nn.Parameter(m.weight.detach().unsqueeze(2)), m.bias
    y = ctx.emit(f"{name}.as2d", "reshape", [x], {"shape": (c, 1, length)}, scope=name)
    y = conv2d(ctx, as2d, f"{name}.conv2d", y)
    out_c, _, out_l = ctx.type(y).shape
    return ctx.emit(name, "reshape", [y], {"shape": (out_c, out_l)}, scope=name)


def voting(ctx, m, name, x):
    """``layer.VotingLayer`` (a step's, wrapped by ``_stateless``): the mean of each group of ``voting_size``
    consecutive values of the step's vector (its ``avg_pool1d`` with kernel = stride = voting_size, a trailing partial
    group dropped), as the linear of those means (weights 1 / voting_size), so that every target reads it as a
    read-out of the spikes it averages."""
    shape = ctx.type(x).shape
    if len(shape) != 1:
        refuse(name, m, f"votes over a vector, but each step here is shaped {shape}", "flatten each step first "
               "(layer.Flatten), as the tutorials do before their last Linear")
    v = int(m.voting_size)
    w = torch.zeros(shape[0] // v, shape[0], dtype=torch.float64)
    for i in range(shape[0] // v):
        w[i, i * v:(i + 1) * v] = 1.0 / v
    return ctx.emit(name, "linear", [x], {}, {"weight": w, "bias": None}, scope=name)


def sj_linear(ctx, m, name, x):
    return linear(ctx, m, name, x)


def seq_to_ann_container(ctx, m, name, x):
    _sequence_only(ctx, m, name, "SeqToANNContainer")
    return time_distributed(ctx, m, name, x)


def multi_step_container(ctx, m, name, x):
    _sequence_only(ctx, m, name, "MultiStepContainer")
    outer = ctx.stepping, ctx.per_step
    ctx.stepping, ctx.per_step = "step", True
    try:
        return sequential(ctx, m, name, x)
    finally:
        ctx.stepping, ctx.per_step = outer


def step_mode_container(ctx, m, name, x):
    if m.step_mode == "s":
        return sequential(ctx, m, name, x)
    return (multi_step_container if m.stateful else seq_to_ann_container)(ctx, m, name, x)


def t_last(ctx, m, name, x):
    refuse(name, m, "a T-last container expects [B, ..., T]; spikec's tensors are [T, B, ...]",
           "use layer.SeqToANNContainer or layer.MultiStepContainer on a [T, B, ...] model")


def _exact(cls, fn, also=()):
    """``fn`` for ``cls`` itself (and ``also``): a subclass such as layer.WSConv2d, which standardizes its weight,
    changes the forward this converter repeats."""
    def converter(ctx, m, name, x):
        if type(m) is not cls and type(m) not in also:
            refuse(name, m, f"subclasses of layer.{cls.__name__} may change its forward",
                   f"register a converter for {type(m).__qualname__} with spikec.frontend.register_converter, or "
                   f"use layer.{cls.__name__} itself")
        return fn(ctx, m, name, x)
    converter.__name__ = fn.__name__
    return converter


def as_torch(ctx, m, name, x):
    """A wrapper with no converter of its own (``layer.MaxPool1d``, ``AvgPool1d``, ``Conv3d``, ``Upsample``, ...): its
    torch base module's forward on the same attributes, captured to core ATen."""
    base = next(c for c in type(m).__mro__[1:] if c.__module__.startswith("torch.nn."))
    twin = copy.copy(m)
    twin.__class__ = base
    return capture_module(ctx, twin, name, x)


def _wrappers(layer) -> list:
    """Every stateless wrapper class of ``layer`` (a torch module and a StepModule) that is no subclass of another."""
    from spikingjelly.activation_based import base
    return [c for c in vars(layer).values() if isinstance(c, type) and issubclass(c, base.StepModule)
            and issubclass(c, nn.Module) and c.__module__.endswith("stateless_wrapper")
            and any(b.__module__.startswith("torch.nn.") for b in c.__bases__)]


def register(layer):
    explicit = [(layer.Conv2d, _stateless(conv2d)), (layer.Conv1d, _stateless(conv1d)),
                    (layer.BatchNorm1d, _stateless(batchnorm)), (layer.BatchNorm2d, _stateless(batchnorm)),
                    (layer.MaxPool2d, _stateless(maxpool2d)), (layer.AvgPool2d, _stateless(avgpool2d)),
                    (layer.AdaptiveAvgPool2d, _stateless(adaptive_avgpool2d)),
                    (layer.Flatten, _stateless(flatten, spatial=False)), (layer.Linear, sj_linear),
                    (layer.Dropout, identity), (layer.SeqToANNContainer, seq_to_ann_container),
                    (layer.MultiStepContainer, multi_step_container), (layer.StepModeContainer, step_mode_container),
                    (layer.TLastSeqToANNContainer, t_last), (layer.TLastMultiStepContainer, t_last),
                    (layer.VotingLayer, _stateless(voting))]
    mine = {cls for cls, _ in explicit}
    for cls, fn in explicit + [(c, _stateless(as_torch)) for c in _wrappers(layer) if c not in mine]:
        register_converter(cls, _exact(cls, fn, (layer.Dropout2d,) if cls is layer.Dropout else ()))


@on_framework("spikingjelly")  # imported only for a model whose code imported it
def _register():
    try:
        from spikingjelly.activation_based import layer as _sj_layer
    except ImportError:
        return
    register(_sj_layer)
