"""Self-checks of the Lava target's own quantization: the faults the integer reference and Lava share.

Bit-exactness compares Lava with the integer reference, and both run the same integers: a quantizer or
lowering fault that changes those integers (weights truncated instead of rounded, a wrong ``weight_exp``
doubling a read-out, a population started a step late) is invisible to it, and argmax agreement with the
float source hides it too. These checks hold the deployment against the float graph it came from:

* ``weight_rounding``: every synaptic weight as Lava applies it (Dense: 8-bit clip, mixed-sign LSB drop,
  times ``2**weight_exp``; Conv: as written; Lava layouts undone) is the round-to-nearest of the float weight
  at the layer's scale, ``|s_c w - w_int| <= 1/2`` LSB (one unit of the integer synaptic sum).
* ``readouts``: every read-out value, dequantized, is within a stated bound of the float source's value,
  per value:  ``|y_int / s - y_float| <= (1/2 (sum_fan-in |x_int| + 1) + s sum_fan-in |w| |x_int - x_float|) / s``
  -- half an LSB per weight times the payload it multiplies, half an LSB of bias rounding, plus what the
  read-out's inputs contribute where they differ from the float source's (0 where its sources agree).
  With identical inputs the analytic worst case is ``(fan_in * max payload + 1) / (2 s)``.
* ``schedule``: every population (and host region) of ``network.json`` starts at exactly the Lava step its
  producers imply -- the latest of (producer start + synapse latency 1 (0 for a direct host value) +
  producer emission width - 1); an OR layer at its producer's start + 1 -- producers resolved through the
  integer IR graph; no later (a late start shifts every value while keeping Lava and the reference equal).
"""
import numpy as np
import torch

from spikec.ir.errors import IRError
from spikec.targets.lava import max_tree, ops as lops
from spikec.targets.lava.assemble import stream_weights
from spikec.targets.lava.fixed_point import channel_axis
from spikec.targets.lava.layout import conv_weight_from_lava, flatten_perm
from spikec.targets.lava.lower import POPULATION_OPS, POPULATION_TYPES
from spikec.targets.lava.mapping import map_graph
from spikec.targets.lava.neurons import neuron_params

HALF = 0.5
TOL = 1e-9            # float64 rounding of s * w (relative to the weight, in LSB)
SYNAPSES = ("Conv", "Dense", "DelayDense")


def run_checks(graph, qgraph, net: dict, arrays: dict, trace, reference=None) -> dict:
    """All three checks; ``graph`` the deployed float graph, ``qgraph`` its integer reference, ``trace`` the
    reference's run (every node recorded), ``reference`` the float graph's run on the same inputs."""
    layers, weights = _layers(graph, qgraph)
    checks = {"weight_rounding": check_weights(layers, weights, net, arrays),
              "readouts": check_readouts(layers, weights, qgraph, trace, reference),
              "schedule": check_schedule(qgraph, net)}
    failures = [f for c in checks.values() for f in c.pop("failures")]
    return {"ok": not failures, "failures": failures, **checks,
            "why": "bit-exactness compares Lava with the integer reference, which share any quantizer or lowering "
                   "fault; these compare the deployment with the float graph"}


def _layers(graph, qgraph) -> tuple[list, dict]:
    """The populations of ``graph`` with the scales the deployment used, and their effective float weights."""
    layers = map_graph(graph).layers
    scales = qgraph.meta.get("scales", {})
    for layer in layers:
        s = scales.get(layer.name, 1.0)
        layer.scale = np.broadcast_to(np.asarray(s, dtype=np.float64), (layer.out_shape[0],)).copy()
    gains = {n.inputs[0]: float(n.params["gain"]) for n in qgraph.nodes
             if n.op == "lava_quant" and n.attrs.get("bits", 0)}
    gains.update(qgraph.meta.get("input_gains", {}))   # real inputs sent as graded spikes
    gains.update({n.name: gains[n.inputs[0]] for n in qgraph.nodes   # an input viewed as (C, 1, L) (unit_views.py)
                  if n.op == "reshape" and n.inputs[0] in gains})
    weights = {}
    for layer in layers:
        p = neuron_params(layer.neuron, layer.out_shape[0]) if layer.neuron is not None else None
        weights[layer.name] = stream_weights(layer, p, graph, gains)
        if p is not None and "rec_weight" in p:   # a recurrent neuron's self-synapse (<population>.recurrent)
            w = p["rec_weight"] * p["alpha"].reshape(channel_axis(p["rec_weight"]))
            weights[layer.name] = weights[layer.name] + [(_Recurrent(f"{layer.name}.recurrent"), w, 1.0)]
    return layers, weights


class _Recurrent:
    """The self-synapse of a recurrent population as a stream of ``check_weights`` (no float operator)."""
    op = None
    delay = 0

    def __init__(self, name: str):
        self.name = name


# -- weight rounding -------------------------------------------------------------------------
def network_weights(proc: dict, arrays: dict) -> np.ndarray:
    """The weights Lava multiplies for synapse process ``proc``, in the IR's (PyTorch) layout, as reals."""
    name = proc["name"]
    if proc["type"] == "Conv":   # Lava's Conv applies its weights as written (no clip, no weight_exp)
        return conv_weight_from_lava(np.asarray(arrays[f"{name}/weight"])).astype(np.float64)
    w = np.asarray(arrays[f"{name}/weights"])
    eff = lops.dense_effective_weights(w).astype(np.float64) * 2.0 ** int(proc.get("weight_exp", 0))
    if proc.get("flatten_input"):   # columns in Lava's (W, H, C) flatten order -> PyTorch's (C, H, W)
        ir = np.empty_like(eff)
        ir[:, flatten_perm(tuple(proc["input_ir_shape"]))] = eff
        eff = ir
    return eff


def _untiled(got: np.ndarray, shape: tuple, copies: set) -> tuple[np.ndarray, bool]:
    """``(one copy, copies differ)`` of weights tiled over a count ladder's copies (count_ladder.py: rows into a
    ladder, columns out of one; ``copies`` the network's ladder sizes), every copy compared with the first; ``got``
    itself when not tiled so."""
    for ax in (0, 1):
        if got.ndim > ax and len(shape) > ax and got.shape[ax] != shape[ax] and got.shape[ax] % shape[ax] == 0 \
                and got.shape[ax] // shape[ax] in copies:
            blocks = np.split(got, got.shape[ax] // shape[ax], axis=ax)
            if any(not np.array_equal(b, blocks[0]) for b in blocks[1:]):
                return got, True
            got = blocks[0]
    return got, False


def check_weights(layers, weights: dict, net: dict, arrays: dict) -> dict:
    procs = {p["name"]: p for p in net["processes"]}
    copies = {int(p["ladder"]) for p in net["processes"] if p.get("ladder")}   # count_ladder.py's tilings only
    per_layer, failures = {}, []
    for layer in layers:
        worst, count, streams = 0.0, 0, {}
        for s, w, _ in weights[layer.name]:
            if w is None:
                continue   # a host value sent straight into the input port: no weight
            proc = procs.get(s.name)
            if proc is None or proc["type"] not in SYNAPSES:
                failures.append(f"layer {layer.name!r}: synapse {s.name!r} is not a synapse process of the network")
                continue
            exact = w * layer.scale.reshape(channel_axis(w))
            try:
                got = network_weights(proc, arrays)
            except (KeyError, ValueError) as e:   # a written network missing or mangling its weights
                failures.append(f"layer {layer.name!r}: synapse {s.name!r} weights unreadable: {type(e).__name__}: {e}")
                continue
            got, differ = _untiled(got, exact.shape, copies)
            if differ:
                failures.append(f"layer {layer.name!r}: synapse {s.name!r}'s copies (a count ladder's) differ")
                continue
            if got.shape != exact.shape:
                failures.append(f"layer {layer.name!r}: synapse {s.name!r} has weights {got.shape} in the network, "
                                f"the float graph {exact.shape}")
                continue
            err = np.abs(exact - got)
            at = np.unravel_index(int(np.argmax(err)), err.shape) if err.size else ()
            streams[s.name] = {"max_error_lsb": float(err.max(initial=0)), "weights": int(w.size),
                               "beyond_half_lsb": int((err > HALF + TOL * (1 + np.abs(exact))).sum())}
            if streams[s.name]["beyond_half_lsb"]:
                failures.append(f"layer {layer.name!r}: synapse {s.name!r} weight {tuple(int(i) for i in at)} is "
                                f"{got[at]:g}, s w = {exact[at]:.4f}: {err[at]:.3g} LSB off (round to nearest: "
                                "<= 0.5); "
                                f"{streams[s.name]['beyond_half_lsb']} weight(s) beyond half an LSB")
            worst, count = max(worst, streams[s.name]["max_error_lsb"]), count + int(w.size)
        if count:
            entry = {"max_error_lsb": round(worst, 6), "weights": count,
                     "ok": all(v["beyond_half_lsb"] == 0 for v in streams.values())}
            if len(streams) > 1:
                entry["streams"] = {k: round(v["max_error_lsb"], 6) for k, v in streams.items()}
            per_layer[layer.name] = entry
    return {"rule": "|s_c w_float - w_int| <= 1/2 LSB for every weight, w_int as Lava applies it (Dense: 8-bit clip, "
                    "mixed-sign LSB drop, 2**weight_exp; Conv: as written)",
            "ok": not failures, "max_error_lsb": max((v["max_error_lsb"] for v in per_layer.values()), default=0.0),
            "per_layer": per_layer, "failures": failures}


# -- read-outs --------------------------------------------------------------------------------
def _apply(op, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The float operator of stream ``op`` with weights ``w`` on ``x`` ``[T', B, ...]`` (float64, exact sums)."""
    t, b = x.shape[:2]
    if op.kind == "dense":
        return (x.reshape(t, b, -1) @ w.T).reshape(t, b, *w.shape[:1])
    a = op.attrs
    y = torch.nn.functional.conv2d(torch.from_numpy(np.ascontiguousarray(x.reshape(t * b, *x.shape[2:]))),
                                   torch.from_numpy(np.ascontiguousarray(w)), None, a["stride"], a["padding"],
                                   a["dilation"], a["groups"]).numpy()
    return y.reshape(t, b, *y.shape[1:])


def _delayed(v: np.ndarray, k: int) -> np.ndarray:
    if not k:
        return v
    out = np.zeros_like(v)
    out[k:] = v[:-k]
    return out


def _per_step(v: np.ndarray, steps: int) -> np.ndarray:
    """Sum the sub-steps of ``v`` ``[T*D, ...]`` into physical steps ``[T, ...]``."""
    d = v.shape[0] // steps
    return v if d == 1 else v.reshape(steps, d, *v.shape[1:]).sum(1)


def _float_source(s, reference, gain, like: np.ndarray, flatten: bool, steps: int):
    """The float graph's value of stream ``s``'s source, delayed, in payload units; None when not recorded."""
    if reference is None or s.source not in reference.values:
        return None
    v = np.asarray(reference.values[s.source], dtype=np.float64) * gain
    v = _delayed(v, s.delay * max(1, v.shape[0] // steps))
    v = v.reshape(v.shape[0], v.shape[1], -1) if flatten else v
    return v if v.shape == like.shape else None


def _stream_terms(s, w, gain, scale, qgraph, trace, reference, steps):
    """``(exact, act, diff, mag, fan_in * max payload)`` of one weighted stream, physical steps, integer units."""
    syn = qgraph.node(s.name)
    xq = np.asarray(trace.values[syn.inputs[0]], dtype=np.float64)
    binary = syn.attrs.get("num_message_bits", 0) == 0
    if binary:
        xq = (xq != 0).astype(np.float64)
    xq = xq.reshape(xq.shape[0], xq.shape[1], -1) if s.op.kind == "dense" else xq
    xf = _float_source(s, reference, gain, xq, s.op.kind == "dense", steps)
    if xf is not None and binary:
        xf = (xf != 0).astype(np.float64)
    sw = w * scale.reshape(channel_axis(w))
    exact = _per_step(_apply(s.op, xq, sw), steps)
    act = _per_step(_apply(s.op, np.abs(xq), np.ones_like(w)), steps)
    mag = _per_step(_apply(s.op, np.abs(xq), np.abs(sw)), steps)
    diff = None if xf is None else _per_step(_apply(s.op, np.abs(xq - xf), np.abs(sw)), steps)
    fan_in = int(np.prod(w.shape[1:]))
    return exact, act, diff, mag, fan_in * float(np.abs(xq).max(initial=0) if not binary else 1.0)


def _direct_terms(s, layer, trace, reference, steps):
    """A host value sent straight into the read-out's port: ``round(s x)``, half an LSB."""
    v = np.asarray(trace.values[s.source], dtype=np.float64)
    ch = layer.scale.reshape(1, 1, -1, *([1] * (v.ndim - 3)))
    exact = _delayed(v, s.delay) * ch
    ref = reference.values.get(s.source) if reference is not None else None
    diff = None if ref is None else np.abs(_delayed(v - np.asarray(ref, dtype=np.float64), s.delay)) * ch
    return exact, np.ones_like(exact), diff, np.abs(exact), 1.0


def _readout(layer, weights, qgraph, trace, reference) -> dict:
    y = np.asarray(trace.values[layer.name], dtype=np.float64)
    steps = y.shape[0]
    exact, act, diff, mag, worst = 0.0, 0.0, 0.0, 0.0, 0.0
    for s, w, gain in weights:
        terms = _direct_terms(s, layer, trace, reference, steps) if w is None else \
            _stream_terms(s, w, gain, layer.scale, qgraph, trace, reference, steps)
        exact, act, mag, worst = exact + terms[0], act + terms[1], mag + terms[3], worst + terms[4]
        diff = None if diff is None or terms[2] is None else diff + terms[2]
    ch = layer.scale.reshape(1, 1, -1, *([1] * (y.ndim - 3)))
    bias = np.asarray(layer.bias, dtype=np.float64).reshape(ch.shape[2:]) * ch
    exact = exact + bias
    bound = HALF * (act + 1)
    tol = TOL * (1 + mag + np.abs(bias))
    err = np.abs(y - exact)
    entry = {"scale": float(layer.scale[0]) if np.ptp(layer.scale) == 0 else layer.scale.tolist(),
             "values": int(y.size),
             "worst_case_bound_same_inputs": float(HALF * (worst + 1) / layer.scale.min()),
             "worst_case_bound_same_inputs_lsb": HALF * (worst + 1),
             "max_quantization_error_lsb": float(err.max(initial=0)),
             "max_quantization_bound_lsb": float(bound.max(initial=0)),
             "quantization_ok": bool((err <= bound + tol).all())}
    if diff is not None:
        yf = np.asarray(reference.values[layer.name], dtype=np.float64)
        err_f = np.abs(y / ch - yf)
        bound_f = (bound + diff + tol) / ch
        entry.update(max_error=float(err_f.max(initial=0)), max_bound=float(bound_f.max(initial=0)),
                     inputs_differ=bool((diff > 0).any()), float_source_ok=bool((err_f <= bound_f).all()))
        at = np.unravel_index(int(np.argmax(err_f - bound_f)), err_f.shape)
    else:
        entry["float_source"] = "not recorded: only the quantization bound (fixed inputs, float weights) is checked"
        at = np.unravel_index(int(np.argmax(err - bound)), err.shape)
    entry["ok"] = entry["quantization_ok"] and entry.get("float_source_ok", True)
    if not entry["ok"]:
        sc = float(ch.reshape(-1)[at[2]] if ch.size > 1 else ch.flat[0])
        entry["failure"] = (f"value {y[at] / sc:.4g} (step {at[0]}, sample {at[1]}, index {[int(i) for i in at[2:]]}) "
                            f"dequantized, the float read-out {exact[at] / sc:.4g} on the same inputs: {err[at]:.3g} "
                            f"LSB off, bound {bound[at]:.3g} LSB")
    return entry


def check_readouts(layers, weights: dict, qgraph, trace, reference) -> dict:
    per_layer, failures = {}, []
    for layer in layers:
        if layer.kind != "readout":
            continue
        try:
            entry = _readout(layer, weights[layer.name], qgraph, trace, reference)
        except (IRError, KeyError, ValueError) as e:   # the integer graph is not the float graph's quantization
            entry = {"ok": False, "failure": f"cannot be checked against the float graph: {type(e).__name__}: {e}"}
        per_layer[layer.name] = entry
        if not entry["ok"]:
            failures.append(f"layer {layer.name!r}: {entry['failure']}")
    return {"bound": "per value |y_int/s - y_float| <= (1/2 (sum over the fan-in of |x_int| + 1) + s sum |w| |x_int - "
                     "x_float|) / s: half an LSB per weight times its payload, half for the bias, plus the inputs "
                     "that differ from the float source's; worst_case_bound_same_inputs = (fan_in max_payload + 1) "
                     "/ (2 s) for identical inputs",
            "ok": not failures, "per_layer": per_layer, "failures": failures}


# -- schedule ---------------------------------------------------------------------------------
def _producer(qgraph, name: str) -> str:
    """The node whose process sends ``name``: through flatten, delay, an input's view (unit_views.py) and an
    unrolled neuron's count."""
    n = qgraph.node(name)
    while n.op in ("flatten", "delay", "reshape") or (n.op == "substep_sum"
                                                        and qgraph.node(n.inputs[0]).op == "lava_intfire"):
        n = qgraph.node(n.inputs[0])
    return n.name


def _origin(qgraph, name: str, starts: dict, hosts: dict) -> tuple[int, int] | None:
    """``(start, emission width)`` of the process sending node ``name``; None when no process sends it."""
    n = qgraph.node(_producer(qgraph, name))
    if n.op == "input":
        return 0, 1
    if n.op == "lava_quant":
        return (hosts[n.name], 1) if n.name in hosts else None
    if n.op == "maxpool2d":   # a max tree (max_tree.py): its Delta as a population, its output L + 2 steps later
        delta = _implied(qgraph, n, starts, hosts)
        levels = max_tree.depth(n, qgraph.node(n.inputs[0]).type.shape)   # from the windows, not the tree built
        return None if delta is None else (delta + levels + 2, 1)
    if n.op in POPULATION_OPS:
        owner = n if lops.primary(n) else next(
            m for m in qgraph.nodes if m.op == n.op and m.inputs == n.inputs and lops.primary(m))
        if owner.name not in starts:
            return None
        return starts[owner.name], _width(qgraph, owner, starts, hosts) if n is owner else 1
    return None


def _width(qgraph, pop, starts, hosts) -> int:
    """Lava steps a population's output of one physical step occupies: D for an unrolled integer neuron, its
    source's for an OR layer (it passes the sub-steps through), else 1."""
    if pop.op == "lava_intfire" and pop.attrs.get("unrolled"):
        return int(pop.attrs["max_spikes"])
    if pop.op == "lava_or":
        src = _origin(qgraph, _terms(qgraph, pop.inputs[0])[0][1], starts, hosts)
        return 1 if src is None else src[1]
    return 1


def _terms(qgraph, name: str) -> list:
    """``[(latency, node sent by a process)]`` summed into a population's input port."""
    n = qgraph.node(name)
    if n.op == "add":
        return _terms(qgraph, n.inputs[0]) + _terms(qgraph, n.inputs[1])
    if n.op == "substep_sum" and qgraph.node(n.inputs[0]).op in ("lava_conv", "lava_dense"):
        return _terms(qgraph, n.inputs[0])
    if n.op in ("lava_conv", "lava_dense"):
        return [(1, n.inputs[0])]
    return [(0, name)]   # a direct value (a host's, a max tree's Sigma)


def _implied(qgraph, node, starts, hosts) -> int | None:
    origins = [(lat, _origin(qgraph, src, starts, hosts)) for lat, src in _terms(qgraph, node.inputs[0])]
    if any(o is None for _, o in origins):
        return None
    if node.op == "lava_or":
        return origins[0][1][0] + 1
    return max(o[0] + lat + o[1] - 1 for lat, o in origins)


def _implied_start(qgraph, p: dict, ir_pops: dict, starts: dict, hosts: dict):
    """The start process ``p``'s producers imply; None when a producer has no process, False when ``p`` is no
    population of ``qgraph``."""
    if p["type"] == "Host":
        ins = [_origin(qgraph, port["node"], starts, hosts) for port in p["in_ports"]]
        return None if any(o is None for o in ins) else max([o[0] + o[1] - 1 for o in ins] + [0])
    if p["name"] in ir_pops:
        return _implied(qgraph, ir_pops[p["name"]], starts, hosts)
    return False


def check_schedule(qgraph, net: dict) -> dict:
    procs = [p for p in net["processes"] if p["type"] in POPULATION_TYPES + ("Host",)]
    starts = {p["name"]: int(p["start"]) for p in procs if p["type"] != "Host"}
    hosts = {q: int(p["start"]) for p in procs if p["type"] == "Host" for q in p["spec"]["outputs"]}
    recorded = {r["name"]: int(r["start"]) for r in net["recorded"]}
    checked, late, failures = 0, [], []
    ir_pops = {n.name: n for n in qgraph.nodes
               if n.op in POPULATION_OPS and lops.primary(n)}
    for name in sorted(set(ir_pops) - set(starts)):
        failures.append(f"population {name!r} of the integer reference has no process in the network")
    for p in procs:
        try:
            implied = _implied_start(qgraph, p, ir_pops, starts, hosts)
        except (IRError, KeyError, StopIteration) as e:   # a network that is not the lowering of this graph
            failures.append(f"process {p['name']!r}: its inputs are not in the integer reference ({type(e).__name__}: "
                            f"{e})")
            continue
        if implied is False:
            failures.append(f"process {p['name']!r} ({p['type']}) is no population of the integer reference")
            continue
        checked += 1
        start = int(p["start"])
        if implied is None:
            failures.append(f"population {p['name']!r}: a producer of its input has no process in the network")
        elif start != implied or recorded.get(p["name"], start) != start:
            late.append({"population": p["name"], "start": start, "implied": implied,
                         "recorded_at": recorded.get(p["name"], start)})
            failures.append(f"population {p['name']!r} starts at Lava step {start} (recorded from "
                            f"{recorded.get(p['name'], start)}); its producers imply {implied}"
                            + (f": {start - implied} Lava step(s) late" if start > implied else
                               ": early, before its inputs arrive" if start < implied else ""))
    return {"rule": "start = max over input streams of (producer start + 1 per synapse process + producer emission "
                    "width - 1); OR layers: producer start + 1; host regions: max (producer start + width - 1)",
            "ok": not failures, "processes_checked": checked, "mismatched": late, "failures": failures}
