"""Which op each target lowers: every registered op against every target, from a seeded example graph.

``EXAMPLES`` builds, for each op of the IR, a small graph that uses it (seeded, dyadic weights: exact in
any summation order), with its inputs; ``VARIANTS`` one graph per reset variant of a neuron op, which then has
one row per variant (``rows()``: ``op`` or ``op (variant)``). ``cell(row, column)`` runs that graph through a
column of ``COLUMNS``: a target (``lava``, ``nir`` -- spikec's NIR interpreter on the written file --, ``onnx``,
``xylo``) or ``nir-<consumer>``, one per consumer of ``spikec.targets.nir.consumers.CONSUMERS`` (the file written
with ``nir_consumer=<consumer>`` -- or the form ``FORM_OF`` names -- and run by that importer on the example's
first output). The target either lowers it and reproduces the reference interpreter (``lowers``), or maps it
onto integer hardware that differs from the float source by a measured amount (``approximate``: Xylo, an
op that is not a ``spikec.nn.xylo`` population; XyloSim still equals spikec's reference bit for bit), or
refuses it by name (``refused``, with the target's reason or the consumer limit that kept the file from
running), or fails (a bug: lowered but not reproduced, or crashed, or lowered though the target's lowering table
has no entry for the op). Which ops each target has a lowering for is read
from the targets' own tables (``lowering_tables``): ONNX's ``EMITTERS``, NIR's ``LOWERINGS``, Lava's
``vocabulary.LOWERINGS``, Xylo's ``mapper.LOWERINGS``. Xylo maps one form (input -> linear -> hidden neuron ->
linear -> output neuron), so its cell runs the example's first output, a one-layer example (input -> linear ->
the row's neuron) completed by ``_xylo_form`` with a read-out layer; the example graphs live in
``spikec.targets.coverage_examples``.
Ops that only a target or a coding creates (Lava's integer ops ``lava_*``, the TTFS ops) are listed in
``INTERNAL`` with the reason they have no row. ``python -m spikec.targets.coverage --write-readme``
regenerates the table of ``docs/coverage.md`` (``TABLE_PAGE``) from this; a test keeps the two equal.
"""
import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from spikec.ir.errors import SpikecError
from spikec.ops import OPS
from spikec.targets.nir import consumers as nir_consumers
from spikec.targets.nir.forms import CONSUMER as NIR_DEFAULT_FORM, CONSUMERS as NIR_FORMS
from spikec.targets.coverage_examples import BATCH, EXAMPLES, STEPS, VARIANTS  # noqa: F401  (the rows)

TARGETS = ("onnx", "nir", "lava", "xylo")   # the targets: every one has a lowering table below
# the columns, in this order: a target, or the NIR target's file as each consumer the NIR target runs runs it
# (written in its form); a consumer added to CONSUMERS gets its column by itself
def columns() -> tuple[str, ...]:
    return ("lava", *(f"nir-{c}" for c in nir_consumers.CONSUMERS), "nir", "onnx", "xylo")


COLUMNS = columns()
CONSUMER_NAMES = {"snntorch": "snnTorch", "norse": "Norse", "sinabs": "Sinabs", "spikingjelly": "SpikingJelly",
                  "rockpool": "Rockpool"}
# consumers with no nir_consumer form of their own (not in forms.CONSUMERS): the form their column's file is
# written in, "any" unless named here (SpikingJelly's import_from_nir asserts snnTorch's CubaLIF form,
# r = tau_mem/dt and w_in = tau_syn/dt)
FORM_OF = {"sinabs": "any", "spikingjelly": "snntorch"}


def form_of(consumer: str) -> str:
    """The ``nir_consumer`` form a consumer's column is written in."""
    return consumer if consumer in NIR_FORMS else FORM_OF.get(consumer, "any")


def consumer_name(consumer: str) -> str:
    return CONSUMER_NAMES.get(consumer, consumer)
INTERNAL = {"lava_": "the Lava target's own integer ops (its integer reference)",
            "ttfs_": "created by the TTFS coding pass, verified by its own simulator",
            "layernorm": "an ANN op of the TTFS coding (decomposed into TTFS sub-layers)",
            "and_gate": "the Lava target's AND neurons of binary products (its product placement creates them)",
            "input": "the graph input"}
BEGIN, END = "<!-- coverage:begin -->", "<!-- coverage:end -->"
TABLE_PAGE = Path(__file__).resolve().parents[2] / "docs" / "coverage.md"  # the page holding the table (README links it)
def rows() -> list[str]:
    """The table's rows: every covered op, a neuron op once per variant (``op (variant)``)."""
    return [r for op in covered_ops() for r in ([f"{op} ({v})" for v in VARIANTS[op]] if op in VARIANTS else [op])]


def example(row: str):
    """The example graph and inputs of a row."""
    op, _, variant = row.partition(" (")
    return VARIANTS[op][variant[:-1]]() if variant else EXAMPLES[op]()


def lowering_tables() -> dict[str, frozenset]:
    """The ops each target has a lowering for, read from the target's own table (keyed by op)."""
    from spikec.targets.lava.exact_source import LOWERS as LAVA_EXACT
    from spikec.targets.lava.vocabulary import LOWERINGS as LAVA
    from spikec.targets.nir.export import LOWERINGS as NIR
    from spikec.targets.onnx.emitters import EMITTERS
    from spikec.targets.xylo.mapper import LOWERINGS as XYLO
    return {"onnx": frozenset(EMITTERS), "nir": frozenset(NIR), "lava": frozenset(LAVA) | frozenset(LAVA_EXACT),
            "xylo": frozenset(XYLO)}


def internal_reason(op: str) -> str | None:
    return next((why for prefix, why in INTERNAL.items() if op == prefix or op.startswith(prefix)), None)


def covered_ops() -> list[str]:
    """Every registered op that has a row (all but target- and coding-internal ones)."""
    import spikec.frontend  # noqa: F401  (the converters' ops)
    import spikec.frontend.xylo  # noqa: F401  (xylo_lif: else registered when a spikec.nn.xylo module is built)
    return sorted(op for op in OPS if internal_reason(op) is None)


@dataclass(frozen=True)
class Cell:
    status: str   # lowers | approximate | refused | fails
    detail: str = ""


def cell(row: str, column: str, memo: dict | None = None) -> Cell:
    """Row ``row`` (an op, or ``op (variant)``) on ``column``: a target (``lava``, ``nir`` -- spikec's own NIR
    interpreter on the file --, ``onnx``) or ``nir-<consumer>``: the file written for that consumer
    (``nir_consumer``) and run by it, spike for spike with the interpreter, or the reason it is not.

    ``memo`` (one dict per row, ``matrix`` passes it): a target run shared by the columns that make the same one
    -- the NIR target runs every consumer on its file, so the consumer columns of one form (and ``nir`` itself,
    on a one-output example in the default form) read one run's report."""
    op = row.partition(" (")[0]
    graph, x = example(row)
    if not any(n.op == op for n in graph.nodes):
        return Cell("fails", f"the example graph of {row} does not contain {op}")
    target, _, consumer = column.partition("-")
    options = {"seed": 0, "nir_consumer": form_of(consumer)} if consumer else {"seed": 0}
    if consumer:   # nirtorch runs graphs of one output: the consumers run the example's first read (its spikes)
        graph = _first_output(graph)
    if target == "xylo":   # Xylo's one output population: the first read, a one-layer example given a read-out
        graph = _xylo_form(_first_output(graph))
    memo = {} if memo is None else memo
    key = (target, options.get("nir_consumer", NIR_DEFAULT_FORM) if target == "nir" else None, graph.outputs,
           len(graph.nodes))
    if key not in memo:
        memo[key] = _target_run(target, graph, x, options)
    result = memo[key]
    if isinstance(result, Cell):
        return result
    if target == "nir":
        found = _nir_cell(result.report, consumer)
        if found is not None:
            return found
    elif not result.ok:
        return Cell("fails", "lowered but did not reproduce the interpreter")
    if op not in lowering_tables()[target]:
        return Cell("fails", f"lowered, but the {target} lowering table has no entry for {op}")
    if target == "xylo" and not result.report["bit_exact_vs_source"]:
        # the chip's neurons are not the float source's (reset timing, several spikes a step, the current in front
        # of a Leaky): more than rounding, so the cell says so with the measured agreement
        f = result.report["float_vs_fixed"]
        return Cell("approximate", f"maps, XyloSim bit-exact vs spikec's reference; vs the float source "
                                   f"{100 * f['output_spike_agreement']:.0f}% of output spike entries agree")
    return Cell("lowers")


def _target_run(target: str, graph, x, options):
    """The target's result on ``graph``, or its refusal as a cell."""
    from spikec.core.interpreter import run
    from spikec.targets import get_target
    try:
        return get_target(target)(graph, x, run(graph, x), options)
    except SpikecError as e:
        named = e.where and e.where.split(",")[0] in e.what  # the message already names the node
        where = f"{e.where}: " if e.where and not named else ""
        return Cell("refused", where + e.what.splitlines()[0])


def _xylo_form(graph):
    """A one-layer example ``input -> linear -> neuron`` completed into Xylo's form: the neuron is the hidden
    layer, read out by a dyadic linear into a default snnTorch ``Leaky`` (subtract reset, beta = 1 - 2**-3)."""
    import numpy as np
    from spikec.frontend.snntorch_neurons import LIF_SNNTORCH
    from spikec.targets.coverage_examples import _Builder
    from spikec.targets.xylo.mapper import HIDDEN_OPS
    out = graph.node(graph.outputs[0])
    fed = graph.node(out.inputs[0]) if len(out.inputs) == 1 else None
    if out.op not in HIDDEN_OPS or fed is None or fed.op != "linear" or graph.node(fed.inputs[0]).op != "input":
        return graph
    b = _Builder(45, graph.inputs[0].type.shape, graph.inputs[0].type.kind)
    names = {graph.inputs[0].name: "x"}
    for n in graph.nodes:
        if n.op != "input":
            names[n.name] = b.add(n.name, n.op, [names[i] for i in n.inputs], dict(n.attrs), dict(n.params))
    head = b.linear("xylo.head", names[out.name], 2)
    return b.graph(b.add("xylo.out", LIF_SNNTORCH, [head], {"reset": "subtract", "reset_delay": True},
                         {"beta": np.array(0.875), "threshold": np.array(1.0)}))


def _first_output(graph):
    """``graph`` reduced to its first output and the nodes it reads."""
    from spikec.ir.graph import Graph
    keep, todo = set(), [graph.outputs[0]]
    while todo:
        name = todo.pop()
        if name not in keep:
            keep.add(name)
            todo.extend(graph.node(name).inputs)
    return Graph(tuple(n for n in graph.nodes if n.name in keep), graph.outputs[:1], graph.meta)


def _nir_cell(report: dict, consumer: str) -> Cell | None:
    """The NIR file's verdict: the interpreter's (``exact``), then the consumer's; None when both hold."""
    if not report["exact"]:
        return Cell("fails", "written, but spikec's NIR interpreter does not reproduce the graph")
    if not consumer:
        return None
    c = report.get("consumers", {}).get(consumer, {"ran": False, "reason": f"{consumer} was not run"})
    if not c.get("ran"):
        return Cell("refused", f"not run by {consumer_name(consumer)}: {c['reason']}")
    if not c.get("spike_exact"):
        return Cell("fails", f"{consumer_name(consumer)} ran the file and differs: {c.get('spike_mismatches')} "
                             "spike mismatches, no consumer limit predicted it")
    return None


def matrix(rows_=None, columns=COLUMNS) -> dict:
    table = {}
    for r in rows_ or rows():
        memo: dict = {}   # the row's target runs, shared by the columns that make the same one
        table[r] = {c: cell(r, c, memo) for c in columns}
    return table


def markdown(table: dict) -> str:
    targets = list(next(iter(table.values())))
    lines = ["| op (variant) | " + " | ".join(targets) + " |", "|---|" + "---|" * len(targets)]
    for op, row in table.items():
        text = []
        for t in targets:
            c = row[t]
            text.append("yes" if c.status == "lowers" else f"approx: {_short(c.detail)}" if c.status == "approximate"
                        else f"no: {_short(c.detail)}" if c.status == "refused" else "**FAILS**")
        name, _, variant = op.partition(" (")
        lines.append(f"| `{name}`{' (' + variant if variant else ''} | " + " | ".join(text) + " |")
    return "\n".join(lines)


BOILERPLATE = (r"cannot be exported to NIR exactly: ", r"the Lava target cannot map (?=node )",
               r"the xylo target cannot map this: ")  # the column says it


def _short(reason: str, width: int = 110) -> str:
    reason = re.sub(r"\s+", " ", reason).replace("|", "/").strip()
    for pattern in BOILERPLATE:
        reason = re.sub(pattern, "", reason)
    return reason if len(reason) <= width else reason[: width - 3].rstrip() + "..."


def readme_with(readme: str, table_md: str) -> str:
    if BEGIN not in readme or END not in readme:
        raise ValueError(f"README has no {BEGIN} ... {END} section")
    head, rest = readme.split(BEGIN, 1)
    return head + BEGIN + "\n" + table_md + "\n" + END + rest.split(END, 1)[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-readme", action="store_true",
                        help="rewrite the coverage table between its markers in docs/coverage.md (linked from README)")
    args = parser.parse_args(argv)
    table_md = markdown(matrix())
    if args.write_readme:
        TABLE_PAGE.write_text(readme_with(TABLE_PAGE.read_text(), table_md))
    print(table_md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
