"""``--coding ttfs``: the pass, run by the pass manager, and the verifier, as the driver's ``CODINGS`` hook.

``lower_ttfs`` maps the deployed ANN with the ``assign_ttfs_timing`` pass through ``run_passes`` (so the
TTFS graph is IR-verified and checked against the ANN on the verification inputs, 1e-9, and recorded
like every pass); ``verify_ttfs`` (``verify.py``) then checks it with the event-driven simulator and
returns a ``TargetResult`` whose report is the report's ``ttfs`` object.

LayerNorm is decomposed before the pass (``settings.decompose``): the decomposition is APPROXIMATE (a
fitted 1/sqrt), so no 1e-9 check against the graph before it can hold; the pass is checked against the
decomposed ANN instead, its record says so, and the verifier measures the distance to the true
LayerNorm (``approximations``).
"""
from dataclasses import dataclass, replace
from typing import Callable

import spikec.codings.ttfs.timing_pass as timing_pass  # a module alias: the pass module imports spikec.codings.ttfs
from spikec.core.interpreter import Trace
from spikec.ir.graph import Graph
from spikec.core.passes import PassRecord, run_passes
from spikec.codings.ttfs.settings import data_sets, decompose, resolve, timing_options
from spikec.targets.ttfs.verify import verify_ttfs


@dataclass(frozen=True)
class Coding:
    """A ``--coding``: how the deployed graph is re-coded (pass manager) and how the result is verified."""
    lower: Callable     # (model, graph, inputs, options) -> (graph, pass records, run of the graph on inputs)
    verify: Callable    # (model, source graph, graph, inputs, options, reference=run) -> TargetResult
    options: Callable   # CompileOptions -> the options dict both take
    targets: tuple      # the --target values that can lower its graphs


def lower_ttfs(model, graph: Graph, inputs, options: dict | None = None) -> tuple[Graph, list[PassRecord], Trace]:
    """The TTFS graph of the ANN ``graph``, its pass record, and its run (``record="all"``) on ``inputs``.

    Raises ``spikec.ir.errors`` subclasses: ``BadInput`` for options, ``PassError`` naming the node for
    ops with no TTFS form (from the pass manager, which names the pass).
    """
    o = resolve(options)
    data = data_sets(model, inputs, o)
    ann, ln_records, _ = decompose(graph, data.calibration, o)
    keep: list = []
    deployed, records = run_passes(ann, [timing_pass.make_pass(data.calibration, **timing_options(o))], inputs,
                                   keep=keep)
    if ln_records:  # checked against the decomposed ANN: the record says which, and that it approximates
        notes = [f"{r['node']}: LayerNorm decomposed into seven TTFS sub-layers before this pass; 1/sqrt "
                 f"APPROXIMATE (fit rel. error {r['fit_max_rel_error']:.2g}); this pass is checked against the "
                 "decomposed ANN, the distance to the true LayerNorm is in ttfs.approximations" for r in ln_records]
        records = [replace(records[0], notes=notes + list(records[0].notes))]
    return deployed, records, keep[0]


def _options(opts) -> dict:
    return {"dt": opts.ttfs_dt}


TTFS_CODING = Coding(lower_ttfs, verify_ttfs, _options, targets=("none", "onnx", "lava"))  # lava: TTFS on a tick grid


@dataclass(frozen=True)
class TTFSResult:
    graph: Graph    # the deployed TTFS graph (its outputs decode the ANN outputs and keep their names)
    report: dict    # the report's "ttfs" object
    ok: bool        # the exact parts verified (<= tolerance), spikes <= 1 per neuron, IR == simulator
    passes: list    # the pass manager's records


def compile_ttfs(model, graph: Graph, inputs, options: dict | None = None) -> TTFSResult:
    """``lower_ttfs`` then ``verify_ttfs``: what ``spikec compile --coding ttfs`` does to the deployed ANN."""
    deployed, records, trace = lower_ttfs(model, graph, inputs, options)
    verdict = verify_ttfs(model, graph, deployed, inputs, options, reference=trace)
    return TTFSResult(deployed, verdict.report, verdict.ok, records)
