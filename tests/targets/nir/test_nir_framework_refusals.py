"""The frameworks' exact neurons (``lif_snntorch`` ... ``li_norse``) are refused by the NIR export by name, with a
reason (``REASONS``) and a remedy (``REMEDIES``) that is true: the ``--target onnx`` it names lowers the same graph
and reproduces the interpreter, and every framework setting it names for NIR compiles with ``--target nir``
(spikec converts it to its own ``lif``). The remedy a user found false ("use reset_delay=False") stays refused.
"""
import numpy as np
import pytest

from spikec.ir.errors import UnsupportedOp
from spikec.core.interpreter import run
from spikec.targets import coverage
from spikec.targets.nir import export as nir_export
from spikec.targets.onnx import check_model_against, export as onnx_export

FRAMEWORK_OPS = ("lif_snntorch", "synaptic_snntorch", "rleaky_snntorch", "alpha_snntorch", "lif_sj", "lif_norse",
                 "li_norse")


# the default Leaky (subtract, reset_delay=True) exports (tests/targets/nir/test_nir_composed.py): its refused variant
# and SpikingJelly's soft reset (test_nir_composed_sj.py): their refused variants
REFUSED_EXAMPLES = {"lif_snntorch": coverage.VARIANTS["lif_snntorch"]["subtract, reset_delay=False"],
                    "lif_sj": coverage.VARIANTS["lif_sj"]["hard (v_reset=0)"]}


@pytest.mark.parametrize("op", FRAMEWORK_OPS)
def test_refused_by_name_with_reason_and_remedy(op):
    graph, x = REFUSED_EXAMPLES.get(op, coverage.EXAMPLES[op])()
    with pytest.raises(UnsupportedOp) as e:
        nir_export.export(graph)
    assert any(e.value.where.startswith(f"node {n.name!r} ({op}") for n in graph.nodes if n.op == op)
    assert (nir_export.REASONS | nir_export.VARIANT_REASONS)[op] in e.value.what
    assert e.value.remedy == nir_export.REMEDIES[op]
    assert e.value.remedy.startswith(f"compile with --target onnx, which lowers {op} exactly")
    # the remedy's ONNX half is true: the same graph, every read-out among its outputs, lowers and reproduces
    ref = run(graph, x)
    result = check_model_against(onnx_export(graph, x.shape[0]), graph, x, ref)
    assert result["equivalent"] and result["spike_exact"] and result["outputs_compared"] == list(graph.outputs)


def test_reasons_and_remedies_cover_the_same_ops():
    assert set(nir_export.REMEDIES) <= set(nir_export.REASONS) | set(nir_export.VARIANT_REASONS)
    assert set(FRAMEWORK_OPS) <= set(nir_export.REMEDIES)
    assert "reset_delay=False or" not in nir_export.VARIANT_REASONS["lif_snntorch"] + nir_export.REMEDIES["lif_snntorch"]


# -- the NIR alternatives the remedies name compile with --target nir ---------------------------------------------
MODELS = '''
import snntorch as snn
import torch
from spikingjelly.activation_based import layer, neuron
from torch import nn


class Leaky(nn.Module):
    def __init__(self, mem=False, **kw):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(10, 6)
        self.lif = snn.Leaky(beta=0.9, threshold=0.5, init_hidden=True, output=mem, **kw)

    def forward(self, x):
        return self.lif(self.fc(x))


class Synaptic(nn.Module):
    def __init__(self, read, **kw):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(10, 6)
        self.n = snn.Synaptic(alpha=0.8, beta=0.9, threshold=0.5, init_hidden=True, output=True, **kw)
        self.read = read

    def forward(self, x):
        spk, syn, mem = self.n(self.fc(x))
        return spk, (syn if self.read == "syn" else mem)


def leaky_zero(): return Leaky(reset_mechanism="zero")
def leaky_zero_no_delay(): return Leaky(reset_mechanism="zero", reset_delay=False)
def synaptic_zero_no_delay(): return Synaptic("syn", reset_mechanism="zero", reset_delay=False)
def leaky_subtract_no_delay(): return Leaky(reset_delay=False)
def leaky_default(): return Leaky()
def leaky_default_with_mem(): return Leaky(mem=True)
def synaptic_zero_no_delay_mem(): return Synaptic("mem", reset_mechanism="zero", reset_delay=False)


def _sj(cls, **kw):
    torch.manual_seed(0)
    return nn.Sequential(layer.Linear(10, 6, step_mode="m"), cls(v_threshold=0.3, step_mode="m", **kw))


def if_soft(): return _sj(neuron.IFNode, v_reset=None)
def if_hard(): return _sj(neuron.IFNode)
def lif_tau2(): return _sj(neuron.LIFNode, tau=2.0, decay_input=False)
def lif_tau2_soft(): return _sj(neuron.LIFNode, tau=2.0, decay_input=False, v_reset=None)
def plif(): return _sj(neuron.ParametricLIFNode, v_reset=None)   # soft: a CubaLIF cycle (composed.sj_soft)
def lif_tau3_hard(): return _sj(neuron.LIFNode, tau=3.0)          # tau not a power of two: the remedy excludes it
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    pytest.importorskip("snntorch")
    pytest.importorskip("spikingjelly.activation_based")
    d = tmp_path_factory.mktemp("nir_remedies")
    (d / "models.py").write_text(MODELS)
    np.savez(d / "x.npz", input=np.random.default_rng(0).random((8, 4, 10)) * 1.5)
    return d


def compile_for(models, factory, stepping, target):
    from spikec.app.driver import CompileOptions, compile_model
    return compile_model(CompileOptions(f"{models / 'models.py'}:{factory}", inputs=str(models / "x.npz"),
                                        stepping=stepping, target=target))


@pytest.mark.parametrize("factory,stepping", [
    ("leaky_zero", "step"), ("leaky_zero_no_delay", "step"), ("synaptic_zero_no_delay", "step"),
    ("if_soft", "multistep"), ("if_hard", "multistep"), ("lif_tau2", "multistep"), ("lif_tau2_soft", "multistep"),
    ("leaky_default", "step"), ("leaky_default_with_mem", "step"), ("plif", "multistep")])
def test_the_nir_alternatives_named_compile_for_nir(models, factory, stepping):
    c = compile_for(models, factory, stepping, "nir")
    assert c.report["equivalent"] and c.report["target"]["exact"], c.report["target"]
    assert {n.op for n in c.graph.nodes} <= {"input", "linear", "lif", "lif_snntorch", "lif_sj"}
    spikes = [c.io[k] for k in c.io if k.startswith("output") and np.isin(c.io[k], (0.0, 1.0)).all()]
    assert spikes and all(s.any() and not s.all() for s in spikes)


@pytest.mark.parametrize("factory,stepping,op", [
    ("leaky_subtract_no_delay", "step", "lif_snntorch"),     # the old remedy "use reset_delay=False": still refused
    ("synaptic_zero_no_delay_mem", "step", "synaptic_snntorch"),
    ("lif_tau3_hard", "multistep", "lif_sj")])
def test_what_the_remedies_exclude_is_refused_and_lowers_to_onnx(models, factory, stepping, op):
    with pytest.raises(UnsupportedOp) as e:
        compile_for(models, factory, stepping, "nir")
    assert f"({op}" in e.value.where and e.value.remedy == nir_export.REMEDIES[op]
    c = compile_for(models, factory, stepping, "onnx")
    assert c.report["equivalent"] and c.report["target"]["spike_exact"]
