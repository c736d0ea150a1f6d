"""fold_batchnorm, the rules beyond Conv -> BN (passes.md, "BN folding"): BN -> Heaviside (sign-aware, ties
at equality), BN -> stateful LIF, BN -> unpadded conv / refusal before a padded one, and BNTT.
(Conv/Linear -> BN is covered by test_fold_batchnorm.py.)"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import spikec.nn as snn
from spikec.core.checker import compare_graphs, compare_with_torch
from spikec.ir.errors import PassError
from spikec.frontend import trace
from spikec.core.interpreter import run
from spikec.core.passes import run_passes
from spikec.core.verify import verify
from spikec.passes.fold_batchnorm import FOLD_BATCHNORM, fold_batchnorm, fold_bn_into_next, heaviside_threshold


T64 = lambda a: torch.tensor(np.array(a, dtype=np.float64))


def layout(graph):
    return [(n.name, n.op, n.inputs) for n in graph.nodes]


def ops(graph):
    return [n.op for n in graph.nodes]


def binary(rng, shape, p=0.4):
    return (rng.random(shape) < p).astype(np.float64)


def set_bn(bn, gamma, beta, mean, var):
    with torch.no_grad():
        for p, v in ((bn.weight, gamma), (bn.bias, beta), (bn.running_mean, mean), (bn.running_var, var)):
            p.copy_(T64(v))


def random_bn_stats(rng, c, signs=(-1.0, 0.0, 1.0)):
    gamma = rng.choice(signs, c) * rng.uniform(0.2, 2.0, c)
    return gamma, rng.normal(size=c), rng.normal(size=c), rng.uniform(0.05, 3.0, c)


# -- the weight math ----------------------------------------------------------------------------
def test_heaviside_threshold_values():
    s = np.array([2.0, -0.5, 0.0, 0.0, 1.0])
    c = np.array([1.0, 1.0, 0.5, -0.5, -3.0])
    theta = np.array([0.25, 0.25, 0.25, 0.25, 0.0])
    alpha, bias, thr = heaviside_threshold(s, c, theta)
    np.testing.assert_array_equal(alpha, [1.0, -1.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(bias, [0.0, 0.0, 0.5, -0.5, 0.0])
    np.testing.assert_array_equal(thr, [-0.375, -1.5, 0.25, 0.25, 3.0])


@pytest.mark.parametrize("theta", [0.0, 0.7, -1.2])
def test_heaviside_threshold_preserves_firing_including_ties(theta):
    rng = np.random.default_rng(1)
    c_count = 6
    s = np.array([1.5, -0.8, 0.0, 0.0, 2.0, -4.0])
    c = np.array([0.3, -0.2, theta, theta - 1.0, 0.25, 0.5])   # gamma = 0 channels: fire iff c >= theta
    alpha, bias, thr = heaviside_threshold(s, c, np.full(c_count, theta))
    x = rng.normal(scale=2.0, size=(1000, c_count))
    fire = s * x + c >= theta
    folded = alpha * x + bias >= thr
    np.testing.assert_array_equal(folded, fire)
    assert fire[:, 2].all() and not fire[:, 3].any()
    # Exactly at the boundary (dyadic numbers: exact in float64) both sides fire, for either sign of s.
    if theta == 0.0:
        for k in (4, 5):
            x_star = -c[k] / s[k]
            assert s[k] * x_star + c[k] == 0.0
            assert alpha[k] * x_star + bias[k] >= thr[k]


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("with_bias", [True, False])
def test_fold_bn_into_next_conv_matches_torch(stride, with_bias):
    rng = np.random.default_rng(2)
    c_in, c_out = 4, 3
    gamma, beta, mean, var = random_bn_stats(rng, c_in)
    gamma[0] = 0.0
    eps = 1e-5
    s = gamma / np.sqrt(var + eps)
    shift = beta - mean * s
    w = rng.normal(size=(c_out, c_in, 3, 2))
    b = rng.normal(size=c_out) if with_bias else None
    x = T64(rng.normal(size=(2, c_in, 7, 6)))
    ref = F.conv2d(F.batch_norm(x, T64(mean), T64(var), T64(gamma), T64(beta), False, 0.0, eps), T64(w),
                   None if b is None else T64(b), stride)
    w2, b2 = fold_bn_into_next(w, b, s, shift)
    assert w2.shape == w.shape and b2.shape == (c_out,)
    np.testing.assert_allclose(F.conv2d(x, T64(w2), T64(b2), stride).numpy(), ref.numpy(), rtol=1e-11, atol=1e-11)
    # With zero padding the same weights are wrong at the border: the reason for the refusal.
    ref_pad = F.conv2d(F.batch_norm(x, T64(mean), T64(var), T64(gamma), T64(beta), False, 0.0, eps), T64(w),
                       None if b is None else T64(b), stride, 1)
    assert not np.allclose(F.conv2d(x, T64(w2), T64(b2), stride, 1).numpy(), ref_pad.numpy())


def test_fold_bn_into_next_linear_matches_torch():
    rng = np.random.default_rng(3)
    gamma, beta, mean, var = random_bn_stats(rng, 5)
    s = gamma / np.sqrt(var + 1e-5)
    shift = beta - mean * s
    w, b = rng.normal(size=(4, 5)), rng.normal(size=4)
    x = T64(rng.normal(size=(6, 5)))
    ref = F.linear(F.batch_norm(x, T64(mean), T64(var), T64(gamma), T64(beta), False, 0.0, 1e-5), T64(w), T64(b))
    w2, b2 = fold_bn_into_next(w, b, s, shift)
    np.testing.assert_allclose(F.linear(x, T64(w2), T64(b2)).numpy(), ref.numpy(), rtol=1e-11, atol=1e-11)


# -- BN -> Heaviside (rule 2) -------------------------------------------------------------------
class AddBNSpike(nn.Module):
    """``x + Delay(x)`` (two spike tensors: an integer sum) -> BN -> stateless Heaviside ``[y >= theta]``.

    The BN's input is an addition, not a conv, so the Conv -> BN rule cannot take it: the BN must fold
    into the neuron."""

    def __init__(self, c, eps=1e-5, theta=0.0):
        super().__init__()
        self.delay = snn.Delay(1)
        self.bn = snn.TimeDistributed(nn.BatchNorm2d(c, eps=eps))
        self.spike = snn.LIF(beta=0.0, threshold=theta)

    def forward(self, x):
        return self.spike(self.bn(x + self.delay(x)))


# Per channel (gamma, beta, mean); sigma = sqrt(3.75 + 0.25) = 2, so every number below is exact in float64
# and the BN output is exactly 0 at the boundary x* = mean - beta * sigma / gamma.
TIE_CHANNELS = [
    (2.0, 1.0, 2.0),     # s = 1,  x* = 1
    (-4.0, -2.0, 2.0),   # s = -2, x* = 1   (negative gamma)
    (0.0, 0.0, 0.3),     # gamma = 0, beta = 0: constant [0 >= 0] = 1
    (0.0, -0.5, 0.3),    # gamma = 0, beta < 0: never fires
    (-2.0, 1.0, 1.0),    # s = -1, x* = 2
    (2.0, 0.0, 2.0),     # s = 1,  x* = 2
    (-2.0, -1.0, 1.0),   # s = -1, x* = 0
]
TIE_ALPHA = [1.0, -1.0, 0.0, 0.0, -1.0, 1.0, -1.0]
TIE_POINTS = {0: 1.0, 1: 1.0, 4: 2.0, 5: 2.0, 6: 0.0}


def tie_model():
    c = len(TIE_CHANNELS)
    model = AddBNSpike(c, eps=0.25)
    gamma, beta, mean = (np.array(v) for v in zip(*TIE_CHANNELS))
    set_bn(model.bn[0], gamma, beta, mean, np.full(c, 3.75))
    return model.eval()


@pytest.mark.parametrize("kind", ["binary", "real"])
def test_bn_into_heaviside_sign_aware_with_exact_ties(kind):
    rng = np.random.default_rng(4)
    model = tie_model()
    c = len(TIE_CHANNELS)
    graph = trace(model, (c, 4, 5), input_kind=kind)
    assert ops(graph) == ["input", "delay", "add", "batchnorm", "lif"]
    if kind == "binary":
        x = binary(rng, (6, 3, c, 4, 5), p=0.5)
    else:   # quarter-integers: sums are exact, so x_t + x_{t-1} hits every boundary in {0, 1, 2} often
        x = rng.integers(-4, 9, (6, 3, c, 4, 5)) / 4.0
    before = run(graph, x)
    sums, y = before.values["add"], before.values["bn.0"]
    for k, x_star in TIE_POINTS.items():    # the inputs really do sit exactly at each boundary
        at = sums[:, :, k] == x_star
        assert at.any(), k
        assert np.all(y[:, :, k][at] == 0.0) and np.all(before.values["spike"][:, :, k][at] == 1.0)

    result = fold_batchnorm(graph)
    after = verify(result.graph)
    assert ops(after) == ["input", "delay", "add", "lif"]
    lif = after.node("spike")
    assert lif.inputs == ("add",)
    np.testing.assert_array_equal(lif.params["alpha"], TIE_ALPHA)
    assert set(np.unique(lif.params["alpha"])) <= {-1.0, 0.0, 1.0}
    assert np.all(lif.params["beta"] == 0)
    assert result.skipped == () and {"bn.0", "spike"} <= set(result.changed)
    c_ = compare_graphs(graph, after, x)
    assert c_.equivalent, c_.describe()
    assert "spike" in c_.nodes_compared and c_.spikes_compared >= x.size
    spikes = run(after, x).values["spike"]
    np.testing.assert_array_equal(spikes, before.values["spike"])
    assert np.all(spikes[:, :, 2] == 1) and np.all(spikes[:, :, 3] == 0)   # gamma == 0: constant [beta >= 0]
    assert compare_with_torch(model, after, x).equivalent


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 6), st.sampled_from([0.0, 0.4, -0.3]), st.sampled_from(["binary", "real"]),
       st.integers(0, 2 ** 32 - 1))
def test_random_bn_into_heaviside_is_equivalent(c, theta, kind, seed):
    rng = np.random.default_rng(seed)
    model = AddBNSpike(c, eps=1e-5, theta=theta)
    set_bn(model.bn[0], *random_bn_stats(rng, c))
    model.eval()
    graph = trace(model, (c, 3, 4), input_kind=kind)
    shape = (5, 2, c, 3, 4)
    x = binary(rng, shape) if kind == "binary" else rng.normal(size=shape)
    result = fold_batchnorm(graph)
    after = verify(result.graph)
    assert "batchnorm" not in ops(after)
    gamma = model.bn[0].weight.detach().numpy()
    np.testing.assert_array_equal(after.node("spike").params["alpha"], np.sign(gamma))
    c_ = compare_graphs(graph, after, x)
    assert c_.equivalent, c_.describe()


# -- BN -> stateful LIF ---------------------------------------------------------------------------
class AddBNLIF(nn.Module):
    def __init__(self, c, beta, alpha, bias, threshold, reset="subtract"):
        super().__init__()
        self.delay = snn.Delay(1)
        self.bn = snn.TimeDistributed(nn.BatchNorm2d(c))
        self.lif = snn.LIF(beta=beta, threshold=threshold, alpha=alpha, bias=bias, reset=reset)

    def forward(self, x):
        return self.lif(self.bn(x + self.delay(x)))


@pytest.mark.parametrize("beta, reset, per_channel", [(0.7, "subtract", True), (1.0, "zero", False),
                                                      (0.0, "subtract", True)],
                         ids=["leaky-per-channel", "IF-hard-reset", "beta0-but-alpha-bias"])
@pytest.mark.parametrize("kind", ["binary", "real"])
def test_bn_into_stateful_lif_folds_into_alpha_and_bias(beta, reset, per_channel, kind):
    rng = np.random.default_rng(5)
    c = 4
    alpha = rng.uniform(0.5, 1.5, c) if per_channel else 1.0
    bias = rng.normal(scale=0.2, size=c) if per_channel else 0.0
    model = AddBNLIF(c, beta, alpha, bias, threshold=0.6, reset=reset)
    stats = random_bn_stats(rng, c)
    stats[0][1] = 0.0      # one zero gamma
    set_bn(model.bn[0], *stats)
    model.eval()
    graph = trace(model, (c, 4, 4), input_kind=kind)
    result = fold_batchnorm(graph)
    after = verify(result.graph)
    assert ops(after) == ["input", "delay", "add", "lif"] and after.node("lif").inputs == ("add",)
    gamma, bn_beta, mean, var = (graph.node("bn.0").params[k] for k in ("gamma", "beta", "mean", "var"))
    s = gamma / np.sqrt(var + 1e-5)
    shift = bn_beta - mean * s
    alpha, bias = (graph.node("lif").params[k] for k in ("alpha", "bias"))
    lif = after.node("lif")
    np.testing.assert_allclose(lif.params["alpha"], np.broadcast_to(alpha, (c,)) * s, rtol=1e-14)
    np.testing.assert_allclose(lif.params["bias"], np.broadcast_to(alpha, (c,)) * shift + bias, rtol=1e-14,
                               atol=1e-15)
    np.testing.assert_array_equal(lif.params["beta"], np.broadcast_to(graph.node("lif").params["beta"], (c,)))
    shape = (8, 3, c, 4, 4)
    x = binary(rng, shape) if kind == "binary" else rng.normal(size=shape)
    c_ = compare_graphs(graph, after, x)
    assert c_.equivalent, c_.describe()
    assert compare_with_torch(model, after, x).equivalent


# -- BN -> conv (rule 3) --------------------------------------------------------------------------
class AddBNConv(nn.Module):
    def __init__(self, padding, stride=1, kernel=3):
        super().__init__()
        self.delay = snn.Delay(1)
        self.bn = snn.TimeDistributed(nn.BatchNorm2d(3))
        self.conv = snn.TimeDistributed(nn.Conv2d(3, 4, kernel, stride, padding))
        self.lif = snn.LIF(beta=0.8, threshold=0.5)

    def forward(self, x):
        return self.lif(self.conv(self.bn(x + self.delay(x))))


@pytest.mark.parametrize("stride, kernel", [(1, 3), (2, 3), (1, 1)])
def test_bn_into_unpadded_conv_folds(stride, kernel):
    rng = np.random.default_rng(6)
    model = AddBNConv(0, stride, kernel)
    stats = random_bn_stats(rng, 3)
    set_bn(model.bn[0], *stats)
    model.eval()
    graph = trace(model, (3, 7, 7))
    result = fold_batchnorm(graph)
    after = verify(result.graph)
    assert ops(after) == ["input", "delay", "add", "conv2d", "lif"]
    assert after.node("conv.0").inputs == ("add",) and result.skipped == ()
    gamma, beta, mean, var = (graph.node("bn.0").params[k] for k in ("gamma", "beta", "mean", "var"))
    s = gamma / np.sqrt(var + 1e-5)
    w, b = fold_bn_into_next(graph.node("conv.0").params["weight"], graph.node("conv.0").params["bias"], s,
                             beta - mean * s)
    np.testing.assert_array_equal(after.node("conv.0").params["weight"], w)
    np.testing.assert_array_equal(after.node("conv.0").params["bias"], b)
    x = binary(rng, (5, 2, 3, 7, 7))
    c_ = compare_graphs(graph, after, x)
    assert c_.equivalent, c_.describe()
    assert compare_with_torch(model, after, x).equivalent


@pytest.mark.parametrize("padding", [1, (1, 0)])
def test_bn_into_zero_padded_conv_is_refused(padding):
    rng = np.random.default_rng(7)
    model = AddBNConv(padding)
    set_bn(model.bn[0], *random_bn_stats(rng, 3))
    model.eval()
    graph = trace(model, (3, 6, 6))
    result = fold_batchnorm(graph)
    assert layout(result.graph) == layout(graph) and result.changed == ()
    (skip,) = result.skipped
    assert skip.node == "bn.0"
    assert "padd" in skip.reason and "conv.0" in skip.reason and skip.remedy
    x = binary(rng, (4, 2, 3, 6, 6))
    assert compare_graphs(graph, result.graph, x).equivalent
    with pytest.raises(PassError) as info:
        run_passes(graph, [FOLD_BATCHNORM], x, explicit=True)
    assert "'bn.0'" in info.value.message() and "padd" in info.value.message()
    _, (record,) = run_passes(graph, [FOLD_BATCHNORM], x)
    assert [s["node"] for s in record.skipped] == ["bn.0"] and record.spike_mismatches == 0


# -- BNTT after a conv ----------------------------------------------------------------------------
STEPS, C = 5, 3


class ConvBNTT(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = snn.TimeDistributed(nn.Conv2d(2, C, 3, padding=1))
        self.bntt = snn.BNTT(C, STEPS)
        self.lif = snn.LIF(beta=0.8, threshold=0.5)

    def forward(self, x):
        return self.lif(self.bntt(self.conv(x)))


def bntt_model(rng, vary_scale: bool, vary_shift: bool):
    model = ConvBNTT()
    g = rng.choice([-1.0, 1.0], C) * rng.uniform(0.3, 2.0, C)
    v = rng.uniform(0.2, 2.0, C)
    b, m = rng.normal(size=C), rng.normal(size=C)
    rows = lambda base, vary: base + (rng.normal(scale=0.5, size=(STEPS, C)) if vary else np.zeros((STEPS, C)))
    with torch.no_grad():
        model.bntt.weight.copy_(T64(rows(g, vary_scale)))
        model.bntt.running_var.copy_(T64(np.broadcast_to(v, (STEPS, C))))
        model.bntt.bias.copy_(T64(rows(b, vary_shift)))
        model.bntt.running_mean.copy_(T64(rows(m, vary_shift)))
        model.conv[0].weight.copy_(T64(rng.normal(size=(C, 2, 3, 3))))
        model.conv[0].bias.copy_(T64(rng.normal(size=C)))
    return model.eval()


def bntt_affine(node):
    """(scale, shift) per step and channel, from the traced node's float64 parameters."""
    p = node.params
    scale = p["gamma"] / np.sqrt(p["var"] + node.attrs["eps"])
    return scale, p["beta"] - p["mean"] * scale


def _bntt_case(vary_scale, vary_shift, seed=8):
    rng = np.random.default_rng(seed)
    model = bntt_model(rng, vary_scale, vary_shift)
    graph = trace(model, (2, 5, 5))
    assert ops(graph) == ["input", "conv2d", "bntt", "lif"]
    result = fold_batchnorm(graph)
    after = verify(result.graph)
    x = binary(rng, (STEPS, 3, 2, 5, 5))
    c_ = compare_graphs(graph, after, x)
    assert c_.equivalent, c_.describe()
    assert compare_with_torch(model, after, x).equivalent
    _, (record,) = run_passes(graph, [FOLD_BATCHNORM], x, explicit=True)   # folding or keeping: no refusal
    assert record.spike_mismatches == 0
    return model, graph, result, after


def test_bntt_constant_scale_and_shift_folds_into_the_conv():
    model, graph, result, after = _bntt_case(False, False)
    assert ops(after) == ["input", "conv2d", "lif"]
    conv = after.node("bntt")                       # the conv now computes the BNTT's value
    assert conv.op == "conv2d" and after.node("lif").inputs == ("bntt",)
    s, shift = (v[0] for v in bntt_affine(graph.node("bntt")))
    w0, b0 = graph.node("conv.0").params["weight"], graph.node("conv.0").params["bias"]
    np.testing.assert_allclose(conv.params["weight"], w0 * s[:, None, None, None], rtol=1e-14)
    np.testing.assert_allclose(conv.params["bias"], b0 * s + shift, rtol=1e-12, atol=1e-14)
    assert result.skipped == ()


def test_bntt_constant_scale_varying_shift_becomes_a_bias_schedule():
    model, graph, result, after = _bntt_case(False, True)
    assert ops(after) == ["input", "conv2d", "step_bias", "lif"]
    sched = after.node("bntt")
    assert sched.op == "step_bias" and sched.params["bias"].shape == (STEPS, C)
    conv = after.node(sched.inputs[0])
    assert conv.op == "conv2d" and conv.name.startswith("bntt")
    _, shift = bntt_affine(graph.node("bntt"))
    np.testing.assert_allclose(sched.params["bias"], shift, rtol=1e-14)
    assert not np.all(shift == shift[0])
    assert any("bntt" in n and "schedule" in n for n in result.notes)


def test_bntt_varying_scale_stays_and_is_noted():
    model, graph, result, after = _bntt_case(True, True)
    assert layout(after) == layout(graph) and result.changed == ()
    assert result.skipped == ()
    (note,) = result.notes
    assert "bntt" in note and "scale varies" in note and str(STEPS) in note


# -- Conv1d -> BN (the frontend writes a Conv1d as a conv2d on (C, 1, L) viewed back as (C, L)) -----------------
class Conv1dBN(nn.Module):
    """Conv1d -> BatchNorm1d -> LIF per step (an audio front end), or with the BN after a plain reshape."""

    def __init__(self, reshape_only=False):
        super().__init__()
        self.reshape_only = reshape_only
        self.conv = snn.TimeDistributed(nn.Conv1d(2, 4, 3, padding=1, stride=2))
        self.bn = snn.TimeDistributed(nn.BatchNorm1d(4 if not reshape_only else 2))
        self.lif = snn.LIF(beta=0.7, threshold=0.8)

    def forward(self, x):
        if self.reshape_only:   # (2, 8) -> (2, 1, 8) -> (2, 8): a view pair, no conv to fold into
            t, b = x.shape[0], x.shape[1]
            return self.bn(x.reshape(t, b, 2, 1, 8).reshape(t, b, 2, 8))   # the BN's value is the output
        return self.lif(self.bn(self.conv(x)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bn_after_a_conv1d_folds_into_its_conv2d_and_the_view_takes_the_bn_name(seed):
    rng = np.random.default_rng(seed)
    model = Conv1dBN()
    set_bn(model.bn[0], *random_bn_stats(rng, 4))
    model.eval()
    graph = trace(model, (2, 8))
    before = ops(graph)
    assert before == ["input", "reshape", "conv2d", "reshape", "batchnorm", "lif"], before
    result = fold_batchnorm(graph)
    after = verify(result.graph)
    assert ops(after) == ["input", "reshape", "conv2d", "reshape", "lif"]
    bn = graph.node(next(n.name for n in graph.nodes if n.op == "batchnorm"))
    view = after.node(bn.name)
    assert view.op == "reshape" and view.type == bn.type and after.node(view.inputs[0]).name == f"{bn.name}.conv2d"
    conv = next(n for n in graph.nodes if n.op == "conv2d")
    s = bn.params["gamma"] / np.sqrt(bn.params["var"] + bn.attrs["eps"])
    np.testing.assert_allclose(after.node(view.inputs[0]).params["weight"],
                               conv.params["weight"] * s[:, None, None, None], rtol=0, atol=0)
    x = rng.normal(size=(6, 3, 2, 8))
    c_ = compare_graphs(graph, after, x)
    assert c_.equivalent, c_.describe()
    assert compare_with_torch(model, after, x).equivalent


def test_bn_after_a_view_of_no_conv_is_left_alone():
    rng = np.random.default_rng(3)
    model = Conv1dBN(reshape_only=True)
    set_bn(model.bn[0], *random_bn_stats(rng, 2))
    model.eval()
    graph = trace(model, (2, 8))
    result = fold_batchnorm(graph)
    assert "batchnorm" in ops(result.graph) and result.changed == ()
