"""The command line's options checked before torch is imported: a bad option is refused in a fraction of a
second of CPU, not after the seconds torch's import takes (and minutes of compile for a file read late).

Only what needs no torch is checked here: a ``--target`` or ``--passes`` value that names nothing, and a MODEL,
``--weights`` or ``--inputs`` file that is not there. Each refusal is the one the compile itself gives for the
same value (``spikec.app.multitarget.plan``, ``spikec.passes.select``, the loader's); a valid value passes
through to those checks unchanged. ``tests/app/test_early_refusals.py`` holds every message equal to the
compile's own and ``PASS_NAMES`` equal to ``spikec.passes.PASSES``.
"""
import os
import stat
from pathlib import Path

from spikec.app import files
from spikec.ir.errors import BadInput, CheckpointError, ModelLoadError

# the names of spikec.passes.PASSES, in its order (that module imports torch); a test holds them equal
PASS_NAMES = ("fold_batchnorm", "fuse_repconv", "tdm_dual_kernel", "unroll_virtual_steps", "reassociate_attention")
# spikec.app.loader's remedies (a test holds them equal)
SPEC_HINT = "MODEL is path/to/file.py:factory or package.module:factory; the factory returns an nn.Module"
CHECKPOINT_HINT = "give --weights the file written by torch.save(model.state_dict(), path)"
NIR_HINT = "give the path of a .nir file written by nir.write (or a FILE.py:factory)"
NPZ_HINT = "give an .npz written by np.savez"


def absolute(path):
    """``path`` made absolute now: the factory's import may ``os.chdir``, and a relative -o, --inputs, --weights or
    --html must mean what it meant when the command was typed (where the ownership checks looked)."""
    return path if path is None or not str(path).strip() else os.path.abspath(path)  # '' is refused, by name


def absolute_model(spec: str) -> str:
    """A ``file.py:factory`` or ``.nir`` MODEL with its file made absolute (its copy is read after the factory ran)."""
    where, colon, attr = spec.rpartition(":")
    if spec.endswith(".nir") and "\0" not in spec:
        return os.path.abspath(spec)
    return f"{os.path.abspath(where)}:{attr}" if colon and where.endswith(".py") and "\0" not in where else spec


def check_early(model: str, weights=None, inputs=None, passes: str = "default", target: str = "none") -> None:
    """Refuse, as the compile would, an option that names nothing (see the module docstring)."""
    check_target(target)
    check_passes(passes)
    if weights is not None and isinstance(model, str) and model.endswith(".nir"):
        return  # the compile refuses a .nir MODEL with --weights first, by name
    check_model_file(model)
    if weights is not None and str(weights).strip():
        what = not_a_file(Path(weights))
        if what:
            raise CheckpointError(f"checkpoint {weights!r} {what}", remedy=CHECKPOINT_HINT)
    if inputs is not None and str(inputs).strip():
        files.open_regular(inputs, "inputs file", remedy=NPZ_HINT).close()  # the loader's own first step


def check_target(spec: str) -> None:
    """``plan(spec)``'s refusal of a name no target has, of ``none``/``all`` in a list and of a name given twice,
    without loading any target (``plan`` loads each named one, which a valid value then pays for)."""
    from spikec.app.multitarget import ALL, FORMS
    from spikec.targets import KNOWN, NAMED_ONLY
    if not isinstance(spec, str) or spec in ("none", ALL):
        return
    names = spec.split(",")
    for name in names:
        if name in ("none", ALL):
            raise BadInput(f"target {name!r} cannot be combined with other targets (in {spec!r})",
                           remedy=f"give {name} alone, or a list of targets such as lava,nir,onnx")
        if name not in KNOWN + NAMED_ONLY:
            what = f"target {name!r} is not available"
            raise BadInput(what if len(names) == 1 else f"{what} (in --target {spec!r})", remedy=FORMS)
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise BadInput(f"target {twice[0]!r} is named twice in {spec!r}", remedy="name each target once")


def check_passes(spec: str) -> None:
    """``spikec.passes.select(spec)``'s refusal of an unknown pass name."""
    if not isinstance(spec, str) or spec in ("default", "none"):
        return
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in PASS_NAMES]
    if unknown or not names:
        raise BadInput(f"unknown pass(es) {unknown or spec!r}",
                       remedy=f"use default, none, or a comma-separated list of: {', '.join(PASS_NAMES)}")


def check_model_file(spec: str) -> None:
    """The loader's refusal of a ``.nir`` or ``file.py:factory`` MODEL whose file is not there."""
    if not isinstance(spec, str) or "\0" in spec:
        return  # the loader names a NUL byte itself
    if spec.endswith(".nir"):
        what = not_a_file(Path(spec))
        if what:
            raise ModelLoadError(f"NIR file {spec!r} {what}", remedy=NIR_HINT)
        return
    where, colon, attr = spec.rpartition(":")
    if colon and attr.isidentifier() and where.strip() and where.endswith(".py"):
        what = not_a_file(Path(where))
        if what:
            raise ModelLoadError(f"model file {str(Path(where))!r} {what}", remedy=SPEC_HINT)


def not_a_file(path: Path) -> str | None:
    """Why ``path`` cannot be opened as a regular file (a directory, missing, a NUL byte, a name too long), or None;
    the loader's check too (this module imports no torch, so the CLI checks paths before importing it)."""
    if "\0" in str(path):
        return "contains a NUL byte"
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "does not exist"
    except OSError as e:  # ENAMETOOLONG, EACCES on a parent, a loop of links, ...
        return f"cannot be read: {e.strerror or e}"
    if stat.S_ISREG(mode):
        return None
    return "is a directory, not a file" if stat.S_ISDIR(mode) else f"is {files.kind(mode)}, not a regular file"
