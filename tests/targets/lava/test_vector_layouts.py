"""Per-sample shapes that are neither vectors nor (C, H, W) -- a Conv1d's (C, L), a binary matmul's (N, M) count,
SDT's tokens x dims -- run in Lava as vectors in the IR's row-major order, the samples side by side: processes,
ports, folded data and recorded data all agree (they did not: a 2-D shape was tiled along its last axis for the
processes and flattened for the data, so Lava failed on more than one sample)."""
import numpy as np
import pytest
import torch
from torch import nn

from spikec.targets.lava import lava_available
from spikec.targets.lava.layout import fold, fold_data, folded_shape, lava_shape, per_neuron, unfold_data

REASON = lava_available()
needs_lava = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")


@pytest.mark.parametrize("shape", [(5,), (2, 7), (3, 2, 4, 1), (4, 1, 6)])
def test_folded_data_fits_the_folded_process_and_unfolds_back(shape):
    x = np.random.default_rng(0).integers(-9, 9, size=(3, 4, *shape))
    folded = fold_data(x)
    assert folded.shape == folded_shape(lava_shape(shape), 4) + (3,)
    assert np.array_equal(unfold_data(folded, 4, shape), x)
    p = np.arange(shape[0])   # a per-channel parameter, per neuron, folded like the data
    per = fold(per_neuron(p, shape), 4)
    want = fold_data(np.broadcast_to(p.reshape(-1, *[1] * (len(shape) - 1)), (1, 4, *shape)))[..., 0]
    assert np.array_equal(per, want)


def _graph(model, x):
    from spikec.core.passes import run_passes
    from spikec.frontend import trace
    from spikec.passes import select
    g = trace(model.eval(), tuple(x.shape[2:]), input_kind="binary")
    return run_passes(g, select("default")[0], x)[0]


def _bit_exact_in_lava(model, shape, steps=4, batch=3):
    from spikec.core.interpreter import run
    from spikec.targets.lava import compile_lava
    x = (np.random.default_rng(1).random((steps, batch, *shape)) < 0.4).astype(np.float64)
    g = _graph(model, x)
    t = compile_lava(g, x, run(g, x), {})
    assert t.report["bit_exact"] is True and t.ok, t.report.get("first_mismatches")
    assert t.report["batch"]["per_network"] > 1   # the samples ran side by side
    return t.report


@needs_lava
def test_a_spikingjelly_conv1d_network_is_bit_exact_in_lava():
    from spikingjelly.activation_based import layer, neuron

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.c = layer.Conv1d(2, 4, 3, padding=1, step_mode="m")
            self.n = neuron.IFNode(step_mode="m")
            self.f = layer.Flatten(step_mode="m")
            self.l = layer.Linear(64, 3, step_mode="m")
            self.n2 = neuron.IFNode(step_mode="m")

        def forward(self, x):
            return self.n2(self.l(self.f(self.n(self.c(x)))))

    r = _bit_exact_in_lava(Net(), (2, 16))
    assert r["spikes_compared"] > 0


@needs_lava
def test_a_binary_matmul_feeding_a_synapse_is_bit_exact_in_lava():
    import spikec.nn as snc

    class MM(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.a, self.b, self.o = nn.Linear(8, 24), nn.Linear(8, 72), nn.Linear(48, 3)
            self.la, self.lb = snc.LIF(beta=0.5, threshold=0.3), snc.LIF(beta=0.5, threshold=0.3)
            self.lo = snc.LIF(beta=0.9, threshold=0.5)

        def forward(self, x):
            t, b = x.shape[:2]
            c = torch.matmul(self.la(self.a(x)).reshape(t, b, 4, 6), self.lb(self.b(x)).reshape(t, b, 6, 12))
            return self.lo(self.o(c.flatten(2)))

    r = _bit_exact_in_lava(MM(), (8,))
    assert r["products"]["binary_products_on_chip"] and r["products"]["rewrite_check"]["equivalent"] is True
