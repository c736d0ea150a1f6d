"""Streamed checking (spikec.core.stream) and restricted recording give exactly what the whole-trace path gave:
the same counts, max_rel_diff and listed mismatches in the same order, the same recorded values and margins, and
run_passes' records (timings aside) are those of whole-trace runs compared with compare_traces."""
import json
from pathlib import Path

import numpy as np
import pytest

from spikec.app.loader import build_model, load_weights
from spikec.core.checker import compare_traces
from spikec.core.interpreter import run
from spikec.core.passes import Pass, PassResult, first_record, run_passes
from spikec.core.stream import before_names, compare_streamed
from spikec.frontend import trace
from spikec.passes import select

DIGITS = Path(__file__).resolve().parents[2] / "examples" / "digits"
RIPE = Path(__file__).resolve().parents[2] / "examples" / "ripe"


@pytest.fixture(scope="module")
def digits():
    m = build_model(f"{DIGITS / 'model.py'}:small")
    load_weights(m, str(DIGITS / "checkpoint.pt"))
    with np.load(DIGITS / "inputs.npz") as z:
        x = z["input"][:, :4].astype(np.float64)
    return trace(m, (1, 8, 8)), x


@pytest.fixture(scope="module")
def ripe():
    m = build_model(f"{RIPE / 'model.py'}:small")
    load_weights(m, str(RIPE / "checkpoint.pt"))
    with np.load(RIPE / "inputs.npz") as z:
        x = z["input"][:, :2].astype(np.float64)
    return trace(m, tuple(x.shape[2:])), x


def perturbed(graph, scale):
    """Every conv/linear weight scaled: many nodes differ, far more mismatches than are listed."""
    return graph.with_nodes([n.with_(params={**n.params, "weight": n.params["weight"] * scale})
                             if n.op in ("conv2d", "linear") else n for n in graph.nodes])


def same(a, b):
    """Equal summaries (NaNs in listed mismatches compared as text) and the same nodes in the same order."""
    return json.dumps(a.summary()) == json.dumps(b.summary()) and a.nodes_compared == b.nodes_compared


@pytest.mark.parametrize("scale", [1.0, 1.001, 1.3])
def test_streamed_comparison_is_the_whole_trace_comparison(digits, scale):
    graph, x = digits
    after = perturbed(graph, scale)
    whole = compare_traces(graph, run(graph, x), after, run(after, x))
    ta = run(graph, x, record=before_names(graph, after))
    streamed, tb = compare_streamed(graph, ta, after, x, record="all", consume=True)
    assert same(streamed, whole)
    assert scale == 1.0 or len(whole.mismatches) == 10  # the cap is exercised
    full = run(after, x)
    assert full.values.keys() == tb.values.keys() and full.margins.keys() == tb.margins.keys()
    assert all(np.array_equal(full.values[k], tb.values[k]) for k in full.values)
    assert not ta.values  # consumed


def test_restricted_record_keeps_those_nodes_bit_for_bit(ripe):
    graph, x = ripe
    names = {n.name for n in graph.nodes[::3]}
    full, part = run(graph, x), run(graph, x, record=names)
    assert set(part.values) == names | set(graph.outputs)
    assert set(part.margins) == {k for k in full.margins if k in part.values}
    for k in part.values:
        assert np.array_equal(part.values[k], full.values[k])
    for k in part.margins:
        assert np.array_equal(part.margins[k], full.margins[k])


def whole_trace_records(graph, passes, x):
    """The pass manager's comparisons made from whole runs with compare_traces: each pass against the graph before
    it when at most one changes the graph, else the graph after the last against the graph before the first."""
    first, trace0 = graph, run(graph, x)
    out, trace_, changed = [], trace0, 0
    for p in passes:
        result = p.run(graph)
        changed += result.graph is not graph
        after = run(result.graph, x)
        out.append(compare_traces(graph, trace_, result.graph, after).summary())
        graph, trace_ = result.graph, after
    if changed >= 2:
        out = [compare_traces(first, trace0, graph, trace_).summary()] * len(passes)
    return out, trace_, changed


@pytest.mark.parametrize("example", ["digits", "ripe"])
def test_run_passes_records_match_whole_trace_checks(example, request):
    graph, x = request.getfixturevalue(example)
    passes, _ = select("default")
    expected, final, changed = whole_trace_records(graph, passes, x)
    assert changed == {"digits": 1, "ripe": 2}[example]   # both ways of checking are exercised
    ahead: dict = {}
    need = first_record(graph, passes, False, ahead)
    keep: list = []
    deployed, records = run_passes(graph, passes, x, trace=run(graph, x, record=need), keep=keep, ahead=ahead,
                                   consume=True)
    assert [{k: v for k, v in r.comparison.items() if k != "checked"} for r in records] == expected
    assert {r.checked for r in records} == {"composed" if changed >= 2 else "alone"}
    assert keep[0].values.keys() == final.values.keys()
    assert all(np.array_equal(keep[0].values[k], final.values[k]) for k in final.values)
    assert all(np.array_equal(keep[0].margins[k], final.margins[k]) for k in final.margins)


def test_a_wrong_pass_is_reported_as_before(digits):
    graph, x = digits
    wrong = Pass("scale", lambda g: PassResult(perturbed(g, 1.01)), requires="", ensures="")
    result = compare_traces(graph, run(graph, x), perturbed(graph, 1.01), run(perturbed(graph, 1.01), x))
    with pytest.raises(Exception) as e:
        run_passes(graph, [wrong], x)
    assert result.describe() in str(e.value)


@pytest.mark.parametrize("spike", [True, False])
def test_a_run_compared_with_itself_is_add_with_itself(spike):
    from spikec.core.checker import Comparison
    rng = np.random.default_rng(0)
    values = [rng.normal(size=(3, 2, 4)), np.array([[[np.inf, 1.0]]]), np.array([[[np.nan, 1.0, np.nan]]]),
              np.zeros((2, 1, 3)), rng.normal(size=(2, 2, 2)) * 1e300]
    slow, fast = Comparison(), Comparison()
    for i, v in enumerate(values):
        margin = np.abs(v)
        slow.add(f"n{i}", v, v, spike, margin)
        fast.add_self(f"n{i}", v, spike, margin)
    # the check can fail: a NaN spike is a mismatch; a real NaN against the same NaN matches and is counted
    assert same(slow, fast) and (slow.spike_mismatches if spike else slow.nans_matched == fast.nans_matched == 2)


def masked_rule(expected, got):
    """The real-value rule as docs/equivalence.md states it, masks and all: (max_rel_diff, mismatch count)."""
    finite = np.isfinite(expected) & np.isfinite(got)
    scale = max(np.abs(expected[finite]).max(initial=0.0), np.abs(got[finite]).max(initial=0.0), np.finfo(float).tiny)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(finite, np.abs(np.where(finite, expected - got, 0.0)) / scale, 0.0)
    bad = (diff > 1e-9) | (~finite & (expected != got))
    return float(diff.max(initial=0.0)), int(bad.sum())


def test_the_finite_fast_path_of_add_is_the_masked_rule():
    from spikec.core.checker import Comparison
    rng = np.random.default_rng(3)
    for trial in range(300):
        e = rng.normal(size=(3, 4, 5)) * 10.0 ** rng.integers(-300, 300)
        g = [e.copy(), e * (1 + rng.normal(size=e.shape) * 1e-10), e * (1 + rng.normal(size=e.shape) * 1e-9),
             np.nextafter(e, np.inf), -e, np.zeros_like(e), -np.abs(e)][trial % 7]
        c = Comparison()
        c.add("n", e, g, False)
        assert (c.max_rel_diff, c.real_mismatches) == masked_rule(e, g), trial
