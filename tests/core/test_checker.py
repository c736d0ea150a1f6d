"""Equivalence checker sensitivity (semantics.md section 4).

Spike tensors must be identical at every step; real tensors agree within 1e-9 relative;
a mismatch names the node, the step, the index and, for neurons, the firing margin.
"""
from pathlib import Path

import numpy as np
import pytest

from spikec.core import checker
from spikec.core.checker import REL_TOL, Comparison, compare_graphs, compare_with_torch
from spikec.frontend import trace
from spikec.core.interpreter import run
from spikec.app.loader import build_model, load_weights

DIGITS = Path(__file__).resolve().parents[2] / "examples" / "digits"
NEURONS = {"lif1", "lif2"}
DOWNSTREAM_OF_CONV1 = {"conv1.0", "conv1.1", "lif1", "conv2.0", "conv2.1", "conv2.2", "lif2", "head.0", "head.1"}


@pytest.fixture(scope="module")
def model():
    m = build_model(f"{DIGITS / 'model.py'}:small")
    load_weights(m, str(DIGITS / "checkpoint.pt"))
    return m.eval()


@pytest.fixture(scope="module")
def graph(model):
    return trace(model, (1, 8, 8))


@pytest.fixture(scope="module")
def inputs():
    with np.load(DIGITS / "inputs.npz") as z:
        return z["input"][:, :4].astype(np.float64)  # [T=8, B=4, 1, 8, 8] real digit spikes


def perturb(graph, name, param, change):
    """A copy of ``graph`` whose ``name.param`` is ``change(old array)``; every other node is shared."""
    node = graph.node(name)
    new = node.with_(params={**node.params, param: change(np.array(node.params[param]))})
    return graph.with_nodes([new if n.name == name else n for n in graph.nodes])


def bump(index, delta):
    def change(a):
        a[index] += delta
        return a
    return change


def test_graph_against_itself_has_no_mismatches(graph, inputs):
    c = compare_graphs(graph, graph, inputs)
    assert c.equivalent
    assert c.spike_mismatches == c.real_mismatches == 0 and c.mismatches == []
    assert c.max_rel_diff == 0.0
    assert c.spikes_compared > 0 and c.values_compared > 0
    assert set(c.nodes_compared) == {n.name for n in graph.nodes if n.op != "input"}


def test_unperturbed_graph_matches_torch(model, graph, inputs):
    c = compare_with_torch(model, graph, inputs)
    assert c.equivalent, c.describe()
    assert c.spikes_compared > 0 and c.values_compared > 0
    assert c.max_rel_diff <= REL_TOL
    assert {"lif1", "lif2", "head.1"} <= set(c.nodes_compared)


def test_one_perturbed_weight_is_found(graph, inputs, monkeypatch):
    monkeypatch.setattr(checker, "MAX_REPORTED", 10 ** 9)  # keep every mismatch, to inspect all of them
    channel = 2
    bad = perturb(graph, "conv1.0", "weight", bump((channel, 0, 1, 1), 0.5))
    assert np.array_equal(graph.node("conv1.0").params["weight"][channel, 0, 1, 1] + 0.5,
                          bad.node("conv1.0").params["weight"][channel, 0, 1, 1])
    c = compare_graphs(graph, bad, inputs)
    assert not c.equivalent
    assert c.real_mismatches > 0 and c.spike_mismatches > 0  # the conv itself, and the spikes downstream
    assert len(c.mismatches) == c.real_mismatches + c.spike_mismatches
    assert c.mismatches[0].node == "conv1.0"
    assert {m.node for m in c.mismatches} <= DOWNSTREAM_OF_CONV1
    assert {"conv1.0", "lif1"} <= {m.node for m in c.mismatches}

    before, after = run(graph, inputs), run(bad, inputs)
    steps = inputs.shape[0]
    for m in c.mismatches:
        assert 0 <= m.step < steps
        assert len(m.index) == len(graph.node(m.node).type.shape) + 1  # (b, *per-step index)
        assert m.expected == before.values[m.node][(m.step, *m.index)]
        assert m.got == after.values[m.node][(m.step, *m.index)]
        assert m.expected != m.got
        if m.node in NEURONS:
            assert m.margin is not None and m.margin >= 0
            assert {m.expected, m.got} == {0.0, 1.0}
            assert m.margin == after.margins[m.node][(m.step, *m.index)]
        else:
            assert m.margin is None
    # Only the perturbed output channel of the conv moves.
    assert {m.index[1] for m in c.mismatches if m.node == "conv1.0"} == {channel}

    text = c.describe()
    assert "'conv1.0'" in text and "step" in text and "index" in text
    doc = c.summary()
    assert doc["equivalent"] is False and doc["first_mismatches"][0]["node"] == "conv1.0"


def test_report_is_capped_but_counts_are_not(graph, inputs):
    bad = perturb(graph, "conv1.0", "weight", bump((2, 0, 1, 1), 0.5))
    c = compare_graphs(graph, bad, inputs)
    assert len(c.mismatches) == checker.MAX_REPORTED
    assert c.real_mismatches + c.spike_mismatches > checker.MAX_REPORTED


def test_neuron_mismatch_reports_the_margin(graph, inputs):
    """A threshold nudged by delta flips spikes exactly where U lay within delta of it: margin < delta."""
    delta = 0.05
    bad = perturb(graph, "lif1", "threshold", lambda a: a + delta)
    c = compare_graphs(graph, bad, inputs)
    assert not c.equivalent and c.spike_mismatches > 0
    first = c.mismatches[0]
    assert first.node == "lif1"
    assert (first.expected, first.got) == (1.0, 0.0)  # fired before, not under the higher threshold
    assert first.margin is not None and 0 <= first.margin < delta
    assert all(m.margin is not None for m in c.mismatches if m.node in NEURONS)
    assert "margin" in c.describe()


def test_perturbed_graph_differs_from_torch(model, graph, inputs):
    bad = perturb(graph, "conv2.0", "weight", bump((5, 3, 0, 2), -0.75))
    c = compare_with_torch(model, bad, inputs)
    assert not c.equivalent
    assert {m.node for m in c.mismatches} <= {"conv2.0", "conv2.1", "conv2.2", "lif2", "head.0", "head.1"}


@pytest.mark.parametrize("rel, equivalent", [(1e-12, True), (1e-6, False)])
def test_real_valued_tolerance(graph, inputs, rel, equivalent):
    bad = perturb(graph, "head.1", "weight", lambda w: w * (1 + rel))
    c = compare_graphs(graph, bad, inputs)
    assert c.spike_mismatches == 0
    assert c.equivalent is equivalent, c.describe()
    assert 0 < c.max_rel_diff
    if equivalent:
        assert c.max_rel_diff <= REL_TOL and c.real_mismatches == 0
    else:
        assert c.max_rel_diff > REL_TOL and c.real_mismatches > 0
        assert {m.node for m in c.mismatches} == {"head.1"}


# -- the last time step, and T = 1 ------------------------------------------------------------
# A checker that skipped the last step (``expected[:-1]``) would compare nothing at T = 1, the static
# models' case, and would miss a divergence that only shows at the end of a run. These pin both.
def lif_graph(alpha: float):
    """``x`` (3 real channels) -> LIF (threshold 1, no leak) read as spikes and as membrane."""
    from spikec.ir.graph import Graph, Node, TensorType
    p = {"beta": 0.0, "alpha": alpha, "bias": 0.0, "threshold": 1.0, "v_reset": 0.0}
    x = Node("x", "input", (), TensorType((3,)))
    lif = Node("lif", "lif", ("x",), TensorType((3,), "binary"), {"reset": "zero"}, p)
    mem = Node("lif.membrane", "lif", ("x",), TensorType((3,)), {"reset": "zero", "output": "membrane"}, p)
    return Graph((x, lif, mem), ("lif", "lif.membrane"))


@pytest.mark.parametrize("steps", [1, 2, 5])
def test_a_difference_at_the_last_step_only_is_found(steps):
    batch = 2
    x = np.zeros((steps, batch, 3))
    x[-1] = 0.75                              # silent until the last step; there U = 0.75 vs 1.5 (threshold 1)
    c = compare_graphs(lif_graph(1.0), lif_graph(2.0), x)
    assert not c.equivalent
    assert c.spikes_compared == c.values_compared == steps * batch * 3
    assert c.spike_mismatches == c.real_mismatches == batch * 3
    assert {m.step for m in c.mismatches} == {steps - 1}
    assert {(m.node, m.expected, m.got) for m in c.mismatches} == {("lif", 0.0, 1.0), ("lif.membrane", 0.75, 1.5)}
    assert all(m.margin is not None for m in c.mismatches if m.node == "lif")
    same = compare_graphs(lif_graph(1.0), lif_graph(1.0), x)
    assert same.equivalent and same.spikes_compared == steps * batch * 3


@pytest.mark.parametrize("spike", [True, False], ids=["spikes", "real"])
def test_single_step_tensors_are_compared(spike):
    """``Comparison.add`` on ``[T=1, B, ...]``: the one step there is counted and checked."""
    expected = np.zeros((1, 2, 4))
    got = expected.copy()
    got[0, 1, 3] = 1.0
    c = checker.Comparison()
    c.add("n", expected, got, spike)
    assert not c.equivalent
    assert (c.spike_mismatches, c.real_mismatches) == ((1, 0) if spike else (0, 1))
    assert (c.spikes_compared if spike else c.values_compared) == 8
    (m,) = c.mismatches
    assert (m.node, m.step, m.index, m.expected, m.got) == ("n", 0, (1, 3), 0.0, 1.0)


def test_static_run_of_the_digits_model_is_compared(graph, inputs):
    """T = 1 (a static, SDNA-like run): a nudged threshold still shows, at step 0."""
    one = inputs[-1:]
    bad = perturb(graph, "lif1", "threshold", lambda a: a + 0.05)
    c = compare_graphs(graph, bad, one)
    assert not c.equivalent and c.spike_mismatches > 0
    spiking = [n for n in graph.nodes if n.op != "input" and n.type.is_spike]
    assert c.spikes_compared == sum(n.type.size for n in spiking) * one.shape[1]
    assert {m.step for m in c.mismatches} == {0}


def _old_real_rule(expected, got):
    """Comparison.add's finite real-value rule as it was: every quotient |e - g| / scale made, then counted."""
    scale = max(np.abs(expected).max(), np.abs(got).max(), np.finfo(float).tiny)
    diff = np.abs(expected - got) / scale
    return float(diff.max(initial=0.0)), int(np.count_nonzero(diff > REL_TOL))


@pytest.mark.parametrize("seed", range(6))
def test_the_real_rule_without_quotients_gives_the_same_max_and_count(seed):
    """max |d| / scale is the largest quotient (division by scale > 0 is monotone), and no quotient exceeds
    REL_TOL when it does not: the same max_rel_diff and mismatch count, at and around the tolerance."""
    rng = np.random.default_rng(seed)
    expected = rng.normal(size=(4, 3, 50)) * 10.0 ** rng.integers(-3, 4)
    scale = np.abs(expected).max()
    cases = [expected.copy(), expected * (1 + 1e-12), expected + REL_TOL * scale,
             expected + np.nextafter(REL_TOL, 1) * scale, expected + rng.normal(size=expected.shape) * 1e-8 * scale]
    for got in cases:
        c = Comparison()
        c.add("n", expected, got, spike=False)
        assert (c.max_rel_diff, c.real_mismatches) == _old_real_rule(expected, got)
