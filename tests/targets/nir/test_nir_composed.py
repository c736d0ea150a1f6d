"""snnTorch's default Leaky (subtract reset, reset_delay=True) in NIR.

* Read as spikes with ``0 <= beta < 1``, ``θ >= 0``: a CubaLIF (its current is the Leaky's mem, ``tau_mem = dt``) with
  a ``-θ`` feedback through an identity: snnTorch's ``import_from_nir`` and Norse's ``from_nir`` run it spike for spike
  against the user's own snnTorch module (dense and conv, scalar and per-channel beta; a per-neuron θ in Norse).
* Otherwise (mem read, ``beta = 1``): LI/I + Threshold + the ``-θ`` cycle, which spikec's NIR interpreter runs spike for
  spike against snnTorch and every installed consumer (snnTorch, Norse, Sinabs) fails on, each in its own way (pinned
  here so that a fixed consumer shows up); the nearest variant they read (zero reset) is measured on the inputs.
"""
import nir
import numpy as np
import pytest
import torch

from spikec.ir.errors import UnsupportedOp
from spikec.targets.nir import composed, consumers
from spikec.formats.nir import interpreter

snn = pytest.importorskip("snntorch")

MODELS = '''
import snntorch as snn
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, conv=False, beta=0.9, mem=False, threshold=1.0, only_mem=False, **kw):
        super().__init__()
        self.only_mem = only_mem
        torch.manual_seed(0)
        self.fc = nn.Conv2d(2, 4, 3, padding=1) if conv else nn.Linear(10, 6)
        self.lif = snn.Leaky(beta=beta, threshold=threshold, init_hidden=True, output=mem, **kw)

    def forward(self, x):
        y = self.lif(self.fc(x))
        return y[1] if self.only_mem else y


def dense(): return Net()
def dense_mem(): return Net(mem=True)
def conv_mem(): return Net(conv=True, mem=True)
def dense_mem_only(): return Net(mem=True, only_mem=True)
def dense_per_channel(): return Net(beta=torch.linspace(0.5, 0.95, 6), threshold=torch.linspace(0.4, 1.0, 6))
def conv(): return Net(conv=True)
def conv_per_channel(): return Net(conv=True, beta=torch.tensor([0.5, 0.7, 0.8, 0.95]).reshape(4, 1, 1))
def dense_if(): return Net(beta=1.0)
def conv_if(): return Net(conv=True, beta=1.0)
def conv_negative(): return Net(conv=True, threshold=-0.5)
def dense_negative(): return Net(threshold=-0.5)
def mixed_if(): return Net(beta=torch.tensor([0.5, 1.0, 0.9, 0.9, 0.9, 0.9]))
def no_delay(): return Net(reset_delay=False)
'''
CONV = ("conv", "conv_per_channel", "conv_if", "conv_negative", "conv_mem")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("leaky_nir")
    (d / "models.py").write_text(MODELS)
    rng = np.random.default_rng(0)
    np.savez(d / "dense.npz", input=rng.random((24, 4, 10)) * 4 - 1)
    np.savez(d / "conv.npz", input=rng.random((24, 2, 2, 5, 5)) * 3 - 1)
    return d


def compile_for(models, factory, target="nir"):
    from spikec.app.driver import CompileOptions, compile_model
    x = "conv" if factory in CONV else "dense"
    return compile_model(CompileOptions(f"{models / 'models.py'}:{factory}", inputs=str(models / f"{x}.npz"),
                                        stepping="step", target=target))


def snntorch_run(models, factory, dtype=torch.float64):
    """The user's own module (float64, or float32 as users run it): the spikes snnTorch computes."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("leaky_models", models / "models.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    net = getattr(mod, factory)().to(dtype)
    x = np.load(models / ("conv.npz" if factory in CONV else "dense.npz"))["input"]
    net.lif.reset_mem()
    outs = []
    with torch.no_grad():
        for t in range(x.shape[0]):
            y = net(torch.as_tensor(x[t], dtype=dtype))
            outs.append(y[0].numpy().copy() if isinstance(y, tuple) else y.numpy().copy())
    return x, np.stack(outs)


CUBA = {"dense": ("snntorch", "norse", "spikingjelly"), "conv": ("snntorch", "norse", "spikingjelly"),
        "dense_if": ("snntorch", "norse", "spikingjelly"), "conv_if": ("snntorch", "norse", "spikingjelly"),
        "conv_per_channel": ("snntorch", "norse"), "dense_per_channel": ("norse",)}   # snnTorch asserts one
# threshold, SpikingJelly one value of every parameter


@pytest.mark.parametrize("factory", sorted(CUBA))
def test_default_leaky_runs_spike_for_spike_in_snntorch_and_norse(models, factory, tmp_path):
    c = compile_for(models, factory)
    t = c.report["target"]
    assert c.report["equivalent"] and t["exact"], t
    assert t["nodes"]["CubaLIF"] == 1 and "LI" not in t["nodes"] and any(composed.CUBA_NOTE in n for n in t["notes"])
    for name in CUBA[factory]:
        verdict = t["consumers"][name]
        assert verdict["ran"] and verdict["spike_exact"] and verdict["spike_count"] > 20, (name, verdict)
    if factory == "dense_per_channel":
        assert "one value" in t["consumers"]["snntorch"]["reason"]
    # independently of the checker: the user's float32 snnTorch module against each consumer on the written file
    from spikec.targets.nir.export import export_graph
    path = tmp_path / "model.nir"
    nir.write(path, export_graph(c.graph).graph)
    x, spikes = snntorch_run(models, factory, torch.float32)
    assert spikes.any() and not spikes.all()
    for name in CUBA[factory]:
        got, _ = consumers.run_consumer(name, path, x, 1e-4, spikes.shape[2:])
        np.testing.assert_array_equal(got, spikes)


@pytest.mark.parametrize("factory", ["dense_negative", "conv_mem"])
def test_other_defaults_are_the_li_composition_the_interpreter_reproduces(models, factory, tmp_path):
    c = compile_for(models, factory)
    t = c.report["target"]
    assert c.report["equivalent"] and t["exact"], t
    assert {"Threshold", "LI"} <= set(t["nodes"])
    assert any(composed.LEAKY_NOTE in n for n in t["notes"])
    # independently of the checker: the written file, run by the interpreter, against snnTorch itself
    from spikec.targets.nir.export import export_graph
    path = tmp_path / "model.nir"
    nir.write(path, export_graph(c.graph).graph)
    x, spikes = snntorch_run(models, factory)
    out = interpreter.run(path, x, dt=1e-4, scheme="snntorch").values
    assert spikes.any() and not spikes.all()
    np.testing.assert_array_equal(out["output"], spikes)


def test_default_leaky_membrane_is_the_li_output(models):
    """A conv step's mem (its input cannot rest at 0 through an Affine cycle: reach.leaky): the LI's output."""
    c = compile_for(models, "conv_mem")
    assert c.report["equivalent"] and c.report["target"]["exact"]
    assert c.report["target"]["nearest_variant"]["measured"] is False   # no NIR LIF outputs a membrane


def test_default_leaky_membrane_of_a_dense_step_runs_in_snntorch_and_norse(models, tmp_path):
    """A dense step's mem: an Affine cycle and a beta = 0 LIF (reach.leaky), run against the user's module."""
    from spikec.targets.nir import reach
    c = compile_for(models, "dense_mem_only")
    t = c.report["target"]
    assert c.report["equivalent"] and t["exact"] and "LI" not in t["nodes"] and "Threshold" not in t["nodes"]
    assert any(reach.MEM_NOTE in n for n in t["notes"])
    from spikec.targets.nir.export import export_graph
    path = tmp_path / "model.nir"
    nir.write(path, export_graph(c.graph).graph)
    x, mem = snntorch_run(models, "dense_mem_only", torch.float32)
    for name in ("snntorch", "norse"):
        v = t["consumers"][name]
        assert v["ran"] and v["spike_exact"] and v["spike_count"] > 20 and v["output_max_rel_diff"] < 1e-5, v
        got, _ = consumers.run_consumer(name, path, x, 1e-4, mem.shape[2:])
        np.testing.assert_allclose(got, mem, rtol=1e-5, atol=1e-5 * np.abs(mem).max())
    assert "tau / dt must be greater than 1" in t["consumers"]["spikingjelly"]["reason"]


@pytest.mark.parametrize("factory,why", [("mixed_if", "beta = 1 on some channels"),
                                         ("no_delay", "reset_delay=False and a subtract reset")])
def test_other_leaky_variants_stay_refused(models, factory, why):
    with pytest.raises(UnsupportedOp) as e:
        compile_for(models, factory)
    assert why in e.value.what and "lif_snntorch" in e.value.where


def test_every_consumer_fails_on_the_composition_and_says_so(models, tmp_path):
    """Each installed consumer's own result on the composed file (a consumer that learns Threshold shows up)."""
    from spikec.targets.nir.export import export_graph
    c = compile_for(models, "dense_negative")
    cons = c.report["target"]["consumers"]
    assert set(cons) == set(consumers.CONSUMERS) == {"snntorch", "norse", "sinabs", "spikingjelly", "rockpool"}
    for name, verdict in cons.items():
        if consumers.available(name) is None:
            assert verdict["ran"] is False and ("'lif' (Threshold)" in verdict["reason"] or
                                                "'lif_li' (LI)" in verdict["reason"]), (name, verdict)
    path = tmp_path / "model.nir"
    nir.write(path, export_graph(c.graph).graph)
    x = torch.rand(10)
    with consumers._quiet():
        with pytest.raises(ValueError, match="Unknown node type .*(Threshold|I)'"):   # snnTorch: no mapping
            consumers._import("snntorch", path, 1e-4)
        with pytest.raises(KeyError, match="lif"):      # Norse: drops I and Threshold, then misses them
            consumers._import("norse", path, 1e-4)(x, None)
    g = nir.read(path)
    for li, th, fb in composed.composed_neurons(g):   # Sinabs needs r = 1; with it, it still has no Threshold
        g.nodes[li] = nir.LI(tau=np.full(6, 1e30), r=np.ones(6), v_leak=np.zeros(6))
    if consumers.available("sinabs") is None:   # ... it drops the Threshold silently: no spikes come out
        with consumers._quiet(), torch.no_grad():
            m = consumers._sinabs_module(g)
            assert "lif" not in dict(m.net.named_children())
            try:
                y = torch.stack([m(x * 3, None)[0] for _ in range(4)])
            except RuntimeError as e:   # nirtorch wires the graph around the missing node, shapes permitting
                assert "cannot be multiplied" in str(e)
            else:
                assert not torch.isin(y, torch.tensor([0.0, 1.0])).all()


def test_nearest_variant_is_measured_and_is_what_a_consumer_runs(models, tmp_path):
    c = compile_for(models, "conv_negative")
    v = c.report["target"]["nearest_variant"]
    assert v["measured"] and v["spikes_compared"] > 0
    assert v["summary"].startswith("zero reset: ") and "% of spikes differ" in v["summary"]
    assert 0 < v["spike_mismatches"] < v["spikes_compared"]
    # the variant is a plain LIF graph (what the importers read); its measured spikes are the interpreter's
    from spikec.targets.nir.export import export_graph
    g = export_graph(c.graph).graph
    variant = composed.nearest(g, 1e-4)
    assert not any(type(n).__name__ in ("LI", "Threshold") for n in variant.nodes.values())
    path = tmp_path / "variant.nir"
    nir.write(path, variant)
    x = np.load(models / "conv.npz")["input"]
    ours = interpreter.run(path, x, dt=1e-4, scheme="snntorch").values["output"]
    ref = c.io["output"] if "output" in c.io else None
    if ref is not None:
        assert int((ours != ref).sum()) == v["spike_mismatches"]


def test_sinabs_limits_name_its_neurons():
    lif = nir.LIF(tau=np.full(3, 2.0), r=np.ones(3), v_leak=np.zeros(3), v_threshold=np.ones(3), v_reset=np.zeros(3))
    g = nir.NIRGraph(nodes={"input": nir.Input(np.array([3])), "lif": lif, "if": nir.IF(r=np.ones(3),
                     v_threshold=np.ones(3)), "lin": nir.Linear(weight=np.eye(3)), "output": nir.Output(np.array([3]))},
                     edges=[("input", "lin"), ("lin", "lif"), ("lif", "if"), ("if", "output")])
    found = consumers.limits(g, 1e-4)["sinabs"]
    assert any("'lin' (Linear): sinabs.from_nir has no mapping" in f for f in found)
    assert any("'lif' (LIF)" in f and "exp(-1/tau)" in f for f in found)
    assert any("'if' (IF)" in f and "MultiSpike" in f and "min_v_mem" in f for f in found)


def test_snntorch_cannot_build_a_two_node_recurrence(tmp_path):
    """snnTorch 1.0's import_from_nir makes a LIF/CubaLIF <-> Affine/Linear loop a nested NIRGraph, which nirtorch 2.6's
    nir_to_torch fails on: the limit is named, and the import still fails (a fixed snnTorch shows up here)."""
    cuba = nir.CubaLIF(tau_syn=np.full(3, 1e-3), tau_mem=np.full(3, 1e-4), r=np.ones(3), v_leak=np.zeros(3),
                       v_threshold=np.ones(3), v_reset=np.zeros(3), w_in=np.full(3, 10.0))
    g = nir.NIRGraph(nodes={"input": nir.Input(np.array([3])), "fc": nir.Affine(weight=np.eye(3), bias=np.zeros(3)),
                            "lif": cuba, "rec": nir.Linear(weight=-np.eye(3)), "output": nir.Output(np.array([3]))},
                     edges=[("input", "fc"), ("fc", "lif"), ("lif", "rec"), ("rec", "lif"), ("lif", "output")])
    assert any(consumers.NESTED in f for f in consumers.limits(g, 1e-4)["snntorch"])
    assert not any("cycle" in f for f in consumers.limits(g, 1e-4)["norse"])
    path = tmp_path / "rnn.nir"
    nir.write(path, g)
    with consumers._quiet(), pytest.raises(AttributeError, match="'GraphModule' object has no attribute 'items'"):
        consumers._import("snntorch", path, 1e-4)


def test_snntorch_runs_a_two_node_recurrence_off_the_input_wrong(tmp_path):
    """The same loop fed by the Input directly builds in snnTorch, and its spikes are not the file's."""
    cuba = nir.CubaLIF(tau_syn=np.full(3, 1e-3), tau_mem=np.full(3, 1e-4), r=np.ones(3), v_leak=np.zeros(3),
                       v_threshold=np.ones(3), v_reset=np.zeros(3), w_in=np.full(3, 10.0))
    g = nir.NIRGraph(nodes={"input": nir.Input(np.array([3])), "lif": cuba, "rec": nir.Linear(weight=-np.eye(3)),
                            "output": nir.Output(np.array([3]))},
                     edges=[("input", "lif"), ("lif", "rec"), ("rec", "lif"), ("lif", "output")])
    assert any(consumers.NESTED in f for f in consumers.limits(g, 1e-4)["snntorch"])
    path = tmp_path / "rnn.nir"
    nir.write(path, g)
    x = np.random.default_rng(1).random((30, 1, 3)) * 3
    ours = interpreter.run(path, x, dt=1e-4).values["output"]
    theirs, _ = consumers.run_consumer("snntorch", path, x, 1e-4, (3,))
    assert ours.sum() > 20 and (ours != theirs).sum() > 10
