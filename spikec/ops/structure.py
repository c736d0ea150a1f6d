"""Structural and element-wise ops: the graph input, flatten, reshape, transpose, ReLU, add, mul.

attrs: flatten start, end (per-step dims); reshape shape (the new per-step shape); transpose perm (a
permutation of the per-step dims). add and mul take two operands of one shape (no broadcasting).
"""
import numpy as np
import torch.nn.functional as F

from spikec.compiler.ir import TensorType
from spikec.ops.common import spike_or_real
from spikec.ops.registry import define, need


def infer_flatten(node, ins):
    (t,) = ins
    start, end = node.attrs["start"], node.attrs["end"]
    end = end if end >= 0 else len(t.shape) + end
    need(0 <= start <= end < len(t.shape), node, f"cannot flatten dims {start}..{end} of shape {t.shape}")
    shape = t.shape[:start] + (int(np.prod(t.shape[start:end + 1])),) + t.shape[end + 1:]
    return spike_or_real(t, shape)


def infer_reshape(node, ins):
    (t,) = ins
    shape = tuple(node.attrs["shape"])
    need(int(np.prod(shape)) == t.size, node, f"cannot reshape {t.shape} ({t.size} values) to {shape}")
    return spike_or_real(t, shape)


def infer_transpose(node, ins):
    (t,) = ins
    perm = tuple(node.attrs["perm"])
    need(sorted(perm) == list(range(len(t.shape))), node, f"perm {perm} does not permute the dims of {t.shape}")
    return spike_or_real(t, tuple(t.shape[i] for i in perm))


def infer_elementwise(node, ins, combine):
    a, b = ins
    need(a.shape == b.shape, node, f"operands have shapes {a.shape} and {b.shape}; "
                                   "element-wise ops need identical shapes (no broadcasting)")
    if a.kind == "real" or b.kind == "real":
        return TensorType(a.shape)
    return combine(a.shape, a.ceiling or 1, b.ceiling or 1, a.kind == b.kind == "binary")


def _sum_type(shape, da, db, _):
    return TensorType(shape, "integer", da + db)


def _product_type(shape, da, db, both_binary):
    return TensorType(shape, "binary") if both_binary else TensorType(shape, "integer", da * db)


def flatten(ctx, node, p, x):
    end = node.attrs["end"]
    return x.flatten(2 + node.attrs["start"], end if end < 0 else 2 + end)


define("input", 0, lambda n, i: n.type, time_base=True, doc="a graph input [T, B, *shape]; its type is declared")
define("flatten", 1, infer_flatten, kernel=flatten, doc="flatten per-step dims start..end")
define("reshape", 1, infer_reshape,
       kernel=lambda ctx, node, p, x: x.reshape(x.shape[0], x.shape[1], *node.attrs["shape"]),
       doc="a new per-step shape (attr shape)")
define("transpose", 1, infer_transpose,
       kernel=lambda ctx, node, p, x: x.permute(0, 1, *(2 + d for d in node.attrs["perm"])),
       doc="permute the per-step dims (attr perm)")
define("relu", 1, lambda n, i: i[0], kernel=lambda ctx, node, p, x: F.relu(x), doc="max(x, 0)")
define("add", 2, lambda n, i: infer_elementwise(n, i, _sum_type), kernel=lambda ctx, node, p, a, b: a + b,
       doc="a + b (identical shapes)")
define("mul", 2, lambda n, i: infer_elementwise(n, i, _product_type), kernel=lambda ctx, node, p, a, b: a * b,
       doc="a * b (identical shapes): a coincidence of binary spikes, else a dynamic product")
