"""Op definitions: parameter layouts, type inference and parameter accounting, one entry per op.

Array layouts (per node ``params``):
  conv2d    weight (C_out, C_in/groups, kH, kW), bias (C_out,)          -- PyTorch cross-correlation
  linear    weight (N_out, N_in), bias (N_out,)                          -- acts on the last dim
  batchnorm gamma, beta, mean, var (C,)
  bntt      gamma, beta, mean, var (T, C)                                -- one row per step
  tdm       lam (C,)
  lif       beta, alpha, bias, threshold, v_reset: () or (C,)
  intfire   beta, alpha, threshold: () or (C,)
  silif     decay, b, v_th (C,)            -- decay = exp(-exp(l)), computed by the frontend
  csilif    a_re, a_im, b, v_th (C,)       -- a = exp((-exp(l) + j omega) exp(log_dt))
  dsmpa     wq, wk, wv (C, C), gamma (C,)  -- inputs (u, s_prev, x); dense, runs on a host
  step_bias bias (T, C)                    -- y_t = x_t + bias[t]: a per-time-step bias schedule
Neurons take attr ``output``: "spikes" (default) or "membrane" (the pre-reset ``U``, real).
Per-channel vectors always index ``shape[0]`` of the per-step shape.
"""
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from spikec.compiler.errors import IRError, ShapeError
from spikec.compiler.ir import Node, TensorType


@dataclass(frozen=True)
class OpDef:
    name: str
    arity: int
    required: tuple[str, ...]          # params that must be present
    optional: tuple[str, ...]          # params that may be present
    infer: Callable[[Node, list[TensorType]], TensorType]
    count: Callable[[Node], int]       # deployed-parameter count (statistics are buffers, not counted)
    synaptic: bool = False             # a weighted sum of its input: AC on spikes, MAC otherwise
    stateful: bool = False             # output at t depends on earlier steps
    dense: bool = False                # real-valued computation with no spike-driven form (host)


OPS: dict[str, OpDef] = {}


def define(name, arity, infer, required=(), optional=(), count=lambda n: 0, **flags):
    OPS[name] = OpDef(name, arity, tuple(required), tuple(optional), infer, count, **flags)


def opdef(op: str) -> OpDef:
    if op not in OPS:
        raise IRError(f"unknown op {op!r}", remedy=f"known ops: {', '.join(sorted(OPS))}")
    return OPS[op]


def _need(cond: bool, node: Node, what: str):
    if not cond:
        raise ShapeError(what, where=f"node {node.name!r} ({node.op}{', module ' + repr(node.scope) if node.scope else ''})")


def _sizes(node, *names) -> int:
    return sum(int(node.params[n].size) for n in names if n in node.params)


def _spike_or_real(t: TensorType, shape) -> TensorType:
    return TensorType(tuple(shape), t.kind, t.ceiling)


def _window(size, k, s, p, d=1, ceil=False):
    span = size + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= size + p:  # torch: the last window must start inside the input or left pad
        out -= 1
    return out


def _per_channel(node, t, names):
    for n in names:
        if n in node.params:
            shape = node.params[n].shape
            _need(shape in ((), (t.shape[0],)), node,
                  f"parameter {n} has shape {shape}; expected () or ({t.shape[0]},) for {t.shape[0]} channels")


# -- synaptic ---------------------------------------------------------------------------
def _infer_conv(node, ins):
    (t,) = ins
    w = node.params["weight"]
    g = node.attrs["groups"]
    _need(len(t.shape) == 3, node, f"expects a (C, H, W) input, got shape {t.shape}")
    _need(w.ndim == 4 and w.shape[1] * g == t.shape[0], node,
          f"weight {w.shape} with groups={g} expects {w.shape[1] * g} input channels, got {t.shape[0]}")
    if "bias" in node.params:
        _need(node.params["bias"].shape == (w.shape[0],), node, "bias must have shape (C_out,)")
    (sh, sw), (ph, pw), (dh, dw) = node.attrs["stride"], node.attrs["padding"], node.attrs["dilation"]
    h, wd = _window(t.shape[1], w.shape[2], sh, ph, dh), _window(t.shape[2], w.shape[3], sw, pw, dw)
    _need(h >= 1 and wd >= 1, node, f"kernel {w.shape[2:]} does not fit input {t.shape[1:]}")
    return TensorType((w.shape[0], h, wd))


def _infer_linear(node, ins):
    (t,) = ins
    w = node.params["weight"]
    _need(w.ndim == 2 and t.shape[-1] == w.shape[1], node,
          f"weight {w.shape} expects {w.shape[1]} input features, got shape {t.shape}")
    if "bias" in node.params:
        _need(node.params["bias"].shape == (w.shape[0],), node, "bias must have shape (N_out,)")
    return TensorType(t.shape[:-1] + (w.shape[0],))


define("conv2d", 1, _infer_conv, ("weight",), ("bias",), lambda n: _sizes(n, "weight", "bias"), synaptic=True)
define("linear", 1, _infer_linear, ("weight",), ("bias",), lambda n: _sizes(n, "weight", "bias"), synaptic=True)


# -- normalization and affine -----------------------------------------------------------
def _infer_bn(node, ins):
    (t,) = ins
    for n in ("gamma", "beta", "mean", "var"):
        _need(node.params[n].shape == (t.shape[0],), node,
              f"{n} has shape {node.params[n].shape}, expected ({t.shape[0]},)")
    return TensorType(t.shape)


def _infer_bntt(node, ins):
    (t,) = ins
    steps = node.params["gamma"].shape[0]
    for n in ("gamma", "beta", "mean", "var"):
        _need(node.params[n].shape == (steps, t.shape[0]), node,
              f"{n} has shape {node.params[n].shape}, expected ({steps}, {t.shape[0]})")
    return TensorType(t.shape)


def _infer_tdm(node, ins):
    (t,) = ins
    _need(node.params["lam"].shape == (t.shape[0],), node, f"lam must have shape ({t.shape[0]},)")
    return TensorType(t.shape)


define("batchnorm", 1, _infer_bn, ("gamma", "beta", "mean", "var"), count=lambda n: _sizes(n, "gamma", "beta"))
define("bntt", 1, _infer_bntt, ("gamma", "beta", "mean", "var"), count=lambda n: _sizes(n, "gamma", "beta"),
       stateful=True)
define("tdm", 1, _infer_tdm, ("lam",), count=lambda n: _sizes(n, "lam"), stateful=True)
define("scale", 1, lambda node, ins: TensorType(ins[0].shape))  # y = a*x + b, scalar attrs a, b


# -- pooling and structure --------------------------------------------------------------
def _infer_pool(node, ins, keep_kind):
    (t,) = ins
    _need(len(t.shape) == 3, node, f"expects a (C, H, W) input, got shape {t.shape}")
    (kh, kw), (sh, sw), (ph, pw) = node.attrs["kernel"], node.attrs["stride"], node.attrs["padding"]
    dh, dw = node.attrs.get("dilation", (1, 1))
    ceil = node.attrs.get("ceil_mode", False)
    h, w = _window(t.shape[1], kh, sh, ph, dh, ceil), _window(t.shape[2], kw, sw, pw, dw, ceil)
    _need(h >= 1 and w >= 1, node, f"pool window {(kh, kw)} does not fit input {t.shape[1:]}")
    shape = (t.shape[0], h, w)
    return _spike_or_real(t, shape) if keep_kind else TensorType(shape)


def _infer_flatten(node, ins):
    (t,) = ins
    start, end = node.attrs["start"], node.attrs["end"]
    end = end if end >= 0 else len(t.shape) + end
    _need(0 <= start <= end < len(t.shape), node, f"cannot flatten dims {start}..{end} of shape {t.shape}")
    shape = t.shape[:start] + (int(np.prod(t.shape[start:end + 1])),) + t.shape[end + 1:]
    return _spike_or_real(t, shape)


def _infer_windowsum(node, ins):
    (t,) = ins
    _need(len(t.shape) == 3, node, f"expects a (C, H, W) input, got shape {t.shape}")
    k2 = node.attrs["kernel"] ** 2
    if t.kind == "real":
        return TensorType(t.shape)
    return TensorType(t.shape, "integer", k2 * (t.ceiling or 1))


define("avgpool2d", 1, lambda n, i: _infer_pool(n, i, False))
define("maxpool2d", 1, lambda n, i: _infer_pool(n, i, True))
define("flatten", 1, _infer_flatten)
define("relu", 1, lambda n, i: i[0])
define("delay", 1, lambda n, i: i[0], stateful=True)  # delays by `steps` physical steps on any time base
define("windowsum", 1, _infer_windowsum, synaptic=True)


# -- element-wise binary ----------------------------------------------------------------
def _infer_elementwise(node, ins, combine):
    a, b = ins
    _need(a.shape == b.shape, node, f"operands have shapes {a.shape} and {b.shape}; "
                                    "element-wise ops need identical shapes (no broadcasting)")
    if a.kind == "real" or b.kind == "real":
        return TensorType(a.shape)
    return combine(a.shape, a.ceiling or 1, b.ceiling or 1, a.kind == b.kind == "binary")


define("add", 2, lambda n, i: _infer_elementwise(n, i, lambda s, da, db, _: TensorType(s, "integer", da + db)))
define("mul", 2, lambda n, i: _infer_elementwise(
    n, i, lambda s, da, db, both_binary: TensorType(s, "binary") if both_binary
    else TensorType(s, "integer", da * db)))


# -- attention: reshapes and dynamic products ------------------------------------------
def _infer_reshape(node, ins):
    (t,) = ins
    shape = tuple(node.attrs["shape"])
    _need(int(np.prod(shape)) == t.size, node, f"cannot reshape {t.shape} ({t.size} values) to {shape}")
    return _spike_or_real(t, shape)


def _infer_transpose(node, ins):
    (t,) = ins
    perm = tuple(node.attrs["perm"])
    _need(sorted(perm) == list(range(len(t.shape))), node, f"perm {perm} does not permute the dims of {t.shape}")
    return _spike_or_real(t, tuple(t.shape[i] for i in perm))


def _infer_matmul(node, ins):
    a, b = ins
    _need(len(a.shape) >= 2 and a.shape[:-2] == b.shape[:-2] and a.shape[-1] == b.shape[-2], node,
          f"cannot multiply {a.shape} by {b.shape} (batched over equal leading dims)")
    shape = a.shape[:-1] + (b.shape[-1],)
    if a.is_spike and b.is_spike:  # a sum of a.shape[-1] integer products
        return TensorType(shape, "integer", a.shape[-1] * (a.ceiling or 1) * (b.ceiling or 1))
    return TensorType(shape)


def _infer_same(node, ins):
    return TensorType(ins[0].shape)


define("reshape", 1, _infer_reshape)        # attr shape: the new per-step shape
define("transpose", 1, _infer_transpose)    # attr perm: a permutation of the per-step dims
# a product of two activations is a dynamic weight: no static synapse holds it (host partition)
define("matmul", 2, _infer_matmul, dense=True)
define("softmax", 1, _infer_same, dense=True)       # attr dim (per-step)
define("causal_mask", 1, lambda n, i: i[0])         # zero above the diagonal of the last two dims (tril)


# -- neurons ----------------------------------------------------------------------------
def _neuron(names, out):
    def infer(node, ins):
        (t,) = ins
        _per_channel(node, t, names)
        output = node.attrs.get("output", "spikes")
        _need(output in ("spikes", "membrane"), node, f"output must be 'spikes' or 'membrane', got {output!r}")
        return out(node, t) if output == "spikes" else TensorType(t.shape)
    return infer


_LIF = ("beta", "alpha", "bias", "threshold", "v_reset")
_INT = ("beta", "alpha", "threshold")
define("lif", 1, _neuron(_LIF, lambda n, t: TensorType(t.shape, "binary")), _LIF, stateful=True)
define("intfire", 1, _neuron(_INT + ("bias",), lambda n, t: TensorType(t.shape, "integer", n.attrs["max_spikes"])),
       _INT, ("bias",), stateful=True)  # optional bias: U = beta*H + alpha*X + bias (a folded BN's shift)
define("silif", 1, _neuron(("decay", "b", "v_th"), lambda n, t: TensorType(t.shape, "binary")),
       ("decay", "b", "v_th"), count=lambda n: 3 * n.params["b"].size, stateful=True)
define("csilif", 1, _neuron(("a_re", "a_im", "b", "v_th"), lambda n, t: TensorType(t.shape, "binary")),
       ("a_re", "a_im", "b", "v_th"), count=lambda n: 5 * n.params["b"].size, stateful=True)


def _infer_dsmpa(node, ins):
    u, s, x = ins
    _need(len(x.shape) == 3 and u.shape == s.shape == x.shape, node,
          f"u, s_prev and x must share one (C, H, W) shape, got {u.shape}, {s.shape}, {x.shape}")
    c = x.shape[0]
    for n, shape in (("wq", (c, c)), ("wk", (c, c)), ("wv", (c, c)), ("gamma", (c,))):
        _need(node.params[n].shape == shape, node, f"{n} has shape {node.params[n].shape}, expected {shape}")
    return TensorType(x.shape)


def _infer_step_bias(node, ins):
    (t,) = ins
    _need(node.params["bias"].ndim == 2 and node.params["bias"].shape[1] == t.shape[0], node,
          f"bias schedule must be (T, {t.shape[0]}), got {node.params['bias'].shape}")
    return TensorType(t.shape)


def _infer_unrolled(node, ins):
    (t,) = ins
    _per_channel(node, t, _INT + ("bias",))
    _need(t.substeps == 1, node, "an unrolled integer neuron integrates physical steps")
    return TensorType(t.shape, "binary", None, node.attrs["max_spikes"])


def _infer_substep_sum(node, ins):
    (t,) = ins
    _need(t.substeps >= 1, node, "substep_sum needs a sub-step input")
    if "bias" in node.params:
        _need(node.params["bias"].shape == (t.shape[0],), node, f"bias must have shape ({t.shape[0]},)")
    if t.kind == "real" or "bias" in node.params:
        return TensorType(t.shape)
    return TensorType(t.shape, "integer", (t.ceiling or 1) * t.substeps)


# intfire_unrolled: the integer neuron replayed as binary spikes over D = max_spikes sub-steps per step.
# substep_sum: sums the D sub-steps of each physical step (and adds an optional per-channel bias once).
define("intfire_unrolled", 1, _infer_unrolled, _INT, ("bias",), stateful=True)
define("substep_sum", 1, _infer_substep_sum, (), ("bias",), count=lambda n: _sizes(n, "bias"))


define("dsmpa", 3, _infer_dsmpa, ("wq", "wk", "wv", "gamma"), count=lambda n: _sizes(n, "wq", "wk", "wv", "gamma"),
       dense=True)
define("step_bias", 1, _infer_step_bias, ("bias",), count=lambda n: _sizes(n, "bias"), stateful=True)


# Ops that define their own time base; every other op is checked here: a stateless op keeps the
# sub-step time base of its inputs, a stateful one runs on physical steps only.
TIME_BASE_OPS = {"input", "intfire_unrolled", "substep_sum", "delay"}


def infer_type(node: Node, in_types: list[TensorType]) -> TensorType:
    """The output type ``node`` must have given its input types (raises ShapeError)."""
    if node.op == "input":
        return node.type
    spec = opdef(node.op)
    out = spec.infer(node, in_types)
    if node.op in TIME_BASE_OPS:
        return out
    bases = {t.substeps for t in in_types}
    _need(len(bases) <= 1, node, f"inputs run on different time bases (substeps {sorted(bases)})")
    base = bases.pop() if bases else 1
    _need(base == 1 or not spec.stateful, node,
          f"a stateful {node.op} runs on physical steps; its input runs on {base} virtual sub-steps per step")
    return replace(out, substeps=base)


def deployed_params(node: Node) -> int:
    # a neuron's membrane read-out shares the parameters of its spike node: count them once
    if node.op == "input" or node.attrs.get("output") == "membrane":
        return 0
    return int(opdef(node.op).count(node))


define("input", 0, lambda n, i: n.type)
