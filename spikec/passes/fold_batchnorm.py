"""Fold inference BatchNorm away (passes.md, "BN folding").

Rules, tried in this order for every ``batchnorm`` (``s = gamma / sqrt(var + eps)``, ``c = beta - mu s``):
1. Conv/Linear -> BN: ``W' = W * s`` (output channels), ``b' = (b - mu) * s + beta``; a Conv1d too, which the
   frontend writes as a conv2d on ``(C, 1, L)`` viewed back as ``(C, L)`` (the view then carries the BN's name).
2. BN -> Heaviside (a LIF with ``beta = 0``): a threshold on ``x``, sign-aware: ``gamma < 0`` flips the
   comparison, expressed exactly as ``>=`` on ``-x`` (input gain -1); ``gamma == 0`` is the constant
   ``[c >= theta]``. BN -> stateful LIF or integer-firing neuron (an SDNA gate): ``alpha' = alpha s``,
   ``bias' = alpha c + bias`` (a negative ``gamma`` gives a negative gain: the same ``U``, no flip needed).
3. BN -> Conv/Linear with no zero padding: ``W'[:, i] = W[:, i] s_i``, ``b' = b + sum W[:, i] c_i``.
   With zero padding BN would move the padded zeros: refused.
BNTT (``y_t = g_t x_t + h_t``) after a Conv/Linear folds when ``g_t`` is the same for every ``t``; the
shifts then become a bias (constant ``h``) or a ``step_bias`` schedule. Otherwise it stays a
per-time-step affine node (noted in the report).
A node that now computes what a removed node computed takes that node's name.
"""
import numpy as np

from spikec.ir.graph import Graph, Node
from spikec.core.passes import Pass, PassResult, Skip
from spikec.core.rewrite import sole_consumer, splice
from spikec.ops.common import bn_scale_shift
from spikec.ops.structure import unit_view
from spikec.ops.neurons import INTFIRE, LIF


# -- weight math (pure; ``s, c`` from ``spikec.ops.common.bn_scale_shift``) ------------------
def scale_outputs(w, b, s):
    """(W', b') of ``s * conv(x; W, b)`` per output channel. ``w`` is (C_out, ...)."""
    b = np.zeros(w.shape[0]) if b is None else b
    return w * s.reshape(-1, *([1] * (w.ndim - 1))), b * s


def fold_bn_weights(w, b, gamma, beta, mean, var, eps):
    """(W', b') of ``BN(conv(x; W, b))`` as one conv/linear: ``W * s``, ``(b - mu) * s + beta``."""
    s, _ = bn_scale_shift(gamma, beta, mean, var, eps)
    b = np.zeros_like(mean) if b is None else b
    return w * s.reshape(-1, *([1] * (w.ndim - 1))), (b - mean) * s + beta


def fold_bn_into_next(w, b, s, c):
    """(W', b') of ``conv(s * x + c; W, b)`` for an unpadded conv/linear (BN on its input channels)."""
    shape = (1, -1) + (1,) * (w.ndim - 2)
    b = np.zeros(w.shape[0]) if b is None else b
    return w * s.reshape(shape), b + (w * c.reshape(shape)).reshape(w.shape[0], -1).sum(1)


def heaviside_threshold(s, c, theta):
    """``[s x + c >= theta]`` as ``[alpha x + bias >= theta']`` with ``alpha in {1, -1, 0}``, exact per channel."""
    sign = np.sign(s)
    safe = np.where(s == 0, 1.0, s)
    threshold = np.where(s == 0, theta, (theta - c) / np.abs(safe))
    bias = np.where(s == 0, c, 0.0)
    return sign, bias, threshold


# -- the rules --------------------------------------------------------------------------
def _channels(v, c):
    return np.broadcast_to(v, (c,)).astype(np.float64)


def _into_producer(graph, bn):
    src = graph.node(bn.inputs[0])
    if src.op not in ("conv2d", "linear") or sole_consumer(graph, src.name) is None:
        return None
    if src.op == "linear" and len(src.type.shape) != 1:
        return None
    w, b = fold_bn_weights(src.params["weight"], src.params.get("bias"),
                           *(bn.params[k] for k in ("gamma", "beta", "mean", "var")), bn.attrs["eps"])
    return {bn.name: [src.with_(name=bn.name, params={"weight": w, "bias": b}, type=bn.type)]}, {src.name}


def _conv1d_view(graph, node):
    """``(conv2d, reshape)`` when ``node`` is a Conv1d as the frontend writes it, a conv2d on ``(C, 1, L)`` viewed
    back as ``(C, L)`` (frontend ``conv1d``): the view keeps the channel axis, so a BN after it is per conv channel."""
    if node.op != "reshape" or sole_consumer(graph, node.name) is None:
        return None
    src = graph.node(node.inputs[0])
    if src.op != "conv2d" or unit_view(src.type.shape, node.type.shape) != "drops" \
            or sole_consumer(graph, src.name) is None:
        return None
    return src, node


def _into_conv1d(graph, bn):
    """Rule 1 through a Conv1d's view: the BN folds into its conv2d, the view then carries the BN's name."""
    found = _conv1d_view(graph, graph.node(bn.inputs[0]))
    if found is None:
        return None
    conv, view = found
    w, b = fold_bn_weights(conv.params["weight"], conv.params.get("bias"),
                           *(bn.params[k] for k in ("gamma", "beta", "mean", "var")), bn.attrs["eps"])
    folded = conv.with_(name=f"{bn.name}.conv2d", params={"weight": w, "bias": b})
    return {bn.name: [folded, view.with_(name=bn.name, inputs=(folded.name,), type=bn.type)]}, {conv.name, view.name}


def _shared_producer(graph, bn):
    src = graph.node(bn.inputs[0])
    if src.op in ("conv2d", "linear") and sole_consumer(graph, src.name) is None:
        return Skip(bn.name, f"its producer {src.name!r} also feeds other nodes, which still need its "
                             "unnormalized output", "give the BN its own convolution")
    return None


def _into_neuron(graph, bn):
    lif = sole_consumer(graph, bn.name)
    if lif is None or lif.op not in (LIF, INTFIRE) or lif.attrs.get("output", "spikes") != "spikes":
        return None
    c = bn.type.shape[0]
    s, shift = bn_scale_shift(*(bn.params[k] for k in ("gamma", "beta", "mean", "var")), bn.attrs["eps"])
    p = {k: _channels(v, c) for k, v in lif.params.items()}
    p.setdefault("bias", np.zeros(c))
    if lif.op == LIF and np.all(p["beta"] == 0) and np.all(p["alpha"] == 1) and np.all(p["bias"] == 0):
        alpha, bias, theta = heaviside_threshold(s, shift, p["threshold"])
        new = {**p, "alpha": alpha, "bias": bias, "threshold": theta}
    else:
        new = {**p, "alpha": p["alpha"] * s, "bias": p["alpha"] * shift + p["bias"]}
    return {lif.name: [lif.with_(inputs=bn.inputs, params=new)]}, {bn.name}


def _into_consumer(graph, bn):
    nxt = sole_consumer(graph, bn.name)
    if nxt is None or nxt.op not in ("conv2d", "linear"):
        return None
    if nxt.op == "conv2d" and (any(nxt.attrs["padding"]) or nxt.attrs["groups"] != 1):
        return Skip(bn.name, f"BN before the zero-padded (or grouped) conv {nxt.name!r}: folding would move "
                             "the padded zeros", "keep the BN, or use an unpadded convolution after it")
    if nxt.op == "linear" and len(bn.type.shape) != 1:
        return None
    s, shift = bn_scale_shift(*(bn.params[k] for k in ("gamma", "beta", "mean", "var")), bn.attrs["eps"])
    w, b = fold_bn_into_next(nxt.params["weight"], nxt.params.get("bias"), s, shift)
    return {nxt.name: [nxt.with_(inputs=bn.inputs, params={"weight": w, "bias": b})]}, {bn.name}


def _bntt(graph, node, notes):
    src = graph.node(node.inputs[0])
    s, shift = bn_scale_shift(*(node.params[k] for k in ("gamma", "beta", "mean", "var")), node.attrs["eps"])
    if src.op not in ("conv2d", "linear") or (src.op == "linear" and len(src.type.shape) != 1):
        notes.append(f"{node.name}: BNTT has no conv/linear producer to fold into; kept as a per-time-step affine")
        return None
    if sole_consumer(graph, src.name) is None:
        notes.append(f"{node.name}: its producer {src.name!r} has other readers; kept as a per-time-step affine")
        return None
    if not np.all(s == s[0]):
        notes.append(f"{node.name}: BNTT scale varies over t; kept as a per-time-step affine "
                     f"(a static-weight target needs {s.shape[0]} weight copies or must refuse it)")
        return None
    w, b = scale_outputs(src.params["weight"], src.params.get("bias"), s[0])
    if np.all(shift == shift[0]):
        return {node.name: [src.with_(name=node.name, params={"weight": w, "bias": b + shift[0]}, type=node.type)]}, \
            {src.name}
    conv = src.with_(name=f"{node.name}.scaled", params={"weight": w, "bias": b}, type=node.type)
    sched = Node(node.name, "step_bias", (conv.name,), node.type, {}, {"bias": shift}, node.scope)
    notes.append(f"{node.name}: BNTT shifts vary over t; folded the scale, shifts became a bias schedule")
    return {node.name: [conv, sched]}, {src.name}


def fold_batchnorm(graph: Graph) -> PassResult:
    changed, skipped, notes = [], [], []
    progress = True
    while progress:
        progress = False
        for node in graph.nodes:
            if node.op == "bntt":
                found = _bntt(graph, node, notes)
            elif node.op == "batchnorm":
                found = _into_producer(graph, node) or _into_conv1d(graph, node) or _into_neuron(graph, node) \
                    or _into_consumer(graph, node) or _shared_producer(graph, node)
            else:
                continue
            if isinstance(found, Skip):
                skipped.append(found)
            elif found:
                replace, removed = found
                graph = splice(graph, replace, removed)
                changed += sorted(removed | set(replace))
                progress = True
                break
    return PassResult(graph, tuple(changed), tuple({(s.node, s.reason): s for s in skipped}.values()),
                      tuple(dict.fromkeys(notes)))


FOLD_BATCHNORM = Pass("fold_batchnorm", fold_batchnorm,
                      requires="a batchnorm after a sole-use conv/linear (or a Conv1d's view of one), before a LIF, "
                               "or before an unpadded conv/linear; a BNTT after a sole-use conv/linear with a "
                               "time-constant scale",
                      ensures="those BNs are gone; the node computing each removed value carries its name")
