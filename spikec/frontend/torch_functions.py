"""Converters of torch functions and tensor methods: element-wise arithmetic, and the shapes, reshapes and
products attention blocks use (``x.shape``, reshape/view with T and B read from it, matmul, tril).

Calls with no converter here (permute, transpose, softmax, relu, functional pooling, torch.cat, ...) are captured
to core ATen and lowered there (``spikec.frontend.aten``); a converter raises ``ToAten`` for a call it hands on.

Registered with ``spikec.frontend.registry`` when this module is imported (``spikec.frontend.tracing`` imports it).
"""
import operator

import numpy as np
import torch

from spikec.ir.errors import UnsupportedOp
from spikec.frontend.registry import Merged, ReadLast, ToAten, Unmerged, register_function
from spikec.frontend.torch_modules import flatten_dims


# -- element-wise functions and tuple indexing ------------------------------------------
def _binary(op, scalar_attrs):
    def convert(ctx, name, args, kwargs, scope=""):
        if kwargs or len(args) != 2:
            raise UnsupportedOp(f"{op} with arguments {args} {kwargs} is not supported", where=f"fx node {name!r}",
                                remedy="use a plain two-operand expression")
        a, b = args
        if op == "mul" and {a, b} == {T_DIM, B_DIM}:  # T * B: the size of the merged leading dim
            return TB_DIM
        if isinstance(a, LeadDim) or isinstance(b, LeadDim):
            raise UnsupportedOp("arithmetic on the T or B dimension would merge it with other dims",
                                where=f"fx node {name!r}", remedy="keep [T, B] leading and reshape per-step dims")
        if not isinstance(a, str) and not isinstance(b, str):  # static shape arithmetic, e.g. H * W
            return _PY_OPS[op](a, b)
        tensors = [v for v in (a, b) if isinstance(v, str)]
        if len(tensors) == 2 and ctx.type(a).shape == ctx.type(b).shape:
            return ctx.emit(name, op, [a, b], scope=scope)
        if len(tensors) == 2:  # a broadcast: ATen's form says which operand and refuses it by name
            raise ToAten
        const = b if isinstance(a, str) else a
        if isinstance(const, torch.Tensor) and tensors:
            raise ToAten  # a constant tensor (a learned offset, a positional embedding): lowered from ATen
        if not isinstance(const, (int, float)) or isinstance(const, bool):
            raise UnsupportedOp(f"{op} with operand {const!r} is not supported", where=f"fx node {name!r}",
                                remedy="operands must be tensors of the same shape or Python numbers")
        return ctx.emit(name, "scale", [tensors[0]], scalar_attrs(float(const)), scope=scope)
    return convert


_PY_OPS = {"add": operator.add, "mul": operator.mul}
_add = _binary("add", lambda c: {"a": 1.0, "b": c})
_mul = _binary("mul", lambda c: {"a": c, "b": 0.0})


def _flatten_fn(ctx, name, args, kwargs, scope=""):
    start = args[1] if len(args) > 1 else kwargs.get("start_dim", 0)
    end = args[2] if len(args) > 2 else kwargs.get("end_dim", -1)
    return flatten_dims(ctx, name, args[0], start, end, scope)


def _getitem(ctx, name, args, kwargs, scope=""):
    value, index = args
    if isinstance(value, (tuple, list)) and isinstance(index, int) and -len(value) <= index < len(value) \
            and value[index] is None:
        raise UnsupportedOp(f"item {index} of a module's result is not available as a tensor the graph computes",
                            where=f"fx node {name!r}", remedy="use the outputs the converter provides (see the "
                            "converter table in docs/frameworks.md)")
    if not isinstance(value, (tuple, list)):  # x[...] of a tensor: lowered from its ATen form (slice, select)
        raise ToAten
    try:
        return value[index]
    except (IndexError, TypeError) as e:  # e.g. T, B, C, H, W = x.shape on a tensor of another rank
        raise UnsupportedOp(f"item {index!r} of {value!r}: {e}", where=f"fx node {name!r}",
                            remedy="check the tensor's rank against the convention (--stepping): per-step "
                                   "tensors have no T dimension") from None


register_function(operator.getitem, _getitem)


# -- shapes, reshapes and attention products --------------------------------------------
class LeadDim:
    """The runtime time (T) or batch (B) dimension of a shape read in forward(): unknown at trace time."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


T_DIM, B_DIM, TB_DIM = LeadDim("T"), LeadDim("B"), LeadDim("T*B")


def leading(ctx, x) -> tuple:
    """The leading dims torch sees before ``x``'s per-step shape: (T, B), (T*B,) merged, or (B,) per step or
    after a read-out over time."""
    if isinstance(x, ReadLast):
        return (B_DIM,)
    if isinstance(x, Merged) or (ctx.per_step and ctx.stepping == "multistep"):
        return (TB_DIM,)
    return (B_DIM,) if ctx.stepping == "step" else (T_DIM, B_DIM)


def _shape_of(ctx, name, args, kwargs, scope=""):
    """``x.shape`` / ``x.size()`` -> (T, B, *per-step shape); ``x.size(i)`` -> one entry."""
    x = args[0]
    if not isinstance(x, str):
        raise UnsupportedOp("shape of a non-tensor", where=f"fx node {name!r}")
    full = (*leading(ctx, x), *ctx.type(x).shape)
    dim = args[1] if len(args) > 1 and not isinstance(args[1], str) else kwargs.get("dim")
    return full if dim is None else full[dim]


def _getattr(ctx, name, args, kwargs, scope=""):
    if isinstance(args[0], tuple) and hasattr(args[0], "_fields"):  # a returned state (a namedtuple) read by field
        value = getattr(args[0], args[1], None)
        if not isinstance(value, str):
            raise UnsupportedOp(f"field {args[1]!r} of a returned state is not available as a tensor the graph "
                                "computes", where=f"fx node {name!r}",
                                remedy="use the neuron's output, or a state the converter provides (e.g. Norse's "
                                       "record_states=True for multi-step modules)")
        return value
    if args[1] in _CONSTANT_ATTRS and isinstance(args[0], str):
        return _CONSTANT_ATTRS[args[1]](ctx, args[0])
    if args[1] != "shape":
        raise UnsupportedOp(f"attribute {args[1]!r} of a tensor is not supported", where=f"fx node {name!r}",
                            remedy=f"read only {', '.join(['shape', *_CONSTANT_ATTRS])} of an activation")
    return _shape_of(ctx, name, args[:1], {}, scope)


# what forward() may read of an activation besides its shape: spikec proves in float64 on the CPU (the checker runs
# the model as .double()), so a constant made with x.dtype / x.device is the one the proof's forward makes
_CONSTANT_ATTRS = {"dtype": lambda ctx, x: torch.float64, "device": lambda ctx, x: torch.device("cpu"),
                   "ndim": lambda ctx, x: len(leading(ctx, x)) + len(ctx.type(x).shape)}


def _dims_arg(args, kwargs, key):
    dims = args[1:] or (kwargs.get(key),)
    return tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else tuple(dims)


def _split_lead(ctx, name, x, dims):
    """``(layout, per-step dims)`` of a reshape target: ``"TB"`` keeps [T, B] apart, ``"merged"`` [T*B].

    A leading ``-1`` stands for the merged or per-step batch when the remaining dims hold one step.
    """
    size = ctx.type(x).size
    if len(dims) >= 2 and dims[0] is T_DIM and dims[1] is B_DIM:
        return "TB", list(dims[2:])
    if dims and (dims[0] is TB_DIM or (dims[0] == -1 and -1 not in dims[1:]
                                       and int(np.prod(dims[1:])) == size and leading(ctx, x) != (B_DIM,))):
        return "merged", list(dims[1:])
    if ctx.stepping == "step" and dims and (dims[0] is B_DIM or (dims[0] == -1 and -1 not in dims[1:]
                                                                  and int(np.prod(dims[1:])) == size)):
        return "step", list(dims[1:])
    lead = "B" if ctx.stepping == "step" else "T, B" if not isinstance(x, Merged) else "T*B"
    raise UnsupportedOp(f"reshape to {dims} must keep the leading [{lead}] dims (pass x.shape[...] for them, or "
                        "merge T and B as x.shape[0] * x.shape[1])", where=f"fx node {name!r}",
                        remedy="reshape only the per-step dims")


def _symbolic(ctx, dims) -> tuple:
    """Leading sizes captured as numbers (a loop model's capture: ``ctx.concrete = (T, B)``) as T, B, T*B."""
    if ctx.concrete is None:
        return tuple(dims)
    (steps, batch), d = ctx.concrete, list(dims)
    if ctx.stepping == "step":
        if d and d[0] == batch:
            d[0] = B_DIM
    elif len(d) >= 2 and d[0] == steps and d[1] in (batch, -1):
        d[0], d[1] = T_DIM, B_DIM
    elif d and d[0] == steps * batch:
        d[0] = TB_DIM
    return tuple(d)


def _reshape(ctx, name, args, kwargs, scope=""):
    x, dims = args[0], _symbolic(ctx, _dims_arg(args, kwargs, "shape"))
    layout, shape = _split_lead(ctx, name, x, dims)
    if any(not isinstance(d, int) or isinstance(d, LeadDim) for d in shape):
        raise UnsupportedOp(f"reshape to per-step dims {shape}: T and B cannot be per-step dims",
                            where=f"fx node {name!r}", remedy="reshape only the per-step dims")
    if shape.count(-1) == 1:
        known = int(abs(np.prod([d for d in shape if d != -1])))
        shape[shape.index(-1)] = ctx.type(x).size // max(known, 1)
    y = x if tuple(shape) == ctx.type(x).shape else ctx.emit(name, "reshape", [x], {"shape": tuple(shape)},
                                                             scope=scope)
    if layout == "merged":
        return Merged(y)
    return Unmerged(y) if layout == "TB" else y


def _unflatten(ctx, name, args, kwargs, scope=""):
    """``x.unflatten(0, (T, B))`` parts merged T and B; ``unflatten(d, sizes)`` of a per-step dim reshapes."""
    x = args[0]
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    sizes = tuple(args[2] if len(args) > 2 else kwargs.get("sizes"))
    lead = leading(ctx, x)
    if dim == 0 and lead == (TB_DIM,):
        sizes = _symbolic(ctx, sizes)
    if dim == 0 and lead == (TB_DIM,) and len(sizes) == 2 and sizes[0] is T_DIM and sizes[1] in (B_DIM, -1):
        return Unmerged(x)
    if not isinstance(dim, int) or dim % (len(lead) + len(ctx.type(x).shape)) < len(lead):
        raise UnsupportedOp(f"unflatten(dim={dim}, sizes={sizes}) of a tensor with leading dims {lead} is not "
                            "supported", where=f"fx node {name!r}",
                            remedy="unflatten merged T*B as x.unflatten(0, (T, B)) with T, B read from x.shape")
    per = list(ctx.type(x).shape)
    d = dim % (len(lead) + len(per)) - len(lead)
    return _reshape(ctx, name, [x, *lead, *per[:d], *sizes, *per[d + 1:]], {}, scope)


def _matmul(ctx, name, args, kwargs, scope=""):
    a, b = args
    if not (isinstance(a, str) and isinstance(b, str)):
        raise ToAten  # x @ W with a constant W: ATen's mm with the weight, lowered as a linear layer
    return ctx.emit(name, "matmul", [a, b], scope=scope)


def _tril(ctx, name, args, kwargs, scope=""):
    diagonal = args[1] if len(args) > 1 else kwargs.get("diagonal", 0)
    if diagonal != 0:
        raise UnsupportedOp(f"tril(diagonal={diagonal}) is not supported", where=f"fx node {name!r}")
    if len(ctx.type(args[0]).shape) < 2:
        raise UnsupportedOp("tril of a tensor with a 1-D per-step shape would mask with the batch index",
                            where=f"fx node {name!r}", remedy="apply the causal mask to [T, B, ..., N, N] scores")
    return ctx.emit(name, "causal_mask", [args[0]], scope=scope)


def _int_arith(fn):
    def convert(ctx, name, args, kwargs, scope=""):
        if any(isinstance(a, LeadDim) for a in args):
            raise UnsupportedOp(f"{fn.__name__} of the T or B dimension {args}", where=f"fx node {name!r}",
                                remedy="keep [T, B] leading and compute only with per-step sizes")
        if any(not isinstance(a, (int, float)) or isinstance(a, bool) for a in args):
            raise ToAten  # tensor arithmetic (x - y, x // 2): lowered from its ATen form
        return fn(*args)  # size arithmetic: d // heads, d ** -0.5
    return convert


for _t in (operator.floordiv, operator.sub, operator.pow, operator.truediv):
    register_function(_t, _int_arith(_t))
register_function(getattr, _getattr)
register_function("size", _shape_of)
for _t in (torch.reshape, "reshape", "view"):
    register_function(_t, _reshape)
for _t in (operator.matmul, torch.matmul, torch.bmm, "matmul"):
    register_function(_t, _matmul)
for _t in (torch.tril, "tril"):
    register_function(_t, _tril)
for _t in (operator.add, torch.add, "add"):
    register_function(_t, _add)
for _t in (operator.mul, torch.mul, "mul"):
    register_function(_t, _mul)
for _t in (torch.flatten, "flatten"):
    register_function(_t, _flatten_fn)
for _t in (torch.unflatten, "unflatten"):
    register_function(_t, _unflatten)
