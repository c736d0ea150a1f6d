"""Backends. Each subpackage (lava/, nir/, onnx/, xylo/) registers one target with ``register_target``.

A target is ``fn(graph, inputs, reference, options) -> TargetResult``: it emits its artifacts from the
deployed IR ``graph``, runs them on the verification ``inputs`` ``[T, B, ...]`` and compares with
``reference`` (the interpreter's ``Trace`` of ``graph`` on those inputs, every node recorded).
Files are written by the driver into the output directory before its atomic rename.
"""
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from spikec.ir.errors import BadInput


@dataclass
class TargetResult:
    report: dict                                    # the report's "target" object; holds at least "name"
    ok: bool                                        # the target reproduced its reference as it claims
    files: dict[str, Callable[[Path], None]] = field(default_factory=dict)  # file name -> writer(path)


TARGETS: dict[str, Callable] = {}
VERIFIERS: dict[str, Callable] = {}  # name -> fn(outdir, graph, inputs, reference) -> {"equivalent": bool, ...}
KNOWN = ("lava", "nir", "onnx")  # subpackages tried on demand, so a missing backend costs nothing; `all` is these
# loaded by name only (--target xylo, --target lava,xylo,nir,onnx); not under `all`, whose listing and tests name KNOWN
NAMED_ONLY = ("xylo",)


def register_target(name: str, fn: Callable, verify: Callable | None = None) -> None:
    """``verify`` re-checks the written artifacts for ``spikec verify`` (reading them from ``outdir``)."""
    TARGETS[name] = fn
    if verify is not None:
        VERIFIERS[name] = verify


def get_target(name: str) -> Callable | None:
    """The target's function, or None for ``none``; BadInput for an unknown or unavailable target."""
    if name == "none":
        return None
    if name not in TARGETS and name in KNOWN + NAMED_ONLY:
        try:
            importlib.import_module(f"spikec.targets.{name}")
        except ImportError as e:
            raise BadInput(f"target {name!r} cannot be loaded: {e}", remedy="run `make venv` to install it") from e
    if name not in TARGETS:
        raise BadInput(f"target {name!r} is not available",
                       remedy=f"choose none or one of: {', '.join(sorted(set(TARGETS) | set(KNOWN) | set(NAMED_ONLY)))}")
    return TARGETS[name]
