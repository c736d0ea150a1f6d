"""Max trees (``spikec/targets/lava/max_tree.py``): a max pool of synaptic sums before a neuron (snnTorch's tutorial
conv net, ``Conv2d -> MaxPool2d -> Leaky``) on chip in Lava's standard Delta / SigmaDelta / Sigma processes, bit-exact
in Lava against the integer reference, placed, written and read back; where it does not apply the pool stays on the
host."""
import numpy as np
import pytest
import torch
from torch import nn

import spikec
from spikec.core.interpreter import run
from spikec.ir.graph import Graph, Node, TensorType
from spikec.targets.lava import lava_available, max_tree

REASON = lava_available()
needs_lava = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")
POOLS = [dict(kernel=(2, 2), stride=(2, 2), padding=(0, 0)),                       # the tutorial's
         dict(kernel=(3, 3), stride=(2, 2), padding=(1, 1)),                       # overlapping, padded
         dict(kernel=(3, 2), stride=(1, 2), padding=(1, 0), dilation=(2, 1)),      # dilated, unequal sides
         dict(kernel=(2, 2), stride=(2, 2), padding=(0, 0), ceil_mode=True),       # a last window cut short
         dict(kernel=(1, 1), stride=(1, 1), padding=(0, 0))]                       # no tournament at all


def _pool_node(attrs, in_shape):
    a = {"dilation": (1, 1), "ceil_mode": False, **attrs}
    t = torch.nn.functional.max_pool2d(torch.zeros(1, *in_shape), a["kernel"], a["stride"], a["padding"],
                                       a["dilation"], a["ceil_mode"])
    return Node("pool", "maxpool2d", ("x",), TensorType(tuple(t.shape[1:])), a), a


@pytest.mark.parametrize("attrs", POOLS)
def test_the_tournament_is_torchs_max_pool_on_integers_of_either_sign(attrs):
    """The tree's integer arithmetic (ReLU levels of +-1 forms, then the Sigma's sum) is torch's own max_pool2d on
    random integers, negative ones included, for every window shape."""
    rng = np.random.default_rng(0)
    in_shape = (3, 7, 6)
    node, a = _pool_node(attrs, in_shape)
    tree = max_tree.tree_of(node, in_shape)
    assert len(tree.levels) == int(np.ceil(np.log2(max(len(w) for w in max_tree.windows(a, in_shape,
                                                                                         node.type.shape)))))
    for _ in range(20):
        x = rng.integers(-2 ** 17, 2 ** 17, size=in_shape)
        want = torch.nn.functional.max_pool2d(torch.tensor(x, dtype=torch.float64)[None], a["kernel"], a["stride"],
                                              a["padding"], a["dilation"], a["ceil_mode"])[0].numpy()
        np.testing.assert_array_equal(max_tree.evaluate(tree, x.reshape(-1)), want.reshape(-1))
    for _, _, v in tree.levels + (tree.final,):
        assert set(np.unique(v)) <= {-1, 1}   # +-1 forms: +-2 with weight_exp -1 in Lava, exact


def test_a_window_of_n_values_costs_three_units_a_pair():
    """Units per level: three per pair (relu(a - b), relu(b), relu(-b)), two per value carried."""
    tree = max_tree.tournament([[0, 1, 2, 3], [4, 5, 6]], 7)
    assert tree.units == (7, 3 + 3 + 3 + 2, 3 + 3)


def _snntorch_net(pool=(2, 2), padding=0, stride=None):
    """snnTorch's tutorial conv net as its docs write it (nn.Sequential, init_hidden), small: the pools read real
    synaptic sums of either sign (random weights, a bias), and every layer fires."""
    snn = pytest.importorskip("snntorch")
    torch.manual_seed(1)
    grad = snn.surrogate.fast_sigmoid(slope=25)
    m = nn.Sequential(nn.Conv2d(1, 4, 3), nn.MaxPool2d(pool, stride=stride, padding=padding),
                      snn.Leaky(beta=0.6, spike_grad=grad, init_hidden=True),
                      nn.Conv2d(4, 6, 3), nn.MaxPool2d(2), snn.Leaky(beta=0.6, spike_grad=grad, init_hidden=True),
                      nn.Flatten(), nn.Linear(6 * 2 * 2, 5),
                      snn.Leaky(beta=0.6, spike_grad=grad, init_hidden=True, output=True))
    with torch.no_grad():
        for layer in m:
            if isinstance(layer, (nn.Conv2d, nn.Linear)):
                layer.weight.mul_(3.0)
    return m


def _x(seed=0, shape=(6, 3, 1, 14, 14)):
    return (np.random.default_rng(seed).random(shape) < 0.4).astype(np.float32)


@needs_lava
@pytest.mark.parametrize("pool", [dict(pool=(2, 2)), dict(pool=(3, 3), stride=2, padding=1)])
def test_snntorchs_tutorial_conv_net_runs_on_standard_processes_only_bit_exact(pool, tmp_path):
    m, x = _snntorch_net(**pool), _x()
    c = spikec.compile(m, x, targets=("lava",))
    t = c.targets["lava"]
    assert c.equivalent and t["bit_exact"] is True, t.get("first_mismatches")
    ready = t["chip_readiness"]
    assert ready["chip_ready"] == ready["processes"], ready
    kinds = {p["name"]: p["type"] for p in t["processes"]}
    assert sorted(n for n, k in kinds.items() if k == "Delta") == ["1.delta", "4.delta"]
    assert "SigmaDelta" in kinds.values() and "Host" not in kinds.values()
    # the pools' inputs are of either sign and both pooled layers fire: the comparison exercises the tree's ReLUs of
    # negative differences and the pooled neurons' spikes
    values = run(c.graph, x.astype(np.float64)).values
    for conv, neuron in (("0", "2"), ("3", "5")):
        assert (values[conv] < 0).any() and (values[conv] > 0).any() and values[neuron].sum() > 0
    out = c.save(tmp_path / "out")
    r = spikec.verify(out)
    assert r["target_lava"]["equivalent"] is True, r["target_lava"]
    assert r["target_lava"].get("placement_check", {"ok": True})["ok"] is not False


@needs_lava
def test_a_wrong_tree_weight_fails_the_lava_check(tmp_path):
    """The bit-exact line can fail: one tree weight flipped in the written params, verify's Lava run disagrees."""
    m, x = _snntorch_net(), _x()
    out = spikec.compile(m, x, targets=("lava",)).save(tmp_path / "out")
    params = out / "lava" / "params.npz"
    with np.load(params) as z:
        arrays = {k: z[k] for k in z.files}
    key = "1/m0/values"   # the first pair's relu(a - b) becomes relu(-a - b)
    arrays[key] = arrays[key].copy()
    arrays[key][0] = -arrays[key][0]
    np.savez(params, **arrays)
    assert spikec.verify(out)["target_lava"]["equivalent"] is False


def test_a_pool_read_by_two_or_under_sub_steps_stays_on_the_host():
    """Where the tree does not apply, the mapping keeps the host partition: a pool read by two nodes, a pool on a
    graph with sub-step values, a pool of spikes (an OR layer instead)."""
    from spikec.targets.lava.mapping import tree_pool
    real, spikes = TensorType((2, 4, 4)), TensorType((2, 4, 4), "binary")
    pool = Node("p", "maxpool2d", ("c",), TensorType((2, 2, 2)), dict(kernel=(2, 2), stride=(2, 2), padding=(0, 0)))
    lif = Node("n", "lif", ("p",), TensorType((2, 2, 2), "binary"), {}, {"beta": np.float64(0.5),
                                                                           "threshold": np.float64(1.0)})
    base = (Node("x", "input", (), spikes), Node("c", "conv2d", ("x",), real, dict(stride=(1, 1), padding=(1, 1),
                                                                                  dilation=(1, 1), groups=1),
                                                 {"weight": np.ones((2, 2, 3, 3))}), pool)
    assert tree_pool(Graph(base + (lif,), ("n",)), pool)
    assert not tree_pool(Graph(base + (lif, lif.with_(name="n2")), ("n", "n2")), pool)   # two neurons
    twice = Graph(base + (lif, Node("o", "add", ("p", "p"), TensorType((2, 2, 2)))), ("n", "o"))
    assert not tree_pool(twice, pool)
    sub = Graph(base[:1] + (base[1].with_(type=TensorType((2, 4, 4), "real", None, 3)), pool, lif), ("n",))
    assert not tree_pool(sub, pool)
    of_spikes = Graph((base[0], pool.with_(inputs=("x",)), lif), ("n",))
    assert not tree_pool(of_spikes, of_spikes.node("p"))


def test_a_max_pool_of_a_host_value_stays_on_the_host():
    """A max pool whose input is itself a host value (a max pool of a max pool of a conv) is no synaptic sum: both
    pools stay host partitions, as before max trees."""
    import spikec.nn as snn
    from spikec.frontend import trace
    from spikec.targets.lava.mapping import map_graph, tree_pool
    m = nn.Sequential(snn.TimeDistributed(nn.Conv2d(1, 2, 3)), snn.TimeDistributed(nn.MaxPool2d(2)),
                      snn.TimeDistributed(nn.MaxPool2d(2)), snn.LIF(beta=0.5, threshold=0.5))
    g = trace(m, (1, 10, 10))
    pools = [n for n in g.nodes if n.op == "maxpool2d"]
    assert len(pools) == 2 and not any(tree_pool(g, p) for p in pools)
    assert {p.name for p in pools} <= set(map_graph(g).hosts)
