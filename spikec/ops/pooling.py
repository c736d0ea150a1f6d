"""Pooling. attrs kernel, stride, padding (pairs), optional dilation, ceil_mode, count_include_pad (avg)."""
import numpy as np
import torch.nn.functional as F

from spikec.ir.graph import TensorType
from spikec.ops.common import float_only, per_step, spike_or_real, window
from spikec.ops.registry import define, need


DEFAULTS = {"dilation": (1, 1), "ceil_mode": False, "count_include_pad": True}  # attrs a pool node may omit


def pool_attrs(node) -> dict:
    """A pool node's attributes with the optional ones filled in (as torch's defaults)."""
    return {**DEFAULTS, **node.attrs}


def infer_pool(node, ins, keep_kind):
    (t,) = ins
    need(len(t.shape) == 3, node, f"expects a (C, H, W) input, got shape {t.shape}")
    (kh, kw), (sh, sw), (ph, pw) = node.attrs["kernel"], node.attrs["stride"], node.attrs["padding"]
    dh, dw = pool_attrs(node)["dilation"]
    ceil = pool_attrs(node)["ceil_mode"]
    h, w = window(t.shape[1], kh, sh, ph, dh, ceil), window(t.shape[2], kw, sw, pw, dw, ceil)
    need(h >= 1 and w >= 1, node, f"pool window {(kh, kw)} does not fit input {t.shape[1:]}")
    shape = (t.shape[0], h, w)
    return spike_or_real(t, shape) if keep_kind else TensorType(shape)


def window_sum_as_conv(channels: int, kernel, stride, padding) -> tuple[dict, dict]:
    """A window sum (NIR's ``SumPool2d``, torch's ``AvgPool2d(divisor_override=1)``) as the ``conv2d`` node that
    computes it: ``(attrs, params)`` of a depthwise convolution with a kernel of ones (zero padding adds nothing)."""
    attrs = {"stride": tuple(stride), "padding": tuple(padding), "dilation": (1, 1), "groups": int(channels)}
    return attrs, {"weight": np.ones((int(channels), 1, *kernel))}


def avgpool2d(ctx, node, p, x):
    float_only(ctx, node)
    a = pool_attrs(node)
    return per_step(lambda z: F.avg_pool2d(z, a["kernel"], a["stride"], a["padding"], a["ceil_mode"],
                                           a["count_include_pad"]), x)


def maxpool2d(ctx, node, p, x):
    a = pool_attrs(node)
    pool = lambda z: F.max_pool2d(z, a["kernel"], a["stride"], a["padding"], a["dilation"], a["ceil_mode"])
    return per_step(pool, x.double()).to(x.dtype) if ctx.integer else per_step(pool, x)


define("avgpool2d", 1, lambda n, i: infer_pool(n, i, False), kernel=avgpool2d,
       doc="average pooling per step (real output)")
define("maxpool2d", 1, lambda n, i: infer_pool(n, i, True), kernel=maxpool2d,
       doc="max pooling per step (keeps the value kind: an OR over binary spikes)")
