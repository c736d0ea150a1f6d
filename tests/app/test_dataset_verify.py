"""``spikec verify OUTDIR --inputs DATA --workers N`` / ``--ray``: a data set verified sample by sample, merged."""
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from app_helpers import HERE, REPO, assert_clean_failure, cli
from spikec.app.dataset_run import verify_dataset
from spikec.ir.errors import BadInput

SAMPLES = 200


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """A small two-output model compiled once for ONNX, and a 200-sample data set ([T, B, 12]) beside it."""
    root = tmp_path_factory.mktemp("dataset")
    out = root / "out"
    result = cli("compile", f"{HERE / 'models.py'}:two_outputs", "--target", "onnx", "-o", out)
    assert result.exit_code == 0, result.output
    x = (np.random.default_rng(3).random((5, SAMPLES, 12)) < 0.4).astype(np.float32)
    np.savez_compressed(root / "data.npz", input=x)
    np.save(root / "data.npy", x)
    return out


@pytest.fixture(scope="module")
def tampered(compiled, tmp_path_factory):
    """The same OUTDIR with one deployed weight changed: the deployed graph disagrees with the source."""
    out = tmp_path_factory.mktemp("tampered") / "out"
    shutil.copytree(compiled, out)
    for name in ("data.npz", "data.npy"):
        shutil.copy(compiled.parent / name, out.parent / name)
    with np.load(out / "weights.npz") as z:
        arrays = {k: z[k] for k in z.files}
    key = next(k for k in arrays if k.startswith("fc1") and k.endswith("weight"))
    arrays[key][3, 5] += 0.3
    np.savez(out / "weights.npz", **arrays)
    return out


def _verify(outdir, inputs, **options):
    """The data-set verification of OUTDIR's own source code (``--run-source``; the Python API takes no such
    keyword yet, so the runner is called directly)."""
    return verify_dataset(str(outdir), str(inputs), run_source=True, **options)


def _data(out: Path, suffix=".npz") -> Path:
    return out.parent / f"data{suffix}"


def _counts(result: dict) -> dict:
    return {k: v for k, v in result["source_vs_deployed"].items()}


def test_one_and_two_workers_merge_to_identical_counts(compiled):
    one = _verify(compiled, _data(compiled), workers=1)
    two = _verify(compiled, _data(compiled, ".npy"), workers=2)  # .npy read too, the same samples
    assert one["dataset"]["runner"] == "inline" and two["dataset"]["runner"] == "processes"
    assert len(two["dataset"]["shards"]) == 2 and one["dataset"]["samples"] == SAMPLES
    assert _counts(one) == _counts(two)
    s = one["source_vs_deployed"]
    assert s["equivalent"] and s["samples_equivalent"] == SAMPLES and s["spikes_compared"] > 0
    assert one["target_onnx"]["equivalent"] and one["target_onnx"] == two["target_onnx"]
    assert all(r["equivalent"] for r in two.values())


def test_a_wrong_deployed_graph_gives_per_sample_mismatches_and_worst_margins(tampered):
    two = _verify(tampered, _data(tampered), workers=2, targets="none")
    one = _verify(tampered, _data(tampered), workers=1, targets="none")
    assert _counts(one) == _counts(two)
    s = two["source_vs_deployed"]
    assert not s["equivalent"] and not two["dataset"]["equivalent"]
    bad = [i for i, ok in enumerate(s["per_sample"]) if not ok]
    assert bad == s["not_equivalent_samples"] and len(bad) == s["samples_not_equivalent"] > 0
    lif = s["nodes"]["lif"]
    assert lif["kind"] == "spike" and lif["mismatches"] > 0 and 0 < lif["samples_mismatched"] <= len(bad)
    margins = [m["margin"] for m in lif["worst"]]
    assert margins == sorted(margins, key=abs) and all(m is not None for m in margins)
    assert {m["sample"] for m in lif["worst"]} <= set(bad)
    assert two["dataset"]["targets_skipped"] == ["onnx"] and "target_onnx" not in two

    result = cli("verify", tampered, "--run-source", "--inputs", _data(tampered), "--workers", "2")
    assert result.exit_code == 1, result.output
    assert "samples equivalent" in result.stdout and "NOT (samples" in result.stdout
    assert "node 'lif' (spike)" in result.stdout and "smallest margins: sample" in result.stdout
    assert "target_onnx          FAILED" in result.stdout  # model.onnx is the untampered graph


def test_progress_goes_to_stderr_and_json_to_stdout(compiled):
    result = cli("verify", compiled, "--run-source", "--inputs", _data(compiled), "--workers", "1", "--json")
    assert result.exit_code == 0, result.output
    assert f"{SAMPLES}/{SAMPLES}" in result.stderr and "sample" in result.stderr
    import json
    merged = json.loads(result.stdout)
    assert merged["source_vs_deployed"]["samples"] == SAMPLES and merged["dataset"]["layout"] == "[T, B, ...]"


@pytest.mark.parametrize("args, phrases", [
    (["--workers", "0"], ["--workers 0", "remedy: give --workers 1"]),
    (["--workers", "-2"], ["--workers -2", "remedy"]),
    (["--targets", "none"], ["--targets applies to a data-set run", "add --workers N"]),
    (["--workers", "2", "--targets", "lava"], ["OUTDIR holds no lava/network.json", "remedy"]),
    (["--workers", "2", "--targets", "gpu"], ["'gpu' is not a target", "remedy"]),
])
def test_bad_options_are_named_errors_with_remedies(compiled, args, phrases):
    assert_clean_failure(cli("verify", compiled, "--run-source", "--inputs", _data(compiled), *args), 2, *phrases)


def test_a_data_set_of_the_wrong_shape_or_none_is_refused_before_any_worker(compiled, tmp_path):
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, input=np.zeros((5, 10, 11)))
    assert_clean_failure(cli("verify", compiled, "--run-source", "--inputs", wrong, "--workers", "2"), 2,
                         "has shape (5, 10, 11)", "graph's input shape (12,)", "remedy: lay the data set out as "
                         "[T, B, 12]")
    assert_clean_failure(cli("verify", compiled, "--workers", "2"), 2, "needs the data set", "--inputs DATA.npz")
    nokey = tmp_path / "nokey.npz"
    np.savez(nokey, x=np.zeros((5, 10, 12)))
    with pytest.raises(BadInput, match="no key 'input'"):
        _verify(compiled, nokey, workers=2)


def test_a_failing_worker_is_named_by_its_shard(compiled, tmp_path):
    x = np.load(_data(compiled, ".npy")).copy()
    x[2, 150, 4] = np.nan  # sample 150: shard 1 of 2 (samples 128-199, whole chunks of 64)
    bad = tmp_path / "nan.npy"
    np.save(bad, x)
    result = cli("verify", compiled, "--run-source", "--inputs", bad, "--workers", "2")
    assert_clean_failure(result, 2, "shard 1 (samples 128-199)", "NaN or Inf", "remedy")


def _tagged(tag: str) -> list[int]:
    """Processes whose environment carries ``tag``: the CLI run below and everything it started."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if tag.encode() in (d / "environ").read_bytes():
                    found.append(int(d.name))
            except OSError:
                continue
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc to find the worker processes")
def test_ctrl_c_leaves_no_worker_behind(compiled, tmp_path):
    x = np.random.default_rng(0).random((1000, 2000, 12)) < 0.4  # 1,000 steps: tens of seconds of work
    np.save(tmp_path / "big.npy", x)
    tag = f"SPIKEC_TEST_TAG={uuid.uuid4().hex}"
    env = {**os.environ, tag.split("=")[0]: tag.split("=")[1]}
    proc = subprocess.Popen([sys.executable, "-m", "spikec.app.cli", "verify", str(compiled), "--run-source",
                             "--inputs", str(tmp_path / "big.npy"), "--workers", "2", "--targets", "none"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        while len(_tagged(tag)) < 4 and proc.poll() is None and time.monotonic() < deadline:  # cli, forkserver, 2
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole process group
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err.decode()
    assert "interrupted (SIGINT)" in err.decode()
    deadline = time.monotonic() + 10
    while _tagged(tag) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _tagged(tag) == []


def test_ray_local_merges_to_the_same_counts(compiled):
    pytest.importorskip("ray", reason="ray (an optional extra) is not installed: `make venv` tries to install it")
    local = _verify(compiled, _data(compiled), ray="local", workers=2)
    inline = _verify(compiled, _data(compiled), workers=1)
    assert local["dataset"]["runner"] == "ray" and len(local["dataset"]["shards"]) == 2
    assert _counts(local) == _counts(inline) and local["target_onnx"] == inline["target_onnx"]


STATIC_LOOP = '''
import snntorch
import torch
from torch import nn


class Static(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(5, 6)
        self.lif = snntorch.Leaky(beta=0.9, threshold=0.6)

    def forward(self, x):
        mem, rec = self.lif.init_leaky(), []
        for _ in range(6):
            spk, mem = self.lif(self.fc(x), mem)
            rec.append(spk)
        return torch.stack(rec)


def static():
    return Static()
'''


def test_a_loop_model_takes_its_static_input_per_sample(tmp_path):
    pytest.importorskip("snntorch")
    (tmp_path / "static.py").write_text(STATIC_LOOP)
    np.savez(tmp_path / "in.npz", input=np.random.default_rng(0).random((8, 5)))
    np.savez(tmp_path / "data.npz", input=np.random.default_rng(1).random((150, 5)) * 2)  # [B, 5]
    out = tmp_path / "out"
    result = cli("compile", f"{tmp_path / 'static.py'}:static", "--inputs", tmp_path / "in.npz", "--stepping",
                 "loop", "-o", out)
    assert result.exit_code == 0, result.output
    one = _verify(out, tmp_path / "data.npz", workers=1)
    two = _verify(out, tmp_path / "data.npz", workers=2)
    assert one["dataset"]["layout"].startswith("[B, ...]") and _counts(one) == _counts(two)
    assert one["source_vs_deployed"]["spikes_compared"] == 150 * 6 * 6 and one["source_vs_deployed"]["equivalent"]
