"""Helpers the op families share: shape arithmetic, per-channel parameters, per-step application,
exact integer sums, and the neuron output holder."""
import numpy as np
import torch

from spikec.ir.errors import IRError
from spikec.ir.graph import Node, TensorType
from spikec.ops.registry import need

EXACT_FLOAT = 2 ** 53


# -- type inference ----------------------------------------------------------------------------
def sizes(node, *names) -> int:
    """Parameter count of the named arrays a node holds."""
    return sum(int(node.params[n].size) for n in names if n in node.params)


def spike_or_real(t: TensorType, shape) -> TensorType:
    """``t``'s value kind on a new shape (a structural op moves values, it does not change them)."""
    return TensorType(tuple(shape), t.kind, t.ceiling)


def window(size, k, s, p, d=1, ceil=False):
    """Output length of a sliding window (conv, pool) as torch computes it."""
    span = size + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= size + p:  # torch: the last window must start inside the input or left pad
        out -= 1
    return out


def per_channel(node, t, names):
    """Each named parameter present is a scalar or one value per channel (``shape[0]`` of the step)."""
    for n in names:
        if n in node.params:
            shape = node.params[n].shape
            need(shape in ((), (t.shape[0],)), node,
                 f"parameter {n} has shape {shape}; expected () or ({t.shape[0]},) for {t.shape[0]} channels")


def same_shape(node, ins) -> TensorType:
    return TensorType(ins[0].shape)


# -- kernels -----------------------------------------------------------------------------------
def channel(p: torch.Tensor, ndim: int) -> torch.Tensor:
    """A scalar or per-channel vector broadcast against ``[B, C, ...]`` (one step)."""
    return p if p.dim() == 0 else p.view(1, -1, *([1] * (ndim - 2)))


def per_step(fn, x: torch.Tensor) -> torch.Tensor:
    """Apply a per-step torch op to ``[T, B, ...]`` with T and B merged (as ``TimeDistributed`` does)."""
    y = fn(x.flatten(0, 1))
    return y.reshape(x.shape[0], x.shape[1], *y.shape[1:])


def float_only(ctx, node):
    if ctx.integer:
        raise IRError(f"op {node.op} has no exact integer kernel", where=f"node {node.name!r}",
                      remedy="run this graph in float64, or quantize it for an integer target first")


def exact_sum(ctx, node, fn, x, w, b):
    """``fn(x, w, b)``; in integer mode computed in float64 only after proving every sum is below 2**53."""
    if not ctx.integer:
        return fn(x, w, b)
    bound = float(w.abs().flatten(1).sum(1).max()) * float(x.abs().max() if x.numel() else 0)
    bound += float(b.abs().max()) if b is not None else 0.0
    if bound >= EXACT_FLOAT:
        raise IRError(f"integer sums may reach {bound:.3g} >= 2**53 and lose exactness",
                      where=f"node {node.name!r}", remedy="quantize to fewer bits")
    return torch.round(fn(x.double(), w.double(), None if b is None else b.double())).long()


class NeuronOut:
    """Spikes, membrane and margin of a neuron run, filled step by step; the node's ``output`` attribute
    picks spikes or the (pre-reset) membrane, and a membrane read-out twin reuses the same run."""

    def __init__(self, x: torch.Tensor):
        self.spikes, self.membrane, self.margin = (torch.empty_like(x) for _ in range(3))

    def put(self, t, s, u, margin):
        self.spikes[t], self.membrane[t], self.margin[t] = s, u, margin

    def fire(self, t, theta) -> torch.Tensor:
        """Step ``t`` once ``membrane[t]`` holds ``U``: ``margin[t] = U - theta`` and ``spikes[t] = [U - theta >= 0]``
        (returned, a view); ``finish`` makes every margin ``|U - theta|`` at once. The values of ``put(t, s, U,
        (U - theta).abs())`` with ``s = (U - theta >= 0).to(U.dtype)``, written in place."""
        d = torch.sub(self.membrane[t], theta, out=self.margin[t])
        return self.spikes[t].copy_(d >= 0)

    def finish(self) -> "NeuronOut":
        self.margin.abs_()
        return self

    def output(self, node) -> torch.Tensor:
        return self.membrane if node.attrs.get("output") == "membrane" else self.spikes


def dynamics_key(node: Node) -> tuple:
    """Nodes with equal keys run identical dynamics (a neuron and its membrane read-out)."""
    attrs = tuple(sorted((k, v) for k, v in node.attrs.items() if k != "output"))
    params = tuple(sorted((k, v.tobytes()) for k, v in node.params.items()))
    return node.op, node.inputs, attrs, params


# -- weight math shared by passes and targets --------------------------------------------------
def bn_scale_shift(gamma, beta, mean, var, eps):
    """Inference BatchNorm as ``y = s x + c``: ``s = gamma / sqrt(var + eps)``, ``c = beta - mean s``.

    The one numpy definition, used by the passes (fold_batchnorm, fuse_repconv) and the targets (NIR
    export, ONNX ``bntt``, TTFS timing). Keep the operation order: every caller's values are bit-identical
    to it. A caller that needs another rounding keeps its own formula and takes only ``s`` from here
    (``fold_bn_weights``: ``(b - mean) * s + beta``). Not used where torch's arithmetic is reproduced:
    the torch kernels (``spikec/ops/norm.py``, ``spikec/nn``) and the ONNX ``batchnorm`` emitter, whose
    ``(1 / sqrt(var + eps)) * gamma`` is torch's batch_norm order.
    """
    s = gamma / np.sqrt(var + eps)
    return s, beta - mean * s
