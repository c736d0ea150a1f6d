"""SpikingJelly's soft-reset LIFNode / ParametricLIFNode (v_reset=None, decay_input=True) in NIR: the input scaled by
k = 1/tau into a CubaLIF whose current is SpikingJelly's H, with a -(1 - k) * threshold feedback through an identity
(``composed.sj_soft``). spikec's interpreter, Norse's from_nir (the default form, dt = 1) and snnTorch's
import_from_nir (--nir-consumer snntorch) run it spike for spike against SpikingJelly's own module."""
import nir
import numpy as np
import pytest
import torch

from spikec.targets.nir import composed, consumers

pytest.importorskip("spikingjelly.activation_based")

MODELS = '''
import torch
from spikingjelly.activation_based import layer, neuron
from torch import nn


def _sj(cls, conv=False, **kw):
    torch.manual_seed(0)
    first = layer.Conv2d(2, 4, 3, padding=1, step_mode="m") if conv else layer.Linear(10, 6, step_mode="m")
    return nn.Sequential(first, cls(v_threshold=0.5, step_mode="m", **kw))


def soft(): return _sj(neuron.LIFNode, v_reset=None)
def soft_tau3(): return _sj(neuron.LIFNode, tau=3.0, v_reset=None)
def soft_conv(): return _sj(neuron.LIFNode, conv=True, v_reset=None)
def plif_soft(): return _sj(neuron.ParametricLIFNode, v_reset=None)
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("sj_nir")
    (d / "models.py").write_text(MODELS)
    rng = np.random.default_rng(0)
    np.savez(d / "dense.npz", input=rng.random((24, 4, 10)) * 4 - 1)
    np.savez(d / "conv.npz", input=rng.random((24, 2, 2, 5, 5)) * 3 - 1)
    return d


def compile_for(models, factory, consumer="any"):
    from spikec.app.driver import CompileOptions, compile_model
    x = "conv" if "conv" in factory else "dense"
    return compile_model(CompileOptions(f"{models / 'models.py'}:{factory}", inputs=str(models / f"{x}.npz"),
                                        stepping="multistep", target="nir", nir_consumer=consumer))


def sj_run(models, factory):
    """SpikingJelly's own module, float32, multi-step."""
    import importlib.util
    from spikingjelly.activation_based import functional
    spec = importlib.util.spec_from_file_location("sj_models", models / "models.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    net = getattr(mod, factory)()
    x = np.load(models / ("conv.npz" if "conv" in factory else "dense.npz"))["input"]
    functional.reset_net(net)
    with torch.no_grad():
        return x, net(torch.as_tensor(x, dtype=torch.float32)).numpy()


@pytest.mark.parametrize("factory,consumer,runs", [
    ("soft", "any", ("norse",)), ("soft_tau3", "any", ("norse",)), ("soft_conv", "any", ("norse",)),
    ("plif_soft", "any", ("norse",)), ("soft", "snntorch", ("snntorch", "norse")),
    ("soft_conv", "snntorch", ("snntorch", "norse"))])
def test_soft_reset_runs_spike_for_spike(models, factory, consumer, runs, tmp_path):
    c = compile_for(models, factory, consumer)
    t = c.report["target"]
    assert c.report["equivalent"] and t["exact"], t
    assert t["nodes"]["CubaLIF"] == 1 and any(composed.SJ_NOTE in n for n in t["notes"])
    for name in runs:
        v = t["consumers"][name]
        assert v["ran"] and v["spike_exact"] and v["spike_count"] > 5, (name, v)
    if consumer == "any":   # written at dt = 1 (SpikingJelly's tau counts steps): not snnTorch's dt
        assert "dt = 1" in t["consumers"]["snntorch"]["reason"]
    from spikec.targets.nir.export import export_graph
    path = tmp_path / "model.nir"
    ex = export_graph(c.graph, consumer=consumer)
    nir.write(path, ex.graph)
    x, spikes = sj_run(models, factory)
    assert spikes.any() and not spikes.all()
    for name in runs:
        got, _ = consumers.run_consumer(name, path, x, ex.form.dt, spikes.shape[2:])
        np.testing.assert_array_equal(got, spikes)
