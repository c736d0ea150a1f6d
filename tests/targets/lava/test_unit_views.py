"""A Conv1d network on Lava (``spikec/targets/lava/unit_views.py``): the frontend's ``(C, L) <-> (C, 1, L)`` views
moved out of the chip's way, exactly (the rewritten graph bit for bit the given one), the input sent in the grid's
layout; the network runs on standard processes only, bit-exact in Lava, and verify reads it back."""
import numpy as np
import pytest
import torch
from torch import nn

import spikec
import spikec.nn as snn
from spikec.core.interpreter import run
from spikec.frontend import trace
from spikec.targets.lava import lava_available, unit_views

REASON = lava_available()
needs_lava = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")


class Audio(nn.Module):
    """An audio front end as PyTorch users write one: Conv1d, BatchNorm1d, a LIF, MaxPool1d, twice; a linear head."""

    def __init__(self, head_reads_view=False):
        super().__init__()
        torch.manual_seed(0)
        self.head_reads_view = head_reads_view
        self.conv1 = snn.TimeDistributed(nn.Conv1d(2, 4, 5, padding=2), nn.BatchNorm1d(4))
        self.lif1 = snn.LIF(beta=0.8, threshold=0.6)
        self.pool1 = snn.TimeDistributed(nn.MaxPool1d(2))
        self.conv2 = snn.TimeDistributed(nn.Conv1d(4, 6, 3, padding=1))
        self.lif2 = snn.LIF(beta=0.8, threshold=0.6, reset="zero")
        self.pool2 = snn.TimeDistributed(nn.AvgPool1d(2))
        self.fc = snn.TimeDistributed(nn.Flatten(), nn.Linear(6 * 4, 3))
        self.out = snn.LIF(beta=0.9, threshold=0.5)
        with torch.no_grad():
            bn = self.conv1[1]
            bn.running_mean.uniform_(-0.3, 0.3)
            bn.running_var.uniform_(0.5, 1.5)
            for m in (self.conv1[0], self.conv2[0], self.fc[1]):
                m.weight.mul_(2.5)

    def forward(self, x):
        a = self.pool1(self.lif1(self.conv1(x)))
        b = self.pool2(self.lif2(self.conv2(a)))
        return self.out(self.fc(b))


def _x(seed=0):
    return (np.random.default_rng(seed).random((8, 3, 2, 16)) < 0.4).astype(np.float64)


def test_the_views_go_and_the_graph_computes_the_same_bit_for_bit():
    graph = trace(Audio(), (2, 16))
    views = [n for n in graph.nodes if n.op == "reshape"]
    assert len(views) == 8   # two per Conv1d and per pool
    after, records = unit_views.rewrite(graph)
    left = [n for n in after.nodes if n.op == "reshape"]
    assert [n.inputs[0] for n in left] == ["input"] and records   # only the input's view stays (sent as the grid)
    assert all(len(n.type.shape) == 3 for n in after.nodes if n.name in ("lif1", "lif2"))   # on the (C, 1, L) grid
    for seed in range(4):
        x = _x(seed)
        a, b = run(graph, x), run(after, x)
        for o in graph.outputs:
            assert np.array_equal(a.values[o], b.values[o])
        assert a.values["lif1"].sum() > 0 and a.values["lif2"].sum() > 0   # the layers fire: nothing trivial


def test_a_view_read_by_anything_but_per_channel_ops_stays():
    """A (C, L) view read by a linear over the whole step (a per-step matrix product is no per-channel op) and a
    neuron with per-position parameters keep their views."""
    from spikec.ir.graph import Graph, Node, TensorType
    x = Node("x", "input", (), TensorType((4, 1, 6), "binary"))
    v = Node("v", "reshape", ("x",), TensorType((4, 6), "binary"), {"shape": (4, 6)})
    lin = Node("y", "linear", ("v",), TensorType((4, 3)), {}, {"weight": np.ones((3, 6))})
    g = Graph((x, v, lin), ("y",))
    assert unit_views.rewrite(g) == (g, [])
    lif = Node("n", "lif", ("v",), TensorType((4, 6), "binary"), {}, {"beta": np.full((4, 6), 0.5),
                                                                       "threshold": np.float64(1.0)})
    g2 = Graph((x, v, lif), ("n",))
    assert unit_views.rewrite(g2) == (g2, [])


@needs_lava
def test_a_conv1d_network_runs_on_standard_lava_processes_bit_exact(tmp_path):
    x = _x()
    c = spikec.compile(Audio(), x, targets=("lava",))
    t = c.targets["lava"]
    assert c.equivalent and t["bit_exact"] is True, t.get("first_mismatches")
    assert t["chip_readiness"]["chip_ready"] == t["chip_readiness"]["processes"], t["chip_readiness"]
    assert t["partitions"]["host"] == [] and t["products"]["rewrite_check"]["equivalent"] is True
    from spikec.targets.lava import load_deployed
    out = c.save(tmp_path / "out")
    _, net, _ = load_deployed(out)
    assert net["inputs"][0]["ir_shape"] == [2, 1, 16]   # sent as the (W, H, C) grid the first Conv reads
    r = spikec.verify(out)
    assert r["target_lava"]["equivalent"] is True, r["target_lava"]


def test_an_input_view_read_by_a_host_op_stays_a_host_value():
    """An input viewed as (C, 1, L) and read by anything but a synapse is no input view: it maps as it did, on the
    host."""
    from spikec.ir.graph import Graph, Node, TensorType
    from spikec.targets.lava.mapping import map_graph
    x = Node("x", "input", (), TensorType((2, 8), "binary"))
    v = Node("v", "reshape", ("x",), TensorType((2, 1, 8), "binary"), {"shape": (2, 1, 8)})
    s = Node("s", "scale", ("v",), TensorType((2, 1, 8)), {"a": 2.0, "b": 0.0})
    conv = Node("c", "conv2d", ("s",), TensorType((3, 1, 8)), dict(stride=(1, 1), padding=(0, 1), dilation=(1, 1),
                                                                    groups=1), {"weight": np.ones((3, 2, 1, 3))})
    lif = Node("n", "lif", ("c",), TensorType((3, 1, 8), "binary"), {}, {"beta": np.float64(0.5),
                                                                          "threshold": np.float64(1.0)})
    g = Graph((x, v, s, conv, lif), ("n",))
    assert not unit_views.input_view(g, v)
    assert {"v", "s"} <= set(map_graph(g).hosts)
