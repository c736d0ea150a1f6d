"""An op is described on its card: no neuron op is named by string in more than ``LIMIT`` files of ``spikec/``.

The budget (docs/development.md, "Adding an op") is its card, its converter and one table per target. A file
*names* an op when its code holds a string constant equal to the op's name (``tokenize``-free: the module's AST,
so a docstring, a comment, a longer string holding the name, or an f-string part is not a mention). Any other
place that needs a fact about an op (does it decay, has it a step form, is it a neuron) reads it from the card.

The neuron ops are the cards flagged ``neuron``; ``test_every_firing_op_is_flagged_a_neuron`` holds the flag
honest: a stateful op holding the IR's firing threshold (``threshold`` in every op of the IR, docs/ops.md) fires.
Nothing is excused (the Lava and NIR targets, restructured, are within it). The Lava target names neuron ops in one
file, its table (``targets/lava/ops_table.py``). ``-s`` prints the table.
"""
import ast
from functools import cache
from pathlib import Path

import pytest

import spikec.frontend  # noqa: F401  (the converters' framework-exact ops)
import spikec.targets.lava.ops  # noqa: F401  (the Lava target's integer ops)
import spikec.codings.ttfs  # noqa: F401  (the TTFS coding's ops)
from spikec.ops import OPS

ROOT = Path(__file__).resolve().parents[1]
SPIKEC = ROOT / "spikec"
LIMIT = 6
LAVA_TABLE = "targets/lava/ops_table.py"


def string_constants(source: str) -> set[str]:
    """The string constants of ``source``'s code: docstrings (a body's first statement) left out; an f-string's
    literal parts are fragments, not names."""
    tree = ast.parse(source)
    skip = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skip.add(id(first.value))
        if isinstance(node, ast.JoinedStr):
            skip.update(id(v) for v in node.values)
    return {n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip}


@cache
def _constants() -> dict[str, frozenset]:
    return {p.relative_to(SPIKEC).as_posix(): frozenset(string_constants(p.read_text()))
            for p in sorted(SPIKEC.rglob("*.py"))}


def files_naming(op: str) -> list[str]:
    """The files of spikec/ (relative paths) whose code names ``op`` by string."""
    return [f for f, names in _constants().items() if op in names]


NEURONS = sorted(name for name, d in OPS.items() if d.neuron)


def table() -> str:
    rows = sorted(((op, files_naming(op)) for op in NEURONS), key=lambda r: (-len(r[1]), r[0]))
    return "\n".join(f"{op:22s} {len(files):3d} {' '.join(files)}" for op, files in rows)


def test_the_counter_counts_code_strings_only():
    source = ('"""lif in the docstring"""\nA = "lif"\ndef f(op):\n    """lif"""\n    return op == "lif_x" '
              'or f"lif{op}" == "the lif op"\n# "lif"\n')
    assert string_constants(source) == {"lif", "lif_x", "the lif op"}
    assert "lif" not in string_constants('"""lif"""\nB = f"{1}lif"\n')


def test_every_neuron_is_named_on_its_card():
    """The counter sees the card: each neuron op's defining module names it (else the table means nothing)."""
    print("\n" + table())
    missing = [op for op in NEURONS
               if OPS[op].module.removeprefix("spikec.").replace(".", "/") + ".py" not in files_naming(op)]
    assert len(NEURONS) >= 5 and not missing, missing


@pytest.mark.parametrize("op", NEURONS)
def test_a_neuron_op_is_named_in_at_most_limit_files(op):
    files = files_naming(op)
    assert len(files) <= LIMIT, f"{op} is named by string in {len(files)} files of spikec/: {files}"


def test_the_lava_target_names_neuron_ops_in_its_table_only():
    """One table keyed by op per target: every other Lava module reads it, the cards, or a card's name constant."""
    elsewhere = {op: [f for f in files_naming(op) if f.startswith("targets/lava/") and f != LAVA_TABLE]
                 for op in NEURONS}
    assert not {op: f for op, f in elsewhere.items() if f}, elsewhere
    assert all(LAVA_TABLE in files_naming(op) for op in ("lif", "lif_snntorch", "sdna_pairwise"))


def test_every_firing_op_is_flagged_a_neuron():
    firing = sorted(name for name, d in OPS.items() if d.stateful and "threshold" in d.param_names)
    assert firing and not [op for op in firing if not OPS[op].neuron], [op for op in firing if not OPS[op].neuron]


def test_adding_an_op_states_the_limit():
    """docs/development.md's "Adding an op" (README points there) states the budget this test measures."""
    text = (ROOT / "docs" / "development.md").read_text()
    section = text.split("## Adding an op", 1)[1].split("\n## ", 1)[0]
    assert f"at most {LIMIT} files" in section and "tests/test_op_mentions.py" in section
