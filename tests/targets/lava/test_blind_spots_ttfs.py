"""TTFS on Loihi's integer reference, driven with the inputs that trigger its edge cases (no Lava run): every tick
lies in its layer's window ``[k_min, k_max)`` or is silent, on inputs that push neurons to the end of the window;
and the activity counts (spikes, synaptic operations: one per arriving input spike per non-zero fan-out weight)
equal counts made by hand."""
from pathlib import Path

import numpy as np
import pytest

import spikec
from spikec.targets.lava import ttfs_reference as ref
from spikec.targets.lava.ttfs import map_ttfs

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "ttfs"


@pytest.fixture(scope="module")
def net():
    c = spikec.compile(f"{EXAMPLES / 'mlp'}.py:mlp", coding="ttfs", targets="none", batch=2)
    return map_ttfs(c.graph, 16)   # a coarse grid: many neurons land on the window's last ticks


def _inputs(net, n=40, seed=0):
    r = np.random.default_rng(seed)
    x = r.uniform(-0.5, 1.5, (1, n, *net.input.shape))   # out of range too: clipped to the encoder's range
    x[0, : n // 4] *= 0.05                                # weak inputs: late, or silent, neurons
    return x


def test_every_tick_is_in_its_window_or_silent(net):
    ticks = ref.run(net, _inputs(net))
    last = silent = 0
    for layer in net.layers:
        k = ticks[layer.name]
        fired = k >= 0
        assert fired.any(), layer.name
        silent += int((~fired).sum())
        assert np.all((k[fired] >= layer.k_min) & (k[fired] < layer.k_max)), layer.name
        last += int((k == layer.k_max - 1).sum())
        u = ticks[layer.name + "/U"]   # silent exactly when the ramp cannot reach vth within the window
        m = -((u - layer.vth[None, :]) // layer.ramp)
        assert np.array_equal(~fired, m >= layer.k_max - layer.k_min), layer.name
    assert last > 0 and silent > 0   # both edges exercised: neurons firing on the window's last tick, and silent


def test_activity_counts_match_a_count_by_hand(net):
    x = _inputs(net, n=12, seed=1)
    ticks = ref.run(net, x)
    got = ref.counts(net, ticks)
    n = x.shape[1]
    spikes = (ticks[net.input.name] >= 0).sum() + sum((ticks[l.name] >= 0).sum() for l in net.layers)
    assert got["spikes_per_inference"] == pytest.approx(spikes / n)
    ops = 0
    for layer in net.layers:
        for i, src in enumerate(layer.sources):
            w = np.asarray(layer.wq[i])
            for s in range(n):
                for j in np.flatnonzero(ticks[src][s] >= 0):
                    arrival = ticks[src][s, j] + layer.delays[i]
                    if arrival < layer.k_min:   # arrives before the window: it is integrated
                        ops += np.count_nonzero(w[j])
    assert got["synaptic_ops_per_inference"] == pytest.approx(ops / n) and ops > 0
