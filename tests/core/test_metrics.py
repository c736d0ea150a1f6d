"""NeuroBench's metric names from a graph and its trace: counted as NeuroBench counts (binarized inputs and
weights, padding taps not counted, AC/MAC from the data), checked against direct hand counts; firing rates per
neuron node; the report-only approximation. The figures were also checked once against neurobench 2.3.0's own
``single_layer_MACs`` on the digits example (identical); neurobench is not a dependency."""
import json

import numpy as np
import pytest

from spikec.core.builder import GraphBuilder
from spikec.core.cost import cost_report
from spikec.core.interpreter import run
from spikec.core.metrics import firing_rates, neurobench_from_report, neurobench_metrics, neuron_nodes
from spikec.core.report import layers_report

LIF = {"beta": 0.5, "alpha": 1.0, "bias": 0.0, "threshold": 0.5, "v_reset": 0.0}


def _net(pruned=True, kind="binary", seed=0):
    """x -> conv 3x3 pad 1 (some weights exactly 0) -> lif -> flatten -> linear (one row of zeros) -> lif."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder((2, 5, 5), kind=kind)
    wc = rng.normal(size=(3, 2, 3, 3))
    wl = rng.normal(size=(4, 75))
    if pruned:
        wc[0, 0] = 0.0
        wc[2, 1, 1, 1] = 0.0
        wl[1] = 0.0
    c = b.add("conv", "conv2d", ["x"], {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1},
              {"weight": wc, "bias": rng.normal(size=3)})
    s = b.add("s", "lif", [c], {"reset": "subtract"}, LIF)
    f = b.add("flat", "flatten", [s], {"start": 0, "end": -1})
    y = b.add("fc", "linear", [f], {}, {"weight": 2.0 * wl})
    out = b.add("out", "lif", [y], {"reset": "subtract"}, LIF)
    return b.graph(out), wc, wl


def _inputs(kind="binary", seed=1, shape=(6, 3, 2, 5, 5)):
    rng = np.random.default_rng(seed)
    if kind == "binary":
        return (rng.random(shape) < 0.4).astype(np.float64)
    return np.round(rng.normal(size=shape), 1)


def _hand_conv(x, w):
    """Sum over outputs of (nonzero input, nonzero weight) pairs for a 3x3, pad 1, stride 1 conv, by loops."""
    t, b, cin, h, wd = x.shape
    pad = np.zeros((t, b, cin, h + 2, wd + 2))
    pad[:, :, :, 1:-1, 1:-1] = x != 0
    total = 0
    for co in range(w.shape[0]):
        for i in range(h):
            for j in range(wd):
                total += int((pad[:, :, :, i:i + 3, j:j + 3] * (w[co] != 0)).sum())
    return total


def test_effective_acs_count_nonzero_inputs_times_nonzero_weights():
    g, wc, wl = _net()
    x = _inputs()
    trace = run(g, x)
    m = neurobench_metrics(g, trace)
    conv, fc = m["layers"]
    assert conv["kind"] == fc["kind"] == "AC" and conv["spikec_kind"] == "AC"
    assert conv["effective_ops"] == pytest.approx(_hand_conv(x, wc) / x.shape[1])
    spikes = (trace.values["flat"] != 0).astype(int)        # [T, B, 75]
    assert fc["effective_ops"] == pytest.approx(int((spikes @ (wl != 0).astype(int).T).sum()) / x.shape[1])
    assert m["Effective_ACs"] == pytest.approx(conv["effective_ops"] + fc["effective_ops"])
    assert m["Effective_MACs"] == 0.0
    # spikec's own AC count treats a zero weight as a synapse: more than NeuroBench's on a pruned layer
    assert m["spikec"]["ac_ops"] > m["Effective_ACs"]
    assert m["exact"] is True and m["notes"] == []


def test_dense_skips_padding_taps_and_counts_zero_weights():
    g, _, _ = _net()
    x = _inputs()
    m = neurobench_metrics(g, run(g, x))
    conv, fc = m["layers"]
    ones = np.ones((1, 1, 2, 5, 5))
    taps_in_bounds = _hand_conv(ones, np.ones((3, 2, 3, 3)))   # all-ones input, all-ones weights
    assert conv["dense"] == pytest.approx(taps_in_bounds * x.shape[0])
    assert taps_in_bounds < 3 * 5 * 5 * 2 * 9                 # spikec's dense_ops count the padding taps too
    assert fc["dense"] == pytest.approx(4 * 75 * x.shape[0])
    assert m["Dense"] == pytest.approx(conv["dense"] + fc["dense"])


def test_a_real_operand_is_counted_as_effective_macs():
    g, wc, _ = _net(kind="real")
    x = _inputs("real")
    m = neurobench_metrics(g, run(g, x))
    conv, fc = m["layers"]
    assert conv["kind"] == "MAC" and conv["spikec_kind"] == "MAC"
    assert fc["kind"] == "AC"                                  # its operand is the lif's spikes
    assert conv["effective_ops"] == pytest.approx(_hand_conv(x, wc) / x.shape[1])
    assert m["Effective_MACs"] == pytest.approx(conv["effective_ops"])
    # spikec's MACs are dense (zeros included); NeuroBench's effective ones skip zero operands
    assert m["spikec"]["mac_ops"] > m["Effective_MACs"]


def test_a_real_typed_operand_holding_only_spikes_is_ac_for_neurobench():
    g, _, _ = _net(kind="real")
    m = neurobench_metrics(g, run(g, _inputs("binary")))
    assert (m["layers"][0]["kind"], m["layers"][0]["spikec_kind"]) == ("AC", "MAC")


def test_activation_sparsity_pools_zero_activations_over_neuron_nodes():
    g, _, _ = _net()
    trace = run(g, _inputs())
    m = neurobench_metrics(g, trace)
    assert [n.name for n in neuron_nodes(g)] == ["s", "out"]
    s, out = trace.values["s"], trace.values["out"]
    assert m["ActivationSparsityByLayer"] == {"s": pytest.approx(float((s == 0).mean())),
                                             "out": pytest.approx(float((out == 0).mean()))}
    assert m["ActivationSparsity"] == pytest.approx(((s == 0).sum() + (out == 0).sum()) / (s.size + out.size))


def test_firing_rates_match_the_cost_report_for_binary_spikes():
    g, _, _ = _net()
    trace = run(g, _inputs())
    rates = firing_rates(g, trace)
    assert set(rates) == {"s", "out"}
    for name, r in rates.items():
        assert r["rate"] == pytest.approx(cost_report(g, trace)["firing_rates"][name])
        assert r["active"] == pytest.approx(r["rate"])      # binary: a nonzero value is one spike
        assert r["neurons"] == g.node(name).type.size and r["kind"] == "binary"


def test_integer_spikes_rate_counts_spikes_active_counts_nonzero():
    b = GraphBuilder((3,), kind="real")
    q = b.add("q", "intfire", ["x"], {"max_spikes": 3, "rounding": "round"},
              {"beta": 1.0, "alpha": 1.0, "threshold": 1.0})
    g = b.graph(q)
    x = np.array([[[0.0, 2.6, 9.0]], [[0.0, 0.0, 9.0]]])   # [T=2, B=1, 3]
    trace = run(g, x)
    v = trace.values["q"]
    r = firing_rates(g, trace)["q"]
    assert r["rate"] == pytest.approx(v.sum() / v.size) and r["active"] == pytest.approx(np.count_nonzero(v) / v.size)
    assert r["rate"] > r["active"]


def test_from_a_report_the_names_are_spikecs_figures_marked_approximate():
    g, _, _ = _net()
    trace = run(g, _inputs())
    report = json.loads(json.dumps({"cost": cost_report(g, trace), "layers": layers_report(g)}))
    approx, exact = neurobench_metrics(report), neurobench_metrics(g, trace)
    assert approx["exact"] is False and approx == neurobench_from_report(report)
    assert approx["Effective_ACs"] == pytest.approx(report["cost"]["total_ac_ops"])
    assert approx["Effective_ACs"] >= exact["Effective_ACs"] and approx["Dense"] >= exact["Dense"]
    assert approx["ActivationSparsity"] == pytest.approx(exact["ActivationSparsity"])   # binary spikes: the same
    assert set(approx) >= {"Effective_MACs", "Effective_ACs", "Dense", "ActivationSparsity"}


def test_a_graph_without_its_trace_is_refused():
    g, _, _ = _net()
    with pytest.raises(TypeError, match="trace"):
        neurobench_metrics(g)
