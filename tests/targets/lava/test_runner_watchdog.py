"""Lava's runtime (lava-nc 0.10) waits forever for a process of the run that has exited. The job's watchdog
(``runner._watch``) ends such a run with the reason, and ``simulate.run_lava`` runs the job once more; a process
exiting outside a run is not looked at."""
import json
import os
import threading
import time

import pytest

from spikec.targets.lava import runner, supervisor


def _zombie() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    time.sleep(0.3)
    return pid


def test_an_exited_child_is_seen_until_reaped():
    pid = _zombie()
    try:
        assert pid in runner._exited_children()
    finally:
        os.waitpid(pid, 0)
    assert pid not in runner._exited_children()


@pytest.mark.parametrize("during_run", [True, False])
def test_a_process_lost_during_a_run_ends_the_job_with_the_reason(tmp_path, monkeypatch, during_run):
    """In a forked job: a child that exits while the run flag is set ends the job (exit 1, result.json naming
    the loss, ``where`` the runner's LOST); with the flag clear nothing happens."""
    monkeypatch.setattr(runner, "LOST_GRACE", 1.0)
    job = os.fork()
    if job == 0:   # the job process
        try:
            running = threading.Event()
            if during_run:
                running.set()
            threading.Thread(target=runner._watch, args=(tmp_path, running), daemon=True).start()
            _zombie()
            time.sleep(4)
        finally:
            os._exit(0)
    code = os.waitstatus_to_exitcode(os.waitpid(job, 0)[1])
    result = tmp_path / supervisor.RESULT
    if during_run:
        assert code == 1 and result.exists()
        r = json.loads(result.read_text())
        assert r["ok"] is False and r["error"]["where"] == supervisor.LOST and "lost 1 of its processes" in r["error"]["what"]
    else:
        assert code == 0 and not result.exists()


def test_the_job_runs_once_more_after_a_loss_and_not_twice(tmp_path, monkeypatch, capsys):
    from spikec.ir.errors import IRError
    from spikec.targets.lava import simulate
    (tmp_path / "errors").mkdir()
    (tmp_path / "chunk0").mkdir()
    calls, fails = [], [1]

    def run(kind, path, spec):
        calls.append(kind)
        if len(calls) <= fails[0]:
            raise IRError("Lava's runtime lost 1 of its processes", where=supervisor.LOST)
        return {"ok": True}

    monkeypatch.setattr(supervisor, "run", run)
    assert simulate._run_once_more_if_lost(tmp_path, {}) == {"ok": True} and len(calls) == 2
    assert not (tmp_path / "chunk0").exists() and "once more" in capsys.readouterr().err
    calls.clear()
    fails[0] = 2
    with pytest.raises(IRError, match="lost"):
        simulate._run_once_more_if_lost(tmp_path, {})
    assert len(calls) == 2
