"""Ordinary PyTorch kept off the Lava target's host partitions (``spikec/targets/lava/canonical.py``):
``x.view(B, -1)`` is a flatten, ``10 * conv(x)`` folds into the conv. Each rewrite is exact in real arithmetic and
proven with the products rewrite on the verification inputs."""
import numpy as np
import pytest
import torch
from torch import nn

import spikec
from spikec.core.interpreter import run
from spikec.targets.lava import canonical, lava_available

REASON = lava_available()
snn = pytest.importorskip("snntorch")


class Net(nn.Module):
    """conv, a constant scale, Leaky, view(B, -1), linear, Leaky; ``shared``: the conv is read twice."""

    def __init__(self, shared=False):
        super().__init__()
        torch.manual_seed(0)
        self.shared = shared
        self.conv = nn.Conv2d(1, 3, 3)
        self.lif1 = snn.Leaky(beta=0.9, init_hidden=True)
        self.fc = nn.Linear(3 * 4 * 4, 4)
        self.lif2 = snn.Leaky(beta=0.9, init_hidden=True)

    def forward(self, x):
        c = self.conv(x)
        z = self.lif1(10 * c + (c if self.shared else 0))
        return self.lif2(self.fc(z.view(z.shape[0], -1)))


def _graph(shared=False):
    x = (np.random.default_rng(0).random((6, 3, 1, 6, 6)) < 0.4).astype(np.float64)
    c = spikec.compile(Net(shared), x, stepping="step", targets=())
    return c.graph, x


def test_the_fold_is_the_scaled_synapse():
    """The math: a (W x + b) + b0 = (a W) x + (a b + b0), and the scale's readers read the synapse."""
    g, x = _graph()
    out, records = canonical.rewrite(g)
    ops = [n.op for n in out.nodes]
    assert "scale" not in ops and "reshape" not in ops and "flatten" in ops and len(records) == 3  # 10 *, then + 0
    conv, a, b = g.node("conv"), 1.0, 0.0
    for scale in (n for n in g.nodes if n.op == "scale"):   # a chain: a2 (a1 y + b1) + b2
        a, b = scale.attrs["a"] * a, scale.attrs["a"] * b + scale.attrs["b"]
    np.testing.assert_array_equal(out.node("conv").params["weight"], a * np.asarray(conv.params["weight"]))
    np.testing.assert_array_equal(out.node("conv").params["bias"], a * np.asarray(conv.params["bias"]) + b)
    ref, mine = run(g, x), run(out, x)
    for o in g.outputs:   # one float64 rounding per weight
        np.testing.assert_allclose(mine.values[o], ref.values[o], rtol=0, atol=0)


def test_nothing_changes_when_the_synapse_is_read_elsewhere():
    g, _ = _graph(shared=True)
    out, records = canonical.rewrite(g)
    assert all(r["as"].startswith("reshape") for r in records)   # the flatten still; the scale stays
    assert "scale" in [n.op for n in out.nodes]


@pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")
def test_the_network_is_chip_ready_and_the_rewrite_proven():
    x = (np.random.default_rng(0).random((6, 3, 1, 6, 6)) < 0.4).astype(np.float64)
    c = spikec.compile(Net(), x, stepping="step", targets=("lava",))
    t = c.report["targets"]["lava"]
    assert c.equivalent and t["bit_exact"] and t["chip_readiness"]["cpu_only"] == 0, t["chip_readiness"]
    assert not t["partitions"]["host"]
    assert t["products"]["rewrite_check"]["rewritten"] and t["products"]["rewrite_check"]["equivalent"]
    assert any("folded into conv2d 'conv'" in r["as"] for r in t["products"]["rewrites"])
