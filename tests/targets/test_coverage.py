"""Every registered op (a neuron op once per reset variant) against every target and NIR consumer: it lowers (and
its example graph verifies there) or the target refuses it by name. The README's table is this matrix,
regenerated, never written by hand."""
import pytest

from spikec.targets import coverage
from spikec.targets.lava import lava_available

README = coverage.TABLE_PAGE  # the page holding the generated table (README links it)


@pytest.fixture(scope="module")
def table():
    if lava_available() is not None:
        pytest.skip(f"Lava does not import here: {lava_available()}")
    from spikec.targets.lava import supervisor
    with supervisor.session():   # one Lava runtime for every cell (measured 629 s -> 80 s CPU): it ends here
        return coverage.matrix()


def test_every_registered_op_has_an_example_graph():
    missing = [op for op in coverage.covered_ops() if op not in coverage.EXAMPLES]
    assert not missing, f"ops with no example graph in spikec/targets/coverage.py EXAMPLES: {missing}"


def test_each_example_uses_its_op():
    for op in coverage.covered_ops():
        graph, x = coverage.EXAMPLES[op]()
        assert any(n.op == op for n in graph.nodes), op
        assert x.shape[:2] == (coverage.STEPS, coverage.BATCH)


def test_no_target_fails_an_op(table):
    """Lowered but not reproduced, or crashed: a target bug, never a table entry."""
    failing = {(op, t): c.detail for op, row in table.items() for t, c in row.items() if c.status == "fails"}
    assert not failing, failing


def test_refusals_give_a_reason(table):
    for op, row in table.items():
        for t, c in row.items():
            if c.status == "refused":
                assert len(c.detail) > 10, (op, t, c)


def test_every_target_lowers_the_core_spiking_ops(table):
    for op in ("conv2d", "linear", "add", "avgpool2d", "flatten", "delay"):
        assert all(table[op][t].status == "lowers" for t in ("lava", "nir", "onnx")), (op, table[op])
    for op in ("conv2d", "linear", "flatten", "maxpool2d", "batchnorm"):   # and in both NIR consumers
        assert all(table[op][t].status == "lowers" for t in ("nir-snntorch", "nir-norse")), (op, table[op])
    assert "Delay" in table["delay"]["nir-snntorch"].detail and "Delay" in table["delay"]["nir-norse"].detail
    assert {t for t, c in table["lif (zero)"].items() if c.status == "lowers"} == {"lava", "nir-snntorch",
                                                                                   "nir-norse", "onnx"}


def test_columns_are_the_targets_and_the_nir_consumers(table):
    from spikec.targets.nir.consumers import CONSUMERS
    assert coverage.COLUMNS == ("lava", *(f"nir-{c}" for c in CONSUMERS), "nir", "onnx", "xylo")
    assert {"nir-snntorch", "nir-norse", "nir-sinabs", "nir-spikingjelly"} <= set(coverage.COLUMNS)
    assert all(tuple(row) == coverage.COLUMNS for row in table.values())


def test_a_consumer_added_to_the_nir_target_gets_its_column_by_itself(monkeypatch):
    """The nir-<consumer> columns are the NIR target's CONSUMERS; a new one's cell is that consumer's run of the
    file, read from the NIR report as the others' are (here one the NIR target does not run: refused, named)."""
    import types
    from spikec.targets.nir import consumers
    # the coverage module's view of CONSUMERS only: the NIR target itself does not run "newsim"
    monkeypatch.setattr(coverage, "nir_consumers", types.SimpleNamespace(CONSUMERS=(*consumers.CONSUMERS, "newsim")))
    assert "nir-newsim" in coverage.columns() and coverage.form_of("newsim") == "any"
    assert coverage.form_of("norse") == "norse" and coverage.form_of("spikingjelly") == "snntorch"
    c = coverage.cell("linear", "nir-newsim")
    assert c.status == "refused" and c.detail == "not run by newsim: newsim was not run", c


def test_the_xylo_column(table):
    """spikec.nn.xylo populations map exactly; snnTorch's subtract-reset neurons map approximately (the chip is
    bit-exact against spikec's reference, not the float source); a zero reset is refused by name."""
    assert table["xylo_lif"]["xylo"].status == "lowers"
    assert all(table["xylo_lif"][t].status == "refused" for t in ("lava", "nir", "onnx"))
    for row in ("lif_snntorch (subtract, reset_delay=True)", "synaptic_snntorch (subtract, reset_delay=True)",
                "rleaky_snntorch (one_to_one, subtract, reset_delay=True)"):
        c = table[row]["xylo"]
        assert c.status == "approximate" and "bit-exact vs spikec's reference" in c.detail, (row, c)
    assert "reset 'zero'" in table["lif_snntorch (zero, reset_delay=False)"]["xylo"].detail
    assert "| approx: maps, XyloSim bit-exact" in coverage.markdown({"r": table["lif_snntorch (subtract, "
                                                                              "reset_delay=True)"]})


def test_a_neuron_op_has_one_row_per_reset_variant(table):
    rows = coverage.rows()
    assert list(table) == rows and len(rows) == len(set(rows))
    for op, variants in coverage.VARIANTS.items():
        assert op not in table and all(f"{op} ({v})" in table for v in variants), op
    for op in ("lif_snntorch", "synaptic_snntorch", "lif_sj", "lif_norse"):
        assert len(coverage.VARIANTS[op]) >= 2, op
    resets = {r: {n.attrs.get("reset") for n in coverage.example(r)[0].nodes if n.op == r.split(" (")[0]}
              for r in rows if r.startswith("lif_snntorch")}
    assert set().union(*resets.values()) == {"subtract", "zero", "none"}


def test_each_variant_example_uses_its_op():
    for row in coverage.rows():
        graph, x = coverage.example(row)
        assert any(n.op == row.split(" (")[0] for n in graph.nodes), row
        assert x.shape[:2] == (coverage.STEPS, coverage.BATCH)


def test_a_consumer_column_runs_the_file_in_the_consumer(table):
    """A consumer cell is the consumer's run (yes), the consumer limit or crash that kept the file from running
    there ("not run by ..."), or the exporter's refusal -- then the generic file is refused too, or the consumer's
    form is what the exporter refused."""
    for row, cells in table.items():
        for col, name in (("nir-snntorch", "snnTorch"), ("nir-norse", "Norse"), ("nir-sinabs", "Sinabs"),
                          ("nir-spikingjelly", "SpikingJelly")):
            c = cells[col]
            if c.status == "refused" and not c.detail.startswith(f"not run by {name}: "):
                assert cells["nir"].status == "refused" or "consumer" in c.detail, (row, col, c)
    # the subtract reset as its CubaLIF reset cycle: run by snnTorch, Norse and SpikingJelly; Sinabs names why not
    assert all(table["lif (subtract)"][t].status == "lowers" for t in ("nir-snntorch", "nir-norse", "nir-spikingjelly"))
    assert "not run by Sinabs" in table["lif (subtract)"]["nir-sinabs"].detail
    assert "not run by Norse" in table["add"]["nir-norse"].detail


def test_reasons_drop_boilerplate_not_the_node():
    text = coverage._short("the Lava target cannot map node 'out' (lif_norse): a neuron's current")
    assert text == "node 'out' (lif_norse): a neuron's current"
    assert coverage._short("node 'a' (b): cannot be exported to NIR exactly: why") == "node 'a' (b): why"


def test_readme_table_is_the_generated_one(table):
    text = README.read_text()
    generated = coverage.readme_with(text, coverage.markdown(table))
    assert text == generated, "README's coverage table is stale: run `python -m spikec.targets.coverage " \
                              "--write-readme`"
