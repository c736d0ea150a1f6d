"""TTFS on Loihi (``--coding ttfs --target lava``): the discretised TTFS network in Lava's fixed-point simulation is
bit-exact with its integer reference (``ttfs_reference``) on real digits and on random inputs, for the MLP and the
CNN examples; a perturbed network is caught; the accuracy of the discretised network vs the continuous source is
measured; activity, resources, partitions and chip readiness are reported; what cannot be lowered is refused."""
from pathlib import Path

import numpy as np
import pytest

import spikec
from spikec.ir.errors import BadInput, UnsupportedOp
from spikec.targets.lava import lava_available
from spikec.targets.lava import ttfs_reference as ref
from spikec.targets.lava.ttfs import map_ttfs
from spikec.targets.lava.ttfs_lava import run_lava
from spikec.targets.lava.ttfs_target import compare, states_of
from spikec.codings.ttfs.simulate import simulate

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "ttfs"
pytestmark = pytest.mark.skipif(lava_available() is not None, reason=f"Lava unavailable: {lava_available()}")


def _compile(name, **kw):
    return spikec.compile(f"{EXAMPLES / name}.py:{name}", coding="ttfs", targets="lava", **kw)


@pytest.fixture(scope="module")
def mlp():
    return _compile("mlp")


@pytest.fixture(scope="module")
def cnn():
    return _compile("cnn")


def _check_report(c, continuous_acc, min_acc):
    r = c.report["target"]
    assert c.report["equivalent"] and r["bit_exact"] is True and r["max_spikes_per_neuron"] == 1
    assert r["lava_inputs"]["evaluation"] == 16 and r["lava_inputs"]["verification"] == c.report["input"]["batch"]
    assert all(p["mismatches"] == 0 for p in r["per_layer"].values())
    assert r["spike_times_compared"] == sum(r["lava_inputs"].values()) * sum(
        p["neurons"] for p in r["resources"]["populations"])
    a = r["accuracy"]
    assert a["samples"] == 450 and a["continuous_accuracy"] == pytest.approx(continuous_acc, abs=1e-9)
    rows = {row["states_per_neuron"]: row for row in a["rows"]}
    assert sorted(rows) == [16, 64, 256] and rows[64]["deployed"]
    assert rows[64]["accuracy"] >= min_acc and rows[256]["accuracy"] >= rows[16]["accuracy"]
    assert rows[256]["output_max_abs_error"] < rows[16]["output_max_abs_error"]   # finer grid, closer
    act = r["activity"]
    assert 0 < act["spikes_per_inference"] < act["neurons"] and act["synaptic_ops_per_inference"] > 0
    assert act["synaptic_energy_pj"] == pytest.approx(0.9 * act["synaptic_ops_per_inference"])
    lava_spikes = r["lava_activity"]["lava_spikes_per_inference_excluding_input"]   # counted from Lava's raster
    assert lava_spikes == pytest.approx(r["lava_activity"]["spikes_per_inference"]
                                        - r["lava_activity"]["per_layer"][r["partitions"]["host"][0]["name"]]
                                        ["spikes_per_inference"])
    assert r["partitions"]["chip"] == [p["name"] for p in r["resources"]["populations"]]
    assert [h["name"] for h in r["partitions"]["host"]][0].endswith(".ttfs")     # the input encoder
    ttfs_procs = [p for p in r["processes"] if p["type"] == "SpikecTTFS"]
    assert ttfs_procs and all(p["chip_ready"] is False and "SpikecTTFS" in p["why"] for p in ttfs_procs)
    assert all(p["chip_ready"] for p in r["processes"] if p["type"] == "Dense")
    assert "bit_exact true" in r["summary"] and "populations on chip" in r["summary"]
    return r


def test_mlp_is_bit_exact_in_lava_and_reports_its_accuracy(mlp):
    r = _check_report(mlp, 0.9711111111111111, 0.95)
    assert len(r["resources"]["populations"]) == 3 and r["resources"]["neurons"] == 64 + 32 + 10
    assert [p["source_weights"] for p in r["resources"]["populations"]] == [64 * 64, 64 * 32, 32 * 10]


def test_cnn_is_bit_exact_in_lava_and_reports_its_accuracy(cnn):
    r = _check_report(cnn, 0.9644444444444444, 0.94)
    pops = r["resources"]["populations"]
    assert len(pops) == 4 and pops[0]["source_weights"] == 8 * 1 * 3 * 3    # conv1's kernel, shared
    assert pops[0]["synapses"] > pops[0]["source_weights"]                   # the effective matrix repeats it


def _digits(name, n):
    import sys
    sys.path.insert(0, str(EXAMPLES))
    try:
        mod = __import__(name)
    finally:
        sys.path.remove(str(EXAMPLES))
    x, y = getattr(mod, name)().evaluation_data()
    return np.asarray(x, dtype=np.float64)[:, :n], np.asarray(y).reshape(-1)[:n]


def test_random_inputs_including_out_of_range_are_bit_exact(mlp):
    rng = np.random.default_rng(7)
    x = rng.uniform(-0.25, 1.25, size=(1, 12, 64))      # some clip at both ends of the input window
    x[0, 0] = 0.0                                       # a silent input layer
    x[0, 1] = 1.0
    net = map_ttfs(mlp.graph, 64)
    ticks = ref.run(net, x)
    result = compare(net, ticks, run_lava(net, ticks[net.input.name]))
    assert result["bit_exact"] and result["max_spikes_per_neuron"] <= 1
    assert (ticks[net.input.name][0] == -1).all()


def test_a_perturbed_network_is_caught(mlp):
    """The comparison can fail: one threshold moved in Lava only, and a doubled spike, are both found."""
    net = map_ttfs(mlp.graph, 64)
    x, _ = _digits("mlp", 6)
    ticks = ref.run(net, x)
    layer = net.layers[0]
    fired = np.flatnonzero(ticks[layer.name][0] > layer.k_min)
    j = int(fired[0])
    layer.vth[j] += 3 * layer.ramp                      # Lava's copy only: the reference ran already
    try:
        lava = run_lava(net, ticks[net.input.name])
    finally:
        layer.vth[j] -= 3 * layer.ramp
    result = compare(net, ticks, lava)
    assert not result["bit_exact"] and result["per_layer"][layer.name]["mismatches"] >= 1
    m = result["first_mismatches"][0]
    assert (m["layer"], m["neuron"]) == (layer.name, j) and m["lava_tick"] == m["reference_tick"] + 3
    doubled = {"ticks": {k: v.copy() for k, v in ref.run(net, x).items()},
               "spike_counts": {l.name: np.ones((6, l.size), dtype=np.int64) for l in net.layers}}
    doubled["spike_counts"][net.layers[-1].name][0, 0] = 2
    assert not compare(net, ticks, doubled)["bit_exact"]


def test_reference_discretises_time_like_the_float_simulator(mlp):
    """Input ticks equal the float simulator's dt mode exactly; deeper layers differ only by the 8-bit weights
    and threshold rounding (measured: most ticks agree, the rest by a tick or so)."""
    x, _ = _digits("mlp", 100)
    net = map_ttfs(mlp.graph, 64)
    ticks = ref.run(net, x)
    sim = simulate(mlp.graph, x, dt=net.dt)
    for name in [net.input.name] + [l.name for l in net.layers]:
        layer, s = net.layer(name), sim.layers[name]
        k = np.where(s.emitted, np.round((s.times - layer.t_min) / net.dt).astype(np.int64) + layer.k_min, -1)
        agree = (k.reshape(ticks[name].shape) == ticks[name]).mean()
        assert agree == 1.0 if name == net.input.name else agree > 0.85, (name, agree)
    for layer in net.layers:
        assert layer.info["weights_clipped"] == 0 and layer.info["voltage_bound"] < 2 ** 23


def test_ttfs_dt_sets_the_grid_and_must_divide_the_window(mlp):
    assert states_of(mlp.graph, {"ttfs_dt": 1 / 32}) == 32 and states_of(mlp.graph, {}) == 64
    with pytest.raises(BadInput, match="does not divide the TTFS window"):
        states_of(mlp.graph, {"ttfs_dt": 0.3})


def test_products_are_refused_with_the_node_named():
    c = _compile("mlp_ln")
    r = c.report["target"]
    assert r["refused"] and "dynamic-weight synapse" in r["reason"] and "--target none" in r["reason"]
    assert not c.report["equivalent"]


def test_refusal_is_an_unsupported_op(mlp):
    from dataclasses import replace
    g = mlp.graph
    fire = next(n for n in g.nodes if n.op == "ttfs_fire")
    bad = replace(fire, attrs={**fire.attrs, "t_min": fire.attrs["t_min"] + 0.001})
    g2 = replace(g, nodes=tuple(bad if n is fire else n for n in g.nodes))
    with pytest.raises(UnsupportedOp, match="not on the time grid"):
        map_ttfs(g2, 64)


def test_verify_reruns_the_written_network_and_catches_a_tampered_one(mlp, tmp_path):
    from spikec.targets.lava.ttfs_target import verify_ttfs_lava
    out = mlp.save(tmp_path / "out")
    with np.load(out / "io.npz") as z:
        x = z["input"]
    v = verify_ttfs_lava(out, mlp.graph, x, None)
    assert v["equivalent"] and v["bit_exact"] and not v["arrays_differing_from_mapping"]
    from spikec.targets.lava import load
    with np.load(out / "io.npz") as z:
        err = np.abs(load(out)(x) - z["output"]).max()    # the integer reference, Lava-free, decoded
    assert err == pytest.approx(mlp.report["target"]["float_vs_fixed"]["verification_outputs_max_abs_error"])
    name = mlp.report["target"]["partitions"]["chip"][0]
    with np.load(out / "lava" / "params.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays[f"{name}/vth"] = arrays[f"{name}/vth"] + 3 * mlp.report["target"]["quantization"][name]["ramp"]
    np.savez(out / "lava" / "params.npz", **arrays)
    v = verify_ttfs_lava(out, mlp.graph, x, None)   # Lava runs the written files: later spikes, and said why
    assert not v["equivalent"] and not v["bit_exact"] and v["arrays_differing_from_mapping"] == [f"{name}/vth"]
    with pytest.raises(BadInput, match="does not hold the mapping of its graph.json"):
        load(out)


def test_the_weight_exponent_keeps_voltages_within_24_bits_or_the_layer_is_refused():
    from spikec.ir.graph import Node, TensorType
    from spikec.targets.lava.fixed_point import full_range
    from spikec.targets.lava.ttfs import V_LIMIT, _exponent, _v_bound
    node = Node("l", "ttfs_fire", (), TensorType((8,)))
    w = np.random.default_rng(0).normal(size=(64, 8))
    q = np.full(64, 64)
    e, ramp = _exponent(node, w, full_range(w), q, 64)
    wq = np.round(w * ramp / 2.0 ** e).astype(np.int64)
    assert np.abs(wq).max() <= 128 and _v_bound(wq << e, q, ramp, 64) <= V_LIMIT
    if e < 7:   # the next exponent would overflow: the largest one was taken
        r2 = int(np.floor(full_range(w) * 2 ** (e + 1)))
        assert _v_bound(np.round(w * r2 / 2.0 ** (e + 1)).astype(np.int64) << (e + 1), q, r2, 64) > V_LIMIT
    wide = np.ones((40000, 1))                              # 40000 inputs x 127 x 64 ticks > 2^23 even at e = 0
    with pytest.raises(UnsupportedOp, match="within 24 bits"):
        _exponent(node, wide, full_range(wide), np.full(40000, 64), 64)


def test_real_voltages_stay_inside_the_static_bound(mlp):
    x, _ = _digits("mlp", 200)
    net = map_ttfs(mlp.graph, 64)
    ticks = ref.run(net, x)
    for layer in net.layers:
        assert np.abs(ticks[layer.name + "/U"]).max() <= layer.info["voltage_bound"] < 2 ** 23


def test_residual_delays_run_through_relays_bit_exactly():
    """Residual operands delayed by a window (ttfs_delay) arrive D ticks late via spikec's Relay: bit-exact."""
    import torch
    from torch import nn
    from spikec.frontend import trace
    from spikec.targets.lava.ttfs_target import processes
    from spikec.codings.ttfs.timing import assign_ttfs_timing

    class ResMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.fc3, self.out = nn.Linear(6, 8), nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 3)

        def forward(self, x):
            h1 = torch.relu(self.fc1(x))
            h2 = torch.relu(self.fc2(h1))
            return self.out(torch.relu(self.fc3(h2) + h1) + h2)

    torch.manual_seed(0)
    x = np.random.default_rng(0).normal(size=(1, 24, 6))
    graph = assign_ttfs_timing(trace(ResMLP(), (6,), input_kind="real"), x).graph
    net = map_ttfs(graph, 32)
    assert sorted(d for l in net.layers for d in l.delays) == [0, 0, 0, 0, 32, 32]
    relays = [p for p in processes(net) if p["type"] == "Relay"]
    assert [p["delay"] for p in relays] == [33, 33]          # one window of ticks + the lag difference
    ticks = ref.run(net, x)
    result = compare(net, ticks, run_lava(net, ticks[net.input.name]))
    assert result["bit_exact"] and result["max_spikes_per_neuron"] == 1
    assert all(p["spikes"] > 0 for p in result["per_layer"].values())
    exact = simulate(graph, x).outputs[graph.outputs[0]]
    out = ref.decode(net, ticks, x.shape[:2])[graph.outputs[0]]
    assert 0 < np.abs(out - exact).max() < 0.2 * np.abs(exact).max()   # approximate, and measured so
