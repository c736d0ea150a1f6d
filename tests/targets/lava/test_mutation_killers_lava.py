"""Lava quantizer contracts no other test pinned: each test here kills a mutant of tools/mutants.py that survived
the suite. Both faults are shared by Lava and the integer reference (so bit-exactness cannot see them) and
small enough to hide inside the read-out self-check's worst-case bound or the argmax agreement:

- quant-readout-bias-unscaled: a read-out's bias must be ``round(s b)`` in the layer's integer units;
- quant-membrane-gain-csilif: a host reading a neuron's membrane must divide by the integer units per float
  unit of *that* membrane (CSiLIF: ``v ~ 64 s Re(m)`` while its membrane is ``U = 2 Re(m)``).
Quantization only: no Lava run.
"""
from pathlib import Path

import numpy as np
import pytest

from spikec.app.driver import CompileOptions, compile_model
from spikec.core.interpreter import run
from spikec.targets.lava import _int_inputs, deploy

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _float(name, factory="small", samples=4):
    d = EXAMPLES / name
    c = compile_model(CompileOptions(model=f"{d / 'model.py'}:{factory}", weights=str(d / "checkpoint.pt"),
                                     inputs=str(d / "inputs.npz"), target="none"))
    return c.graph, c.io["input"][:, :samples]


@pytest.fixture(scope="module")
def digits():
    graph, x = _float("digits", samples=8)
    q, _, _ = deploy(graph, x)
    return graph, x, q


@pytest.fixture(scope="module")
def ripe():
    graph, x = _float("ripe", samples=3)
    q, _, _ = deploy(graph, x)
    return graph, x, q


def test_readout_bias_is_the_rounded_scaled_float_bias(digits):
    _, _, q = digits
    readouts = [layer for layer in q.layers if layer.kind == "readout"]
    assert readouts
    for layer in readouts:
        node = q.graph.node(layer.name)
        assert node.op == "lava_readout"
        exact = np.asarray(layer.bias, dtype=np.float64) * layer.scale
        assert np.abs(exact).max() > 1.0   # not vacuous: an unscaled bias would round elsewhere
        err = np.abs(np.asarray(node.params["bias"], dtype=np.float64) - exact)
        assert err.max() <= 0.5 + 1e-9, f"{layer.name}: read-out bias {err.max():.3g} LSB from round(s b)"


def _source(graph, name):
    """Through delays, the node a delayed host input reads."""
    node = graph.node(name)
    while node.op == "delay":
        node = graph.node(node.inputs[0])
    return node.name


def test_host_membrane_reads_are_dequantized_to_the_float_membrane(ripe):
    graph, x, q = ripe
    ti = run(q.graph, _int_inputs(q.graph, x), integer=True)
    tf = run(graph, x)
    checked = {}
    for h in q.graph.nodes:
        if not h.op.startswith("lava_host"):
            continue
        for i, name in enumerate(h.inputs):
            src = _source(q.graph, name)
            if q.graph.node(src).attrs.get("output") != "membrane" or src in checked:
                continue
            g = np.asarray(h.params[f"gain{i}"], dtype=np.float64)
            v = ti.values[src].astype(np.float64)
            v = v / (g.reshape(-1, *([1] * (v.ndim - 3))) if g.ndim else g)
            u = np.asarray(tf.values[src], dtype=np.float64)
            slope = float((v * u).sum() / (u * u).sum())   # least squares: dequantized ~ slope * float
            checked[src] = slope
    kinds = {q.graph.node(s).op for s in checked}
    assert "lava_csilif" in kinds and "lava_silif" in kinds, (checked, kinds)
    for src, slope in checked.items():
        assert 0.8 < slope < 1.25, f"membrane {src!r} reaches its host scaled by {slope:.3f}"
