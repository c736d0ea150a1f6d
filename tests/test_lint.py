"""The project's ruff configuration (pyproject.toml [tool.ruff.lint]: pyflakes' rules) holds over the whole
repository (the package, tests, tools, examples, benchmarks): no undefined name, unused import or dead local."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_pyflakes_rules_are_clean():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise",
                           "--no-cache", str(ROOT)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_undefined_name_is_found(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    return undefined_name\n")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "F", "--no-cache", str(bad)],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "F821" in done.stdout
