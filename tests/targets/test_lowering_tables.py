"""Each target lowers through a table keyed by op: ONNX ``EMITTERS``, NIR ``export.LOWERINGS``, Lava
``ops_table.TABLE`` (its neurons' forms, read as ``neurons.NEURONS`` and ``vocabulary.LOWERINGS``; ``lower.LOWERINGS``
for its integer ops).
A new neuron op is its definition plus one entry per target: shown here with a copy of ``lif`` under a new name,
lowered by every target exactly as ``lif`` is."""
import importlib
import json

import numpy as np
import pytest

from spikec.core.builder import GraphBuilder
from spikec.ir.errors import UnsupportedOp
from spikec.core.interpreter import run
from spikec.ops import OPS, define, opdef
from spikec.targets import coverage
from spikec.targets.lava import deploy
from spikec.targets.lava import neurons as lava_neurons
from spikec.targets.lava import vocabulary
from spikec.targets.nir import export as nir_export
from spikec.targets.onnx import check_model_against
from spikec.targets.onnx import export as onnx_export
from spikec.targets.onnx.emitters import EMITTERS

NEW = "lif_copy_test"
lava_lower = importlib.import_module("spikec.targets.lava.lower")   # (the package's `lower` is the function)


def _graph(op="lif"):
    b = GraphBuilder((8,))
    rng = np.random.default_rng(0)
    y = b.add("fc", "linear", ["x"], {}, {"weight": rng.integers(-4, 9, (6, 8)) / 16.0})
    params = {"beta": np.full(6, 0.5), "alpha": np.ones(6), "bias": np.zeros(6), "threshold": np.full(6, 0.375),
              "v_reset": np.zeros(6)}
    g = b.graph(b.add("out", op, [y], {"reset": "zero"}, params))
    return g, (rng.random((4, 2, 8)) < 0.4).astype(np.float64)


@pytest.fixture
def new_neuron(monkeypatch):
    """The op, defined once (registry), then one lowering entry per target."""
    lif = opdef("lif")
    define(NEW, 1, lif.infer, count=lif.count, kernel=lif.kernel, stateful=True, neuron=True, params=lif.params)
    monkeypatch.setitem(EMITTERS, NEW, EMITTERS["lif"])                                   # ONNX
    monkeypatch.setitem(nir_export.LOWERINGS, NEW, nir_export.LOWERINGS["lif"])           # NIR
    monkeypatch.setitem(lava_neurons.NEURONS, NEW, lava_neurons.NEURONS["lif"])           # Lava (fixed point)
    monkeypatch.setitem(vocabulary.LOWERINGS, NEW, vocabulary.NEURON)                     # (built from NEURONS)
    yield
    OPS.pop(NEW)


def test_a_new_neuron_is_lowered_by_every_target_from_its_table_entries(new_neuron):
    (ref, x), (new, _) = _graph("lif"), _graph(NEW)
    trace = run(new, x)
    assert np.array_equal(trace.values["out"], run(ref, x).values["out"])
    # ONNX: the emitter entry, and the registry's neuron flag counts it as a neuron compared
    summary = check_model_against(onnx_export(new, 4), new, x, trace)
    assert summary["equivalent"] and summary["neurons_compared"] == 1
    # NIR: the same file as lif's
    ex_ref, ex_new = nir_export.export(ref), nir_export.export(new)
    assert sorted(ex_new.graph.nodes) == sorted(ex_ref.graph.nodes) and ex_new.graph.edges == ex_ref.graph.edges
    # Lava: the same integer network as lif's
    (_, net_ref, arr_ref), (_, net_new, arr_new) = deploy(ref, x), deploy(new, x)
    assert json.dumps(net_new, sort_keys=True) == json.dumps(net_ref, sort_keys=True)
    assert sorted(arr_new) == sorted(arr_ref) and all(np.array_equal(arr_new[k], arr_ref[k]) for k in arr_ref)


def test_without_its_entries_each_target_refuses_the_new_op():
    lif = opdef("lif")
    define(NEW, 1, lif.infer, count=lif.count, kernel=lif.kernel, stateful=True, neuron=True, params=lif.params)
    try:
        new, x = _graph(NEW)
        with pytest.raises(UnsupportedOp, match="has no ONNX form"):
            onnx_export(new, 4)
        with pytest.raises(UnsupportedOp, match=f"op '{NEW}' has no NIR mapping"):
            nir_export.export(new)
        with pytest.raises(UnsupportedOp, match="no Loihi mapping"):
            deploy(new, x)
    finally:
        OPS.pop(NEW)


def test_nir_dispatches_through_its_table(monkeypatch):
    g, _ = _graph()
    seen = []
    original = nir_export.LOWERINGS["linear"]
    monkeypatch.setitem(nir_export.LOWERINGS, "linear", lambda ex, node: seen.append(node.name) or original(ex, node))
    nir_export.export(g)
    assert seen == ["fc"]
    monkeypatch.delitem(nir_export.LOWERINGS, "linear")
    with pytest.raises(UnsupportedOp, match="op 'linear' has no NIR mapping"):
        nir_export.export(g)


def test_refusals_by_name_and_lowerings_do_not_overlap():
    assert not set(nir_export.REASONS) & set(nir_export.LOWERINGS)
    assert not set(vocabulary.NO_MAPPING) & set(vocabulary.LOWERINGS)
    assert set(lava_neurons.NEURONS) == {op for op, r in vocabulary.LOWERINGS.items() if r == vocabulary.NEURON}
    assert vocabulary.NEURONS == ("lif", "intfire", "intfire_unrolled", "silif", "csilif", "lif_sj", "lif_snntorch",
                                  "synaptic_snntorch", "rleaky_snntorch", "lif_norse", "lif_recurrent_norse", "li_norse",
                                  "and_gate")


def test_lava_views_are_read_off_its_table():
    from spikec.targets.lava import exact_source, host, ops_table
    assert list(lava_neurons.NEURONS) == list(ops_table.having("form"))
    assert all(lava_neurons.NEURONS[op] is lava_neurons.FORMS[e.form] for op, e in ops_table.TABLE.items() if e.form)
    assert set(ops_table.having("refused")) <= set(vocabulary.NO_MAPPING)
    assert set(ops_table.having("host")) <= set(host.HOST) and set(exact_source.LOWERS) == set(
        ops_table.having("exact_source"))
    assert [op for op in OPS if OPS[op].neuron and op in host.HOST] == list(ops_table.having("host"))


def test_lava_integer_ops_each_have_a_lowering():
    import spikec.targets.lava.ops as lops
    integer_ops = {op for op in OPS if op.startswith("lava_")}
    assert integer_ops <= set(lava_lower.LOWERINGS)
    assert set(lava_lower.POPULATIONS) == set(lops.STATES) | {"lava_or", "lava_readout", "lava_and"}   # stateless


def test_coverage_reads_the_tables():
    tables = coverage.lowering_tables()
    assert tuple(tables) == coverage.TARGETS
    assert tables["onnx"] == set(EMITTERS) and tables["nir"] == set(nir_export.LOWERINGS)
    from spikec.targets.lava.exact_source import LOWERS as EXACT_SOURCE  # spikec.nn.loihi's own integer ops
    assert tables["lava"] == set(vocabulary.LOWERINGS) | set(EXACT_SOURCE)


def test_coverage_fails_a_cell_lowered_without_a_table_entry(monkeypatch):
    tables = coverage.lowering_tables()
    monkeypatch.setattr(coverage, "lowering_tables", lambda: {**tables, "onnx": tables["onnx"] - {"linear"}})
    c = coverage.cell("linear", "onnx")
    assert c.status == "fails" and "no entry for linear" in c.detail
    assert coverage.cell("flatten", "onnx").status == "lowers"
