"""Synaptic ops: weighted sums of their input (AC on spikes, MAC otherwise).

Array layouts (per node ``params``):
  conv2d    weight (C_out, C_in/groups, kH, kW), bias (C_out,)   -- PyTorch cross-correlation
            attrs stride, padding, dilation (pairs), groups
  linear    weight (N_out, N_in), bias (N_out,)                   -- acts on the last dim
  windowsum no params; attrs kernel k, dilation d                  -- an all-ones depthwise k x k conv
"""
import torch
import torch.nn.functional as F

from spikec.compiler.ir import TensorType
from spikec.ops.common import exact_sum, per_step, sizes, window
from spikec.ops.registry import define, need


def infer_conv(node, ins):
    (t,) = ins
    w = node.params["weight"]
    g = node.attrs["groups"]
    need(len(t.shape) == 3, node, f"expects a (C, H, W) input, got shape {t.shape}")
    need(w.ndim == 4 and w.shape[1] * g == t.shape[0], node,
         f"weight {w.shape} with groups={g} expects {w.shape[1] * g} input channels, got {t.shape[0]}")
    if "bias" in node.params:
        need(node.params["bias"].shape == (w.shape[0],), node, "bias must have shape (C_out,)")
    (sh, sw), (ph, pw), (dh, dw) = node.attrs["stride"], node.attrs["padding"], node.attrs["dilation"]
    h, wd = window(t.shape[1], w.shape[2], sh, ph, dh), window(t.shape[2], w.shape[3], sw, pw, dw)
    need(h >= 1 and wd >= 1, node, f"kernel {w.shape[2:]} does not fit input {t.shape[1:]}")
    return TensorType((w.shape[0], h, wd))


def infer_linear(node, ins):
    (t,) = ins
    w = node.params["weight"]
    need(w.ndim == 2 and t.shape[-1] == w.shape[1], node,
         f"weight {w.shape} expects {w.shape[1]} input features, got shape {t.shape}")
    if "bias" in node.params:
        need(node.params["bias"].shape == (w.shape[0],), node, "bias must have shape (N_out,)")
    return TensorType(t.shape[:-1] + (w.shape[0],))


def infer_windowsum(node, ins):
    (t,) = ins
    need(len(t.shape) == 3, node, f"expects a (C, H, W) input, got shape {t.shape}")
    k2 = node.attrs["kernel"] ** 2
    if t.kind == "real":
        return TensorType(t.shape)
    return TensorType(t.shape, "integer", k2 * (t.ceiling or 1))


def conv2d(ctx, node, p, x):
    a = node.attrs
    conv = lambda x, w, b: per_step(lambda z: F.conv2d(z, w, b, a["stride"], a["padding"], a["dilation"],
                                                         a["groups"]), x)
    return exact_sum(ctx, node, conv, x, p["weight"], p.get("bias"))


def linear(ctx, node, p, x):
    return exact_sum(ctx, node, F.linear, x, p["weight"], p.get("bias"))


def windowsum(ctx, node, p, x):
    k, d = node.attrs["kernel"], node.attrs["dilation"]
    w = torch.ones(x.shape[2], 1, k, k, dtype=x.dtype)
    return per_step(lambda z: F.conv2d(z, w, padding=d * (k - 1) // 2, dilation=d, groups=x.shape[2]), x)


define("conv2d", 1, infer_conv, ("weight",), ("bias",), lambda n: sizes(n, "weight", "bias"), conv2d, synaptic=True)
define("linear", 1, infer_linear, ("weight",), ("bias",), lambda n: sizes(n, "weight", "bias"), linear,
       synaptic=True)
define("windowsum", 1, infer_windowsum, kernel=windowsum, synaptic=True)
