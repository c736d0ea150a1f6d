"""The pass manager: every pass verified and equivalence-checked on the spot; failures name the pass."""
import json
from pathlib import Path

import numpy as np
import pytest

from spikec.ir.errors import NotEquivalent, PassError
from spikec.frontend import trace
from spikec.app.loader import build_model, load_weights
from spikec.core.passes import Pass, PassRecord, PassResult, Skip, run_passes
from spikec.passes.fold_batchnorm import FOLD_BATCHNORM

DIGITS = Path(__file__).resolve().parents[2] / "examples" / "digits"
RECORD_FIELDS = {"name", "nodes_changed", "verified", "spike_mismatches", "max_rel_diff", "seconds",
                 "skipped", "notes", "comparison"}


@pytest.fixture(scope="module")
def graph():
    m = build_model(f"{DIGITS / 'model.py'}:small")
    load_weights(m, str(DIGITS / "checkpoint.pt"))
    return trace(m, (1, 8, 8))


@pytest.fixture(scope="module")
def inputs():
    with np.load(DIGITS / "inputs.npz") as z:
        return z["input"][:, :4].astype(np.float64)


def make_pass(name, fn):
    return Pass(name, fn, requires="anything", ensures="whatever the test says")


def identity(graph):
    return PassResult(graph)


def replace_node(graph, name, **changes):
    return graph.with_nodes([n.with_(**changes) if n.name == name else n for n in graph.nodes])


def scale_head(graph):
    """A deliberately wrong rewrite: the output linear's weight scaled by 1.01."""
    head = graph.node("head.1")
    return PassResult(replace_node(graph, "head.1", params={**head.params, "weight": head.params["weight"] * 1.01}),
                      ("head.1",))


def dangle(graph):
    """An invalid rewrite: lif1 now reads a node that does not exist."""
    return PassResult(replace_node(graph, "lif1", inputs=("ghost",)), ("lif1",))


def declining(graph):
    return PassResult(graph, (), (Skip("conv1.1", "the moon is in the wrong phase", "wait a fortnight"),),
                      ("looked at 2 batchnorms",))


NOOP = make_pass("noop", identity)
WRONG = make_pass("scale_head", scale_head)


def test_no_passes(graph, inputs):
    out, records = run_passes(graph, [], inputs)
    assert out is graph and records == []


def test_records_have_the_required_fields(graph, inputs):
    out, records = run_passes(graph, [NOOP, FOLD_BATCHNORM], inputs)
    assert [r.name for r in records] == ["noop", "fold_batchnorm"]
    for r in records:
        assert isinstance(r, PassRecord)
        doc = r.to_json()
        assert set(doc) >= RECORD_FIELDS
        json.dumps(doc)  # plain JSON, as the report stores it
        assert r.verified is True and r.spike_mismatches == 0
        assert 0 <= r.max_rel_diff <= 1e-9 and r.seconds >= 0
        assert r.comparison["equivalent"] is True and r.comparison["spikes_compared"] > 0
    noop, fold = records
    assert noop.nodes_changed == [] and noop.max_rel_diff == 0.0 and noop.skipped == []
    assert {"conv1.0", "conv1.1", "conv2.0", "conv2.1"} <= set(fold.nodes_changed)
    assert not any(n.op == "batchnorm" for n in out.nodes)


def test_wrong_pass_raises_not_equivalent_naming_it_and_its_predecessors(graph, inputs):
    with pytest.raises(NotEquivalent) as info:
        run_passes(graph, [NOOP, FOLD_BATCHNORM, WRONG, NOOP], inputs)
    message = info.value.message()
    assert "'scale_head'" in message
    assert "noop, fold_batchnorm" in message  # the passes run before it, in order
    assert "'head.1'" in message  # the checker's mismatch report
    assert info.value.exit_code == 1


def test_wrong_first_pass(graph, inputs):
    with pytest.raises(NotEquivalent) as info:
        run_passes(graph, [WRONG, FOLD_BATCHNORM], inputs)
    assert "'scale_head'" in info.value.message() and "no other pass" in info.value.message()


def test_invalid_graph_raises_pass_error_naming_the_pass(graph, inputs):
    with pytest.raises(PassError) as info:
        run_passes(graph, [NOOP, make_pass("dangle", dangle)], inputs)
    message = info.value.message()
    assert "'dangle'" in message and "noop" in message
    assert "'ghost'" in message and "'lif1'" in message
    assert info.value.exit_code == 2


def test_crashing_pass_is_reported_with_its_name(graph, inputs):
    """A pass that crashes (a bug in the pass) still fails as a PassError naming that pass."""
    def crash(g):
        raise KeyError("no such node")

    with pytest.raises(PassError) as info:
        run_passes(graph, [NOOP, make_pass("crashy", crash)], inputs)
    assert "'crashy'" in info.value.message() and "noop" in info.value.message()


def test_explicit_pass_with_a_skip_stops_naming_node_and_reason(graph, inputs):
    with pytest.raises(PassError) as info:
        run_passes(graph, [make_pass("declining", declining)], inputs, explicit=True)
    message = info.value.message()
    assert "'declining'" in message
    assert "'conv1.1'" in message and "the moon is in the wrong phase" in message
    assert "wait a fortnight" in message


def test_implicit_pass_with_a_skip_records_it(graph, inputs):
    out, records = run_passes(graph, [make_pass("declining", declining)], inputs, explicit=False)
    assert out is graph
    (record,) = records
    assert record.skipped == [{"node": "conv1.1", "reason": "the moon is in the wrong phase",
                               "remedy": "wait a fortnight"}]
    assert record.notes == ["looked at 2 batchnorms"]
    assert record.to_json()["skipped"] == record.skipped


def copy_head(graph):
    """An exact rewrite that still changes the graph: head.1 replaced by an equal copy of itself."""
    head = graph.node("head.1")
    return PassResult(replace_node(graph, "head.1", params=dict(head.params)), ("head.1",))


def nudge_head(graph):
    """head.1's weight and bias scaled by 1 + 7e-10: its output by as much, within REL_TOL (1e-9) once, not twice."""
    head = graph.node("head.1")
    scaled = {k: v * (1 + 7e-10) if k in ("weight", "bias") else v for k, v in head.params.items()}
    return PassResult(replace_node(graph, "head.1", params=scaled), ("head.1",))


COPY = make_pass("copy_head", copy_head)


def _count_runs(monkeypatch):
    from spikec.core import stream
    calls, real = [], stream.run
    monkeypatch.setattr(stream, "run", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def test_two_changing_passes_are_checked_composed_in_one_run(graph, inputs, monkeypatch):
    """Two passes that change the graph: one run of the final graph against the traced run, each record saying so;
    the graph and the verdict are those of the passes checked one by one."""
    calls = _count_runs(monkeypatch)
    keep = []
    out, records = run_passes(graph, [FOLD_BATCHNORM, NOOP, COPY], inputs, keep=keep)
    assert len(calls) == 1
    assert [r.checked for r in records] == ["composed"] * 3
    for r in records:
        assert r.spike_mismatches == 0 and r.comparison["equivalent"] and r.comparison["spikes_compared"] > 0
        assert "composed" in r.comparison["checked"] and "copy_head" in r.comparison["checked"]
    assert set(keep[0].values) >= {n.name for n in out.nodes}   # the final graph's run, whole, as before
    alone, alone_records = run_passes(graph, [FOLD_BATCHNORM], inputs)
    alone, _ = run_passes(alone, [COPY], inputs)
    assert [n.name for n in out.nodes] == [n.name for n in alone.nodes]
    assert alone_records[0].checked == "alone"
    assert [r.nodes_changed for r in records][0] == alone_records[0].nodes_changed


def test_a_wrong_pass_in_a_composition_is_named_after_the_composed_check_fails(graph, inputs, monkeypatch):
    calls = _count_runs(monkeypatch)
    with pytest.raises(NotEquivalent) as info:
        run_passes(graph, [FOLD_BATCHNORM, WRONG, COPY], inputs)
    assert "'scale_head'" in info.value.message() and "after fold_batchnorm" in info.value.message()
    assert len(calls) == 3   # the composition, then fold_batchnorm and scale_head alone


def test_differences_that_add_up_across_passes_fail_the_composition(graph, inputs):
    """Each nudge alone is within the checker's tolerance; the two together are not: the composition is refused,
    named as such, although every pass alone agrees with the graph before it."""
    nudge = make_pass("nudge_head", nudge_head)
    _, (alone,) = run_passes(graph, [nudge], inputs)
    assert alone.checked == "alone" and 0 < alone.max_rel_diff <= 1e-9
    with pytest.raises(NotEquivalent) as info:
        run_passes(graph, [nudge, make_pass("nudge_again", nudge_head)], inputs)
    message = info.value.message()
    assert "each pass alone is equivalent" in message and "(composed)" in message and "'head.1'" in message
