"""Converters of torch functions and tensor methods: element-wise arithmetic, and the shapes, reshapes and
products attention blocks use (``x.shape``, reshape/view, permute, transpose, matmul, softmax, tril).

Registered with ``spikec.frontend.registry`` when this module is imported (``spikec.frontend.tracing`` imports it).
"""
import operator

import numpy as np
import torch
import torch.nn.functional as F

from spikec.compiler.errors import UnsupportedOp
from spikec.frontend.registry import register_function
from spikec.frontend.torch_modules import flatten_dims


# -- element-wise functions and tuple indexing ------------------------------------------
def _binary(op, scalar_attrs):
    def convert(ctx, name, args, kwargs, scope=""):
        if kwargs or len(args) != 2:
            raise UnsupportedOp(f"{op} with arguments {args} {kwargs} is not supported", where=f"fx node {name!r}",
                                remedy="use a plain two-operand expression")
        a, b = args
        if isinstance(a, LeadDim) or isinstance(b, LeadDim):
            raise UnsupportedOp("arithmetic on the T or B dimension would merge it with other dims",
                                where=f"fx node {name!r}", remedy="keep [T, B] leading and reshape per-step dims")
        if not isinstance(a, str) and not isinstance(b, str):  # static shape arithmetic, e.g. H * W
            return _PY_OPS[op](a, b)
        tensors = [v for v in (a, b) if isinstance(v, str)]
        if len(tensors) == 2:
            return ctx.emit(name, op, [a, b], scope=scope)
        const = b if isinstance(a, str) else a
        if not isinstance(const, (int, float)) or isinstance(const, bool):
            raise UnsupportedOp(f"{op} with operand {const!r} is not supported", where=f"fx node {name!r}",
                                remedy="operands must be tensors of the same shape or Python numbers")
        return ctx.emit(name, "scale", [tensors[0]], scalar_attrs(float(const)), scope=scope)
    return convert


_PY_OPS = {"add": operator.add, "mul": operator.mul}
_add = _binary("add", lambda c: {"a": 1.0, "b": c})
_mul = _binary("mul", lambda c: {"a": c, "b": 0.0})


def _relu_fn(ctx, name, args, kwargs, scope=""):
    return ctx.emit(name, "relu", [args[0]], scope=scope)


def _flatten_fn(ctx, name, args, kwargs, scope=""):
    start = args[1] if len(args) > 1 else kwargs.get("start_dim", 0)
    end = args[2] if len(args) > 2 else kwargs.get("end_dim", -1)
    return flatten_dims(ctx, name, args[0], start, end, scope)


def _getitem(ctx, name, args, kwargs, scope=""):
    value, index = args
    if not isinstance(value, (tuple, list)):
        raise UnsupportedOp("indexing a tensor is not supported", where=f"fx node {name!r}",
                            remedy="select with modules (e.g. Delay, Flatten), not x[...]")
    return value[index]


register_function(operator.getitem, _getitem)


# -- shapes, reshapes and attention products --------------------------------------------
class LeadDim:
    """The runtime time (T) or batch (B) dimension of a shape read in forward(): unknown at trace time."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


T_DIM, B_DIM = LeadDim("T"), LeadDim("B")


def _shape_of(ctx, name, args, kwargs, scope=""):
    """``x.shape`` / ``x.size()`` -> (T, B, *per-step shape); ``x.size(i)`` -> one entry."""
    x = args[0]
    if not isinstance(x, str):
        raise UnsupportedOp("shape of a non-tensor", where=f"fx node {name!r}")
    full = (T_DIM, B_DIM, *ctx.type(x).shape)
    dim = args[1] if len(args) > 1 and not isinstance(args[1], str) else kwargs.get("dim")
    return full if dim is None else full[dim]


def _getattr(ctx, name, args, kwargs, scope=""):
    if args[1] != "shape":
        raise UnsupportedOp(f"attribute {args[1]!r} of a tensor is not supported", where=f"fx node {name!r}")
    return _shape_of(ctx, name, args[:1], {}, scope)


def _lead_dims(name, dims, what):
    if len(dims) < 2 or dims[0] is not T_DIM or dims[1] is not B_DIM:
        raise UnsupportedOp(f"{what} must keep the leading [T, B] dims (pass x.shape[0], x.shape[1]), got {dims}",
                            where=f"fx node {name!r}", remedy="reshape only the per-step dims")
    return dims[2:]


def _dims_arg(args, kwargs, key):
    dims = args[1:] or (kwargs.get(key),)
    return tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else tuple(dims)


def _reshape(ctx, name, args, kwargs, scope=""):
    x, dims = args[0], _dims_arg(args, kwargs, "shape")
    shape = list(_lead_dims(name, dims, "reshape"))
    if any(not isinstance(d, int) for d in shape):
        raise UnsupportedOp(f"reshape to per-step dims {shape}: T and B cannot be per-step dims",
                            where=f"fx node {name!r}", remedy="reshape only the per-step dims")
    if shape.count(-1) == 1:
        known = int(abs(np.prod([d for d in shape if d != -1])))
        shape[shape.index(-1)] = ctx.type(x).size // max(known, 1)
    return ctx.emit(name, "reshape", [x], {"shape": tuple(shape)}, scope=scope)


def _permute(ctx, name, args, kwargs, scope=""):
    x, dims = args[0], _dims_arg(args, kwargs, "dims")
    ndim = 2 + len(ctx.type(x).shape)
    dims = tuple(d % ndim for d in dims)
    if dims[:2] != (0, 1):
        raise UnsupportedOp(f"permute{dims} moves the [T, B] dims", where=f"fx node {name!r}",
                            remedy="permute only the per-step dims")
    return ctx.emit(name, "transpose", [x], {"perm": tuple(d - 2 for d in dims[2:])}, scope=scope)


def _transpose(ctx, name, args, kwargs, scope=""):
    x, a, b = (list(args) + [kwargs.get("dim0"), kwargs.get("dim1")])[:3] if len(args) < 3 else args
    ndim = 2 + len(ctx.type(x).shape)
    a, b = a % ndim, b % ndim
    perm = list(range(ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return _permute(ctx, name, [x, *perm], {}, scope)


def _matmul(ctx, name, args, kwargs, scope=""):
    a, b = args
    if not (isinstance(a, str) and isinstance(b, str)):
        raise UnsupportedOp("matmul with a constant operand is not supported", where=f"fx node {name!r}",
                            remedy="use nn.Linear for static weights")
    return ctx.emit(name, "matmul", [a, b], scope=scope)


def _softmax(ctx, name, args, kwargs, scope=""):
    x = args[0]
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    ndim = 2 + len(ctx.type(x).shape)
    if dim is None or dim % ndim < 2:
        raise UnsupportedOp(f"softmax over dim {dim} mixes time or batch", where=f"fx node {name!r}")
    return ctx.emit(name, "softmax", [x], {"dim": dim % ndim - 2}, scope=scope)


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
        if any(not isinstance(a, int) or isinstance(a, bool) for a in args):
            raise UnsupportedOp(f"{fn.__name__} is supported on static shape numbers only, got {args}",
                                where=f"fx node {name!r}", remedy="compute tensor arithmetic with modules")
        return fn(*args)
    return convert


register_function(operator.floordiv, _int_arith(operator.floordiv))
register_function(operator.sub, _int_arith(operator.sub))
register_function(getattr, _getattr)
register_function("size", _shape_of)
for _t in (torch.reshape, "reshape", "view"):
    register_function(_t, _reshape)
for _t in (torch.permute, "permute"):
    register_function(_t, _permute)
for _t in (torch.transpose, "transpose"):
    register_function(_t, _transpose)
for _t in (operator.matmul, torch.matmul, torch.bmm, "matmul"):
    register_function(_t, _matmul)
for _t in (torch.softmax, F.softmax, "softmax"):
    register_function(_t, _softmax)
for _t in (torch.tril, "tril"):
    register_function(_t, _tril)
for _t in (operator.add, torch.add, "add"):
    register_function(_t, _add)
for _t in (operator.mul, torch.mul, "mul"):
    register_function(_t, _mul)
for _t in (F.relu, torch.relu, "relu"):
    register_function(_t, _relu_fn)
for _t in (torch.flatten, "flatten"):
    register_function(_t, _flatten_fn)
