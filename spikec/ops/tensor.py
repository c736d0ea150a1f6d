"""Tensor ops the ATen capture lowers ordinary PyTorch onto: GELU, comparisons and select, broadcast, indexing by
constant indices, and the transposed convolution. All attrs count per-step dims (T and B are never touched).

  gelu            y = x Phi(x) (attr approximate "none"), or torch's tanh form ("tanh")   (real, as torch)
  compare         y = [x <op> value] as 0/1; attrs op (gt, ge, lt, le, eq, ne), value (a number): binary spikes
  where           y = a where cond != 0, else b; inputs (cond, a, b) of one shape, cond binary
  expand          y = x broadcast to attr shape (per-step dims of size 1 repeated): keeps the value kind
  index_select    y = x[..., indices, ...] on per-step dim attr dim (attr indices: a tuple of ints)
  divide          y = a / b (two operands of one shape; torch's division, real output)
  const_binary    y = x <op> c with a constant tensor c (param value, broadcast against the per-step shape);
                  attr op: add (x + c), sub (x - c), rsub (c - x), mul (x * c), div (x / c), rdiv (c / x)
  math            y = fn(x), attr fn: abs, sign, floor, ceil, round, sqrt, rsqrt (1 / sqrt x), reciprocal, exp, log
                  -- torch's functions (abs keeps a spike kind; the rest are real)
  var             torch.var over per-step dims attr dims (attrs correction, keepdim; real)
  log_softmax     log(softmax(x)) over per-step dim attr dim (real)
  adaptive_avgpool2d  attr size (oh, ow): torch's adaptive average pooling per step, any output size
  conv_transpose2d  weight (C_in, C_out/groups, kH, kW), bias (C_out,); attrs stride, padding, output_padding,
                  dilation (pairs), groups -- torch's conv_transpose2d per step
"""
import numpy as np
import torch
import torch.nn.functional as F

from spikec.ir.graph import TensorType
from spikec.ops.common import exact_sum, float_only, per_step, sizes, spike_or_real
from spikec.ops.registry import Cost, Param, define, need
from spikec.ops.structure import _joined_kind

COMPARISONS = {"gt": torch.gt, "ge": torch.ge, "lt": torch.lt, "le": torch.le, "eq": torch.eq, "ne": torch.ne}


def gelu_kernel(ctx, node, p, x):
    float_only(ctx, node)
    return F.gelu(x, approximate=node.attrs["approximate"])


def infer_gelu(node, ins):
    need(node.attrs["approximate"] in ("none", "tanh"), node,
         f"approximate={node.attrs['approximate']!r}; torch's GELU has 'none' and 'tanh'")
    return TensorType(ins[0].shape)


def infer_compare(node, ins):
    need(node.attrs["op"] in COMPARISONS, node, f"comparison {node.attrs['op']!r} is not one of {sorted(COMPARISONS)}")
    return TensorType(ins[0].shape, "binary")


def compare_kernel(ctx, node, p, x):
    return COMPARISONS[node.attrs["op"]](x, node.attrs["value"]).to(x.dtype)


def infer_where(node, ins):
    cond, a, b = ins
    need(cond.shape == a.shape == b.shape, node, f"cond, a and b have shapes {cond.shape}, {a.shape}, {b.shape}; "
                                                 "where takes one shape (no broadcasting)")
    need(cond.kind == "binary", node, f"cond is {cond.describe()}, not a 0/1 mask (binary)")
    return _joined_kind(a, b, a.shape)


def infer_expand(node, ins):
    (t,) = ins
    shape = tuple(node.attrs["shape"])
    need(len(shape) == len(t.shape) and all(s == d or d == 1 for s, d in zip(shape, t.shape)), node,
         f"cannot broadcast {t.shape} to {shape} (a dim of size 1 repeats, the others stay)")
    return spike_or_real(t, shape)


def infer_index_select(node, ins):
    (t,) = ins
    d, idx = node.attrs["dim"], tuple(node.attrs["indices"])
    need(0 <= d < len(t.shape) and len(idx) >= 1, node, f"cannot index per-step dim {d} of {t.shape} by {idx}")
    need(all(0 <= i < t.shape[d] for i in idx), node, f"indices {idx} out of range for dim {d} of size {t.shape[d]}")
    shape = list(t.shape)
    shape[d] = len(idx)
    return spike_or_real(t, shape)


def index_select_kernel(ctx, node, p, x):
    return x.index_select(2 + node.attrs["dim"], torch.tensor(node.attrs["indices"], dtype=torch.long))


CONST_OPS = {"add": torch.add, "sub": torch.sub, "rsub": lambda x, c: c - x, "mul": torch.mul, "div": torch.div,
             "rdiv": lambda x, c: c / x}


def infer_same_pair(node, ins):
    a, b = ins
    need(a.shape == b.shape, node, f"operands have shapes {a.shape} and {b.shape}; element-wise ops need identical "
                                   "shapes (no broadcasting)")
    return TensorType(a.shape)


def _real_div(ctx, node, a, b):
    float_only(ctx, node)
    return a / b


def infer_const_binary(node, ins):
    (t,) = ins
    c = node.params["value"]
    need(node.attrs["op"] in CONST_OPS, node, f"op {node.attrs['op']!r} is not one of {sorted(CONST_OPS)}")
    ok = c.ndim <= len(t.shape) and all(a in (1, b) for a, b in zip(c.shape[::-1], t.shape[::-1]))
    need(ok, node, f"constant of shape {c.shape} does not broadcast against the per-step shape {t.shape}")
    return TensorType(t.shape)


def const_binary_kernel(ctx, node, p, x):
    float_only(ctx, node)
    c = p["value"]
    return CONST_OPS[node.attrs["op"]](x, c.reshape((1, 1) + (1,) * (x.dim() - 2 - c.dim()) + tuple(c.shape)))


MATH = {"abs": torch.abs, "sign": torch.sign, "floor": torch.floor, "ceil": torch.ceil, "round": torch.round,
        "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal, "exp": torch.exp, "log": torch.log}


def infer_math(node, ins):
    fn = node.attrs["fn"]
    need(fn in MATH, node, f"fn {fn!r} is not one of {sorted(MATH)}")
    return spike_or_real(ins[0], ins[0].shape) if fn == "abs" else TensorType(ins[0].shape)


def math_kernel(ctx, node, p, x):
    if node.attrs["fn"] != "abs":
        float_only(ctx, node)
    return MATH[node.attrs["fn"]](x)


def infer_var(node, ins):
    (t,) = ins
    dims, keep = tuple(node.attrs["dims"]), node.attrs["keepdim"]
    need(len(dims) >= 1 and len(set(dims)) == len(dims) and all(0 <= d < len(t.shape) for d in dims), node,
         f"variance dims {dims} are not distinct per-step dims of {t.shape}")
    shape = tuple(1 if i in dims else s for i, s in enumerate(t.shape)) if keep else \
        tuple(s for i, s in enumerate(t.shape) if i not in dims)
    need(len(shape) >= 1, node, "a variance over every per-step dim leaves a 0-d step; keep a dim (keepdim=True)")
    return TensorType(shape)


def var_kernel(ctx, node, p, x):
    float_only(ctx, node)
    a = node.attrs
    return torch.var(x, [2 + d for d in a["dims"]], correction=a["correction"], keepdim=a["keepdim"])


def log_softmax_kernel(ctx, node, p, x):
    float_only(ctx, node)
    return torch.log_softmax(x, dim=2 + node.attrs["dim"])


def infer_adaptive(node, ins):
    (t,) = ins
    oh, ow = node.attrs["size"]
    need(len(t.shape) == 3 and 1 <= oh and 1 <= ow, node, f"expects a (C, H, W) input and a positive output size, "
                                                          f"got {t.shape} -> {(oh, ow)}")
    return TensorType((t.shape[0], oh, ow))


def adaptive_kernel(ctx, node, p, x):
    float_only(ctx, node)
    return per_step(lambda z: F.adaptive_avg_pool2d(z, tuple(node.attrs["size"])), x)


def adaptive_windows(size: int, out: int) -> list[tuple[int, int]]:
    """torch's adaptive pooling windows along one dim: ``[floor(i size / out), ceil((i + 1) size / out))``."""
    return [(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]


# -- transposed convolution --------------------------------------------------------------------------------
CONV_T_PARAMS = (Param("weight", "(C_in, C_out/groups, kH, kW)", "kernel (PyTorch's conv_transpose orientation)"),
                 Param("bias", "(C_out,)", "added to every output position", required=False))


def transposed_len(size, k, s, p, op, d):
    """Output length of a transposed convolution as torch computes it."""
    return (size - 1) * s - 2 * p + d * (k - 1) + op + 1


def infer_conv_transpose(node, ins):
    (t,) = ins
    w, a = node.params["weight"], node.attrs
    g = a["groups"]
    need(len(t.shape) == 3, node, f"expects a (C, H, W) input, got shape {t.shape}")
    need(w.ndim == 4 and w.shape[0] == t.shape[0] and t.shape[0] % g == 0, node,
         f"weight {w.shape} with groups={g} expects {w.shape[0]} input channels, got {t.shape[0]}")
    co = w.shape[1] * g
    if "bias" in node.params:
        need(node.params["bias"].shape == (co,), node, f"bias must have shape ({co},)")
    out = [transposed_len(t.shape[1 + i], w.shape[2 + i], a["stride"][i], a["padding"][i], a["output_padding"][i],
                          a["dilation"][i]) for i in range(2)]
    need(all(o >= 1 for o in out), node, f"transposed kernel {w.shape[2:]} gives an empty output")
    need(all(a["output_padding"][i] < max(a["stride"][i], a["dilation"][i]) for i in range(2)), node,
         f"output_padding {a['output_padding']} must be smaller than the stride or the dilation")
    return TensorType((co, *out))


def conv_transpose_kernel(ctx, node, p, x):
    a = node.attrs
    conv = lambda x, w, b: per_step(lambda z: F.conv_transpose2d(z, w, b, a["stride"], a["padding"],
                                                                   a["output_padding"], a["groups"], a["dilation"]), x)
    return exact_sum(ctx, node, conv, x, p["weight"], p.get("bias"))


def conv_transpose_events(node, active):
    """Each input value is scattered to every tap of its ``C_out / groups`` outputs."""
    w = node.params["weight"]
    return int(np.asarray(active, dtype=np.float64).sum()) * int(np.prod(w.shape[1:]))


def conv_transpose_dense(node) -> int:
    """Multiply-accumulates per step and sample: every output position reads ``C_in / groups`` channels through
    the kernel taps that land on an input position, about ``kH kW / (sH sW)`` of them (exact for stride 1)."""
    w, (sh, sw) = node.params["weight"], node.attrs["stride"]
    cin_g = w.shape[0] // node.attrs["groups"]
    return int(np.prod(node.type.shape)) * cin_g * int(np.prod(w.shape[2:])) // (sh * sw)


CONV_T_COST = Cost(conv_transpose_dense, conv_transpose_events)

define("gelu", 1, infer_gelu, kernel=gelu_kernel, dense=True, doc="x Phi(x), torch's GELU; attr approximate (real)")
define("compare", 1, infer_compare, kernel=compare_kernel,
       doc="[x op value] as 0/1 (binary); attrs op (gt ge lt le eq ne), value")
define("where", 3, infer_where, kernel=lambda ctx, node, p, c, a, b: torch.where(c != 0, a, b),
       doc="a where cond != 0, else b; inputs (cond, a, b) of one shape")
define("expand", 1, infer_expand, kernel=lambda ctx, node, p, x: x.expand(*x.shape[:2], *node.attrs["shape"]),
       doc="broadcast per-step dims of size 1 to attr shape (keeps the value kind)")
define("index_select", 1, infer_index_select, kernel=index_select_kernel,
       doc="x[..., indices, ...] on per-step dim attr dim; attr indices (constant)")
define("divide", 2, infer_same_pair,
       kernel=lambda ctx, node, p, a, b: _real_div(ctx, node, a, b),
       doc="a / b (identical shapes; real output)")
define("const_binary", 1, infer_const_binary, kernel=const_binary_kernel,
       params=(Param("value", "(*broadcastable)", "the constant operand, broadcast against the per-step shape"),),
       doc="x op c with a constant tensor c (attr op: add sub rsub mul div rdiv; real output)")
define("math", 1, infer_math, kernel=math_kernel,
       doc="fn(x) for attr fn: abs sign floor ceil round sqrt rsqrt reciprocal exp log (torch's)")
define("var", 1, infer_var, kernel=var_kernel, dense=True,
       doc="torch.var over per-step dims attr dims (attrs correction, keepdim; real)")
define("log_softmax", 1, lambda n, i: TensorType(i[0].shape), kernel=log_softmax_kernel, dense=True,
       doc="log_softmax over attr dim (a per-step dim; real)")
define("adaptive_avgpool2d", 1, infer_adaptive, kernel=adaptive_kernel,
       doc="adaptive average pooling per step to attr size (oh, ow), any size (real)")
define("conv_transpose2d", 1, infer_conv_transpose, count=lambda n: sizes(n, "weight", "bias"),
       kernel=conv_transpose_kernel, synaptic=True, params=CONV_T_PARAMS, cost=CONV_T_COST,
       doc="transposed 2-d convolution per step; attrs stride, padding, output_padding, dilation, groups")
