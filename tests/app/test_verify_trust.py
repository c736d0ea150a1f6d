"""``spikec verify`` trusts nothing in OUTDIR: report.json is data; code and weights come from OUTDIR/source, and
that code runs only with --run-source."""
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from app_helpers import HERE, assert_clean_failure, cli, snapshot


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """A two-output model compiled once for the ONNX target; tests work on copies."""
    root = tmp_path_factory.mktemp("verify")
    model_dir = root / "src"
    model_dir.mkdir()
    shutil.copy(HERE / "models.py", model_dir / "models.py")
    out = root / "out"
    result = cli("compile", f"{model_dir / 'models.py'}:two_outputs", "--target", "onnx", "-o", out)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture
def outdir(compiled, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(compiled, out)
    return out


def _edit_report(out: Path, **changes):
    report = json.loads((out / "report.json").read_text())
    report.update(changes)
    (out / "report.json").write_text(json.dumps(report))


class Boom:
    """Unpickling this writes a file: proof that a pickle ran."""

    def __init__(self, flag):
        self.flag = flag

    def __reduce__(self):
        return (Path.write_text, (Path(self.flag), "pickle ran\n"))


def test_verify_passes_and_checks_every_output(outdir):
    result = cli("verify", outdir)
    assert result.exit_code == 0, result.output
    with np.load(outdir / "io.npz") as z:
        assert {"output", "output1"} <= set(z.files)
    assert "io_outputs" in result.stdout and "target_onnx" in result.stdout


def test_a_tampered_second_output_fails_and_names_the_mismatch(outdir):
    with np.load(outdir / "io.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["output1"][2, 1, 0] += 0.5
    np.savez(outdir / "io.npz", **arrays)
    result = cli("verify", outdir)
    assert result.exit_code == 1, result.output
    assert "first mismatch: node 'fc2'" in result.stdout and "step 2 index (1, 0)" in result.stdout


def test_report_naming_a_malicious_pickle_is_never_unpickled(outdir, tmp_path):
    flag = tmp_path / "pwned"
    torch.save(Boom(str(flag)), tmp_path / "evil.pt")
    options = json.loads((outdir / "report.json").read_text())["options"]
    _edit_report(outdir, weights=str(tmp_path / "evil.pt"),
                 options={**options, "weights": str(tmp_path / "evil.pt"), "trust_pickle": True})
    result = cli("verify", outdir, "--run-source")
    assert not flag.exists()
    assert result.exit_code == 0, result.output  # the report's paths are never read: OUTDIR's copy is used


def test_a_malicious_pickle_in_outdir_exits_2_without_running(outdir, tmp_path):
    flag = tmp_path / "pwned"
    torch.save(Boom(str(flag)), outdir / "source" / "weights.pt")
    _edit_report(outdir, options={**json.loads((outdir / "report.json").read_text())["options"],
                                  "trust_pickle": True})
    result = cli("verify", outdir, "--run-source")
    assert_clean_failure(result, 2, "weights.pt")
    assert not flag.exists()


def test_report_naming_another_model_file_never_imports_it(outdir, tmp_path):
    flag = tmp_path / "imported"
    evil = tmp_path / "evil.py"
    evil.write_text(f"from pathlib import Path\nPath({str(flag)!r}).write_text('ran')\ndef two_outputs():\n    pass\n")
    _edit_report(outdir, model=f"{evil}:two_outputs",
                 options={**json.loads((outdir / "report.json").read_text())["options"], "model": f"{evil}:two_outputs"},
                 provenance={**json.loads((outdir / "report.json").read_text())["provenance"],
                             "factory": "two_outputs", "model": f"{evil}:two_outputs"})
    result = cli("verify", outdir, "--run-source")
    assert result.exit_code == 0, result.output
    assert not flag.exists()


def test_report_cannot_switch_a_target_check_off(outdir):
    _edit_report(outdir, target=None, checks=[])
    data = (outdir / "model.onnx").read_bytes()
    (outdir / "model.onnx").write_bytes(data[: len(data) // 2])  # a truncated artifact
    result = cli("verify", outdir)
    assert result.exit_code == 1, result.output
    assert "target_onnx" in result.stdout and "FAILED" in result.stdout


def test_a_claimed_target_whose_artifact_is_gone_fails(outdir):
    (outdir / "model.onnx").unlink()
    result = cli("verify", outdir)
    assert result.exit_code == 1 and "model.onnx is missing" in result.stdout, result.output


def test_a_factory_name_that_is_not_an_identifier_is_refused(outdir):
    _edit_report(outdir, provenance={"factory": "__import__('os').system('true')"})
    result = cli("verify", outdir, "--run-source")
    assert_clean_failure(result, 2, "no valid factory")


def test_a_report_option_of_the_wrong_type_is_refused(outdir):
    _edit_report(outdir, options={**json.loads((outdir / "report.json").read_text())["options"], "seed": "0; rm"})
    assert_clean_failure(cli("verify", outdir), 2, "option 'seed'")


def test_verifies_after_a_move_and_with_its_sources_gone(outdir, tmp_path, monkeypatch):
    moved = tmp_path / "elsewhere" / "moved"
    moved.parent.mkdir()
    shutil.move(outdir, moved)
    src = Path(json.loads((moved / "report.json").read_text())["provenance"]["model_file"]["path"])
    assert src.is_file()
    monkeypatch.chdir(tmp_path / "elsewhere")
    result = cli("verify", "moved", "--run-source")
    assert result.exit_code == 0, result.output


def test_a_missing_source_copy_says_so_and_verify_model_overrides(outdir):
    (outdir / "source" / "models.py").unlink()
    result = cli("verify", outdir, "--run-source")
    assert_clean_failure(result, 2, "holds no copy of the model source (source/models.py)", "--model")
    weights = outdir / "source" / "weights.pt"
    result = cli("verify", outdir, "--model", f"{HERE / 'models.py'}:two_outputs", "--weights", weights)
    assert result.exit_code == 0, result.output


def test_verify_trust_pickle_is_its_own_flag(outdir, tmp_path):
    """A pickled checkpoint given to verify is refused unless verify itself is told --trust-pickle."""
    from importlib.util import module_from_spec, spec_from_file_location
    spec = spec_from_file_location("spikec_app_test_models", HERE / "models.py")
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    whole = tmp_path / "whole.pt"
    torch.save(module.two_outputs().state_dict(), whole)
    model = f"{HERE / 'models.py'}:two_outputs"
    assert cli("verify", outdir, "--model", model, "--weights", whole).exit_code == 0
    flag = tmp_path / "pwned"
    torch.save(Boom(str(flag)), tmp_path / "evil.pt")
    result = cli("verify", outdir, "--model", model, "--weights", tmp_path / "evil.pt")
    assert_clean_failure(result, 2, "--trust-pickle")
    assert not flag.exists()


def test_verify_does_not_change_outdir(outdir):
    before = snapshot(outdir)
    assert cli("verify", outdir).exit_code == 0
    assert cli("verify", outdir, "--run-source").exit_code == 0
    assert snapshot(outdir) == before


def test_a_model_importing_its_siblings_verifies_from_outdir_alone(tmp_path, monkeypatch):
    """The sibling modules the model file imports are copied too, each under its own name (the entry keeps its
    name, net.py), so verify --run-source needs nothing outside OUTDIR."""
    src = tmp_path / "project"
    (src / "helpers").mkdir(parents=True)
    (src / "helpers" / "__init__.py").write_text("")
    (src / "helpers" / "sizes.py").write_text("FEATURES = 12\n")
    (src / "layers.py").write_text("from torch import nn\n\ndef head(n):\n    return nn.Linear(n, 3)\n")
    (src / "net.py").write_text(
        "import torch\nfrom torch import nn\nimport spikec.nn as snn\nfrom layers import head\n"
        "from helpers.sizes import FEATURES\n\n"
        "def build():\n    torch.manual_seed(0)\n"
        "    m = nn.Sequential(nn.Linear(FEATURES, 8), snn.LIF(beta=0.5, threshold=0.5), head(8))\n"
        "    m.input_shape, m.steps = (FEATURES,), 3\n    return m\n")
    out = tmp_path / "out"
    result = cli("compile", f"{src / 'net.py'}:build", "-o", out)
    assert result.exit_code == 0, result.output
    assert {"net.py", "layers.py", "helpers/sizes.py"} <= {str(p.relative_to(out / "source"))
                                                             for p in (out / "source").rglob("*.py")}
    shutil.rmtree(src)
    for name in ("layers", "helpers", "helpers.sizes"):  # as in a new process: imported again, from OUTDIR
        monkeypatch.delitem(sys.modules, name)
    result = cli("verify", out, "--run-source")
    assert result.exit_code == 0, result.output
    assert "source_vs_deployed   ok" in result.output and "passes_replayed      ok" in result.output
