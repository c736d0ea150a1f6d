"""Shared helpers for the app-layer tests: the CLI in-process, and file-system snapshots."""
from pathlib import Path

import pytest
from click.testing import CliRunner

from spikec.app.cli import main

REPO = Path(__file__).resolve().parents[2]
DIGITS = REPO / "examples" / "digits"
HERE = Path(__file__).resolve().parent


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def snapshot(root: Path) -> dict:
    """Every file under ``root`` with its bytes and mtime: equal snapshots mean nothing was touched."""
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file() or p.is_symlink()}


def assert_clean_failure(result, code: int, *phrases):
    """Exit ``code``, each phrase in stderr, no traceback, no 'unexpected' bug-report message."""
    assert result.exit_code == code, (result.exit_code, result.output)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    assert "error: unexpected" not in result.stderr, result.stderr
    for phrase in phrases:
        assert phrase in result.stderr, f"{phrase!r} not in:\n{result.stderr}"


@pytest.fixture
def digits_copy(tmp_path):
    """A private copy of the digits example (model, checkpoint, inputs) a test may point -o at."""
    d = tmp_path / "digits"
    d.mkdir()
    for name in ("model.py", "checkpoint.pt", "inputs.npz"):
        (d / name).write_bytes((DIGITS / name).read_bytes())
    return d


def small(tmp_path, factory="one_output"):
    return f"{HERE / 'models.py'}:{factory}"
