"""Reassociate softmax-free attention (passes.md, "Softmax-free attention reassociation").

``(Q K^T) V == Q (K^T V)`` exactly when nothing sits between the products (integer arithmetic on spike
tensors). Per head the pairwise order costs ``N_q N_k (d + d_v)`` multiply-accumulates and the linear
order ``(N_q + N_k) d d_v``: the pass picks the cheaper (linear when ``d < N`` for self-attention). It refuses under a causal mask
(``K^T V`` would mix future tokens) and when a softmax or any other op sits between the products.
``K^T V`` is a dynamic weight: either order stays a host computation on static-synapse targets.
"""
import numpy as np

from spikec.ir.graph import Graph, Node
from spikec.core.passes import Pass, PassResult, Skip
from spikec.core.rewrite import retype, sole_consumer, splice

BETWEEN = {"causal_mask": "a causal mask sits between the products: K^T V would mix future tokens",
           "softmax": "a softmax sits between the products: (Q K^T) V is not Q (K^T V) under it"}


def costs(nq: int, nk: int, d: int, dv: int, heads: int) -> dict:
    """Multiply-accumulates per step and sample of both orders (``nq`` queries, ``nk`` keys)."""
    return {"pairwise": heads * nq * nk * (d + dv), "linear": heads * (nq + nk) * d * dv}


def _attention(graph: Graph, outer: Node):
    """(q, kt, v, order) when ``outer`` is the second product of an attention, else None."""
    a, b = (graph.node(i) for i in outer.inputs)
    if a.op == "matmul" and sole_consumer(graph, a.name) is not None:
        return a.inputs[0], a.inputs[1], b.name, "pairwise", a
    if b.op == "matmul" and sole_consumer(graph, b.name) is not None:
        return a.name, b.inputs[0], b.inputs[1], "linear", b
    return None


def _refusal(graph: Graph, outer: Node):
    """A Skip when an op sits between this product and an earlier one (a mask, a softmax, a scale...)."""
    for i in outer.inputs:
        node = graph.node(i)
        if node.op != "matmul" and node.inputs and graph.node(node.inputs[0]).op == "matmul":
            why = BETWEEN.get(node.op, f"a {node.op} sits between the products: only adjacent products reassociate")
            return Skip(outer.name, f"{why} (node {node.name!r})",
                        "keep the pairwise order; drop --passes reassociate_attention")
    return None


def reassociate_attention(graph: Graph) -> PassResult:
    changed, skipped, notes, decisions = [], [], [], []
    for outer in [n for n in graph.nodes if n.op == "matmul"]:
        if outer.name not in graph:
            continue
        found = _attention(graph, outer)
        if found is None:
            refusal = _refusal(graph, outer)
            skipped += [refusal] if refusal else []
            continue
        q, kt, v, order, inner = found
        (*lead, n, d), dv = graph.node(q).type.shape, graph.node(v).type.shape[-1]
        nk = graph.node(kt).type.shape[-1]
        cost = costs(n, nk, d, dv, int(np.prod(lead)) if lead else 1)
        best = "linear" if cost["linear"] < cost["pairwise"] else "pairwise"
        decisions.append({"node": outer.name, "tokens": n, "keys": nk, "head_dim": d, "source_order": order,
                          "chosen_order": best, "macs": cost})
        notes.append(f"{outer.name}: {order} order -> {best} (MACs per step: pairwise {cost['pairwise']:,}, "
                     f"linear {cost['linear']:,}; N={n}, d={d})")
        if best == order:
            continue
        if best == "linear":
            new_inner = inner.with_(name=f"{outer.name}.kv", inputs=(kt, v))
            new_outer = outer.with_(inputs=(q, new_inner.name))
        else:
            new_inner = inner.with_(name=f"{outer.name}.qk", inputs=(q, kt))
            new_outer = outer.with_(inputs=(new_inner.name, v))
        graph = splice(graph, {outer.name: [new_inner, new_outer]}, {inner.name})
        changed += [inner.name, outer.name]
    if decisions:
        graph = Graph(graph.nodes, graph.outputs, {**graph.meta, "attention": decisions})
    return PassResult(retype(graph) if changed else graph, tuple(changed), tuple(skipped), tuple(notes))


REASSOCIATE_ATTENTION = Pass("reassociate_attention", reassociate_attention,
                             requires="two chained matmuls with nothing between them (no mask, no softmax)",
                             ensures="each attention product runs in its cheaper order")
