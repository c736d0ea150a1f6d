"""Several targets in one compile: --target lava,nir / all, side by side in OUTDIR, refusals (two Lava compiles)."""
import json

import numpy as np
import pytest

from spikec.app.multitarget import plan
from spikec.ir.errors import BadInput
from spikec.targets import KNOWN
from app_helpers import HERE, cli

NET = f"{HERE / 'models.py'}:small_conv_lif"     # every target maps it
SCALED = f"{HERE / 'models.py'}:scaled"          # a scale output: NIR and ONNX express it, Lava refuses it


def report(out):
    return json.loads((out / "report.json").read_text())


def test_all_targets_in_one_compile_side_by_side_and_verified(tmp_path):
    out = tmp_path / "out"
    result = cli("compile", NET, "--target", "all", "--batch", "2", "-o", out)
    assert result.exit_code == 0, result.output
    r = report(out)
    assert list(r["targets"]) == list(KNOWN) and r["target"] is None and r["equivalent"]
    assert r["targets"]["lava"]["bit_exact"] and r["targets"]["nir"]["exact"] and r["targets"]["onnx"]["spike_exact"]
    assert r["options"]["target"] == "all"
    assert (out / "lava").is_dir() and (out / "model.nir").is_file() and (out / "model.onnx").is_file()
    assert "  targets    lava: " in result.output and "\n             nir: " in result.output
    result = cli("verify", out, "--run-source")
    assert result.exit_code == 0, result.output
    for check in ("target_lava", "target_nir", "target_onnx", "passes_replayed"):
        assert f"\n{check}" in "\n" + result.output


def test_a_list_of_targets(tmp_path):
    out = tmp_path / "out"
    result = cli("compile", NET, "--target", "lava,nir", "--batch", "2", "-o", out)
    assert result.exit_code == 0, result.output
    r = report(out)
    assert list(r["targets"]) == ["lava", "nir"] and r["equivalent"] and r["targets"]["lava"]["bit_exact"]
    assert (out / "lava").is_dir() and (out / "model.nir").is_file() and not (out / "model.onnx").exists()


def test_a_refusal_under_all_is_reported_not_a_failure(tmp_path):
    out = tmp_path / "out"
    result = cli("compile", SCALED, "--target", "all", "-o", out)
    assert result.exit_code == 0, result.output
    r = report(out)
    lava = r["targets"]["lava"]
    assert lava["refused"] is True and lava["emitted"] is False and "cannot map node 'mul' (scale)" in lava["reason"]
    assert r["targets"]["nir"]["exact"] and r["targets"]["onnx"]["spike_exact"] and r["equivalent"]
    assert "lava: refused: " in result.output and not (out / "lava").exists()
    result = cli("verify", out)   # no Lava artifact, none claimed: the other targets are re-checked
    assert result.exit_code == 0 and "target_onnx" in result.output and "target_lava" not in result.output


@pytest.mark.parametrize("targets", ["lava", "lava,onnx"])
def test_a_refusal_of_a_target_asked_by_name_exits_1(tmp_path, targets):
    out = tmp_path / "out"
    result = cli("compile", SCALED, "--target", targets, "-o", out)
    assert result.exit_code == 1, result.output
    r = report(out)
    assert r["targets"]["lava"]["refused"] and not r["equivalent"] and "equivalent false" in result.output
    assert "equivalent false (target lava refused: the lines above give the reason and the remedy)" in result.output
    assert "a host value as a graph output is not recorded" in r["targets"]["lava"]["reason"]
    if targets == "lava":
        assert r["target"] == r["targets"]["lava"]          # one target: `target` as before several
    else:
        assert r["targets"]["onnx"]["spike_exact"]


def test_verify_fails_a_claimed_target_whose_artifact_is_missing(tmp_path):
    out = tmp_path / "out"
    assert cli("compile", SCALED, "--target", "nir,onnx", "-o", out).exit_code == 0
    (out / "model.onnx").unlink()
    result = cli("verify", out)
    assert result.exit_code == 1 and "report.json records target 'onnx' but model.onnx is missing" in result.output
    assert "target_nir" in result.output


def test_a_coding_without_a_lowering_is_refused_under_all(tmp_path):
    out = tmp_path / "out"
    result = cli("compile", f"{HERE / 'models.py'}:relu_mlp", "--coding", "ttfs", "--target", "all", "-o", out)
    assert result.exit_code == 0, result.output
    r = report(out)
    assert r["targets"]["nir"]["refused"] and "no lowering for a TTFS graph" in r["targets"]["nir"]["reason"]
    assert r["targets"]["lava"]["bit_exact"] is True and r["targets"]["lava"]["coding"] == "ttfs"   # TTFS on a grid
    assert r["targets"]["onnx"]["name"] == "onnx" and r["equivalent"]


def test_target_values():
    assert plan("none").names == () and plan(()).names == ()
    assert plan("all") == plan("all") and plan("all").names == KNOWN and not plan("all").named
    assert plan(["nir", "onnx"]).names == ("nir", "onnx") and plan("nir,onnx").named
    assert plan("onnx").single == "onnx" and plan("nir,onnx").single is None
    for value, phrase in (("lava,,nir", "target '' is not available (in --target 'lava,,nir')"),
                          ("none,lava", "target 'none' cannot be combined"), ("all,onnx", "'all' cannot be combined"),
                          ("onnx,onnx", "named twice"), ("ONNX", "'ONNX'")):
        with pytest.raises(BadInput) as e:
            plan(value)
        assert phrase in e.value.message() and e.value.remedy


def test_inputs_a_target_cannot_take_are_a_refusal_under_all_and_bad_input_by_name():
    import spikec
    # beyond Lava's 24-bit graded spikes, within float32 (the NIR consumers, which now run this file, compute in
    # float32: at 1e300 they overflow, and NIR is rightly not equivalent)
    x = (np.random.default_rng(0).random((4, 2, 1, 6, 6)) < 0.4) * 1e30
    c = spikec.compile(NET, x, targets="all", probes=False)
    assert c.equivalent and c.targets["lava"]["refused"] and c.targets["lava"]["error"] == "BadInput"
    assert "need 101 bits" in c.targets["lava"]["reason"] and c.targets["onnx"]["spike_exact"]
    with pytest.raises(BadInput, match="need 101 bits"):
        spikec.compile(NET, x, targets=("lava", "onnx"), probes=False)
