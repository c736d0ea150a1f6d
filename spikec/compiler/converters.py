"""Built-in converters: torch.nn modules, spikec.nn modules, and element-wise functions.

Each maps one module (or function call) onto IR nodes with the same arithmetic.
"""
import copy
import operator

import torch
import torch.nn.functional as F
from torch import nn

import spikec.nn as snn
from spikec.compiler.errors import UnsupportedOp
from spikec.compiler.frontend import register_converter, register_function


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _refuse(name, module, why, remedy):
    raise UnsupportedOp(why, where=f"module {name!r} ({type(module).__qualname__})", remedy=remedy)


def _per_step_only(ctx, module, name):
    if not ctx.per_step:
        _refuse(name, module, "this per-step torch module is applied to a [T, B, ...] tensor, where torch would "
                "mistake T or B for a batch or channel dimension",
                "wrap it in spikec.nn.TimeDistributed(...), which merges T and B as torch expects")


def _multi_step_only(ctx, module, name):
    if ctx.per_step:
        _refuse(name, module, "this stateful/multi-step module is inside TimeDistributed, where torch runs it on "
                "[T*B, ...] and would mistake T*B for time", "apply it outside spikec.nn.TimeDistributed")


# -- torch.nn ---------------------------------------------------------------------------
def conv2d(ctx, m: nn.Conv2d, name, x):
    _per_step_only(ctx, m, name)
    if m.padding_mode != "zeros":
        _refuse(name, m, f"padding_mode={m.padding_mode!r} is not supported", "use zero padding")
    padding = m.padding
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0, 0)
        elif all(k % 2 == 1 for k in m.kernel_size):
            padding = tuple(d * (k - 1) // 2 for k, d in zip(m.kernel_size, m.dilation))
        else:
            _refuse(name, m, "padding='same' with an even kernel pads asymmetrically", "give explicit padding")
    attrs = {"stride": _pair(m.stride), "padding": _pair(padding), "dilation": _pair(m.dilation), "groups": m.groups}
    return ctx.emit(name, "conv2d", [x], attrs, {"weight": m.weight, "bias": m.bias}, scope=name)


def linear(ctx, m: nn.Linear, name, x):
    return ctx.emit(name, "linear", [x], {}, {"weight": m.weight, "bias": m.bias}, scope=name)


def batchnorm(ctx, m: nn.modules.batchnorm._BatchNorm, name, x):
    _per_step_only(ctx, m, name)
    if m.running_mean is None:
        _refuse(name, m, "BatchNorm without running statistics has no inference form",
                "build it with track_running_stats=True and train it")
    c = m.num_features
    gamma = m.weight if m.affine else torch.ones(c)
    beta = m.bias if m.affine else torch.zeros(c)
    params = {"gamma": gamma, "beta": beta, "mean": m.running_mean, "var": m.running_var}
    return ctx.emit(name, "batchnorm", [x], {"eps": float(m.eps)}, params, scope=name)


def avgpool2d(ctx, m: nn.AvgPool2d, name, x):
    _per_step_only(ctx, m, name)
    if m.divisor_override is not None:
        _refuse(name, m, "divisor_override is not supported", "leave divisor_override=None")
    attrs = {"kernel": _pair(m.kernel_size), "stride": _pair(m.stride or m.kernel_size), "padding": _pair(m.padding),
             "ceil_mode": bool(m.ceil_mode), "count_include_pad": bool(m.count_include_pad)}
    return ctx.emit(name, "avgpool2d", [x], attrs, scope=name)


def maxpool2d(ctx, m: nn.MaxPool2d, name, x):
    _per_step_only(ctx, m, name)
    if m.return_indices:
        _refuse(name, m, "return_indices=True is not supported", "use return_indices=False")
    attrs = {"kernel": _pair(m.kernel_size), "stride": _pair(m.stride or m.kernel_size), "padding": _pair(m.padding),
             "dilation": _pair(m.dilation), "ceil_mode": bool(m.ceil_mode)}
    return ctx.emit(name, "maxpool2d", [x], attrs, scope=name)


def flatten(ctx, m: nn.Flatten, name, x):
    return _flatten(ctx, name, x, m.start_dim, m.end_dim, name)


def _flatten(ctx, name, x, start, end, scope):
    lead = 1 if ctx.per_step else 2
    ndim = lead + len(ctx.type(x).shape)
    start, end = start % ndim, end % ndim
    if start < lead:
        raise UnsupportedOp(f"flatten(start_dim={start}) would merge the time/batch dimensions",
                            where=f"{name!r}", remedy=f"flatten from dim {lead} on")
    return ctx.emit(name, "flatten", [x], {"start": start - lead, "end": end - lead}, scope=scope)


def relu(ctx, m, name, x):
    return ctx.emit(name, "relu", [x], scope=name)


def identity(ctx, m, name, x):
    return x  # Identity, and Dropout in eval mode: no node


def sequential(ctx, m: nn.Sequential, name, x):
    for child_name, child in m.named_children():
        x = ctx.convert_module(child, f"{name}.{child_name}", x)
    return x


def time_distributed(ctx, m: snn.TimeDistributed, name, x):
    outer, ctx.per_step = ctx.per_step, True
    try:
        return sequential(ctx, m, name, x)
    finally:
        ctx.per_step = outer


# -- spikec.nn --------------------------------------------------------------------------
def _buffers(m, names):
    return {n: getattr(m, n) for n in names}


def _neuron(ctx, m, name, x, op, attrs, params):
    """The spike node; with ``return_membrane`` also a ``.membrane`` node: the same dynamics, ``U`` read out."""
    spikes = ctx.emit(name, op, [x], attrs, params, scope=name)
    if not getattr(m, "return_membrane", False):
        return spikes
    return spikes, ctx.emit(f"{name}.membrane", op, [x], {**attrs, "output": "membrane"}, params, scope=name)


def lif(ctx, m: snn.LIF, name, x):
    _multi_step_only(ctx, m, name)
    params = _buffers(m, ("beta", "alpha", "bias", "threshold", "v_reset"))
    return _neuron(ctx, m, name, x, "lif", {"reset": m.reset}, params)


def intfire(ctx, m: snn.IntFire, name, x):
    _multi_step_only(ctx, m, name)
    attrs = {"max_spikes": m.max_spikes, "rounding": m.rounding}
    return _neuron(ctx, m, name, x, "intfire", attrs, _buffers(m, ("beta", "alpha", "threshold")))


def silif(ctx, m: snn.SiLIF, name, x):
    _multi_step_only(ctx, m, name)
    m64 = copy.deepcopy(m).double()  # the decay exactly as a float64 run of the module computes it
    params = {"decay": m64.decay(), "b": m64.b, "v_th": m64.v_th}
    return _neuron(ctx, m, name, x, "silif", {"kappa": m.kappa}, params)


def csilif(ctx, m: snn.CSiLIF, name, x):
    _multi_step_only(ctx, m, name)
    m64 = copy.deepcopy(m).double()
    a_re, a_im = m64.decay()
    params = {"a_re": a_re, "a_im": a_im, "b": m64.b, "v_th": m64.v_th}
    return _neuron(ctx, m, name, x, "csilif", {"kappa": m.kappa}, params)


def dsmpa(ctx, m: snn.DSMPA, name, u, s_prev, x):
    _multi_step_only(ctx, m, name)
    params = {"wq": m.wq, "wk": m.wk, "wv": m.wv, "gamma": m.gamma}
    return ctx.emit(name, "dsmpa", [u, s_prev, x], {"eps": m.eps}, params, scope=name)


def adaptive_avgpool2d(ctx, m: nn.AdaptiveAvgPool2d, name, x):
    """Exact as a plain average pool when the output size divides the input size."""
    _per_step_only(ctx, m, name)
    (_, h, w), (oh, ow) = ctx.type(x).shape, _pair(m.output_size)
    oh, ow = oh or h, ow or w
    if h % oh or w % ow:
        _refuse(name, m, f"output size {(oh, ow)} does not divide input size {(h, w)}",
                "choose an output size that divides the input")
    attrs = {"kernel": (h // oh, w // ow), "stride": (h // oh, w // ow), "padding": (0, 0), "ceil_mode": False,
             "count_include_pad": True}
    return ctx.emit(name, "avgpool2d", [x], attrs, scope=name)


def tdm(ctx, m: snn.TDM, name, x):
    _multi_step_only(ctx, m, name)
    return ctx.emit(name, "tdm", [x], {}, {"lam": m.lam}, scope=name)


def bntt(ctx, m: snn.BNTT, name, x):
    _multi_step_only(ctx, m, name)
    params = {"gamma": m.weight, "beta": m.bias, "mean": m.running_mean, "var": m.running_var}
    return ctx.emit(name, "bntt", [x], {"eps": m.eps}, params, scope=name)


def delay(ctx, m: snn.Delay, name, x):
    _multi_step_only(ctx, m, name)
    return ctx.emit(name, "delay", [x], {"steps": m.steps}, scope=name)


def windowsum(ctx, m: snn.WindowSum, name, x):
    _multi_step_only(ctx, m, name)
    return ctx.emit(name, "windowsum", [x], {"kernel": m.kernel_size, "dilation": m.dilation}, scope=name)


def repconv(ctx, m: snn.RepConv, name, x):
    """Decomposed into its branches (conv -> BN each) and a left-to-right sum, as its forward computes it."""
    _multi_step_only(ctx, m, name)
    outer, ctx.per_step = ctx.per_step, True
    try:
        outs = [ctx.convert_module(branch, f"{name}.{branch_name}", x)
                for branch_name, branch in m.named_children() if branch is not None]
    finally:
        ctx.per_step = outer
    y = outs[0]
    for k, out in enumerate(outs[1:], start=1):  # the last addition is the unit's output: it takes its name
        y = ctx.emit(name if k == len(outs) - 1 else f"{name}.sum{k}", "add", [y, out], scope=name)
    return y


for _cls, _fn in [(nn.Conv2d, conv2d), (nn.Linear, linear), (nn.BatchNorm1d, batchnorm), (nn.BatchNorm2d, batchnorm),
                  (nn.AvgPool2d, avgpool2d), (nn.MaxPool2d, maxpool2d), (nn.Flatten, flatten), (nn.ReLU, relu),
                  (nn.Identity, identity), (nn.Dropout, identity), (nn.Sequential, sequential),
                  (snn.TimeDistributed, time_distributed), (snn.LIF, lif), (snn.IntFire, intfire),
                  (snn.SiLIF, silif), (snn.CSiLIF, csilif), (snn.TDM, tdm), (snn.BNTT, bntt), (snn.Delay, delay),
                  (snn.WindowSum, windowsum), (snn.RepConv, repconv), (snn.DSMPA, dsmpa),
                  (nn.AdaptiveAvgPool2d, adaptive_avgpool2d)]:
    register_converter(_cls, _fn)


# -- functions and methods --------------------------------------------------------------
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
    return _flatten(ctx, name, args[0], start, end, scope)


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
        known = int(abs(__import__("numpy").prod([d for d in shape if d != -1])))
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
