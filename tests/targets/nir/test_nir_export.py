"""The NIR exporter: the demo model against its golden file, the exact mappings, and every refusal."""
import json
from pathlib import Path

import nir
import numpy as np
import pytest

from spikec.app.driver import CompileOptions, compile_model
from spikec.ir.errors import UnsupportedOp
from spikec.frontend import ConvertContext
from spikec.ir.graph import Graph, Node, TensorType
from spikec.core.interpreter import run
from spikec.targets.nir import check_file
from spikec.targets.nir.export import DT, export, export_graph, tau_for, threshold_for

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
DIGITS = REPO / "examples" / "digits"
GOLDEN = HERE / "golden" / "digits_small.nir"


@pytest.fixture(scope="module")
def digits():
    opts = CompileOptions(f"{DIGITS / 'model.py'}:small", weights=str(DIGITS / "checkpoint.pt"),
                          inputs=str(DIGITS / "inputs.npz"), target="nir")
    return compile_model(opts)


def test_digits_report_is_honest(digits):
    t = digits.report["target"]
    assert t["name"] == "nir" and t["exact"] is True and t["ok"] is True
    assert t["interpreter"]["snntorch"]["spike_mismatches"] == 0 and t["interpreter"]["norse"]["spike_mismatches"] == 0
    assert t["interpreter"]["snntorch"]["spikes_compared"] > 100_000
    # the subtract-reset lif1 is a CubaLIF cycle (a -beta*threshold feedback conv and an identity conv)
    assert t["nodes"] == {"Affine": 1, "AvgPool2d": 1, "Conv2d": 4, "CubaLIF": 1, "Flatten": 1, "Input": 1, "LIF": 1,
                          "Output": 1}
    assert any("subtract reset" in n for n in t["notes"])
    snn, nor = t["consumers"]["snntorch"], t["consumers"]["norse"]
    assert snn["ran"] is True and snn["spike_exact"] is True and snn["spike_count"] > 1000, snn
    assert nor["ran"] is False and "AvgPool2d" in nor["reason"]
    assert digits.report["equivalent"] is True


def _structure(g: nir.NIRGraph):
    return ({k: type(v).__name__ for k, v in g.nodes.items()}, sorted(g.edges),
            {k: v for k, v in g.metadata.items() if k != "spikec"})


def _params(node) -> dict:
    return {k: np.asarray(v) for k, v in vars(node).items()
            if k not in ("input_type", "output_type", "metadata") and isinstance(v, np.ndarray)}


def test_fresh_export_matches_the_golden_file(digits, tmp_path):
    """Regenerate with: spikec compile examples/digits/model.py:small --weights examples/digits/checkpoint.pt
    --inputs examples/digits/inputs.npz -o OUT --target nir; cp OUT/model.nir tests/targets/nir/golden/digits_small.nir"""
    path = tmp_path / "model.nir"
    digits.files["model.nir"](path)
    fresh, golden = nir.read(path), nir.read(GOLDEN)
    assert _structure(fresh) == _structure(golden)
    assert json.loads(fresh.metadata["spikec"])["carriers"] == json.loads(golden.metadata["spikec"])["carriers"]
    for name, node in golden.nodes.items():
        a, b = _params(node), _params(fresh.nodes[name])
        assert a.keys() == b.keys(), name
        for k in a:  # BN folding may differ in the last bits between BLAS builds
            np.testing.assert_allclose(b[k], a[k], rtol=1e-12, atol=1e-300, err_msg=f"{name}.{k}")


def test_golden_file_still_reproduces_the_digits_source(digits):
    """The checked-in file itself, re-checked by spikec's interpreter against the deployed graph."""
    with np.load(DIGITS / "inputs.npz") as z:
        x = z["input"].astype(np.float64)
    reference = run(digits.graph, x)
    report = check_file(GOLDEN, digits.graph, x, reference, with_consumers=False)
    assert report["exact"] is True


def test_tau_and_threshold_searches_give_snntorch_its_numbers_back():
    beta = np.array([0.0, 0.5, 0.8, 0.9, 0.95, 0.99, 0.999, float(np.float32(0.8)), 0.75])
    tau, ok = tau_for(beta, DT)
    assert ok and np.all(1 - DT / tau == beta)
    # below 0.5, 1 - x is exact (Sterbenz) only when 1 - beta is a float: then no tau gives beta back, and
    # the exporter says so (report "bit_exact_params": false) while staying within an ulp
    small, ok = tau_for(np.array([0.123456789]), DT)
    assert not ok and abs(1 - DT / small[0] - 0.123456789) <= np.spacing(0.123456789)
    theta = np.array([1.0, 0.5, 0.75, 2.0, 1e-3, 0.3, 7.0, 1.0, 0.1])
    gain = (1.0 * DT) / tau
    target = np.nextafter(theta, -np.inf)
    v, ok = threshold_for(target, gain)
    assert ok and np.all(v / gain == target)


def _graph(build, shape=(2, 4, 4), kind="binary") -> Graph:
    ctx = ConvertContext()
    node = Node("input", "input", (), TensorType(shape, kind))
    ctx.nodes.append(node)
    ctx.types["input"] = node.type
    out = build(ctx, "input")
    return Graph(tuple(ctx.nodes), (out,) if isinstance(out, str) else out)


LIF = {"beta": 0.5, "alpha": 1.0, "bias": 0.0, "threshold": 1.0, "v_reset": 0.0}
CONV = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1}


def _conv(ctx, x, c_in=2, c_out=2):
    return ctx.emit("conv", "conv2d", [x], CONV, {"weight": np.full((c_out, c_in, 3, 3), 0.25)})


REFUSALS = {
    "intfire": (lambda c, x: c.emit("n", "intfire", [_conv(c, x)], {"max_spikes": 3, "rounding": "round"},
                                    {"beta": 1.0, "alpha": 1.0, "threshold": 1.0}), "integer spikes"),
    "mul": (lambda c, x: c.emit("n", "mul", [x, x]), "dynamic product"),
    "bntt": (lambda c, x: c.emit("n", "bntt", [x], {"eps": 1e-5}, {k: np.ones((3, 2)) for k in
                                                                  ("gamma", "beta", "mean", "var")}), "BNTT"),
    "step_bias": (lambda c, x: c.emit("n", "step_bias", [x], {}, {"bias": np.ones((3, 2))}), "per-time-step bias"),
    "relu": (lambda c, x: c.emit("n", "relu", [x]), "ReLU"),
    "hard_membrane": (lambda c, x: c.emit("n", "lif", [_conv(c, x)], {"reset": "zero", "output": "membrane"}, LIF),
                      "membrane of a hard-reset neuron"),
    "beta_above_1": (lambda c, x: c.emit("n", "lif", [_conv(c, x)], {"reset": "zero"}, {**LIF, "beta": 1.5}),
                     "beta outside [0, 1]"),
    "if_with_bias": (lambda c, x: c.emit("n", "lif", [_conv(c, x)], {"reset": "zero"},
                                         {**LIF, "beta": 1.0, "bias": 0.1}), "NIR IF has no constant input"),
    "mixed_if": (lambda c, x: c.emit("n", "lif", [_conv(c, x)], {"reset": "zero"},
                                     {**LIF, "beta": np.array([1.0, 0.5])}), "beta = 1 on some channels"),
    "linear_on_map": (lambda c, x: c.emit("n", "linear", [x], {}, {"weight": np.ones((3, 4))}), "acts on a vector"),
    "avgpool_ceil": (lambda c, x: c.emit("n", "avgpool2d", [x], {"kernel": (3, 3), "stride": (2, 2), "padding": (0, 0),
                                                                 "ceil_mode": True, "count_include_pad": True}),
                     "ceil_mode"),
    "maxpool_real": (lambda c, x: c.emit("n", "maxpool2d", [_conv(c, x)], {"kernel": (2, 2), "stride": (2, 2),
                                                                          "padding": (0, 0), "dilation": (1, 1),
                                                                          "ceil_mode": False}), "max-pool over real"),
    "silif": (lambda c, x: c.emit("n", "silif", [x], {"kappa": 0.5}, {"decay": np.full(2, 0.5), "b": np.ones(2),
                                                                       "threshold": np.ones(2)}), "SiLIF"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusals_name_the_node(case):
    build, why = REFUSALS[case]
    graph = _graph(build)
    with pytest.raises(UnsupportedOp) as e:
        export(graph)
    assert "node 'n'" in str(e.value) and why in str(e.value), str(e.value)


def test_substep_graph_refused():
    ctx = ConvertContext()
    node = Node("input", "input", (), TensorType((2, 4, 4), "binary"))
    ctx.nodes.append(node)
    ctx.types["input"] = node.type
    ctx.emit("n", "intfire_unrolled", ["input"], {"max_spikes": 3, "rounding": "round"},
             {"beta": 1.0, "alpha": 1.0, "threshold": 1.0})
    with pytest.raises(UnsupportedOp, match="sub-step"):
        export(Graph(tuple(ctx.nodes), ("n",)))


def test_exact_forms_of_the_other_ops():
    """Scale, leftover BN, window sum, TDM, delay, max-pool over spikes, add, IF, subtract-reset IF,
    grouped and non-square convs: exported and re-run exactly by spikec's interpreter."""
    def build(c, x):
        y = c.emit("dw", "conv2d", [x], {**CONV, "padding": (0, 1), "groups": 2},
                   {"weight": np.random.default_rng(0).normal(size=(4, 1, 1, 3)), "bias": np.array([.1, 0, -.1, .2])})
        y = c.emit("bn", "batchnorm", [y], {"eps": 1e-5}, {"gamma": np.array([1, 2, .5, 1.]), "beta": np.zeros(4),
                                                          "mean": np.full(4, .1), "var": np.ones(4)})
        y = c.emit("tdm", "tdm", [y], {}, {"lam": np.array([.5, -.2, .1, 0])})
        s = c.emit("lif_if", "lif", [y], {"reset": "zero"}, {**LIF, "beta": 1.0, "threshold": 1.5})
        m = c.emit("pool", "maxpool2d", [s], {"kernel": (2, 2), "stride": (2, 2), "padding": (0, 0),
                                              "dilation": (1, 1), "ceil_mode": False})
        w = c.emit("win", "windowsum", [m], {"kernel": 3, "dilation": 1})
        d = c.emit("late", "delay", [w], {"steps": 2})
        a = c.emit("sum", "add", [w, d])
        a = c.emit("scaled", "scale", [a], {"a": 0.3, "b": -0.1})
        z = c.emit("soft_if", "lif", [a], {"reset": "subtract"}, {**LIF, "beta": 1.0, "threshold": 0.7})
        twin = c.emit("soft_if.membrane", "lif", [a], {"reset": "subtract", "output": "membrane"},
                      {**LIF, "beta": 1.0, "threshold": 0.7})
        return (z, twin)
    graph = _graph(build, shape=(2, 6, 6))
    x = (np.random.default_rng(1).random((9, 3, 2, 6, 6)) < 0.5).astype(float)
    reference = run(graph, x)
    assert reference.values["soft_if"].sum() > 0 and reference.values["lif_if"].sum() > 0
    ex = export_graph(graph)
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.nir"
        nir.write(path, ex.graph)
        report = check_file(path, graph, x, reference)
    assert report["exact"] is True, report["interpreter"]
    assert report["nodes"]["IF"] == 1 and report["nodes"]["I"] == 1 and report["nodes"]["Delay"] == 2
    assert "max-pool" in " ".join(report["notes"])
    assert report["consumers"]["snntorch"]["ran"] is False


def test_exact_ties_are_kept_by_nextafter():
    """Dyadic weights make U hit theta exactly; U >= theta must fire, so the file says v > nextafter(theta)."""
    def build(c, x):
        y = c.emit("fc", "linear", [x], {}, {"weight": np.full((3, 4), 0.5)})
        return c.emit("n", "lif", [y], {"reset": "zero"}, {**LIF, "beta": 0.5, "threshold": 1.0})
    graph = _graph(build, shape=(4,))
    x = (np.random.default_rng(2).random((8, 5, 4)) < 0.5).astype(float)
    reference = run(graph, x)
    assert (reference.margins["n"] == 0).any(), "the test needs exact ties"
    ex = export_graph(graph)
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.nir"
        nir.write(path, ex.graph)
        report = check_file(path, graph, x, reference)
        assert report["exact"] is True and report["bit_exact_params"] is True
        # float32 importers round nextafter(theta) back to theta: at exact ties they cannot fire, and the
        # report says so, with margin 0 at every mismatch
        for c in report["consumers"].values():
            if c.get("ran"):
                assert all(m["margin"] == 0 for m in c["first_mismatches"])
        g = nir.read(path)
        g.nodes["n"].v_threshold = g.nodes["n"].v_threshold * 0 + 0.5  # theta*(1-beta) without nextafter
        nir.write(path, g)
        assert check_file(path, graph, x, reference, with_consumers=False)["exact"] is False
