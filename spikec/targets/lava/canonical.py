"""Two rewrites that keep ordinary PyTorch off the Lava target's host partitions. Each is exact in real arithmetic
and is proven with the products rewrite (``products.placed``: the rewritten float graph against the given one on
the verification inputs):

- ``x.view(B, -1)`` / ``x.reshape(B, N)`` before a linear: a reshape of each sample's values to one vector is a
  flatten (row-major, the same values in the same order), which a Dense reads from a (C, H, W) population directly;
- ``10 * conv(x)`` / ``linear(x) * a + b``: a constant ``scale`` (``y = a x + b``) of a synapse's output that nothing
  else reads folds into the synapse: weight ``a W``, bias ``a b_syn + b`` (one float64 rounding per weight).
"""
import numpy as np

from spikec.ir.graph import Graph, Node

SYNAPSES = ("linear", "conv2d")


def _readers(graph: Graph) -> dict:
    readers = {}
    for n in graph.nodes:
        for i in n.inputs:
            readers.setdefault(i, []).append(n.name)
    return readers


def _folded(syn: Node, scale: Node) -> Node:
    a, b = float(scale.attrs["a"]), float(scale.attrs["b"])
    w = np.asarray(syn.params["weight"], dtype=np.float64)
    bias = np.asarray(syn.params.get("bias", np.zeros(w.shape[0])), dtype=np.float64)
    params = dict(syn.params, weight=a * w)
    if "bias" in syn.params or b != 0:
        params["bias"] = a * np.broadcast_to(bias, (w.shape[0],)) + b
    return syn.with_(params=params, type=scale.type)


def _vector_reshape(graph: Graph, readers: dict, n: Node) -> bool:
    """A reshape of each sample to one vector, read by linears only."""
    return n.op == "reshape" and len(n.attrs["shape"]) == 1 and len(graph.node(n.inputs[0]).type.shape) > 1 \
        and bool(readers.get(n.name)) and all(graph.node(r).op == "linear" for r in readers[n.name])


def rewrite(graph: Graph) -> tuple[Graph, list]:
    """``(graph, one record per rewrite)``; the graph itself when nothing applies."""
    readers, outputs = _readers(graph), set(graph.outputs)
    # folded: synapse name -> (its position in nodes, the node whose readers read it: itself, or its last scale)
    nodes, rename, records, folded = [], {}, [], {}
    for n in graph.nodes:
        n = n.with_(inputs=tuple(rename.get(i, i) for i in n.inputs)) if any(i in rename for i in n.inputs) else n
        if _vector_reshape(graph, readers, n):
            nodes.append(Node(n.name, "flatten", n.inputs, n.type, {"start": 0, "end": -1}, {}, scope=n.scope))
            records.append({"nodes": [n.name], "as": f"reshape {n.name!r} to one vector per sample is a flatten"})
            continue
        at, read = folded.get(n.inputs[0], (None, None)) if n.op == "scale" else (None, None)
        if at is not None and readers.get(read) == [n.name] and read not in outputs:
            syn = nodes[at]
            nodes[at] = _folded(syn, n)
            folded[syn.name] = (at, n.name)   # a chain of scales folds too: the synapse now stands for this one
            rename[n.name] = syn.name
            records.append({"nodes": [syn.name, n.name],
                            "as": f"scale {n.name!r} (a = {n.attrs['a']:g}, b = {n.attrs['b']:g}) folded into "
                                  f"{syn.op} {syn.name!r}"})
            continue
        if n.op in SYNAPSES:
            folded[n.name] = (len(nodes), n.name)
        nodes.append(n)
    if not records:
        return graph, []
    return Graph(tuple(nodes), tuple(rename.get(o, o) for o in graph.outputs), graph.meta), records
