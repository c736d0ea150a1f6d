"""OUTDIR ownership: spikec writes, replaces and deletes only directories it wrote itself."""
import json
from pathlib import Path

import numpy as np
import pytest

from app_helpers import assert_clean_failure, cli, digits_copy, small, snapshot  # noqa: F401  (fixture)
from spikec.app import outdir as owned
from spikec.ir.errors import Interrupted


def compile_to(out, model_dir: Path, *extra):
    return cli("compile", f"{model_dir / 'model.py'}:small", "--weights", model_dir / "checkpoint.pt",
               "--inputs", model_dir / "inputs.npz", "-o", out, *extra)


def test_unrelated_non_empty_directory_is_refused_and_untouched(tmp_path, digits_copy):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work\n")
    before = snapshot(tmp_path)
    result = compile_to(mine, digits_copy)
    assert_clean_failure(result, 2, "did not write", str(mine), "remedy")
    assert snapshot(tmp_path) == before


def test_dot_inside_the_model_folder_is_refused(digits_copy, monkeypatch):
    monkeypatch.chdir(digits_copy)
    before = snapshot(digits_copy)
    result = compile_to(".", digits_copy)
    assert_clean_failure(result, 2, "the current directory")
    assert snapshot(digits_copy) == before


def test_empty_path_is_refused(tmp_path, digits_copy, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    result = compile_to("", digits_copy)
    assert_clean_failure(result, 2, "empty path")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("which", ["model", "weights", "inputs"])
def test_an_ancestor_of_what_the_compile_reads_is_refused(tmp_path, which):
    # an *empty-looking* target is not enough: the folder holding the read file must never be replaced
    home = tmp_path / "home"
    (home / "data").mkdir(parents=True)
    src = Path(__file__).resolve().parents[2] / "examples" / "digits"
    files = {"model": home / "data" / "model.py", "weights": home / "w.pt", "inputs": home / "x.npz"}
    for key, name in (("model", "model.py"), ("weights", "checkpoint.pt"), ("inputs", "inputs.npz")):
        files[key].write_bytes((src / name).read_bytes())
    guarded = files[which].parent
    before = snapshot(tmp_path)
    result = cli("compile", f"{files['model']}:small", "--weights", files["weights"], "--inputs", files["inputs"],
                 "-o", guarded)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert snapshot(tmp_path) == before


def test_symlinked_outdir_is_refused(tmp_path, digits_copy):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    result = compile_to(tmp_path / "link", digits_copy)
    assert_clean_failure(result, 2, "symbolic link")


def test_empty_directory_is_accepted_and_marked(tmp_path, digits_copy):
    out = tmp_path / "empty"
    out.mkdir()
    result = compile_to(out, digits_copy)
    assert result.exit_code == 0, result.output
    assert owned.is_owned(out) and (out / "source" / "model.py").is_file() and (out / "source" / "weights.pt").is_file()


def test_recompiling_over_spikecs_own_outdir_replaces_it(tmp_path, digits_copy):
    out = tmp_path / "out"
    assert compile_to(out, digits_copy).exit_code == 0
    (out / "stale-file").write_text("from the first compile's time\n")
    result = compile_to(out, digits_copy, "--passes", "none")
    assert result.exit_code == 0, result.output
    assert not (out / "stale-file").exists()
    assert json.loads((out / "report.json").read_text())["passes"] == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["digits", "out"]  # no temp or backup siblings


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
def test_publish_swaps_complete_trees(tmp_path, monkeypatch, exchange):
    if not exchange:
        monkeypatch.setattr(owned, "_exchange", lambda a, b: False)
    out = tmp_path / "out"
    for version in ("old", "new"):
        tmp = owned.make_temp_dir(out)
        (tmp / "version").write_text(version)
        owned.publish(tmp, out)
        assert (out / "version").read_text() == version and owned.is_owned(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_exchange_is_atomic_here(tmp_path):
    """This machine's file system supports the one-step swap (else publish falls back to two renames)."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "x").write_text("a"), (b / "x").write_text("b")
    assert owned._exchange(a, b)
    assert (a / "x").read_text() == "b" and (b / "x").read_text() == "a"


def test_interrupt_while_writing_leaves_old_outdir_and_no_temp(tmp_path, digits_copy, monkeypatch):
    out = tmp_path / "out"
    assert compile_to(out, digits_copy).exit_code == 0
    before = snapshot(out)
    real = np.savez

    def sigterm_midway(path, **arrays):
        real(path, **arrays)
        raise Interrupted(15)  # what the CLI's SIGTERM handler raises
    monkeypatch.setattr("spikec.app.driver.np.savez", sigterm_midway)
    result = compile_to(out, digits_copy)
    assert_clean_failure(result, 143, "interrupted")
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["digits", "out"]


def test_keyboard_interrupt_exits_130_not_1(tmp_path, digits_copy, monkeypatch):
    def ctrl_c(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr("spikec.app.driver.run", ctrl_c)   # the interpreter run of the IR: every compile makes it
    result = compile_to(tmp_path / "out", digits_copy)
    assert_clean_failure(result, 130, "interrupted")
    assert not (tmp_path / "out").exists()


def _break_frontend_check(monkeypatch):
    """The trace's check against the source reports one spike mismatch: the compile is not equivalent."""
    from spikec.core import checker
    real = checker.compare_with_torch

    def broken(model, graph, inputs, **kw):
        result = real(model, graph, inputs, **kw)
        result.spike_mismatches += 1
        return result
    monkeypatch.setattr("spikec.app.driver.compare_with_torch", broken)


def test_not_equivalent_never_replaces_an_equivalent_outdir(tmp_path, digits_copy, monkeypatch):
    out = tmp_path / "out"
    assert compile_to(out, digits_copy).exit_code == 0
    before = snapshot(out)
    _break_frontend_check(monkeypatch)
    result = compile_to(out, digits_copy)
    assert result.exit_code == 1, result.output
    assert snapshot(out) == before
    beside = tmp_path / "out.not-equivalent"
    assert json.loads((beside / "report.json").read_text())["equivalent"] is False
    assert str(beside) in result.stdout
    result = compile_to(beside, digits_copy)  # and a later failure may replace the failed one
    assert result.exit_code == 1 and not (tmp_path / "out.not-equivalent.not-equivalent").exists()


def test_frontend_failure_exits_1_and_never_runs_the_target(tmp_path, digits_copy, monkeypatch):
    """A trace that fails its own check is 'not equivalent' (1), not a target's unrelated refusal (2)."""
    _break_frontend_check(monkeypatch)
    out = tmp_path / "out"
    result = compile_to(out, digits_copy, "--target", "onnx")
    assert result.exit_code == 1, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["target"]["emitted"] is False and not (out / "model.onnx").exists()


def test_written_artifacts_are_reread_and_checked(tmp_path, digits_copy, monkeypatch):
    """A save that loses precision (float32) is caught by compile itself, not only by a later verify."""
    import spikec.core.serialize as ser
    real = ser._savez
    monkeypatch.setattr(ser, "_savez", lambda path, arrays: real(path, {k: (v.astype(np.float32)
                        if v.dtype == np.float64 else v) for k, v in arrays.items()}))
    out = tmp_path / "out"
    result = compile_to(out, digits_copy)
    assert result.exit_code == 2 and "does not read back" in result.stderr, result.output
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["digits"]
