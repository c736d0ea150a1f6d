"""The blind-spot mutants of tools/mutants.py (``BLIND_SPOTS``: one-line bugs in code added late, each with a test
written for it) cannot rot silently: each still applies to the current tree exactly once, changes something,
compiles, and names test files that exist, the first of them a ``test_blind_spots*`` file. Fast: none is run."""
from pathlib import Path

import pytest

from tools_modules import ROOT, load

MUTANTS = load("mutants")
ALL = MUTANTS.BLIND_SPOTS


def test_ids_are_unique_across_both_sets_and_kinds_known():
    ids = [m.id for m in MUTANTS.MUTANTS + ALL]
    assert len(ids) == len(set(ids))
    assert {m.kind for m in ALL} <= set(MUTANTS.KINDS)


@pytest.mark.parametrize("m", ALL, ids=[m.id for m in ALL])
def test_blind_spot_mutant_applies_and_names_its_tests(m):
    path = ROOT / m.file
    assert path.is_file(), f"{m.id}: {m.file} is gone"
    source = path.read_text()
    assert source.count(m.original) == 1, f"{m.id}: original text occurs {source.count(m.original)} times"
    mutated = source.replace(m.original, m.replacement)
    assert mutated != source
    compile(mutated, str(path), "exec")
    assert m.tests and Path(m.tests[0]).name.startswith("test_blind_spots"), m.tests
    for t in m.tests:
        assert (ROOT / t).is_file(), f"{m.id}: test file {t} does not exist"
    assert m.why
