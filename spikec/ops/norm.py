"""Normalization and affine ops.

Array layouts:
  batchnorm gamma, beta, mean, var (C,); attr eps               -- inference BatchNorm, per channel
  bntt      gamma, beta, mean, var (T, C); attr eps            -- one BatchNorm per time step
  scale     no params; attrs a, b (scalars)                    -- y = a x + b
  layernorm gamma, beta (N,); attr eps                         -- LayerNorm over the last dim, as torch's
            ``F.layer_norm`` (the TTFS coding decomposes the same op into its sub-layers)
"""
import torch
import torch.nn.functional as F

from spikec.ir.errors import BadInput
from spikec.ir.graph import TensorType
from spikec.ops.common import channel, float_only, per_step, sizes
from spikec.ops.registry import Param, define, need

STATISTICS = ("gamma", "beta", "mean", "var")
_STAT_DOCS = ("scale", "shift", "running mean", "running variance")
BN_PARAMS = tuple(Param(n, "(C,)", d) for n, d in zip(STATISTICS, _STAT_DOCS))
BNTT_PARAMS = tuple(Param(n, "(T, C)", f"{d} of each time step") for n, d in zip(STATISTICS, _STAT_DOCS))


def infer_bn(node, ins):
    (t,) = ins
    for n in STATISTICS:
        need(node.params[n].shape == (t.shape[0],), node,
             f"{n} has shape {node.params[n].shape}, expected ({t.shape[0]},)")
    return TensorType(t.shape)


def infer_bntt(node, ins):
    (t,) = ins
    steps = node.params["gamma"].shape[0]
    for n in STATISTICS:
        need(node.params[n].shape == (steps, t.shape[0]), node,
             f"{n} has shape {node.params[n].shape}, expected ({steps}, {t.shape[0]})")
    return TensorType(t.shape)


def batchnorm(ctx, node, p, x):
    float_only(ctx, node)
    return per_step(lambda z: F.batch_norm(z, p["mean"], p["var"], p["gamma"], p["beta"], False, 0.0,
                                           node.attrs["eps"]), x)


def bntt(ctx, node, p, x):
    float_only(ctx, node)
    if x.shape[0] != p["gamma"].shape[0]:
        raise BadInput(f"BNTT holds statistics for T={p['gamma'].shape[0]} steps, the input has T={x.shape[0]}",
                       where=f"node {node.name!r}", remedy=f"give inputs of T = {p['gamma'].shape[0]} steps")
    scale = p["gamma"] / torch.sqrt(p["var"] + node.attrs["eps"])
    shift = p["beta"] - p["mean"] * scale
    out = torch.empty_like(x)  # y_t = x_t scale_t + shift_t, written step by step into one tensor
    for t in range(x.shape[0]):
        torch.mul(x[t], channel(scale[t], x.dim() - 1), out=out[t]).add_(channel(shift[t], x.dim() - 1))
    return out


def scale(ctx, node, p, x):
    a, b = node.attrs["a"], node.attrs["b"]
    if ctx.integer and (a != int(a) or b != int(b)):
        float_only(ctx, node)
    return x * a + b if not ctx.integer else x * int(a) + int(b)


define("batchnorm", 1, infer_bn, count=lambda n: sizes(n, "gamma", "beta"), kernel=batchnorm, params=BN_PARAMS,
       doc="inference BatchNorm per channel; attr eps")
define("bntt", 1, infer_bntt, count=lambda n: sizes(n, "gamma", "beta"), kernel=bntt, stateful=True, per_step=True,
       state=("step",), params=BNTT_PARAMS, doc="one inference BatchNorm per time step; attr eps")
define("scale", 1, lambda node, ins: TensorType(ins[0].shape), kernel=scale, doc="y = a x + b; attrs a, b (scalars)")


def infer_layernorm(node, ins):
    (t,) = ins
    n = t.shape[-1]
    for k in ("gamma", "beta"):
        need(node.params[k].shape == (n,), node, f"{k} has shape {node.params[k].shape}, expected ({n},)")
    return TensorType(t.shape)


def layernorm(ctx, node, p, x):
    float_only(ctx, node)
    return F.layer_norm(x, (x.shape[-1],), p["gamma"], p["beta"], node.attrs["eps"])


define("layernorm", 1, infer_layernorm, count=lambda n: sizes(n, "gamma", "beta"), kernel=layernorm, dense=True,
       params=(Param("gamma", "(N,)", "scale over the last dim"), Param("beta", "(N,)", "shift")),
       doc="LayerNorm over the last dim; attr eps")
