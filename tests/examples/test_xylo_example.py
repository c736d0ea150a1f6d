"""examples/xylo: the keyword-spotting snnTorch network (16 channels, a recurrent RLeaky hidden layer, 4 outputs,
subtract reset, beta = 1 - 2**-k), trained briefly, compiled unchanged with ``--target lava,xylo,nir,onnx`` in one
compile: XyloSim and spikec's reference agree bit for bit, XyloSim rebuilt by hand from ``xylo/spec.npz``
reproduces ``xylo/io.npz``, Lava and ONNX reproduce their references; NIR writes the RLeaky as its CubaLIF reset
cycle, run spike for spike by snnTorch's and Norse's importers, so the compile as a whole exits 0."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

pytest.importorskip("snntorch")
pytest.importorskip("xylosim.v2")
pytest.importorskip("rockpool")

from spikec.app.cli import main  # noqa: E402
from spikec.targets.xylo._shim import import_xylosim  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "xylo"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    out = tmp_path_factory.mktemp("xylo_example") / "out"
    r = CliRunner().invoke(main, ["compile", f"{EXAMPLE / 'model.py'}:kws", "--weights", str(EXAMPLE / "checkpoint.pt"),
                                  "--inputs", str(EXAMPLE / "inputs.npz"), "--target", "lava,xylo,nir,onnx",
                                  "-o", str(out)])
    return r, out


def test_four_targets_in_one_compile(compiled):
    r, out = compiled
    report = json.loads((out / "report.json").read_text())
    t = report["targets"]
    assert list(t) == ["lava", "xylo", "nir", "onnx"]
    assert t["xylo"]["bit_exact"] and t["xylo"]["equivalent"] and not t["xylo"]["first_mismatches"]
    assert t["lava"]["bit_exact"] and t["onnx"]["spike_exact"]
    assert t["nir"]["exact"] and not t["nir"].get("refused")       # the RLeaky as its CubaLIF reset cycle
    ran = {k for k, c in t["nir"]["consumers"].items() if c.get("ran") and c.get("spike_exact")}
    assert {"snntorch", "norse"} <= ran                              # run spike for spike by independent consumers
    assert r.exit_code == 0 and report["equivalent"], r.output
    assert [k for k, v in t.items() if v.get("refused")] == []


def test_the_network_is_the_keyword_spotting_form(compiled):
    _, out = compiled
    x = json.loads((out / "report.json").read_text())["targets"]["xylo"]
    res, q = x["resources"], x["quantization"]
    assert res["inputs"] == {"used": 16, "of": 16} and res["output_neurons"]["used"] <= 8
    assert res["synapses"]["recurrent"] > 0                    # the RLeaky's linear recurrence is on the chip
    assert q["hidden"]["op"] == "rleaky_snntorch" and q["hidden"]["beta_exact_as_shift"]
    assert q["output"]["beta_exact_as_shift"] and x["decay_rounding"]["exact"]
    assert x["float_vs_fixed"]["approximate"] and x["energy"]["estimate"]


def test_xylosim_rebuilt_by_hand_reproduces_io(compiled):
    _, out = compiled
    XyloSim = import_xylosim()
    sim = XyloSim.from_specification(**np.load(out / "xylo" / "spec.npz"))    # the two lines of the README
    io = np.load(out / "xylo" / "io.npz")
    outs, hidden = [], []
    for raster in io["input"]:
        sim.reset_state()
        y, _, rec = sim.evolve(raster, record=True)
        outs.append(y)
        hidden.append(rec["Spikes"])
    assert np.array_equal(np.stack(outs), io["output"]) and np.array_equal(np.stack(hidden), io["hidden_spikes"])
    assert io["output"].sum() > 0 and io["hidden_spikes"].sum() > 0


def test_every_layer_fires_in_snntorch():
    # another test on this worker may have imported some other 'model'/'train' (an OUTDIR's source/model.py):
    # the example's own files are imported, and the names given back afterwards
    saved = {name: sys.modules.pop(name) for name in ("model", "train") if name in sys.modules}
    sys.path.insert(0, str(EXAMPLE))
    try:
        from model import kws
        from train import run
    finally:
        sys.path.remove(str(EXAMPLE))
        for name in ("model", "train"):
            sys.modules.pop(name, None)
        sys.modules.update(saved)
    net = kws()
    net.load_state_dict(torch.load(EXAMPLE / "checkpoint.pt"))
    x = np.load(EXAMPLE / "inputs.npz")
    seen = []
    net[1].register_forward_hook(lambda m, i, o: seen.append(o))
    with torch.no_grad():
        y = run(net, torch.from_numpy(x["input"]))
    assert torch.stack(seen).sum() > 0 and y.sum() > 0
    assert float((y.sum(0).argmax(1).numpy() == x["label"]).mean()) > 0.5   # it learned the keywords
