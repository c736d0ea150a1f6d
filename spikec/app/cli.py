"""``spikec`` command line, a thin layer over the driver.

Exit codes: 0 success; 1 not equivalent / verification failed; 2 bad input; 3 a compiler bug (internal error);
130 / 143 interrupted by SIGINT / SIGTERM. What user code prints goes to stderr, so stdout carries only spikec's
own output.

The console entry (``run``) runs the command in a forked child that reports its exit code to the parent just
before it exits: a model whose code ends the process itself (``os._exit``, a fatal signal) cannot pass for a
success or a verdict, the parent says so and exits 2.
"""
import contextlib
import json
import logging
import os
import signal
import sys
import time
import traceback
from pathlib import Path

import click

from spikec.ir.errors import Interrupted, SpikecError

# SpikingJelly registers torch custom ops that warn "Triton not available" (at import and on first use): noise
# on a CPU machine, where its torch reference code is what runs anyway
logging.getLogger("torch._library.triton").setLevel(logging.ERROR)


def _shape(ctx, param, value):
    if value is None:
        return None
    try:
        dims = tuple(int(v) for v in value.split(","))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of integers, e.g. 1,8,8")
    if not dims or any(d < 1 for d in dims):
        raise click.BadParameter(f"{value!r}: every dimension must be >= 1")
    return dims


class SafePath(click.Path):
    """``click.Path`` that reports a NUL byte or an over-long name as a usage error (exit 2), not a traceback."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and "\0" in value:
            self.fail("the path contains a NUL byte", param, ctx)
        try:
            return super().convert(value, param, ctx)
        except (OSError, ValueError) as e:
            self.fail(f"{value[:80]!r}...: {e}" if len(str(value)) > 80 else f"{value!r}: {e}", param, ctx)


def _fail(message: str, code: int, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    click.echo(f"error: {message}", err=True)
    return code


def _user_frame(tb) -> str:
    """`` (forward in /path/model.py:12)``: the innermost frame of ``tb`` outside spikec and the installed packages."""
    here, found = str(Path(__file__).resolve().parents[1]), ""
    lib = {str(Path(p).resolve()) for p in (sys.prefix, sys.base_prefix, os.path.dirname(os.__file__))}
    while tb is not None:
        code = tb.tb_frame.f_code
        path = str(Path(code.co_filename).resolve()) if not code.co_filename.startswith("<") else ""
        if path and not path.startswith(here) and not any(path.startswith(p) for p in lib):
            found = f" ({code.co_name} in {path}:{tb.tb_lineno})"
        tb = tb.tb_next
    return found


def _run_guarded(fn, args, kwargs, debug: bool) -> int:
    """Run a command; every way it can end becomes a message and an exit code, never a bare traceback."""
    try:
        return fn(*args, **kwargs) or 0
    except SpikecError as e:
        return _fail(e.message(), e.exit_code, debug)
    except KeyboardInterrupt:
        return _fail("interrupted (SIGINT); nothing was written", 130, debug)
    except Interrupted as e:
        return _fail(f"interrupted (signal {e.signum}); nothing was written", e.exit_code, debug)
    except SystemExit as e:  # spikec never exits from inside a command: this came from user code
        return _fail(f"the model's code{_user_frame(e.__traceback__)} called sys.exit({e.code!r}) during the "
                     "command\n  remedy: the factory and forward must return, not exit", 2, debug)
    except MemoryError:
        return _fail("out of memory\n  remedy: use fewer samples or steps (--batch, --steps, a smaller --inputs)",
                     2, debug)
    except Exception as e:  # a bug in spikec or an unforeseen input: still no bare traceback
        return _fail(f"internal error: exception {type(e).__name__}: {e}\n  remedy: this is a compiler bug: run "
                     "with --debug for the traceback, and please report it", 3, debug)
    except BaseException as e:  # GeneratorExit, a custom BaseException: spikec raises none but the above
        text = f"{type(e).__qualname__}" + (f"({e})" if str(e) else "")
        return _fail(f"the model's code{_user_frame(e.__traceback__)} raised {text}, a BaseException, during the "
                     "command\n  remedy: the factory and forward must return (or raise an Exception), not raise "
                     "a BaseException", 2, debug)


def _guard(fn):
    """User code's prints go to stderr while the command runs; spikec's results go to the real stdout."""
    def wrapper(*args, **kwargs):
        ctx = click.get_current_context()
        ctx.meta["spikec.stdout"] = sys.stdout
        debug = _debug()
        with contextlib.redirect_stdout(sys.stderr if sys.stderr is not None else sys.stdout):
            code = _run_guarded(fn, args, kwargs, debug)
        if _LAST_SIGNAL and code not in (130, 143):  # the interrupt was swallowed (raised in a __del__, or caught
            signum = max(_LAST_SIGNAL, key=_LAST_SIGNAL.get)  # by library code): the exit still says it came
            code = _fail(f"interrupted (signal {signum}), but the command's code went on: its outcome is not a "
                         "result", 128 + signum, False)
        try:
            if sys.stdout is not None:
                sys.stdout.flush()
        except (OSError, ValueError):
            ctx.meta["spikec.stdout_lost"] = True
        if ctx.meta.get("spikec.stdout_lost") and code == 0:
            code = _fail("the command's output could not be printed: stdout is closed or broken (the command "
                         "itself completed)\n  remedy: run it with stdout open, e.g. `> out.txt`", 2, False)
        ctx.exit(code)
    wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
    return wrapper


def _debug() -> bool:
    """``--debug`` before the command (``spikec --debug compile``) or after it (``spikec compile --debug``)."""
    ctx = click.get_current_context()
    return bool(ctx.find_root().params.get("debug")) or bool(ctx.meta.get("spikec.debug"))


def _set_debug(ctx, param, value):
    if value:
        ctx.meta["spikec.debug"] = True


def debug_option(fn):
    """``--debug`` accepted after the command name too (``spikec compile --debug ...``)."""
    return click.option("--debug", is_flag=True, expose_value=False, callback=_set_debug,
                        help="Show tracebacks (as spikec --debug).")(fn)


def say(text: str = "") -> None:
    """Print to the command's real stdout (not to the stderr that user code's prints are sent to); a closed or
    broken stdout is noted (the command then exits 2 saying so), not a traceback."""
    ctx = click.get_current_context()
    out = ctx.meta.get("spikec.stdout", sys.stdout)
    if out is None:
        ctx.meta["spikec.stdout_lost"] = True
        return
    try:
        click.echo(text, file=out)
    except (OSError, ValueError):  # EBADF, EPIPE; ValueError: the stream was closed
        ctx.meta["spikec.stdout_lost"] = True


@click.group()
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def main(debug):
    """spikec: compile a PyTorch spiking model for neuromorphic targets, proving every step equivalent."""


model_options = [
    click.argument("model"),
    click.option("--weights", type=SafePath(dir_okay=False), help="state_dict checkpoint (torch.save)."),
    click.option("--input-shape", callback=_shape, help="per-step input shape, e.g. 1,8,8."),
    click.option("--steps", type=click.IntRange(min=1), help="time steps T of the verification inputs."),
    click.option("--trust-pickle", is_flag=True, help="allow a pickled checkpoint (runs its code)."),
    click.option("--dt", "nir_dt", type=click.FloatRange(min=0, min_open=True), default=1e-4, show_default=True,
                 help="time step a .nir MODEL is discretized at."),
    click.option("--nir-scheme", type=click.Choice(["snntorch", "norse"]), default="snntorch", show_default=True,
                 help="discretization of a .nir MODEL."),
    click.option("--allow-unstable", is_flag=True,
                 help="compile a .nir MODEL whose neurons grow without bound (negative tau, decay outside [0, 1])."),
    click.option("--max-input-bytes", type=click.IntRange(min=1),
                 help="largest verification input accepted (float64 bytes); default: 1/8 of available memory."),
    click.option("--stepping", type=click.Choice(["auto", "multistep", "step", "loop"]), default="auto",
                 show_default=True, help="model convention: forward maps [T, B, ...] (multistep), computes one step "
                 "(step), or runs its own time loop (loop); auto: the only one that fits."),
]


def _with(options):
    def deco(fn):
        for opt in reversed(options):
            fn = opt(fn)
        return fn
    return deco


@main.command("inspect")
@_with(model_options)
@click.option("--json", "as_json", is_flag=True, help="print the IR as JSON.")
@click.option("--html", "html_path", type=SafePath(dir_okay=False),
              help="also draw the IR into this self-contained HTML page (a new file, or one spikec wrote).")
@debug_option
@_guard
def inspect_cmd(model, weights, input_shape, steps, trust_pickle, nir_dt, nir_scheme, allow_unstable,
                max_input_bytes, stepping, as_json, html_path):
    """Trace MODEL (path/file.py:factory or pkg.module:factory) and print its IR."""
    from spikec.app.option_checks import absolute, absolute_model, check_early
    model, weights, html_path = absolute_model(model), absolute(weights), absolute(html_path)
    check_early(model, weights)  # before torch is imported
    from spikec.app.driver import CompileOptions, load_source, make_inputs
    from spikec.frontend import trace
    from spikec.ops import deployed_params
    from spikec.core.serialize import graph_to_json
    from spikec.app.conventions import choose
    from spikec.app import loader
    opts = CompileOptions(model, weights=weights, input_shape=input_shape, steps=steps, batch=1,
                          trust_pickle=trust_pickle, nir_dt=nir_dt, nir_scheme=nir_scheme,
                          allow_unstable=allow_unstable, max_input_bytes=max_input_bytes, stepping=stepping)
    source = load_source(opts)
    x, _, _ = make_inputs(source, opts)
    conv = choose(source, stepping, x, *loader.value_kind(x), random=True)
    graph = trace(conv.model, conv.x.shape[2:])
    if html_path:
        from spikec.app.html_report import inspect_html
        say(f"wrote {inspect_html(graph, html_path, title=model)}")
    if as_json:
        say(json.dumps(graph_to_json(graph), indent=1))
        return 0
    say(f"{'node':<24} {'op':<10} {'shape':<16} {'kind':<12} {'params':>8}  inputs")
    for n in graph.nodes:
        kind = f"integer<={n.type.ceiling}" if n.type.kind == "integer" else n.type.kind
        say(f"{n.name:<24} {n.op:<10} {str(list(n.type.shape)):<16} {kind:<12} "
            f"{deployed_params(n):>8}  {', '.join(n.inputs)}")
    return 0


@main.command("compile")
@_with(model_options)
@click.option("-o", "--out", "outdir", required=True, type=SafePath(file_okay=False),
              help="output directory: new, empty, or one spikec wrote before.")
@click.option("--batch", type=click.IntRange(min=1), help="samples of the random verification inputs [default: 4].")
@click.option("--inputs", type=SafePath(dir_okay=False), help=".npz with key 'input' shaped [T, B, ...].")
@click.option("--passes", default="default", show_default=True, help="default | none | a,b,c")
@click.option("--target", default="none", show_default=True,
              help="none | all | lava | nir | onnx | xylo | a list such as lava,nir,onnx (all: lava, nir and onnx, "
                   "each that can map the graph, a refusal reported, not a failure; xylo only by name). The default, none, proves the trace and the "
                   "passes only and writes no target artifact; the Python API's spikec.compile defaults to "
                   "lava,nir,onnx. The CLI does not, because a Lava run takes seconds to minutes: name the targets "
                   "you deploy to.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="seed of the random verification inputs, and of the factory's initialisation when no --weights "
                   "is given.")
@click.option("--coding", type=click.Choice(["native", "ttfs"]), default="native", show_default=True,
              help="native: the model's own coding; ttfs: map a ReLU ANN onto time-to-first-spike neurons.")
@click.option("--ttfs-dt", type=click.FloatRange(min=0, min_open=True),
              help="TTFS: discrete time step reported first (default: window/64); with --target lava, the "
                   "tick of the deployed grid (it must divide the window).")
@click.option("--probes/--no-probes", default=True, show_default=True,
              help="append seeded probe samples (saturation, checkerboards, each border) to the inputs.")
@click.option("--nir-consumer", type=click.Choice(["any", "snntorch", "norse"]), default="any", show_default=True,
              help="NIR export: the importer whose form model.nir is written in.")
@click.option("--xylo-chip", help="with --target xylo: the chip mapped onto, xylo-audio-2 (the default), "
              "xylo-audio-3 or xylo-imu (the xylo target checks the name).")
@click.option("--nir-version", type=click.Choice(["1.0.8", "1.0.7"]),
              help="with --target nir: the NIR file version written [default: 1.0.8].")
@click.option("--lava-reset", type=click.Choice(["current", "subtract", "zero"]),
              help="with --target lava: how subtract-reset neurons deploy. Default ('current'): Lava's standard LIF "
                   "with the membrane in its current u and a -vth self-synapse (chip-ready; its integer arithmetic "
                   "carries v/4096 between steps, compared with the carry-free form in the report), and Sinabs's "
                   "integer-firing neurons as count ladders of that LIF; 'subtract': spikec's carry-free SpikecLIF "
                   "and SpikecIntFire (CPU only); 'zero': Lava's zero-reset LIF, and Sinabs's min_v_mem dropped, "
                   "another neuron (approximate: the spike disagreement is measured and reported; never "
                   "equivalent).")
@click.option("--strict", is_flag=True, help="exit 1 on any warning (a silent or saturated layer, a constant "
              "output, a decay outside (0, 1]): a proof that shows nothing fails.")
@debug_option
@_guard
def compile_cmd(model, weights, input_shape, steps, trust_pickle, nir_dt, nir_scheme, allow_unstable,
                max_input_bytes, stepping, outdir, batch, inputs, passes, target, seed, coding, ttfs_dt, probes,
                nir_consumer, xylo_chip, nir_version, lava_reset, strict):
    """Compile MODEL into OUTDIR: IR, report.json, io.npz, source copy, target artifacts."""
    from spikec.app.option_checks import absolute, absolute_model, check_early
    model, outdir, weights, inputs = absolute_model(model), absolute(outdir), absolute(weights), absolute(inputs)
    check_early(model, weights, inputs, passes, target)  # before torch is imported: a typo costs no import
    from spikec.app import outdir as owned
    from spikec.app.api import check_name_lengths, compile_options, compile_with
    from spikec.app.driver import write_outdir
    from spikec.app.multitarget import plan
    from spikec.app.provenance import model_file
    from spikec.app.summary import summary_text
    from spikec.app.vacuity import format_warning
    check_name_lengths(outdir)
    opts, _, _ = compile_options(model, weights=weights, input_shape=input_shape, steps=steps, batch=batch,
                                 inputs=inputs, passes=passes, target=target, seed=seed, trust_pickle=trust_pickle,
                                 nir_dt=nir_dt, nir_scheme=nir_scheme, coding=coding, ttfs_dt=ttfs_dt,
                                 allow_unstable=allow_unstable, max_input_bytes=max_input_bytes, probes=probes,
                                 stepping=stepping, nir_consumer=nir_consumer, xylo_chip=xylo_chip,
                                 nir_version=nir_version, lava_reset=lava_reset, report_refusals=True)
    owned.check_outdir(outdir, [model_file(model), weights, inputs])  # before minutes of work, not after
    plan(target)  # an unknown target too
    c = compile_with(opts)
    compiled, out = c.compiled, write_outdir(outdir, c.compiled, c.reads)
    say(summary_text(compiled.report))
    say(f"  wrote      {out}/" + ", ".join(["report.json", "report.html", "graph.json", "weights.npz", "io.npz", *compiled.files]))
    for w in compiled.report["warnings"]:
        say(format_warning(w))
    if _target_failures(compiled.report["targets"]):
        return 3
    if strict and compiled.report["warnings"] and compiled.report["equivalent"]:
        say(f"  --strict: {len(compiled.report['warnings'])} warning(s): the proof is not accepted")
        return 1
    if not compiled.report["equivalent"]:
        if out.name != Path(outdir).name:
            say(f"  NOT equivalent: written to {out}, beside {outdir}, which holds an equivalent compile "
                "and is left unchanged")
        return 1
    return 0


def _target_failures(targets: dict) -> bool:
    """Each refused or failed target's reason and remedy in full on stderr (the summary has its first line);
    True when one failed internally (a compiler bug: exit 3, the other targets were written)."""
    from spikec.app.multitarget import internal_failures
    debug = _debug()
    for r in targets.values():
        if isinstance(r, dict) and r.get("refused"):
            click.echo(f"note: target {r['name']} refused: {r.get('reason', '')}", err=True)
    bugs = internal_failures(targets)
    for r in bugs:  # the first line unless --debug: the rest is a traceback (also in report.json)
        if debug:
            click.echo(r.get("traceback", ""), err=True)
        lines = r["reason"].splitlines()
        more = "" if debug or len(lines) < 2 else f" (and {len(lines) - 1} more lines: --debug shows them)"
        click.echo(f"error: {r['reason'] if debug else lines[0]}{more}\n  remedy: {r['remedy']}", err=True)
    return bool(bugs)


def _first_problem(r: dict) -> str:
    if r.get("error"):
        return f"\n    {r['error']}"
    bad = r.get("first_mismatches") or []
    if not bad:
        return ""
    m = bad[0]
    margin = "" if m.get("margin") is None else f", margin |U - boundary| = {m['margin']:.3g}"
    where = m.get("node", m.get("layer", "?"))
    return (f"\n    first mismatch: node {where!r} step {m.get('step')} index {tuple(m.get('index', ()))}: "
            f"expected {m.get('expected')!r}, got {m.get('got')!r}{margin}")


@main.command("verify")
@click.argument("outdir", type=SafePath())
@click.option("--inputs", type=SafePath(dir_okay=False), help="re-check on these inputs instead of io.npz "
              "(with --workers/--ray: the data set, an .npz with key 'input' or an .npy).")
@click.option("--run-source", is_flag=True, help="run the model code OUTDIR carries (OUTDIR/source) and check the "
              "source model against the deployed graph; without it, no code from OUTDIR runs.")
@click.option("--model", help="verify against this MODEL, your own code, instead of OUTDIR's copy (FILE.py:factory "
              "or .nir).")
@click.option("--weights", type=SafePath(dir_okay=False), help="with --model or --run-source: the state_dict "
              "checkpoint.")
@click.option("--trust-pickle", is_flag=True, help="allow --weights to be a pickle (runs its code).")
@click.option("--max-input-bytes", type=click.IntRange(min=1), help="largest input array accepted (float64 bytes); "
              "with --workers: the most one worker may hold.")
@click.option("--workers", type=int, help="verify the --inputs data set sample by sample in N worker processes "
              "(1: in this process) and print one merged report; needs --model or --run-source.")
@click.option("--ray", "ray_address", metavar="ADDRESS", help="run the data set's shards as Ray tasks on this "
              "cluster (local: a local Ray); needs the optional ray package.")
@click.option("--targets", "targets", default="default", show_default=True,
              help="with --workers/--ray: target artifacts re-checked on each chunk: default (all but lava: Lava "
                   "runs are slow), all, none, or names such as onnx,nir.")
@click.option("--json", "as_json", is_flag=True, help="with --workers/--ray: print the merged report as JSON.")
@debug_option
@_guard
def verify_cmd(outdir, inputs, run_source, model, weights, trust_pickle, max_input_bytes, workers, ray_address,
               targets, as_json):
    """Re-run every check on OUTDIR, trusting nothing in it.

    report.json is read as data, never trusted, and no code from OUTDIR runs unless asked: the IR, io.npz and
    every target artifact are re-checked; the source model (and the pass replay) only with --run-source (OUTDIR's
    copy of its code, which runs as you), --model (your own), or from a .nir copy (data). Every file read from
    OUTDIR must be a regular file, not a link."""
    if workers is not None or ray_address is not None:
        return _verify_dataset(outdir, inputs, model, weights, trust_pickle, max_input_bytes, workers, ray_address,
                               targets, as_json, run_source)
    if targets != "default" or as_json:
        from spikec.ir.errors import BadInput
        raise BadInput(f"{'--targets' if targets != 'default' else '--json'} applies to a data-set run",
                       remedy="add --workers N (and --inputs DATA.npz), or drop the option")
    from spikec.app.verify import verify_outdir
    results = verify_outdir(outdir, inputs, model=model, weights=weights, trust_pickle=trust_pickle,
                            max_input_bytes=max_input_bytes, run_source=run_source)
    for name, r in results.items():
        if r.get("not_run"):
            say(f"{'source_vs_deployed':<20} NOT RUN: {r['reason']}\n    to check it: {r['remedy']}")
            continue
        detail = "" if "spikes_compared" not in r else (f": {r['spikes_compared']:,} spikes, "
                                                         f"{r.get('values_compared', 0):,} values, max rel diff "
                                                         f"{r.get('max_rel_diff', 0.0):.2g}")
        if r.get("approximate"):   # a target's own label, or TTFS's LayerNorm decomposition
            detail += (f" (APPROXIMATE: {r['approximate']})" if isinstance(r["approximate"], str) else
                       " (APPROXIMATE: TTFS LayerNorm decomposition; as close as a replay measures, not exact)")
        say(f"{name:<20} {'ok' if r['equivalent'] else 'FAILED'}{detail}"
            + ("" if r["equivalent"] else _first_problem(r)) + (f"\n    source: {r['source']}" if "source" in r else ""))
    return 0 if all(r["equivalent"] for r in results.values()) else 1


def _verify_dataset(outdir, inputs, model, weights, trust_pickle, max_input_bytes, workers, ray_address, targets,
                    as_json, run_source=False) -> int:
    from spikec.app.dataset_run import verify_dataset
    results = verify_dataset(outdir, inputs, workers=1 if workers is None else workers, ray=ray_address,
                             targets=targets, model=model, weights=weights, trust_pickle=trust_pickle,
                             max_input_bytes=max_input_bytes, progress=True, run_source=run_source)
    if as_json:
        say(json.dumps(results, indent=1))
    else:
        for line in _dataset_lines(results):
            say(line)
    return 0 if all(r["equivalent"] for r in results.values()) else 1


def _dataset_lines(results: dict) -> list[str]:
    d, s = results["dataset"], results["source_vs_deployed"]
    where = {"inline": "in this process", "processes": f"in {len(d['shards'])} worker processes",
             "ray": f"as {len(d['shards'])} Ray tasks"}[d["runner"]]
    failing = s["not_equivalent_samples"]
    lines = [f"{'dataset':<20} {d['samples']:,} samples, {d['layout']}, {len(d['shards'])} shard(s) {where}, "
             f"{d['seconds']:.1f} s",
             f"{'source_vs_deployed':<20} {'ok' if s['equivalent'] else 'FAILED'}: {s['spikes_compared']:,} spikes, "
             f"{s['values_compared']:,} values; {s['samples_equivalent']:,} of {s['samples']:,} samples equivalent"
             + ("" if not failing else f", {len(failing):,} NOT (samples {', '.join(map(str, failing[:10]))}"
                                       f"{', ...' if len(failing) > 10 else ''})")]
    for name, n in s["nodes"].items():
        if not n["mismatches"]:
            continue
        worst = "; ".join(f"sample {m['sample']} step {m['step']} index {tuple(m['index'])}: expected "
                          f"{m['expected']!r}, got {m['got']!r}"
                          + ("" if m["margin"] is None else f", margin {m['margin']:.3g}") for m in n["worst"][:3])
        lines.append(f"    node {name!r} ({n['kind']}): {n['mismatches']:,} mismatches in "
                     f"{n['samples_mismatched']:,} samples; "
                     f"{'smallest margins' if n['worst'] and n['worst'][0]['margin'] is not None else 'first'}: {worst}"
                     + (f"; {n['error']}" if n.get("error") else ""))
    for name, r in results.items():
        if name.startswith("target_"):
            failed = r.get("chunks_failed") or []
            detail = "" if "chunks" not in r else f": {r['chunks']} chunks" if not failed else \
                f": {len(failed)} of {r['chunks']} chunks failed (first: samples {failed[0][0]}-{failed[0][1] - 1}; " \
                "its indices count from that chunk's first sample)"
            lines.append(f"{name:<20} {'ok' if r['equivalent'] else 'FAILED'}{detail}"
                         + ("" if r["equivalent"] else _first_problem(r.get("first_failure") or r)))
    if d["targets_skipped"]:
        lines.append(f"{'skipped':<20} {', '.join(d['targets_skipped'])} (--targets all or a name runs it)")
    return lines


@main.command("nir-check")
@click.argument("nir_file", type=SafePath(dir_okay=False))
@click.option("--dt", "nir_dt", type=click.FloatRange(min=0, min_open=True), default=1e-4, show_default=True,
              help="time step the file is read at.")
@click.option("--nir-scheme", type=click.Choice(["snntorch", "norse"]), default="snntorch", show_default=True,
              help="discretization the file is read in.")
@click.option("--json", "as_json", is_flag=True, help="print the findings as JSON.")
@debug_option
@_guard
def nir_check_cmd(nir_file, nir_dt, nir_scheme, as_json):
    """Check a .nir file's conformance: one finding per line; exit 1 if one makes it unusable as is."""
    from spikec.targets.nir.check import nir_check_command
    return nir_check_command(nir_file, nir_dt, nir_scheme, as_json, say)


_LAST_SIGNAL: dict = {}
_REPEAT = 1.0   # seconds: a signal sent to the process group reaches the child twice (directly and forwarded)


def _on_signal(signum, frame):
    """SIGINT -> KeyboardInterrupt, SIGTERM -> Interrupted: unwind, clean up, exit 128 + signum. A second copy
    within ``_REPEAT`` s is the parent's forward of one the child got itself: it must not cut the cleanup short."""
    now = time.monotonic()
    if now - _LAST_SIGNAL.get(signum, -_REPEAT) < _REPEAT:
        return
    _LAST_SIGNAL[signum] = now
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Interrupted(signum)


def _run_here() -> int:
    """The command in this process: SIGTERM unwinds like SIGINT (temp directories removed, Lava shut down).

    SIGINT is made to interrupt even when the process inherited it ignored (a job a non-interactive shell
    started with '&' does): an explicit ``kill -INT`` must stop a compile, not let it finish.
    """
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    try:
        main()
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    except KeyboardInterrupt:
        return 130
    except Interrupted as e:
        return e.exit_code
    return 0


def _command_name(argv) -> str:
    """``compile of MODEL`` (the factory's or forward's code, or an OUTDIR's copy of it, is what ended it)."""
    i = next((i for i, a in enumerate(argv) if a in main.commands), None)
    if i is None:
        return "the command"
    what = next((a for a in argv[i + 1:] if not a.startswith("-")), None)
    return f"{argv[i]} of {what}" if what else argv[i]


def _child(report_fd: int, parent: int) -> None:
    """Run the command, write its exit code to ``report_fd``, then exit normally (atexit hooks run after the
    report: whatever they do, the parent already knows the outcome). Dies with the parent."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG: unwind, clean up
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(143)
    code = _run_here()
    try:
        os.write(report_fd, f"{code}\n".encode())
    finally:
        sys.exit(code)


def _child_status(pid: int) -> int:
    while True:
        try:
            return os.waitpid(pid, 0)[1]
        except InterruptedError:
            continue


def _supervise() -> int:
    """Fork the command's process (before torch is imported: cheap), forward SIGINT/SIGTERM to it, and exit with
    the code it reports; a child that ended without reporting was ended by the model's code."""
    for fd in (0, 1, 2):  # a closed standard stream: /dev/null on it, so that no file we open takes its number
        try:
            os.fstat(fd)
        except OSError:
            os.dup2(os.open(os.devnull, os.O_RDWR), fd)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(write_fd, parent)
    os.close(write_fd)

    def forward(signum, frame):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    status = _child_status(pid)
    os.set_blocking(read_fd, False)
    try:
        reported = os.read(read_fd, 64).decode().strip()
    except (BlockingIOError, OSError):
        reported = ""
    if reported.lstrip("-").isdigit():
        return int(reported)
    how = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit status {os.waitstatus_to_exitcode(status)}"
    click.echo(f"error: the model's code ended the process ({how}) during {_command_name(sys.argv[1:])} (in its factory "
               "or forward), before spikec could finish: nothing it printed or wrote is a result\n  remedy: the "
               "factory and forward must return, not end the process (os._exit, a signal, a crash in native code)", err=True)
    return 2


def run() -> None:
    """The console entry (``spikec``, ``python -m spikec.app.cli``): the command in a forked child (see the
    module docstring); in this process where there is no fork."""
    sys.exit(_supervise() if hasattr(os, "fork") else _run_here())


if __name__ == "__main__":
    run()
