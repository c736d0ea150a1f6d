"""``spikec verify`` re-checks model.nir against every output io.npz records, not only the first."""
import numpy as np
import pytest
import torch
from torch import nn

import spikec

snn = pytest.importorskip("snntorch")


class TwoOutputs(nn.Module):
    """snnTorch tutorial 5's shape: a Leaky layer stepped in forward's own loop, its spikes and membrane returned."""

    def __init__(self):
        super().__init__()
        self.fc1, self.lif1 = nn.Linear(12, 8), snn.Leaky(beta=0.9)
        self.fc2, self.lif2 = nn.Linear(8, 3), snn.Leaky(beta=0.9)

    def forward(self, x):
        mem1, mem2, spikes, mems = self.lif1.init_leaky(), self.lif2.init_leaky(), [], []
        for _ in range(6):
            spk1, mem1 = self.lif1(self.fc1(x), mem1)
            spk2, mem2 = self.lif2(self.fc2(spk1), mem2)
            spikes.append(spk2)
            mems.append(mem2)
        return torch.stack(spikes), torch.stack(mems)


def test_a_model_with_two_outputs_verifies_its_nir_file(tmp_path):
    torch.manual_seed(0)
    model = TwoOutputs()
    x = (np.random.default_rng(0).random((2, 12)) * 2).astype(np.float32)
    c = spikec.compile(model, x, stepping="loop", targets=("nir",))
    assert c.targets["nir"].get("exact"), c.targets["nir"]
    out = c.save(tmp_path / "out")
    results = spikec.verify(out, model=model)
    assert results["target_nir"]["equivalent"], results["target_nir"]
    assert results["target_nir"]["values_compared"] > 0
