"""snnTorch's default RLeaky (subtract reset, reset_delay=True, read as spikes) in NIR: a CubaLIF (its current the
RLeaky's mem) with the -threshold and the recurrence fed back through identities (``recurrent``). The user's own
float32 ``snntorch.RLeaky`` module is the reference each consumer that reads the file is held to, spike for spike;
the variants the composition does not cover are refused by name."""
import importlib.util

import nir
import numpy as np
import pytest
import torch

from spikec.ir.errors import UnsupportedOp
from spikec.targets.nir import consumers, recurrent

snn = pytest.importorskip("snntorch")

MODELS = '''
import snntorch as snn
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, conv=False, only_mem=False, **kw):
        super().__init__()
        torch.manual_seed(0)
        self.only_mem = only_mem
        self.fc = nn.Conv2d(2, 3, 3, padding=1) if conv else nn.Linear(10, 6)
        self.rlif = snn.RLeaky(init_hidden=True, **kw)

    def forward(self, x):
        y = self.rlif(self.fc(x))
        return y[1] if self.only_mem else y


def dense(): return Net(beta=0.9, threshold=0.5, linear_features=6)
def dense_per_channel(): return Net(beta=torch.linspace(0.5, 0.95, 6), threshold=0.5, linear_features=6)
def one_to_one(): return Net(beta=0.8, threshold=0.5, all_to_all=False, V=0.3)
def one_to_one_per_channel(): return Net(beta=0.8, threshold=0.5, all_to_all=False, V=torch.linspace(-0.5, 0.5, 6))
def dense_if(): return Net(beta=1.0, threshold=0.5, linear_features=6)
def conv_one_to_one(): return Net(conv=True, beta=0.7, threshold=0.5, all_to_all=False, V=0.25)
def zero_reset(): return Net(beta=0.9, threshold=0.5, linear_features=6, reset_mechanism="zero")
def no_delay(): return Net(beta=0.9, threshold=0.5, linear_features=6, reset_delay=False)
def mem_read(): return Net(beta=0.9, threshold=0.5, linear_features=6, output=True, only_mem=True)
def conv_recurrence(): return Net(conv=True, beta=0.7, threshold=0.5, conv2d_channels=3, kernel_size=3)
'''
CONV = ("conv_one_to_one", "conv_recurrence")
# factory -> the consumers that run it (SpikingJelly takes one value of every CubaLIF parameter; snnTorch one
# threshold, which a per-neuron beta's tau search makes differ by ulps)
RUNS = {"dense": ("snntorch", "norse", "spikingjelly"), "dense_per_channel": ("norse",),
        "one_to_one": ("snntorch", "norse", "spikingjelly"), "one_to_one_per_channel": ("snntorch", "norse"),
        "dense_if": ("snntorch", "norse", "spikingjelly"), "conv_one_to_one": ("snntorch", "norse", "spikingjelly")}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("rleaky_nir")
    (d / "models.py").write_text(MODELS)
    rng = np.random.default_rng(3)
    np.savez(d / "dense.npz", input=rng.random((30, 4, 10)) * 4 - 1)
    np.savez(d / "conv.npz", input=rng.random((30, 2, 2, 5, 5)) * 3 - 1)
    return d


def compile_for(models, factory):
    from spikec.app.driver import CompileOptions, compile_model
    x = "conv" if factory in CONV else "dense"
    return compile_model(CompileOptions(f"{models / 'models.py'}:{factory}", inputs=str(models / f"{x}.npz"),
                                        stepping="step", target="nir"))


def snntorch_run(models, factory):
    """The user's own float32 module, as they run it: snnTorch's spikes."""
    spec = importlib.util.spec_from_file_location("rleaky_models", models / "models.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    net = getattr(mod, factory)()
    x = np.load(models / ("conv.npz" if factory in CONV else "dense.npz"))["input"]
    net.rlif.reset_mem()
    with torch.no_grad():
        out = [net(torch.as_tensor(x[t], dtype=torch.float32)) for t in range(x.shape[0])]
    return x, np.stack([(y[0] if isinstance(y, tuple) else y).numpy() for y in out])


@pytest.mark.parametrize("factory", sorted(RUNS))
def test_default_rleaky_runs_spike_for_spike(models, factory, tmp_path):
    c = compile_for(models, factory)
    t = c.report["target"]
    assert c.report["equivalent"] and t["exact"], t
    assert t["nodes"]["CubaLIF"] == 1 and any(recurrent.NOTE in n for n in t["notes"])
    for name in RUNS[factory]:
        verdict = t["consumers"][name]
        assert verdict["ran"] and verdict["spike_exact"] and verdict["spike_count"] > 20, (name, verdict)
    if factory == "dense_per_channel":
        assert "one value" in t["consumers"]["snntorch"]["reason"]
    # independently of the checker: snntorch.RLeaky itself (float32) against each consumer on the written file
    from spikec.targets.nir.export import export_graph
    path = tmp_path / "model.nir"
    nir.write(path, export_graph(c.graph).graph)
    x, spikes = snntorch_run(models, factory)
    assert spikes.any() and not spikes.all()
    for name in RUNS[factory]:
        got, _ = consumers.run_consumer(name, path, x, 1e-4, spikes.shape[2:])
        np.testing.assert_array_equal(got, spikes, err_msg=name)


def test_the_recurrence_matters(models, tmp_path):
    """Without its recurrence (or its bias) the file computes other spikes: the W_rec cycle and the bias on the
    input path carry the RLeaky's rec(spk) = W spk + b, in every consumer that ran it."""
    from spikec.targets.nir.export import export_graph
    c = compile_for(models, "dense")
    g = export_graph(c.graph).graph
    x, spikes = snntorch_run(models, "dense")
    assert "rlif_w_rec" in g.nodes and "rlif_rec_bias" in g.nodes
    for drop in ("rlif_w_rec", "rlif_rec_bias"):
        nodes = dict(g.nodes)
        if drop == "rlif_w_rec":
            nodes[drop] = nir.Linear(weight=np.zeros_like(g.nodes[drop].weight))
        else:
            nodes[drop] = nir.Affine(weight=g.nodes[drop].weight, bias=np.zeros_like(g.nodes[drop].bias))
        path = tmp_path / f"{drop}.nir"
        nir.write(path, nir.NIRGraph(nodes=nodes, edges=list(g.edges), metadata=dict(g.metadata)))
        got, _ = consumers.run_consumer("norse", path, x, 1e-4, spikes.shape[2:])
        assert (got != spikes).any(), drop


@pytest.mark.parametrize("factory, why", [("zero_reset", "reset 'zero'"), ("no_delay", "reset_delay=False"),
                                          ("mem_read", "read 'mem'"), ("conv_recurrence", "a conv2d recurrence")])
def test_other_variants_are_refused_by_name(models, factory, why):
    from spikec.targets.nir.export import REMEDIES, VARIANT_REASONS, export
    c = compile_model_none(models, factory)
    with pytest.raises(UnsupportedOp) as e:
        export(c.graph)
    assert why in e.value.what and VARIANT_REASONS["rleaky_snntorch"] in e.value.what
    assert "rleaky_snntorch" in e.value.where and e.value.remedy == REMEDIES["rleaky_snntorch"]


def compile_model_none(models, factory):
    from spikec.app.driver import CompileOptions, compile_model
    x = "conv" if factory in CONV else "dense"
    return compile_model(CompileOptions(f"{models / 'models.py'}:{factory}", inputs=str(models / f"{x}.npz"),
                                        stepping="step", target="none"))
