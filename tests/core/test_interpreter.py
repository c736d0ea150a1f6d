"""The reference interpreter reproduces the PyTorch models bit for bit in float64, and integers exactly."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st
from torch import nn

import spikec.nn as snn
from spikec.ir.errors import BadInput, IRError
from spikec.frontend import trace
from spikec.core.interpreter import is_integer_graph, run
from spikec.ir.graph import Graph, Node, TensorType
from spikec.core.verify import verify

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "examples" / "digits"
FAST = settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


class Chain(nn.Module):
    """A plain model class (not nn.Sequential): calls its layers in order."""

    def __init__(self, *layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def randomize_bn(model, seed=0):
    """Random running statistics and affine parameters in every BatchNorm (else BN is nearly identity)."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            c = m.num_features
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(c, generator=g) * 0.5)
                m.running_var.copy_(torch.rand(c, generator=g) * 2 + 0.1)
                m.weight.copy_(torch.randn(c, generator=g))
                m.bias.copy_(torch.randn(c, generator=g) * 0.5)
    return model


def compare(model, input_shape, x, *, input_kind="real", ceiling=None):
    """Trace, run both, assert bit-for-bit equality of every output; return (graph, outputs)."""
    graph = trace(model, input_shape, input_kind=input_kind, ceiling=ceiling)
    model = model.double().eval()
    with torch.no_grad():
        ref = model(torch.tensor(x, dtype=torch.float64))
    ref = [r.numpy() for r in (ref if isinstance(ref, (tuple, list)) else (ref,))]
    got = run(graph, x).outputs(graph)
    assert len(got) == len(ref)
    for g, r, name in zip(got, ref, graph.outputs):
        assert g.dtype == np.float64
        assert g.shape == r.shape == (x.shape[0], x.shape[1]) + graph.node(name).type.shape
        assert np.array_equal(g, r), f"output {name!r} differs: max |diff| {np.abs(g - r).max()}"
    return graph, got


def spikes_in(rng, shape, p=0.4):
    return (rng.random(shape) < p).astype(np.float64)


def check_kind(values, node_type):
    """The runtime values respect the kind the IR claims for them."""
    if node_type.kind == "binary":
        assert np.isin(values, (0.0, 1.0)).all()
    elif node_type.kind == "integer":
        assert np.array_equal(values, np.round(values)) and values.min() >= 0 and values.max() <= node_type.ceiling


# -- neurons ---------------------------------------------------------------------------------
@pytest.mark.parametrize("reset", ["subtract", "zero"])
@pytest.mark.parametrize("T", [1, 2, 7, 16])
def test_lif_conv_model(reset, T):
    torch.manual_seed(T)
    model = Chain(snn.TimeDistributed(nn.Conv2d(2, 3, 3, padding=1), nn.BatchNorm2d(3)),
                  snn.LIF(beta=[0.5, 0.9, 1.0], threshold=[0.25, 0.5, 1.0], bias=[0.0, -0.125, 0.1],
                          alpha=[1.0, 0.5, 2.0], v_reset=[0.0, 0.25, -0.5], reset=reset))
    randomize_bn(model, T)
    x = spikes_in(np.random.default_rng(T), (T, 3, 2, 6, 6))
    graph, (out,) = compare(model, (2, 6, 6), x, input_kind="binary")
    assert graph.node("layers.1").type.kind == "binary"
    assert 0 < out.sum() < out.size  # the neuron both fires and stays silent: a meaningful comparison


dyadic = st.integers(-16, 16).map(lambda k: k / 8)


@FAST
@given(T=st.integers(1, 16), B=st.integers(1, 3), C=st.integers(1, 4), conv=st.booleans(),
       reset=st.sampled_from(["subtract", "zero"]), per_channel=st.booleans(), dyadic_inputs=st.booleans(),
       seed=st.integers(0, 2 ** 32 - 1), data=st.data())
def test_lif_hypothesis(T, B, C, conv, reset, per_channel, dyadic_inputs, seed, data):
    rng = np.random.default_rng(seed)
    n = C if per_channel else None
    draw = lambda lo, hi: rng.uniform(lo, hi, n) if n else float(rng.uniform(lo, hi))
    # dyadic parameters and inputs produce exact ties U == threshold; random ones exercise rounding
    if dyadic_inputs:
        q = lambda v: np.round(np.asarray(v) * 8) / 8
        params = dict(beta=q(draw(0, 1)), threshold=q(draw(0.125, 2)), alpha=q(draw(0.25, 2)),
                      bias=q(draw(-0.5, 0.5)), v_reset=q(draw(-0.5, 0.5)))
    else:
        params = dict(beta=draw(0, 1), threshold=draw(0.05, 2), alpha=draw(0.1, 2), bias=draw(-0.5, 0.5),
                      v_reset=draw(-0.5, 0.5))
    model = Chain(snn.LIF(reset=reset, **params))
    shape = (C, 3, 2) if conv else (C,)
    x = rng.normal(0.5, 1.0, (T, B) + shape)
    if dyadic_inputs:
        x = np.round(x * 4) / 4
    compare(model, shape, x)


@pytest.mark.parametrize("rounding", ["round", "floor"])
@pytest.mark.parametrize("D", [1, 2, 3, 4, 5, 6])
def test_intfire_conv_model(rounding, D):
    torch.manual_seed(D)
    model = Chain(snn.TimeDistributed(nn.Conv2d(1, 2, 3, padding=1)),
                  snn.IntFire(threshold=[0.5, 0.25], max_spikes=D, beta=[1.0, 0.75], rounding=rounding))
    x = spikes_in(np.random.default_rng(D), (5, 2, 1, 5, 5), 0.6) * 3
    graph, (out,) = compare(model, (1, 5, 5), x, input_kind="integer", ceiling=3)
    node = graph.node("layers.1")
    assert node.type.kind == "integer" and node.type.ceiling == D
    check_kind(out, node.type)
    assert out.max() == D  # the ceiling is reached, so clipping is exercised


@FAST
@given(T=st.integers(1, 16), B=st.integers(1, 3), C=st.integers(1, 4), D=st.integers(1, 6),
       rounding=st.sampled_from(["round", "floor"]), per_channel=st.booleans(), ties=st.booleans(),
       seed=st.integers(0, 2 ** 32 - 1))
def test_intfire_hypothesis(T, B, C, D, rounding, per_channel, ties, seed):
    rng = np.random.default_rng(seed)
    n = C if per_channel else None
    draw = lambda lo, hi: rng.uniform(lo, hi, n) if n else float(rng.uniform(lo, hi))
    if ties:  # half-integers of U/theta: round-half-up must agree exactly
        params = dict(threshold=np.round(np.asarray(draw(0.25, 2)) * 4) / 4, beta=np.round(np.asarray(draw(0, 1)) * 4) / 4,
                      alpha=np.round(np.asarray(draw(0.5, 2)) * 4) / 4)
        x = np.round(rng.normal(0.5, 2.0, (T, B, C)) * 8) / 8
    else:
        params = dict(threshold=draw(0.1, 2), beta=draw(0, 1), alpha=draw(0.1, 2))
        x = rng.normal(0.5, 2.0, (T, B, C))
    model = Chain(snn.IntFire(max_spikes=D, rounding=rounding, **params))
    graph, (out,) = compare(model, (C,), x)
    check_kind(out, graph.node(graph.outputs[0]).type)


@pytest.mark.parametrize("T", [1, 3, 16])
def test_silif(T):
    model = Chain(nn.Linear(4, 3), snn.SiLIF(3))
    with torch.no_grad():
        model.layers[1].l.copy_(torch.tensor([-1.0, 0.0, 0.7]))
        model.layers[1].b.copy_(torch.tensor([1.0, 0.6, 1.7]))
        model.layers[1].v_th.copy_(torch.tensor([0.3, 0.5, 0.9]))
    x = np.random.default_rng(T).uniform(0, 1.5, (T, 2, 4))
    graph, (out,) = compare(model, (4,), x)
    assert graph.node("layers.1").op == "silif" and graph.node("layers.1").type.kind == "binary"


@pytest.mark.parametrize("T", [1, 4, 16])
def test_csilif(T):
    model = Chain(snn.TimeDistributed(nn.Conv2d(1, 3, 3, padding=1)), snn.CSiLIF(3))
    with torch.no_grad():
        m = model.layers[1]
        m.l.copy_(torch.tensor([-1.0, -0.3, 0.2]))
        m.omega.copy_(torch.tensor([0.5, 2.0, 3.0]))
        m.log_dt.copy_(torch.tensor([0.0, -0.7, 0.3]))
        m.b.copy_(torch.tensor([1.0, 0.4, 1.6]))
        m.v_th.copy_(torch.tensor([0.2, 0.5, 0.1]))
    x = spikes_in(np.random.default_rng(T), (T, 2, 1, 5, 5))
    compare(model, (1, 5, 5), x, input_kind="binary")


# -- temporal ops ----------------------------------------------------------------------------
@pytest.mark.parametrize("T", [1, 2, 9])
def test_tdm(T):
    model = Chain(snn.TDM(3), snn.LIF(beta=0.5, threshold=0.5))
    with torch.no_grad():
        model.layers[0].lam.copy_(torch.tensor([0.3, -0.7, 1.9]))
    x = np.random.default_rng(T).normal(size=(T, 2, 3, 4, 4))
    compare(model, (3, 4, 4), x)
    compare(Chain(snn.TDM(3)), (3,), np.random.default_rng(T).normal(size=(T, 2, 3)))


@pytest.mark.parametrize("T", [1, 5, 16])
def test_bntt_eval_with_random_statistics(T):
    g = torch.Generator().manual_seed(T)
    bntt = snn.BNTT(3, T, eps=1e-4)
    with torch.no_grad():
        bntt.weight.copy_(torch.randn(T, 3, generator=g))
        bntt.bias.copy_(torch.randn(T, 3, generator=g))
        bntt.running_mean.copy_(torch.randn(T, 3, generator=g))
        bntt.running_var.copy_(torch.rand(T, 3, generator=g) + 0.05)
    model = Chain(snn.TimeDistributed(nn.Conv2d(2, 3, 3, padding=1, bias=False)), bntt, snn.LIF())
    x = spikes_in(np.random.default_rng(T), (T, 2, 2, 5, 5))
    compare(model, (2, 5, 5), x, input_kind="binary")
    graph = trace(model, (2, 5, 5))
    with pytest.raises(BadInput, match=f"T={T}"):
        run(graph, spikes_in(np.random.default_rng(0), (T + 1, 1, 2, 5, 5)))


@pytest.mark.parametrize("k", [0, 1, 3, 6, 8])
def test_delay(k):
    model = Chain(snn.LIF(beta=0.5), snn.Delay(k))
    x = np.random.default_rng(k).normal(1, 1, (6, 2, 4))
    graph, (out,) = compare(model, (4,), x)
    assert graph.node("layers.1").type.kind == "binary"
    if k >= 6:
        assert not out.any()


@pytest.mark.parametrize("dilation", [1, 2])
@pytest.mark.parametrize("kernel", [3, 5])
def test_windowsum(kernel, dilation):
    model = Chain(snn.WindowSum(kernel, dilation))
    x = spikes_in(np.random.default_rng(kernel + dilation), (4, 2, 3, 7, 7))
    graph, (out,) = compare(model, (3, 7, 7), x, input_kind="binary")
    t = graph.node(graph.outputs[0]).type
    assert (t.kind, t.ceiling) == ("integer", kernel * kernel)
    check_kind(out, t)


# -- RepConv, pooling, element-wise ----------------------------------------------------------
@pytest.mark.parametrize("c_in, c_out, stride", [(4, 4, 1), (3, 5, 1), (4, 4, 2), (2, 6, 2)])
def test_repconv(c_in, c_out, stride):
    torch.manual_seed(c_in * 10 + c_out + stride)
    rep = snn.RepConv(c_in, c_out, stride)
    for conv in (m for m in rep.modules() if isinstance(m, nn.Conv2d)):
        with torch.no_grad():
            conv.weight.normal_(0, 0.5)
    model = Chain(rep, snn.LIF(threshold=0.5))
    randomize_bn(model, stride)
    x = spikes_in(np.random.default_rng(c_in), (3, 2, c_in, 8, 8))
    graph, (out,) = compare(model, (c_in, 8, 8), x, input_kind="binary")
    # also compare the RepConv output itself, not only the spikes
    compare(Chain(rep), (c_in, 8, 8), x, input_kind="binary")
    assert 0 < out.sum() < out.size
    n_branches = 7 if (c_in == c_out and stride == 1) else 5
    assert sum(n.op == "batchnorm" for n in graph.nodes) == n_branches


@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avgpool_count_include_pad(count_include_pad):
    model = Chain(snn.TimeDistributed(nn.AvgPool2d(3, 2, 1, count_include_pad=count_include_pad)),
                  snn.LIF(threshold=0.3))
    x = spikes_in(np.random.default_rng(1), (4, 2, 2, 7, 7))
    compare(model, (2, 7, 7), x, input_kind="binary")
    compare(Chain(snn.TimeDistributed(nn.AvgPool2d(3, 2, 1, count_include_pad=count_include_pad))),
            (2, 7, 7), x, input_kind="binary")


@pytest.mark.parametrize("pool", [nn.MaxPool2d(2), nn.MaxPool2d(3, 2, 1), nn.MaxPool2d(3, 1, 1, dilation=1),
                                  nn.MaxPool2d(2, 2, 0, dilation=2)])
def test_maxpool_over_spikes(pool):
    model = Chain(snn.TimeDistributed(pool))
    x = spikes_in(np.random.default_rng(2), (3, 2, 2, 8, 8))
    graph, (out,) = compare(model, (2, 8, 8), x, input_kind="binary")
    assert graph.node(graph.outputs[0]).type.kind == "binary"
    check_kind(out, graph.node(graph.outputs[0]).type)


@pytest.mark.parametrize("pool", [nn.MaxPool2d(3, 3, 1, ceil_mode=True), nn.AvgPool2d(3, 3, 1, ceil_mode=True),
                                  nn.MaxPool2d(2, 2, ceil_mode=True), nn.AvgPool2d(2, 2, ceil_mode=True)])
def test_pool_ceil_mode_shape(pool):
    """With ceil_mode the IR type must be the shape torch produces (last window must start inside the input)."""
    model = Chain(snn.TimeDistributed(pool))
    x = spikes_in(np.random.default_rng(3), (2, 1, 1, 5, 5))
    compare(model, (1, 5, 5), x, input_kind="binary")


class TwoBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = snn.TimeDistributed(nn.Conv2d(2, 3, 3, padding=1))
        self.b = snn.TimeDistributed(nn.Conv2d(2, 3, 1))
        self.lif_a = snn.LIF(beta=0.5, threshold=0.25)
        self.lif_b = snn.LIF(beta=0.9, threshold=0.25, reset="zero")

    def forward(self, x):
        sa, sb = self.lif_a(self.a(x)), self.lif_b(self.b(x))
        return sa + sb, sa * sb, sa * 0.5, 2.0 * sb, sa + 1.0


@pytest.mark.parametrize("T", [1, 4, 16])
def test_add_and_mul_of_spike_tensors(T):
    torch.manual_seed(T)
    model = TwoBranch()
    x = spikes_in(np.random.default_rng(T), (T, 2, 2, 5, 5))
    graph, outs = compare(model, (2, 5, 5), x, input_kind="binary")
    kinds = [graph.node(o).type for o in graph.outputs]
    assert (kinds[0].kind, kinds[0].ceiling) == ("integer", 2)
    assert kinds[1].kind == "binary"
    assert [k.kind for k in kinds[2:]] == ["real"] * 3
    check_kind(outs[0], kinds[0])
    check_kind(outs[1], kinds[1])
    assert outs[0].max() == 2  # both branches fire together somewhere


class AllOps(nn.Module):
    """Most reference modules in one network, for a sweep over T."""

    def __init__(self, T):
        super().__init__()
        self.rep = snn.RepConv(2, 4, stride=1)
        self.bntt = snn.BNTT(4, T)
        self.lif1 = snn.LIF(beta=0.75, threshold=0.5)
        self.ws = snn.WindowSum(3, 2)
        self.tdm = snn.TDM(4, 0.25)
        self.fire = snn.IntFire(threshold=1.5, max_spikes=3)
        self.delay = snn.Delay(1)
        self.pool = snn.TimeDistributed(nn.MaxPool2d(2), nn.Flatten())
        self.fc = nn.Linear(4 * 3 * 3, 5)
        self.silif = snn.SiLIF(5, v_th_init=0.3)

    def forward(self, x):
        s = self.lif1(self.bntt(self.rep(x)))
        y = self.fire(self.tdm(self.ws(s)))
        z = self.delay(y) * s
        return self.silif(self.fc(self.pool(z + s)))


@pytest.mark.parametrize("T", list(range(1, 17)))
def test_all_ops_every_T(T):
    torch.manual_seed(100 + T)
    model = randomize_bn(AllOps(T), T)
    x = spikes_in(np.random.default_rng(T), (T, 2, 2, 6, 6))
    compare(model, (2, 6, 6), x, input_kind="binary")


# -- the digits example ----------------------------------------------------------------------
def load_digits_model():
    spec = importlib.util.spec_from_file_location("spikec_test_digits_model", DIGITS / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.small()
    model.load_state_dict(torch.load(DIGITS / "checkpoint.pt", weights_only=True))
    return model


def test_digits_example_bit_exact():
    model = load_digits_model()
    with np.load(DIGITS / "inputs.npz") as z:
        x = z["input"]
    graph, (out,) = compare(model, model.input_shape, x, input_kind="binary")
    assert out.shape == (x.shape[0], x.shape[1], 10)
    trace_all = run(graph, x)
    for node in graph.nodes:
        if node.op == "lif":
            assert node.type.kind == "binary"
            values = trace_all.values[node.name]
            check_kind(values, node.type)
            assert 0 < values.sum() < values.size  # the LIFs are active
        if node.op in ("conv2d", "linear", "batchnorm", "avgpool2d"):
            assert node.type.kind == "real"
    assert {n.op for n in graph.nodes} >= {"conv2d", "batchnorm", "lif", "avgpool2d", "flatten", "linear"}
    assert {graph.node(n).attrs["reset"] for n in ("lif1", "lif2")} == {"subtract", "zero"}


# -- integer mode ----------------------------------------------------------------------------
def integer_graph(scale_w=1):
    rng = np.random.default_rng(0)
    conv_w = rng.integers(-3, 4, (2, 1, 3, 3)) * scale_w
    conv_b = rng.integers(-2, 3, (2,))
    fc_w = rng.integers(-5, 6, (3, 8))
    fc_b = rng.integers(-4, 5, (3,))
    nodes = [
        Node("x", "input", (), TensorType((1, 4, 4), "binary")),
        Node("conv", "conv2d", ("x",), TensorType((2, 4, 4)),
             {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1},
             {"weight": conv_w, "bias": conv_b}),
        Node("pool", "maxpool2d", ("conv",), TensorType((2, 2, 2)),
             {"kernel": (2, 2), "stride": (2, 2), "padding": (0, 0), "dilation": (1, 1), "ceil_mode": False}),
        Node("act", "relu", ("pool",), TensorType((2, 2, 2))),
        Node("ws", "windowsum", ("act",), TensorType((2, 2, 2)), {"kernel": 3, "dilation": 1}),
        Node("flat", "flatten", ("ws",), TensorType((8,)), {"start": 0, "end": -1}),
        Node("fc", "linear", ("flat",), TensorType((3,)), {}, {"weight": fc_w, "bias": fc_b}),
        Node("aff", "scale", ("fc",), TensorType((3,)), {"a": 3, "b": -2}),
        Node("twice", "add", ("aff", "fc"), TensorType((3,))),
        Node("sq", "mul", ("twice", "fc"), TensorType((3,))),
        Node("late", "delay", ("sq",), TensorType((3,)), {"steps": 1}),
    ]
    graph = verify(Graph(tuple(nodes), ("late",)))
    return graph, dict(conv_w=conv_w, conv_b=conv_b, fc_w=fc_w, fc_b=fc_b)


def integer_reference(x, p):
    """The same computation in numpy int64 with explicit loops."""
    T, B = x.shape[:2]
    xp = np.pad(x, [(0, 0)] * 3 + [(1, 1), (1, 1)])
    conv = np.zeros((T, B, 2, 4, 4), dtype=np.int64)
    for o in range(2):
        conv[:, :, o] = p["conv_b"][o]
        for i in range(3):
            for j in range(3):
                conv[:, :, o] += p["conv_w"][o, 0, i, j] * xp[:, :, 0, i:i + 4, j:j + 4]
    pool = conv.reshape(T, B, 2, 2, 2, 2, 2).max(axis=(4, 6))
    act = np.maximum(pool, 0)
    ws = act.sum(axis=(3, 4), keepdims=True).repeat(2, 3).repeat(2, 4)  # 3x3 window covers all of 2x2
    fc = ws.reshape(T, B, 8) @ p["fc_w"].T + p["fc_b"]
    sq = ((3 * fc - 2) + fc) * fc
    return np.concatenate([np.zeros_like(sq[:1]), sq[:-1]])


def test_integer_graph_runs_exactly_in_int64():
    graph, p = integer_graph()
    assert is_integer_graph(graph)
    x = (np.random.default_rng(1).random((5, 3, 1, 4, 4)) < 0.5).astype(np.float64)
    trace_ = run(graph, x)
    out = trace_.outputs(graph)[0]
    assert out.dtype == np.int64
    assert all(v.dtype == np.int64 for v in trace_.values.values())
    assert np.array_equal(out, integer_reference(x.astype(np.int64), p))


def conv_only_graph(weight):
    nodes = [Node("x", "input", (), TensorType((1, 4, 4), "binary")),
             Node("conv", "conv2d", ("x",), TensorType((weight.shape[0], 4, 4)),
                  {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1}, {"weight": weight})]
    return verify(Graph(tuple(nodes), ("conv",)))


def test_integer_conv_with_large_weights_is_exact_or_refused():
    # weights near 2**50: float32 could not hold them and their sums; float64 holds sums < 2**53 exactly
    w = np.random.default_rng(2).integers(-3, 4, (2, 1, 3, 3)) * 2 ** 48 + np.arange(18).reshape(2, 1, 3, 3)
    x = (np.random.default_rng(3).random((2, 2, 1, 4, 4)) < 0.5).astype(np.int64)
    got = run(conv_only_graph(w), x).outputs(conv_only_graph(w))[0]
    xp = np.pad(x, [(0, 0)] * 3 + [(1, 1), (1, 1)])
    ref = np.zeros((2, 2, 2, 4, 4), dtype=np.int64)
    for o in range(2):
        for i in range(3):
            for j in range(3):
                ref[:, :, o] += int(w[o, 0, i, j]) * xp[:, :, 0, i:i + 4, j:j + 4]
    assert got.dtype == np.int64 and np.array_equal(got, ref)
    # sums that may reach 2**53 are refused rather than rounded
    with pytest.raises(IRError, match="2\\*\\*53"):
        run(conv_only_graph(w * 64), x)


def _single(op, attrs, params, in_type=TensorType((2, 3, 3), "binary"), out_type=None):
    nodes = [Node("x", "input", (), in_type),
             Node("n", op, ("x",), out_type or TensorType(in_type.shape), attrs, params)]
    return verify(Graph(tuple(nodes), ("n",)))


@pytest.mark.parametrize("op, attrs, params, out_type", [
    ("lif", {"reset": "subtract"}, {k: 1 for k in ("beta", "alpha", "threshold")} | {"bias": 0, "v_reset": 0},
     TensorType((2, 3, 3), "binary")),
    ("intfire", {"max_spikes": 2, "rounding": "round"}, {"beta": 1, "alpha": 1, "threshold": 1},
     TensorType((2, 3, 3), "integer", 2)),
    ("batchnorm", {"eps": 0.0}, {"gamma": [1, 1], "beta": [0, 0], "mean": [0, 0], "var": [1, 1]}, None),
    ("tdm", {}, {"lam": [1, 2]}, None),
    ("avgpool2d", {"kernel": (2, 2), "stride": (1, 1), "padding": (0, 0), "ceil_mode": False,
                   "count_include_pad": True}, {}, TensorType((2, 2, 2))),
])
def test_integer_mode_refuses_ops_without_integer_kernel(op, attrs, params, out_type):
    if op == "avgpool2d":  # has no params: make the graph integer through a preceding conv
        nodes = [Node("x", "input", (), TensorType((2, 3, 3), "binary")),
                 Node("c", "conv2d", ("x",), TensorType((2, 3, 3)),
                      {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 2},
                      {"weight": np.ones((2, 1, 1, 1), dtype=np.int64)}),
                 Node("n", op, ("c",), out_type, attrs)]
        graph = verify(Graph(tuple(nodes), ("n",)))
    else:
        graph = _single(op, attrs, params, out_type=out_type)
    assert is_integer_graph(graph)
    with pytest.raises(IRError, match=f"op {op} has no exact integer kernel") as e:
        run(graph, np.ones((2, 1, 2, 3, 3)))
    assert "'n'" in str(e.value)


def test_integer_mode_refuses_fractional_scale_and_inputs():
    graph, _ = integer_graph()
    with pytest.raises(BadInput, match="not integral"):
        run(graph, np.full((1, 1, 1, 4, 4), 0.5))
    nodes = [Node("x", "input", (), TensorType((3,), "binary")),
             Node("fc", "linear", ("x",), TensorType((3,)), {}, {"weight": np.eye(3, dtype=np.int64)}),
             Node("s", "scale", ("fc",), TensorType((3,)), {"a": 0.5, "b": 0.0})]
    with pytest.raises(IRError, match="integer kernel"):
        run(Graph(tuple(nodes), ("s",)), np.ones((1, 1, 3)))


def test_float_graph_is_not_integer_mode():
    graph = trace(Chain(nn.Linear(3, 2)), (3,))
    assert not is_integer_graph(graph)
    out = run(graph, np.ones((1, 1, 3))).outputs(graph)[0]
    assert out.dtype == np.float64


# -- interpreter input checks and recording --------------------------------------------------
def test_input_shape_is_checked():
    graph = trace(Chain(snn.LIF()), (3,))
    with pytest.raises(BadInput, match="expects \\[T, B, 3\\]"):
        run(graph, np.ones((2, 1, 4)))
    with pytest.raises(BadInput):
        run(graph, np.ones((0, 1, 3)))


def test_record_outputs_only_and_margins():
    graph = trace(Chain(nn.Linear(3, 3), snn.LIF(threshold=0.5)), (3,), input_kind="real")
    x = np.random.default_rng(0).normal(size=(4, 2, 3))
    full, small = run(graph, x), run(graph, x, record="outputs")
    assert set(small.values) == set(graph.outputs)
    assert np.array_equal(full.outputs(graph)[0], small.outputs(graph)[0])
    # margin |U - theta| for a LIF: zero exactly where U == theta
    u_minus = full.margins["layers.1"]
    assert u_minus.shape == full.values["layers.1"].shape and (u_minus >= 0).all()


# -- other torch layers the converters accept ------------------------------------------------
@pytest.mark.parametrize("conv", [nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2),
                                  nn.Conv2d(4, 4, 3, padding=2, dilation=2, groups=4, bias=False),
                                  nn.Conv2d(4, 2, 3, padding="same"), nn.Conv2d(4, 2, (1, 3), padding="valid"),
                                  nn.Conv2d(4, 3, 5, stride=(1, 2), padding=(2, 1))])
def test_conv_variants(conv):
    model = Chain(snn.TimeDistributed(conv, nn.BatchNorm2d(conv.out_channels, affine=False)), snn.LIF(threshold=0.3))
    bn = model.layers[0][1]
    with torch.no_grad():
        bn.running_mean.normal_(0, 0.3)
        bn.running_var.uniform_(0.5, 2)
    x = spikes_in(np.random.default_rng(0), (3, 2, 4, 7, 7))
    compare(model, (4, 7, 7), x, input_kind="binary")


def test_batchnorm1d_relu_and_dense_layers():
    torch.manual_seed(0)
    model = Chain(nn.Linear(6, 5), snn.TimeDistributed(nn.BatchNorm1d(5)), nn.ReLU(), nn.Linear(5, 4),
                  snn.IntFire(threshold=0.5, max_spikes=2))
    randomize_bn(model, 3)
    x = np.random.default_rng(0).normal(size=(5, 3, 6))
    graph, (out,) = compare(model, (6,), x)
    assert out.max() > 0
    assert [n.op for n in graph.nodes] == ["input", "linear", "batchnorm", "relu", "linear", "intfire"]
