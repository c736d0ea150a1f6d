"""Every Lava run happens in a supervised process session that nothing outlives.

Lava 0.10.0's runtime forks ~18 worker processes and a shared-memory manager whose segments are
``/dev/shm/psm_*`` files. Run in-process, a SIGINT makes Lava hang or print a traceback per worker, and a
killed compiler leaves the workers (re-parented to init) and the segments behind. So Lava runs as jobs
in a session of their own:

- the compiler starts this file as a script (``python -I -S supervisor.py TAG CTL ST``: stdlib only, up
  in milliseconds, importing neither torch nor Lava) in a new session, once per compiler process, at its
  first job (``_Pool``). It keeps the write end of the pipe ``CTL`` and the read end of ``ST``;
- the supervisor (``main``) is a child subreaper. It starts the runner (``runner.py``: imports torch and
  Lava once, then forks one process per job, in its own process group; Lava's processes inherit the
  session) and relays ``run`` lines to it; the runner answers each job's exit code on ``ST``. The runner
  dies with the supervisor (``PR_SET_PDEATHSIG``), a job with the runner, Lava's processes with the job;
- the supervisor ends the session (below) on SIGTERM/SIGINT, when the runner dies, or when ``CTL``
  reports EOF: the compiler exited or died, even by SIGKILL; then it also removes the work directories
  the compiler announced (``open``) and has not removed (``close``);
- the compiler (``run``), interrupted (KeyboardInterrupt, ``Interrupted``) or failing while it waits for a
  job, SIGTERMs the supervisor, waits ``GRACE`` seconds, then ends what is left of the session itself,
  and re-raises; ``workdir`` removes the job's directory. At exit it closes ``CTL`` (``shutdown``);
- one session serves every job of a compile or a verify (``shared``: the Lava target's compile and verify
  run inside ``session()``): the target's network, the netx check, the variants' runs, each sample's. The
  session a ``session()`` started ends when the outermost ``session()`` returns or raises (KeyboardInterrupt
  included), so no runner outlives the compile; ``starts()`` counts the sessions this process started.

Ending a session (``end_session``): stop every member (SIGSTOP: none can fork or create a segment
any more), collect the shared-memory segments they hold open or mapped, unlink those and every segment
carrying the session's tag (a job names its segments ``psm_<tag>j<n>_*``, so even segments whose holders
are all dead are found) and the ``pymp-*`` directories its jobs marked, SIGKILL the members. Only this session's
segments and directories are touched. Should every process of a run be killed at once (no supervisor left to
end the session), the next run's start removes what the run's tag names (``leftovers.py``).
Linux only (/proc, prctl).
"""
import atexit
import ctypes
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

SHM = Path("/dev/shm")
SHM_PREFIX = "psm_"          # multiprocessing.shared_memory's name prefix
GRACE = 2.5                  # seconds the compiler gives the supervisor to end its session
SETTLE = 1.0                 # seconds to wait for signalled processes to stop or die
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
RESULT, LOG, JOB = "result.json", "lava.log", "job.json"   # in a job's work directory
LOST = "Lava runtime"   # the ``where`` of a run whose Lava process was lost (runner._watch): run once more
LOG_LINES = 20               # log lines quoted when a run ends without a result
ERRORS_ENV = "SPIKEC_LAVA_ERRORS"   # as procs/models.py: guarded ProcessModels write tracebacks there


# -- sessions (used by the compiler, the supervisor and the runner) -----------------------
def prctl(option: int, arg: int) -> None:
    if ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}, {arg}) failed")


def _stat(pid: int) -> tuple | None:
    """``(state, ppid, pgrp, session)`` of a process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()   # the name may hold spaces and parentheses
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1]), int(fields[2]), int(fields[3])


def members(sid: int, exclude=(), zombies: bool = False) -> list[int]:
    """Processes of session ``sid`` (zombies only when asked: they hold nothing but a pid)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in exclude:
            st = _stat(int(entry))
            if st and st[3] == sid and (zombies or st[0] not in "ZX"):
                out.append(int(entry))
    return out


def segments(pids) -> set[str]:
    """Names of the ``/dev/shm/psm_*`` segments the processes hold open or mapped (and not yet unlinked)."""
    found, prefix = set(), str(SHM / SHM_PREFIX)
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith(prefix) and not target.endswith(" (deleted)"):
                    found.add(target[len(str(SHM)) + 1:])
            with open(f"/proc/{pid}/maps") as f:
                for line in f:
                    path = line.rstrip("\n").split(maxsplit=5)[-1]
                    if path.startswith(prefix) and not path.endswith(" (deleted)"):
                        found.add(path[len(str(SHM)) + 1:])
        except OSError:
            continue   # gone meanwhile
    return found


def _signal_all(pids, sig) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _settle(pids, done, deadline: float) -> None:
    """Wait (until ``deadline``) for every process to reach a state ``done(state)`` accepts, or to vanish."""
    waiting = list(pids)
    while waiting and time.monotonic() < deadline:
        waiting = [p for p in waiting if (st := _stat(p)) is not None and not done(st[0])]
        if waiting:
            time.sleep(0.01)


def _freeze(sid: int, exclude) -> set[int]:
    """SIGSTOP every member of the session, again for any forked meanwhile, until none is left running."""
    stopped: set[int] = set()
    for _ in range(100):
        fresh = [p for p in members(sid, exclude) if p not in stopped]
        if not fresh:
            break
        _signal_all(fresh, signal.SIGSTOP)
        stopped.update(fresh)
        _settle(fresh, lambda s: s in "TtZX", time.monotonic() + SETTLE)
    return stopped


def end_session(sid: int, tag: str | None, exclude=()) -> list[str]:
    """Stop, strip of its shared memory and kill every process of session ``sid`` but ``exclude``.

    Returns the segment names unlinked. Idempotent: a session already gone costs one /proc scan.
    """
    stopped = _freeze(sid, exclude)
    names = segments(stopped)
    if tag:
        names.update(p.name for p in SHM.glob(f"{SHM_PREFIX}{tag}[_j]*"))   # a pool's tag or one of its jobs'
    for name in sorted(names):
        try:
            os.unlink(SHM / name)
        except FileNotFoundError:
            pass
    if tag:
        remove_temp_dirs(f"{tag}j*")
    for _ in range(10):
        alive = members(sid, exclude)
        if not alive:
            break
        _signal_all(alive, signal.SIGKILL)
        _settle(alive, lambda s: s in "ZX", time.monotonic() + SETTLE)
    return sorted(names)


def remove_temp_dirs(marker: str) -> None:
    """Remove the multiprocessing directories (``pymp-*``) holding a file ``marker`` (a glob pattern): the jobs
    of a session mark theirs with their tag ``<session tag>j<n>`` (``runner._tag_temp_dir``)."""
    import tempfile
    for marker in Path(tempfile.gettempdir()).glob(f"pymp-*/{marker}"):
        shutil.rmtree(marker.parent, ignore_errors=True)


@contextmanager
def _signals_held():
    """Defer SIGINT/SIGTERM (a second Ctrl-C) until the cleanup inside has finished."""
    held = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


# -- the compiler's side ------------------------------------------------------------------
class PoolGone(Exception):
    """The supervised session ended while the compiler was using it."""


class _Pool:
    """This compiler process's supervised session: the supervisor and a warm runner awaiting jobs.

    ``ctl`` (compiler -> supervisor) carries ``open|run|close <workdir>`` lines and, by its EOF, the
    compiler's death; ``st`` (runner -> compiler) carries each job's exit code.
    """

    def __init__(self):
        import tempfile
        from spikec.targets.lava import leftovers
        leftovers.sweep()   # what runs killed with every process left (their tags name dead processes)
        self.owner, self.jobs, self.last_log = os.getpid(), 0, ""
        _STARTS[0] += 1
        self.tag = leftovers.new_tag()
        self.log = tempfile.TemporaryFile()   # anonymous: nothing on disk to leave behind
        root = str(Path(__file__).resolve().parents[3])   # the runner imports this very spikec
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
        ctl_r, self.ctl = os.pipe()
        self.st, st_w = os.pipe()
        self.proc = None
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(Path(__file__).resolve()), self.tag, str(ctl_r), str(st_w)],
                start_new_session=True, pass_fds=(ctl_r, st_w), stdin=subprocess.DEVNULL, stdout=self.log,
                stderr=subprocess.STDOUT, env=env)
        except BaseException:
            self._close_pipes()
            self.log.close()
            raise
        finally:
            os.close(ctl_r)
            os.close(st_w)

    def _close_pipes(self) -> None:
        for fd in (self.ctl, self.st):
            if fd >= 0:
                os.close(fd)
        self.ctl = self.st = -1

    def send(self, verb: str, path: Path) -> None:
        try:
            os.write(self.ctl, f"{verb} {path}\n".encode())
        except OSError as e:   # EPIPE: the supervisor is gone
            raise PoolGone(str(e)) from None

    def status(self) -> int:
        """The exit code of the job just sent (blocks; a signal interrupts it)."""
        line = b""
        while not line.endswith(b"\n"):
            chunk = os.read(self.st, 64)
            if not chunk:
                raise PoolGone("the Lava runner stopped answering")
            line += chunk
        return int(line)

    def alive(self) -> bool:
        return self.proc is not None and _running(self.proc.pid)

    def end(self, graceful: bool) -> None:
        """End the session: by EOF (``graceful``) or SIGTERM, after ``GRACE`` s by force; reap the supervisor."""
        with _signals_held():
            try:
                if not graceful and self.alive():
                    self.proc.send_signal(signal.SIGTERM)
                self._close_pipes()   # EOF: the supervisor ends its session
                deadline = time.monotonic() + GRACE
                while self.alive() and time.monotonic() < deadline:
                    time.sleep(0.01)
            finally:
                if self.proc is not None:
                    end_session(self.proc.pid, self.tag)   # its pid is the session id until the wait below
                    self.proc.wait()
                self.log.seek(0)
                self.last_log = "\n".join(self.log.read().decode(errors="replace").splitlines()[-LOG_LINES:])
                self.log.close()


_POOL: list = [None]
_LOCK = threading.Lock()
_STARTS = [0]                # sessions (supervisor + runner) started by this process: ``starts()``
_DEPTH = {"depth": 0, "owner": 0}   # ``session()`` nesting, in the process that entered it


def _pool() -> _Pool:
    pool = _POOL[0]
    if pool is not None and pool.owner == os.getpid() and pool.alive():
        return pool
    if pool is not None and pool.owner == os.getpid():
        pool.end(graceful=False)
    _POOL[0] = _Pool()
    return _POOL[0]


def _discard(pool: _Pool, graceful: bool = False) -> None:
    if _POOL[0] is pool:
        _POOL[0] = None
    pool.end(graceful)


def shutdown() -> None:
    """End this process's Lava session (at exit; a later run starts a new one)."""
    pool = _POOL[0]
    if pool is not None and pool.owner == os.getpid():
        _discard(pool, graceful=True)


def starts() -> int:
    """How many Lava sessions (a supervisor and its warm runner) this process has started so far."""
    return _STARTS[0]


def current_pid() -> int | None:
    """The supervisor's pid of this process's live session, or None."""
    pool = _POOL[0]
    return pool.proc.pid if pool is not None and pool.owner == os.getpid() and pool.alive() else None


@contextmanager
def session():
    """Every Lava job inside shares one session, started at the first job (a compile that never reaches Lava
    starts none); the outermost ``session()`` ends the session on every exit (return, error, interrupt), as
    ``shutdown`` does at exit, so nothing of it outlives the compile or the verify. A session already running
    when the outermost one is entered (a caller's own) is used, and ended there too."""
    with _LOCK:   # threads compiling at once share the count: the last one out ends the session
        if _DEPTH["owner"] != os.getpid():   # entered in a fork's parent: not this process's nesting
            _DEPTH.update(depth=0, owner=os.getpid())
        _DEPTH["depth"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _DEPTH["depth"] -= 1
            if _DEPTH["depth"] == 0:
                shutdown()


def shared(fn):
    """``fn`` run inside ``session()`` (the Lava target's compile and verify)."""
    import functools

    @functools.wraps(fn)
    def inside(*args, **kwargs):
        with session():
            return fn(*args, **kwargs)
    return inside


def _forget_in_child() -> None:
    # a fork of the compiler must not hold the pipes: the supervisor would miss the compiler's death
    global _LOCK
    _LOCK = threading.Lock()   # another thread may have held it at the fork
    _DEPTH.update(depth=0, owner=os.getpid())
    pool = _POOL[0]
    if pool is not None:
        pool._close_pipes()
        _POOL[0] = None


atexit.register(shutdown)
os.register_at_fork(after_in_child=_forget_in_child)


@contextmanager
def workdir(prefix: str):
    """A fresh temporary directory for one job, named with the session's tag (``leftovers.py``), removed on every
    exit (interrupts included), should the compiler die by the supervisor, should both die by the next run."""
    import tempfile
    path = pool = None
    try:
        with _LOCK:
            pool = _pool()
            with _signals_held():   # made and announced together: an interrupt cannot leave it unannounced
                path = Path(tempfile.mkdtemp(prefix=f"{prefix}{pool.tag}-"))
                pool.send("open", path)
        (path / "errors").mkdir()
        yield path
    finally:
        with _signals_held():
            if path is not None:
                shutil.rmtree(path, ignore_errors=True)
            if path is not None and pool is not None and _POOL[0] is pool:
                try:
                    pool.send("close", path)
                except PoolGone:
                    pass


def run(kind: str, path: Path, spec: dict) -> dict:
    """Run job ``kind`` (see ``runner.JOBS``) on the files in ``path`` (from ``workdir``); returns its result.

    Whatever ends the wait (the run finishing, KeyboardInterrupt, ``Interrupted``, any error), no process
    or shared-memory segment of the run survives: an interrupted run takes the whole session down. A failed
    run raises: the runner's SpikecError or ImportError again, anything else as IRError, quoting at most a
    short excerpt of the logs.
    """
    from spikec.ir.errors import IRError
    with _LOCK:
        pool = _pool()
        pool.jobs += 1
        (path / JOB).write_text(json.dumps({"kind": kind, "spec": spec, "tag": f"{pool.tag}j{pool.jobs}",
                                            "errors": str(path / "errors")}))
        try:
            pool.send("open", path)   # again: the session that saw ``workdir`` open it may have ended since
            pool.send("run", path)
            code = pool.status()
        except PoolGone:
            _discard(pool)
            how = pool.proc.returncode
            how = f"killed by signal {-how}" if how < 0 else f"exit status {how}"
            raise IRError(f"the Lava run ended without a result (supervisor {how}); last lines of its log:\n"
                          + (pool.last_log or "(empty)"), where="Lava supervisor",
                          remedy="if nothing killed it, this is a compiler bug: report it with the model") from None
        except BaseException:   # KeyboardInterrupt, Interrupted: nothing of the run may survive
            _discard(pool)
            raise
    return _outcome(code, path)


def _running(pid: int) -> bool:
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is None
    except ChildProcessError:   # reaped already
        return False


def _outcome(code: int, path: Path) -> dict:
    from spikec.ir import errors
    result = path / RESULT
    if not result.exists():
        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        raise errors.IRError(f"the Lava run ended without a result (runner {how}); last lines of its log:\n"
                             + (tail(path / LOG) or "(empty)"), where="Lava runner",
                             remedy="if nothing killed it, this is a compiler bug: report it with the model")
    r = json.loads(result.read_text())
    if r.get("ok"):
        return r
    e = r["error"]
    cls = getattr(errors, e["type"], None)
    if isinstance(cls, type) and issubclass(cls, errors.SpikecError):
        log = tail(path / LOG) if e.get("where") == LOST else ""   # why the lost process ended, if it said
        raise cls(e["what"] + (f"\nlast lines of the Lava log:\n{log}" if log else ""), where=e.get("where", ""),
                  remedy=e.get("remedy", ""))
    if e["type"] in ("ImportError", "ModuleNotFoundError"):
        raise ImportError(e["what"])
    log = tail(path / LOG)
    raise errors.IRError(f"the Lava run failed: {e['type']}: {e['what']}\n{e.get('traceback', '')}".rstrip()
                         + (f"\nlast lines of the Lava log:\n{log}" if log else ""),
                         where="Lava runner", remedy="this is a compiler bug: report it with the model")


def tail(path: Path, lines: int = LOG_LINES) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


# -- the supervisor -----------------------------------------------------------------------
def main(argv: list[str]) -> int:
    tag, ctl, st = argv[1], int(argv[2]), int(argv[3])
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})   # a mask survives exec
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)   # these signals wake the select below
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
        signal.signal(sig, lambda *_: None)
    prctl(PR_SET_CHILD_SUBREAPER, 1)   # Lava's orphans come back here to be reaped, not to init
    runner = subprocess.Popen([sys.executable, "-m", "spikec.targets.lava.runner", str(os.getpid()), str(st)],
                              pass_fds=(st,), stdin=subprocess.PIPE, process_group=0)
    os.close(st)   # the runner's alone: the compiler sees EOF when the runner dies
    dirs, buf = set(), b""
    while True:
        ready = select.select([ctl, wake_r], [], [])[0]
        if wake_r in ready:
            signums = os.read(wake_r, 512)
            ended = [s for s in signums if s in (signal.SIGTERM, signal.SIGINT)]
            if ended:
                print(f"spikec supervisor: signal {ended[0]}: ending the Lava session", flush=True)
                _shutdown(tag)
                return 128 + ended[0]
            status = _reap().get(runner.pid)
            if status is not None:
                print(f"spikec supervisor: the runner ended ({os.waitstatus_to_exitcode(status)})", flush=True)
                _shutdown(tag)
                return 1
        if ctl in ready:
            data = os.read(ctl, 4096)
            if not data:   # the compiler closed the pipe or died (even by SIGKILL)
                _shutdown(tag)
                for d in dirs:
                    shutil.rmtree(d, ignore_errors=True)
                return 0
            *lines, buf = (buf + data).split(b"\n")
            for line in lines:
                verb, path = line.decode().split(" ", 1)
                if verb == "open":
                    dirs.add(path)
                elif verb == "close":
                    dirs.discard(path)
                else:   # run: the runner forks a job for it
                    try:
                        runner.stdin.write(f"{path}\n".encode())
                        runner.stdin.flush()
                    except BrokenPipeError:
                        pass   # its SIGCHLD ends the session


def _reap() -> dict:
    """Reap every child that has exited (the runner, Lava's orphans): pid -> wait status."""
    statuses = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return statuses
        if not pid:
            return statuses
        statuses[pid] = status


def _shutdown(tag: str) -> None:
    """End this session but this process, and reap every child."""
    end_session(os.getsid(0), tag, exclude=(os.getpid(),))
    deadline = time.monotonic() + SETTLE
    while time.monotonic() < deadline:
        _reap()
        try:
            os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        time.sleep(0.005)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
