"""The one table of ATen lowerings: an ATen overload -> ``fn(lw, *args, **kwargs)`` emitting IR ops.

Each function receives the ATen node's arguments with IR values as ``Value`` (node name and lead dims) and
constants as tensors; it returns a ``Value`` (or a tuple of them). The shape-changing views are read from the
output size ATen recorded (``node.meta['val']``): a size equal to a lead dim's example size is that lead dim.
"""
import math

import torch

from spikec.frontend.aten.values import Unavailable, Value
from spikec.frontend.torch_functions import B_DIM, T_DIM, TB_DIM

aten = torch.ops.aten


def _out_shape(lw) -> tuple:
    return tuple(lw.aten_node.meta["val"].shape)


def _const(lw, v, what):
    """A constant tensor argument (a weight); an IR value there is refused."""
    if isinstance(v, Value):
        lw.refuse(f"takes the model's activations as its {what}", f"give it a static {what} (a module parameter)")
    return v


def _scalar(lw, v):
    if isinstance(v, torch.Tensor):
        if v.dim() != 0:
            lw.refuse(f"combines an activation with a constant tensor of shape {tuple(v.shape)} (broadcast)",
                      "use activations of one shape, or a Python number; a learned offset belongs in a module "
                      "with a converter")
        return float(v.item())
    return float(v)


def _same(lw, a: Value, b: Value):
    if a.lead != b.lead or lw.shape(a) != lw.shape(b):
        lw.refuse(f"combines shapes {(*a.lead, *lw.shape(a))} and {(*b.lead, *lw.shape(b))}; spikec's element-wise "
                  "ops take one shape (no broadcasting)", "expand or reshape one operand with modules first")


# -- views: reshape, permute, identities -----------------------------------------------------------------
def reshape_to(lw, x: Value, shape) -> Value:
    """``x`` viewed as torch shape ``shape``: lead dims kept, merged ([T, B] -> [T*B]) or parted again."""
    size, lead = lw.sizes, x.lead
    shape = tuple(shape)
    sz = tuple(size[d] for d in lead)
    if shape[:len(lead)] == sz:
        new_lead, per = lead, shape[len(lead):]
    elif lead == (T_DIM, B_DIM) and shape[:1] == (size[TB_DIM],):
        new_lead, per = (TB_DIM,), shape[1:]
    elif lead == (TB_DIM,) and shape[:2] == (size[T_DIM], size[B_DIM]):
        new_lead, per = (T_DIM, B_DIM), shape[2:]
    else:
        lw.refuse(f"reshapes {(*lead, *lw.shape(x))} to {shape}, mixing the leading "
                  f"[{', '.join(map(str, lead))}] dims with per-step dims", "reshape only the per-step dims")
    if math.prod(per) != math.prod(lw.shape(x)) or not per:
        lw.refuse(f"reshapes {(*lead, *lw.shape(x))} to {shape}, moving values between steps or samples",
                  "reshape only the per-step dims")
    if tuple(per) == lw.shape(x):
        return Value(x.name, new_lead)
    return Value(lw.emit("reshape", [x], {"shape": tuple(per)}), new_lead)


def _view(lw, x, *args, **kwargs):
    return reshape_to(lw, x, _out_shape(lw))


def _identity(lw, x, *args, **kwargs):
    return x


def _expand(lw, x, sizes, *args, **kwargs):
    if _out_shape(lw) != (*(lw.sizes[d] for d in x.lead), *lw.shape(x)):
        lw.refuse("broadcasts an activation to a larger shape", "use operands of one shape")
    return x


def _permute(lw, x, dims):
    k, nd = len(x.lead), len(x.lead) + len(lw.shape(x))
    dims = tuple(d % nd for d in dims)
    if dims[:k] != tuple(range(k)):
        lw.refuse(f"permutes {dims}, moving the leading [{', '.join(map(str, x.lead))}] dims",
                  "permute only the per-step dims")
    perm = tuple(d - k for d in dims[k:])
    if perm == tuple(range(len(perm))):
        return x
    return Value(lw.emit("transpose", [x], {"perm": perm}), x.lead)


# -- joins and parts -------------------------------------------------------------------------------------
def _cat(lw, tensors, dim=0):
    values = [_activation(lw, t, "every tensor it joins") for t in tensors]
    axis = lw.dim(values[0], dim)
    y = values[0]
    for v in values[1:]:
        if v.lead != y.lead:
            lw.refuse(f"joins tensors with leading dims {y.lead} and {v.lead}", "join tensors of one layout")
        y = Value(lw.emit("concat", [y, v], {"axis": axis}), y.lead)
    return y


def _activation(lw, v, what) -> Value:
    if not isinstance(v, Value):
        lw.refuse(f"takes a constant tensor as {what}", "join only tensors computed from the model's input")
    return v


def slice_of(lw, x: Value, d: int, start, stop, step=1) -> Value:
    """``x`` sliced along per-step dim ``d`` (python slice semantics, clamped as torch clamps)."""
    n = lw.shape(x)[d]
    start, stop, step = slice(start, stop, step).indices(n)
    if step < 1:
        lw.refuse(f"slices with step {step}", "slice with a positive step")
    if (start, stop, step) == (0, n, 1):
        return x
    if len(range(start, stop, step)) == 0:
        lw.refuse("makes an empty slice", "slice a non-empty range")
    return Value(lw.emit("slice", [x], {"dim": d, "start": start, "stop": stop, "step": step}), x.lead)


def _slice(lw, x, dim=0, start=None, end=None, step=1):
    return slice_of(lw, x, lw.dim(x, dim), start, end, step)


def _select(lw, x, dim, index):
    d = lw.dim(x, dim)
    n = lw.shape(x)[d]
    index = index % n
    part = slice_of(lw, x, d, index, index + 1)
    shape = lw.shape(part)[:d] + lw.shape(part)[d + 1:]
    if not shape:
        lw.refuse("selects the last per-step element, leaving a 0-d step", "keep a dim (x[..., i:i + 1])")
    return Value(lw.emit("reshape", [part], {"shape": shape}), x.lead)


def _split_with_sizes(lw, x, sizes, dim=0):
    d, start, parts = lw.dim(x, dim), 0, []
    for s in sizes:
        parts.append(slice_of(lw, x, d, start, start + s))
        start += s
    return tuple(parts)


def _split(lw, x, size, dim=0):
    n = lw.shape(x)[lw.dim(x, dim)]
    return _split_with_sizes(lw, x, [min(size, n - s) for s in range(0, n, size)], dim)


# -- reductions ---------------------------------------------------------------------------------------------
def _reduction(op):
    def lower(lw, x, dims=None, keepdim=False, *, dtype=None):
        if not dims:
            lw.refuse("reduces over every dim, time and batch included", "give the per-step dims to reduce (and "
                      "reduce over time outside the model)")
        over_time = "return the [T, B, ...] sequence and reduce it over time outside the model (spikec's graphs map " \
            "[T, B, ...] to [T, B, ...]), or "
        dims = tuple(sorted({lw.dim(x, d, over_time) for d in dims}))
        return Value(lw.emit(op, [x], {"dims": dims, "keepdim": bool(keepdim)}), x.lead)
    return lower


# -- element-wise ---------------------------------------------------------------------------------------------
def _add(lw, a, b, *, alpha=1):
    if isinstance(a, Value) and isinstance(b, Value):
        _same(lw, a, b)
        if alpha != 1:
            b = Value(lw.emit("scale", [b], {"a": float(alpha), "b": 0.0}), b.lead)
        return Value(lw.emit("add", [a, b]), a.lead)
    x, c = (a, b) if isinstance(a, Value) else (b, a)
    return Value(lw.emit("scale", [x], {"a": 1.0, "b": _scalar(lw, c) * alpha}), x.lead)


def _sub(lw, a, b, *, alpha=1):
    if isinstance(b, Value):  # a - b = a + (-alpha) b: negation is exact, so this is torch's a - b
        neg = Value(lw.emit("scale", [b], {"a": -float(alpha), "b": 0.0}), b.lead)
        return _add(lw, a, neg)
    return _add(lw, a, -_scalar(lw, b) * alpha)


def _mul(lw, a, b):
    if isinstance(a, Value) and isinstance(b, Value):
        _same(lw, a, b)
        return Value(lw.emit("mul", [a, b]), a.lead)
    x, c = (a, b) if isinstance(a, Value) else (b, a)
    return Value(lw.emit("scale", [x], {"a": _scalar(lw, c), "b": 0.0}), x.lead)


def _div(lw, a, b, *, rounding_mode=None):
    if not isinstance(a, Value) or isinstance(b, Value) or rounding_mode is not None:
        lw.refuse("divides by an activation (or rounds the quotient)", "divide activations by a Python number")
    return Value(lw.emit("div", [a], {"divisor": _scalar(lw, b)}), a.lead)


def _max_dim(lw, x, dim, keepdim=False):
    return _reduction("amax")(lw, x, [dim], keepdim), Unavailable("the indices of the maxima")


def _clamp(lw, x, lo=None, hi=None):
    lo, hi = (None if v is None else _scalar(lw, v) for v in (lo, hi))
    return Value(lw.emit("clamp", [x], {"lo": lo, "hi": hi}), x.lead)


def _neg(lw, x):
    return Value(lw.emit("scale", [x], {"a": -1.0, "b": 0.0}), x.lead)


def _to_copy(lw, x, *, dtype=None, **kwargs):
    """``x.to(...)`` / ``x.float()``: the identity when the dtype stays (a device move, a cast to its own dtype)."""
    if dtype is not None and dtype != lw.aten_node.args[0].meta["val"].dtype:
        lw.refuse(f"casts to {dtype}, which changes the values the float64 proof compares",
                  "drop the cast (spikec proves in float64), or cast the model's parameters instead")
    return x


def _unary(op):
    def lower(lw, x, *args, **kwargs):
        return Value(lw.emit(op, [x]), x.lead)
    return lower


def _softmax(lw, x, dim, half_to_float=False):
    return Value(lw.emit("softmax", [x], {"dim": lw.dim(x, dim)}), x.lead)


# -- products, convolutions, pooling, normalization ------------------------------------------------------------
def _bmm(lw, a, b):
    if not (isinstance(a, Value) and isinstance(b, Value)):
        return _linear(lw, None, a, b)
    return Value(lw.emit("matmul", [a, b]), a.lead)


def _linear(lw, bias, x, w_t, *, beta=1, alpha=1):
    """``addmm(bias, x, W^T)`` / ``mm(x, W^T)`` with a constant W: a linear layer."""
    if not isinstance(x, Value) or beta != 1 or alpha != 1:
        lw.refuse("multiplies a constant by an activation (or scales the sum)", "use nn.Linear")
    w = _const(lw, w_t, "weight").t()
    b = None if bias is None else _const(lw, bias, "bias")
    return Value(lw.emit("linear", [x], {}, {"weight": w, "bias": b}), x.lead)


def _per_step_input(lw, x, what):
    if len(x.lead) != 1:
        lw.refuse(f"{what} on a [T, B, ...] tensor: torch takes T for the batch and B for the channels",
                  "merge T and B first (x.flatten(0, 1), then unflatten(0, (T, B))), wrap it in "
                  "spikec.nn.TimeDistributed, or compile a per-step forward with --stepping step")


def _convolution(lw, x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    _per_step_input(lw, x, "a convolution")
    w = _const(lw, weight, "weight")
    if transposed:
        lw.refuse("is a transposed convolution, which the IR has no op for", "use a convolution and upsampling")
    if w.dim() == 3:
        return conv1d(lw, x, w, bias, stride[0], padding[0], dilation[0], groups)
    if w.dim() != 4:
        lw.refuse(f"is a {w.dim() - 2}-d convolution", "use Conv1d or Conv2d")
    attrs = {"stride": tuple(stride), "padding": tuple(padding), "dilation": tuple(dilation), "groups": groups}
    return Value(lw.emit("conv2d", [x], attrs, {"weight": w, "bias": bias}), x.lead)


def conv1d(lw, x, w, bias, stride, padding, dilation, groups) -> Value:
    """A 1-d convolution as the 2-d one ATen runs for it: the step ``(C, L)`` as ``(C, 1, L)``, the kernel
    ``(1, k)`` (what ``spikingjelly_layers.conv1d`` emits for SpikingJelly's Conv1d)."""
    c, length = lw.shape(x)
    y = Value(lw.emit("reshape", [x], {"shape": (c, 1, length)}), x.lead)
    attrs = {"stride": (1, stride), "padding": (0, padding), "dilation": (1, dilation), "groups": groups}
    y = Value(lw.emit("conv2d", [y], attrs, {"weight": w.unsqueeze(2), "bias": bias}), x.lead)
    out_c, _, out_l = lw.shape(y)
    return Value(lw.emit("reshape", [y], {"shape": (out_c, out_l)}), x.lead)


def _pair(v, default):
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    v = v or list(default)
    return tuple(v * 2 if len(v) == 1 else v)


def _avg_pool2d(lw, x, kernel, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    _per_step_input(lw, x, "average pooling")
    if divisor_override is not None:
        lw.refuse("has divisor_override", "leave divisor_override=None")
    k = _pair(kernel, ())
    attrs = {"kernel": k, "stride": _pair(stride, k), "padding": _pair(padding, ()), "ceil_mode": bool(ceil_mode),
             "count_include_pad": bool(count_include_pad)}
    return Value(lw.emit("avgpool2d", [x], attrs), x.lead)


def _max_pool2d(lw, x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
    _per_step_input(lw, x, "max pooling")
    k = _pair(kernel, ())
    attrs = {"kernel": k, "stride": _pair(stride, k), "padding": _pair(padding, ()),
             "dilation": _pair(dilation, ()), "ceil_mode": bool(ceil_mode)}
    return Value(lw.emit("maxpool2d", [x], attrs), x.lead), Unavailable("max pooling's indices")


def _adaptive_avg_pool2d(lw, x, output_size):
    _per_step_input(lw, x, "adaptive average pooling")
    (_, h, w), (oh, ow) = lw.shape(x), _pair(output_size, ())
    if h % oh or w % ow:
        lw.refuse(f"output size {(oh, ow)} does not divide input size {(h, w)}", "choose an output size that "
                  "divides the input")
    k = (h // oh, w // ow)
    attrs = {"kernel": k, "stride": k, "padding": (0, 0), "ceil_mode": False, "count_include_pad": True}
    return Value(lw.emit("avgpool2d", [x], attrs), x.lead)


def _batch_norm_eval(lw, x, weight, bias, mean, var, momentum, eps):
    _per_step_input(lw, x, "batch norm")
    c = lw.shape(x)[0]
    params = {"gamma": torch.ones(c) if weight is None else _const(lw, weight, "scale"),
              "beta": torch.zeros(c) if bias is None else _const(lw, bias, "shift"),
              "mean": _const(lw, mean, "running mean"), "var": _const(lw, var, "running variance")}
    y = Value(lw.emit("batchnorm", [x], {"eps": float(eps)}, params), x.lead)
    return y, Unavailable("batch norm's saved mean"), Unavailable("batch norm's saved inverse deviation")


def _native_batch_norm(lw, x, weight, bias, mean, var, training, momentum, eps):
    if training or mean is None:
        lw.refuse("normalizes with the batch's own statistics", "build BatchNorm with track_running_stats=True")
    return _batch_norm_eval(lw, x, weight, bias, mean, var, momentum, eps)


LOWERINGS = {
    **{op: _view for op in (aten.view.default, aten._unsafe_view.default, aten.reshape.default,
                            aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.unsqueeze.default)},
    **{op: _identity for op in (aten.clone.default, aten.alias.default, aten.detach.default,
                                aten.lift_fresh_copy.default)},
    aten.expand.default: _expand,
    aten.permute.default: _permute,
    aten.cat.default: _cat,
    aten.slice.Tensor: _slice,
    aten.select.int: _select,
    aten.split_with_sizes.default: _split_with_sizes,
    aten.split.Tensor: _split,
    aten.sum.dim_IntList: _reduction("sum"),
    aten.mean.dim: _reduction("mean"),
    aten.amax.default: _reduction("amax"),
    aten.max.dim: _max_dim,
    aten.clamp.default: _clamp,
    aten.sigmoid.default: _unary("sigmoid"),
    aten.tanh.default: _unary("tanh"),
    aten.add.Tensor: _add,
    aten.add.Scalar: _add,
    aten.sub.Tensor: _sub,
    aten.sub.Scalar: _sub,
    aten.mul.Tensor: _mul,
    aten.mul.Scalar: _mul,
    aten.div.Tensor: _div,
    aten.div.Scalar: _div,
    aten.div.Tensor_mode: _div,
    aten.neg.default: _neg,
    aten._to_copy.default: _to_copy,
    aten.relu.default: _unary("relu"),
    aten.relu_.default: _unary("relu"),  # nn.ReLU(inplace=True): the value it returns (as the converter it replaced)
    aten._softmax.default: _softmax,
    aten.bmm.default: _bmm,
    aten.mm.default: _bmm,
    aten.addmm.default: _linear,
    aten.convolution.default: _convolution,
    aten.avg_pool2d.default: _avg_pool2d,
    aten.max_pool2d_with_indices.default: _max_pool2d,
    aten._adaptive_avg_pool2d.default: _adaptive_avg_pool2d,
    aten._native_batch_norm_legit_no_training.default: _batch_norm_eval,
    aten.native_batch_norm.default: _native_batch_norm,
}
