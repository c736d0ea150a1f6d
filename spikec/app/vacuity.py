"""No vacuous proof: warnings for what an equivalence proof on the verification inputs cannot show.

The checker proves the deployed graph equal to its source *on the verification inputs*. Where those inputs
exercise nothing, the proof is true and empty: a layer that never fires is compared zeros with zeros, one
that fires everywhere ones with ones, and an output that never changes is compared constant with constant.
A neuron whose decay leaves ``(0, 1]`` is proven exactly, but it is not the leaky integrator the model means
(a NIR file read with ``dt > tau`` gives ``beta = 1 - dt/tau < 0``: the membrane flips sign every step).

``warnings_for(graph, trace, inputs)`` reads a recorded run (``interpreter.run(graph, inputs)``, with the
default ``record="all"``) and the graph's parameters; it re-runs nothing. Each warning is a dict
``{"node", "kind", "message"}`` with ``kind`` one of ``KINDS``, in graph order, and within a node in the
order of ``KINDS``. A node's ``constant`` warning is left out when it is already ``silent`` or ``saturated``
(an all-zero or all-one output is constant too). ``format_warning(w)`` is the CLI's line.

``DECAYS`` is each op's decay rule, read from its card (``define(..., decay=Decay(...))``).
"""
from dataclasses import dataclass

import numpy as np

from spikec.ir.errors import IRError
from spikec.core.interpreter import Trace
from spikec.ir.graph import Graph, Node
import spikec.frontend  # noqa: F401  (the converters' ops: DECAYS reads their cards too)
from spikec.ops import Decay, facts, opdef

KINDS = ("decay", "silent", "saturated", "constant")
ROUNDING = 1e-12  # a decay within this of 0 is 0 (tau == dt can give -1 ulp); within it of 1, 1
MORE_INPUT = ("give stronger or real verification inputs (--inputs), and check the thresholds and the input "
              "scale (for a .nir file, its --dt)")


# op -> its card's decay rule (``spikec.ops.Decay``: ``of(node)`` -> [(label, values)], ``zero_ok``), live
DECAYS = facts("decay")


@dataclass(frozen=True)
class _Inputs:
    """What the messages say about the verification inputs."""
    peak: float
    nonzero: float        # share of non-zero values
    constant: bool        # the same at every step and for every sample

    def describe(self) -> str:
        if self.peak == 0:
            return "the verification inputs are all zero"
        return f"on inputs with max |x| = {self.peak:.3g} and {100 * self.nonzero:.3g}% non-zero values"


def _summarize(inputs) -> _Inputs:
    arrays = [np.asarray(v, dtype=np.float64) for v in (inputs.values() if isinstance(inputs, dict) else [inputs])]
    arrays = [a for a in arrays if a.ndim >= 2 and a.size]
    if not arrays:
        return _Inputs(0.0, 0.0, True)
    size = sum(a.size for a in arrays)
    return _Inputs(max(float(np.abs(a).max()) for a in arrays),
                   sum(int(np.count_nonzero(a)) for a in arrays) / size,
                   all(bool((a == a[:1, :1]).all()) for a in arrays))


def warnings_for(graph: Graph, trace: Trace, inputs) -> list[dict]:
    """The vacuity warnings of a proof run on ``inputs`` (an array ``[T, B, ...]`` or name -> array), read
    from ``trace``, the graph's run on them (record="all"; a node it did not record is not checked)."""
    given = _summarize(inputs)
    outputs = set(graph.outputs)
    found: list[dict] = []
    decays_seen = set()  # a neuron's read-outs (membrane, Norse's v and i) share its dynamics: warn once
    for node in graph.nodes:
        if node.op == "input":
            continue
        rule, kinds = DECAYS.get(node.op), [None]
        if rule is not None:
            same = (node.op, node.inputs, tuple(sorted((k, v.tobytes()) for k, v in node.params.items())))
            kinds[0] = _decay(node, rule) if same not in decays_seen else None
            decays_seen.add(same)
        values = trace.values.get(node.name)
        if values is not None and values.size:
            neuron = _is_neuron(node, trace)
            if node.type.is_spike and (neuron or node.name in outputs):
                kinds.append(_silent(node, trace, values, given, neuron))
            if node.type.is_spike and neuron:
                kinds.append(_saturated(node, trace, values, given))
            if node.name in outputs and not any(kinds[1:]):  # all zeros or all ones: said already
                kinds.append(_constant(node, values, given))
        found += [{"node": node.name, "kind": kind, "message": message} for kind, message in
                  sorted((w for w in kinds if w), key=lambda w: KINDS.index(w[0]))]
    return found


def format_warning(w: dict) -> str:
    """The CLI's line for one warning: ``warning: <node>: <message>``."""
    return f"warning: {w['node']}: {w['message']}"


def _is_neuron(node: Node, trace: Trace) -> bool:
    """A firing op: flagged ``neuron`` in the registry, holding a decay rule, or recorded with firing margins
    (the framework-exact neurons ``lif_snntorch`` and ``lif_sj`` are only ``stateful`` in the registry)."""
    if node.name in trace.margins or node.op in DECAYS:
        return True
    try:
        return opdef(node.op).neuron
    except IRError:
        return False


def _what(node: Node, neuron: bool) -> str:
    scope = f", module {node.scope!r}" if node.scope else ""
    return f"{'neuron' if neuron else 'graph output'} {node.name!r} ({node.op}{scope})"


def _extent(node: Node, values: np.ndarray) -> str:
    sub = f" ({node.type.substeps} sub-steps each)" if node.type.substeps > 1 else ""
    steps = values.shape[0] // node.type.substeps
    return (f"{values.size} values ({steps} steps{sub} x {values.shape[1]} samples x "
            f"{node.type.size} neurons)")


def _closest(trace: Trace, node: Node) -> str:
    margin = trace.margins.get(node.name)
    if margin is None or not margin.size:
        return ""
    return f"; the closest any membrane came to a firing boundary was min |U - boundary| = {float(margin.min()):.3g}"


def _silent(node, trace, values, given: _Inputs, neuron: bool):
    if values.any():
        return None
    upstream = [i for i in node.inputs if i in trace.values and not trace.values[i].any()]
    cause = f"; its input {upstream[0]!r} is zero throughout too: look upstream first" if upstream else ""
    return "silent", (
        f"{_what(node, neuron)} never spikes on the verification inputs: 0 spikes in {_extent(node, values)}, "
        f"{given.describe()}{_closest(trace, node)}{cause}. The proof compares zeros with zeros: it shows "
        f"nothing about this layer's firing (its thresholds, resets, and every path a spike of it would take). "
        f"To make it count, {MORE_INPUT}.")


def _saturated(node, trace, values, given: _Inputs):
    top = node.type.ceiling if node.type.kind == "integer" else 1
    if not (values == top).all():
        return None
    at = f"at its ceiling of {top} spikes per step" if node.type.kind == "integer" else "at every step"
    return "saturated", (
        f"{_what(node, True)} fires {at} for every neuron and sample: {values.size} of {_extent(node, values)} "
        f"are {'at the ceiling' if top != 1 else 'spikes'}, {given.describe()}{_closest(trace, node)}. The proof "
        f"compares ones with ones: any threshold low enough would give the same spikes, so it shows nothing "
        f"about this layer's thresholds, resets or membrane. Give weaker or more varied verification inputs, "
        f"and check for a threshold too low or an input scale too large (for a .nir file, its --dt).")


def _constant(node: Node, values: np.ndarray, given: _Inputs):
    if values.shape[0] * values.shape[1] < 2 or not (values == values[:1, :1]).all():
        return None
    first = values[0, 0]
    if (first == first.flat[0]).all():
        held = f"all {values.size} of its values equal {float(first.flat[0]):.6g}"
    else:
        held = (f"each of its {first.size} elements keeps one value throughout (from {float(first.min()):.6g} "
                f"to {float(first.max()):.6g})")
    cause = " The verification inputs themselves are the same at every step and for every sample." \
        if given.constant else ""
    steps = values.shape[0] // node.type.substeps
    return "constant", (
        f"graph output {node.name!r} ({node.op}) is the same at every one of {steps} steps and for every one "
        f"of {values.shape[1]} samples: {held}.{cause} The proof shows only that the deployed graph outputs this "
        f"constant too; it shows nothing about how the output responds to its input (any model giving this "
        f"constant would pass). Give verification inputs that vary over steps and between samples, and check "
        f"that the output depends on the input at all (a silent layer upstream, zero weights).")


def _decay(node: Node, rule: Decay):
    """The first of the op's decays with a value outside (0, 1] (0 allowed when ``zero_ok``), described."""
    for label, d in rule.of(node):
        d = np.atleast_1d(np.asarray(d, dtype=np.float64))
        ok = (d <= 1 + ROUNDING) & ((d > ROUNDING) | (rule.zero_ok & (d >= -ROUNDING)))
        if not ok.all():
            return "decay", _decay_message(node, label, d, ok)
    return None


def _decay_message(node: Node, label: str, d: np.ndarray, ok: np.ndarray) -> str:
    bad = d[~ok]
    first = int(np.flatnonzero(~ok)[0])
    where = f" at channel {first}" if d.size > 1 else ""
    numbers = bad[~np.isnan(bad)]
    span = f", from {numbers.min():.6g} to {numbers.max():.6g}" if numbers.size else ""
    count = f" ({bad.size} of {d.size} channels are{span})" if d.size > 1 else ""
    v = float(d[first])
    if np.isnan(v):
        means = "is not a number: the membrane is NaN from the first step"
    elif v > 1:
        means = "exceeds 1: the membrane grows every step, without bound"
    elif v < -ROUNDING:
        means = "is negative: the membrane flips its sign every step" + (" and grows" if v < -1 else "")
    else:
        means = "is 0: the neuron forgets its membrane every step and integrates nothing over time"
    scope = f", module {node.scope!r}" if node.scope else ""
    return (f"neuron {node.name!r} ({node.op}{scope}) has the decay {label} = {v:.6g}{where}, outside (0, 1]{count}. "
            f"It {means}. The proof holds for this arithmetic, but what it proves is an unstable or memoryless "
            f"neuron, not the leaky integrator the model means. A time step longer than a time constant gives "
            f"this: a .nir file read with --dt > tau (beta = 1 - dt/tau < 0), Norse's dt * tau_mem_inv > 1, "
            f"SpikingJelly's tau < 1. Use a shorter time step (for a .nir file, a --dt below its smallest tau), "
            f"or fix the parameter in the model.")
