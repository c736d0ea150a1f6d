"""Exact lowerings onto Lava's standard LIF (chip-ready), each bit-exact in Lava's fixed-point simulation:
a spikec ``lif`` with ``beta = 0`` and a subtract reset (nothing of the reset membrane is kept: its zero reset,
``chip_variant.memoryless_resets``), and SpikingJelly's ``>=`` neurons with a hard reset behind synapses (Lava's
``v > vth << 6`` with the integer tie one LSB above the threshold, ``assemble._strict_ge``)."""
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from spikec.core.interpreter import run
from spikec.targets.lava import chip_variant, lava_available

REASON = lava_available()
needs_lava = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")
HERE = Path(__file__).resolve().parent


def _memoryless(beta=0.0):
    import spikec.nn as snn
    torch.manual_seed(0)
    net = nn.Sequential(snn.TimeDistributed(nn.Linear(12, 10)), snn.LIF(beta=beta, threshold=0.5, reset="subtract"),
                        snn.TimeDistributed(nn.Linear(10, 6)), snn.LIF(beta=beta, threshold=0.3, reset="subtract"))
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.Linear):
                m.weight.mul_(2.5)
    return net


def _x(seed=0):
    return (np.random.default_rng(seed).random((8, 3, 12)) < 0.5).astype(np.float64)


def test_beta_zero_subtract_is_rewritten_and_computes_the_same():
    import spikec
    c = spikec.compile(_memoryless(), _x(), targets=())
    g = c.graph
    after, records = chip_variant.memoryless_resets(g)
    lifs = [n.name for n in g.nodes if n.op == "lif"]
    assert len(records) == len(lifs) == 2 and all(after.node(n).attrs["reset"] == "zero" for n in lifs)
    for seed in range(3):   # before/after on the verification inputs and on others
        a, b = run(g, _x(seed)), run(after, _x(seed))
        for o in g.outputs:
            assert np.array_equal(a.values[o], b.values[o])
        assert all(0 < a.values[n].mean() < 1 for n in lifs)   # both layers fire and rest
    leaky = spikec.compile(_memoryless(beta=0.5), _x(), targets=()).graph   # beta > 0: the reset matters
    assert chip_variant.memoryless_resets(leaky)[1] == []


@needs_lava
def test_beta_zero_subtract_is_lavas_lif_and_bit_exact():
    import spikec
    c = spikec.compile(_memoryless(), _x(), targets=("lava",))
    t = c.targets["lava"]
    assert c.equivalent and t["bit_exact"] is True, t.get("first_mismatches")
    kinds = {p["name"]: p["type"] for p in t["processes"]}
    assert [kinds[n.name] for n in c.graph.nodes if n.op == "lif"] == ["LIF", "LIF"]
    assert t["products"]["rewrite_check"]["outputs_equal"] is True


@needs_lava
def test_spikingjelly_hard_reset_is_lavas_lif_and_bit_exact(tmp_path):
    pytest.importorskip("spikingjelly")
    from spikec.app.driver import CompileOptions, compile_model
    np.savez(tmp_path / "x.npz", input=_x())
    c = compile_model(CompileOptions(f"{HERE / 'framework_models.py'}:sj_lif", inputs=str(tmp_path / "x.npz"),
                                     stepping="multistep", target="lava"))
    t = c.report["target"]
    assert c.report["equivalent"] and t["bit_exact"] is True, t["first_mismatches"]
    sj = [n.name for n in c.graph.nodes if n.op == "lif_sj"]
    assert sj and all(t["lowering"][n]["process"] == "LIF" for n in sj)
    for n in sj:
        layer = t["quantization"]["layers"][n]
        assert "64 VTH' + 1" in layer["scaling"]
        vth, scale = layer["vth"], np.asarray(layer["scale"])
        theta = (64 * vth + 1) / (64 * scale)   # the threshold the scale was chosen for: 64 s theta = 64 vth + 1
        assert np.all(theta > 0)
    assert t["chip_readiness"]["cpu_only"] == 0
