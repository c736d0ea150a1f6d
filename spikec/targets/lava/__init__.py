"""The Lava (Loihi 2) target: fixed-point quantization, Lava process emission, bit-exact verification.

Pipeline (``compile_lava``), on the deployed float graph and the verification inputs:

0. ``products.placed``: products of two activations placed (``products.py``): binary x binary as on-chip AND
   neurons (Lava's LIF, ``and_neurons.py``), the rest on host partitions; window sums as all-equal Conv windows; checked by running
   the rewritten float graph against the original (``report.products``).

1. ``quantize``: the float graph -> an integer IR graph of ``lava_*`` ops (``ops.py``), scales from
   the weights and lowered by calibration on the inputs until states keep headroom; overflow or
   saturation in the integer reference is counted and reported, never silent. This integer graph,
   run exactly (int64) by the reference interpreter, is the *integer reference*. Populations: LIF
   (Lava's or the custom SpikecLIF), the integer-firing neuron (graded payload, or unrolled into D
   binary sub-steps), SiLIF / CSiLIF (custom, 12-bit decays: approximate), OR layers for max pooling,
   read-outs; several synaptic streams may feed one population (residual sums, the TDM dual kernel,
   ``Delay`` nodes); dense float ops run on host partitions (``host.py``).
2. ``lower.lower``: the integer graph -> a process network (``lava/network.json`` + ``lava/params.npz``,
   Lava layouts, traps handled), then ``simulate.run_lava`` builds it in Lava (``build.py``) and runs it in
   ``Loihi2SimCfg(select_tag="fixed_pt")``.
3. ``compare.compare``: every spike and read-out value at every step (latency accounted explicitly),
   and the final ``v``, ``u`` of every population, bit for bit.
4. Float vs fixed agreement per layer and on the outputs (approximate by nature: measured, labelled),
   resource estimate, and ``model.net`` (netx HDF5) when the graph is within netx's vocabulary.
5. ``selfcheck.run_checks``: the deployment against its float graph -- weights round-to-nearest at their
   scales as Lava applies them, read-outs within a stated bound of the float source, every population
   started at the Lava step its producers imply -- faults the integer reference and Lava would share,
   so bit-exactness cannot see them; a failure makes the target fail (``quantization_checks``).
6. ``chip.add_to_report``: ``chip_ready`` and ``why`` per process (a standard Lava process whose Loihi 2 model
   is in Intel's closed lava-loihi, or a custom spikec process with CPU models only), counted in
   ``chip_readiness``, with ``blocking``: per CPU-only process why and what would make it chip-ready, one summary
   line each (``chip blocker: ...``) before the count's line.

Artifacts: ``lava/quantized/`` (the integer reference IR), ``lava/network.json``, ``lava/params.npz``,
``model.net``. ``spikec verify OUTDIR`` re-runs Lava from those files (``verify_lava``).
Lava itself is imported lazily (``_shim.import_lava``), so quantization works without it.
"""
import json
import time
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from spikec.ir.errors import BadInput
from spikec.core.interpreter import run
from spikec.core.serialize import load_graph, save_graph
from spikec.targets import TargetResult, register_target
from spikec.targets.lava import (chip, chip_variant, cores, count_ladder, current_bias, current_reset, over_time,
                                products, standard_readout)
from spikec.targets.lava import ops as _ops  # noqa: F401  (defines the lava_* ops)
from spikec.targets.lava.compare import compare
from spikec.targets.lava.limits import int_inputs
from spikec.targets.lava.lower import POPULATION_TYPES, load_network, lower, save_network
from spikec.targets.lava.ops import ladder_counts, with_readouts
from spikec.targets.lava.quantize import quantize
from spikec.targets.lava.resources import agreement, partitions, resources
from spikec.targets.lava.selfcheck import run_checks
from spikec.targets.lava.simulate import run_lava
from spikec.targets.lava.standard_readout import readouts_ok
from spikec.targets.lava.written import LavaDir, NetxFile, network_differences


def _int_inputs(graph, inputs) -> dict:
    return int_inputs(graph, inputs)   # refuses, by node, what int64 / Lava's 24 bits cannot hold


def lava_available() -> str | None:
    """None when Lava imports here, else the reason."""
    try:
        from spikec.targets.lava._shim import import_lava
        import_lava()
        import lava.proc.lif.process  # noqa: F401
    except Exception as e:  # ImportError, or lava failing on this Python
        return f"{type(e).__name__}: {e}"
    return None


def deploy(graph, inputs, options=None):
    """Quantize and lower ``graph``: ``(quantized, network, arrays)`` (no Lava needed)."""
    options = options or {}
    graph = products.prepare(graph).graph   # products placed: AND populations, all-equal windows, host ops
    requantize = partial(quantize, graph, options.get("calibration", inputs),
                         headroom_bits=options.get("headroom_bits", 1))
    q = requantize(vth_override=options.get("vth_override"), bias_unit=options.get("bias_unit", 1))
    if options.get(chip_variant.OPTION) != "subtract":   # lava_reset='subtract': SpikecLIF, SpikecIntFire
        q = _membrane_in_u(q, requantize, options.get("vth_override") or {}, options.get("lava_ladders", True))
    net, arrays = lower(q.graph)
    kinds = {p["name"]: p["type"] for p in net["processes"]}
    integrators = {p["name"]: p for p in net["processes"] if p.get("integrator")}
    refused = {p["name"]: p["current_bias_refused"] for p in net["processes"] if p.get("current_bias_refused")}
    biased = {p["name"]: p["current_bias"] for p in net["processes"] if isinstance(p.get("current_bias"), dict)}
    for layer in q.layers:
        if layer.name in refused:   # current_bias.py: no exact bias Dense
            layer.info.update(process="SpikecLIF", lowered_as="SpikecLIF: its current bias stays in the custom "
                                                              f"process because {refused[layer.name]}")
            continue
        if layer.name in biased:
            layer.info["current_bias"] = (f"bias_u in [{biased[layer.name]['bias_u'][0]}, "
                                          f"{biased[layer.name]['bias_u'][1]}] through "
                                          f"{', '.join(biased[layer.name]['synapses'])} from the always-firing LIF "
                                          f"{biased[layer.name]['source']}")
        if layer.name in integrators:   # standard_integrator.py: proven never to fire, Lava's LIF
            p = integrators[layer.name]
            layer.info.update(process="LIF", lowered_as=f"Lava's LIF (vth = {p['vth']}, never reached: v in "
                                                        f"[{p['v_bound'][0]}, {p['v_bound'][1]}] on any input), "
                                                        "its v read by Lava's Monitor each step")
        if layer.info.get("process") == "LIF" and kinds.get(layer.name) == "SpikecLIF":
            layer.info.update(process="SpikecLIF", lowered_as=f"SpikecLIF: Lava's LIF updates every Lava step, the "
                                                           f"sub-step schedule ({net['period']} Lava steps per "
                                                           "physical step) needs the custom process")
    return q, net, arrays


def _membrane_in_u(q, requantize, override: dict, with_ladders: bool = True):
    """Subtract resets on Lava's LIF with the membrane in u (current_reset.py): ``q`` quantized again, when any
    population takes it, with biases in whole weight LSBs and each such population's ``vth`` an 8-bit mantissa (its
    self-synapse weight); its graph that form, ``q.exact`` the carry-free integer graph of the same weights,
    thresholds and biases, measured against it."""
    from dataclasses import replace
    ladder = count_ladder.apply if with_ladders else (lambda g: (g, [], {}))   # False: spikec before them (verify)
    want = {k: v for k, v in {**current_reset.candidates(q.graph),
                              **(count_ladder.candidates(q.graph) if with_ladders else {})}.items()
            if k not in override}
    if want:
        q = requantize(vth_override={**override, **want}, bias_unit=64)
    graph, changed, refused = current_reset.apply(q.graph)
    graph, ladders, kept = ladder(graph)
    lost = set(want) - set(changed) - set(ladders)
    if lost:   # refused once quantized (a bias rescaled with vth): its threshold back as calibrated, once more
        q = requantize(vth_override={**override, **{k: v for k, v in want.items() if k not in lost}}, bias_unit=64)
        graph, changed, refused = current_reset.apply(q.graph)
        graph, ladders, kept = ladder(graph)
    count_ladder.annotate(q.layers, graph, ladders, kept)
    for layer in q.layers:
        if layer.name in changed:
            if int(q.graph.node(layer.name).params["dv"]) == 0:
                layer.info.setdefault("notes", []).append(current_reset.BETA_ONE)
            if layer.info.get("state_reads"):   # read from Lava's u, the membrane there
                layer.info["state_reads"] = {k: "integer u (the membrane, in Lava's current; ~ 64 s U), read by Lava's "
                                                "Monitor" for k in layer.info["state_reads"]}
            layer.info.update(process="LIF", lowered_as="Lava's LIF with the membrane in u (du = dv - 1, dv = 4095, "
                                                        "a -vth diagonal Sparse self-synapse; current_reset.py): its "
                                                        "integer arithmetic carries trunc(v / 4096) between steps")
        elif layer.name in refused:
            layer.info["membrane_in_u_refused"] = refused[layer.name]
    return replace(q, graph=graph, exact=q.graph if changed or ladders else None,
                   variant={"changed": changed, "refused": refused, "ladders": ladders, "ladders_refused": kept})


def choose_deployment(graph, inputs, options) -> tuple:
    """``(quantized, network, arrays, netx note)`` as the target deploys ``graph`` calibrated on ``inputs``."""
    from spikec.targets.lava import netx
    q, net, arrays = deploy(graph, inputs, options)
    if not netx.export_info(q.graph)["exportable"] and not netx.structural_blocking(q.graph):
        # netx can carry this graph once biases are whole weight LSBs (its bias exponent is fixed at 6)
        q, net, arrays = deploy(graph, inputs, dict(options, bias_unit=64))
        return q, net, arrays, "biases rounded to whole weight LSBs (multiples of 64) so that netx can carry them"
    return q, net, arrays, None


def compile_lava(graph, inputs, reference, options) -> TargetResult:
    from spikec.targets.lava import exact_source, netx
    from spikec.targets.lava.ttfs import is_ttfs
    if is_ttfs(graph):   # --coding ttfs: the discretised TTFS network (ttfs.py, ttfs_target.py)
        from spikec.targets.lava.ttfs_target import compile_ttfs_lava
        return _readable(compile_ttfs_lava(graph, inputs, reference, options))
    if exact_source.applies(graph):   # only spikec.nn.loihi modules: their integers, checked against the source
        result = exact_source.compile_exact(graph, inputs, reference, options)
        _chip_ready(result, graph)
        return _readable(result)
    start = time.perf_counter()
    graph, reference, variant, readouts, placed = _prepared(graph, inputs, reference, options)
    q, net, arrays, netx_note = choose_deployment(graph, inputs, options)
    x = _int_inputs(q.graph, inputs)
    t_ref = time.perf_counter()
    trace = run(with_readouts(q.graph), x, integer=True)
    ref_s = time.perf_counter() - t_ref
    lava = run_lava(net, arrays, x)
    steps = next(iter(x.values())).shape[0]
    result = compare(net, trace, lava, steps)
    # Lava matched the integer reference of the rewritten graph: exact to the given graph only if the rewrite is
    exact = result["bit_exact"] and products.proven(placed)
    checks = run_checks(graph, q.graph, net, arrays, trace, reference)
    netx_info = netx.export_info(q.graph)
    if netx_note:
        netx_info["note"] = netx_note
    if netx_info["exportable"]:
        netx_info["verification"] = _verify_netx(q.graph, x, options.get("netx_samples", 1))
    kinds = {p["name"]: p["type"] for p in net["processes"]}
    report = {
        "name": "lava",
        "bit_exact": exact,
        "compared_with": "the integer reference (lava/quantized, run exactly in int64 by the reference interpreter)"
                         + ("; products placed: of the rewritten graph, proven against the given one "
                            "(products.rewrite_check)" if placed else ""),
        "simulator": "Lava 0.10.0 Loihi2SimCfg(select_tag='fixed_pt')",
        "claim": net["claim"],
        **{k: result[k] for k in ("steps_compared", "spikes_compared", "graded_payloads_compared", "values_compared",
                                  "host_values_compared", "states_compared", "state_reads_compared",
                                  "pre_latency_values_checked",
                                  "mismatch_counts", "first_divergent_layer", "first_mismatches")},
        "sim_seconds": lava["sim_seconds"], "build_seconds": lava["build_seconds"],
        "reference_seconds": round(ref_s, 3), "lava_steps": lava["steps"],
        "batch": {"samples": int(next(iter(x.values())).shape[1]), "per_network": lava["batch_chunk"],
                  "networks_run": lava["chunks"],
                  "how": "samples side by side: conv populations fold the batch into channels (groups x B), "
                         "dense ones into blocks (block-diagonal weights)"},
        "latency": {p["name"]: p["latency"] for p in net["processes"] if p["type"] in POPULATION_TYPES + ("Host",)},
        "latency_rule": "each Lava synapse process delivers one Lava step later; host processes, relays and direct "
                        "connections in the same step. A population with start L (its latency) runs physical step t "
                        "at Lava step L + t*P + 1 (1-based), P Lava steps per physical step; it adds up its input "
                        "port over each period; streams arriving earlier are delayed to arrive together (DelayDense, "
                        "Relay). Its bias starts with its first update. Values compared at their Lava steps, silence "
                        "required at every other step up to the last compared one; final states read after the last "
                        "update (Lava step L + (T-1)*P + 1)",
        "schedule": {"lava_steps_per_physical_step": net["period"],
                     "why": "unrolled integer neurons replay their count as binary spikes over D Lava sub-steps; "
                            "each physical step is P = max D Lava steps" if net["period"] > 1 else
                            "one Lava step per physical step (no unrolled integer neuron)",
                     "starts": {p["name"]: p["start"] for p in net["processes"] if "start" in p}},
        "processes": [{"name": p["name"], "type": p["type"], "latency": p["latency"]} for p in net["processes"]
                      if "latency" in p],
        "lowering": {l.name: {"kind": l.kind, "process": kinds.get(l.name, l.info.get("process")),
                              "lowering": l.info.get("lowering"), "streams": len(l.streams)} for l in q.layers},
        "partitions": partitions(net),
        "quantization": {"layers": {l.name: {"synapse": l.synapse, **l.info} for l in q.layers},
                         "calibration": q.calibration, "notes": q.notes},
        "overflow": q.calibration["overflow"],
        "quantization_checks": checks,
        "pooling": "avgpool2d has no Lava process: each one is folded exactly (in real arithmetic) into the "
                   "adjacent conv2d/linear before quantization (see quantization.notes); maxpool2d over binary "
                   "spikes is an OR layer (all-ones depthwise Conv into a LIF firing when a > 0), exact",
        "float_vs_fixed": agreement(graph, reference, q, SimpleNamespace(values=ladder_counts(q.graph,
                                                                                                  trace.values))),
        "resources": resources(net, arrays),
        "netx": netx_info,
        "seconds": round(time.perf_counter() - start, 3),
    }
    if placed:
        report["products"] = products.report(placed, q.graph, net, trace, lava)
    report["placement"], placement = cores.for_deployment(net, arrays, trace.values)   # a plan, not in the verdict
    report.update(exact_source.float_report_fields(graph))
    report["summary"] = _summary(report) + "\n             bit_exact_vs_source false: " + report["vs_source"]
    if placed:
        report["summary"] += "\n             " + products.line(report["products"])
    report["summary"] += "\n             " + cores.line(report["placement"])
    files = {"lava": LavaDir(lambda p: _write_lava_dir(p, q.graph, net, arrays, placement), q.graph, net, arrays,
                             read_lava)}
    if netx_info.get("exportable"):
        files["model.net"] = NetxFile(q.graph)
    netx_ok = not netx_info.get("exportable") or netx_info["verification"].get("bit_exact") is not False
    _reset_forms(report, q, variant, x, trace)
    over_time.add_to_report(report, net, readouts)
    standard_readout.add_to_report(report, net, q.graph, trace)
    biases = current_bias.add_to_report(report, net, arrays, q.graph)
    chip.add_to_report(report, net, arrays)
    return TargetResult(report, exact and netx_ok and checks["ok"] and variant is None
                        and readouts_ok(report.get("standard_readouts")) and biases, files)


def _reset_forms(report: dict, q, variant, x: dict, trace) -> None:
    """The zero-reset variant's measured disagreement, and the subtract resets with the membrane in u against their
    carry-free form (``report["membrane_in_u"]``) and the count ladders against the integer-firing neuron
    (``report["count_ladders"]``), both against one run of ``q.exact``, each with its summary line."""
    if variant is not None:
        report["approximate_variant"] = variant
        report["summary"] += "\n             " + chip_variant.line(variant)
    if q.exact is None:
        return
    ref = run(q.exact, x, integer=True).values
    if q.variant["changed"]:
        report["membrane_in_u"] = current_reset.measure(q.exact, q.graph, q.variant["changed"], q.variant["refused"],
                                                        ref, trace)
        report["summary"] += "\n             " + current_reset.line(report["membrane_in_u"])
    if q.variant.get("ladders"):
        report["count_ladders"] = count_ladder.measure(ref, q.graph, q.variant["ladders"],
                                                       q.variant["ladders_refused"], trace)
        report["summary"] += "\n             " + count_ladder.line(report["count_ladders"])


def _prepared(graph, inputs, reference, options) -> tuple:
    """``(graph, reference, variant, readouts, placed)``: what the target deploys of ``graph``: the chip-ready
    variant asked for (``_variant``), its read-outs over time of spikes split off to the host (``over_time``), its
    products placed (``products.placed``)."""
    graph, reference, variant = _variant(graph, inputs, reference, options)   # lava_reset='zero': approximate
    graph, readouts = over_time.split(graph)
    graph, reference, placed = products.placed(graph, inputs, reference)
    return graph, reference, variant, readouts, placed


def _variant(graph, inputs, reference, options) -> tuple:
    """``(graph, reference, None)``, or with ``lava_reset='zero'`` the zero-reset variant, its float run and its
    measured disagreement (``chip_variant.py``); any other value of the option is refused."""
    choice = options.get(chip_variant.OPTION)
    if choice in (None, "subtract", current_reset.VALUE):   # the reset's integer form is chosen by deploy()
        return graph, reference, None
    if choice != "zero":
        raise BadInput(f"{chip_variant.OPTION}={choice!r} is not a Lava reset option",
                       remedy=f"{chip_variant.OPTION}='subtract' (spikec's SpikecLIF, CPU only), 'zero' (the "
                              "approximate zero-reset variant) or leave it unset (Lava's LIF, the membrane in u)")
    variant, changed = chip_variant.zero_reset(graph)
    if not changed:   # no subtract reset, floor or pool to change: the deployment is the exact one
        return graph, reference, None
    measured = chip_variant.measure(graph, variant, changed, inputs, reference)
    return variant, measured.pop("trace"), measured


def _readable(result: TargetResult) -> TargetResult:
    """``result`` with its ``lava/`` writer reading itself back through ``read_lava``."""
    from dataclasses import replace
    lava = result.files.get("lava")
    if isinstance(lava, LavaDir) and lava.read is None:
        result.files["lava"] = replace(lava, read=read_lava)
    return result


def _chip_ready(result: TargetResult, graph) -> None:
    """``chip_ready`` per process and the summary line (``chip.py``) of an exact-source deployment."""
    from spikec.targets.lava import exact_source
    net, arrays = lower(exact_source.integer_graph(graph))   # the network compile_exact wrote (deterministic)
    chip.add_to_report(result.report, net, arrays)


def _summary(r: dict) -> str:
    """One line for the CLI: the verdict, what was compared, agreement with the float source, netx."""
    agree = []
    for name, a in r["float_vs_fixed"]["per_layer"].items():
        if "spike_agreement" in a:
            agree.append(f"{name} {100 * a['spike_agreement']:.1f}%")
        elif "class_agreement" in a:
            agree.append(f"{name} classes {100 * a['class_agreement']:.1f}%")
        if "state_max_rel_error" in a:
            agree.append(f"{name} state within {100 * a['state_max_rel_error']:.1f}% of its peak")
    nx = r["netx"]
    blocking = sorted({b["node"] for b in nx["blocking_nodes"]})
    netx_text = ("model.net written, netx load " + ("bit-exact" if nx["verification"].get("bit_exact") else
                 "NOT bit-exact" if nx["verification"].get("bit_exact") is False else "skipped")
                 if nx["exportable"] else
                 f"no model.net ({', '.join(blocking[:6])}{f' and {len(blocking) - 6} more' if len(blocking) > 6 else ''}"
                 " outside netx)")
    extra = []
    if r["graded_payloads_compared"]:
        extra.append(f"{r['graded_payloads_compared']:,} of them graded payloads")
    if r["host_values_compared"]:
        extra.append(f"{r['host_values_compared']:,} host values among the read-out values "
                     f"({len(r['partitions']['host'])} host partition(s))")
    if r["schedule"]["lava_steps_per_physical_step"] > 1:
        extra.append(f"{r['schedule']['lava_steps_per_physical_step']} Lava steps per physical step")
    if r["state_reads_compared"]:
        extra.append(f"{r['state_reads_compared']:,} state values recorded as outputs (v, membranes)")
    return (f"lava: bit_exact {str(r['bit_exact']).lower()} vs the integer reference: {r['spikes_compared']:,} spikes, "
            f"{r['values_compared']:,} read-out values, {r['states_compared']:,} final states over "
            f"{r['steps_compared']} steps (Lava fixed_pt sim {r['sim_seconds']:.2f} s)"
            + (f"\n             {'; '.join(extra)}" if extra else "")
            + ("; OVERFLOW in calibration" if r["overflow"] else "")
            + f"\n             self-checks: {_checks_line(r['quantization_checks'])}"
            + f"\n             float vs fixed (approximate): {', '.join(agree)}"
            + f"\n             netx: {netx_text}")


def _checks_line(c: dict) -> str:
    if not c["ok"]:
        return "FAILED: " + "; ".join(c["failures"][:3]) + (f" (and {len(c['failures']) - 3} more)"
                                                              if len(c["failures"]) > 3 else "")
    ro = [f"read-out {k} {v['max_error']:.3g} from the float source (bound {v['max_bound']:.3g})" if "max_error" in v
          else f"read-out {k} {v['max_quantization_error_lsb']:.3g} LSB (bound {v['max_quantization_bound_lsb']:.3g})"
          for k, v in c["readouts"]["per_layer"].items()]
    return "ok: " + "; ".join([f"weights round to nearest (max {c['weight_rounding']['max_error_lsb']:.4f} LSB)",
                               *ro, f"{c['schedule']['processes_checked']} starts minimal"])


def _verify_netx(qgraph, x, samples) -> dict:
    """Write model.net to a scratch file, load it with netx and compare it with its integer reference."""
    import shutil
    import tempfile
    from spikec.targets.lava import leftovers, netx
    scratch = Path(tempfile.mkdtemp(prefix=f"spikec-netx-{leftovers.new_tag()}-"))   # tagged: swept if killed
    try:
        netx.write(qgraph, scratch / "model.net")
        return netx.verify(qgraph, scratch / "model.net", next(iter(x.values())), samples)
    except ImportError as e:
        reason = f"lava-dl netx is not importable here ({type(e).__name__}: {e})"
        print(f"spikec lava target: netx load check skipped: {reason}")
        return {"loaded": False, "bit_exact": None, "skipped": reason}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _write_lava_dir(path: Path, qgraph, net, arrays, placement: dict | None = None) -> None:
    path = Path(path)
    (path / "quantized").mkdir(parents=True, exist_ok=True)
    save_graph(qgraph, path / "quantized")
    save_network(net, arrays, path)
    if placement is not None:
        (path / "placement.json").write_text(json.dumps(placement, indent=1))


def read_lava(path) -> tuple:
    """``lava/`` at ``path`` read as ``spikec.load`` and ``spikec verify`` read it: ``(integer reference graph, or
    None for a TTFS deployment, network.json, params.npz arrays)``; raises what those raise."""
    outdir = Path(path).parent
    deployed = load(outdir)   # spikec.load: the integer reference runs from these files (TTFS: checks params.npz)
    if isinstance(deployed, Deployed):
        return load_deployed(outdir)
    return None, *load_network(outdir / "lava", check_format=False)


def load_deployed(outdir) -> tuple:
    """``(integer reference graph, network, arrays)`` as written in ``outdir/lava``."""
    outdir = Path(outdir)
    if not (outdir / "lava" / "network.json").exists():
        raise BadInput(f"{outdir} holds no Lava deployment (lava/network.json)",
                       remedy="compile with --target lava")
    q = load_graph(outdir / "lava" / "quantized")
    net, arrays = load_network(outdir / "lava")
    return q, net, arrays


def verify_lava(outdir, graph, inputs, reference) -> dict:
    """Re-run the *written* Lava network on ``inputs`` and compare it bit for bit with the written
    integer reference; also check the network is the lowering of that reference."""
    from spikec.targets.lava.ttfs import is_ttfs
    if is_ttfs(graph):
        from spikec.targets.lava.ttfs_target import verify_ttfs_lava
        return verify_ttfs_lava(outdir, graph, inputs, reference)
    q, net, arrays = load_deployed(outdir)
    from spikec.targets.lava import exact_source
    if exact_source.applies(graph):  # spikec.nn.loihi modules: checked against the source, as compiled
        return exact_source.verify_exact(graph, inputs, q, net, arrays)
    written = _written_option(outdir)
    variant = written if written == "zero" else None
    if variant is not None:   # the network written is the variant's: re-checked against it, labelled approximate
        zeroed, changed = chip_variant.zero_reset(graph)
        if changed:
            graph, reference = zeroed, run(zeroed, inputs)
        else:   # a variant that changed nothing is the exact deployment (compile wrote that)
            variant = None
    graph, readouts = over_time.split(graph)
    result = _verify_written(outdir, graph, inputs, reference, q, net, arrays, readouts,
                             {chip_variant.OPTION: written} if written else {})
    if variant is not None:
        result["approximate"] = (f"chip-ready variant {chip_variant.OPTION}={variant!r}: Lava checked against the "
                                 "variant's own integer reference, not the given network (compile_verdict)")
    return result


def _written_option(outdir) -> str | None:
    """The ``lava_reset`` the compile that wrote ``outdir`` was given (report.json ``options``), or None."""
    try:
        return json.loads((Path(outdir) / "report.json").read_text()).get("options", {}).get(chip_variant.OPTION)
    except (OSError, ValueError, AttributeError):
        return None


def _verify_written(outdir, graph, inputs, reference, q, net, arrays, readouts=(), options=None) -> dict:
    """``verify_lava``'s checks of the written network against ``graph`` (the deployed one, or its variant, its
    read-outs over time split off: ``readouts``)."""
    x = _int_inputs(q, inputs)
    graph, reference, placed = products.placed(graph, inputs, reference)
    fresh_net, fresh = lower(q)
    if readouts:
        fresh_net[over_time.HOST_KEY] = list(readouts)
    lowered = [k for k in sorted(set(fresh) | set(arrays))
               if k not in fresh or k not in arrays or not np.array_equal(fresh[k], arrays[k])]
    lowered += network_differences(fresh_net, net)   # the document too, not only its arrays (a latency, a port)
    requantized = _requantized(outdir, graph, q, inputs, options or {})
    trace = run(with_readouts(q), x, integer=True)
    checks = run_checks(graph, q, net, arrays, trace, reference)
    lava = run_lava(net, arrays, x)
    result = compare(net, trace, lava, next(iter(x.values())).shape[0])
    netx_check = None
    if (Path(outdir) / "model.net").exists():
        from spikec.targets.lava import netx
        try:
            netx_check = netx.verify(q, Path(outdir) / "model.net", next(iter(x.values())), samples=1)
            netx_check.pop("netx_table", None)
        except ImportError as e:
            netx_check = {"loaded": False, "bit_exact": None, "skipped": f"{type(e).__name__}: {e}"}
    netx_ok = netx_check is None or netx_check.get("bit_exact") is not False
    placement = _placement_check(outdir, net, arrays, trace.values, requantized.get("equal") is not None)
    rewrite = next((r for r in placed.rewrites if "rewritten" in r), None) if placed else None
    readouts = standard_readout.measured(net, q, trace)
    biases = current_bias.check(net, arrays, q)
    return {"equivalent": result["bit_exact"] and not lowered and netx_ok and checks["ok"] and readouts_ok(readouts)
            and biases["ok"]
            and requantized.get("equal") is not False and products.proven(placed) and placement["ok"] is not False,
            "bit_exact": result["bit_exact"] and products.proven(placed), "netx": netx_check,
            "quantization_checks": checks, **({"products_rewrite_check": rewrite} if rewrite else {}),
            "quantized_rederived": requantized, "placement_check": placement,
            **({"standard_readouts": readouts} if readouts else {}),
            **({"current_biases": biases} if biases["per_population"] or not biases["ok"] else {}),
            "spikes_compared": result["spikes_compared"], "values_compared": result["values_compared"],
            "states_compared": result["states_compared"], "max_rel_diff": 0.0,
            "arrays_differing_from_lowering": lowered,
            "first_divergent_layer": result["first_divergent_layer"],
            "mismatch_counts": result["mismatch_counts"], "first_mismatches": result["first_mismatches"],
            "sim_seconds": lava["sim_seconds"]}


def _placement_check(outdir: Path, net: dict, arrays: dict, values: dict, recorded: bool) -> dict:
    """``lava/placement.json`` against the written network. On the recorded inputs the plan is derived again from
    the written network and this run's spike counts and must be the written document exactly; on other inputs
    (other counts, so another traffic) the document must place every neuron once within Loihi 2's own limits
    (never the limits the file states), with counts re-derived from the network. A plan that report.json
    claims and is missing fails; ``ok`` None when none was made (an older OUTDIR, a network not placed)."""
    path = Path(outdir) / "lava" / "placement.json"
    try:
        claimed = json.loads((Path(outdir) / "report.json").read_text())["targets"]["lava"]["placement"]["planned"]
    except (OSError, ValueError, KeyError, TypeError):
        claimed = None
    if not path.exists():
        return {"ok": False if claimed else None,
                "problems": ["report.json claims a placement and lava/placement.json is missing"] if claimed else []}
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return {"ok": False, "problems": [f"lava/placement.json is not a JSON document ({type(e).__name__}: {e})"]}
    if recorded:
        fresh = json.loads(json.dumps(cores.for_deployment(net, arrays, values)[1]))
        return {"ok": doc == fresh, "rederived": True,
                "problems": [] if doc == fresh else ["lava/placement.json is not the plan of the written network "
                                                     "on the recorded inputs"]}
    problems = cores.check_document(doc, net, arrays) if isinstance(doc, dict) else \
        ["lava/placement.json is not an object"]
    return {"ok": not problems, "rederived": False, "problems": problems}


def _requantized(outdir, graph, written, inputs, options: dict) -> dict:
    """``lava/quantized`` derived again from ``graph.json`` on the recorded inputs, node by node and bit for
    bit against the written one (skipped, and said so, when verifying on other inputs: calibration differs)."""
    try:
        with np.load(Path(outdir) / "io.npz", allow_pickle=False) as z:
            recorded = z["input"]
    except (OSError, KeyError, ValueError):
        recorded = None
    if recorded is None or not np.array_equal(recorded, inputs):
        return {"equal": None, "skipped": "inputs are not the recorded ones: calibration would differ"}
    differing = _differing(choose_deployment(graph, inputs, options)[0].graph, written)   # the written options
    if differing and options.get(chip_variant.OPTION) is None:   # written by an older spikec: its default then
        for older, how in (({chip_variant.OPTION: "subtract"}, "lava_reset='subtract' (SpikecLIF, spikec before "
                                                               "subtract resets were Lava's LIF)"),
                           ({"lava_ladders": False}, "no count ladders (SpikecIntFire, spikec before them)")):
            if not _differing(choose_deployment(graph, inputs, older)[0].graph, written):
                return {"equal": True, "differing_nodes": [], "as": how}
    return {"equal": not differing, "differing_nodes": differing[:10]}


def _differing(q, written) -> list:
    from spikec.core.serialize import graph_to_json
    differing = [n.name for n in q.nodes if n.name not in written
                 or any(not np.array_equal(v, written.node(n.name).params.get(k)) for k, v in n.params.items())]
    differing += [n.name for n in written.nodes if n.name not in q]
    if not differing and graph_to_json(q) != graph_to_json(written):
        differing.append("graph structure or attributes")
    return differing


class Deployed:
    """A compiled Lava deployment, runnable without Lava: its integer reference on new inputs.

    ``model(x)`` returns the integer outputs (spikes, or integer read-outs); ``dequantize=True`` divides
    read-outs by their scale, giving values comparable with the float source's outputs. Batched: one
    interpreter run for the whole ``[T, B, ...]`` input.
    """

    def __init__(self, outdir):
        self.graph, self.network, self.arrays = load_deployed(outdir)
        self.scales = dict(self.graph.meta.get("scales", {}))

    def __call__(self, x, *, dequantize: bool = False):
        trace = run(self.graph, _int_inputs(self.graph, x), integer=True, record="outputs")
        written = self.network.get(over_time.HOST_KEY, [])
        readouts = {r["of"]: r["output"] for r in written}
        host = over_time.apply(written, trace.values)   # the read-outs over time, computed as on the host
        values = ladder_counts(self.graph, trace.values)   # a count ladder's copies summed, as on the host
        names, outs = [], []
        for o in self.graph.outputs:
            y = host[readouts[o]] if o in readouts else values[o]
            if dequantize and self.graph.node(o).op == "lava_readout":
                y = y / np.asarray(self.scales[o], dtype=np.float64)
            names.append(readouts.get(o, o))
            outs.append(y)
        return outs[0] if len(outs) == 1 else dict(zip(names, outs))


def load(outdir) -> Deployed:
    """The integer reference of ``outdir``'s Lava deployment (a ``TTFSDeployed`` for ``--coding ttfs``)."""
    from spikec.targets.lava.ttfs_target import TTFSDeployed, is_ttfs_deployment
    return TTFSDeployed(outdir) if is_ttfs_deployment(outdir) else Deployed(outdir)


def network(outdir, batch: int = 1, steps: int | None = None):
    """``outdir``'s Lava network as Lava processes, its input and output ports, and ``run`` (``network_api.py``)."""
    from spikec.targets.lava.network_api import network as build_network
    return build_network(outdir, batch, steps)


from spikec.targets.lava.supervisor import shared  # noqa: E402  (one Lava session per compile, per verify)
register_target("lava", shared(compile_lava), verify=shared(verify_lava))
