"""A Conv1d network with a 1-D average pool between its layers (``nn.AvgPool1d`` on a ``(C, L)`` step: how the IR holds
it, a ``(1, k)`` avgpool2d between two reshapes) in NIR: the pool is a Conv1d of weight ``1/k``
(``structure.pool1d``), exact for a power-of-two ``k``; SpikingJelly (the consumer that reads Conv1d) runs the file
spike for spike against the user's own float32 snnTorch module. Another ``k`` is refused by name."""
import nir
import numpy as np
import pytest
import torch
from torch import nn

import spikec
from spikec.targets.nir import consumers
from spikec.targets.nir.export import export_graph

snn = pytest.importorskip("snntorch")


class Conv1dPool(nn.Module):
    def __init__(self, k=2):
        super().__init__()
        torch.manual_seed(0)
        self.conv, self.lif1 = nn.Conv1d(2, 4, 3, padding=1), snn.Leaky(beta=0.9)
        self.pool = nn.AvgPool1d(k)
        self.fc, self.lif2 = nn.Linear(4 * (8 // k), 5), snn.Leaky(beta=0.8)
        with torch.no_grad():
            self.conv.weight.mul_(2.0)
            self.fc.weight.mul_(3.0)

    def forward(self, x):
        mem1, mem2 = self.lif1.init_leaky(), self.lif2.init_leaky()
        out = []
        for t in range(x.shape[0]):
            spk1, mem1 = self.lif1(self.conv(x[t]), mem1)
            spk2, mem2 = self.lif2(self.fc(self.pool(spk1).flatten(1)), mem2)
            out.append(spk2)
        return torch.stack(out)


def _x():
    return np.random.default_rng(0).random((20, 3, 2, 8)) * 3 - 0.5


def test_avgpool1d_runs_spike_for_spike_in_spikingjelly(tmp_path):
    x = _x()
    c = spikec.compile(Conv1dPool(), x, targets=("nir",))
    t = c.targets["nir"]
    assert c.equivalent and t["exact"] and t["nodes"]["Conv1d"] >= 3, t
    v = t["consumers"]["spikingjelly"]
    assert v["ran"] and v["spike_exact"] and v["spike_count"] > 20, v
    assert "(Conv1d): import_from_nir has no mapping" in t["consumers"]["snntorch"]["reason"]
    path = tmp_path / "model.nir"
    nir.write(path, export_graph(c.graph).graph)
    with torch.no_grad():
        want = Conv1dPool()(torch.as_tensor(x, dtype=torch.float32)).double().numpy()
    assert want.any() and not want.all()
    got, _ = consumers.run_consumer("spikingjelly", path, x, t["dt"], want.shape[2:])
    np.testing.assert_array_equal(got, want)


def test_a_pool_of_another_kernel_is_refused():
    class Pool4(Conv1dPool):
        def __init__(self):
            super().__init__(k=2)
            self.pool = nn.AvgPool1d(3, stride=2, padding=1)
    c = spikec.compile(Pool4(), _x(), targets=("nir",))
    t = c.targets["nir"]
    assert t["refused"] and "a 1-D average pool of kernel 3" in t["reason"] and "power-of-two" in t["reason"], t


class Conv1dMaxPool(Conv1dPool):
    """The same network with ``nn.MaxPool1d`` (over the LIF's spikes) in place of the average pool."""

    def __init__(self, k=2, stride=None, padding=0):
        super().__init__(k=2)
        self.pool = nn.MaxPool1d(k, stride=stride, padding=padding)
        if (k, stride, padding) != (2, None, 0):
            torch.manual_seed(1)
            self.fc = nn.Linear(4 * ((8 + 2 * padding - k) // (stride or k) + 1), 5)


@pytest.mark.parametrize("pool", [dict(), dict(k=3, stride=2, padding=1)])
def test_maxpool1d_over_spikes_is_an_or_exact_in_nir(pool, tmp_path):
    """MaxPool1d over binary spikes is an OR: an all-ones depthwise Conv1d into a LIF firing on > 0.5, exact in
    spikec's NIR interpreter on the written file (which runs the user's graph spike for spike). SpikingJelly, the
    consumer that reads Conv1d, cannot build that LIF (tau = dt) and says so by name."""
    x = _x()
    c = spikec.compile(Conv1dMaxPool(**pool), x, targets=("nir",))
    t = c.targets["nir"]
    assert c.equivalent and t["exact"], t
    exported = export_graph(c.graph)
    assert any("1-D max pool over binary spikes" in n for n in exported.notes)
    window = [k for k, n in exported.graph.nodes.items() if k.endswith("window")]
    assert len(window) == 1 and type(exported.graph.nodes[window[0]]).__name__ == "Conv1d"   # the pool's OR window
    v = t["consumers"]["spikingjelly"]
    assert not v["ran"] and "tau <= dt" in v["reason"], v
