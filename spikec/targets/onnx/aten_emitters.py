"""ONNX emitters of the ops the ATen capture lowers ordinary PyTorch onto (``spikec/ops/tensor.py``, and
``layernorm`` in ``spikec/ops/norm.py``): GELU, comparisons and Where, Expand, Gather, constants, the transposed
convolution and LayerNorm. Float64 throughout; every tensor keeps its ``[T, B, *shape]`` layout.

What is exact and what is not. Compare, Where, Expand, Gather and the element-wise constants are bit-identical to
the interpreter. onnxruntime has no float64 Erf: the exact GELU's ``erf`` is written out here (a Taylor series
below ``|z| = 2``, the Laplace continued fraction of ``erfc`` above; ``|erf - torch.erf|`` measured at most 1.1e-15
on ``[-8, 8]``): GELU on ``[-12, 12]`` agrees with torch's to 1.1e-16 of its largest value
(``tests/frontend/test_aten_ops_more.py``). LayerNorm's means and
the transposed convolution's sums (zeros inserted between the inputs, then im2col and one MatMul) are reductions
in another order than torch's: a few ulp, as for conv2d. The checker's bound (1e-9 of the tensor's largest
magnitude) applies to all of them.

This module registers into ``emitters.EMITTERS``; ``emitters.py`` imports it at its end.
"""
import math

import numpy as np

from spikec.ir.errors import UnsupportedOp
from spikec.ir.graph import Node
from spikec.targets.onnx.builder import Builder, where
from spikec.targets.onnx.emitters import emitter, im2col_conv

CMP = {"gt": ("Greater", False), "ge": ("GreaterOrEqual", False), "lt": ("Less", False),
       "le": ("LessOrEqual", False), "eq": ("Equal", False), "ne": ("Equal", True)}
TAYLOR_TERMS, FRACTION_TERMS, ERF_CUT = 30, 50, 2.0


@emitter("compare")
def compare(b: Builder, node: Node, x: str) -> str:
    onnx_op, negate = CMP[node.attrs["op"]]
    c = b.op(onnx_op, [x, b.const(node.attrs["value"], f"{node.name}.value")], hint=f"{node.name}/cmp")
    if negate:
        c = b.op("Not", [c], hint=f"{node.name}/not")
    return b.op("Cast", [c], out=node.name, to=b.elem)


@emitter("where")
def where_(b: Builder, node: Node, cond: str, x: str, y: str) -> str:
    mask = b.op("Not", [b.op("Equal", [cond, b.const(0.0, "zero")], hint=f"{node.name}/zero")], hint=f"{node.name}/m")
    return b.op("Where", [mask, x, y], out=node.name)


@emitter("expand")
def expand(b: Builder, node: Node, x: str) -> str:
    return b.op("Expand", [x, b.ints([1, 1, *node.attrs["shape"]], f"{node.name}.shape")], out=node.name)


@emitter("index_select")
def index_select(b: Builder, node: Node, x: str) -> str:
    idx = b.ints(list(node.attrs["indices"]), f"{node.name}.indices")
    return b.op("Gather", [x, idx], out=node.name, axis=2 + node.attrs["dim"])


@emitter("divide")
def divide(b: Builder, node: Node, x: str, y: str) -> str:
    return b.op("Div", [x, y], out=node.name)


@emitter("const_binary")
def const_binary(b: Builder, node: Node, x: str) -> str:
    c = np.asarray(node.params["value"], dtype=np.float64)
    c = b.const(c.reshape((1, 1) + (1,) * (len(node.type.shape) - c.ndim) + c.shape), f"{node.name}.value")
    op = node.attrs["op"]
    onnx_op = {"add": "Add", "sub": "Sub", "rsub": "Sub", "mul": "Mul", "div": "Div", "rdiv": "Div"}[op]
    return b.op(onnx_op, [c, x] if op in ("rsub", "rdiv") else [x, c], out=node.name)


# -- GELU ------------------------------------------------------------------------------------------------------
def erf(b: Builder, z: str, hint: str) -> str:
    """``erf(z)`` in float64 ONNX ops: ``sign(z) * E(|z|)``, ``E`` the Taylor series
    ``2/sqrt(pi) sum_n (-1)^n a^(2n+1) / (n! (2n+1))`` (Horner in ``a^2``) below ``ERF_CUT`` and
    ``1 - exp(-a^2) / (sqrt(pi) F(a))`` above, ``F(a) = a + (1/2)/(a + (2/2)/(a + ...))`` (the Laplace continued
    fraction of erfc, evaluated bottom-up over ``FRACTION_TERMS`` levels)."""
    a = b.op("Abs", [z], hint=f"{hint}/abs")
    s = b.op("Mul", [a, a], hint=f"{hint}/sq")
    acc = b.const((-1) ** TAYLOR_TERMS / (math.factorial(TAYLOR_TERMS) * (2 * TAYLOR_TERMS + 1)), f"{hint}.c{TAYLOR_TERMS}")
    for n in range(TAYLOR_TERMS - 1, -1, -1):
        acc = b.op("Add", [b.op("Mul", [acc, s], hint=f"{hint}/h{n}"),
                           b.const((-1) ** n / (math.factorial(n) * (2 * n + 1)), f"erf.c{n}")], hint=f"{hint}/t{n}")
    small = b.op("Mul", [b.op("Mul", [acc, a], hint=f"{hint}/ta"), b.const(2 / math.sqrt(math.pi), "erf.2_sqrtpi")],
                 hint=f"{hint}/small")
    big = b.op("Max", [a, b.const(ERF_CUT, "erf.cut")], hint=f"{hint}/big_a")  # the fraction never sees a < cut
    f = big
    for k in range(FRACTION_TERMS, 0, -1):
        f = b.op("Add", [big, b.op("Div", [b.const(k / 2, f"erf.k{k}"), f], hint=f"{hint}/d{k}")], hint=f"{hint}/f{k}")
    tail = b.op("Div", [b.op("Exp", [b.op("Neg", [b.op("Mul", [big, big], hint=f"{hint}/b2")], hint=f"{hint}/nb2")],
                             hint=f"{hint}/exp"),
                        b.op("Mul", [f, b.const(math.sqrt(math.pi), "erf.sqrtpi")], hint=f"{hint}/den")],
                 hint=f"{hint}/erfc")
    large = b.op("Sub", [b.const(1.0, "one"), tail], hint=f"{hint}/large")
    e = b.op("Where", [b.op("Less", [a, b.const(ERF_CUT, "erf.cut")], hint=f"{hint}/lt"), small, large],
             hint=f"{hint}/e")
    return b.op("Mul", [b.op("Sign", [z], hint=f"{hint}/sign"), e], hint=f"{hint}/erf")


@emitter("gelu")
def gelu(b: Builder, node: Node, x: str) -> str:
    """torch's order: ``x * 0.5 * (1 + erf(x / sqrt 2))``; tanh form ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
    x^3)))``."""
    h = node.name
    if node.attrs["approximate"] == "tanh":
        cube = b.op("Mul", [b.op("Mul", [x, x], hint=f"{h}/x2"), x], hint=f"{h}/x3")
        inner = b.op("Mul", [b.const(math.sqrt(2 / math.pi), f"{h}.k"),
                             b.op("Add", [x, b.op("Mul", [b.const(0.044715, f"{h}.c"), cube], hint=f"{h}/cx3")],
                                  hint=f"{h}/in")], hint=f"{h}/inner")
        t = b.op("Tanh", [inner], hint=f"{h}/tanh")
        half = b.op("Mul", [b.const(0.5, "half"), x], hint=f"{h}/half")
        return b.op("Mul", [half, b.op("Add", [b.const(1.0, "one"), t], hint=f"{h}/1t")], out=node.name)
    e = erf(b, b.op("Mul", [x, b.const(1 / math.sqrt(2), "sqrt1_2")], hint=f"{h}/z"), f"{h}/erf")
    half = b.op("Mul", [x, b.const(0.5, "half")], hint=f"{h}/half")
    return b.op("Mul", [half, b.op("Add", [b.const(1.0, "one"), e], hint=f"{h}/1e")], out=node.name)


# -- normalization and the transposed convolution ---------------------------------------------------------------
@emitter("layernorm")
def layernorm(b: Builder, node: Node, x: str) -> str:
    """``(x * rstd + (-mean * rstd)) * gamma + beta``, torch's CPU order, with ``rstd = 1 / sqrt(var + eps)``."""
    h, axes = node.name, b.ints([-1], "last_axis")
    mean = b.op("ReduceMean", [x, axes], hint=f"{h}/mean", keepdims=1)
    d = b.op("Sub", [x, mean], hint=f"{h}/center")
    var = b.op("ReduceMean", [b.op("Mul", [d, d], hint=f"{h}/square"), axes], hint=f"{h}/var", keepdims=1)
    rstd = b.op("Div", [b.const(1.0, "one"), b.op("Sqrt", [b.op("Add", [var, b.const(node.attrs["eps"], f"{h}.eps")],
                                                                   hint=f"{h}/var_eps")], hint=f"{h}/std")],
                hint=f"{h}/rstd")
    shift = b.op("Neg", [b.op("Mul", [mean, rstd], hint=f"{h}/mr")], hint=f"{h}/shift")
    y = b.op("Add", [b.op("Mul", [x, rstd], hint=f"{h}/xr"), shift], hint=f"{h}/norm")
    y = b.op("Mul", [y, b.const(node.params["gamma"], f"{h}.gamma")], hint=f"{h}/scaled")
    return b.op("Add", [y, b.const(node.params["beta"], f"{h}.beta")], out=node.name)


@emitter("conv_transpose2d")
def conv_transpose2d(b: Builder, node: Node, x: str) -> str:
    """As the convolution it is: zeros inserted between the inputs (stride - 1 of them), padded by
    ``d (k - 1) - p`` (plus output_padding at the end), then a stride-1 conv with the kernel flipped and its
    in/out channels swapped per group."""
    a, w = node.attrs, np.asarray(node.params["weight"])
    (sh, sw), (dh, dw), g = a["stride"], a["dilation"], a["groups"]
    cin, cog, kh, kw = w.shape
    t, (c, hh, ww) = b.time_len(x), b.shape(x)
    pads = [d * (k - 1) - p for d, k, p in zip((dh, dw), (kh, kw), a["padding"])]
    if min(pads) < 0:
        raise UnsupportedOp(f"transposed convolution with padding {a['padding']} larger than dilation * (kernel - 1) "
                            "has no ONNX form here", where=where(node), remedy="use padding <= dilation * (k - 1)")
    h = node.name
    if (sh, sw) != (1, 1):  # [t, B, C, H, 1, W, 1] padded to [.., H, sh, W, sw], flattened, the trailing zeros cut
        y = b.reshape(x, [t, -1, c, hh, 1, ww, 1], hint=f"{h}/spread")
        y = b.op("Pad", [y, b.ints([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, sh - 1, 0, sw - 1]), b.const(0.0, "zero")],
                 hint=f"{h}/zeros")
        y = b.reshape(y, [t, -1, c, hh * sh, ww * sw], hint=f"{h}/dilated")
        x = b.op("Slice", [y, b.ints([0, 0]), b.ints([(hh - 1) * sh + 1, (ww - 1) * sw + 1]), b.ints([3, 4])],
                 hint=f"{h}/cut")
    (oph, opw) = a["output_padding"]
    x = b.op("Pad", [x, b.ints([pads[0], pads[1], pads[0] + oph, pads[1] + opw]), b.const(0.0, "zero"),
                     b.ints([3, 4])], hint=f"{h}/pad")
    wc = w.reshape(g, cin // g, cog, kh, kw).transpose(0, 2, 1, 3, 4)[..., ::-1, ::-1]
    wc = np.ascontiguousarray(wc.reshape(g * cog, cin // g, kh, kw))
    return im2col_conv(b, x, t, wc, node.params.get("bias"), (1, 1), (0, 0), (dh, dw), g, node.type.shape[1:], h,
                       out=node.name)


# -- math functions, log-softmax, adaptive pooling -------------------------------------------------------------
MATH = {"abs": "Abs", "sign": "Sign", "floor": "Floor", "ceil": "Ceil", "round": "Round", "sqrt": "Sqrt",
        "exp": "Exp", "log": "Log"}  # Round: half to even, as torch.round


@emitter("math")
def math_(b: Builder, node: Node, x: str) -> str:
    fn = node.attrs["fn"]
    if fn in MATH:
        return b.op(MATH[fn], [x], out=node.name)
    y = b.op("Sqrt", [x], hint=f"{node.name}/sqrt") if fn == "rsqrt" else x  # torch's rsqrt: 1 / sqrt(x)
    return b.op("Div", [b.const(1.0, "one"), y], out=node.name)


@emitter("log_softmax")
def log_softmax(b: Builder, node: Node, x: str) -> str:
    return b.op("LogSoftmax", [x], out=node.name, axis=2 + node.attrs["dim"])


@emitter("adaptive_avgpool2d")
def adaptive_avgpool2d(b: Builder, node: Node, x: str) -> str:
    """Each of torch's windows summed (ReduceSum) and divided by its size; rows joined along W, then H."""
    from spikec.ops.tensor import adaptive_windows
    (_, h, w), (oh, ow) = b.shape(x), node.attrs["size"]
    rows = []
    for i, (h0, h1) in enumerate(adaptive_windows(h, oh)):
        cells = []
        for j, (w0, w1) in enumerate(adaptive_windows(w, ow)):
            part = b.op("Slice", [x, b.ints([h0, w0]), b.ints([h1, w1]), b.ints([3, 4])], hint=f"{node.name}/w{i}_{j}")
            total = b.op("ReduceSum", [part, b.ints([3, 4], "hw_axes")], hint=f"{node.name}/s{i}_{j}", keepdims=1)
            cells.append(b.op("Div", [total, b.const(float((h1 - h0) * (w1 - w0)), f"{node.name}.n{i}_{j}")],
                              hint=f"{node.name}/a{i}_{j}"))
        rows.append(b.op("Concat", cells, hint=f"{node.name}/row{i}", axis=4) if len(cells) > 1 else cells[0])
    return b.op("Concat", rows, out=node.name, axis=3) if len(rows) > 1 else b.op("Identity", rows, out=node.name)


@emitter("var")
def var(b: Builder, node: Node, x: str) -> str:
    """Two passes: ``sum((x - mean)^2) / (N - correction)`` (torch runs Welford's: a few ulp apart)."""
    a, h = node.attrs, node.name
    axes = b.ints([2 + d for d in a["dims"]], f"{h}.axes")
    n = int(np.prod([b.shape(x)[d] for d in a["dims"]]))
    d = b.op("Sub", [x, b.op("ReduceMean", [x, axes], hint=f"{h}/mean", keepdims=1)], hint=f"{h}/d")
    total = b.op("ReduceSum", [b.mul(d, d), axes], hint=f"{h}/ss", keepdims=int(a["keepdim"]))
    return b.op("Div", [total, b.const(float(max(n - a["correction"], 0)), f"{h}.n")], out=node.name)
