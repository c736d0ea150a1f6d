"""Shared helpers of the TTFS tests: trace an ANN, map it, simulate it, check it against the ANN."""
import spikec.codings.ttfs  # noqa: F401
from spikec.frontend import trace
from spikec.core.interpreter import run
from spikec.targets.ttfs.verify import check_layers
from spikec.codings.ttfs.simulate import simulate
from spikec.codings.ttfs.timing import assign_ttfs_timing

TOL = 1e-9


def map_and_check(model, input_shape, calibration, verification=None, **options):
    """(plan, sim, check) with the check on ``verification`` (default: the calibration inputs)."""
    graph = trace(model, input_shape, input_kind="real")
    plan = assign_ttfs_timing(graph, calibration, **options)
    x = calibration if verification is None else verification
    sim = simulate(plan.graph, x)
    check = check_layers(plan, sim, run(plan.ann, x), TOL)
    return plan, sim, check


def assert_exact(check):
    assert check["max_rel_window_error"] <= TOL, check["layers"]


def assert_one_spike(sim):
    assert max(sim.spike_counts.values()) <= 1
