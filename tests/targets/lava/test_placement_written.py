"""``lava/placement.json``: a Lava compile writes its core placement, and ``spikec verify`` holds the written plan
against the written network: on the recorded inputs it derives the plan again and requires the file to be it.
A tampered plan, one that is not JSON, or a claimed plan that is missing fails verification by name."""
import json

import numpy as np
import pytest
import torch
from torch import nn

import spikec
from spikec.targets.lava import lava_available

REASON = lava_available()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")


class TwoLayers(nn.Module):
    input_shape, steps = (6,), 5

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.fc1, self.lif1 = nn.Linear(6, 5), spikec.nn.LIF(beta=0.5, threshold=0.3, reset="zero")
        self.fc2, self.lif2 = nn.Linear(5, 3), spikec.nn.LIF(beta=0.5, threshold=0.3, reset="zero")

    def forward(self, x):
        return self.lif2(self.fc2(self.lif1(self.fc1(x))))


@pytest.fixture(scope="module")
def outdir(tmp_path_factory):
    x = (np.random.default_rng(0).random((5, 2, 6)) < 0.5).astype(np.float64)
    c = spikec.compile(TwoLayers(), x, targets="lava")
    path = tmp_path_factory.mktemp("placed") / "out"
    c.save(path)
    return path


def _verify(path):
    return spikec.verify(path)


def test_compile_writes_a_plan_that_verifies(outdir):
    doc = json.loads((outdir / "lava" / "placement.json").read_text())
    placed = {c["population"] for c in doc["assignment"]}
    assert {"lif1", "lif2"} <= placed
    report = json.loads((outdir / "report.json").read_text())
    assert report["targets"]["lava"]["placement"]["planned"] is True
    v = _verify(outdir)
    lava = v["target_lava"]
    assert lava["placement_check"] == {"ok": True, "rederived": True, "problems": []}


def test_a_neuron_placed_twice_fails_verify(outdir, tmp_path):
    import shutil
    copy = tmp_path / "out"
    shutil.copytree(outdir, copy)
    path = copy / "lava" / "placement.json"
    doc = json.loads(path.read_text())
    doc["assignment"].append(dict(doc["assignment"][0], core=len(doc["assignment"])))
    path.write_text(json.dumps(doc))
    v = _verify(copy)
    lava = v["target_lava"]
    assert lava["placement_check"]["ok"] is False
    assert "not the plan of the written network" in lava["placement_check"]["problems"][0]
    assert lava["equivalent"] is False


def test_not_json_is_named_and_a_claimed_plan_missing_fails(outdir, tmp_path):
    import shutil
    copy = tmp_path / "out"
    shutil.copytree(outdir, copy)
    (copy / "lava" / "placement.json").write_text("{not json")
    lava = _verify(copy)["target_lava"]
    assert lava["placement_check"]["ok"] is False and "not a JSON document" in lava["placement_check"]["problems"][0]
    (copy / "lava" / "placement.json").unlink()             # report.json still claims a plan
    lava = _verify(copy)["target_lava"]
    assert lava["placement_check"]["ok"] is False and "missing" in lava["placement_check"]["problems"][0]
    assert lava["equivalent"] is False


def test_a_plan_that_states_its_own_limits_is_rederived(outdir, tmp_path):
    """On the recorded inputs the plan is derived again: a file whose limits and counts were edited to fit fails."""
    import shutil
    copy = tmp_path / "out"
    shutil.copytree(outdir, copy)
    path = copy / "lava" / "placement.json"
    doc = json.loads(path.read_text())
    doc["limits"]["synapses_per_core"] = 10 ** 9
    for c in doc["assignment"]:
        c["synapses"] = 0
    path.write_text(json.dumps(doc))
    lava = _verify(copy)["target_lava"]
    assert lava["placement_check"]["rederived"] is True and lava["placement_check"]["ok"] is False
    assert lava["equivalent"] is False
