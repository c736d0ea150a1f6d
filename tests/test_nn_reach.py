"""docs/nn.md's claims about spikec.nn.LIF's resets, re-checked by compiling: reset='zero' reaches every target
(Lava's standard LIF process and a netx file, a NIR file Norse runs spike for spike, ONNX); the default subtract
reset is bit-exact on Lava's standard processes with the membrane in u (lava_reset='subtract': spikec's CPU-only
SpikecLIF), without model.net, and its NIR file (the CubaLIF reset cycle) runs spike for spike in snnTorch, Norse
and SpikingJelly."""
import pytest
import torch
from torch import nn

import spikec
from spikec import nn as snn
from spikec.targets.lava import lava_available

pytestmark = pytest.mark.skipif(lava_available() is not None, reason=f"Lava does not import: {lava_available()}")


def _compile(lava_reset=None, **lif):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 6), snn.LIF(threshold=0.3, **lif))
    return spikec.compile(model, input_shape=(8,), steps=6, batch=4, targets="all", lava_reset=lava_reset)


def _cpu_only(c) -> list[str]:
    return [p["type"] for p in c.targets["lava"]["chip_readiness"]["cpu_only_processes"]]


def test_a_zero_reset_reaches_every_target():
    c = _compile(reset="zero")
    assert c.equivalent and c.targets["lava"]["bit_exact"] and _cpu_only(c) == []
    assert "model.net" in c.compiled.files
    nir = c.targets["nir"]
    assert nir["exact"] and nir["consumers"]["norse"]["ran"] and nir["consumers"]["norse"]["spike_exact"]
    assert c.targets["onnx"]["spike_exact"] and c.targets["onnx"]["streaming"]["spike_exact"]


def test_the_default_subtract_reset_is_limited_as_documented():
    c = _compile()
    assert c.equivalent and c.targets["lava"]["bit_exact"] and _cpu_only(c) == []   # the membrane in u
    assert c.targets["lava"]["membrane_in_u"]["populations"] and "model.net" not in c.compiled.files
    assert _cpu_only(_compile(lava_reset="subtract")) == ["SpikecLIF"]
    nir = c.targets["nir"]
    assert nir["exact"] and nir["nodes"]["CubaLIF"] == 1 and "Threshold" not in nir["nodes"]
    ran = {k for k, r in nir["consumers"].items() if r["ran"] and r["spike_exact"] and r["spike_count"] > 0}
    assert ran == {"snntorch", "norse", "spikingjelly"}, nir["consumers"]
    assert c.targets["onnx"]["spike_exact"]
