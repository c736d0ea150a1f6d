"""A max-over-time read-out (Norse's tutorial decoder: ``voltages, _ = torch.max(voltages, 0)`` then
``log_softmax``) is the op ``time_max`` read at the last step: equal to the model's output bit for bit, proved,
and spike-exact in onnxruntime."""
import numpy as np
import pytest
import torch

import spikec
import spikec.ir.errors
from spikec.core.interpreter import run

norse = pytest.importorskip("norse.torch")


class Decoded(torch.nn.Module):
    """Norse's MNIST tutorial shape: Linear -> LIF -> Linear -> LI, max over time, log_softmax."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = norse.SequentialState(torch.nn.Linear(6, 8), norse.LIF(), torch.nn.Linear(8, 3), norse.LI())
        with torch.no_grad():
            self.net[0].weight.abs_().mul_(2)

    def forward(self, x):
        voltages, _ = self.net(x)
        m, _ = torch.max(voltages, 0)
        return torch.nn.functional.log_softmax(m, dim=1)


def _x(seed, b=3):
    return (np.random.default_rng(seed).random((12, b, 6)) < 0.5).astype(np.float64)


def test_max_over_time_is_time_max_read_last_and_equals_the_model():
    model = Decoded().eval()
    c = spikec.compile(model, _x(0), stepping="multistep", targets=("onnx",))
    assert c.equivalent
    node = next(n for n in c.graph.nodes if n.op == "time_max")
    assert node.attrs["read"] == "last"
    with torch.no_grad():
        want = model.double()(torch.as_tensor(_x(1))).numpy()
    np.testing.assert_array_equal(c.run(_x(1)), want)
    assert c.targets["onnx"]["spike_exact"] is True


def test_the_running_maximum_at_every_step():
    """Every step's value is the maximum so far (not only the last): the kernel against numpy."""
    c = spikec.compile(Decoded().eval(), _x(0), stepping="multistep", targets=())
    node = next(n for n in c.graph.nodes if n.op == "time_max")
    trace = run(c.graph, _x(2))
    before = np.asarray(trace.values[node.inputs[0]])
    np.testing.assert_array_equal(np.asarray(trace.values[node.name]), np.maximum.accumulate(before, axis=0))
    assert not np.array_equal(before, np.maximum.accumulate(before, axis=0))   # the maximum changes something


class RateHead(torch.nn.Module):
    """A read-out over time read further by per-step layers (torch sees [B, N] after x.mean(0))."""

    def __init__(self, after=None):
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(6, 8)
        self.lif = norse.LIF()
        self.head = torch.nn.Linear(8, 3)
        self.after = after

    def forward(self, x):
        spikes, _ = self.lif(self.fc(x) * 3)
        rate = spikes.mean(0)
        y = self.head(rate).softmax(dim=1)
        return y if self.after is None else self.after(y)[0]


def test_per_step_layers_after_a_read_out_over_time_see_batch_first():
    model = RateHead().eval()
    c = spikec.compile(model, _x(0), stepping="multistep", targets=("onnx",))
    assert c.equivalent
    with torch.no_grad():
        want = model.double()(torch.as_tensor(_x(1))).numpy()
    assert want.shape == (3, 3)
    np.testing.assert_allclose(c.run(_x(1)), want, rtol=1e-12, atol=1e-15)


def test_a_neuron_after_a_read_out_over_time_is_refused():
    """A neuron would step through the running read-out: not what torch computes once on [B, N]."""
    with pytest.raises(spikec.ir.errors.UnsupportedOp, match="a neuron after a read-out over time"):
        spikec.compile(RateHead(after=norse.LIF()).eval(), _x(0), stepping="multistep", targets=())
