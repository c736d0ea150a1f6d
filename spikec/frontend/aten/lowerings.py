"""The one table of ATen lowerings: an ATen overload -> ``fn(lw, *args, **kwargs)`` emitting IR ops.

Each function receives the ATen node's arguments with IR values as ``Value`` (node name and lead dims) and
constants as tensors; it returns a ``Value`` (or a tuple of them). The shape-changing views are read from the
output size ATen recorded (``node.meta['val']``): a size equal to a lead dim's example size is that lead dim.
"""
import math

import torch

from spikec.frontend.aten.values import Unavailable, Value
from spikec.frontend.torch_functions import B_DIM, T_DIM, TB_DIM
from spikec.ops.pooling import window_sum_as_conv

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


def _same(lw, *values: Value) -> list[Value]:
    """The operands of an element-wise op on one shape: each broadcast (``expand``) to the output's per-step shape;
    their lead dims must agree (torch would broadcast T or B against a per-step dim otherwise)."""
    out = _out_shape(lw)
    for v in values:
        nd = len(v.lead) + len(lw.shape(v))
        if v.lead != values[0].lead or v.folded != values[0].folded or nd != len(out):
            shapes = " and ".join(str((*x.lead, *lw.shape(x))) for x in values)
            lw.refuse(f"combines shapes {shapes}: spikec broadcasts per-step dims of size 1 only, between "
                      "operands with the same leading dims and rank", "give the operands one rank (unsqueeze the "
                      "smaller one's per-step dims) and the same leading [T, B] dims")
    return [expand_to(lw, v, out[len(v.lead):]) for v in values]


def expand_to(lw, v: Value, shape) -> Value:
    """``v`` broadcast to per-step ``shape`` (a dim of size 1 repeats); ``v`` itself when it has that shape."""
    shape = tuple(shape)
    if shape == lw.shape(v):
        return v
    if v.folded:
        lw.refuse("broadcasts a tensor whose first dim merges T, B and per-step dims", "broadcast before the view")
    return Value(lw.emit("expand", [v], {"shape": shape}), v.lead)


# -- views: reshape, permute, identities -----------------------------------------------------------------
def reshape_to(lw, x: Value, shape) -> Value:
    """``x`` viewed as torch shape ``shape``: lead dims kept, merged ([T, B] -> [T*B]) or parted again."""
    size, lead = lw.sizes, x.lead
    shape = tuple(shape)
    sz = tuple(size[d] for d in lead)
    k = _fold_of(lw, x, shape)
    if k:  # [T, B, N, D] viewed as [T*B*N, D] (F.linear and x @ W on 3+ dims): the product's operand
        return Value(x.name, lead, k)
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


def _fold_of(lw, x: Value, shape) -> int:
    """``k`` > 0 when torch ``shape`` merges ``x``'s lead dims and its first ``k`` per-step dims into one, the rest
    of ``x``'s per-step shape unchanged; 0 otherwise."""
    per = lw.shape(x)
    lead = math.prod(lw.sizes[d] for d in x.lead)
    for k in range(1, len(per)):
        if shape == (lead * math.prod(per[:k]), *per[k:]):
            return k
    return 0


STATIC_TIME = ("if this is x.unsqueeze(0).repeat(T, ...) (or .expand), forward makes the time steps from one static "
               "input (SpikingJelly's CSNN tutorial); spikec takes that only as the first thing forward does to its "
               "input (x.unsqueeze(0).repeat(T, 1, ..., 1), .expand(T, -1, ..., -1) or x[None] with a constant T: "
               "--stepping loop, a static [B, ...] input), and here it is not",
               "repeat the model's input itself first thing in forward (x_seq = x.unsqueeze(0).repeat(self.T, 1, 1, "
               "1, 1), every other repeat 1), or repeat outside the model: give forward [T, B, ...] inputs (e.g. "
               "np.repeat(x[None], T, 0) saved as the --inputs array), or write the loop as a for-loop over T "
               "feeding x each step (--stepping loop takes a static [B, ...] input)")


def _view(lw, x, *args, **kwargs):
    out = _out_shape(lw)
    if lw.aten_node.target is torch.ops.aten.unsqueeze.default and len(out) > len(x.lead) and out[0] == 1 \
            and lw.aten_node.args[1] % len(out) == 0:
        lead = ", ".join(map(str, x.lead))
        lw.refuse(f"inserts a new dim 0 before the leading [{lead}] dims, mixing the leading [{lead}] dims with "
                  "per-step dims; " + STATIC_TIME[0], STATIC_TIME[1])
    return reshape_to(lw, x, out)


def _identity(lw, x, *args, **kwargs):
    return x


def _expand(lw, x, sizes, *args, **kwargs):
    out, k = _out_shape(lw), len(x.lead)
    if x.folded or len(out) != k + len(lw.shape(x)) or out[:k] != tuple(lw.sizes[d] for d in x.lead):
        lw.refuse(f"broadcasts {(*x.lead, *lw.shape(x))} to {out}, adding dims or repeating along the leading "
                  f"[{', '.join(map(str, x.lead))}] dims", "expand only per-step dims of size 1, keeping the rank")
    return expand_to(lw, x, out[k:])


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
        if x.lead == (T_DIM, B_DIM) and [d % (2 + len(lw.shape(x))) for d in dims] == [0]:
            return _over_time(lw, x, op, keepdim)
        if lw.ctx.per_step and x.lead == (B_DIM,) and 0 in [d % (1 + len(lw.shape(x))) for d in dims]:
            lw.refuse("reduces over dim 0, the batch of one step: with --stepping step forward sees one step, so "
                      "a read-out over time (x.mean(0) on [T, B, ...]) has no meaning here",
                      "compile with --stepping multistep (forward takes [T, B, ...]) or loop, where x.sum(0) / "
                      "x.mean(0) over time is the model's output")
        over_time = "return the [T, B, ...] sequence and reduce it over time outside the model (spikec's graphs map " \
            "[T, B, ...] to [T, B, ...]), or "
        dims = tuple(sorted({lw.dim(x, d, over_time) for d in dims}))
        if not keepdim and len(dims) == len(lw.shape(x)):
            lw.refuse("reduces every per-step dim, leaving a 0-d step", "keep a dim (keepdim=True, or "
                      "x.flatten(2).sum(-1, keepdim=True))")
        return Value(lw.emit(op, [x], {"dims": dims, "keepdim": bool(keepdim)}), x.lead)
    return lower


def _over_time(lw, x, op, keepdim):
    """``x.sum(0)`` / ``x.mean(0)`` / ``x.amax(0)`` of a ``[T, B, ...]`` sequence: the running read-out
    ``time_sum`` / ``time_max`` marked read at the last step (its value there is the model's ``[B, ...]`` output)."""
    if keepdim:
        lw.refuse("reduces over time keeping the time dim", "reduce over time without keepdim (x.mean(0))")
    if op == "amax":
        return Value(lw.emit("time_max", [x], {"read": "last"}), (B_DIM,))
    attrs = {"mean": op == "mean", "read": "last"}
    if lw.aten_node.args[0].meta["val"].dtype == torch.float32:
        attrs["dtype"] = "float32"  # snnTorch's float32 spikes: the source sums and divides in float32
    name = lw.emit("time_sum", [x], attrs)
    return Value(name, (B_DIM,))   # torch holds [B, ...] from here (capture marks it ReadLast)


# -- element-wise ---------------------------------------------------------------------------------------------
def _emit_like(lw, op, inputs, attrs=None, params=None) -> Value:
    """An element-wise op's result: the lead dims (and any fold) of its first operand."""
    return Value(lw.emit(op, inputs, attrs, params), inputs[0].lead, inputs[0].folded)


def _with_const(lw, x: Value, c, op) -> Value:
    """``x <op> c`` for a constant tensor ``c`` broadcast against ``x`` (its per-step dims only): ``const_binary``;
    a 0-d ``c`` is a number (the caller's scalar form)."""
    c = torch.as_tensor(c, dtype=torch.float64)
    while c.dim() > 0 and c.dim() > len(lw.shape(x)) - x.folded and c.shape[0] == 1:
        c = c[0]  # a leading 1 faces T or B: it broadcasts, so it goes
    if c.dim() > len(lw.shape(x)) - x.folded:
        lw.refuse(f"combines an activation with a constant of shape {tuple(c.shape)} that varies along the leading "
                  f"[{', '.join(map(str, x.lead))}] dims", "give the constant per-step dims only (size 1, or absent, "
                  "in front)")
    out = _out_shape(lw)
    if not x.folded:
        x = expand_to(lw, x, out[len(x.lead):])
    elif out != (math.prod(lw.sizes[d] for d in x.lead) * math.prod(lw.shape(x)[:x.folded]), *lw.shape(x)[x.folded:]):
        lw.refuse("broadcasts a tensor whose first dim merges T, B and per-step dims", "broadcast before the view")
    return _emit_like(lw, "const_binary", [x], {"op": op}, {"value": c})


def _is_const_tensor(c) -> bool:
    return isinstance(c, torch.Tensor) and c.dim() > 0


def _add(lw, a, b, *, alpha=1):
    if isinstance(a, Value) and isinstance(b, Value):
        a, b = _same(lw, a, b)
        if alpha != 1:
            b = _emit_like(lw, "scale", [b], {"a": float(alpha), "b": 0.0})
        return _emit_like(lw, "add", [a, b])
    x, c = (a, b) if isinstance(a, Value) else (b, a)
    if _is_const_tensor(c):
        return _with_const(lw, x, c * alpha, "add")
    return _emit_like(lw, "scale", [x], {"a": 1.0, "b": _scalar(lw, c) * alpha})


def _sub(lw, a, b, *, alpha=1):
    if isinstance(b, Value):  # a - b = a + (-alpha) b: negation is exact, so this is torch's a - b
        if _is_const_tensor(a) and alpha == 1:
            return _with_const(lw, b, a, "rsub")
        neg = _emit_like(lw, "scale", [b], {"a": -float(alpha), "b": 0.0})
        return _add(lw, a, neg)
    if _is_const_tensor(b):
        return _with_const(lw, a, b * alpha, "sub")
    return _add(lw, a, -_scalar(lw, b) * alpha)


def _rsub(lw, x, c, alpha=1):
    """``c - alpha x`` (``torch.rsub``, what ``1 - x`` may trace to)."""
    return _sub(lw, c, x, alpha=alpha)


def _mul(lw, a, b):
    if isinstance(a, Value) and isinstance(b, Value):
        a, b = _same(lw, a, b)
        return _emit_like(lw, "mul", [a, b])
    x, c = (a, b) if isinstance(a, Value) else (b, a)
    if _is_const_tensor(c):
        return _with_const(lw, x, c, "mul")
    return _emit_like(lw, "scale", [x], {"a": _scalar(lw, c), "b": 0.0})


def _div(lw, a, b, *, rounding_mode=None):
    if rounding_mode is not None:
        lw.refuse(f"rounds the quotient (rounding_mode={rounding_mode!r})", "divide without rounding")
    if isinstance(a, Value) and isinstance(b, Value):
        a, b = _same(lw, a, b)
        return _emit_like(lw, "divide", [a, b])
    if isinstance(b, Value):
        return _with_const(lw, b, a, "rdiv")
    if _is_const_tensor(b):
        return _with_const(lw, a, b, "div")
    return _emit_like(lw, "div", [a], {"divisor": _scalar(lw, b)})


def _max_dim(lw, x, dim, keepdim=False):
    return _reduction("amax")(lw, x, [dim], keepdim), Unavailable("the indices of the maxima")


def _clamp(lw, x, lo=None, hi=None):
    lo, hi = (None if v is None else _scalar(lw, v) for v in (lo, hi))
    return _emit_like(lw, "clamp", [x], {"lo": lo, "hi": hi})


def _neg(lw, x):
    return _emit_like(lw, "scale", [x], {"a": -1.0, "b": 0.0})


def _to_copy(lw, x, *, dtype=None, **kwargs):
    """``x.to(...)`` / ``x.float()``: the identity when the dtype stays (a device move, a cast to its own dtype)."""
    source = lw.aten_node.args[0].meta["val"].dtype
    if source == torch.bool and dtype is not None and (dtype.is_floating_point or dtype == torch.bool):
        return x  # a mask as numbers: the IR holds it as 0/1 already
    if dtype == torch.bool and lw.ctx.type(x.name).kind == "binary":  # spikes as a mask: [s != 0], a new value
        return _emit_like(lw, "compare", [x], {"op": "ne", "value": 0.0})
    if dtype is not None and dtype != source:
        lw.refuse(f"casts to {dtype}, which changes the values the float64 proof compares",
                  "drop the cast (spikec proves in float64), or cast the model's parameters instead")
    return x


def _unary(op):
    def lower(lw, x, *args, **kwargs):
        return _emit_like(lw, op, [x])
    return lower


def _relu(lw, x):
    """``relu(x)``; of spikes (binary or integer counts, never negative: Norse's ConvNet tutorial feeds
    ``relu(z)`` of its LIF spikes to its read-out) the spikes themselves, so that no op stands between the neuron and
    the synapse it feeds."""
    if isinstance(x, Value) and lw.ctx.type(x.name).kind in ("binary", "integer"):
        return x
    return _emit_like(lw, "relu", [x])


def _softmax(lw, x, dim, half_to_float=False):
    return _emit_like(lw, "softmax", [x], {"dim": lw.dim(x, dim)})


# -- products, convolutions, pooling, normalization ------------------------------------------------------------
def _bmm(lw, a, b):
    if not (isinstance(a, Value) and isinstance(b, Value)):
        return _linear(lw, None, a, b)
    if (a.lead, a.folded) != (b.lead, b.folded):
        lw.refuse("multiplies tensors whose leading dims are laid out differently", "multiply tensors of one layout")
    return _emit_like(lw, "matmul", [a, b])


def _linear(lw, bias, x, w_t, *, beta=1, alpha=1):
    """``addmm(bias, x, W^T)`` / ``mm(x, W^T)`` with a constant W: a linear layer."""
    if not isinstance(x, Value) or beta != 1 or alpha != 1:
        lw.refuse("multiplies a constant by an activation (or scales the sum)", "use nn.Linear")
    w = _const(lw, w_t, "weight").t()
    b = None if bias is None else _const(lw, bias, "bias")
    if b is not None and b.dim() != 1:
        lw.refuse(f"adds a bias of shape {tuple(b.shape)} to the product", "use a bias of one value per output")
    return _emit_like(lw, "linear", [x], {}, {"weight": w, "bias": b})


def _per_step_input(lw, x, what):
    if len(x.lead) != 1:
        lw.refuse(f"{what} on a [T, B, ...] tensor: torch takes T for the batch and B for the channels",
                  "merge T and B first (x.flatten(0, 1), then unflatten(0, (T, B))), wrap it in "
                  "spikec.nn.TimeDistributed, or compile a per-step forward with --stepping step")


def _convolution(lw, x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    _per_step_input(lw, x, "a convolution")
    w = _const(lw, weight, "weight")
    if transposed:
        return _conv_transpose(lw, x, w, bias, stride, padding, dilation, output_padding, groups)
    if w.dim() == 3:
        return conv1d(lw, x, w, bias, stride[0], padding[0], dilation[0], groups)
    if w.dim() != 4:
        lw.refuse(f"is a {w.dim() - 2}-d convolution", "use Conv1d or Conv2d")
    attrs = {"stride": tuple(stride), "padding": tuple(padding), "dilation": tuple(dilation), "groups": groups}
    return Value(lw.emit("conv2d", [x], attrs, {"weight": w, "bias": bias}), x.lead)


def _conv_transpose(lw, x, w, bias, stride, padding, dilation, output_padding, groups) -> Value:
    """ConvTranspose2d as ``conv_transpose2d``; ConvTranspose1d as the 2-d one on ``(C, 1, L)`` with a ``(1, k)``
    kernel (as ``conv1d``)."""
    if w.dim() not in (3, 4):
        lw.refuse(f"is a {w.dim() - 2}-d transposed convolution", "use ConvTranspose1d or ConvTranspose2d")
    one = w.dim() == 3
    pair = (lambda v, pad: (pad, v[0])) if one else (lambda v, pad: tuple(v))
    attrs = {"stride": pair(stride, 1), "padding": pair(padding, 0), "dilation": pair(dilation, 1),
             "output_padding": pair(output_padding, 0), "groups": groups}
    y = x
    if one:
        c, length = lw.shape(x)
        y, w = Value(lw.emit("reshape", [x], {"shape": (c, 1, length)}), x.lead), w.unsqueeze(2)
    y = Value(lw.emit("conv_transpose2d", [y], attrs, {"weight": w, "bias": bias}), x.lead)
    if one:
        out_c, _, out_l = lw.shape(y)
        y = Value(lw.emit("reshape", [y], {"shape": (out_c, out_l)}), x.lead)
    return y


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
    k = _pair(kernel, ())
    if divisor_override is not None:
        return _window_sum(lw, x, k, _pair(stride, k), _pair(padding, ()), ceil_mode, divisor_override)
    attrs = {"kernel": k, "stride": _pair(stride, k), "padding": _pair(padding, ()), "ceil_mode": bool(ceil_mode),
             "count_include_pad": bool(count_include_pad)}
    return Value(lw.emit("avgpool2d", [x], attrs), x.lead)


def _window_sum(lw, x, kernel, stride, padding, ceil_mode, divisor) -> Value:
    """``divisor_override=d``: each window's sum over d, as torch computes it. The sum is a depthwise convolution
    with a kernel of ones (padding adds zeros, which a sum does not count either); d != 1 divides after it."""
    if ceil_mode:
        lw.refuse("has divisor_override with ceil_mode=True", "leave ceil_mode=False with a divisor_override")
    attrs, params = window_sum_as_conv(lw.shape(x)[0], kernel, stride, padding)
    y = Value(lw.emit("conv2d", [x], attrs, params), x.lead)
    return y if divisor == 1 else _emit_like(lw, "div", [y], {"divisor": float(divisor)})


def _max_pool2d(lw, x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
    _per_step_input(lw, x, "max pooling")
    k = _pair(kernel, ())
    attrs = {"kernel": k, "stride": _pair(stride, k), "padding": _pair(padding, ()),
             "dilation": _pair(dilation, ()), "ceil_mode": bool(ceil_mode)}
    return Value(lw.emit("maxpool2d", [x], attrs), x.lead), Unavailable("max pooling's indices")


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


BASE = {
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
    aten.rsub.Scalar: _rsub,
    aten.rsub.Tensor: _rsub,
    aten.mul.Tensor: _mul,
    aten.mul.Scalar: _mul,
    aten.div.Tensor: _div,
    aten.div.Scalar: _div,
    aten.div.Tensor_mode: _div,
    aten.neg.default: _neg,
    aten._to_copy.default: _to_copy,
    aten.relu.default: _relu,
    aten.relu_.default: _relu,  # nn.ReLU(inplace=True): the value it returns (as the converter it replaced)
    aten._softmax.default: _softmax,
    aten.bmm.default: _bmm,
    aten.mm.default: _bmm,
    aten.addmm.default: _linear,
    aten.convolution.default: _convolution,
    aten.avg_pool2d.default: _avg_pool2d,
    aten.max_pool2d_with_indices.default: _max_pool2d,
    aten._native_batch_norm_legit_no_training.default: _batch_norm_eval,
    aten.native_batch_norm.default: _native_batch_norm,
}
