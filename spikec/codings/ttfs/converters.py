"""Frontend converter for ``torch.nn.LayerNorm`` (over the last dim) onto the ``layernorm`` op.

Registered only when no other converter claims ``nn.LayerNorm`` (a shared one may land in
``spikec.core.converters``). The interpreter kernel is ``F.layer_norm`` in float64, the arithmetic
of the module itself, so the trace is bit-exact.
"""
import torch
from torch import nn

from spikec.ir.errors import UnsupportedOp
from spikec.frontend.registry import CONVERTERS, register_converter


def layernorm(ctx, m: nn.LayerNorm, name, x):
    shape = ctx.type(x).shape
    if len(m.normalized_shape) != 1 or m.normalized_shape[0] != shape[-1]:
        raise UnsupportedOp(f"LayerNorm over {tuple(m.normalized_shape)} on per-step shape {shape}: only a "
                            "normalization over the last dim is supported", where=f"module {name!r} (LayerNorm)",
                            remedy="normalize over the last dim (nn.LayerNorm(features))")
    if getattr(m, "bias", None) is None and m.elementwise_affine:
        gamma, beta = m.weight, torch.zeros(shape[-1])
    elif m.elementwise_affine:
        gamma, beta = m.weight, m.bias
    else:
        gamma, beta = torch.ones(shape[-1]), torch.zeros(shape[-1])
    return ctx.emit(name, "layernorm", [x], {"eps": float(m.eps)}, {"gamma": gamma, "beta": beta}, scope=name)


if nn.LayerNorm not in CONVERTERS:
    register_converter(nn.LayerNorm, layernorm)
