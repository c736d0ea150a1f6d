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
    assert coverage.COLUMNS == ("lava", "nir-snntorch", "nir-norse", "nir-sinabs", "nir-spikingjelly", "nir", "onnx")
    assert all(tuple(row) == coverage.COLUMNS for row in table.values())


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
    assert "Threshold" in table["lif (subtract)"]["nir-snntorch"].detail   # the subtract reset's LI + Threshold
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
