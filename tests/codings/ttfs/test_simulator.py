"""The event-driven simulator: exact times (no grid), one spike per neuron, and the discrete-time mode."""
import numpy as np
import pytest
import torch
from torch import nn

import spikec.nn as snn
from spikec.core.interpreter import run
from spikec.codings.ttfs.simulate import simulate
from ttfs_helpers import TOL, assert_exact, map_and_check


def _mlp(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 6), nn.ReLU(), nn.Linear(6, 3))


def test_event_sweep_agrees_with_the_closed_form_ir_kernels_on_a_cnn():
    torch.manual_seed(2)
    model = nn.Sequential(snn.TimeDistributed(nn.Conv2d(2, 3, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2),
                                              nn.Conv2d(3, 4, 3, stride=2, padding=1), nn.ReLU(),
                                              nn.AvgPool2d(2, ceil_mode=True), nn.Flatten(), nn.Linear(4, 3)))
    x = np.random.default_rng(2).random((2, 3, 2, 8, 8))        # T=2, B=3: six independent inferences
    plan, sim, check = map_and_check(model, (2, 8, 8), x)
    assert_exact(check)
    ir = run(plan.graph, x)
    for layer in plan.layers:
        s = sim.layers[layer.fire]
        assert np.abs(ir.values[layer.fire].reshape(s.times.shape) - s.times).max() <= TOL * layer.window
        assert (s.emitted == (s.times < layer.t_max)).all()      # a silent neuron sends no event
        assert ((s.times >= layer.t_min) & (s.times <= layer.t_max)).all()


def _clock_driven(plan, model, x, dt):
    """An independent clock-driven B1 simulation on the grid ``k * dt`` (B1 MLP, tau from the plan)."""
    tau = plan.tau
    lins = [m for m in model if isinstance(m, nn.Linear)]
    inp = plan.layers[0]
    t_in = inp.t_ref - np.clip(x[0] * inp.scale, inp.lo, inp.hi)
    times = [inp.t_min + np.ceil((t_in - inp.t_min) / dt - 1e-9) * dt]
    for layer, lin in zip(plan.layers[1:], lins):
        src = plan.layers[layer.expr.terms[0].source]
        w = lin.weight.detach().double().numpy() * layer.scale / src.scale
        theta = plan.graph.node(layer.fire).params["threshold"]
        steps = int(round((layer.t_max - src.t_min) / dt))
        v = np.zeros((x.shape[1], w.shape[0]))
        fired = np.full(v.shape, layer.t_max)
        done = np.zeros(v.shape, bool)
        for k in range(steps + 1):
            t = src.t_min + k * dt
            if t >= layer.t_min - 1e-12:                           # the window: check, then ramp
                hit = (v >= theta - 1e-12) & ~done
                fired[hit], done[hit] = t, True
                v = v + dt / tau
            else:                                                   # inputs that have spiked drive the slope
                arrived = (times[-1] <= t + 1e-12) & (times[-1] < src.t_max)
                v = v + dt * (arrived @ w.T) / tau
        times.append(fired)
    return times


@pytest.mark.parametrize("states", [8, 32])
def test_discrete_mode_matches_a_clock_driven_simulation(states):
    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 6), nn.ReLU())
    x = np.random.default_rng(5).random((1, 40, 5))
    plan, _, _ = map_and_check(model, (5,), x, tau=1.0)
    dt = 1.0 / states
    sim = simulate(plan.graph, x, dt=dt)
    ref = _clock_driven(plan, model, x, dt)
    for layer, t in zip(plan.layers, ref):
        got = sim.layers[layer.fire].times
        grid = (got - layer.t_min) / dt
        assert np.abs(grid - np.round(grid)).max() < 1e-9              # spikes on the grid
        assert (np.abs(got - t) < 1e-9).all(), layer.name


def test_quantization_error_shrinks_with_dt():
    model = _mlp(1)
    x = np.random.default_rng(1).normal(size=(1, 50, 5))
    plan, exact, _ = map_and_check(model, (5,), x)
    out = plan.outputs[0][0]
    errs = [np.abs(simulate(plan.graph, x, dt=1.0 / s).outputs[out] - exact.outputs[out]).max()
            for s in (4, 16, 64, 256)]
    assert all(a > b for a, b in zip(errs, errs[1:])) and errs[-1] < 0.05 * errs[0]


def test_at_most_one_spike_and_silent_neurons_send_nothing():
    model = _mlp(7)
    x = np.random.default_rng(7).normal(size=(1, 30, 5))
    plan, sim, _ = map_and_check(model, (5,), x)
    assert max(sim.spike_counts.values()) == 1
    relu = sim.layers[plan.layers[1].fire]
    assert (~relu.emitted).any() and (relu.value[~relu.emitted] == 0).all()
