"""The shipped TTFS examples compile, verify and keep their accuracy (B1 exact; LayerNorm approximate)."""
from pathlib import Path

import numpy as np
import pytest

import spikec.codings.ttfs  # noqa: F401
from spikec.app import loader
from spikec.app.driver import CompileOptions, load_source, make_inputs
from spikec.frontend import trace
from spikec.core.passes import run_passes
from spikec.codings.ttfs.timing_pass import make_pass
from spikec.targets.ttfs import compile_ttfs
from spikec.codings.ttfs import summary_lines

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "ttfs"


def _compile(name, **options):
    opts = CompileOptions(f"{EXAMPLES / name}.py:{name}")
    model = load_source(opts)
    x, shape, _ = make_inputs(model, opts)                # what `spikec compile` verifies on
    kind, ceiling = loader.value_kind(x)
    graph = trace(model, shape, input_kind=kind, ceiling=ceiling)
    return model, graph, x, compile_ttfs(model, graph, x, options)


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_relu_examples_are_exact(name):
    _, _, _, res = _compile(name, states=(16,))
    rep = res.report
    assert res.ok and rep["exact"] and rep["max_abs_error"] <= 1e-6 and rep["max_rel_window_error"] <= 1e-9
    assert rep["spikes_per_neuron"] <= 1 and rep["max_spikes_per_neuron"] == 1
    acc = rep["accuracy"]
    assert acc["samples"] == 450 and acc["ann"] == acc["ttfs"] and acc["ann"] > 0.95
    assert acc["prediction_agreement"] == 1.0
    assert rep["checks"]["verification"]["clipped_fraction"] == 0.0
    assert rep["latency"] == len(rep["layers"])          # one unit window per layer, input included
    assert [d["states_per_neuron"] for d in rep["discrete"]] == [64.0, 16.0]
    assert summary_lines(rep)


def test_layernorm_example_is_approximate_and_says_so():
    _, _, _, res = _compile("mlp_ln", states=())
    rep = res.report
    assert res.ok and rep["exact"] is False and rep["approximations"]
    assert rep["approximations"][0]["measured"]["evaluation"]["max_abs_error"] < 1e-2
    assert rep["accuracy"]["ttfs"] >= rep["accuracy"]["ann"] - 0.01


def test_transformer_block_is_exact_to_its_decomposition_and_counts_as_the_formula_says():
    """models.md 4(b): per token 16d + 2N + 2H + 6 neurons (H: 1/sqrt hidden units) besides input and head."""
    model, _, _, res = _compile("transformer", states=(), max_samples=200)
    rep = res.report
    assert res.ok and rep["exact"] is False and len(rep["approximations"]) == 2
    d, n_tok, hidden = 16, 8, rep["approximations"][0]["rsqrt_hidden"]
    per_token = (rep["spikes"]["neurons_excluding_input"] - 10) / n_tok
    assert per_token == 16 * d + 2 * n_tok + 2 * hidden + 6
    assert rep["accuracy"]["ttfs"] == rep["accuracy"]["ann_decomposed"]
    assert rep["max_spikes_per_neuron"] == 1 and rep["spikes_per_neuron"] < 1


def test_the_pass_runs_under_the_pass_manager():
    model, graph, x, _ = _compile("mlp", states=())
    cal = np.concatenate([model.calibration_data(), x], axis=1)
    deployed, (record,) = run_passes(graph, [make_pass(cal)], x)
    assert record.name == "assign_ttfs_timing" and record.spike_mismatches == 0
    assert record.comparison["equivalent"] and record.max_rel_diff <= 1e-9
    assert {n.op for n in deployed.nodes} >= {"ttfs_encode", "ttfs_charge", "ttfs_fire", "ttfs_decode"}
