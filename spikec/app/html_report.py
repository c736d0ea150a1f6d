"""``report.html``: one self-contained page (inline CSS and SVG, no script, no network) that opens from disk.

``write_html(report, before, after, path)`` draws a compile: the IR graph before and after the passes
(``spikec.app.html_graph``), the pass table with its mismatches and firing margins, per-layer firing rates and
(Lava) float-vs-fixed agreement as bar plots, parameters before and after, the energy estimate and NeuroBench's
metric names, each target's verdict, and the warnings. ``inspect_html(graph, path)`` draws a model without
compiling it (``spikec inspect MODEL --html OUT.html``). Every string from the report or the graph is escaped.
"""
import json
from pathlib import Path

import numpy as np

from spikec.app.html_graph import cap, esc, graph_svg
from spikec.app.html_raster import activity_figures
from spikec.app.summary import target_text
from spikec.core.cost import partition_report
from spikec.ir.errors import BadInput
from spikec.ir.graph import Graph
from spikec.core.metrics import neurobench_from_report
from spikec.core.report import layers_report
from spikec.core.serialize import load_graph

VERDICT_KEYS = ("exact", "bit_exact", "spike_exact")
CODINGS = ("ttfs",)
BAR_W, BAR_ROW, BAR_LABEL = 260, 18, 170

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px;word-break:break-all}
main{padding:8px 24px 40px}section{background:#fff;border:1px solid #dde1e7;border-radius:8px;margin:16px 0;
padding:10px 16px}h2{font-size:16px;margin:6px 0 10px}h3{font-size:14px;margin:12px 0 6px}
table{border-collapse:collapse;font-size:13px;margin:4px 0 8px}th,td{border:1px solid #dde1e7;padding:3px 8px;
text-align:left;vertical-align:top;max-width:520px;overflow-wrap:anywhere}th{background:#eef1f5}
td.num{text-align:right;font-variant-numeric:tabular-nums}.ok{color:#0a7a36;font-weight:600}
.bad{color:#b3261e;font-weight:600}.muted{color:#667085}.verdict{display:inline-block;padding:2px 10px;
border-radius:12px;font-weight:700}.verdict.ok{background:#d8f5e3}.verdict.bad{background:#fde2e0}
.scroll{overflow:auto;max-height:80vh;border:1px solid #dde1e7;border-radius:6px;background:#fcfcfd}
.graphs{display:flex;flex-wrap:wrap;gap:16px}.graphs>figure{flex:1 1 420px;min-width:0;margin:0}
figcaption{font-weight:600;margin:4px 0}pre{white-space:pre-wrap;font-size:12px;margin:4px 0}
.legend span{display:inline-block;margin-right:14px}.sw{display:inline-block;width:12px;height:12px;
border:1px solid #555;border-radius:2px;vertical-align:middle;margin-right:4px}
svg.graph .node rect{stroke:#475467;stroke-width:1}svg.graph .kind-binary rect{fill:#cfe3ff}
svg.graph .kind-integer rect{fill:#ffdcb3}svg.graph .kind-real rect{fill:#e6e8ec}
svg.graph .syn-AC rect{stroke:#0a7a36;stroke-width:3}svg.graph .syn-MAC rect{stroke:#b3261e;stroke-width:3}
svg.graph .new rect,svg.graph .changed rect{stroke-dasharray:6 3}svg.graph .removed{opacity:.45}
svg.graph text{font:11px system-ui,sans-serif;fill:#1d2330}svg.graph text.label{font-weight:600}
svg.graph text.badge{font-weight:700;font-size:10px}svg.graph .syn-AC text.badge{fill:#0a7a36}
svg.graph .syn-MAC text.badge{fill:#b3261e}svg.graph .edge{fill:none;stroke:#98a2b3;stroke-width:1.2}
svg.graph .arrowhead{fill:#98a2b3}svg.graph .host-partition rect{fill:#fff4e5;stroke:#c4320a;
stroke-dasharray:5 4;stroke-width:1.5}svg.graph .host-partition text{fill:#c4320a;font-size:10px}
svg.bars text{font:11px system-ui,sans-serif;fill:#1d2330}svg.bars rect.bar{fill:#4f7cc2}
svg.bars rect.track{fill:#eef1f5}
svg.raster,svg.trace{font:11px system-ui,sans-serif;display:block;margin:4px 0}svg.raster rect.frame{fill:#fcfcfd;
stroke:#dde1e7}svg.raster rect.spike{fill:#1d2330}svg.raster rect.nearest{fill:#c4320a}svg.raster text,
svg.trace text{fill:#667085}svg.trace polyline.membrane{fill:none;stroke:#4f7cc2;stroke-width:1.6}
svg.trace line.threshold{stroke:#c4320a;stroke-dasharray:5 4}svg.trace line.fired{stroke:#1d2330;stroke-width:2}
figure.layer-activity{margin:10px 0 18px}.badges{display:flex;flex-wrap:wrap;gap:6px}.badge{display:inline-block;
padding:1px 9px;border-radius:10px;font-size:12px;font-weight:600;background:#eef1f5}.badge.ok{background:#d8f5e3}
.badge.bad{background:#fde2e0}.badge.refused{background:#fff0d6;color:#8a4b00}.reason{white-space:pre-wrap;
font-size:12px;margin:4px 0}
"""


def _fmt(v, digits: int = 4) -> str:
    if v is None:
        return "\u2013"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 1e4 else f"{v:.{digits}g}"
    return str(v)


def _cell(v, cls: str = "") -> str:
    num = isinstance(v, (int, float)) and not isinstance(v, bool)
    classes = " ".join(c for c in (cls, "num" if num else "") if c)
    return f'<td class="{classes}">{esc(_fmt(v))}</td>' if classes else f"<td>{esc(_fmt(v))}</td>"


def table(table_id: str, headers, rows, empty: str = "none") -> str:
    """A table with escaped cells (a cell may be a pre-rendered ``("html", markup)`` pair)."""
    if not rows:
        return f'<p class="muted" id="{esc(table_id)}">{esc(empty)}</p>'
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(c[1] if isinstance(c, tuple) and c and c[0] == "html" else _cell(c)
                                    for c in row) + "</tr>" for row in rows)
    return f'<table id="{esc(table_id)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _ok(flag, yes: str = "yes", no: str = "NO") -> tuple:
    if flag is None:
        return ("html", '<td class="muted">\u2013</td>')
    return ("html", f'<td class="{"ok" if flag else "bad"}">{esc(yes if flag else no)}</td>')


def bar_chart(chart_id: str, rows, *, vmax: float | None = None, unit: str = "", empty: str = "nothing to plot") -> str:
    """A horizontal bar plot as inline SVG: ``rows`` of (label, value); one ``<g class="bar-row">`` per row."""
    rows = [(str(label), float(v)) for label, v in rows if v is not None]
    if not rows:
        return f'<p class="muted" id="{esc(chart_id)}">{esc(empty)}</p>'
    top = vmax if vmax else max(max(v for _, v in rows), 1e-300)
    width, height = BAR_LABEL + BAR_W + 90, len(rows) * BAR_ROW + 6
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="bars" id="{esc(chart_id)}" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{esc(chart_id)}">']
    for k, (label, v) in enumerate(rows):
        y, w = 3 + k * BAR_ROW, max(0.0, min(1.0, v / top)) * BAR_W
        parts.append(f'<g class="bar-row"><title>{esc(label)}: {esc(_fmt(v, 6))}{esc(unit)}</title>'
                     f'<text x="{BAR_LABEL - 6}" y="{y + 12}" text-anchor="end">{esc(cap(label, 26))}</text>'
                     f'<rect class="track" x="{BAR_LABEL}" y="{y + 2}" width="{BAR_W}" height="{BAR_ROW - 5}"/>'
                     f'<rect class="bar" x="{BAR_LABEL}" y="{y + 2}" width="{w:.1f}" height="{BAR_ROW - 5}"/>'
                     f'<text x="{BAR_LABEL + BAR_W + 6}" y="{y + 12}">{esc(_fmt(v))}{esc(unit)}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def _section(sid: str, title: str, *body: str) -> str:
    return f'<section id="{esc(sid)}"><h2>{esc(title)}</h2>{"".join(body)}</section>'


def _legend() -> str:
    items = [("#cfe3ff", "binary spikes"), ("#ffdcb3", "integer spikes"), ("#e6e8ec", "real values")]
    swatches = "".join(f'<span><i class="sw" style="background:{c}"></i>{esc(t)}</span>' for c, t in items)
    return (f'<p class="legend">{swatches}<span><i class="sw" style="border:3px solid #0a7a36"></i>AC synapse</span>'
            '<span><i class="sw" style="border:3px solid #b3261e"></i>MAC synapse</span>'
            '<span><i class="sw" style="border:2px dashed #c4320a;background:#fff4e5"></i>host partition</span>'
            '<span><i class="sw" style="border:2px dashed #475467"></i>added or changed by a pass</span>'
            '<span><i class="sw" style="opacity:.45;background:#e6e8ec"></i>removed by the passes</span>'
            '<span class="muted">hover a node for its full name, type and scope</span></p>')


def _figure(svg: str, caption: str, lay) -> str:
    notes = "".join(f'<p class="muted">{esc(n)}</p>' for n in lay.notes)
    return (f'<figure><figcaption>{esc(caption)} <span class="muted">({esc(lay.engine)} layout)</span>'
            f'</figcaption><div class="scroll">{svg}</div>{notes}</figure>')


def graphs_section(report: dict, before: Graph | None, after: Graph) -> str:
    """The graph before and after the passes, each in its own ``<svg>``; AC/MAC from ``report["layers"]``."""
    host = set((report.get("partitions") or {}).get("host") or ())
    layers = {l["name"]: l.get("synaptic_kind") for l in report.get("layers") or [] if "name" in l}
    changed = {name for p in report.get("passes") or [] for name in p.get("nodes_changed") or []}
    figures = []
    if before is not None:
        gone = {n.name: {"removed"} for n in before.nodes if n.name not in after}
        both = {n.name: {"changed"} for n in before.nodes if n.name in changed and n.name not in gone}
        svg, lay = graph_svg(before, svg_id="graph-before-svg", marks={**gone, **both},
                             title="the traced graph, before the passes")
        figures.append(_figure(svg, f"Before the passes: {len(before.nodes)} nodes", lay))
    marks = {n.name: {"new"} for n in after.nodes if before is not None and n.name not in before}
    marks.update({n.name: {"changed"} for n in after.nodes if n.name in changed and n.name not in marks})
    synaptic = {n.name: layers.get(n.name) for n in after.nodes} if layers else None
    renamed = renamed_nodes(report, before, after)
    svg, lay = graph_svg(after, svg_id="graph-after-svg", synaptic=synaptic, host=host, marks=marks,
                         title="the deployed graph, after the passes",
                         sources={r[0]: " + ".join(s for s, _ in r[2] if s != r[0]) for r in renamed})
    figures.append(_figure(svg, f"{'After the passes (deployed)' if before is not None else 'Graph'}: "
                                f"{len(after.nodes)} nodes", lay))
    missing = "" if before is not None else \
        '<p class="muted">The graph before the passes was not given: only the deployed graph is drawn.</p>'
    rows = [[name, op, ", ".join(f"{s} ({o})" if o else s for s, o in srcs), ", ".join(passes) or "\u2013"]
            for name, op, srcs, passes in renamed]
    names = ("<h3>Renamed and merged nodes</h3><p class=\"muted\">A pass that merges nodes keeps one name (fold_batchnorm "
             "folds a BatchNorm into the conv before it and keeps the BatchNorm's name): each deployed node below with "
             "the source nodes it came from.</p>" + table("renamed-table", ["deployed node", "op", "from (before the "
                                                                            "passes)", "pass"], rows,
                                                          "no node was renamed or merged"))
    return _section("graphs", "IR graph", _legend(), missing, f'<div class="graphs">{"".join(figures)}</div>', names)


def renamed_nodes(report: dict, before: Graph | None, after: Graph) -> list[tuple]:
    """``(name, op, [(source node, its op)], [passes])`` for each deployed node whose source module (its scope)
    is another node's name and whose own name held another op before the passes (or did not exist)."""
    changed: dict[str, list[str]] = {}
    for p in report.get("passes") or []:
        for name in p.get("nodes_changed") or []:
            changed.setdefault(name, []).append(str(p.get("name")))
    old = {n.name: n.op for n in before.nodes} if before is not None else {}
    rows = []
    for n in after.nodes:
        if n.op == "input" or not n.scope or n.scope == n.name or (before is not None and old.get(n.name) == n.op):
            continue
        if before is None and n.name not in changed:
            continue  # without the graph before, only a node a pass reports changed is known to be renamed
        srcs = [(s, old.get(s, "")) for s in dict.fromkeys((n.scope, n.name)) if before is None or s in old]
        if srcs:
            passes = list(dict.fromkeys(p for s in (n.scope, n.name) for p in changed.get(s, ())))
            rows.append((n.name, n.op, srcs, passes))
    return rows


def passes_section(report: dict) -> str:
    """Each pass: nodes changed, parameters, verification, mismatches; then every first mismatch and margins."""
    rows, skipped, mismatches = [], [], []
    for p in report.get("passes") or []:
        comp = p.get("comparison") or {}
        changed = p.get("nodes_changed") or []
        names = ", ".join(cap(n, 30) for n in changed[:6]) + (f" (+{len(changed) - 6})" if len(changed) > 6 else "")
        rows.append([p.get("name"), f"{len(changed)}: {names}" if changed else "0", p.get("params_before"),
                     p.get("params_after"), _ok(p.get("verified")), p.get("spike_mismatches"),
                     comp.get("real_mismatches"), p.get("max_rel_diff"), p.get("seconds"),
                     "; ".join(str(n) for n in p.get("notes") or [])])
        skipped += [[p.get("name"), s.get("node"), s.get("reason")] for s in p.get("skipped") or []]
        mismatches += [[f"pass {p.get('name')}", *_mismatch(m)] for m in comp.get("first_mismatches") or []]
    for key, label in (("frontend", "frontend (trace vs source)"), ("final", "final (deployed vs source)")):
        mismatches += [[label, *_mismatch(m)] for m in (report.get(key) or {}).get("first_mismatches") or []]
    body = [table("passes-table", ["pass", "nodes changed", "params before", "params after", "verified",
                                   "spike mismatches", "real mismatches", "max rel diff", "seconds", "notes"],
                  rows, "no pass ran"),
            "<h3>Skipped matches</h3>", table("skipped-table", ["pass", "node", "reason"], skipped),
            "<h3>First mismatches</h3>",
            table("mismatches-table", ["check", "node", "step", "index", "expected", "got", "firing margin"],
                  mismatches, "no mismatch: every check agreed")]
    ties = (report.get("final") or {}).get("near_threshold")
    if ties:
        body.append(f"<h3>Firing margins</h3><p>{esc(_fmt(ties.get('count')))} neuron values within "
                    f"{esc(_fmt(ties.get('tolerance')))} of their threshold ({esc(_fmt(ties.get('exact_ties')))} "
                    f"exact ties); {esc(_fmt((report.get('input') or {}).get('probes')))} probe samples.</p>")
        body.append(table("margins-table", ["node", "near threshold"],
                          [[k, v if not isinstance(v, dict) else v.get("count")]
                           for k, v in (ties.get("by_node") or {}).items()], "no node near its threshold"))
    return _section("passes", "Passes", *body)


def _mismatch(m: dict) -> list:
    return [m.get("node"), m.get("step"), str(m.get("index")), m.get("expected"), m.get("got"), m.get("margin")]


def _rates(report: dict) -> list[tuple[str, float]]:
    rich = report.get("firing_rates")
    if isinstance(rich, dict) and rich:
        return [(k, v.get("rate") if isinstance(v, dict) else v) for k, v in rich.items()]
    return list(((report.get("cost") or {}).get("firing_rates") or {}).items())


def _targets(report: dict) -> dict:
    many = report.get("targets")
    if isinstance(many, dict) and many:
        return many
    one = report.get("target")
    return {one.get("name", "target"): one} if isinstance(one, dict) else {}


def _rasters(graph: Graph | None, inputs, activity=None) -> list[str]:
    """The raster and nearest-neuron trace of every neuron layer, or why they are not drawn (``activity``: the
    layers already read from the compile's run, ``html_raster.recorded_activity``; else the graph is run)."""
    head = "<h3>Spike raster and membrane per neuron layer (the first sample of the verification inputs)</h3>"
    if graph is None or inputs is None:
        return [head, '<p class="muted" id="rasters">not drawn: the verification inputs were not given</p>']
    if len(graph.inputs) != 1 and not isinstance(inputs, dict):
        return [head, f'<p class="muted" id="rasters">not drawn: the graph has {len(graph.inputs)} inputs and '
                      'io.npz records one array</p>']
    try:
        return [head, activity_figures(graph, inputs, activity)]
    except Exception as e:  # the page must still be written; the reason is shown, not hidden
        return [head, f'<p class="bad" id="rasters">not drawn: {esc(type(e).__name__)}: {esc(e)}</p>']


def activity_section(report: dict, graph: Graph | None = None, inputs=None, activity=None) -> str:
    """Per-layer firing rates and each target's float-vs-fixed agreement as bar plots; the rasters and traces."""
    body = ["<h3>Firing rate per neuron layer (spikes per neuron per step)</h3>",
            bar_chart("firing-rates-chart", _rates(report), vmax=max([1.0] + [v for _, v in _rates(report)
                                                                            if v is not None]),
                      empty="no neuron layer recorded a firing rate")]
    for name, t in _targets(report).items():
        ffx = (t or {}).get("float_vs_fixed") if isinstance(t, dict) else None
        if not isinstance(ffx, dict):
            continue
        rows = []
        for layer, v in (ffx.get("per_layer") or {}).items():
            agree = v.get("spike_agreement", v.get("class_agreement")) if isinstance(v, dict) else None
            rows.append((layer, None if agree is None else 100.0 * agree))
        body += [f"<h3>{esc(name)}: float vs fixed-point agreement (approximate, measured)</h3>",
                 f'<p class="muted">{esc(ffx.get("meaning", ""))}</p>',
                 bar_chart(f"float-vs-fixed-{name}-chart", rows, vmax=100.0, unit="%")]
    return _section("activity", "Activity", *body, *_rasters(graph, inputs, activity))


def params_section(report: dict) -> str:
    p = report.get("params") or {}
    rows = [[name, c.get("source"), c.get("deployed")] for name, c in (p.get("by_module") or {}).items()]
    rows.append([("html", "<td><b>total</b></td>"), p.get("source"), p.get("deployed")])
    return _section("params", "Parameters, source and deployed",
                    table("params-table", ["module", "source", "deployed"], rows))


def cost_section(report: dict) -> str:
    """Energy estimate, per-layer synaptic operations, and NeuroBench's names for them."""
    c = report.get("cost") or {}
    k = c.get("energy_constants_pj") or {}
    share = report.get("ac_share", c.get("ac_share"))
    rows = [[l.get("name"), l.get("op"), l.get("synaptic_kind"), l.get("dense_ops"), l.get("ac_ops"),
             l.get("mac_ops"), l.get("energy_pj")] for l in c.get("layers") or []]
    energy = c.get("synaptic_energy_pj")
    body = [f"<p>Synaptic energy per inference: <b>{esc(_fmt(None if energy is None else energy / 1e6))} \u00b5J"
            f"</b> ({esc(_fmt(c.get('total_ac_ops')))} AC \u00d7 {esc(_fmt(k.get('ac')))} pJ + "
            f"{esc(_fmt(c.get('total_mac_ops')))} MAC \u00d7 {esc(_fmt(k.get('mac')))} pJ; {esc(k.get('source', ''))}; "
            f"synaptic arithmetic only). AC share of conv ops: "
            f"{esc('n/a' if share is None else f'{100 * share:.1f}%')}. "
            f'<span class="muted">{esc(c.get("per_inference", ""))}</span></p>',
            table("cost-table", ["layer", "op", "synapse", "dense ops", "AC ops", "MAC ops", "energy pJ"], rows,
                  "no synaptic layer"),
            bar_chart("energy-chart", [(l.get("name"), l.get("energy_pj")) for l in c.get("layers") or []],
                      unit=" pJ", empty="no synaptic energy")]
    nb = report.get("neurobench") if isinstance(report.get("neurobench"), dict) else neurobench_from_report(report)
    names = ("Effective_MACs", "Effective_ACs", "Dense", "ActivationSparsity")
    basis = "exact: from the run" if nb.get("exact") else "approximate: from the report, spikec's counting"
    body += [f"<h3>NeuroBench metrics ({esc(basis)})</h3>",
             table("neurobench-table", ["metric", "value"], [[n, nb.get(n)] for n in names]),
             "".join(f'<p class="muted">{esc(n)}</p>' for n in nb.get("notes") or [])]
    return _section("cost", "Cost and energy (estimate)", *body)


def _verdict(t: dict) -> tuple:
    if not isinstance(t, dict):
        return _ok(None)
    if t.get("refused"):
        return ("html", '<td class="bad">refused</td>')
    if t.get("emitted") is False:
        return ("html", '<td class="bad">not emitted</td>')
    flags = [t[k] for k in VERDICT_KEYS if isinstance(t.get(k), bool)]
    q = t.get("quantization_checks")
    flags += [q["ok"]] if isinstance(q, dict) and isinstance(q.get("ok"), bool) else []
    flags += [t["ok"]] if isinstance(t.get("ok"), bool) else []
    return _ok(all(flags) if flags else None, "pass", "FAIL")


def _badge(text: str, cls: str) -> str:
    return f'<span class="badge {cls}">{esc(text)}</span>'


def _target_badges(t: dict) -> str:
    """A target's verdicts as badges, then every reason it gives (a refusal's, a failure's, a consumer's) in full."""
    if not isinstance(t, dict):
        return f'<pre class="reason">{esc(t)}</pre>'
    badges, reasons = [], []
    if t.get("refused") or t.get("internal") or t.get("emitted") is False:
        badges.append(_badge("internal failure" if t.get("internal") else "refused" if t.get("refused")
                             else "not emitted", "bad" if t.get("internal") else "refused"))
    for k in VERDICT_KEYS:
        if isinstance(t.get(k), bool):
            badges.append(_badge(f"{k} {'yes' if t[k] else 'no'}", "ok" if t[k] else "bad"))
    if isinstance(t.get("bit_exact_vs_source"), bool):  # false for a calibrated model: measured, not a failure
        badges.append(_badge("bit-exact vs source" if t["bit_exact_vs_source"] else
                             "vs source: approximate (calibrated; agreement measured)", "ok" if t["bit_exact_vs_source"]
                             else ""))
    q = t.get("quantization_checks")
    if isinstance(q, dict) and isinstance(q.get("ok"), bool):
        badges.append(_badge(f"quantization checks {'pass' if q['ok'] else 'FAIL'}", "ok" if q["ok"] else "bad"))
    for name, c in (t.get("consumers") or {}).items():
        if not isinstance(c, dict):
            continue
        ran = c.get("ran")
        badges.append(_badge(f"{name}: " + (f"spike_exact {'yes' if c.get('spike_exact') else 'no'}" if ran
                                            else "not run"), "ok" if ran and c.get("spike_exact") else
                             "bad" if ran else "refused"))
        if not ran and c.get("reason"):
            reasons.append(f"{name}: {c['reason']}")
    streaming = t.get("streaming")
    if isinstance(streaming, dict) and streaming.get("refused"):
        reasons.append(f"streaming model: {streaming['refused']}")
    for key in ("reason", "error", "remedy"):
        if t.get(key) and str(t[key]) not in "\n".join(reasons):
            reasons.append(f"{key}: {t[key]}" if key != "reason" else str(t[key]))
    summary = t.get("summary") if isinstance(t.get("summary"), str) else target_text(t)
    return (f'<div class="badges">{"".join(badges)}</div>'
            + "".join(f'<p class="reason">{esc(r)}</p>' for r in reasons)
            + f'<details><summary class="muted">terminal summary</summary><pre>{esc(_dedent(summary))}</pre></details>')


def targets_section(report: dict) -> str:
    rows = [[name, _verdict(t), ("html", f"<td>{_target_badges(t)}</td>")] for name, t in _targets(report).items()]
    rows += [[f"coding {name}", _verdict(report[name]), ("html", f"<td><pre>{esc(_coding_text(report[name]))}"
                                                                 f"</pre></td>")]
             for name in CODINGS if isinstance(report.get(name), dict)]
    return _section("targets", "Targets", table("targets-table", ["target", "verdict", "checks and reasons"], rows,
                                                "no target (--target none)"))


def _dedent(text) -> str:
    return "\n".join(line.strip() for line in str(text).splitlines())


def _coding_text(c: dict) -> str:
    keys = [k for k in ("ok", "exact", "summary") if k in c]
    return "; ".join(f"{k}: {c[k]}" for k in keys) or ", ".join(sorted(c))


def warnings_section(report: dict) -> str:
    rows = [[w.get("node"), w.get("kind"), w.get("message")] if isinstance(w, dict) else ["", "", w]
            for w in report.get("warnings") or []]
    return _section("warnings", "Warnings", table("warnings-table", ["node", "kind", "message"], rows,
                                                  "no warnings"))


def layers_section(report: dict) -> str:
    rows = [[l.get("name"), l.get("op"), l.get("scope"), "\u00d7".join(map(str, l.get("shape") or [])),
             l.get("operand_kind"), l.get("output_kind"), l.get("synaptic_kind"),
             "host" if l.get("host") else l.get("lowering") or l.get("product")]
            for l in report.get("layers") or []]
    return _section("layers", "Layers", table("layers-table", ["node", "op", "scope", "shape", "operand",
                                                               "output", "synapse", "notes"], rows, "no layers"))


def summary_section(report: dict) -> str:
    """The verdict, the inputs, the two comparisons with the source, and where the files came from."""
    rows = []
    inp = report.get("input") or {}
    if inp:
        rows.append(["inputs", f"[T={inp.get('steps')}, B={inp.get('batch')}, "
                               f"{', '.join(map(str, inp.get('shape') or []))}] {inp.get('kind')} ({inp.get('source')})"])
    for key, label in (("frontend", "trace vs source"), ("final", "deployed vs source")):
        c = report.get(key) or {}
        if c:
            rows.append([label, f"{'equivalent' if c.get('equivalent') else 'NOT equivalent'}: "
                                f"{_fmt(c.get('spikes_compared'))} spikes, {_fmt(c.get('values_compared'))} values "
                                f"compared, {_fmt(c.get('spike_mismatches'))} spike mismatches, max rel diff "
                                f"{_fmt(c.get('max_rel_diff'))}"])
    prec = report.get("source_precision") or {}
    if prec.get("explanation") or prec.get("error"):
        rows.append(["source precision", prec.get("explanation") or prec.get("error")])
    for what, f in ((report.get("provenance") or {}).items()):
        if isinstance(f, dict) and f.get("path"):
            rows.append([f"{what}", f"{f.get('path')} (sha256 {str(f.get('sha256', ''))[:16]}\u2026)"])
    return _section("summary", "Summary", table("summary-table", ["", ""], rows, "no summary in the report"))


def page(title: str, verdict: bool | None, sections) -> str:
    badge = "" if verdict is None else \
        f'<span class="verdict {"ok" if verdict else "bad"}">{"EQUIVALENT" if verdict else "NOT EQUIVALENT"}</span>'
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "img-src data:\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">{GENERATOR}<title>{esc(title)}</title>"
            f"<style>{CSS}</style></head><body><header><h1>{esc(title)} {badge}</h1></header>"
            f"<main>{''.join(sections)}</main></body></html>\n")


def render_report(report: dict, before: Graph | None, after: Graph, inputs=None, activity=None) -> str:
    """The page of a compile (``write_html`` writes it); ``inputs`` ``[T, B, ...]`` for the rasters (``activity``:
    their layers already read from a run of ``after`` on them, ``html_raster.recorded_activity``)."""
    sections = [summary_section(report), graphs_section(report, before, after), passes_section(report),
                layers_section(report), activity_section(report, after, inputs, activity), params_section(report),
                cost_section(report),
                targets_section(report), warnings_section(report)]
    return page(f"spikec report: {report.get('model') or after.meta.get('source') or 'model'}",
                report.get("equivalent") if isinstance(report.get("equivalent"), bool) else None, sections)


def write_html(report: dict, before: Graph | None, after: Graph, path, inputs=None, activity=None) -> Path:
    """Write ``report.html`` for a compile: ``report`` as in report.json, ``before`` the traced graph (None if not
    kept), ``after`` the deployed graph; ``inputs`` the verification inputs, by default the ``input`` of the
    ``io.npz`` beside ``path`` (the OUTDIR's, written before the page); ``activity`` the rasters' layers when the
    compile read them from its own run of ``after`` on those inputs (else ``after`` is run on sample 0 here).
    Returns the path written."""
    path = Path(path)
    inputs = recorded_inputs(path.parent) if inputs is None else inputs
    path.write_text(render_report(report, before, after, inputs, activity), encoding="utf-8")
    return path


def recorded_inputs(directory):
    """The ``input`` of ``directory/io.npz`` (a regular file), or None."""
    io_path = Path(directory) / "io.npz"
    if not io_path.is_file() or io_path.is_symlink():
        return None
    with np.load(io_path, allow_pickle=False) as io:
        return io["input"] if "input" in io.files else None


def render_inspect(graph: Graph, title: str | None = None) -> str:
    """The page of ``spikec inspect --html``: the traced graph, its layers and host partitions, no run."""
    report = {"layers": layers_report(graph), "partitions": partition_report(graph)}
    host = report["partitions"]["host"]
    note = (f'<p>{len(host)} node(s) on a host partition; {_fmt(report["partitions"]["values_per_step"])} values '
            f'cross per step per sample.</p>' if host else "<p>No host partition.</p>")
    sections = [graphs_section(report, None, graph), _section("partitions", "Partitions", note),
                layers_section(report)]
    return page(f"spikec inspect: {title or graph.meta.get('source') or 'model'}", None, sections)


GENERATOR = '<meta name="generator" content="spikec">'  # marks a page spikec wrote, which it may overwrite


def inspect_html(graph: Graph, path, title: str | None = None) -> Path:
    """Write the inspect page of ``graph`` (a model drawn without compiling) to ``path``; returns it.

    An existing file is replaced only if spikec wrote it (it carries ``GENERATOR``): never a user's file."""
    path = Path(path)
    if path.is_symlink() or path.is_dir() or (path.exists() and GENERATOR not in path.read_text(errors="replace")):
        raise BadInput(f"{str(path)!r} exists and is not a page spikec wrote", where="--html",
                       remedy="give --html a new file name (spikec replaces only its own pages)")
    path.write_text(render_inspect(graph, title), encoding="utf-8")
    return path


def write_outdir_html(outdir, path=None) -> Path:
    """``report.html`` for an existing OUTDIR from its ``report.json`` and ``graph.json`` (the graph before the
    passes is not stored there: only the deployed graph is drawn). Written to ``path`` or ``OUTDIR/report.html``."""
    outdir = Path(outdir)
    report = json.loads((outdir / "report.json").read_text())
    return write_html(report, None, load_graph(outdir), path or outdir / "report.html", recorded_inputs(outdir))


__all__ = ["write_html", "inspect_html", "write_outdir_html", "render_report", "render_inspect", "bar_chart", "table"]
