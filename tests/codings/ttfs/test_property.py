"""Property: random ReLU MLPs map onto TTFS with error <= 1e-9 of the window on every unclipped neuron."""
import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from spikec.codings.ttfs import ShiftReLU

from ttfs_helpers import TOL, assert_one_spike, map_and_check



@st.composite
def mlps(draw):
    depth = draw(st.integers(1, 4))
    widths = [draw(st.integers(1, 10)) for _ in range(depth + 1)]
    seed = draw(st.integers(0, 2 ** 31 - 1))
    w_scale = draw(st.sampled_from([0.05, 0.5, 1.0, 3.0]))
    b_scale = draw(st.sampled_from([0.0, 0.1, 1.0, 5.0]))
    sparsity = draw(st.sampled_from([0.0, 0.5]))
    x_scale = draw(st.sampled_from([0.01, 1.0, 100.0]))
    signed = draw(st.booleans())
    final_relu = draw(st.booleans())
    shift = draw(st.sampled_from([None, None, 0.5, 2.0]))      # shift-ReLU: R-TTFS hidden layers
    batch = draw(st.integers(1, 12))
    rng = np.random.default_rng(seed)
    layers = []
    for i in range(depth):
        lin = nn.Linear(widths[i], widths[i + 1])
        w = rng.normal(size=(widths[i + 1], widths[i])) * w_scale
        w[rng.random(w.shape) < sparsity] = 0.0
        lin.weight.data = torch.tensor(w, dtype=torch.float32)
        lin.bias.data = torch.tensor(rng.normal(size=widths[i + 1]) * b_scale, dtype=torch.float32)
        layers.append(lin)
        if i < depth - 1 or final_relu:
            layers.append(nn.ReLU() if shift is None else ShiftReLU(shift))
    x = rng.normal(size=(1, batch, widths[0])) * x_scale
    if not signed:
        x = np.abs(x)
    extra = x * rng.uniform(0.5, 2.0, size=x.shape)   # beyond the calibration range: some neurons clip
    return nn.Sequential(*layers), widths[0], x, extra


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mlps())
def test_random_relu_mlp_is_exact_on_unclipped_neurons(case):
    model, n_in, x, extra = case
    plan, sim, check = map_and_check(model, (n_in,), x)
    kinds = {l.kind for l in plan.layers[1:]}
    assert kinds <= {"relu", "shift_relu", "identity"}
    assert check["max_rel_window_error"] <= TOL, check["layers"]
    excess = {l.name: float(max(((sim.layers[l.fire].raw - l.hi) / l.window).max(), 0.0)) for l in plan.layers}
    assert check["clipped_fraction"] == 0.0, excess  # the calibration inputs fit their windows
    assert_one_spike(sim)
    # the windows chain: t_min(n) = t_max of the layer before it
    for layer in plan.layers[1:]:
        assert abs(layer.t_min - max(plan.layers[k].t_max for k in
                                     [t.source for t in layer.expr.terms])) < 1e-12
    # inputs outside the calibration range: clipped neurons are counted, the rest stays exact
    _, sim2, check2 = map_and_check(model, (n_in,), x, np.concatenate([x, extra], axis=1))
    assert check2["max_rel_window_error"] <= TOL
    assert_one_spike(sim2)
    assert 0.0 <= check2["clipped_fraction"] <= check2["affected_fraction"] <= 1.0


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2 ** 31 - 1), st.sampled_from([1.0, 0.25, 3.0]), st.sampled_from([1.0, 1.5]))
def test_windows_tau_and_headroom_do_not_change_values(seed, window, headroom):
    torch.manual_seed(seed % 1000)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 5), nn.ReLU(), nn.Linear(5, 3))
    x = np.random.default_rng(seed).random((1, 7, 6))
    plan, sim, check = map_and_check(model, (6,), x, window=window, tau=2.0, headroom=headroom)
    assert check["max_rel_window_error"] <= TOL
    assert abs(plan.latency - 4 * window) < 1e-12
    ann = model.double()(torch.tensor(x)).detach().numpy()
    out = sim.outputs[plan.outputs[0][0]]
    assert np.abs(out - ann).max() <= TOL * np.abs(ann).max()


def test_a_percentile_scale_clips_and_counts_while_the_rest_stays_exact():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 20), nn.ReLU(), nn.Linear(20, 4))
    x = np.random.default_rng(0).normal(size=(1, 200, 6))
    plan, sim, check = map_and_check(model, (6,), x, percentile=90.0)
    assert 0 < check["clipped_fraction"] < 0.2 and check["affected_fraction"] >= check["clipped_fraction"]
    assert check["max_rel_window_error"] <= TOL
    hidden = sim.layers[plan.layers[1].fire]
    assert (hidden.value[hidden.clipped] == plan.layers[1].hi).all()     # clipped at the window top, t_min
