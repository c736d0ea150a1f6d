"""Products on the Lava target, driven with the inputs that trigger their checks (no Lava run: the rewrite, the
quantizer and the integer reference): a binary matmul whose operands are not interchangeable (square, so a swap
still has the right shape), the AND-neuron limit at exactly its size, dilated and offset SDNA windows, and the
report's counts (spikes, synaptic operations, host multiply-accumulates) against counts made by hand."""
import numpy as np
import pytest

from spikec.core.builder import GraphBuilder
from spikec.core.interpreter import run
from spikec.targets.lava import deploy, products
from spikec.targets.lava.ops import with_readouts

T, B = 6, 3


def _lif(n, threshold=0.6):
    return {"beta": np.full(n, 0.5), "alpha": np.ones(n), "bias": np.zeros(n), "threshold": np.full(n, threshold),
            "v_reset": np.zeros(n)}


def _spikes(n, seed=1, p=0.4):
    return (np.random.default_rng(seed).random((T, B, n)) < p).astype(np.float64)


def _matmul_graph(rows=4, inner=3, cols=5, real_right=False):
    """Two LIF populations seen as ``A [rows, inner]`` and ``B [inner, cols]``, ``A @ B``, a linear read-out."""
    r = np.random.default_rng(0)
    b = GraphBuilder((12,), "binary", "input")
    b.add("fa", "linear", ["input"], params={"weight": r.random((rows * inner, 12)) * 0.3, "bias": np.zeros(rows * inner)})
    b.add("la", "lif", ["fa"], {"reset": "zero"}, _lif(rows * inner))
    b.add("fb", "linear", ["input"], params={"weight": r.random((inner * cols, 12)) * 0.3,
                                             "bias": np.zeros(inner * cols)})
    right = "fb"
    if not real_right:
        right = b.add("lb", "lif", ["fb"], {"reset": "zero"}, _lif(inner * cols))
    b.add("A", "reshape", ["la"], {"shape": (rows, inner)})
    b.add("B", "reshape", [right], {"shape": (inner, cols)})
    b.add("mm", "matmul", ["A", "B"])
    b.add("flat", "flatten", ["mm"], {"start": 0, "end": 1})
    b.add("out", "linear", ["flat"], params={"weight": r.normal(0, 0.5, (3, rows * cols)), "bias": np.zeros(3)})
    return b.graph("out")


def _proof(graph, x):
    _, _, prep = products.placed(graph, x, run(graph, x))
    return prep, next(r for r in prep.rewrites if "rewritten" in r)


@pytest.mark.parametrize("shape", [(4, 3, 5), (3, 3, 3)], ids=["4x3_3x5", "square"])
def test_a_binary_matmul_on_and_neurons_is_exactly_a_times_b(shape):
    graph, x = _matmul_graph(*shape), _spikes(12)
    ref = run(graph, x)
    a, b_ = (ref.values[n] for n in ("A", "B"))
    assert 0.1 < a.mean() < 0.9 and 0.1 < b_.mean() < 0.9                # operands fire and rest
    assert not np.array_equal(a @ b_, np.swapaxes(b_, -1, -2) @ np.swapaxes(a, -1, -2))   # order matters here
    prep, proof = _proof(graph, x)
    assert [p["runs"] for p in prep.products] == ["chip"]
    assert prep.products[0]["and_neurons"] == int(np.prod(shape))
    assert proof["outputs_equal"] is True and proof.get("equivalent", True) is True, proof
    assert np.array_equal(run(prep.graph, x).values["mm"], ref.values["mm"])


@pytest.mark.parametrize("limit,runs", [(60, "chip"), (59, "host")])
def test_the_and_neuron_limit_counts_rows_inner_and_columns(monkeypatch, limit, runs):
    """A 4x3 @ 3x5 product needs 4 * 3 * 5 = 60 AND neurons: at a limit of exactly 60 it is on chip, at 59 on host."""
    monkeypatch.setattr(products, "MAX_AND_NEURONS", limit)
    prep = products.prepare(_matmul_graph())
    assert [p["runs"] for p in prep.products] == [runs]
    if runs == "host":
        assert "60 AND neurons" in prep.products[0]["why"]


def _window_graph(dilation, a, b_):
    b = GraphBuilder((2, 7, 7), "binary", "input")
    b.add("conv", "conv2d", ["input"], {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1},
          {"weight": np.random.default_rng(2).random((2, 2, 3, 3)) * 0.3, "bias": np.zeros(2)})
    b.add("lif", "lif", ["conv"], {"reset": "zero"}, _lif(2))
    b.add("win", "windowsum", ["lif"], {"kernel": 3, "dilation": dilation})
    b.add("sc", "scale", ["win"], {"a": a, "b": b_})
    return b.graph("sc")


@pytest.mark.parametrize("dilation,b_", [(1, 0.0), (2, 0.0), (1, 0.25)], ids=["plain", "dilated", "offset"])
def test_sdna_windows_are_rewritten_only_when_exact(dilation, b_):
    graph = _window_graph(dilation, 0.375, b_)
    x = (np.random.default_rng(3).random((T, B, 2, 7, 7)) < 0.5).astype(np.float64)
    assert 0 < run(graph, x).values["lif"].mean() < 1
    placed, _, prep = products.placed(graph, x, run(graph, x))
    if b_ != 0.0:   # scale(a, b != 0) is an offset, not an all-equal window: nothing to rewrite
        assert prep is None and placed is graph
        return
    (conv,) = [n for n in prep.graph.nodes if n.op == "conv2d" and n.name == "sc"]
    assert conv.attrs["padding"] == (dilation, dilation) and conv.attrs["dilation"] == (dilation, dilation)
    proof = next(r for r in prep.rewrites if "rewritten" in r)
    assert proof.get("equivalent", True) is True and max(proof["max_abs_difference"].values()) <= 1e-12, proof


# -- the report's counts, by hand ------------------------------------------------------------------------------
def _section(graph, x):
    prep = products.prepare(graph)
    q, net, _ = deploy(graph, x)
    trace = run(with_readouts(q.graph), {"input": x.astype(np.int64)}, integer=True)
    return products.report(prep, q.graph, net, trace, {}), q, net, trace


def test_the_products_section_counts_spikes_and_synaptic_ops_per_sample():
    graph, x = _matmul_graph(), _spikes(12)
    section, q, net, trace = _section(graph, x)
    chip = section["per_inference"]["chip"]
    pops = [p for p in net["processes"] if p["type"] not in ("Readout", "Host", "Dense", "Conv") and p["name"] in
            trace.values and p["type"] in ("LIF", "SpikecLIF", "SpikecAND", "AND")]
    spikes = sum(np.abs(trace.values[p["name"]]).sum() for p in pops)
    assert chip["spikes_per_inference"] == pytest.approx(spikes / B, abs=1e-3) and spikes > 0
    ops = 0
    for n in q.graph.nodes:
        if n.op == "lava_dense":   # each nonzero input value fans out to the nonzero weights of its column
            w, v = np.asarray(n.params["weight"]), np.asarray(trace.values[n.inputs[0]])
            ops += sum(np.count_nonzero(w[:, j]) for t in range(T) for s in range(B) for j in np.flatnonzero(v[t, s]))
    assert chip["synaptic_ops_per_inference"] == pytest.approx(ops / B, abs=1e-3) and ops > 0
    assert chip["and_neurons"] == 60 and section["binary_products_on_chip"] == ["mm"]


def test_a_host_matmul_counts_its_inner_dim_per_output():
    graph, x = _matmul_graph(real_right=True), _spikes(12)
    section, _, _, _ = _section(graph, x)
    assert section["products_on_host"] == ["mm"] and not section["binary_products_on_chip"]
    host = section["per_inference"]["host"]
    assert section["per_inference"]["physical_steps"] == T
    assert host["multiply_accumulates_per_inference"] == 4 * 5 * 3 * T   # rows x cols outputs, inner 3 each, T steps


def test_the_rewrite_check_needs_every_output_equal():
    """``check`` on a two-output graph whose rewritten run differs in one output only: not equal, not equivalent."""
    from types import SimpleNamespace
    b = GraphBuilder((2, 7, 7), "binary", "input")
    b.add("lif", "lif", ["input"], {"reset": "zero"}, _lif(2, threshold=0.5))
    b.add("win", "windowsum", ["lif"], {"kernel": 3, "dilation": 1})
    b.add("sc", "scale", ["win"], {"a": 0.5, "b": 0.0})
    graph = b.graph("lif", "sc")
    x = (np.random.default_rng(4).random((T, B, 2, 7, 7)) < 0.5).astype(np.float64)
    ref = run(graph, x)
    same = products.check(graph, ref, SimpleNamespace(values=dict(ref.values)))
    assert same["outputs_equal"] is True and same.get("equivalent", True) is True
    off = dict(ref.values, sc=np.asarray(ref.values["sc"]) + 0.125)   # the spike output still equal
    r = products.check(graph, ref, SimpleNamespace(values=off))
    assert r["outputs_equal"] is False and r.get("equivalent", False) is False
    assert r["max_abs_difference"] == {"lif": 0.0, "sc": 0.125}


def test_physical_steps_are_counted_once_for_a_sub_step_population():
    """An unrolled integer neuron runs 3 Lava sub-steps per physical step: the report still counts T steps."""
    from spikec.core.verify import verify
    from spikec.passes.unroll_virtual_steps import unroll_virtual_steps
    r = np.random.default_rng(0)
    b = GraphBuilder((12,), "binary", "input")
    b.add("fc", "linear", ["input"], params={"weight": r.random((8, 12)) * 0.5, "bias": np.zeros(8)})
    b.add("q", "intfire", ["fc"], {"max_spikes": 3, "rounding": "round"},
          {k: np.asarray(v, dtype=np.float64) for k, v in dict(beta=1.0, alpha=1.0, threshold=0.5).items()})
    b.add("out", "linear", ["q"], params={"weight": r.normal(0, 0.5, (3, 8)), "bias": np.zeros(3)})
    g = verify(unroll_virtual_steps(b.graph("out")).graph)
    assert g.node("q").type.substeps == 3
    section, _, net, _ = _section(g, _spikes(12))
    assert any(rec.get("substeps", 1) == 3 for rec in net["recorded"])
    assert section["per_inference"]["physical_steps"] == T
