"""A forward that fixes its batch size (snnTorch's tutorial 6: ``self.fc1(spk2.view(batch_size, -1))``) runs on the
given inputs only: the compile checks it there, appends no probe samples and says why, instead of failing."""
import numpy as np
import pytest
import torch
from torch import nn

import spikec

BATCH = 3


class FixedBatch(nn.Module):
    """The tutorial's class net, small: its own loop over ``x.shape[0]`` steps, a view to the module's batch size."""

    def __init__(self):
        super().__init__()
        snn = pytest.importorskip("snntorch")
        self.conv1, self.lif1 = nn.Conv2d(1, 3, 3), snn.Leaky(beta=0.7)
        self.fc1, self.lif2 = nn.Linear(3 * 4 * 4, 4), snn.Leaky(beta=0.7)

    def forward(self, x):
        mem1, mem2 = self.lif1.init_leaky(), self.lif2.init_leaky()
        out = []
        for step in range(x.shape[0]):
            spk1, mem1 = self.lif1(torch.nn.functional.max_pool2d(self.conv1(x[step]), 2), mem1)
            spk2, mem2 = self.lif2(self.fc1(spk1.view(BATCH, -1)), mem2)
            out.append(spk2)
        return torch.stack(out)


def _x():
    return (np.random.default_rng(0).random((5, BATCH, 1, 10, 10)) < 0.5).astype(np.float32)


def test_a_fixed_batch_forward_compiles_on_the_given_batch_without_probes():
    torch.manual_seed(0)
    c = spikec.compile(FixedBatch(), _x(), targets=(), probes=True)
    assert c.equivalent
    inp = c.report["input"]
    assert inp["probes"] == 0 and inp["batch"] == BATCH
    assert "no probe samples appended" in inp["probes_skipped"] and "mat1 and mat2" in inp["probes_skipped"]
    from spikec.app.summary import summary_text
    assert "no probe samples appended" in summary_text(c.report)


def test_a_forward_that_takes_any_batch_still_gets_its_probes():
    from spikec.app.probes import with_probes
    torch.manual_seed(0)
    m = nn.Sequential(nn.Flatten(2), nn.Linear(100, 4))   # [T, B, 1, 10, 10] -> [T, B, 4], any B

    class Multi(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x)

    c = spikec.compile(Multi(), _x(), targets=(), probes=True)
    added = with_probes(_x().astype(np.float64), "binary", None)[1]
    assert c.report["input"]["probes"] == added > 0 and "probes_skipped" not in c.report["input"]
