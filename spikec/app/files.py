"""Reading files spikec did not write in this run: regular files only, bounded, never hanging.

A FIFO, a device (``/dev/zero``), a socket or a directory where a file is expected is refused by name before a
byte is read: the type is checked with ``stat`` first, then the file is opened with ``O_NONBLOCK`` (so even a
FIFO swapped in meanwhile cannot block the open) and checked again with ``fstat`` on the descriptor actually
read. Inside an OUTDIR (a deployment artifact people send each other) nothing is followed through a symbolic
link: ``check_tree`` refuses a link anywhere under OUTDIR, and every file verify opens itself is opened with
``O_NOFOLLOW``. Each file has a size limit, stated in the refusal.
"""
import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from spikec.ir.errors import BadInput

KINDS = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
         stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory", stat.S_IFLNK: "a symbolic link"}
MAX_ARTIFACT_BYTES = 4 << 30  # any one file of an OUTDIR (ONNX itself stops at 2 GiB)
JSON_LIMITS = {".spikec": 4096, "report.json": 64 << 20, "graph.json": 256 << 20, "lava/network.json": 256 << 20}
MAX_DEPTH = 16   # directory levels under OUTDIR (spikec writes three at most)
OUTDIR_REMEDY = "recompile into a fresh -o; an OUTDIR holds only the regular files and folders spikec wrote"


def kind(mode: int) -> str:
    return KINDS.get(stat.S_IFMT(mode), "not a regular file")


def _refuse_mode(path, what: str, mode: int, remedy: str) -> None:
    if not stat.S_ISREG(mode):
        raise BadInput(f"{what} {str(path)!r} is {kind(mode)}, not a regular file", remedy=remedy)


def open_regular(path, what: str, *, limit: int | None = None, nofollow: bool = False,
                 remedy: str = "give a regular file") -> BinaryIO:
    """``path`` opened for binary reading if it is a regular file of at most ``limit`` bytes; else BadInput naming
    ``what``, the reason and ``remedy``. ``nofollow``: a symbolic link is refused, not followed."""
    try:
        st = os.lstat(path) if nofollow else os.stat(path)
    except OSError as e:
        raise BadInput(f"cannot read {what} {str(path)!r}: {e.strerror or e}", remedy=remedy) from e
    _refuse_mode(path, what, st.st_mode, remedy)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (os.O_NOFOLLOW if nofollow else 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        reason = "is a symbolic link" if e.errno == errno.ELOOP and nofollow else f"cannot be read: {e.strerror}"
        raise BadInput(f"{what} {str(path)!r} {reason}", remedy=remedy) from e
    try:
        st = os.fstat(fd)  # the file actually opened: it may have been replaced since the stat above
        _refuse_mode(path, what, st.st_mode, remedy)
        if limit is not None and st.st_size > limit:
            raise BadInput(f"{what} {str(path)!r} is {st.st_size:,} bytes, over the limit of {limit:,} bytes",
                           remedy=remedy)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path, what: str, limit: int, *, nofollow: bool = False, remedy: str = "give a regular file") -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them (a file growing past it is refused too)."""
    with open_regular(path, what, limit=limit, nofollow=nofollow, remedy=remedy) as f:
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise BadInput(f"cannot read {what} {str(path)!r}: {e.strerror or e}", remedy=remedy) from e
    if len(data) > limit:
        raise BadInput(f"{what} {str(path)!r} is over the limit of {limit:,} bytes", remedy=remedy)
    return data


def check_tree(root: Path, remedy: str = OUTDIR_REMEDY) -> None:
    """Every entry under ``root`` is a directory or a regular file within its size limit (``JSON_LIMITS``, else
    ``MAX_ARTIFACT_BYTES``): no symbolic link, FIFO, device or socket anywhere. ``root`` itself may be a link."""
    root = Path(root)
    todo = [(root, 0)]
    while todo:
        folder, depth = todo.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as e:
            raise BadInput(f"cannot list {str(folder)!r}: {e.strerror or e}", remedy=remedy) from e
        for entry in entries:
            path = Path(entry.path)
            rel = path.relative_to(root).as_posix()
            try:
                mode = entry.stat(follow_symlinks=False)
            except OSError as e:
                raise BadInput(f"cannot read {str(path)!r}: {e.strerror or e}", remedy=remedy) from e
            if stat.S_ISDIR(mode.st_mode):
                if depth + 1 >= MAX_DEPTH:
                    raise BadInput(f"{str(path)!r} lies {depth + 2} folders deep in {str(root)!r}, more than "
                                   f"{MAX_DEPTH}", remedy=remedy)
                todo.append((path, depth + 1))
                continue
            if stat.S_ISLNK(mode.st_mode):
                raise BadInput(f"{str(path)!r} is a symbolic link (to {_link_target(path)!r}); nothing inside an "
                               "OUTDIR is read through a link", remedy=remedy + " (or, if you trust where it "
                                                                               "points, replace the link by a copy)")
            _refuse_mode(path, "OUTDIR file", mode.st_mode, remedy)
            limit = JSON_LIMITS.get(rel, MAX_ARTIFACT_BYTES)
            if mode.st_size > limit:
                raise BadInput(f"OUTDIR file {str(path)!r} is {mode.st_size:,} bytes, over the limit of "
                               f"{limit:,} bytes", remedy=remedy)


def _link_target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"
