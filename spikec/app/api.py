"""The Python API: ``spikec.compile``, ``spikec.verify`` (re-exported lazily by ``spikec/__init__.py``).

The same pipeline as ``spikec compile`` / ``spikec verify`` (``spikec.app.driver``, ``spikec.app.verify``), with
the same named errors: whatever goes wrong reaches the caller as a ``SpikecError`` subclass with ``what``,
``where`` and ``remedy`` (an unforeseen exception as ``UnexpectedError``, the original chained as ``__cause__``),
never a bare traceback from deep inside. The CLI is a layer over ``compile_options`` and ``compile_with``.
"""
from __future__ import annotations

import functools
import inspect
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from spikec.app import loader
from spikec.app import outdir as owned
from spikec.app.driver import CompileOptions, Compiled, compile_model, load_source, write_outdir
from spikec.app.option_checks import absolute, absolute_model  # noqa: F401  (the CLI's and the API's)
from spikec.app.provenance import instance_spec, is_instance, model_file
from spikec.ir.errors import BadInput, InternalError, Interrupted, SpikecError
from spikec.core.interpreter import run as run_graph
from spikec.ir.graph import Graph

DEFAULT_TARGETS = ("lava", "nir", "onnx")


class UnexpectedError(InternalError):
    """An exception spikec did not foresee (a bug, or an input nothing checks yet): the original is ``__cause__``."""


def _bind(fn, signature, args, kwargs) -> None:
    """A call ``fn`` cannot take (an unknown keyword, a missing or extra argument) as a BadInput naming them."""
    try:
        signature.bind(*args, **kwargs)
    except TypeError as e:
        accepted = ", ".join(n for n, p in signature.parameters.items() if p.kind is p.KEYWORD_ONLY)
        raise BadInput(f"spikec.{fn.__name__}(): {e}", remedy=f"its keyword arguments are: {accepted}") from None


def guarded(fn):
    """Every way ``fn`` can fail becomes a named ``SpikecError`` (as ``cli._run_guarded`` makes it an exit code);
    KeyboardInterrupt and ``Interrupted`` (SIGTERM) pass through, so a caller can still stop a compile."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _bind(fn, signature, args, kwargs)
        try:
            return fn(*args, **kwargs)
        except (SpikecError, KeyboardInterrupt, Interrupted):
            raise
        except SystemExit as e:  # spikec never exits: this came from the model's code
            raise BadInput(f"the model's code called sys.exit({e.code!r})",
                           remedy="the factory and forward must return, not exit") from e
        except MemoryError as e:
            raise BadInput("out of memory", remedy="use fewer samples or steps (batch, steps, smaller inputs)") from e
        except Exception as e:
            raise UnexpectedError(f"unexpected {type(e).__name__}: {e}",
                                  remedy="please report it with the model (the original exception is chained)") from e
    return wrapper


@dataclass(frozen=True)
class Compilation:
    """One compile: its verdicts, report and deployed graph; ``save`` writes it as ``spikec compile -o`` does."""
    compiled: Compiled
    options: CompileOptions
    reads: tuple = ()          # files the compile read (an OUTDIR may not contain them)

    @property
    def equivalent(self) -> bool:
        """Every proof held: the trace, each pass, the deployed graph, and every target asked for by name."""
        return bool(self.compiled.report["equivalent"])

    @property
    def report(self) -> dict:
        """The report, the same object ``report.json`` holds."""
        return self.compiled.report

    @property
    def targets(self) -> dict:
        """``{target name: its report}`` (``bit_exact`` for lava, ``exact`` for nir, ``spike_exact`` for onnx; a
        refused target: ``refused`` and ``reason``)."""
        return self.compiled.report["targets"]

    @property
    def graph(self) -> Graph:
        """The deployed IR (after the passes and the coding)."""
        return self.compiled.graph

    def run(self, x) -> np.ndarray | tuple[np.ndarray, ...]:
        """The deployed graph on ``x`` (``[T, B, *input_shape]``, an array or tensor) in the reference interpreter
        (float64): one array, or a tuple when the source returns several outputs, in its order. A model that runs
        its own time loop over one static input, compiled on ``[B, *input_shape]``, takes that form here too (it is
        repeated over the compile's T steps, as the compile repeated it)."""
        report = self.compiled.report
        static = report["frontend"].get("static_input", False)
        return _run(self.compiled.graph, x, report["input"]["steps"] if static else None)

    def save(self, outdir) -> Path:
        """Write the OUTDIR ``spikec compile -o`` writes (atomically; same rules); returns where it went:
        ``outdir``, or ``outdir.not-equivalent`` beside an equivalent OUTDIR a failed compile must not replace."""
        return _save(self, outdir)

    @property
    def internal_errors(self) -> dict:
        """``{target name: message}`` of the targets that failed internally (a compiler bug; the others ran)."""
        from spikec.app.multitarget import internal_failures
        return {r["name"]: r["reason"] for r in internal_failures(self.targets)}


@guarded
def _run(graph: Graph, x, static_steps: int | None = None):
    x = _as_array(x)
    shape = tuple(graph.inputs[0].type.shape)
    if static_steps is not None and tuple(x.shape[1:]) == shape:   # [B, *input_shape]: the loop repeats it
        x = np.broadcast_to(x[None], (static_steps, *x.shape))
    x = loader.check_spike_input(x, "the inputs array")
    if tuple(x.shape[2:]) != shape:
        raise BadInput(f"the inputs array has per-step shape {tuple(x.shape[2:])}, the graph's input takes {shape}",
                       remedy="lay the inputs out as [T, B, *input_shape]")
    # Trace.outputs: a read-out over time (read='last') is its last step, as the source returns it
    outs = tuple(np.asarray(v) for v in run_graph(graph, x, record="outputs").outputs(graph))
    return outs[0] if len(outs) == 1 else outs


@guarded
def _save(c: Compilation, outdir) -> Path:
    _check_path("save(outdir)", outdir)
    check_name_lengths(outdir)
    owned.check_outdir(outdir, c.reads)
    return write_outdir(outdir, c.compiled, c.reads)


def _as_array(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    if isinstance(x, np.ndarray):
        return x
    raise BadInput(f"inputs of type {type(x).__name__} are not an array",
                   remedy="give a numpy array or a torch tensor laid out [T, B, *input_shape], or an .npz path "
                          "(key 'input')")


def check_name_lengths(outdir) -> None:
    """A path component longer than the file system's NAME_MAX is refused before the compile, not after it; the
    last one also needs room for the temporary sibling (``.NAME.not-equivalent.tmp-PID-START-*``) written first."""
    path = Path(os.path.abspath(outdir))
    try:
        limit = os.pathconf(next((p for p in path.parents if p.exists()), Path("/")), "PC_NAME_MAX")
    except (OSError, ValueError):  # a parent's own name too long, or no such limit
        limit = 255
    room = owned.TEMP_EXTRA + len(".not-equivalent")
    for i, part in enumerate(path.parts[1:]):
        most = limit - room if i == len(path.parts) - 2 else limit
        if len(part.encode(errors="surrogateescape")) > most:
            raise BadInput(f"OUTDIR (-o): the name {part[:60]!r}... is {len(part.encode(errors='surrogateescape'))} bytes, "
                           f"over the {most} this file system allows (File name too long" +
                           (f": NAME_MAX {limit}, less {room} for the temporary sibling spikec writes first)"
                            if most != limit else ")"), remedy="choose a shorter OUTDIR name")


def _check_path(what: str, value) -> None:
    if not isinstance(value, (str, os.PathLike)):
        raise BadInput(f"{what} is a {type(value).__name__}, not a path", remedy="give a str or a pathlib.Path")


def _check_count(name: str, value, optional: bool = True) -> None:
    """``steps``/``batch``/``max_input_bytes``/``workers``: an int >= 1 (not a bool, a float or a string), or None."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise BadInput(f"{name}={value!r} is not an integer >= 1",
                       remedy=f"give {name} an int >= 1" + (" or None" if optional else ""))


_CHOICES = {"stepping": ("auto", "multistep", "step", "loop"), "nir_scheme": ("snntorch", "norse"),
            "nir_consumer": ("any", "snntorch", "norse"), "coding": ("native", "ttfs"),
            "nir_version": (None, "1.0.8", "1.0.7"), "lava_reset": (None, "current", "subtract", "zero")}


def _check_api_options(options: dict) -> dict:
    """The keyword values of ``spikec.compile`` checked (and ``passes`` as a sequence joined): a BadInput naming
    the keyword and the values it takes, before any work."""
    for name in ("steps", "batch", "max_input_bytes"):
        _check_count(name, options[name])
    for name in ("probes", "trust_pickle", "allow_unstable"):
        if not isinstance(options[name], bool):
            raise BadInput(f"{name}={options[name]!r} is not a bool", remedy=f"give {name}=True or {name}=False")
    for name, accepted in _CHOICES.items():
        if options[name] not in accepted:
            raise BadInput(f"{name}={options[name]!r} is not one of {', '.join(map(str, accepted))}",
                           remedy=f"give {name} one of: {', '.join(map(repr, accepted))}")
    passes = options["passes"]
    if isinstance(passes, (tuple, list)) and all(isinstance(p, str) for p in passes):
        options["passes"] = ",".join(passes) if passes else "none"
    elif not isinstance(passes, str):
        raise BadInput(f"passes={passes!r} is not pass names", remedy="give 'default', 'none', 'a,b' or a sequence "
                       "of pass names such as ('fold_batchnorm', 'fuse_repconv')")
    shape = options["input_shape"]
    if shape is not None and (isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__")
                              or not all(not isinstance(d, bool) and isinstance(d, (int, np.integer)) and d >= 1
                                         for d in shape) or not len(tuple(shape))):
        raise BadInput(f"input_shape={shape!r} is not a sequence of integers >= 1", remedy="e.g. input_shape=(1, 8, 8)")
    for name in ("weights",):
        if options[name] is not None:
            _check_path(name, options[name])
    if options["xylo_chip"] is not None and not isinstance(options["xylo_chip"], str):
        raise BadInput(f"xylo_chip={options['xylo_chip']!r} is not a chip name",
                       remedy="give a name such as 'xylo-audio-3' (spikec.targets.xylo.limits.CHIPS), or None")
    return options


def _check_instance(model) -> None:
    """A module whose tensors hold no data (the meta device) cannot be run, so cannot be checked."""
    if isinstance(model, torch.nn.Module):
        meta = next((n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta), None)
        if meta is not None:
            raise BadInput(f"the model's tensor {meta!r} is on the meta device (it holds no values)",
                           where=f"model {type(model).__qualname__}",
                           remedy="materialize the model first (model.to_empty(device='cpu') and load its weights, "
                                  "or build it without device='meta')")


def compile_options(model, inputs=None, **options) -> tuple[CompileOptions, np.ndarray | None, torch.nn.Module | None]:
    """``CompileOptions`` for a MODEL (a spec, a ``.nir`` path or a module instance) and inputs (an ``.npz`` path, an
    array or tensor, or None), with the array and the instance the compile takes in memory."""
    instance = None
    if isinstance(model, torch.nn.Module):
        instance, spec = model, instance_spec(model)
    elif isinstance(model, (str, Path)):
        spec = str(model)
    else:
        raise BadInput(f"the model is a {type(model).__name__}",
                       remedy="give an nn.Module instance, a 'file.py:factory' string or a .nir path")
    array = None
    if isinstance(inputs, (str, Path)):  # an .npz file (key 'input'), read and checked by the loader
        options["inputs"] = str(inputs)
    elif inputs is not None:
        array = _as_array(inputs)
    return CompileOptions(spec, **options), array, instance


def compile_with(opts: CompileOptions, array=None, instance=None) -> Compilation:
    """Compile as ``opts`` says (the CLI's path: no guard of its own, the CLI's maps failures to exit codes)."""
    source = load_source(opts, instance) if instance is not None else None
    compiled = compile_model(opts, model=source, array=array)
    record = compiled.report["provenance"].get("instance") or {}
    origin = (record.get("file") or {}).get("path") if is_instance(opts.model) else model_file(opts.model)
    reads = tuple(str(r) for r in (origin, opts.weights, opts.inputs) if r)
    return Compilation(compiled, opts, reads)


@guarded
def compile(model: torch.nn.Module | str | Path, inputs: np.ndarray | torch.Tensor | str | Path | None = None, *,
            weights: str | Path | None = None, stepping: str = "auto", input_shape: Sequence[int] | None = None,
            steps: int | None = None, batch: int | None = None, passes: str = "default",
            targets: str | Sequence[str] = DEFAULT_TARGETS, coding: str = "native", seed: int = 0, probes: bool = True,
            trust_pickle: bool = False, nir_dt: float = 1e-4, nir_scheme: str = "snntorch",
            nir_consumer: str = "any", allow_unstable: bool = False, ttfs_dt: float | None = None,
            max_input_bytes: int | None = None, xylo_chip: str | None = None, nir_version: str | None = None,
            lava_reset: str | None = None) -> Compilation:
    """Compile ``model`` and prove it, as ``spikec compile`` does; returns a ``Compilation`` (nothing is written
    until ``save``).

    model: an ``nn.Module`` (a private copy is compiled; ``weights`` loaded into that copy), a
        ``"file.py:factory"`` / ``"package.module:factory"`` string, or a ``.nir`` path.
    inputs: ``[T, B, *input_shape]`` spikes as a numpy array or tensor, an ``.npz`` path (key ``input``), or None
        for seeded random spikes (shape from ``input_shape``/``steps``/``batch`` or the model's attributes;
        ``batch`` defaults to 4).
    targets: names (``("lava", "nir", "onnx")``, ``"lava,nir"``), ``"all"`` or ``"none"``. A named target that
        cannot map the graph is recorded as refused and makes the compile not equivalent; under ``"all"`` a
        refusal is recorded only.
    xylo_chip: with the xylo target, the chip mapped onto (``"xylo-audio-2"``, the default, ``"xylo-audio-3"`` or
        ``"xylo-imu"``: ``spikec.targets.xylo.limits.CHIPS``), passed as its target option ``xylo_chip``.
    nir_version: the NIR file version written, ``"1.0.8"`` (the default) or ``"1.0.7"`` (docs/targets.md, NIR).
    lava_reset: how subtract-reset neurons deploy to Lava: ``None`` (or ``"current"``) Lava's LIF with the
        membrane in its current u and a -vth self-synapse (chip-ready; its integer arithmetic carries v/4096 between
        steps, compared with the carry-free form in the report's ``membrane_in_u``); ``"subtract"`` spikec's
        carry-free SpikecLIF (CPU only); ``"zero"`` Lava's zero-reset LIF, another neuron, approximate, its spike
        disagreement measured and reported, never called equivalent.
    The rest as the CLI's options of the same names (``--dt`` is ``nir_dt``). Raises a ``SpikecError`` subclass
    (``BadInput``, ``ModelLoadError``, ``UnsupportedOp``, ...) naming what is wrong and the remedy.
    """
    checked = _check_api_options(dict(steps=steps, batch=batch, max_input_bytes=max_input_bytes, probes=probes,
                                      trust_pickle=trust_pickle, allow_unstable=allow_unstable, stepping=stepping,
                                      nir_scheme=nir_scheme, nir_consumer=nir_consumer, coding=coding,
                                      passes=passes, input_shape=input_shape, weights=weights,
                                      xylo_chip=xylo_chip, nir_version=nir_version, lava_reset=lava_reset))
    passes = checked["passes"]
    _check_instance(model)
    model = absolute_model(str(model)) if isinstance(model, (str, Path)) else model  # before the factory runs:
    inputs = absolute(str(inputs)) if isinstance(inputs, (str, Path)) else inputs  # it may os.chdir
    weights = None if weights is None else absolute(str(weights))
    opts, array, instance = compile_options(
        model, inputs, weights=weights, stepping=stepping,
        input_shape=None if input_shape is None else tuple(int(d) for d in input_shape), steps=steps, batch=batch,
        passes=passes,
        target=_target_spec(targets), coding=coding, seed=seed, probes=probes, trust_pickle=trust_pickle,
        nir_dt=nir_dt, nir_scheme=nir_scheme, nir_consumer=nir_consumer, allow_unstable=allow_unstable,
        ttfs_dt=ttfs_dt, max_input_bytes=max_input_bytes, xylo_chip=xylo_chip, nir_version=nir_version,
        lava_reset=lava_reset, report_refusals=True)
    return compile_with(opts, array, instance)


VERIFY_TARGETS = "'default' (all but lava), 'all', 'none', a name such as 'onnx', 'nir,onnx', or a sequence of names"


def _verify_targets(targets) -> str:
    """``verify``'s ``targets``: default, all, none, or known target names; BadInput listing the forms else."""
    from spikec.targets import KNOWN, NAMED_ONLY
    spec = _target_spec(targets)
    names = spec.split(",")
    known = KNOWN + NAMED_ONLY
    if spec in ("default", "all", "none") or (all(n in known for n in names) and len(set(names)) == len(names)):
        return spec
    raise BadInput(f"targets={targets!r} is not a set of targets to re-check",
                   remedy=f"give {VERIFY_TARGETS} (targets: {', '.join(known)})")


def _target_spec(targets) -> str:
    if isinstance(targets, str):
        return targets
    if isinstance(targets, (tuple, list)) and all(isinstance(t, str) for t in targets):
        return ",".join(targets) if targets else "none"
    raise BadInput(f"targets {targets!r} are not target names", remedy="e.g. targets=('lava', 'nir', 'onnx'), "
                   "'all' or 'none'")


@guarded
def verify(outdir: str | Path, inputs: str | Path | None = None, *, model: torch.nn.Module | str | None = None,
           weights: str | Path | None = None, trust_pickle: bool = False, max_input_bytes: int | None = None,
           workers: int | None = None, ray: str | None = None, targets: str | Sequence[str] = "default",
           progress: bool = False, run_source: bool = False) -> dict[str, dict]:
    """The checks ``spikec verify OUTDIR`` runs: ``{check name: summary}``, each summary with ``equivalent``.

    inputs: an ``.npz`` (key ``input``) to re-check on instead of the recorded ``io.npz``.
    model: verify against this model (a spec, or an ``nn.Module``) instead of ``OUTDIR/source`` (needed for an
        OUTDIR compiled from a module instance whose class cannot be rebuilt with ``cls()``).
    workers / ray: verify the data set ``inputs`` (``.npz`` or ``.npy``) sample by sample in ``workers`` processes
        (1: in this process) or as Ray tasks (``ray``: a cluster address or ``"local"``), as ``spikec verify
        --workers N`` / ``--ray ADDRESS``: the merged ``{"dataset", "source_vs_deployed", "target_NAME"}``, with
        per-sample verdicts and per-node mismatches; ``targets``: ``"default"`` (all but lava), ``"all"``,
        ``"none"`` or names; ``progress``: a progress bar on stderr.
    run_source: run OUTDIR/source's copy of the model code (``spikec verify --run-source``); by default no code from
        OUTDIR runs, and the result's ``source_not_run`` says what was not checked and how to check it.
    All checks passed when ``all(r["equivalent"] for r in result.values())``.
    """
    _check_path("outdir", outdir)
    for name, value in (("run_source", run_source), ("trust_pickle", trust_pickle), ("progress", progress)):
        if not isinstance(value, bool):
            raise BadInput(f"{name}={value!r} is not a bool", remedy=f"give {name}=True or {name}=False")
    _check_count("max_input_bytes", max_input_bytes)
    _check_count("workers", workers)
    spec = _verify_targets(targets)
    if workers is None and ray is None and spec != "default":
        raise BadInput(f"targets={targets!r} applies to a data-set run", remedy="add workers=N (and inputs=DATA.npz), "
                       "or drop targets")
    if workers is not None or ray is not None:
        from spikec.app.dataset_run import verify_dataset
        return verify_dataset(str(outdir), None if inputs is None else str(inputs), workers=1 if workers is None
                              else workers, ray=ray, targets=spec, model=model,
                              weights=None if weights is None else str(weights), trust_pickle=trust_pickle,
                              max_input_bytes=max_input_bytes, progress=progress, run_source=run_source)
    from spikec.app.verify import verify_outdir
    return verify_outdir(str(outdir), None if inputs is None else str(inputs), model=model,
                         weights=None if weights is None else str(weights), trust_pickle=trust_pickle,
                         max_input_bytes=max_input_bytes, run_source=run_source)
