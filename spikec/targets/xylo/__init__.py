"""Xylo target (``--target xylo``): the deployed graph on SynSense's Xylo Audio 2 (SYNS61201), checked bit for bit
against the vendor's own simulator.

Chips (``limits.py``): Xylo Audio 2 by default; Xylo Audio 3 and Xylo IMU through the target option ``xylo_chip``
(Rockpool simulates both with ``syns63300.XyloSim``, on the same core).

Pipeline, one parameter name throughout (Rockpool's ``XyloSim.from_specification`` keywords):
``mapper.py`` (graph -> input, hidden and output layers in float; refuses by name what does not fit the chip's
limits in ``limits.py``) -> ``quantize.py`` (8-bit weights with a shift per matrix, bit-shift decays, 16-bit
thresholds and biases) -> ``xylo/spec.npz`` -> Rockpool's ``XyloSim`` (``xylosim.v2``, SynSense's C++
bit-accurate core) and spikec's own integer reference (``reference.py``, numpy, written apart from Rockpool),
compared on every recorded state of every sample (``bit_exact``). ``xylo/io.npz`` holds the input raster fed
([B, T + 1, C] event counts: one empty step more, as the chip's output lags a step) and what XyloSim recorded.
Rebuild the simulator by hand::

    XyloSim.from_specification(**np.load("OUTDIR/xylo/spec.npz"))

The float network and the chip differ by construction (reset timing, several spikes a step, floored leaks,
rounding): their agreement is reported as ``float_vs_fixed`` and labelled approximate, never claimed exact; a
decay rounded to a shift has its own share measured (``decays.py``). A network of ``spikec.nn.xylo`` modules,
whose forward is the chip's arithmetic, skips mapper and quantizer (``exact.py``): its integers are the spec, and
XyloSim is compared with the source's own states (``bit_exact_vs_source``). ``energy.py``: the energy per
inference, an estimate from SynSense's published figure (``limits.ENERGY``).
"""
import time
from pathlib import Path

import numpy as np

from spikec.ir.errors import BadInput
from spikec.core.interpreter import Trace
from spikec.ir.graph import Graph
from spikec.targets import TargetResult, register_target
from spikec.targets.xylo import decays, energy, exact, simulate
from spikec.targets.xylo._shim import shimmed
from spikec.targets.xylo.limits import CHIPS, DEFAULT_CHIP, Chip
from spikec.targets.xylo.mapper import FORM, map_graph
from spikec.targets.xylo.quantize import SPEC_KEYS, Quantized, to_integers

SPEC_FILE, IO_FILE = "xylo/spec.npz", "xylo/io.npz"


def chip_of(options: dict) -> Chip:
    """The chip of ``options['xylo_chip']`` (Xylo Audio 2 by default), or a BadInput listing the chips."""
    name = (options or {}).get("xylo_chip", DEFAULT_CHIP)
    if not isinstance(name, str) or name not in CHIPS:
        known = ", ".join(f"{k} ({c.name})" for k, c in CHIPS.items())
        raise BadInput(f"Xylo chip {name!r} is not known: spikec maps onto {known}", where="option xylo_chip",
                       remedy=f"choose one of: {', '.join(CHIPS)} (default {DEFAULT_CHIP})")
    return CHIPS[name]


def build(graph: Graph, inputs, chip: Chip):
    """(mapped, quantized, rasters) of ``graph``: what the target writes and runs. A network of
    ``spikec.nn.xylo`` modules is not mapped nor quantized (``mapped`` None): its integers are the spec."""
    if exact.applies(graph):
        spec = exact.spec_of(graph, chip)
        q = Quantized(spec, {"none": "every population is a spikec.nn.xylo module: its integers as they are"})
        return None, q, simulate.raster(inputs, spec["weights_in"].shape[0], f"input {graph.inputs[0].name!r}",
                                       chip["max_input_events_per_step"])
    exact.refuse_mixed(graph)
    mapped = map_graph(graph, chip)
    q = to_integers(mapped, chip)
    return mapped, q, simulate.raster(inputs, mapped.n_in, f"input {mapped.input!r}", chip["max_input_events_per_step"])


def resources(spec: dict, chip: Chip) -> dict:
    w_in, w_rec, w_out = (np.asarray(spec[k]) != 0 for k in ("weights_in", "weights_rec", "weights_out"))
    used = {"inputs": w_in.shape[0], "hidden_neurons": w_rec.shape[0], "output_neurons": w_out.shape[1]}
    return {**{k: {"used": v, "of": chip[k]} for k, v in used.items()},
            "synapses": {"input": int(w_in.sum()), "recurrent": int(w_rec.sum()), "output": int(w_out.sum())},
            "max_hidden_fan_in": int((w_in.sum(0) + w_rec.sum(0)).max(initial=0)),
            "max_hidden_fan_out": int((w_rec.sum(1) + w_out.sum(1)).max(initial=0)),
            "synaptic_states_used_per_hidden_neuron": 1,
            "synapses_total": int(w_in.sum() + w_rec.sum() + w_out.sum()),
            "weights": {"nonzero": int(w_in.sum() + w_rec.sum() + w_out.sum()),
                        "stored": int(w_in.size + w_rec.size + w_out.size), "bits_each": chip["weight_bits"]},
            "not_checked": "the chip's memory layout and fan-out rules live in samna's validator "
                           "(not installed here); spikec checks the neuron counts above"}


def _io_writer(rasters: np.ndarray, runs: list[dict], chip: str):
    def write(path: Path) -> None:
        np.savez(path, chip=np.array(chip), input=rasters, output=np.stack([r["out"] for r in runs]),
                 hidden_spikes=np.stack([r["spikes"] for r in runs]),
                 vmem_out=np.stack([r["vmem_out"] for r in runs]))
    return write


def summary(r: dict) -> str:
    res = r["resources"]
    if r["exact_source"]:
        second = (f"bit_exact_vs_source {str(r['bit_exact_vs_source']).lower()}: XyloSim against the source's own "
                  f"forward (spikec.nn.xylo, no quantization), {r['values_compared_vs_source']} values")
    else:
        f = r["float_vs_fixed"]
        second = (f"float vs fixed (approximate): output spikes {100 * f['output_spike_agreement']:.1f}%, "
                  f"hidden {100 * f['hidden_spike_agreement']:.1f}% agree")
    e = r["energy"]
    joules = f", energy ~{e['estimate_uJ']:.2f} uJ/inference (estimate)" if "estimate_uJ" in e else ""
    return (f"xylo: bit_exact {str(r['bit_exact']).lower()}: XyloSim (xylosim.v2) vs spikec's integer reference, "
            f"{r['values_compared']} values over {r['samples']} samples x {r['steps']} steps\n"
            f"             {second}\n"
            f"             {r['chip']}: {res['inputs']['used']}/{res['inputs']['of']} inputs, "
            f"{res['hidden_neurons']['used']}/{res['hidden_neurons']['of']} hidden, "
            f"{res['output_neurons']['used']}/{res['output_neurons']['of']} output neurons, "
            f"{res['synapses_total']} synapses{joules}")


def _versus_source(graph, inputs, reference, mapped, q, sim_runs) -> dict:
    """The exact path: XyloSim against the source's own states; else the float-vs-fixed agreement (approximate),
    the decays' share of it and why the source is not the chip."""
    if mapped is None:
        hid, out = exact.layer_names(graph)
        x = inputs if not isinstance(inputs, dict) else next(iter(inputs.values()))
        return {**exact.vs_source(sim_runs, exact.source_runs(graph, x)), "exact_source": True,
                "layers": {"hidden": hid, "output": out, "linears": []}}
    reasons = simulate.approximations(mapped, q.report)
    return {"exact_source": False, "bit_exact_vs_source": False,
            "vs_source": "approximate (quantized: see float_vs_fixed): not every population is a spikec.nn.xylo "
                         "module; " + reasons[0],
            "float_vs_fixed": simulate.agreement(sim_runs, reference.values[mapped.hidden.node],
                                                 reference.values[mapped.output.node], reasons),
            "decay_rounding": decays.effect(graph, inputs, reference, mapped, q.report),
            "layers": {"hidden": mapped.hidden.node, "output": mapped.output.node, "linears": list(mapped.linears)}}


def xylo_target(graph: Graph, inputs, reference: Trace, options: dict) -> TargetResult:
    start = time.perf_counter()
    chip_key = (options or {}).get("xylo_chip", DEFAULT_CHIP)
    chip = chip_of(options)
    mapped, q, rasters = build(graph, inputs, chip)
    sim_runs = simulate.xylosim_runs(q.spec, rasters, chip.sim_module)
    check = simulate.compare_runs(sim_runs, simulate.reference_runs(q.spec, rasters))
    versus = _versus_source(graph, inputs, reference, mapped, q, sim_runs)
    from importlib.metadata import version
    report = {
        "name": "xylo", "chip": chip.name, "form": exact.FORM if mapped is None else FORM, "files": [SPEC_FILE, IO_FILE],
        "rebuild": f'XyloSim.from_specification(**np.load("xylo/spec.npz"))  # XyloSim of {chip.sim_module}',
        "chip_option": "options['xylo_chip']: " + ", ".join(CHIPS) + f" (default {DEFAULT_CHIP})",
        "simulator": f"rockpool {version('rockpool')} {chip.sim_module}.XyloSim on xylosim "
                     f"{version('xylosim')} (xylosim.v2, C++)",
        "samna": "not installed: rockpool.devices.xylo entered without its samna-only modules (_shim.py)"
                 if shimmed() else "installed: Rockpool imported as it is",
        "bit_exact": check["bit_exact"],
        "compared": "XyloSim vs spikec's integer reference (reference.py): hidden spike counts, Isyn, Vmem, "
                    "output spikes, Isyn_out, Vmem_out, every step of every sample",
        **{k: check[k] for k in ("samples", "values_compared", "first_mismatches")},
        "steps": int(rasters.shape[1]), **versus, "quantization": q.report, "resources": resources(q.spec, chip),
        "limits": chip.table(), "energy": energy.estimate(chip_key, sim_runs, rasters.shape[1], float(q.spec["dt"])),
    }
    ok = bool(check["bit_exact"]) and (mapped is not None or bool(report["bit_exact_vs_source"]))
    report["equivalent"] = ok
    report["summary"] = summary(report)
    report["seconds"] = round(time.perf_counter() - start, 3)
    files = {SPEC_FILE: lambda path: np.savez(path, **q.spec), IO_FILE: _io_writer(rasters, sim_runs, chip_key)}
    return TargetResult(report, ok, files)


def verify_outdir(outdir, graph: Graph, inputs, reference: Trace) -> dict:
    """``spikec verify``: the written spec is the graph's, XyloSim rebuilt from it reproduces ``io.npz`` and agrees
    with spikec's reference bit for bit; a missing or unreadable file fails."""
    out = Path(outdir)
    try:
        with np.load(out / SPEC_FILE) as z:
            spec = {k: z[k] for k in z.files}
        with np.load(out / IO_FILE) as z:
            io = {k: z[k] for k in z.files}
    except Exception as e:  # missing or truncated: not equivalent, with the reason
        return {"equivalent": False, "error": f"{out / 'xylo'} does not load: {type(e).__name__}: {e}"}
    if sorted(spec) != sorted(SPEC_KEYS):
        return {"equivalent": False, "error": f"{SPEC_FILE} holds {sorted(spec)}, not {sorted(SPEC_KEYS)}"}
    key = str(io["chip"]) if "chip" in io else ""
    if key not in CHIPS:
        return {"equivalent": False, "error": f"{IO_FILE} names chip {key!r}; known: {', '.join(CHIPS)}"}
    chip = CHIPS[key]
    _, q, rasters = build(graph, inputs, chip)
    spec_same = all(np.array_equal(np.asarray(spec[k]), np.asarray(q.spec[k])) for k in SPEC_KEYS)
    raster_same = np.array_equal(io.get("input"), rasters)
    runs = simulate.xylosim_runs(spec, io["input"], chip.sim_module)
    reproduces = np.array_equal(np.stack([r["out"] for r in runs]), io.get("output"))
    check = simulate.compare_runs(runs, simulate.reference_runs(spec, io["input"]))
    result = {"chip": chip.name, "spec_matches_graph": spec_same, "input_is_the_recorded_one": bool(raster_same),
              "rebuilt_xylosim_reproduces_io": bool(reproduces), "bit_exact": check["bit_exact"],
              "first_mismatches": check["first_mismatches"]}
    if not raster_same:   # other inputs than the compile's: io.npz checked on its own raster, the chip also on these
        other = simulate.compare_runs(simulate.xylosim_runs(spec, rasters, chip.sim_module),
                                      simulate.reference_runs(spec, rasters))
        result["bit_exact_on_these_inputs"] = other["bit_exact"]
        result["first_mismatches"] += other["first_mismatches"]
    if exact.applies(graph):   # spikec.nn.xylo modules: the chip against the source's own forward, as compiled
        x = inputs if not isinstance(inputs, dict) else next(iter(inputs.values()))
        vs = exact.vs_source(simulate.xylosim_runs(spec, rasters, chip.sim_module), exact.source_runs(graph, x))
        result["bit_exact_vs_source"] = vs["bit_exact_vs_source"]
        result["first_mismatches"] += vs["first_mismatches_vs_source"]
    result["equivalent"] = bool(spec_same and reproduces and check["bit_exact"]
                                and result.get("bit_exact_on_these_inputs", True)
                                and result.get("bit_exact_vs_source", True))
    return result


register_target("xylo", xylo_target, verify=verify_outdir)
