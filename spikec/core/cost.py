"""Cost model of the report (targets.md, "Cost model"): synaptic operations, energy, firing, partitions.

A conv/linear whose operand is binary does one accumulate (AC) per input spike per fan-out, counted
from measured activity; with real or integer operands it does one multiply-accumulate (MAC) per dense
operation. Energies are 45 nm estimates (Horowitz 2014) of synaptic arithmetic only, memory excluded.
What each op counts is its ``OpDef.cost`` (``spikec.ops.registry.Cost``, defined next to its kernel): this
module dispatches through the registry and knows no op by name (``sdna_report`` excepted: it reads blocks).
"""
import numpy as np
import torch

from spikec.ir.errors import IRError
from spikec.core.interpreter import Trace
from spikec.ir.graph import Graph
from spikec.ops import OPS, opdef
from spikec.core.report import pairwise_neuron, synaptic_kind

E_MAC_PJ, E_AC_PJ = 4.6, 0.9   # pJ per multiply-accumulate / accumulate; shared with the TTFS report
ENERGY_SOURCE = "45 nm, Horowitz 2014 (estimate)"


def energy_pj(ac_ops: float, mac_ops: float, e_ac: float = E_AC_PJ, e_mac: float = E_MAC_PJ) -> float:
    """Synaptic energy of ``ac_ops`` accumulates and ``mac_ops`` multiply-accumulates (the TTFS report's too)."""
    return ac_ops * e_ac + mac_ops * e_mac


def dense_ops(graph: Graph, node) -> int:
    """Multiply-accumulates of one step of one sample if every operand were dense (0: no cost model)."""
    cost = opdef(node.op).cost
    return cost.dense(node) if cost is not None else 0


def measured_acs(graph: Graph, node, x: np.ndarray) -> int:
    """Synaptic events actually triggered by the nonzero inputs ``x`` ``[T, B, ...]`` (fan-out per spike)."""
    cost = opdef(node.op).cost
    if cost is None:
        raise IRError(f"op {node.op} has no cost model to count its synaptic events", where=f"node {node.name!r}",
                      remedy="define the op with cost=Cost(dense, events) (spikec.ops.registry)")
    return cost.events(node, torch.as_tensor((x != 0).astype(np.float64)).flatten(0, 1))


def cost_report(graph: Graph, trace: Trace, e_mac: float = E_MAC_PJ, e_ac: float = E_AC_PJ) -> dict:
    """Per-layer operation counts per inference (one sample, all T steps), energy, firing rates, AC share."""
    batch = next(iter(trace.values.values())).shape[1]
    layers, conv_ops, conv_ac_ops = [], 0, 0
    for n in graph.nodes:
        if not OPS[n.op].synaptic:
            continue
        kind, dense = synaptic_kind(graph, n), dense_ops(graph, n) * trace.values[n.name].shape[0]
        acs = measured_acs(graph, n, trace.values[n.inputs[0]]) / batch if kind == "AC" else 0.0
        macs = dense if kind == "MAC" else 0
        layers.append({"name": n.name, "op": n.op, "synaptic_kind": kind, "dense_ops": dense,
                       "ac_ops": acs, "mac_ops": macs, "energy_pj": energy_pj(acs, macs, e_ac, e_mac)})
        if OPS[n.op].cost is not None and OPS[n.op].cost.ac_share:   # the convolutions
            conv_ops += dense
            conv_ac_ops += dense if kind == "AC" else 0
    rates = {n.name: float(trace.values[n.name].mean()) for n in graph.nodes
             if OPS[n.op].stateful and n.type.is_spike and n.op != "delay"}   # a delay moves spikes, fires none
    return {"per_inference": "one sample over all T steps, averaged over the verification batch",
            "energy_constants_pj": {"mac": e_mac, "ac": e_ac, "source": ENERGY_SOURCE},
            "layers": layers, "firing_rates": rates,
            "total_ac_ops": sum(l["ac_ops"] for l in layers), "total_mac_ops": sum(l["mac_ops"] for l in layers),
            "synaptic_energy_pj": sum(l["energy_pj"] for l in layers),
            "ac_share": conv_ac_ops / conv_ops if conv_ops else None}


def partition_report(graph: Graph) -> dict:
    """Ops a static-synapse chip cannot run go to a host; list them and the values crossing per step."""
    # dense ops, and per-time-step affines (a static-weight target would need T weight copies)
    host = {n.name for n in graph.nodes if OPS[n.op].dense or OPS[n.op].per_step}
    crossing = [{"edge": [i, n.name], "values_per_step": graph.node(i).type.size, "direction": direction}
                for n in graph.nodes for i in n.inputs
                for direction in [("to_host" if n.name in host else "to_chip")]
                if (n.name in host) != (i in host)]
    return {"host": sorted(host), "crossing": crossing,
            "values_per_step": sum(c["values_per_step"] for c in crossing)}


def sdna_report(graph: Graph, cost: dict, schedule: dict | None) -> list[dict]:
    """Per SDNA block: gate evaluations and attention state of its window op, its integer products, its
    synaptic operations split AC/MAC, and (after unrolling) the sub-step at which its output is ready.

    Pairwise gates every (query, key) pair: ``N k^2 C`` neurons; Linear gates the window sums: ``N C``.
    """
    blocks = []
    for n in graph.nodes:
        if pairwise_neuron(n.op):
            variant, name, k = "pairwise", n.name, n.attrs["kernel"]
        elif n.op == "windowsum" and n.name.endswith(".window") and f"{n.name[:-7]}.gate" in graph:
            variant, name, k = "linear", n.name[:-7], n.attrs["kernel"]
        else:
            continue
        c, tokens = n.type.shape[0], int(np.prod(n.type.shape[1:]))
        gates = tokens * c * (k * k if variant == "pairwise" else 1)
        mine = [l for l in cost["layers"] if l["name"] == name or l["name"].startswith(name + ".")]
        start = (schedule or {}).get("start_substep", {})
        blocks.append({"block": name, "variant": variant, "tokens": tokens, "channels": c, "window": k,
                       "gate_evaluations_per_step": gates, "attention_state_values": gates,
                       "ac_ops": sum(l["ac_ops"] for l in mine), "mac_ops": sum(l["mac_ops"] for l in mine),
                       "integer_products_per_step": 2 * gates,  # Q*K (or K*V) and the gated read-out
                       "products": "integer spike products: not spike-driven",
                       "output_substep": start.get(name)})
    return blocks
