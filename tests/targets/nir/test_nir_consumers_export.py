"""NIR export that the consumers reproduce: the source's own dt and parameterisation, a form per consumer.

A graph read from NIR is written back at the dt and scheme it was read at; ``nir_consumer`` (a target option)
picks the form snnTorch's ``import_from_nir`` or Norse's ``from_nir`` honours. The importers run here as they
ship (no mocks): a missing package skips with the reason.
"""
from pathlib import Path

import nir
import numpy as np
import pytest

from spikec.ir.errors import BadInput
from spikec.core.interpreter import run
from spikec.frontend import ConvertContext
from spikec.ir.graph import Graph, Node, TensorType
from spikec.core.verify import verify
from spikec.targets.nir import composed, consumers, nir_target
from spikec.formats.nir import interpreter
from spikec.targets.nir.export import export_graph
from spikec.frontend.nir_file import load_nir

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parents[1] / "fixtures" / "nir_paper"
LIF_NORSE = FIXTURES / "lif_norse.nir"

pytest.importorskip("snntorch", reason="snnTorch 1.0.0 is a test dependency (pip install snntorch==1.0.0)")
pytest.importorskip("norse.torch", reason="Norse 1.1.0 is a test dependency "
                    "(pip install --no-deps norse==1.1.0 nirtorch==2.6)")


def spikes(shape, steps=40, batch=3, p=0.5, seed=0):
    return (np.random.default_rng(seed).random((steps, batch, *shape)) < p).astype(float)


def target(graph, x, **options):
    """The NIR target on ``graph`` (as the driver calls it), and the file it writes."""
    result = nir_target(graph, x, run(graph, x), options)
    return result.report, result.files["model.nir"]


def written(tmp_path, files, name="model.nir") -> Path:
    path = tmp_path / name
    files(path)
    return path


def param(node, name) -> np.ndarray:
    return np.asarray(getattr(node, name), dtype=np.float64)


# -- a Norse-scheme file is written back as Norse reads it ---------------------------------------------------
def test_norse_scheme_lif_reexport_reproduces_norse_spikes(tmp_path):
    """lif_norse.nir read at dt = 1e-3 in Norse's scheme: the re-export is the file's own parameterisation at
    dt = 1e-3, and Norse's importer gives the same spikes on it as on the original (it gave 34 for 4 before)."""
    graph = load_nir(LIF_NORSE, dt=1e-3, scheme="norse")
    x = np.random.default_rng(0).choice([0.0, 0.05, 0.1, 0.2], size=(60, 4, 1))
    report, files = target(graph, x)
    assert report["dt"] == 1e-3 and report["scheme"] == "norse" and report["exact"] is True
    assert "read from NIR at dt = 0.001" in report["time_base"]
    path = written(tmp_path, files)
    original, again = nir.read(LIF_NORSE), nir.read(path)
    lif0, lif1 = original.nodes["1"], again.nodes["n1"]
    for name in ("tau", "r", "v_leak", "v_threshold", "v_reset"):  # the file's own values, bit for bit
        np.testing.assert_array_equal(param(lif1, name), param(lif0, name).astype(np.float64), err_msg=name)
    y0, _ = consumers.run_consumer("norse", LIF_NORSE, x, 1e-3, (1,))
    y1, _ = consumers.run_consumer("norse", path, x, 1e-3, (1,))
    assert y0.sum() > 0 and (y0 == 0).any(), "the test input must both fire and stay silent"
    np.testing.assert_array_equal(y1, y0)
    norse = report["consumers"]["norse"]
    assert norse["ran"] is True and norse["spike_exact"] is True and norse["call"].endswith("dt=0.001)")
    assert report["consumers"]["snntorch"]["ran"] is False and "1e-4" in report["consumers"]["snntorch"]["reason"]


def test_norse_scheme_graph_for_snntorch_is_written_at_snntorchs_dt(tmp_path):
    graph = load_nir(LIF_NORSE, dt=1e-3, scheme="norse")
    x = np.random.default_rng(1).choice([0.0, 0.1, 0.2], size=(50, 3, 1))
    report, _ = target(graph, x, nir_consumer="snntorch")
    assert report["dt"] == 1e-4 and report["scheme"] == "snntorch" and report["exact"] is True
    snn = report["consumers"]["snntorch"]
    assert snn["ran"] is True and snn["spike_exact"] is True and snn["spike_count"] > 0


def test_unknown_consumer_is_refused():
    graph = load_nir(LIF_NORSE, dt=1e-3, scheme="norse")
    with pytest.raises(BadInput, match="unknown NIR consumer"):
        export_graph(graph, consumer="loihi")


# -- IF: r = 1 for snnTorch, dt*r = 1 for Norse ----------------------------------------------------------------
def if_graph(alpha=1.0):
    ctx = ConvertContext()
    node = Node("input", "input", (), TensorType((5,), "binary"))
    ctx.nodes.append(node)
    ctx.types["input"] = node.type
    w = np.random.default_rng(3).normal(0.3, 0.4, (4, 5))
    y = ctx.emit("fc", "linear", ["input"], {}, {"weight": w, "bias": np.zeros(4)})
    out = ctx.emit("if1", "lif", [y], {"reset": "zero"},
                   {"beta": 1.0, "alpha": alpha, "bias": 0.0, "threshold": 1.0, "v_reset": 0.0})
    return verify(Graph(tuple(ctx.nodes), (out,)))


def test_if_for_snntorch_is_a_lif_snntorch_builds_as_leaky_beta_one(tmp_path):
    """snnTorch imports every NIR IF as Leaky(beta=0.9); for it an IF is written as a LIF with tau = dt 2**60 and
    r = 2**60, which its importer builds as Leaky(beta=1.0) with gain 1: it runs the IF spike for spike."""
    graph = if_graph()
    x = spikes((5,), seed=4)
    report, files = target(graph, x, nir_consumer="snntorch")
    assert report["exact"] is True and report["scheme"] == "snntorch" and report["dt"] == 1e-4
    node = nir.read(written(tmp_path, files)).nodes["if1"]
    assert isinstance(node, nir.LIF) and np.all(1 - 1e-4 / param(node, "tau") == 1.0)
    snn = report["consumers"]["snntorch"]
    assert snn["ran"] and snn["spike_exact"] and snn["spike_count"] > 0, snn


def test_a_scaled_if_for_snntorch_stays_an_if_with_r_1(tmp_path):
    """An input gain other than 1 cannot be snnTorch's Leaky(beta=1.0) exactly: the IF keeps r = 1, which the
    importer accepts (it raised "r != 1 not supported" on r = 1/dt), and the report says it runs it as beta 0.9."""
    report, files = target(if_graph(alpha=0.5), spikes((5,), seed=4), nir_consumer="snntorch")
    node = nir.read(written(tmp_path, files)).nodes["if1"]
    np.testing.assert_array_equal(param(node, "r"), 1.0)
    from snntorch.import_nir import import_from_nir
    assert import_from_nir(nir.read(written(tmp_path, files))) is not None
    snn = report["consumers"]["snntorch"]
    assert snn["ran"] is False and "beta = 0.9" in snn["reason"] and "asserts r = 1" not in snn["reason"]


def test_if_default_form_is_norses_and_norse_reproduces_it(tmp_path):
    graph = if_graph()
    x = spikes((5,), seed=5)
    report, files = target(graph, x)
    node = nir.read(written(tmp_path, files)).nodes["if1"]
    assert np.all(param(node, "r") * report["dt"] == 1.0)
    assert report["exact"] is True
    assert report["consumers"]["norse"]["ran"] is True and report["consumers"]["norse"]["spike_exact"] is True
    assert "asserts r = 1" in report["consumers"]["snntorch"]["reason"]
    from snntorch.import_nir import import_from_nir
    with pytest.raises(AssertionError, match="r != 1"):  # the reason is true
        import_from_nir(nir.read(written(tmp_path, files, "again.nir")))


def test_if_read_from_nir_round_trips(tmp_path):
    """An IF file (r = 1/dt, as Norse runs it) read in either scheme is written back with the same behaviour."""
    src = tmp_path / "if.nir"
    w = np.random.default_rng(6).normal(0.3, 0.4, (4, 5))
    nir.write(src, nir.NIRGraph.from_list(nir.Affine(w, np.zeros(4)), nir.IF(r=np.full(4, 1e4),
                                                                            v_threshold=np.full(4, 1.0))))
    x = spikes((5,), seed=7)
    for scheme in ("snntorch", "norse"):
        graph = load_nir(src, dt=1e-4, scheme=scheme)
        path = tmp_path / f"back_{scheme}.nir"
        nir.write(path, export_graph(graph).graph)
        back = nir.read(path)
        assert back.metadata["scheme"] == scheme and back.metadata["dt"] == 1e-4
        before = interpreter.run(src, x, dt=1e-4, scheme=scheme).values["output"]
        after = interpreter.run(path, x, dt=1e-4, scheme=scheme).values["output"]
        assert before.sum() > 0
        np.testing.assert_array_equal(after, before)


# -- CubaLIF: read -> export -> read -------------------------------------------------------------------------
def cuba_file(path, n_in=5, n=4):
    rng = np.random.default_rng(8)
    cuba = nir.CubaLIF(tau_syn=np.full(n, 2e-3, dtype=np.float32), tau_mem=np.full(n, 5e-3, dtype=np.float32),
                       r=np.ones(n, dtype=np.float32), v_leak=np.zeros(n, dtype=np.float32),
                       v_threshold=np.full(n, 0.05, dtype=np.float32), v_reset=np.zeros(n, dtype=np.float32),
                       w_in=np.ones(n, dtype=np.float32))
    nir.write(path, nir.NIRGraph.from_list(nir.Affine(rng.normal(0.5, 0.5, (n, n_in)).astype(np.float32),
                                                      np.zeros(n, dtype=np.float32)), cuba))
    return path


@pytest.mark.parametrize("scheme", ["snntorch", "norse"])
def test_cubalif_round_trip(scheme, tmp_path):
    src = cuba_file(tmp_path / "cuba.nir")
    dt = 1e-3 if scheme == "norse" else 1e-4
    graph = load_nir(src, dt=dt, scheme=scheme)
    x = spikes((5,), steps=60, seed=9)
    report, files = target(graph, x)
    assert report["exact"] is True and report["nodes"].get("CubaLIF") == 1 and "LI" not in report["nodes"]
    path = written(tmp_path, files)
    assert nir.read(path).metadata["dt"] == dt and nir.read(path).metadata["scheme"] == scheme
    before = interpreter.run(src, x, dt=dt, scheme=scheme).values["output"]
    after = interpreter.run(path, x, dt=dt, scheme=scheme).values["output"]
    assert before.sum() > 0 and (before == 0).any()
    np.testing.assert_array_equal(after, before)
    again = load_nir(path, dt=dt, scheme=scheme)  # read -> export -> read: the same IR behaviour
    np.testing.assert_array_equal(run(again, x).values[again.outputs[0]], run(graph, x).values[graph.outputs[0]])


def test_cubalif_norse_scheme_reproduced_by_norse(tmp_path):
    src = cuba_file(tmp_path / "cuba.nir")
    graph = load_nir(src, dt=1e-3, scheme="norse")
    x = spikes((5,), steps=60, seed=10)
    report, _ = target(graph, x, nir_consumer="norse")
    norse = report["consumers"]["norse"]
    assert norse["ran"] is True and norse["spike_exact"] is True and norse["spike_count"] > 0


def test_cubalif_for_snntorch_is_run_by_snntorch(tmp_path):
    src = cuba_file(tmp_path / "cuba.nir")
    graph = load_nir(src, dt=1e-4, scheme="snntorch")
    x = spikes((5,), steps=60, seed=11)
    report, files = target(graph, x, nir_consumer="snntorch")
    node, = [v for v in nir.read(written(tmp_path, files)).nodes.values() if isinstance(v, nir.CubaLIF)]
    np.testing.assert_allclose(param(node, "r") * 1e-4 / param(node, "tau_mem"), 1.0, rtol=1e-15)
    snn = report["consumers"]["snntorch"]
    assert snn["ran"] is True and snn["spike_exact"] is True and snn["spike_count"] > 0


# -- spikec's subtract-reset lif: the CubaLIF cycle the consumers run; with its membrane read, LI + Threshold ---------
def _subtract_graph(beta, alpha, theta, membrane=False):
    ctx = ConvertContext()
    node = Node("input", "input", (), TensorType((6,), "binary"))
    ctx.nodes.append(node)
    ctx.types["input"] = node.type
    y = ctx.emit("fc", "linear", ["input"], {}, {"weight": np.random.default_rng(12).normal(0.4, 0.3, (4, 6))})
    p = {"beta": beta, "alpha": alpha, "bias": 0.0, "threshold": theta, "v_reset": 0.0}
    out = ctx.emit("soft", "lif", [y], {"reset": "subtract"}, p)
    outs = (out, ctx.emit("soft.membrane", "lif", [y], {"reset": "subtract", "output": "membrane"}, p)) \
        if membrane else (out,)
    return verify(Graph(tuple(ctx.nodes), outs))


@pytest.mark.parametrize("beta, alpha, theta", [(0.75, 1.0, 1.0), (1.0, 1.0, 1.0), (0.75, 0.5, 0.7),
                                                 (np.array([0.5, 0.6, 0.7, 0.8]), 1.0, 1.0)])
def test_subtract_reset_spikes_run_in_the_consumers(beta, alpha, theta):
    """U_t = beta (U_{t-1} - θ S_{t-1}) + alpha X_t, S = [U >= θ]: a CubaLIF whose current is U/alpha, and the
    -beta θ/alpha feedback through an identity; snnTorch, Norse and SpikingJelly (one value per parameter) run it."""
    graph = _subtract_graph(beta, alpha, theta)
    x = spikes((6,), seed=13)
    assert run(graph, x).values["soft"].sum() > 100
    report, _ = target(graph, x)
    assert report["exact"] is True and report["ok"] is True and report["nodes"]["CubaLIF"] == 1
    assert "Threshold" not in report["nodes"] and any(composed.LIF_NOTE in n for n in report["notes"])
    runs = ("snntorch", "norse") + (("spikingjelly",) if np.ndim(beta) == 0 else ())
    for name in runs:
        c = report["consumers"][name]
        assert c["ran"] and c["spike_exact"] and c["spike_count"] > 100, (name, c)


def test_subtract_reset_feedback_is_needed():
    """Without the -beta θ/alpha feedback the same CubaLIF is a zero-reset neuron: other spikes in Norse."""
    graph = _subtract_graph(0.75, 1.0, 1.0)
    x = spikes((6,), seed=13)
    g = export_graph(graph).graph
    fb = [n for n in g.nodes if n.endswith("_reset")]
    assert len(fb) == 1
    g.nodes[fb[0]].weight = np.zeros_like(g.nodes[fb[0]].weight)
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        nir.write(f"{d}/m.nir", g)
        y, _ = consumers.run_consumer("norse", f"{d}/m.nir", x, 1e-4, (4,))
    assert (y != run(graph, x).values["soft"]).any()


def test_subtract_reset_with_membrane_read_is_reported_per_consumer():
    """Its membrane read too: LI + Threshold + the feedback, which no consumer reads (said per consumer)."""
    graph = _subtract_graph(0.75, 1.0, 1.0, membrane=True)
    x = spikes((6,), seed=13)
    assert run(graph, x).values["soft"].sum() > 0
    report, _ = target(graph, x)
    assert report["exact"] is True
    snn, nor = report["consumers"]["snntorch"], report["consumers"]["norse"]
    assert snn["ran"] is False and "subtract-reset neuron" in snn["reason"] and "reset to zero" in snn["reason"]
    assert nor["ran"] is False and "subtract-reset neuron" in nor["reason"] and "drops LI" in nor["reason"]


def test_pytorch_graph_for_norse_has_r_1_and_norse_reproduces_it(tmp_path):
    """A traced graph (alpha = 1, beta = 0.9): Norse's form keeps r = 1 and scales the state by dt/tau."""
    ctx = ConvertContext()
    node = Node("input", "input", (), TensorType((6,), "binary"))
    ctx.nodes.append(node)
    ctx.types["input"] = node.type
    y = ctx.emit("fc", "linear", ["input"], {}, {"weight": np.random.default_rng(14).normal(0.3, 0.4, (5, 6)),
                                                  "bias": np.zeros(5)})
    out = ctx.emit("lif1", "lif", [y], {"reset": "zero"},
                   {"beta": 0.9, "alpha": 1.0, "bias": 0.0, "threshold": 1.0, "v_reset": 0.0})
    graph = verify(Graph(tuple(ctx.nodes), (out,)))
    x = spikes((6,), seed=15)
    report, files = target(graph, x, nir_consumer="norse")
    assert report["scheme"] == "norse" and report["dt"] == 1e-4 and report["exact"] is True
    assert "not read from NIR" in report["time_base"]
    lif = nir.read(written(tmp_path, files)).nodes["lif1"]
    np.testing.assert_array_equal(param(lif, "r"), 1.0)
    norse = report["consumers"]["norse"]
    assert norse["ran"] is True and norse["spike_exact"] is True and norse["spike_count"] > 0


STATES = {
    "li": lambda: nir.LI(tau=np.full(4, 3e-3), r=np.full(4, 2.0), v_leak=np.full(4, 0.1)),
    "i": lambda: nir.I(r=np.full(4, 3.0)),
    "cubali": lambda: nir.CubaLI(tau_syn=np.full(4, 2e-3), tau_mem=np.full(4, 5e-3), r=np.full(4, 1.5),
                                 v_leak=np.zeros(4), w_in=np.full(4, 2.0)),
    "cubalif_leak_reset": lambda: nir.CubaLIF(tau_syn=np.full(4, 2e-3), tau_mem=np.full(4, 5e-3), r=np.full(4, 1.5),
                                              v_leak=np.full(4, .01), v_threshold=np.full(4, .05),
                                              v_reset=np.full(4, .01), w_in=np.full(4, 2.0)),
}


@pytest.mark.parametrize("scheme", ["snntorch", "norse"])
@pytest.mark.parametrize("kind", sorted(STATES))
def test_state_outputs_round_trip(kind, scheme, tmp_path):
    """LI, I, CubaLI read out as states, and a CubaLIF with v_leak and v_reset: read -> export -> same outputs."""
    src = tmp_path / "src.nir"
    w = np.random.default_rng(16).normal(0.5, 0.5, (4, 5)).astype(np.float32)
    nir.write(src, nir.NIRGraph.from_list(nir.Affine(w, np.zeros(4, np.float32)), STATES[kind]()))
    x = spikes((5,), steps=30, seed=17)
    graph = load_nir(src, dt=1e-3, scheme=scheme)
    path = tmp_path / "back.nir"
    nir.write(path, export_graph(graph).graph)
    before = interpreter.run(src, x, dt=1e-3, scheme=scheme).values["output"]
    after = interpreter.run(path, x, dt=1e-3, scheme=scheme).values["output"]
    assert np.abs(before).sum() > 0
    np.testing.assert_allclose(after, before, rtol=1e-12, atol=1e-12 * np.abs(before).max())
    kinds = {type(v).__name__ for v in nir.read(path).nodes.values()}
    assert {"li": "LI", "i": "I", "cubali": "CubaLI", "cubalif_leak_reset": "CubaLIF"}[kind] in kinds
    if kind == "cubalif_leak_reset":
        report, _ = target(graph, x)
        for name in ("snntorch", "norse"):
            c = report["consumers"][name]
            assert c["ran"] is False and "v_leak != 0" in c["reason"] and "v_reset != 0" in c["reason"]


def test_the_cli_option_reaches_the_exporter_and_verify_replays_it(tmp_path):
    """``spikec compile FILE.nir --nir-consumer norse --target nir`` writes Norse's form; verify passes."""
    import json as _json
    from click.testing import CliRunner
    from spikec.app.cli import main
    paper = Path(__file__).resolve().parents[2] / "fixtures" / "nir_paper" / "lif_norse.nir"
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["compile", str(paper), "--dt", "1e-3", "--nir-scheme", "norse", "--nir-consumer",
                                    "norse", "--target", "nir", "--steps", "12", "--batch", "2", "-o", str(out)])
    assert res.exit_code == 0, res.output
    report = _json.loads((out / "report.json").read_text())
    assert report["options"]["nir_consumer"] == "norse" and report["target"]["consumer"] == "norse"
    assert CliRunner().invoke(main, ["verify", str(out)]).exit_code == 0
