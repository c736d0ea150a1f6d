"""Checker and interpreter contracts no other test pinned: each test here kills a mutant of tools/mutants.py that
survived the suite.

- checker-tolerance-inclusive: "within 1e-9 relative" includes 1e-9 itself;
- checker-ignores-nonfinite: a NaN or an Inf where the other side holds another value is a mismatch;
- checker-skips-renamed-outputs: a pass that makes another node the graph output is compared on that output,
  even when the old output node survives unchanged;
- interp-delay-ignores-substeps: ``Delay(k)`` on a sub-step stream delays ``k`` physical steps (``k D`` sub-steps).
"""
import numpy as np
import pytest

from spikec.core.checker import REL_TOL, Comparison, compare_graphs
from spikec.core.interpreter import run
from spikec.ir.graph import Graph, Node, TensorType
from spikec.core.rewrite import retype
from spikec.core.verify import verify


# -- checker ------------------------------------------------------------------------------------------
def test_a_relative_difference_of_exactly_rel_tol_is_within_tolerance():
    expected = np.array([[[0.0, 1.0]]])
    got = np.array([[[REL_TOL, 1.0]]])            # |diff| / max|.| = REL_TOL exactly (the scale is 1.0)
    c = Comparison()
    c.add("n", expected, got, spike=False)
    assert c.max_rel_diff == REL_TOL
    assert c.equivalent and c.real_mismatches == 0
    beyond = Comparison()
    beyond.add("n", expected, np.array([[[2 * REL_TOL, 1.0]]]), spike=False)
    assert not beyond.equivalent and beyond.real_mismatches == 1


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_value_against_a_finite_one_is_a_mismatch(bad):
    expected = np.array([[[1.0, 2.0, 3.0]]])
    got = expected.copy()
    got[0, 0, 1] = bad
    for a, b in ((expected, got), (got, expected)):
        c = Comparison()
        c.add("n", a, b, spike=False)
        assert not c.equivalent and c.real_mismatches == 1
        (m,) = c.mismatches
        assert (m.step, m.index) == (0, (0, 1))
    same = Comparison()   # the identical non-finite value matches itself; a NaN where the source has one too
    same.add("n", got, got.copy(), spike=False)
    assert same.equivalent and same.nans_matched == int(np.isnan(bad))
    assert ("nans_matched" in same.summary()) == bool(np.isnan(bad))


def _lif(name, threshold):
    p = {"beta": 0.0, "alpha": 1.0, "bias": 0.0, "threshold": threshold, "v_reset": 0.0}
    return Node(name, "lif", ("x",), TensorType((3,), "binary"), {"reset": "zero"}, p)


def test_a_renamed_output_is_compared_even_when_the_old_node_survives():
    x = Node("x", "input", (), TensorType((3,)))
    before = Graph((x, _lif("a", 1.0)), ("a",))
    after = Graph((x, _lif("a", 1.0), _lif("b", 2.0)), ("b",))   # "a" unchanged, but no longer the output
    inputs = np.full((2, 2, 3), 1.5)                              # fires at threshold 1, not at 2
    c = compare_graphs(before, after, inputs)
    assert not c.equivalent and c.spike_mismatches == 2 * 2 * 3
    assert {m.node for m in c.mismatches} == {"b"}


# -- interpreter: delays on a sub-step time base ----------------------------------------------------
@pytest.mark.parametrize("d, k", [(2, 1), (3, 1), (2, 2)])
def test_delay_on_a_substep_stream_delays_whole_physical_steps(d, k):
    p = {"beta": 0.0, "alpha": 1.0, "threshold": 1.0}
    nodes = (Node("x", "input", (), TensorType((4,))),
             Node("n", "intfire_unrolled", ("x",), TensorType((4,), "binary", None, d),
                  {"max_spikes": d, "rounding": "floor"}, p),
             Node("late", "delay", ("n",), TensorType((4,), "binary", None, d), {"steps": k}))
    graph = verify(retype(Graph(nodes, ("late", "n"))))
    assert graph.node("late").type.substeps == d
    steps = 4
    x = np.random.default_rng(0).integers(0, d + 1, size=(steps, 2, 4)).astype(np.float64)
    t = run(graph, x)
    spikes, late = t.values["n"], t.values["late"]
    assert spikes.shape == late.shape == (steps * d, 2, 4)
    assert spikes.any()
    np.testing.assert_array_equal(late[: k * d], 0)
    np.testing.assert_array_equal(late[k * d:], spikes[: (steps - k) * d])
