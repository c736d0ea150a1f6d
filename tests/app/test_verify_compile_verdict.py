"""An OUTDIR whose compile was not equivalent (a target refused) does not verify into a pass: ``spikec verify``
re-runs what the OUTDIR holds, prints the compile's own verdict as a failed check naming the refused target, and
exits 1 (the unseen-network user: a CI gate on verify passed 7 not-equivalent OUTDIRs)."""
import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from torch import nn

import spikec
from spikec.app.cli import main

snntorch = pytest.importorskip("snntorch")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 3)
        self.lif = snntorch.Leaky(beta=0.9, init_hidden=True)

    def forward(self, x):
        return self.lif(self.fc(x)).amax(-1, keepdim=True)   # real-valued max: NIR refuses it by name


def _saved(tmp_path, targets):
    x = (np.random.default_rng(0).random((5, 2, 4)) < 0.5).astype(np.float64)
    c = spikec.compile(Net().eval(), x, stepping="step", targets=targets)
    return c, c.save(tmp_path / "out")


def test_a_refused_target_makes_verify_fail_naming_it(tmp_path):
    c, out = _saved(tmp_path, ("onnx", "nir"))
    assert c.equivalent is False and c.targets["nir"]["refused"]
    results = spikec.verify(out)
    assert results["target_onnx"]["equivalent"] is True            # what OUTDIR holds still checks out
    verdict = results["compile_verdict"]
    assert verdict["equivalent"] is False and "target nir refused" in verdict["error"]
    r = CliRunner().invoke(main, ["verify", str(out)])
    assert r.exit_code == 1 and "compile_verdict" in r.output and "target nir refused" in r.output


def test_an_equivalent_compile_has_no_verdict_check(tmp_path):
    c, out = _saved(tmp_path, ("onnx",))
    assert c.equivalent
    assert "compile_verdict" not in spikec.verify(out)
    assert CliRunner().invoke(main, ["verify", str(out)]).exit_code == 0


def test_report_json_can_lower_the_verdict_never_raise_it(tmp_path):
    """A report.json edited to say equivalent false fails verify; the untrusted file cannot make a pass of it."""
    _, out = _saved(tmp_path, ("onnx",))
    report = json.loads((out / "report.json").read_text())
    report["equivalent"] = False
    (out / "report.json").write_text(json.dumps(report))
    assert spikec.verify(out)["compile_verdict"]["equivalent"] is False
