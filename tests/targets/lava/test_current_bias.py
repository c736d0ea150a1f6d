"""A current bias (``bias_u``: a biased Linear's bias integrated in the neuron's current, Norse's LIFCell / LICell) as
standard Lava processes (``current_bias.py``): an always-firing LIF and a Dense into the population's ``a_in``,
delayed to land from its first update on. Bit-exact in Lava's fixed-point simulation for a synthetic population (one
and two bias Denses, with a DelayDense), for Norse's LIFCell and an LICell read-out behind biased Linears compiled
end to end (chip-ready, ``spikec verify`` passes); a bias no two Dense terms hold falls back to SpikecLIF, named."""
import numpy as np
import pytest

from spikec.compiler.ir import Graph, Node, TensorType
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


def _lava_vs_reference(q: Graph, x: np.ndarray) -> dict:
    from spikec.compiler.interpreter import run
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
    assert len(current_bias.terms(np.array([3, -100, 127]))) == 1            # mixed sign: 2 m, weight_exp -1
    assert current_bias.terms(np.array([3, -100, 127]))[0][1] == -1
    ((w, e),) = current_bias.terms(np.array([8, 16, 2040]))   # single sign: the largest shared shift
    assert w.tolist() == [1, 2, 255] and e == 3
    assert len(current_bias.terms(np.array([1, 384, 81920]))) == 2
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
    for bias, depth, kind, n_syn in (([40, -25, 120, 7], 2, "LIF", 1), ([1, 384, 81920 // 64, -77], 1, "LIF", 2),
                                     (UNREPRESENTABLE, 1, "SpikecLIF", 0)):
        q = _graph(bias, depth=depth)
        r = _lava_vs_reference(q, x)
        pop = {p["name"]: p for p in r["net"]["processes"]}[f"n{depth - 1}"]
        assert pop["type"] == kind and len(pop.get("current_bias", {}).get("synapses", [])) == n_syn, pop
        assert r["bit_exact"], r["first_mismatches"]
        s = np.asarray(r["trace"].values[f"n{depth - 1}"])
        assert 0 < s.mean() < 1   # the bias changes what fires: both fire and rest
    # without its bias synapse Lava's LIF is not the reference: the Dense is what makes it exact
    q = _graph([40, -25, 120, 7], depth=2)
    net, arrays = lower(q)
    net["connections"] = [c for c in net["connections"] if c["src"] != "n1.current_bias0"]
    from spikec.compiler.interpreter import run
    from spikec.targets.lava.compare import compare
    from spikec.targets.lava.simulate import run_lava
    trace = run(lops.with_readouts(q), {"x": x}, integer=True)
    assert not compare(net, trace, run_lava(net, arrays, {"x": x}), x.shape[0])["bit_exact"]


@needs_lava
@pytest.mark.parametrize("factory", ["norse_lif_default", "norse_li"])
def test_norse_lifcell_and_licell_behind_biased_linears_are_chip_ready_and_verify(tmp_path, factory):
    pytest.importorskip("norse.torch")
    import json
    from pathlib import Path
    from click.testing import CliRunner
    from spikec.app.cli import main
    from spikec.app.verify import verify_outdir
    models = Path(__file__).resolve().parent / "framework_models.py"
    np.savez(tmp_path / "x.npz", input=(np.random.default_rng(0).random((8, 3, 12)) < 0.5).astype(np.float64))
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["compile", f"{models}:{factory}", "--target", "lava", "--inputs",
                                    str(tmp_path / "x.npz"), "--stepping", "step", "-o", str(out)])
    assert res.exit_code == 0, res.output
    t = json.loads((out / "report.json").read_text())["targets"]["lava"]
    assert t["bit_exact"], t.get("first_mismatches")
    procs = {p["name"]: p for p in t["processes"]}
    for pop in ("model.1", "model.3"):   # the LIFCell, and the LIFCell or LICell read-out: both biased
        assert procs[pop]["type"] == "LIF" and procs[pop]["chip_ready"] and "current bias" in procs[pop]["why"]
        assert t["current_biases"]["per_population"][pop]["delivered_equals_bias_u"]
    assert procs[current_bias.SOURCE]["type"] == "BiasLIF" and procs[current_bias.SOURCE]["chip_ready"]
    assert t["chip_readiness"]["chip_ready"] == t["chip_readiness"]["processes"], t["chip_readiness"]["blocking"]
    assert "current bias on Lava's LIF" in t["summary"]
    assert CliRunner().invoke(main, ["verify", str(out)]).exit_code == 0
    v = verify_outdir(out)["target_lava"]
    assert v["equivalent"] and v["current_biases"]["ok"] and not v["arrays_differing_from_lowering"]
