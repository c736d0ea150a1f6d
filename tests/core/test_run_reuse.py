"""``run(..., reuse=Reuse(before, trace))``: a node left as it was, on inputs left as they were, takes its value from
the earlier run instead of being computed again, and the run is bit for bit the run without reuse (values and
margins); a changed node, and whatever reads a value it changed, is computed."""
from pathlib import Path

import numpy as np
import pytest

from spikec.app.loader import build_model, load_weights
from spikec.core.interpreter import Reuse, run
from spikec.frontend import trace
from spikec.passes import select

RIPE = Path(__file__).resolve().parents[2] / "examples" / "ripe"


@pytest.fixture(scope="module")
def ripe():
    m = build_model(f"{RIPE / 'model.py'}:small")
    load_weights(m, str(RIPE / "checkpoint.pt"))
    with np.load(RIPE / "inputs.npz") as z:
        x = z["input"][:, :2].astype(np.float64)
    return trace(m, tuple(x.shape[2:])), x


def identical(a, b) -> bool:
    return a.values.keys() == b.values.keys() and a.margins.keys() == b.margins.keys() \
        and all(a.values[k].dtype == b.values[k].dtype and np.array_equal(a.values[k], b.values[k], equal_nan=True)
                for k in a.values) \
        and all(np.array_equal(a.margins[k], b.margins[k], equal_nan=True) for k in a.margins)


def reused(after_trace, before_trace) -> set:
    return {k for k, v in after_trace.values.items()
            if k in before_trace.values and np.shares_memory(v, before_trace.values[k])}


def test_each_pass_check_run_is_the_run_without_reuse(ripe):
    graph, x = ripe
    passes, _ = select("default")
    total = 0
    for p in passes:
        after = p.run(graph).graph
        before_trace = run(graph, x)
        with_reuse = run(after, x, reuse=Reuse(graph, before_trace))
        assert identical(with_reuse, run(after, x)), p.name
        kept = reused(with_reuse, before_trace)
        assert all(after.node(k) is graph.node(k) for k in kept)  # only nodes the pass left as they were
        total += len(kept)
        graph = after
    assert total > 0  # something was not computed again


def test_a_changed_node_and_what_it_reaches_are_computed(ripe):
    graph, x = ripe
    first = next(n for n in graph.nodes if n.op == "conv2d")
    changed = graph.with_nodes([n.with_(params={**n.params, "weight": n.params["weight"] * 1.001}) if n is first
                                else n for n in graph.nodes])
    before_trace = run(graph, x)
    with_reuse = run(changed, x, reuse=Reuse(graph, before_trace))
    assert identical(with_reuse, run(changed, x))
    kept = reused(with_reuse, before_trace)
    assert first.name not in kept and kept  # the upstream of the change is taken, the change is not
    downstream = {first.name}
    for n in changed.nodes:
        if any(i in downstream for i in n.inputs) and not np.array_equal(with_reuse.values[n.name],
                                                                         before_trace.values[n.name]):
            downstream.add(n.name)
    assert not kept & downstream


def test_a_nan_is_never_taken_for_an_unchanged_value():
    """NaN != NaN: a value holding one does not count as left as it was (its readers are computed)."""
    import torch
    from spikec.core.interpreter import Trace, _equal_to_reused
    from spikec.ir.graph import Graph, Node, TensorType
    x, y = Node("x", "input", (), TensorType((2,))), Node("y", "relu", ("x",), TensorType((2,)))
    graph = Graph((x, y), ("y",))
    for value, equal in ((np.array([[[np.nan, 1.0]]]), False), (np.array([[[2.0, 1.0]]]), True)):
        before = Reuse(graph, Trace({"y": value}))
        assert _equal_to_reused(y, torch.as_tensor(value.copy()), before) is equal
