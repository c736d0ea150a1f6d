"""The spike raster of every neuron layer and the membrane trace of its neuron nearest the threshold, as inline
SVG for ``report.html``.

``neuron_activity(graph, inputs)`` runs the deployed graph once in the reference interpreter on the first sample
of the verification inputs (a compile reads the same from its own run of the deployed graph instead,
``recorded_activity``) and keeps, per neuron node (a node that reports a firing margin), only what the page
draws: the spikes of ``MAX_ROWS`` neurons around the nearest one (defined next), and for the neuron whose firing margin ``|U - boundary|``
comes closest to zero over the run, its margin and spikes at every step. For a binary neuron of ``MEMBRANE_OPS``
(its margin is ``|U - threshold|``) with a ``threshold`` the membrane is read back as ``U = threshold + margin`` on a step it fired and ``threshold -
margin`` on one it did not (it fires on ``U >= threshold``, or ``>`` for Norse, where a tie is margin 0 either
way): exact up to the one rounding of that sum. For another neuron (integer spike counts and their unrolled
sub-steps, whose boundaries are multiples of the threshold; an op without ``threshold``) the trace is the margin itself, the distance to the nearest firing boundary, and says so.
"""
from dataclasses import dataclass

import numpy as np

from spikec.app.html_graph import cap, esc
from spikec.core.interpreter import Trace, as_inputs, run
from spikec.ir.graph import Graph
from spikec.ops import facts

# ops whose firing margin is |U - threshold| with S = [U >= threshold] (or >): U is read back from margin and spike
MEMBRANE_OPS = facts("threshold_margin").keys()   # their cards' threshold_margin, read live
MAX_ROWS = 64                 # neurons drawn per raster (the first ones, in the layer's row-major order)
RASTER_W, RASTER_H, TRACE_W, TRACE_H, PAD = 520, 150, 520, 120, 34


@dataclass(frozen=True)
class LayerActivity:
    """One neuron node on one sample: ``spikes`` ``[T, rows]`` of neurons ``first ...`` (a window holding the nearest
    neuron); the nearest neuron's index,
    its ``trace`` ``[T]`` (the membrane, or the margin when ``membrane`` is False), ``fired`` ``[T]`` and
    ``threshold`` (None without one)."""
    node: str
    op: str
    neurons: int
    spikes: np.ndarray
    first: int
    total_spikes: float
    nearest: int
    min_margin: float
    trace: np.ndarray
    fired: np.ndarray
    threshold: float | None
    membrane: bool


def _threshold(node, shape) -> np.ndarray | None:
    """The node's threshold per neuron (flattened row-major), when it is a scalar or one per channel."""
    th = node.params.get("threshold")
    if th is None:
        return None
    th = np.asarray(th, dtype=np.float64)
    if th.ndim == 0:
        return np.full(int(np.prod(shape, dtype=np.int64)), float(th))
    if th.ndim == 1 and shape and th.shape[0] == shape[0]:
        return np.broadcast_to(th.reshape(-1, *([1] * (len(shape) - 1))), shape).reshape(-1)
    return None


def neuron_activity(graph: Graph, inputs) -> list[LayerActivity]:
    """Each neuron node's raster and nearest-to-threshold trace on sample 0 of ``inputs`` (``[T, B, ...]``)."""
    first = {k: np.asarray(v)[:, :1] for k, v in as_inputs(graph, inputs).items()}
    nodes, layers = {n.name: n for n in graph.nodes}, []

    def visit(name, value, margin):
        if margin is not None:
            layers.append(_layer(nodes[name], value, margin))

    run(graph, first, record="outputs", visit=visit)
    return layers


def recorded_activity(graph: Graph, trace: Trace) -> list[LayerActivity] | None:
    """``neuron_activity(graph, inputs)`` read from ``trace``, a run of ``graph`` on ``inputs`` that recorded every
    node (the compile's run of the deployed graph, the run its checks proved), instead of a second run: sample 0
    of each neuron node's spikes and margin. No op mixes samples, so these are what a run of sample 0 alone
    computes (tests/app/test_recorded_activity.py holds them equal). None when ``trace`` lacks a node (a partial
    recording): the page then runs the graph."""
    if any(n.name not in trace.values for n in graph.nodes):
        return None
    return [_layer(n, trace.values[n.name][:, :1], trace.margins[n.name][:, :1])
            for n in graph.nodes if n.name in trace.margins]


def _layer(node, value: np.ndarray, margin: np.ndarray) -> LayerActivity:
    """What the page draws of one neuron node's ``value`` (spikes) and ``margin``, both ``[T, 1, ...]``."""
    t = value.shape[0]
    s, m = value.reshape(t, -1).astype(np.float64), margin.reshape(t, -1).astype(np.float64)
    lowest = m.min(axis=0)
    i = int(np.argmin(lowest))
    th = _threshold(node, node.type.shape) if node.type.kind == "binary" and node.op in MEMBRANE_OPS else None
    fired = s[:, i] > 0
    membrane = th is not None and th.shape[0] == m.shape[1]
    trace = np.where(fired, th[i] + m[:, i], th[i] - m[:, i]) if membrane else m[:, i]
    start = max(0, min(i - MAX_ROWS // 2, s.shape[1] - MAX_ROWS))
    return LayerActivity(node.name, node.op, s.shape[1], s[:, start:start + MAX_ROWS].copy(), start, float(s.sum()),
                         i, float(lowest[i]), trace, fired, float(th[i]) if membrane else None, membrane)


def raster_svg(a: LayerActivity, svg_id: str) -> str:
    """Spikes as marks: x the time step, y the neuron; a count's mark is as dark as its share of the largest."""
    t, rows = a.spikes.shape
    cw, rh = RASTER_W / max(t, 1), min(8.0, RASTER_H / max(rows, 1))
    height = rows * rh + PAD
    top = float(a.spikes.max()) if a.spikes.size and a.spikes.max() > 0 else 1.0
    marks = []
    for step, neuron in zip(*np.nonzero(a.spikes)):
        v = a.spikes[step, neuron]
        marks.append(f'<rect class="spike" x="{PAD + step * cw:.1f}" y="{neuron * rh:.1f}" width="{max(cw - 1, 1):.1f}" '
                     f'height="{max(rh - 0.5, 1):.1f}" fill-opacity="{min(1.0, 0.35 + 0.65 * v / top):.2f}"/>')
    row = a.nearest - a.first
    nearest = (f'<rect class="nearest" x="{PAD - 6}" y="{row * rh:.1f}" width="4" height="{max(rh, 1):.1f}">'
               f'<title>neuron {a.nearest}: nearest its threshold</title></rect>' if 0 <= row < rows else "")
    axis = (f'<text x="{PAD}" y="{rows * rh + 14:.1f}">step 0</text>'
            f'<text x="{PAD + RASTER_W}" y="{rows * rh + 14:.1f}" text-anchor="end">step {t - 1}</text>'
            f'<text x="0" y="10">n{a.first}</text><text x="0" y="{rows * rh:.1f}">n{a.first + rows - 1}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="raster" id="{esc(svg_id)}" width="{PAD + RASTER_W + 8}" '
            f'height="{height:.0f}" viewBox="0 0 {PAD + RASTER_W + 8} {height:.0f}" role="img" '
            f'aria-label="spike raster of {esc(a.node)}" data-spikes="{int(np.count_nonzero(a.spikes))}">'
            f'<rect class="frame" x="{PAD}" y="0" width="{RASTER_W}" height="{rows * rh:.1f}"/>'
            f'{"".join(marks)}{nearest}{axis}</svg>')


def trace_svg(a: LayerActivity, svg_id: str) -> str:
    """The nearest neuron's membrane (or margin) over the steps, its threshold dashed, its spikes ticked."""
    t = len(a.trace)
    values = [float(v) for v in a.trace] + ([a.threshold] if a.threshold is not None else [0.0])
    lo, hi = min(values), max(values)
    lo, hi = (lo - 0.5, hi + 0.5) if hi - lo < 1e-12 else (lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
    x = lambda k: PAD + (k * TRACE_W / max(t - 1, 1))
    y = lambda v: 8 + (hi - v) / (hi - lo) * (TRACE_H - 8)
    line = " ".join(f"{x(k):.1f},{y(float(v)):.1f}" for k, v in enumerate(a.trace))
    level = a.threshold if a.threshold is not None else 0.0
    name = "threshold" if a.threshold is not None else "boundary (margin 0)"
    ticks = "".join(f'<line class="fired" x1="{x(k):.1f}" y1="0" x2="{x(k):.1f}" y2="7"/>'
                    for k in np.nonzero(a.fired)[0])
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="trace" id="{esc(svg_id)}" width="{PAD + TRACE_W + 90}" '
            f'height="{TRACE_H + 22}" viewBox="0 0 {PAD + TRACE_W + 90} {TRACE_H + 22}" role="img" '
            f'aria-label="membrane of {esc(a.node)} neuron {a.nearest}">'
            f'<line class="threshold" x1="{PAD}" y1="{y(level):.1f}" x2="{PAD + TRACE_W}" y2="{y(level):.1f}"/>'
            f'<text x="{PAD + TRACE_W + 4}" y="{y(level) + 4:.1f}">{esc(name)}</text>'
            f'<polyline class="membrane" points="{line}"/>{ticks}'
            f'<text x="0" y="{y(hi) + 10:.1f}">{esc(f"{hi:.3g}")}</text><text x="0" y="{TRACE_H:.1f}">'
            f'{esc(f"{lo:.3g}")}</text><text x="{PAD}" y="{TRACE_H + 18}">step 0</text>'
            f'<text x="{PAD + TRACE_W}" y="{TRACE_H + 18}" text-anchor="end">step {t - 1}</text></svg>')


def activity_figures(graph: Graph, inputs, layers: list[LayerActivity] | None = None) -> str:
    """Every neuron layer's raster and trace, with what they show; a note when nothing could be drawn. ``layers``:
    ``neuron_activity(graph, inputs)`` already made (``recorded_activity``), else it is made here."""
    layers = neuron_activity(graph, inputs) if layers is None else layers
    if not layers:
        return '<p class="muted" id="rasters">no neuron layer in the deployed graph</p>'
    parts = ['<div id="rasters">']
    for k, a in enumerate(layers):
        shown = f"neurons {a.first}-{a.first + a.spikes.shape[1] - 1} of {a.neurons:,}"
        what = ("membrane U (pre-reset), read back as threshold \u00b1 firing margin" if a.membrane
                else "firing margin |U - boundary| (this neuron's boundaries are not one threshold to read U against)")
        parts.append(
            f'<figure class="layer-activity" data-node="{esc(a.node)}"><figcaption>{esc(cap(a.node, 60))} '
            f'<span class="muted">({esc(a.op)}; {esc(shown)}; {a.total_spikes:,.0f} spikes in all)</span></figcaption>'
            f'{raster_svg(a, f"raster-{k}")}'
            f'<p class="muted">Nearest its threshold: neuron {a.nearest} (min |U - boundary| = {a.min_margin:.3g}); '
            f'{esc(what)}; ticks mark its spikes, the mark left of the raster its row.</p>{trace_svg(a, f"trace-{k}")}</figure>')
    parts.append("</div>")
    return "".join(parts)
