"""The compile pipeline: load -> trace -> check against source -> passes -> check -> write OUTDIR atomically."""
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from spikec.compiler import loader
from spikec.compiler.checker import Comparison, compare_graphs, compare_with_torch, run_torch
from spikec.compiler.cost import cost_report, partition_report, sdna_report
from spikec.compiler.interpreter import run
from spikec.compiler.errors import BadInput
from spikec.compiler.frontend import trace
from spikec.compiler.ir import Graph, thaw
from spikec.compiler.passes import run_passes
from spikec.compiler.report import layers_report, params_report
from spikec.compiler.serialize import default_mode, load_graph, save_graph
from spikec.passes import select
from spikec.targets import VERIFIERS, get_target
import spikec.ttfs  # noqa: E402,F401  (registers the TTFS ops, so TTFS graphs load and run)


@dataclass(frozen=True)
class CompileOptions:
    model: str
    weights: str | None = None
    input_shape: tuple[int, ...] | None = None
    steps: int | None = None
    batch: int = 4
    inputs: str | None = None
    passes: str = "default"
    target: str = "none"
    seed: int = 0
    trust_pickle: bool = False
    nir_dt: float = 1e-4
    nir_scheme: str = "snntorch"
    coding: str = "native"          # "ttfs": map a ReLU ANN onto time-to-first-spike neurons (spikec.ttfs)
    ttfs_dt: float | None = None    # TTFS: the discrete time step reported first


@dataclass
class Compiled:
    report: dict
    graph: Graph
    io: dict
    files: dict = field(default_factory=dict)  # target artifacts: file name -> writer(path)


def load_source(opts: CompileOptions) -> torch.nn.Module:
    if opts.model.endswith(".nir") and opts.weights:
        raise BadInput("a .nir MODEL carries its own weights", remedy="drop --weights")
    model = loader.build_model(opts.model, nir_dt=opts.nir_dt, nir_scheme=opts.nir_scheme)
    if opts.weights:
        search = str(Path(opts.model.rpartition(":")[0]).parent) if opts.model.rpartition(":")[0].endswith(".py") \
            else None  # a pickled module may import the model file's siblings, as its training script did
        loader.load_weights(model, opts.weights, trust_pickle=opts.trust_pickle, search_path=search)
    loader.check_params_finite(model)
    return model.eval()


def make_inputs(model, opts: CompileOptions) -> tuple[np.ndarray, tuple, str]:
    """The verification inputs ``[T, B, ...]``, the per-step shape, and where they came from."""
    declared = getattr(model, "input_shape", None)
    if opts.input_shape and declared is not None and tuple(opts.input_shape) != tuple(declared):
        raise BadInput(f"--input-shape {','.join(map(str, opts.input_shape))} contradicts the model's declared "
                       f"input_shape {tuple(declared)}", remedy="drop --input-shape, or fix the model's input_shape")
    shape = opts.input_shape or declared
    if opts.inputs:
        x = loader.load_inputs(opts.inputs)
        if x.ndim < 3:
            raise BadInput(f"inputs in {opts.inputs!r} have shape {x.shape}; expected [T, B, ...]")
        if shape is not None and tuple(x.shape[2:]) != tuple(shape):
            raise BadInput(f"inputs in {opts.inputs!r} have per-step shape {tuple(x.shape[2:])}, "
                           f"the model expects {tuple(shape)}", remedy="lay the file out as [T, B, *input_shape]")
        return x, tuple(x.shape[2:]), f"file {opts.inputs}"
    if shape is None:
        raise BadInput("the per-step input shape is unknown",
                       remedy="pass --input-shape C,H,W (or give the model an `input_shape` attribute)")
    steps = opts.steps or getattr(model, "steps", None) or 4
    rng = np.random.default_rng(opts.seed)
    x = (rng.random((steps, opts.batch, *shape)) < 0.3).astype(np.float64)
    return x, tuple(shape), f"random binary spikes, p=0.3, seed {opts.seed}"


def compile_model(opts: CompileOptions) -> Compiled:
    target = get_target(opts.target)
    if opts.coding == "ttfs" and target is not None:
        raise BadInput(f"--target {opts.target} has no lowering for a TTFS graph", remedy="use --target none")
    passes, explicit = select(opts.passes)
    start = time.perf_counter()
    model = load_source(opts)
    x, shape, source = make_inputs(model, opts)
    kind, ceiling = loader.value_kind(x)
    graph = trace(model, shape, input_kind=kind, ceiling=ceiling)
    reference = run_torch(model, x, dict(graph.meta.get("module_outputs", ())))
    traced = run(graph, x, progress="verifying frontend")
    front = compare_with_torch(model, graph, x, trace=traced, source=reference)
    last: list = []  # the run of the deployed graph the last pass was checked with
    deployed, records = run_passes(graph, passes, x, explicit=explicit, trace=traced, keep=last) \
        if front.equivalent else (graph, [])
    trace_final = last[0] if last else traced
    del traced, last
    ttfs = spikec.ttfs.compile_ttfs(model, deployed, x, {"dt": opts.ttfs_dt}) \
        if opts.coding == "ttfs" and front.equivalent else None
    if ttfs:  # the deployed graph is now the TTFS graph: run it for the checks below
        deployed = ttfs.graph
        trace_final = run(deployed, x, progress="verifying deployed graph")
    final = compare_with_torch(model, deployed, x, trace=trace_final, source=reference)
    # an approximate TTFS mapping (LayerNorm) cannot match the source to 1e-9: it verifies itself (exact to its
    # decomposed ANN) and its measured distance to the source is reported, labelled approximate
    final_ok = final.equivalent or bool(ttfs and ttfs.ok and not ttfs.report["exact"])
    cost = cost_report(deployed, trace_final)
    outputs = reference[0]
    emitted = target(deployed, x, trace_final, {"seed": opts.seed}) if target else None
    del trace_final
    report = {
        "model": opts.model, "weights": opts.weights,
        "input": {"steps": int(x.shape[0]), "batch": int(x.shape[1]), "shape": list(shape), "kind": kind,
                  "ceiling": ceiling, "source": source, "seed": opts.seed},
        "frontend": {**front.summary(), "converters": dict(graph.meta.get("converters", ()))},
        "params": params_report(model, deployed),
        "passes": [r.to_json() for r in records],
        "final": final.summary(),
        "equivalent": front.equivalent and final_ok and all(r.spike_mismatches == 0 for r in records)
        and (emitted is None or emitted.ok) and (ttfs is None or ttfs.ok),
        "ttfs": ttfs.report if ttfs else None,
        "layers": layers_report(deployed),
        "ac_share": cost["ac_share"],
        "cost": cost,
        "partitions": partition_report(deployed),
        "schedule": thaw(deployed.meta.get("schedule")),
        "attention": thaw(deployed.meta.get("attention")),
        "sdna": sdna_report(deployed, cost, thaw(deployed.meta.get("schedule"))),
        "target": emitted.report if emitted else None,
        "checks": ["ir_verifies", "io_outputs", "source_vs_deployed", "passes_replayed"],
        "options": {k: (list(v) if isinstance(v, tuple) else v) for k, v in opts.__dict__.items()},
        "seconds": round(time.perf_counter() - start, 3),
    }
    io = {"input": x, **{f"output{'' if i == 0 else i}": o for i, o in enumerate(outputs)}}
    if ttfs:
        io["deployed_output"] = run(deployed, x, record="outputs").values[deployed.outputs[0]]
    return Compiled(report, deployed, io, emitted.files if emitted else {})


def write_outdir(outdir, compiled: Compiled) -> Path:
    """Write every artifact into a fresh sibling directory, then rename it onto ``outdir``."""
    out = Path(outdir).absolute()
    if out.exists() and not out.is_dir():
        raise BadInput(f"OUTDIR {str(out)!r} exists and is not a directory", remedy="choose another -o path")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.tmp-"))
        tmp.chmod(default_mode(directory=True))
    except OSError as e:
        raise BadInput(f"cannot write OUTDIR {str(out)!r}: {e.strerror or e}",
                       remedy="choose a writable location for -o") from e
    try:
        save_graph(compiled.graph, tmp)
        np.savez(tmp / "io.npz", **compiled.io)
        for name, write in compiled.files.items():
            write(tmp / name)
        (tmp / "report.json").write_text(json.dumps(compiled.report, indent=1, default=_json_default))
        if out.exists():
            old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old-"))
            os.replace(out, old / "previous")
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _json_default(v):
    if isinstance(v, (np.integer, np.floating)):
        return v.item()
    raise TypeError(f"{type(v).__name__} is not JSON serializable")


def verify_outdir(outdir, inputs: str | None = None) -> dict:
    """Re-run the checks recorded in ``OUTDIR/report.json``; returns ``{check: summary}``."""
    out = Path(outdir)
    try:
        report = json.loads((out / "report.json").read_text())
    except (OSError, ValueError) as e:
        raise BadInput(f"{str(out)!r} holds no readable report.json: {e}",
                       remedy="point at a directory written by `spikec compile`") from e
    graph = load_graph(out)
    results = {"ir_verifies": {"equivalent": True}}
    opts = CompileOptions(**{k: tuple(v) if k == "input_shape" and v else v for k, v in report["options"].items()})
    approximate = bool(report.get("ttfs")) and not report["ttfs"]["exact"]
    if inputs:
        x = loader.load_inputs(inputs)
    else:
        with np.load(out / "io.npz", allow_pickle=False) as z:
            x, recorded = z["input"], z["deployed_output" if approximate else "output"]
        results["io_outputs"] = _compare_io(graph, x, recorded).summary()
    model = load_source(opts)
    results["source_vs_deployed"] = compare_with_torch(model, graph, x, progress="verifying").summary()
    if approximate and not inputs:  # as close to the source as the report recorded (TTFS LayerNorm), never exact
        r = results["source_vs_deployed"]
        r["approximate"] = True
        r["equivalent"] = r["max_rel_diff"] <= report["final"]["max_rel_diff"] * (1 + 1e-6) + 1e-12
    target = (report.get("target") or {}).get("name")
    if target:
        get_target(target)
        if target in VERIFIERS:
            results[f"target_{target}"] = VERIFIERS[target](out, graph, x, run(graph, x, progress="verifying"))
    if not inputs:
        replay = compile_model(opts)
        results["passes_replayed"] = compare_graphs(replay.graph, graph, x).summary()
        results["passes_replayed"]["passes"] = [r["name"] for r in replay.report["passes"]]
    return results


def _compare_io(graph: Graph, x, recorded) -> Comparison:
    result = Comparison()
    out = graph.outputs[0]
    result.add(out, recorded, run(graph, x, record="outputs").values[out], graph.node(out).type.is_spike)
    return result
