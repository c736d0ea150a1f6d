"""The compile pipeline: load -> trace -> check against source -> passes -> check -> target -> OUTDIR.

An OUTDIR is written into a fresh sibling, re-read and checked against what was computed, then moved
into place atomically (``outdir.publish``); a compile that is not equivalent never replaces an OUTDIR
holding an equivalent one (it goes beside it, ``NAME.not-equivalent``).
"""
import copy
import json
import math
import time
from dataclasses import KW_ONLY, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from spikec.app import outdir as owned
from spikec.app.html_raster import recorded_activity
from spikec.app.html_report import write_html
from spikec.app.stages import Stages
from spikec.app.precision import flip_margins, source_precision
from spikec.app.probes import near_threshold, with_probes
from spikec.app.vacuity import warnings_for
from spikec.app.provenance import provenance, source_files
from spikec.app import loader
from spikec.app.conventions import choose, loop_convention
from spikec.core import heap
from spikec.core.checker import compare_with_torch, run_torch
from spikec.core.metrics import firing_rates, neurobench_metrics
from spikec.core.cost import cost_report, partition_report, sdna_report
from spikec.ir.errors import BadInput, IRError, SpikecError
from spikec.frontend import trace
from spikec.frontend import sinabs as sinabs_frontend
from spikec.frontend.stepping import cast_inputs_to_params
from spikec.frontend.tracing import traced_root
from spikec.core.interpreter import run
from spikec.ir.graph import Graph, thaw
from spikec.core.passes import chain_records, first_record, pass_chain, run_passes
from spikec.core.report import layers_report, params_report
from spikec.core.serialize import graph_to_json, load_graph, save_graph
from spikec.passes import select
from spikec.app.multitarget import not_emitted, plan, run_targets
from spikec.targets.ttfs import TTFS_CODING  # also registers the TTFS ops, so TTFS graphs load and run

# --coding NAME -> its pass and verifier (spikec.targets.ttfs.compile.Coding); "native" keeps the model's own coding
CODINGS = {"ttfs": TTFS_CODING}


@dataclass(frozen=True)
class CompileOptions:
    model: str
    _: KW_ONLY
    weights: str | None = None
    input_shape: tuple[int, ...] | None = None
    steps: int | None = None
    batch: int | None = None        # random inputs: 4 samples unless given
    inputs: str | None = None
    passes: str = "default"
    target: str = "none"            # none | all | a name | a,b,c (spikec.app.multitarget)
    seed: int = 0
    trust_pickle: bool = False
    nir_dt: float = 1e-4
    nir_scheme: str = "snntorch"
    nir_consumer: str = "any"       # NIR export: the importer whose form model.nir is written in (any, snntorch, norse)
    coding: str = "native"          # "ttfs": map a ReLU ANN onto time-to-first-spike neurons (spikec.codings.ttfs)
    ttfs_dt: float | None = None    # TTFS: the discrete time step reported first
    allow_unstable: bool = False    # a .nir MODEL whose neurons would grow without bound
    max_input_bytes: int | None = None  # None: an eighth of the available memory
    probes: bool = False            # append the seeded probe samples (spikec.app.probes); the CLI does by default
    stepping: str = "auto"          # model convention: multistep | step | loop | auto (spikec.app.conventions)
    report_refusals: bool = False   # a named target that cannot map the graph: recorded (not equivalent), not raised
    xylo_chip: str | None = None    # the xylo target's chip (its option xylo_chip); None: the target's default
    nir_version: str | None = None  # the nir target's file version (1.0.8, 1.0.7); None: the target's default
    lava_reset: str | None = None   # None: subtract resets on Lava's LIF (membrane in u); "subtract": SpikecLIF; "zero": the approximate zero-reset variant


# options passed to their target as the option of the same name only when given (None: the target's default)
TARGET_ONLY = ("xylo_chip", "nir_version", "lava_reset")


@dataclass
class Compiled:
    report: dict
    graph: Graph
    io: dict
    files: dict = field(default_factory=dict)  # artifacts: file name (may contain one '/') -> writer(path)
    before: Graph | None = None                # the traced graph, before the passes (drawn in report.html)
    activity: list | None = None               # report.html's rasters, read from the deployed graph's run


def check_options(opts: CompileOptions) -> None:
    """Values the CLI's types let through but nothing can use: empty paths, a negative seed, a NaN or Inf step."""
    for flag, value in (("--weights", opts.weights), ("--inputs", opts.inputs)):
        if value is not None and not str(value).strip():
            raise BadInput(f"{flag} names no file (an empty path)", remedy=f"give {flag} a file, or drop it")
    if isinstance(opts.seed, bool) or not isinstance(opts.seed, int) or opts.seed < 0:
        raise BadInput(f"--seed {opts.seed!r} is not an integer >= 0", remedy="give --seed an integer >= 0, e.g. 0")
    for flag, value in (("--dt", opts.nir_dt), ("--ttfs-dt", opts.ttfs_dt)):
        if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise BadInput(f"{flag} {value!r} is not a finite positive time step", remedy=f"give {flag} e.g. 1e-3")


def load_source(opts: CompileOptions, instance: torch.nn.Module | None = None) -> torch.nn.Module:
    """The source model of ``opts.model`` (or a private copy of the module ``instance``: the user's own object is
    left as it was), with ``opts.weights`` loaded, checked finite, in eval mode.

    The factory runs under ``torch.manual_seed(opts.seed)``, so a compile without weights (the factory's initial
    weights, which the summary warns of) is reproducible."""
    check_options(opts)
    if opts.model.endswith(".nir") and opts.weights:
        raise BadInput("a .nir MODEL carries its own weights", remedy="drop --weights")
    if instance is None:
        # seeded: without --weights the factory's initial weights are what is compiled, and two runs must agree;
        # the caller's own random state is left as it was
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(opts.seed)
            model = loader.build_model(opts.model, nir_dt=opts.nir_dt, nir_scheme=opts.nir_scheme,
                                       allow_unstable=opts.allow_unstable)
    else:
        model = _private_copy(instance)
    model = sinabs_frontend.adapt(model)  # a bare Sinabs network as its users write it; before its checkpoint
    if opts.weights:
        search = str(Path(opts.model.rpartition(":")[0]).parent) if opts.model.rpartition(":")[0].endswith(".py") \
            else None  # a pickled module may import the model file's siblings, as its training script did
        loader.load_weights(model, opts.weights, trust_pickle=opts.trust_pickle, search_path=search)
    loader.check_params_finite(model)
    cast_inputs_to_params(model)  # snnTorch's float32 spikes into float64 layers in the reference run
    return model.eval()


def _private_copy(instance) -> torch.nn.Module:
    if not isinstance(instance, torch.nn.Module):
        raise BadInput(f"the model is a {type(instance).__name__}, not an nn.Module",
                       remedy="give an nn.Module instance, a 'file.py:factory' string or a .nir path")
    try:
        return copy.deepcopy(instance)
    except Exception:  # a module holding something deepcopy cannot copy (a lock, a generator): use it as it is
        return instance


def _declared(model, name: str):
    """The model's ``input_shape`` (a non-empty tuple of ints >= 1) or ``steps`` (an int >= 1), or None."""
    value = getattr(model, name, None)
    if value is None:
        return None
    dims = tuple(value) if name == "input_shape" and isinstance(value, (tuple, list, torch.Size)) else (value,)
    if (name == "input_shape" and not isinstance(value, (tuple, list, torch.Size))) or not dims \
            or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1 for d in dims):
        want = "a tuple of integers >= 1, e.g. (1, 8, 8)" if name == "input_shape" else "an integer >= 1"
        raise BadInput(f"the model declares {name} = {value!r}, which is not {want}",
                       where=f"model {type(model).__qualname__}", remedy=f"fix the model's `{name}` attribute")
    return tuple(int(d) for d in dims) if name == "input_shape" else int(value)


def _per_step_shape(model, opts: CompileOptions):
    declared = _declared(model, "input_shape")
    if opts.input_shape and declared is not None and tuple(opts.input_shape) != tuple(declared):
        raise BadInput(f"--input-shape {','.join(map(str, opts.input_shape))} contradicts the model's declared "
                       f"input_shape {tuple(declared)}", remedy="drop --input-shape, or fix the model's input_shape")
    return opts.input_shape or declared


def _given_inputs(opts: CompileOptions, array, static: bool) -> tuple[np.ndarray, str, str]:
    """The inputs the user gave (a file, or an array through the Python API), checked; what to call them."""
    if array is None:
        x = loader.load_inputs(opts.inputs, opts.max_input_bytes, min_ndim=2 if static else 3)
        return x, f"inputs in {opts.inputs!r}", f"file {Path(opts.inputs).absolute()}"
    x = np.asarray(array)
    loader.check_input_size(x.shape, "the inputs array", opts.max_input_bytes)
    return loader.check_spike_input(x, "the inputs array", 2 if static else 3), "the inputs array", "the given array"


def make_inputs(model, opts: CompileOptions, array=None) -> tuple[np.ndarray, tuple, str]:
    """The verification inputs ``[T, B, ...]`` (before probes), the per-step shape, and where they came from.

    ``array``: inputs given in memory (the Python API), checked like an ``--inputs`` file.
    A loop model may take a static ``[B, ...]`` file: it is returned as read (``spikec.app.conventions``).
    """
    shape = _per_step_shape(model, opts)
    if opts.inputs or array is not None:
        x, what, source = _given_inputs(opts, array, opts.stepping in ("loop", "auto"))
        if x.ndim == 2 or (opts.stepping == "loop" and shape is not None and tuple(x.shape[1:]) == tuple(shape)):
            return x, tuple(x.shape[1:]), f"{source} (one input per sample)"
        for flag, value, axis in (("--steps", opts.steps, 0), ("--batch", opts.batch, 1)):
            if value is not None and value != x.shape[axis]:
                raise BadInput(f"{flag} {value} contradicts the {what}, which hold "
                               f"{x.shape[axis]} {'steps' if axis == 0 else 'samples'}",
                               remedy=f"drop {flag} (the inputs decide), or give inputs of that size")
        if shape is not None and tuple(x.shape[2:]) != tuple(shape):
            raise BadInput(f"{what} have per-step shape {tuple(x.shape[2:])}, "
                           f"the model expects {tuple(shape)}", remedy="lay the inputs out as [T, B, *input_shape]")
        return x, tuple(x.shape[2:]), source
    if shape is None:
        raise BadInput("the per-step input shape is unknown",
                       remedy="pass --input-shape C,H,W (or give the model an `input_shape` attribute)")
    steps = opts.steps or _declared(model, "steps") or 4
    batch = opts.batch or 4
    loader.check_input_size((steps, batch, *shape), "the random verification input", opts.max_input_bytes)
    rng = np.random.default_rng(opts.seed)
    x = (rng.random((steps, batch, *shape)) < 0.3).astype(np.float64)
    return x, tuple(shape), f"random binary spikes, p=0.3, seed {opts.seed}"


def _verification_inputs(model, opts: CompileOptions, inputs, array=None):
    """The model convention, the inputs every check runs on (with probes), and their account for the report."""
    if inputs is not None:  # a replay (verify): exactly the recorded inputs, probes included
        x = np.asarray(inputs, dtype=np.float64)
        kind, ceiling = loader.value_kind(x)
        conv = choose(model, opts.stepping, x, kind, ceiling)
        return conv, {"source": "the recorded inputs (io.npz)", "kind": kind, "ceiling": ceiling, "probes": 0}
    x, shape, source = make_inputs(model, opts, array)
    kind, ceiling = loader.value_kind(x)
    given = opts.inputs is not None or array is not None
    as_given = given and (x.ndim == 2 or tuple(x.shape[1:]) == tuple(shape))
    try:
        conv = choose(model, opts.stepping, x, kind, ceiling, as_given=as_given, random=not given)
    except SpikecError as e:
        if x.ndim != 2 or opts.stepping != "auto":
            raise
        raise BadInput(f"{'the inputs array' if array is not None else f'array input of {opts.inputs!r}'} "
                       f"has shape {x.shape}; expected [T, B, ...] (at least 3 "
                       f"dimensions), or [B, ...] for a model that runs its own time loop, which this one does not "
                       f"({e.what})", remedy="save it with np.savez(path, input=x): x laid out [T, B, *input_shape]")
    samples, added, given = int(conv.x.shape[1]), 0, conv
    account = {"source": source, "kind": kind, "ceiling": ceiling, "probes": 0, "samples": samples}
    if opts.probes and conv.static:  # probes of the one static input, then repeated like it
        raw, added = with_probes(conv.x[:1], kind, ceiling)
        probed = lambda: loop_convention(conv.model.model, raw[0], as_given=True)
    elif opts.probes:
        x, added = with_probes(conv.x, kind, ceiling)
        probed = lambda: loop_convention(conv.model.model, x, as_given=False) if conv.stepping == "loop" else \
            replace(conv, x=x)
    else:
        return conv, dict(account, unprobed=None)
    try:
        conv = probed()
    except SpikecError as e:   # the forward runs on the given batch only (e.g. its view(batch_size, -1))
        return given, without_probes(account, added, e)
    return conv, dict(account, probes=added, unprobed=given)


def without_probes(account: dict, added: int, e: SpikecError) -> dict:
    """The inputs' account when the model did not run with the probe samples appended: none appended, and why."""
    return dict(account, probes=0, unprobed=None,
                probes_skipped=f"no probe samples appended: the model does not run on {account['samples']} + "
                               f"{added} samples ({e.what}); a forward that fixes its batch size (a view(batch_size, "
                               f"-1)) is checked on the given batch only")


def _end_to_end(model, graph: Graph, passes, explicit: bool, x, reference, ahead: dict, stages):
    """Frontend and passes checked at once: every rewrite made and verified, then the deployed graph run once and
    compared with the source model (``reference``, its run). ``(deployed, its run, the comparison, records)``, or
    None when a rewrite failed or the comparison differs: then each is checked alone, and the error names the part
    at fault (``_step_by_step``)."""
    chain = pass_chain(graph, passes, explicit, ahead)
    if chain is None:
        return None
    start = time.perf_counter()
    with stages("source vs deployed check"):
        trace_final = run(chain[-1], x, progress="verifying")
        cmp = compare_with_torch(model, chain[-1], x, trace=trace_final, source=reference)
    if not cmp.equivalent:
        return None
    names = ", ".join(p.name for p in passes)
    records = chain_records(passes, chain, ahead, cmp, time.perf_counter() - start, "end to end",
                            f"end to end: the deployed graph against the source model, once, for the frontend and "
                            f"the passes {names}")
    return chain[-1], trace_final, cmp, records


def _step_by_step(model, graph: Graph, passes, explicit: bool, x, reference, ahead: dict, stages):
    """The traced graph against the source, then the passes against it (``run_passes``): what names the part at
    fault. ``(deployed, its run, the frontend comparison, records)``; no pass runs if the frontend differs."""
    with stages("frontend check, the traced graph"):
        need = first_record(graph, passes, explicit, ahead)  # the run records only what the checks read
        need = need if need == "all" else need | set(dict(graph.meta.get("module_outputs", ())).values())
        traced = run(graph, x, progress="verifying frontend", record=need)
        front = compare_with_torch(model, graph, x, trace=traced, source=reference)
        if not front.equivalent and need != "all":  # no pass runs: the traced graph is the one reported on
            traced = run(graph, x, progress="verifying frontend")
    last: list = []  # the run of the deployed graph the last pass was checked with
    deployed, records = run_passes(graph, passes, x, explicit=explicit, trace=traced, keep=last, stage=stages,
                                   ahead=ahead, consume=True) if front.equivalent else (graph, [])
    return deployed, last[0] if last else traced, front, records


def compile_model(opts: CompileOptions, *, model: torch.nn.Module | None = None, inputs=None,
                  array=None) -> Compiled:
    """Compile ``opts.model`` (or the given ``model``) on its verification inputs.

    ``inputs``: a replay (verify) on exactly these recorded inputs: no probes, no provenance, no files.
    ``array``: the user's inputs in memory (the Python API), used like an ``--inputs`` file.
    Freed memory is kept for the next run's values meanwhile, within a bound (``spikec.core.heap``).
    """
    with heap.kept():
        return _compile(opts, model, inputs, array)


def _compile(opts: CompileOptions, model, inputs, array) -> Compiled:
    targets = _plan(opts)
    coding, no_lowering = _coding(opts, targets)
    passes, explicit = select(opts.passes)
    start, stages = time.perf_counter(), Stages()
    if opts.model.endswith(".nir") and opts.stepping == "auto":
        opts = replace(opts, stepping="multistep")  # a NIR graph is a multi-step network by construction
    with stages("load and inputs"):
        user_model = load_source(opts) if model is None else model
        conv, given = _verification_inputs(user_model, opts, inputs, array)
    model, x, shape = conv.model, conv.x, tuple(conv.x.shape[2:])
    opts = replace(opts, stepping=conv.stepping)  # recorded resolved: verify replays this convention
    with stages("trace"):
        graph = _trace_within_memory(model, x, given)
    with stages("frontend check"):
        try:
            reference = run_torch(model, x, dict(graph.meta.get("module_outputs", ())))
        except BadInput as e:   # the forward fails on the probes' larger batch: check the given inputs only
            if not given.get("unprobed"):
                raise
            conv, given = given["unprobed"], without_probes(given, given["probes"], e)
            model, x = conv.model, conv.x
            reference = run_torch(model, x, dict(graph.meta.get("module_outputs", ())))
    given.pop("unprobed", None)
    ahead: dict = {}  # the passes' rewrites, each made once
    direct = _end_to_end(model, graph, passes, explicit, x, reference, ahead, stages)
    if direct is not None:
        deployed, trace_final, front, records = direct
    else:
        deployed, trace_final, front, records = _step_by_step(model, graph, passes, explicit, x, reference, ahead,
                                                              stages)
    coded = None  # the coding's verdict, a TargetResult
    if coding and front.equivalent:
        with stages(f"coding {opts.coding}"):
            deployed, trace_final, records, coded = _recode(coding, opts, model, deployed, x, records)
    with stages("final check"):  # checked already, end to end, unless a coding changed the graph since
        final = front if direct is not None and coded is None else \
            compare_with_torch(model, deployed, x, trace=trace_final, source=reference)
    reference = reference[0], {}  # the source's module outputs are checked: only its outputs are read from here on
    # an approximate coding (TTFS LayerNorm) cannot match the source to 1e-9: its verifier checks it exactly against
    # what it approximates and measures the distance to the source; the report labels it approximate
    approximate = not final.equivalent and bool(coded and coded.ok and coded.report.get("exact") is False)
    final_ok = final.equivalent or approximate
    with stages("cost"):
        cost = cost_report(deployed, trace_final)
    # a graph that failed its own proof is not emitted: a target's verdict on it would mean nothing
    with stages(f"targets {','.join(targets.names)}".rstrip()):
        emitted = run_targets(targets, deployed, x, trace_final, _target_options(coding, opts, model),
                              not opts.report_refusals,
                              no_lowering) if targets.names and front.equivalent and final_ok \
            else not_emitted(targets, front.equivalent)
    with stages("analysis"):  # near-threshold ties, warnings, source precision, activity
        ties = near_threshold(trace_final.margins)
        warnings = warnings_for(deployed, trace_final, x)
        precision = flip_margins(source_precision(model, x, reference[0]), deployed, trace_final) \
            if inputs is None else None
        activity = {"firing_rates": firing_rates(deployed, trace_final),
                    "neurobench": neurobench_metrics(deployed, trace_final, cost)}
        rasters = recorded_activity(deployed, trace_final) if inputs is None else None  # not a second run
    del trace_final
    report = {
        "model": opts.model, "weights": opts.weights,
        "provenance": provenance(opts, opts.inputs if inputs is None else None, user_model),
        "input": {"steps": int(x.shape[0]), "batch": int(x.shape[1]), "shape": list(shape), **given,
                  "seed": opts.seed},
        "frontend": {**front.summary(), "checked": "end to end" if direct is not None else "traced",
                     "converters": dict(graph.meta.get("converters", ())),
                     "stepping": conv.stepping, **({"static_input": conv.static} if conv.stepping == "loop" else {}),
                     **({"nir_diagnostics": user_model.nir_diagnostics} if hasattr(user_model, "nir_diagnostics")
                        else {})},
        "params": params_report(traced_root(user_model) if model is not user_model else model, deployed),
        "passes": [r.to_json() for r in records],
        "final": {**final.summary(), "near_threshold": ties, "approximate": approximate},
        "warnings": warnings,
        "source_precision": precision,
        **activity,
        "equivalent": front.equivalent and final_ok and all(r.spike_mismatches == 0 for r in records)
        and emitted.ok and (coded is None or coded.ok),
        **{name: None for name in CODINGS}, **({opts.coding: coded.report} if coded else {}),
        "layers": layers_report(deployed),
        "ac_share": cost["ac_share"],
        "cost": cost,
        "partitions": partition_report(deployed),
        "schedule": thaw(deployed.meta.get("schedule")),
        "attention": thaw(deployed.meta.get("attention")),
        "sdna": sdna_report(deployed, cost, thaw(deployed.meta.get("schedule"))),
        "target": emitted.reports.get(targets.single),  # one named target: its report, as before several
        "targets": emitted.reports,
        "checks": ["ir_verifies", "io_outputs", "source_vs_deployed", "passes_replayed"],
        "options": _options_record(opts),
        "seconds": round(time.perf_counter() - start, 3),
        "stages": stages.to_json(),
    }
    io = {"input": x, **{f"output{'' if i == 0 else i}": o for i, o in enumerate(reference[0])}}
    if approximate:  # no source output matches it: verify compares the deployed graph with its own recorded run
        io["deployed_output"] = run(deployed, x, record="outputs").outputs(deployed)[0]
    files = {**source_files(opts, user_model, report["provenance"]), **emitted.files} if inputs is None else {}
    return Compiled(report, deployed, io, files, before=graph, activity=rasters)


def _options_record(opts: CompileOptions) -> dict:
    """The options as ``report["options"]`` records them (the ``TARGET_ONLY`` ones only when given: a report
    without them reads as before, and verify replays the default)."""
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in opts.__dict__.items()
            if not (k in TARGET_ONLY and v is None)}


def _plan(opts: CompileOptions):
    """The dead runs swept, the targets planned (each named one loaded) and the Xylo chip checked: before any work."""
    _sweep_dead_runs()
    targets = plan(opts.target)
    if opts.xylo_chip is not None:
        _check_xylo_chip(opts, targets)
    return targets


def _check_xylo_chip(opts: CompileOptions, targets) -> None:
    """A chip without the xylo target, or one it does not know (its own refusal)."""
    if "xylo" not in targets.names:
        raise BadInput(f"a Xylo chip ({opts.xylo_chip!r}) is given, but not the xylo target (targets: "
                       f"{', '.join(targets.names) or 'none'})",
                       remedy="add xylo to the targets (--target xylo, targets=('xylo',)), or drop --xylo-chip "
                              "(xylo_chip=)")
    from spikec.targets.xylo import chip_of
    chip_of({"xylo_chip": opts.xylo_chip})


def _target_options(coding, opts: CompileOptions, model) -> dict:
    """The options every target receives (``spikec.targets``): the seed, the NIR consumer, the Xylo chip when
    given, and what a coded graph's lowering reads."""
    return {"seed": opts.seed, "nir_consumer": opts.nir_consumer, **_coding_target_options(coding, opts, model),
            **{k: getattr(opts, k) for k in TARGET_ONLY if getattr(opts, k) is not None}}


def _trace_within_memory(model, x, given: dict) -> Graph:
    """The traced graph, refused (BadInput) before any run when its recorded runs would not fit in memory."""
    graph = trace(model, tuple(x.shape[2:]), input_kind=given["kind"], ceiling=given["ceiling"])
    loader.check_compile_memory(graph, x.shape[0], x.shape[1])
    return graph


def _sweep_dead_runs() -> None:
    """Remove what runs killed with every process (the OOM killer, a cgroup kill) left in /dev/shm and the
    temporary directory, found by their tags, never a live run's: at every compile, not only the next Lava run.
    (Imported on use: nothing else of this module needs the Lava target's package.)"""
    from spikec.targets.lava import leftovers
    leftovers.sweep()


def _coding(opts: CompileOptions, targets):
    """The hook of ``--coding`` (None for ``native``) and the targets it has no lowering for (name -> why: refused
    under ``--target all``); BadInput for an unknown coding or a named target it cannot use (before any work)."""
    if opts.coding == "native":
        return None, {}
    if opts.coding not in CODINGS:
        raise BadInput(f"--coding {opts.coding!r} is not known", remedy=f"use native or one of: {', '.join(CODINGS)}")
    coding = CODINGS[opts.coding]
    without = [t for t in targets.names if t not in coding.targets]
    if without and targets.named:
        raise BadInput(f"--target {without[0]} has no lowering for a {opts.coding.upper()} graph",
                       remedy=f"use --target {' or '.join(coding.targets)}")
    return coding, {t: f"{t} has no lowering for a {opts.coding.upper()} graph" for t in without}


def _coding_target_options(coding, opts: CompileOptions, model) -> dict:
    """What a target lowering a coded graph reads: the model (its evaluation data) and the coding's time step."""
    return {"model": model, "ttfs_dt": opts.ttfs_dt} if coding else {}


def _recode(coding, opts: CompileOptions, model, graph: Graph, x, records: list):
    """The coding's pass (by the pass manager, recorded after the others), its graph's run, and its verdict."""
    options = coding.options(opts)
    coded, more, trace_coded = coding.lower(model, graph, x, options)
    verdict = coding.verify(model, graph, coded, x, options, reference=trace_coded)
    return coded, trace_coded, records + more, verdict


def write_outdir(outdir, compiled: Compiled, reads=()) -> Path:
    """Write every artifact into a fresh sibling, re-read it, then move it onto ``outdir`` atomically.

    Returns where it went: ``outdir``, or ``outdir.not-equivalent`` beside an equivalent OUTDIR it must not
    replace. ``reads`` are the files the compile read, which an OUTDIR may not contain.
    """
    out = owned.check_outdir(outdir, reads)
    if not compiled.report["equivalent"] and owned.holds_equivalent_compile(out):
        out = owned.check_outdir(owned.not_equivalent_path(out), reads)
    with owned.writing(out) as tmp:  # an OSError (a full disk) is named; on any failure the temp tree goes
        save_graph(compiled.graph, tmp)
        np.savez(tmp / "io.npz", **compiled.io)
        for name, write in compiled.files.items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            write(tmp / name)
        (tmp / "report.json").write_text(json.dumps(compiled.report, indent=1, default=_json_default))
        write_html(compiled.report, compiled.before, compiled.graph, tmp / "report.html", activity=compiled.activity)
        check_written(tmp, compiled)
        owned.publish(tmp, out)
    return out


def check_written(directory: Path, compiled: Compiled) -> None:
    """Every file just written reads back, through the loaders ``spikec verify`` and ``spikec.load`` use, to exactly
    what was computed: graph, weights, io arrays and dtypes, report.json, and each artifact (a writer's own
    ``read_back``, e.g. the Lava target's integer reference and network; else its format's loader)."""
    differs = []
    for name, read in (("graph.json", lambda: _graph_differences(directory, compiled)),
                       ("io.npz", lambda: _io_differences(directory, compiled)),
                       ("report.json", lambda: _report_differences(directory, compiled)),
                       *((name, lambda name=name, w=w: _artifact_differences(directory / name, w))
                         for name, w in compiled.files.items())):
        try:
            differs += read()
        except Exception as e:  # any failure to load is the compiler's: it wrote the file a moment ago
            what = e.what if isinstance(e, SpikecError) else f"{type(e).__name__}: {e}"
            raise IRError(f"the written OUTDIR does not read back as computed: {name} does not load ({what})",
                          where=str(directory / name), remedy="this is a compiler bug: report it with the model") \
                from e
    if differs:
        raise IRError(f"the written OUTDIR does not read back as computed: {', '.join(differs[:8])}",
                      where=str(directory), remedy="this is a compiler bug: report it with the model")


def _graph_differences(directory: Path, compiled: Compiled) -> list[str]:
    graph = load_graph(directory)
    differs = [n.name for n in compiled.graph.nodes
               if n.name not in graph or any(k not in graph.node(n.name).params
                                             or graph.node(n.name).params[k].dtype != v.dtype
                                             or not np.array_equal(graph.node(n.name).params[k], v)
                                             for k, v in n.params.items())]
    return differs + (["graph.json"] if graph_to_json(graph) != graph_to_json(compiled.graph) else [])


def _io_differences(directory: Path, compiled: Compiled) -> list[str]:
    limit = (compiled.report.get("options") or {}).get("max_input_bytes")   # as verify --max-input-bytes would
    z = loader.load_npz(directory / "io.npz", max_bytes=limit, what="io.npz", required=("input",))
    return [f"io.npz: {k}" for k, v in compiled.io.items()
            if k not in z or z[k].dtype != np.asarray(v).dtype or not np.array_equal(z[k], v)]


def _report_differences(directory: Path, compiled: Compiled) -> list[str]:
    text = (directory / "report.json").read_text()
    json.loads(text)   # as verify reads it (NaN compares unequal to itself: the text is compared)
    return [] if text == json.dumps(compiled.report, indent=1, default=_json_default) else ["report.json"]


def _artifact_differences(path: Path, write) -> list[str]:
    """A target's or the provenance's file read back: by its writer's ``read_back`` (what differs from what was
    computed), else by the loader its format has in ``spikec verify`` / ``spikec compile`` (it must load)."""
    if hasattr(write, "read_back"):
        return write.read_back(path)
    if path.suffix == ".nir" and path.parent.name == "source":  # the user's file, read as a .nir MODEL is read
        from spikec.frontend.nir_file import read_nir
        read_nir(path)
    elif path.suffix == ".nir":
        import nir
        nir.read(str(path))
    elif path.suffix == ".onnx":
        import onnx
        onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    elif path.suffix == ".pt":  # the source weights copy: verify loads it as a plain state_dict, never unpickled
        if not isinstance(torch.load(path, map_location="cpu", weights_only=True), dict):
            return [f"{path.name}: not a state_dict"]
    elif path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as z:
            for key in z.files:
                z[key]  # every array read, as the target that wrote it reads it
    elif path.suffix == ".json":
        json.loads(path.read_text())
    elif path.is_dir() or not path.is_file():
        return [f"{path.name}: not a file"]
    return []


def _json_default(v):
    if isinstance(v, (np.integer, np.floating)):
        return v.item()
    raise TypeError(f"{type(v).__name__} is not JSON serializable")
