"""Converters of torch.nn modules and spikec.nn modules: each maps one module onto IR nodes with the same arithmetic.

Registered with ``spikec.frontend.registry`` when this module is imported (``spikec.frontend.tracing`` imports it).
"""
import copy

import torch
from torch import nn

import spikec.nn as snn
from spikec.ir.errors import UnsupportedOp
from spikec.frontend.registry import (FALLBACK, Merged, lead_count, refuse, refuse_after_read_out,
                                      register_converter)
from spikec.ops.neurons import CSILIF, INTFIRE, LIF, SILIF


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _per_step_only(ctx, module, name):
    if not ctx.per_step:
        refuse(name, module, "this per-step torch module is applied to a [T, B, ...] tensor, where torch would "
               "mistake T or B for a batch or channel dimension",
               "wrap it in spikec.nn.TimeDistributed(...), or apply it to x.flatten(0, 1) and unflatten(0, (T, B)) "
               "after; if forward computes one time step (snnTorch, SpikingJelly 's'), compile with --stepping step")


def _multi_step_only(ctx, module, name):
    refuse_after_read_out(ctx, module, name)
    if ctx.per_step:
        refuse(name, module, "this stateful/multi-step module sees T and B merged ([T*B, ...], inside "
               "TimeDistributed or after flatten(0, 1)) and would mistake T*B for time",
               "apply it to the [T, B, ...] tensor: outside spikec.nn.TimeDistributed, or after unflatten(0, (T, B))")


# -- torch.nn ---------------------------------------------------------------------------
def conv2d(ctx, m: nn.Conv2d, name, x):
    _per_step_only(ctx, m, name)
    if m.padding_mode != "zeros":
        refuse(name, m, f"padding_mode={m.padding_mode!r} is not supported", "use zero padding")
    padding = m.padding
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0, 0)
        elif all(k % 2 == 1 for k in m.kernel_size):
            padding = tuple(d * (k - 1) // 2 for k, d in zip(m.kernel_size, m.dilation))
        else:
            refuse(name, m, "padding='same' with an even kernel pads asymmetrically", "give explicit padding")
    attrs = {"stride": _pair(m.stride), "padding": _pair(padding), "dilation": _pair(m.dilation), "groups": m.groups}
    return ctx.emit(name, "conv2d", [x], attrs, {"weight": m.weight, "bias": m.bias}, scope=name)


def linear(ctx, m: nn.Linear, name, x):
    return ctx.emit(name, "linear", [x], {}, {"weight": m.weight, "bias": m.bias}, scope=name)


def bn_statistics(bn: nn.modules.batchnorm._BatchNorm, name, module, missing: str) -> dict:
    """A BatchNorm's inference parameters (gamma, beta, mean, var); refused, saying ``missing``, when it keeps
    no running statistics. ``module`` is what the refusal names (the BatchNorm, or the module holding it)."""
    if bn.running_mean is None:
        refuse(name, module, missing, "build it with track_running_stats=True and train it")
    c = bn.num_features
    gamma = bn.weight if bn.affine else torch.ones(c)
    beta = bn.bias if bn.affine else torch.zeros(c)
    return {"gamma": gamma, "beta": beta, "mean": bn.running_mean, "var": bn.running_var}


def batchnorm(ctx, m: nn.modules.batchnorm._BatchNorm, name, x):
    _per_step_only(ctx, m, name)
    params = bn_statistics(m, name, m, "BatchNorm without running statistics has no inference form")
    return ctx.emit(name, "batchnorm", [x], {"eps": float(m.eps)}, params, scope=name)


def avgpool2d(ctx, m: nn.AvgPool2d, name, x):
    _per_step_only(ctx, m, name)
    if m.divisor_override is not None:   # a window sum: captured to ATen, which lowers it (aten/lowerings.py)
        return FALLBACK[0](ctx, m, name, x)
    attrs = {"kernel": _pair(m.kernel_size), "stride": _pair(m.stride or m.kernel_size), "padding": _pair(m.padding),
             "ceil_mode": bool(m.ceil_mode), "count_include_pad": bool(m.count_include_pad)}
    return ctx.emit(name, "avgpool2d", [x], attrs, scope=name)


def maxpool2d(ctx, m: nn.MaxPool2d, name, x):
    _per_step_only(ctx, m, name)
    if m.return_indices:
        refuse(name, m, "return_indices=True is not supported", "use return_indices=False")
    attrs = {"kernel": _pair(m.kernel_size), "stride": _pair(m.stride or m.kernel_size), "padding": _pair(m.padding),
             "dilation": _pair(m.dilation), "ceil_mode": bool(m.ceil_mode)}
    return ctx.emit(name, "maxpool2d", [x], attrs, scope=name)


def flatten(ctx, m: nn.Flatten, name, x):
    return flatten_dims(ctx, name, x, m.start_dim, m.end_dim, name)


def flatten_dims(ctx, name, x, start, end, scope):
    """Flatten per-step dims ``start..end`` (counted with T, B leading, or T*B inside TimeDistributed).

    ``flatten(0, 1)`` of a ``[T, B, ...]`` tensor merges T and B, as torch modules applied per step need:
    no IR node, the name is marked ``Merged``.
    """
    lead = lead_count(ctx, x)
    ndim = lead + len(ctx.type(x).shape)
    start, end = start % ndim, end % ndim
    if lead == 2 and (start, end) == (0, 1):
        return Merged(x)
    if start < lead:
        raise UnsupportedOp(f"flatten(start_dim={start}) would merge the time/batch dimensions",
                            where=f"{name!r}", remedy=f"flatten from dim {lead} on")
    return ctx.emit(name, "flatten", [x], {"start": start - lead, "end": end - lead}, scope=scope)


def layer_norm(ctx, m: nn.LayerNorm, name, x):
    """Captured to ATen (``native_layer_norm`` -> ``layernorm``, over any trailing per-step dims). Registered so that
    this capture, not the TTFS coding's last-dim-only converter, takes every LayerNorm."""
    return FALLBACK[0](ctx, m, name, x)


def identity(ctx, m, name, x):
    return x  # Identity, and Dropout in eval mode: no node


def sequential(ctx, m: nn.Sequential, name, x):
    for child_name, child in m.named_children():
        x = ctx.convert_module(child, f"{name}.{child_name}", x)
    return x


def time_distributed(ctx, m: snn.TimeDistributed, name, x):
    outer, ctx.per_step = ctx.per_step, True
    try:
        return sequential(ctx, m, name, x)
    finally:
        ctx.per_step = outer


# -- spikec.nn --------------------------------------------------------------------------
def _buffers(m, names):
    return {n: getattr(m, n) for n in names}


def _neuron(ctx, m, name, x, op, attrs, params):
    """The spike node; with ``return_membrane`` also a ``.membrane`` node: the same dynamics, ``U`` read out."""
    spikes = ctx.emit(name, op, [x], attrs, params, scope=name)
    if not getattr(m, "return_membrane", False):
        return spikes
    return spikes, ctx.emit(f"{name}.membrane", op, [x], {**attrs, "output": "membrane"}, params, scope=name)


def lif(ctx, m: snn.LIF, name, x):
    _multi_step_only(ctx, m, name)
    params = _buffers(m, ("beta", "alpha", "bias", "threshold", "v_reset"))
    return _neuron(ctx, m, name, x, LIF, {"reset": m.reset}, params)


def intfire(ctx, m: snn.IntFire, name, x):
    _multi_step_only(ctx, m, name)
    attrs = {"max_spikes": m.max_spikes, "rounding": m.rounding}
    return _neuron(ctx, m, name, x, INTFIRE, attrs, _buffers(m, ("beta", "alpha", "threshold")))


def silif(ctx, m: snn.SiLIF, name, x):
    _multi_step_only(ctx, m, name)
    m64 = copy.deepcopy(m).double()  # the decay exactly as a float64 run of the module computes it
    params = {"decay": m64.decay(), "b": m64.b, "threshold": m64.v_th}
    return _neuron(ctx, m, name, x, SILIF, {"kappa": m.kappa}, params)


def csilif(ctx, m: snn.CSiLIF, name, x):
    _multi_step_only(ctx, m, name)
    m64 = copy.deepcopy(m).double()
    a_re, a_im = m64.decay()
    params = {"a_re": a_re, "a_im": a_im, "b": m64.b, "threshold": m64.v_th}
    return _neuron(ctx, m, name, x, CSILIF, {"kappa": m.kappa}, params)


def dsmpa(ctx, m: snn.DSMPA, name, u, s_prev, x):
    _multi_step_only(ctx, m, name)
    params = {"wq": m.wq, "wk": m.wk, "wv": m.wv, "gamma": m.gamma}
    return ctx.emit(name, "dsmpa", [u, s_prev, x], {"eps": m.eps}, params, scope=name)


def adaptive_avgpool2d(ctx, m: nn.AdaptiveAvgPool2d, name, x):
    """A plain average pool when the output size divides the input size; otherwise torch's windows."""
    _per_step_only(ctx, m, name)
    (_, h, w), (oh, ow) = ctx.type(x).shape, _pair(m.output_size)
    oh, ow = oh or h, ow or w
    if h % oh or w % ow:  # torch's uneven windows
        return ctx.emit(name, "adaptive_avgpool2d", [x], {"size": (oh, ow)}, scope=name)
    attrs = {"kernel": (h // oh, w // ow), "stride": (h // oh, w // ow), "padding": (0, 0), "ceil_mode": False,
             "count_include_pad": True}
    return ctx.emit(name, "avgpool2d", [x], attrs, scope=name)


def tdm(ctx, m: snn.TDM, name, x):
    _multi_step_only(ctx, m, name)
    return ctx.emit(name, "tdm", [x], {}, {"lam": m.lam}, scope=name)


def bntt(ctx, m: snn.BNTT, name, x):
    _multi_step_only(ctx, m, name)
    params = {"gamma": m.weight, "beta": m.bias, "mean": m.running_mean, "var": m.running_var}
    return ctx.emit(name, "bntt", [x], {"eps": m.eps}, params, scope=name)


def delay(ctx, m: snn.Delay, name, x):
    _multi_step_only(ctx, m, name)
    return ctx.emit(name, "delay", [x], {"steps": m.steps}, scope=name)


def windowsum(ctx, m: snn.WindowSum, name, x):
    _multi_step_only(ctx, m, name)
    return ctx.emit(name, "windowsum", [x], {"kernel": m.kernel_size, "dilation": m.dilation}, scope=name)


def repconv(ctx, m: snn.RepConv, name, x):
    """Decomposed into its branches (conv -> BN each) and a left-to-right sum, as its forward computes it."""
    _multi_step_only(ctx, m, name)
    outer, ctx.per_step = ctx.per_step, True
    try:
        outs = [ctx.convert_module(branch, f"{name}.{branch_name}", x)
                for branch_name, branch in m.named_children() if branch is not None]
    finally:
        ctx.per_step = outer
    y = outs[0]
    for k, out in enumerate(outs[1:], start=1):  # the last addition is the unit's output: it takes its name
        y = ctx.emit(name if k == len(outs) - 1 else f"{name}.sum{k}", "add", [y, out], scope=name)
    return y


for _cls, _fn in [(nn.Conv2d, conv2d), (nn.Linear, linear), (nn.BatchNorm1d, batchnorm), (nn.BatchNorm2d, batchnorm),
                  (nn.AvgPool2d, avgpool2d), (nn.MaxPool2d, maxpool2d), (nn.Flatten, flatten),
                  (nn.Identity, identity), (nn.Dropout, identity), (nn.Sequential, sequential),
                  (snn.TimeDistributed, time_distributed), (snn.LIF, lif), (snn.IntFire, intfire),
                  (snn.SiLIF, silif), (snn.CSiLIF, csilif), (snn.TDM, tdm), (snn.BNTT, bntt), (snn.Delay, delay),
                  (snn.WindowSum, windowsum), (snn.RepConv, repconv), (snn.DSMPA, dsmpa),
                  (nn.AdaptiveAvgPool2d, adaptive_avgpool2d), (nn.LayerNorm, layer_norm)]:
    register_converter(_cls, _fn)
