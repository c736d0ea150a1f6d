"""``spikec verify OUTDIR``: re-run every check on what OUTDIR holds, trusting nothing in it.

``report.json`` is data, never authority: it does not say which checks run (the artifacts present do),
where code or weights come from (``OUTDIR/source`` or verify's own ``--model``/``--weights``), or whether
a pickle may be opened (only verify's own ``--trust-pickle``, and only for its own ``--weights``). Its
options are read back only as compile settings (passes, seed, ...) and are validated like the CLI's.

No code from OUTDIR runs unless asked: by default verify checks what needs no model code (the IR loads and
verifies, reproduces io.npz's recorded outputs, and every target artifact against it; a ``.nir`` source, which is
data, is replayed too) and says that the source was not run and how to run it. ``run_source`` (``--run-source``)
runs ``OUTDIR/source``'s copy of the model code, refusing a folder holding a module named like an installed one;
``model`` (``--model``) runs the user's own code. Every file is read as ``spikec.app.files`` reads OUTDIRs:
regular files only, no symbolic links, bounded.
"""
import dataclasses
import json
from pathlib import Path

import numpy as np

from spikec.app import files
from spikec.app import outdir as owned
from spikec.app.conventions import choose
from spikec.frontend.stepping import STEPPINGS
from spikec.app.driver import CODINGS, CompileOptions, check_options, compile_model, load_source
from spikec.app.multitarget import plan
from spikec.passes import select
from spikec.app.provenance import (INSTANCE, NIR_COPY, SOURCE_DIR, WEIGHTS_COPY, instance_spec, is_instance,
                                   source_entry, source_spec)
from spikec.app import loader
from spikec.core.checker import Comparison, compare_graphs, compare_with_torch
from spikec.ir.errors import BadInput, IRError, SpikecError
from spikec.core.interpreter import run
from spikec.ir.graph import Graph
from spikec.core.serialize import load_graph
from spikec.targets import VERIFIERS, get_target

ARTIFACTS = {"lava": "lava/network.json", "nir": "model.nir", "onnx": "model.onnx", "xylo": "xylo/spec.npz"}
REPLAYED = ("passes", "target", "seed", "nir_dt", "nir_scheme", "coding", "ttfs_dt", "allow_unstable", "stepping",
            "nir_consumer")
CHOICES = {"nir_scheme": ("snntorch", "norse"), "coding": ("native", *CODINGS),  # as the CLI's click.Choice
           "stepping": ("auto", *STEPPINGS), "nir_consumer": ("any", "snntorch", "norse")}
NOT_AN_OUTDIR = "point at a directory written by `spikec compile` (recompile older ones)"


def _read_report(out: Path) -> dict:
    why = owned.ownership(out) if out.is_dir() else "it is not a directory"
    if why:
        raise BadInput(f"{str(out)!r} is not an OUTDIR written by `spikec compile` ({why})", remedy=NOT_AN_OUTDIR)
    files.check_tree(out)  # no link, FIFO or device anywhere before any file of it is opened
    try:
        data = files.read_bytes(out / "report.json", "report.json", files.JSON_LIMITS["report.json"], nofollow=True,
                                remedy="point at a directory written by `spikec compile`")
        report = json.loads(data)
    except (ValueError, RecursionError) as e:  # RecursionError: JSON nested too deep to parse
        raise BadInput(f"{str(out)!r} holds no readable report.json: {type(e).__name__}: {e}",
                       remedy="point at a directory written by `spikec compile`") from e
    if not isinstance(report, dict):
        raise BadInput(f"{str(out)!r}: report.json is not a JSON object", remedy="recompile")
    for key in ("provenance", "options"):
        if report.get(key) is not None and not isinstance(report[key], dict):
            raise BadInput(f"{str(out)!r}: report.json {key!r} is a JSON {type(report[key]).__name__}, not an object",
                           remedy="recompile")
    return report


def source_mode(out: Path, model, weights, run_source: bool) -> str | None:
    """Where the source model verify checks against comes from: ``model`` (verify's own ``--model`` or module),
    ``nir`` (OUTDIR's ``.nir`` copy: data, no code), ``outdir`` (OUTDIR's code, with ``run_source``), or None."""
    if model is not None:
        if run_source:
            raise BadInput("--run-source and --model both name the model to run",
                           remedy="give --model to run your own code, or --run-source to run OUTDIR's copy")
        return "model"
    if (out / SOURCE_DIR / NIR_COPY).is_file():
        return "nir"
    if run_source:
        return "outdir"
    if weights is not None:
        raise BadInput("--weights is the checkpoint of the source model, and verify runs none unless asked",
                       remedy="add --model FILE.py:factory (your own code) or --run-source (OUTDIR/source's code)")
    return None


def not_run(out: Path, report: dict) -> dict:
    """The result entry of a verification that ran no source model: why, and how to run it."""
    try:
        entry = source_entry(out, report)
    except BadInput:
        entry = None
    code = entry if entry is not None and entry.is_file() else None
    own = f"--model FILE.py:factory --weights {out / SOURCE_DIR / WEIGHTS_COPY}"
    if code is None:
        model = report.get("model")
        origin = f" (it was compiled from a module instance, {model[len(INSTANCE):-1]})" if is_instance(model) else ""
        return {"equivalent": True, "not_run": True, "checks": ["source_vs_deployed", "passes_replayed"],
                "reason": f"OUTDIR holds no code to rebuild the source model{origin}",
                "remedy": own + " (your own code; spikec.verify(outdir, model=your_module) in Python)"}
    return {"equivalent": True, "not_run": True, "checks": ["source_vs_deployed", "passes_replayed"],
            "code": str(code),
            "reason": f"the source model's code, {code}, came with OUTDIR, and verify runs no code from OUTDIR "
                      "unless asked",
            "remedy": f"add --run-source to run that code (read it first: it runs as you), or {own} to run your own"}


def _replay_options(report: dict, model: str, weights: str | None, trust_pickle: bool) -> CompileOptions:
    """The compile settings the report records, each checked for its type; model and weights are verify's."""
    recorded = report.get("options") if isinstance(report.get("options"), dict) else {}
    defaults = CompileOptions(model)
    kept = {}
    for key in REPLAYED:
        if key not in recorded:
            continue
        value, default = recorded[key], getattr(defaults, key)
        types = (type(default),) if default is not None else (int, float)
        if (value is None and default is not None) or value is not None and not isinstance(value, types) \
                or isinstance(value, bool) != isinstance(default, bool):
            raise BadInput(f"report.json option {key!r} = {value!r} has the wrong type", remedy="recompile")
        if key in CHOICES and value not in CHOICES[key]:
            raise BadInput(f"report.json option {key!r} = {value!r} is not one of {', '.join(CHOICES[key])}",
                           remedy="recompile")
        kept[key] = value
    opts = dataclasses.replace(defaults, weights=weights, trust_pickle=trust_pickle, **kept)
    try:
        check_options(dataclasses.replace(opts, weights=None))  # seed >= 0, finite positive time steps
    except BadInput as e:
        raise BadInput(f"report.json options: {e.what}", remedy="recompile") from e
    plan(opts.target)  # none | all | names: each a known, loadable target
    try:
        select(opts.passes)  # known pass names, whether or not a replay runs them
    except BadInput as e:
        raise BadInput(f"report.json option 'passes': {e.what}", remedy="recompile") from e
    return opts


def _recorded(out: Path, max_bytes) -> dict:
    arrays = loader.load_npz(out / "io.npz", max_bytes=max_bytes, what="io.npz", required=("input",), nofollow=True)
    odd = [k for k, v in arrays.items() if v.dtype.kind not in "fiub"]
    if odd:
        raise BadInput(f"{str(out / 'io.npz')!r}: array {odd[0]!r} has dtype {arrays[odd[0]].dtype}, not numbers",
                       remedy="recompile")
    arrays["input"] = loader.check_spike_input(arrays["input"], f"array 'input' of {str(out / 'io.npz')!r}")
    return arrays


def _check_input_shape(graph: Graph, x: np.ndarray, what: str) -> None:
    """``x`` is ``[T, B, *shape]`` for the graph's input node."""
    shape = graph.inputs[0].type.shape if graph.inputs else None
    if shape is not None and tuple(x.shape[2:]) != tuple(shape):
        raise BadInput(f"{what} has per-step shape {tuple(x.shape[2:])}, the graph's input takes {tuple(shape)}",
                       remedy="lay the inputs out as [T, B, *input_shape] (or recompile)")


def _check_runs(graph: Graph, x: np.ndarray, out: Path) -> None:
    """One sample (every step: BNTT and delays need T) through the loaded graph: attributes the verifier does not
    type (a neuron's reset, a kernel size) fail here as a malformed graph.json, not deep inside a check."""
    try:
        run(graph, x[:, :1], record="outputs")
    except SpikecError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, RuntimeError) as e:
        raise IRError(f"the IR in {str(out / 'graph.json')!r} cannot be run: {type(e).__name__}: {e}",
                      remedy="recompile (`spikec compile` writes the IR and reads it back as written)") from e


def compare_io(graph: Graph, x, recorded: dict, approximate: bool, float32=()) -> dict:
    """Every recorded output (``output``, ``output1``, ...) against the deployed graph's outputs in order;
    ``float32``: the outputs the compile found the source holds in float32 (report.json), compared so."""
    keys = ["deployed_output"] if approximate else \
        [f"output{'' if i == 0 else i}" for i in range(len(graph.outputs))]
    stored = sorted(k for k in recorded if k.startswith("output") or k == "deployed_output")
    # an approximate (TTFS) OUTDIR also records the source's own ``output``: the deployed one is compared here
    if any(k not in recorded for k in keys) or \
            (not approximate and any(k not in keys for k in stored if k.startswith("output"))):
        return {"equivalent": False, "error": f"io.npz holds outputs {stored}, the graph has "
                                              f"{len(graph.outputs)} ({', '.join(graph.outputs)})"}
    # Trace.outputs: a read-out over time (read='last') is its last step, as io.npz records it
    values = dict(zip(graph.outputs, run(graph, x, record="outputs").outputs(graph)))
    result = Comparison(float32_allowed=frozenset(float32))
    for key, name in zip(keys, graph.outputs):
        result.add(name, recorded[key], values[name], graph.node(name).type.is_spike)
    return {**result.summary(), "outputs_compared": keys}


def _float32_outputs(report: dict) -> tuple:
    """The outputs the compile compared within float32's rounding (the source holds them so), as report.json says."""
    final = report.get("final") if isinstance(report, dict) else None
    names = final.get("float32_outputs") if isinstance(final, dict) else None
    return tuple(n for n in names if isinstance(n, str)) if isinstance(names, list) else ()


def verify_outdir(outdir, inputs: str | None = None, *, model=None, weights: str | None = None,
                  trust_pickle: bool = False, max_input_bytes: int | None = None, run_source: bool = False) -> dict:
    """Every check that applies to ``outdir``; returns ``{check: summary}`` (each with ``equivalent``).

    ``model``: a MODEL spec (``FILE.py:factory``, ``.nir``) or an ``nn.Module`` instance (the Python API) to verify
    against instead of ``OUTDIR/source``. ``run_source``: run OUTDIR/source's copy of the model code (else the
    source model is not checked: ``source_not_run`` says so and how to run it)."""
    out = Path(outdir)
    from spikec.targets.lava import leftovers
    leftovers.sweep()  # what runs killed with every process left, as every compile does
    report = _read_report(out)
    _replay_options(report, "", None, False)  # the recorded settings are checked whether or not a replay uses them
    mode = source_mode(out, model, weights, run_source)
    graph = load_graph(out)
    results = {"ir_verifies": {"equivalent": True}}
    recorded = _recorded(out, max_input_bytes)
    # an approximate compile (a coding's approximation, e.g. TTFS LayerNorm) records the deployed graph's own output:
    # it is compared with that, and with the source only as closely as a replay of the compile measures
    approximate = "deployed_output" in recorded
    x = loader.load_inputs(inputs, max_input_bytes) if inputs is not None else recorded["input"]
    _check_input_shape(graph, x, f"array 'input' of {str(inputs if inputs is not None else out / 'io.npz')!r}")
    _check_runs(graph, x, out)
    if not inputs:
        results["io_outputs"] = compare_io(graph, x, recorded, approximate, _float32_outputs(report))
    results.update(_target_checks(out, graph, x, report))
    verdict = compile_verdict(report)
    if verdict is not None:
        results["compile_verdict"] = verdict
    if mode is None:
        results["source_not_run"] = not_run(out, report)
        return results
    sources = _source_checks(out, report, graph, x, bool(inputs), model, weights, trust_pickle, mode)
    if approximate and "passes_replayed" in sources and not sources["source_vs_deployed"].get("approximate"):
        # the replay is exact: no approximation explains the deployed_output, the source's outputs must match too
        results["io_outputs"] = compare_io(graph, x, recorded, approximate=False,
                                           float32=_float32_outputs(report))
    results.update(sources)
    return results


def compile_verdict(report: dict) -> dict | None:
    """report.json's verdict when it is *not equivalent*, as a failed check. verify re-runs what OUTDIR holds and
    cannot re-run what the compile could not prove (a refused target left no artifact), so such an OUTDIR must not
    verify into a pass (a CI gate on ``spikec verify`` would ship it). report.json stays untrusted: it can only
    lower the verdict, never raise it."""
    if report.get("equivalent") is not False:
        return None
    targets = [(n, r) for n, r in (report.get("targets") or {}).items() if isinstance(r, dict)]
    why = [f"target {n} {'refused' if r.get('refused') else 'failed (a compiler bug)'}: "
           f"{str(r.get('reason', '')).splitlines()[0] if r.get('reason') else 'no reason recorded'}"
           for n, r in targets if r.get("refused") or r.get("failed")]
    return {"equivalent": False,
            "error": "the compile that wrote this OUTDIR was not equivalent (report.json): "
                     + ("; ".join(why) or "its own checks failed") + "; what verify re-ran above holds, the rest "
                     "cannot be re-run: recompile without what was refused (or fix it) for an OUTDIR that verifies"}


def _target_checks(out: Path, graph: Graph, x, report: dict) -> dict:
    """Each target whose artifacts OUTDIR holds, re-run from those files; a claimed target with none fails."""
    results, reference = {}, None
    present = [name for name, path in ARTIFACTS.items() if (out / path).exists()]
    for claimed in _claimed_targets(report):
        if claimed not in present:
            results[f"target_{claimed}"] = {"equivalent": False,
                                            "error": f"report.json records target {claimed!r} but "
                                                     f"{ARTIFACTS[claimed]} is missing"}
    for name in present:
        get_target(name)
        reference = reference or run(graph, x, progress="verifying")
        try:
            results[f"target_{name}"] = VERIFIERS[name](out, graph, x, reference)
        except OSError as e:  # the artifact cannot be read at all (not a file of its format, unreadable)
            raise BadInput(f"cannot read {str(out / ARTIFACTS[name])!r}: {type(e).__name__}: {e}",
                           remedy="recompile (verify re-checks every target artifact OUTDIR holds)") from e
    return results


def _claimed_targets(report: dict) -> list[str]:
    """The targets report.json says were emitted (``targets``, and the single ``target`` of older reports)."""
    claims = list(report["targets"].values()) if isinstance(report.get("targets"), dict) else []
    claims.append(report.get("target"))
    names = [c.get("name") for c in claims if isinstance(c, dict) and c.get("emitted") is not False
             and not c.get("refused")]
    return sorted({n for n in names if isinstance(n, str) and n in ARTIFACTS})


def _source_checks(out, report, graph, x, given_inputs, model, weights, trust_pickle, mode) -> dict:
    """The source model (OUTDIR's copy, or verify's --model) against the deployed graph, and the replayed passes."""
    opts, source, spec = replay_source(out, report, model, weights, trust_pickle, run_source=mode == "outdir")
    kind, ceiling = loader.value_kind(np.asarray(x))
    adapted = choose(source, opts.stepping, np.asarray(x, dtype=np.float64), kind, ceiling).model
    results = {"source_vs_deployed": {**compare_with_torch(adapted, graph, x, progress="verifying").summary(),
                                      "source": describe_source(mode, spec)}}
    if given_inputs:
        return results
    replay = compile_model(dataclasses.replace(opts, target="none"), model=source, inputs=x)
    results["passes_replayed"] = compare_graphs(replay.graph, graph, x).summary()
    results["passes_replayed"]["passes"] = [r["name"] for r in replay.report["passes"]]
    if replay.report["final"].get("approximate"):  # the replay, never the report, says the compile approximates
        r, bound = results["source_vs_deployed"], replay.report["final"]["max_rel_diff"]
        r["approximate"] = True
        r["equivalent"] = r["max_rel_diff"] <= bound * (1 + 1e-6) + 1e-12
    return results


def describe_source(mode: str, spec: str) -> str:
    """Where the source model that ran came from, for the result and the terminal."""
    if mode == "outdir":
        return f"{spec} (the code OUTDIR carries, run because of --run-source)"
    if mode == "nir":
        return f"{spec} (NIR data OUTDIR carries: no code from OUTDIR ran)"
    return f"{spec} (verify's --model: your own code)"


def replay_source(out: Path, report: dict, model, weights: str | None, trust_pickle: bool, *,
                  run_source: bool = False):
    """``(options, source module, MODEL spec)``: the compile settings replayed from the report and the source model
    (verify's own ``model``/``weights``, OUTDIR's ``.nir`` copy, or with ``run_source`` OUTDIR's code), loaded as
    ``spikec verify`` trusts them. OUTDIR's code runs only with ``run_source``, and not from a folder holding a
    module named like an installed one."""
    instance = None
    if model is not None and not isinstance(model, str):  # a module instance (spikec.verify(outdir, model=net))
        instance, model = model, instance_spec(model)
    if model is None:
        copy = out / SOURCE_DIR / WEIGHTS_COPY
        if copy.exists() and not copy.is_file():
            raise BadInput(f"{str(copy)!r} is not a file", remedy="recompile")
        model, copied = source_spec(out, report)
        if not model.endswith(".nir"):
            if not run_source:
                raise BadInput(f"running {model.rpartition(':')[0]} (code OUTDIR carries) needs --run-source",
                               remedy="add --run-source, or give --model FILE.py:factory")
            loader.check_no_shadowing(out / SOURCE_DIR)
        weights = weights or copied
        if weights == copied:
            trust_pickle = False  # spikec wrote it as a plain state_dict: never unpickle it
    opts = _replay_options(report, model, weights, trust_pickle)
    return opts, load_source(opts, instance), model
