"""--nir-version and --lava-reset (spikec.compile's nir_version= / lava_reset=) reach their targets: the NIR file is
written in the version asked for, and the Lava target deploys the approximate zero-reset variant, measured and
never called equivalent; an option of no such value is refused before any work."""
import h5py
import numpy as np
import pytest
import torch
from torch import nn

import spikec
from spikec.ir.errors import BadInput
from spikec.targets.lava import lava_available

from app_helpers import cli

snn = pytest.importorskip("snntorch")
X = (np.random.default_rng(0).random((6, 3, 8)) < 0.5).astype(np.float64)


class LeakyMLP(nn.Module):
    """snnTorch's first network: Linear + Leaky (default subtract reset), own time loop."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.lif1 = nn.Linear(8, 6), snn.Leaky(beta=0.875, threshold=0.5)
        self.fc2, self.lif2 = nn.Linear(6, 3), snn.Leaky(beta=0.875, threshold=0.5, reset_mechanism="zero")
        with torch.no_grad():
            self.fc1.weight.mul_(2.0)
            self.fc2.weight.mul_(2.0)

    def forward(self, x):
        m1, m2, out = self.lif1.init_leaky(), self.lif2.init_leaky(), []
        for t in range(x.shape[0]):
            s1, m1 = self.lif1(self.fc1(x[t]), m1)
            s2, m2 = self.lif2(self.fc2(s1), m2)
            out.append(s2)
        return torch.stack(out)


def test_nir_version_1_0_7_is_written_and_recorded(tmp_path):
    c = spikec.compile(LeakyMLP(), X, targets="nir", nir_version="1.0.7")
    assert c.report["options"]["nir_version"] == "1.0.7" and c.report["targets"]["nir"]["exact"]
    out = c.save(tmp_path / "out")
    with h5py.File(out / "model.nir", "r") as f:
        version = f["version"][()]
    assert (version.decode() if isinstance(version, bytes) else str(version)) == "1.0.7"
    assert spikec.verify(out)["target_nir"]["equivalent"]
    default = spikec.compile(LeakyMLP(), X, targets="nir")
    assert "nir_version" not in default.report["options"]     # the report reads as before when not given


@pytest.mark.parametrize("kw", [dict(nir_version="1.0.9"), dict(lava_reset="subtract-ish")])
def test_an_unknown_value_is_refused_by_name(kw):
    with pytest.raises(BadInput, match=next(iter(kw))):
        spikec.compile(LeakyMLP(), X, targets="none", **kw)


def test_the_cli_flags_are_parsed_and_checked(tmp_path):
    done = cli("compile", "x.py:f", "-o", tmp_path / "o", "--nir-version", "2.0")
    assert done.exit_code == 2 and "--nir-version" in done.output
    done = cli("compile", "x.py:f", "-o", tmp_path / "o", "--lava-reset", "soft")
    assert done.exit_code == 2 and "--lava-reset" in done.output


@pytest.mark.skipif(lava_available() is not None, reason=f"Lava does not import here: {lava_available()}")
def test_lava_reset_zero_deploys_the_measured_chip_ready_variant():
    c = spikec.compile(LeakyMLP(), X, targets="lava", lava_reset="zero")
    lava = c.report["targets"]["lava"]
    variant = lava["approximate_variant"]
    assert variant and not c.equivalent and lava["bit_exact"] is True   # exact against its own integer reference
    assert "lif1" in str(variant)
    exact = spikec.compile(LeakyMLP(), X, targets="lava")
    assert "approximate_variant" not in exact.report["targets"]["lava"]
