"""One Lava session (supervisor + warm runner) per compile and per verify, ended when it returns or raises.

Counted with ``supervisor.starts()`` (the sessions this process started), not timed. A compile of a netx-exportable
network runs Lava twice (the target's network, then ``model.net`` loaded by netx): one session serves both and is
gone when the compile returns; an interrupt between the two runs ends it too; runs sharing a session give the
same integers as runs in sessions of their own.
"""
import os
from pathlib import Path

import numpy as np
import pytest

from spikec.targets.lava import lava_available

REASON = lava_available()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")

MODELS = Path(__file__).resolve().parent / "models.py"


def _compile(**kw):
    from spikec.app.driver import CompileOptions, compile_model
    return compile_model(CompileOptions(model=f"{MODELS}:conv_hard", target="lava", **{"seed": 6, "batch": 2, **kw}))


@pytest.fixture
def jobs(monkeypatch):
    """Each Lava job run: ``(kind, supervisor pid, session tag)``."""
    from spikec.targets.lava import supervisor
    seen, run = [], supervisor.run

    def counted(kind, path, spec):
        result = run(kind, path, spec)   # the session exists once the job has run (started at the first)
        seen.append((kind, supervisor.current_pid(), supervisor._POOL[0] and supervisor._POOL[0].tag))
        return result
    monkeypatch.setattr(supervisor, "run", counted)
    return seen


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in "ZX"
    except OSError:
        return True


def test_a_compile_with_two_lava_runs_starts_one_session_and_ends_it(jobs):
    from spikec.targets.lava import supervisor
    supervisor.shutdown()   # whatever an earlier test left in this process
    before = supervisor.starts()
    c = _compile()
    t = c.report["target"]
    assert t["bit_exact"] and t["netx"]["verification"]["bit_exact"], t["netx"]
    assert [k for k, _, _ in jobs] == ["network", "netx"]
    assert supervisor.starts() - before == 1
    pids = {p for _, p, _ in jobs}
    assert len(pids) == 1 and None not in pids   # both jobs in the one session
    assert supervisor.current_pid() is None and _gone(pids.pop())   # nothing of it outlives the compile


def test_an_interrupt_between_two_lava_runs_ends_the_session(monkeypatch, jobs):
    from spikec.targets.lava import netx, supervisor

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(netx, "verify", interrupted)   # after the target's run, before netx's
    before = supervisor.starts()
    with pytest.raises(KeyboardInterrupt):
        _compile(batch=3)
    assert [k for k, _, _ in jobs] == ["network"] and supervisor.starts() - before == 1
    _, pid, tag = jobs[0]
    assert supervisor.current_pid() is None and _gone(pid) and tag
    assert not list(supervisor.SHM.glob(f"{supervisor.SHM_PREFIX}{tag}*"))   # its jobs' segments unlinked


def test_runs_sharing_a_session_give_the_integers_of_separate_sessions():
    from spikec.targets.lava import supervisor
    from spikec.targets.lava.simulate import run_lava
    lava = _compile(batch=4).files["lava"]
    net, arrays = lava.network, lava.arrays
    rng = np.random.default_rng(0)
    name = net["inputs"][0]["name"]
    shape = tuple(net["inputs"][0]["ir_shape"])
    xs = [{name: (rng.random((5, 2) + shape) < p).astype(np.int64)} for p in (0.3, 0.6)]
    alone = []
    for x in xs:   # each in a session of its own
        with supervisor.session():
            alone.append(run_lava(net, arrays, x))
    before = supervisor.starts()
    with supervisor.session():
        together = [run_lava(net, arrays, x) for x in xs]
        pid = supervisor.current_pid()
    assert supervisor.starts() - before == 1 and _gone(pid) and os.getpid() != pid
    for a, b in zip(alone, together):
        assert a["outputs"].keys() == b["outputs"].keys() and a["states"].keys() == b["states"].keys()
        assert all(np.array_equal(a["outputs"][k], b["outputs"][k]) for k in a["outputs"])
        assert all(np.array_equal(a["states"][k], b["states"][k]) for k in a["states"])
    assert any(a["outputs"][k].any() for a in alone for k in a["outputs"])   # not a silent network
