"""Read-outs over time of spikes on the host: a graph output that is a running sum, mean or max over the steps of
a spiking node (``x_seq.mean(0)``, SpikingJelly's firing rate; ``.sum(0)``; ``.max(0)``).

The chip runs the network up to the spiking node ``X``, whose spikes the Lava network records every step as a
graph output; the read-out (op ``time_sum`` / ``time_max``, its output the value at the last step) is computed on
the host from those recorded spikes, by the op's own kernel in float64, as the reference interpreter computes it.
So Lava is checked bit for bit on ``X``, and the read-out, a function of ``X`` alone, is then exact by
construction. ``split`` rewrites the graph the target deploys (the read-out's output becomes ``X``), ``apply``
computes the read-outs from a run's values (the integer reference's, in ``spikec.load``), ``HOST_KEY`` is where
``network.json`` lists them.
"""
import numpy as np
import torch

from spikec.ir.graph import Graph, thaw
from spikec.ops import OPS
from spikec.targets.lava.host import _FLOAT, _Node   # the host partitions' float64 kernels, as they call them

OPS_OVER_TIME = ("time_sum", "time_max")
HOST_KEY = "host_readouts"   # network.json: [{output, op, attrs, of}] in the order of the deployed outputs


def split(graph: Graph) -> tuple[Graph, list[dict]]:
    """``graph`` with each output read out over time from a spiking node's spikes (read by nothing else, that
    node no output itself) replaced by that node, and the read-outs taken out (``[]``: ``graph`` as it is)."""
    readouts, outputs = [], list(graph.outputs)
    for i, name in enumerate(graph.outputs):
        n = graph.node(name)
        if n.op not in OPS_OVER_TIME or n.attrs.get("read") != "last" or graph.consumers(name):
            continue
        src = graph.node(n.inputs[0])
        if not src.type.is_spike or src.name in outputs or src.op == "input":
            continue
        readouts.append({"output": name, "op": n.op, "attrs": thaw(n.attrs), "of": src.name})
        outputs[i] = src.name
    if not readouts:
        return graph, []
    removed = {r["output"] for r in readouts}
    return graph.with_nodes([n for n in graph.nodes if n.name not in removed], outputs), readouts


def apply(readouts: list[dict], values: dict) -> dict:
    """``{read-out output: its [T, B, ...] value}`` from ``values`` (a run's, holding each read-out's spiking
    node): the op's kernel in float64 on those spikes."""
    out = {}
    for r in readouts:
        node = _Node(r["op"], r["attrs"])
        x = torch.from_numpy(np.ascontiguousarray(np.asarray(values[r["of"]], dtype=np.float64)))
        out[r["output"]] = OPS[r["op"]].kernel(_FLOAT, node, {}, x).numpy()
    return out


def add_to_report(report_: dict, net: dict, readouts: list[dict]) -> None:
    """The target's report and ``network.json`` (``HOST_KEY``) say which outputs are read out on the host."""
    if readouts:
        net[HOST_KEY] = readouts
        report_["readouts_over_time"] = report(readouts)
        report_["summary"] += "\n             " + line(readouts)


def report(readouts: list[dict]) -> dict:
    return {r["output"]: f"{r['op']}{' (mean)' if r['attrs'].get('mean') else ''} of {r['of']!r}'s spikes over the "
                         "steps, computed on the host from the spikes Lava records (the reference's own kernel on "
                         f"them: exact when {r['of']!r} is)" for r in readouts}


def line(readouts: list[dict]) -> str:
    return "read-outs over time on the host: " + ", ".join(
        f"{r['output']} ({r['op']}{', mean' if r['attrs'].get('mean') else ''} of {r['of']}'s recorded spikes)"
        for r in readouts)
