"""Imports on demand: a compile imports a framework only when the model's modules come from it.

Each compile runs in a fresh interpreter (``sys.modules`` is the process's: the test process has imported every
framework already), through the CLI's own command, and reports which frameworks were imported by its end."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FRAMEWORKS = ("snntorch", "norse", "spikingjelly", "sinabs", "rockpool", "lava")
# the compile through the CLI's command, in this interpreter; then which frameworks sys.modules holds
RUN = textwrap.dedent("""
    import json, sys
    from click.testing import CliRunner
    from spikec.app.cli import main
    result = CliRunner().invoke(main, sys.argv[1:])
    loaded = sorted({m.partition(".")[0] for m in sys.modules} & set(%r))
    print(json.dumps({"code": result.exit_code, "output": result.output, "frameworks": loaded}))
""" % (FRAMEWORKS,))


def compile_in_fresh_process(*args) -> dict:
    done = subprocess.run([sys.executable, "-c", RUN, "compile", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_spikec_dialect_model_imports_no_framework(tmp_path):
    r = compile_in_fresh_process(REPO / "tests" / "app" / "models.py:one_output", "-o", tmp_path / "out")
    assert r["code"] == 0, r["output"]
    assert r["frameworks"] == [], r["frameworks"]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["equivalent"]


def test_a_plain_torch_model_imports_no_framework(tmp_path):
    (tmp_path / "plain.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn

        def net():
            torch.manual_seed(0)
            return nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))
    """))
    r = compile_in_fresh_process(f"{tmp_path / 'plain.py'}:net", "--input-shape", "6", "--steps", "3",
                                 "-o", tmp_path / "out")
    assert r["code"] == 0, r["output"]
    assert r["frameworks"] == [], r["frameworks"]


def test_a_snntorch_model_still_finds_its_converters(tmp_path):
    """snnTorch's converters are registered once the model's code imported snnTorch (and no other framework is)."""
    r = compile_in_fresh_process(REPO / "examples" / "frameworks" / "snntorch_step.py:net", "--input-shape",
                                 "1,12,12", "--steps", "4", "--stepping", "step", "-o", tmp_path / "out")
    assert r["code"] == 0, r["output"]
    assert r["frameworks"] == ["snntorch"], r["frameworks"]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    converters = report["frontend"]["converters"]
    assert report["equivalent"]
    assert any("snntorch." in v and v.endswith("-> spikec.frontend.snntorch.leaky") for v in converters.values()), \
        converters


def test_a_framework_imported_later_is_registered_when_met():
    """``on_framework``: a registration waits while its package is not imported, runs once when a converter is
    looked up after it is, and, when the package is already there, at the next lookup (never at decoration: the
    module defining it may not be fully executed yet)."""
    from spikec.frontend import registry
    calls = []
    registry.on_framework("spikec_test_fake_framework")(lambda: calls.append("later"))
    registry.find_converter(registry.nn.Identity())
    assert calls == [] and "spikec_test_fake_framework" in registry.PENDING
    sys.modules["spikec_test_fake_framework"] = type(sys)("spikec_test_fake_framework")
    try:
        registry.find_converter(registry.nn.Identity())
        registry.find_converter(registry.nn.Identity())
        assert calls == ["later"] and "spikec_test_fake_framework" not in registry.PENDING
        registry.on_framework("spikec_test_fake_framework")(lambda: calls.append("next"))
        assert calls == ["later"]
        registry.find_converter(registry.nn.Identity())
        assert calls == ["later", "next"]
    finally:
        del sys.modules["spikec_test_fake_framework"]
