"""fold_batchnorm (passes.md, "BN folding"): the weight math, the rewrite, and when it must not apply."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.nn.utils.fusion import fuse_conv_bn_weights, fuse_linear_bn_weights

from spikec.core.checker import compare_graphs, compare_with_torch
from spikec.ir.errors import PassError
from spikec.frontend import trace
from spikec.app.loader import build_model, load_weights
from spikec.core.passes import run_passes
from spikec.core.verify import verify
from spikec.passes.fold_batchnorm import FOLD_BATCHNORM, fold_batchnorm, fold_bn_weights

REPO = Path(__file__).resolve().parents[2]
DIGITS = REPO / "examples" / "digits"


def _fixtures():
    spec = importlib.util.spec_from_file_location("spikec_test_fixture_models", REPO / "tests" / "fixtures" / "models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


models = _fixtures()


def bn_stats(rng, c, zero_gamma=False):
    gamma = rng.uniform(0.2, 2.0, c) * rng.choice([-1.0, 1.0], c)
    if zero_gamma:
        gamma[0] = 0.0
    return gamma, rng.normal(size=c), rng.normal(size=c), rng.uniform(0.05, 3.0, c)


def binary(rng, shape, p=0.4):
    return (rng.random(shape) < p).astype(np.float64)


# -- the weight math ----------------------------------------------------------------------------
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("eps", [1e-5, 1e-3])
def test_conv_weights_match_torch_fusion(with_bias, eps):
    rng = np.random.default_rng(1)
    w, b = rng.normal(size=(6, 3, 3, 3)), rng.normal(size=6) if with_bias else None
    gamma, beta, mean, var = bn_stats(rng, 6, zero_gamma=True)
    w2, b2 = fold_bn_weights(w, b, gamma, beta, mean, var, eps)
    t = lambda a: None if a is None else torch.tensor(a, dtype=torch.float64)
    tw, tb = fuse_conv_bn_weights(t(w), t(b), t(mean), t(var), eps, t(gamma), t(beta))
    np.testing.assert_allclose(w2, tw.detach().numpy(), rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(b2, tb.detach().numpy(), rtol=1e-14, atol=1e-15)
    assert w2.shape == w.shape and b2.shape == (6,)


def test_linear_weights_match_torch_fusion():
    rng = np.random.default_rng(2)
    w, b = rng.normal(size=(5, 7)), rng.normal(size=5)
    gamma, beta, mean, var = bn_stats(rng, 5)
    w2, b2 = fold_bn_weights(w, b, gamma, beta, mean, var, 1e-5)
    t = lambda a: torch.tensor(a, dtype=torch.float64)
    tw, tb = fuse_linear_bn_weights(t(w), t(b), t(mean), t(var), 1e-5, t(gamma), t(beta))
    np.testing.assert_allclose(w2, tw.detach().numpy(), rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(b2, tb.detach().numpy(), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("stride, padding, with_bias", [(1, 1, True), (2, 0, False), (1, 2, False)])
def test_folded_conv_equals_bn_of_conv(stride, padding, with_bias):
    rng = np.random.default_rng(3)
    w, b = rng.normal(size=(4, 2, 3, 3)), rng.normal(size=4) if with_bias else None
    gamma, beta, mean, var = bn_stats(rng, 4, zero_gamma=True)
    x = torch.tensor(rng.normal(size=(3, 2, 9, 9)))
    t = lambda a: None if a is None else torch.tensor(a)
    reference = F.batch_norm(F.conv2d(x, t(w), t(b), stride, padding), t(mean), t(var), t(gamma), t(beta),
                             False, 0.0, 1e-5)
    w2, b2 = fold_bn_weights(w, b, gamma, beta, mean, var, 1e-5)
    folded = F.conv2d(x, t(w2), t(b2), stride, padding)
    np.testing.assert_allclose(folded.numpy(), reference.numpy(), rtol=1e-12, atol=1e-12)


# -- the rewrite ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def digits():
    m = build_model(f"{DIGITS / 'model.py'}:small")
    load_weights(m, str(DIGITS / "checkpoint.pt"))
    with np.load(DIGITS / "inputs.npz") as z:
        x = z["input"][:, :4].astype(np.float64)
    return m, trace(m, (1, 8, 8)), x


def test_structure_before_and_after(digits):
    model, graph, x = digits
    result = fold_batchnorm(graph)
    after = verify(result.graph)
    before_ops = {n.name: n.op for n in graph.nodes}
    after_ops = {n.name: n.op for n in after.nodes}
    assert before_ops["conv1.1"] == before_ops["conv2.1"] == "batchnorm"
    # The fused conv carries the BN's name (it computes the BN's value); the bare conv is gone.
    assert after_ops["conv1.1"] == after_ops["conv2.1"] == "conv2d"
    assert "conv1.0" not in after_ops and "conv2.0" not in after_ops
    assert len(after.nodes) == len(graph.nodes) - 2
    for n in after.nodes:
        if n.op == "batchnorm":
            assert after.node(n.inputs[0]).op not in ("conv2d", "linear"), n.name
    assert {"conv1.0", "conv1.1", "conv2.0", "conv2.1"} <= set(result.changed)
    assert result.skipped == ()
    assert after.node("lif1").inputs == ("conv1.1",)
    assert after.node("conv1.1").attrs == graph.node("conv1.0").attrs
    assert set(after.node("conv1.1").params) == {"weight", "bias"}
    assert after.outputs == graph.outputs
    assert compare_graphs(graph, after, x).equivalent
    assert compare_with_torch(model, after, x).equivalent
    # The input graph is not mutated.
    assert [n.name for n in graph.nodes] == list(before_ops)
    # Folding twice changes nothing more.
    again = fold_batchnorm(after)
    assert [n.name for n in again.graph.nodes] == [n.name for n in after.nodes] and again.changed == ()


def test_conv_with_another_reader_is_skipped_with_a_reason():
    model = models.shared_conv()
    graph = trace(model, model.input_shape)
    result = fold_batchnorm(graph)
    names = {n.name: n.op for n in result.graph.nodes}
    assert names == {n.name: n.op for n in graph.nodes}  # nothing folded
    assert names["bn.0"] == "batchnorm" and names["conv.0"] == "conv2d"
    assert result.changed == ()
    (skip,) = result.skipped
    assert skip.node == "bn.0" and "conv.0" in skip.reason
    x = binary(np.random.default_rng(0), (3, 2, *model.input_shape))
    assert compare_graphs(graph, result.graph, x).equivalent
    # Asked for by name, the declined match stops the compile, naming the BN and why.
    with pytest.raises(PassError) as info:
        run_passes(graph, [FOLD_BATCHNORM], x, explicit=True)
    assert "'bn.0'" in info.value.message() and skip.reason in info.value.message()
    # Run by default, it is recorded instead.
    _, (record,) = run_passes(graph, [FOLD_BATCHNORM], x, explicit=False)
    assert [s["node"] for s in record.skipped] == ["bn.0"]


def test_bn_after_a_non_conv_is_left_alone():
    model = models.pooled_bn()
    graph = trace(model, model.input_shape)
    assert graph.node("pool.1").op == "batchnorm" and graph.node("pool.0").op == "avgpool2d"
    result = fold_batchnorm(graph)
    assert [(n.name, n.op, n.inputs) for n in result.graph.nodes] == [(n.name, n.op, n.inputs) for n in graph.nodes]
    for n in graph.nodes:
        for k, v in n.params.items():
            assert np.array_equal(result.graph.node(n.name).params[k], v)
    assert result.changed == () and result.skipped == ()


# -- property: random conv -> BN -> LIF models fold to an equivalent graph ----------------------------
@st.composite
def conv_bn_lif(draw):
    c_in, c_out = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    kernel = draw(st.integers(1, 3))
    stride = draw(st.integers(1, 2))
    padding = draw(st.integers(0, kernel // 2 + 1))
    size = draw(st.integers(max(1, kernel - 2 * padding), 7))
    bias = draw(st.booleans())
    eps = draw(st.sampled_from([1e-5, 1e-3, 0.1]))
    gamma_signs = draw(st.lists(st.sampled_from([-1.0, 0.0, 1.0]), min_size=c_out, max_size=c_out))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    return c_in, c_out, kernel, stride, padding, size, bias, eps, np.array(gamma_signs), seed


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conv_bn_lif())
def test_random_conv_bn_lif_folds_equivalently(params):
    c_in, c_out, kernel, stride, padding, size, bias, eps, signs, seed = params
    rng = np.random.default_rng(seed)
    threshold = float(rng.uniform(0.1, 1.5))
    model = models.ConvBNLIF(c_in, c_out, kernel, stride, padding, bias, threshold, eps)
    conv, bn = model.conv[0], model.conv[1]
    with torch.no_grad():
        conv.weight.copy_(torch.tensor(rng.normal(size=conv.weight.shape)))
        if bias:
            conv.bias.copy_(torch.tensor(rng.normal(size=c_out)))
        bn.weight.copy_(torch.tensor(signs * rng.uniform(0.1, 3.0, c_out)))  # negative and zero gamma included
        bn.bias.copy_(torch.tensor(rng.normal(size=c_out)))
        bn.running_mean.copy_(torch.tensor(rng.normal(size=c_out)))
        bn.running_var.copy_(torch.tensor(rng.uniform(0.01, 4.0, c_out)))
    model.eval()
    graph = trace(model, (c_in, size, size))
    x = binary(rng, (4, 3, c_in, size, size), p=float(rng.uniform(0.2, 0.8)))

    result = fold_batchnorm(graph)
    folded = verify(result.graph)
    assert not any(n.op == "batchnorm" for n in folded.nodes)
    assert len(folded.nodes) == len(graph.nodes) - 1
    assert folded.node("conv.1").op == "conv2d"
    c = compare_graphs(graph, folded, x)
    assert c.equivalent, c.describe()
    assert compare_with_torch(model, folded, x).equivalent
