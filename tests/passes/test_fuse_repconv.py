"""fuse_repconv (passes.md, "RepConv branch fusion"): the weight math, parameter accounting, the rewrite
on random RepConv units, the refusals, and the graphs it must leave alone."""
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
from spikec.ops import deployed_params
from spikec.core.passes import run_passes
from spikec.core.report import source_params
from spikec.core.verify import verify
from spikec.passes.fold_batchnorm import FOLD_BATCHNORM, fold_batchnorm
from spikec.passes.fuse_repconv import (FUSE_REPCONV, avgpool_kernel, bn_affine, compose_1x1_3x3, fuse_repconv,
                                        identity_kernel, pad_to_3x3)



T64 = lambda a: torch.tensor(np.array(a, dtype=np.float64))


def ops(graph):
    return [n.op for n in graph.nodes]


def layout(graph):
    return [(n.name, n.op, n.inputs) for n in graph.nodes]


def params(graph):
    return sum(deployed_params(n) for n in graph.nodes)


def binary(rng, shape, p=0.4):
    return (rng.random(shape) < p).astype(np.float64)


# -- the weight math ----------------------------------------------------------------------------
@pytest.mark.parametrize("kh, kw", [(1, 1), (1, 3), (3, 1), (3, 3)])
def test_pad_to_3x3_centres_the_kernel(kh, kw):
    rng = np.random.default_rng(0)
    w = rng.normal(size=(4, 3, kh, kw))
    p = pad_to_3x3(w)
    assert p.shape == (4, 3, 3, 3)
    rows = slice(1, 2) if kh == 1 else slice(0, 3)
    cols = slice(1, 2) if kw == 1 else slice(0, 3)
    np.testing.assert_array_equal(p[:, :, rows, cols], w)
    mask = np.ones((3, 3), bool)
    mask[rows, cols] = False
    assert np.all(p[:, :, mask] == 0)
    if (kh, kw) == (1, 3):
        np.testing.assert_array_equal(p[:, :, 1, :], w[:, :, 0, :])   # the middle row
    if (kh, kw) == (3, 1):
        np.testing.assert_array_equal(p[:, :, :, 1], w[:, :, :, 0])   # the middle column


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("kh, kw", [(1, 1), (1, 3), (3, 1)])
@pytest.mark.parametrize("size", [(7, 7), (8, 5), (3, 4)])
def test_padded_kernel_with_padding_1_samples_the_same_centre(kh, kw, stride, size):
    """The branch paddings (1x1: 0, 1x3: (0,1), 3x1: (1,0)) and the 3x3 pad 1 give the same output, any stride."""
    rng = np.random.default_rng(1)
    w = rng.normal(size=(5, 3, kh, kw))
    x = T64(rng.normal(size=(2, 3, *size)))
    branch = F.conv2d(x, T64(w), stride=stride, padding=((kh - 1) // 2, (kw - 1) // 2))
    fused = F.conv2d(x, T64(pad_to_3x3(w)), stride=stride, padding=1)
    assert branch.shape == fused.shape
    np.testing.assert_allclose(fused.numpy(), branch.numpy(), rtol=1e-12, atol=1e-12)


def test_identity_kernel_is_the_identity_convolution():
    k = identity_kernel(4)
    assert k.shape == (4, 4, 3, 3)
    expected = np.zeros((4, 4, 3, 3))
    for i in range(4):
        expected[i, i, 1, 1] = 1.0
    np.testing.assert_array_equal(k, expected)
    x = T64(np.random.default_rng(2).normal(size=(2, 4, 5, 6)))
    np.testing.assert_array_equal(F.conv2d(x, T64(k), padding=1).numpy(), x.numpy())


@pytest.mark.parametrize("size", [(5, 5), (3, 7), (1, 4)])
def test_avgpool_kernel_matches_avg_pool_with_count_include_pad(size):
    c = 3
    k = avgpool_kernel(c)
    assert k.shape == (c, c, 3, 3)
    for i in range(c):
        for j in range(c):
            assert np.all(k[i, j] == (1 / 9 if i == j else 0.0))
    x = T64(np.random.default_rng(3).normal(size=(2, c, *size)))
    pooled = F.avg_pool2d(x, 3, 1, 1, count_include_pad=True)
    np.testing.assert_allclose(F.conv2d(x, T64(k), padding=1).numpy(), pooled.numpy(), rtol=1e-12, atol=1e-13)
    # Why count_include_pad=False is refused: at the border it divides by fewer than 9.
    excluded = F.avg_pool2d(x, 3, 1, 1, count_include_pad=False)
    assert not np.allclose(excluded.numpy(), pooled.numpy())


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("size", [(6, 6), (7, 5)])
def test_compose_1x1_3x3_equals_the_two_convolutions(stride, size):
    rng = np.random.default_rng(4)
    w1, w3 = rng.normal(size=(5, 3, 1, 1)), rng.normal(size=(4, 5, 3, 3))
    x = T64(rng.normal(size=(2, 3, *size)))
    seq = F.conv2d(F.conv2d(x, T64(w1)), T64(w3), stride=stride, padding=1)
    w = compose_1x1_3x3(w1, w3)
    assert w.shape == (4, 3, 3, 3)
    one = F.conv2d(x, T64(w), stride=stride, padding=1)
    np.testing.assert_allclose(one.numpy(), seq.numpy(), rtol=1e-11, atol=1e-11)
    # and the formula itself
    np.testing.assert_allclose(w[2, 1], sum(w3[2, m] * w1[m, 1, 0, 0] for m in range(5)), rtol=1e-13)


def test_a_bias_between_1x1_and_3x3_breaks_exactness_at_the_border():
    """The reason for the refusal: a bias b1 after the 1x1 is zero-padded away at the border."""
    rng = np.random.default_rng(5)
    w1, b1, w3 = rng.normal(size=(3, 2, 1, 1)), rng.normal(size=3), rng.normal(size=(2, 3, 3, 3))
    x = T64(rng.normal(size=(1, 2, 5, 5)))
    seq = F.conv2d(F.conv2d(x, T64(w1), T64(b1)), T64(w3), padding=1)
    best = F.conv2d(x, T64(compose_1x1_3x3(w1, w3)), T64(np.einsum("omhw,m->o", w3, b1)), padding=1)
    inner = (slice(None), slice(None), slice(1, -1), slice(1, -1))
    np.testing.assert_allclose(best[inner].numpy(), seq[inner].numpy(), rtol=1e-11, atol=1e-11)
    assert not np.allclose(best.numpy(), seq.numpy())


@pytest.mark.parametrize("eps", [1e-5, 0.1])
def test_bn_affine_matches_batch_norm(eps):
    rng = np.random.default_rng(6)
    c = 5
    gamma = np.array([1.5, -0.7, 0.0, 2.0, -3.0])
    beta, mean, var = rng.normal(size=c), rng.normal(size=c), rng.uniform(0.01, 3, c)
    s, shift = bn_affine(gamma, beta, mean, var, eps)
    np.testing.assert_allclose(s, gamma / np.sqrt(var + eps), rtol=1e-15)
    np.testing.assert_allclose(shift, beta - mean * s, rtol=1e-15)
    x = T64(rng.normal(size=(3, c, 4, 4)))
    ref = F.batch_norm(x, T64(mean), T64(var), T64(gamma), T64(beta), False, 0.0, eps)
    mine = x * T64(s).view(1, -1, 1, 1) + T64(shift).view(1, -1, 1, 1)
    np.testing.assert_allclose(mine.numpy(), ref.numpy(), rtol=1e-12, atol=1e-12)


# -- models -------------------------------------------------------------------------------------
class Unit(nn.Module):
    """Just a RepConv (for parameter accounting)."""

    def __init__(self, rep):
        super().__init__()
        self.rep = rep

    def forward(self, x):
        return self.rep(x)


class UnitLIF(nn.Module):
    """RepConv -> LIF, so spikes are compared as well as the real sum."""

    def __init__(self, rep, beta=0.8, threshold=0.5):
        super().__init__()
        self.rep = rep
        self.lif = snn.LIF(beta=beta, threshold=threshold)

    def forward(self, x):
        return self.lif(self.rep(x))


def randomize(module, rng, gamma_signs=(-1.0, 0.0, 1.0)):
    """Random conv weights and BN running stats / affine, with negative and zero gamma included."""
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.Conv2d):
                m.weight.copy_(T64(rng.normal(size=m.weight.shape) / np.sqrt(m.weight[0].numel())))
                if m.bias is not None:
                    m.bias.copy_(T64(rng.normal(size=m.bias.shape)))
            elif isinstance(m, nn.BatchNorm2d):
                c = m.num_features
                signs = rng.choice(gamma_signs, c)
                m.weight.copy_(T64(signs * rng.uniform(0.2, 2.0, c)))
                m.bias.copy_(T64(rng.normal(scale=0.5, size=c)))
                m.running_mean.copy_(T64(rng.normal(scale=0.5, size=c)))
                m.running_var.copy_(T64(rng.uniform(0.05, 3.0, c)))
    return module.eval()


def traced_unit(rep, shape):
    model = Unit(rep)
    return model, trace(model, shape, input_kind="real")


# -- parameter accounting (passes.md worked check) -------------------------------------------------
@pytest.mark.parametrize("c_in, c_out, stride, training, fused", [(2, 32, 2, 10_624, 608), (32, 32, 1, 27_072, 9_248)])
def test_parameter_accounting_of_the_published_stage1_units(c_in, c_out, stride, training, fused):
    model, graph = traced_unit(snn.RepConv(c_in, c_out, stride=stride), (c_in, 8, 8))
    assert source_params(model) == training
    assert params(graph) == training  # running statistics are buffers, not parameters
    result = fuse_repconv(graph)
    after = verify(result.graph)
    assert params(after) == fused == 9 * c_in * c_out + c_out
    (conv,) = [n for n in after.nodes if n.op == "conv2d"]
    assert conv.params["weight"].shape == (c_out, c_in, 3, 3) and conv.params["bias"].shape == (c_out,)
    assert conv.attrs["stride"] == (stride, stride) and conv.attrs["padding"] == (1, 1)
    assert ops(after) == ["input", "conv2d"]


def test_fused_unit_equals_the_torch_repconv_on_a_concrete_case():
    rng = np.random.default_rng(7)
    rep = randomize(snn.RepConv(3, 3, stride=1), rng)
    assert rep.identity is not None and rep.avgpool is not None
    model, graph = traced_unit(rep, (3, 6, 5))
    result = fuse_repconv(graph)
    after = verify(result.graph)
    (conv,) = [n for n in after.nodes if n.op == "conv2d"]
    assert conv.name == "rep" and after.outputs == ("rep",)
    x = rng.normal(size=(2, 3, 3, 6, 5))
    with torch.no_grad():
        ref = model.double()(T64(x)).numpy()
    w, b = T64(conv.params["weight"]), T64(conv.params["bias"])
    mine = F.conv2d(T64(x).flatten(0, 1), w, b, padding=1).reshape(ref.shape).numpy()
    np.testing.assert_allclose(mine, ref, rtol=1e-10, atol=1e-10)
    assert set(result.changed) == {n.name for n in graph.nodes if n.op != "input"}
    assert result.skipped == ()


# -- property: random RepConv units fuse to one equivalent conv -------------------------------------
@st.composite
def repconv_configs(draw):
    c_in = draw(st.integers(1, 6))
    c_out = c_in if draw(st.booleans()) else draw(st.integers(1, 6))  # square units (identity/avg-pool) often
    stride = draw(st.sampled_from([1, 1, 2]))
    square = c_in == c_out and stride == 1
    identity = draw(st.booleans()) if square else False
    avgpool = draw(st.booleans()) if square else False
    h, w = draw(st.integers(3, 9)), draw(st.integers(3, 9))
    eps = draw(st.sampled_from([1e-5, 1e-3]))
    kind = draw(st.sampled_from(["real", "binary"]))
    steps = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    return c_in, c_out, stride, identity, avgpool, h, w, eps, kind, steps, seed


def _fused_checks(graph, after, x, model):
    after = verify(after)
    assert sum(op == "conv2d" for op in ops(after)) == 1
    assert not {"batchnorm", "avgpool2d", "add"} & set(ops(after))
    conv = after.node("rep")
    assert conv.op == "conv2d" and after.node("lif").inputs == ("rep",)
    c = compare_graphs(graph, after, x)
    assert c.equivalent, c.describe()
    assert c.spikes_compared == x.shape[0] * x.shape[1] * graph.node("lif").type.size
    assert compare_with_torch(model, after, x).equivalent
    return conv


@settings(max_examples=35, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(repconv_configs())
def test_random_repconv_fuses_equivalently(cfg):
    c_in, c_out, stride, identity, avgpool, h, w, eps, kind, steps, seed = cfg
    rng = np.random.default_rng(seed)
    rep = randomize(snn.RepConv(c_in, c_out, stride=stride, identity=identity, avgpool=avgpool, eps=eps), rng)
    model = UnitLIF(rep, beta=float(rng.uniform(0, 1)), threshold=float(rng.uniform(0.05, 1.0))).eval()
    graph = trace(model, (c_in, h, w), input_kind=kind)
    x = rng.normal(size=(steps, 2, c_in, h, w)) if kind == "real" else binary(rng, (steps, 2, c_in, h, w))
    result = fuse_repconv(graph)
    assert result.skipped == ()
    conv = _fused_checks(graph, result.graph, x, model)
    assert conv.attrs["stride"] == (stride, stride)
    assert params(result.graph) == 9 * c_in * c_out + c_out


@pytest.mark.parametrize("c_in, c_out, stride", [(3, 3, 1), (2, 4, 2), (4, 4, 2)])
def test_fold_batchnorm_first_then_fuse_gives_the_same_unit(c_in, c_out, stride):
    rng = np.random.default_rng(c_in * 10 + stride)
    rep = randomize(snn.RepConv(c_in, c_out, stride=stride), rng)
    model = UnitLIF(rep).eval()
    graph = trace(model, (c_in, 7, 6), input_kind="real")
    x = rng.normal(size=(3, 2, c_in, 7, 6))

    direct = fuse_repconv(graph).graph
    folded = fold_batchnorm(graph)
    assert folded.skipped == ()
    fused_after = fuse_repconv(folded.graph)
    assert fused_after.skipped == ()
    assert ops(fused_after.graph) == ops(direct) == ["input", "conv2d", "lif"]
    for g in (direct, fused_after.graph):
        _fused_checks(graph, g, x, model)
    a, b = direct.node("rep"), fused_after.graph.node("rep")
    np.testing.assert_allclose(b.params["weight"], a.params["weight"], rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(b.params["bias"], a.params["bias"], rtol=1e-12, atol=1e-13)
    # Through the pass manager, in both orders, with the passes named explicitly (no refusal allowed).
    for order in ([FOLD_BATCHNORM, FUSE_REPCONV], [FUSE_REPCONV, FOLD_BATCHNORM]):
        out, records = run_passes(graph, order, x, explicit=True)
        assert ops(out) == ["input", "conv2d", "lif"]
        assert all(r.spike_mismatches == 0 for r in records)
        assert records[-1].params_after == 9 * c_in * c_out + c_out


# -- refusals ---------------------------------------------------------------------------------
def _refused(rep, needle):
    rng = np.random.default_rng(11)
    c = rep.conv3x3[0].in_channels
    model = UnitLIF(randomize(rep, rng)).eval()
    graph = trace(model, (c, 5, 5), input_kind="real")
    x = rng.normal(size=(3, 2, c, 5, 5))
    result = fuse_repconv(graph)
    assert layout(result.graph) == layout(graph)   # left exactly as it was
    assert result.changed == ()
    (skip,) = result.skipped
    assert skip.node == "rep"
    assert needle in skip.reason
    assert compare_graphs(graph, result.graph, x).equivalent
    with pytest.raises(PassError) as info:
        run_passes(graph, [FUSE_REPCONV], x, explicit=True)
    message = info.value.message()
    assert "'rep'" in message and needle in message and "fuse_repconv" in message
    out, (record,) = run_passes(graph, [FUSE_REPCONV], x, explicit=False)
    assert [s["node"] for s in record.skipped] == ["rep"] and layout(out) == layout(graph)
    return skip


def test_avgpool_without_count_include_pad_is_refused():
    skip = _refused(snn.RepConv(3, 3, avgpool_count_include_pad=False), "count_include_pad")
    assert "count_include_pad" in skip.remedy


def test_bias_between_1x1_and_3x3_is_refused():
    skip = _refused(snn.RepConv(3, 3, seq_bias=True), "bias")
    assert "1x1" in skip.reason and "3x3" in skip.reason


def test_refusal_with_stride_2_units_too():
    _refused(snn.RepConv(3, 4, stride=2, seq_bias=True), "bias")


# -- what the pass must leave alone -------------------------------------------------------------
class PlainResidual(nn.Module):
    """``s + conv(s)`` (optionally ``s + BN(conv(s))``): the identity path has no BN, so it is no RepConv unit."""

    def __init__(self, bn: bool):
        super().__init__()
        self.lif0 = snn.LIF(beta=0.5, threshold=0.5)
        layers = [nn.Conv2d(3, 3, 3, padding=1, bias=False)] + ([nn.BatchNorm2d(3)] if bn else [])
        self.conv = snn.TimeDistributed(*layers)
        self.lif = snn.LIF(beta=0.8, threshold=0.5)

    def forward(self, x):
        s = self.lif0(x)
        return self.lif(s + self.conv(s))


class TwoInputs(nn.Module):
    """``BN(conv(x)) + BN(conv(lif(x)))``: two branches, two different inputs."""

    def __init__(self):
        super().__init__()
        self.lif0 = snn.LIF(beta=0.5, threshold=0.5)
        self.a = snn.TimeDistributed(nn.Conv2d(3, 3, 3, padding=1, bias=False), nn.BatchNorm2d(3))
        self.b = snn.TimeDistributed(nn.Conv2d(3, 3, 1, bias=False), nn.BatchNorm2d(3))
        self.lif = snn.LIF(beta=0.8, threshold=0.5)

    def forward(self, x):
        return self.lif(self.a(x) + self.b(self.lif0(x)))


@pytest.mark.parametrize("make", [lambda: PlainResidual(False), lambda: PlainResidual(True), TwoInputs],
                         ids=["x+conv(x)", "x+bn(conv(x))", "two-inputs"])
def test_non_units_are_left_unchanged_without_a_skip(make):
    rng = np.random.default_rng(12)
    model = randomize(make(), rng)
    graph = trace(model, (3, 5, 5), input_kind="real")
    assert "add" in ops(graph)
    result = fuse_repconv(graph)
    assert layout(result.graph) == layout(graph)
    for n in graph.nodes:
        for k, v in n.params.items():
            assert np.array_equal(result.graph.node(n.name).params[k], v)
    assert result.changed == () and result.skipped == ()


class SharedBranch(nn.Module):
    """A two-branch unit ``BN(conv3x3(x)) + BN(conv1x1(x))`` whose 3x3 branch output is also read elsewhere
    (by a second neuron, or as a second graph output). Fusing would delete a value still needed."""

    def __init__(self, as_output: bool):
        super().__init__()
        self.as_output = as_output
        self.a = snn.TimeDistributed(nn.Conv2d(2, 3, 3, padding=1, bias=False), nn.BatchNorm2d(3))
        self.b = snn.TimeDistributed(nn.Conv2d(2, 3, 1, bias=False), nn.BatchNorm2d(3))
        self.lif = snn.LIF(beta=0.5, threshold=0.3)
        self.lif2 = snn.LIF(beta=0.5, threshold=0.3)

    def forward(self, x):
        y = self.a(x)
        s = self.lif(y + self.b(x))
        return (s, y) if self.as_output else s + self.lif2(y)


@pytest.mark.parametrize("as_output", [False, True], ids=["read-by-a-neuron", "graph-output"])
def test_branch_whose_output_has_another_reader_is_not_fused(as_output):
    """A branch is a chain 'each read only by the next' (fuse_repconv docstring): here the leaf BN ``a.1`` is
    read by the addition *and* by another node. The pass must leave the unit alone (or refuse it); removing
    ``a.1`` leaves a dangling edge."""
    rng = np.random.default_rng(13)
    model = randomize(SharedBranch(as_output), rng)
    graph = trace(model, (2, 5, 5), input_kind="real")
    assert len(graph.consumers("a.1")) + ("a.1" in graph.outputs) == 2
    result = fuse_repconv(graph)
    after = verify(result.graph, "after fuse_repconv")      # before 31470c4: a dangling edge from a.1
    assert "a.1" in after
    x = rng.normal(size=(3, 2, 2, 5, 5))
    assert compare_graphs(graph, after, x).equivalent


# -- biased branch convolutions ------------------------------------------------------------------
# RepConv's own branches have bias-free convs; a hand-built unit may not. A branch conv's bias then passes
# through its BN (``s * (conv + b) + c = s * conv + (b * s + c)``): these tests pin that term, which no
# other test or example exercises (a mutant ``b + c`` survived the whole suite before them).
class BiasedBranches(nn.Module):
    """``BN(conv3x3(x) + b1) + BN(conv1x1(x) + b2) [+ BN(conv1x3(x) + b3)]`` -> LIF: biased branch convs."""

    def __init__(self, c_in, c_out, stride=1, three=True):
        super().__init__()
        self.a = snn.TimeDistributed(nn.Conv2d(c_in, c_out, 3, stride, 1, bias=True), nn.BatchNorm2d(c_out))
        self.b = snn.TimeDistributed(nn.Conv2d(c_in, c_out, 1, stride, 0, bias=True), nn.BatchNorm2d(c_out))
        self.c = snn.TimeDistributed(nn.Conv2d(c_in, c_out, (1, 3), stride, (0, 1), bias=True),
                                     nn.BatchNorm2d(c_out)) if three else None
        self.lif = snn.LIF(beta=0.7, threshold=0.4)

    def forward(self, x):
        y = self.a(x) + self.b(x)
        if self.c is not None:
            y = y + self.c(x)
        return self.lif(y)


def _biased_unit(c_in, c_out, stride, three, seed):
    rng = np.random.default_rng(seed)
    # gamma away from 1 (and negative): b * s + c and b + c must differ on every channel
    model = randomize(BiasedBranches(c_in, c_out, stride, three), rng, gamma_signs=(-1.0, 1.0))
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Conv2d):
                m.bias.copy_(T64(rng.uniform(0.5, 1.5, m.bias.shape) * rng.choice([-1.0, 1.0], m.bias.shape)))
    return model, rng


def _branches(model):
    """(W, b, s, c) per branch as float64 numpy: conv weight and bias, BN scale ``s`` and shift ``c``."""
    out = []
    with torch.no_grad():
        for branch in (model.a, model.b, model.c):
            if branch is not None:
                (w, b), (gamma, beta, mean, var) = ([v.double() for v in vs] for vs in (
                    (branch[0].weight, branch[0].bias), (branch[1].weight, branch[1].bias, branch[1].running_mean,
                                                         branch[1].running_var)))
                s = gamma / torch.sqrt(var + branch[1].eps)
                out.append(tuple(v.numpy() for v in (w, b, s, beta - mean * s)))
    return out


def _expected_fused(model):
    """The fused (W, b), computed here from the torch modules, independently of the pass's helpers."""
    w_sum, b_sum = 0.0, 0.0
    for w, b, s, c in _branches(model):
        kh, kw = w.shape[2:]
        full = np.zeros(w.shape[:2] + (3, 3))
        full[:, :, (3 - kh) // 2:(3 - kh) // 2 + kh, (3 - kw) // 2:(3 - kw) // 2 + kw] = w
        w_sum = w_sum + full * s[:, None, None, None]
        b_sum = b_sum + b * s + c
    return w_sum, b_sum


def _fires(graph, x) -> int:
    """How often the unit's LIF fires on ``x`` (a silent neuron would compare nothing of interest)."""
    from spikec.core.interpreter import run
    return int(run(graph, x).values["lif"].sum())


@pytest.mark.parametrize("c_in, c_out, stride, three", [(3, 4, 1, True), (2, 3, 2, False), (4, 4, 1, False)])
def test_biased_branch_convs_fold_their_bias_through_the_bn(c_in, c_out, stride, three):
    model, rng = _biased_unit(c_in, c_out, stride, three, seed=20 + c_in + stride)
    graph = trace(model, (c_in, 6, 7), input_kind="binary")
    assert all("bias" in n.params for n in graph.nodes if n.op == "conv2d")
    result = fuse_repconv(graph)
    assert result.skipped == ()
    after = verify(result.graph)
    assert ops(after) == ["input", "conv2d", "lif"]
    fused = after.node(after.node("lif").inputs[0])
    w, b = _expected_fused(model)
    np.testing.assert_allclose(fused.params["weight"], w, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(fused.params["bias"], b, rtol=1e-12, atol=1e-13)
    # the bias really matters: without the BN scale on it, the bias would be off on every channel
    wrong = sum(b + c for _, b, _, c in _branches(model))
    assert np.all(np.abs(wrong - fused.params["bias"]) > 1e-3)
    x = binary(rng, (4, 3, c_in, 6, 7))
    c = compare_graphs(graph, after, x)
    assert c.equivalent, c.describe()
    assert c.spikes_compared == x.shape[0] * x.shape[1] * graph.node("lif").type.size
    assert 0 < _fires(graph, x) < x.shape[0] * x.shape[1] * graph.node("lif").type.size
    assert compare_with_torch(model, after, x).equivalent


def test_biased_branch_unit_through_the_pass_manager_is_equivalent():
    """The same unit through ``run_passes``: a wrong fused bias is a spike mismatch the pass manager reports."""
    model, rng = _biased_unit(3, 3, 1, True, seed=31)
    graph = trace(model, (3, 5, 5), input_kind="binary")
    x = binary(rng, (5, 2, 3, 5, 5))
    out, (record,) = run_passes(graph, [FUSE_REPCONV], x, explicit=True)
    assert ops(out) == ["input", "conv2d", "lif"]
    assert record.spike_mismatches == 0 and record.comparison["spikes_compared"] > 0
    np.testing.assert_allclose(out.node(out.node("lif").inputs[0]).params["bias"], _expected_fused(model)[1],
                               rtol=1e-12, atol=1e-13)
