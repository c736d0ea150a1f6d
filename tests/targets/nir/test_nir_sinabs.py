"""Sinabs's default neurons (``IAF`` / ``LIF`` / ``ExpLeak`` with MultiSpike and MembraneSubtract: op ``lif_sinabs``)
to NIR in the consumer scheme ``sinabs`` (``spikec/targets/nir/sinabs_export.py``): ``sinabs.from_nir`` reads NIR
LIF/IF as exactly those neurons, so the file runs count for count in Sinabs against the user's own float32 Sinabs
network, and spikec's NIR interpreter proves it in that scheme. Every other consumer is not run (named why); what
Sinabs cannot read (MaxSpike, MembraneReset, tau_syn) is refused with the nearest variant measured."""
import nir
import numpy as np
import pytest
import torch
from torch import nn

import spikec
from spikec.ir.errors import UnsupportedOp
from spikec.frontend import sinabs as frontend   # before Sinabs: it lets Sinabs import without matplotlib
from spikec.targets.nir import consumers, sinabs_export
from spikec.formats.nir import interpreter
from spikec.targets.nir.export import export_graph

sinabs = pytest.importorskip("sinabs")
import sinabs.layers as sl  # noqa: E402
from sinabs.activation import MaxSpike, MembraneReset  # noqa: E402


def _gain(m, k):
    with torch.no_grad():
        for layer in m.modules():
            if isinstance(layer, (nn.Linear, nn.Conv2d)):
                layer.weight.mul_(k)
    return m


def dense():   # the Sinabs user's MLP: IAF and LIF with their defaults (LIF's norm_input=True)
    torch.manual_seed(0)
    net = _gain(nn.Sequential(nn.Linear(12, 10), sl.IAF(), nn.Linear(10, 6), sl.LIF(tau_mem=3.0)), 3.0)
    _gain(net[2], 4.0)   # norm_input scales the LIF's input by 1 - exp(-1/3)
    return net


def squeeze():   # Speck's layout: Squeeze layers, a threshold below 1, an IAF clipped at -threshold (NIR IF)
    torch.manual_seed(1)
    th = torch.tensor(0.75)
    return _gain(nn.Sequential(nn.Linear(12, 8), sl.IAFSqueeze(batch_size=3, spike_threshold=th, min_v_mem=-th),
                               nn.Linear(8, 5), sl.IAFSqueeze(batch_size=3)), 2.5)


def conv(clip=True):   # a Speck-style CNN of Squeeze layers (from_model's min_v_mem = -1): Conv2d, IAF, Linear, IAF
    torch.manual_seed(2)
    return _gain(nn.Sequential(nn.Conv2d(2, 4, 3, padding=1),
                               sl.IAFSqueeze(batch_size=3, min_v_mem=-1.0 if clip else None), nn.Flatten(),
                               nn.Linear(4 * 5 * 5, 6), sl.IAFSqueeze(batch_size=3, spike_threshold=torch.tensor(0.5))),
                 2.0)


def leak():   # an ExpLeak read-out (its membrane): NIR LI
    torch.manual_seed(3)
    return _gain(nn.Sequential(nn.Linear(12, 8), sl.IAF(), nn.Linear(8, 4), sl.ExpLeak(tau_mem=5.0)), 2.0)


NETS = {"dense": (dense, (16, 3, 12)), "squeeze": (squeeze, (16, 3, 12)), "conv": (conv, (12, 3, 2, 5, 5)),
        "leak": (leak, (16, 3, 12))}


def _x(shape, seed=0):
    return np.random.default_rng(seed).random(shape) * 1.5


def _user(net, x):
    """The user's own network in float32 (as Sinabs runs it), on spikec's [T, B, ...] layout."""
    with torch.no_grad():
        return frontend.SinabsNet(net).float()(torch.as_tensor(x, dtype=torch.float32)).double().numpy()


@pytest.mark.parametrize("name", sorted(NETS))
def test_sinabs_defaults_run_count_for_count_in_sinabs(name, tmp_path):
    factory, shape = NETS[name]
    x = _x(shape)
    c = spikec.compile(frontend.SinabsNet(factory()), x, targets=("nir",))
    t = c.targets["nir"]
    assert c.equivalent and t["exact"] and t["scheme"] == "sinabs" and t["dt"] == 1.0, t
    assert "sinabs" in t["interpreter"] and t["interpreter"]["sinabs"]["equivalent"]
    assert "MultiSpike" in t["consumer_scheme"]
    verdict = t["consumers"]["sinabs"]
    assert verdict["ran"] and verdict["spike_exact"] and verdict["spike_count"] > 20, verdict
    for other in ("snntorch", "norse", "spikingjelly", "rockpool"):
        assert not t["consumers"][other]["ran"] and "consumer scheme 'sinabs'" in t["consumers"][other]["reason"]
    # independently of the checker: Sinabs on the written file against the user's float32 network
    path = tmp_path / "model.nir"
    nir.write(path, export_graph(c.graph).graph)
    want = _user(factory(), x)
    got, _ = consumers.run_consumer("sinabs", path, x, 1.0, want.shape[2:])
    np.testing.assert_array_equal(got, want)
    if name != "leak":
        assert want.max() > 1 and (want == 0).any()   # several spikes in a step occur, and silence
    # and spikec's interpreter in the sinabs scheme on the file, against the float64 IR
    run = interpreter.run(path, x, dt=1.0, scheme="sinabs")
    np.testing.assert_array_equal(run.values["output"], c.run(x)) if name != "leak" else \
        np.testing.assert_allclose(run.values["output"], c.run(x), rtol=1e-6)


def test_iaf_is_a_lif_whose_decay_is_one_and_a_clipped_iaf_is_nir_if():
    ex = export_graph(spikec.compile(frontend.SinabsNet(squeeze()), _x((4, 3, 12)), targets=()).graph)
    kinds = {type(v).__name__: v for v in ex.graph.nodes.values()}
    assert set(kinds) >= {"IF", "LIF"}
    assert kinds["IF"].v_threshold.dtype == np.float32 and np.all(kinds["IF"].v_threshold == 0.75)
    assert np.all(kinds["LIF"].tau == sinabs_export.IAF_TAU)
    assert float(torch.exp(-1 / torch.tensor(sinabs_export.IAF_TAU, dtype=torch.float32))) == 1.0


def test_float32_tau_gives_back_the_ir_decay():
    for tau in (2.0, 3.0, 4.5, 10.0, 20.0, 123.25):
        alpha = float(torch.exp(-1.0 / torch.tensor(np.float32(tau), dtype=torch.float64)))
        assert sinabs_export.float32_tau(alpha) == float(np.float32(tau))


@pytest.mark.parametrize("layer, why", [
    (lambda: sl.IAF(spike_fn=MaxSpike(2)), "MaxSpike(2)"),
    (lambda: sl.IAF(reset_fn=MembraneReset()), "MembraneReset"),
    (lambda: sl.LIF(tau_mem=8.0, tau_syn=4.0), "tau_syn"),
    (lambda: sl.LIF(tau_mem=8.0, min_v_mem=-2.0), "min_v_mem = -2.0")])
def test_what_sinabs_cannot_read_is_refused_by_name(layer, why):
    torch.manual_seed(0)
    net = _gain(nn.Sequential(nn.Linear(12, 6), layer()), 3.0)
    c = spikec.compile(frontend.SinabsNet(net), _x((12, 3, 12)), targets=("nir",))
    t = c.targets["nir"]
    assert t["refused"] and why in t["reason"] and "MultiSpike neuron" in t["reason"], t
    if why == "MaxSpike(2)":   # the nearest variant, measured: MultiSpike counts above 2 on these inputs
        assert "nearest exportable variant (model.net.1: Sinabs's default MultiSpike" in t["reason"]
        assert "% of output" in t["reason"]


def test_maxspike_file_fails_in_sinabs_and_the_others_do_not_run_it(tmp_path):
    """The MaxSpike(2) network's nearest file (MultiSpike) in every consumer: Sinabs runs it and its counts exceed the
    user's MaxSpike(2) network's; the others are not run, each saying why."""
    torch.manual_seed(0)
    user = _gain(nn.Sequential(nn.Linear(12, 6), sl.IAF(spike_fn=MaxSpike(2))), 8.0)
    x = _x((12, 3, 12))
    g = spikec.compile(frontend.SinabsNet(user), x, targets=()).graph
    variant = g.with_nodes([n.with_(attrs={"spike": "multi", "reset": "subtract", "norm_input": False})
                            if n.op == "lif_sinabs" else n for n in g.nodes])
    path = tmp_path / "model.nir"
    nir.write(path, export_graph(variant).graph)
    got, _ = consumers.run_consumer("sinabs", path, x, 1.0, (6,))
    want = _user(user, x)
    assert want.max() == 2 and got.max() > 2 and (got != want).any()
    found = consumers.limits(nir.read(path), 1.0)
    assert not found["sinabs"] and all(found[k] for k in ("snntorch", "norse", "spikingjelly", "rockpool"))


def test_a_sinabs_file_for_another_consumer_is_refused():
    g = spikec.compile(frontend.SinabsNet(dense()), _x((4, 3, 12)), targets=()).graph
    with pytest.raises(UnsupportedOp, match="written in scheme 'snntorch'"):
        export_graph(g, consumer="snntorch")


def test_an_unclipped_iaf_on_a_map_is_exact_here_and_a_pinned_sinabs_limit(tmp_path):
    """Sinabs's from_nir raises on any NIR LIF on a (C, H, W) map (``any(node.v_leak) != 0``): pinned, so that a fixed
    Sinabs shows up; the file is exact in spikec's interpreter."""
    x = _x(NETS["conv"][1])
    c = spikec.compile(frontend.SinabsNet(conv(clip=False)), x, targets=("nir",))
    t = c.targets["nir"]
    assert t["exact"] and "a LIF on a (4, 5, 5) map" in t["consumers"]["sinabs"]["reason"], t["consumers"]
    path = tmp_path / "model.nir"
    nir.write(path, export_graph(c.graph).graph)
    with pytest.raises(ValueError, match="ambiguous"):
        consumers.run_consumer("sinabs", path, x, 1.0, (6,))


def test_nir_check_names_the_sinabs_scheme(tmp_path):
    from spikec.targets.nir.check import check_file
    path = tmp_path / "model.nir"
    nir.write(path, export_graph(spikec.compile(frontend.SinabsNet(dense()), _x((4, 3, 12)), targets=()).graph).graph)
    result = check_file(path, dt=1.0)
    scheme = [f for f in result["findings"] if f["kind"] == "consumer_scheme"]
    assert scheme and "MultiSpike" in scheme[0]["message"] and scheme[0]["severity"] == "warning"
    sinabs_ok = [f for f in result["findings"] if f["kind"] == "consumer_sinabs"]
    assert sinabs_ok and "no known limit" in sinabs_ok[0]["message"]
