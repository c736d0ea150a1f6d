"""``--coding ttfs --target lava``: the TTFS graph discretised (``ttfs.py``), run in Lava, checked bit for bit.

``compile_ttfs_lava`` (called by ``compile_lava`` for a graph of TTFS ops):

1. ``ttfs.map_ttfs``: the integer network at ``states`` ticks per window (``--ttfs-dt``: ``states = T_w/dt``;
   default 64).
2. ``ttfs_reference.run``: the integer reference (numpy, closed form) on the verification inputs plus, when the
   model gives ``evaluation_data()``, its first ``lava_samples`` (default 16) evaluation images.
3. ``ttfs_lava.run_lava``: the same inputs through Lava's ``Loihi2SimCfg(select_tag="fixed_pt")``; every
   layer's first-spike tick compared with the reference, and every neuron's spike count (at most one).
   ``bit_exact`` is that comparison; it is the verdict of the target.
4. Accuracy of the discretised network vs the continuous-time source (the TTFS graph run exactly, which matches
   the ANN to ~1e-15): on the evaluation set, by the integer reference (bit-exact with Lava by step 3), for
   ``states`` and the ``ttfs.discrete`` table's 16 / 64 / 256 states, beside the float simulator's ``dt``
   mode (time quantized, weights not); approximate by nature, measured and labelled.
5. Spikes and synaptic operations per inference, populations on chip, host partitions (the input encoder and
   the output decoder), Loihi 2 resources, chip readiness (``SpikecTTFS`` is custom: CPU model only).

Artifacts: ``lava/network.json`` (``"coding": "ttfs"``) and ``lava/params.npz`` (``spikec verify`` re-maps the graph,
checks them, and re-runs Lava against the reference: ``verify_ttfs_lava``).
"""
import json
import time
from pathlib import Path

import numpy as np

from spikec.core.cost import ENERGY_SOURCE, energy_pj
from spikec.ir.errors import BadInput
from spikec.core.interpreter import run
from spikec.targets import TargetResult
from spikec.targets.lava import chip
from spikec.targets.lava import ttfs_reference as ref
from spikec.targets.lava.resources import CORES_PER_CHIP, NEURONS_PER_CORE, SYNAPSES_PER_CORE
from spikec.targets.lava.ttfs import DEFAULT_STATES, TTFSNet, map_ttfs
from spikec.targets.lava.ttfs_lava import lava_steps, run_lava, spec
from spikec.targets.lava.lower import read_network_json

TABLE_STATES = (16, 64, 256)
LAVA_SAMPLES = 16
PROCESS_WHY = ("spikec's SpikecTTFS: the discrete-time TTFS neuron (a current with no decay, the reference ramp, "
               "one spike then lock-out); no Loihi 2 microcode model in the open packages (spikec's Python CPU "
               "model only). On Loihi 2 it would be a microcoded neuron program")
CLAIM = ("bit-exact: every layer's first-spike tick (and one spike at most per neuron) in Lava's fixed-point "
         "simulation equals the integer reference (numpy) of the discretised network; the discretised network "
         "approximates the continuous-time source (time grid, 8-bit weights): measured, not claimed")


def states_of(graph, options: dict) -> int:
    """Ticks per window: ``window / ttfs_dt`` (a whole number), or ``DEFAULT_STATES``."""
    dt = options.get("ttfs_dt")
    enc = next(n for n in graph.nodes if n.op == "ttfs_encode")
    window = float(enc.attrs["t_max"] - enc.attrs["t_min"])
    if not dt:
        return DEFAULT_STATES
    k = window / float(dt)
    if abs(k - round(k)) > 1e-9 * k or round(k) < 1:
        raise BadInput(f"--ttfs-dt {dt:g} does not divide the TTFS window {window:g} ({k:.6g} ticks)",
                       where=f"node {enc.name!r}", remedy=f"use --ttfs-dt {window:g}/n, e.g. {window / 64:g}")
    return int(round(k))


def _data(options: dict, inputs) -> tuple:
    """``(verification [1, N, ...], evaluation inputs [1, M, ...] or None, labels or None)``."""
    from spikec.codings.ttfs.settings import data_sets, flat, resolve
    model = options.get("model")
    if model is None:
        return flat(inputs), None, None
    d = data_sets(model, inputs, resolve({}))
    ev = d.sets.get("evaluation")
    return d.sets["verification"], ev, d.labels


def compare(net: TTFSNet, reference: dict, lava: dict) -> dict:
    """Per layer: first-spike ticks equal, spikes per neuron; the first mismatches."""
    per_layer, first, mismatches, spikes = {}, [], 0, 0
    for layer in net.layers:
        a, b = reference[layer.name], lava["ticks"][layer.name]
        bad = np.argwhere(a != b)
        most = int(lava["spike_counts"][layer.name].max(initial=0))
        per_layer[layer.name] = {"mismatches": int(len(bad)), "max_spikes_per_neuron": most,
                                 "spikes": int((b >= 0).sum())}
        mismatches += len(bad) + int(most > 1)
        spikes += int((b >= 0).sum())
        first += [{"layer": layer.name, "sample": int(i), "neuron": int(j), "reference_tick": int(a[i, j]),
                   "lava_tick": int(b[i, j])} for i, j in bad[:3]]
    return {"bit_exact": mismatches == 0, "per_layer": per_layer, "spikes_compared": spikes,
            "spike_times_compared": int(sum(reference[l.name].size for l in net.layers)),
            "max_spikes_per_neuron": max(p["max_spikes_per_neuron"] for p in per_layer.values()),
            "first_mismatches": first[:6]}


def accuracy_table(graph, states: int, x_eval, labels, x_ver, reference) -> dict:
    """The discretised network vs the continuous-time source, per number of states (integer reference)."""
    from spikec.codings.ttfs.simulate import simulate
    base, xs = ("evaluation", x_eval) if x_eval is not None else ("verification", x_ver)
    exact = run(graph, xs, record="outputs").values if x_eval is not None else reference.values
    name = graph.outputs[0]
    ex = np.asarray(exact[name]).reshape(-1, np.asarray(exact[name]).shape[-1])
    rows = []
    for s in sorted({*TABLE_STATES, states}):
        net = map_ttfs(graph, s)
        out = ref.decode(net, ref.run(net, xs), xs.shape[:2])[name].reshape(ex.shape)
        flt = simulate(graph, xs, dt=net.dt).outputs[name].reshape(ex.shape)
        row = {"states_per_neuron": s, "dt": net.dt, "deployed": s == states,
               "output_max_abs_error": float(np.abs(out - ex).max()),
               "output_rms_error": float(np.sqrt(np.mean((out - ex) ** 2))),
               "prediction_agreement": float((out.argmax(1) == ex.argmax(1)).mean()),
               "float_dt_output_max_abs_error": float(np.abs(flt - ex).max()),
               "integer_vs_float_dt_max_abs_error": float(np.abs(out - flt).max())}
        if labels is not None:
            row.update(accuracy=float((out.argmax(1) == labels).mean()),
                       float_dt_accuracy=float((flt.argmax(1) == labels).mean()))
        rows.append(row)
    table = {"inputs": base, "samples": int(ex.shape[0]), "rows": rows,
             "meaning": "integer network (Lava-exact reference: time grid + 8-bit weights) vs the continuous-time "
                        "TTFS graph (== the ANN to ~1e-15); float_dt_*: the float simulator's dt mode (time grid "
                        "only), for comparison; approximate by nature"}
    if labels is not None:
        table["continuous_accuracy"] = float((ex.argmax(1) == labels).mean())
    return table


def source_weights(graph, fire: str) -> int:
    """Weights the source graph stores for a layer's synapses (conv kernels shared, pooling and flatten none)."""
    total, stack, seen = 0, [graph.node(fire).inputs[0]], set()
    while stack:
        node = graph.node(stack.pop())
        if node.name in seen or node.op == "ttfs_charge":
            continue
        seen.add(node.name)
        total += int(node.params["weight"].size) if "weight" in node.params else 0
        stack.extend(node.inputs)
    return total


def resources(net: TTFSNet, graph) -> dict:
    """Populations on chip, synapses, bits, and a core estimate (the Lava target's per-core figures)."""
    pops, neurons, synapses, dense = [], 0, 0, 0
    for l in net.layers:
        nz = int(sum((w != 0).sum() for w in l.wq))
        ent = int(sum(w.size for w in l.wq))
        pops.append({"name": l.name, "process": "SpikecTTFS", "neurons": l.size, "synapses": nz,
                     "dense_entries": ent, "source_weights": source_weights(graph, l.name),
                     "weight_bits": 8, "weight_exp": l.weight_exp, "ramp": l.ramp,
                     "voltage_bits_needed": int(l.info["voltage_bound"]).bit_length() + 1,
                     "cores": max(-(-l.size // NEURONS_PER_CORE), -(-nz // SYNAPSES_PER_CORE))})
        neurons += l.size
        synapses += nz
        dense += ent
    cores = sum(p["cores"] for p in pops)
    return {"populations": pops, "neurons": neurons, "synapses": synapses, "dense_entries": dense,
            "cores": cores, "chips": -(-cores // CORES_PER_CHIP),
            "note": "synapses: non-zero entries of each layer's effective fan-out matrix (conv with pooling and "
                    "flatten folded), what the run's Dense holds and a sparse encoding would store; source_weights: "
                    "the kernels' own weights, what a Conv process sharing them would store (not emitted here); "
                    "state per neuron: u, v (24 bits), vth, a lock-out bit; one core at least per "
                    "population; per-core limits are the chip maxima / 128 (docs/targets.md), an optimistic "
                    "estimate"}


def activity(net: TTFSNet, ticks: dict, lava: dict | None = None) -> dict:
    """Spikes and synaptic operations per inference (reference ticks); Lava's own spike count when given."""
    c = ref.counts(net, ticks)
    out = {"spikes_per_inference": c["spikes_per_inference"],
           "synaptic_ops_per_inference": c["synaptic_ops_per_inference"],
           "neurons": net.input.size + sum(l.size for l in net.layers), "per_layer": c["per_layer"],
           "samples": c["samples"],
           "synaptic_energy_pj": energy_pj(c["synaptic_ops_per_inference"], 0.0),
           "energy_source": ENERGY_SOURCE,
           "note": "one AC per input spike per non-zero fan-out, spikes at or after the window start carry none; "
                   "input-encoding spikes included; synaptic_energy_pj: the shared cost model's AC estimate of "
                   "synaptic arithmetic only (never measured; not Loihi's energy)"}
    if lava is not None:
        out["lava_spikes_per_inference_excluding_input"] = float(
            sum(v.sum() for v in lava["spike_counts"].values())) / c["samples"]
    return out


def _lava_inputs(x_ver, x_eval, options: dict) -> tuple[np.ndarray, dict]:
    """The inputs Lava runs on: the verification inputs, then the first ``lava_samples`` evaluation images."""
    n_ev = 0 if x_eval is None else min(int(options.get("lava_samples", LAVA_SAMPLES)), x_eval.shape[1])
    xs = x_ver if not n_ev else np.concatenate([x_ver, x_eval[:, :n_ev]], axis=1)
    return xs, {"verification": int(x_ver.shape[1]), "evaluation": n_ev}


def compile_ttfs_lava(graph, inputs, reference, options) -> TargetResult:
    """The Lava target for a TTFS graph (see the module docstring); ``reference``: the graph's run on ``inputs``."""
    start = time.perf_counter()
    states = states_of(graph, options)
    net = map_ttfs(graph, states)
    x_ver, x_eval, labels = _data(options, inputs)
    xs, used = _lava_inputs(x_ver, x_eval, options)
    t_ref = time.perf_counter()
    ticks = ref.run(net, xs)
    ref_s = time.perf_counter() - t_ref
    lava = run_lava(net, ticks[net.input.name])
    result = compare(net, ticks, lava)
    name = graph.outputs[0]
    out_ver = ref.decode(net, ref.run(net, x_ver), x_ver.shape[:2])
    src = {o: np.asarray(reference.values[o]).reshape(out_ver[o].shape) for o in graph.outputs}
    base_ticks = ref.run(net, x_eval) if x_eval is not None else ticks
    report = {
        "name": "lava", "coding": "ttfs", "bit_exact": result["bit_exact"], "claim": CLAIM,
        "compared_with": "the integer reference (spikec.targets.lava.ttfs_reference: numpy, closed form per layer)",
        "simulator": "Lava 0.10.0 Loihi2SimCfg(select_tag='fixed_pt')",
        "lava_inputs": used, **{k: result[k] for k in ("spikes_compared", "spike_times_compared",
                                                       "max_spikes_per_neuron", "first_mismatches")},
        "per_layer": result["per_layer"],
        "time_grid": {"states_per_window": states, "dt": net.dt, "lava_steps": lava["steps"],
                      "ticks": {l.name: [l.k_min, l.k_max] for l in [net.input, *net.layers]},
                      "latency_rule": "tick k of a layer runs at Lava step k + lag + 1; lag = 1 + its sources' "
                                      "(Dense delivers one step later; the input's RingBuffer lag is 0)"},
        "quantization": {l.name: l.info for l in net.layers},
        "float_vs_fixed": {"verification_outputs_max_abs_error": max(float(np.abs(out_ver[o] - src[o]).max())
                                                                     for o in graph.outputs),
                           "approximate": True},
        "accuracy": accuracy_table(graph, states, x_eval, labels, x_ver, reference),
        "activity": activity(net, base_ticks, None),
        "lava_activity": activity(net, ticks, lava),
        "resources": resources(net, graph),
        "partitions": {"chip": [l.name for l in net.layers],
                       "host": [{"name": net.input.name, "what": "input encoder: value -> spike tick (float64, "
                                 "the float simulator's rounding up to the grid), sent as binary spikes"},
                                *[{"name": o, "what": f"output decoder: spike tick of {ln} -> value "
                                   "(t_ref - t) / scale"} for o, ln, _, _ in net.outputs]]},
        "processes": processes(net),
        "sim_seconds": lava["sim_seconds"], "build_seconds": lava["build_seconds"],
        "reference_seconds": round(ref_s, 3), "batch": {"per_network": lava["chunk"]},
    }
    report["seconds"] = round(time.perf_counter() - start, 3)
    report["summary"] = summary(report, name)
    chip.add_to_report(report, {"processes": report["processes"]})
    for p in report["processes"]:
        if p["type"] == "SpikecTTFS":
            p["why"] = PROCESS_WHY
    from spikec.targets.lava.written import LavaDir
    network, arrays = document(net)
    files = {"lava": LavaDir(lambda p: write(p, net), None, network, arrays)}   # its reader: compile_lava
    return TargetResult(report, result["bit_exact"], files)


def processes(net: TTFSNet) -> list[dict]:
    """The Lava processes of the network (the verification's RingBuffer and Recorders aside)."""
    out = []
    for p in spec(net)[0]["layers"]:
        out.append({"name": p["name"], "type": "SpikecTTFS", "latency": p["lag"]})
        for d in p["dense"]:
            out.append({"name": f"{p['name']}/{d['source']}", "type": "Dense"})
            if d["relay"]:
                out.append({"name": f"{p['name']}/{d['source']}/relay", "type": "Relay", "delay": d["relay"]})
    return out


def summary(r: dict, name: str) -> str:
    g, a, act, res = r["time_grid"], r["accuracy"], r["activity"], r["resources"]
    dep = next(row for row in a["rows"] if row["deployed"])
    acc = (f"accuracy {100 * dep['accuracy']:.2f}% (continuous {100 * a['continuous_accuracy']:.2f}%, float dt "
           f"{100 * dep['float_dt_accuracy']:.2f}%)" if "accuracy" in dep else "")
    table = ", ".join(f"{row['states_per_neuron']} states {100 * row['accuracy']:.2f}%" for row in a["rows"]
                      if "accuracy" in row)
    return (f"lava: bit_exact {str(r['bit_exact']).lower()} vs the integer reference (TTFS, {g['states_per_window']} "
            f"ticks per window, {g['lava_steps']} Lava steps): {r['spike_times_compared']:,} spike times of "
            f"{sum(r['lava_inputs'].values())} inferences, max {r['max_spikes_per_neuron']} spike per neuron "
            f"(Lava fixed_pt sim {r['sim_seconds']:.2f} s)"
            f"\n             discretised vs continuous on {a['samples']} {a['inputs']} inputs: {name} max error "
            f"{dep['output_max_abs_error']:.3g}, prediction agreement {100 * dep['prediction_agreement']:.2f}%"
            + (f"; {acc}" if acc else "") + (f"\n             by states: {table}" if table else "")
            + f"\n             {act['spikes_per_inference']:.1f} spikes and {act['synaptic_ops_per_inference']:.0f} "
              f"synaptic ops (AC) per inference; {len(res['populations'])} populations on chip, {res['neurons']} "
              f"neurons, {res['synapses']:,} synapses, {res['cores']} cores; host: input encoder, output decoder")


def document(net: TTFSNet) -> tuple[dict, dict]:
    """``(network.json document, params.npz arrays)`` of ``net``."""
    network, arrays = spec(net)
    network.update(coding="ttfs", states=net.states)
    return network, arrays


def write(path: Path, net: TTFSNet) -> None:
    network, arrays = document(net)
    d = Path(path)
    d.mkdir(parents=True, exist_ok=True)
    (d / "network.json").write_text(json.dumps(network, indent=1))
    with open(d / "params.npz", "wb") as f:
        np.savez(f, **arrays)


def verify_ttfs_lava(outdir, graph, inputs, reference) -> dict:
    """``spikec verify``: the written network is the mapping of ``graph``, and Lava matches the reference on
    ``inputs`` again."""
    d = Path(outdir) / "lava"
    written = json.loads((d / "network.json").read_text()) if (d / "network.json").exists() else {}
    if written.get("coding") != "ttfs":
        raise BadInput(f"{outdir} holds no Lava TTFS deployment (lava/network.json with coding ttfs)",
                       remedy="compile with --coding ttfs --target lava")
    with np.load(d / "params.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    net = map_ttfs(graph, int(written["states"]))
    fresh, fresh_arrays = spec(net)
    fresh.update(coding="ttfs", states=net.states)
    differs = [k for k in sorted(set(arrays) | set(fresh_arrays))
               if k not in arrays or k not in fresh_arrays or not np.array_equal(arrays[k], fresh_arrays[k])]
    if fresh != written:
        differs.append("network.json")
    from spikec.codings.ttfs.settings import flat
    x = flat(inputs)
    ticks = ref.run(net, x)
    result = compare(net, ticks, run_lava(net, ticks[net.input.name], (written, arrays)))   # the files as written
    return {"equivalent": result["bit_exact"] and not differs, "bit_exact": result["bit_exact"],
            "arrays_differing_from_mapping": differs, "spikes_compared": result["spikes_compared"],
            "first_mismatches": result["first_mismatches"], "steps": lava_steps(net)}


def is_ttfs_deployment(outdir) -> bool:
    p = Path(outdir) / "lava" / "network.json"
    if not p.exists():
        return False
    return read_network_json(p.parent).get("coding") == "ttfs"   # a named BadInput for a file that is no document


class TTFSDeployed:
    """A compiled Lava TTFS deployment, runnable without Lava: its integer reference (bit-exact with Lava) on new
    inputs. ``model(x)`` returns the decoded outputs ``[T, B, ...]`` (float64 values of the output spike ticks);
    ``model.ticks(x)`` every layer's spike ticks. The written arrays must be the mapping of ``graph.json``."""

    def __init__(self, outdir):
        from spikec.core.serialize import load_graph
        outdir = Path(outdir)
        self.graph = load_graph(outdir)
        written = read_network_json(outdir / "lava")
        self.net = map_ttfs(self.graph, int(written["states"]))
        fresh, arrays = spec(self.net)
        with np.load(outdir / "lava" / "params.npz", allow_pickle=False) as z:
            same = sorted(z.files) == sorted(arrays) and all(np.array_equal(z[k], arrays[k]) for k in arrays)
        if not same or fresh != {k: v for k, v in written.items() if k not in ("coding", "states")}:
            raise BadInput(f"{outdir}/lava does not hold the mapping of its graph.json",
                           where=str(outdir / "lava"), remedy="recompile; spikec verify shows which arrays differ")

    def ticks(self, x) -> dict:
        return ref.run(self.net, np.asarray(x, dtype=np.float64))

    def __call__(self, x):
        x = np.asarray(x, dtype=np.float64)
        out = ref.decode(self.net, self.ticks(x), x.shape[:2])
        return out[self.graph.outputs[0]] if len(out) == 1 else out
