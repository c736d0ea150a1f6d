"""A Lava run killed with every one of its processes at once (the OOM killer, a cgroup kill) leaves its
shared-memory segments, work directory and multiprocessing's ``pymp-*`` directories behind; the next run's
start removes them, and never what a live run holds (``spikec/targets/lava/leftovers.py``)."""
import os
import signal
import subprocess
import sys
import time
from multiprocessing import shared_memory
from pathlib import Path

import pytest

from spikec.targets.lava import lava_available, leftovers
from spikec.targets.lava import supervisor as sv

from short_tmp import short_tmp

REASON = lava_available()
REPO = Path(__file__).resolve().parents[3]
STARTUP = 180.0


def _script(tmp_path) -> Path:
    src = (REPO / "tests" / "targets" / "lava" / "test_interrupts.py").read_text()
    body = src[src.index("SCRIPT = r'''") + len("SCRIPT = r'''"):]
    path = tmp_path / "long_run.py"
    path.write_text(body[:body.index("'''")])   # the interrupt tests' tiny network, run for many steps
    return path


def _start(tmp_path, steps: int, tmp: Path):
    env = dict(os.environ, TMPDIR=str(tmp),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    log = open(tmp_path / f"run{steps}.txt", "wb")
    return subprocess.Popen([sys.executable, str(_script(tmp_path)), str(steps)], stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)


def _supervisor(pid: int) -> int | None:
    for e in os.listdir("/proc"):
        if e.isdigit() and (st := sv._stat(int(e))) and st[1] == pid and st[3] == int(e):
            return int(e)
    return None


def _run_files(tmp: Path, pid: int) -> tuple[list, list, list]:
    """``(work directories, pymp-* directories its jobs marked, segments)`` of the run of compiler ``pid``."""
    dirs = sorted(tmp.glob(f"spikec-lava-spikec{pid}x*"))
    pymp = sorted({p.parent for p in tmp.glob(f"pymp-*/spikec{pid}x*")})
    return dirs, pymp, sorted(p.name for p in sv.SHM.glob(f"psm_spikec{pid}x*"))


def _kill_everything(proc, sid: int) -> None:
    """Every process of the run at once, as a cgroup kill: stopped first, so none cleans up after another."""
    groups = [p for p in sv.members(proc.pid)] + sv.members(sid)
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        for p in groups:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
    proc.wait()
    deadline = time.monotonic() + 10
    while sv.members(sid) and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.fixture
def live_run_files(tmp_path):
    """Files tagged by a live run (this test process), by a recycled pid (alive, another start time: gone), and
    of the earlier untimed tag form of a live pid."""
    tmp = short_tmp(tmp_path / "tmp")
    live = leftovers.new_tag()
    pid, start = os.getpid(), leftovers.start_time(os.getpid())
    recycled = f"spikec{pid}xdeadbeefs{start + 1}"
    made = {"live": [], "recycled": []}
    shms = []
    for i, (kind, tag) in enumerate((("live", live), ("recycled", recycled), ("live", f"spikec{pid}xfeedface"))):
        shm = shared_memory.SharedMemory(name=f"psm_{tag}j1_{os.urandom(4).hex()}", create=True, size=64)
        shms.append(shm)
        made[kind].append(sv.SHM / shm.name)
        d = tmp / f"spikec-lava-{tag}-abc"
        (d / "errors").mkdir(parents=True)
        pymp = tmp / f"pymp-{i}abc"
        pymp.mkdir()
        (pymp / f"{tag}j1").touch()
        made[kind if "s" in tag.split("x")[1] else "live"] += [d, pymp]   # the untimed form: only segments go
    (tmp / "pymp-untagged").mkdir()   # another program's: no tag, never removed
    made["live"].append(tmp / "pymp-untagged")
    yield tmp, made
    for shm in shms:
        shm.close()
        try:
            shm.unlink()
        except FileNotFoundError:
            pass


def test_sweep_removes_only_what_dead_runs_tagged(live_run_files):
    tmp, made = live_run_files
    removed = leftovers.sweep(tmp)
    assert all(p.exists() for p in made["live"]), made["live"]
    assert not any(p.exists() for p in made["recycled"]), made["recycled"]
    assert sorted(removed["directories"]) == sorted(p.name for p in made["recycled"] if p.parent == tmp)


@pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")
@pytest.mark.exclusive   # another xdist worker's compile would sweep the killed run's segments before the next run
def test_a_run_killed_with_all_its_processes_is_swept_by_the_next_run(tmp_path, live_run_files):
    tmp, made = live_run_files
    proc, nxt = _start(tmp_path, 500_000, tmp), None
    try:
        deadline, seen = time.monotonic() + STARTUP, None
        while time.monotonic() < deadline and proc.poll() is None:
            sid = _supervisor(proc.pid)
            dirs, pymp, segs = _run_files(tmp, proc.pid)
            if sid and dirs and pymp and len(segs) >= 3:
                seen = sid, dirs, pymp, segs
                break
            time.sleep(0.05)
        assert seen, (tmp_path / "run500000.txt").read_text()
        sid, dirs, pymp, segs = seen
        _kill_everything(proc, sid)
        assert all(_run_files(tmp, proc.pid)), f"nothing was left to sweep: {_run_files(tmp, proc.pid)}"
        nxt = _start(tmp_path, 20, tmp)   # the next run: its Lava start sweeps
        assert nxt.wait(timeout=STARTUP) == 0, (tmp_path / "run20.txt").read_text()
    finally:
        for p in (proc, nxt):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    left = _run_files(tmp, proc.pid)
    assert not any(left) and not any(p.exists() for p in seen[1] + seen[2]), left
    assert not [p for p in tmp.iterdir() if f"spikec{nxt.pid}x" in p.name or
                p.name.startswith("pymp-") and p not in made["live"]], sorted(tmp.iterdir())
    assert all(p.exists() for p in made["live"]), made["live"]
    assert not any(p.exists() for p in made["recycled"])
