"""report.html's rasters read from the compile's own run of the deployed graph (html_raster.recorded_activity)
are what a run of sample 0 alone draws (neuron_activity), value for value; a compile's page is the page the
graph's own run on sample 0 gives; a partial recording is not used."""
import numpy as np

from spikec.app.driver import CompileOptions, compile_model, write_outdir
from spikec.app.html_raster import neuron_activity, recorded_activity
from spikec.app.html_report import render_report
from spikec.core.builder import GraphBuilder
from spikec.core.interpreter import run

LIF = {"beta": 0.5, "alpha": 1.0, "bias": 0.0, "threshold": 0.5, "v_reset": 0.0}
MODEL = '''
import torch
from torch import nn
import spikec.nn as snn

def build():
    torch.manual_seed(3)
    m = nn.Sequential(snn.TimeDistributed(nn.Conv2d(2, 4, 3, padding=1)), snn.LIF(beta=0.5, threshold=0.3),
                      snn.TimeDistributed(nn.Conv2d(4, 3, 3, padding=1)), snn.LIF(beta=0.8, threshold=0.2))
    m.input_shape = (2, 4, 4)
    return m
'''


def _graph():
    b = GraphBuilder((2, 4, 4), input_name="x")
    c = b.add("conv", "conv2d", ["x"], {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1},
              {"weight": np.random.default_rng(0).normal(0, 0.6, (3, 2, 3, 3))})
    n = b.add("lif", "lif", [c], {"reset": "subtract"}, LIF)
    f = b.add("fc", "linear", [b.add("flat", "flatten", [n], {"start": 0, "end": -1}, {})], {},
              {"weight": np.random.default_rng(1).normal(0, 0.4, (7, 48))})
    return b.graph(b.add("out", "intfire", [f], {"max_spikes": 2, "rounding": "round"},
                         {"threshold": 0.5, "beta": 1.0, "alpha": 1.0}))


def _same(a, b):
    assert [x.node for x in a] == [y.node for y in b]
    for x, y in zip(a, b):
        for k, v in x.__dict__.items():
            w = getattr(y, k)
            assert (np.array_equal(v, w) if isinstance(v, np.ndarray) else v == w), (x.node, k)


def test_the_recorded_layers_are_sample_zeros_own_run():
    g = _graph()
    x = (np.random.default_rng(3).random((6, 5, 2, 4, 4)) < 0.5).astype(np.float64)
    recorded = recorded_activity(g, run(g, x))
    alone = neuron_activity(g, x)
    assert len(alone) == 2 and any(a.total_spikes > 0 for a in alone)
    _same(recorded, alone)


def test_a_partial_recording_is_not_used():
    g = _graph()
    x = (np.random.default_rng(3).random((4, 2, 2, 4, 4)) < 0.5).astype(np.float64)
    assert recorded_activity(g, run(g, x, record={"lif"})) is None


def test_a_compiles_page_draws_the_deployed_graphs_run_on_sample_zero(tmp_path):
    path = tmp_path / "net.py"
    path.write_text(MODEL)
    compiled = compile_model(CompileOptions(model=f"{path}:build", steps=5, batch=3))
    assert compiled.report["equivalent"] and compiled.activity is not None
    x = compiled.io["input"]
    _same(compiled.activity, neuron_activity(compiled.graph, x))
    out = write_outdir(tmp_path / "out", compiled)
    page = (out / "report.html").read_text()
    assert page == render_report(compiled.report, compiled.before, compiled.graph, x)  # the graph run here
    assert 'class="raster"' in page
