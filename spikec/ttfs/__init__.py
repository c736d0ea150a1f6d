"""Time-to-first-spike (TTFS) coding: ReLU networks mapped onto neurons that spike at most once.

- ``timing``     the pass (structure, calibration, windows, delays, closed-form thresholds) -> TTFS IR graph
- ``simulate``   event-driven simulator: exact spike times, and a discrete-time mode with step ``dt``
- ``layernorm``  LayerNorm as seven TTFS sub-layers (APPROXIMATE: a fitted 1/sqrt network)
- ``compile``    ``compile_ttfs(model, graph, inputs, options)``: the driver hook and its report
- ``ops``        the IR ops (ttfs_encode, ttfs_delay, ttfs_charge, ttfs_dynsyn, ttfs_fire, ttfs_decode, ...)
"""
import spikec.ttfs.ops  # noqa: F401  (registers the ops and kernels)
import spikec.ttfs.converters  # noqa: F401  (nn.LayerNorm converter)
from spikec.ttfs.nn import ShiftReLU  # noqa: F401
from spikec.ttfs.simulate import simulate  # noqa: F401
from spikec.ttfs.timing import assign_ttfs_timing  # noqa: F401
from spikec.ttfs.compile import TTFSResult, compile_ttfs  # noqa: F401
from spikec.ttfs.report import summary_lines  # noqa: F401
