"""Pass manager: an ordered list of named ``Graph -> Graph`` rewrites, each verified and checked on the spot.

After every pass the IR verifier runs and the checker compares the graph with the one before it
on the verification inputs. A failure names the pass and the passes run before it. Matches a
pass declined are logged with node and reason, never dropped silently; when the user named the
pass explicitly, a declined match stops the compile with that node and reason.
"""
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Callable

from spikec.compiler.checker import compare_traces
from spikec.compiler.interpreter import Trace, run
from spikec.compiler.errors import NotEquivalent, PassError, SpikecError
from spikec.compiler.ir import Graph
from spikec.ops import deployed_params
from spikec.compiler.verify import verify


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

    def to_json(self) -> dict:
        return dict(self.__dict__)


def run_passes(graph: Graph, passes: list[Pass], inputs, *, explicit: bool = False,
               trace: Trace | None = None, keep: list | None = None,
               stage=None) -> tuple[Graph, list[PassRecord]]:
    """Apply ``passes`` in order; verify and equivalence-check after each one.

    ``trace`` may pass a ``record="all"`` run of ``graph`` on ``inputs`` already made; each pass then
    costs one interpreter run (of its result). ``keep``, a list, receives the run of the final graph.
    ``stage``: a callable ``name -> context manager`` wrapped around each pass (``spikec.app.stages.Stages``).
    """
    records: list[PassRecord] = []
    trace = trace or (run(graph, inputs, progress="verifying") if passes else None)
    for p in passes:
        with (stage(f"pass {p.name}") if stage else nullcontext()):
            graph, trace = _run_pass(p, graph, trace, inputs, explicit, records)
    if keep is not None:
        keep.append(trace)
    return graph, records


def _params(graph: Graph) -> int:
    return sum(deployed_params(n) for n in graph.nodes)


def _unchanged(before: Graph, after: Graph) -> bool:
    return before.outputs == after.outputs and len(before.nodes) == len(after.nodes) and \
        all(a is b for a, b in zip(before.nodes, after.nodes))

def _run_pass(p: Pass, graph: Graph, trace: Trace, inputs, explicit: bool, records: list) -> tuple[Graph, Trace]:
    """Apply one pass, verify its graph, check it against ``trace`` (the run of ``graph``); append its record."""
    before_names = [r.name for r in records]
    context = f"in pass {p.name!r} (after {', '.join(before_names) if before_names else 'no other pass'})"
    start = time.perf_counter()
    try:
        result = p.run(graph)
        verify(result.graph, f"after pass {p.name!r}")
    except SpikecError as e:
        raise PassError(e.what, where=f"{context}{'; ' + e.where if e.where else ''}", remedy=e.remedy) from e
    except Exception as e:
        raise PassError(f"the pass crashed: {type(e).__name__}: {e}", where=context,
                        remedy="this is a compiler bug: report it; meanwhile compile without this pass") from e
    if explicit and result.skipped:
        s = result.skipped[0]
        raise PassError(f"the pass cannot apply to node {s.node!r}: {s.reason}", where=context,
                        remedy=s.remedy or f"drop {p.name!r} from --passes, or change the model")
    if _unchanged(graph, result.graph):  # the very same nodes: the run before is the run after
        after = trace
        cmp = compare_traces(graph, trace, result.graph, after)
    else:
        after = run(result.graph, inputs, progress=f"verifying {p.name}")
        cmp = compare_traces(graph, trace, result.graph, after)
    records.append(PassRecord(p.name, list(result.changed), _params(graph), _params(result.graph), True,
                              cmp.spike_mismatches, cmp.max_rel_diff,
                              round(time.perf_counter() - start, 4),
                              [s.__dict__ for s in result.skipped], list(result.notes), cmp.summary()))
    if not cmp.equivalent:
        raise NotEquivalent(f"the graph after the pass is not equivalent to the graph before it:\n{cmp.describe()}",
                            where=context, remedy="this is a compiler bug: report it with the model; "
                                                  "meanwhile compile without this pass")
    return result.graph, after

