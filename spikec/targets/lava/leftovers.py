"""What Lava runs leave when nothing of them survives to clean up (SIGKILL of every process: the OOM killer, a
cgroup kill), found by name and removed by the next run.

Every run's shared-memory segments and work directories carry its *tag*, ``spikec<pid>x<hex>s<start>``: the
compiler's pid and start time (clock ticks since boot, ``/proc/<pid>/stat`` field 22, so a recycled pid is not
mistaken for the run), and a random part. Segments are ``/dev/shm/psm_<tag>j<n>_*`` (``runner.py``); work
directories ``<tmp>/spikec-{lava,netx,ttfs}-<tag>-*``; a job's multiprocessing directory ``<tmp>/pymp-*`` (Lava's
managers' sockets; it keeps multiprocessing's short name: a socket path is limited to 108 bytes) holds a file
named by the job's tag. ``sweep`` removes those of runs whose compiler is gone and whose supervisor (its argv
carries the tag) is gone too, never another live run's (nor a ``pymp-*`` directory without a tag). Segments of the earlier tag form ``spikec<pid>x<hex>`` (no start time) are
removed only when no process has that pid. Standard library only.
"""
import os
import re
import secrets
import shutil
import tempfile
from pathlib import Path

SHM = Path("/dev/shm")
TAG = re.compile(r"spikec(\d+)x([0-9a-f]+)(?:s(\d+))?")
DIR_PREFIXES = ("spikec-lava-", "spikec-netx-", "spikec-ttfs-")


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def new_tag() -> str:
    """A fresh tag naming this process (pid and start time) and a random part."""
    pid = os.getpid()
    return f"spikec{pid}x{secrets.token_hex(4)}s{start_time(pid)}"


def _tag_in(name: str) -> re.Match | None:
    for prefix in ("psm_", *DIR_PREFIXES):
        if name.startswith(prefix):
            return TAG.match(name, len(prefix))
    return None


def _pymp_tag(path: Path) -> re.Match | None:
    """The tag a job marked its multiprocessing directory with, or None (not a spikec job's)."""
    try:
        names = os.listdir(path)
    except OSError:
        return None
    return next((m for m in map(TAG.fullmatch, (n.split("j")[0] for n in names if n.startswith("spikec"))) if m),
                None)


def _holds(pid: int, tag: str) -> bool:
    try:
        return tag.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def run_alive(m: re.Match, cache: dict) -> bool:
    """Whether the run of tag match ``m`` may still be using its files: its compiler (same pid and start time)
    lives, or its supervisor does (a process whose argv holds the tag, ending the session after the compiler)."""
    pid, start, tag = int(m.group(1)), m.group(3), m.group(0)
    if tag not in cache:
        now = start_time(pid)
        alive = now is not None and (start is None or now == int(start))
        if not alive and start is not None:
            alive = any(e.isdigit() and _holds(int(e), tag) for e in os.listdir("/proc"))
        cache[tag] = alive
    return cache[tag]


def sweep(tmp: str | Path | None = None, shm: Path = SHM) -> dict:
    """Remove the segments in ``shm`` and the work directories in ``tmp`` (default: the temporary directory) of
    runs no process of which is alive; returns ``{"segments": [...], "directories": [...]}`` removed."""
    tmp = Path(tmp or tempfile.gettempdir())
    cache: dict = {}
    removed = {"segments": [], "directories": []}
    for where, key in ((shm, "segments"), (tmp, "directories")):
        try:
            entries = os.listdir(where)
        except OSError:
            continue
        for name in entries:
            m = _tag_in(name) if not name.startswith("pymp-") else _pymp_tag(where / name)
            if m is None or run_alive(m, cache) or (key == "directories" and m.group(3) is None):
                continue   # untagged, live, or a directory of the earlier form (its random name says nothing)
            path = where / name
            try:
                if key == "segments":
                    path.unlink()
                elif path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    continue
            except FileNotFoundError:
                continue   # its own run removed it meanwhile
            except OSError:
                continue   # another user's, or in use: not ours to force
            removed[key].append(name)
    return removed
