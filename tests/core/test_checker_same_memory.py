"""Comparison.add of one array with itself (the same memory: a value a pass's run took from the run before it)
takes add_self's path, and gives exactly what the full rule gives on an equal copy: counts, max_rel_diff, NaNs
matched or mismatched, listed mismatches."""
import numpy as np
import pytest

from spikec.core.checker import Comparison, _same_values

RNG = np.random.default_rng(0)
VALUES = [RNG.normal(size=(3, 2, 4)), np.array([[[np.inf, 1.0, -np.inf]]]), np.array([[[np.nan, 1.0, np.nan]]]),
          np.zeros((2, 1, 3)), RNG.normal(size=(2, 2, 2)) * 1e300, (RNG.random((4, 3, 5)) < 0.3) * 1.0,
          np.zeros((0, 2, 3)), np.array([[[np.nan]]])]


def _fields(c: Comparison) -> dict:
    return {k: (v if k != "mismatches" else [m.to_json() for m in v]) for k, v in c.__dict__.items()}


def _same(a: dict, b: dict) -> bool:
    return repr(a) == repr(b)  # NaN fields and listed NaN values compare as written, not as nan != nan


@pytest.mark.parametrize("spike", [True, False])
def test_an_array_compared_with_itself_is_the_full_rule_on_a_copy(spike):
    itself, copy = Comparison(), Comparison()
    for i, v in enumerate(VALUES):
        margin = np.abs(v)
        assert _same_values(v, v) and not _same_values(v, v.copy())
        itself.add(f"n{i}", v, v, spike, margin)
        copy.add(f"n{i}", v, v.copy(), spike, margin)
    assert _same(_fields(itself), _fields(copy))
    # the check can fail: a NaN spike is a mismatch, a real NaN matches itself and is counted
    assert (itself.spike_mismatches == 3) if spike else (itself.nans_matched == 3 and itself.spike_mismatches == 0)


def test_views_of_other_elements_are_not_the_same_values():
    a = RNG.normal(size=(4, 2, 3))
    assert not _same_values(a[:2], a[2:]) and not _same_values(a[:, :1], a[:, 1:])
    assert not _same_values(a[::2], a[:2])         # same start, other strides
    assert not _same_values(a, a.astype(np.float32).astype(np.float64))
    b = a.reshape(2, 4, 3)
    assert not _same_values(a, b)                  # same memory, other shape: compared as shapes are


def _reference(expected, got):
    """The real-value rule as docs/equivalence.md states it, whole arrays and masks: (max_rel_diff, mismatches,
    NaNs matched)."""
    finite = np.isfinite(expected) & np.isfinite(got)
    scale = max(np.abs(expected[finite]).max(initial=0.0), np.abs(got[finite]).max(initial=0.0), np.finfo(float).tiny)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(finite, np.abs(np.where(finite, expected - got, 0.0)) / scale, 0.0)
    both_nan = np.isnan(expected) & np.isnan(got)
    bad = (diff > 1e-9) | (~finite & (expected != got) & ~both_nan)
    return float(diff.max(initial=0.0)), int(bad.sum()), int(both_nan.sum())


@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("what", ["worst", "nan", "inf", "out", "overflow"])
def test_the_blocked_real_rule_is_the_rule_across_block_boundaries(where, what):
    """The finite rule reads block by block (checker.BLOCK values): what lies in any block, the last partial one
    included, counts as in the whole-array rule."""
    from spikec.core import checker
    n = 3 * checker.BLOCK + 123
    e = RNG.normal(size=(n, 1))
    g = e * (1 + 1e-12 * RNG.normal(size=e.shape))
    at = {"first": 5, "middle": checker.BLOCK + 7, "last": n - 3}[where]
    if what == "worst":
        g[at, 0] = e[at, 0] * (1 + 5e-10)
    elif what == "nan":
        e[at, 0] = g[at, 0] = np.nan
    elif what == "inf":
        g[at, 0] = np.inf
    elif what == "out":
        g[at, 0] = e[at, 0] + 1e-3
    else:
        e[at, 0], g[at, 0] = 1.5e308, -1.5e308
    c = Comparison()
    c.add("n", e, g, False)
    assert (c.max_rel_diff, c.real_mismatches, c.nans_matched) == _reference(e, g)
    assert c.values_compared == e.size
