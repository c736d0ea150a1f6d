"""The cost model dispatches through the registry: each synaptic op's ``OpDef.cost`` says how its operations are
counted, so a new op is counted by defining it, and the figures of the built-in ops are the ones the per-op
code in cost.py used to give."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from spikec.core import cost as cost_model
from spikec.core.builder import GraphBuilder
from spikec.core.interpreter import run
from spikec.ir.graph import TensorType
from spikec.core.report import synaptic_kind
from spikec.ops import OPS, Cost, Param, define, opdef


def _old_dense(node):
    """cost.dense_ops as it was, per op name."""
    if node.op == "conv2d":
        return int(np.prod(node.type.shape)) * int(np.prod(node.params["weight"].shape[1:]))
    if node.op == "linear":
        return int(np.prod(node.type.shape)) * node.params["weight"].shape[1]
    return int(np.prod(node.type.shape)) * node.attrs["kernel"] ** 2


def _old_events(node, x):
    active = torch.as_tensor((x != 0).astype(np.float64)).flatten(0, 1)
    if node.op == "linear":
        return int(active.sum()) * node.params["weight"].shape[0]
    if node.op == "conv2d":
        a, w = node.attrs, node.params["weight"]
        return int(F.conv2d(active, torch.ones(w.shape, dtype=torch.float64), None, a["stride"], a["padding"],
                            a["dilation"], a["groups"]).sum())
    k, d = node.attrs["kernel"], node.attrs["dilation"]
    ones = torch.ones(active.shape[1], 1, k, k, dtype=torch.float64)
    return int(F.conv2d(active, ones, padding=d * (k - 1) // 2, dilation=d, groups=active.shape[1]).sum())


def _graph(seed=0):
    """x (binary) -> conv (strided, grouped) -> lif -> windowsum -> lif(integer in) ... -> flatten -> linear."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder((4, 7, 7))
    c = b.add("conv", "conv2d", ["x"], {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2), "groups": 2},
              {"weight": rng.normal(size=(6, 2, 3, 3)), "bias": rng.normal(size=6)})
    lif = lambda name, x: b.add(name, "lif", [x], {"reset": "subtract"},
                                {"beta": 0.5, "alpha": 1.0, "bias": 0.0, "threshold": 0.5, "v_reset": 0.0})
    s = lif("s", c)
    w = b.add("ws", "windowsum", [s], {"kernel": 3, "dilation": 1})
    q = b.add("q", "intfire", [w], {"max_spikes": 3, "rounding": "round"},
              {"beta": 0.5, "alpha": 1.0, "threshold": 1.0})
    f = b.add("flat", "flatten", [q], {"start": 0, "end": -1})
    y = b.add("fc", "linear", [f], {}, {"weight": rng.normal(size=(5, b.shape(f)[0]))})
    x = (rng.random((5, 3, 4, 7, 7)) < 0.4).astype(np.float64)
    return b.graph(lif("out", y)), x


def test_the_built_in_ops_count_as_before():
    g, x = _graph()
    trace = run(g, x)
    report = cost_model.cost_report(g, trace)
    layers = {l["name"]: l for l in report["layers"]}
    assert set(layers) == {"conv", "ws", "fc"}
    for name in ("conv", "ws", "fc"):
        n = g.node(name)
        assert cost_model.dense_ops(g, n) == _old_dense(n) > 0
        assert cost_model.measured_acs(g, n, trace.values[n.inputs[0]]) == _old_events(n, trace.values[n.inputs[0]])
    assert [layers[k]["synaptic_kind"] for k in ("conv", "ws", "fc")] == ["AC", "AC", "MAC"]  # ws reads spikes
    assert layers["conv"]["ac_ops"] == _old_events(g.node("conv"), x) / 3
    assert layers["fc"]["mac_ops"] == _old_dense(g.node("fc")) * 5
    assert report["ac_share"] == 1.0                            # convolutions only: the one conv is AC
    assert report["synaptic_energy_pj"] == pytest.approx(sum(l["ac_ops"] * 0.9 + l["mac_ops"] * 4.6
                                                             for l in layers.values()))


@pytest.fixture
def op_with_cost():
    """A linear layer that counts every synapse twice, defined with its cost hook only."""
    lin = opdef("linear")
    define("twice_linear", 1, lin.infer, count=lin.count, kernel=lin.kernel, synaptic=True, params=lin.params,
           cost=Cost(lambda n: 2 * lin.cost.dense(n), lambda n, active: 2 * lin.cost.events(n, active),
                     ac_on="spikes", ac_share=True))
    define("per_step_test_op", 1, lambda n, i: i[0], kernel=lambda ctx, n, p, x: x, per_step=True,
           params=(Param("bias", "(T, C)", "unused"),))
    yield
    OPS.pop("twice_linear")
    OPS.pop("per_step_test_op")


def test_a_new_op_is_counted_by_its_cost_hook(op_with_cost):
    b = GraphBuilder((6,))
    b.nodes[0] = b.nodes[0].with_(type=TensorType((6,), "integer", 2))   # integer spikes 0..2
    b.types["x"] = b.nodes[0].type
    y = b.add("tw", "twice_linear", ["x"], {}, {"weight": np.ones((4, 6))})
    g = b.graph(b.add("out", "per_step_test_op", [y], {}, {"bias": np.zeros((2, 4))}))
    x = np.random.default_rng(1).integers(0, 3, (2, 2, 6)).astype(np.float64)
    report = cost_model.cost_report(g, run(g, x))
    (layer,) = report["layers"]
    assert synaptic_kind(g, g.node("tw")) == "AC"               # ac_on="spikes": integer spikes are AC too
    assert layer["dense_ops"] == 2 * 4 * 6 * 2
    assert layer["ac_ops"] == 2 * np.count_nonzero(x) * 4 / 2
    assert report["ac_share"] == 1.0
    assert cost_model.partition_report(g)["host"] == ["out"]    # per_step: a static-weight chip needs T copies


def test_a_synaptic_op_without_a_cost_hook_has_no_dense_ops_and_cannot_count_events():
    import spikec.codings.ttfs  # noqa: F401  (ttfs_dynsyn: synaptic, counted by the TTFS report instead)
    node = type("N", (), {"op": "ttfs_dynsyn", "name": "d"})()
    assert cost_model.dense_ops(None, node) == 0
    with pytest.raises(Exception, match="no cost model"):
        cost_model.measured_acs(None, node, np.zeros((1, 1, 2)))


def test_bntt_and_step_bias_are_per_step_and_go_to_a_host():
    assert {op for op, d in OPS.items() if d.per_step and not op.endswith("_test_op")} >= {"bntt", "step_bias"}
    assert not any(OPS[op].per_step for op in ("batchnorm", "conv2d", "lif", "tdm"))


def test_ttfs_energy_uses_the_cost_model():
    from spikec.codings.ttfs import figures
    o = {"spike_cost": 1.0, "e_ac_pj": cost_model.E_AC_PJ, "e_mac_pj": cost_model.E_MAC_PJ}
    e = figures.energy({"spikes_per_inference": 3.0, "synaptic_events_per_inference": 10.0,
                        "dynamic_products_per_inference": 2.0}, o)
    assert e["synaptic_energy_pj"] == cost_model.energy_pj(10.0, 2.0) == 10.0 * 0.9 + 2.0 * 4.6
