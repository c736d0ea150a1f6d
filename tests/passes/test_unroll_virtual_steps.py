"""unroll_virtual_steps (passes.md, "Integer-to-binary virtual-step unrolling"; semantics.md 1.2).

An integer neuron with ceiling D becomes ``intfire_unrolled``: binary spikes on D sub-steps per physical
step whose per-step sum is the integer count, exactly. Checked here: the count identity and the
thermometer code, downstream exactness, the sub-step region (AC synapses, bias after the sum), the
schedule, product classification, where the pass must not apply, ties, and the verifier's time-base rule.
"""
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import spikec.nn as snn
from spikec.ir.errors import IRError
from spikec.frontend import trace
from spikec.core.interpreter import run
from spikec.ir.graph import Graph, Node, TensorType
from spikec.ops import OPS
from spikec.core.passes import run_passes
from spikec.core.report import layers_report, lowering, product_kind
from spikec.core.verify import verify
from spikec.passes import PASSES

UNROLL = PASSES["unroll_virtual_steps"]
SYNAPSES = ("conv2d", "linear", "windowsum", "avgpool2d")
ROUTING = ("maxpool2d", "flatten")


# -- helpers ---------------------------------------------------------------------------------------
def unroll(model, shape, x):
    """Trace, run the pass through the pass manager (verify + checker); return (before, after, record)."""
    before = trace(model, shape, input_kind="real")
    after, records = run_passes(before, [UNROLL], x)
    return before, after, records[0]


def per_step_sum(v, d):
    return v.reshape(v.shape[0] // d, d, *v.shape[1:]).sum(1)


def spike_intfires(graph):
    return [n for n in graph.nodes if n.op == "intfire" and n.attrs.get("output", "spikes") == "spikes"]


def close(a, b, rel=1e-9):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape
    scale = max(np.abs(a).max(initial=0.0), np.abs(b).max(initial=0.0), np.finfo(float).tiny)
    return float(np.abs(a - b).max(initial=0.0)) / scale <= rel


def longest_d_chain(graph):
    """Independent of the pass: the largest sum of D over integer neurons on any input-to-output path."""
    depth = {}
    for n in graph.nodes:
        own = n.attrs["max_spikes"] if n in spike_intfires(graph) else 0
        depth[n.name] = max((depth[i] for i in n.inputs), default=0) + own
    return max(depth[o] for o in graph.outputs)


def fed_by_unrolled(graph, node):
    """The intfire_unrolled node whose sub-step stream reaches ``node`` through routing ops only, if any."""
    for i in node.inputs:
        src = graph.node(i)
        while src.op in ROUTING:
            src = graph.node(src.inputs[0])
        if src.op == "intfire_unrolled":
            return src
    return None


def check_independently(before, after, x):
    """(b) count identity, {0,1} values and thermometer code; (c) downstream spikes and outputs."""
    ta, tb = run(before, x), run(after, x)
    unrolled = [n for n in after.nodes if n.op == "intfire_unrolled"]
    assert {n.name for n in unrolled} == {n.name for n in spike_intfires(before)}
    for n in unrolled:
        d = n.attrs["max_spikes"]
        s = tb.values[n.name]
        assert s.shape[0] == x.shape[0] * d, (n.name, s.shape)
        assert np.isin(s, (0.0, 1.0)).all(), f"{n.name}: sub-step spikes not binary"
        steps = s.reshape(x.shape[0], d, *s.shape[1:])
        assert (np.diff(steps, axis=1) <= 0).all(), f"{n.name}: sub-step spikes are not a thermometer code"
        expected = ta.values[n.name]
        assert np.array_equal(per_step_sum(s, d), expected), \
            f"{n.name}: per-step sum of sub-step spikes != integer spikes of the source IntFire"
        assert expected.min() >= 0 and expected.max() <= d
    for n in before.nodes:  # downstream binary neurons: identical spikes, same time base
        if n.op == "lif":
            assert after.node(n.name).type.substeps == 1
            assert np.array_equal(ta.values[n.name], tb.values[n.name]), f"{n.name}: LIF spikes differ"
    assert len(before.outputs) == len(after.outputs)
    for oa, ob in zip(before.outputs, after.outputs):
        assert after.node(ob).type.substeps == 1, f"output {ob} is not on physical steps"
        assert close(ta.values[oa], tb.values[ob]), f"output {oa} -> {ob} differs"
    return ta, tb


def check_structure(before, after):
    """Rules of the rewrite that hold for any graph (item 2)."""
    assert not spike_intfires(after), "an intfire still emits integer spikes"
    rows = {r["name"]: r for r in layers_report(after)}
    for n in after.nodes:
        if n.op == "input":
            continue
        ins = [after.node(i).type for i in n.inputs]
        if OPS[n.op].stateful and n.op != "delay":
            assert all(t.substeps == 1 for t in ins), f"stateful {n.name} ({n.op}) reads a sub-step tensor"
        if n.op in SYNAPSES:
            src = fed_by_unrolled(after, n)
            if src is not None:
                d = src.attrs["max_spikes"]
                assert rows[n.name]["operand_kind"] == "binary" and ins[0].substeps == d, (n.name, ins)
                assert rows[n.name]["substeps"] == d
                if n.op != "avgpool2d":
                    assert rows[n.name]["synaptic_kind"] == "AC", rows[n.name]
                assert "bias" not in n.params, f"{n.name} adds its bias on every sub-step"
            if n.type.substeps > 1 and n.op != "avgpool2d":
                # a synapse on the sub-step stream must be accumulate-only; its (real) output is summed next
                assert rows[n.name]["operand_kind"] == "binary", \
                    f"{n.name} runs a {rows[n.name]['synaptic_kind']} on {n.type.substeps} sub-steps " \
                    f"with a {rows[n.name]['operand_kind']} operand (unrolling must stop at the first synapse)"
    for n in before.nodes:  # a biased synapse on the sub-step stream: <name>.substeps (no bias) + substep_sum
        inner = after.node(f"{n.name}.substeps") if f"{n.name}.substeps" in after else None
        if inner is not None:
            assert n.op in SYNAPSES and "bias" in n.params
            assert inner.op == n.op and "bias" not in inner.params
            assert np.array_equal(inner.params["weight"], n.params["weight"])
            total = after.node(n.name)
            assert total.op == "substep_sum" and total.inputs == (inner.name,)
            assert np.array_equal(total.params["bias"], n.params["bias"])
            assert total.type == n.type
    sched = after.meta["schedule"]
    assert sched["latency_substeps_per_step"] == longest_d_chain(before)
    assert {u["neuron"]: u["substeps"] for u in sched["unrolled"]} == \
        {n.name: n.attrs["max_spikes"] for n in spike_intfires(before)}
    for n in after.nodes:
        if n.op == "intfire_unrolled":
            assert lowering(n) == f"binary spikes over {n.attrs['max_spikes']} virtual sub-steps"


# -- 1. property: random integer neurons feeding random synapses -------------------------------------
def int_neuron(rng, d, channels, per_channel, beta, rounding):
    theta = rng.uniform(0.3, 1.5, channels) if per_channel else float(rng.uniform(0.3, 1.5))
    return snn.IntFire(threshold=theta, max_spikes=d, beta=beta, rounding=rounding), np.max(theta)


@st.composite
def models(draw):
    seed = draw(st.integers(0, 2 ** 31 - 1))
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    d = draw(st.integers(1, 6))
    beta = draw(st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.0, 1.0)))
    rounding = draw(st.sampled_from(["round", "floor"]))
    per_channel = draw(st.booleans())
    bias = draw(st.booleans())
    arch = draw(st.sampled_from(["linear", "conv", "maxpool_conv", "maxpool_flatten_linear"]))
    steps = draw(st.integers(1, 8))
    c, hw, n = 2, 4, 5
    if arch == "linear":
        shape = (n,)
        neuron, theta = int_neuron(rng, d, n, per_channel, beta, rounding)
        layers, width = [neuron, nn.Linear(n, 3, bias=bias)], 3
    else:
        shape = (c, hw, hw)
        neuron, theta = int_neuron(rng, d, c, per_channel, beta, rounding)
        if arch == "conv":
            td = snn.TimeDistributed(nn.Conv2d(c, 3, 3, padding=1, bias=bias), nn.Flatten())
            width = 3 * hw * hw
        elif arch == "maxpool_conv":
            td = snn.TimeDistributed(nn.MaxPool2d(2), nn.Conv2d(c, 3, 3, padding=1, bias=bias), nn.Flatten())
            width = 3 * (hw // 2) ** 2
        else:
            td = snn.TimeDistributed(nn.MaxPool2d(2), nn.Flatten())
            td = nn.Sequential(td, nn.Linear(c * (hw // 2) ** 2, 3, bias=bias))
            width = 3
        layers = [neuron, td]
    downstream = draw(st.sampled_from(["none", "lif", "intfire"]))
    if downstream == "lif":
        layers += [snn.LIF(beta=0.9, threshold=0.3), nn.Linear(width, 2, bias=draw(st.booleans()))]
    elif downstream == "intfire":
        d2 = draw(st.integers(1, 6))
        layers += [snn.IntFire(threshold=0.4, max_spikes=d2, beta=float(rng.uniform(0, 1)),
                               rounding=draw(st.sampled_from(["round", "floor"]))),
                   nn.Linear(width, 2, bias=draw(st.booleans()))]
    # inputs spread so that counts cover 0 .. D (and saturate above D)
    x = rng.uniform(-theta, (d + 1.5) * theta, (steps, 2, *shape))
    return nn.Sequential(*layers), shape, x


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(models())
def test_unrolled_graph_reproduces_integer_spikes_exactly(case):
    model, shape, x = case
    before, after, record = unroll(model, shape, x)
    # (a) the pass manager's own check
    assert record.spike_mismatches == 0 and record.comparison["equivalent"], record.comparison
    # (b), (c) independently of the checker
    check_independently(before, after, x)
    check_structure(before, after)


def test_counts_cover_zero_and_ceiling():
    """The input range of the property test does produce 0 and D (and values in between)."""
    rng = np.random.default_rng(0)
    d, theta = 4, 0.8
    x = rng.uniform(-theta, (d + 1.5) * theta, (6, 2, 5))
    before, after, _ = unroll(nn.Sequential(snn.IntFire(theta, d, beta=0.5), nn.Linear(5, 3)), (5,), x)
    counts = run(before, x).values["0"]
    assert set(np.unique(counts)) == set(range(d + 1))
    check_independently(before, after, x)


@pytest.mark.parametrize("bias", [False, True])
def test_ceiling_one_neuron_is_unrolled(bias):
    """D = 1 (max_spikes=1) is a valid IntFire; its sub-step stream has one sub-step per step."""
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 3, (4, 2, 4))
    model = nn.Sequential(snn.IntFire(1.0, 1), nn.Linear(4, 3, bias=bias), snn.LIF(threshold=0.2))
    before, after, record = unroll(model, (4,), x)
    assert record.spike_mismatches == 0
    check_independently(before, after, x)
    check_structure(before, after)


# -- 2. structure ---------------------------------------------------------------------------------
class Branchy(nn.Module):
    """IntFire(D=3) -> maxpool -> {biased conv, unbiased conv} -> add -> LIF -> flatten -> biased linear
    -> IntFire(D=2) -> unbiased linear."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.n1 = snn.IntFire(threshold=torch.tensor([0.5, 0.9]), max_spikes=3, beta=0.75)
        self.pool = snn.TimeDistributed(nn.MaxPool2d(2))
        self.conv_b = snn.TimeDistributed(nn.Conv2d(2, 3, 3, padding=1, bias=True))
        self.conv_nb = snn.TimeDistributed(nn.Conv2d(2, 3, 3, padding=1, bias=False))
        self.lif = snn.LIF(beta=0.9, threshold=0.2)
        self.flat = snn.TimeDistributed(nn.Flatten())
        self.fc1 = nn.Linear(12, 5, bias=True)
        self.n2 = snn.IntFire(threshold=0.3, max_spikes=2, rounding="floor")
        self.fc2 = nn.Linear(5, 2, bias=False)

    def forward(self, x):
        p = self.pool(self.n1(x))
        y = self.lif(self.conv_b(p) + self.conv_nb(p))
        return self.fc2(self.n2(self.fc1(self.flat(y))))


def test_structure_of_a_branching_model():
    rng = np.random.default_rng(2)
    x = rng.uniform(-0.5, 2.5, (5, 2, 2, 4, 4))
    before, after, record = unroll(Branchy(), (2, 4, 4), x)
    assert record.spike_mismatches == 0
    check_independently(before, after, x)
    check_structure(before, after)
    ops = {n.name: n for n in after.nodes}
    # the routing op keeps the binary thermometer code on 3 sub-steps
    pool = ops["pool.0"] if "pool.0" in ops else next(n for n in after.nodes if n.op == "maxpool2d")
    assert pool.type.kind == "binary" and pool.type.substeps == 3
    # biased conv: <name>.substeps (AC, no bias) + substep_sum <name> with the bias
    conv_b = next(n for n in before.nodes if n.op == "conv2d" and "bias" in n.params)
    inner, total = ops[f"{conv_b.name}.substeps"], ops[conv_b.name]
    assert inner.inputs == (pool.name,) and "bias" not in inner.params and inner.type.substeps == 3
    assert total.op == "substep_sum" and total.type.substeps == 1 and "bias" in total.params
    # unbiased conv runs on sub-steps; its reader (the add) gets the summed value
    conv_nb = next(n for n in before.nodes if n.op == "conv2d" and "bias" not in n.params)
    assert ops[conv_nb.name].type.substeps == 3
    add = next(n for n in after.nodes if n.op == "add")
    assert all(ops[i].op == "substep_sum" and ops[i].type.substeps == 1 for i in add.inputs)
    rows = {r["name"]: r for r in layers_report(after)}
    for name in (inner.name, conv_nb.name):
        assert rows[name]["operand_kind"] == "binary" and rows[name]["synaptic_kind"] == "AC"
        assert rows[name]["substeps"] == 3
    # fc1 reads LIF spikes: untouched; the second neuron's synapse reads 2 sub-steps
    fc2 = next(n for n in after.nodes if n.op == "linear" and n.type.substeps == 2)
    assert rows[fc2.name]["synaptic_kind"] == "AC" and rows[fc2.name]["operand_kind"] == "binary"
    assert after.meta["schedule"]["latency_substeps_per_step"] == 5


def test_schedule_of_a_two_neuron_chain_adds_up():
    """IntFire(D=3) -> Linear -> IntFire(D=2) -> Linear: 3 + 2 = 5 sub-steps of latency per step."""
    torch.manual_seed(0)
    model = nn.Sequential(snn.IntFire(1.0, 3), nn.Linear(4, 4), snn.IntFire(0.5, 2), nn.Linear(4, 2))
    x = np.random.default_rng(3).uniform(-1, 4, (3, 2, 4))
    before, after, record = unroll(model, (4,), x)
    assert record.spike_mismatches == 0
    sched = after.meta["schedule"]
    assert sched["latency_substeps_per_step"] == 5
    start = sched["start_substep"]
    assert start["0"] == 0 and start["1"] == 3 and start["2"] == 3 and start["3"] == 5
    assert [(u["neuron"], u["substeps"]) for u in sched["unrolled"]] == [("0", 3), ("2", 2)]
    assert [after.node(n).op for n in ("0", "1.substeps", "1", "2", "3.substeps", "3")] == \
        ["intfire_unrolled", "linear", "substep_sum", "intfire_unrolled", "linear", "substep_sum"]
    assert after.outputs == ("3",)
    check_independently(before, after, x)
    check_structure(before, after)


def test_integer_neuron_feeding_an_integer_neuron_directly():
    """IntFire -> IntFire: the second neuron must read the first one's summed count (physical steps).

    The pass iterates over the neurons of the *original* graph and unrolls each stale Node, so the
    second neuron keeps its original input (the first neuron's now sub-step stream) and retyping fails."""
    torch.manual_seed(0)
    model = nn.Sequential(snn.IntFire(1.0, 3), snn.IntFire(1.0, 2), nn.Linear(4, 2))
    x = np.random.default_rng(4).uniform(-1, 4, (3, 2, 4))
    before, after, record = unroll(model, (4,), x)
    assert record.spike_mismatches == 0
    n2 = after.node("1")
    assert n2.op == "intfire_unrolled" and after.node(n2.inputs[0]).op == "substep_sum"
    check_independently(before, after, x)
    check_structure(before, after)


def test_synapse_after_a_synapse_runs_on_physical_steps():
    """Unrolling stops at the first synapse: an (unbiased) synapse's reader, even a biased synapse,
    reads its sum and runs once per physical step, never a MAC on D sub-steps."""
    torch.manual_seed(0)
    model = nn.Sequential(snn.IntFire(1.0, 3), nn.Linear(4, 4, bias=False), nn.Linear(4, 2, bias=True))
    x = np.random.default_rng(5).uniform(-1, 4, (3, 2, 4))
    before, after, record = unroll(model, (4,), x)
    assert record.spike_mismatches == 0
    second = after.node("2")
    assert second.op == "linear" and second.type.substeps == 1, [
        (n.name, n.op, n.inputs, n.type.describe()) for n in after.nodes]
    check_structure(before, after)


def test_biased_linear_on_a_multi_dim_tensor():
    """nn.Linear acts on the last dim: its bias has N_out entries indexed by the *last* dim, which the
    substep_sum bias (per-channel, shape[0]) cannot express."""
    torch.manual_seed(0)
    rng = np.random.default_rng(6)
    for shape, fc in (((4, 5), nn.Linear(5, 3)), ((4, 4), nn.Linear(4, 4))):
        x = rng.uniform(-1, 4, (3, 2, *shape))
        before, after, record = unroll(nn.Sequential(snn.IntFire(1.0, 3), fc), shape, x)
        assert record.spike_mismatches == 0 and record.comparison["equivalent"]
        check_independently(before, after, x)


# -- 3. products --------------------------------------------------------------------------------------
class Product(nn.Module):
    def __init__(self, a, b):
        super().__init__()
        self.a, self.b = a, b

    def forward(self, x):
        return self.a(x) * self.b(x)


def test_product_of_integer_spikes_reads_counts_and_is_not_spike_driven():
    x = np.random.default_rng(7).uniform(-1, 4, (4, 2, 6))
    model = Product(snn.IntFire(1.0, 3), snn.IntFire(0.7, 2, rounding="floor"))
    before, after, record = unroll(model, (6,), x)
    assert record.spike_mismatches == 0
    (mul,) = [n for n in after.nodes if n.op == "mul"]
    srcs = [after.node(i) for i in mul.inputs]
    assert [s.op for s in srcs] == ["substep_sum", "substep_sum"]
    assert [after.node(s.inputs[0]).op for s in srcs] == ["intfire_unrolled", "intfire_unrolled"]
    assert [(s.type.kind, s.type.ceiling, s.type.substeps) for s in srcs] == [("integer", 3, 1), ("integer", 2, 1)]
    kind = product_kind(after, mul)
    assert "not spike-driven" in kind and "3 x 2" in kind, kind
    row = next(r for r in layers_report(after) if r["name"] == mul.name)
    assert "not spike-driven" in row["product"]
    ta, tb = check_independently(before, after, x)
    assert np.array_equal(ta.values[before.outputs[0]], tb.values[after.outputs[0]])  # integer products: exact


def test_product_of_binary_spikes_is_a_coincidence():
    x = np.random.default_rng(8).uniform(-1, 3, (4, 2, 6))
    model = Product(snn.LIF(threshold=0.5), snn.LIF(beta=0.5, threshold=1.0))
    before, after, record = unroll(model, (6,), x)
    (mul,) = [n for n in after.nodes if n.op == "mul"]
    kind = product_kind(after, mul)
    assert kind.startswith("coincidence (AND)") and kind.endswith("spike-driven") and "not" not in kind


# -- 4. where the pass must not apply --------------------------------------------------------------
def snapshot(graph):
    return [(n.name, n.op, n.inputs, n.type, dict(n.attrs)) for n in graph.nodes], graph.outputs


def test_graph_without_integer_neurons_is_unchanged():
    torch.manual_seed(0)
    model = nn.Sequential(snn.TimeDistributed(nn.Conv2d(2, 3, 3, padding=1), nn.MaxPool2d(2)), snn.LIF(),
                          snn.TimeDistributed(nn.Flatten()), nn.Linear(12, 4), snn.LIF(beta=0.5))
    before = trace(model, (2, 4, 4), input_kind="real")
    result = UNROLL.run(before)
    assert snapshot(result.graph) == snapshot(before)
    assert result.changed == () and "schedule" not in result.graph.meta
    x = np.random.default_rng(9).uniform(-1, 2, (3, 2, 2, 4, 4))
    after, records = run_passes(before, [UNROLL], x)
    assert snapshot(after) == snapshot(before) and records[0].nodes_changed == []


class MembraneOnly(nn.Module):
    def __init__(self):
        super().__init__()
        self.n = snn.IntFire(0.5, 3, beta=0.5, return_membrane=True)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        s, u = self.n(x)
        return self.fc(u), s


def test_membrane_read_out_is_not_unrolled():
    torch.manual_seed(0)
    x = np.random.default_rng(10).uniform(-1, 3, (4, 2, 4))
    before, after, record = unroll(MembraneOnly(), (4,), x)
    assert record.spike_mismatches == 0
    (mem,) = [n for n in before.nodes if n.attrs.get("output") == "membrane"]
    kept = after.node(mem.name)
    assert kept.op == "intfire" and kept.attrs["output"] == "membrane"
    assert kept.type == mem.type and kept.type.kind == "real" and kept.type.substeps == 1
    assert after.node("fc").inputs == (mem.name,) and after.node("fc").type.substeps == 1
    assert after.node("n").op == "intfire_unrolled"   # the spike output still is
    ta, tb = check_independently(before, after, x)
    assert np.array_equal(ta.values[mem.name], tb.values[mem.name])


# -- 5. ties -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rounding", ["round", "floor"])
@pytest.mark.parametrize("beta", [1.0, 0.5, 0.0])
def test_exact_ties_dyadic(rounding, beta):
    """U/theta = k + 1/2 (round: half up -> k+1) and U/theta = k (floor -> k), all values exactly representable."""
    d = 4
    theta = np.array([0.25, 0.5, 1.0, 2.0])
    off = 0.5 if rounding == "round" else 0.0
    k = np.arange(-1, d + 2)                                   # below 0 .. above D
    u = (k[:, None] + off) * theta[None, :]                    # [K, C]
    x = np.broadcast_to(u, (3, *u.shape)).copy()               # T=3, B=K, C=4
    model = nn.Sequential(snn.IntFire(torch.tensor(theta), d, beta=beta, rounding=rounding), nn.Linear(4, 2))
    before, after, record = unroll(model, (4,), x)
    assert record.spike_mismatches == 0
    ta, tb = check_independently(before, after, x)
    first = ta.values["0"][0]
    expected = np.clip(k[:, None] + (1 if rounding == "round" else 0), 0, d) * np.ones_like(theta)
    assert np.array_equal(first, expected)
    assert np.array_equal(per_step_sum(tb.values["0"], d)[0], expected)
    with torch.no_grad():  # the source module agrees
        src = model[0].double()(torch.tensor(x)).numpy()
    assert np.array_equal(src, ta.values["0"])


@pytest.mark.parametrize("rounding, theta, u", [
    ("round", 0.1, [0.15, 0.25, 0.05, 0.35]),
    ("round", 0.2, [0.3, 0.5, 0.1, 0.7]),
    ("floor", 0.1, [0.6, 0.3, 0.5, 0.2]),
    ("floor", 0.3, [1.2, 1.5, 1.8, 0.9]),
])
def test_decimal_ties_match_the_source_neuron(rounding, theta, u):
    """Decimal inputs and thresholds (0.25 / 0.1, 1.2 / 0.3): the source IntFire computes
    floor(U/theta + 1/2) (or floor(U/theta)) in float64; the unrolled neuron must emit that count.

    The interpreter's intfire_unrolled instead subtracts theta sub-step by sub-step from U + theta/2,
    which rounds differently at these ties (e.g. U=0.25, theta=0.1: IntFire 3, unrolled 2)."""
    x = np.array(u, dtype=np.float64).reshape(1, 1, 4)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)   # a float64 model: the threshold buffer holds float64 0.1
    try:
        model = nn.Sequential(snn.IntFire(theta, 6, beta=1.0, rounding=rounding), nn.Linear(4, 2))
    finally:
        torch.set_default_dtype(default)
    assert model[0].threshold.dtype == torch.float64
    with torch.no_grad():
        src = model[0].double()(torch.tensor(x)).numpy()
    before = trace(model, (4,), input_kind="real")
    after = UNROLL.run(before).graph
    got = per_step_sum(run(after, x).values["0"], 6)
    assert np.array_equal(run(before, x).values["0"], src)
    assert np.array_equal(got, src), f"source IntFire {src.ravel()}, unrolled per-step sums {got.ravel()}"


# -- 6. the verifier's time-base rule ----------------------------------------------------------------
def test_verifier_refuses_stateful_op_on_substeps():
    d = 3
    inp = Node("input", "input", (), TensorType((4,)))
    intp = {"beta": 1.0, "alpha": 1.0, "threshold": 1.0}
    neuron = Node("n", "intfire_unrolled", ("input",), TensorType((4,), "binary", None, d),
                  {"max_spikes": d, "rounding": "round"}, intp)
    lifp = {"beta": 0.9, "alpha": 1.0, "bias": 0.0, "threshold": 1.0, "v_reset": 0.0}
    good = Graph((inp, neuron, Node("s", "substep_sum", ("n",), TensorType((4,), "integer", d)),
                  Node("lif", "lif", ("s",), TensorType((4,), "binary"), {"reset": "subtract"}, lifp)), ("lif",))
    verify(good)
    for declared in (TensorType((4,), "binary"), TensorType((4,), "binary", None, d)):
        bad = Graph((inp, neuron, Node("lif", "lif", ("n",), declared, {"reset": "subtract"}, lifp)), ("lif",))
        with pytest.raises(IRError, match="sub-steps"):
            verify(bad)
    # the unrolled neuron itself integrates physical steps only
    twice = Graph((inp, neuron, Node("m", "intfire_unrolled", ("n",), TensorType((4,), "binary", None, 2),
                                     {"max_spikes": 2, "rounding": "round"}, intp)), ("m",))
    with pytest.raises(IRError):
        verify(twice)
    # a stateless op keeps the sub-step time base; operands on different time bases are refused
    mixed = Graph((inp, neuron, Node("a", "add", ("n", "input"), TensorType((4,)), {}, {})), ("a",))
    with pytest.raises(IRError, match="time bases"):
        verify(mixed)
