"""The figures of the report's ``ttfs`` object, one function per part, read from the verifier's runs.

Layers, spike counts, energy, accuracy, the discrete-time table (with its worst-case bound) and the
measured LayerNorm approximations. ``Runs`` holds the simulations they are read from (``verify.py``).
"""
from dataclasses import dataclass

import numpy as np

from spikec.core.cost import ENERGY_SOURCE, energy_pj
from spikec.ir.graph import Graph
from spikec.codings.ttfs.layernorm import layernorm_error
from spikec.codings.ttfs.settings import DataSets
from spikec.codings.ttfs.simulate import SimResult, simulate
from spikec.codings.ttfs.timing import Plan

PRODUCT_MECHANISM = ("dynamic-weight synapse: operand A's decoded value is the weight of operand B's spike "
                     "(exact in value; not a static synapse)")
ENERGY_NOTE = ("estimates of synaptic arithmetic only, never measured: one AC per input spike per non-zero fan-out "
               "(the spike adds its weight to the slope), one MAC per dynamic-weight product; N_s * T_r is the "
               "spike-count proxy with T_r the per-spike transmission cost (option spike_cost)")


@dataclass(frozen=True)
class Runs:
    """What every figure is read from: the plan, the data sets, and per set the simulation and the ANN runs."""
    plan: Plan
    data: DataSets
    source: Graph       # the graph the coding was given (with LayerNorm: before the decomposition)
    ann: Graph          # the ANN the TTFS graph was built from (with LayerNorm: the decomposed one)
    sims: dict          # set name -> SimResult (exact, event-driven)
    ann_traces: dict    # set name -> Trace of ``ann``
    src_traces: dict    # set name -> Trace of ``source`` (outputs; the ANN's own with no LayerNorm)
    cache: dict         # the simulator's synapse cache, shared by every run (and read by the bound)

    @property
    def outputs(self) -> list[str]:
        return list(self.source.outputs)


def outputs_vs(graph_out: dict, ref_trace, names, mask_sim: SimResult | None = None, plan=None) -> dict:
    """Largest absolute and relative output error; with ``mask_sim``, over neurons no clipping reached."""
    worst_abs, worst_rel = 0.0, 0.0
    for name in names:
        ref = ref_trace.values[name]
        diff = np.abs(graph_out[name] - ref)
        if mask_sim is not None:
            k = dict(plan.outputs)[name]
            diff = diff[~mask_sim.layers[plan.layers[k].fire].affected.reshape(diff.shape)]
        scale = max(float(np.abs(ref).max(initial=0.0)), 1e-300)
        worst_abs = max(worst_abs, float(diff.max(initial=0.0)))
        worst_rel = max(worst_rel, float(diff.max(initial=0.0)) / scale)
    return {"max_abs_error": worst_abs, "max_rel_error": worst_rel}


def accuracy(out: np.ndarray, labels: np.ndarray) -> float:
    logits = out.reshape(-1, out.shape[-1])
    return float((logits.argmax(1) == labels.reshape(-1)).mean())


def _by_fire(plan: Plan, fire: str):
    return next(l for l in plan.layers if l.fire == fire)


def discrete_bound(plan: Plan, cache: dict, dt: float) -> float:
    """Worst-case output error (activation units) when every spike is delayed by up to ``dt``.

    Per layer (time units): ``e_n = dt + max_i sum_m sum_j |W'_ij| e_m`` (products: ``|g| (|x_a| e_b +
    |x_b| e_a + e_a e_b)`` with the window bounds of the operands); the output's ``e`` divided by its scale.
    Clipping is ignored, so the bound may exceed the output range (then it says nothing).
    """
    err = {}
    for layer in plan.layers:
        if layer.kind == "input":
            err[layer.fire] = dt
            continue
        syn = cache[layer.fire]
        if syn.dynsyn is not None:
            (sa, _), (sb, _) = syn.operand_sources
            ba = max(-_by_fire(plan, sa).lo, _by_fire(plan, sa).hi)
            bb = max(-_by_fire(plan, sb).lo, _by_fire(plan, sb).hi)
            ea, eb = err[sa], err[sb]
            err[layer.fire] = dt + abs(syn.dynsyn.attrs["gain"]) * layer.depth * (ba * eb + bb * ea + ea * eb)
            continue
        e, start = np.zeros(syn.wt.shape[1]), 0
        for (src, _), size in zip(syn.sources, syn.sizes):
            e = e + np.abs(syn.wt[start:start + size]).sum(0) * err[src]
            start += size
        err[layer.fire] = dt + float(e.max(initial=0.0))
    return max(err[plan.layers[k].fire] / plan.layers[k].scale for _, k in plan.outputs)


def discrete_steps(o: dict) -> list[float]:
    """The time steps of the table: ``dt`` (default ``window / 64``), then ``window / states`` for each other."""
    window = float(o["window"])
    dts = [float(o["dt"]) if o["dt"] else window / 64]
    return dts + [window / s for s in o["states"] if abs(window / s - dts[0]) > 1e-15]


def discrete_table(runs: Runs, o: dict) -> list[dict]:
    """Per time step ``dt``: the measured error of quantized spike times, its worst-case bound, accuracy."""
    plan, base = runs.plan, runs.data.base
    ref_sim, names, labels = runs.sims[base], runs.outputs, runs.data.labels
    out_range = max(max(-plan.layers[k].lo, plan.layers[k].hi) / plan.layers[k].scale for _, k in plan.outputs)
    rows = []
    for dt in discrete_steps(o):
        sim_dt = simulate(plan.graph, runs.data.sets[base], dt=dt, cache=runs.cache)
        bound = discrete_bound(plan, runs.cache, dt)
        row = {"dt": dt, "states_per_neuron": float(o["window"]) / dt,
               "worst_case_output_error_bound": bound,
               "bound_is_vacuous": bound >= out_range,   # larger than any output value: it says nothing
               "output_max_abs_error": outputs_vs(sim_dt.outputs, runs.ann_traces[base], names, ref_sim,
                                                  plan)["max_abs_error"],
               "max_abs_error": max(float((np.abs(sim_dt.layers[l.fire].value - ref_sim.layers[l.fire].value)
                                           [~ref_sim.layers[l.fire].affected]).max(initial=0.0)) / l.scale
                                    for l in plan.layers),
               "spikes_per_inference": float(sum(s.emitted.sum() for s in sim_dt.layers.values())) / sim_dt.samples,
               "inputs": base}
        if labels is not None and len(names) == 1:
            row["accuracy"] = accuracy(sim_dt.outputs[names[0]], labels)
        rows.append(row)
    return rows


def accuracy_table(runs: Runs, discrete: list[dict], exact: bool) -> dict | None:
    """Accuracy of the ANN and of the TTFS graph (exact and per dt) on the evaluation set (one output only)."""
    labels, names = runs.data.labels, runs.outputs
    if labels is None or len(names) != 1:
        return None
    name = names[0]
    ttfs_out, ann_out = runs.sims["evaluation"].outputs[name], runs.src_traces["evaluation"].values[name]
    table = {"inputs": "evaluation", "samples": int(labels.size),
             "ann": accuracy(ann_out, labels),
             "ttfs": accuracy(ttfs_out, labels),
             "ttfs_dt": {f"{d['states_per_neuron']:g} states": d["accuracy"] for d in discrete},
             "prediction_agreement": float((ttfs_out.reshape(-1, ttfs_out.shape[-1]).argmax(1)
                                            == ann_out.reshape(labels.size, -1).argmax(1)).mean())}
    if not exact:
        table["ann_decomposed"] = accuracy(runs.ann_traces["evaluation"].values[name], labels)
    return table


def approximations(runs: Runs, ln_records: list[dict], net: dict | None) -> list[dict]:
    """Each decomposed LayerNorm with its measured distance to the true one on every set."""
    if not ln_records:
        return []
    measured = {name: layernorm_error(runs.source, runs.ann, ln_records, xs, net)
                for name, xs in runs.data.sets.items()}
    return [{**r, "kind": "LayerNorm: 1/sqrt by a fitted 2-layer ReLU TTFS network", "exact": False,
             "measured": {name: m[i] for name, m in measured.items()}} for i, r in enumerate(ln_records)]


def spike_counts(plan: Plan, sim: SimResult) -> dict:
    """Neurons, spikes and synaptic events per inference (one sample), per layer and in total."""
    n = sim.samples
    rows, neurons, spikes, events, products = [], 0, 0, 0, 0
    for layer in plan.layers:
        s = sim.layers[layer.fire]
        size = int(np.prod(layer.shape))
        count = float(s.emitted.sum()) / n
        neurons += size
        spikes += count
        if layer.kind.startswith("product"):
            products += s.synaptic_events / n
        else:
            events += s.synaptic_events / n
        rows.append({"layer": layer.name, "neurons": size, "spikes_per_inference": count,
                     "spikes_per_neuron": count / size, "synaptic_events_per_inference": s.synaptic_events / n})
    inp = rows[0]
    return {"neurons": neurons, "spikes_per_inference": spikes, "spikes_per_neuron": spikes / max(neurons, 1),
            "max_spikes_per_neuron": max(sim.spike_counts.values()),
            "neurons_excluding_input": neurons - inp["neurons"],
            "spikes_per_inference_excluding_input": spikes - inp["spikes_per_inference"],
            "synaptic_events_per_inference": events, "dynamic_products_per_inference": products,
            "per_layer": rows, "samples": n}


def energy(spikes: dict, o: dict) -> dict:
    """The spike-count proxy and the synaptic energy, with the shared cost model's constants."""
    return {"spike_count_proxy": spikes["spikes_per_inference"] * float(o["spike_cost"]),
            "N_s": spikes["spikes_per_inference"], "T_r": float(o["spike_cost"]),
            "synaptic_energy_pj": energy_pj(spikes["synaptic_events_per_inference"],
                                            spikes["dynamic_products_per_inference"], float(o["e_ac_pj"]),
                                            float(o["e_mac_pj"])),
            "energy_constants_pj": {"mac": float(o["e_mac_pj"]), "ac": float(o["e_ac_pj"]), "source": ENERGY_SOURCE},
            "note": ENERGY_NOTE}


def layer_rows(plan: Plan, sim: SimResult) -> list[dict]:
    """One row per TTFS layer: coding, window, scale, sources with delays, thresholds, measured activity."""
    rows = []
    for l in plan.layers:
        s = sim.layers[l.fire]
        theta = plan.graph.node(l.fire).params.get("threshold") if l.kind != "input" else None
        size = int(np.prod(l.shape))
        rows.append({"name": l.name, "node": l.fire, "kind": l.kind, "coding": l.coding, "shape": list(l.shape),
                     "neurons": size, "window": l.window, "t_min": l.t_min, "t_ref": l.t_ref, "t_max": l.t_max,
                     "value_range": [l.lo, l.hi], "scale": l.scale, "shift": l.shift or None,
                     "sources": {src: d for src, d in l.delays.items()},
                     "threshold_range": None if theta is None else [float(theta.min()), float(theta.max())],
                     "spikes_per_neuron": float(s.emitted.sum()) / sim.samples / size,
                     "clipped_fraction": float(s.clipped.mean())})
    return rows


def delays(plan: Plan) -> list[dict]:
    return [{"into": l.name, "from": src, "delay": d} for l in plan.layers for src, d in l.delays.items() if d > 0]


def products(plan: Plan) -> list[dict]:
    return [{"layer": l.name, "mechanism": PRODUCT_MECHANISM} for l in plan.layers if l.kind.startswith("product")]
