"""``spikec verify`` checks the written network.json itself against the lowering of the written integer
reference, not only params.npz: a tampered latency or a malformed document fails verify by name."""
import json
import shutil

import pytest

from spikec.app.cli import main
from spikec.targets.lava import lava_available
from click.testing import CliRunner

pytestmark = pytest.mark.skipif(lava_available() is not None, reason=f"Lava does not import here: {lava_available()}")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("doc") / "out"
    r = CliRunner().invoke(main, ["compile", "examples/digits/model.py:small", "--weights",
                                  "examples/digits/checkpoint.pt", "--inputs", "examples/digits/inputs.npz",
                                  "--no-probes", "-o", str(out), "--target", "lava"])
    assert r.exit_code == 0, r.output
    return out


def _tampered(built, tmp_path, edit):
    bad = tmp_path / "bad"
    shutil.copytree(built, bad)
    path = bad / "lava" / "network.json"
    path.write_text(edit(json.loads(path.read_text())))
    return bad


def test_a_written_latency_that_is_not_the_lowerings_fails_verify(built, tmp_path):
    def later(net):
        net["processes"][0]["latency"] += 1
        return json.dumps(net)
    r = CliRunner().invoke(main, ["verify", str(_tampered(built, tmp_path, later))])
    assert r.exit_code == 1, r.output
    assert any(line.startswith("target_lava") and "FAILED" in line for line in r.output.splitlines()), r.output


def test_a_document_nested_too_deep_is_named(built, tmp_path):
    r = CliRunner().invoke(main, ["verify", str(_tampered(built, tmp_path, lambda net: "[" * 100000 + "]" * 100000))])
    assert r.exit_code == 2 and "cannot read the Lava network" in r.output + str(r.stderr_bytes or b""), r.output


def test_the_untampered_outdir_verifies(built):
    r = CliRunner().invoke(main, ["verify", str(built)])
    assert r.exit_code == 0, r.output
