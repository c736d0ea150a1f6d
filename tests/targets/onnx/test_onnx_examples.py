"""The shipped examples through the ONNX target: ``compile_model(..., target="onnx")`` and the CLI
(``spikec compile --target onnx`` then ``spikec verify OUT``) write a model.onnx that passes onnx.checker and
reproduces the interpreter's spikes exactly in onnxruntime; a corrupted weight in it makes verify fail.
"""
import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import numpy_helper

from spikec.app.cli import main
from spikec.app.driver import CompileOptions, compile_model, write_outdir
from spikec.core.interpreter import run
from spikec.targets.onnx import OPSET, run_model

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = {name: (f"{REPO / 'examples' / name / 'model.py'}:small", REPO / "examples" / name / "checkpoint.pt",
                   REPO / "examples" / name / "inputs.npz") for name in ("digits", "ripe")}
NEURONS = {"lif", "intfire", "intfire_unrolled", "silif", "csilif"}


pytestmark = pytest.mark.usefixtures("one_thread")   # conftest.py


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def assert_target_exact(report: dict, graph):
    t = report["target"]
    assert t["name"] == "onnx" and t["opset"] == OPSET and t["form"] == "loop" and t["dtype"] == "float64"
    assert t["form_reason"] is None
    assert t["spike_exact"] is True and t["equivalent"] is True and report["equivalent"] is True
    assert t["spike_mismatches"] == 0 and t["real_mismatches"] == 0 and t["max_rel_diff"] <= 1e-9
    assert t["outputs_compared"] == list(graph.outputs) and t["probe_outputs_match_plain"]
    # every non-input node was exposed and compared, every neuron's spikes among them
    spiking = [n for n in graph.nodes if n.op in NEURONS and n.attrs.get("output", "spikes") == "spikes"]
    assert spiking and t["nodes_compared"] == len(graph.nodes) - 1
    assert t["spikes_compared"] >= sum(int(np.prod(n.type.shape)) for n in spiking) * report["input"]["steps"] \
        * report["input"]["batch"]


@pytest.fixture(scope="module")
def compile_example(tmp_path_factory):
    """``name -> (name, Compiled, OUTDIR)``: each example compiled with --target onnx once per module."""
    done = {}

    def get(name):
        if name not in done:
            model, weights, inputs = EXAMPLES[name]
            c = compile_model(CompileOptions(model, weights=str(weights), inputs=str(inputs), target="onnx"))
            done[name] = name, c, write_outdir(tmp_path_factory.mktemp(name) / "out", c)
        return done[name]
    return get


@pytest.fixture(params=["digits", "ripe"])
def compiled(request, compile_example):
    return compile_example(request.param)


def test_compile_model_is_spike_exact(compiled):
    name, c, out = compiled
    assert_target_exact(c.report, c.graph)
    assert json.loads((out / "report.json").read_text())["target"]["spike_exact"] is True
    model = onnx.load(str(out / "model.onnx"))
    onnx.checker.check_model(model, full_check=True)
    # the written file, run directly, gives the interpreter's outputs (and the spikes of the source model)
    with np.load(out / "io.npz") as z:
        x, expected = z["input"], z["output"]
    got = run_model(model, {"input": x})[c.graph.outputs[0]]
    assert np.abs(got - expected).max() <= 1e-9 * np.abs(expected).max()


def test_written_model_runs_any_batch(compiled):
    name, c, out = compiled
    model = onnx.load(str(out / "model.onnx"))
    with np.load(out / "io.npz") as z:
        x = z["input"][:, :1]
    ref = run(c.graph, x, record="outputs")
    got = run_model(model, {"input": x})
    for o in c.graph.outputs:
        assert np.abs(got[o] - ref.values[o]).max() <= 1e-9 * np.abs(ref.values[o]).max()


@pytest.mark.parametrize("name", ["digits", "ripe"])
def test_cli_compile_and_verify(name, tmp_path):
    model, weights, inputs = EXAMPLES[name]
    out = tmp_path / "out"
    r = cli("compile", model, "--weights", weights, "--inputs", inputs, "-o", out, "--target", "onnx")
    assert r.exit_code == 0, r.output
    assert "target     onnx" in r.output and (out / "model.onnx").is_file()
    report = json.loads((out / "report.json").read_text())
    assert report["target"]["spike_exact"] is True and report["equivalent"] is True
    v = cli("verify", out)
    assert v.exit_code == 0, v.output
    line = next(l for l in v.output.splitlines() if l.startswith("target_onnx"))
    assert " ok" in line and "FAILED" not in v.output


def test_verify_fails_on_a_corrupted_weight(compile_example, tmp_path):
    """Mutation: change one weight of one initializer in model.onnx -> ``spikec verify`` exits 1, target FAILED."""
    name, c, out = compile_example("digits")
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    model = onnx.load(str(bad / "model.onnx"))
    body = next(a.g for n in model.graph.node if n.op_type == "Scan" for a in n.attribute if a.name == "body")
    init = next(i for i in body.initializer if i.name.startswith("step/conv1.1.weight"))  # the loop's body holds it
    w = numpy_helper.to_array(init).copy()
    w.flat[w.size // 2] += 1.0
    init.CopyFrom(numpy_helper.from_array(w, init.name))
    onnx.save(model, str(bad / "model.onnx"))
    r = cli("verify", bad)
    assert r.exit_code == 1, r.output
    line = next(l for l in r.output.splitlines() if l.startswith("target_onnx"))
    assert "FAILED" in line
    # the other checks (the IR itself) still pass: only the ONNX artifact is wrong; the source is not run unasked
    assert next(l for l in r.output.splitlines() if l.startswith("io_outputs")).split()[1].rstrip(":") == "ok"
    assert "NOT RUN" in next(l for l in r.output.splitlines() if l.startswith("source_vs_deployed"))
    r = cli("verify", bad, "--run-source")
    assert r.exit_code == 1, r.output
    assert next(l for l in r.output.splitlines() if l.startswith("source_vs_deployed")).split()[1].rstrip(":") == "ok"


def test_verify_fails_on_a_truncated_file(compile_example, tmp_path):
    name, c, out = compile_example("digits")
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    data = (bad / "model.onnx").read_bytes()
    (bad / "model.onnx").write_bytes(data[: len(data) // 2])
    r = cli("verify", bad)
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
