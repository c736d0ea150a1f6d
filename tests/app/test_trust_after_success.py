"""After a compile: its exit code and OUTDIR can be trusted.

A target's internal failure is exit 3 and leaves the other targets written; user code cannot end the process
into a false success or verdict (the console entry runs the command in a forked child); paths mean what they
meant when typed; API misuse is a named BadInput.
"""
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

import spikec
from spikec.ir.errors import BadInput, InternalError
from spikec.targets import TARGETS, get_target
from app_helpers import HERE, REPO, assert_clean_failure, cli

MODELS = HERE / "models.py"
ENDING = HERE / "ending_models.py"
ONE = f"{MODELS}:one_output"


def console(*args, cwd=REPO, timeout=180, **popen):
    return subprocess.run([sys.executable, "-m", "spikec.app.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, **popen)


# -- a target's internal failure: exit 3, the other targets still written -----------------------------------------
def _crashing_nir(monkeypatch):
    get_target("nir")

    def crash(graph, x, reference, options):
        for node in graph.nodes:
            if node.op == "lif":
                raise ValueError(f"could not broadcast on purpose ({node.name})")
    monkeypatch.setitem(TARGETS, "nir", crash)


def test_a_target_failing_internally_is_exit_3_and_the_others_are_written(tmp_path, monkeypatch):
    _crashing_nir(monkeypatch)
    out = tmp_path / "out"
    result = cli("compile", ONE, "--target", "nir,onnx", "-o", out)
    assert result.exit_code == 3, result.output
    assert "error: internal error: target nir, node '1', exception ValueError: could not broadcast on purpose" \
        in result.stderr and "compiler bug" in result.stderr and "Traceback" not in result.output
    r = json.loads((out / "report.json").read_text())
    nir = r["targets"]["nir"]
    assert nir["internal"] is True and nir["emitted"] is False and nir["error"] == "ValueError"
    assert nir["node"] == "1" and "compiler bug" in nir["remedy"] and "raise ValueError" in nir["traceback"]
    assert r["targets"]["onnx"]["spike_exact"] is True and (out / "model.onnx").is_file()
    assert not (out / "model.nir").exists() and not r["equivalent"]      # a named target proved nothing
    checks = spikec.verify(out)                                            # nir is not claimed: onnx is re-checked
    assert checks["target_onnx"]["equivalent"] and "target_nir" not in checks


def test_under_all_an_internal_failure_is_exit_3_and_debug_shows_the_traceback(tmp_path, monkeypatch):
    _crashing_nir(monkeypatch)
    out = tmp_path / "out"
    result = cli("--debug", "compile", ONE, "--target", "all", "-o", out)
    assert result.exit_code == 3, result.output
    assert "Traceback" in result.stderr and "target nir" in result.stderr
    r = json.loads((out / "report.json").read_text())
    assert r["targets"]["nir"]["internal"] and r["targets"]["onnx"]["spike_exact"]


def test_the_api_records_the_failure_and_returns_the_other_targets(monkeypatch):
    _crashing_nir(monkeypatch)
    c = spikec.compile(ONE, targets=("nir", "onnx"), probes=False)
    assert set(c.internal_errors) == {"nir"} and "ValueError" in c.internal_errors["nir"]
    assert c.targets["onnx"]["spike_exact"] and not c.equivalent


def test_a_compiler_bug_outside_a_target_is_exit_3_not_bad_input(monkeypatch):
    def broken(*a, **k):
        raise ZeroDivisionError("deep inside")
    monkeypatch.setattr("spikec.app.api.compile_model", broken)
    result = cli("compile", ONE, "-o", "unused-out")
    assert result.exit_code == 3 and "internal error: exception ZeroDivisionError: deep inside" in result.stderr
    assert issubclass(spikec.UnexpectedError, InternalError) and InternalError("x").exit_code == 3


# -- user code cannot fake an outcome --------------------------------------------------------------------------------
@pytest.mark.parametrize("factory", ["os_exit_0", "forward_os_exit_0", "os_exit_3"])
def test_os_exit_in_user_code_is_bad_input_not_an_outcome(tmp_path, factory):
    done = console("compile", f"{ENDING}:{factory}", "-o", tmp_path / "out")
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "the model's code ended the process (exit status" in done.stderr and "factory or forward" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize("factory,phrase", [("custom_base_exception", "raised Custom(from the factory)"),
                                            ("generator_exit", "raised GeneratorExit"),
                                            ("forward_custom_base_exception", "raised Custom(from forward)")])
def test_a_base_exception_from_user_code_is_bad_input(tmp_path, factory, phrase):
    result = cli("compile", f"{ENDING}:{factory}", "-o", tmp_path / "out")
    assert_clean_failure(result, 2, phrase, "ending_models.py", "remedy")
    assert not (tmp_path / "out").exists()


def test_sigint_to_the_parent_is_forwarded_and_a_group_signal_counts_once(tmp_path):
    for factory in ("interrupts_parent", "interrupts_group"):
        done = console("compile", f"{ENDING}:{factory}", "-o", tmp_path / factory, start_new_session=True)
        assert done.returncode == 130, (factory, done.stderr)
        assert "interrupted (SIGINT)" in done.stderr and "Traceback" not in done.stderr
        assert not (tmp_path / factory).exists()


def test_an_interrupt_the_models_code_swallowed_still_exits_143(tmp_path):
    done = console("compile", f"{ENDING}:swallows_sigterm", "-o", tmp_path / "out")
    assert done.returncode == 143, (done.returncode, done.stderr)
    assert "interrupted (signal 15), but the command's code went on" in done.stderr


# -- paths are fixed before user code runs ---------------------------------------------------------------------------
def test_a_relative_outdir_does_not_follow_the_factorys_chdir(tmp_path, monkeypatch):
    typed, elsewhere = tmp_path / "typed", tmp_path / "elsewhere"
    typed.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(typed)
    monkeypatch.setenv("SPIKEC_TEST_CHDIR", str(elsewhere))
    result = cli("compile", f"{ENDING}:chdir_then_build", "-o", "out")
    assert result.exit_code == 0, result.output
    assert (typed / "out" / "report.json").is_file() and not (elsewhere / "out").exists()


def test_the_api_reads_relative_inputs_where_they_were_named(tmp_path, monkeypatch):
    typed, elsewhere = tmp_path / "typed", tmp_path / "elsewhere"
    typed.mkdir()
    elsewhere.mkdir()
    np.savez(typed / "x.npz", input=(np.random.default_rng(0).random((4, 2, 12)) < 0.3).astype(np.float64))
    monkeypatch.chdir(typed)
    monkeypatch.setenv("SPIKEC_TEST_CHDIR", str(elsewhere))
    c = spikec.compile(f"{ENDING}:chdir_then_build", "x.npz", targets="none", probes=False)
    assert c.equivalent and c.report["input"]["source"] == f"file {typed / 'x.npz'}"


def test_an_over_long_outdir_name_is_refused_before_the_compile(tmp_path):
    for n in (256, 240):  # over NAME_MAX; and too long for the temporary sibling written first
        # the factory raises a BaseException: reaching it would print that instead
        result = cli("compile", f"{ENDING}:custom_base_exception", "-o", tmp_path / ("x" * n))
        assert_clean_failure(result, 2, "OUTDIR (-o): the name", "choose a shorter OUTDIR name")
        assert "Custom" not in result.stderr
    result = cli("compile", f"{ENDING}:custom_base_exception", "-o", tmp_path / ("x" * 190))  # fits: compiled
    assert_clean_failure(result, 2, "raised Custom(from the factory)")
    c = spikec.compile(ONE, targets="none", probes=False)
    with pytest.raises(BadInput, match="File name too long"):
        c.save(tmp_path / ("y" * 240))
    assert not any(p.name.startswith((".y", "y")) for p in tmp_path.iterdir())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="closes the shell's stdout")
def test_inspect_with_stdout_closed_is_a_clean_failure():
    done = subprocess.run(f"{sys.executable} -m spikec.app.cli inspect {ONE} >&-", shell=True, capture_output=False,
                          stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "stdout is closed" in done.stderr


# -- API misuse: a named BadInput with a remedy --------------------------------------------------------------------
@pytest.mark.parametrize("call,phrase", [
    (lambda: spikec.compile(ONE, steps=-1), "steps=-1 is not an integer >= 1"),
    (lambda: spikec.compile(ONE, steps=2.5), "steps=2.5 is not an integer >= 1"),
    (lambda: spikec.compile(ONE, steps=True), "steps=True is not an integer >= 1"),
    (lambda: spikec.compile(ONE, batch="4"), "batch='4' is not an integer >= 1"),
    (lambda: spikec.compile(ONE, passes=123), "passes=123 is not pass names"),
    (lambda: spikec.compile(ONE, max_input_bytes="abc"), "max_input_bytes='abc' is not an integer >= 1"),
    (lambda: spikec.compile(ONE, stepping="sideways"), "stepping='sideways' is not one of"),
    (lambda: spikec.compile(ONE, bogus=1), "unexpected keyword argument 'bogus'"),
    (lambda: spikec.compile(torch.nn.Linear(3, 3, device="meta")), "on the meta device"),
    (lambda: spikec.load(None), "not a path"),
    (lambda: spikec.verify(REPO, targets="bogus"), "targets='bogus' is not a set of targets"),
    (lambda: spikec.verify(REPO, targets="onnx"), "applies to a data-set run"),
    (lambda: spikec.verify(REPO, workers=1.5), "workers=1.5"),
])
def test_api_misuse_is_a_named_bad_input(call, phrase):
    with pytest.raises(BadInput) as e:
        call()
    assert phrase in e.value.message() and e.value.remedy, e.value.message()
    assert not isinstance(e.value, spikec.UnexpectedError)


def test_an_unknown_keyword_lists_the_accepted_ones_and_save_takes_only_a_path(tmp_path):
    with pytest.raises(BadInput) as e:
        spikec.compile(ONE, bogus=1)
    assert "steps" in e.value.remedy and "max_input_bytes" in e.value.remedy
    c = spikec.compile(ONE, targets="none", passes=["fold_batchnorm"], probes=False)   # a sequence of pass names
    assert [p["name"] for p in c.report["passes"]] == ["fold_batchnorm"]
    with pytest.raises(BadInput, match="save\\(outdir\\) is a int"):
        c.save(123)
    assert spikec.verify(c.save(tmp_path / "out"), targets="default") is not None


# -- the API is re-entrant -------------------------------------------------------------------------------------------
def test_many_misuse_calls_leave_the_next_compile_working():
    x = (np.random.default_rng(0).random((4, 2, 12)) < 0.3).astype(np.float64)
    for i in range(120):
        with pytest.raises(BadInput):
            spikec.compile(ONE, x, **[dict(steps=2.5), dict(batch="4"), dict(passes=123)][i % 3])
    assert spikec.compile(ONE, x, targets=("onnx",), probes=False).equivalent


def test_a_real_target_crash_leaves_the_other_targets_written(tmp_path):
    """SpikingJelly ``layer.Conv1d`` on Lava crashed inside the Lava run and took ONNX down with it. Whatever
    Lava does with it now, ONNX is written and exact, and a Lava crash is exit 3 naming lava, never exit 2."""
    out = tmp_path / "out"
    result = cli("compile", f"{HERE / 'target_bug_models.py'}:conv1d_net", "--target", "lava,onnx", "--batch", "2",
                 "-o", out)
    r = json.loads((out / "report.json").read_text())
    assert r["targets"]["onnx"]["spike_exact"] is True and (out / "model.onnx").is_file()
    if r["targets"]["lava"].get("internal"):
        assert result.exit_code == 3 and "internal error: target lava" in result.stderr, result.output
        assert not (out / "lava").exists()
    else:
        assert result.exit_code == 0 and r["targets"]["lava"]["bit_exact"], result.output


# -- the terminal says everything ------------------------------------------------------------------------------------
def test_debug_after_the_command_and_every_form_of_an_option(tmp_path, monkeypatch):
    _crashing_nir(monkeypatch)
    result = cli("compile", ONE, "--debug", "--target", "nir", "-o", tmp_path / "out")
    assert result.exit_code == 3 and "Traceback" in result.stderr and "internal error: target nir" in result.stderr
    result = cli("compile", ONE, "--target", "lavva", "-o", tmp_path / "other")
    assert_clean_failure(result, 2, "'lavva'", "none | all | lava | nir | onnx | a comma-separated list")


def test_a_refused_target_prints_its_reason_and_remedy_in_full(tmp_path):
    result = cli("compile", f"{MODELS}:scaled", "--target", "nir,onnx,lava", "-o", tmp_path / "out")
    assert result.exit_code == 1, result.output
    note = result.stderr[result.stderr.index("note: target lava refused:"):]
    assert "a host value as a graph output is not recorded" in note and "\n  remedy: " in note


def test_a_sparse_or_meta_checkpoint_tensor_is_refused_by_name(tmp_path):
    """A checkpoint tensor with no dense values (sparse, or on the meta device) is a CheckpointError naming it."""
    from spikec.app.loader import load_weights
    from spikec.ir.errors import CheckpointError
    model = torch.nn.Linear(3, 2)
    for bad, word in ((model.weight.detach().to_sparse(), "sparse"), (torch.empty(2, 3, device="meta"), "meta")):
        path = tmp_path / f"{word}.pt"
        torch.save({"weight": bad, "bias": model.bias.detach()}, path)
        with pytest.raises(CheckpointError, match=f"'weight' is .*{word}"):
            load_weights(torch.nn.Linear(3, 2), str(path))


def test_a_compile_too_large_for_memory_is_refused_before_it_runs(monkeypatch):
    """The input limit bounds the input; the recorded runs of a deep network need many times more. A compile
    whose estimate exceeds the memory available is refused up front, naming the sizes and how many samples fit."""
    import spikec
    from spikec.app import loader
    from spikec.ir.errors import BadInput
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64))
    x = np.zeros((4, 8, 64), np.float32)
    monkeypatch.setattr(loader, "available_memory", lambda: 100_000)   # 100 kB: about 3 nodes x 4 x 8 x 64 x 8 x 2
    with pytest.raises(BadInput, match=r"(?s)would hold about .* MB of recorded values .* MB is available.*samples \(about \d+ fit\)"):
        spikec.compile(model, x, targets=(), probes=False)
    monkeypatch.setattr(loader, "available_memory", lambda: 1 << 40)
    assert spikec.compile(model, x, targets=(), probes=False).equivalent


def test_any_compile_sweeps_what_a_killed_run_left(tmp_path, monkeypatch):
    """A run killed with every process leaves tagged segments and directories; the next compile (any target, not
    only Lava) removes those of dead runs and keeps a live run's."""
    import os
    import tempfile
    import spikec
    from spikec.targets.lava import leftovers
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = "spikec4194300x1a2bs77"   # a pid above the kernel's limit: no such process
    live = f"spikec{os.getpid()}x1a2bs{leftovers.start_time(os.getpid())}"
    made = [leftovers.SHM / f"psm_{dead}j1_0", tmp_path / f"spikec-lava-{dead}-w", tmp_path / f"spikec-lava-{live}-w"]
    for p in made:
        p.mkdir() if p.parent == tmp_path else p.write_bytes(b"\0")
    try:
        model = torch.nn.Sequential(torch.nn.Linear(4, 3))
        assert spikec.compile(model, np.zeros((2, 1, 4), np.float32), targets=(), probes=False).equivalent
        assert not made[0].exists() and not made[1].exists() and made[2].exists()
    finally:
        made[0].unlink(missing_ok=True)
