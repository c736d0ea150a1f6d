"""Sinabs's multi-spike neurons (``lif_sinabs`` with ``MaxSpike(n)`` / ``MultiSpike``) on Loihi 2.

Sinabs's ``MaxSpike(n)`` with its subtract reset, no synaptic current and no ``min_v_mem`` is, per step
(``spikec/frontend/sinabs.py``)::

    v = alpha_mem v + u                        (u = (1 - alpha_mem) x with norm_input, else x)
    s = min([v > 0] trunc(v / theta), n)       float32 counts
    v = v - s theta                            a float32 product (Sinabs's float32 spikes times the 0-dim theta)

which is spikec's integer-firing neuron ``intfire`` (``beta = alpha_mem``, ``alpha = 1 - alpha_mem`` or 1,
``threshold = theta``, ``rounding="floor"``, ``max_spikes = n``): ``clamp(floor(v / theta), 0, n)`` is the same
count (``trunc`` and ``floor`` agree for ``v > 0``, both give 0 below), and ``h = u - theta q`` the same residual
when every ``q theta`` (q = 1..n) is a float32 number, so that Sinabs's float32 product rounds nothing
(``_float32_exact``). ``lower`` rewrites such nodes to ``intfire`` (same name and input); the Lava target deploys it
as SpikecIntFire with a graded payload of ``n``'s bits, and ``products.check`` proves the rewritten graph on the
verification inputs as every Lava rewrite.

``MultiSpike`` has no bound on the count: a graded payload has a fixed width, chosen before the run. It is refused
(``refuse_unbounded``) with the largest count the verification inputs reach and the remedy ``MaxSpike(n)``
(the same function while counts stay within ``n``). Any other ``lif_sinabs`` stays as it is (refused by the mapping).
"""
import numpy as np

from spikec.ir.errors import UnsupportedOp
from spikec.ir.graph import Graph, Node, TensorType
from spikec.ops.neurons import INTFIRE
from spikec.targets.lava.ops_table import having

COUNTING = having("counts_as_intfire")   # Sinabs's lif_sinabs (ops_table.py)


def _float32_exact(theta: float, n: int) -> bool:
    """Every ``q theta`` (q = 1..n) is a float32 number (theta itself one): Sinabs's float32 product is exact."""
    q = np.arange(1, n + 1, dtype=np.float64) * theta   # exact in float64 (24 + log2 n bits < 53)
    return bool(np.float32(theta) == theta) and bool(np.all(q.astype(np.float32).astype(np.float64) == q))


def exact_intfire(n: Node) -> bool:
    """``n`` is a ``lif_sinabs`` MaxSpike(n) neuron that ``intfire`` computes exactly (module doc)."""
    a, p = n.attrs, n.params
    if n.op not in COUNTING or a.get("spike") != "max" or a.get("reset") != "subtract" or "alpha_syn" in p or "min_v_mem" in p:
        return False
    theta = float(np.asarray(p["threshold"]))
    if "subtract" in p and float(np.asarray(p["subtract"])) != theta:
        return False
    return theta > 0 and _float32_exact(theta, int(a["max_spikes"]))


def _intfire(n: Node) -> Node:
    alpha_mem = np.asarray(n.params["alpha_mem"], dtype=np.float64)
    alpha = (1 - alpha_mem) if n.attrs["norm_input"] else np.asarray(1.0)
    params = {"beta": alpha_mem, "alpha": np.asarray(alpha, dtype=np.float64),
              "threshold": np.asarray(n.params["threshold"], dtype=np.float64)}
    m = int(n.attrs["max_spikes"])
    return Node(n.name, INTFIRE, n.inputs, TensorType(n.type.shape, "integer", m),
                {"max_spikes": m, "rounding": "floor"}, params, scope=n.scope)


def lower(graph: Graph) -> tuple[Graph, list]:
    """``(graph with exact MaxSpike neurons as intfire, one rewrite record each)``."""
    records, nodes = [], []
    for n in graph.nodes:
        if exact_intfire(n):
            nodes.append(_intfire(n))
            records.append({"nodes": [n.name], "as": f"Sinabs MaxSpike({n.attrs['max_spikes']}) neuron {n.name!r} "
                                                     "as intfire (rounding floor, the same count and subtract reset): "
                                                     "SpikecIntFire with a graded payload"})
        else:
            nodes.append(n)
    if not records:
        return graph, []
    return Graph(tuple(nodes), graph.outputs, graph.meta), records


def refuse_unbounded(graph: Graph, inputs, reference) -> None:
    """Refuses the first ``MultiSpike`` neuron by name, with the largest count it reaches on ``inputs``."""
    multi = [n for n in graph.nodes if n.op in COUNTING and n.attrs.get("spike") == "multi"]
    if not multi:
        return
    values = getattr(reference, "values", {})
    if any(n.name not in values for n in multi):
        from spikec.core.interpreter import run
        values = run(graph, inputs).values
    n = multi[0]
    peak = int(np.max(np.asarray(values[n.name]), initial=0))
    raise UnsupportedOp(
        f"the Lava target cannot map node {n.name!r} ({n.op}): Sinabs's MultiSpike has no bound on its spike count and "
        f"a graded payload a fixed width; on the verification inputs its count reaches {peak} "
        f"({max(1, peak.bit_length())} bits)",
        where=f"node {n.name!r}" + (f", module {n.scope!r}" if n.scope else ""),
        remedy=f"use spike_fn=MaxSpike(n) with n >= {max(1, peak)} (the same function while counts stay within n; "
               "exact on Lava with its subtract reset and a float32-exact threshold), or SingleSpike")
