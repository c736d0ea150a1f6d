"""Consumer conformance: files written by ``--target nir`` run in the real snnTorch 1.0.0 and Norse 1.1.0.

The "done when" of issue 7: a hard-reset LIF conv network compiles to a ``model.nir`` that snnTorch's
``import_from_nir`` and Norse's ``from_nir`` import and run with spikes identical to ``io.npz``. The check
here drives both importers directly (independently of ``spikec.targets.nir.consumers``), so the report's
own consumer runs are cross-checked too. No mocks: a missing package skips with the reason.
"""
import contextlib
import io
import json
import logging
import warnings
from pathlib import Path

import nir
import numpy as np
import pytest
import torch
from click.testing import CliRunner

from spikec.app.cli import main

HERE = Path(__file__).resolve().parent
MODELS = HERE / "models.py"

snntorch = pytest.importorskip("snntorch", reason="snnTorch 1.0.0 is a test dependency (pip install snntorch==1.0.0)")
norse = pytest.importorskip("norse.torch", reason="Norse 1.1.0 is a test dependency "
                            "(pip install --no-deps norse==1.1.0 nirtorch==2.6)")


def compile_to(tmp, factory, *extra):
    out = Path(tmp) / factory
    result = CliRunner().invoke(main, ["compile", f"{MODELS}:{factory}", "-o", str(out), "--target", "nir",
                                       "--batch", "6", *map(str, extra)])
    return result, out


@pytest.fixture(scope="module")
def hard_conv(tmp_path_factory):
    result, out = compile_to(tmp_path_factory.mktemp("nir"), "hard_conv")
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def hard_dense(tmp_path_factory):
    result, out = compile_to(tmp_path_factory.mktemp("nir"), "hard_dense")
    assert result.exit_code == 0, result.output
    return out


def run_importer(name: str, path: Path, x: np.ndarray) -> np.ndarray:
    """Import with the consumer's own entry point and run sample by sample, unbatched, float32."""
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            if name == "snntorch":
                from snntorch.import_nir import import_from_nir
                module = import_from_nir(nir.read(path))
            else:
                module = norse.from_nir(nir.read(path), dt=1e-4)
        finally:
            logging.disable(logging.NOTSET)
    outs = []
    with torch.no_grad():
        for b in range(x.shape[1]):
            for m in module.modules():
                if hasattr(m, "reset_mem") and hasattr(m, "init_hidden"):
                    m.reset_mem()
            state, seq = None, []
            for t in range(x.shape[0]):
                y, state = module(torch.as_tensor(x[t, b], dtype=torch.float32), state)
                seq.append(y.double().numpy())
            outs.append(np.stack(seq))
    return np.stack(outs, axis=1)


@pytest.mark.parametrize("consumer", ["snntorch", "norse"])
@pytest.mark.parametrize("model", ["hard_conv", "hard_dense"])
def test_consumer_reproduces_io_npz(consumer, model, request):
    out = request.getfixturevalue(model)
    with np.load(out / "io.npz") as z:
        x, expected = z["input"], z["output"]
    got = run_importer(consumer, out / "model.nir", x).reshape(expected.shape)
    assert expected.sum() > 0 and (expected == 0).any(), "the test network must both fire and stay silent"
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("model", ["hard_conv", "hard_dense"])
def test_report_claims_what_the_consumers_did(model, request):
    out = request.getfixturevalue(model)
    target = json.loads((out / "report.json").read_text())["target"]
    assert target["name"] == "nir" and target["exact"] is True and target["ok"] is True
    assert target["dt"] == 1e-4 and target["scheme"] == "snntorch"
    for name in ("snntorch", "norse"):
        c = target["consumers"][name]
        assert c["ran"] is True and c["spike_exact"] is True, c
        assert c["spike_mismatches"] == 0 and c["spikes_compared"] > 0
        assert c["neurons_compared"] >= 3  # every LIF hooked, plus the output


def test_file_follows_the_spec_mapping(hard_conv):
    g = nir.read(hard_conv / "model.nir")
    assert g.metadata["dt"] == 1e-4 and "nextafter" in str(g.metadata["firing"])
    lif = g.nodes["lif1"]
    assert lif.tau.shape == (4, 8, 8)  # per-neuron arrays of the per-step shape
    np.testing.assert_array_equal(lif.r, 1.0)
    np.testing.assert_array_equal(lif.v_leak, 0.0)
    np.testing.assert_array_equal(lif.v_reset, 0.0)
    beta = float(np.float32(0.8))  # spikec.nn.LIF holds float32 buffers; the IR has their exact values
    assert np.all(1 - 1e-4 / lif.tau == beta)  # snnTorch's beta, to the last bit
    gain = lif.r * 1e-4 / lif.tau
    assert np.all(lif.v_threshold / gain == np.nextafter(1.0, 0))  # U > nextafter(1) is U >= 1
    np.testing.assert_allclose(lif.v_threshold, (1 - beta) * 1.0, rtol=1e-12)  # (1 - beta) * theta
    assert list(g.nodes["input"].input_type["input"]) == [1, 8, 8]  # batch-free


def test_per_channel_beta_snntorch_refused_norse_exact(tmp_path):
    result, out = compile_to(tmp_path, "hard_conv_channel_beta")
    assert result.exit_code == 0, result.output
    c = json.loads((out / "report.json").read_text())["target"]["consumers"]
    assert c["snntorch"]["ran"] is False and "v_threshold varies" in c["snntorch"]["reason"]
    assert c["norse"]["ran"] is True and c["norse"]["spike_exact"] is True


def test_soft_reset_runs_in_the_consumers_as_its_cubalif_cycle(tmp_path):
    result, out = compile_to(tmp_path, "soft_conv")
    assert result.exit_code == 0, result.output
    target = json.loads((out / "report.json").read_text())["target"]
    assert target["exact"] is True  # the CubaLIF reset cycle, in spikec's own interpreter
    assert target["nodes"]["CubaLIF"] == 1 and "LI" not in target["nodes"] and "Threshold" not in target["nodes"]
    for name in ("snntorch", "norse"):
        c = target["consumers"][name]
        assert c["ran"] is True and c["spike_exact"] is True and c["spike_mismatches"] == 0
    # and the claim is true: each importer, run here on the written file, gives the recorded output
    with np.load(out / "io.npz") as z:
        x, expected = z["input"], z["output"]
    for name in ("snntorch", "norse"):
        got = run_importer(name, out / "model.nir", x)
        np.testing.assert_array_equal(got.reshape(expected.shape), expected)


def test_verify_rechecks_the_file_and_catches_tampering(hard_dense, tmp_path):
    result = CliRunner().invoke(main, ["verify", str(hard_dense)])
    assert result.exit_code == 0, result.output
    assert "target_nir" in result.output
    tampered = tmp_path / "out"
    import shutil
    shutil.copytree(hard_dense, tampered)
    g = nir.read(tampered / "model.nir")
    lif = g.nodes["lif1"]
    lif.v_threshold = lif.v_threshold * 0.9
    nir.write(tampered / "model.nir", g)
    result = CliRunner().invoke(main, ["verify", str(tampered)])
    assert result.exit_code == 1
    assert "target_nir" in result.output and "FAILED" in result.output
