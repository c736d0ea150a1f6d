"""``compile_ttfs``: the driver hook for ``spikec compile ... --coding ttfs``.

ANN graph -> (LayerNorm decomposed) -> timing assignment -> TTFS graph, then verification with the
event-driven simulator on the calibration, verification and evaluation inputs:

* every neuron that is not clipped and reads no clipped neuron (transitively) must satisfy
  ``|value_from_spike_time - a_n * ANN_activation| <= tolerance * T_w(n)`` (float64; 1e-9 by default),
  where the ANN is the one the TTFS graph was built from (with LayerNorm: the decomposed ANN);
* the closed-form IR kernels and the event-driven simulator give the same spike times;
* each neuron spikes at most once (counted from the simulator's event lists);
* with LayerNorm the distance of the decomposed ANN to the true one is measured and the result is
  labelled approximate (``exact: false``).

Optional data on the model (the examples provide both): ``model.calibration_data()`` -> inputs
``[T, B, ...]`` that fix the per-layer scales (the verification inputs are always added, so they never
clip), and ``model.evaluation_data()`` -> ``(inputs [T, B, ...], labels [T*B])`` for the accuracy table.
"""
import time
from dataclasses import dataclass

import numpy as np

from spikec.compiler.errors import BadInput
from spikec.compiler.interpreter import run
from spikec.compiler.ir import Graph
from spikec.ttfs.layernorm import expand_layernorm, has_layernorm, layernorm_error, load_rsqrt_net
from spikec.ttfs.simulate import SimResult, simulate
from spikec.ttfs.timing import Plan, assign_ttfs_timing

DEFAULTS = {
    "window": 1.0,          # T_w of every layer, in units of tau_c
    "tau": 1.0,             # tau_c
    "headroom": 1.0,        # calibration maximum * headroom fills the window
    "percentile": 100.0,    # < 100: scale from a percentile (more resolution, some clipping)
    "dt": None,             # the discrete-time step reported first (default: window / 64)
    "states": (16, 64, 256),  # further T_w / dt resolutions reported
    "tolerance": 1e-9,      # relative to the window
    "calibration": None,    # inputs [T, B, ...]; default model.calibration_data() if present
    "evaluation": None,     # (inputs, labels); default model.evaluation_data() if present
    "fuse_affine": False,   # LayerNorm: fold the affine sub-layer into its consumer
    "rsqrt_net": None,      # path of another fitted 1/sqrt network
    "max_samples": 4096,    # simulate at most this many samples of each set (the calibration set is subsampled)
    "spike_cost": 1.0,      # T_r of the spike-count energy proxy N_s * T_r (per-spike transmission cost, your unit)
    "e_ac_pj": 0.9,         # 45 nm estimates (Horowitz 2014), as the shared cost model
    "e_mac_pj": 4.6,
}


@dataclass
class TTFSResult:
    graph: Graph    # the deployed TTFS graph (its outputs decode the ANN outputs and keep their names)
    report: dict    # the report's "ttfs" object
    ok: bool        # the exact parts verified (<= tolerance), spikes <= 1 per neuron, IR == simulator
    plan: Plan


def _flat(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x.reshape(1, x.shape[0] * x.shape[1], *x.shape[2:])


def _model_data(model, attr):
    fn = getattr(model, attr, None)
    return fn() if callable(fn) else None


def check_layers(plan: Plan, sim: SimResult, ann_trace, tol: float) -> dict:
    """Per-layer exactness of the simulated spike times against the ANN activations."""
    rows, worst_rel, worst_abs, clipped, affected, total = {}, 0.0, 0.0, 0, 0, 0
    for layer in plan.layers:
        s = sim.layers[layer.fire]
        ann = ann_trace.values[layer.name] if layer.kind != "input" else None
        ann = (ann if ann is not None else ann_trace.values[plan.ann.inputs[0].name]).reshape(s.times.shape)
        ok = ~s.affected
        diff = np.abs(s.value - layer.scale * ann)
        rel = float(diff[ok].max(initial=0.0) / layer.window)
        act = float(diff[ok].max(initial=0.0) / layer.scale)
        worst_rel, worst_abs = max(worst_rel, rel), max(worst_abs, act)
        clipped += int(s.clipped.sum())
        affected += int(s.affected.sum())
        total += s.clipped.size
        rows[layer.name] = {"max_rel_window_error": rel, "max_abs_error": act,
                            "clipped": int(s.clipped.sum()), "affected": int(s.affected.sum()),
                            "neurons": int(s.clipped.size)}
    return {"max_abs_error": worst_abs, "max_rel_window_error": worst_rel, "exact": worst_rel <= tol,
            "clipped_fraction": clipped / max(total, 1), "affected_fraction": affected / max(total, 1),
            "neuron_evaluations": total, "layers": rows}


def _outputs_vs(graph_out: dict, ref_trace, names, mask_sim: SimResult | None = None, plan=None) -> dict:
    worst_abs, worst_rel = 0.0, 0.0
    for name in names:
        ref = ref_trace.values[name]
        got = graph_out[name]
        diff = np.abs(got - ref)
        if mask_sim is not None:
            k = dict(plan.outputs)[name]
            ok = ~mask_sim.layers[plan.layers[k].fire].affected.reshape(diff.shape)
            diff = diff[ok]
        scale = max(float(np.abs(ref).max(initial=0.0)), 1e-300)
        worst_abs, worst_rel = max(worst_abs, float(diff.max(initial=0.0))), max(worst_rel, float(diff.max(
            initial=0.0)) / scale)
    return {"max_abs_error": worst_abs, "max_rel_error": worst_rel}


def _discrete_bound(plan: Plan, cache: dict, dt: float) -> float:
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
            d = syn.dynsyn.attrs
            (sa, _), (sb, _) = syn.operand_sources
            ba = max(-_by_fire(plan, sa).lo, _by_fire(plan, sa).hi)
            bb = max(-_by_fire(plan, sb).lo, _by_fire(plan, sb).hi)
            ea, eb = err[sa], err[sb]
            err[layer.fire] = dt + abs(d["gain"]) * layer.depth * (ba * eb + bb * ea + ea * eb)
            continue
        e, start = np.zeros(syn.wt.shape[1]), 0
        for (src, _), size in zip(syn.sources, syn.sizes):
            e = e + np.abs(syn.wt[start:start + size]).sum(0) * err[src]
            start += size
        err[layer.fire] = dt + float(e.max(initial=0.0))
    return max(err[plan.layers[k].fire] / plan.layers[k].scale for _, k in plan.outputs)


def _by_fire(plan, fire):
    return next(l for l in plan.layers if l.fire == fire)


def _accuracy(out: np.ndarray, labels: np.ndarray) -> float:
    logits = out.reshape(-1, out.shape[-1])
    return float((logits.argmax(1) == labels.reshape(-1)).mean())


def _spikes(plan: Plan, sim: SimResult) -> dict:
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


def compile_ttfs(model, graph: Graph, inputs, options: dict | None = None) -> TTFSResult:
    """Map the traced ANN ``graph`` onto TTFS, verify it, and return the graph and the report's ``ttfs`` object.

    ``inputs`` ``[T, B, ...]`` are the driver's verification inputs. Raises ``spikec.compiler.errors``
    subclasses (``UnsupportedOp`` naming the node for ops with no TTFS form, ``BadInput``, ``PassError``).
    """
    start = time.perf_counter()
    unknown = set(options or {}) - set(DEFAULTS)
    if unknown:
        raise BadInput(f"unknown TTFS option(s) {sorted(unknown)}", remedy=f"known: {', '.join(DEFAULTS)}")
    o = {**DEFAULTS, **{k: v for k, v in (options or {}).items() if v is not None}}
    tol = float(o["tolerance"])
    x_ver = _flat(inputs)
    cal_model = o["calibration"] if o["calibration"] is not None else _model_data(model, "calibration_data")
    cal_model = None if cal_model is None else _flat(cal_model)
    calibration = x_ver if cal_model is None else np.concatenate([cal_model, x_ver], axis=1)
    evaluation = o["evaluation"] if o["evaluation"] is not None else _model_data(model, "evaluation_data")

    ann, ln_records, net = graph, [], None
    if has_layernorm(graph):
        net = load_rsqrt_net(o["rsqrt_net"])
        ann, ln_records = expand_layernorm(graph, calibration, net=net, headroom=o["headroom"],
                                           fuse_affine=bool(o["fuse_affine"]))
    plan = assign_ttfs_timing(ann, calibration, window=float(o["window"]), tau=float(o["tau"]),
                              headroom=float(o["headroom"]), percentile=float(o["percentile"]))
    exact = not ln_records
    out_names = list(graph.outputs)

    sets = {"verification": x_ver}
    if cal_model is not None:
        rng = np.random.default_rng(0)
        keep = cal_model.shape[1] if cal_model.shape[1] <= o["max_samples"] else o["max_samples"]
        idx = np.sort(rng.choice(cal_model.shape[1], keep, replace=False))
        sets["calibration"] = cal_model[:, idx]
    labels = None
    if evaluation is not None:
        x_eval, labels = evaluation
        sets["evaluation"] = _flat(x_eval)[:, :o["max_samples"]]
        labels = np.asarray(labels).reshape(-1)[:sets["evaluation"].shape[1]]

    cache, checks, sims, ann_traces, src_traces = {}, {}, {}, {}, {}
    for name, xs in sets.items():
        ann_traces[name] = run(ann, xs)
        src_traces[name] = ann_traces[name] if exact else run(graph, xs, record="outputs")
        sims[name] = simulate(plan.graph, xs, cache=cache)
        c = check_layers(plan, sims[name], ann_traces[name], tol)
        c["outputs_vs_ann"] = _outputs_vs(sims[name].outputs, ann_traces[name], out_names, sims[name], plan)
        c["outputs_vs_source"] = _outputs_vs(sims[name].outputs, src_traces[name], out_names)
        c["samples"] = int(xs.shape[1])
        checks[name] = c

    # the closed-form IR kernels against the event-driven simulator (spike times, verification inputs)
    ir = run(plan.graph, x_ver)
    ir_vs_sim = 0.0
    for layer in plan.layers:
        s = sims["verification"].layers[layer.fire]
        ir_vs_sim = max(ir_vs_sim, float(np.abs(ir.values[layer.fire].reshape(s.times.shape) - s.times).max(
            initial=0.0)) / layer.window)

    # discrete time
    base = sets.get("evaluation", sets.get("calibration", x_ver))
    base_name = "evaluation" if "evaluation" in sets else ("calibration" if "calibration" in sets else "verification")
    dts = [float(o["dt"]) if o["dt"] else float(o["window"]) / 64]
    dts += [float(o["window"]) / s for s in o["states"] if abs(float(o["window"]) / s - dts[0]) > 1e-15]
    discrete = []
    ref_sim = sims[base_name]
    for dt in dts:
        sim_dt = simulate(plan.graph, base, dt=dt, cache=cache)
        bound = _discrete_bound(plan, cache, dt)
        out_range = max(max(-plan.layers[k].lo, plan.layers[k].hi) / plan.layers[k].scale for _, k in plan.outputs)
        row = {"dt": dt, "states_per_neuron": float(o["window"]) / dt,
               "worst_case_output_error_bound": bound,
               "bound_is_vacuous": bound >= out_range,   # larger than any output value: it says nothing
               "output_max_abs_error": _outputs_vs(sim_dt.outputs, ann_traces[base_name], out_names, ref_sim,
                                                   plan)["max_abs_error"],
               "max_abs_error": max(float((np.abs(sim_dt.layers[l.fire].value - ref_sim.layers[l.fire].value)
                                           [~ref_sim.layers[l.fire].affected]).max(initial=0.0)) / l.scale
                                    for l in plan.layers),
               "spikes_per_inference": float(sum(s.emitted.sum() for s in sim_dt.layers.values())) / sim_dt.samples,
               "inputs": base_name}
        if labels is not None and len(out_names) == 1:
            row["accuracy"] = _accuracy(sim_dt.outputs[out_names[0]], labels)
        discrete.append(row)

    accuracy = None
    if labels is not None and len(out_names) == 1:
        o_name = out_names[0]
        accuracy = {"inputs": "evaluation", "samples": int(labels.size),
                    "ann": _accuracy(src_traces["evaluation"].values[o_name], labels),
                    "ttfs": _accuracy(sims["evaluation"].outputs[o_name], labels),
                    "ttfs_dt": {f"{d['states_per_neuron']:g} states": d["accuracy"] for d in discrete},
                    "prediction_agreement": float((sims["evaluation"].outputs[o_name].reshape(-1, sims["evaluation"]
                                                   .outputs[o_name].shape[-1]).argmax(1) == src_traces["evaluation"]
                                                   .values[o_name].reshape(labels.size, -1).argmax(1)).mean())}
        if not exact:
            accuracy["ann_decomposed"] = _accuracy(ann_traces["evaluation"].values[o_name], labels)

    approximations = []
    if ln_records:
        measured = {name: layernorm_error(graph, ann, ln_records, xs, net) for name, xs in sets.items()}
        for i, r in enumerate(ln_records):
            approximations.append({**r, "kind": "LayerNorm: 1/sqrt by a fitted 2-layer ReLU TTFS network",
                                   "exact": False,
                                   "measured": {name: m[i] for name, m in measured.items()}})

    spikes = _spikes(plan, sims[base_name])
    energy = {"spike_count_proxy": spikes["spikes_per_inference"] * float(o["spike_cost"]),
              "N_s": spikes["spikes_per_inference"], "T_r": float(o["spike_cost"]),
              "synaptic_energy_pj": spikes["synaptic_events_per_inference"] * float(o["e_ac_pj"])
              + spikes["dynamic_products_per_inference"] * float(o["e_mac_pj"]),
              "note": "estimates of synaptic arithmetic only, never measured: one AC per input spike per non-zero "
                      "fan-out (the spike adds its weight to the slope), one MAC per dynamic-weight product; "
                      "N_s * T_r is the spike-count proxy with T_r the per-spike transmission cost (option spike_cost)"}
    worst = {k: max(c[k] for c in checks.values()) for k in ("max_abs_error", "max_rel_window_error")}
    clipped = sum(c["clipped_fraction"] * c["neuron_evaluations"] for c in checks.values()) / max(
        sum(c["neuron_evaluations"] for c in checks.values()), 1)
    ok = (worst["max_rel_window_error"] <= tol and spikes["max_spikes_per_neuron"] <= 1 and ir_vs_sim <= tol
          and checks["verification"]["outputs_vs_ann"]["max_rel_error"] <= tol)
    report = {
        "exact": exact,
        "verified": ok,
        "coding": sorted({l.coding for l in plan.layers}),
        "tau_c": plan.tau, "window": float(o["window"]), "headroom": float(o["headroom"]),
        "max_abs_error": worst["max_abs_error"],
        "max_rel_window_error": worst["max_rel_window_error"],
        "tolerance": tol,
        "clipped_fraction": clipped,
        "spikes_per_neuron": spikes["spikes_per_neuron"],
        "max_spikes_per_neuron": spikes["max_spikes_per_neuron"],
        "latency": plan.latency,
        "ir_vs_simulator_max_rel_window_error": ir_vs_sim,
        "calibration": {"samples": int(calibration.shape[1]),
                        "source": ("model.calibration_data() + " if cal_model is not None else "") +
                                  "the verification inputs"},
        "checks": checks,
        "discrete": discrete,
        "spikes": spikes,
        "energy": energy,
        "accuracy": accuracy,
        "approximations": approximations,
        "layers": [_layer_row(plan, l, sims[base_name]) for l in plan.layers],
        "delays": [{"into": l.name, "from": src, "delay": d} for l in plan.layers for src, d in l.delays.items()
                   if d > 0],
        "products": [{"layer": l.name, "mechanism": "dynamic-weight synapse: operand A's decoded value is the "
                      "weight of operand B's spike (exact in value; not a static synapse)"}
                     for l in plan.layers if l.kind.startswith("product")],
        "seconds": round(time.perf_counter() - start, 3),
    }
    return TTFSResult(plan.graph, report, ok, plan)


def _layer_row(plan: Plan, l, sim: SimResult) -> dict:
    s = sim.layers[l.fire]
    theta = plan.graph.node(l.fire).params.get("theta") if l.kind != "input" else None
    size = int(np.prod(l.shape))
    return {"name": l.name, "node": l.fire, "kind": l.kind, "coding": l.coding, "shape": list(l.shape),
            "neurons": size, "window": l.window, "t_min": l.t_min, "t_ref": l.t_ref, "t_max": l.t_max,
            "value_range": [l.lo, l.hi], "scale": l.scale, "shift": l.shift or None,
            "sources": {src: d for src, d in l.delays.items()},
            "theta_range": None if theta is None else [float(theta.min()), float(theta.max())],
            "spikes_per_neuron": float(s.emitted.sum()) / sim.samples / size,
            "clipped_fraction": float(s.clipped.mean())}
