"""Networks written as framework users write them, to NIR (#25): each exports exactly (spikec's NIR interpreter on
the user's inputs) and runs spike for spike in a named independent consumer, compared here with the user's own
float32 module; or is refused with its reason and the nearest exportable variant measured on those inputs. Every
spiking layer fires on the inputs (checked), and each consumer that cannot run a file says why (pinned)."""
import importlib.util

import nir
import numpy as np
import pytest
import torch

from spikec.ir.errors import UnsupportedOp
from spikec.core.interpreter import run as ir_run
from spikec.targets.nir import consumers, reach
from spikec.targets.nir.export import export_graph

pytest.importorskip("snntorch")
pytest.importorskip("norse")

MODELS = '''
import norse.torch as norse
import snntorch as snn
import torch
from torch import nn


def _gain(m, k):
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(k)
    return m


def _bias(m, b):
    with torch.no_grad():
        m.bias.fill_(b)
    return m


class Conv1dLeaky(nn.Module):
    """The snnTorch tutorial's loop over [T, B, C, L]: nn.Conv1d, the default Leaky, flatten, Linear, Leaky."""
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = _gain(nn.Conv1d(2, 4, 3, padding=1), 2.0)
        self.lif1 = snn.Leaky(beta=0.9)
        self.fc = _gain(nn.Linear(4 * 8, 5), 2.0)
        self.lif2 = snn.Leaky(beta=0.8)

    def forward(self, x):
        mem1, mem2 = self.lif1.init_leaky(), self.lif2.init_leaky()
        out = []
        for t in range(x.shape[0]):
            s1, mem1 = self.lif1(self.conv(x[t]), mem1)
            s2, mem2 = self.lif2(self.fc(s1.flatten(1)), mem2)
            out.append(s2)
        return torch.stack(out)


class CatDense(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = _bias(nn.Linear(10, 6), 0.4), nn.Linear(10, 4)
        self.l1 = snn.Leaky(beta=0.9, init_hidden=True)
        self.l2 = snn.Leaky(beta=0.8, init_hidden=True)
        self.fc = _bias(_gain(nn.Linear(10, 5), 2.0), 0.6)
        self.l3 = snn.Leaky(beta=0.7, init_hidden=True)

    def forward(self, x):
        return self.l3(self.fc(torch.cat([self.l1(self.a(x)), self.l2(self.b(x))], dim=-1)))


class Syn(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(10, 6)
        self.syn = snn.Synaptic(alpha=0.8, beta=0.9, init_hidden=True)

    def forward(self, x):
        return self.syn(self.fc(x))


class MemRead(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = _bias(nn.Linear(10, 6), 0.5)
        self.lif = snn.Leaky(beta=0.9, init_hidden=True)
        self.fc2 = _bias(_gain(nn.Linear(6, 3), 2.0), 0.5)
        self.out = snn.Leaky(beta=0.9, init_hidden=True, output=True, reset_mechanism="zero")

    def forward(self, x):
        return self.out(self.fc2(self.lif(self.fc(x))))[1]


class MaxPoolReal(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.lif = snn.Leaky(beta=0.9, init_hidden=True, reset_mechanism="zero")

    def forward(self, x):
        return self.lif(self.pool(self.conv(x)))


class NorseLI(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = _gain(nn.Linear(10, 6), 8.0)
        self.lif = norse.LIFCell()
        self.fc2 = nn.Linear(6, 3)
        self.li = norse.LICell()

    def forward(self, x, state=None):
        s1, s2 = state if state is not None else (None, None)
        z, s1 = self.lif(self.fc(x), s1)
        v, s2 = self.li(self.fc2(z), s2)
        return v, (s1, s2)


class NorseRec(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = _gain(nn.Linear(10, 6), 8.0)
        self.lif = norse.LIFRecurrentCell(6, 6)

    def forward(self, x, state=None):
        return self.lif(self.fc(x), state)


def conv1d(): return Conv1dLeaky()
def cat(): return CatDense()
def synaptic(): return Syn()
def mem_zero(): return MemRead()
def maxpool(): return MaxPoolReal()
def norse_li(): return NorseLI()
def norse_rec(): return NorseRec()
'''
INPUT = {"conv1d": "c1d", "maxpool": "c2d"}
STEP = ("norse_li", "norse_rec", "cat", "synaptic", "mem_zero", "maxpool")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("reach")
    (d / "models.py").write_text(MODELS)
    rng = np.random.default_rng(0)
    np.savez(d / "dense.npz", input=rng.random((20, 3, 10)) * 3 - 0.5)
    np.savez(d / "c1d.npz", input=rng.random((20, 3, 2, 8)) * 3 - 0.5)
    np.savez(d / "c2d.npz", input=rng.random((20, 3, 2, 6, 6)) * 3 - 0.5)
    return d


def _inputs(models, factory):
    return np.load(models / f"{INPUT.get(factory, 'dense')}.npz")["input"]


def compile_for(models, factory, **kw):
    from spikec.app.driver import CompileOptions, compile_model
    return compile_model(CompileOptions(f"{models / 'models.py'}:{factory}", target="nir",
                                        inputs=str(models / f"{INPUT.get(factory, 'dense')}.npz"),
                                        stepping="step" if factory in STEP else "auto", **kw))


def user_run(models, factory):
    """The user's own float32 module on the inputs: its output per step [T, B, ...]."""
    spec = importlib.util.spec_from_file_location("reach_models", models / "models.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    net, x = getattr(mod, factory)(), torch.as_tensor(_inputs(models, factory), dtype=torch.float32)
    with torch.no_grad():
        if factory == "conv1d":
            return net(x).numpy()
        state, outs = None, []
        for x_t in x:
            y, state = net(x_t, state) if factory.startswith("norse") else (net(x_t), None)
            outs.append(y.numpy().copy())
    return np.stack(outs)


def every_layer_fires(c, x):
    trace = ir_run(c.graph, x)
    for n in c.graph.nodes:
        if n.type.is_spike and n.op != "input":
            s = trace.values[n.name]
            assert s.any() and not s.all(), n.name


# factory -> the consumers that run the written file spike for spike (each independent of spikec)
EXACT = {"conv1d": ("spikingjelly",), "cat": ("snntorch", "spikingjelly"), "norse_rec": ("norse", "spikingjelly"),
         "synaptic": ("snntorch", "norse", "spikingjelly"), "norse_li": ("snntorch", "norse", "spikingjelly")}
# factory -> {consumer: why it is not run}: pinned, so that a consumer that learns the construct shows up
NOT_RUN = {"conv1d": {"snntorch": "(Conv1d): import_from_nir has no mapping", "norse": "(Conv1d): from_nir has no "
                      "mapping", "sinabs": "(CubaLIF): sinabs.from_nir has no mapping", "rockpool": "(Conv1d)"},
           "cat": {"norse": "a join of two paths", "sinabs": "(CubaLIF)", "rockpool": "LIFTorch"},
           "norse_rec": {"snntorch": "nested NIRGraph", "sinabs": "(CubaLIF)", "rockpool": "a cycle through"},
           "synaptic": {"sinabs": "(CubaLIF)", "rockpool": "(LIF): rockpool's from_nir reads node.tau_mem"},
           "norse_li": {"sinabs": "(CubaLIF)", "rockpool": "(LIF): rockpool's from_nir reads node.tau_mem"}}
NOTES = {"conv1d": "Conv1d", "cat": "concat as a 0/1 selection", "norse_rec": reach.REC_NOTE,
         "synaptic": reach.SYN_NOTE, "norse_li": reach.LI_CYCLE_NOTE}


@pytest.mark.parametrize("factory", sorted(NOT_RUN))
def test_exported_exactly_and_run_where_a_consumer_reads_it(models, factory, tmp_path):
    c = compile_for(models, factory)
    t = c.report["target"]
    assert c.report["equivalent"] and t["exact"], t
    assert any(NOTES[factory] in n for n in t["notes"]), t["notes"]
    every_layer_fires(c, _inputs(models, factory))
    for name in EXACT.get(factory, ()):
        v = t["consumers"][name]
        assert v["ran"] and v["spike_exact"] and v["spike_count"] > 20, (name, v)
    for name, why in NOT_RUN[factory].items():
        v = t["consumers"][name]
        assert v["ran"] is False and why in v["reason"], (name, v)
    assert set(EXACT.get(factory, ())) | set(NOT_RUN[factory]) == set(consumers.CONSUMERS)
    # independently of the checker: the user's float32 module against each consumer on the written file
    path = tmp_path / "model.nir"
    nir.write(path, export_graph(c.graph).graph)
    x, want = _inputs(models, factory), user_run(models, factory)
    for name in EXACT.get(factory, ()):
        got, _ = consumers.run_consumer(name, path, x, t["dt"], want.shape[2:])
        if factory == "norse_li":   # a membrane: float32 both, summed in another order
            assert t["consumers"][name]["output_max_rel_diff"] < 1e-5
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * np.abs(want).max(), err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)


def test_norse_would_run_the_concat_late(models, tmp_path):
    """The Norse limit pinned on a real run: nirtorch 2.6 visits the concat's reader before its second part and
    returns the last node visited (the second part), not the graph output."""
    c = compile_for(models, "cat")
    path = tmp_path / "model.nir"
    nir.write(path, export_graph(c.graph).graph)
    with pytest.raises(ValueError, match=r"returned a \(3, 10\) tensor"):
        consumers.run_consumer("norse", path, _inputs(models, "cat"), 1e-4, (5,))


@pytest.mark.parametrize("factory,why,variant", [
    ("mem_zero", "the membrane of a hard-reset neuron that can fire", "reset='subtract'"),
    ("maxpool", "max-pool over real values", "average pooling (NIR AvgPool2d)")])
def test_refused_with_the_nearest_variant_measured(models, factory, why, variant):
    with pytest.raises(UnsupportedOp) as e:
        compile_for(models, factory)
    what = e.value.what
    assert why in what and "nearest exportable variant" in what and variant in what, what
    assert "on these inputs" in what
    c = compile_for(models, factory, report_refusals=True)
    t = c.report["target"]
    assert t["refused"] and variant in t["reason"] and not c.report["equivalent"]


def test_the_terminal_says_why_and_what_to_change(models, tmp_path):
    """``spikec compile --target nir`` on a refused network: the summary's target line names the reason and the
    measured variant, stderr the full reason and the remedy, and the exit code is 1 (not equivalent)."""
    from click.testing import CliRunner

    from spikec.app.cli import main
    r = CliRunner().invoke(main, [
        "compile", f"{models / 'models.py'}:maxpool", "--inputs", str(models / "c2d.npz"), "--stepping", "step",
        "--target", "nir", "-o", str(tmp_path / "out")])
    assert r.exit_code == 1, r.output
    target = [line for line in r.stdout.splitlines() if line.strip().startswith("target")]
    assert target and "nir: refused" in target[0] and "max-pool over real values" in target[0]
    assert "nearest exportable variant" in target[0] and "% of output 'lif''s spikes differ" in target[0]
    assert "note: target nir refused" in r.stderr and "remedy: keep this model on another target" in r.stderr
