"""report.html: a self-contained page (no script, no network) with one <svg> per graph holding one node element per
IR node, every table, the bar plots, and user strings escaped; the layered layout for graphs of hundreds of nodes;
graphviz dot's layout read when dot is on PATH; and the page rendered in headless Chromium where it is installed."""
import html
import json
import os
import re
import shutil
import stat
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest

from spikec.app import html_graph
from spikec.app.html_graph import NODE_H, NODE_W, dot_source, layered_layout, layout, parse_plain
from spikec.app.html_raster import MAX_ROWS, neuron_activity
from spikec.app.html_report import inspect_html, write_html, write_outdir_html
from spikec.core.builder import GraphBuilder
from spikec.core.cost import cost_report, partition_report
from spikec.core.interpreter import run
from spikec.core.metrics import neurobench_metrics
from spikec.core.report import layers_report

EVIL = '<script>alert("x")</script>'
LIF = {"beta": 0.5, "alpha": 1.0, "bias": 0.0, "threshold": 0.5, "v_reset": 0.0}
TABLES = ("summary-table", "passes-table", "mismatches-table", "layers-table", "params-table", "cost-table",
          "neurobench-table", "targets-table")


class Page(HTMLParser):
    """Elements by tag with their attributes and nesting: enough to check the page's structure."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.stack, self.elements, self.text, self.texts, self.scripts = [], [], [], [], 0
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.elements.append((tag, attrs, [a.get("id") for _, a in self.stack if a.get("id")]))
        self.scripts += tag == "script" or any(k.startswith("on") for k in attrs)
        if tag not in ("meta", "rect", "path", "polyline", "br", "img", "input", "link"):
            self.stack.append((tag, attrs))

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, dict(attrs), [a.get("id") for _, a in self.stack if a.get("id")]))

    def handle_endtag(self, tag):
        if tag not in (t for t, _ in self.stack):   # an end tag of a void element (the browser's serialization)
            return
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data):
        self.text.append(data)
        if self.stack:
            self.texts.append((self.stack[-1][0], self.stack[-1][1].get("class"), data))

    def ids(self) -> set:
        return {a["id"] for _, a, _ in self.elements if a.get("id")}

    def nodes_in(self, svg_id: str) -> list[str]:
        return [a["data-node"] for tag, a, up in self.elements
                if tag == "g" and "node" in a.get("class", "").split() and svg_id in up]


def _graph(evil=False):
    """x -> conv -> lif -> flatten -> linear (real operand: MAC) -> relu-free head; an evil node name if asked."""
    rng = np.random.default_rng(0)
    b = GraphBuilder((2, 4, 4), input_name="x")
    c = b.add("conv", "conv2d", ["x"], {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1},
              {"weight": rng.normal(size=(3, 2, 3, 3))}, scope=EVIL if evil else "conv")
    s = b.add("lif", "lif", [c], {"reset": "subtract"}, LIF)
    f = b.add("flat", "flatten", [s], {"start": 0, "end": -1})
    h = b.add("mem", "linear", [b.add("fc", "linear", [f], {}, {"weight": rng.normal(size=(5, 48))})], {},
              {"weight": rng.normal(size=(4, 5))})
    return b.graph(h, meta={"source": EVIL if evil else "Net"})


def _report(graph, x, evil=False):
    trace = run(graph, x)
    name = EVIL if evil else "lif"
    report = {
        "model": f"models/{EVIL}.py:net" if evil else "models/net.py:net", "equivalent": True,
        "input": {"steps": x.shape[0], "batch": x.shape[1], "shape": list(x.shape[2:]), "kind": "binary",
                  "source": "random", "probes": 0},
        "frontend": {"equivalent": True, "spikes_compared": 10, "values_compared": 20, "spike_mismatches": 0,
                     "max_rel_diff": 0.0, "first_mismatches": []},
        "final": {"equivalent": True, "spikes_compared": 10, "values_compared": 20, "spike_mismatches": 0,
                  "max_rel_diff": 0.0, "first_mismatches": [],
                  "near_threshold": {"tolerance": 1e-9, "count": 2, "exact_ties": 1, "by_node": {name: 2}}},
        "params": {"source": 200, "deployed": 190, "by_module": {name: {"source": 200, "deployed": 190}}},
        "passes": [{"name": "fold_batchnorm", "nodes_changed": ["conv"], "params_before": 200, "params_after": 190,
                    "verified": True, "spike_mismatches": 1, "max_rel_diff": 1e-16, "seconds": 0.01,
                    "skipped": [{"node": name, "reason": EVIL}], "notes": [EVIL],
                    "comparison": {"real_mismatches": 0, "first_mismatches": [
                        {"node": name, "step": 2, "index": [0, 1], "expected": 1.0, "got": 0.0, "margin": 1e-12}]}}],
        "layers": layers_report(graph), "cost": cost_report(graph, trace), "partitions": partition_report(graph),
        "warnings": [{"node": name, "kind": "silent", "message": EVIL}],
        "neurobench": neurobench_metrics(graph, trace),
        "target": {"name": "lava", "bit_exact": True, "summary": f"lava: bit_exact true {EVIL}",
                   "quantization_checks": {"ok": True},
                   "float_vs_fixed": {"meaning": "agreement", "per_layer": {name: {"spike_agreement": 0.97},
                                                                           "mem": {"class_agreement": 1.0}}}},
    }
    return json.loads(json.dumps(report))   # as report.json reads back


@pytest.fixture
def page(tmp_path):
    g = _graph()
    x = (np.random.default_rng(1).random((4, 3, 2, 4, 4)) < 0.5).astype(np.float64)
    before = GraphBuilder((2, 4, 4))
    before.add("conv", "conv2d", ["x"], {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1},
               {"weight": np.ones((3, 2, 3, 3))})
    before.add("bn", "batchnorm", ["conv"], {"eps": 1e-5}, {"mean": np.zeros(3), "var": np.ones(3),
                                                            "gamma": np.ones(3), "beta": np.zeros(3)})
    before_graph = before.graph("bn")
    path = write_html(_report(g, x), before_graph, g, tmp_path / "report.html", inputs=x)
    return path, before_graph, g


def test_the_page_has_a_graph_svg_per_graph_with_one_element_per_node(page):
    path, before, after = page
    p = Page(path.read_text())
    assert p.nodes_in("graph-before-svg") == [n.name for n in before.nodes]
    assert p.nodes_in("graph-after-svg") == [n.name for n in after.nodes]
    svgs = [a for tag, a, _ in p.elements if tag == "svg" and "graph" in a.get("class", "")]
    assert [s["id"] for s in svgs] == ["graph-before-svg", "graph-after-svg"]
    assert all(s["data-nodes"] == str(len(g.nodes)) for s, g in zip(svgs, (before, after)))
    classes = {a["data-node"]: a["class"].split() for tag, a, up in p.elements
               if tag == "g" and "graph-after-svg" in up and "data-node" in a}
    assert {"kind-binary", "new"} <= set(classes["lif"]) and "kind-real" in classes["conv"]
    assert "syn-AC" in classes["conv"] and "syn-AC" in classes["fc"] and "syn-MAC" in classes["mem"]
    assert "changed" in classes["conv"]
    before_classes = {a["data-node"]: a["class"].split() for tag, a, up in p.elements
                      if tag == "g" and "graph-before-svg" in up and "data-node" in a}
    assert "removed" in before_classes["bn"]


def test_every_table_and_plot_is_present_and_nothing_loads_from_outside(page):
    path, _, _ = page
    text = path.read_text()
    p = Page(text)
    assert set(TABLES) <= p.ids(), set(TABLES) - p.ids()
    assert {"firing-rates-chart", "float-vs-fixed-lava-chart", "energy-chart"} <= p.ids()
    assert len([1 for tag, a, up in p.elements if tag == "g" and a.get("class") == "bar-row"
                and "firing-rates-chart" in up]) == 1
    assert p.scripts == 0
    for tag, attrs, _ in p.elements:   # no external resource: only in-page links
        for key in ("src", "href"):
            assert not attrs.get(key) or attrs[key].startswith("#"), (tag, attrs)
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in text
    words = " ".join(p.text)
    for phrase in ("Effective_ACs", "Effective_MACs", "Dense", "ActivationSparsity", "fold_batchnorm", "pass"):
        assert phrase in words


def test_user_strings_are_escaped_not_injected(tmp_path):
    g = _graph(evil=True)
    x = (np.random.default_rng(1).random((3, 2, 2, 4, 4)) < 0.5).astype(np.float64)
    report = _report(g, x, evil=True)
    report["layers"][0]["name"] = EVIL
    path = write_html(report, g, g, tmp_path / "report.html")
    text = path.read_text()
    p = Page(text)
    assert p.scripts == 0 and "<script" not in text.lower()
    assert EVIL in " ".join(p.text)   # shown as text, escaped
    assert inspect_html(g, tmp_path / "inspect.html").read_text().lower().count("<script") == 0


def test_inspect_draws_a_model_without_a_report(tmp_path):
    g = _graph()
    p = Page(inspect_html(g, tmp_path / "inspect.html").read_text())
    assert p.nodes_in("graph-after-svg") == [n.name for n in g.nodes]
    assert {"layers-table", "partitions"} <= p.ids()


def _wide_graph(n_blocks=60):
    """~300 nodes: a chain of residual blocks (conv -> lif, skip adds) with fan-out, long edges to the end."""
    rng = np.random.default_rng(0)
    b = GraphBuilder((4, 4, 4), input_name="x")
    conv = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1}
    prev, keep = "x", []
    for k in range(n_blocks):
        blk = f"encoder.stage{k // 10}.residual_block{k}"   # long names, as deep models have
        c = b.add(f"{blk}.conv", "conv2d", [prev], conv, {"weight": rng.normal(size=(4, 4, 3, 3))})
        s = b.add(f"{blk}.lif", "lif", [c], {"reset": "subtract"}, LIF)
        c2 = b.add(f"{blk}.conv_b", "conv2d", [prev], conv, {"weight": rng.normal(size=(4, 4, 3, 3))})
        prev = b.add(f"{blk}.add", "add", [s, b.add(f"{blk}.lif_b", "lif", [c2], {"reset": "subtract"}, LIF)])
        if k % 15 == 0:
            keep.append(prev)
    for j, kept in enumerate(keep):
        prev = b.add(f"skip{j}", "add", [prev, kept])
    return b.graph(prev)


def test_the_layered_layout_places_hundreds_of_nodes_without_overlap():
    g = _wide_graph()
    assert len(g.nodes) >= 300
    lay = layered_layout(g)
    assert set(lay.boxes) == {n.name for n in g.nodes}
    for n in g.nodes:   # every input sits on a row above its consumer
        for i in n.inputs:
            assert lay.boxes[i][1] < lay.boxes[n.name][1]
    by_row = {}
    for name, (x, y) in lay.boxes.items():
        by_row.setdefault(y, []).append(x)
    for xs in by_row.values():
        xs.sort()
        assert all(b - a >= NODE_W for a, b in zip(xs, xs[1:]))
    assert all(0 <= x and x + NODE_W <= lay.width and y + NODE_H <= lay.height for x, y in lay.boxes.values())
    assert len(lay.edges) == sum(len(set(n.inputs)) for n in g.nodes)


def test_a_large_graph_renders_with_capped_labels_in_a_scroll_box(tmp_path):
    g = _wide_graph()
    p = Page(inspect_html(g, tmp_path / "big.html").read_text())
    assert p.nodes_in("graph-after-svg") == [n.name for n in g.nodes]
    labels = [t for tag, cls, t in p.texts if tag == "text" and cls in ("label", "sub")]
    assert len(labels) == 2 * len(g.nodes) and max(len(t) for t in labels) <= html_graph.LABEL_CHARS + 4
    assert any("\u2026" in t for t in labels)   # long names cut in the middle; the tooltip keeps them whole
    titles = [t for tag, _, t in p.texts if tag == "title"]
    assert any(t.startswith("encoder.stage5.residual_block59.conv_b") for t in titles)
    scroll = [up for tag, a, up in p.elements if tag == "svg" and a.get("id") == "graph-after-svg"]
    assert scroll and float(next(a["height"] for tag, a, _ in p.elements if a.get("id") == "graph-after-svg")) > 5000


def test_the_dot_layout_is_read_from_dots_plain_output():
    g = _graph()
    source, names = dot_source(g)
    assert "conv" not in source and "n0" in source   # no user text reaches dot
    plain = ["graph 1 4 8"] + [f"node {i} 2 {7 - k} 2.4 0.55 \"\" solid box black lightgrey"
                                for k, i in enumerate(names)]
    plain += ["edge n0 n1 4 2 6.7 2 6.5 2 6.3 2 6.1 solid black", "stop"]
    lay = parse_plain("\n".join(plain), names)
    assert set(lay.boxes) == {n.name for n in g.nodes} and lay.engine == "graphviz dot"
    assert lay.boxes["x"][1] < lay.boxes["conv"][1] and lay.edges[0][3] is True
    with pytest.raises(ValueError):
        parse_plain("graph 1 4 8\nstop", names)


def test_dot_on_path_is_used_and_a_failing_dot_falls_back(tmp_path, monkeypatch):
    g = _graph()
    _, names = dot_source(g)
    plain = "graph 1 4 8\n" + "".join(f"node {i} 2 {7 - k} 2.4 0.55\n" for k, i in enumerate(names)) + "stop\n"
    (tmp_path / "plain.txt").write_text(plain)
    fake = tmp_path / "dot"
    fake.write_text(f"#!/bin/sh\ncat > /dev/null\ncat {tmp_path / 'plain.txt'}\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(html_graph.shutil, "which", lambda name: str(fake) if name == "dot" else None)
    assert layout(g).engine == "graphviz dot"
    fake.write_text("#!/bin/sh\nexit 3\n")
    lay = layout(g)
    assert lay.engine.startswith("layered") and "graphviz dot failed" in lay.notes[-1]


def _chromium():
    return next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)


PROBE = """<script>
const sizes = {};
for (const id of %s) {
  const e = document.getElementById(id);
  if (!e) { sizes[id] = null; continue; }
  const box = e.getBoundingClientRect(), style = getComputedStyle(e);
  sizes[id] = [box.width, box.height, style.visibility, style.display];
}
const drawn = svg => [...document.querySelectorAll("#" + svg + " g.node")].map(g => {
  const box = g.getBoundingClientRect(); return box.width > 0 && box.height > 0; });
sizes.before = drawn("graph-before-svg"); sizes.after = drawn("graph-after-svg");
const out = document.createElement("pre"); out.id = "probe"; out.textContent = JSON.stringify(sizes);
document.body.appendChild(out);
</script>"""


def _run_chromium(tmp_path, *args):
    env = {**os.environ, "HOME": str(tmp_path)}
    profile = tmp_path / f"profile{len(list(tmp_path.glob('profile*')))}"
    done = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
                           *args], capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.skipif(_chromium() is None, reason="Chromium is not installed (Debian: apt-get install -y chromium): "
                                                "the browser rendering of report.html is not checked here")
def test_headless_chromium_renders_the_graphs_and_tables(page, tmp_path):
    path, before, after = page
    dom = Page(_run_chromium(tmp_path, "--dump-dom", path.as_uri()))   # the page as the browser parsed it
    assert dom.nodes_in("graph-before-svg") == [n.name for n in before.nodes]
    assert dom.nodes_in("graph-after-svg") == [n.name for n in after.nodes]
    assert set(TABLES) <= dom.ids()
    # what the browser laid out: a copy with a measuring script (the page itself has none, and forbids them)
    ids = ["graph-before-svg", "graph-after-svg", *TABLES, "firing-rates-chart", "raster-0", "trace-0"]
    text = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", path.read_text())
    probe = path.with_name("probe.html")
    probe.write_text(text.replace("</body>", PROBE % json.dumps(ids) + "</body>"))
    out = re.search(r'<pre id="probe">(.*?)</pre>', _run_chromium(tmp_path, "--dump-dom", probe.as_uri()), re.S)
    assert out, "the measuring script did not run"
    sizes = json.loads(html.unescape(out.group(1)))
    for i in ids:
        assert sizes[i] is not None and sizes[i][0] > 0 and sizes[i][1] > 0, (i, sizes[i])
        assert sizes[i][2] == "visible" and sizes[i][3] != "none", (i, sizes[i])
    assert sizes["before"] == [True] * len(before.nodes) and sizes["after"] == [True] * len(after.nodes)
    shot = tmp_path / "shot.png"
    _run_chromium(tmp_path, "--hide-scrollbars", "--window-size=1200,1600", f"--screenshot={shot}", path.as_uri())
    assert _png_is_not_blank(shot.read_bytes())


def _png_is_not_blank(data: bytes) -> bool:
    """A PNG whose decoded pixels take more than a few values (a blank page is one colour)."""
    import zlib
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", None
    while pos < len(data):
        length = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width = int.from_bytes(body[:4], "big")
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    return width is not None and len(set(raw[: 4096 * 50])) > 16


def test_host_partitions_are_boxed_and_every_target_gets_a_verdict(tmp_path):
    g = _graph()
    x = (np.random.default_rng(1).random((3, 2, 2, 4, 4)) < 0.5).astype(np.float64)
    report = _report(g, x)
    report["partitions"] = {"host": ["fc", "mem"], "crossing": [], "values_per_step": 48}
    report["targets"] = {"lava": report["target"],
                         "nir": {"name": "nir", "emitted": False, "refused": True, "reason": EVIL,
                                 "summary": f"nir: refused: {EVIL}"},
                         "onnx": {"name": "onnx", "spike_exact": False, "summary": "onnx: spike_exact false"}}
    p = Page(write_html(report, None, g, tmp_path / "report.html").read_text())
    boxes = [a for tag, a, up in p.elements if tag == "g" and a.get("class") == "host-partition"
             and "graph-after-svg" in up]
    assert len(boxes) == 1                                  # fc -> mem: one connected host group
    cells = [t.strip() for tag, cls, t in p.texts if tag == "td" and cls in ("ok", "bad")]
    assert cells.count("pass") >= 1 and "refused" in cells and "FAIL" in cells
    assert p.nodes_in("graph-before-svg") == [] and p.nodes_in("graph-after-svg") == [n.name for n in g.nodes]


def test_an_outdir_report_html_from_its_files(tmp_path):
    from spikec.core.serialize import save_graph
    g = _graph()
    x = (np.random.default_rng(1).random((3, 2, 2, 4, 4)) < 0.5).astype(np.float64)
    save_graph(g, tmp_path)
    (tmp_path / "report.json").write_text(json.dumps(_report(g, x)))
    p = Page(write_outdir_html(tmp_path).read_text())
    assert p.nodes_in("graph-after-svg") == [n.name for n in g.nodes] and set(TABLES) <= p.ids()


# -- wired into the CLI ---------------------------------------------------------------------------------
def test_every_outdir_has_its_report_page_and_the_report_its_activity(tmp_path):
    from app_helpers import DIGITS, cli
    res = cli("compile", f"{DIGITS / 'model.py'}:small", "--weights", DIGITS / "checkpoint.pt", "--inputs",
              DIGITS / "inputs.npz", "-o", tmp_path / "out", "--no-probes")
    assert res.exit_code == 0, res.output
    page = (tmp_path / "out" / "report.html").read_text()
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert page.count("<svg") >= 2 and 'name="generator" content="spikec"' in page  # before and after the passes
    assert report["firing_rates"] and "Effective_ACs" in report["neurobench"]
    assert "report.html" in res.output
    p = Page(page)   # a raster and a trace per neuron layer, from the OUTDIR's io.npz
    neurons = [l["name"] for l in report["layers"] if l["op"] == "lif"]
    figures = [a["data-node"] for tag, a, _ in p.elements if tag == "figure" and "data-node" in a]
    assert neurons and figures == neurons
    assert {f"raster-{k}" for k in range(len(neurons))} | {f"trace-{k}" for k in range(len(neurons))} <= p.ids()
    renamed = [t for tag, cls, t in p.texts if tag == "td"]
    assert "conv1.1" in renamed and "conv1.0 (conv2d), conv1.1 (batchnorm)" in renamed  # fold_batchnorm: the BN's name


def test_inspect_draws_a_page_and_never_overwrites_a_users_file(tmp_path):
    from app_helpers import DIGITS, cli
    spec = f"{DIGITS / 'model.py'}:small"
    res = cli("inspect", spec, "--html", tmp_path / "m.html")
    assert res.exit_code == 0 and "<svg" in (tmp_path / "m.html").read_text()
    assert cli("inspect", spec, "--html", tmp_path / "m.html").exit_code == 0  # its own page: replaced
    (tmp_path / "mine.html").write_text("my notes")
    res = cli("inspect", spec, "--html", tmp_path / "mine.html")
    assert res.exit_code == 2 and "not a page spikec wrote" in res.output
    assert (tmp_path / "mine.html").read_text() == "my notes"


# -- rasters, membrane traces, target badges, renamed nodes ----------------------------------------------
def _lif_membrane(x: np.ndarray, p: dict) -> np.ndarray:
    """The pre-reset membrane of ``lif`` (subtract reset), computed here step by step: ``[T, N]``."""
    u_all, h = [], np.zeros(x.shape[1:])
    for t in range(x.shape[0]):
        u = p["beta"] * h + p["alpha"] * x[t] + p["bias"]
        s = (u - p["threshold"] >= 0).astype(float)
        h = u - p["threshold"] * s
        u_all.append(u)
    return np.array(u_all)


def test_the_raster_and_the_nearest_neurons_membrane_are_the_runs(tmp_path):
    g = _graph()
    x = (np.random.default_rng(3).random((6, 3, 2, 4, 4)) < 0.5).astype(np.float64)
    (a,) = neuron_activity(g, x)
    trace = run(g, x[:, :1])
    spikes = trace.values["lif"].reshape(6, -1)
    u = _lif_membrane(trace.values["conv"].reshape(6, -1), LIF)
    nearest = int(np.argmin(np.abs(u - LIF["threshold"]).min(axis=0)))
    assert a.node == "lif" and a.neurons == spikes.shape[1] and a.nearest == nearest and a.membrane
    assert np.allclose(a.trace, u[:, nearest], rtol=0, atol=1e-12)
    assert np.array_equal(a.fired, spikes[:, nearest] > 0) and a.threshold == LIF["threshold"]
    assert np.array_equal(a.spikes, spikes[:, a.first:a.first + MAX_ROWS]) and a.total_spikes == spikes.sum()
    assert a.first <= nearest < a.first + a.spikes.shape[1]
    p = Page(write_html(_report(g, x), None, g, tmp_path / "report.html", inputs=x).read_text())
    raster = next(at for tag, at, _ in p.elements if tag == "svg" and at.get("id") == "raster-0")
    assert int(raster["data-spikes"]) == np.count_nonzero(a.spikes)
    marks = [at for tag, at, up in p.elements if tag == "rect" and at.get("class") == "spike" and "raster-0" in up]
    assert len(marks) == np.count_nonzero(a.spikes)
    line = next(at for tag, at, _ in p.elements if tag == "polyline" and at.get("class") == "membrane")
    assert len(line["points"].split()) == 6


def test_without_inputs_the_page_says_the_rasters_are_not_drawn(tmp_path):
    g = _graph()
    x = (np.random.default_rng(1).random((3, 2, 2, 4, 4)) < 0.5).astype(np.float64)
    text = write_html(_report(g, x), None, g, tmp_path / "report.html").read_text()
    assert "not drawn: the verification inputs were not given" in text and 'class="raster"' not in text
    wrong = np.zeros((3, 1, 5))   # inputs of another shape: the reason is shown, the page still written
    text = write_html(_report(g, x), None, g, tmp_path / "report.html", inputs=wrong).read_text()
    assert "not drawn: BadInput" in text


def test_a_refused_target_shows_its_reason_and_remedy_in_full(tmp_path):
    g = _graph()
    x = (np.random.default_rng(1).random((3, 2, 2, 4, 4)) < 0.5).astype(np.float64)
    report = _report(g, x)
    reason = ("node 'lif' (lif_snntorch): snnTorch's Leaky with a subtract reset has no NIR neuron; " * 4
              + "\n  remedy: use reset_mechanism='zero' or keep this model on another target")
    consumer = "node 'n1' (Threshold): import_from_nir has no mapping for it (raises); " * 3
    report["targets"] = {"lava": report["target"],
                         "nir": {"name": "nir", "emitted": False, "refused": True, "reason": reason},
                         "onnx": {"name": "onnx", "spike_exact": True,
                                  "consumers": {"snntorch": {"ran": False, "reason": consumer}}}}
    p = Page(write_html(report, None, g, tmp_path / "report.html").read_text())
    reasons = [t for tag, cls, t in p.texts if tag == "p" and cls == "reason"]
    assert reason in reasons and f"snntorch: {consumer}" in reasons
    badges = [(cls, t) for tag, cls, t in p.texts if tag == "span" and cls and cls.startswith("badge")]
    assert ("badge refused", "refused") in badges and ("badge ok", "bit_exact yes") in badges
    assert ("badge ok", "spike_exact yes") in badges and ("badge refused", "snntorch: not run") in badges


def test_a_renamed_node_is_shown_with_its_source_names(tmp_path):
    before = GraphBuilder((2, 4, 4), input_name="x")
    before.add("conv1.0", "conv2d", ["x"], {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1},
               {"weight": np.ones((3, 2, 3, 3))}, scope="conv1.0")
    before.add("conv1.1", "batchnorm", ["conv1.0"], {"eps": 1e-5}, {"mean": np.zeros(3), "var": np.ones(3),
                                                                     "gamma": np.ones(3), "beta": np.zeros(3)},
               scope="conv1.1")
    after = GraphBuilder((2, 4, 4), input_name="x")
    after.add("conv1.1", "conv2d", ["x"], {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1},
              {"weight": np.ones((3, 2, 3, 3))}, scope="conv1.0")
    report = {"passes": [{"name": "fold_batchnorm", "nodes_changed": ["conv1.0", "conv1.1"]}]}
    p = Page(write_html(report, before.graph("conv1.1"), after.graph("conv1.1"), tmp_path / "r.html").read_text())
    rows = [t for tag, cls, t in p.texts if tag == "td"]
    assert rows[rows.index("conv1.1"):][:4] == ["conv1.1", "conv2d", "conv1.0 (conv2d), conv1.1 (batchnorm)",
                                                "fold_batchnorm"]
    labels = [t for tag, cls, t in p.texts if tag == "text" and cls == "label"]
    assert "conv1.1 \u2190 conv1.0" in labels


def test_an_integer_neurons_trace_is_its_margin_not_a_membrane():
    b = GraphBuilder((4,), input_name="x")
    w = b.add("fc", "linear", ["x"], {}, {"weight": np.full((3, 4), 0.375)})
    n = b.add("int", "intfire", [w], {"max_spikes": 2, "rounding": "round"},
              {"threshold": 0.5, "beta": 1.0, "alpha": 1.0})
    g = b.graph(n)
    x = (np.random.default_rng(2).random((5, 2, 4)) < 0.5).astype(np.float64)
    (a,) = neuron_activity(g, x)
    margin = run(g, x[:, :1]).margins["int"].reshape(5, -1)
    assert not a.membrane and a.threshold is None and np.array_equal(a.trace, margin[:, a.nearest])
    from spikec.passes.unroll_virtual_steps import unroll_virtual_steps
    unrolled = unroll_virtual_steps(g).graph   # binary sub-step spikes, boundaries at multiples of the threshold
    (u,) = [l for l in neuron_activity(unrolled, x) if l.op == "intfire_unrolled"]
    assert not u.membrane and u.threshold is None
