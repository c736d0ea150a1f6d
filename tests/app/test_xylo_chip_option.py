"""``spikec compile --xylo-chip`` and ``spikec.compile(xylo_chip=...)``: the chip reaches the xylo target as its
option ``xylo_chip``. A network of 20 outputs is refused on Xylo Audio 2 (8 outputs) and compiles bit-exact on
Xylo Audio 3 (32), on Rockpool's syns63300 XyloSim; a chip without the xylo target, or one the target does not
know, is refused before any work."""
import json
import textwrap

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("snntorch")
pytest.importorskip("xylosim.v2")
pytest.importorskip("rockpool")

import spikec  # noqa: E402
from spikec.app.cli import main  # noqa: E402
from spikec.ir.errors import BadInput  # noqa: E402
from spikec.targets.xylo.limits import CHIPS  # noqa: E402

WIDE = textwrap.dedent('''
    import torch, snntorch as snn
    from torch import nn

    def wide():
        torch.manual_seed(2)
        return nn.Sequential(nn.Linear(16, 24), snn.RLeaky(beta=0.875, linear_features=24, init_hidden=True),
                             nn.Linear(24, 20), snn.Leaky(beta=0.75, init_hidden=True))
''')


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    d = tmp_path_factory.mktemp("wide")
    (d / "wide.py").write_text(WIDE)
    np.savez(d / "x.npz", input=(np.random.default_rng(0).random((6, 2, 16)) < 0.3).astype(np.float32))
    return d


def test_the_cli_flag_reaches_the_xylo_target(wide):
    out = wide / "out"
    r = CliRunner().invoke(main, ["compile", f"{wide / 'wide.py'}:wide", "--inputs", str(wide / "x.npz"),
                                  "-o", str(out), "--target", "xylo", "--xylo-chip", "xylo-audio-3"])
    assert r.exit_code == 0, r.output
    report = json.loads((out / "report.json").read_text())
    t = report["targets"]["xylo"]
    assert report["equivalent"] and t["bit_exact"] and "syns63300" in t["simulator"]
    assert t["resources"]["output_neurons"] == {"used": 20, "of": 32}
    assert report["options"]["xylo_chip"] == "xylo-audio-3"
    verified = CliRunner().invoke(main, ["verify", str(out)])
    assert verified.exit_code == 0 and "target_xylo" in verified.output, verified.output


def test_the_api_keyword_reaches_the_xylo_target(wide):
    x = np.load(wide / "x.npz")["input"]
    model = f"{wide / 'wide.py'}:wide"
    on_audio3 = spikec.compile(model, x, targets="xylo", xylo_chip="xylo-audio-3")
    assert on_audio3.equivalent and on_audio3.targets["xylo"]["bit_exact"]
    default = spikec.compile(model, x, targets="xylo")  # Xylo Audio 2: 20 > 8 outputs
    assert not default.equivalent and default.targets["xylo"]["refused"]
    assert "xylo_chip" not in default.report["options"]


def test_a_chip_is_refused_without_the_xylo_target_or_unknown(wide, tmp_path):
    model = f"{wide / 'wide.py'}:wide"
    r = CliRunner().invoke(main, ["compile", model, "--inputs", str(wide / "x.npz"), "-o", str(tmp_path / "a"),
                                  "--target", "onnx", "--xylo-chip", "xylo-imu"])
    assert r.exit_code == 2 and "not the xylo target" in r.stderr and "add xylo to the targets" in r.stderr, r.output
    r = CliRunner().invoke(main, ["compile", model, "--inputs", str(wide / "x.npz"), "-o", str(tmp_path / "b"),
                                  "--target", "xylo", "--xylo-chip", "xylo-audio-9"])
    assert r.exit_code == 2 and "Xylo chip 'xylo-audio-9' is not known" in r.stderr, r.output
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    with pytest.raises(BadInput, match="xylo_chip=3 is not a chip name"):
        spikec.compile(model, targets="xylo", xylo_chip=3)


def test_the_help_lists_every_chip():
    r = CliRunner().invoke(main, ["compile", "--help"])
    text = " ".join(r.output.split())
    assert all(chip in text for chip in CHIPS), text
