"""The chip option: Xylo Audio 3 and Xylo IMU run where Rockpool simulates them (syns63300.XyloSim), bit-exact
for snnTorch and spikec.nn.xylo networks; an unknown chip is a named BadInput listing the chips; the energy
estimate is labelled and cited; a decay not of the form 1 - 2**-k is measured on the user's inputs."""
import numpy as np
import pytest
import torch
from torch import nn

snn = pytest.importorskip("snntorch")
pytest.importorskip("xylosim.v2")
pytest.importorskip("rockpool")

import spikec  # noqa: E402
from spikec.ir.errors import BadInput  # noqa: E402
from spikec.core.interpreter import run  # noqa: E402
from spikec.nn import xylo  # noqa: E402
from spikec.targets.xylo import CHIPS, xylo_target  # noqa: E402
from spikec.targets.xylo.limits import ENERGY  # noqa: E402


def spikes(t=8, b=2, c=16, p=0.3, seed=0):
    return (np.random.default_rng(seed).random((t, b, c)) < p).astype(np.float64)


def _graph(net, x):
    return spikec.compile(net, x, targets="none", batch=None).graph


@pytest.mark.parametrize("chip", ["xylo-imu", "xylo-audio-3"])
def test_each_chip_runs_an_snntorch_network_bit_exact(chip):
    torch.manual_seed(3)
    net = nn.Sequential(nn.Linear(16, 40), snn.RLeaky(beta=0.875, linear_features=40, init_hidden=True),
                        nn.Linear(40, 12), snn.Leaky(beta=0.75, init_hidden=True))
    x = spikes()
    graph = _graph(net, x)
    r = xylo_target(graph, x, run(graph, x), {"xylo_chip": chip})
    assert r.ok and r.report["bit_exact"] and r.report["chip"] == CHIPS[chip].name
    assert "syns63300" in r.report["simulator"] and r.report["values_compared"] > 0
    assert r.report["resources"]["output_neurons"] == {"used": 12, "of": CHIPS[chip]["output_neurons"]}
    assert r.report["energy"] == {"estimate": True, "reported": False,
                                  "why": f"spikec cites no SynSense energy figure for {chip}; none is reported"}


@pytest.mark.parametrize("chip", list(CHIPS))
def test_each_chip_runs_xylo_modules_bit_exact_vs_source(chip):
    torch.manual_seed(4)
    net = nn.Sequential(xylo.Hidden(16, 20, recurrent=True, dash_mem=3, dash_syn=2, threshold=150, bias=20.0),
                        xylo.Output(20, 5, dash_mem=1, dash_syn=1, threshold=80)).double()
    x = spikes(t=12, p=0.4, seed=4)
    graph = _graph(net, x)
    r = xylo_target(graph, x, run(graph, x), {"xylo_chip": chip})
    assert r.ok and r.report["bit_exact"] and r.report["bit_exact_vs_source"], r.report["first_mismatches_vs_source"]


def test_an_unknown_chip_is_a_named_bad_input_listing_the_chips():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 4), snn.Leaky(beta=0.5, init_hidden=True), nn.Linear(4, 2),
                        snn.Leaky(beta=0.5, init_hidden=True))
    x = spikes(t=3, b=1)
    graph = _graph(net, x)
    for bad in ("xylo-audio-4", "", 2):
        with pytest.raises(BadInput) as e:
            xylo_target(graph, x, run(graph, x), {"xylo_chip": bad})
        text = str(e.value)
        assert "option xylo_chip" in text and all(k in text for k in CHIPS) and "Xylo IMU (SYNS63300)" in text


def test_energy_is_an_estimate_from_the_cited_figure():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 8), snn.Leaky(beta=0.5, init_hidden=True), nn.Linear(8, 2),
                        snn.Leaky(beta=0.5, init_hidden=True))
    x = spikes(t=20, b=1)
    graph = _graph(net, x)
    e = xylo_target(graph, x, run(graph, x), {}).report["energy"]
    assert e["estimate"] and e["reported"] and "arXiv:2406.15112" in e["published"]["source"]
    assert e["estimate_uJ"] == pytest.approx(ENERGY["xylo-audio-2"]["dynamic_power_uW"] * 21 * 1e-3)   # T + 1 steps


def test_a_decay_not_of_the_form_1_minus_2_to_the_minus_k_is_measured():
    """beta = 0.9 takes the nearest shift (dash 3, 0.875), labelled; its own effect is measured on the user's
    inputs (the source rerun with 0.875); beta = 0.875 is exact and nothing is rerun."""
    torch.manual_seed(5)
    net = nn.Sequential(nn.Linear(16, 24), snn.Leaky(beta=0.9, init_hidden=True), nn.Linear(24, 4),
                        snn.Leaky(beta=0.875, init_hidden=True))
    with torch.no_grad():
        net[0].weight.mul_(3)
    x = spikes(t=30, b=3, p=0.4, seed=5)
    graph = _graph(net, x)
    r = xylo_target(graph, x, run(graph, x), {}).report
    assert r["bit_exact"] and not r["bit_exact_vs_source"] and "approximate" in r["vs_source"]
    d = r["decay_rounding"]
    assert not d["exact"] and d["approximate"] and list(d["rounded"]) == ["1"]
    assert d["rounded"]["1"]["beta"]["chip"] == [0.875] and d["rounded"]["1"]["beta"]["source"][0] == pytest.approx(0.9)
    assert 0.5 < d["hidden_spike_agreement"] < 1.0         # measured, and the rounding does change spikes
    exact_net = nn.Sequential(nn.Linear(16, 24), snn.Leaky(beta=0.875, init_hidden=True), nn.Linear(24, 4),
                              snn.Leaky(beta=0.875, init_hidden=True))
    graph = _graph(exact_net, x)
    assert xylo_target(graph, x, run(graph, x), {}).report["decay_rounding"]["exact"] is True


def test_a_leading_flatten_of_the_channels_is_looked_through():
    """``nn.Flatten()`` first in a Sequential on [T, B, C] moves nothing: the network maps (it was refused)."""
    torch.manual_seed(11)
    net = nn.Sequential(nn.Flatten(), nn.Linear(10, 16), snn.Leaky(beta=0.96875, init_hidden=True),
                        nn.Linear(16, 3), snn.Leaky(beta=0.96875, init_hidden=True))
    x = spikes(t=10, c=10, p=0.4)
    graph = _graph(net, x)
    assert any(n.op == "flatten" for n in graph.nodes)
    r = xylo_target(graph, x, run(graph, x), {})
    assert r.ok and r.report["bit_exact"] and r.report["resources"]["inputs"]["used"] == 10


def test_the_chip_through_the_api_and_the_cli(tmp_path):
    """``spikec.compile(..., xylo_chip=)`` and ``--xylo-chip`` reach the target; an unknown name is refused by it."""
    from click.testing import CliRunner
    from spikec.app.cli import main
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 8), snn.Leaky(beta=0.5, init_hidden=True), nn.Linear(8, 12),
                        snn.Leaky(beta=0.5, init_hidden=True))
    x = spikes(t=4, b=1)
    c = spikec.compile(net, x, targets="xylo", batch=None, xylo_chip="xylo-imu")
    assert c.targets["xylo"]["chip"] == "Xylo IMU (SYNS63300)" and c.targets["xylo"]["bit_exact"]
    with pytest.raises(BadInput, match="Xylo chip 'xylo-audio-9' is not known"):
        spikec.compile(net, x, targets="xylo", batch=None, xylo_chip="xylo-audio-9")
    (tmp_path / "m.py").write_text("import torch, snntorch as snn\nfrom torch import nn\n\ndef m():\n"
                                   "    torch.manual_seed(0)\n    return nn.Sequential(nn.Linear(16, 8), snn.Leaky("
                                   "beta=0.5, init_hidden=True), nn.Linear(8, 12), snn.Leaky(beta=0.5, "
                                   "init_hidden=True))\n")
    np.savez(tmp_path / "x.npz", input=x.astype(np.float32))
    r = CliRunner().invoke(main, ["compile", f"{tmp_path / 'm.py'}:m", "--inputs", str(tmp_path / "x.npz"),
                                  "--target", "xylo", "--xylo-chip", "xylo-audio-3", "-o", str(tmp_path / "out")])
    assert r.exit_code == 0 and "Xylo Audio 3 (SYNS65302)" in r.output, r.output
