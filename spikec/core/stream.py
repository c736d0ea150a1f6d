"""Graph-vs-graph comparison made while the second graph runs, so neither run is held whole in memory.

``compare_streamed(before, ta, after, inputs)`` gives exactly ``compare_traces(before, ta, after, run(after,
inputs))``: the same values compared with the same rule (``Comparison.add``), merged in ``compare_traces``' order,
so counts, ``max_rel_diff`` and the listed first mismatches are identical. What differs is memory: each value of
``after`` is compared as the interpreter produces it and then freed unless ``record`` asks to keep it, and (with
``consume``) each value of ``ta`` is dropped once its last comparison is made. ``ta`` needs to hold only
``before_names(before, after)`` (and ``run(..., record=before_names(...))`` records just those). What the pass
left as it was is taken from ``ta`` rather than computed again (``interpreter.Reuse``): a value that a node
unchanged on unchanged inputs computes is the value ``ta`` holds.
"""
from collections import Counter

from spikec.core.checker import MAX_REPORTED, Comparison, per_step_sum
from spikec.core.interpreter import Reuse, Trace, run
from spikec.ir.graph import Graph


def checks(before: Graph, after: Graph) -> list[tuple[str, str, bool, int]]:
    """The comparisons ``compare_traces`` makes, in its order: (name in ``before``, name in ``after``, spike,
    sub-steps of the ``after`` value summed per physical step (1: compared as it is))."""
    shared = [n for n in before.nodes if n.op != "input" and n.name in after and after.node(n.name).type == n.type]
    out = [(n.name, n.name, n.type.is_spike, 1) for n in shared]
    names = {n.name for n in shared}
    for n in before.nodes:  # re-timed onto D sub-steps
        t = after.node(n.name).type if n.name in after else None
        if t is not None and t.shape == n.type.shape and t.substeps > 1 and n.type.substeps == 1:
            out.append((n.name, n.name, n.type.is_spike, t.substeps))
            names.add(n.name)
    for oa, ob in zip(before.outputs, after.outputs):
        if oa != ob or oa not in names:
            out.append((oa, ob, after.node(ob).type.is_spike, 1))
    return out


def before_names(before: Graph, after: Graph) -> set[str]:
    """The values of ``before`` its comparison with ``after`` reads."""
    return {a for a, _, _, _ in checks(before, after)}


def compare_streamed(before: Graph, ta: Trace, after: Graph, inputs, *, record="all", consume: bool = False,
                     progress: str | None = None) -> tuple[Comparison, Trace]:
    """``compare_traces(before, ta, after, tb)`` with ``tb = run(after, inputs, record=record)``, made as ``after``
    runs; returns the comparison and ``tb``. ``consume``: drop each value (and margin) of ``ta`` after its last use."""
    todo = checks(before, after)
    by_after: dict[str, list[int]] = {}
    for i, (_, b, _, _) in enumerate(todo):
        by_after.setdefault(b, []).append(i)
    uses = Counter(a for a, _, _, _ in todo)
    parts: list[Comparison | None] = [None] * len(todo)

    def visit(name, value, margin):
        for i in by_after.get(name, ()):
            a, b, spike, d = todo[i]
            if d > 1:
                value_d = per_step_sum(value, d)
                margin_d = None if margin is None else margin.reshape(-1, d, *margin.shape[1:]).min(1)
            else:
                value_d, margin_d = value, margin
            parts[i] = Comparison()
            parts[i].add(b, ta.values[a], value_d, spike, margin_d)
            uses[a] -= 1
            if consume and uses[a] == 0:
                ta.values.pop(a, None)
                ta.margins.pop(a, None)

    # a node the pass left as it was, on inputs it left as they were, is not computed again (Reuse)
    tb = run(after, inputs, record=record, progress=progress, visit=visit, reuse=Reuse(before, ta))
    return merge(parts), tb


def merge(parts: list[Comparison]) -> Comparison:
    """One ``Comparison`` of per-value comparisons, as if their values had been added to it in this order."""
    result = Comparison()
    for c in parts:
        result.nodes_compared += c.nodes_compared
        result.spikes_compared += c.spikes_compared
        result.values_compared += c.values_compared
        result.spike_mismatches += c.spike_mismatches
        result.real_mismatches += c.real_mismatches
        result.nans_matched += c.nans_matched
        result.max_rel_diff = max(result.max_rel_diff, c.max_rel_diff)
        if c.mismatches and c.mismatches[0].step == -1:  # a shape mismatch is always listed (Comparison.add)
            result.mismatches += c.mismatches
        else:
            result.mismatches += c.mismatches[: max(0, MAX_REPORTED - len(result.mismatches))]
    return result
