"""Closed-form thresholds (passes.md): hand-computed B1, R-TTFS and shift-ReLU cases, and the general formula."""
import numpy as np
import pytest
import torch
from torch import nn

from spikec.codings.ttfs import ShiftReLU
from ttfs_helpers import assert_exact, map_and_check


def _linear(w, b):
    lin = nn.Linear(len(w[0]), len(w))
    lin.weight.data = torch.tensor(w, dtype=torch.float32)
    lin.bias.data = torch.tensor(b, dtype=torch.float32)
    return lin


def _theta(plan, name):
    return plan.graph.node(plan.layer(name).fire).params["threshold"]


@pytest.mark.parametrize("tau", [1.0, 2.0])
def test_b1_threshold_by_hand(tau):
    # h = relu(2 x1 - x2 + 0.5); calibration x in {(1, .5), (.5, 1)}: inputs B1 with a0 = 1 (max x = 1),
    # h in {2, .5}: a1 = T_w / 2 = .5, so W' = [1, -.5], b' = .25 and tau*theta = T_w - b' = .75
    model = nn.Sequential(_linear([[2.0, -1.0]], [0.5]), nn.ReLU())
    x = np.array([[[1.0, 0.5], [0.5, 1.0]]])
    plan, sim, check = map_and_check(model, (2,), x, tau=tau)
    relu = plan.layers[1]
    assert (plan.layers[0].scale, plan.layers[0].lo, plan.layers[0].hi) == (1.0, 0.0, 1.0)
    assert relu.scale == 0.5 and relu.coding == "B1"
    assert (relu.t_min, relu.t_ref, relu.t_max) == (1.0, 2.0, 2.0)
    assert _theta(plan, relu.name) == pytest.approx([0.75 / tau], abs=1e-15)
    # spike times: sample 1 charges q = (1, .5): V = 1 - .25 = .75 -> t = 1 + .75 - .75 = 1 (value 1 = .5 * 2);
    # sample 2: q = (.5, 1): V = 0 -> t = 1.75 (value .25 = .5 * .5)
    times = sim.layers[relu.fire].times[:, 0]
    assert times == pytest.approx([1.0, 1.75], abs=1e-15)
    assert_exact(check)


def test_rttfs_threshold_by_hand():
    # z = x1 - 2 x2 + .25 (identity, the logits: R-TTFS); signed inputs -> R-TTFS input, Delta = .5, a0 = .5;
    # z in {2.25, -1.75}: a1 = .5 / 2.25 = 2/9, W' = (a1/a0) W = 4/9 [1, -2], b' = 1/18;
    # tau*theta = sum_j W'_j Delta + Delta - b' = -2/9 + 1/2 - 1/18 = 2/9
    model = _linear([[1.0, -2.0]], [0.25])
    x = np.array([[[1.0, -0.5], [-1.0, 0.5]]])
    plan, sim, check = map_and_check(model, (2,), x)
    out = plan.layers[1]
    assert out.coding == "R-TTFS" and (out.lo, out.hi) == (-0.5, 0.5)
    assert plan.layers[0].coding == "R-TTFS" and plan.layers[0].scale == 0.5
    assert out.scale == pytest.approx(2 / 9, rel=1e-15)
    assert (out.t_min, out.t_ref, out.t_max) == (1.0, 1.5, 2.0)
    assert _theta(plan, out.name) == pytest.approx([2 / 9], abs=1e-15)
    assert sim.layers[out.fire].value[:, 0] == pytest.approx([0.5, -0.5 * 1.75 / 2.25], abs=1e-15)
    assert_exact(check)


def test_shift_relu_window_puts_the_shift_at_the_lower_end():
    model = nn.Sequential(_linear([[1.0, 1.0]], [0.0]), ShiftReLU(0.5), _linear([[1.0]], [0.0]))
    x = np.array([[[0.2, 0.3], [-1.0, -0.2], [0.5, 0.5]]])
    plan, sim, check = map_and_check(model, (2,), x)
    layer = next(l for l in plan.layers if l.kind == "shift_relu")
    # values in [-.5, 1]: a = 1 / 1.5, lower end -a * s, reference inside the window (not the midpoint)
    assert layer.scale == pytest.approx(1 / 1.5)
    assert layer.lo == pytest.approx(-0.5 / 1.5) and layer.hi == pytest.approx(1.0 / 1.5)
    assert layer.t_ref == pytest.approx(layer.t_min + 1 / 1.5)
    assert sim.layers[layer.fire].value[:, 0] == pytest.approx(np.array([0.5, -0.5, 1.0]) / 1.5, abs=1e-15)
    assert not sim.layers[layer.fire].emitted[1, 0]     # the lower clip is the activation: silent at t_max
    assert_exact(check)


def test_general_formula_matches_the_ann_weights():
    """tau*theta_i = sum_j W'_ij L_src + U - b'_i with W' = (a_n / a_m) W, b' = a_n b, for every layer."""
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(5, 6), nn.ReLU(), nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 3))
    x = np.random.default_rng(1).normal(size=(1, 9, 5))
    tau = 0.5
    plan, _, check = map_and_check(model, (5,), x, tau=tau, window=2.0)
    lins = [m for m in model if isinstance(m, nn.Linear)]
    for layer, lin in zip(plan.layers[1:], lins):
        (src,) = [plan.layers[t.source] for t in layer.expr.terms]
        w = lin.weight.detach().double().numpy() * layer.scale / src.scale
        b = lin.bias.detach().double().numpy() * layer.scale
        expected = (w.sum(1) * (-src.lo) + layer.hi - b) / tau
        assert np.allclose(_theta(plan, layer.name), expected, rtol=0, atol=1e-12)
    assert_exact(check)


def test_b1_closed_form_is_t_w_minus_bias_for_b1_sources():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 3), nn.ReLU())
    x = np.random.default_rng(0).random((1, 6, 4))           # non-negative: B1 inputs
    plan, _, _ = map_and_check(model, (4,), x, window=1.5)
    for layer, lin in zip(plan.layers[1:], [model[0], model[2]]):
        b = lin.bias.detach().double().numpy() * layer.scale
        assert np.allclose(_theta(plan, layer.name), 1.5 - b, atol=1e-12)
