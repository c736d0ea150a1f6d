"""One ONNX emitter per IR op: ``fn(builder, node, *input_names) -> name of the node's value``.

Each emitter repeats the arithmetic of its reference-interpreter kernel in the same order, one ONNX
node per torch operation (``beta * h + alpha * x + bias`` is Mul, Mul, Add, Add), so element-wise
results are bit-identical in float64. Reductions (conv, linear, matmul) cannot fix their summation
order in ONNX: they agree to a few ulp, which the verification measures.

onnxruntime (CPU) has no float64 Conv, AveragePool or Elu: in float64, a convolution is lowered to
im2col (strided Slices + Concat) and one MatMul, an average pool to a sum of strided Slices in
torch's window order divided by torch's divisor, ELU to ``Where(z <= 0, Exp(z) - 1, z)``. In the
float32 variant (fast, not exact) the native ONNX ops are used.

Add an op with ``@emitter("op")`` (or ``register_emitter``) next to its interpreter kernel's meaning. The
frameworks' exact neurons (``lif_snntorch`` ... ``li_norse``) are in ``framework_emitters.py``.
"""
from typing import Callable

import numpy as np
from onnx import numpy_helper

from spikec.ir.errors import BadInput
from spikec.ir.graph import Node
from spikec.ops.common import bn_scale_shift, dynamics_key
from spikec.ops.pooling import pool_attrs
from spikec.targets.onnx.builder import Builder, where

EMITTERS: dict[str, Callable] = {}


def register_emitter(op: str, fn: Callable) -> None:
    """Give IR op ``op`` its ONNX form: ``fn(builder, node, *input_names) -> output name``."""
    EMITTERS[op] = fn


def emitter(op: str):
    def deco(fn):
        register_emitter(op, fn)
        return fn
    return deco


def _param(b: Builder, node: Node, key: str, shape=None) -> str:
    """A neuron / affine parameter as a broadcastable constant (scalar or per channel)."""
    return b.per_channel(node.params[key], shape or node.type.shape, f"{node.name}.{key}")


def _steps_must_match(b: Builder, node: Node, rows: int, what: str) -> None:
    if rows != b.steps:
        raise BadInput(f"{what} holds T={rows} steps; the ONNX model is exported for T={b.steps}",
                       where=where(node), remedy=f"compile with --steps {rows}")


def delayed(b: Builder, x: str, k: int, length: int, hint: str) -> str:
    """``y_t = x_{t-k}``, zero for ``t < k``, over a time axis of ``length`` (the interpreter's delay)."""
    k = min(k, length)
    if k == 0:
        return b.op("Identity", [x], hint=hint)
    if k == length:
        return b.op("ConstantOfShape", [b.op("Shape", [x], hint=f"{hint}/shape")], hint=hint,
                    value=numpy_helper.from_array(np.zeros(1, dtype=b.np_dtype)))
    head = b.op("Slice", [x, b.ints([0]), b.ints([length - k]), b.ints([0])], hint=f"{hint}/head")
    return b.op("Pad", [head, b.ints([k, 0]), b.const(0.0, "zero"), b.ints([0])], hint=hint)


@emitter("input")
def graph_input(b: Builder, node: Node) -> str:
    """A graph input is an input of the ONNX graph, under its own name (``Builder.model``)."""
    return node.name


# -- synaptic ---------------------------------------------------------------------------
def _windows(b: Builder, x: str, kernel, stride, dilation, out_hw, pads, pad_value: float, hint: str) -> list[str]:
    """Strided slices of ``x`` [T, B, C, H, W] (padded by ``pads`` = (top, left, bottom, right)), one per
    kernel offset in row-major order; each is ``[T, B, C, Ho, Wo]``: slice ``(i, j)`` holds
    ``x[.., oh * sh + i * dh - top, ow * sw + j * dw - left]``."""
    (kh, kw), (sh, sw), (dh, dw), (ho, wo) = kernel, stride, dilation, out_hw
    if any(pads):
        top, left, bottom, right = pads
        x = b.op("Pad", [x, b.ints([top, left, bottom, right]), b.const(pad_value, f"pad{pad_value}"),
                         b.ints([3, 4])], hint=f"{hint}/pad")
    if (kh, kw, sh, sw) == (1, 1, 1, 1):
        return [x]
    out = []
    for i in range(kh):
        for j in range(kw):
            starts = [i * dh, j * dw]
            ends = [i * dh + sh * (ho - 1) + 1, j * dw + sw * (wo - 1) + 1]
            out.append(b.op("Slice", [x, b.ints(starts), b.ints(ends), b.ints([3, 4]), b.ints([sh, sw])],
                            hint=f"{hint}/win{i}_{j}"))
    return out


def _sum_chain(b: Builder, terms: list[str], hint: str) -> str:
    """``((t0 + t1) + t2) + ..``: a sequential sum, the order torch's window loops use."""
    acc = terms[0]
    for k, t in enumerate(terms[1:], start=1):
        acc = b.op("Add", [acc, t], hint=f"{hint}/acc{k}")
    return acc


@emitter("conv2d")
def conv2d(b: Builder, node: Node, x: str) -> str:
    a, w = node.attrs, node.params["weight"]
    bias = node.params.get("bias")
    co, cg, kh, kw = w.shape
    groups = a["groups"]
    (ph, pw), (ho, wo) = a["padding"], node.type.shape[1:]
    t, (c, h, wd) = b.time_len(x), b.shape(x)
    if b.dtype == "float32":  # native Conv (onnxruntime has it for float32 only)
        flat = b.reshape(x, [-1, c, h, wd], hint=f"{node.name}/flat")
        ins = [flat, b.const(w, f"{node.name}.weight")] + ([b.const(bias, f"{node.name}.bias")] if bias is not None
                                                             else [])
        y = b.op("Conv", ins, hint=f"{node.name}/conv", strides=list(a["stride"]), pads=[ph, pw, ph, pw],
                 dilations=list(a["dilation"]), group=groups, kernel_shape=[kh, kw])
        return b.reshape(y, [t, -1, co, ho, wo], out=node.name)
    return im2col_conv(b, x, t, w, bias, a["stride"], (ph, pw), a["dilation"], groups, (ho, wo), node.name,
                       out=node.name)


def im2col_conv(b: Builder, x: str, t: int, w: np.ndarray, bias, stride, padding, dilation, groups: int, out_hw,
                hint: str, out: str | None = None) -> str:
    """A float64 conv of ``x`` [t, B, C, H, W]: im2col [t, B, C, kh*kw, Ho, Wo] -> [t, B, G, Cg*k, L], one MatMul
    with the (G, Co/G, Cg*k) weight, then the bias; returns [t, B, Co, Ho, Wo] (``out`` names it)."""
    co, cg, kh, kw = w.shape
    (ph, pw), (ho, wo) = padding, out_hw
    wins = _windows(b, x, (kh, kw), stride, dilation, (ho, wo), (ph, pw, ph, pw), 0.0, hint)
    if len(wins) > 1:
        cols = b.op("Concat", [b.op("Unsqueeze", [s, b.ints([3])], hint=f"{s}/u") for s in wins],
                    hint=f"{hint}/cols", axis=3)
    else:
        cols = wins[0]
    k = cg * kh * kw
    if groups == 1:
        cols = b.reshape(cols, [t, -1, k, ho * wo], hint=f"{hint}/im2col")
        wmat = b.const(w.reshape(co, k), f"{hint}.weight")
    else:
        cols = b.reshape(cols, [t, -1, groups, k, ho * wo], hint=f"{hint}/im2col")
        wmat = b.const(w.reshape(groups, co // groups, k), f"{hint}.weight")
    y = b.op("MatMul", [wmat, cols], hint=f"{hint}/matmul")
    if bias is not None:
        if groups != 1:
            y = b.reshape(y, [t, -1, co, ho * wo], hint=f"{hint}/rows")
        y = b.op("Add", [y, b.const(np.asarray(bias).reshape(co, 1), f"{hint}.bias")], hint=f"{hint}/bias")
    return b.reshape(y, [t, -1, co, ho, wo], out=out, hint=f"{hint}/out")


@emitter("linear")
def linear(b: Builder, node: Node, x: str) -> str:
    w, bias = node.params["weight"], node.params.get("bias")
    y = b.op("MatMul", [x, b.const(np.ascontiguousarray(w.T), f"{node.name}.weight_t")],
             out=None if bias is not None else node.name, hint=f"{node.name}/matmul")
    if bias is None:
        return y
    return b.op("Add", [y, b.const(bias, f"{node.name}.bias")], out=node.name)


@emitter("windowsum")
def windowsum(b: Builder, node: Node, x: str) -> str:
    k, d = node.attrs["kernel"], node.attrs["dilation"]
    p = d * (k - 1) // 2
    wins = _windows(b, x, (k, k), (1, 1), (d, d), node.type.shape[1:], (p, p, p, p), 0.0, node.name)
    return b.op("Identity", [_sum_chain(b, wins, node.name)], out=node.name)


# -- normalization, affine, pooling, structure -----------------------------------------
@emitter("batchnorm")
def batchnorm(b: Builder, node: Node, x: str) -> str:
    """torch's inference BN: ``alpha = (1 / sqrt(var + eps)) * gamma``, ``x * alpha + (beta - mean * alpha)``.

    Not ``bn_scale_shift``: ``(1 / sqrt) * gamma`` rounds differently from ``gamma / sqrt``, and this
    order is the one torch's batch_norm kernel (and the interpreter) uses."""
    p = node.params
    alpha = (1.0 / np.sqrt(p["var"] + node.attrs["eps"])) * p["gamma"]
    shift = p["beta"] - p["mean"] * alpha
    shape = node.type.shape
    y = b.op("Mul", [x, b.per_channel(alpha, shape, f"{node.name}.alpha")], hint=f"{node.name}/scaled")
    return b.op("Add", [y, b.per_channel(shift, shape, f"{node.name}.shift")], out=node.name)


@emitter("bntt")
def bntt(b: Builder, node: Node, x: str) -> str:
    p = node.params
    scale, shift = bn_scale_shift(p["gamma"], p["beta"], p["mean"], p["var"], node.attrs["eps"])
    shape = node.type.shape
    if b.streaming:
        scale_t, shift_t = _this_step(b, node, (scale, shift), ("scale", "shift"))
    else:
        _steps_must_match(b, node, p["gamma"].shape[0], "the BNTT statistics")
        scale_t, shift_t = b.per_step(scale, shape, f"{node.name}.scale"), b.per_step(shift, shape, f"{node.name}.shift")
    y = b.op("Mul", [x, scale_t], hint=f"{node.name}/scaled")
    return b.op("Add", [y, shift_t], out=node.name)


def _this_step(b: Builder, node: Node, tables, keys) -> list[str]:
    """Streaming form of a per-step schedule: the step index is a state (int64, per sample, from 0); each
    ``(T, C)`` table is gathered at it as ``[1, B, C, 1, ..]``. Past the T rows onnxruntime's Gather fails."""
    step = b.state(node, "step", None, value=0, shape=(), dtype=np.int64)         # [1, B]
    b.update_state(node, "step", b.op("Add", [step, b.const(1, "one_i64", np.int64)], hint=f"{node.name}/next"))
    tail = [1] * (len(node.type.shape) - 1)
    return [b.op("Gather", [b.const(np.asarray(t).reshape(t.shape[0], t.shape[1], *tail), f"{node.name}.{k}"), step],
                 hint=f"{node.name}/{k}_t", axis=0) for t, k in zip(tables, keys)]


@emitter("step_bias")
def step_bias(b: Builder, node: Node, x: str) -> str:
    if b.streaming:
        (bias,) = _this_step(b, node, (node.params["bias"],), ("bias",))
    else:
        _steps_must_match(b, node, node.params["bias"].shape[0], "the bias schedule")
        bias = b.per_step(node.params["bias"], node.type.shape, f"{node.name}.bias")
    return b.op("Add", [x, bias], out=node.name)


@emitter("tdm")
def tdm(b: Builder, node: Node, x: str) -> str:
    lam = node.params["lam"]
    if b.streaming:                                                                # x_{t-1}: the previous step's x
        prev = b.state(node, "prev", None)
        b.update_state(node, "prev", x)
    else:
        prev = delayed(b, x, 1, b.time_len(x), f"{node.name}/prev")
    now = b.op("Mul", [b.per_channel(1 + lam, node.type.shape, f"{node.name}.one_plus_lam"), x],
               hint=f"{node.name}/now")
    past = b.op("Mul", [_param(b, node, "lam"), prev], hint=f"{node.name}/past")
    return b.op("Sub", [now, past], out=node.name)


@emitter("scale")
def scale(b: Builder, node: Node, x: str) -> str:
    y = b.op("Mul", [x, b.const(node.attrs["a"], "a")], hint=f"{node.name}/mul")
    return b.op("Add", [y, b.const(node.attrs["b"], "b")], out=node.name)


@emitter("avgpool2d")
def avgpool2d(b: Builder, node: Node, x: str) -> str:
    a = pool_attrs(node)
    (kh, kw), (sh, sw), (ph, pw) = a["kernel"], a["stride"], a["padding"]
    t, (c, h, w), (_, ho, wo) = b.time_len(x), b.shape(x), node.type.shape
    if b.dtype == "float32":
        flat = b.reshape(x, [-1, c, h, w], hint=f"{node.name}/flat")
        y = b.op("AveragePool", [flat], hint=f"{node.name}/pool", kernel_shape=[kh, kw], strides=[sh, sw],
                 pads=[ph, pw, ph, pw], ceil_mode=int(a["ceil_mode"]), count_include_pad=int(a["count_include_pad"]))
        return b.reshape(y, [t, -1, c, ho, wo], out=node.name)
    # torch (cpu_avg_pool2d): sum the window's in-bounds elements in row-major order, divide by the divisor
    divisor = _avgpool_divisor(h, w, (kh, kw), (sh, sw), (ph, pw), (ho, wo), a["count_include_pad"])
    bottom, right = max(0, (ho - 1) * sh + kh - h - ph), max(0, (wo - 1) * sw + kw - w - pw)
    wins = _windows(b, x, (kh, kw), (sh, sw), (1, 1), (ho, wo), (ph, pw, bottom, right), 0.0, node.name)
    total = _sum_chain(b, wins, node.name)
    return b.op("Div", [total, b.const(divisor, f"{node.name}.divisor")], out=node.name)


def _avgpool_divisor(h, w, kernel, stride, padding, out_hw, count_include_pad) -> np.ndarray:
    """torch's per-window divisor: the window clipped to the padded input, or to the input itself."""
    def sizes(size, k, s, p, n):
        full, inner = [], []
        for o in range(n):
            start = o * s - p
            end = min(start + k, size + p)
            full.append(end - start)
            inner.append(min(end, size) - max(start, 0))
        return np.array(full), np.array(inner)
    fh, ih = sizes(h, kernel[0], stride[0], padding[0], out_hw[0])
    fw, iw = sizes(w, kernel[1], stride[1], padding[1], out_hw[1])
    return (np.outer(fh, fw) if count_include_pad else np.outer(ih, iw)).astype(np.float64)


@emitter("maxpool2d")
def maxpool2d(b: Builder, node: Node, x: str) -> str:
    a = pool_attrs(node)
    t, (c, h, w), (_, ho, wo) = b.time_len(x), b.shape(x), node.type.shape
    (ph, pw) = a["padding"]
    flat = b.reshape(x, [-1, c, h, w], hint=f"{node.name}/flat")
    y = b.op("MaxPool", [flat], hint=f"{node.name}/pool", kernel_shape=list(a["kernel"]), strides=list(a["stride"]),
             pads=[ph, pw, ph, pw], dilations=list(a.get("dilation", (1, 1))), ceil_mode=int(a.get("ceil_mode", False)))
    return b.reshape(y, [t, -1, c, ho, wo], out=node.name)


@emitter("flatten")
def flatten(b: Builder, node: Node, x: str) -> str:
    return b.reshape(x, [0, 0, *node.type.shape], out=node.name)


@emitter("relu")
def relu(b: Builder, node: Node, x: str) -> str:
    return b.op("Relu", [x], out=node.name)


@emitter("add")
def add(b: Builder, node: Node, x: str, y: str) -> str:
    return b.op("Add", [x, y], out=node.name)


@emitter("mul")
def mul(b: Builder, node: Node, x: str, y: str) -> str:
    return b.op("Mul", [x, y], out=node.name)


@emitter("delay")
def delay(b: Builder, node: Node, x: str) -> str:
    if b.streaming and node.attrs["steps"] > 0:
        return _delay_step(b, node, x)
    y = delayed(b, x, node.attrs["steps"] * node.type.substeps, b.time_len(x), f"{node.name}/delayed")
    return b.op("Identity", [y], out=node.name)


def _delay_step(b: Builder, node: Node, x: str) -> str:
    """Streaming delay by k steps: the state is the last k inputs ``[B, k, *shape]``, oldest first; the output is
    the oldest, the new state drops it and appends x (zeros before the first k steps, as the interpreter)."""
    k, shape = node.attrs["steps"], node.type.shape
    buf = b.state(node, "buffer", None, shape=(k, *shape))                        # [1, B, k, *shape]
    axis = b.ints([2])
    oldest = b.op("Slice", [buf, b.ints([0]), b.ints([1]), axis], hint=f"{node.name}/oldest")
    y = b.op("Squeeze", [oldest, axis], out=node.name)
    now = b.op("Unsqueeze", [x, axis], hint=f"{node.name}/now")
    if k > 1:
        rest = b.op("Slice", [buf, b.ints([1]), b.ints([k]), axis], hint=f"{node.name}/rest")
        now = b.op("Concat", [rest, now], hint=f"{node.name}/shifted", axis=2)
    b.update_state(node, "buffer", now)
    return y


@emitter("substep_sum")
def substep_sum(b: Builder, node: Node, x: str) -> str:
    """Sum the D sub-steps of each physical step (``x[t*D + d]``, d = 0..D-1, in order), then add the bias."""
    d, n = b.graph.node(x).type.substeps, b.time_len(x)
    parts = [b.op("Slice", [x, b.ints([k]), b.ints([n]), b.ints([0]), b.ints([d])], hint=f"{node.name}/sub{k}")
             for k in range(d)]
    total = _sum_chain(b, parts, node.name)
    if "bias" in node.params:
        total = b.op("Add", [total, _param(b, node, "bias")], hint=f"{node.name}/bias")
    return b.op("Identity", [total], out=node.name)


# -- dense host op -----------------------------------------------------------------------
def _phi(b: Builder, z: str, hint: str) -> str:
    """``F.elu(z) + 1`` = ``Where(z <= 0, exp(z) - 1, z) + 1`` (onnxruntime has no float64 Elu)."""
    one = b.const(1.0, "one")
    neg = b.op("Sub", [b.op("Exp", [z], hint=f"{hint}/exp"), one], hint=f"{hint}/expm1")
    le = b.op("LessOrEqual", [z, b.const(0.0, "zero")], hint=f"{hint}/le0")
    return b.op("Add", [b.op("Where", [le, neg, z], hint=f"{hint}/elu"), one], hint=hint)


@emitter("dsmpa")
def dsmpa(b: Builder, node: Node, u: str, s: str, x: str) -> str:
    """``spikec.nn.attention.ds_mpa`` per step over the H*W tokens, T and B merged."""
    p, (c, h, w) = node.params, node.type.shape
    flat = lambda v, tag: b.reshape(v, [-1, c, h * w], hint=f"{node.name}/{tag}")
    uu, ss, xx = flat(u, "u"), flat(s, "s"), flat(x, "x")
    mm = lambda w_, v, tag: b.op("MatMul", [b.const(p[w_], f"{node.name}.{w_}"), v], hint=f"{node.name}/{tag}")
    q = _phi(b, mm("wq", uu, "wq_u"), f"{node.name}/q")
    k = _phi(b, mm("wk", uu, "wk_u"), f"{node.name}/k")
    v = mm("wv", ss, "v")
    tr = lambda z, tag: b.op("Transpose", [z], hint=f"{node.name}/{tag}", perm=[0, 2, 1])
    kv = b.op("MatMul", [k, tr(v, "vt")], hint=f"{node.name}/kv")
    num = b.op("MatMul", [tr(kv, "kvt"), q], hint=f"{node.name}/num")
    ksum = b.op("ReduceSum", [k, b.ints([2])], hint=f"{node.name}/ksum", keepdims=1)
    den = b.op("MatMul", [tr(ksum, "ksumt"), q], hint=f"{node.name}/den")
    den = b.op("Add", [den, b.const(node.attrs["eps"], f"{node.name}.eps")], hint=f"{node.name}/den_eps")
    attn = b.op("Div", [num, den], hint=f"{node.name}/attn")
    gated = b.op("Mul", [b.const(p["gamma"].reshape(1, -1, 1), f"{node.name}.gamma"),
                         b.op("Mul", [attn, xx], hint=f"{node.name}/ax")], hint=f"{node.name}/gated")
    out = b.op("Add", [xx, gated], hint=f"{node.name}/out")
    return b.reshape(out, [b.time_len(x), -1, c, h, w], out=node.name)


# -- neurons ----------------------------------------------------------------------------
# A neuron is unrolled over the fixed T: its input is split into steps, the recurrence is written out
# step by step (each line below is the interpreter kernel's line, in its operation order), and the
# per-step spikes (or membranes) are concatenated back along time. A neuron and its membrane read-out
# (same dynamics) share one unrolled recurrence (``dynamics_key``, as in the interpreter).
def _neuron(b: Builder, node: Node, x: str, dynamics) -> str:
    key = ("neuron", dynamics_key(node))
    if key not in b.cache:
        steps = b.split_steps(x, b.time_len(x), f"{node.name}/x")
        b.cache[key] = dynamics(b, node, steps)   # (per-step spikes, per-step membranes)
    spikes, membrane = b.cache[key]
    return b.stack_steps(membrane if node.attrs.get("output") == "membrane" else spikes, out=node.name)


def _fire(b: Builder, u: str, theta: str) -> str:
    """``S = [U - theta >= 0]`` as 0/1."""
    return b.spike(b.op("GreaterOrEqual", [b.sub(u, theta), b.const(0.0, "zero")]))


@emitter("lif")
def lif(b: Builder, node: Node, x: str) -> str:
    def dynamics(b, node, steps):
        beta, alpha, bias, theta, v_reset = (_param(b, node, k) for k in
                                             ("beta", "alpha", "bias", "threshold", "v_reset"))
        one, spikes, membrane = b.const(1.0, "one"), [], []
        h = b.state(node, "h", b.const(0.0, "zero"))
        for t, xt in enumerate(steps):
            with b.scope(f"{node.name}/t{t}"):
                u = b.add(b.add(b.mul(beta, h), b.mul(alpha, xt)), bias)         # beta * h + alpha * x + bias
                s = _fire(b, u, theta)
                if t + 1 < len(steps) or b.streaming:  # the unrolled model's last reset is never read
                    if node.attrs["reset"] == "subtract":
                        h = b.sub(u, b.mul(theta, s))                              # u - theta * s
                    else:
                        h = b.add(b.mul(u, b.sub(one, s)), b.mul(v_reset, s))      # u * (1 - s) + v_reset * s
            spikes.append(s)
            membrane.append(u)
        b.update_state(node, "h", h)
        return spikes, membrane
    return _neuron(b, node, x, dynamics)


def _intfire_steps(b: Builder, node: Node, steps: list[str]):
    """The integer neuron's update per physical step: yields ``(t, U, q)`` (as ``intfire`` computes them)."""
    beta, alpha, theta = (_param(b, node, k) for k in ("beta", "alpha", "threshold"))
    bias = _param(b, node, "bias") if "bias" in node.params else None
    v_min = _param(b, node, "v_min") if "v_min" in node.params else None
    lo, hi = b.const(0.0, "zero"), b.const(float(node.attrs["max_spikes"]), f"{node.name}.max_spikes")
    h = b.state(node, "h", b.const(0.0, "zero"))
    for t, xt in enumerate(steps):
        with b.scope(f"{node.name}/t{t}"):
            u = b.add(b.mul(beta, h), b.mul(alpha, xt))                            # beta * h + alpha * x
            if bias is not None:
                u = b.add(u, bias)                                                 # (+ bias)
            z = b.op("Div", [u, theta])                                            # u / theta
            if node.attrs["rounding"] == "round":
                z = b.add(z, b.const(0.5, "half"))                                 # z + 0.5
            q = b.op("Clip", [b.op("Floor", [z]), lo, hi])                         # clamp(floor(.), 0, D)
            if t + 1 < len(steps) or b.streaming:
                h = b.sub(u, b.mul(theta, q))                                      # u - theta * q
                if v_min is not None:
                    h = b.add(b.op("Relu", [b.sub(h, v_min)]), v_min)             # relu(h - v_min) + v_min
        yield t, u, q
    b.update_state(node, "h", h)


@emitter("intfire")
def intfire(b: Builder, node: Node, x: str) -> str:
    def dynamics(b, node, steps):
        spikes, membrane = [], []
        for _, u, q in _intfire_steps(b, node, steps):
            spikes.append(q)
            membrane.append(u)
        return spikes, membrane
    return _neuron(b, node, x, dynamics)


@emitter("intfire_unrolled")
def intfire_unrolled(b: Builder, node: Node, x: str) -> str:
    """The count ``q`` of ``intfire`` replayed as the thermometer code ``s_d = [q > d]``, d = 0..D-1."""
    spikes = []
    for t, _, q in _intfire_steps(b, node, b.split_steps(x, b.time_len(x), f"{node.name}/x")):
        for d in range(node.attrs["max_spikes"]):
            with b.scope(f"{node.name}/t{t}/d{d}"):
                spikes.append(b.spike(b.op("Greater", [q, b.const(float(d), f"d{d}")])))
    return b.stack_steps(spikes, out=node.name)


@emitter("silif")
def silif(b: Builder, node: Node, x: str) -> str:
    def dynamics(b, node, steps):
        a, bb, v_th = (_param(b, node, k) for k in ("decay", "b", "threshold"))
        kappa = b.const(node.attrs["kappa"], f"{node.name}.kappa")
        u, s = (b.state(node, k, b.const(0.0, "zero")) for k in ("u", "s"))
        spikes, membrane = [], []
        for t, xt in enumerate(steps):
            with b.scope(f"{node.name}/t{t}"):
                u = b.add(b.mul(a, b.sub(u, b.mul(kappa, s))), b.mul(bb, xt))      # a * (u - kappa * s) + b * x
                s = _fire(b, u, v_th)
            spikes.append(s)
            membrane.append(u)
        b.update_state(node, "u", u)
        b.update_state(node, "s", s)
        return spikes, membrane
    return _neuron(b, node, x, dynamics)


@emitter("csilif")
def csilif(b: Builder, node: Node, x: str) -> str:
    def dynamics(b, node, steps):
        a_re, a_im, bb, v_th = (_param(b, node, k) for k in ("a_re", "a_im", "b", "threshold"))
        kappa, two = b.const(node.attrs["kappa"], f"{node.name}.kappa"), b.const(2.0, "two")
        m_re, m_im, s = (b.state(node, k, b.const(0.0, "zero")) for k in ("m_re", "m_im", "s"))
        spikes, membrane = [], []
        for t, xt in enumerate(steps):
            with b.scope(f"{node.name}/t{t}"):
                z_re = b.sub(m_re, b.mul(kappa, s))                                # m_re - kappa * s
                m_re, m_im = (b.add(b.sub(b.mul(a_re, z_re), b.mul(a_im, m_im)), b.mul(bb, xt)),
                              b.add(b.mul(a_re, m_im), b.mul(a_im, z_re)))         # a * z + b * x, complex
                u = b.mul(two, m_re)                                               # 2 * m_re
                s = _fire(b, u, v_th)
            spikes.append(s)
            membrane.append(u)
        for k, v in (("m_re", m_re), ("m_im", m_im), ("s", s)):
            b.update_state(node, k, v)
        return spikes, membrane
    return _neuron(b, node, x, dynamics)


# (the frameworks' exact neurons, lif_snntorch ... li_norse, are in framework_emitters.py)


# -- attention: reshapes, dynamic products ----------------------------------------------
@emitter("reshape")
def reshape(b: Builder, node: Node, x: str) -> str:
    return b.reshape(x, [0, 0, *node.attrs["shape"]], out=node.name)


@emitter("transpose")
def transpose(b: Builder, node: Node, x: str) -> str:
    return b.op("Transpose", [x], out=node.name, perm=[0, 1, *(2 + d for d in node.attrs["perm"])])


@emitter("matmul")
def matmul(b: Builder, node: Node, x: str, y: str) -> str:
    return b.op("MatMul", [x, y], out=node.name)


@emitter("softmax")
def softmax(b: Builder, node: Node, x: str) -> str:
    return b.op("Softmax", [x], out=node.name, axis=2 + node.attrs["dim"])


@emitter("causal_mask")
def causal_mask(b: Builder, node: Node, x: str) -> str:
    return b.op("Trilu", [x], out=node.name, upper=0)


# -- per-step structure: concat, slice, reductions, division (the ATen capture's ops) -------------------------
@emitter("concat")
def concat(b: Builder, node: Node, x: str, y: str) -> str:
    return b.op("Concat", [x, y], out=node.name, axis=2 + node.attrs["axis"])


@emitter("slice")
def slice_(b: Builder, node: Node, x: str) -> str:
    a = node.attrs
    return b.op("Slice", [x, b.ints([a["start"]]), b.ints([a["stop"]]), b.ints([2 + a["dim"]]), b.ints([a["step"]])],
                out=node.name)


def _reduce(onnx_op: str):
    """ReduceSum / ReduceMean over the per-step dims (a reduction: a few ulp from torch's order, measured)."""
    def emit(b: Builder, node: Node, x: str) -> str:
        axes = b.ints([2 + d for d in node.attrs["dims"]])
        return b.op(onnx_op, [x, axes], out=node.name, keepdims=int(node.attrs["keepdim"]))
    return emit


register_emitter("sum", _reduce("ReduceSum"))
register_emitter("amax", _reduce("ReduceMax"))
register_emitter("mean", _reduce("ReduceMean"))


@emitter("div")
def div(b: Builder, node: Node, x: str) -> str:
    return b.op("Div", [x, b.const(node.attrs["divisor"], f"{node.name}.divisor")], out=node.name)


@emitter("clamp")
def clamp(b: Builder, node: Node, x: str) -> str:
    lo, hi = node.attrs["lo"], node.attrs["hi"]
    bounds = ["" if v is None else b.const(v, f"{node.name}.{k}") for k, v in (("lo", lo), ("hi", hi))]
    return b.op("Clip", [x, *bounds], out=node.name)


@emitter("sigmoid")
def sigmoid(b: Builder, node: Node, x: str) -> str:
    return b.op("Sigmoid", [x], out=node.name)


@emitter("tanh")
def tanh(b: Builder, node: Node, x: str) -> str:
    return b.op("Tanh", [x], out=node.name)
