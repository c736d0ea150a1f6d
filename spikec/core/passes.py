"""Pass manager: an ordered list of named ``Graph -> Graph`` rewrites, each verified and checked.

After every pass the IR verifier runs. When two or more passes change the graph, the checker compares the
graph after the last with the graph before the first, once, on the verification inputs (one interpreter run
instead of one per pass: the identity claimed is the composition's, and each record says so, ``checked:
"composed"``). Only if that comparison fails is each pass checked alone against the graph before it, so the
failure names the pass and the passes run before it (and a composition that differs while every pass alone
agrees is reported as such). A single changing pass is checked alone. Matches a pass declined are logged with
node and reason, never dropped silently; when the user named the pass explicitly, a declined match stops the
compile with that node and reason.
"""
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Callable

from spikec.core.checker import compare_traces
from spikec.core.interpreter import Trace, run
from spikec.ir.errors import NotEquivalent, PassError, SpikecError
from spikec.ir.graph import Graph
from spikec.ops import deployed_params
from spikec.core.stream import before_names, compare_streamed
from spikec.core.verify import verify


@dataclass(frozen=True)
class Skip:
    node: str
    reason: str
    remedy: str = ""


@dataclass(frozen=True)
class PassResult:
    graph: Graph
    changed: tuple[str, ...] = ()      # names of nodes created, rewritten or removed
    skipped: tuple[Skip, ...] = ()     # matches whose precondition failed
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pass:
    name: str
    run: Callable[[Graph], PassResult]
    requires: str   # the precondition, in words (checked per match by ``run``)
    ensures: str    # what holds afterwards


@dataclass
class PassRecord:
    name: str
    nodes_changed: list[str]
    params_before: int
    params_after: int
    verified: bool
    spike_mismatches: int
    max_rel_diff: float
    seconds: float
    skipped: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    comparison: dict = field(default_factory=dict)
    checked: str = "alone"   # "alone": against the graph before it; "composed": the passes' one check;
    # "end to end": the deployed graph against the source model (the driver's one check of frontend and passes)

    def to_json(self) -> dict:
        return dict(self.__dict__)


def run_passes(graph: Graph, passes: list[Pass], inputs, *, explicit: bool = False,
               trace: Trace | None = None, keep: list | None = None,
               stage=None, ahead: dict | None = None, consume: bool = False) -> tuple[Graph, list[PassRecord]]:
    """Apply ``passes`` in order; verify and equivalence-check after each one.

    ``trace`` may pass a run of ``graph`` on ``inputs`` already made, recording at least ``first_record``'s
    nodes (``record="all"`` does); each pass then costs one interpreter run (of its result), compared with the
    run before it as it goes (``spikec.core.stream``): a run keeps only what the next pass's check reads, the
    final graph's run keeps everything. ``consume``: ``trace`` is the caller's no more, its values are dropped
    once checked. ``keep``, a list, receives the run of the final graph (``record="all"``).
    ``stage``: a callable ``name -> context manager`` wrapped around each pass (``spikec.app.stages.Stages``).
    ``ahead``: the dict given to ``first_record`` (the first pass's rewrite, made once).
    """
    records: list[PassRecord] = []
    ahead = {} if ahead is None else ahead
    if trace is None and passes:
        trace, consume = run(graph, inputs, record=first_record(graph, passes, explicit, ahead),
                             progress="verifying"), True
    chain = _composed(graph, passes, explicit, ahead)
    if chain is not None:
        with (stage("passes, checked composed") if stage else nullcontext()):
            composed, after, seconds = _check_composed(chain, trace, inputs, consume)
        if composed.equivalent:
            records = _composed_records(passes, chain, ahead, composed, seconds)
            if keep is not None:
                keep.append(after)
            return chain[-1], records
        del after  # the composition differs: each pass alone, from a fresh run, names the one at fault
        trace, consume = run(graph, inputs, record=_record(graph, passes, 0, explicit, ahead),
                             progress="verifying"), True
    for i, p in enumerate(passes):
        with (stage(f"pass {p.name}") if stage else nullcontext()):
            graph, trace = _run_pass(i, passes, graph, trace, inputs, explicit, records, ahead, consume)
        consume = True
    if chain is not None:  # every pass agrees with the graph before it, yet the composition does not
        raise NotEquivalent(f"each pass alone is equivalent to the graph before it, but the graph after them all is "
                            f"not equivalent to the graph before them:\n{composed.describe()}",
                            where=f"in passes {', '.join(p.name for p in passes)} (composed)",
                            remedy="this is a compiler bug (differences that add up across passes): report it "
                                   "with the model; meanwhile compile with fewer passes (--passes)")
    if keep is not None:
        keep.append(trace)
    return graph, records


def first_record(graph: Graph, passes: list[Pass], explicit: bool = False, ahead: dict | None = None):
    """What a run of ``graph`` must record for ``run_passes(graph, passes, ...)``: node names, or "all" (no pass,
    a pass that keeps the graph, or one that fails: it is raised in its turn). ``ahead`` keeps the rewrites."""
    ahead = {} if ahead is None else ahead
    chain = _composed(graph, passes, explicit, ahead)
    return before_names(graph, chain[-1]) if chain is not None else _record(graph, passes, 0, explicit, ahead)


def pass_chain(graph: Graph, passes: list[Pass], explicit: bool = False, ahead: dict | None = None) -> list[Graph] | None:
    """The graphs before and after each pass, every rewrite made and verified (kept in ``ahead``), if none failed or
    (named explicitly) declined a match; else None (``run_passes`` raises that failure in its turn)."""
    ahead = {} if ahead is None else ahead
    graphs = [graph]
    for i in range(len(passes)):
        rw = _rewrite(passes, i, graphs[-1], ahead)
        if rw.error is not None or (explicit and rw.result.skipped):
            return None
        graphs.append(rw.result.graph)
    return graphs


def _composed(graph: Graph, passes: list[Pass], explicit: bool, ahead: dict) -> list[Graph] | None:
    """``pass_chain``, if the passes are checked as one composition (two or more changed the graph); else None:
    each pass is checked alone (a failure is raised in its turn, after the checks of the passes before it)."""
    chain = pass_chain(graph, passes, explicit, ahead)
    changed = 0 if chain is None else sum(not _unchanged(a, b) for a, b in zip(chain, chain[1:]))
    return chain if changed >= 2 else None


def _check_composed(chain: list[Graph], trace: Trace, inputs, consume: bool):
    """The graph after the last pass compared with ``trace`` (the run of the graph before the first), in one run:
    (comparison, that run, seconds)."""
    start = time.perf_counter()
    cmp, after = compare_streamed(chain[0], trace, chain[-1], inputs, record="all", consume=consume,
                                  progress="verifying passes")
    return cmp, after, time.perf_counter() - start


def _composed_records(passes: list[Pass], chain: list[Graph], ahead: dict, cmp, seconds: float) -> list[PassRecord]:
    names = [p.name for p in passes]
    return chain_records(passes, chain, ahead, cmp, seconds, "composed",
                         f"composed: the graph after {names[-1]!r} against the graph before {names[0]!r}, once, for "
                         f"the passes {', '.join(names)}")


def chain_records(passes: list[Pass], chain: list[Graph], ahead: dict, cmp, seconds: float, checked: str,
                  how: str) -> list[PassRecord]:
    """One record per pass of ``pass_chain``'s ``chain``, each with the one comparison ``cmp`` that checked them
    all (``checked``: its kind, ``how``: what it compared, in the record's ``comparison``) and an equal share of its
    ``seconds``."""
    summary = {**cmp.summary(), "checked": how}
    share = seconds / max(1, len(passes))
    records = []
    for i, p in enumerate(passes):
        rw = ahead[i][1]
        records.append(PassRecord(p.name, list(rw.result.changed), _params(chain[i]), _params(chain[i + 1]), True,
                                  cmp.spike_mismatches, cmp.max_rel_diff, round(rw.seconds + share, 4),
                                  [s.__dict__ for s in rw.result.skipped], list(rw.result.notes), dict(summary),
                                  checked))
    return records


@dataclass(frozen=True)
class _Rewrite:
    result: PassResult | None
    error: Exception | None
    seconds: float


def _context(passes: list[Pass], i: int) -> str:
    before = [p.name for p in passes[:i]]
    return f"in pass {passes[i].name!r} (after {', '.join(before) if before else 'no other pass'})"


def _rewrite(passes: list[Pass], i: int, graph: Graph, ahead: dict) -> _Rewrite:
    """Pass ``i`` applied to ``graph`` and verified, once (kept in ``ahead``); an error is kept, not raised."""
    if i in ahead and ahead[i][0] is graph:
        return ahead[i][1]
    p, context, start, error, result = passes[i], _context(passes, i), time.perf_counter(), None, None
    try:
        result = p.run(graph)
        verify(result.graph, f"after pass {p.name!r}")
    except SpikecError as e:
        error = PassError(e.what, where=f"{context}{'; ' + e.where if e.where else ''}", remedy=e.remedy)
        error.__cause__ = e
    except Exception as e:
        error = PassError(f"the pass crashed: {type(e).__name__}: {e}", where=context,
                          remedy="this is a compiler bug: report it; meanwhile compile without this pass")
        error.__cause__ = e
    done = _Rewrite(result, error, time.perf_counter() - start)
    ahead[i] = (graph, done)
    return done


def _record(graph: Graph, passes: list[Pass], i: int, explicit: bool, ahead: dict):
    """What the run of ``graph`` (the input of pass ``i``) must record: "all" or the names pass ``i``'s check reads."""
    if i >= len(passes):
        return "all"  # the deployed graph: every consumer of its run reads it
    rw = _rewrite(passes, i, graph, ahead)
    if rw.error is not None or (explicit and rw.result.skipped) or _unchanged(graph, rw.result.graph):
        return "all"
    return before_names(graph, rw.result.graph)
def _params(graph: Graph) -> int:
    return sum(deployed_params(n) for n in graph.nodes)


def _unchanged(before: Graph, after: Graph) -> bool:
    return before.outputs == after.outputs and len(before.nodes) == len(after.nodes) and \
        all(a is b for a, b in zip(before.nodes, after.nodes))


def _run_pass(i: int, passes: list[Pass], graph: Graph, trace: Trace, inputs, explicit: bool, records: list,
              ahead: dict, consume: bool) -> tuple[Graph, Trace]:
    """Apply pass ``i``, verify its graph, check it against ``trace`` (the run of ``graph``); append its record."""
    p, context, start = passes[i], _context(passes, i), time.perf_counter()
    rw = _rewrite(passes, i, graph, ahead)
    if rw.error is not None:
        raise rw.error
    result = rw.result
    if explicit and result.skipped:
        s = result.skipped[0]
        raise PassError(f"the pass cannot apply to node {s.node!r}: {s.reason}", where=context,
                        remedy=s.remedy or f"drop {p.name!r} from --passes, or change the model")
    if _unchanged(graph, result.graph):  # the very same nodes: the run before is the run after
        after = trace
        cmp = compare_traces(graph, trace, result.graph, after)
    else:
        record = _record(result.graph, passes, i + 1, explicit, ahead)
        cmp, after = compare_streamed(graph, trace, result.graph, inputs, record=record, consume=consume,
                                      progress=f"verifying {p.name}")
    records.append(PassRecord(p.name, list(result.changed), _params(graph), _params(result.graph), True,
                              cmp.spike_mismatches, cmp.max_rel_diff,
                              round(rw.seconds + time.perf_counter() - start, 4),
                              [s.__dict__ for s in result.skipped], list(result.notes), cmp.summary()))
    if not cmp.equivalent:
        raise NotEquivalent(f"the graph after the pass is not equivalent to the graph before it:\n{cmp.describe()}",
                            where=context, remedy="this is a compiler bug: report it with the model; "
                                                  "meanwhile compile without this pass")
    return result.graph, after
