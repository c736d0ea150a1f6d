"""The Python API: spikec.compile / Compilation / spikec.verify, with the CLI's named errors (one Lava compile)."""
import subprocess
import sys

import numpy as np
import pytest
import torch

import spikec
from spikec.ir.errors import BadInput, ModelLoadError, SpikecError
from spikec.app.loader import load_factory
from app_helpers import HERE, REPO, cli

MODELS = HERE / "models.py"
# loaded by path, as a user's script might: the class's module is not in sys.modules, its file is still found
SmallConvLIF, one_output = (load_factory(f"{MODELS}:{name}") for name in ("SmallConvLIF", "one_output"))


def spikes(shape, seed=0, dtype=np.float32):
    return (np.random.default_rng(seed).random(shape) < 0.4).astype(dtype)


def test_one_compile_of_a_module_instance_is_exact_on_lava_nir_and_onnx(tmp_path):
    net = SmallConvLIF()                      # left in training mode: the compile works on a private copy
    x = torch.as_tensor(spikes((4, 2, 1, 6, 6)))
    c = spikec.compile(net, x, targets=("lava", "nir", "onnx"))
    assert c.equivalent, c.report["targets"]
    assert c.targets["lava"]["bit_exact"] is True
    assert c.targets["nir"]["exact"] is True
    assert c.targets["onnx"]["spike_exact"] is True
    assert c.report["targets"] is c.targets and c.report["target"] is None  # several targets: no single `target`
    assert net.training and c.report["input"]["source"] == "the given array" and c.report["input"]["samples"] == 2
    assert [n.name for n in c.graph.nodes] and c.graph.outputs
    recorded = c.compiled.io
    assert np.array_equal(c.run(recorded["input"]), recorded["output"])
    assert c.report["provenance"]["instance"]["class"].endswith(".SmallConvLIF")
    assert c.report["provenance"]["instance"]["file"]["path"] == str(MODELS)
    out = c.save(tmp_path / "out")
    assert out == tmp_path / "out"
    assert {"lava", "model.nir", "model.onnx", "report.json"} <= {p.name for p in out.iterdir()}
    assert {p.name for p in (out / "source").iterdir()} == {"models.py", "weights.pt"}  # the class rebuilds: Net()
    results = spikec.verify(out, run_source=True)  # OUTDIR's copy of the class's file runs only when asked
    assert all(r["equivalent"] for r in results.values()), results
    assert {"target_lava", "target_nir", "target_onnx", "source_vs_deployed", "passes_replayed"} <= set(results)


def test_a_factory_string_and_an_npz_path(tmp_path):
    np.savez(tmp_path / "x.npz", input=spikes((4, 3, 1, 6, 6), seed=1))
    c = spikec.compile(f"{MODELS}:small_conv_lif", tmp_path / "x.npz", targets=("nir", "onnx"))
    assert c.equivalent and set(c.targets) == {"nir", "onnx"}
    assert c.report["input"]["source"].startswith("file ") and c.report["input"]["samples"] == 3
    out = c.save(tmp_path / "out")
    assert (out / "source" / "models.py").is_file()
    results = spikec.verify(out)
    assert all(r["equivalent"] for r in results.values()) and results["source_not_run"]["not_run"]


def test_random_inputs_a_single_target_and_several_outputs(tmp_path):
    c = spikec.compile(f"{MODELS}:two_outputs", targets="onnx", batch=3, steps=2, probes=False)
    assert c.equivalent and c.report["target"]["name"] == "onnx" and c.report["input"]["batch"] == 3
    s, y = c.run(c.compiled.io["input"])     # a tuple, as the source returns it
    assert np.array_equal(s, c.compiled.io["output"]) and np.allclose(y, c.compiled.io["output1"], rtol=1e-12)


@pytest.mark.parametrize("call,error,phrase", [
    (lambda: spikec.compile(f"{MODELS}:small_conv_lif", spikes((4, 2, 1, 5, 5)), targets="none"),
     BadInput, "per-step shape (1, 5, 5)"),
    (lambda: spikec.compile(f"{MODELS}:small_conv_lif", [[1.0]], targets="none"), BadInput, "not an array"),
    (lambda: spikec.compile(42), BadInput, "the model is a int"),
    (lambda: spikec.compile(f"{MODELS}:nope"), ModelLoadError, "factory 'nope' not found"),
    (lambda: spikec.compile(f"{MODELS}:exits_zero", targets="none"), BadInput, "sys.exit"),
    (lambda: spikec.compile(f"{MODELS}:small_conv_lif", targets="loihi9"), BadInput, "'loihi9'"),
    (lambda: spikec.compile(f"{MODELS}:small_conv_lif", targets=("lava", "lava")), BadInput, "named twice"),
    (lambda: spikec.compile(f"{MODELS}:small_conv_lif", "missing.npz", targets="none"), BadInput, "missing.npz"),
    (lambda: spikec.compile(f"{MODELS}:small_conv_lif", spikes((4, 2, 1, 6, 6)) * np.nan, targets="none"),
     BadInput, "NaN"),
    (lambda: spikec.verify(REPO), BadInput, "not an OUTDIR"),
])
def test_bad_input_raises_a_named_error_with_a_remedy(call, error, phrase):
    with pytest.raises(error) as e:
        call()
    assert phrase in e.value.message() and e.value.remedy, e.value.message()


def test_an_unforeseen_exception_is_wrapped_at_the_boundary(monkeypatch):
    import spikec.app.api as api

    def broken(*args, **kwargs):
        raise ZeroDivisionError("deep inside")
    monkeypatch.setattr(api, "compile_model", broken)
    with pytest.raises(spikec.UnexpectedError) as e:
        spikec.compile(f"{MODELS}:small_conv_lif", targets="none")
    assert isinstance(e.value, SpikecError) and isinstance(e.value.__cause__, ZeroDivisionError)
    assert "unexpected ZeroDivisionError: deep inside" in e.value.message() and "report" in e.value.remedy


def test_an_instance_its_class_cannot_rebuild_verifies_only_against_a_model(tmp_path):
    net = one_output()                        # an nn.Sequential: Sequential() is not this network
    c = spikec.compile(net, targets="none")
    record = c.report["provenance"]["instance"]
    assert record["factory"] is None and "different module" in record["not_rebuildable"]
    out = c.save(tmp_path / "out")
    assert {p.name for p in (out / "source").iterdir()} == {"weights.pt"}
    with pytest.raises(BadInput) as e:
        spikec.verify(out, run_source=True)
    assert "compiled from a module instance (torch.nn.modules.container.Sequential)" in e.value.what
    assert "--model FILE.py:factory --weights" in e.value.remedy and "spikec.verify(outdir, model=" in e.value.remedy
    note = spikec.verify(out)["source_not_run"]  # by default: the IR checks, and what it takes to check the source
    assert "module instance, torch.nn.modules.container.Sequential" in note["reason"]
    assert "spikec.verify(outdir, model=" in note["remedy"]
    assert all(r["equivalent"] for r in spikec.verify(out, model=net).values())
    result = cli("verify", out, "--run-source")
    assert result.exit_code == 2 and "module instance" in result.output and "remedy" in result.output
    result = cli("verify", out)
    assert result.exit_code == 0 and "NOT RUN" in result.output and "module instance" in result.output
    result = cli("verify", out, "--model", f"{MODELS}:one_output", "--weights", out / "source" / "weights.pt")
    assert result.exit_code == 0, result.output


def test_import_spikec_nn_stays_light():
    code = ("import sys, spikec, spikec.nn; assert 'spikec.app' not in sys.modules; "
            "assert callable(spikec.compile) and 'spikec.app.api' in sys.modules; print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.stdout.strip() == "ok", done.stderr
