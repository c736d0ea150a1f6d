"""Sinabs's multi-spike neurons on Lava (``spikec/targets/lava/sinabs_counts.py``): ``IAF`` / ``LIF`` with
``MaxSpike(n)`` and the subtract reset are spikec's ``intfire`` (floor rounding, counts 0..n) and run bit-exact in
Lava's fixed-point simulation as SpikecIntFire with graded payloads; ``MultiSpike`` (no bound on the count) is
refused by name with the count the verification inputs reach and the remedy; a threshold whose multiples Sinabs's
float32 product would round stays ``lif_sinabs`` (refused by the mapping)."""
import numpy as np
import pytest
import torch
from torch import nn

import spikec  # noqa: F401  (the package first, then its Sinabs frontend)
from spikec.frontend import sinabs as frontend  # before Sinabs: it lets Sinabs import without matplotlib
from spikec.targets.lava import lava_available, sinabs_counts

sinabs = pytest.importorskip("sinabs")
import sinabs.layers as sl  # noqa: E402
from sinabs.activation import MaxSpike, MultiSpike  # noqa: E402

REASON = lava_available()
needs_lava = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")


def _net(fn, theta1=0.5, theta2=0.25):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(12, 10), sl.IAF(spike_fn=fn, spike_threshold=torch.tensor(theta1)),
                      nn.Linear(10, 6), sl.LIF(tau_mem=4.0, norm_input=False, spike_fn=fn,
                                               spike_threshold=torch.tensor(theta2)))
    with torch.no_grad():
        for layer in m:
            if isinstance(layer, nn.Linear):
                layer.weight.mul_(2.0)
    return frontend.SinabsNet(m)


def _x():
    return (np.random.default_rng(0).random((8, 3, 12)) < 0.5).astype(np.float64)


@needs_lava
def test_maxspike_neurons_are_bit_exact_on_lava_with_graded_counts():
    c = spikec.compile(_net(MaxSpike(3)), _x(), targets=("lava",))
    t = c.targets["lava"]
    assert c.equivalent   # the traced graph against Sinabs's own forward
    assert t["bit_exact"] is True, t["first_mismatches"]
    assert t["quantization_checks"]["ok"], t["quantization_checks"]["failures"]
    assert t["products"]["rewrite_check"]["equivalent"] is True
    assert [n.op for n in c.graph.nodes].count("lif_sinabs") == 2
    kinds = {p["name"]: p["type"] for p in t["processes"]}
    assert kinds["model.net.1"] == kinds["model.net.3"] == "SpikecIntFire"
    assert t["graded_payloads_compared"] == t["spikes_compared"] > 0
    y = c.run(_x())   # several spikes per step occur, and silence
    assert y.max() > 1 and (y == 0).any()
    assert sum("MaxSpike(3)" in r["as"] for r in t["products"]["rewrites"]) == 2


@needs_lava
def test_multispike_is_refused_with_the_count_it_reaches():
    c = spikec.compile(_net(MultiSpike), _x(), targets=("lava",))
    t = c.targets["lava"]
    assert t.get("bit_exact") is not True
    text = t["summary"]
    assert "model.net.1" in text and "lif_sinabs" in text and "MultiSpike has no bound" in text
    assert "count reaches" in text


def test_refusal_names_the_count_and_the_remedy():
    from spikec.ir.errors import UnsupportedOp
    from spikec.core.interpreter import run
    from spikec.frontend import trace
    graph = trace(_net(MultiSpike), (12,))
    x = _x() * 3
    ref = run(graph, x)
    peak = int(ref.values["model.net.1"].max())
    with pytest.raises(UnsupportedOp) as e:
        sinabs_counts.refuse_unbounded(graph, x, ref)
    assert f"count reaches {peak}" in str(e.value) and f"MaxSpike(n) with n >= {peak}" in e.value.remedy


def test_only_float32_exact_thresholds_become_intfire():
    from spikec.frontend import trace
    assert sinabs_counts._float32_exact(0.5, 7) and sinabs_counts._float32_exact(0.25, 100)
    third = float(np.float32(1 / 3))
    assert not sinabs_counts._float32_exact(third, 3)   # 3 * float32(1/3) is not a float32 number
    exact = trace(_net(MaxSpike(3)), (12,))
    inexact = trace(_net(MaxSpike(3), theta1=third), (12,))
    assert [sinabs_counts.exact_intfire(n) for n in exact.nodes if n.op == "lif_sinabs"] == [True, True]
    assert [sinabs_counts.exact_intfire(n) for n in inexact.nodes if n.op == "lif_sinabs"] == [False, True]
    lowered, records = sinabs_counts.lower(inexact)
    assert [n.op for n in lowered.nodes].count("lif_sinabs") == 1 and len(records) == 1
