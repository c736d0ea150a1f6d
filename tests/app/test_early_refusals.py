"""Options checked before torch is imported: a bad --target, --passes or a missing MODEL / --weights / --inputs
file is refused by ``spikec compile`` with the message the compile itself gives, in a process that never imports
torch (so the refusal costs a fraction of a second, not torch's import)."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from spikec.app import loader, option_checks
from spikec.app.multitarget import plan
from spikec.ir.errors import SpikecError
from spikec.passes import PASSES, select

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "tests" / "app" / "models.py"
RUN = textwrap.dedent("""
    import json, sys
    from click.testing import CliRunner
    from spikec.app.cli import main
    result = CliRunner().invoke(main, sys.argv[1:])
    print(json.dumps({"code": result.exit_code, "stderr": result.stderr, "torch": "torch" in sys.modules}))
""")


def cli_in_fresh_process(*args) -> dict:
    done = subprocess.run([sys.executable, "-c", RUN, *map(str, args)], capture_output=True, text=True, cwd=REPO,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def message(fn, *args, **kwargs) -> str:
    """What the CLI prints for the error ``fn(*args)`` raises inside the compile."""
    with pytest.raises(SpikecError) as e:
        fn(*args, **kwargs)
    return f"error: {e.value.message()}"


def _missing(tmp_path):
    return tmp_path / "missing"


CASES = {  # name -> (extra CLI arguments, the compile's own refusal of the same value)
    "unknown target": (lambda t: ["--target", "lavva"], lambda t: message(plan, "lavva")),
    "unknown target in a list": (lambda t: ["--target", "nir,lavva"], lambda t: message(plan, "nir,lavva")),
    "target named twice": (lambda t: ["--target", "onnx,onnx"], lambda t: message(plan, "onnx,onnx")),
    "none in a list": (lambda t: ["--target", "onnx,none"], lambda t: message(plan, "onnx,none")),
    "unknown pass": (lambda t: ["--passes", "fold_bn,fuse_repconv"], lambda t: message(select, "fold_bn,fuse_repconv")),
    "no pass named": (lambda t: ["--passes", ","], lambda t: message(select, ",")),
    "missing weights": (lambda t: ["--weights", _missing(t)],
                        lambda t: message(loader.load_weights, torch.nn.Linear(1, 1), str(_missing(t)))),
    "missing inputs": (lambda t: ["--inputs", _missing(t)], lambda t: message(loader.load_inputs, str(_missing(t)))),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_option_is_refused_before_torch_is_imported(case, tmp_path):
    extra, expected = CASES[case]
    r = cli_in_fresh_process("compile", f"{MODEL}:one_output", "-o", tmp_path / "out", *extra(tmp_path))
    assert r["code"] == 2 and r["stderr"].strip() == expected(tmp_path), r
    assert not r["torch"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("spec", ["missing.py:net", "missing.nir"])
def test_a_missing_model_file_is_refused_before_torch_is_imported(spec, tmp_path):
    model = f"{tmp_path / spec}"
    r = cli_in_fresh_process("compile", model, "-o", tmp_path / "out")
    assert r["code"] == 2 and r["stderr"].strip() == message(loader.build_model, model), r
    assert not r["torch"]
    r = cli_in_fresh_process("inspect", model)
    assert r["code"] == 2 and r["stderr"].strip() == message(loader.build_model, model) and not r["torch"], r


def test_the_early_checks_pass_what_the_compile_takes(tmp_path):
    """Valid values pass through (the compile then checks them as before): every target and pass name."""
    from spikec.targets import KNOWN, NAMED_ONLY
    weights, inputs = tmp_path / "w.pt", tmp_path / "x.npz"
    weights.write_bytes(b""), inputs.write_bytes(b"")
    for target in ("none", "all", ",".join(KNOWN + NAMED_ONLY), *KNOWN, *NAMED_ONLY):
        option_checks.check_early(f"{MODEL}:one_output", weights, inputs, ",".join(PASSES), target)
    for passes in ("default", "none", *PASSES):
        option_checks.check_early("package.module:factory", passes=passes)


def test_the_copies_equal_what_they_copy():
    """``PASS_NAMES`` is ``spikec.passes.PASSES`` (the module imports torch); the remedies are the loader's."""
    assert option_checks.PASS_NAMES == tuple(PASSES)
    assert option_checks.SPEC_HINT == loader.SPEC_HINT and option_checks.CHECKPOINT_HINT == loader.CHECKPOINT_HINT
