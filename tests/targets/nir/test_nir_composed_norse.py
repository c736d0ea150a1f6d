"""Norse's LIFCell (as NIR CubaLIF: the current jumps by the input, then decays -- a leaky integrator of gain 1) and
LIFBoxCell (as NIR LIF) exported from their spikes: spikec's interpreter, Norse's from_nir and snnTorch's
import_from_nir run them spike for spike against the user's own Norse module; the variants NIR cannot hold stay
refused by name."""
import numpy as np
import pytest
import torch

from spikec.ir.errors import UnsupportedOp
from spikec.targets.nir import composed, consumers

pytest.importorskip("norse.torch")

MODELS = '''
import norse.torch as norse
import torch
from torch import nn


def _net(cell, conv=False):
    torch.manual_seed(0)
    return norse.SequentialState(nn.Conv2d(2, 4, 3, padding=1) if conv else nn.Linear(10, 6), cell)


def cell(): return _net(norse.LIFCell())
def cell_conv(): return _net(norse.LIFCell(), conv=True)
def cell_slow(): return _net(norse.LIFCell(norse.LIFParameters(tau_mem_inv=torch.tensor(50.0), v_th=torch.tensor(0.5))))
def box(): return _net(norse.LIFBoxCell())
def cell_leak(): return _net(norse.LIFCell(norse.LIFParameters(v_leak=torch.tensor(0.1))))
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("norse_nir")
    (d / "models.py").write_text(MODELS)
    rng = np.random.default_rng(0)
    np.savez(d / "dense.npz", input=rng.random((40, 3, 10)) * 40)
    np.savez(d / "conv.npz", input=rng.random((40, 2, 2, 5, 5)) * 40)
    return d


def compile_for(models, factory, consumer="any"):
    from spikec.app.driver import CompileOptions, compile_model
    x = "conv" if "conv" in factory else "dense"
    return compile_model(CompileOptions(f"{models / 'models.py'}:{factory}", inputs=str(models / f"{x}.npz"),
                                        stepping="step", target="nir", nir_consumer=consumer))


def norse_run(models, factory):
    """The user's own Norse module, float32, one call per step with its state threaded."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("norse_models", models / "models.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    net = getattr(mod, factory)()
    x = np.load(models / ("conv.npz" if "conv" in factory else "dense.npz"))["input"]
    state, outs = None, []
    with torch.no_grad():
        for t in range(x.shape[0]):
            z, state = net(torch.as_tensor(x[t], dtype=torch.float32), state)
            outs.append(z.numpy().copy())
    return x, np.stack(outs)


@pytest.mark.parametrize("factory,consumer,kind,runs", [
    ("cell", "any", "CubaLIF", ("snntorch", "norse")), ("cell_conv", "any", "CubaLIF", ("snntorch", "norse")),
    ("cell_slow", "norse", "CubaLIF", ("norse",)), ("box", "norse", "LIF", ("snntorch", "norse"))])
def test_norse_cells_run_spike_for_spike(models, factory, consumer, kind, runs, tmp_path):
    import nir
    from spikec.targets.nir.export import export_graph
    c = compile_for(models, factory, consumer)
    t = c.report["target"]
    assert c.report["equivalent"] and t["exact"], t
    assert t["nodes"][kind] == 1
    assert any((composed.NORSE_NOTE if kind == "CubaLIF" else composed.NORSE_BOX_NOTE) in n for n in t["notes"])
    for name in runs:
        v = t["consumers"][name]
        assert v["ran"] and v["spike_exact"] and v["spike_count"] > 20, (name, v)
    path = tmp_path / "model.nir"
    ex = export_graph(c.graph, consumer=consumer)
    nir.write(path, ex.graph)
    x, spikes = norse_run(models, factory)
    assert spikes.any() and not spikes.all()
    for name in runs:
        got, _ = consumers.run_consumer(name, path, x, ex.form.dt, spikes.shape[2:])
        np.testing.assert_array_equal(got, spikes)


def test_a_resting_potential_stays_refused(models):
    with pytest.raises(UnsupportedOp) as e:
        compile_for(models, "cell_leak")
    assert "lif_norse" in e.value.where and "v_leak != 0" in e.value.what
