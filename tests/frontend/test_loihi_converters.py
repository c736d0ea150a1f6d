"""spikec.frontend.loihi: the IR of spikec.nn.loihi modules, run in float64, equals the module's forward bit for bit."""
import numpy as np
import pytest
import torch
from torch import nn

import spikec.nn as snn
from spikec.ir.errors import UnsupportedOp
from spikec.core.interpreter import run
from spikec.frontend.tracing import trace
from spikec.nn import loihi


class Net(nn.Module):
    def __init__(self, exp, reset):
        super().__init__()
        self.conv = loihi.Conv2d(1, 4, 3, stride=2, padding=1, weight_exp=max(exp, 0))
        self.lif1 = loihi.LIF(du=torch.tensor([4095, 3000, 100, 0]), dv=300, vth=60, bias_mant=25.0, bias_exp=2,
                              channels=4, reset=reset)
        self.flat = snn.TimeDistributed(nn.Flatten())
        self.fc = loihi.Dense(64, 12, weight_exp=exp, bias=True)
        self.lif2 = loihi.LIF(du=4095, dv=410, vth=30, reset="zero")
        self.head = loihi.Dense(12, 3, weight_exp=exp)

    def forward(self, x):
        return self.head(self.lif2(self.fc(self.flat(self.lif1(self.conv(x))))))


def _randomized(net, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in (net.conv.weight, net.fc.weight, net.head.weight):
            p.copy_(torch.rand(p.shape, generator=g) * 400 - 150)
        net.fc.bias.copy_(torch.rand(12, generator=g) * 40 - 20)
    return net


@pytest.mark.parametrize("exp,reset", [(0, "zero"), (2, "subtract"), (-2, "subtract")])
def test_ir_run_equals_the_forward_bit_for_bit(exp, reset):
    net = _randomized(Net(exp, reset), exp + 7)
    g = trace(net, (1, 8, 8))
    ops = [n.op for n in g.nodes]
    assert ops.count("loihi_lif") == 2 and ("loihi_shift" in ops) == (exp < 0)
    x = (torch.rand(10, 4, 1, 8, 8, generator=torch.Generator().manual_seed(3)) < 0.5).double()
    tr = run(g, x.numpy(), record="all")
    with torch.no_grad():
        net64 = net.double()
        want = net64(x)
        s1 = net64.lif1(net64.conv(x))
    assert np.array_equal(tr.values[g.outputs[0]], want.numpy())
    assert np.array_equal(tr.values["lif1"], s1.numpy())
    assert s1.sum() > 0 and tr.values["lif2"].sum() > 0
    assert all(float(v).is_integer() for v in np.unique(tr.values[g.outputs[0]]))


def test_nodes_say_what_they_deploy():
    g = trace(_randomized(Net(-1, "zero"), 1), (1, 8, 8))
    info = {n.name: n.attrs.get("loihi") for n in g.nodes}
    assert info["conv"]["kind"] == "conv2d" and info["lif1"]["kind"] == "lif"
    assert info["fc"]["kind"] == "shift" and info["fc.sum"]["weight_exp"] == -1


def test_state_reads_are_the_modules_states():
    lif = loihi.LIF(du=200, dv=100, vth=50, bias_mant=-3.0, bias_exp=4, reset="subtract", return_state=True)
    x = torch.from_numpy(np.random.default_rng(0).integers(-100, 300, size=(9, 2, 6)).astype(np.float64))
    s, u, v = (r.detach() for r in lif.double()(x))
    lif.return_state = False
    g = trace(lif, (6,), input_kind="real")
    node = next(n for n in g.nodes if n.op == "loihi_lif")
    from spikec.ir.graph import Graph
    twins = [node.with_(name=f"lif.{r}", attrs=dict(node.attrs, read=r)) for r in ("u", "v")]
    g2 = Graph(g.nodes + tuple(twins), g.outputs + ("lif.u", "lif.v"), g.meta)
    tr = run(g2, x.numpy(), record="all")
    assert np.array_equal(tr.values["lif.u"], u.numpy()) and np.array_equal(tr.values["lif.v"], v.numpy())


def test_inside_time_distributed_is_refused():
    with pytest.raises(UnsupportedOp, match="multi-step"):
        trace(snn.TimeDistributed(loihi.Dense(4, 2)), (4,))
