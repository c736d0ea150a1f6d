"""Structural and element-wise ops: the graph input, flatten, reshape, transpose, ReLU, add, mul, and the per-step
structure the ATen capture lowers onto: concat, slice, sum, mean, div.

attrs: flatten start, end (per-step dims); reshape shape (the new per-step shape); transpose perm (a
permutation of the per-step dims). add and mul take two operands of one shape (no broadcasting).
concat axis; slice dim, start, stop, step; sum and mean dims (a tuple), keepdim; div divisor -- all dims per-step:

  concat  y = [a, b] along axis            slice  y = x[start:stop:step] along dim
  sum     y = sum_{i in dims} x_i          mean   y = (sum_{i in dims} x_i) / prod(shape[dims])
  div     y = x / divisor                  (torch's division, correctly rounded; not x * (1 / divisor))
  amax    y = max_{i in dims} x_i          clamp  y = min(max(x, lo), hi) (attrs lo, hi; None: unbounded)
  sigmoid y = 1 / (1 + exp(-x))            tanh   y = tanh(x)            (real, as torch computes them)
"""
import numpy as np
import torch
import torch.nn.functional as F

from spikec.ir.graph import TensorType
from spikec.ops.common import float_only, spike_or_real
from spikec.ops.registry import define, need


def unit_view(src, shape) -> str | None:
    """How a reshape from per-step shape ``src`` to ``shape`` views a Conv1d's step: ``"adds"`` (C, L) -> (C, 1, L),
    ``"drops"`` (C, 1, L) -> (C, L), else None (the frontend runs a Conv1d and a 1-D pool between the two)."""
    src, shape = tuple(src), tuple(shape)
    if len(src) == 2 and shape == (src[0], 1, src[1]):
        return "adds"
    if len(src) == 3 and src[1] == 1 and shape == (src[0], src[2]):
        return "drops"
    return None


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


# -- per-step structure: concatenation, slices, reductions, division by a constant ------------------
# What the ATen capture (spikec/frontend/aten.py) lowers torch.cat / split / chunk / select / x[...] / sum / mean /
# x / c onto. Every ``dim``/``axis``/``dims`` attribute counts the per-step dims: T and B are never touched.
def _joined_kind(a: TensorType, b: TensorType, shape) -> TensorType:
    """Values moved side by side keep their kind: binary if both are, a count up to the larger ceiling if both
    are spikes, real otherwise."""
    if a.kind == b.kind == "binary":
        return TensorType(tuple(shape), "binary")
    if a.is_spike and b.is_spike:
        return TensorType(tuple(shape), "integer", max(a.ceiling or 1, b.ceiling or 1))
    return TensorType(tuple(shape))


def infer_concat(node, ins):
    a, b = ins
    axis = node.attrs["axis"]
    need(len(a.shape) == len(b.shape) and 0 <= axis < len(a.shape), node,
         f"cannot concatenate {a.shape} and {b.shape} along per-step dim {axis}")
    need(all(x == y for i, (x, y) in enumerate(zip(a.shape, b.shape)) if i != axis), node,
         f"{a.shape} and {b.shape} differ outside the concatenated dim {axis}")
    shape = list(a.shape)
    shape[axis] += b.shape[axis]
    return _joined_kind(a, b, shape)


def _slice_len(node, t) -> int:
    a = node.attrs
    need(0 <= a["dim"] < len(t.shape) and a["step"] >= 1, node,
         f"cannot slice per-step dim {a['dim']} of {t.shape} with step {a['step']}")
    n = len(range(a["start"], a["stop"], a["step"]))
    need(0 <= a["start"] and a["stop"] <= t.shape[a["dim"]] and n >= 1, node,
         f"slice {a['start']}:{a['stop']}:{a['step']} of dim {a['dim']} (size {t.shape[a['dim']]}) is empty or "
         "out of range")
    return n


def infer_slice(node, ins):
    (t,) = ins
    shape = list(t.shape)
    shape[node.attrs["dim"]] = _slice_len(node, t)
    return spike_or_real(t, shape)


def _reduced(node, t):
    """(output shape, number of values reduced into each output) of a sum/mean over per-step ``dims``."""
    dims = tuple(node.attrs["dims"])
    need(len(dims) >= 1 and len(set(dims)) == len(dims) and all(0 <= d < len(t.shape) for d in dims), node,
         f"reduction dims {dims} are not distinct per-step dims of {t.shape}")
    keep = node.attrs["keepdim"]
    shape = tuple(1 if i in dims else s for i, s in enumerate(t.shape)) if keep else \
        tuple(s for i, s in enumerate(t.shape) if i not in dims)
    return shape, int(np.prod([t.shape[d] for d in dims]))


def infer_sum(node, ins):
    (t,) = ins
    shape, n = _reduced(node, t)
    need(len(shape) >= 1, node, "a sum over every per-step dim leaves a 0-d step; keep a dim (keepdim=True)")
    return TensorType(shape) if t.kind == "real" else TensorType(shape, "integer", n * (t.ceiling or 1))


def infer_mean(node, ins):
    (t,) = ins
    shape, _ = _reduced(node, t)
    need(len(shape) >= 1, node, "a mean over every per-step dim leaves a 0-d step; keep a dim (keepdim=True)")
    return TensorType(shape)


def _steps_dims(node):
    return [2 + d for d in node.attrs["dims"]]


def slice_kernel(ctx, node, p, x):
    a = node.attrs
    return x[(slice(None),) * (2 + a["dim"]) + (slice(a["start"], a["stop"], a["step"]),)].contiguous()


def mean_kernel(ctx, node, p, x):
    float_only(ctx, node)
    return x.mean(_steps_dims(node), keepdim=node.attrs["keepdim"])


def div_kernel(ctx, node, p, x):
    float_only(ctx, node)
    return x / node.attrs["divisor"]


def infer_div(node, ins):
    need(node.attrs["divisor"] != 0, node, "division by zero")
    return TensorType(ins[0].shape)


define("concat", 2, infer_concat, kernel=lambda ctx, node, p, a, b: torch.cat([a, b], 2 + node.attrs["axis"]),
       doc="[a, b] joined along per-step dim attr axis (torch.cat of two)")
define("slice", 1, infer_slice, kernel=slice_kernel,
       doc="x[..., start:stop:step, ...] on per-step dim attr dim (attrs start, stop, step; step >= 1)")
define("sum", 1, infer_sum, kernel=lambda ctx, node, p, x: x.sum(_steps_dims(node), keepdim=node.attrs["keepdim"]),
       doc="sum over per-step dims attr dims (attr keepdim): a count on spikes")
define("mean", 1, infer_mean, kernel=mean_kernel,
       doc="mean over per-step dims attr dims (attr keepdim), as torch.mean computes it (real output)")
define("div", 1, infer_div, kernel=div_kernel, doc="y = x / c; attr divisor c (a nonzero scalar), rounded as torch's")


def infer_amax(node, ins):
    (t,) = ins
    shape, _ = _reduced(node, t)
    need(len(shape) >= 1, node, "a max over every per-step dim leaves a 0-d step; keep a dim (keepdim=True)")
    return spike_or_real(t, shape)  # a max of spikes is one of them: an OR over binary spikes


def infer_clamp(node, ins):
    lo, hi = node.attrs["lo"], node.attrs["hi"]
    need(lo is not None or hi is not None, node, "clamp needs a lower or an upper bound")
    need(lo is None or hi is None or lo <= hi, node, f"clamp bounds lo={lo} > hi={hi}")
    return TensorType(ins[0].shape)


def clamp_kernel(ctx, node, p, x):
    float_only(ctx, node)
    return torch.clamp(x, node.attrs["lo"], node.attrs["hi"])


def _real_unary(fn):
    def kernel(ctx, node, p, x):
        float_only(ctx, node)
        return fn(x)
    return kernel


define("amax", 1, infer_amax, kernel=lambda ctx, node, p, x: x.amax(_steps_dims(node), keepdim=node.attrs["keepdim"]),
       doc="max over per-step dims attr dims (attr keepdim): keeps the value kind")
define("clamp", 1, infer_clamp, kernel=clamp_kernel, doc="min(max(x, lo), hi); attrs lo, hi (None: unbounded)")
define("sigmoid", 1, lambda n, i: TensorType(i[0].shape), kernel=_real_unary(torch.sigmoid), dense=True,
       doc="1 / (1 + exp(-x)) (real)")
define("tanh", 1, lambda n, i: TensorType(i[0].shape), kernel=_real_unary(torch.tanh), dense=True, doc="tanh(x) (real)")
