"""``verify_ttfs``: the TTFS coding's verifier; it returns what a target returns (``spikec.targets.TargetResult``).

Given the graph the coding was given (``source``) and the TTFS graph the pass made of it, it maps the
source again (the same options give the same calibration, so the same graph: anything else is a compiler
bug) and checks the TTFS graph with the event-driven simulator on the verification, calibration and
evaluation inputs:

* every neuron that is not clipped and reads no clipped neuron (transitively) must satisfy
  ``|value_from_spike_time - a_n * ANN_activation| <= tolerance * T_w(n)`` (float64; 1e-9 by default),
  where the ANN is the one the TTFS graph was built from (with LayerNorm: the decomposed ANN);
* the closed-form IR kernels and the event-driven simulator give the same spike times;
* each neuron spikes at most once (counted from the simulator's event lists);
* with LayerNorm the distance of the decomposed ANN to the true one is measured and the result is
  labelled approximate (``exact: false``).

The result's ``report`` is the report's ``ttfs`` object (``report.py`` prints it); ``ok`` is the verdict.
"""
import time

import numpy as np

from spikec.ir.errors import NotEquivalent
from spikec.core.interpreter import Trace, run
from spikec.ir.graph import Graph
from spikec.core.serialize import graph_to_json
from spikec.targets import TargetResult
from spikec.codings.ttfs import figures
from spikec.codings.ttfs.figures import Runs, outputs_vs
from spikec.codings.ttfs.settings import data_sets, decompose, resolve, timing_options
from spikec.codings.ttfs.simulate import SimResult, simulate
from spikec.codings.ttfs.timing import Plan, assign_ttfs_timing


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


def _same_graph(a: Graph, b: Graph) -> bool:
    return graph_to_json(a) == graph_to_json(b) and all(
        n.params.keys() == m.params.keys() and all(np.array_equal(v, m.params[k]) for k, v in n.params.items())
        for n, m in zip(a.nodes, b.nodes))


def simulate_sets(plan: Plan, source: Graph, ann: Graph, data, exact: bool) -> Runs:
    """The event-driven simulation and the ANN runs of every data set."""
    cache, sims, ann_traces, src_traces = {}, {}, {}, {}
    for name, xs in data.sets.items():
        ann_traces[name] = run(ann, xs)
        src_traces[name] = ann_traces[name] if exact else run(source, xs, record="outputs")
        sims[name] = simulate(plan.graph, xs, cache=cache)
    return Runs(plan, data, source, ann, sims, ann_traces, src_traces, cache)


def set_checks(runs: Runs, tol: float) -> dict:
    """Per data set: layer exactness, and the outputs against the ANN (unclipped) and against the source."""
    checks = {}
    for name, xs in runs.data.sets.items():
        sim, names = runs.sims[name], runs.outputs
        c = check_layers(runs.plan, sim, runs.ann_traces[name], tol)
        c["outputs_vs_ann"] = outputs_vs(sim.outputs, runs.ann_traces[name], names, sim, runs.plan)
        c["outputs_vs_source"] = outputs_vs(sim.outputs, runs.src_traces[name], names)
        c["samples"] = int(xs.shape[1])
        checks[name] = c
    return checks


def ir_vs_simulator(plan: Plan, reference: Trace, sim: SimResult) -> float:
    """Largest difference (fraction of the window) between the IR kernels' spike times and the simulator's."""
    worst = 0.0
    for layer in plan.layers:
        s = sim.layers[layer.fire]
        diff = np.abs(reference.values[layer.fire].reshape(s.times.shape) - s.times).max(initial=0.0)
        worst = max(worst, float(diff) / layer.window)
    return worst


def verify_ttfs(model, source: Graph, graph: Graph, inputs, options: dict | None = None, *,
                reference: Trace | None = None) -> TargetResult:
    """Check the TTFS ``graph`` made of ``source`` on ``inputs`` ``[T, B, ...]``; the report's ``ttfs`` object.

    ``reference`` may pass the interpreter's run of ``graph`` on ``inputs`` (``record="all"``) already made.
    """
    start = time.perf_counter()
    o = resolve(options)
    tol = float(o["tolerance"])
    data = data_sets(model, inputs, o)
    ann, ln_records, net = decompose(source, data.calibration, o)
    plan = assign_ttfs_timing(ann, data.calibration, **timing_options(o))
    if not _same_graph(plan.graph, graph):
        raise NotEquivalent("the TTFS graph is not the one timing assignment makes of this ANN with these options",
                            where="TTFS verification",
                            remedy="this is a compiler bug (a non-deterministic mapping): report it with the model")
    runs = simulate_sets(plan, source, ann, data, exact=not ln_records)
    checks = set_checks(runs, tol)
    if reference is None:  # the IR on the verification inputs, one step of T * B samples
        reference = run(graph, data.sets["verification"])
    ir_vs_sim = ir_vs_simulator(plan, reference, runs.sims["verification"])
    discrete = figures.discrete_table(runs, o)
    spikes = figures.spike_counts(plan, runs.sims[data.base])
    worst = {k: max(c[k] for c in checks.values()) for k in ("max_abs_error", "max_rel_window_error")}
    ok = (worst["max_rel_window_error"] <= tol and spikes["max_spikes_per_neuron"] <= 1 and ir_vs_sim <= tol
          and checks["verification"]["outputs_vs_ann"]["max_rel_error"] <= tol)
    report = {
        "exact": not ln_records,
        "verified": ok,
        "coding": sorted({l.coding for l in plan.layers}),
        "tau_c": plan.tau, "window": float(o["window"]), "headroom": float(o["headroom"]),
        "max_abs_error": worst["max_abs_error"],
        "max_rel_window_error": worst["max_rel_window_error"],
        "tolerance": tol,
        "clipped_fraction": sum(c["clipped_fraction"] * c["neuron_evaluations"] for c in checks.values())
        / max(sum(c["neuron_evaluations"] for c in checks.values()), 1),
        "spikes_per_neuron": spikes["spikes_per_neuron"],
        "max_spikes_per_neuron": spikes["max_spikes_per_neuron"],
        "latency": plan.latency,
        "ir_vs_simulator_max_rel_window_error": ir_vs_sim,
        "calibration": {"samples": int(data.calibration.shape[1]),
                        "source": ("model.calibration_data() + " if data.from_model else "")
                        + "the verification inputs"},
        "checks": checks,
        "discrete": discrete,
        "spikes": spikes,
        "energy": figures.energy(spikes, o),
        "accuracy": figures.accuracy_table(runs, discrete, exact=not ln_records),
        "approximations": figures.approximations(runs, ln_records, net),
        "layers": figures.layer_rows(plan, runs.sims[data.base]),
        "delays": figures.delays(plan),
        "products": figures.products(plan),
        "seconds": round(time.perf_counter() - start, 3),
    }
    return TargetResult(report, ok)
