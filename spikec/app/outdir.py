"""OUTDIR ownership and atomic replacement.

spikec writes a marker file ``.spikec`` into every OUTDIR it creates. ``-o`` accepts a missing path,
an empty directory, or a directory holding that marker; anything else is refused, so spikec never
deletes or overwrites a directory it did not write. An OUTDIR is never the current directory, nor an
ancestor of it or of a file the compile reads (model, weights, inputs).

Replacing an OUTDIR is one ``renameat2(RENAME_EXCHANGE)``: the new tree and the old one swap names
atomically, so at every instant the name holds either the complete old OUTDIR or the complete new
one; the old tree is deleted afterwards. Where the file system cannot exchange (ENOSYS/EINVAL), two
renames are used and the old tree is put back if the second fails.

The marker counts only as a regular file (not a symbolic link: a link to another OUTDIR's marker is not
ownership) holding a version this spikec writes. A temp tree is named ``.NAME.tmp-PID-START-*`` (the writing
process and its start time): one whose process is gone is swept by the next compile into the same folder, a
live run's never. ``writing`` turns a failed write (ENOSPC above all) into a named BadInput and removes the temp
tree; the old OUTDIR is untouched.
"""
import ctypes
import errno
import contextlib
import json
import math
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

from spikec.app import files
from spikec.ir.errors import BadInput
from spikec.core.serialize import default_mode

MARKER = ".spikec"
FORMAT, VERSION = "spikec-outdir", 1
REMEDY = "choose a new or empty directory for -o (spikec replaces only directories it wrote itself)"


def marker_text() -> str:
    return json.dumps({"format": FORMAT, "version": VERSION}) + "\n"


def ownership(path) -> str | None:
    """Why ``path`` is not a directory spikec wrote (its marker missing, a link, not a file, of an unknown format
    or version), or None when it is."""
    marker = Path(path) / MARKER
    try:
        mode = os.lstat(marker).st_mode
    except FileNotFoundError:
        return f"it holds no {MARKER} marker"
    except OSError as e:
        return f"its {MARKER} marker cannot be read: {e.strerror or e}"
    if stat.S_ISLNK(mode):
        return f"its {MARKER} marker is a symbolic link (only a marker file spikec wrote there counts)"
    try:
        doc = json.loads(files.read_bytes(marker, f"the {MARKER} marker", files.JSON_LIMITS[MARKER], nofollow=True))
    except BadInput as e:
        return e.what
    except (ValueError, RecursionError):
        return f"its {MARKER} marker is not spikec's (not JSON)"
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        return f"its {MARKER} marker is not spikec's (no format {FORMAT!r})"
    version = doc.get("version")
    if isinstance(version, bool) or version != VERSION:
        return f"its {MARKER} marker has version {version!r}; this spikec writes and reads version {VERSION}"
    return None


def is_owned(path: Path) -> bool:
    """Does ``path`` hold spikec's marker (a directory spikec wrote)?"""
    return ownership(path) is None


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
    why = ownership(out) if out.is_dir() and any(out.iterdir()) else None
    if why:
        raise BadInput(f"{where} is a non-empty directory that spikec did not write ({why})", remedy=REMEDY)
    return out


def holds_equivalent_compile(out: Path) -> bool:
    """True when ``out`` is spikec's OUTDIR of a compile that was equivalent (or whose report is unreadable:
    then it is kept, to be safe)."""
    if not is_owned(out):
        return False
    try:
        data = files.read_bytes(out / "report.json", "report.json", files.JSON_LIMITS["report.json"], nofollow=True)
        return json.loads(data).get("equivalent") is not False
    except (BadInput, ValueError, RecursionError, AttributeError):  # a FIFO or link is refused, never waited on
        return True


def _start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot, /proc), or None where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rpartition(b")")[2].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _run_tag() -> str:
    return f"{os.getpid()}-{_start_time(os.getpid()) or 0}"


# the most a temp sibling's name adds to NAME: ".NAME.tmp-PID-START-XXXXXXXX" (a 7-digit PID, a 20-digit start time)
TEMP_EXTRA = len(".") + len(".tmp-") + 7 + len("-") + 20 + len("-") + 8
_TEMP = re.compile(r"^\..+\.(?P<kind>tmp|old)-(?P<pid>\d+)-(?P<start>\d+)-[^-]+$")


def _alive(pid: int, start: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # no such process (or no such PID at all)
        return False
    except PermissionError:  # another user's process: alive
        return True
    now = _start_time(pid)
    return now is None or start == 0 or now == start  # another start time: the PID was reused, the run is gone


def _spikecs_temp(path: Path, kind: str) -> bool:
    """Does ``path`` (a real directory) hold only what spikec's temp trees hold (its marker, or ``previous``)?"""
    inside = path / "previous" if kind == "old" and (path / "previous").is_dir() else path
    return not any(path.iterdir()) or is_owned(inside)


def sweep_stale(parent: Path) -> list[Path]:
    """Remove the ``.NAME.tmp-*`` / ``.NAME.old-*`` trees in ``parent`` left by spikec runs that are dead."""
    swept = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return swept
    for entry in entries:
        found = _TEMP.match(entry.name)
        if not found or not entry.is_dir(follow_symlinks=False):
            continue
        path = Path(entry.path)
        try:
            if _alive(int(found["pid"]), int(found["start"])) or not _spikecs_temp(path, found["kind"]):
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)
        swept.append(path)
    return swept


def make_temp_dir(out: Path) -> Path:
    """A fresh sibling ``.NAME.tmp-PID-START-*`` to write into (same file system, so the final rename is atomic);
    stale temp trees of dead runs beside it are swept first."""
    tmp = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        sweep_stale(out.parent)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.tmp-{_run_tag()}-"))
        tmp.chmod(default_mode(directory=True))
        (tmp / MARKER).write_text(marker_text())
    except OSError as e:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise write_error(out, tmp, e) from e
    return tmp


def write_error(out: Path, tmp: Path | None, e: OSError) -> BadInput:
    """The named error for an OSError while writing OUTDIR ``out`` (through its temp tree ``tmp``)."""
    name = _written_name(out, tmp, e)
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        try:
            free = shutil.disk_usage(out.parent).free
        except OSError:
            free = 0
        need = max(1, math.ceil(max(_tree_bytes(tmp), _tree_bytes(out)) / 2**20))
        what = "no space left on device" if e.errno == errno.ENOSPC else "disk quota exceeded"
        return BadInput(f"{what} while writing {name}: {free / 2**20:.0f} MB free; the previous OUTDIR, if any, is "
                        "unchanged", remedy=f"free {need} MB or choose another -o")
    return BadInput(f"cannot write OUTDIR {str(out)!r}: {e.strerror or e} (while writing {name})",
                    remedy="choose a writable location for -o")


def _written_name(out: Path, tmp: Path | None, e: OSError) -> str:
    """``OUTDIR/file`` being written when ``e`` happened, by the error's file name; else (a failed ``write()`` names
    no file) ``OUTDIR/`` and the newest file in the temp tree, the one written last."""
    path = Path(e.filename) if isinstance(e.filename, (str, os.PathLike)) else None
    if path is not None:
        inside = tmp is not None and Path(tmp) in path.parents
        return str(out / path.relative_to(tmp)) if inside else str(path)
    written = [p for p in Path(tmp).rglob("*") if p.is_file()] if tmp is not None else []
    if not written:
        return f"{out}/"
    newest = max(written, key=lambda p: p.stat().st_mtime_ns)
    return f"{out}/ (the last file written: {newest.relative_to(tmp)})"


def _tree_bytes(path: Path | None) -> int:
    try:
        return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file()) if path else 0
    except OSError:
        return 0


@contextlib.contextmanager
def writing(out: Path):
    """``with writing(out) as tmp:`` write the new tree into ``tmp`` and ``publish(tmp, out)``. An OSError on the
    way (no space left, a quota, a read-only file system) becomes a named BadInput; on any failure ``tmp`` is
    removed and the old OUTDIR is left as it was."""
    tmp = make_temp_dir(out)
    try:
        yield tmp
    except OSError as e:
        error = write_error(out, tmp, e)  # named before the temp tree it looks at is removed
        shutil.rmtree(tmp, ignore_errors=True)
        raise error from e
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


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
    old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old-{_run_tag()}-")) / "previous"
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
