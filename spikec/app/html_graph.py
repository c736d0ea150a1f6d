"""The IR graph as inline SVG for ``report.html``: a layout, then one ``<g class="node">`` per node.

The layout is graphviz ``dot``'s when ``dot`` is on PATH (run with ``-Tplain``; any failure falls back), else
spikec's own layered layout: longest-path layering (a node one row below its deepest input), edges spanning
several rows routed through invisible waypoints, rows ordered by barycentre sweeps (down, then up, a few
times) to cut crossings. A few hundred nodes stay legible: labels are capped (the full text is in each node's
``<title>`` tooltip) and the page scrolls the drawing.

Nodes are coloured by value kind (binary / integer / real), synaptic ops marked AC or MAC, host partitions
boxed, and nodes a pass added or changed outlined. Every user-controlled string is escaped here.
"""
import html
import shutil
import subprocess
from dataclasses import dataclass, field

from spikec.ir.graph import Graph
from spikec.core.report import synaptic_kind

NODE_W, NODE_H, GAP_X, GAP_Y, MARGIN = 188, 40, 22, 30, 16
WAYPOINT_W = 10
MAX_WAYPOINTS = 6000      # beyond this many edge waypoints, long edges are drawn straight
SWEEPS = 4
LABEL_CHARS = 24
DOT_TIMEOUT_S = 30


@dataclass
class Layout:
    """Node boxes (top-left corner, px) and each edge's polyline or cubic path points; the drawing's size."""
    boxes: dict[str, tuple[float, float]]
    edges: list[tuple[str, str, list[tuple[float, float]], bool]]  # src, dst, points, points are Bezier controls
    width: float
    height: float
    engine: str
    notes: list[str] = field(default_factory=list)


def esc(value) -> str:
    """Text or attribute value escaped for HTML/SVG (quotes too)."""
    return html.escape("" if value is None else str(value), quote=True)


def cap(text: str, limit: int = LABEL_CHARS) -> str:
    """``text`` cut to ``limit`` characters, keeping both ends (names differ at their ends)."""
    text = str(text)
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    return text[:head] + "\u2026" + text[len(text) - (limit - 1 - head):]


def _preds(graph: Graph) -> dict[str, list[str]]:
    return {n.name: [i for i in dict.fromkeys(n.inputs) if i in graph] for n in graph.nodes}


def _layers(graph: Graph, preds) -> dict[str, int]:
    """Longest-path layering: a node sits one row below its deepest input (inputs and sources on row 0)."""
    layer: dict[str, int] = {}
    for n in graph.nodes:   # topological order; an input not yet placed counts as row 0
        layer[n.name] = 1 + max((layer.get(i, 0) for i in preds[n.name]), default=-1)
    return layer


def _rows_with_waypoints(graph: Graph, preds, layer):
    """Rows of items (node names, or waypoint ids ``(src, dst, k)``) and the chains each edge runs through."""
    rows: list[list] = [[] for _ in range(max(layer.values(), default=0) + 1)]
    for n in graph.nodes:
        rows[layer[n.name]].append(n.name)
    span = sum(max(0, layer[d] - layer[s] - 1) for d in preds for s in preds[d])
    use_waypoints = span <= MAX_WAYPOINTS
    chains = {}
    for d in preds:
        for s in preds[d]:
            chain = [s]
            if use_waypoints:
                for k, row in enumerate(range(layer[s] + 1, layer[d])):
                    rows[row].append((s, d, k))
                    chain.append((s, d, k))
            chains[(s, d)] = chain + [d]
    return rows, chains, use_waypoints


def _neighbours(chains) -> tuple[dict, dict]:
    """Each item's items in the row above (``up``) and below (``down``), through the waypoint chains."""
    up, down = {}, {}
    for chain in chains.values():
        for a, b in zip(chain, chain[1:]):
            down.setdefault(a, []).append(b)
            up.setdefault(b, []).append(a)
    return up, down


def _order(rows, up, down) -> None:
    """Barycentre sweeps: each row sorted by the mean position of its neighbours in the row above (down
    sweep) or below (up sweep); an item with no neighbour there keeps its place."""
    for _ in range(SWEEPS):
        for sweep, neighbours in ((range(1, len(rows)), up), (range(len(rows) - 2, -1, -1), down)):
            for r in sweep:
                ref = rows[r - 1] if neighbours is up else rows[r + 1]
                where = {item: i for i, item in enumerate(ref)}
                scale = len(rows[r]) / max(len(ref), 1)

                def key(pair, where=where, neighbours=neighbours, scale=scale):
                    i, item = pair
                    ps = [where[p] for p in neighbours.get(item, ()) if p in where]
                    return sum(ps) / len(ps) * scale if ps else i
                rows[r] = [item for _, item in sorted(enumerate(rows[r]), key=key)]


def _width(item) -> float:
    return WAYPOINT_W if isinstance(item, tuple) else NODE_W


def _resolve(row, want) -> list[float]:
    """Positions as near ``want`` as the row's order and spacing allow: the mean of the row packed against its
    wishes from the left (items pushed right) and from the right (items pushed left); no drift either way."""
    left, right = [], [0.0] * len(row)
    for k, w in enumerate(want):
        left.append(w if k == 0 else max(w, left[-1] + _width(row[k - 1]) + GAP_X))
    for k in range(len(row) - 1, -1, -1):
        right[k] = want[k] if k == len(row) - 1 else min(want[k], right[k + 1] - _width(row[k]) - GAP_X)
    return [(a + b) / 2 for a, b in zip(left, right)]


def _place(rows, up, down) -> dict:
    """Left x of every item: rows keep their order and spacing; each item is pulled over the mean centre of
    its neighbours in the row above (down sweeps) or below (up sweeps), so chains and long edges run straight."""
    x = {}
    for row in rows:
        pos = 0.0
        for item in row:
            x[item] = pos
            pos += _width(item) + GAP_X
    centre = lambda item: x[item] + _width(item) / 2
    for _ in range(SWEEPS):
        for sweep, neighbours in ((range(1, len(rows)), up), (range(len(rows) - 2, -1, -1), down)):
            for r in sweep:
                row = rows[r]
                want = [sum(centre(n) for n in neighbours[i]) / len(neighbours[i]) - _width(i) / 2
                        if neighbours.get(i) else x[i] for i in row]
                for item, pos in zip(row, _resolve(row, want)):
                    x[item] = pos
    low = min(x.values(), default=0.0)
    return {item: v - low + MARGIN for item, v in x.items()}


def layered_layout(graph: Graph) -> Layout:
    """spikec's own layout: longest-path layering, waypoints on long edges, barycentre ordering and placement."""
    preds = _preds(graph)
    layer = _layers(graph, preds)
    rows, chains, use_waypoints = _rows_with_waypoints(graph, preds, layer)
    up, down = _neighbours(chains)
    _order(rows, up, down)
    x = _place(rows, up, down)
    boxes, centre = {}, {}
    for r, row in enumerate(rows):
        y = MARGIN + r * (NODE_H + GAP_Y)
        for item in row:
            if isinstance(item, tuple):
                centre[item] = (x[item] + WAYPOINT_W / 2, y + NODE_H / 2)
            else:
                boxes[item] = (x[item], y)
    edges = []
    for (s, d), chain in chains.items():
        pts = [(boxes[s][0] + NODE_W / 2, boxes[s][1] + NODE_H)]
        pts += [centre[w] for w in chain[1:-1]]
        pts.append((boxes[d][0] + NODE_W / 2, boxes[d][1]))
        edges.append((s, d, pts, False))
    notes = [] if use_waypoints else [f"more than {MAX_WAYPOINTS} edge waypoints: long edges drawn straight"]
    width = max((v + _width(item) for item, v in x.items()), default=0.0) + MARGIN
    return Layout(boxes, edges, width, MARGIN * 2 + len(rows) * (NODE_H + GAP_Y) - GAP_Y,
                  "layered (longest-path layering, barycentre ordering)", notes)


def dot_source(graph: Graph) -> tuple[str, dict[str, str]]:
    """The graph in DOT with ids n0, n1, ... (no user text reaches dot) and the id -> node name map."""
    ids = {n.name: f"n{k}" for k, n in enumerate(graph.nodes)}
    lines = ["digraph g {", "rankdir=TB; nodesep=0.3; ranksep=0.4;",
             f'node [shape=box, fixedsize=true, width={NODE_W / 72:.4f}, height={NODE_H / 72:.4f}, label=""];']
    lines += [f"{ids[n.name]};" for n in graph.nodes]
    lines += [f"{ids[i]} -> {ids[n.name]};" for n in graph.nodes for i in dict.fromkeys(n.inputs) if i in ids]
    lines.append("}")
    return "\n".join(lines), {v: k for k, v in ids.items()}


def parse_plain(text: str, names: dict[str, str]) -> Layout:
    """A layout from ``dot -Tplain`` output (inches, y up) for the ids of ``dot_source``."""
    scale, height, boxes, edges, width = 72.0, 0.0, {}, [], 0.0
    for line in text.splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "graph":
            width, height = float(f[2]) * scale + 2 * MARGIN, float(f[3]) * scale + 2 * MARGIN
        elif f[0] == "node" and f[1] in names:
            x, y = float(f[2]) * scale, float(f[3]) * scale
            boxes[names[f[1]]] = (MARGIN + x - NODE_W / 2, height - MARGIN - y - NODE_H / 2)
        elif f[0] == "edge" and f[1] in names and f[2] in names:
            n = int(f[3])
            pts = [(MARGIN + float(f[4 + 2 * k]) * scale, height - MARGIN - float(f[5 + 2 * k]) * scale)
                   for k in range(n)]
            edges.append((names[f[1]], names[f[2]], pts, n >= 4 and (n - 1) % 3 == 0))
    if set(boxes) != set(names.values()):
        raise ValueError("dot's plain output does not place every node")
    return Layout(boxes, edges, width, height, "graphviz dot")


def layout(graph: Graph) -> Layout:
    """graphviz ``dot``'s layout when ``dot`` is on PATH and succeeds, else ``layered_layout``."""
    dot = shutil.which("dot")
    if dot:
        source, names = dot_source(graph)
        try:
            done = subprocess.run([dot, "-Tplain"], input=source, capture_output=True, text=True,
                                  timeout=DOT_TIMEOUT_S, check=True)
            return parse_plain(done.stdout, names)
        except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
            fallback = layered_layout(graph)
            fallback.notes.append(f"graphviz dot failed ({type(e).__name__}); spikec's own layout used")
            return fallback
    return layered_layout(graph)


def _host_boxes(graph: Graph, host: set, boxes) -> list[str]:
    """A dashed box around each connected group of host-partition nodes."""
    groups, seen = [], set()
    adjacent = {n.name: set() for n in graph.nodes if n.name in host}
    for n in graph.nodes:
        for i in n.inputs:
            if n.name in host and i in host:
                adjacent[n.name].add(i)
                adjacent[i].add(n.name)
    for start in adjacent:
        if start in seen:
            continue
        stack, group = [start], []
        seen.add(start)
        while stack:
            v = stack.pop()
            group.append(v)
            stack += [w for w in adjacent[v] if w not in seen and not seen.add(w)]
        groups.append(group)
    out = []
    for group in groups:
        xs = [boxes[v][0] for v in group if v in boxes]
        ys = [boxes[v][1] for v in group if v in boxes]
        if not xs:
            continue
        x0, y0, x1, y1 = min(xs) - 8, min(ys) - 16, max(xs) + NODE_W + 8, max(ys) + NODE_H + 8
        out.append(f'<g class="host-partition"><rect x="{x0:.1f}" y="{y0:.1f}" width="{x1 - x0:.1f}" '
                   f'height="{y1 - y0:.1f}" rx="8"/><text x="{x0 + 6:.1f}" y="{y0 + 11:.1f}">host partition'
                   f'</text></g>')
    return out


def _edge_svg(pts, bezier: bool) -> str:
    if bezier:
        d = f"M{pts[0][0]:.1f},{pts[0][1]:.1f} " + " ".join(
            f"C{pts[k][0]:.1f},{pts[k][1]:.1f} {pts[k + 1][0]:.1f},{pts[k + 1][1]:.1f} "
            f"{pts[k + 2][0]:.1f},{pts[k + 2][1]:.1f}" for k in range(1, len(pts) - 2, 3))
        return f'<path class="edge" d="{d}"/>'
    return '<polyline class="edge" points="' + " ".join(f"{x:.1f},{y:.1f}" for x, y in pts) + '"/>'


def _node_svg(node, x: float, y: float, syn: str | None, marks: set, source: str | None = None) -> str:
    kind = node.type.kind
    classes = " ".join(["node", f"kind-{kind}"] + ([f"syn-{syn}"] if syn else []) + sorted(marks)
                       + (["renamed"] if source else []))
    tip = [node.name, f"op {node.op}", node.type.describe()] + ([f"scope {node.scope}"] if node.scope else []) \
        + ([f"synapse {syn}"] if syn else []) + ([f"from {source}"] if source else []) + sorted(marks)
    label = f"{node.name} \u2190 {source}" if source else node.name
    badge = (f'<text class="badge" x="{NODE_W - 6}" y="14" text-anchor="end">{esc(syn)}</text>' if syn else "")
    return (f'<g class="{esc(classes)}" data-node="{esc(node.name)}" data-op="{esc(node.op)}" '
            f'transform="translate({x:.1f},{y:.1f})"><title>{esc(chr(10).join(tip))}</title>'
            f'<rect width="{NODE_W}" height="{NODE_H}" rx="6"/>'
            f'<text class="label" x="7" y="16">{esc(cap(label, LABEL_CHARS - (5 if syn else 0)))}</text>'
            f'<text class="sub" x="7" y="32">{esc(cap(node.op + " " + node.type.describe(), LABEL_CHARS + 4))}'
            f'</text>{badge}</g>')


def graph_svg(graph: Graph, *, svg_id: str, synaptic: dict | None = None, host=(), marks: dict | None = None,
              title: str = "", sources: dict | None = None) -> tuple[str, Layout]:
    """``graph`` drawn as one ``<svg>`` (returned with its layout): a ``<g class="node">`` per node (in graph order), edges, host boxes.

    ``synaptic``: node name -> "AC"/"MAC" (default: computed from the graph's types); ``host``: node names on a
    host partition; ``marks``: node name -> extra CSS classes (``new``, ``changed``, ``removed``); ``sources``: node
    name -> the source nodes a renamed or merged node came from (shown after its name and in its tooltip)."""
    lay = layout(graph)
    synaptic = synaptic if synaptic is not None else {n.name: synaptic_kind(graph, n) for n in graph.nodes}
    marks = marks or {}
    arrow = f"{esc(svg_id)}-arrow"
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" id="{esc(svg_id)}" '
             f'width="{lay.width:.0f}" height="{lay.height:.0f}" viewBox="0 0 {lay.width:.0f} {lay.height:.0f}" '
             f'data-engine="{esc(lay.engine)}" data-nodes="{len(graph.nodes)}" role="img" '
             f'aria-label="{esc(title or svg_id)}">',
             f'<defs><marker id="{arrow}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
             f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="arrowhead"/></marker></defs>']
    parts += _host_boxes(graph, set(host), lay.boxes)
    parts.append(f'<g class="edges" marker-end="url(#{arrow})">')
    parts += [_edge_svg(pts, bez) for _, _, pts, bez in lay.edges]
    parts.append('</g><g class="nodes">')
    sources = sources or {}
    parts += [_node_svg(n, *lay.boxes[n.name], synaptic.get(n.name), set(marks.get(n.name, ())), sources.get(n.name))
              for n in graph.nodes]
    parts.append("</g></svg>")
    return "".join(parts), lay
