"""The NIR target (``--target nir``): ``OUT/model.nir`` plus its checks.

1. ``export.export_graph`` writes the deployed IR as a NIR graph (or refuses, naming the node).
2. The file is read back with ``nir.read`` and run by this package's own interpreter
   (``interpreter.run``, both discretizations); ``exact`` is the recorded scheme reproducing every spike
   of the reference (and real outputs to 1e-9 relative).
3. The real consumers, snnTorch's ``import_from_nir``, Norse's ``from_nir``, Sinabs's ``from_nir`` and
   SpikingJelly's ``import_from_nir``, run the same file where
   ``consumers.limits`` finds nothing they mishandle; their spikes are compared neuron by neuron.

The export's ``dt`` and scheme are those the graph was read at from NIR, else ``dt = 1e-4`` (snnTorch's importer
hard-codes it) in the ``snntorch`` scheme; ``options["nir_consumer"]`` (``any`` | ``snntorch`` | ``norse``, default
``any``) picks the form a consumer's importer honours (``forms``); ``options["nir_export_dt"]`` overrides the dt.
``report.target`` = ``{"name": "nir", "exact", "dt", "scheme", "consumers": {name: {"ran", "spike_exact",
...} | {"ran": false, "reason"}}, ...}``; ``ok`` = exact and every consumer that ran matched.
The NIR frontend (``spikec compile model.nir``) is ``spikec.frontend.nir_file``.
"""
import json
import tempfile
from collections import Counter
from pathlib import Path

import nir
import numpy as np

from spikec.core.checker import Comparison
from spikec.ir.errors import UnsupportedOp
from spikec.ir.graph import Graph
from spikec.targets import TargetResult, register_target
from spikec.targets.nir import consumers as consumers_mod
from spikec.formats.nir import hdf5
from spikec.formats.nir import interpreter
from spikec.targets.nir import reach, readout, recurrent, sinabs_export, variants  # noqa: F401  (lowerings)
from spikec.targets.nir.export import CONSUMER, DISCRETIZATION, DT, FIRING, SCHEME, export_graph

FILE = "model.nir"


def _mapping(g: nir.NIRGraph) -> dict:
    raw = g.metadata.get("spikec") if isinstance(g.metadata, dict) else None
    if raw is None:
        return {}
    return json.loads(raw.decode() if isinstance(raw, bytes) else str(raw))


def compare_run(graph: Graph, reference, values: dict, mapping: dict, source_outputs=None) -> Comparison:
    """Every IR value with a NIR carrier (spikes exactly, reals to 1e-9), and the graph outputs."""
    result = Comparison()
    carriers = mapping.get("carriers", {})
    for node in graph.nodes:
        nir_name = carriers.get(node.name)
        if node.op == "input" or nir_name not in values or node.name not in reference.values:
            continue
        result.add(node.name, reference.values[node.name], values[nir_name], node.type.is_spike,
                   reference.margins.get(node.name))
    for nir_out, ir_out in mapping.get("outputs", {}).items():
        expected = reference.values[ir_out] if source_outputs is None or ir_out not in source_outputs \
            else source_outputs[ir_out]
        result.add(f"{ir_out} (output {nir_out})", expected, values[nir_out], graph.node(ir_out).type.is_spike,
                   reference.margins.get(ir_out))
    for nir_out, spec in mapping.get("read_over_time", {}).items():   # the read-out its reader applies (readout)
        _add_readout(result, spec, values[nir_out], reference, source_outputs)
    return result


def _add_readout(result: Comparison, spec: dict, per_step, reference, source_outputs=None) -> None:
    """The model's output, a read-out over time of the file's per-step output, against the source's (or the
    deployed graph's value at the last step)."""
    name = spec["read_out"]
    expected = reference.values[name][-1] if source_outputs is None or name not in source_outputs \
        else np.asarray(source_outputs[name])
    result.add(f"{name} ({spec['reduce']} over time of the NIR output)", expected[None],
               readout.reduce(per_step, spec)[None], False, None)


def _counts(node) -> bool:
    """A neuron's real-kind output that is a spike count (Sinabs's MultiSpike): compared exactly, as spikes."""
    from spikec.targets.nir.reasons import LIF_SINABS
    return node.op == LIF_SINABS and node.attrs.get("spike") != "none"


def _min_margin(graph: Graph, reference) -> float | None:
    margins = [float(np.min(reference.margins[n.name])) for n in graph.nodes
               if n.type.kind == "binary" and n.name in reference.margins and reference.margins[n.name].size]
    return min(margins) if margins else None


CALLS = {"norse": "norse.torch.from_nir(nir.read(path), dt={dt:g})",
         "spikingjelly": "spikingjelly.activation_based.nir_exchange.from_nir.import_from_nir(nir.read(path), dt={dt:g})",
         "rockpool": consumers_mod.rockpool_consumer.CALL,
         "sinabs": "sinabs.from_nir(nir.read(path), batch_size=1), one call per step",
         "snntorch": "snntorch.import_nir.import_from_nir(nir.read(path))"}
PER_OUTPUT = ("the file has {n} outputs and nirtorch returns one: it was run as {n} one-output graphs, each Output "
              "with every node it reads (consumers.one_output_parts)")


def run_consumers(path, graph: Graph, inputs, reference, mapping: dict, dt: float, read=None) -> dict:
    """Each consumer's verdict: ran and matched, or why it did not run. A file with several outputs is run one
    output at a time (nirtorch, under snnTorch, Norse, Sinabs and Rockpool, returns one), each with what it reads.
    ``read``: the file's ``hdf5.read`` already made. The file is read once: every consumer imports a copy of it, or
    of one of its one-output parts (``consumers.one_output_parts``: subgraphs of the graph read, the same node
    objects, so the same arrays as the file)."""
    g = hdf5.read(path) if read is None else read
    outputs = mapping.get("outputs", {})
    if len(outputs) <= 1:
        parts = [(g, mapping)]
    else:
        parts = []
        for out, sub in consumers_mod.one_output_parts(g).items():
            over = {k: v for k, v in mapping.get("read_over_time", {}).items() if k == out}
            parts.append((sub, {**mapping, "outputs": {out: outputs[out]}, "read_over_time": over}))
    found = [consumers_mod.limits(sub, dt) for sub, _ in parts]   # every consumer's limits, once per part
    report = {}
    for name in consumers_mod.CONSUMERS:
        missing = consumers_mod.available(name)
        if missing:
            report[name] = {"ran": False, "reason": missing}
            continue
        ran = _one_run(name, path, parts, [limits[name] for limits in found], g, graph, inputs, dt)
        verdicts = [_one_consumer(name, path, limits[name], graph, inputs, reference, m, dt, sub, r)
                    for (sub, m), limits, r in zip(parts, found, ran)]
        # a part read off the shared run that differs is run alone: its verdict is the consumer's own run of it
        verdicts = [_one_consumer(name, path, limits[name], graph, inputs, reference, m, dt, sub)
                    if r is not None and not (v["ran"] and v["spike_exact"]) else v
                    for (sub, m), limits, r, v in zip(parts, found, ran, verdicts)]
        report[name] = verdicts[0] if len(verdicts) == 1 else _merge(verdicts, list(outputs))
        if report[name]["ran"]:
            report[name]["call"] = CALLS[name].format(dt=dt)
    return report


def _one_run(name, path, parts, limits, g: nir.NIRGraph, graph: Graph, inputs, dt: float) -> list:
    """Every part's ``(output, spikes)`` from one run of the consumer, where it can give them: snnTorch or Norse
    (a module per node), several parts, all runnable, one of which holds every node of the others; the others'
    outputs are read off that run at the node each Output reads (a hook), their spikes are their own neurons'. Else
    (or if that run fails) ``[None, ...]``: each part is run alone, as each reports its own failure."""
    none = [None] * len(parts)
    if name not in ("snntorch", "norse") or len(parts) < 2 or any(limits):
        return none
    nodes = [set(sub.nodes) - {n for n, v in sub.nodes.items() if isinstance(v, nir.Output)} for sub, _ in parts]
    whole = next((i for i, n in enumerate(nodes) if all(other <= n for other in nodes)), None)
    if whole is None:
        return none
    outs = [next(iter(m["outputs"].items())) for _, m in parts]   # (NIR Output, IR node) per part
    reads = {d: s for s, d in g.edges}
    extra = {o: (reads.get(o), graph.node(ir).type.shape) for i, (o, ir) in enumerate(outs) if i != whole}
    if any(src is None or isinstance(g.nodes.get(src), nir.Input) for src, _ in extra.values()):
        return none
    try:
        y, spikes, others = consumers_mod.run_consumer_outputs(
            name, path, inputs, dt, graph.node(outs[whole][1]).type.shape, parts[whole][0], extra)
    except Exception:  # noqa: BLE001 -- each part is then run alone and reports what fails
        return none
    return [(y, spikes) if i == whole else (others[o], {k: v for k, v in spikes.items() if k in parts[i][0].nodes})
            for i, (o, _) in enumerate(outs)]


def _merge(verdicts: list[dict], outs: list[str]) -> dict:
    """One verdict of a consumer run output by output: ran when every part ran."""
    if not all(v["ran"] for v in verdicts):
        return {"ran": False, "reason": "; ".join(f"output {o!r}: {v['reason']}" for o, v in zip(outs, verdicts)
                                                  if not v["ran"])}
    total = lambda k: sum(v[k] for v in verdicts)  # noqa: E731
    margins = [v["max_margin_at_mismatch"] for v in verdicts if v["max_margin_at_mismatch"] is not None]
    return {"ran": True, "spike_exact": all(v["spike_exact"] for v in verdicts), "per_output": PER_OUTPUT.format(
        n=len(verdicts)), **{k: total(k) for k in ("neurons_compared", "spikes_compared", "spike_mismatches",
                                                   "spike_count", "mismatches_at_exact_ties")},
            "output_max_rel_diff": max(v["output_max_rel_diff"] for v in verdicts),
            "precision": verdicts[0]["precision"], "max_margin_at_mismatch": max(margins, default=None),
            "first_mismatches": [m for v in verdicts for m in v["first_mismatches"]][:10]}


def _one_consumer(name, path, found: list, graph: Graph, inputs, reference, mapping: dict, dt: float,
                  read=None, ran=None) -> dict:
    """Consumer ``name`` on the one-output graph ``read`` (the file ``path`` as read, or one of its one-output
    parts; ``found``: what in it the consumer cannot run; ``ran``: its ``(output, spikes)``, read off one run of
    the consumer on a part holding it, ``_one_run``): its verdict."""
    if found:
        return {"ran": False, "reason": "; ".join(found)}
    carriers = mapping.get("carriers", {})
    by_nir = {v: k for k, v in carriers.items() if (graph.node(k).type.is_spike or _counts(graph.node(k)))
              and graph.node(k).op != "input"}
    (nir_out, ir_out), = mapping.get("outputs", {}).items()
    out_node = graph.node(ir_out)
    try:
        y, spikes = ran if ran is not None else consumers_mod.run_consumer(name, path, inputs, dt,
                                                                           out_node.type.shape, read)
    except Exception as e:  # the consumer itself failed on a file the analysis passed: report it
        return {"ran": False, "reason": f"{name} raised {type(e).__name__}: {e}"}
    cmp, at_margins = Comparison(), []
    for nir_name, s in sorted(spikes.items()):
        ir = by_nir.get(nir_name)
        if ir is not None:
            cmp.add(ir, reference.values[ir], s, True, reference.margins.get(ir))
            if ir in reference.margins and reference.values[ir].shape == s.shape:
                at_margins.append(reference.margins[ir][reference.values[ir] != s])
    expected = reference.values[ir_out]
    if out_node.type.is_spike or _counts(out_node):   # spikes, or spike counts: every one compared
        cmp.add(f"{ir_out} (output)", expected, y, True, reference.margins.get(ir_out))
        rel = 0.0
    else:
        scale = max(np.abs(expected).max(initial=0.0), np.finfo(float).tiny)
        rel = float(np.abs(expected - y).max(initial=0.0) / scale)
    for spec in mapping.get("read_over_time", {}).values():
        _add_readout(cmp, spec, y, reference)
    return {"ran": True, "spike_exact": cmp.spike_mismatches == 0 and cmp.real_mismatches == 0,
            "neurons_compared": len(cmp.nodes_compared), "spikes_compared": cmp.spikes_compared,
            "spike_mismatches": cmp.spike_mismatches, "spike_count": int(sum(float(np.sum(s)) for s in spikes.values())),
            "output_max_rel_diff": rel, "precision": "float32 (as the importer builds it)",
            "mismatches_at_exact_ties": int(sum(int((m == 0).sum()) for m in at_margins)),
            "max_margin_at_mismatch": max((float(m.max()) for m in at_margins if m.size), default=None),
            "first_mismatches": [m.to_json() for m in cmp.mismatches]}


def check_file(path, graph: Graph, inputs, reference, dt: float = DT, scheme: str = SCHEME,
               source_outputs=None, with_consumers: bool = True) -> dict:
    """Re-read ``path`` and check it: own interpreter (both schemes), then the consumers."""
    g = hdf5.read(path)
    mapping = _mapping(g)
    meta = g.metadata if isinstance(g.metadata, dict) else {}
    dt = float(meta.get("dt", dt))
    written = meta.get("scheme", scheme)
    written = written.decode() if isinstance(written, bytes) else str(written)
    scheme = written if written in interpreter.SCHEMES + interpreter.CONSUMER_SCHEMES else scheme
    schemes = {}   # NIR's two schemes always; a consumer's own scheme (sinabs) for a file written in it
    for s in interpreter.SCHEMES + ((scheme,) if scheme in interpreter.CONSUMER_SCHEMES else ()):
        run = interpreter.run(g, inputs, dt=dt, scheme=s)
        cmp = compare_run(graph, reference, run.values, mapping, source_outputs)
        schemes[s] = {k: v for k, v in cmp.summary().items() if k != "first_mismatches"}
        schemes[s]["first_mismatches"] = [m.to_json() for m in cmp.mismatches]
    exact = schemes[scheme]["equivalent"]
    counts = Counter(type(n).__name__ for n in g.nodes.values())
    report = {"name": "nir", "file": FILE, "exact": exact, "dt": dt, "scheme": scheme, "nir_version": nir.version,
              "discretization": meta.get("discretization", DISCRETIZATION) if isinstance(meta.get(
                  "discretization", ""), str) else DISCRETIZATION, "firing": FIRING,
              **({"consumer_scheme": meta["consumer_scheme"]} if "consumer_scheme" in meta else {}), "interpreter": schemes,
              "consumer": mapping.get("form", {}).get("consumer", CONSUMER),
              "time_base": mapping.get("form", {}).get("time_base", ""),
              "nodes": dict(sorted(counts.items())), "edges": len(g.edges),
              "bit_exact_params": mapping.get("bit_exact_params"), "notes": mapping.get("notes", []),
              "min_firing_margin": _min_margin(graph, reference)}
    if with_consumers:
        report["consumers"] = run_consumers(path, graph, inputs, reference, mapping, dt, g)
        variant = nearest_variant(g, graph, inputs, reference, mapping, dt, scheme)
        if variant is not None:
            report["nearest_variant"] = variant
    return report


def nearest_variant(g: nir.NIRGraph, graph: Graph, inputs, reference, mapping: dict, dt: float, scheme: str):
    """What the variant every consumer reads (``composed.nearest``: each LI/I + Threshold + reset cycle as a
    zero-reset LIF) changes, measured on these inputs by this package's interpreter; None without a cycle."""
    from spikec.targets.nir import composed
    if not composed.composed_neurons(g):
        return None
    variant = composed.nearest(g, dt)
    if variant is None:
        return {"variant": "zero reset (NIR LIF)", "measured": False,
                "reason": "a subtract-reset neuron's membrane is read: no NIR LIF outputs it"}
    values = interpreter.run(variant, inputs, dt=dt, scheme=scheme).values
    cmp = compare_run(graph, reference, values, {**mapping, "outputs": {}})   # each spike once, by its neuron
    share = cmp.spike_mismatches / cmp.spikes_compared if cmp.spikes_compared else 0.0
    return {"variant": "zero reset (NIR LIF, reset to 0 on the spiking step), which snnTorch, Norse and Sinabs read",
            "measured": True, "spikes_compared": cmp.spikes_compared, "spike_mismatches": cmp.spike_mismatches,
            "summary": f"zero reset: {100 * share:.1f}% of spikes differ ({cmp.spike_mismatches} of "
                       f"{cmp.spikes_compared}) on these inputs"}


def _ok(report: dict) -> bool:
    return bool(report["exact"]) and all(c.get("spike_exact", True) for c in report.get("consumers", {}).values()
                                         if c.get("ran"))


def nir_target(graph: Graph, inputs, reference, options) -> TargetResult:
    options = options or {}
    dt = options.get("nir_export_dt")
    dt, consumer = None if dt is None else float(dt), options.get("nir_consumer") or CONSUMER
    try:
        ex = export_graph(graph, dt, consumer)
    except UnsupportedOp as e:   # the refusal, with the nearest exportable variant measured on these inputs
        raise variants.with_nearest(e, graph, inputs, reference, lambda g: export_graph(g, dt, consumer)) from None
    with tempfile.TemporaryDirectory(prefix="spikec-nir-") as tmp:
        path = Path(tmp) / FILE
        hdf5.write(path, ex.graph, str(options.get("nir_version") or hdf5.WRITE_VERSIONS[0]))
        data = path.read_bytes()
        report = check_file(path, graph, inputs, reference, ex.form.dt, ex.form.scheme)
    report["ok"] = _ok(report)

    def write(dest: Path, data=data):
        Path(dest).write_bytes(data)

    return TargetResult(report, report["ok"], {FILE: write})


def verify_nir(outdir, graph: Graph, inputs, reference) -> dict:
    """``spikec verify``: the written file against the deployed graph, and its output against io.npz."""
    outdir = Path(outdir)
    source = None
    try:
        with np.load(outdir / "io.npz", allow_pickle=False) as z:
            if np.array_equal(z["input"], inputs):  # io.npz's output, output1, ...: the source's, per graph output
                keys = [f"output{'' if i == 0 else i}" for i in range(len(graph.outputs))]
                source = {o: z[k] for o, k in zip(graph.outputs, keys) if k in z.files} or None
    except OSError:
        pass
    report = check_file(outdir / FILE, graph, inputs, reference, source_outputs=source)
    return {"equivalent": _ok(report), "exact": report["exact"],
            "consumers": {k: v.get("spike_exact", v.get("reason")) for k, v in report["consumers"].items()},
            **{k: report["interpreter"][report["scheme"]][k] for k in ("spikes_compared", "values_compared",
                                                                        "max_rel_diff", "spike_mismatches")}}


register_target("nir", nir_target, verify=verify_nir)
