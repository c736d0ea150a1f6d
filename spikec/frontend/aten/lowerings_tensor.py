"""ATen lowerings of the tensor ops (``spikec/ops/tensor.py``) and LayerNorm: GELU, comparisons and ``where``,
indexing by constant indices, ``native_layer_norm``. ``table.py`` merges ``TABLE`` with ``lowerings.BASE`` into ``LOWERINGS``
(import that module, not this one, first)."""
import math

import torch

from spikec.frontend.aten.lowerings import _emit_like, _out_shape, _same, aten, expand_to, slice_of
from spikec.frontend.aten.values import Unavailable, Value


def _gelu(lw, x, *, approximate="none"):
    return _emit_like(lw, "gelu", [x], {"approximate": approximate})


# -- comparisons and where -------------------------------------------------------------------------------------
_FLIP = {"gt": "lt", "ge": "le", "lt": "gt", "le": "ge", "eq": "eq", "ne": "ne"}


def _number(lw, c) -> float:
    if isinstance(c, torch.Tensor):
        if c.dim() != 0:
            lw.refuse(f"compares an activation with a constant tensor of shape {tuple(c.shape)}",
                      "compare with a Python number, or with another activation")
        c = c.item()
    return float(c)


def _comparison(op):
    """``a <op> b`` as 0/1: against a number, ``compare`` itself; between two activations, ``compare(a - b, 0)``
    (exact: for finite floats ``a - b`` is 0 only when ``a == b``, and has the sign of ``a - b``)."""
    def lower(lw, a, b):
        if isinstance(a, Value) and isinstance(b, Value):
            a, b = _same(lw, a, b)
            neg = _emit_like(lw, "scale", [b], {"a": -1.0, "b": 0.0})
            a, b, cmp = _emit_like(lw, "add", [a, neg]), 0.0, op
        elif isinstance(a, Value):
            b, cmp = _number(lw, b), op
        else:
            a, b, cmp = b, _number(lw, a), _FLIP[op]
        return _emit_like(lw, "compare", [a], {"op": cmp, "value": b})
    return lower


def _constant_like(lw, template: Value, c) -> Value:
    """A constant (a number or a tensor broadcast to the output) as an IR value shaped like ``template``:
    ``template * 0 + c`` (exact for finite values: ``x * 0`` is a zero, and a zero plus ``c`` is ``c``)."""
    zero = _emit_like(lw, "scale", [template], {"a": 0.0, "b": 0.0})
    if isinstance(c, torch.Tensor) and c.dim() > 0:
        shape = _out_shape(lw)[len(template.lead):]
        c = torch.as_tensor(c, dtype=torch.float64)
        while c.dim() > len(shape) and c.shape[0] == 1:
            c = c[0]
        if c.dim() > len(shape):
            lw.refuse(f"selects from a constant of shape {tuple(c.shape)} that varies along the leading dims",
                      "give the constant per-step dims only")
        return _emit_like(lw, "const_binary", [zero], {"op": "add"}, {"value": c})
    c = float(c.item() if isinstance(c, torch.Tensor) else c)
    return _emit_like(lw, "scale", [zero], {"a": 1.0, "b": c})


def _full_like(lw, x, fill, **kwargs):
    """``zeros_like(x)`` / ``ones_like(x)`` / ``full_like(x, c)``: the constant shaped like ``x``."""
    if kwargs.get("dtype") not in (None, torch.float64, torch.float32):
        lw.refuse(f"makes a constant of dtype {kwargs['dtype']}", "make it in the activations' float dtype")
    return _constant_like(lw, x, fill)


def _where(lw, cond, a, b):
    """``torch.where(cond, a, b)`` / ``masked_fill``: constants become values shaped like an activation operand,
    a constant mask a 0/1 ``compare``; all three then broadcast to the output shape."""
    values = [v for v in (cond, a, b) if isinstance(v, Value)]
    template = expand_to(lw, values[0], _out_shape(lw)[len(values[0].lead):]) if not values[0].folded else values[0]
    if not isinstance(cond, Value):
        mask = _constant_like(lw, template, cond.to(torch.float64))
        cond = _emit_like(lw, "compare", [mask], {"op": "ne", "value": 0.0})
    elif lw.ctx.type(cond.name).kind != "binary":
        lw.refuse("selects with a mask that is not 0/1", "pass a comparison (x > 0) as the condition")
    a, b = (v if isinstance(v, Value) else _constant_like(lw, template, v) for v in (a, b))
    cond, a, b = _same(lw, cond, a, b)
    return _emit_like(lw, "where", [cond, a, b])


# -- indexing by constants -------------------------------------------------------------------------------------
def _index_select(lw, x, dim, index):
    if isinstance(index, Value):
        lw.refuse("indexes with indices computed from the model's input", "index with constant indices")
    index = index.reshape(-1).tolist() if index.dim() <= 1 else None
    if index is None:
        lw.refuse("indexes with a multi-dimensional index tensor", "index one dim with a 1-d list of indices")
    d = lw.dim(x, dim)
    n = lw.shape(x)[d]
    if not all(-n <= i < n for i in index):
        lw.refuse(f"indexes dim {dim} (size {n}) out of range with {index}", "index inside the dim")
    if x.folded:
        lw.refuse("indexes a tensor whose first dim merges T, B and per-step dims", "index before the view")
    return _emit_like(lw, "index_select", [x], {"dim": d, "indices": tuple(i % n for i in index)})


def _flip(lw, x, dims):
    """``x.flip(dims)``: each per-step dim read backwards (``index_select`` with the reversed positions)."""
    for dim in dims:
        n = lw.shape(x)[lw.dim(x, dim)]
        x = _index_select(lw, x, dim, torch.arange(n - 1, -1, -1))
    return x


def _index(lw, x, indices):
    """``x[..., idx]`` with constant index tensors (a 0/1 mask as its nonzero positions): one dim, or consecutive
    dims indexed as an outer product (each index varying along its own axis only: ``F.interpolate``'s nearest
    rows ``(H', 1)`` and columns ``(W',)``), one ``index_select`` per dim."""
    used = [(d, i) for d, i in enumerate(indices) if i is not None]
    if isinstance(used[0][1], torch.Tensor) and used[0][1].dtype == torch.bool and len(used) == 1:
        if used[0][1].dim() != 1:
            lw.refuse("indexes with a multi-dimensional mask", "index one dim with a 1-d mask")
        return _index_select(lw, x, used[0][0], used[0][1].nonzero().reshape(-1))
    k = len(used)
    if [d for d, _ in used] != list(range(used[0][0], used[0][0] + k)) or not all(_own_axis(i, j, k)
                                                                                    for j, (_, i) in enumerate(used)):
        lw.refuse(f"indexes {k} dims with index tensors that are not one per consecutive dim (an outer product)",
                  "index one dim at a time")
    for d, index in used:
        x = _index_select(lw, x, d, index.reshape(-1))
    return x


def _own_axis(index, j: int, k: int) -> bool:
    """``index`` (broadcast to rank ``k``) varies along axis ``j`` only."""
    if isinstance(index, Value) or index.dim() > k:
        return False
    shape = (1,) * (k - index.dim()) + tuple(index.shape)
    return all(n == 1 for a, n in enumerate(shape) if a != j)


def _repeat(lw, x, repeats):
    """``x.repeat(...)``: each per-step dim repeated ``r`` times as ``(1, n)`` expanded to ``(r, n)`` and merged."""
    lead = len(x.lead)
    if len(repeats) != lead + len(lw.shape(x)) or any(r != 1 for r in repeats[:lead]) or x.folded:
        lw.refuse(f"repeats {tuple(repeats)}: along the leading dims or adding dims", "repeat per-step dims only")
    for d, r in enumerate(repeats[lead:]):
        if r != 1:
            per = lw.shape(x)
            y = _emit_like(lw, "reshape", [x], {"shape": (*per[:d], 1, *per[d:])})
            y = _emit_like(lw, "expand", [y], {"shape": (*per[:d], r, *per[d:])})
            x = _emit_like(lw, "reshape", [y], {"shape": (*per[:d], r * per[d], *per[d + 1:])})
    return x


def _constant_pad(lw, x, pad, value=0.0):
    """``F.pad(x, (l, r, ...), value=c)``: slices for a negative pad, ``c``-filled blocks joined on for a positive
    one (a block is a slice of ``x`` times 0 plus ``c``: exact for finite values), last dim first."""
    if x.folded:
        lw.refuse("pads a view merging T and B with per-step dims", "pad before the view")
    nd = len(x.lead) + len(lw.shape(x))
    for i in range(len(pad) // 2):
        d = lw.dim(x, nd - 1 - i)
        left, right = pad[2 * i], pad[2 * i + 1]
        n = lw.shape(x)[d]
        x = slice_of(lw, x, d, max(-left, 0), n - max(-right, 0))
        for size, first in ((left, True), (right, False)):
            if size > 0:
                x = _padded(lw, x, d, size, float(value), first)
    return x


def _padded(lw, x, d, size, value, first):
    block = slice_of(lw, x, d, 0, 1)
    shape = list(lw.shape(block))
    shape[d] = size
    block = expand_to(lw, block, shape) if size > 1 else block
    block = _emit_like(lw, "scale", [_emit_like(lw, "scale", [block], {"a": 0.0, "b": 0.0})], {"a": 1.0, "b": value})
    pair = [block, x] if first else [x, block]
    return _emit_like(lw, "concat", pair, {"axis": d})


def _hardtanh(lw, x, lo=-1.0, hi=1.0):
    return _emit_like(lw, "clamp", [x], {"lo": float(lo), "hi": float(hi)})


def _leaky_relu(lw, x, slope=0.01):
    """``x > 0 ? x : x * slope``, torch's kernel as a where."""
    positive = _emit_like(lw, "compare", [x], {"op": "gt", "value": 0.0})
    return _emit_like(lw, "where", [positive, x, _emit_like(lw, "scale", [x], {"a": float(slope), "b": 0.0})])


# -- normalization -------------------------------------------------------------------------------------------
def _native_layer_norm(lw, x, normalized_shape, weight, bias, eps):
    """LayerNorm over the last ``k`` per-step dims: over one dim ``layernorm``; over more, those dims flattened
    into one first and viewed back (torch's kernel normalizes them as one contiguous row: the same arithmetic)."""
    k, per = len(normalized_shape), lw.shape(x)
    if k == 0 or k > len(per) - x.folded or tuple(per[len(per) - k:]) != tuple(normalized_shape):
        lw.refuse(f"normalizes over {tuple(normalized_shape)} of a step of shape {per}", "normalize over "
                  "trailing per-step dims only (T and B are never normalized)")
    n = math.prod(normalized_shape)
    gamma = torch.ones(n) if weight is None else _constant(lw, weight, "scale").reshape(-1)
    beta = torch.zeros(n) if bias is None else _constant(lw, bias, "shift").reshape(-1)
    y = x
    if k > 1:
        y = _emit_like(lw, "reshape", [x], {"shape": (*per[:len(per) - k], n)})
    y = _emit_like(lw, "layernorm", [y], {"eps": float(eps)}, {"gamma": gamma, "beta": beta})
    if k > 1:
        y = _emit_like(lw, "reshape", [y], {"shape": per})
    return y, Unavailable("layer norm's mean"), Unavailable("layer norm's inverse deviation")


def _constant(lw, v, what):
    if isinstance(v, Value):
        lw.refuse(f"takes the model's activations as its {what}", f"give it a static {what} (a module parameter)")
    return v


# -- math functions, powers, log-softmax, adaptive pooling ------------------------------------------------------
def _math(fn):
    def lower(lw, x, *args, **kwargs):
        return _emit_like(lw, "math", [x], {"fn": fn})
    return lower


def _pow(lw, x, exponent):
    """``x ** e`` as torch's kernel computes the exponents it special-cases: ``x * x``, ``x * x * x``, ``sqrt``,
    ``rsqrt``, ``reciprocal``, ``1 / (x * x)``; any other exponent is refused."""
    if not isinstance(x, Value) or isinstance(exponent, (Value, torch.Tensor)):
        lw.refuse("raises to a tensor power (or a constant to an activation's power)", "use a Python exponent")
    e = float(exponent)
    if e == 1.0:
        return x
    if e in (2.0, 3.0, -2.0):
        y = _emit_like(lw, "mul", [x, x])
        if e == 3.0:
            y = _emit_like(lw, "mul", [y, x])
        return _emit_like(lw, "math", [y], {"fn": "reciprocal"}) if e == -2.0 else y
    fn = {0.5: "sqrt", -0.5: "rsqrt", -1.0: "reciprocal"}.get(e)
    if fn is None:
        lw.refuse(f"raises to the power {e:g}", "use an exponent of 2, 3, 0.5, -0.5, -1 or -2, or x * x ... "
                  "written out")
    return _emit_like(lw, "math", [x], {"fn": fn})


def _var(lw, x, dims=None, *, correction=None, keepdim=False):
    if not dims:
        lw.refuse("takes the variance over every dim, time and batch included", "give the per-step dims")
    dims = tuple(sorted({lw.dim(x, d) for d in dims}))
    if not keepdim and len(dims) == len(lw.shape(x)):
        lw.refuse("reduces every per-step dim, leaving a 0-d step", "keep a dim (keepdim=True)")
    c = 1.0 if correction is None else float(correction)
    return _emit_like(lw, "var", [x], {"dims": dims, "correction": c, "keepdim": bool(keepdim)})


def _log_softmax(lw, x, dim, half_to_float=False):
    return _emit_like(lw, "log_softmax", [x], {"dim": lw.dim(x, dim)})


def _adaptive_avg_pool2d(lw, x, output_size):
    """Adaptive average pooling: a plain average pool when the output size divides the input (as before); any
    other size as ``adaptive_avgpool2d`` (torch's windows)."""
    if len(x.lead) != 1:
        lw.refuse("adaptive average pooling on a [T, B, ...] tensor: torch takes T for the batch and B for the "
                  "channels", "merge T and B first (x.flatten(0, 1), then unflatten(0, (T, B))), or wrap it in "
                  "spikec.nn.TimeDistributed")
    (_, h, w), (oh, ow) = lw.shape(x), tuple(output_size)
    if h % oh == 0 and w % ow == 0:
        k = (h // oh, w // ow)
        attrs = {"kernel": k, "stride": k, "padding": (0, 0), "ceil_mode": False, "count_include_pad": True}
        return _emit_like(lw, "avgpool2d", [x], attrs)
    return _emit_like(lw, "adaptive_avgpool2d", [x], {"size": (oh, ow)})


def _logical_not(lw, x):
    return _emit_like(lw, "compare", [x], {"op": "eq", "value": 0.0})


def _logical_and(lw, a, b):
    if not (isinstance(a, Value) and isinstance(b, Value)):
        lw.refuse("combines a mask with a constant", "combine two masks computed from the input")
    return _emit_like(lw, "mul", _same(lw, a, b))


TABLE = {
    **{getattr(aten, fn).default: _math(fn) for fn in ("abs", "sign", "floor", "ceil", "round", "sqrt", "rsqrt",
                                                        "reciprocal", "exp", "log")},
    aten.pow.Tensor_Scalar: _pow,
    aten._log_softmax.default: _log_softmax,
    aten.var.correction: _var,
    aten._adaptive_avg_pool2d.default: _adaptive_avg_pool2d,
    aten.logical_not.default: _logical_not,
    aten.bitwise_not.default: _logical_not,
    aten.logical_and.default: _logical_and,
    aten.bitwise_and.Tensor: _logical_and,
    aten.gelu.default: _gelu,
    **{getattr(aten, op).Scalar: _comparison(op) for op in _FLIP},
    **{getattr(aten, op).Tensor: _comparison(op) for op in _FLIP},
    aten.where.self: _where,
    aten.full_like.default: _full_like,
    aten.index_select.default: _index_select,
    aten.index.Tensor: _index,
    aten.flip.default: _flip,
    aten._unsafe_index.Tensor: _index,
    aten.repeat.default: _repeat,
    aten.constant_pad_nd.default: _constant_pad,
    aten.hardtanh.default: _hardtanh,
    aten.leaky_relu.default: _leaky_relu,
    aten.native_layer_norm.default: _native_layer_norm,
}
