"""The nearest exportable variant of a graph the NIR export refuses, measured on the user's inputs.

A refusal names the node and why; this adds what the user can export instead and what it costs on their own inputs:
each refused node that has a neighbour NIR exports (``NEAREST``) is replaced by it, the variant graph is exported
(to be sure it is exportable) and run by spikec's IR interpreter, and its graph outputs are compared with the
deployed graph's (spikes: the share that differ; reals: the largest relative difference). E.g. ``nearest exportable
variant: the membrane of a subtract-reset neuron: 3.1% of output spikes differ (12 of 388) on these inputs``.
"""
import numpy as np

from spikec.ir.errors import InternalError, SpikecError, UnsupportedOp
from spikec.targets.nir.reasons import LIF, LIF_SINABS, LIF_SNNTORCH, SYNAPTIC_SNNTORCH


def _lif_membrane(node):
    """A zero-reset neuron read as its membrane: the subtract-reset one, whose membrane NIR carries (LI + Threshold)."""
    if node.attrs.get("reset") == "zero" and node.attrs.get("output", "spikes") == "membrane":
        return node.with_(attrs={**node.attrs, "reset": "subtract"}), "reset='subtract' (its membrane is exported)"
    return None


def _maxpool(node):
    a = dict(node.attrs)
    if tuple(a.get("dilation", (1, 1))) != (1, 1):
        return None
    attrs = {k: a[k] for k in ("kernel", "stride", "padding")} | {"ceil_mode": a.get("ceil_mode", False),
                                                                   "count_include_pad": True}
    return node.with_(op="avgpool2d", attrs=attrs), "average pooling (NIR AvgPool2d) instead of max pooling"


def _snntorch_leaky(node):
    if node.attrs.get("reset") == "subtract" and node.attrs.get("reset_delay"):
        return None
    return node.with_(attrs={**node.attrs, "reset": "subtract", "reset_delay": True}), \
        "snnTorch's default reset (reset_mechanism='subtract', reset_delay=True)"


def _synaptic(node):
    a = node.attrs
    if a.get("recurrent", "none") != "none" or a.get("read", "spikes") != "spikes":
        return None
    if a["reset"] == "subtract" and a["reset_delay"]:
        return None
    return node.with_(attrs={**a, "reset": "subtract", "reset_delay": True}), \
        "snnTorch's default reset (reset_mechanism='subtract', reset_delay=True)"


def _sinabs(node):
    """Sinabs's MaxSpike(n) / SingleSpike neuron: the MultiSpike one, which sinabs.from_nir builds from NIR LIF/IF."""
    a = node.attrs
    if a.get("spike") not in ("max", "single"):
        return None
    attrs = {k: v for k, v in a.items() if k != "max_spikes"} | {"spike": "multi"}
    return node.with_(attrs=attrs), "Sinabs's default MultiSpike (what sinabs.from_nir builds) instead of " + (
        f"MaxSpike({a.get('max_spikes')})" if a["spike"] == "max" else "SingleSpike")


NEAREST = {LIF: _lif_membrane, "maxpool2d": _maxpool, LIF_SNNTORCH: _snntorch_leaky, SYNAPTIC_SNNTORCH: _synaptic,
           LIF_SINABS: _sinabs}


def _node_of(graph, err: UnsupportedOp):
    for n in graph.nodes:
        if err.where.startswith(f"node {n.name!r} ("):
            return n
    return None


def variant_of(graph, export, limit: int = 8):
    """``(variant graph, [changes])``: each refused node replaced by its nearest exportable form until ``export``
    accepts the graph; None when some refused node has none."""
    changes = []
    for _ in range(limit):
        try:
            export(graph)
            return graph, changes
        except UnsupportedOp as e:
            node = _node_of(graph, e)
            made = NEAREST.get(node.op, lambda n: None)(node) if node is not None else None
            if made is None:
                return None
            new, what = made
            graph = graph.with_nodes([new if n.name == node.name else n for n in graph.nodes])
            changes.append(f"{node.name}: {what}")
    return None


def measure(graph, variant, inputs, reference) -> str:
    """What ``variant`` changes in the graph outputs on ``inputs``, in words."""
    from spikec.core.interpreter import run
    trace = run(variant, inputs, record="outputs")
    parts = []
    for o in graph.outputs:
        want, got = np.asarray(reference.values[o]), np.asarray(trace.values[o])
        if graph.node(o).type.is_spike:
            differ = int(np.sum(want != got))
            parts.append(f"{100 * differ / max(want.size, 1):.1f}% of output {o!r}'s spikes differ ({differ} of "
                         f"{want.size})")
        else:
            scale = max(float(np.abs(want).max(initial=0.0)), np.finfo(float).tiny)
            parts.append(f"output {o!r} differs by up to {float(np.abs(want - got).max(initial=0.0)) / scale:.3g} "
                         "of its largest value")
    return "; ".join(parts) + " on these inputs"


def with_nearest(err: UnsupportedOp, graph, inputs, reference, export) -> UnsupportedOp:
    """``err`` with the nearest exportable variant and its measured disagreement appended (``err`` when none)."""
    try:
        found = variant_of(graph, export)
        if found is None:
            return err
        variant, changes = found
        said = measure(graph, variant, inputs, reference)
    except InternalError:   # a compiler bug: reported as one, not hidden behind the refusal
        raise
    except SpikecError:   # the variant does not run: say nothing rather than something unmeasured
        return err
    return UnsupportedOp(f"{err.what}; nearest exportable variant ({', '.join(changes)}): {said}", where=err.where,
                         remedy=err.remedy)
