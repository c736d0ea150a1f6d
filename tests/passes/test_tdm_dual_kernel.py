"""tdm_dual_kernel (passes.md, "TDM dual-kernel commutation"): the kernel math, the rewrite, AC/MAC, and
where it must not apply."""
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
from spikec.core.passes import run_passes
from spikec.core.report import layers_report
from spikec.core.verify import verify
from spikec.passes.tdm_dual_kernel import TDM_DUAL_KERNEL, dual_kernels, tdm_dual_kernel


T64 = lambda a: torch.tensor(np.array(a, dtype=np.float64))


def layout(graph):
    return [(n.name, n.op, n.inputs) for n in graph.nodes]


def binary(rng, shape, p=0.4):
    return (rng.random(shape) < p).astype(np.float64)


# -- the kernel math ----------------------------------------------------------------------------
def conv_of_tdm(x, lam, w, b, stride, padding):
    """``Conv(W, TDM(x))_t`` computed directly: ``TDM(x)_t = (1 + lam) x_t - lam x_{t-1}``, ``x_0 = 0``."""
    x = T64(x)
    lam = T64(lam).view(1, -1, 1, 1)
    out = []
    for t in range(x.shape[0]):
        prev = x[t - 1] if t > 0 else torch.zeros_like(x[0])
        out.append(F.conv2d((1 + lam) * x[t] - lam * prev, T64(w), None if b is None else T64(b), stride, padding))
    return torch.stack(out).numpy()


@pytest.mark.parametrize("stride, padding", [(1, 0), (1, 1), (2, 1), (2, 2), (2, 0)])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("kind", ["real", "binary"])
def test_dual_kernels_reproduce_conv_of_tdm(stride, padding, with_bias, kind):
    rng = np.random.default_rng(stride * 10 + padding)
    c_in, c_out = 4, 3
    lam = np.array([0.7, -0.4, 0.0, -1.3])     # negative and zero included
    w = rng.normal(size=(c_out, c_in, 3, 3))
    b = rng.normal(size=c_out) if with_bias else None
    x = rng.normal(size=(5, 2, c_in, 7, 6)) if kind == "real" else binary(rng, (5, 2, c_in, 7, 6))
    w_a, w_b = dual_kernels(w, lam)
    assert w_a.shape == w_b.shape == w.shape
    np.testing.assert_allclose(w_a, w * (1 + lam)[None, :, None, None], rtol=1e-15)
    np.testing.assert_allclose(w_b, w * lam[None, :, None, None], rtol=1e-15)
    assert np.all(w_a[:, 2] == w[:, 2]) and np.all(w_b[:, 2] == 0)    # lambda = 0: the plain conv
    ref = conv_of_tdm(x, lam, w, b, stride, padding)
    xt = T64(x)
    mine = []
    for t in range(x.shape[0]):
        now = F.conv2d(xt[t], T64(w_a), None if b is None else T64(b), stride, padding)
        mine.append(now if t == 0 else now - F.conv2d(xt[t - 1], T64(w_b), None, stride, padding))  # x_0 = 0
    np.testing.assert_allclose(torch.stack(mine).numpy(), ref, rtol=1e-11, atol=1e-11)


# -- models -------------------------------------------------------------------------------------
class SpikesTDMConv(nn.Module):
    """LIF (binary spikes) -> TDM -> conv -> LIF."""

    def __init__(self, c_in=3, c_out=4, stride=1, padding=1, kernel=3, bias=True):
        super().__init__()
        self.lif0 = snn.LIF(beta=0.6, threshold=0.4)
        self.tdm = snn.TDM(c_in)
        self.conv = snn.TimeDistributed(nn.Conv2d(c_in, c_out, kernel, stride, padding, bias=bias))
        self.lif = snn.LIF(beta=0.8, threshold=0.5)

    def forward(self, x):
        return self.lif(self.conv(self.tdm(self.lif0(x))))


class TDMConv(nn.Module):
    """TDM (on the model input) -> conv -> LIF."""

    def __init__(self, c_in=3, c_out=4, stride=1, padding=1, kernel=3, bias=True):
        super().__init__()
        self.tdm = snn.TDM(c_in)
        self.conv = snn.TimeDistributed(nn.Conv2d(c_in, c_out, kernel, stride, padding, bias=bias))
        self.lif = snn.LIF(beta=0.8, threshold=0.5)

    def forward(self, x):
        return self.lif(self.conv(self.tdm(x)))


def randomize(model, rng, lam=None):
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, snn.TDM):
                c = m.lam.shape[0]
                m.lam.copy_(T64(rng.uniform(-1.5, 1.5, c) if lam is None else lam))
            elif isinstance(m, nn.Conv2d):
                m.weight.copy_(T64(rng.normal(size=m.weight.shape)))
                if m.bias is not None:
                    m.bias.copy_(T64(rng.normal(size=m.bias.shape)))
    return model.eval()


# -- the rewrite --------------------------------------------------------------------------------
def test_structure_after_the_rewrite():
    rng = np.random.default_rng(1)
    model = randomize(SpikesTDMConv(), rng)
    graph = trace(model, (3, 6, 6), input_kind="real")
    assert [n.op for n in graph.nodes] == ["input", "lif", "tdm", "conv2d", "lif"]
    result = tdm_dual_kernel(graph)
    after = verify(result.graph)
    assert "tdm" not in {n.op for n in after.nodes}
    assert [n.op for n in after.nodes] == ["input", "lif", "delay", "conv2d", "conv2d", "add", "lif"]
    (delay,) = [n for n in after.nodes if n.op == "delay"]
    assert delay.inputs == ("lif0",) and delay.attrs["steps"] == 1
    total = after.node("conv.0")                      # the sum carries the conv's name
    assert total.op == "add" and after.node("lif").inputs == ("conv.0",)
    now, past = (after.node(i) for i in total.inputs)
    assert now.op == past.op == "conv2d"
    assert now.inputs == ("lif0",) and past.inputs == (delay.name,)
    assert "bias" in now.params and "bias" not in past.params          # the bias is added once
    conv = graph.node("conv.0")
    lam = graph.node("tdm").params["lam"]
    w_a, w_b = dual_kernels(conv.params["weight"], lam)
    np.testing.assert_array_equal(now.params["weight"], w_a)
    np.testing.assert_array_equal(past.params["weight"], -w_b)
    np.testing.assert_array_equal(now.params["bias"], conv.params["bias"])
    assert now.attrs == past.attrs == conv.attrs
    assert set(result.changed) == {"tdm", "conv.0"} and result.skipped == ()
    x = rng.normal(size=(6, 2, 3, 6, 6))
    c = compare_graphs(graph, after, x)
    assert c.equivalent, c.describe()
    assert "conv.0" in c.nodes_compared
    assert compare_with_torch(model, after, x).equivalent


def _synaptic(graph):
    return {r["name"]: (r["operand_kind"], r["synaptic_kind"]) for r in layers_report(graph) if r["synaptic_kind"]}


def test_binary_operand_makes_both_convs_accumulate_only():
    model = randomize(SpikesTDMConv(), np.random.default_rng(2))
    graph = trace(model, (3, 6, 6), input_kind="real")
    assert _synaptic(graph) == {"conv.0": ("real", "MAC")}     # TDM of spikes is real-valued: MAC before
    result = tdm_dual_kernel(graph)
    assert _synaptic(result.graph) == {"conv.0.now": ("binary", "AC"), "conv.0.past": ("binary", "AC")}
    (note,) = result.notes
    assert "conv.0" in note and "accumulate-only" in note


@pytest.mark.parametrize("kind", ["real", "integer"])
def test_non_binary_operand_stays_mac_and_the_note_says_so(kind):
    model = randomize(TDMConv(), np.random.default_rng(3))
    graph = trace(model, (3, 6, 6), input_kind=kind, ceiling=2 if kind == "integer" else None)
    result = tdm_dual_kernel(graph)
    assert _synaptic(result.graph) == {"conv.0.now": (kind, "MAC"), "conv.0.past": (kind, "MAC")}
    (note,) = result.notes
    assert "MAC" in note and kind in note
    rng = np.random.default_rng(4)
    x = rng.normal(size=(4, 2, 3, 6, 6)) if kind == "real" else rng.integers(0, 3, (4, 2, 3, 6, 6)).astype(float)
    assert compare_graphs(graph, result.graph, x).equivalent


class TwoConvs(nn.Module):
    """One TDM read by two convolutions (different strides)."""

    def __init__(self):
        super().__init__()
        self.lif0 = snn.LIF(beta=0.6, threshold=0.4)
        self.tdm = snn.TDM(2)
        self.a = snn.TimeDistributed(nn.Conv2d(2, 3, 3, 1, 1))
        self.b = snn.TimeDistributed(nn.Conv2d(2, 3, 3, 1, 1, bias=False))
        self.lif = snn.LIF(beta=0.8, threshold=0.5)

    def forward(self, x):
        y = self.tdm(self.lif0(x))
        return self.lif(self.a(y) + self.b(y))


def test_a_tdm_read_by_two_convs_rewrites_both_over_one_delay():
    rng = np.random.default_rng(5)
    model = randomize(TwoConvs(), rng)
    graph = trace(model, (2, 5, 5), input_kind="real")
    result = tdm_dual_kernel(graph)
    after = verify(result.graph)
    assert sum(n.op == "delay" for n in after.nodes) == 1
    assert sum(n.op == "conv2d" for n in after.nodes) == 4
    assert after.node("a.0").op == after.node("b.0").op == "add"
    x = rng.normal(size=(5, 2, 2, 5, 5))
    assert compare_graphs(graph, after, x).equivalent


def test_single_step_runs_the_now_kernel_only():
    """At t = 1 (and so for T = 1) ``x_0 = 0``: the Delay contributes nothing."""
    rng = np.random.default_rng(6)
    model = randomize(TDMConv(), rng)
    graph = trace(model, (3, 5, 5), input_kind="real")
    after = tdm_dual_kernel(graph).graph
    x = rng.normal(size=(1, 3, 3, 5, 5))
    c = compare_graphs(graph, after, x)
    assert c.equivalent, c.describe()


# -- property -----------------------------------------------------------------------------------
@st.composite
def tdm_configs(draw):
    c_in, c_out = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    kernel = draw(st.sampled_from([1, 3]))
    stride = draw(st.sampled_from([1, 2]))
    padding = draw(st.integers(0, kernel // 2 + 1))
    size = draw(st.integers(max(1, kernel - 2 * padding), 7))
    steps = draw(st.integers(1, 8))
    bias = draw(st.booleans())
    kind = draw(st.sampled_from(["binary", "real"]))
    lam = draw(st.lists(st.one_of(st.sampled_from([0.0, -1.0, 1.0, -0.5]), st.floats(-2.0, 2.0)),
                        min_size=c_in, max_size=c_in))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    return c_in, c_out, kernel, stride, padding, size, steps, bias, kind, np.array(lam), seed


@settings(max_examples=35, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tdm_configs())
def test_random_tdm_conv_commutes_equivalently(cfg):
    c_in, c_out, kernel, stride, padding, size, steps, bias, kind, lam, seed = cfg
    rng = np.random.default_rng(seed)
    model = randomize(TDMConv(c_in, c_out, stride, padding, kernel, bias), rng, lam=lam)
    graph = trace(model, (c_in, size, size), input_kind=kind)
    shape = (steps, 2, c_in, size, size)
    x = binary(rng, shape, p=float(rng.uniform(0.2, 0.8))) if kind == "binary" else rng.normal(size=shape)
    result = tdm_dual_kernel(graph)
    after = verify(result.graph)
    assert result.skipped == () and "tdm" not in {n.op for n in after.nodes}
    expected = "AC" if kind == "binary" else "MAC"
    assert {r["synaptic_kind"] for r in layers_report(after) if r["op"] == "conv2d"} == {expected}
    c = compare_graphs(graph, after, x)
    assert c.equivalent, c.describe()
    assert compare_with_torch(model, after, x).equivalent


# -- where it must not apply ----------------------------------------------------------------------
class TDMIntoLIF(nn.Module):
    def __init__(self):
        super().__init__()
        self.tdm = snn.TDM(3)
        self.lif = snn.LIF(beta=0.8, threshold=0.5)

    def forward(self, x):
        return self.lif(self.tdm(x))


class TDMIntoConvAndLIF(nn.Module):
    def __init__(self):
        super().__init__()
        self.tdm = snn.TDM(3)
        self.conv = snn.TimeDistributed(nn.Conv2d(3, 3, 3, padding=1))
        self.lif = snn.LIF(beta=0.8, threshold=0.5)
        self.lif2 = snn.LIF(beta=0.8, threshold=0.5)

    def forward(self, x):
        y = self.tdm(x)
        return self.lif(self.conv(y)) + self.lif2(y)


class TDMOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.tdm = snn.TDM(3)

    def forward(self, x):
        return self.tdm(x)


class TDMGroupedConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.tdm = snn.TDM(4)
        self.conv = snn.TimeDistributed(nn.Conv2d(4, 4, 3, padding=1, groups=2))
        self.lif = snn.LIF(beta=0.8, threshold=0.5)

    def forward(self, x):
        return self.lif(self.conv(self.tdm(x)))


@pytest.mark.parametrize("make, channels, needle", [(TDMIntoLIF, 3, "other than a convolution"),
                                                    (TDMIntoConvAndLIF, 3, "other than a convolution"),
                                                    (TDMOut, 3, "other than a convolution"),
                                                    (TDMGroupedConv, 4, "grouped")],
                         ids=["lif", "conv-and-lif", "graph-output", "grouped-conv"])
def test_tdm_not_read_only_by_plain_convs_is_skipped_and_left_in_place(make, channels, needle):
    rng = np.random.default_rng(7)
    model = randomize(make(), rng)
    graph = trace(model, (channels, 5, 5), input_kind="real")
    result = tdm_dual_kernel(graph)
    assert layout(result.graph) == layout(graph)
    assert np.array_equal(result.graph.node("tdm").params["lam"], graph.node("tdm").params["lam"])
    assert result.changed == ()
    (skip,) = result.skipped
    assert skip.node == "tdm" and needle in skip.reason and skip.remedy
    x = rng.normal(size=(3, 2, channels, 5, 5))
    assert compare_graphs(graph, result.graph, x).equivalent
    with pytest.raises(PassError) as info:
        run_passes(graph, [TDM_DUAL_KERNEL], x, explicit=True)
    assert "'tdm'" in info.value.message()
