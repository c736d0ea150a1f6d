"""IR ops of the TTFS coding (semantics.md 1.4, passes.md "TTFS timing assignment").

A TTFS graph carries *spike times* on its edges (real tensors, one time per neuron and inference; a
neuron that stays silent carries ``t_max`` of its window, which decodes to its lowest value). Every op
here is stateless: a tensor ``[T, B, ...]`` holds ``T * B`` independent inferences.

TTFS-side ops (the deployed graph):
  ttfs_encode   x -> t = t_ref - clip(gain * x, lo, hi)        attrs t_min, t_ref, t_max, lo, hi, gain
                The input layer: a value becomes a spike time in the window [t_min, t_max].
  ttfs_delay    t -> t + delay                                  attr delay (aligns a residual operand)
  ttfs_charge   t -> max(0, t_min - t)                          attr t_min
                How long a synapse has been charging at the window start ``t_min`` of the layer it
                feeds; the synaptic ops downstream (linear, conv2d, avgpool2d, flatten, scale,
                ttfs_affine without bias, add) sum these into ``tau_c * V(t_min)``.
  ttfs_dynsyn   (q_a, q_b) -> g (q_a - l_a) q_b - g l_b q_a      attrs gain, l_a, l_b (broadcasting)
                A dynamic-weight synapse: operand A's decoded value ``q_a - l_a`` is the weight of
                operand B's spike, plus a static synapse from A of weight ``-g l_b``. The product
                sub-layer of passes.md; exact in value, but not a static synapse (see spikec/codings/ttfs/__init__.py).
  ttfs_dynmatmul (q_a, q_b) -> g ((q_a - l_a) @ q_b) - g l_b sum_k q_a[.., k]    attrs gain, l_a, l_b
                The same with a contraction: ``A @ B`` (attention), each of A's values the weight of
                B's spikes along the contracted dim ("the query acts as the synaptic weight of the keys").
  ttfs_fire     v -> t = clip(t_min + tau*threshold - v, t_min, t_max)  params threshold (node shape)
                The B1 neuron: the charge ``v = tau_c V(t_min)`` integrated before the window, then the
                ramp ``tau_c dV/dt = 1``; fires at the first crossing of ``threshold`` (t_max if none).
                attrs t_min, t_ref, t_max, tau, scale, lo, hi, activation, source.
  ttfs_decode   t -> (t_ref - t) / scale                        attrs t_ref, scale (a graph output)

ANN-side helper ops (what the pass maps from):
  layernorm     (the shared card of spikec/ops/norm.py) over the last dim: gamma * (x - mean) / sqrt(var + eps) + beta
  ttfs_mat      identity (activation "identity") or ReLU ("relu"): marks a value that becomes a TTFS layer
  ttfs_bmul     a * b with numpy broadcasting (then ReLU when activation is "relu"): a product sub-layer
  ttfs_affine   gain * x + bias (gain, bias broadcast against the per-step shape; bias optional)
"""
import numpy as np
import torch
import torch.nn.functional as F

from spikec.ir.graph import TensorType
from spikec.ops import Param, define, register_kernel
from spikec.ops.registry import need as _need


def _same(node, ins):
    return TensorType(ins[0].shape)


def _broadcast(node, ins):
    a, b = ins
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        shape = None
    _need(shape is not None and len(a.shape) == len(b.shape), node,
          f"operands of shapes {a.shape} and {b.shape} do not broadcast (same rank, dims equal or 1)")
    return TensorType(tuple(shape))


def _infer_dynmatmul(node, ins):
    a, b = ins
    _need(len(a.shape) >= 2 and a.shape[:-2] == b.shape[:-2] and a.shape[-1] == b.shape[-2], node,
          f"cannot multiply {a.shape} by {b.shape} (batched over equal leading dims)")
    return TensorType(a.shape[:-1] + (b.shape[-1],))


def _infer_affine(node, ins):
    (t,) = ins
    for k in ("gain", "bias"):
        if k in node.params:
            p = node.params[k]
            ok = p.ndim <= len(t.shape)
            try:
                ok = ok and np.broadcast_shapes(p.shape, t.shape) == t.shape
            except ValueError:
                ok = False
            _need(ok, node, f"{k} of shape {p.shape} does not broadcast against {t.shape}")
    return TensorType(t.shape)


def _infer_fire(node, ins):
    (t,) = ins
    _need(node.params["threshold"].shape == t.shape, node,
          f"threshold has shape {node.params['threshold'].shape}, expected the layer shape {t.shape}")
    _need(node.attrs["t_min"] <= node.attrs["t_ref"] <= node.attrs["t_max"], node,
          "the window needs t_min <= t_ref <= t_max")
    return TensorType(t.shape)


def _count(*names):
    return lambda n: sum(int(n.params[k].size) for k in names if k in n.params)


BROADCAST = "(*broadcastable)"   # broadcasts against the per-step shape (rank at most the node's)
define("ttfs_encode", 1, _same, doc="a value becomes a spike time in [t_min, t_max] (the input layer)")
define("ttfs_delay", 1, _same, doc="t + delay (aligns a residual operand)")
define("ttfs_charge", 1, _same, doc="max(0, t_min - t): how long a synapse has charged at the window start")
define("ttfs_dynsyn", 2, _broadcast, synaptic=True, doc="a dynamic-weight synapse (product sub-layer)")
define("ttfs_dynmatmul", 2, _infer_dynmatmul, synaptic=True, doc="a dynamic-weight synapse with a contraction")
define("ttfs_fire", 1, _infer_fire, count=_count("threshold"),
       params=(Param("threshold", "(*shape)", "the crossing level of each neuron: the node's shape"),),
       doc="the B1 TTFS neuron: t = clip(t_min + tau*threshold - v, t_min, t_max)")
define("ttfs_decode", 1, _same, doc="(t_ref - t) / scale (a graph output)")
define("ttfs_mat", 1, _same, doc="identity or ReLU: marks a value that becomes a TTFS layer")
define("ttfs_bmul", 2, _broadcast, doc="a * b with numpy broadcasting (then ReLU when activation is relu)")
define("ttfs_affine", 1, _infer_affine, count=_count("gain", "bias"),
       params=(Param("gain", BROADCAST, "multiplies x"), Param("bias", BROADCAST, "added", required=False)),
       doc="gain * x + bias")


def _p(node, key):
    return float(node.attrs[key])


def _view(p: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """A per-step parameter (broadcastable against the per-step shape) broadcast against ``[T, B, ...]``."""
    return p.reshape((1, 1) + (1,) * (x.dim() - 2 - p.dim()) + tuple(p.shape))


def encode_kernel(node, p, x):
    v = torch.clamp(x * _p(node, "gain"), _p(node, "lo"), _p(node, "hi"))
    return _p(node, "t_ref") - v


def delay_kernel(node, p, t):
    return t + _p(node, "delay")


def charge_kernel(node, p, t):
    return torch.clamp(_p(node, "t_min") - t, min=0.0)


def dynsyn_kernel(node, p, qa, qb):
    g, la, lb = _p(node, "gain"), _p(node, "l_a"), _p(node, "l_b")
    return g * (qa - la) * qb - (g * lb) * qa


def dynmatmul_kernel(node, p, qa, qb):
    g, la, lb = _p(node, "gain"), _p(node, "l_a"), _p(node, "l_b")
    return g * ((qa - la) @ qb) - (g * lb) * qa.sum(-1, keepdim=True)


def fire_kernel(node, p, v):
    t_min, t_max = _p(node, "t_min"), _p(node, "t_max")
    t = t_min + _p(node, "tau") * _view(p["threshold"], v) - v
    return torch.clamp(t, t_min, t_max)


def decode_kernel(node, p, t):
    return (_p(node, "t_ref") - t) / _p(node, "scale")


def mat_kernel(node, p, x):
    return F.relu(x) if node.attrs["activation"] == "relu" else x


def bmul_kernel(node, p, a, b):
    y = a * b
    return F.relu(y) if node.attrs["activation"] == "relu" else y


def affine_kernel(node, p, x):
    y = x * _view(p["gain"], x)
    return y + _view(p["bias"], x) if "bias" in p else y


for _op, _fn in [("ttfs_encode", encode_kernel), ("ttfs_delay", delay_kernel), ("ttfs_charge", charge_kernel),
                 ("ttfs_dynsyn", dynsyn_kernel), ("ttfs_dynmatmul", dynmatmul_kernel),
                 ("ttfs_fire", fire_kernel), ("ttfs_decode", decode_kernel),
                 ("ttfs_mat", mat_kernel), ("ttfs_bmul", bmul_kernel), ("ttfs_affine", affine_kernel)]:
    register_kernel(_op, _fn)
