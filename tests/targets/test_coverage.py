"""Every registered op against every target: it lowers (and its example graph verifies there) or the target
refuses it by name. The README's op x target table is this matrix, regenerated, never written by hand."""
from pathlib import Path

import pytest

from spikec.targets import coverage
from spikec.targets.lava import lava_available

README = Path(__file__).resolve().parents[2] / "README.md"


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
    for op in ("conv2d", "linear", "lif", "add", "avgpool2d", "flatten", "delay"):
        assert all(c.status == "lowers" for c in table[op].values()), (op, table[op])


def test_readme_table_is_the_generated_one(table):
    text = README.read_text()
    generated = coverage.readme_with(text, coverage.markdown(table))
    assert text == generated, "README's coverage table is stale: run `python -m spikec.targets.coverage " \
                              "--write-readme`"
