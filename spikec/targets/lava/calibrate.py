"""Calibration: scales and headroom from the calibration inputs.

Each neuron population starts at the largest VTH keeping its weights in range (``fixed_point.max_vth``);
the integer reference then runs on the calibration inputs, and VTH (or, for read-outs and zero thresholds,
the weight-range gain) is lowered until the observed states keep ``headroom_bits`` below 24 bits and no
overflow event (a wrapped ``u``, a saturated ``v``, an input beyond 24 bits, a wrapped Conv sum) remains.
Host values fed into a synapse get the payload gain mapping their calibration peak onto 8 bits.
"""
import numpy as np

from spikec.core.interpreter import Trace, run
from spikec.ir.graph import Graph, Node
from spikec.targets.lava import ops as lops
from spikec.targets.lava.assemble import assemble, stream_weights
from spikec.targets.lava.fixed_point import PAYLOAD_BITS, max_vth
from spikec.targets.lava.limits import int_inputs
from spikec.targets.lava.mapping import Population
from spikec.targets.lava.neurons import neuron_params

HEADROOM_BITS = 1              # calibrated states stay below 2^(23 - HEADROOM_BITS)


def host_gains(graph: Graph, hosts: dict, x: dict) -> dict:
    """Payload gain of every host value fed into a synapse: its calibration peak onto the payload range."""
    if not hosts:
        return {}
    trace = run(graph, x, record="all")
    lim = 2 ** (PAYLOAD_BITS - 1) - 1
    out = {}
    for name in hosts:
        t = graph.node(name).type
        if t.kind in ("integer", "binary") and (t.ceiling or 1) <= lim:   # integers that fit go across exactly
            out[name] = 1.0
            continue
        peak = float(np.abs(trace.values[name]).max(initial=0))
        out[name] = lim / peak if peak > 0 else 1.0
    return out


def start_thresholds(graph: Graph, layers: list, gains: dict, vth_override: dict | None, bias_unit: int) -> None:
    """Every population's bias unit, and every neuron population's VTH before calibration lowers it."""
    for layer in layers:
        layer.bias_unit = bias_unit
        if layer.neuron is not None:
            p = neuron_params(layer.neuron, layer.out_shape[0])
            rec = [(None, p["rec_weight"] * p["alpha"].reshape((-1,) + (1,) * (p["rec_weight"].ndim - 1)), 1.0)] \
                if "rec_weight" in p else []   # a recurrent neuron's self-synapse is in range too
            layer.vth = max_vth(stream_weights(layer, p, graph, gains) + rec, p["threshold"])
            if vth_override and layer.name in vth_override:
                layer.vth = int(vth_override[layer.name])


def calibrate(graph: Graph, layers: list, hosts: dict, gains: dict, x: dict, *, headroom_bits: int,
              max_rounds: int, vth_override: dict | None, bias_unit: int) -> tuple[Graph, dict]:
    """The integer reference graph once VTH / gains keep headroom on ``x``, and the calibration report."""
    limit = 2 ** (lops.STATE_BITS - 1 - headroom_bits)
    rounds = 0
    while True:
        q = assemble(graph, layers, hosts, gains)
        peaks, _ = measure(q, int_inputs(q, x))   # real inputs quantized as the deployment sends them
        rounds += 1
        changed = False
        for layer in layers:
            m = peaks.get(layer.name)
            if m is None or (vth_override and layer.name in vth_override) or rounds >= max_rounds:
                continue
            if _lower_scale(layer, m, limit):
                changed = True
        if rounds < max_rounds and _lower_payload_gains(q, peaks, gains):
            changed = True
        if not changed:
            break
    first = next(iter(x.values()))
    calibration = {"inputs": "the verification inputs", "samples": int(first.shape[1]), "steps": int(first.shape[0]),
                   "rounds": rounds, "headroom_bits_target": headroom_bits, "state_limit": limit,
                   "bias_unit": bias_unit,
                   "per_layer": peaks,
                   "host_payload_gains": gains,
                   "overflow": any(p["overflow_events"] for p in peaks.values())}
    return q, calibration


def _lower_payload_gains(q: Graph, peaks: dict, gains: dict) -> bool:
    """Lower the gain of every host payload the deployment clipped (its value beyond the float graph's peak, from
    which the gain was set) so that its measured peak fits; whether one changed."""
    changed = False
    for n in q.nodes:
        m = peaks.get(n.name, {})
        src = n.inputs[0] if n.op == "lava_quant" else None
        if m.get("payload_clipped") and src in gains and m.get("peak_unclipped", 0) > 0:
            lim = 2 ** (n.attrs["bits"] - 1) - 1
            gains[src] = gains[src] * lim / m["peak_unclipped"]
            changed = True
    return changed


def _lower_scale(layer: Population, m: dict, limit: int) -> bool:
    """Lower ``layer``'s VTH (or gain) when its measured peak or overflow asks for it; whether it changed."""
    if m["peak_state"] > limit or m["overflow_events"]:
        factor = min(limit / max(m["peak_state"], 1), 0.5 if m["overflow_events"] else 1.0)
        if layer.vth > 1:
            layer.vth = max(1, int(layer.vth * factor))
            return True
        if layer.vth == 0 and layer.gain > 1e-3:
            layer.gain *= factor
            return True
    return False


def measure(q: Graph, x) -> tuple[dict, "Trace"]:
    """Run the integer reference with state read-outs; per population: peak |state| (|value| for read-outs),
    overflow events (u wrapped, v saturated, ``a << 6`` beyond 24 bits, a Conv sum wrapped modulo 2^24);
    per host payload: values clipped to the payload range."""
    full = lops.with_readouts(q)
    trace = run(full, x, integer=True)
    peaks = {}
    for n in q.nodes:
        if n.op in lops.STATES and lops.primary(n):
            vals = [trace.values[f"{n.name}.{s}"] for s in lops.STATES[n.op]] + [trace.values[_membrane_name(full, n)]]
            flags = trace.values[n.name + ".flags"]
        elif n.op == "lava_readout":
            vals, flags = [trace.values[n.name]], np.zeros(1, dtype=np.int64)
        else:
            continue
        peak = max(int(np.abs(v).max(initial=0)) for v in vals)
        peaks[n.name] = {"peak_state": peak, "headroom_bits": round(float(np.log2(lops.M / max(peak, 1))), 3),
                         "u_wrapped": int(((flags & lops.FLAG_U_WRAP) != 0).sum()),
                         "v_saturated": int(((flags & lops.FLAG_V_SAT) != 0).sum()),
                         "input_overflow": int(((flags & lops.FLAG_ACT) != 0).sum()), "conv_wrapped": 0}
        peaks[n.name]["overflow_events"] = int((flags != 0).sum())
    for n in q.nodes:
        if n.op == "lava_conv":
            wraps = _conv_wraps(n, trace.values[n.inputs[0]])
            pop = _population_of(q, n.name)
            if wraps and pop in peaks:
                peaks[pop]["conv_wrapped"] += wraps
                peaks[pop]["overflow_events"] += wraps
        elif n.op == "lava_quant" and n.attrs.get("bits", 0):
            lim = 2 ** (n.attrs["bits"] - 1) - 1
            y = np.floor(trace.values[n.inputs[0]] * np.asarray(n.params["gain"]) + 0.5)
            clipped = int((np.abs(y) > lim).sum())
            peaks[n.name] = {"payload_clipped": clipped, "overflow_events": clipped,
                             "peak_payload": int(np.abs(trace.values[n.name]).max(initial=0)),
                             "peak_unclipped": float(np.abs(y).max(initial=0))}
    return peaks, trace


def _membrane_name(q: Graph, n: Node) -> str:
    """The membrane twin of population ``n`` in ``with_readouts(q)``."""
    twin = next((m.name for m in q.nodes if m.op == n.op and m.inputs == n.inputs
                 and lops.output_of(m) == "membrane"), None)
    return twin or f"{n.name}.membrane"


def _population_of(q: Graph, name: str) -> str | None:
    """The population a synapse's sum flows into (through sub-step sums and adds)."""
    for c in q.consumers(name):
        if c.op in ("substep_sum", "add"):
            return _population_of(q, c.name)
        if c.op in lops.STATES or c.op in ("lava_readout", "lava_or"):
            return c.name
    return None


def _conv_wraps(node: Node, x: np.ndarray) -> int:
    """Entries where Lava's Conv (and the reference) wrapped the sum modulo 2^24: recomputed unwrapped."""
    import torch
    a = node.attrs
    xs = x if a.get("num_message_bits", 0) else (x != 0)
    z = torch.from_numpy(np.asarray(xs, dtype=np.float64)).flatten(0, 1)
    y = torch.nn.functional.conv2d(z, torch.from_numpy(np.asarray(node.params["weight"], dtype=np.float64)), None,
                                   a["stride"], a["padding"], a["dilation"], a["groups"])
    return int((y.abs() >= lops.M).sum())
