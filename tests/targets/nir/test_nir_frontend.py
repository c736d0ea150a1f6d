"""The NIR frontend: files written by snnTorch's own exporter, IR -> NIR -> IR round trips, bad files."""
import importlib.util
import json
from pathlib import Path

import nir
import numpy as np
import pytest
from click.testing import CliRunner

from spikec.core.checker import compare_graphs, compare_with_torch
from spikec.app.cli import main
from spikec.ir.errors import BadInput, UnsupportedOp
from spikec.frontend import ConvertContext, trace
from spikec.core.interpreter import run
from spikec.ir.graph import Graph, Node, TensorType
from spikec.core.verify import verify
from spikec.targets.nir import check_file
from spikec.formats.nir import interpreter as nir_interp
from spikec.targets.nir.export import export_graph
from spikec.frontend.nir_file import load_nir, nir_model

HERE = Path(__file__).resolve().parent
MODELS = HERE / "models.py"
SNNTORCH_FILE = HERE / "golden" / "snntorch_conv.nir"

snntorch = pytest.importorskip("snntorch", reason="snnTorch 1.0.0 is a test dependency")


def models():
    spec = importlib.util.spec_from_file_location("spikec_nir_test_models", MODELS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def spikes(seed, shape, steps=8, batch=3, p=0.4):
    return (np.random.default_rng(seed).random((steps, batch, *shape)) < p).astype(np.float64)


def test_golden_snntorch_file_is_what_snntorch_writes(tmp_path):
    fresh = nir.read(models().write_snntorch_file(tmp_path / "fresh.nir"))
    golden = nir.read(SNNTORCH_FILE)
    assert {k: type(v).__name__ for k, v in fresh.nodes.items()} == {k: type(v).__name__ for k, v in golden.nodes.items()}
    assert sorted(fresh.edges) == sorted(golden.edges)
    for k in ("1", "4"):
        np.testing.assert_array_equal(fresh.nodes[k].tau, golden.nodes[k].tau)


@pytest.mark.parametrize("scheme", ["snntorch", "norse"])
def test_snntorch_file_compiles_and_matches_snntorch(scheme):
    graph = load_nir(SNNTORCH_FILE, scheme=scheme)
    assert [n.op for n in graph.nodes] == ["input", "conv2d", "lif", "flatten", "linear", "lif"]
    x = spikes(0, (1, 6, 6))
    ours = run(graph, x).values[graph.outputs[0]]
    ref = nir_interp.run(SNNTORCH_FILE, x, dt=1e-4, scheme=scheme).values["output"]
    np.testing.assert_array_equal(ours, ref)
    # and snnTorch itself, importing its own file, agrees
    from spikec.targets.nir.consumers import run_consumer
    theirs, _ = run_consumer("snntorch", SNNTORCH_FILE, x, 1e-4, (5,))
    np.testing.assert_array_equal(theirs, ours)
    assert ours.sum() > 0


def test_snntorch_file_through_the_driver(tmp_path):
    """``spikec compile`` of a NIR model (a factory returning the frontend's module), re-exported to NIR."""
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["compile", f"{MODELS}:snntorch_file", "-o", str(out), "--target", "nir",
                                       "--steps", "6", "--batch", "3"])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["frontend"]["equivalent"] and report["frontend"]["spikes_compared"] > 0
    assert report["target"]["exact"] and report["target"]["consumers"]["norse"]["spike_exact"]
    assert report["target"]["consumers"]["snntorch"]["spike_exact"]


def test_trace_of_the_nir_module_is_checked_against_the_nir_interpreter():
    model = nir_model(SNNTORCH_FILE, dt=1e-4, scheme="norse")
    assert model.input_shape == (1, 6, 6)
    graph = trace(model, model.input_shape)
    x = spikes(1, model.input_shape)
    assert compare_with_torch(model, graph, x).equivalent


# -- round trips IR -> NIR -> IR on seeded random networks ----------------------------------
def random_network(seed: int) -> Graph:
    rng = np.random.default_rng(seed)
    ctx = ConvertContext()
    c0 = int(rng.integers(1, 3))
    node = Node("input", "input", (), TensorType((c0, 6, 6), "binary"))
    ctx.nodes.append(node)
    ctx.types["input"] = node.type
    x, c = "input", c0

    def lif(name, x, c, per_channel):
        reset = str(rng.choice(["zero", "subtract"]))
        beta = rng.uniform(0.3, 0.95, c) if per_channel else float(rng.uniform(0.3, 0.95))
        params = {"beta": beta, "alpha": float(rng.choice([1.0, rng.uniform(0.5, 2)])),
                  "bias": float(rng.choice([0.0, rng.uniform(-0.1, 0.1)])),
                  "threshold": rng.uniform(0.3, 1.0, c) if per_channel else float(rng.uniform(0.3, 1.0)),
                  "v_reset": float(rng.choice([0.0, rng.uniform(-0.2, 0.2)]))}
        return ctx.emit(name, "lif", [x], {"reset": reset}, params)

    for layer in range(int(rng.integers(1, 3))):
        c_out = int(rng.integers(2, 5))
        x = ctx.emit(f"conv{layer}", "conv2d", [x], {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1),
                                                     "groups": 1},
                     {"weight": rng.normal(0.1, 0.5, (c_out, c, 3, 3)), "bias": rng.normal(0, 0.1, c_out)})
        c = c_out
        x = lif(f"lif{layer}", x, c, bool(rng.integers(0, 2)))
        if rng.integers(0, 2):
            x = ctx.emit(f"pool{layer}", "avgpool2d", [x], {"kernel": (2, 2), "stride": (2, 2), "padding": (0, 0),
                                                            "ceil_mode": False, "count_include_pad": True})
            x = lif(f"lifp{layer}", x, c, False)
    x = ctx.emit("flat", "flatten", [x], {"start": 0, "end": 2})
    n_in = ctx.type(x).shape[0]
    x = ctx.emit("fc", "linear", [x], {}, {"weight": rng.normal(0.1, 0.5, (5, n_in)), "bias": rng.normal(0, .1, 5)})
    x = lif("out", x, 5, True)
    return verify(Graph(tuple(ctx.nodes), (x,)))


@pytest.mark.parametrize("seed", range(6))
def test_round_trip_on_random_networks(seed, tmp_path):
    """A subtract-reset lif is written as the CubaLIF reset cycle (``composed.lif_subtract``) and read back as a
    subtract-reset lif (``spikec.frontend.nir_cycles``), in both schemes."""
    graph = random_network(seed)
    path = tmp_path / "m.nir"
    nir.write(path, export_graph(graph).graph)
    x = spikes(seed, graph.inputs[0].type.shape, steps=10)
    reference = run(graph, x)
    fired = [reference.values[n.name].sum() > 0 for n in graph.nodes if n.op == "lif"]
    assert all(fired), fired
    assert check_file(path, graph, x, reference, with_consumers=False)["exact"]
    for scheme in ("snntorch", "norse"):
        back = load_nir(path, scheme=scheme)
        result = compare_graphs(graph, back, x)
        assert result.equivalent, result.describe()
        assert len(result.nodes_compared) >= 4  # names survive the round trip (from the file's metadata)


# -- malformed and unsupported files ---------------------------------------------------------
def _write(path, nodes, edges, type_check=True):
    nir.write(path, nir.NIRGraph(nodes=nodes, edges=edges, metadata={}, type_check=type_check))
    return path


def test_unsupported_files_name_the_node(tmp_path):
    n = 4
    io_ = {"input": nir.Input(np.array([n])), "output": nir.Output(np.array([n]))}
    rec = _write(tmp_path / "rec.nir", {**io_, "lif": nir.LIF(tau=np.full(n, 1e-3), r=np.ones(n), v_leak=np.zeros(n),
                                                             v_threshold=np.ones(n)),
                                       "w": nir.Linear(weight=np.ones((n, n)))},
                 [("input", "lif"), ("lif", "w"), ("w", "lif"), ("lif", "output")])
    with pytest.raises(UnsupportedOp, match="NIR node 'lif'.*recurrent edge"):
        load_nir(rec)
    varying = _write(tmp_path / "vary.nir", {
        "input": nir.Input(np.array([2, 3, 3])),
        "lif": nir.LIF(tau=np.arange(1, 19, dtype=float).reshape(2, 3, 3) * 1e-3, r=np.ones((2, 3, 3)),
                       v_leak=np.zeros((2, 3, 3)), v_threshold=np.ones((2, 3, 3))),
        "output": nir.Output(np.array([2, 3, 3]))}, [("input", "lif"), ("lif", "output")])
    with pytest.raises(UnsupportedOp, match="NIR node 'lif'.*tau varies within a channel"):
        load_nir(varying)
    conv1d = _write(tmp_path / "c1.nir", {
        "input": nir.Input(np.array([2, 8])),
        "c": nir.Conv1d(input_shape=8, weight=np.ones((2, 2, 3)), stride=1, padding=1, dilation=1, groups=1,
                        bias=np.zeros(2)),
        "output": nir.Output(np.array([2, 8]))}, [("input", "c"), ("c", "output")])
    with pytest.raises(UnsupportedOp, match="NIR node 'c' \\(Conv1d\\)"):
        load_nir(conv1d)
    delay = _write(tmp_path / "d.nir", {**io_, "d": nir.Delay(delay=np.full(n, 1.5e-4))},
                   [("input", "d"), ("d", "output")])
    with pytest.raises(UnsupportedOp, match="NIR node 'd'.*whole number"):
        load_nir(delay)
    assert [x.op for x in load_nir(delay, dt=0.5e-4).nodes] == ["input", "delay"]
    text = tmp_path / "text.nir"
    text.write_text("hello")
    with pytest.raises(BadInput, match="not a readable NIR file"):
        load_nir(text)
    with pytest.raises(BadInput, match="scheme"):
        load_nir(SNNTORCH_FILE, scheme="rk4")
