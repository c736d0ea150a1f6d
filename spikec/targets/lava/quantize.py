"""Quantize a float spikec graph to Loihi 2 fixed point: the integer reference graph.

The jobs, one module each: ``mapping`` cuts the float graph into populations (neuron layers, read-outs,
max-pool OR layers) fed by synaptic streams, and host partitions; ``pooling`` folds average pools into the
adjacent synapse and maps max pools over spikes to OR layers; ``fixed_point`` holds Loihi's arithmetic
(8-bit weights and sign modes, bias mantissa/exponent, thresholds); ``neurons`` the per-neuron parameters of
each neuron kind; ``assemble`` builds the integer graph at given thresholds; ``calibrate`` lowers the
thresholds until the calibration inputs keep headroom. Dense float ops go to host partitions (``host.py``).
Anything the target cannot map is refused with the node named.
"""
from dataclasses import dataclass, field

import numpy as np

from spikec.ir.graph import Graph
from spikec.targets.lava import unit_views
from spikec.targets.lava.fixed_point import PAYLOAD_BITS
from spikec.targets.lava.ops import quantize_values
from spikec.targets.lava.calibrate import HEADROOM_BITS, calibrate, host_gains, start_thresholds
from spikec.targets.lava.limits import int_inputs
from spikec.targets.lava.mapping import map_graph


@dataclass(frozen=True)
class Quantized:
    graph: Graph                      # the integer reference graph
    layers: list                      # Population, in order
    calibration: dict
    notes: list
    hosts: dict = field(default_factory=dict)   # float host node name -> HostNode
    exact: Graph | None = None        # lava_reset='current': the exact integer graph the variant ``graph`` approximates
    variant: dict | None = None       # ... its changed populations and the reasons the others were not


def quantize(graph: Graph, calib_inputs, *, headroom_bits: int = HEADROOM_BITS, max_rounds: int = 8,
             vth_override: dict | None = None, bias_unit: int = 1) -> Quantized:
    """Quantize ``graph``; scales from the weights, then lowered until ``calib_inputs`` keep headroom.

    ``bias_unit=64`` rounds every neuron bias to whole weight LSBs (netx fixes the bias exponent at 6).
    """
    mapping = map_graph(graph)
    layers = mapping.layers
    x = {i.name: np.asarray(calib_inputs[i.name] if isinstance(calib_inputs, dict) else calib_inputs)
         for i in graph.inputs}
    int_inputs(graph, x)   # refuse what the integer run of calibration would cast to garbage
    gains = host_gains(graph, mapping.hosts, x)
    gains.update(input_gains(graph, x))
    gains.update({n.name: gains[n.inputs[0]] for n in graph.nodes   # an input viewed as (C, 1, L): its gain
                  if unit_views.input_view(graph, n) and n.inputs[0] in gains})
    notes = [n for l in layers for n in l.notes]
    start_thresholds(graph, layers, gains, vth_override, bias_unit)
    q, calibration = calibrate(graph, layers, mapping.hosts, gains, x, headroom_bits=headroom_bits,
                               max_rounds=max_rounds, vth_override=vth_override, bias_unit=bias_unit)
    calibration["input_quantization"] = input_quantization(q, x)
    return Quantized(q, layers, calibration, notes, mapping.hosts)


def input_gains(graph: Graph, x: dict) -> dict:
    """Payload gain of every real-valued input: its calibration peak onto the signed 8-bit graded spike range."""
    lim = 2 ** (PAYLOAD_BITS - 1) - 1
    out = {}
    for i in graph.inputs:
        if i.type.kind == "real":
            peak = float(np.abs(x[i.name]).max(initial=0))
            out[i.name] = lim / peak if peak > 0 else 1.0
    return out


def input_quantization(q: Graph, x: dict) -> dict:
    """The error of sending each real input as graded spikes ``round(g x)``, in input units (approximate)."""
    out = {}
    for name, g in q.meta.get("input_gains", {}).items():
        v = np.asarray(x[name], dtype=np.float64)
        err = np.abs(quantize_values(v, g, PAYLOAD_BITS) / g - v)
        out[name] = {"how": f"graded spikes round(g x), signed {PAYLOAD_BITS}-bit (num_message_bits "
                            f"{PAYLOAD_BITS}) into the first synapse, weights W / g; g maps the calibration peak to "
                            f"{2 ** (PAYLOAD_BITS - 1) - 1}", "gain": g,
                     "max_abs_error": float(err.max(initial=0)), "rms_error": float(np.sqrt(np.mean(err ** 2))),
                     "max_rel_error": float(err.max(initial=0) / max(float(np.abs(v).max(initial=0)), 1e-300))}
    return out
