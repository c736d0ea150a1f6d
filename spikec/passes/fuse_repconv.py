"""Fuse a RepConv multi-branch unit into one 3x3 convolution (passes.md, "RepConv branch fusion").

``W* = sum_b Pad3x3(s_b W_b)``, ``b* = sum_b (beta_b - mu_b s_b)``. A match is a tree of additions
whose leaves are branches reading one common input ``x``; a branch is a chain of conv2d / avgpool2d /
batchnorm nodes, each read only by the next. The fused conv takes the name of the root addition.
"""
from dataclasses import dataclass

import numpy as np

from spikec.ir.graph import Graph
from spikec.core.passes import Pass, PassResult, Skip
from spikec.core.rewrite import sole_consumer, splice
from spikec.ops.common import bn_scale_shift

BRANCH_OPS = ("conv2d", "avgpool2d", "batchnorm")


# -- weight math (pure) -----------------------------------------------------------------
def pad_to_3x3(w: np.ndarray) -> np.ndarray:
    """A (C_out, C_in, kh, kw) kernel with kh, kw in {1, 3}, zero-padded to 3x3 about its centre."""
    ph, pw = (3 - w.shape[2]) // 2, (3 - w.shape[3]) // 2
    return np.pad(w, ((0, 0), (0, 0), (ph, ph), (pw, pw)))


def identity_kernel(c: int) -> np.ndarray:
    """``I[i, j, 1, 1] = delta_ij``."""
    k = np.zeros((c, c, 3, 3))
    k[np.arange(c), np.arange(c), 1, 1] = 1.0
    return k


def avgpool_kernel(c: int) -> np.ndarray:
    """``A[i, j, p, q] = delta_ij / 9`` (3x3 avg-pool, stride 1, pad 1, count_include_pad=True)."""
    k = np.zeros((c, c, 3, 3))
    k[np.arange(c), np.arange(c)] = 1.0 / 9.0
    return k


def compose_1x1_3x3(w1: np.ndarray, w3: np.ndarray) -> np.ndarray:
    """``W_seq[o, i] = sum_m W3x3[o, m] * W1x1[m, i]``: a 1x1 conv then a 3x3 conv, no bias between."""
    return np.einsum("omhw,mi->oihw", w3, w1[:, :, 0, 0])


bn_affine = bn_scale_shift   # BN inference as ``y = s * x + c``; the old name, still imported by tests


# -- branch analysis --------------------------------------------------------------------
@dataclass(frozen=True)
class Branch:
    x: str
    chain: tuple          # nodes from x (exclusive) to the leaf (inclusive)


class Refusal(Exception):
    def __init__(self, reason, remedy=""):
        super().__init__(reason)
        self.reason, self.remedy = reason, remedy


def _branch(graph: Graph, leaf: str) -> Branch:
    chain, name = [], leaf
    while True:
        node = graph.node(name)
        if node.op not in BRANCH_OPS or sole_consumer(graph, name) is None:  # every link read only by the next
            return Branch(name, tuple(reversed(chain)))
        chain.append(node)
        name = node.inputs[0]


def _centred(node) -> bool:
    w = node.params["weight"]
    ks, pads = w.shape[2:], node.attrs["padding"]
    return all(k in (1, 3) and p == (k - 1) // 2 for k, p in zip(ks, pads))


def branch_kernel(branch: Branch, c_in: int):
    """(W 3x3, b, stride) of one branch, or Refusal naming the rule it breaks."""
    w, b, stride, kind = None, None, (1, 1), None   # kind: None (identity so far), "1x1", "conv", "pool", "bn"
    for node in branch.chain:
        if node.op == "conv2d":
            wt, a = node.params["weight"], node.attrs
            if a["groups"] != 1 or a["dilation"] != (1, 1) or not _centred(node):
                raise Refusal(f"conv {node.name!r} is grouped, dilated or not centred (padding (k-1)/2)",
                              "only centred 1x1/1x3/3x1/3x3 convs fuse")
            if kind is None:
                w, b, stride = pad_to_3x3(wt), node.params.get("bias"), a["stride"]
                kind = "1x1" if wt.shape[2:] == (1, 1) and a["stride"] == (1, 1) else "conv"
            elif kind == "1x1" and b is None and wt.shape[2:] == (3, 3):
                w, b, stride, kind = compose_1x1_3x3(w[:, :, 1:2, 1:2], wt), node.params.get("bias"), a["stride"], "conv"
            else:
                raise Refusal(f"a bias or BN sits between the 1x1 and the 3x3 of sequential branch ending in "
                              f"{node.name!r}: exactness breaks at the zero-padded border",
                              "remove the bias/BN between the two convolutions")
        elif node.op == "avgpool2d":
            a = node.attrs
            if kind is not None or a["kernel"] != (3, 3) or a["stride"] != (1, 1) or a["padding"] != (1, 1) \
                    or a["ceil_mode"]:
                raise Refusal(f"avg-pool {node.name!r} is not a 3x3, stride 1, pad 1 pool on the unit input")
            if not a["count_include_pad"]:
                raise Refusal(f"avg-pool {node.name!r} has count_include_pad=False: not a convolution at the borders",
                              "use count_include_pad=True")
            w, b, kind = avgpool_kernel(c_in), None, "pool"
        else:  # batchnorm
            s, c = bn_scale_shift(*(node.params[k] for k in ("gamma", "beta", "mean", "var")), node.attrs["eps"])
            w = identity_kernel(c_in) if w is None else w
            w = w * s.reshape(-1, 1, 1, 1)
            b = c if b is None else b * s + c
            kind = "bn" if kind in (None, "1x1") else kind
    if w is None:
        raise Refusal("empty branch")
    return w, (np.zeros(w.shape[0]) if b is None else b), tuple(stride)


# -- the pass ---------------------------------------------------------------------------
def _tree(graph: Graph, root) -> tuple[list, list]:
    """(interior add nodes, leaf names) of the addition tree rooted at ``root``."""
    interior, leaves = [root], []
    for i in root.inputs:
        node = graph.node(i)
        if node.op == "add" and sole_consumer(graph, i) is not None:
            sub_interior, sub_leaves = _tree(graph, node)
            interior += sub_interior
            leaves += sub_leaves
        else:
            leaves.append(i)
    return interior, leaves


def _try(graph: Graph, root, skipped):
    """A (removed names, fused node) for the largest fusable tree under ``root``, or None."""
    interior, leaves = _tree(graph, root)
    branches = [_branch(graph, leaf) for leaf in leaves]
    xs = {b.x for b in branches}
    if len(xs) == 1 and len(branches) >= 2 and all(b.chain for b in branches) \
            and any(n.op == "conv2d" for b in branches for n in b.chain):
        x = xs.pop()
        try:
            kernels = [branch_kernel(b, graph.node(x).type.shape[0]) for b in branches]
            if len({k[2] for k in kernels}) != 1:
                raise Refusal("branches use different strides")
        except Refusal as r:
            skipped.append(Skip(root.name, r.reason, r.remedy))
            return None
        w, b = sum(k[0] for k in kernels), sum(k[1] for k in kernels)
        attrs = {"stride": kernels[0][2], "padding": (1, 1), "dilation": (1, 1), "groups": 1}
        fused = root.with_(op="conv2d", inputs=(x,), attrs=attrs, params={"weight": w, "bias": b})
        removed = {n.name for n in interior[1:]} | {n.name for br in branches for n in br.chain}
        return removed, fused
    for i in root.inputs:  # not a unit as a whole: try the sub-trees
        node = graph.node(i)
        if node.op == "add" and sole_consumer(graph, i) is not None:
            found = _try(graph, node, skipped)
            if found:
                return found
    return None


def fuse_repconv(graph: Graph) -> PassResult:
    skipped, changed = [], []
    while True:
        roots = [n for n in graph.nodes if n.op == "add"
                 and not (sole_consumer(graph, n.name) is not None and sole_consumer(graph, n.name).op == "add")]
        for root in roots:
            found = _try(graph, root, skipped)
            if found:
                removed, fused = found
                graph = splice(graph, {fused.name: [fused]}, removed)
                changed += sorted(removed) + [fused.name]
                break
        else:
            unique = {(s.node, s.reason): s for s in skipped}
            return PassResult(graph, tuple(changed), tuple(unique.values()))


FUSE_REPCONV = Pass("fuse_repconv", fuse_repconv,
                    requires="an addition tree of >= 2 branches (conv/avgpool/BN chains, at least one conv) on one input",
                    ensures="each such unit is one 3x3 conv with bias, named after its root addition")
