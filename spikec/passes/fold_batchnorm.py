"""Fold inference BatchNorm into the preceding Conv/Linear (passes.md, "BN folding").

``s = gamma / sqrt(var + eps)`` per output channel; ``W' = W * s``, ``b' = (b - mu) * s + beta``.
The fused node takes the BN's name: it now computes the value the BN computed.
"""
import numpy as np

from spikec.compiler.ir import Graph
from spikec.compiler.passes import Pass, PassResult, Skip


def fold_bn_weights(w, b, gamma, beta, mean, var, eps):
    """Pure weight math: the (W', b') of ``BN(conv(x; W, b))`` as one conv/linear. ``w`` is (C_out, ...)."""
    s = gamma / np.sqrt(var + eps)
    b = np.zeros_like(mean) if b is None else b
    return w * s.reshape(-1, *([1] * (w.ndim - 1))), (b - mean) * s + beta


def _foldable(graph: Graph, bn) -> tuple[object, str]:
    """The producer to fold into, or None and the reason not to."""
    src = graph.node(bn.inputs[0])
    if src.op not in ("conv2d", "linear"):
        return None, ""
    if len(graph.consumers(src.name)) != 1 or src.name in graph.outputs:
        return None, f"{src.name!r} also feeds other nodes, so its unnormalized output is still needed"
    if src.op == "linear" and len(src.type.shape) != 1:
        return None, f"{src.name!r} is a token-wise linear; BN channel is not its output feature"
    return src, ""


def fold_batchnorm(graph: Graph) -> PassResult:
    nodes = {n.name: n for n in graph.nodes}
    changed, skipped, drop = [], [], set()
    for bn in graph.nodes:
        if bn.op != "batchnorm":
            continue
        src, why = _foldable(graph, bn)
        if src is None:
            if why:
                skipped.append(Skip(bn.name, why, "give the BN its own producer"))
            continue
        p = bn.params
        w, b = fold_bn_weights(src.params["weight"], src.params.get("bias"), p["gamma"], p["beta"], p["mean"],
                               p["var"], bn.attrs["eps"])
        nodes[bn.name] = src.with_(name=bn.name, params={"weight": w, "bias": b}, type=bn.type)
        drop.add(src.name)
        changed += [src.name, bn.name]
    new = [nodes[n.name] for n in graph.nodes if n.name not in drop]
    return PassResult(graph.with_nodes(new), tuple(changed), tuple(skipped))


FOLD_BATCHNORM = Pass("fold_batchnorm", fold_batchnorm,
                      requires="a batchnorm whose input is a conv2d/linear read by nothing else",
                      ensures="no batchnorm directly after a conv2d/linear; the fused node carries the BN's name")
