"""The approximate chip-ready variant (``spikec/targets/lava/chip_variant.py``, target option ``lava_reset='zero'``):
subtract resets become zero resets so that the neurons are Lava's standard LIF; the disagreement with the given
network is measured on the verification inputs, the deployment is bit-exact with the variant's own integer reference
in Lava's fixed-point simulation, and the target does not call it equivalent."""
import tempfile
from pathlib import Path

import numpy as np
import pytest

from spikec.ir.errors import BadInput
from spikec.core.interpreter import run
from spikec.targets import get_target
from spikec.targets.lava import chip_variant, lava_available

REASON = lava_available()
needs_lava = pytest.mark.skipif(REASON is not None, reason=f"Lava does not import here: {REASON}")
HERE = Path(__file__).resolve().parent


def _graph(factory="leaky_default", stepping="step"):
    pytest.importorskip("snntorch")
    from spikec.app.driver import CompileOptions, compile_model
    x = (np.random.default_rng(0).random((8, 3, 12)) < 0.5).astype(np.float64)
    with tempfile.TemporaryDirectory() as d:
        np.savez(Path(d) / "x.npz", input=x)
        c = compile_model(CompileOptions(f"{HERE / 'framework_models.py'}:{factory}", inputs=str(Path(d) / "x.npz"),
                                         stepping=stepping, target="none"))
    return c.graph, x


def test_zero_reset_changes_only_subtract_resets_and_measures_against_the_given_graph():
    g, x = _graph()
    variant, changed = chip_variant.zero_reset(g)
    subtract = [n.name for n in g.nodes if n.op in ("lif", "lif_snntorch") and n.attrs.get("reset") == "subtract"]
    assert changed == subtract and changed
    assert all(variant.node(c).attrs["reset"] == "zero" for c in changed)
    ref = run(g, x)
    m = chip_variant.measure(g, variant, changed, x, ref)
    mine = run(variant, x)
    for c in changed:   # the reported agreement is the two float runs' own
        assert m["per_neuron"][c]["spike_agreement"] == pytest.approx(float((ref.values[c] == mine.values[c]).mean()))
    assert m["approximate"] is True and "APPROXIMATE" in chip_variant.line(m)


@needs_lava
def test_the_variant_is_chip_ready_bit_exact_with_itself_and_not_called_equivalent():
    g, x = _graph()
    exact = get_target("lava")(g, x, run(g, x), {"lava_reset": "subtract"})   # SpikecLIF, carry-free
    res = get_target("lava")(g, x, run(g, x), {"lava_reset": "zero"})
    t = res.report
    assert res.ok is False and exact.ok is True   # approximate: never equivalent to the given network
    assert t["bit_exact"] is True, t["first_mismatches"]   # ... but Lava reproduces the variant bit for bit
    before, after = exact.report["chip_readiness"], t["chip_readiness"]
    assert after["chip_ready"] > before["chip_ready"]
    kinds = {p["name"]: p["type"] for p in t["processes"]}
    assert all(kinds[c] == "LIF" for c in t["approximate_variant"]["neurons_changed"])
    agree = [a["spike_agreement"] for a in t["approximate_variant"]["per_neuron"].values()]
    assert all(0 < a <= 1 for a in agree) and min(agree) < 1   # a measured, nonzero disagreement on these inputs
    assert "APPROXIMATE chip-ready variant" in t["summary"]


def test_an_unknown_reset_option_is_refused():
    g, x = _graph()
    with pytest.raises(BadInput, match="lava_reset"):
        get_target("lava")(g, x, run(g, x), {"lava_reset": "soft"})


@needs_lava
@pytest.mark.parametrize("factory", ["synaptic_default", "rleaky"])
def test_synaptic_and_rleaky_variants_reset_at_the_spike_and_are_chip_ready_as_a_whole(factory):
    """snnTorch's Synaptic and RLeaky (subtract reset one step late by default): the variant is a zero reset at the
    spiking step (``reset_delay=False``: a zero reset one step late is SpikecLIF's ``delayed_zero``, no Lava LIF
    either), so every process is standard; still bit-exact with the variant's own reference, never equivalent."""
    g, x = _graph(factory)
    variant, changed = chip_variant.zero_reset(g)
    assert changed and all(variant.node(c).attrs["reset"] == "zero" and variant.node(c).attrs["reset_delay"] is False
                           for c in changed)
    exact = get_target("lava")(g, x, run(g, x), {"lava_reset": "subtract"})   # SpikecLIF, carry-free
    res = get_target("lava")(g, x, run(g, x), {"lava_reset": "zero"})
    assert exact.report["chip_readiness"]["cpu_only"] > 0
    after = res.report["chip_readiness"]
    assert res.ok is False and res.report["bit_exact"] is True, res.report["first_mismatches"]
    assert after["cpu_only"] == 0 and after["chip_ready"] == after["processes"], after


@needs_lava
def test_verify_rechecks_a_variant_outdir_against_the_variant_and_labels_it(tmp_path):
    """What compile wrote with lava_reset='zero', verify re-checks against the variant (the compile's own
    reference): the Lava line holds, labelled approximate, the compile's verdict stays failed; a corrupted weight
    fails the Lava line too."""
    import spikec
    pytest.importorskip("snntorch")
    x = (np.random.default_rng(0).random((8, 3, 12)) < 0.5).astype(np.float64)
    c = spikec.compile(f"{HERE / 'framework_models.py'}:rleaky", x, targets=("lava",), lava_reset="zero",
                       stepping="step")
    out = c.save(tmp_path / "out")
    r = spikec.verify(out)
    assert r["target_lava"]["equivalent"] is True and "lava_reset='zero'" in r["target_lava"]["approximate"]
    assert r["compile_verdict"]["equivalent"] is False
    params = out / "lava" / "params.npz"
    with np.load(params) as z:
        arrays = {k: z[k] for k in z.files}
    key = next(k for k in arrays if k.endswith("/weights"))
    arrays[key] = arrays[key] + 64
    np.savez(params, **arrays)
    assert spikec.verify(out)["target_lava"]["equivalent"] is False



def _pooled_net():
    """snnTorch's tutorial conv net shape: lif(max_pool2d(conv(x))), twice, then a Linear and a Leaky."""
    snn = pytest.importorskip("snntorch")
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.lif1 = nn.Conv2d(1, 3, 3), snn.Leaky(beta=0.5)
            self.conv2, self.lif2 = nn.Conv2d(3, 4, 3), snn.Leaky(beta=0.5)
            self.fc, self.lif3 = nn.Linear(4, 5), snn.Leaky(beta=0.5)

        def forward(self, x):
            m1, m2, m3 = self.lif1.init_leaky(), self.lif2.init_leaky(), self.lif3.init_leaky()
            out = []
            for _ in range(6):
                s1, m1 = self.lif1(torch.nn.functional.max_pool2d(self.conv1(x), 2), m1)
                s2, m2 = self.lif2(torch.nn.functional.max_pool2d(self.conv2(s1), 2), m2)
                s3, m3 = self.lif3(self.fc(s2.flatten(1)), m3)
                out.append(s3)
            return torch.stack(out)

    torch.manual_seed(0)
    net = Net()
    with torch.no_grad():
        for p in net.parameters():
            p.mul_(2.0)
    return net, np.random.default_rng(0).random((1, 3, 1, 10, 10)).astype(np.float32)


def test_a_max_pool_the_chip_computes_stays_and_one_it_does_not_moves_after_its_neuron():
    """By default a max pool of synaptic sums stays (max_tree.py computes it exactly on chip); one that must go (here
    every pool, ``stays`` saying none stays) moves after its neuron, and nothing else does."""
    import spikec
    net, x = _pooled_net()
    g = spikec.compile(net, x, targets=()).graph
    pools = [n for n in g.nodes if n.op == "maxpool2d"]
    assert len(pools) == 2 and not any(p.type.is_spike for p in pools)
    assert chip_variant.pools_after_neurons(g) == (g, [])
    never = lambda graph, pool: False
    moved, names = chip_variant.pools_after_neurons(g, stays=never)
    assert sorted(names) == ["lif1", "lif2"]
    assert moved.node("lif1").op == "maxpool2d" and moved.node("lif1").type == g.node("lif1").type
    neuron = moved.node("lif1.unpooled")
    assert neuron.op == g.node("lif1").op and neuron.inputs == ("conv1",)
    assert neuron.type.shape == g.node("conv1").type.shape and dict(neuron.params) == dict(g.node("lif1").params)
    again, none = chip_variant.pools_after_neurons(moved, stays=never)   # nothing left to move: the same graph
    assert none == [] and again is moved
    xs = np.broadcast_to(x, (6,) + x.shape[1:]).astype(np.float64)
    given, variant = run(g, xs).values, run(moved, xs).values
    assert given["lif1"].shape == variant["lif1"].shape and not np.array_equal(given["lif1"], variant["lif1"])
    from spikec.ir.graph import Graph   # a pool read by a second node stays
    twice = Graph(g.nodes + (g.node("lif1").with_(name="lif1.again"),), g.outputs + ("lif1.again",))
    assert "lif1" not in chip_variant.pools_after_neurons(twice, stays=never)[1]


@needs_lava
def test_the_pooled_net_is_chip_ready_as_a_whole_by_default_and_its_variant_moves_no_pool():
    import spikec
    net, x = _pooled_net()
    t = spikec.compile(net, x, targets=("lava",)).targets["lava"]
    assert t["bit_exact"] is True and t["chip_readiness"]["chip_ready"] == t["chip_readiness"]["processes"]
    t = spikec.compile(net, x, targets=("lava",), lava_reset="zero").targets["lava"]
    v = t["approximate_variant"]
    assert v["pools_moved"] == [] and t["bit_exact"] is True
    assert t["chip_readiness"]["chip_ready"] == t["chip_readiness"]["processes"], t["chip_readiness"]
    assert "moved after their neuron" not in t["summary"]


def test_a_count_fed_by_a_max_pool_stays_and_its_floor_is_measured_by_name():
    """A Sinabs count after a max pool (``from_model`` of conv -> maxpool -> ReLU, min_v_mem=-1): a max of counts is
    no OR layer, so the pool stays; the variant drops the floor and measures the neuron by its own name."""
    pytest.importorskip("sinabs")
    import torch
    from torch import nn
    import spikec
    import sinabs.layers as sl
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(1, 2, 3), nn.MaxPool2d(2), sl.IAFSqueeze(batch_size=2, min_v_mem=-1.0))
    x = (np.random.default_rng(0).random((5, 2, 1, 8, 8)) < 0.5).astype(np.float64)
    g = spikec.compile(m, x.astype(np.float32), targets=()).graph
    assert chip_variant.pools_after_neurons(g)[1] == []
    variant, changed = chip_variant.zero_reset(g)
    v = chip_variant.measure(g, variant, changed, x, run(g, x))
    assert v["floors_dropped"] == [n.name for n in g.nodes if n.op == "lif_sinabs"] and v["pools_moved"] == []


def test_a_state_read_out_is_no_changed_neuron_and_a_variant_that_changes_nothing_is_exact():
    """snnTorch's tutorial returns ``mem`` beside the spikes: the variant zeroes its neuron's reset, and the
    read-out follows; it is counted neither as a reset zeroed nor as a neuron measured by spikes. A network with no
    subtract reset, floor or pool to change deploys exactly under lava_reset='zero' (equivalent, no variant)."""
    import spikec
    g, x = _graph("leaky_mem_out")
    variant, changed = chip_variant.zero_reset(g)
    twins = [n.name for n in g.nodes if n.attrs.get("output") == "membrane" or n.attrs.get("read") not in
             (None, "spikes")]
    assert twins and not set(twins) & set(changed)
    v = chip_variant.measure(g, variant, changed, x, run(g, x))
    assert not set(twins) & set(v["resets_zeroed"]) and set(v["per_neuron"]) == set(changed)
    pytest.importorskip("snntorch")
    import torch
    import snntorch as snn
    zero = torch.nn.Sequential(torch.nn.Linear(12, 5), snn.Leaky(beta=0.5, reset_mechanism="zero", init_hidden=True,
                                                                  output=False))
    c = spikec.compile(zero, x.astype(np.float32), stepping="step", targets=("lava",), lava_reset="zero")
    assert c.equivalent and "approximate_variant" not in c.targets["lava"]
