"""OUTDIR ownership and atomic replacement.

spikec writes a marker file ``.spikec`` into every OUTDIR it creates. ``-o`` accepts a missing path,
an empty directory, or a directory holding that marker; anything else is refused, so spikec never
deletes or overwrites a directory it did not write. An OUTDIR is never the current directory, nor an
ancestor of it or of a file the compile reads (model, weights, inputs).

Replacing an OUTDIR is one ``renameat2(RENAME_EXCHANGE)``: the new tree and the old one swap names
atomically, so at every instant the name holds either the complete old OUTDIR or the complete new
one; the old tree is deleted afterwards. Where the file system cannot exchange (ENOSYS/EINVAL), two
renames are used and the old tree is put back if the second fails.
"""
import ctypes
import errno
import json
import os
import shutil
import tempfile
from pathlib import Path

from spikec.compiler.errors import BadInput
from spikec.compiler.serialize import default_mode

MARKER = ".spikec"
FORMAT, VERSION = "spikec-outdir", 1
REMEDY = "choose a new or empty directory for -o (spikec replaces only directories it wrote itself)"


def marker_text() -> str:
    return json.dumps({"format": FORMAT, "version": VERSION}) + "\n"


def is_owned(path: Path) -> bool:
    """Does ``path`` hold spikec's marker (a directory spikec wrote)?"""
    try:
        doc = json.loads((Path(path) / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("format") == FORMAT


def check_outdir(path, reads=()) -> Path:
    """The absolute OUTDIR for ``-o path``, or BadInput if spikec may not write there.

    ``reads`` are the files the compile reads: OUTDIR may not be one of them or an ancestor of one.
    """
    if path is None or not str(path).strip():
        raise BadInput("-o names no directory (an empty path)", remedy="give -o a directory path, e.g. -o build/out")
    if "\0" in str(path):
        raise BadInput("-o contains a NUL byte", remedy="give -o a plain directory path")
    try:
        return _check(Path(os.path.abspath(os.fspath(path))), [r for r in reads if r and "\0" not in str(r)])
    except OSError as e:  # a name too long, a loop of symbolic links, a path through a file...
        raise BadInput(f"OUTDIR {str(path)!r} cannot be used: {e.strerror or e}",
                       remedy="give -o a shorter, plain directory path") from e


def _check(out: Path, reads) -> Path:
    where = f"OUTDIR {str(out)!r}"
    if out.is_symlink():
        raise BadInput(f"{where} is a symbolic link", remedy="give -o the real directory path")
    real = out.resolve()
    for p in [Path.cwd(), *(Path(r) for r in reads if r)]:
        p = p.resolve()
        if real == p or real in p.parents:
            what = "the current directory" if p == Path.cwd().resolve() else f"{str(p)!r}"
            raise BadInput(f"{where} is or contains {what}, which spikec must not replace", remedy=REMEDY)
    if out.exists() and not out.is_dir():
        raise BadInput(f"{where} exists and is not a directory", remedy="choose another -o path")
    if out.is_dir() and any(out.iterdir()) and not is_owned(out):
        raise BadInput(f"{where} is a non-empty directory that spikec did not write (it holds no {MARKER} marker)",
                       remedy=REMEDY)
    return out


def holds_equivalent_compile(out: Path) -> bool:
    """True when ``out`` is spikec's OUTDIR of a compile that was equivalent (or whose report is unreadable:
    then it is kept, to be safe)."""
    if not is_owned(out):
        return False
    try:
        return json.loads((out / "report.json").read_text()).get("equivalent") is not False
    except (OSError, ValueError, AttributeError):
        return True


def make_temp_dir(out: Path) -> Path:
    """A fresh sibling ``.NAME.tmp-*`` to write into (same file system, so the final rename is atomic)."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.tmp-"))
        tmp.chmod(default_mode(directory=True))
        (tmp / MARKER).write_text(marker_text())
    except OSError as e:
        raise BadInput(f"cannot write OUTDIR {str(out)!r}: {e.strerror or e}",
                       remedy="choose a writable location for -o") from e
    return tmp


_RENAME_EXCHANGE, _AT_FDCWD = 2, -100


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap the names ``a`` and ``b``; False when this system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def publish(tmp: Path, out: Path) -> None:
    """Move the complete tree ``tmp`` to ``out``; an existing ``out`` (checked owned) is replaced atomically."""
    if not out.exists():
        os.rename(tmp, out)
        return
    if not (is_owned(out) or not any(out.iterdir())):  # checked again: it may have changed during the compile
        raise BadInput(f"OUTDIR {str(out)!r} changed during the compile and is no longer spikec's", remedy=REMEDY)
    if _exchange(tmp, out):
        shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the old tree
        return
    old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old-")) / "previous"
    os.rename(out, old)
    try:
        os.rename(tmp, out)
    except BaseException:
        os.rename(old, out)
        raise
    shutil.rmtree(old.parent, ignore_errors=True)


def not_equivalent_path(out: Path) -> Path:
    """Where a compile that is not equivalent goes when ``out`` holds a good one: beside it."""
    return out.with_name(out.name + ".not-equivalent")
