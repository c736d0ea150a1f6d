"""Exact-source Lava deployment: a model of spikec.nn.loihi modules is deployed with its own integers and Lava's
fixed-point simulation equals the source's forward bit for bit (``bit_exact_vs_source``); a one-LSB change to any
deployed weight breaks it and names the layer; the float digits demo stays approximate."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import spikec.nn as snn
from spikec.app.driver import CompileOptions, compile_model
from spikec.frontend.tracing import trace
from spikec.targets.lava import exact_source, lava_available
from spikec.targets.lava.lower import lower

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
LOIHI = EXAMPLES / "digits_loihi"
needs_lava = pytest.mark.skipif(lava_available() is not None, reason=f"Lava unavailable: {lava_available()}")


def _example_model():
    spec = importlib.util.spec_from_file_location("digits_loihi_model", LOIHI / "model.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    m = mod.small()
    m.load_state_dict(torch.load(LOIHI / "checkpoint.pt"))
    return m


@needs_lava
@pytest.mark.parametrize("shipped", [True, False], ids=["shipped_inputs", "random_inputs"])
def test_example_is_bit_exact_against_its_source(shipped):
    opts = dict(inputs=str(LOIHI / "inputs.npz")) if shipped else dict(batch=6, seed=3)
    c = compile_model(CompileOptions(model=f"{LOIHI / 'model.py'}:small", weights=str(LOIHI / "checkpoint.pt"),
                                     target="lava", **opts))
    t = c.report["target"]
    assert t["bit_exact_vs_source"] is True and t["exact_source"] is True and not t["mismatch_counts"]
    assert t["spikes_compared"] > 0 and t["values_compared"] > 0 and t["states_compared"] > 0
    assert {p["type"] for p in t["processes"]} >= {"LIF", "SpikecLIF", "Conv", "Dense", "LIFReadout"}
    assert "bit_exact_vs_source true" in t["summary"]


@needs_lava
def test_one_lsb_in_any_weight_is_found_and_named():
    g = trace(_example_model(), (1, 8, 8))
    q = exact_source.integer_graph(g)
    net, arrays = lower(q)
    x = {"input": (np.random.default_rng(0).random((6, 2, 1, 8, 8)) < 0.5).astype(np.float64)}
    src = exact_source.source_values(g, x)
    assert exact_source.check(g, q, net, arrays, x)["bit_exact"]
    busiest = int(src["flat.0"].sum((0, 1)).argmax())
    for key, index, layer in (("conv1/weight", (0, 1, 1, 0), "conv1"), ("conv2/weight", (0, 1, 1, 0), "conv2"),
                              ("head.synapse/weights", (0, busiest), "head.synapse")):
        bad = {k: v.copy() for k, v in arrays.items()}
        bad[key][index] += 2 if bad[key][index] < 200 else -2   # one LSB of a mixed-sign 8-bit mantissa
        r = exact_source.check(g, q, net, bad, x)
        assert r["bit_exact"] is False, layer
        assert r["first_divergent_layer"]["synapse"] == layer


def test_only_all_loihi_models_are_exact_source():
    mixed = nn.Sequential(snn.loihi.Dense(4, 3), snn.LIF())
    g = trace(mixed, (4,))
    assert not exact_source.applies(g) and exact_source.blocking_nodes(g) == ["1 (lif)"]
    assert exact_source.applies(trace(_example_model(), (1, 8, 8)))


@needs_lava
def test_float_demo_stays_approximate():
    d = EXAMPLES / "digits"
    c = compile_model(CompileOptions(model=f"{d / 'model.py'}:small", weights=str(d / "checkpoint.pt"),
                                     inputs=str(d / "inputs.npz"), target="lava"))
    t = c.report["target"]
    assert t["bit_exact"] is True and t["bit_exact_vs_source"] is False
    spikes = [a["spike_agreement"] for a in t["float_vs_fixed"]["per_layer"].values() if "spike_agreement" in a]
    assert spikes and 0.9 < min(spikes) < 1.0
    assert "bit_exact_vs_source false" in t["summary"]


@needs_lava
def test_verify_rechecks_an_exact_source_outdir_against_the_source(tmp_path):
    """``spikec verify`` re-derives the integer graph without calibration and re-runs Lava against the source;
    a written weight changed by one LSB fails it."""
    from click.testing import CliRunner
    from spikec.app.cli import main
    from spikec.targets.lava.lower import load_network, save_network
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["compile", f"{LOIHI / 'model.py'}:small", "--weights", str(LOIHI / "checkpoint.pt"),
                                    "--inputs", str(LOIHI / "inputs.npz"), "--target", "lava", "-o", str(out)])
    assert res.exit_code == 0, res.output
    ok = CliRunner().invoke(main, ["verify", str(out)])
    assert ok.exit_code == 0 and "target_lava          ok" in ok.output, ok.output
    net, arrays = load_network(out / "lava")
    key = next(k for k in sorted(arrays) if k.endswith("weights"))
    arrays[key] = arrays[key].copy()
    arrays[key].flat[0] += 2  # one LSB of a mixed-sign mantissa
    save_network(net, arrays, out / "lava")
    bad = CliRunner().invoke(main, ["verify", str(out)])
    assert bad.exit_code == 1, bad.output
