"""Per-neuron firing rates and NeuroBench's workload metrics, computed from a graph and its interpreter trace.

NeuroBench (``neurobench.metrics.workload``) names the figures a neuromorphic paper is compared on:
``SynapticOperations`` -> ``{"Effective_MACs", "Effective_ACs", "Dense"}`` and ``ActivationSparsity`` (and
``ActivationSparsityByLayer``). ``neurobench_metrics`` gives them under those names, per sample, beside
spikec's own figures (``spikec.core.cost``), and says where the two count differently:

- **Which operations.** NeuroBench hooks ``nn.Linear`` / ``nn.Conv*`` (and RNN cells); it binarizes the
  layer input (nonzero -> 1) and the weights (nonzero -> 1), zeroes the bias, and sums the layer's output:
  effective operations are (nonzero input, nonzero weight) pairs. spikec's ``ac_ops`` count every synapse
  a nonzero input fans out to (an all-ones kernel): a weight that is exactly zero (pruned) still counts.
  Here ``linear`` and ``conv2d`` are counted NeuroBench's way (binarized weights); spikec's other synaptic
  ops (``windowsum``, TTFS ops) have no NeuroBench layer and are counted through their ``OpDef.cost``
  events hook (all-ones kernel), listed in ``notes``.
- **AC or MAC.** NeuroBench decides per layer from the data: the layer is spiking (AC) when every input
  value is in {-1, 0, 1}, else MAC. spikec decides from the IR type (AC when the operand is binary; integer
  spikes and real values are MAC). The per-layer rows give both (``kind`` and ``spikec_kind``); they differ
  for a real-typed operand that happens to hold only 0/1, or integer spikes that never exceed 1.
- **MACs.** NeuroBench's ``Effective_MACs`` count only nonzero operands; spikec's ``mac_ops`` count every
  dense operation (a MAC unit does not skip zeros).
- **Dense.** NeuroBench runs an all-ones input through an all-ones layer (zero weights included, bias
  excluded): a zero-padded conv's taps that fall on the padding are not counted. spikec's ``dense_ops``
  count ``output size x kernel size`` (padding taps included). ``Dense`` here is NeuroBench's.
- **Per sample.** Both are per sample over all time steps (NeuroBench sums its hooks over a sample's steps
  and divides by the samples): averaged over the verification batch, probe samples included. Unrolled
  sub-steps count like steps.
- **ActivationSparsity.** NeuroBench: zero activations / all activations of its activation layers (neuron
  modules, ReLU, ...) over all layers, steps and samples, pooled. Here the activation layers are spikec's
  neuron nodes (``neuron_nodes``: stateful ops with a spike-valued output, a delay excepted: the nodes whose
  rates the report's ``cost.firing_rates`` gives); a neuron's membrane read-out and real-valued
  activations are not counted. For binary spikes it is ``1 - firing rate`` pooled over neurons.

``neurobench_from_report`` gives the same names from a ``report.json`` alone: an approximation (spikec's
counting, with the differences above), marked ``"exact": False``.
"""
import numpy as np
import torch

from spikec.core.cost import cost_report
from spikec.core.interpreter import Trace
from spikec.ir.graph import Graph, Node
from spikec.core.report import synaptic_kind
from spikec.ops import OPS
from spikec.ops.synapses import tap_sums

NEUROBENCH_LAYERS = ("linear", "conv2d")   # spikec ops NeuroBench's SynapticOperations hooks (nn.Linear, nn.Conv2d)
PER_SAMPLE = "one sample over all T steps (sub-steps included), averaged over the verification batch"


def neuron_nodes(graph: Graph) -> list[Node]:
    """The nodes that fire: stateful ops with a spike-valued output, a delay excepted (it moves spikes)."""
    return [n for n in graph.nodes if OPS[n.op].stateful and n.type.is_spike and n.op != "delay"]


def firing_rates(graph: Graph, trace: Trace) -> dict[str, dict]:
    """Per neuron node recorded in ``trace``: spikes per neuron per physical step (``rate``; for binary spikes
    the mean of the trace, as the report's ``cost.firing_rates``), the share of nonzero values
    (``active``; 1 - NeuroBench's per-layer sparsity), the neuron count, value kind and sub-steps."""
    rates = {}
    for n in neuron_nodes(graph):
        v = trace.values.get(n.name)
        if v is None or v.size == 0:
            continue
        steps = v.shape[0] / n.type.substeps   # the time axis holds T * substeps virtual sub-steps
        per = steps * v.shape[1] * n.type.size
        rates[n.name] = {"rate": float(v.sum() / per), "active": float(np.count_nonzero(v) / v.size),
                         "neurons": n.type.size, "kind": n.type.kind, "substeps": n.type.substeps}
    return rates


def _flat(x: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x, dtype=np.float64)).flatten(0, 1)


def _binarized_sum(node: Node, x: torch.Tensor, weight: torch.Tensor) -> int:
    """NeuroBench's single_layer_MACs: the layer with 0/1 weights and no bias applied to 0/1 inputs, summed.

    A conv's summed output is read from its tap sums (``spikec.ops.synapses.tap_sums``): per group, the weights
    summed over the group's output channels times what each tap reads; exact integers, as the conv's sum is."""
    if node.op == "linear":
        return int((x.reshape(-1, x.shape[-1]) @ weight.T).sum())
    a, g = node.attrs, node.attrs["groups"]
    taps = tap_sums(x, weight.shape[2:], a["stride"], a["padding"], a["dilation"])
    per_group = weight.reshape(g, weight.shape[0] // g, *weight.shape[1:]).sum(1).reshape(taps.shape)
    return int((per_group * taps).sum())


def _layer_ops(graph: Graph, node: Node, x: np.ndarray) -> dict:
    """One synaptic layer's NeuroBench counts over the whole trace (all samples): effective and dense."""
    kind = "AC" if np.all((x == 0) | (x == 1) | (x == -1)) else "MAC"
    active = _flat(x != 0)
    if node.op in NEUROBENCH_LAYERS:
        w = torch.as_tensor(np.asarray(node.params["weight"]) != 0, dtype=torch.float64)
        effective = _binarized_sum(node, active, w)
        dense = _binarized_sum(node, torch.ones_like(active[:1]), torch.ones_like(w)) * active.shape[0]
        how = "neurobench"
    else:
        cost = OPS[node.op].cost
        effective = cost.events(node, active)
        dense = cost.events(node, torch.ones_like(active[:1])) * active.shape[0]
        how = "spikec cost hook (all-ones kernel): no NeuroBench layer for this op"
    return {"kind": kind, "effective": effective, "dense": dense, "how": how}


def neurobench_metrics(graph: Graph | dict, trace: Trace | None = None, cost: dict | None = None) -> dict:
    """NeuroBench's ``Effective_MACs``, ``Effective_ACs``, ``Dense`` (per sample) and ``ActivationSparsity``
    (with ``ActivationSparsityByLayer``) of ``graph`` run as ``trace`` (``run(graph, x)``, record="all"), with
    per-layer rows and spikec's own figures beside them (module docstring: how each maps, where they differ).

    Given a report dict instead (no trace), returns ``neurobench_from_report(report)``. ``cost``: the
    ``cost_report(graph, trace)`` already made (it is not made again)."""
    if isinstance(graph, dict):
        return neurobench_from_report(graph)
    if trace is None:
        raise TypeError("neurobench_metrics(graph, trace): a graph needs its interpreter trace")
    batch = next(iter(trace.values.values())).shape[1]
    layers, notes, mac, ac, dense = [], [], 0.0, 0.0, 0.0
    for n in graph.nodes:
        if not OPS[n.op].synaptic:
            continue
        x = trace.values.get(n.inputs[0])
        if OPS[n.op].cost is None or x is None or len(n.inputs) != 1:
            notes.append(f"{n.name} ({n.op}): not counted (no cost hook, no recorded input, or several operands)")
            continue
        ops = _layer_ops(graph, n, x)
        eff, dns = ops["effective"] / batch, ops["dense"] / batch
        mac += eff if ops["kind"] == "MAC" else 0.0
        ac += eff if ops["kind"] == "AC" else 0.0
        dense += dns
        if ops["how"] != "neurobench":
            notes.append(f"{n.name} ({n.op}): {ops['how']}")
        layers.append({"name": n.name, "op": n.op, "kind": ops["kind"], "spikec_kind": synaptic_kind(graph, n),
                       "effective_ops": eff, "dense": dns})
    by_layer, zeros, total = {}, 0, 0
    for n in neuron_nodes(graph):
        v = trace.values.get(n.name)
        if v is None or v.size == 0:
            continue
        nz = int(np.count_nonzero(v))
        by_layer[n.name] = (v.size - nz) / v.size
        zeros, total = zeros + v.size - nz, total + v.size
    return {"Effective_MACs": mac, "Effective_ACs": ac, "Dense": dense,
            "ActivationSparsity": zeros / total if total else 0.0,
            "ActivationSparsityByLayer": by_layer,
            "per": PER_SAMPLE, "exact": True, "basis": "graph and interpreter trace",
            "layers": layers, "notes": notes, "spikec": _spikec_figures(graph, trace, cost)}


def _spikec_figures(graph: Graph, trace: Trace, cost: dict | None = None) -> dict:
    """spikec's own counts of the same run (``cost_report``), to read beside NeuroBench's."""
    c = cost_report(graph, trace) if cost is None else cost
    return {"ac_ops": c["total_ac_ops"], "mac_ops": c["total_mac_ops"],
            "dense_ops": sum(l["dense_ops"] for l in c["layers"]), "synaptic_energy_pj": c["synaptic_energy_pj"],
            "firing_rates": c["firing_rates"]}


def neurobench_from_report(report: dict) -> dict:
    """The NeuroBench names read from a compile report (no trace): spikec's counting, so approximate.

    ``Effective_ACs`` = ``cost.total_ac_ops`` (zero weights counted); ``Effective_MACs`` = ``cost.total_mac_ops``
    (every dense operation, zeros included: an upper bound); ``Dense`` = sum of ``cost.layers[].dense_ops``
    (padding taps included: an upper bound); ``ActivationSparsity`` = 1 - the neuron-weighted mean of
    ``cost.firing_rates`` (sizes from ``layers[].shape``), exact for binary spikes only."""
    cost = report.get("cost") or {}
    sizes = {l["name"]: int(np.prod(l["shape"])) for l in report.get("layers") or []}
    kinds = {l["name"]: l.get("output_kind") for l in report.get("layers") or []}
    rates = cost.get("firing_rates") or {}
    by_layer = {name: 1.0 - r for name, r in rates.items() if kinds.get(name) == "binary"}
    counted = [name for name in by_layer if name in sizes]
    total = sum(sizes[name] for name in counted)
    sparsity = sum(by_layer[name] * sizes[name] for name in counted) / total if total else 0.0
    notes = ["read from the report: spikec's counting (zero weights and padding taps counted; MACs dense)"]
    skipped = sorted(set(rates) - set(by_layer))
    if skipped:
        notes.append(f"not in ActivationSparsity (integer spikes: the rate is not the nonzero share): "
                     f"{', '.join(skipped)}")
    layers = [{"name": l["name"], "op": l["op"], "kind": l["synaptic_kind"], "spikec_kind": l["synaptic_kind"],
               "effective_ops": l["ac_ops"] if l["synaptic_kind"] == "AC" else l["mac_ops"],
               "dense": l["dense_ops"]} for l in cost.get("layers") or []]
    return {"Effective_MACs": float(cost.get("total_mac_ops", 0.0)), "Effective_ACs": float(cost.get("total_ac_ops", 0.0)),
            "Dense": float(sum(l["dense"] for l in layers)), "ActivationSparsity": sparsity,
            "ActivationSparsityByLayer": by_layer, "per": cost.get("per_inference", PER_SAMPLE), "exact": False,
            "basis": "report.json (spikec's cost model)", "layers": layers, "notes": notes,
            "spikec": {"ac_ops": cost.get("total_ac_ops"), "mac_ops": cost.get("total_mac_ops"),
                       "dense_ops": sum(l["dense"] for l in layers),
                       "synaptic_energy_pj": cost.get("synaptic_energy_pj"), "firing_rates": rates}}
