"""TTFS graphs export to ONNX (the ONNX target's emitters for the TTFS ops) and run in onnxruntime."""
import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from spikec.core.interpreter import run  # noqa: E402
from spikec.targets.onnx import export, run_model, with_probes  # noqa: E402
from spikec.targets.ttfs import compile_ttfs  # noqa: E402
from spikec.frontend import trace  # noqa: E402
from test_layernorm import _random_ln, _rows  # noqa: E402


def test_ttfs_graph_with_layernorm_runs_in_onnxruntime():
    rng = np.random.default_rng(0)
    m = _random_ln(0)
    g = trace(m, (12,), input_kind="real")
    x = _rows(rng, 8, 12)
    res = compile_ttfs(m, g, x, {"states": ()})
    graph = res.graph
    fires = [n.name for n in graph.nodes if n.op in ("ttfs_fire", "ttfs_encode")]
    out = run_model(with_probes(export(graph, 1), graph, fires), {"input": x})
    ref = run(graph, x)
    for name in fires + list(graph.outputs):
        window = graph.node(name).attrs.get("t_max", 1.0) - graph.node(name).attrs.get("t_min", 0.0)
        assert np.abs(out[name] - ref.values[name]).max() <= 1e-9 * max(window, 1.0), name
