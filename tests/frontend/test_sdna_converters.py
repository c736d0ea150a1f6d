"""SDNA through the frontend (spikec.frontend.sdna): bit-exact against the torch modules in float64.

Linear SDNA decomposes into existing ops; Pairwise is the one new op ``sdna_pairwise``. Also the shipped
SDNA backbone (examples/sdna): all four factories, with their checkpoints and input samples.
"""
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import spikec.frontend.sdna as conv_sdna
import spikec.nn as snn
from spikec.core.checker import compare_with_torch
from spikec.ir.errors import UnsupportedOp
from spikec.core.interpreter import run
from spikec.frontend import ConvertContext, trace
from spikec.nn.sdna import SDNALinear, SDNAPairwise
from spikec.ops import OPS, deployed_params

SDNA = Path(__file__).resolve().parents[2] / "examples" / "sdna"
C, H, W = 3, 5, 6


class Attn(nn.Module):
    """Integer spikes Q, K, V from a real input, then the window op."""

    def __init__(self, window):
        super().__init__()
        self.q = snn.IntFire(threshold=0.5)
        self.k = snn.IntFire(threshold=torch.tensor([0.4, 0.7, 1.0]), beta=0.5, alpha=0.5)
        self.v = snn.IntFire(threshold=0.6, rounding="floor")
        self.attn = window

    def forward(self, x):
        return self.attn(self.q(x), self.k(x), self.v(x))


def attn_model(cls, kernel, dilation, gate_bn, rounding, seed):
    torch.manual_seed(seed)
    window = cls(kernel, dilation, threshold=torch.tensor([0.3, 0.8, 1.2]) if seed % 2 else 0.7,
                 beta=1 / 3, alpha=2 / 3, rounding=rounding, gate_bn=C if gate_bn else None)
    if gate_bn:
        bn = window.gate_bn
        bn.running_mean.uniform_(0, 0.5)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.data.uniform_(-1, 2)   # a negative gamma too
        bn.bias.data.uniform_(0, 1)
    return Attn(window)


def exact(model, x, shape=(C, H, W)):
    """Trace, run the IR and the float64 model; outputs must be identical. Returns (graph, trace, output)."""
    graph = trace(model, shape, input_kind="real")
    got = run(graph, x)
    model.double().eval()
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    out = got.outputs(graph)[0]
    assert np.array_equal(out, want)
    return graph, got, out


CASES = [(cls, k, d, bn, r) for cls in (SDNALinear, SDNAPairwise) for k, d in ((3, 1), (3, 2), (5, 1))
         for bn in (False, True) for r in ("round", "floor")]


@pytest.mark.parametrize("cls,kernel,dilation,gate_bn,rounding", CASES)
def test_window_ops_are_exact(cls, kernel, dilation, gate_bn, rounding):
    seed = CASES.index((cls, kernel, dilation, gate_bn, rounding))
    x = np.random.default_rng(seed).normal(0.8, 1.2, size=(3, 2, C, H, W))
    graph, got, out = exact(attn_model(cls, kernel, dilation, gate_bn, rounding, seed), x)
    assert np.count_nonzero(out) > 0.05 * out.size, np.count_nonzero(out) / out.size  # not vacuous


def test_linear_is_existing_ops_with_spike_kinds():
    graph, got, _ = exact(attn_model(SDNALinear, 3, 2, True, "round", 1),
                          np.random.default_rng(0).normal(0.8, 1.2, size=(2, 2, C, H, W)))
    nodes = [n for n in graph.nodes if n.scope == "attn"]
    assert [(n.name, n.op) for n in nodes] == [("attn.kv", "mul"), ("attn.window", "windowsum"),
                                               ("attn.mean", "scale"), ("attn.gate_bn", "batchnorm"),
                                               ("attn.gate", "intfire"), ("attn", "mul")]
    kinds = {n.name: (n.type.kind, n.type.ceiling) for n in graph.nodes}
    assert kinds["q"] == kinds["k"] == kinds["v"] == ("integer", 4)
    assert kinds["attn.kv"] == ("integer", 16)
    assert kinds["attn.window"] == ("integer", 9 * 16)   # window sum of integer spikes: integer
    assert kinds["attn.mean"][0] == "real" and kinds["attn.gate"] == ("integer", 4)
    assert kinds["attn"] == ("integer", 16)
    assert graph.node("attn.mean").attrs == {"a": 1 / 9, "b": 0.0}
    assert dict(graph.meta["module_outputs"])["attn"] == "attn"


def test_pairwise_is_one_stateful_real_op():
    model = attn_model(SDNAPairwise, 3, 1, True, "round", 3)
    graph, got, out = exact(model, np.random.default_rng(1).normal(0.8, 1.2, size=(2, 2, C, H, W)))
    (node,) = [n for n in graph.nodes if n.op == "sdna_pairwise"]
    assert node.name == "attn" and node.inputs == ("q", "k", "v")
    assert node.type.kind == "real" and node.type.shape == (C, H, W)
    assert OPS["sdna_pairwise"].stateful and not OPS["sdna_pairwise"].synaptic
    assert node.attrs == {"kernel": 3, "dilation": 1, "max_spikes": 4, "rounding": "round", "bn_eps": 1e-5}
    assert sorted(node.params) == ["alpha", "beta", "bn_beta", "bn_gamma", "bn_mean", "bn_var", "threshold"]
    assert deployed_params(node) == 2 * C   # the gate BN's gamma and beta, as for a batchnorm node
    margin = got.margins["attn"]
    assert margin.shape == out.shape and (margin >= 0).all()
    # the values are multiples of 1/9
    assert np.allclose(out * 9, np.round(out * 9), rtol=0, atol=1e-9)


def test_pairwise_without_gate_bn_has_no_bn_params():
    graph = trace(attn_model(SDNAPairwise, 3, 1, False, "round", 0), (C, H, W), input_kind="real")
    node = graph.node("attn")
    assert sorted(node.params) == ["alpha", "beta", "threshold"] and "bn_eps" not in node.attrs
    assert deployed_params(node) == 0


@pytest.mark.parametrize("cls", [SDNALinear, SDNAPairwise])
def test_checker_compares_the_module_output(cls):
    model = attn_model(cls, 3, 2, True, "round", 5)
    x = np.random.default_rng(2).normal(0.8, 1.2, size=(2, 2, C, H, W))
    graph = trace(model, (C, H, W), input_kind="real")
    result = compare_with_torch(model, graph, x)
    assert result.equivalent and "attn" in result.nodes_compared


@pytest.mark.parametrize("fn,cls", [(conv_sdna.sdna_linear, SDNALinear),
                                    (conv_sdna.sdna_pairwise_converter, SDNAPairwise)])
def test_refusals(fn, cls):
    ctx = ConvertContext(per_step=True)
    with pytest.raises(UnsupportedOp, match="TimeDistributed"):
        fn(ctx, cls(3), "attn", "q", "k", "v")
    m = cls(3, gate_bn=2)
    m.gate_bn = nn.BatchNorm2d(2, track_running_stats=False)
    with pytest.raises(UnsupportedOp, match="running statistics"):
        fn(ConvertContext(), m, "attn", "q", "k", "v")


# -- the shipped SDNA backbone --------------------------------------------------------------------------
def _example():
    spec = importlib.util.spec_from_file_location("spikec_test_sdna_model", SDNA / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example():
    return _example()


@pytest.mark.parametrize("factory,ckpt,inputs", [("static_linear", "static.pt", "inputs_static.npz"),
                                                 ("static_pairwise", "static.pt", "inputs_static.npz"),
                                                 ("event_linear", "event.pt", "inputs_event.npz"),
                                                 ("event_pairwise", "event.pt", "inputs_event.npz")])
def test_backbone_is_exact(example, factory, ckpt, inputs):
    model = getattr(example, factory)()
    model.load_state_dict(torch.load(SDNA / ckpt, weights_only=True))
    with np.load(SDNA / inputs) as z:
        x, labels = z["input"].astype(np.float64), z["label"]
    assert x.shape[0] == model.steps and x.shape[2:] == model.input_shape and len(labels) == x.shape[1]
    graph, got, out = exact(model, x, model.input_shape)
    kinds = {n.name: (n.type.kind, n.type.ceiling) for n in graph.nodes}
    for stage in ("stages.0.0", "stages.1.1"):
        for sn in ("q_sn", "k_sn", "v_sn", "sn"):
            assert kinds[f"{stage}.sdna.{sn}"] == ("integer", 4)
        for branch in ("cpe", "mlp"):
            assert kinds[f"{stage}.{branch}.sn"] == ("integer", 4)
        node = graph.node(f"{stage}.sdna.attn")
        if "linear" in factory:
            assert graph.node(f"{stage}.sdna.attn.window").type.kind == "integer"
            assert node.op == "mul" and kinds[node.name] == ("integer", 16)
            assert ("gate_bn" in str([n.name for n in graph.nodes])) == factory.startswith("event")
        else:
            assert node.op == "sdna_pairwise" and node.type.kind == "real"
            assert ("bn_gamma" in node.params) == factory.startswith("event")
    # every convolution after the stem reads an integer spike tensor, except the attention projections
    for n in graph.nodes:
        if n.op == "conv2d" and n.name != "embed.0" and not n.name.endswith("sdna.proj.0"):
            assert kinds[n.inputs[0]] == ("integer", 4), n.name
    # the checkpoint is trained: most samples are classified right (Linear)
    if "linear" in factory:
        assert (out.mean(0).argmax(1) == labels).mean() >= 0.75
