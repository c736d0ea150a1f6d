"""Suite-wide test settings: one torch thread, the two test tiers, and exclusive tests under pytest-xdist.

Tiers: ``make test-fast`` runs ``-m "not slow"``: the core (compiler, ops, nn), the frontend, the passes and the
repository's own unit checks (lint, code size, docs, import layers). Everything else is slow *by its path*, so a
new test file lands in its folder's tier without anyone marking it: a target's end-to-end runs (Lava: 5-30 s
each), the app's compiles through subprocesses, examples, TTFS, the mutation tools. A test under a fast path
that costs seconds is marked ``@pytest.mark.slow`` (or listed in ``SLOW_HERE`` when its file is another
engineer's). ``make test`` runs everything, over pytest-xdist's workers.

Lava sessions: a Lava run outside ``supervisor.session()`` starts its own supervisor and warm runner (~3.8 s a run
against ~1.2 s inside one). Each worker holds one session for its whole run (``shared_lava_session``), so every
compile of every test shares one runtime; it starts at the first Lava job (a worker that runs none starts none).
A module checking what a compile's own session does (that it starts one, that nothing outlives the compile) is
listed in ``OWN_LAVA_SESSIONS`` or marked ``@pytest.mark.own_lava_sessions``: the shared session is ended before
it and started again after it. Jobs are forks of the runner, each from the same state, so a shared session
computes what sessions of their own do (``targets/lava/test_runtime_shared.py`` checks it).

``@pytest.mark.exclusive``: a test with a wall-clock bound, or one that leaves dead-run files in the machine's
shared ``/dev/shm`` for a later sweep to find, runs while no other worker runs a test (another worker's compile
sweeps dead runs' segments, and a Lava run beside it doubles a cleanup's time).
"""
import fcntl
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

TESTS = Path(__file__).resolve().parent
FAST = ("core", "ir", "ops", "nn", "frontend", "passes", "tools",
        "test_code_size.py", "test_docs.py", "test_import_layers.py", "test_lint.py", "test_nn_reach.py")
# Tests under a fast path that cost seconds each, in files other engineers own (node id prefixes from tests/).
SLOW_HERE = ()
# Files measured longest (a run of the whole suite over 2 workers, each file's wall seconds from SPIKEC_FILE_TIMES
# below; 2026-12-04, quiet machine: coverage 36 s ... leftovers 6 s), started first: pytest-xdist gives a worker a
# whole file (--dist loadfile keeps a module's shared fixtures on one worker), so a long file left to the end would
# leave the other worker idle. A file missing here or gone only loses the ordering.
LONG_FIRST = ("targets/test_coverage.py", "targets/lava/test_sdna_sdt_lava.py", "targets/lava/test_interrupts.py",
              "targets/lava/test_ttfs_lava.py", "targets/lava/test_lava_mapping.py",
              "targets/lava/test_runtime_shared.py", "test_readme_commands.py", "targets/test_nir_paper_targets.py",
              "app/test_fuzz_graphs.py", "targets/lava/test_network_api.py", "targets/lava/test_framework_neurons.py",
              "targets/lava/test_lava_target.py", "app/test_trust_after_success.py", "app/test_dataset_verify.py",
              "targets/lava/test_current_bias.py", "targets/lava/test_readout_over_time.py",
              "targets/lava/test_placement_written.py", "core/test_cli.py", "targets/lava/test_accuracy.py",
              "targets/lava/test_exact_source.py", "app/test_bring_your_model.py", "targets/lava/test_leftovers.py")
# Modules that check a compile's own Lava session (counted, ended with the compile) or kill one: no shared session.
OWN_LAVA_SESSIONS = ("targets/lava/test_runtime_shared.py", "targets/lava/test_interrupts.py",
                     "targets/lava/test_leftovers.py")


def _relative(path) -> str | None:
    """``path`` relative to tests/ (``a/b.py``), or None outside it."""
    try:
        return Path(path).resolve().relative_to(TESTS).as_posix()
    except ValueError:
        return None


def slow_path(rel: str | None) -> bool:
    return rel is not None and rel.split("/")[0] not in FAST


def is_slow(item) -> bool:
    """Whether ``item`` is in the slow tier: by its marker, by ``SLOW_HERE``, or by a path outside ``FAST``."""
    rel = _relative(item.path) or item.nodeid
    nodeid = rel + item.nodeid[item.nodeid.index("::"):] if "::" in item.nodeid else rel
    return (item.get_closest_marker("slow") is not None or slow_path(rel)
            or any(nodeid.startswith(prefix) for prefix in SLOW_HERE))


def pytest_ignore_collect(collection_path, config):
    """Under ``-m "not slow"`` a slow path holds no selectable test: not importing it saves its imports."""
    if config.getoption("markexpr", "") == "not slow":
        rel = _relative(collection_path)
        if rel not in (None, ".", "conftest.py") and slow_path(rel):
            return True
    return None


def _order(item) -> tuple:
    rel = _relative(item.path)
    return (LONG_FIRST.index(rel) if rel in LONG_FIRST else len(LONG_FIRST), not slow_path(rel))


def pytest_collection_modifyitems(config, items):
    for item in items:
        if is_slow(item) and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)
    items.sort(key=_order)   # stable: a file's tests stay together and in order


class _Machine:
    """An inter-worker reader/writer lock over two files: every test holds ``main`` shared, an exclusive test
    holds it alone. The ``gate`` stops new shared holders while an exclusive test waits (no starvation)."""

    def __init__(self, where: Path):
        self.gate = open(where / "spikec-tests.gate", "a+")
        self.main = open(where / "spikec-tests.lock", "a+")

    @contextmanager
    def hold(self, exclusive: bool):
        if exclusive:
            fcntl.flock(self.gate, fcntl.LOCK_EX)
            fcntl.flock(self.main, fcntl.LOCK_EX)
        else:
            fcntl.flock(self.gate, fcntl.LOCK_SH)
            fcntl.flock(self.main, fcntl.LOCK_SH)
            fcntl.flock(self.gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(self.main, fcntl.LOCK_UN)
            if exclusive:
                fcntl.flock(self.gate, fcntl.LOCK_UN)


_MACHINE: list = []


def pytest_configure(config):
    config.addinivalue_line("markers", "own_lava_sessions: the module checks a compile's own Lava session: no "
                                       "session shared across its tests (tests/conftest.py)")
    # an xdist worker's basetemp is <the run's basetemp>/popen-gwN: the parent is shared by the run's workers
    if hasattr(config, "workerinput") and config.option.basetemp:
        _MACHINE.append(_Machine(Path(config.option.basetemp).parent))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Setup, call and teardown (module fixtures' too) under the machine lock, when workers share the machine."""
    if not _MACHINE:
        return (yield)
    with _MACHINE[0].hold(item.get_closest_marker("exclusive") is not None):
        return (yield)


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    """The suite runs many tiny tensor ops: torch's intra-op thread pool only adds OpenMP synchronisation
    to them (measured 5-50x slower with two threads on a busy 2-core machine). Restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class _SharedLava:
    """This worker's held ``supervisor.session()`` (entered lazily, left for an ``own_lava_sessions`` module)."""
    held = None

    @classmethod
    def hold(cls) -> None:
        if cls.held is None:
            from spikec.targets.lava import supervisor
            cls.held = supervisor.session()
            cls.held.__enter__()

    @classmethod
    def release(cls) -> None:
        if cls.held is not None:
            held, cls.held = cls.held, None
            held.__exit__(None, None, None)   # the outermost session(): ends the supervisor and runner


def own_lava_sessions(module) -> bool:
    return _relative(module.path) in OWN_LAVA_SESSIONS or module.get_closest_marker("own_lava_sessions") is not None


@pytest.fixture(autouse=True, scope="module")
def shared_lava_session(request):
    """One Lava session for every test of the module, and of the worker's next modules (see the docstring)."""
    if own_lava_sessions(request.node):
        _SharedLava.release()
        yield
    else:
        _SharedLava.hold()
        yield


def pytest_sessionfinish(session):
    _SharedLava.release()


# -- SPIKEC_FILE_TIMES=PATH: each file's wall seconds (its tests' setup, call and teardown) and its worker, as TSV --
_FILE_TIMES: dict = {}


def pytest_runtest_logreport(report):
    """In the run's own process (pytest-xdist's controller receives every worker's reports)."""
    rel = report.nodeid.split("::", 1)[0]
    worker = getattr(getattr(report, "node", None), "workerinput", {}).get("workerid", "main")
    seconds, _ = _FILE_TIMES.get(rel, (0.0, worker))
    _FILE_TIMES[rel] = (seconds + report.duration, worker)


def pytest_terminal_summary(terminalreporter, config):
    import os
    path = os.environ.get("SPIKEC_FILE_TIMES")
    if not path or hasattr(config, "workerinput") or not _FILE_TIMES:
        return
    rows = sorted(_FILE_TIMES.items(), key=lambda kv: -kv[1][0])
    per_worker: dict = {}
    for _, (seconds, worker) in rows:
        per_worker[worker] = per_worker.get(worker, 0.0) + seconds
    Path(path).write_text("".join(f"{s:.1f}\t{w}\t{f}\n" for f, (s, w) in rows)
                          + "".join(f"{s:.1f}\t{w}\t(worker total)\n" for w, s in sorted(per_worker.items())))
    terminalreporter.write_line(f"per-file wall times: {path} (" + ", ".join(
        f"{w} {s:.0f} s" for w, s in sorted(per_worker.items())) + ")")
