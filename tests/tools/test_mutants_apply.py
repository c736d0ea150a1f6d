"""The mutant catalogue of tools/mutation.py cannot rot silently: every mutant still applies to the current
tree (its original text occurs exactly once in its file), changes something, still compiles, and names test
files and runtime examples that exist. Fast: no mutant is run here."""
import pytest

from tools_modules import ROOT, load

MUTANTS = load("mutants")
MUTATION = load("mutation")
ALL = MUTANTS.MUTANTS


def test_ids_are_unique_and_kinds_known():
    ids = [m.id for m in ALL]
    assert len(ids) == len(set(ids))
    assert {m.kind for m in ALL} <= set(MUTANTS.KINDS)
    assert 40 <= len(ALL) <= 80


@pytest.mark.parametrize("m", ALL, ids=[m.id for m in ALL])
def test_mutant_applies_to_the_current_tree(m):
    path = ROOT / m.file
    assert path.is_file(), f"{m.id}: {m.file} is gone"
    source = path.read_text()
    assert source.count(m.original) == 1, f"{m.id}: original text occurs {source.count(m.original)} times in {m.file}"
    assert m.replacement != m.original
    mutated = source.replace(m.original, m.replacement)
    assert mutated != source
    compile(mutated, str(path), "exec")   # a mutant is a bug, never a syntax error


@pytest.mark.parametrize("m", ALL, ids=[m.id for m in ALL])
def test_mutant_names_its_tests_and_examples(m):
    assert m.tests, f"{m.id}: no test files"
    for t in m.tests:
        assert (ROOT / t).is_file(), f"{m.id}: test file {t} does not exist"
    assert set(m.examples) <= set(MUTATION.EXAMPLES)
    if m.kind == "pass":
        assert m.semantic in (True, False), f"{m.id}: a pass mutant says whether it is semantic"
    else:
        assert m.semantic is None and not m.examples


def test_runtime_examples_exist():
    for name, args in MUTATION.EXAMPLES.items():
        model = args[0].rsplit(":", 1)[0]
        assert (ROOT / model).is_file(), name
        for flag in ("--weights", "--inputs"):
            if flag in args:
                assert (ROOT / args[args.index(flag) + 1]).is_file(), (name, flag)
