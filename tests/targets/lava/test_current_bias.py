"""A current bias (``bias_u``: a biased Linear's bias integrated in the neuron's current, Norse's LIFCell / LICell) as
standard Lava processes (``current_bias.py``): an always-firing LIF and a Dense into the population's ``a_in``,
delayed to land from its first update on. Bit-exact in Lava's fixed-point simulation for a synthetic population (one
and two bias Denses, with a DelayDense), for Norse's LIFCell and an LICell read-out behind biased Linears compiled
end to end (chip-ready, ``spikec verify`` passes); a bias no two Dense terms hold falls back to SpikecLIF, named."""
import numpy as np
import pytest

from spikec.ir.graph import Graph, Node, TensorType
from spikec.targets.lava import chip, current_bias, lava_available
from spikec.targets.lava import ops as lops
from spikec.targets.lava.lower import lower

REASON = lava_available()
needs_lava = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")
UNREPRESENTABLE = np.array([42074, 16435, 1336, -27626, -23061, -55084])   # no sum of two 8-bit terms


def _graph(bias_u, depth: int = 1, n_in: int = 8) -> Graph:
    """``x -> Dense -> [LIF -> Dense ->] * (depth - 1) -> LIF with bias_u`` (zero reset, strict firing)."""
    rng = np.random.default_rng(1)
    nodes, src, shape = [Node("x", "input", (), TensorType((n_in,), "binary"))], "x", n_in
    n_out = len(bias_u)
    for k in range(depth):
        last = k == depth - 1
        m = n_out if last else 6
        w = rng.integers(-60, 120, (m, shape)) * 2
        nodes.append(Node(f"d{k}", "lava_dense", (src,), TensorType((m,)), {"weight_exp": -1, "num_message_bits": 0},
                          {"weight": w}))
        params = {"du": np.int64(3000), "dv": np.int64(500), "vth": np.int64(1000), "bias_mant": np.int64(0),
                  "bias_exp": np.int64(0)}
        if last:
            params["bias_u"] = np.asarray(bias_u, dtype=np.int64)
        nodes.append(Node(f"n{k}", "lava_lif", (f"d{k}",), TensorType((m,), "binary"),
                          {"reset": "zero", **lops.output_attrs({}, "spikes"), "process": "LIF"}, params))
        src, shape = f"n{k}", m
    return Graph(tuple(nodes), (src,))


def _conv_graph(bias_u) -> Graph:
    """``x (1, 5, 5) -> Conv 3x3 (same) -> LIF (C, 5, 5)`` with one ``bias_u`` per channel."""
    c = len(bias_u)
    w = np.random.default_rng(2).integers(-40, 90, (c, 1, 3, 3))
    conv = Node("c0", "lava_conv", ("x",), TensorType((c, 5, 5)), {"stride": [1, 1], "padding": [1, 1],
                                                                    "dilation": [1, 1], "groups": 1}, {"weight": w})
    params = {"du": np.int64(3000), "dv": np.int64(500), "vth": np.int64(1000), "bias_mant": np.int64(0),
              "bias_exp": np.int64(0), "bias_u": np.asarray(bias_u, dtype=np.int64)}
    lif = Node("n0", "lava_lif", ("c0",), TensorType((c, 5, 5), "binary"),
               {"reset": "zero", **lops.output_attrs({}, "spikes"), "process": "LIF"}, params)
    return Graph((Node("x", "input", (), TensorType((1, 5, 5), "binary")), conv, lif), ("n0",))


def _lava_vs_reference(q: Graph, x: np.ndarray) -> dict:
    from spikec.core.interpreter import run
    from spikec.targets.lava.compare import compare
    from spikec.targets.lava.simulate import run_lava
    net, arrays = lower(q)
    trace = run(lops.with_readouts(q), {"x": x}, integer=True)
    return {"net": net, "arrays": arrays, "trace": trace, **compare(net, trace, run_lava(net, arrays, {"x": x}),
                                                                     x.shape[0])}


def test_terms_deliver_the_bias_exactly_or_are_refused():
    rng = np.random.default_rng(0)
    for _ in range(500):
        b = rng.integers(-300, 300, 5) * rng.integers(1, 600)
        t = current_bias.terms(b)
        if t is not None and b.any():
            assert len(t) <= 2 and np.array_equal(current_bias.delivered(t), b), (b, t)
            assert all(np.array_equal(lops.dense_effective_weights(w), w) for w, _ in t)   # Lava keeps them
            assert all(-8 <= e <= 7 for _, e in t)
    assert len(current_bias.terms(np.array([3, -100, 127]))) == 1            # mixed sign: 2 m, weight_exp -1
    assert current_bias.terms(np.array([3, -100, 127]))[0][1] == -1
    ((w, e),) = current_bias.terms(np.array([8, 16, 2040]))   # single sign: the largest shared shift
    assert w.tolist() == [1, 2, 255] and e == 3
    assert len(current_bias.terms(np.array([1, 384, 20480]))) == 2
    assert current_bias.terms(np.array([1, 384, 81920])) is None   # weight_exp 9: beyond Loihi's 7
    assert current_bias.terms(UNREPRESENTABLE) is None


def test_the_lowering_adds_the_source_and_its_dense_or_names_the_fallback():
    net, arrays = lower(_graph([5, -3, 100, 0], depth=2))
    procs = {p["name"]: p for p in net["processes"]}
    pop = procs["n1"]
    assert pop["type"] == "LIF" and pop["current_bias"]["synapses"] == ["n1.current_bias0"]
    src, syn = procs[current_bias.SOURCE], procs["n1.current_bias0"]
    assert (src["type"], src["vth"], src["bias_mant"]) == ("BiasLIF", 0, 1)
    assert syn["type"] == "DelayDense" and syn["axon_delay"] == pop["start"] - 1 == 1   # lands at its first update
    assert {"src": "n1.current_bias0", "port": "a_out", "dst": "n1", "dst_port": "a_in"} in net["connections"]
    assert all(chip.verdict(p)["chip_ready"] for p in net["processes"])
    assert current_bias.check(net, arrays, _graph([5, -3, 100, 0], depth=2))["ok"]
    arrays["n1.current_bias0/weights"] = arrays["n1.current_bias0/weights"] + 2   # a corrupted network is caught
    assert not current_bias.check(net, arrays, _graph([5, -3, 100, 0], depth=2))["ok"]
    fell = {p["name"]: p for p in lower(_graph(UNREPRESENTABLE))[0]["processes"]}["n0"]
    assert fell["type"] == "SpikecLIF" and "no sum of 2 8-bit Dense weights" in fell["current_bias_refused"]
    (b,) = chip.blockers({"processes": [fell]}, {"n0/bias_u": np.asarray(UNREPRESENTABLE)})
    assert "not carried by a Dense from an always-firing LIF because its current bias" in b["why"]


@needs_lava
def test_lavas_lif_with_its_bias_dense_is_bit_exact_and_the_fallback_too():
    rng = np.random.default_rng(3)
    x = (rng.random((12, 2, 8)) < 0.4).astype(np.int64)
    for bias, depth, kind, n_syn in (([40, -25, 120, 7], 2, "LIF", 1), ([1, 384, 1280, -77], 1, "LIF", 2),
                                     (UNREPRESENTABLE, 1, "SpikecLIF", 0)):
        q = _graph(bias, depth=depth)
        r = _lava_vs_reference(q, x)
        pop = {p["name"]: p for p in r["net"]["processes"]}[f"n{depth - 1}"]
        assert pop["type"] == kind and len(pop.get("current_bias", {}).get("synapses", [])) == n_syn, pop
        assert r["bit_exact"], r["first_mismatches"]
        s = np.asarray(r["trace"].values[f"n{depth - 1}"])
        assert 0 < s.mean() < 1   # the bias changes what fires: both fire and rest
    xc = (rng.random((10, 3, 1, 5, 5)) < 0.4).astype(np.int64)   # a conv population: rows as Lava's (W, H, B C)
    r = _lava_vs_reference(_conv_graph([60, -90, 9]), xc)
    pop = {p["name"]: p for p in r["net"]["processes"]}["n0"]
    assert pop["type"] == "LIF" and pop["current_bias"]["synapses"] == ["n0.current_bias0"]
    assert r["bit_exact"], r["first_mismatches"]
    s = np.asarray(r["trace"].values["n0"])
    assert 0 < s[:, :, 0].mean() and s[:, :, 1].mean() < s[:, :, 0].mean()   # the per-channel bias matters
    # without its bias synapse Lava's LIF is not the reference: the Dense is what makes it exact
    q = _graph([40, -25, 120, 7], depth=2)
    net, arrays = lower(q)
    net["connections"] = [c for c in net["connections"] if c["src"] != "n1.current_bias0"]
    from spikec.core.interpreter import run
    from spikec.targets.lava.compare import compare
    from spikec.targets.lava.simulate import run_lava
    trace = run(lops.with_readouts(q), {"x": x}, integer=True)
    assert not compare(net, trace, run_lava(net, arrays, {"x": x}), x.shape[0])["bit_exact"]


HERE = __import__("pathlib").Path(__file__).resolve().parent
E2E = {  # name: (model, --stepping, input shape, its biased populations)
    "norse_lif_default": (f"{HERE / 'framework_models.py'}:norse_lif_default", "step", (8, 3, 12),
                          ("model.1", "model.3")),
    "norse_li": (f"{HERE / 'framework_models.py'}:norse_li", "step", (8, 3, 12), ("model.1", "model.3")),
    "norse_multistep": (f"{HERE.parents[2] / 'examples' / 'frameworks' / 'norse_multistep.py'}:net", "multistep",
                        (6, 2, 1, 8, 8), ("lif1", "lif2")),   # a biased Conv2d: a (C, H, W) population
}


@needs_lava
@pytest.mark.parametrize("name", list(E2E))
def test_norse_cells_behind_biased_synapses_are_chip_ready_and_verify(tmp_path, name):
    """Norse's LIFCell, an LICell read-out and a multi-step LIF behind a biased Conv2d: every process chip-ready, bit
    exact, ``spikec verify`` passing; the conv one also run by ``network(OUTDIR).run`` (its bias Dense reshaped)."""
    pytest.importorskip("norse.torch")
    import json
    import subprocess
    import sys
    from click.testing import CliRunner
    from spikec.app.cli import main
    from spikec.app.verify import verify_outdir
    model, stepping, shape, pops = E2E[name]
    np.savez(tmp_path / "x.npz", input=(np.random.default_rng(0).random(shape) < 0.5).astype(np.float64))
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["compile", model, "--target", "lava", "--inputs", str(tmp_path / "x.npz"),
                                    "--stepping", stepping, "-o", str(out)])
    assert res.exit_code == 0, res.output
    t = json.loads((out / "report.json").read_text())["targets"]["lava"]
    assert t["bit_exact"], t.get("first_mismatches")
    procs = {p["name"]: p for p in t["processes"]}
    for pop in pops:
        assert procs[pop]["type"] == "LIF" and procs[pop]["chip_ready"] and "current bias" in procs[pop]["why"]
        assert t["current_biases"]["per_population"][pop]["delivered_equals_bias_u"]
    assert procs[current_bias.SOURCE]["type"] == "BiasLIF" and procs[current_bias.SOURCE]["chip_ready"]
    assert t["chip_readiness"]["chip_ready"] == t["chip_readiness"]["processes"], t["chip_readiness"]["blocking"]
    assert "current bias on Lava's LIF" in t["summary"]
    assert CliRunner().invoke(main, ["verify", str(out)]).exit_code == 0
    v = verify_outdir(out)["target_lava"]
    assert v["equivalent"] and v["current_biases"]["ok"] and not v["arrays_differing_from_lowering"]
    if len(shape) == 5:   # the user's own Lava program (network_api.py) connects the reshaped bias Dense too
        y = tmp_path / "y.npz"
        code = (f"import numpy as np\nimport spikec.targets.lava as L\nnet = L.network({str(out)!r}, batch=2)\n"
                f"x = np.load({str(out / 'io.npz')!r})['input'][:, :2]\nnp.savez({str(y)!r}, **net.run(x))\n")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                           start_new_session=True)
        assert r.returncode == 0, r.stderr[-3000:]
        from spikec.targets.lava import load
        x = np.load(out / "io.npz")["input"][:, :2]
        with np.load(y) as z:
            assert np.array_equal(z[next(iter(z.files))], load(out)(x))


@needs_lava
def test_a_loihi_dense_bias_into_lavas_lif_is_exact_against_the_source():
    """spikec.nn.loihi: a Dense with a bias feeding a zero-reset LIF (its bias a current bias) deploys its own
    integers as Lava's LIF and the bias Dense, bit-exact against the module's forward, every process chip-ready."""
    import torch
    from torch import nn
    import spikec.nn as snn
    from spikec.app.driver import CompileOptions, compile_model
    torch.manual_seed(0)
    dense = snn.loihi.Dense(12, 6, bias=True)
    with torch.no_grad():
        dense.weight.copy_(torch.randint(-60, 120, dense.weight.shape).float())
        dense.bias.copy_(torch.tensor([30.0, -20.0, 100.0, 5.0, -90.0, 0.0]))
    model = nn.Sequential(dense, snn.loihi.LIF(du=3000, dv=500, vth=300))
    x = (np.random.default_rng(4).random((10, 3, 12)) < 0.5).astype(np.float64)
    c = compile_model(CompileOptions(model="given", target="lava"), model=model, inputs=x)
    t = c.report["target"]
    assert t["exact_source"] is True and t["bit_exact_vs_source"] is True, t.get("first_divergent_layer")
    procs = {p["name"]: p for p in t["processes"]}
    assert procs["1"]["type"] == "LIF" and procs[current_bias.SOURCE]["type"] == "BiasLIF"
    assert all(p["chip_ready"] for p in procs.values()), t["chip_readiness"]["blocking"]
