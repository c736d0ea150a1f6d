"""Residual additions: both operands in the same window (delays inserted), exact values; BN/pool/conv folding."""
import numpy as np
import torch
from torch import nn

import spikec.nn as snn
from ttfs_helpers import TOL, assert_exact, assert_one_spike, map_and_check


class ResMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3, self.out = nn.Linear(6, 8), nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 3)
        self.r1, self.r2, self.r3 = nn.ReLU(), nn.ReLU(), nn.ReLU()

    def forward(self, x):
        h1 = self.r1(self.fc1(x))
        h2 = self.r2(self.fc2(h1))
        h3 = self.r3(self.fc3(h2) + h1)          # pre-activation residual
        return self.out(h3 + h2)                 # residual into the logits


def test_residual_operands_are_delayed_into_the_same_window():
    torch.manual_seed(0)
    model = ResMLP()
    x = np.random.default_rng(0).normal(size=(1, 16, 6))
    plan, sim, check = map_and_check(model, (6,), x)
    h1, h2, h3 = (plan.layer(n) for n in ("r1", "r2", "r3"))
    assert h3.t_min == h2.t_max and h3.delays == {"r2": 0.0, "r1": h2.t_max - h1.t_max}
    assert h3.delays["r1"] == 1.0                          # one window
    out = plan.layers[-1]
    assert out.delays == {"r3": 0.0, "r2": 1.0}
    delays = [n for n in plan.graph.nodes if n.op == "ttfs_delay"]
    assert sorted(n.attrs["delay"] for n in delays) == [1.0, 1.0]
    # the delayed r1 spikes land in r2's window, i.e. where r3's other operand spikes
    d1 = sim.layers[h1.fire].times[sim.layers[h1.fire].emitted] + 1.0
    assert (d1 >= h2.t_min).all() and (d1 <= h2.t_max).all()
    assert_exact(check)
    assert_one_spike(sim)
    y = model.double()(torch.tensor(x)).detach().numpy()
    assert np.abs(sim.outputs[plan.outputs[0][0]] - y).max() <= TOL * np.abs(y).max()


class ResCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = snn.TimeDistributed(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
        self.conv = snn.TimeDistributed(nn.Conv2d(4, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4))
        self.relu = nn.ReLU()
        self.head = snn.TimeDistributed(nn.AvgPool2d(2), nn.Flatten(), nn.Linear(4 * 3 * 3, 5))

    def forward(self, x):
        h = self.stem(x)
        return self.head(self.relu(self.conv(h) + h))


def test_conv_residual_with_batchnorm_and_pooling():
    torch.manual_seed(1)
    model = ResCNN()
    for bn in (model.stem[1], model.conv[1]):
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.data.uniform_(-1.5, 1.5)
    x = np.random.default_rng(2).random((1, 5, 2, 6, 6))
    plan, sim, check = map_and_check(model, (2, 6, 6), x)
    assert [l.kind for l in plan.layers] == ["input", "relu", "relu", "identity"]
    res = plan.layers[2]    # relu(conv(h) + h): both terms read the stem layer, no delay needed
    assert res.delays == {"stem.2": 0.0} and [t.source for t in res.expr.terms] == [1, 1]
    assert [n.op for n in res.expr.terms[0].chain] == ["conv2d", "ttfs_affine"] and res.expr.terms[1].chain == []
    assert_exact(check)
    assert_one_spike(sim)
    y = model.double().eval()(torch.tensor(x)).detach().numpy()
    assert np.abs(sim.outputs[plan.outputs[0][0]] - y).max() <= TOL * np.abs(y).max()


def test_products_of_two_branches_are_exact_in_value():
    class Prod(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c, self.out = nn.Linear(4, 5), nn.Linear(4, 5), nn.Linear(5, 5), nn.Linear(5, 2)
            self.ra, self.rb = nn.ReLU(), nn.ReLU()

        def forward(self, x):
            a = self.ra(self.a(x))
            b = self.c(self.rb(self.b(x)))        # signed, one layer later: operand a is delayed
            return self.out(a * b)

    torch.manual_seed(4)
    x = np.random.default_rng(4).normal(size=(1, 10, 4))
    plan, sim, check = map_and_check(Prod(), (4,), x)
    prod = next(l for l in plan.layers if l.kind.startswith("product"))
    assert prod.kind == "product_identity" and prod.coding == "R-TTFS"
    assert prod.delays["ra"] == 1.0
    assert_exact(check)
