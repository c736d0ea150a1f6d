"""assign_ttfs_timing (passes.md, "TTFS timing assignment"): a ReLU ANN becomes a TTFS graph.

The work is in ``spikec.codings.ttfs.timing`` (structure, calibration, windows, delays, closed-form thresholds);
this module wraps it as a ``Pass`` for the pass manager. The pass needs calibration inputs, which a
``Graph -> PassResult`` function does not receive, so it is built per compile:
``make_pass(calibration, **options)``. The TTFS graph's outputs decode the ANN outputs and keep their
names, so the pass manager's checker compares them with the ANN's (1e-9 relative, float64); inputs that
clip (outside the calibration range) show up there as mismatches. ``--coding ttfs`` runs it
(``spikec.targets.ttfs.compile.lower_ttfs``, after decomposing LayerNorm) and verifies the result with the
event-driven simulator (``spikec.targets.ttfs.verify.verify_ttfs``).
"""
import numpy as np

from spikec.core.passes import Pass, PassResult
from spikec.codings.ttfs.timing import assign_ttfs_timing

NAME = "assign_ttfs_timing"
REQUIRES = ("a stateless ANN: Linear/Conv (with bias), ReLU / shift-ReLU / identity, average pooling, flatten, "
            "BatchNorm, scalar affine, residual additions, element-wise products, LayerNorm decomposed first "
            "(spikec.codings.ttfs.layernorm; --coding ttfs does); anything else (max-pool, sigmoid, spiking neurons) is "
            "refused with the node named")
ENSURES = ("a TTFS graph: one spike per neuron at most, windows t_min(n) = t_max(n-1), delays aligning residual "
           "operands, thresholds tau*theta = sum_j W'_ij L_src + U - b'; outputs decode to the ANN's")


def make_pass(calibration: np.ndarray, **options) -> Pass:
    """The pass with its calibration inputs ``[T, B, ...]`` and ``assign_ttfs_timing`` options bound."""
    def run(graph):
        plan = assign_ttfs_timing(graph, calibration, **options)
        notes = [f"{l.name}: {l.kind} ({l.coding}) window [{l.t_min:g}, {l.t_max:g}], scale {l.scale:.4g}"
                 for l in plan.layers]
        notes.append(f"latency {plan.latency:g} tau_c")
        changed = tuple(n.name for n in plan.graph.nodes if n.op != "input")
        return PassResult(plan.graph, changed, (), tuple(notes))
    return Pass(NAME, run, REQUIRES, ENSURES)
