"""Norse's ConvNet tutorial (norse/torch/models/conv.py), as Norse writes it: its own loop over ``x.shape[0]``,
``LIFCell``s, ``relu`` of the spikes into an ``LILinearCell`` read-out, the voltages written into a preallocated
``torch.zeros(T, B, 10, dtype=torch.float)`` record. Checked against Norse's own modules by the compile's proof:
LILinearCell as a linear into LICell's op, the relu of spikes as the spikes, the float32 record within float32's
rounding and named as such."""
import numpy as np
import pytest
import torch

import spikec
from spikec.core.checker import F32_REL_TOL, REL_TOL, Comparison

norse = pytest.importorskip("norse.torch")
from norse.torch.functional.lif import LIFParameters  # noqa: E402
from norse.torch.module.leaky_integrator import LILinearCell  # noqa: E402


class ConvNet(torch.nn.Module):
    """The tutorial's network, small (8 x 8 inputs), louder weights so that every layer fires."""

    def __init__(self, dtype=torch.float):
        super().__init__()
        torch.manual_seed(0)
        self.conv1 = torch.nn.Conv2d(1, 4, 3)
        self.fc1 = torch.nn.Linear(4 * 3 * 3, 16)
        self.out = LILinearCell(16, 5)
        self.lif0 = norse.LIFCell(p=LIFParameters(method="super", alpha=torch.tensor(100.0)))
        self.lif1 = norse.LIFCell(p=LIFParameters(method="super", alpha=torch.tensor(100.0)))
        self.dtype = dtype
        with torch.no_grad():
            for p in (self.conv1.weight, self.fc1.weight):
                p.mul_(8.0)
            self.out.input_weights.mul_(40.0)

    def forward(self, x):
        seq_length, batch_size = x.shape[0], x.shape[1]
        s0, s1, so = None, None, None
        voltages = torch.zeros(seq_length, batch_size, 5, device=x.device, dtype=self.dtype)
        for ts in range(seq_length):
            z = self.conv1(x[ts, :])
            z, s0 = self.lif0(z, s0)
            z = torch.nn.functional.max_pool2d(z, 2, 2)
            z = z.view(-1, 4 * 3 * 3)
            z, s1 = self.lif1(self.fc1(z), s1)
            v, so = self.out(torch.nn.functional.relu(z), so)
            voltages[ts, :, :] = v
        return voltages


def _x():
    return (np.random.default_rng(0).random((12, 3, 1, 8, 8)) < 0.5).astype(np.float32)


@pytest.mark.slow
def test_the_tutorial_convnet_compiles_its_float32_record_named():
    c = spikec.compile(ConvNet(), _x(), targets=(), probes=False)
    final = c.report["final"]
    assert c.equivalent, final
    ops = [n.op for n in c.graph.nodes]
    assert "relu" not in ops and ops.count("li_norse") >= 1 and "linear" in ops
    assert final["float32_outputs"] and "float32" in final["float32_rule"]
    assert REL_TOL < final["max_rel_diff"] <= F32_REL_TOL   # the record's rounding is there, and within float32's
    out = c.run(_x().astype(np.float64))
    assert np.abs(out).max() > 0 and len(np.unique(out)) > 10   # the read-out moves: the proof compares values


@pytest.mark.slow
def test_a_float64_record_is_compared_at_float64():
    c = spikec.compile(ConvNet(dtype=torch.float64), _x(), targets=(), probes=False)
    assert c.equivalent and "float32_outputs" not in c.report["final"]
    assert c.report["final"]["max_rel_diff"] <= REL_TOL


def test_only_a_float32_expected_value_gets_float32s_rule():
    rng = np.random.default_rng(1)
    got = rng.normal(size=(4, 2, 3))
    off = got * (1 + 1e-8)    # float32's rounding, not float64's
    as32, as64 = Comparison(), Comparison()
    as32.add("y", off.astype(np.float32), got, spike=False)
    as64.add("y", off, got, spike=False)
    assert as32.equivalent and as32.float32_outputs == ["y"]
    assert not as64.equivalent and as64.float32_outputs == []
    worse = Comparison()
    worse.add("y", (got * (1 + 1e-5)).astype(np.float32), got, spike=False)
    assert not worse.equivalent   # float32's rule is no blanket: a real difference still fails


def test_the_float32_rule_is_only_where_allowed():
    """verify takes the float32 rule only for the outputs report.json names (never an io.npz's dtype alone)."""
    got = np.random.default_rng(2).normal(size=(3, 2))
    off = (got * (1 + 1e-8)).astype(np.float32)
    named, unnamed = Comparison(float32_allowed=frozenset({"y"})), Comparison(float32_allowed=frozenset())
    named.add("y", off, got, spike=False)
    unnamed.add("y", off, got, spike=False)
    assert named.equivalent and not unnamed.equivalent


@pytest.mark.slow
def test_verify_reads_the_float32_record_back(tmp_path):
    c = spikec.compile(ConvNet(), _x(), targets=(), probes=False)
    r = spikec.verify(c.save(tmp_path / "out"))
    assert r["io_outputs"]["equivalent"] is True and r["io_outputs"]["float32_outputs"]


class Decoded(torch.nn.Module):
    """The tutorial's whole model: the network, then its decoder (max over time, log_softmax) inside forward."""

    def __init__(self):
        super().__init__()
        self.snn = ConvNet()

    def forward(self, x):
        x, _ = torch.max(self.snn(x), 0)
        return torch.nn.functional.log_softmax(x, dim=1)


def test_the_tutorials_decoder_on_its_record_is_refused_with_the_remedy():
    from spikec.ir.errors import SpikecError
    with pytest.raises(SpikecError) as e:
        spikec.compile(Decoded(), _x(), targets=(), probes=False)
    assert "preallocated with torch.zeros" in e.value.what and "decode outside the model" in e.value.remedy
