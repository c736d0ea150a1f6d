"""Float-vs-fixed agreement and the Loihi 2 resource estimate of a Lava deployment."""
import math

import numpy as np

from spikec.targets.lava import chip_limits, max_tree
from spikec.targets.lava.lower import POPULATION_TYPES

# Per-core figures: the public chip-level maxima divided evenly over the 128 neurocores, from the one table
# of Loihi 2 limits (chip_limits.py, each number with its source; docs/targets.md "Loihi 2 facts"). Upper
# bounds per core, so the core count below is an optimistic (low) estimate.
CORES_PER_CHIP = chip_limits.CORES_PER_CHIP
NEURONS_PER_CORE = chip_limits.NEURONS_PER_CORE      # 8192
SYNAPSES_PER_CORE = chip_limits.SYNAPSES_PER_CORE    # 937,500
WEIGHT_BITS = 8
# processes holding neurons (on neurocores): the populations, the bias source, a max tree's sigma-delta neurons
NEURON_PROCESSES = POPULATION_TYPES + ("BiasLIF",) + max_tree.TYPES


def agreement(graph, reference, q, trace) -> dict:
    """Spike agreement per neuron layer and output agreement, float source vs quantized deployment.

    Approximate by nature (a quantized deployment is not equivalent to its float source): measured on
    the verification inputs, never used to decide ``bit_exact``.
    """
    layers, outputs = {}, {}
    for layer in q.layers:
        f = np.asarray(reference.values[layer.name])
        x = np.asarray(trace.values[layer.name])
        reads = dict(layer.reads)
        if layer.neuron is not None and layer.neuron.attrs.get("fire", layer.info.get("fire", "")).startswith("never"):
            reads = {layer.name: "v", **reads}   # a read-out integrator: its output is its state
        for name, _ in reads.items():
            layers[name] = state_agreement(layer, reference.values[name], trace.values[name])
        if layer.name in reads:
            continue
        if layer.kind != "readout":
            layers[layer.name] = {"spike_agreement": round(float((f == x).mean()), 6),
                                  "float_rate": round(float(f.mean()), 6), "fixed_rate": round(float(x.mean()), 6)}
            if layer.info.get("approximate"):
                layers[layer.name]["note"] = "decays quantized to 12-bit fractions (approximate)"
        else:
            y = x / float(layer.scale[0])
            err = np.abs(y - f)
            scale = max(float(np.abs(f).max(initial=0)), 1e-300)
            d = {"scale": float(layer.scale[0]), "max_abs_error": float(err.max(initial=0)),
                 "max_rel_error": float(err.max(initial=0) / scale), "rms_error": float(np.sqrt(np.mean(err ** 2)))}
            if f.ndim == 3 and layer.name in graph.outputs:   # [T, B, classes]: argmax of the sum over steps
                # (a read-out a host reads, e.g. a count of AND spikes, is no classifier: its errors only)
                d["class_agreement"] = round(float((f.sum(0).argmax(-1) == x.sum(0).argmax(-1)).mean()), 6)
            layers[layer.name] = d
    for o in graph.outputs:
        if o in layers:
            outputs[o] = layers[o]
        elif o in trace.values and o in reference.values:   # a flattened spike output
            outputs[o] = {"spike_agreement": round(float((np.asarray(reference.values[o]) ==
                                                          np.asarray(trace.values[o])).mean()), 6)}
    return {"approximate": True,
            "meaning": "float source (deployed float graph, float64) vs quantized integer reference on the "
                       "verification inputs; agreement, not equivalence",
            "per_layer": layers, "outputs": outputs}


def state_agreement(layer, f, x) -> dict:
    """A state recorded as an output (integer ``v ~ 64 s U``) dequantized, vs the float source's state."""
    from spikec.targets.lava.framework_neurons import read_offset
    from spikec.targets.lava.neurons import membrane_gain, neuron_params
    f, x = np.asarray(f, dtype=np.float64), np.asarray(x, dtype=np.float64)
    c = layer.out_shape[0]
    shape = (1, 1, c) + (1,) * (f.ndim - 3)
    gain = np.broadcast_to(membrane_gain(layer), (c,)).reshape(shape)
    offset = np.broadcast_to(read_offset(layer.neuron, neuron_params(layer.neuron, c)), (c,)).reshape(shape)
    y = x / gain + offset
    err = np.abs(y - f)
    peak = max(float(np.abs(f).max(initial=0)), 1e-300)
    d = {"state_gain": float(gain.flat[0]) if np.ptp(gain) == 0 else gain.reshape(-1).tolist(),
         "dequantized_as": "v_int / (64 s)" + (" + v_leak" if np.any(offset) else ""),
         "state_max_abs_error": float(err.max(initial=0)), "state_max_rel_error": float(err.max(initial=0) / peak),
         "state_rms_error": float(np.sqrt(np.mean(err ** 2)))}
    if f.ndim == 3:   # [T, B, classes]: class = argmax of the sum over steps
        d["class_agreement"] = round(float((f.sum(0).argmax(-1) == y.sum(0).argmax(-1)).mean()), 6)
    return d


def _conv_synapses(p, w) -> int:
    """Connections of a Lava conv (per sample): output neurons times in-bounds nonzero taps."""
    c_out, kw, kh, c_in = w.shape
    wi, hi, _ = p["input_lava_shape"]
    wo, ho, _ = p["lava_shape"]
    (sx, sy), (px, py), (dx, dy) = p["stride"], p["padding"], p["dilation"]
    nz = (w != 0)
    total = 0
    for i in range(kw):
        xs = np.arange(wo) * sx + i * dx - px
        vx = int(((xs >= 0) & (xs < wi)).sum())
        for j in range(kh):
            ys = np.arange(ho) * sy + j * dy - py
            vy = int(((ys >= 0) & (ys < hi)).sum())
            total += vx * vy * int(nz[:, i, j, :].sum())
    return total


def _payload(p: dict) -> str:
    if p["type"] == "Readout":
        return "graded 24-bit (integer read-out)"
    if p["type"] == "LIFReadout":
        return "none sent: its current u (24-bit) read by the host each step (Lava's Monitor)"
    if p.get("integrator"):
        return "none sent: its state v (24-bit) read by the host each step (Lava's Monitor)"
    if p["type"] in max_tree.TYPES:
        return "graded 24-bit (a max tree's deltas, or the Sigma's max)"
    if p["type"] == "SpikecIntFire":
        d = p["max_spikes"]
        return (f"binary spikes over {d} Lava sub-steps (unrolled integer neuron)" if p["unrolled"] else
                f"graded {max(1, d.bit_length())}-bit payload (integer spikes 0..{d})")
    return "binary spikes"


def _bits(p: dict) -> int | None:
    if p["type"] == "SpikecIntFire" and not p["unrolled"]:
        return max(1, int(p["max_spikes"]).bit_length())
    return 24 if p["type"] in ("Readout",) + max_tree.TYPES else None


def partitions(net: dict) -> dict:
    """Chip and host partitions and the values crossing between them per physical step, per sample."""
    by_name = {p["name"]: p for p in net["processes"]}
    crossing, hosts = [], []
    for p in net["processes"]:
        if p["type"] != "Host":
            continue
        hosts.append({"name": p["name"], "nodes": p["nodes"], "ops": p["host_ops"], "start": p["start"],
                      "model": "float64 on a CPU beside the chip (spikec.targets.lava.host.host_step); Lava process "
                               "HostRegion"})
        for port in p["in_ports"]:
            src = port["node"]
            kind = ("membrane potential (24-bit)" if src.endswith(".membrane") else
                    "synaptic sum (read-out, 24-bit)" if by_name.get(src, {}).get("type") == "Readout" else
                    "spikes")
            crossing.append({"edge": [src, p["name"]], "direction": "to_host",
                             "values_per_step": int(np.prod(port["ir_shape"])), "what": kind})
        for port in p["out_ports"]:
            node = port["node"]
            bits = next(n["bits"] for n in p["spec"]["nodes"] if n["name"] == node)
            crossing.append({"edge": [p["name"], node], "direction": "to_chip",
                             "values_per_step": int(np.prod(port["ir_shape"])),
                             "what": f"graded {bits}-bit payload into a synapse" if bits else
                                     "integer current into a population's input port"})
    chip = [p["name"] for p in net["processes"] if p["type"] != "Host"]
    return {"chip": {"processes": len(chip), "populations": [p["name"] for p in net["processes"]   # not the bias
                                                             if p["type"] in POPULATION_TYPES + max_tree.TYPES]},
            "host": hosts, "crossing": crossing,
            "values_per_step": sum(c["values_per_step"] for c in crossing),
            "bit_exactness": "the chip partition is compared bit for bit with host values recorded: every value a "
                             "host sends to the chip is compared with the integer reference (host_values_compared); "
                             "the host's float64 arithmetic is the reference's own function, run sample by sample"}


def resources(net: dict, arrays: dict) -> dict:
    """Neurons, synapses, weight memory, delays, payload widths and an estimate of neurocores, per sample."""
    pops, syns, delays = [], [], []
    fan_in = {}
    for p in net["processes"]:
        name = p["name"]
        if p["type"] == "Conv":
            w = arrays[f"{name}/weight"]
            n = _conv_synapses(p, w)
            syns.append({"name": name, "type": "Conv", "synapses": n, "kernel_weights": int(w.size),
                         "weight_memory_bits": n * WEIGHT_BITS, "shared_kernel_bits": int(w.size) * WEIGHT_BITS,
                         "num_message_bits": p["num_message_bits"], "axonal_delays": 0})
        elif p["type"] == "Sparse" and "tree" in p:   # a max tree's +-1 synapse (max_tree.py)
            w = max_tree.matrix(arrays, p)
            syns.append({"name": name, "type": "Sparse", "synapses": int(w.nnz), "matrix": list(w.shape),
                         "weight_memory_bits": int(w.nnz) * WEIGHT_BITS, "weight_exp": p["weight_exp"],
                         "sign_mode": p["sign_mode"], "num_message_bits": p["num_message_bits"], "axonal_delays": 0})
        elif p["type"] == "Sparse":   # a diagonal self-synapse (current_reset.py): one synapse per neuron
            n = int(np.prod(p["ir_shape"]))
            syns.append({"name": name, "type": "Sparse", "synapses": n, "matrix": [n, n], "diagonal": True,
                         "weight_memory_bits": n * WEIGHT_BITS, "weight_exp": p["weight_exp"],
                         "sign_mode": p["sign_mode"], "num_message_bits": 0, "axonal_delays": 0})
        elif p["type"] in ("Dense", "DelayDense"):
            w = arrays[f"{name}/weights"]
            n = int((w != 0).sum())
            syns.append({"name": name, "type": p["type"], "synapses": n, "matrix": list(w.shape),
                         "weight_memory_bits": n * WEIGHT_BITS, "weight_exp": p["weight_exp"],
                         "sign_mode": p["sign_mode"], "num_message_bits": p["num_message_bits"],
                         "axonal_delays": p.get("axon_delay", 0)})
            if p.get("axon_delay"):
                delays.append({"name": name, "how": "DelayDense axonal delay", "lava_steps": p["axon_delay"]})
        elif p["type"] == "Relay":
            delays.append({"name": name, "how": "Relay process (Lava has no delayed Conv / direct connection; on "
                                                "Loihi 2 an axonal delay of the synapses it feeds)",
                           "lava_steps": p["delay"], "values": int(np.prod(p["lava_shape"]))})
            continue
        else:
            continue
        fan_in[name] = syns[-1]["synapses"]
    for p in net["processes"]:
        if p["type"] not in NEURON_PROCESSES:
            continue
        neurons = int(np.prod(p["lava_shape"]))
        s = sum(fan_in.get(i, 0) for i in p.get("inputs", [p.get("input")]))
        cores = max(1, math.ceil(neurons / NEURONS_PER_CORE), math.ceil(s / SYNAPSES_PER_CORE))
        pops.append({"name": p["name"], "process": p["type"], "neurons": neurons, "fan_in_synapses": s,
                     "output": _payload(p), "payload_bits": _bits(p), "neurocores": cores})
    cores = sum(p["neurocores"] for p in pops)
    graded = [{"name": p["name"], "bits": p["payload_bits"], "what": p["output"]} for p in pops if p["payload_bits"]]
    for p in net["processes"]:
        if p["type"] == "Host":
            for node in p["spec"]["nodes"]:
                if node["kind"] == "quant" and node["bits"]:
                    graded.append({"name": node["name"], "bits": node["bits"], "what": "host value into a synapse"})
    return {
        "per_sample": True,
        "neurons": sum(p["neurons"] for p in pops),
        "synapses": sum(s["synapses"] for s in syns),
        "weight_memory_bits": sum(s["weight_memory_bits"] for s in syns),
        "weight_memory_note": "8 bits per synapse without sharing; a conv's kernel alone is shared_kernel_bits",
        "axonal_delays": delays or "none used",
        "graded_payloads": graded,
        "lava_steps_per_physical_step": net["period"],
        "neurocores_estimate": cores,
        "chips_estimate": math.ceil(cores / CORES_PER_CHIP),
        "host_partitions": [p["name"] for p in net["processes"] if p["type"] == "Host"],
        "populations": pops, "synapse_layers": syns,
        "assumptions": {
            "neurons_per_core": NEURONS_PER_CORE, "synapses_per_core": SYNAPSES_PER_CORE,
            "cores_per_chip": CORES_PER_CHIP,
            "rule": "each population on its own cores: max(ceil(neurons / neurons_per_core), "
                    "ceil(fan-in synapses / synapses_per_core)), at least 1; host partitions use no neurocore",
            "source": "Intel Loihi 2 product brief (2021): 128 neurocores, up to 1M neurons and 120M synapses "
                      "per chip, divided evenly per core (docs/targets.md 'Loihi 2 facts'); real per-core "
                      "limits are not public in Lava's open source, so this is a lower bound on cores",
        },
    }
