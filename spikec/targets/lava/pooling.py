"""Pooling on Loihi 2: average pools folded into the adjacent synapse, max pools over spikes as OR layers.

Lava has no pooling process. An avgpool2d is linear, so it folds exactly (in real arithmetic) into the
conv2d / linear beside it: the composite kernel of the pair is one synapse (an ``Operator``). A sum pool
(NIR's SumPool2d, read as a depthwise all-ones conv2d without bias) between spikes and a conv2d / linear
folds the same way, its window sum being k x k times the average. Max pooling over binary spikes is an OR:
an all-ones depthwise window into a population firing when its sum is > 0.
"""
from dataclasses import dataclass, field

import numpy as np

from spikec.ir.errors import UnsupportedOp
from spikec.ir.graph import Graph, Node
from spikec.ops.common import window
from spikec.ops.pooling import pool_attrs
from spikec.targets.lava.vocabulary import refuse


@dataclass(frozen=True)
class Operator:
    """``A(x) + b`` on ``src`` (per-sample shape ``in_shape``), float64; ``src`` is the node below the pools
    and flatten (a spike source, a delay, a sum of spikes, a max pool or a host value)."""
    kind: str                          # "conv" | "dense"
    weight: np.ndarray                 # conv (C_out, C_in/g, kH, kW) PyTorch layout; dense (N_out, N_in)
    bias: np.ndarray                   # (C_out,)
    src: str                           # spike source node (input or lif)
    in_shape: tuple
    out_shape: tuple
    attrs: dict = field(default_factory=dict)   # conv: stride, padding, dilation, groups
    flatten: bool = False              # dense over a flattened (C, H, W) source
    nodes: list = field(default_factory=list)   # float nodes this operator replaces, in order
    notes: list = field(default_factory=list)


def fold_conv_then_pool(w, stride, padding, dilation, k, s):
    """Composite kernel of avgpool(k, s) after conv: kernel ``st*(k-1) + d*(kw-1) + 1``, stride ``st*s``."""
    kh, kw = w.shape[2:]
    (sh, sw), (dh, dw) = stride, dilation
    ch, cw = sh * (k[0] - 1) + dh * (kh - 1) + 1, sw * (k[1] - 1) + dw * (kw - 1) + 1
    out = np.zeros(w.shape[:2] + (ch, cw))
    for i in range(k[0]):
        for j in range(k[1]):
            for m in range(kh):
                for n in range(kw):
                    out[:, :, sh * i + dh * m, sw * j + dw * n] += w[:, :, m, n]
    return out / (k[0] * k[1]), (sh * s[0], sw * s[1]), tuple(padding), (1, 1)


def fold_pool_then_conv(w, stride, padding, dilation, k):
    """Composite kernel of conv after a non-overlapping avgpool(k, stride k): every tap spread over k x k."""
    kh, kw = w.shape[2:]
    dh, dw = dilation
    out = np.zeros(w.shape[:2] + (k[0] * (dh * (kh - 1) + 1), k[1] * (dw * (kw - 1) + 1)))
    for m in range(kh):
        for n in range(kw):
            for i in range(k[0]):
                for j in range(k[1]):
                    out[:, :, k[0] * dh * m + i, k[1] * dw * n + j] += w[:, :, m, n]
    return (out / (k[0] * k[1]), (stride[0] * k[0], stride[1] * k[1]),
            (padding[0] * k[0], padding[1] * k[1]), (1, 1))


def is_sum_pool(n: Node) -> bool:
    """A depthwise all-ones conv2d without bias (NIR's SumPool2d as the NIR frontend reads it)."""
    if n.op != "conv2d" or "bias" in n.params and np.any(np.asarray(n.params["bias"]) != 0):
        return False
    w = np.asarray(n.params["weight"])
    return n.attrs["groups"] == w.shape[0] == n.type.shape[0] and w.shape[1] == 1 and bool(np.all(w == 1))


def _pool_attrs(pool: Node) -> dict:
    """An avgpool2d's attrs, or a sum pool's as a pool (kernel = the conv's window)."""
    if pool.op == "avgpool2d":
        return pool.attrs
    return dict(pool.attrs, kernel=tuple(np.asarray(pool.params["weight"]).shape[2:]))


def _pool_gain(pool: Node) -> float:
    """What the folded average is multiplied by: 1 for an avgpool2d, the window size for a sum pool."""
    k = _pool_attrs(pool)["kernel"]
    return 1.0 if pool.op == "avgpool2d" else float(k[0] * k[1])


def _check_pool(pool: Node, in_shape, non_overlapping: bool) -> None:
    a = _pool_attrs(pool)
    why = None
    if tuple(a["padding"]) != (0, 0):
        why = "pool padding is not folded"
    elif a.get("ceil_mode"):
        why = "ceil_mode pooling is not folded"
    elif tuple(a.get("dilation", (1, 1))) != (1, 1):
        why = "dilated pooling is not folded"
    elif non_overlapping and tuple(a["kernel"]) != tuple(a["stride"]):
        why = "only a non-overlapping pool (kernel == stride) folds into the next synapse"
    if why:
        raise refuse(pool, why)


def _dropped(pool: Node, in_shape) -> tuple[int, int]:
    """The rows and columns a non-overlapping pool leaves out at the bottom and right (its map does not tile)."""
    kh, kw = _pool_attrs(pool)["kernel"]
    return in_shape[1] % kh, in_shape[2] % kw


def operator_of(graph: Graph, node: Node) -> Operator:
    """The float linear operator computing ``node`` from a spike source, pools folded; refuses otherwise."""
    post_pool = None
    syn = node
    if syn.op == "avgpool2d":
        post_pool, syn = syn, graph.node(syn.inputs[0])
    if syn.op not in ("conv2d", "linear"):
        raise refuse(node if post_pool is None else post_pool,
                     "a neuron or output must be fed by a conv2d or linear (optionally with an avgpool2d)")
    chain, src = [], graph.node(syn.inputs[0])
    while src.op in ("flatten", "avgpool2d") or is_sum_pool(src):
        chain.insert(0, src)
        src = graph.node(src.inputs[0])
    w = np.array(syn.params["weight"], dtype=np.float64)
    b = np.array(syn.params["bias"], dtype=np.float64) if "bias" in syn.params else np.zeros(w.shape[0])
    nodes = [*chain, syn] + ([post_pool] if post_pool is not None else [])
    if syn.op == "conv2d":
        return _conv_operator(syn, chain, post_pool, src, w, b, nodes)
    return _dense_operator(syn, chain, src, w, b, nodes)


def _conv_operator(syn: Node, chain: list, post_pool: Node | None, src: Node, w, b, nodes: list) -> Operator:
    in_shape = src.type.shape
    notes = []
    a = dict(stride=tuple(syn.attrs["stride"]), padding=tuple(syn.attrs["padding"]),
             dilation=tuple(syn.attrs["dilation"]), groups=syn.attrs["groups"])
    if len(chain) > 1 or chain and chain[0].op == "flatten":
        raise refuse(chain[-1], "only a single avgpool2d or sum pool may sit between spikes and a conv2d")
    if chain:
        pool = chain[0]
        _check_pool(pool, in_shape, True)
        dropped = _dropped(pool, in_shape)
        if any(dropped) and any(a["padding"]):   # the composite's padding would read the left-out rows
            e = refuse(pool, f"it leaves out the last {dropped[0]} row(s) and {dropped[1]} column(s) of its "
                             f"{in_shape[1]}x{in_shape[2]} map, which the zero padding of conv {syn.name!r} would "
                             "read once folded")
            raise UnsupportedOp(e.what, where=e.where, remedy="a map the pool tiles (a size divisible by its kernel), "
                                "or the conv without padding")
        w, stride, pad, dil = fold_pool_then_conv(w, a["stride"], a["padding"], a["dilation"],
                                                  _pool_attrs(pool)["kernel"])
        w = w * _pool_gain(pool)
        a.update(stride=stride, padding=pad, dilation=dil)
        # unpadded, the composite's windows end within the tiled part (its output is the conv's): checked
        if (window(in_shape[1], w.shape[2], stride[0], pad[0], 1),
                window(in_shape[2], w.shape[3], stride[1], pad[1], 1)) != tuple(syn.type.shape[1:]):
            raise refuse(pool, f"folding it into conv {syn.name!r} does not give that conv's output map")
        notes.append(f"{_pool_name(pool)} {pool.name!r} folded into the following conv {syn.name!r}: kernel "
                     f"{tuple(w.shape[2:])}, stride {stride}, padding {pad} (exact in real arithmetic)")
    out_shape = syn.type.shape
    if post_pool is not None:
        _check_pool(post_pool, syn.type.shape, False)
        k, s = tuple(post_pool.attrs["kernel"]), tuple(post_pool.attrs["stride"])
        w, stride, pad, dil = fold_conv_then_pool(w, a["stride"], a["padding"], a["dilation"], k, s)
        out_shape = post_pool.type.shape
        h = window(in_shape[1], w.shape[2], stride[0], pad[0], 1)
        wd = window(in_shape[2], w.shape[3], stride[1], pad[1], 1)
        if (h, wd) != tuple(out_shape[1:]):
            raise refuse(post_pool, f"folding it into conv {syn.name!r} gives a {h}x{wd} map, not "
                                    f"{out_shape[1]}x{out_shape[2]}")
        a.update(stride=stride, padding=pad, dilation=dil)
        notes.append(f"avgpool {post_pool.name!r} folded into the preceding conv {syn.name!r}: kernel "
                     f"{tuple(w.shape[2:])}, stride {stride}, padding {pad} (exact in real arithmetic)")
    return Operator("conv", w, b, src.name, in_shape, out_shape, a, False, nodes, notes)


def _dense_operator(syn: Node, chain: list, src: Node, w, b, nodes: list) -> Operator:
    in_shape = src.type.shape
    notes = []
    ops = ["avgpool2d" if is_sum_pool(c) else c.op for c in chain]
    if ops == []:
        if len(in_shape) != 1:
            raise refuse(syn, f"linear on a {in_shape} tensor (not a vector) is not mapped")
        return Operator("dense", w, b, src.name, in_shape, syn.type.shape, {}, False, nodes, notes)
    flat = chain[-1]
    if flat.op != "flatten" or ops not in (["flatten"], ["avgpool2d", "flatten"]):
        raise refuse(chain[-1], "only flatten, or avgpool2d then flatten, may sit between spikes and a linear")
    if flat.type.shape != (int(np.prod(flat.type.shape)),) or len(in_shape) != 3 and ops[0] == "avgpool2d":
        raise refuse(flat, "flatten must produce a vector")
    if ops[0] == "avgpool2d":
        pool = chain[0]
        _check_pool(pool, in_shape, True)
        kh, kw = _pool_attrs(pool)["kernel"]
        c, hp, wp = pool.type.shape
        w4 = w.reshape(w.shape[0], c, hp, wp) * (_pool_gain(pool) / (kh * kw))
        w4 = np.repeat(np.repeat(w4, kh, axis=2), kw, axis=3)
        rows, cols = _dropped(pool, in_shape)   # what the pool leaves out gets no weight
        w = np.pad(w4, ((0, 0), (0, 0), (0, rows), (0, cols))).reshape(w.shape[0], -1)
        notes.append(f"{_pool_name(pool)} {pool.name!r} folded into linear {syn.name!r} (weights spread over each "
                     f"{kh}x{kw} window; exact in real arithmetic)")
    return Operator("dense", w, b, src.name, in_shape, syn.type.shape, {}, len(in_shape) > 1, nodes, notes)


def _pool_name(pool: Node) -> str:
    return "avgpool" if pool.op == "avgpool2d" else "sum pool (all-ones depthwise conv2d)"


# -- max pooling as an OR layer -------------------------------------------------------------
def check_or_shape(n: Node, in_shape) -> None:
    """A ceil_mode max pool maps only when ceil_mode does not change its output shape."""
    a = pool_attrs(n)
    if a.get("ceil_mode") and tuple(n.type.shape[1:]) != tuple(
            window(in_shape[i + 1], a["kernel"][i], a["stride"][i], a["padding"][i], a["dilation"][i])
            for i in range(2)):
        raise refuse(n, "ceil_mode max pooling is not mapped")


def or_operator(n: Node, src: str, in_shape) -> Operator:
    """The all-ones depthwise window of max pool ``n`` over the binary spikes ``src``."""
    a = pool_attrs(n)
    c = n.type.shape[0]
    w = np.ones((c, 1) + tuple(a["kernel"]))
    return Operator("conv", w, np.zeros(c), src, in_shape, n.type.shape,
                    dict(stride=tuple(a["stride"]), padding=tuple(a["padding"]), dilation=tuple(a["dilation"]),
                         groups=c), False, [n], [])
