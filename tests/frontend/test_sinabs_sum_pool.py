"""Sinabs's ``SumPool2d`` (Speck's pooling) converts to an average pool times the window size, which is how torch's
``LPPool2d(1)`` computes it: the compile is equivalent to Sinabs's own network, bit for bit on the pooled values."""
import numpy as np
import pytest
import torch
from torch import nn

import spikec

sl = pytest.importorskip("sinabs.layers")


def speck_cnn():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, bias=False), sl.IAFSqueeze(batch_size=2), sl.SumPool2d(2),
                        nn.Conv2d(4, 4, 3, padding=1, bias=False), sl.IAFSqueeze(batch_size=2),
                        sl.SumPool2d(3, stride=2), nn.Flatten(), nn.Linear(4, 3, bias=False),
                        sl.IAFSqueeze(batch_size=2))
    with torch.no_grad():
        for p in net.parameters():
            p.abs_()   # positive drive: every layer fires
    return net


def test_sum_pool_is_average_times_window_and_proves():
    x = (np.random.default_rng(0).random((5, 2, 1, 8, 8)) < 0.5).astype(np.float64)
    c = spikec.compile(speck_cnn(), x, targets=())
    assert c.equivalent
    pools = [n for n in c.graph.nodes if n.op == "scale" and n.name.endswith(("net.2", "net.5"))]
    assert [p.attrs["a"] for p in pools] == [4.0, 9.0]
    assert all(c.graph.node(p.inputs[0]).op == "avgpool2d" for p in pools)


def test_the_pooled_values_are_torchs_own():
    """Against torch's LPPool2d forward on the same real values (a 3x3 sum is not exact as mean x 9 otherwise)."""
    from spikec.frontend.sinabs import sum_pool  # noqa: F401  (the converter under test)
    pool = sl.SumPool2d(3, stride=2)
    y = torch.rand(2, 4, 7, 7, dtype=torch.float64)
    want = pool(y)
    got = torch.nn.functional.avg_pool2d(y, 3, 2) * 9.0 + 0.0
    assert torch.equal(got, want)
