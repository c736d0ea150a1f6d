"""Exit codes mean what they say, user code cannot fake them, and oversized inputs are refused up front."""
import json
import subprocess
import sys
import zipfile

import numpy as np

from app_helpers import HERE, REPO, assert_clean_failure, cli

MODELS = HERE / "models.py"


def test_factory_calling_sys_exit_0_is_bad_input_not_success(tmp_path):
    result = cli("compile", f"{MODELS}:exits_zero", "-o", tmp_path / "out")
    assert_clean_failure(result, 2, "exits_zero", "sys.exit(0)")
    assert not (tmp_path / "out").exists()


def test_model_file_exiting_3_at_import_is_bad_input(tmp_path):
    result = cli("compile", f"{HERE / 'exits_at_import.py'}:model", "-o", tmp_path / "out")
    assert_clean_failure(result, 2, "exits_at_import.py", "sys.exit(3)", "__main__")


def test_inspect_json_stays_json_when_the_factory_prints():
    result = cli("inspect", f"{MODELS}:prints", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)  # the factory's print went to stderr
    assert doc["format"] == "spikec-ir" and "factory chatter" in result.stderr


def _npz_declaring(path, shape, dtype="<f8"):
    """An .npz whose 'input' header declares ``shape`` but which holds no data: a few hundred bytes."""
    header = {"descr": dtype, "fortran_order": False, "shape": shape}
    with zipfile.ZipFile(path, "w") as z, z.open("input.npy", "w") as f:
        np.lib.format.write_array_header_1_0(f, header)
    return path


def test_a_huge_declared_input_is_refused_before_allocating(tmp_path):
    bomb = _npz_declaring(tmp_path / "bomb.npz", (4, 10_000, 1, 8, 8 * 10_000))
    assert bomb.stat().st_size < 1000
    result = cli("compile", f"{MODELS}:one_output", "--inputs", bomb, "-o", tmp_path / "out")
    assert_clean_failure(result, 2, "over the limit", "--max-input-bytes")


def test_max_input_bytes_lowers_and_raises_the_limit(tmp_path):
    x = (np.random.default_rng(0).random((4, 3, 12)) < 0.3).astype(np.float64)
    np.savez(tmp_path / "x.npz", input=x)
    args = ("compile", f"{MODELS}:one_output", "--inputs", tmp_path / "x.npz", "--no-probes")
    assert_clean_failure(cli(*args, "--max-input-bytes", 100, "-o", tmp_path / "a"), 2, "over the limit")
    assert cli(*args, "--max-input-bytes", x.nbytes, "-o", tmp_path / "b").exit_code == 0


def test_random_inputs_are_size_checked_too(tmp_path):
    result = cli("compile", f"{MODELS}:one_output", "--steps", 1000, "--batch", 100000, "--max-input-bytes", 10**6,
                 "-o", tmp_path / "out")
    assert_clean_failure(result, 2, "random verification input", "over the limit")


def test_object_arrays_in_an_npz_are_refused(tmp_path):
    np.savez(tmp_path / "obj.npz", input=np.array([{"a": 1}], dtype=object))
    result = cli("compile", f"{MODELS}:one_output", "--inputs", tmp_path / "obj.npz", "-o", tmp_path / "out")
    assert_clean_failure(result, 2, "obj.npz")


def test_the_console_entry_maps_sigterm_to_143(tmp_path):
    """A real process: SIGTERM raised inside the compile unwinds, cleans up and exits 143."""
    script = (f"import os, signal, sys\n"
              f"sys.argv = ['spikec', 'compile', {str(MODELS) + ':one_output'!r}, '-o', {str(tmp_path / 'out')!r}]\n"
              "import spikec.app.driver as d\n"
              "real = d.run\n"
              "def slow(*a, **k):\n"
              "    os.kill(os.getpid(), signal.SIGTERM)\n"
              "    return real(*a, **k)\n"
              "d.run = slow\n"
              "from spikec.app.cli import run\n"
              "run()\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 143, done.stderr
    assert "Traceback" not in done.stderr and "interrupted" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_steps_or_batch_contradicting_the_inputs_are_refused(tmp_path):
    x = (np.random.default_rng(0).random((4, 3, 12)) < 0.3).astype(np.float64)
    np.savez(tmp_path / "x.npz", input=x)
    base = ("compile", f"{MODELS}:one_output", "--inputs", tmp_path / "x.npz")
    assert_clean_failure(cli(*base, "--steps", 5, "-o", tmp_path / "a"), 2, "--steps 5 contradicts", "4 steps")
    assert_clean_failure(cli(*base, "--batch", 2, "-o", tmp_path / "b"), 2, "--batch 2 contradicts", "3 samples")
    assert cli(*base, "--steps", 4, "--batch", 3, "-o", tmp_path / "c").exit_code == 0
