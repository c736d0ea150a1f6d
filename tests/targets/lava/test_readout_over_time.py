"""A spike rate read out over time as the model's output (SpikingJelly's ``self.net(x_seq).mean(0)``, ``.sum(0)``,
``.max(0)``) on the Lava target: the chip runs the network up to the spiking layer, Lava records its spikes, and
the read-out is computed on the host from them (``spikec/targets/lava/over_time.py``). Checked with SpikingJelly's
own modules: bit-exact on the recorded spikes, the read-out equal to the source's output, the OUTDIR verified and
loaded back (``spikec.load`` computes the read-out too); a read-out of real values is still refused by name."""
import numpy as np
import pytest
import torch
from torch import nn

import spikec
from spikec.app.verify import verify_outdir
from spikec.ir.graph import Graph, Node, TensorType
from spikec.targets.lava import lava_available, over_time

REASON = lava_available()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")
sj = pytest.importorskip("spikingjelly.activation_based")
from spikingjelly.activation_based import functional, layer, neuron  # noqa: E402


class Rate(nn.Module):
    def __init__(self, reduce="mean"):
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(layer.Conv2d(1, 4, 3, padding=1), neuron.IFNode(), layer.Flatten(),
                                 layer.Linear(4 * 6 * 6, 5), neuron.IFNode())
        functional.set_step_mode(self, "m")
        with torch.no_grad():   # every layer fires, at different rates
            self.net[0].weight.abs_().mul_(2.0)
            torch.manual_seed(1)
            self.net[3].weight.uniform_(-0.06, 0.07)
        self.reduce = reduce

    def forward(self, x_seq):
        y = self.net(x_seq)
        return {"mean": lambda: y.mean(0), "sum": lambda: y.sum(0), "max": lambda: y.amax(0)}[self.reduce]()


X = (np.random.default_rng(4).random((6, 3, 1, 6, 6)) < 0.5).astype(np.float64)


@pytest.mark.parametrize("reduce", ["mean", "sum", "max"])
def test_a_spike_rate_output_deploys_with_its_read_out_on_the_host(reduce, tmp_path):
    c = spikec.compile(Rate(reduce).eval(), X, targets="lava")
    lava = c.targets["lava"]
    assert c.equivalent and lava["bit_exact"], lava.get("summary")
    (name, how), = lava["readouts_over_time"].items()
    assert "computed on the host" in how and lava["spikes_compared"] > 0
    with torch.no_grad():
        functional.reset_net(model := Rate(reduce).eval().double())
        want = model(torch.as_tensor(X)).numpy()
    assert want.sum() > 0 and np.unique(want).size >= 2   # a read-out that varies: the proof is not of a constant
    out = c.save(tmp_path / "out")
    loaded = spikec.load(out)(X)   # the integer reference, its read-out computed as on the host
    np.testing.assert_array_equal(loaded[-1], want)
    lava_check = verify_outdir(out)["target_lava"]
    assert lava_check["equivalent"], lava_check


def test_a_read_out_of_real_values_is_still_refused_by_name():
    class Currents(Rate):
        def forward(self, x_seq):
            return self.net[3](self.net[2](self.net[1](self.net[0](x_seq)))).mean(0)
    c = spikec.compile(Currents().eval(), X, targets=("lava",))
    r = c.targets["lava"]
    assert r["refused"] and "time_sum" in r["reason"]


def _graph(read_by_another=False):
    t = TensorType((3,), "binary")
    nodes = [Node("x", "input", (), t), Node("s", "lif", ("x",), t, {"reset": "zero"}, {"threshold": np.ones(3)}),
             Node("rate", "time_sum", ("s",), TensorType((3,)), {"mean": True, "read": "last"})]
    if read_by_another:
        nodes.append(Node("y", "scale", ("rate",), TensorType((3,)), {"a": 2.0, "b": 0.0}))
    return Graph(nodes, ("y",) if read_by_another else ("rate",))


def test_split_takes_the_read_out_off_and_leaves_every_other_graph_as_it_is():
    before = _graph()
    after, readouts = over_time.split(before)
    assert after.outputs == ("s",) and "rate" not in after and len(after.nodes) == len(before.nodes) - 1
    assert readouts == [{"output": "rate", "op": "time_sum", "attrs": {"mean": True, "read": "last"}, "of": "s"}]
    spikes = (np.random.default_rng(0).random((5, 2, 3)) < 0.5).astype(float)
    np.testing.assert_array_equal(over_time.apply(readouts, {"s": spikes})["rate"][-1], spikes.mean(0))
    kept = _graph(read_by_another=True)
    assert over_time.split(kept) == (kept, [])   # read by another node: not an output read-out, not split
