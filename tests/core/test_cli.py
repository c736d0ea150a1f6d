"""The ``spikec`` command line: end to end on the digits example, and every bad input.

Contract: exit 0 success, 1 not equivalent / verification failed, 2 bad input; no traceback
reaches the user; a failed compile leaves no OUTDIR (and no temp dirs beside it), and an
OUTDIR from an earlier successful compile is left untouched.
Runs in-process with click's CliRunner, plus one subprocess test of the console entry.
"""
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from spikec.app.cli import main

REPO = Path(__file__).resolve().parents[2]
DIGITS = REPO / "examples" / "digits"
MODEL = f"{DIGITS / 'model.py'}:small"
CKPT = DIGITS / "checkpoint.pt"
INPUTS = DIGITS / "inputs.npz"
FIXTURES = REPO / "tests" / "fixtures" / "models.py"
MODULES = ("conv1", "lif1", "conv2", "lif2", "head")


def fixture(factory: str) -> str:
    return f"{FIXTURES}:{factory}"


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def no_traceback(result):
    """The CLI handled the failure itself: no exception escaped and no traceback was printed."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output and "Traceback" not in result.stderr


def leftovers(out: Path) -> list[str]:
    """Temp/backup dirs ``.OUTDIR.tmp-*`` / ``.OUTDIR.old-*`` next to ``out``."""
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


def assert_bad_input(result, out: Path | None, *phrases):
    no_traceback(result)
    assert result.exit_code == 2, result.output
    for phrase in phrases:
        if isinstance(phrase, re.Pattern):
            assert phrase.search(result.stderr), f"{phrase.pattern!r} not in:\n{result.stderr}"
        else:
            assert phrase in result.stderr, f"{phrase!r} not in:\n{result.stderr}"
    if out is not None and out.parent.is_dir():
        assert not out.exists(), "a failed compile must not create OUTDIR"
        assert leftovers(out) == [], "a failed compile must not leave temp dirs beside OUTDIR"


def state_dict():
    return torch.load(CKPT, map_location="cpu", weights_only=True)


def save_state(path: Path, state) -> Path:
    torch.save(state, path)
    return path


def compile_digits(out, *extra):
    return cli("compile", MODEL, "--weights", CKPT, "--inputs", INPUTS, "-o", out, *extra)


# -- end to end ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def digits_out(tmp_path_factory):
    """The digits example compiled once with its checkpoint and inputs (read-only for the tests)."""
    out = tmp_path_factory.mktemp("digits") / "out"
    result = compile_digits(out)
    no_traceback(result)
    assert result.exit_code == 0, result.output
    return out


def test_compile_writes_outdir(digits_out):
    for name in ("report.json", "graph.json", "weights.npz", "io.npz"):
        assert (digits_out / name).is_file(), name
    assert leftovers(digits_out) == []


def test_report_contents(digits_out):
    report = json.loads((digits_out / "report.json").read_text())
    assert report["equivalent"] is True
    assert report["target"] is None

    params = report["params"]
    assert set(params) >= {"source", "deployed", "by_module"}
    assert set(params["by_module"]) == set(MODULES)
    for name, counts in params["by_module"].items():
        assert set(counts) == {"source", "deployed"}, name
    model = _digits_model()
    assert params["source"] == sum(p.numel() for p in model.parameters())
    for name, child in model.named_children():
        assert params["by_module"][name]["source"] == sum(p.numel() for p in child.parameters())
    # BN gamma/beta fold into a conv bias: conv1 8*1*3*3 + 8, conv2 16*8*3*3 + 16; head unchanged.
    assert params["by_module"]["conv1"]["deployed"] == 80
    assert params["by_module"]["conv2"]["deployed"] == 1168
    assert params["by_module"]["head"]["deployed"] == 16 * 4 * 4 * 10 + 10
    assert params["by_module"]["lif1"] == {"source": 0, "deployed": 0}
    assert params["deployed"] == sum(c["deployed"] for c in params["by_module"].values())

    assert "fold_batchnorm" in [p["name"] for p in report["passes"]]
    for record in report["passes"]:
        assert set(record) >= {"name", "nodes_changed", "verified", "spike_mismatches", "max_rel_diff", "seconds"}
        assert record["verified"] is True and record["spike_mismatches"] == 0
        assert record["max_rel_diff"] <= 1e-9 and record["seconds"] >= 0
    assert next(p for p in report["passes"] if p["name"] == "fold_batchnorm")["nodes_changed"]

    assert report["layers"]
    for layer in report["layers"]:
        assert set(layer) >= {"name", "op", "operand_kind", "synaptic_kind"}
        assert layer["synaptic_kind"] in ("AC", "MAC", None)
    synaptic = {l["name"]: l["synaptic_kind"] for l in report["layers"] if l["synaptic_kind"]}
    assert synaptic == {"conv1.1": "AC", "conv2.1": "AC", "head.1": "AC"}  # binary spike operands
    assert not any(l["op"] == "batchnorm" for l in report["layers"])


def test_io_npz_holds_the_given_inputs_then_the_probes(digits_out):
    report = json.loads((digits_out / "report.json").read_text())
    with np.load(INPUTS) as given, np.load(digits_out / "io.npz") as io:
        b = given["input"].shape[1]
        assert np.array_equal(io["input"][:, :b], given["input"].astype(np.float64))
        assert io["input"].shape[1] == b + report["input"]["probes"] and report["input"]["probes"] >= 6
        assert report["input"]["samples"] == b
        assert io["output"].shape == (given["input"].shape[0], io["input"].shape[1], 10)


def test_verify_ok(digits_out):
    result = cli("verify", digits_out)
    no_traceback(result)
    assert result.exit_code == 0, result.output
    assert "FAILED" not in result.output and "ok" in result.output


def test_verify_detects_tampered_weights(digits_out, tmp_path):
    from spikec.core.interpreter import run
    from spikec.core.serialize import load_graph

    out = tmp_path / "tampered"
    shutil.copytree(digits_out, out)
    # Pick a head input feature that actually spikes, so the tampered weight changes the output.
    with np.load(out / "io.npz") as io:
        x = io["input"]
    spikes = run(load_graph(out), x).values["head.0"]
    k = int(np.argmax(spikes.sum(axis=(0, 1))))
    assert spikes[..., k].any()
    with np.load(out / "weights.npz") as z:
        arrays = {key: z[key] for key in z.files}
    w = arrays["head.1/weight"].copy()
    w[3, k] += 1.0
    arrays["head.1/weight"] = w
    np.savez(out / "weights.npz", **arrays)
    with np.load(out / "weights.npz") as z:
        assert sorted(z.files) == sorted(arrays)

    result = cli("verify", out)
    no_traceback(result)
    assert result.exit_code == 1, result.output
    assert "FAILED" in result.output

    result = cli("verify", out, "--run-source", "--inputs", INPUTS)  # the source-vs-deployed check alone catches it
    no_traceback(result)
    assert result.exit_code == 1, result.output


def test_verify_of_a_non_outdir_is_bad_input(tmp_path):
    result = cli("verify", tmp_path / "nothing")
    assert_bad_input(result, None, "not an OUTDIR written by `spikec compile`")


def test_inspect_table():
    result = cli("inspect", MODEL, "--weights", CKPT)
    no_traceback(result)
    assert result.exit_code == 0, result.output
    for name in ("input", "conv1.0", "conv1.1", "lif1", "conv2.2", "lif2", "head.0", "head.1"):
        assert re.search(rf"^{re.escape(name)}\s", result.stdout, re.M), name
    assert "binary" in result.stdout and "batchnorm" in result.stdout and "real" in result.stdout


def test_inspect_json():
    result = cli("inspect", MODEL, "--weights", CKPT, "--json")
    no_traceback(result)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    names = [n["name"] for n in doc["nodes"]]
    assert names[0] == "input" and "lif1" in names and doc["outputs"] == ["head.1"]
    kinds = {n["name"]: n["type"]["kind"] for n in doc["nodes"]}
    assert kinds["input"] == "binary" and kinds["lif1"] == "binary" and kinds["head.1"] == "real"


def test_inspect_bad_input():
    result = cli("inspect", fixture("custom_neuron"))
    assert_bad_input(result, None, "register_converter")


def test_passes_none(tmp_path):
    out = tmp_path / "out"
    result = compile_digits(out, "--passes", "none")
    no_traceback(result)
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["passes"] == [] and report["equivalent"] is True
    assert any(l["op"] == "batchnorm" for l in report["layers"])
    assert report["params"]["deployed"] == report["params"]["source"]


def test_passes_named_explicitly(tmp_path):
    out = tmp_path / "out"
    result = compile_digits(out, "--passes", "fold_batchnorm")
    no_traceback(result)
    assert result.exit_code == 0, result.output
    assert [p["name"] for p in json.loads((out / "report.json").read_text())["passes"]] == ["fold_batchnorm"]


def test_random_inputs_are_deterministic_in_the_seed(tmp_path):
    common = ("compile", MODEL, "--weights", CKPT, "--steps", 3, "--batch", 2)
    ios = []
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        result = cli(*common, "--seed", seed, "-o", tmp_path / name)
        no_traceback(result)
        assert result.exit_code == 0, result.output
        with np.load(tmp_path / name / "io.npz") as z:
            ios.append({k: z[k] for k in z.files})
    a, b, c = ios
    probes = json.loads((tmp_path / "a" / "report.json").read_text())["input"]["probes"]
    assert a["input"].shape == (3, 2 + probes, 1, 8, 8)
    assert set(np.unique(a["input"])) <= {0.0, 1.0}
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["input"], c["input"])


# -- bad inputs: exit 2, a clear message, no traceback, no OUTDIR ---------------------------
def _ckpt_missing_key(tmp_path):
    state = state_dict()
    del state["head.1.bias"]
    return ["--weights", save_state(tmp_path / "missing.pt", state)]


def _ckpt_extra_key(tmp_path):
    state = state_dict()
    state["extra.weight"] = torch.zeros(3)
    return ["--weights", save_state(tmp_path / "extra.pt", state)]


def _ckpt_nan(tmp_path):
    state = state_dict()
    state["conv2.0.weight"][0, 0, 0, 0] = float("nan")
    return ["--weights", save_state(tmp_path / "nan.pt", state)]


def _ckpt_inf_buffer(tmp_path):
    state = state_dict()
    state["conv1.1.running_var"][2] = float("inf")
    return ["--weights", save_state(tmp_path / "inf.pt", state)]


def _inputs_wrong_shape(tmp_path):
    np.savez(tmp_path / "bad.npz", input=np.zeros((4, 2, 1, 9, 9)))
    return ["--weights", CKPT, "--inputs", tmp_path / "bad.npz"]


def _inputs_no_key(tmp_path):
    np.savez(tmp_path / "nokey.npz", x=np.zeros((4, 2, 1, 8, 8)))
    return ["--weights", CKPT, "--inputs", tmp_path / "nokey.npz"]


def _pickled_module(tmp_path):
    path = tmp_path / "whole.pt"
    torch.save(_fixture_models().sequential(), path)
    return ["--weights", path]


def _garbage_ckpt(tmp_path):
    path = tmp_path / "garbage.pt"
    path.write_bytes(b"this is not a checkpoint\n" * 10)
    return ["--weights", path]


BAD_COMPILES = {
    # name: (MODEL, extra args from tmp_path, phrases the message must contain)
    "missing model file": (lambda t: f"{t / 'nowhere.py'}:small", lambda t: [], ["does not exist", "nowhere.py"]),
    "no factory in spec": (lambda t: str(DIGITS / "model.py"), lambda t: [], ["names no factory"]),
    "factory not found": (lambda t: f"{DIGITS / 'model.py'}:large", lambda t: [], ["factory 'large' not found"]),
    "factory raises": (lambda t: fixture("raises"), lambda t: ["--input-shape", "1,8,8"],
                       ["factory raised RuntimeError", "exploded on purpose"]),
    "factory returns a non-module": (lambda t: fixture("not_a_module"), lambda t: [], ["not an nn.Module"]),
    "missing checkpoint file": (lambda t: MODEL, lambda t: ["--weights", t / "nope.pt"], ["does not exist"]),
    "checkpoint missing keys": (lambda t: MODEL, _ckpt_missing_key, ["missing keys", "head.1.bias"]),
    "checkpoint extra keys": (lambda t: MODEL, _ckpt_extra_key, ["unexpected keys", "extra.weight"]),
    "NaN weight": (lambda t: MODEL, _ckpt_nan, ["NaN or Inf", "conv2.0.weight"]),
    "Inf buffer": (lambda t: MODEL, _ckpt_inf_buffer, ["NaN or Inf", "conv1.1.running_var"]),
    # Wrong --input-shape: the message names the node that cannot take it, or the shape the model declares.
    "input shape: channels": (lambda t: MODEL, lambda t: ["--weights", CKPT, "--input-shape", "2,8,8"],
                              [re.compile(r"conv1\.0|1,\s*8,\s*8")]),
    "input shape: too small": (lambda t: MODEL, lambda t: ["--weights", CKPT, "--input-shape", "1,7,7"],
                               [re.compile(r"head\.1|1,\s*8,\s*8")]),
    # 9x9 happens to run through the convs and the 2x2 pool to the same 256 features, but the
    # model declares input_shape (1, 8, 8): an explicit --input-shape that contradicts it is bad input.
    "input shape: 9x9 contradicts the model": (lambda t: MODEL,
                                               lambda t: ["--weights", CKPT, "--input-shape", "1,9,9"],
                                               [re.compile(r"1,\s*8,\s*8")]),
    "input shape: not integers": (lambda t: MODEL, lambda t: ["--input-shape", "1,x,8"], ["--input-shape"]),
    "inputs file: wrong per-step shape": (lambda t: MODEL, _inputs_wrong_shape, ["per-step shape (1, 9, 9)"]),
    "inputs file: no 'input' key": (lambda t: MODEL, _inputs_no_key, ["no key 'input'"]),
    "inputs file: missing": (lambda t: MODEL, lambda t: ["--inputs", t / "nope.npz"], ["nope.npz"]),
    "unknown module (loop neuron)": (lambda t: fixture("custom_neuron"), lambda t: [],
                                     ["block.0", "MyNeuron", "register_converter"]),
    "unknown module (unknown function)": (lambda t: fixture("custom_squash"), lambda t: [],
                                          ["block.0", "MySquash", "torch.erf", "aten.erf", "register_"]),
    "pickled module without --trust-pickle": (lambda t: fixture("sequential"), _pickled_module,
                                              ["not a plain state_dict", "--trust-pickle", "state_dict()"]),
    "garbage checkpoint": (lambda t: MODEL, _garbage_ckpt, ["garbage.pt"]),
    "garbage checkpoint with --trust-pickle": (lambda t: MODEL, lambda t: _garbage_ckpt(t) + ["--trust-pickle"],
                                               ["garbage.pt"]),
    "--steps 0": (lambda t: MODEL, lambda t: ["--steps", "0"], ["Invalid value for '--steps'"]),
    "--batch 0": (lambda t: MODEL, lambda t: ["--batch", "0"], ["Invalid value for '--batch'"]),
    "unknown pass": (lambda t: MODEL, lambda t: ["--weights", CKPT, "--passes", "nonexistent"],
                     ["unknown pass", "nonexistent"]),
    "empty pass list": (lambda t: MODEL, lambda t: ["--weights", CKPT, "--passes", ","], ["unknown pass"]),
    "unknown target": (lambda t: MODEL, lambda t: ["--weights", CKPT, "--target", "loihi9"], ["loihi9"]),
}


@pytest.mark.parametrize("case", list(BAD_COMPILES))
def test_bad_input(case, tmp_path):
    model, extra, phrases = BAD_COMPILES[case]
    out = tmp_path / "out"
    result = cli("compile", model(tmp_path), *extra(tmp_path), "-o", out)
    assert_bad_input(result, out, *phrases)
    assert "error: unexpected" not in result.stderr, "a bad input must get a specific message, not a bug report"


def test_unwritable_outdir(tmp_path):
    (tmp_path / "afile").write_text("a regular file\n")
    out = tmp_path / "afile" / "out"
    result = compile_digits(out)
    assert_bad_input(result, out, "cannot write OUTDIR", "afile")
    assert (tmp_path / "afile").read_text() == "a regular file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_outdir_is_a_regular_file(tmp_path):
    out = tmp_path / "out"
    out.write_text("keep me\n")
    result = compile_digits(out)
    no_traceback(result)
    assert result.exit_code == 2
    assert out.read_text() == "keep me\n"
    assert leftovers(out) == []


def _snapshot(d: Path) -> dict:
    """Every file under ``d``: its bytes and modification time."""
    return {str(p.relative_to(d)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(d.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize("failure", ["NaN weight", "checkpoint missing keys", "unknown module (loop neuron)",
                                     "inputs file: wrong per-step shape", "unknown pass"])
def test_failed_compile_leaves_previous_outdir_untouched(digits_out, tmp_path, failure):
    out = tmp_path / "out"
    shutil.copytree(digits_out, out)
    before = _snapshot(out)
    model, extra, _ = BAD_COMPILES[failure]
    result = cli("compile", model(tmp_path), *extra(tmp_path), "-o", out)
    no_traceback(result)
    assert result.exit_code == 2, result.output
    assert _snapshot(out) == before
    assert leftovers(out) == []


# -- pickled whole modules --------------------------------------------------------------------
def _fixture_models():
    spec = importlib.util.spec_from_file_location("spikec_test_fixture_models", FIXTURES)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pickled_module_with_trust_pickle_compiles(tmp_path):
    path = tmp_path / "whole.pt"
    torch.save(_fixture_models().sequential(), path)
    out = tmp_path / "out"
    result = cli("compile", fixture("sequential"), "--weights", path, "--trust-pickle", "-o", out)
    no_traceback(result)
    assert result.exit_code == 0, result.output
    assert json.loads((out / "report.json").read_text())["equivalent"] is True


def test_pickled_digits_model_with_trust_pickle_compiles(digits_out, tmp_path, monkeypatch):
    """The digits model saved whole the way examples/digits/train.py would (``from model import small``)."""
    spec = importlib.util.spec_from_file_location("model", DIGITS / "model.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "model", module)
    spec.loader.exec_module(module)
    model = module.small()
    model.load_state_dict(state_dict())
    path = tmp_path / "whole.pt"
    torch.save(model, path)
    monkeypatch.delitem(sys.modules, "model")

    out = tmp_path / "out"
    result = cli("compile", MODEL, "--weights", path, "--inputs", INPUTS, "-o", out)
    assert_bad_input(result, out, "--trust-pickle")
    result = cli("compile", MODEL, "--weights", path, "--inputs", INPUTS, "--trust-pickle", "-o", out)
    no_traceback(result)
    assert result.exit_code == 0, result.stderr
    with np.load(out / "io.npz") as got, np.load(digits_out / "io.npz") as ref:
        assert np.array_equal(got["output"], ref["output"])  # same weights as the state_dict checkpoint


# -- the console entry, in a real process -------------------------------------------------------
def test_console_entry_end_to_end(tmp_path):
    script = Path(sys.executable).parent / "spikec"
    cmd = [str(script)] if script.is_file() else [sys.executable, "-m", "spikec.app.cli"]
    out = tmp_path / "out"
    run = lambda *args: subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True,
                                       cwd=tmp_path, timeout=120)
    done = run("compile", MODEL, "--weights", CKPT, "--inputs", INPUTS, "-o", out)
    assert done.returncode == 0, done.stderr
    assert "equivalent true" in done.stdout
    assert json.loads((out / "report.json").read_text())["equivalent"] is True
    assert {p.name for p in out.iterdir()} >= {"report.json", "graph.json", "weights.npz", "io.npz"}
    bad = tmp_path / "bad"
    done = run("compile", fixture("raises"), "--input-shape", "1,8,8", "-o", bad)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "exploded on purpose" in done.stderr
    assert not bad.exists()


def _digits_model():
    from spikec.app.loader import build_model, load_weights
    model = build_model(MODEL)
    load_weights(model, str(CKPT))
    return model
