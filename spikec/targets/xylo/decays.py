"""What rounding a framework neuron's decay to Xylo's bit shift costs, measured on the user's inputs.

A decay ``beta`` (and a Synaptic ``alpha``) is exact on Xylo iff ``beta == 1 - 2**-dash`` in float64
(``quantize.py``: ``beta_exact_as_shift``, an equality test, not a tolerance). Otherwise the nearest shift is
taken, and this module isolates what that alone changes: the source graph is run again by spikec's interpreter
with each rounded decay replaced by the chip's ``1 - 2**-dash`` (all else float, as the source), and its spikes
are compared with the source's, entry by entry. Labelled approximate; the chip differs from the source for
further reasons too (``simulate.APPROXIMATIONS``).
"""
import numpy as np

from spikec.core.interpreter import run
from spikec.ir.graph import Graph


def _chip_decay(dash) -> np.ndarray:
    return 1 - 2.0 ** -np.asarray(dash, np.float64)


def effect(graph: Graph, inputs, reference, mapped, qreport: dict) -> dict:
    pops = {"hidden": mapped.hidden, "output": mapped.output}
    rounded, swaps = {}, {}
    for role, p in pops.items():
        r = qreport[role]
        changes = {}
        if not r["beta_exact_as_shift"]:
            changes["beta"] = _chip_decay(r["dash_mem"])
        if p.alpha is not None and not r["alpha_exact_as_shift"]:
            changes["alpha"] = _chip_decay(r["dash_syn"])
        if changes:
            node = graph.node(p.node)
            shaped = {k: np.asarray(v[0]) if np.ndim(node.params[k]) == 0 and np.all(v == v[0]) else v.copy()
                      for k, v in changes.items()}
            swaps[p.node] = shaped
            rounded[p.node] = {k: {"source": sorted(set(np.ravel(node.params[k]).tolist())),
                                   "chip": sorted(set(v.tolist()))} for k, v in changes.items()}
    if not swaps:
        return {"exact": True, "note": "every decay is 1 - 2**-k exactly (float64 equality): no decay is rounded"}
    nodes = tuple(n.with_(params={**n.params, **swaps[n.name]}) if n.name in swaps else n for n in graph.nodes)
    x = inputs if isinstance(inputs, dict) else {graph.inputs[0].name: inputs}
    values = run(Graph(nodes, graph.outputs, graph.meta), {k: np.asarray(v, np.float64) for k, v in x.items()},
                 record="all").values
    agree = {role: float(np.mean((values[p.node] != 0) == (reference.values[p.node] != 0)))
             for role, p in pops.items()}
    return {"exact": False, "approximate": True, "rounded": rounded,
            "output_spike_agreement": agree["output"], "hidden_spike_agreement": agree["hidden"],
            "measured": "the source run again with the chip's decays (everything else float, as the source) "
                        "against the source, (neuron, step) spike entries on the verification inputs"}
