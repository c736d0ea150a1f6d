"""Synaptic ops: weighted sums of their input (AC on spikes, MAC otherwise).

Array layouts (per node ``params``):
  conv2d    weight (C_out, C_in/groups, kH, kW), bias (C_out,)   -- PyTorch cross-correlation
            attrs stride, padding, dilation (pairs), groups
  linear    weight (N_out, N_in), bias (N_out,)                   -- acts on the last dim
  windowsum no params; attrs kernel k, dilation d                  -- an all-ones depthwise k x k conv
"""
import numpy as np
import torch
import torch.nn.functional as F

from spikec.ir.graph import TensorType
from spikec.ops.common import exact_sum, per_step, sizes, window
from spikec.ops.registry import Cost, Param, define, need

CONV_PARAMS = (Param("weight", "(C_out, C_in/groups, kH, kW)", "kernel (PyTorch cross-correlation orientation)"),
               Param("bias", "(C_out,)", "added to every output position", required=False))
LINEAR_PARAMS = (Param("weight", "(N_out, N_in)", "acts on the last dim"),
                 Param("bias", "(N_out,)", "added to every output", required=False))


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


# -- cost: dense multiply-accumulates per step and sample, and measured synaptic events (spikec.core.cost) --
def tap_sums(active: torch.Tensor, kernel, stride, padding, dilation) -> torch.Tensor:
    """``S[c, i, j]``: the sum, over the samples ``N`` and every output position, of the input value that kernel tap
    ``(i, j)`` reads from channel ``c`` of ``active`` ``[N, C, H, W]`` (a padding tap reads 0).

    The sum of a convolution's output over everything is ``sum_{o, c, i, j} w[o, c, i, j] S[c, i, j]`` (per group):
    the event counts below and NeuroBench's binarized sums (``spikec.core.metrics``) are read from ``S``
    without running the convolution. Tap ``(i, j)`` reads rows ``i d_h + m s_h`` and columns ``j d_w + n s_w`` of
    the padded input, so ``S[c] = R A[c] K^T`` with 0/1 row and column selectors ``R`` ``(kH, H_p)``, ``K``
    ``(kW, W_p)`` and ``A`` the input summed over the samples. For integer-valued ``active`` every partial sum is
    an integer below 2**53, exact in float64 in any order: the counts equal the summed output of ``F.conv2d``
    (``tests/ops/test_synapses.py``)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    a = np.asarray(active, dtype=np.float64).sum(0)
    ho, wo = window(a.shape[1], kh, sh, ph, dh), window(a.shape[2], kw, sw, pw, dw)
    a = np.pad(a, ((0, 0), (ph, ph), (pw, pw)))
    rows, cols = np.zeros((kh, a.shape[1])), np.zeros((kw, a.shape[2]))
    for i in range(kh):
        rows[i, i * dh: i * dh + (ho - 1) * sh + 1: sh] = 1.0
    for j in range(kw):
        cols[j, j * dw: j * dw + (wo - 1) * sw + 1: sw] = 1.0
    return torch.as_tensor(rows @ a @ cols.T)


def conv_events(node, active):
    """``F.conv2d(active, ones)`` summed: each of the ``C_out / groups`` outputs of a group reads every tap of its
    ``C_in / groups`` channels, and the groups partition the input channels."""
    a, w = node.attrs, node.params["weight"]
    s = tap_sums(active, w.shape[2:], a["stride"], a["padding"], a["dilation"])
    return int(s.sum()) * (w.shape[0] // a["groups"])


def windowsum_events(node, active):
    """An all-ones depthwise ``k x k`` conv (same padding) summed: one output channel per input channel."""
    k, d = node.attrs["kernel"], node.attrs["dilation"]
    pad = d * (k - 1) // 2
    return int(tap_sums(active, (k, k), (1, 1), (pad, pad), (d, d)).sum())


CONV_COST = Cost(lambda n: int(np.prod(n.type.shape)) * int(np.prod(n.params["weight"].shape[1:])), conv_events,
                 ac_share=True)
LINEAR_COST = Cost(lambda n: int(np.prod(n.type.shape)) * n.params["weight"].shape[1],
                   lambda n, active: int(active.sum()) * n.params["weight"].shape[0])
# an all-ones kernel: additions only, spike-gated on any spike input (binary or integer)
WINDOWSUM_COST = Cost(lambda n: int(np.prod(n.type.shape)) * n.attrs["kernel"] ** 2, windowsum_events, ac_on="spikes")

define("conv2d", 1, infer_conv, count=lambda n: sizes(n, "weight", "bias"), kernel=conv2d, synaptic=True,
       params=CONV_PARAMS, cost=CONV_COST, doc="2-d convolution per step; attrs stride, padding, dilation, groups")
define("linear", 1, infer_linear, count=lambda n: sizes(n, "weight", "bias"), kernel=linear, synaptic=True,
       params=LINEAR_PARAMS, cost=LINEAR_COST, doc="y = x W^T + b on the last dim")
define("windowsum", 1, infer_windowsum, kernel=windowsum, synaptic=True, cost=WINDOWSUM_COST,
       doc="an all-ones depthwise k x k conv (same padding); attrs kernel, dilation")
