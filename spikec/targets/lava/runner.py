"""The warm process that runs Lava jobs, started by ``supervisor.py`` (see there).

``python -m spikec.targets.lava.runner SUPERVISOR_PID ST_FD`` imports torch and Lava once, then for each
WORKDIR line on stdin forks a job process (its own process group; stdout/stderr to WORKDIR's log) that
reads ``job.json`` and the job's files, writes its outputs and ``result.json`` (``{"ok": true, ...}`` or
``{"ok": false, "error"}``) into WORKDIR, and exits; the runner kills what the job left, unlinks the
job's segments and writes the job's exit code on ST_FD. A fork per job: every job starts from the same
state, and a warm fork costs a fraction of a second where a fresh interpreter importing torch and Lava
costs seconds. The runner dies with the supervisor, a job with the runner, and every process a job
forks from its main thread (Lava's workers, the shared-memory manager) with the job. A job names its
shared-memory segments ``psm_<tag>_*`` so they are found even after every process holding them is dead, and
marks its multiprocessing directory (``pymp-*``) with a file named by its tag (``leftovers.py``).
"""
import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

import numpy as np

from spikec.targets.lava import supervisor

_forked_by_main = [False]


def _die_with_parent(expected: int) -> None:
    supervisor.prctl(supervisor.PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != expected:   # it died before the prctl
        os._exit(1)


def _before_fork():
    # PDEATHSIG follows the forking *thread*: only children forked by the main thread may carry it
    _forked_by_main[0] = threading.current_thread() is threading.main_thread()


def _after_fork_in_child():
    if _forked_by_main[0]:
        supervisor.prctl(supervisor.PR_SET_PDEATHSIG, signal.SIGKILL)


def _tag_shared_memory(tag: str) -> None:
    """Name every segment this process tree creates ``psm_<tag>_<random>``."""
    import secrets
    from multiprocessing import shared_memory
    shared_memory._make_filename = lambda: f"/{supervisor.SHM_PREFIX}{tag}_{secrets.token_hex(8)}"


# -- jobs ---------------------------------------------------------------------------------
def network_job(path: Path, spec: dict) -> dict:
    """``simulate.run_lava``'s network on its inputs, one Lava run per batch chunk (stops at a failing one)."""
    from spikec.targets.lava._shim import import_lava
    import_lava()
    from lava.magma.core.run_conditions import RunSteps
    from lava.magma.core.run_configs import Loihi2SimCfg
    from spikec.targets.lava.build import build, finish

    net = json.loads((path / "network.json").read_text())
    with np.load(path / "params.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    with np.load(path / "inputs.npz", allow_pickle=False) as z:
        x = {name: z[f"arr_{i}"] for i, name in enumerate(spec["inputs"])}
    batch, chunk, steps = next(iter(x.values())).shape[1], spec["chunk"], spec["steps"]
    chunks, build_s, sim_s = [], 0.0, 0.0
    for i, lo in enumerate(range(0, batch, chunk)):
        xb = {k: v[:, lo:lo + chunk] for k, v in x.items()}
        out = path / f"chunk{i}"
        out.mkdir()
        start = time.perf_counter()
        procs, aux, files = build(net, arrays, xb, steps, out)
        build_s += time.perf_counter() - start
        source = procs[net["inputs"][0]["name"]]
        start = time.perf_counter()
        try:
            RUNNING.set()
            source.run(condition=RunSteps(num_steps=steps), run_cfg=Loihi2SimCfg(select_tag="fixed_pt"))
            finish(aux)   # Lava's Monitors read while the runtime is up
        finally:
            RUNNING.clear()
            source.stop()
        sim_s += time.perf_counter() - start
        chunks.append({"batch": int(next(iter(xb.values())).shape[1]),
                       "files": [[what, name, str(p.relative_to(path))] for (what, name), p in files.items()]})
        if any((path / "errors").iterdir()):
            break   # the compiler raises the first failure
    return {"chunks": chunks, "build_seconds": build_s, "sim_seconds": sim_s}


def netx_job(path: Path, spec: dict) -> dict:
    """``netx.verify``'s runs: ``model.net`` loaded by netx on each sample of ``x.npy``."""
    from spikec.targets.lava.netx import run_netx
    xs = np.load(path / "x.npy", allow_pickle=False)
    samples = []
    for b in range(xs.shape[1]):
        out = path / f"sample{b}"
        out.mkdir()
        r = run_netx(spec["path"], xs[:, b], spec["steps"], out)
        samples.append({"files": [[what, i, str(p.relative_to(path))] for (what, i), p in r["files"].items()],
                        "layers": r["layers"], "note": r["note"], "table": r["table"]})
    return {"samples": samples}


def ttfs_job(path: Path, spec: dict) -> dict:
    """``ttfs_lava.run_lava``'s TTFS network (``ttfs_lava.job``)."""
    from spikec.targets.lava.ttfs_lava import job
    return job(path, spec)


JOBS = {"network": network_job, "netx": netx_job, "ttfs": ttfs_job}


def _describe(e: BaseException) -> dict:
    from spikec.ir.errors import SpikecError
    if isinstance(e, SpikecError):
        return {"type": type(e).__name__, "what": e.what, "where": e.where, "remedy": e.remedy}
    tb = traceback.format_exception(e)
    return {"type": type(e).__name__, "what": str(e), "traceback": "".join(tb[-6:]).rstrip()}


def _built_types() -> list:
    """The Process types ``build`` makes (Lava's standard ones and spikec's): their ProcessModels are searched
    once, here, for every job (``_shim.memoize_model_search``)."""
    from lava.proc.conv.process import Conv
    from lava.proc.dense.process import DelayDense, Dense
    from lava.proc.io.source import RingBuffer
    from lava.proc.lif.process import LIF
    from lava.proc.monitor.process import Monitor
    from spikec.targets.lava.procs import and_gate, process
    spikec_types = [c for c in vars(process).values() if isinstance(c, type) and c.__module__ == process.__name__
                    and not c.__name__.startswith("_")]
    from lava.proc.sparse.process import Sparse
    return [LIF, Dense, DelayDense, Conv, Sparse, RingBuffer, Monitor, and_gate.SpikecAND, *spikec_types]


def _prewarm() -> None:
    """Import what every job needs once, here: each job is a fork of this process."""
    try:
        from spikec.targets.lava._shim import import_lava, memoize_model_search
        import_lava()
        import lava.magma.core.run_configs  # noqa: F401
        import lava.proc.conv.process  # noqa: F401
        import lava.proc.dense.process  # noqa: F401
        import lava.proc.io.source  # noqa: F401
        import lava.proc.lif.process  # noqa: F401
        import lava.proc.monitor.process  # noqa: F401
        import spikec.targets.lava.build  # noqa: F401
        import spikec.targets.lava.procs.models  # noqa: F401
        memoize_model_search(_built_types())
    except Exception:   # a job importing them again reports the failure in its result
        traceback.print_exc()


def _tag_temp_dir(tag: str) -> None:
    """Make this job's multiprocessing directory (``pymp-*``: Lava's managers put their sockets there; a killed
    process never removes it) now, marked with a file named by the job's tag, so that it is found by its tag.
    It stays where multiprocessing puts it: a socket path longer than 108 bytes cannot be bound."""
    from multiprocessing import process, util
    process.current_process()._config.pop("tempdir", None)   # the runner's own (if any) is not the job's
    (Path(util.get_temp_dir()) / tag).touch()


LOST_GRACE = 10.0   # seconds a Lava process may stay exited (a zombie) during a run before the run is given up


def _exited_children() -> set:
    """The pids of this process's children that have exited and wait to be reaped (``/proc``: state Z)."""
    me, found = os.getpid(), set()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue   # gone meanwhile
        if fields[0] == "Z" and int(fields[1]) == me:
            found.add(int(d.name))
    return found


def _watch(path: Path, running: threading.Event) -> None:
    """While ``running``: a Lava process that exited during the run and stays unreaped for ``LOST_GRACE`` seconds
    means the runtime waits for its messages forever (lava-nc 0.10 does): end the job with that reason instead."""
    seen: dict = {}
    while True:
        time.sleep(1.0)
        if not running.is_set():
            seen.clear()
            continue
        now, lost = time.monotonic(), _exited_children()
        seen = {pid: seen.get(pid, now) for pid in lost}
        stuck = sorted(pid for pid, t in seen.items() if now - t >= LOST_GRACE)
        if stuck:
            error = {"type": "IRError", "where": supervisor.LOST,
                     "what": f"Lava's runtime lost {len(stuck)} of its processes during the run (pids "
                             f"{', '.join(map(str, stuck[:8]))} exited, unreaped for {LOST_GRACE:.0f} s): the run "
                             "would wait for their messages forever, so it was ended",
                     "remedy": "run again; if it recurs, this is a compiler bug: report it with the model"}
            tmp = path / (supervisor.RESULT + ".tmp")
            tmp.write_text(json.dumps({"ok": False, "error": error}))
            tmp.rename(path / supervisor.RESULT)
            os._exit(1)


RUNNING = threading.Event()   # set by a job while Lava runs (network_job); the watchdog looks only then


def _job(path: Path) -> int:
    """In the forked job process: run ``path``'s job, write ``result.json``; the exit code."""
    job = json.loads((path / supervisor.JOB).read_text())
    _tag_shared_memory(job["tag"])
    _tag_temp_dir(job["tag"])
    os.environ[supervisor.ERRORS_ENV] = job["errors"]   # guarded ProcessModels write tracebacks there
    threading.Thread(target=_watch, args=(path, RUNNING), daemon=True).start()
    try:
        result, code = {"ok": True, **JOBS[job["kind"]](path, job["spec"])}, 0
    except Exception as e:
        result, code = {"ok": False, "error": _describe(e)}, 1
    tmp = path / (supervisor.RESULT + ".tmp")
    tmp.write_text(json.dumps(result))
    tmp.rename(path / supervisor.RESULT)   # whole or absent
    return code


def _fork_job(path: Path, st: int) -> int:
    """Run one job in a fork, in its own process group; end whatever it leaves; its exit code."""
    tag = json.loads((path / supervisor.JOB).read_text())["tag"]
    sys.stdout.flush()
    sys.stderr.flush()
    me = os.getpid()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setpgid(0, 0)
            _die_with_parent(me)
            os.close(st)
            null = os.open(os.devnull, os.O_RDONLY)
            log = os.open(path / supervisor.LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            for fd, to in ((null, 0), (log, 1), (log, 2)):   # Lava's processes inherit these
                os.dup2(fd, to)
            code = _job(path)
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)   # no atexit joins: whatever Lava left running is ended below
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass   # the child did it first, or is gone
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    try:
        os.killpg(pid, signal.SIGKILL)   # stragglers; the group id stays reserved until the wait below
    except ProcessLookupError:
        pass
    for p in supervisor.SHM.glob(f"{supervisor.SHM_PREFIX}{tag}_*"):
        p.unlink(missing_ok=True)
    supervisor.remove_temp_dirs(tag)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def main(argv: list[str]) -> int:
    """``runner SUPERVISOR_PID ST_FD``: job paths arrive on stdin, exit codes leave on ``ST_FD``."""
    parent, st = int(argv[1]), int(argv[2])
    _die_with_parent(parent)
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
    _prewarm()
    for line in sys.stdin.buffer:
        try:
            code = _fork_job(Path(line.decode().rstrip("\n")), st)
        except Exception:   # an unreadable job fails alone (no result.json), the runner stays
            traceback.print_exc()
            code = 1
        os.write(st, f"{code}\n".encode())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
