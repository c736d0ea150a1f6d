"""``spikec`` command line. Exit codes: 0 success, 1 not equivalent / verification failed, 2 bad input."""
import json
import sys
import traceback

import click

from spikec.compiler.errors import SpikecError


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


def _guard(fn):
    """Turn spikec errors into a message and exit code; anything else into a short note (``--debug``: trace)."""
    def wrapper(*args, **kwargs):
        debug = click.get_current_context().find_root().params.get("debug")
        try:
            return fn(*args, **kwargs)
        except SpikecError as e:
            if debug:
                traceback.print_exc()
            click.echo(f"error: {e.message()}", err=True)
            sys.exit(e.exit_code)
        except Exception as e:  # a bug in spikec or an unforeseen input: still no bare traceback
            if debug:
                traceback.print_exc()
            click.echo(f"error: unexpected {type(e).__name__}: {e}\n  (run with --debug for the traceback, "
                       f"and please report it)", err=True)
            sys.exit(2)
    wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
    return wrapper


@click.group()
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def main(debug):
    """spikec: compile a PyTorch spiking model for neuromorphic targets, proving every step equivalent."""


model_options = [
    click.argument("model"),
    click.option("--weights", type=click.Path(dir_okay=False), help="state_dict checkpoint (torch.save)."),
    click.option("--input-shape", callback=_shape, help="per-step input shape, e.g. 1,8,8."),
    click.option("--steps", type=click.IntRange(min=1), help="time steps T of the verification inputs."),
    click.option("--trust-pickle", is_flag=True, help="allow a pickled checkpoint (runs its code)."),
    click.option("--dt", "nir_dt", type=float, default=1e-4, show_default=True,
                 help="time step a .nir MODEL is discretized at."),
    click.option("--nir-scheme", type=click.Choice(["snntorch", "norse"]), default="snntorch", show_default=True,
                 help="discretization of a .nir MODEL."),
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
@_guard
def inspect_cmd(model, weights, input_shape, steps, trust_pickle, nir_dt, nir_scheme, as_json):
    """Trace MODEL (path/file.py:factory or pkg.module:factory) and print its IR."""
    from spikec.compiler.driver import CompileOptions, load_source, make_inputs
    from spikec.compiler.frontend import trace
    from spikec.compiler.ops import deployed_params
    from spikec.compiler.serialize import graph_to_json
    opts = CompileOptions(model, weights, input_shape, steps, batch=1, trust_pickle=trust_pickle, nir_dt=nir_dt,
                          nir_scheme=nir_scheme)
    source = load_source(opts)
    _, shape, _ = make_inputs(source, opts)
    graph = trace(source, shape)
    if as_json:
        click.echo(json.dumps(graph_to_json(graph), indent=1))
        return
    click.echo(f"{'node':<24} {'op':<10} {'shape':<16} {'kind':<12} {'params':>8}  inputs")
    for n in graph.nodes:
        kind = f"integer<={n.type.ceiling}" if n.type.kind == "integer" else n.type.kind
        click.echo(f"{n.name:<24} {n.op:<10} {str(list(n.type.shape)):<16} {kind:<12} "
                   f"{deployed_params(n):>8}  {', '.join(n.inputs)}")


@main.command("compile")
@_with(model_options)
@click.option("-o", "--out", "outdir", required=True, type=click.Path(file_okay=False), help="output directory.")
@click.option("--batch", type=click.IntRange(min=1), default=4, show_default=True)
@click.option("--inputs", type=click.Path(dir_okay=False), help=".npz with key 'input' shaped [T, B, ...].")
@click.option("--passes", default="default", show_default=True, help="default | none | a,b,c")
@click.option("--target", default="none", show_default=True, help="none | lava | nir | onnx")
@click.option("--seed", type=int, default=0, show_default=True, help="seed of the random verification inputs.")
@click.option("--coding", type=click.Choice(["native", "ttfs"]), default="native", show_default=True,
              help="native: the model's own coding; ttfs: map a ReLU ANN onto time-to-first-spike neurons.")
@click.option("--ttfs-dt", type=click.FloatRange(min=0, min_open=True),
              help="TTFS: discrete time step reported first (default: window/64).")
@_guard
def compile_cmd(model, weights, input_shape, steps, trust_pickle, nir_dt, nir_scheme, outdir, batch, inputs, passes,
                target, seed, coding, ttfs_dt):
    """Compile MODEL into OUTDIR: IR, report.json, io.npz, target artifacts."""
    from spikec.compiler.driver import CompileOptions, compile_model, write_outdir
    from spikec.compiler.report import summary_text
    opts = CompileOptions(model, weights, input_shape, steps, batch, inputs, passes, target, seed, trust_pickle,
                          nir_dt, nir_scheme, coding=coding, ttfs_dt=ttfs_dt)
    compiled = compile_model(opts)
    out = write_outdir(outdir, compiled)
    click.echo(summary_text(compiled.report))
    click.echo(f"  wrote      {out}/" + ", ".join(["report.json", "graph.json", "weights.npz", "io.npz",
                                                     *compiled.files]))
    if not compiled.report["equivalent"]:
        sys.exit(1)


@main.command("verify")
@click.argument("outdir", type=click.Path())
@click.option("--inputs", type=click.Path(dir_okay=False), help="re-check on these inputs instead of io.npz.")
@_guard
def verify_cmd(outdir, inputs):
    """Re-run every check recorded in OUTDIR/report.json."""
    from spikec.compiler.driver import verify_outdir
    results = verify_outdir(outdir, inputs)
    for name, r in results.items():
        detail = "" if "spikes_compared" not in r else (f": {r['spikes_compared']:,} spikes, {r['values_compared']:,} "
                                                         f"values, max rel diff {r['max_rel_diff']:.2g}")
        if r.get("approximate"):
            detail += " (APPROXIMATE: TTFS LayerNorm decomposition; as close as the report recorded, not exact)"
        click.echo(f"{name:<20} {'ok' if r['equivalent'] else 'FAILED'}{detail}")
    if not all(r["equivalent"] for r in results.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
