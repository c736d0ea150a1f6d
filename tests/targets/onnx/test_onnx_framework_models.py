"""Framework models as their users write them, compiled with ``--target onnx``: the written ``model.onnx`` is
spike-exact against the interpreter (``verify``), and run directly in onnxruntime it returns what the
framework's own float64 forward returns, every output (spikes and state read-outs) bit for bit.

- snnTorch tutorial 5 (``examples/frameworks/snntorch_loop.py``): its own loop, ``torch.stack(spk2_rec)``,
  ``torch.stack(mem2_rec)``; the mem output was exported as spikes before (``lif_snntorch`` ignored ``read``).
- SpikingJelly ``ParametricLIFNode``: its ``decay = sigmoid(w)`` was ignored (exported as IF, no leak).
- snnTorch ``Synaptic``, ``RLeaky`` (linear recurrence), ``Alpha`` stepped per time step, and Norse's multi-step
  ``LIF``, ``LI`` (``record_states=True``), returning their states.
"""
import json
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from click.testing import CliRunner
from torch import nn

from spikec.app.cli import main
from spikec.app.driver import CompileOptions, compile_model, write_outdir
from spikec.core.interpreter import run
from spikec.ir.graph import Graph
from spikec.targets.onnx import run_model

snntorch = pytest.importorskip("snntorch")
snntorch_utils = pytest.importorskip("snntorch.utils")
sj = pytest.importorskip("spikingjelly.activation_based.functional")
pytest.importorskip("norse.torch")

REPO = Path(__file__).resolve().parents[3]
FRAMEWORKS = REPO / "examples" / "frameworks"


pytestmark = pytest.mark.usefixtures("one_thread")   # conftest.py


def load(path, factory):
    import importlib.util
    spec = importlib.util.spec_from_file_location(f"onnx_e2e_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, factory)()


def cast_hooks(model):
    """snnTorch hands float32 spikes to the next layer: in float64 they are cast (exactly) to the layer's dtype."""
    for m in model.modules():
        params = list(m.parameters(recurse=False))
        if params and not isinstance(m, snntorch.SpikingNeuron):
            m.register_forward_pre_hook(lambda mod, a, p=params[0]: tuple(v.to(p.dtype) for v in a))


def dyadic_checkpoint(path, factory, ckpt):
    """The model's state_dict with its synaptic layers' weights rounded to multiples of 1/64: with dyadic inputs
    every sum is exact in any order, so the ONNX MatMul (its own summation order) equals torch bit for bit.
    Returns the model, loaded with it, in float64 as the framework runs it."""
    model = load(path, factory)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                for p in m.parameters(recurse=False):
                    p.copy_(torch.round(p * 64) / 64)
    torch.save(model.state_dict(), ckpt)
    return model.double().eval()


def compile_onnx(tmp_path, path, factory, x, stepping):
    """``compile_model(..., target="onnx")`` with a dyadic checkpoint; returns (Compiled, model.onnx, OUTDIR, the
    framework's model in float64 with the same weights)."""
    np.savez(tmp_path / "x.npz", input=x)
    torch_model = dyadic_checkpoint(path, factory, tmp_path / "ckpt.pt")
    c = compile_model(CompileOptions(f"{path}:{factory}", weights=str(tmp_path / "ckpt.pt"),
                                     inputs=str(tmp_path / "x.npz"), stepping=stepping, target="onnx"))
    out = write_outdir(tmp_path / "out", c)
    t = c.report["target"]
    assert c.report["equivalent"] and t["equivalent"] and t["spike_exact"], t.get("first_mismatches")
    assert t["nodes_compared"] == len(c.graph.nodes) - 1 and t["probe_outputs_match_plain"]
    return c, onnx.load(str(out / "model.onnx")), out, torch_model


def dyadic_inputs(seed, shape, top=1.5):
    return np.floor(np.random.default_rng(seed).random(shape) * top * 16) / 16


def same_as_framework(c, model, x, want):
    """The written model, run on the user's input ``x`` (``[T, B, ...]``), returns the framework's own float64
    outputs exactly."""
    got = run_model(model, {c.graph.inputs[0].name: x})
    assert len(c.graph.outputs) == len(want)
    for name, w in zip(c.graph.outputs, want):
        assert got[name].shape == w.shape, name
        assert np.array_equal(got[name], w), (name, np.abs(got[name] - w).max())


def test_snntorch_tutorial_5_spikes_and_mem(tmp_path):
    path = FRAMEWORKS / "snntorch_loop.py"
    x = dyadic_inputs(0, (6, 64), 2.0)                          # static [B, 64]: the loop runs num_steps
    c, model, out, torch_model = compile_onnx(tmp_path, path, "net", x, "loop")
    ops = {n.name: (n.op, n.attrs.get("read", "spikes")) for n in c.graph.nodes}
    assert ops["lif2.mem"] == ("lif_snntorch", "mem")
    cast_hooks(torch_model)
    with torch.no_grad():
        spk, mem = (o.double().numpy() for o in torch_model(torch.as_tensor(x)))
    assert spk.any() and not spk.all() and not np.isin(mem, (0.0, 1.0)).all()
    steps = c.io["input"]                                       # the model.onnx input: x repeated, [T, B, 64]
    assert steps.shape == (len(spk), *x.shape) and np.array_equal(steps, np.broadcast_to(x, steps.shape))
    same_as_framework(c, model, steps, [spk, mem])
    v = CliRunner().invoke(main, ["verify", str(out)])
    assert v.exit_code == 0, v.output


PLIF = '''
import torch
from spikingjelly.activation_based import layer, neuron, surrogate
from torch import nn


def net():
    torch.manual_seed(0)
    seq = nn.Sequential(layer.Linear(10, 8, step_mode="m"),
                        neuron.ParametricLIFNode(init_tau=3.0, v_threshold=0.5, step_mode="m",
                                                 surrogate_function=surrogate.ATan()),
                        layer.Linear(8, 6, step_mode="m"),
                        neuron.ParametricLIFNode(init_tau=1.5, v_threshold=0.5, decay_input=False, v_reset=None,
                                                 step_mode="m"))
    with torch.no_grad():
        seq[0].weight.mul_(3.0)
        seq[2].weight.mul_(3.0)
    return seq
'''


def test_spikingjelly_parametric_lif(tmp_path):
    path = tmp_path / "plif.py"
    path.write_text(textwrap.dedent(PLIF))
    x = (np.random.default_rng(1).random((10, 4, 10)) < 0.5).astype(np.float64)
    c, model, _, torch_model = compile_onnx(tmp_path, path, "net", x, "multistep")
    decays = [float(n.params["decay"]) for n in c.graph.nodes if n.op == "lif_sj"]
    assert len(decays) == 2 and all(0 < k < 1 and k != 0.5 for k in decays)
    sj.reset_net(torch_model)
    with torch.no_grad():
        want = torch_model(torch.as_tensor(x)).numpy()
    assert want.any() and not want.all()
    same_as_framework(c, model, x, [want])
    # the IF the emitter used to write (decay ignored) is another model: the test tells the two apart
    as_if = Graph(tuple(n.with_(params={k: v for k, v in n.params.items() if k != "decay"}) if n.op == "lif_sj"
                        else n for n in c.graph.nodes), c.graph.outputs)
    assert not np.array_equal(run(as_if, x).values[c.graph.outputs[0]], want)


STEPPED = '''
import snntorch as snn
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = nn.Linear(12, 8)
        self.syn = snn.Synaptic(alpha=0.8, beta=0.9, threshold=0.3, init_hidden=True, output=True)
        self.fc2 = nn.Linear(8, 6)
        self.rleaky = snn.RLeaky(beta=0.85, linear_features=6, threshold=0.3, init_hidden=True, output=True)
        self.fc3 = nn.Linear(6, 5)
        self.alpha = snn.Alpha(alpha=0.9, beta=0.7, threshold=0.2, init_hidden=True, output=True)

    def forward(self, x):
        spk1, syn1, mem1 = self.syn(self.fc1(x))
        spk2, mem2 = self.rleaky(self.fc2(spk1))
        spk3, exc, inh, mem3 = self.alpha(self.fc3(spk2))
        return spk3, syn1, mem1, mem2, exc, inh, mem3


def net():
    return Net()
'''


def test_snntorch_synaptic_rleaky_alpha_stepped(tmp_path):
    path = tmp_path / "stepped.py"
    path.write_text(textwrap.dedent(STEPPED))
    x = dyadic_inputs(2, (10, 3, 12))
    c, model, _, torch_model = compile_onnx(tmp_path, path, "net", x, "step")
    assert {"synaptic_snntorch", "rleaky_snntorch", "alpha_snntorch"} <= {n.op for n in c.graph.nodes}
    cast_hooks(torch_model)
    snntorch.SpikingNeuron.instances[:] = [m for m in snntorch.SpikingNeuron.instances
                                           if any(m is n for n in torch_model.modules())]
    snntorch_utils.reset(torch_model)
    with torch.no_grad():
        steps = [torch_model(x_t) for x_t in torch.as_tensor(x)]
    want = [torch.stack([s[i] for s in steps]).double().numpy() for i in range(len(steps[0]))]
    assert want[0].any() and not want[0].all()
    same_as_framework(c, model, x, want)


NORSE = '''
import norse.torch as norse
import torch
from torch import nn


class Net(nn.Module):
    """Norse's multi-step LIF and LI recording their states (each leaf a [T, B, ...] sequence)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = nn.Linear(10, 8)
        self.lif = norse.LIF(p=norse.LIFParameters(v_th=torch.tensor(0.3)), record_states=True)
        self.fc2 = nn.Linear(8, 4)
        self.li = norse.LI(record_states=True)

    def forward(self, x):
        z, s1 = self.lif(self.fc1(x))
        v, s2 = self.li(self.fc2(z))
        return z, s1.v, s1.i, v, s2.i


def net():
    return Net()
'''


def test_norse_lif_and_li_with_their_states(tmp_path):
    path = tmp_path / "norse_cells.py"
    path.write_text(textwrap.dedent(NORSE))
    x = dyadic_inputs(3, (12, 3, 10), 8.0)
    c, model, _, torch_model = compile_onnx(tmp_path, path, "net", x, "multistep")
    assert {"lif_norse", "li_norse"} <= {n.op for n in c.graph.nodes}
    with torch.no_grad():
        want = [o.numpy() for o in torch_model(torch.as_tensor(x))]
    assert want[0].any() and not want[0].all()
    same_as_framework(c, model, x, want)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["target"]["name"] == "onnx"
