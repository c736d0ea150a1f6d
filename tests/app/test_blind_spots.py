"""App-layer checks driven with the input that triggers them (each was a one-line bug no other test saw):
the OUTDIR ancestor rule where no other refusal fires first, an OUTDIR whose report lacks ``equivalent``,
``verify --trust-pickle`` against ``OUTDIR/source/weights.pt``, and the decay warning of a SpikingJelly
ParametricLIFNode whose membrane decay is exactly 0."""
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from app_helpers import HERE, assert_clean_failure, cli, snapshot
from spikec.app import outdir as owned
from spikec.ir.errors import BadInput

MODEL = f"{HERE / 'models.py'}:one_output"


def _compile(out, *extra):
    return cli("compile", MODEL, "--batch", 1, "--steps", 3, "-o", out, *extra)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """One small equivalent compile (no target); tests work on copies."""
    out = tmp_path_factory.mktemp("blind") / "out"
    result = _compile(out)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture
def outdir(compiled, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(compiled, out)
    return out


# -- (d) the ancestor rule, on an OUTDIR spikec owns (so the "did not write" refusal cannot fire first) -----
def test_an_owned_outdir_holding_a_file_the_compile_reads_is_refused(outdir):
    weights = outdir / "source" / "weights.pt"
    assert owned.is_owned(outdir) and weights.is_file()
    with pytest.raises(BadInput, match="is or contains") as e:
        owned.check_outdir(outdir, [str(weights)])
    assert str(weights) in e.value.what
    owned.check_outdir(outdir, [])                       # without the read file it is a valid -o
    owned.check_outdir(outdir, [str(outdir.parent / "elsewhere.pt")])


def test_the_cli_refuses_to_replace_the_outdir_its_weights_are_read_from(outdir, tmp_path):
    """Recompiling with the previous compile's own weights copy, into that same OUTDIR: the copy is read from
    inside the tree the compile would replace."""
    before = snapshot(outdir)
    result = _compile(outdir, "--weights", outdir / "source" / "weights.pt")
    assert_clean_failure(result, 2, "is or contains", "weights.pt")
    assert snapshot(outdir) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]   # no temp tree left beside it


def test_an_owned_outdir_that_holds_the_current_directory_is_refused(outdir, monkeypatch):
    monkeypatch.chdir(outdir / "source")
    with pytest.raises(BadInput, match="the current directory"):
        owned.check_outdir(outdir)
    with pytest.raises(BadInput, match="the current directory"):
        owned.check_outdir(os.path.relpath(outdir, outdir / "source"))   # "..": the same directory, relative


def test_a_read_file_reached_through_a_symbolic_link_is_still_inside(outdir, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(outdir, target_is_directory=True)
    with pytest.raises(BadInput, match="is or contains"):
        owned.check_outdir(outdir, [str(link / "source" / "weights.pt")])


def test_a_file_or_a_nul_byte_is_no_outdir(tmp_path):
    f = tmp_path / "results.txt"
    f.write_text("mine\n")
    with pytest.raises(BadInput, match="exists and is not a directory"):
        owned.check_outdir(f)
    with pytest.raises(BadInput, match="NUL byte"):
        owned.check_outdir(str(tmp_path / "a\0b"))
    assert f.read_text() == "mine\n"


def test_publish_rechecks_that_the_outdir_is_still_spikecs(tmp_path):
    """An OUTDIR that lost its marker while the compile ran (someone put their files there) is not replaced."""
    out = tmp_path / "out"
    tmp = owned.make_temp_dir(out)
    (tmp / "report.json").write_text("{}")
    out.mkdir()
    (out / "thesis.tex").write_text("years of work\n")
    with pytest.raises(BadInput, match="changed during the compile"):
        owned.publish(tmp, out)
    assert sorted(p.name for p in out.iterdir()) == ["thesis.tex"] and tmp.is_dir()
    empty = tmp_path / "empty"   # an empty directory may be replaced (it was accepted at the start too)
    empty.mkdir()
    owned.publish(tmp, empty)
    assert owned.is_owned(empty) and (empty / "report.json").is_file()


# -- (e) an OUTDIR whose report lacks ``equivalent`` (or is unreadable) is kept, not overwritten -----------
@pytest.mark.parametrize("report,kept", [
    ({"equivalent": True}, True), ({"equivalent": False}, False), ({"passes": []}, True),   # no key: keep it
    ([1, 2], True), ("{not json", True), (None, True),                                     # unreadable: keep it
])
def test_holds_equivalent_compile_keeps_what_it_cannot_read(tmp_path, report, kept):
    out = tmp_path / "out"
    out.mkdir()
    (out / owned.MARKER).write_text(owned.marker_text())
    if report is not None:
        (out / "report.json").write_text(report if isinstance(report, str) else json.dumps(report))
    assert owned.holds_equivalent_compile(out) is kept
    (out / owned.MARKER).unlink()
    assert owned.holds_equivalent_compile(out) is False   # not spikec's: nothing to keep


def _break_frontend_check(monkeypatch):
    from spikec.core import checker
    real = checker.compare_with_torch

    def broken(model, graph, inputs, **kw):
        result = real(model, graph, inputs, **kw)
        result.spike_mismatches += 1
        return result
    monkeypatch.setattr("spikec.app.driver.compare_with_torch", broken)


def test_a_failed_compile_never_replaces_an_outdir_whose_report_lacks_equivalent(outdir, tmp_path, monkeypatch):
    report = json.loads((outdir / "report.json").read_text())
    del report["equivalent"]
    (outdir / "report.json").write_text(json.dumps(report))
    before = snapshot(outdir)
    _break_frontend_check(monkeypatch)
    result = _compile(outdir)
    assert result.exit_code == 1, result.output
    assert snapshot(outdir) == before
    beside = tmp_path / "out.not-equivalent"
    assert json.loads((beside / "report.json").read_text())["equivalent"] is False


# -- (i) verify --trust-pickle never unpickles OUTDIR's own weights copy ---------------------------------------
def _runs_source():
    """The flag that makes verify run OUTDIR's copy of the model code, where verify asks for one."""
    from spikec.app.cli import main
    return ["--run-source"] if any(p.name == "run_source" for p in main.commands["verify"].params) else []


class Boom:
    def __init__(self, flag):
        self.flag = flag

    def __reduce__(self):
        return (Path.write_text, (Path(self.flag), "pickle ran\n"))


def test_verify_trust_pickle_still_refuses_a_pickle_in_outdir_source(outdir, tmp_path):
    ok = cli("verify", outdir, *_runs_source(), "--trust-pickle")
    assert ok.exit_code == 0, ok.output   # the flag itself breaks nothing
    flag = tmp_path / "pwned"
    torch.save(Boom(str(flag)), outdir / "source" / "weights.pt")
    result = cli("verify", outdir, *_runs_source(), "--trust-pickle")
    assert_clean_failure(result, 2, "weights.pt")
    assert not flag.exists()


def test_verify_trust_pickle_applies_to_verifys_own_weights_only(outdir, tmp_path):
    """--trust-pickle with --weights given: that file may be a pickled module (the user vouched for it)."""
    from importlib.util import module_from_spec, spec_from_file_location
    spec = spec_from_file_location("spikec_blind_spot_models", HERE / "models.py")
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    state = torch.load(outdir / "source" / "weights.pt", weights_only=True)
    net = module.one_output()
    net.load_state_dict(state)
    whole = tmp_path / "whole.pt"
    torch.save(net, whole)   # a pickled module, not a state_dict
    result = cli("verify", outdir, *_runs_source(), "--weights", whole)
    assert_clean_failure(result, 2, "--trust-pickle")
    result = cli("verify", outdir, *_runs_source(), "--weights", whole, "--trust-pickle")
    assert result.exit_code == 0, result.output


# -- (f) the decay warning of a ParametricLIFNode whose decay k = sigmoid(w) is 1 (membrane decay 1 - k = 0) ---
def _plif_graph(w: float):
    sj = pytest.importorskip("spikingjelly.activation_based.neuron")
    from torch import nn

    from spikec.frontend import trace
    torch.manual_seed(0)
    plif = sj.ParametricLIFNode(init_tau=2.0, decay_input=False, v_reset=None, step_mode="m")
    with torch.no_grad():
        plif.w.fill_(w)
    model = nn.Sequential(nn.Linear(5, 3), plif)
    return trace(model, input_shape=(5,), input_kind="real")


@pytest.mark.parametrize("w,flagged", [(50.0, True), (-50.0, False), (0.0, False)])
def test_a_parametric_lif_with_membrane_decay_zero_is_warned(w, flagged):
    from spikec.app.vacuity import warnings_for
    from spikec.core.interpreter import run
    graph = _plif_graph(w)
    (n,) = [n for n in graph.nodes if n.op == "lif_sj"]
    k = float(n.params["decay"])
    assert k == pytest.approx(1 / (1 + np.exp(-w)), rel=1e-12)   # float64 sigmoid
    assert (k == 1.0) == flagged   # at w = 50 exactly 1.0: the membrane keeps 1 - k = 0 of itself
    x = np.random.default_rng(0).random((4, 2, 5))
    ws = [d for d in warnings_for(graph, run(graph, x), x) if d["kind"] == "decay"]
    assert bool(ws) == flagged, ws
    if flagged:
        assert ws[0]["node"] == n.name and "1 - k" in ws[0]["message"]
        assert "is 0: the neuron forgets its membrane every step" in ws[0]["message"]
