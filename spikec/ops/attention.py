"""Attention: dynamic products and their companions.

A product of two activations is a dynamic weight: no static synapse holds it (``dense``: host partition).
  matmul      two operands batched over equal leading dims
  softmax     attr dim (per-step)
  causal_mask zero above the diagonal of the last two dims (tril)
  dsmpa       wq, wk, wv (C, C), gamma (C,); attr eps; inputs (u, s_prev, x) -- RIPE's DS-MPA, on a host
"""
import torch

from spikec.ir.graph import TensorType
from spikec.nn.attention import ds_mpa
from spikec.ops.common import float_only, same_shape, sizes
from spikec.ops.registry import Param, define, need

DSMPA_PARAMS = (Param("wq", "(C, C)", "query projection"), Param("wk", "(C, C)", "key projection"),
                Param("wv", "(C, C)", "value projection"), Param("gamma", "(C,)", "output gain"))


def infer_matmul(node, ins):
    a, b = ins
    need(len(a.shape) >= 2 and a.shape[:-2] == b.shape[:-2] and a.shape[-1] == b.shape[-2], node,
         f"cannot multiply {a.shape} by {b.shape} (batched over equal leading dims)")
    shape = a.shape[:-1] + (b.shape[-1],)
    if a.is_spike and b.is_spike:  # a sum of a.shape[-1] integer products
        return TensorType(shape, "integer", a.shape[-1] * (a.ceiling or 1) * (b.ceiling or 1))
    return TensorType(shape)


def infer_dsmpa(node, ins):
    u, s, x = ins
    need(len(x.shape) == 3 and u.shape == s.shape == x.shape, node,
         f"u, s_prev and x must share one (C, H, W) shape, got {u.shape}, {s.shape}, {x.shape}")
    c = x.shape[0]
    for n, shape in (("wq", (c, c)), ("wk", (c, c)), ("wv", (c, c)), ("gamma", (c,))):
        need(node.params[n].shape == shape, node, f"{n} has shape {node.params[n].shape}, expected {shape}")
    return TensorType(x.shape)


def softmax(ctx, node, p, x):
    float_only(ctx, node)
    return torch.softmax(x, dim=2 + node.attrs["dim"])


def dsmpa(ctx, node, p, u, s, x):
    float_only(ctx, node)
    return ds_mpa(u, s, x, p["wq"], p["wk"], p["wv"], p["gamma"], node.attrs["eps"])


define("matmul", 2, infer_matmul, kernel=lambda ctx, node, p, a, b: a @ b, dense=True,
       doc="a @ b, batched over equal leading dims (a dynamic weight)")
define("softmax", 1, same_shape, kernel=softmax, dense=True, doc="softmax over attr dim (a per-step dim)")
define("causal_mask", 1, lambda n, i: i[0], kernel=lambda ctx, node, p, x: torch.tril(x),
       doc="zero above the diagonal of the last two dims")
define("dsmpa", 3, infer_dsmpa, count=lambda n: sizes(n, "wq", "wk", "wv", "gamma"), kernel=dsmpa, dense=True,
       params=DSMPA_PARAMS, doc="RIPE's DS-MPA attention on (u, s_prev, x), run on a host; attr eps")
