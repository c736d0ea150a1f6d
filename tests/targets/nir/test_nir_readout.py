"""A read-out over time (``x.sum(0)`` / ``x.mean(0)``, op ``time_sum``) as the model's output, in NIR
(``spikec/targets/nir/readout.py``): the file is the per-step graph up to the read-out, its metadata
``read_over_time`` says the model's output is its output summed (averaged) over time, and the checks compare both
the per-step output and that read-out, in spikec's interpreter and in each consumer; here also against the user's
own float32 module. A read-out that something else reads is refused by name."""
import json

import nir
import numpy as np
import pytest
import torch
from torch import nn

import spikec
from spikec.core.checker import Comparison
from spikec.targets.nir import _add_readout, consumers, readout
from spikec.targets.nir.export import export_graph

snn = pytest.importorskip("snntorch")
norse = pytest.importorskip("norse.torch")


class LeakySum(nn.Module):
    """snnTorch's tutorial MLP (the default Leaky) whose output is the spike count over time."""
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.l1, self.fc2, self.l2 = nn.Linear(10, 8), snn.Leaky(beta=0.9), nn.Linear(8, 4), snn.Leaky(beta=0.8)

    def forward(self, x):
        m1, m2 = self.l1.init_leaky(), self.l2.init_leaky()
        out = []
        for t in range(x.shape[0]):
            s1, m1 = self.l1(self.fc1(x[t]), m1)
            s2, m2 = self.l2(self.fc2(s1), m2)
            out.append(s2)
        return torch.stack(out).sum(0)


class NorseMean(nn.Module):
    """Norse's LIFCell, the firing rate (mean over time) read out."""
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.fc, self.cell = nn.Linear(10, 5), norse.LIFCell()
        with torch.no_grad():
            self.fc.weight.mul_(4.0)

    def forward(self, x):
        state, out = None, []
        for t in range(x.shape[0]):
            z, state = self.cell(self.fc(x[t]), state)
            out.append(z)
        return torch.stack(out).mean(0)


class SJMean(nn.Module):
    """SpikingJelly's multi-step CSNN (LIFNode defaults, max pooling over spikes), its firing rate read out."""
    def __init__(self):
        super().__init__()
        from spikingjelly.activation_based import functional, layer, neuron, surrogate
        torch.manual_seed(0)
        self.net = nn.Sequential(layer.Conv2d(1, 8, 3, padding=1, bias=False), layer.BatchNorm2d(8),
                                 neuron.LIFNode(tau=2.0, surrogate_function=surrogate.ATan()), layer.MaxPool2d(2),
                                 layer.Flatten(), layer.Linear(8 * 3 * 3, 10), neuron.LIFNode(tau=2.0))
        functional.set_step_mode(self.net, "m")
        with torch.no_grad():
            self.net[0].weight.mul_(3.0)
            self.net[5].weight.mul_(3.0)

    def forward(self, x):
        return self.net(x).mean(0)


def _x(seed=0, shape=(20, 3, 10)):
    return np.random.default_rng(seed).random(shape) * (2 if len(shape) > 3 else 3)


CASES = {"leaky_sum": (LeakySum, ("snntorch", "norse", "spikingjelly"), "sum"),
         "norse_mean": (NorseMean, ("norse",), "mean"), "sj_mean": (SJMean, ("norse",), "mean")}
SHAPES = {"sj_mean": (10, 3, 1, 6, 6)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_read_out_over_time_runs_in_the_consumers(name, tmp_path):
    factory, runs, reduce = CASES[name]
    x = _x(shape=SHAPES.get(name, (20, 3, 10)))
    c = spikec.compile(factory().eval(), x, targets=("nir",))
    t = c.targets["nir"]
    assert c.equivalent and t["exact"], t
    for consumer in runs:
        v = t["consumers"][consumer]
        assert v["ran"] and v["spike_exact"] and v["spike_count"] > 10, (consumer, v)
    ex = export_graph(c.graph)
    spec = json.loads(ex.graph.metadata["read_over_time"])["output"]
    assert spec["reduce"] == reduce and "summed over time" in spec["note"]
    path = tmp_path / "model.nir"
    nir.write(path, ex.graph)
    with torch.no_grad():   # the user's own float32 module: its [B, ...] read-out
        want = factory().eval().float()(torch.as_tensor(x, dtype=torch.float32)).double().numpy()
    assert want.any() and (want < want.max()).any()
    for consumer in runs:
        per_step, _ = consumers.run_consumer(consumer, path, x, t["dt"], want.shape[1:])
        np.testing.assert_array_equal(readout.reduce(per_step, spec).astype(np.float32), want.astype(np.float32))


def test_the_read_out_check_fails_on_a_wrong_read_out():
    c = spikec.compile(LeakySum(), _x(), targets=())
    ref = spikec.core.interpreter.run(c.graph, _x())
    ex = export_graph(c.graph)
    spec = dict(ex.over_time["output"])
    per_step = ref.values[spec["of"]]
    ok, bad = Comparison(), Comparison()
    _add_readout(ok, spec, per_step, ref)
    _add_readout(bad, {**spec, "reduce": "mean"}, per_step, ref)
    assert ok.real_mismatches == 0 and bad.real_mismatches > 0


def test_a_read_out_read_further_is_refused():
    """``x.sum(0)`` then a scale: the read-out is not the output, its reader runs once, not per step."""
    from spikec.ir.errors import UnsupportedOp
    from spikec.ir.graph import Node
    g = spikec.compile(LeakySum(), _x(), targets=()).graph
    (ts,) = [n for n in g.nodes if n.op == "time_sum"]
    scale = Node("after", "scale", (ts.name,), ts.type, {"a": 2.0, "b": 0.0})
    with pytest.raises(UnsupportedOp, match="read-out over time .* read by another node"):
        export_graph(g.with_nodes(list(g.nodes) + [scale], outputs=("after",)))


def test_nir_check_names_the_read_out(tmp_path):
    from spikec.targets.nir.check import check_file
    path = tmp_path / "model.nir"
    nir.write(path, export_graph(spikec.compile(LeakySum(), _x(), targets=()).graph).graph)
    found = [f for f in check_file(path)["findings"] if f["kind"] == "read_over_time"]
    assert found and "sum over time" in found[0]["message"]
