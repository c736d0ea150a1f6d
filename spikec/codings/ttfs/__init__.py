"""Time-to-first-spike (TTFS) coding: ReLU networks mapped onto neurons that spike at most once.

- ``timing``     the pass (structure, calibration, windows, delays, closed-form thresholds) -> TTFS IR graph
- ``simulate``   event-driven simulator: exact spike times, and a discrete-time mode with step ``dt``
- ``layernorm``  LayerNorm as seven TTFS sub-layers (APPROXIMATE: a fitted 1/sqrt network, ``fit_rsqrt.py``)
- ``settings``   the coding's options (``DEFAULTS``) and data sets (calibration, verification, evaluation)
- ``timing_pass`` the ``assign_ttfs_timing`` pass for the pass manager (``make_pass``)
- ``figures``    the parts of that report (layers, spikes, energy, accuracy, discrete-time table, approximations)
- ``report``     the summary lines of the report's ``ttfs`` object
- ``ops``        the IR ops (ttfs_encode, ttfs_delay, ttfs_charge, ttfs_dynsyn, ttfs_fire, ttfs_decode, and the
                 ANN-side layernorm, ttfs_mat, ttfs_bmul, ttfs_affine)
- ``nn``         ``ShiftReLU`` (``max(x, -s)``, the R-TTFS activation)

Above this layer: ``spikec.targets.ttfs`` (``TTFS_CODING``: compile and verify), ``spikec.targets.onnx.ttfs``
(ONNX emitters of the TTFS ops), ``spikec.targets.lava.ttfs*`` (TTFS on Lava).

What is exact. A layer of Linear/Conv (with bias) + ReLU maps onto a B1 TTFS layer *exactly* inside its
window (passes.md); identity and shift-ReLU onto R-TTFS layers; average pooling, flatten, BatchNorm and
scalar affines are linear and fold into the synapses of the layer that reads them; residual additions
become a second group of synapses whose source spikes are delayed into the window just before the layer's
(``ttfs_delay``). In float64 the values read from exact spike times match the ANN to ~1e-15 of the window.
Values outside a window are clipped (the window top, or the bottom for identity layers): the compiler
counts them and every neuron that reads one; they are never hidden.

Products (``x * y``, and LayerNorm's square and normalisation) use a *dynamic-weight synapse*: the decoded
value of operand A is the synaptic weight of operand B's spike (the mechanism the TTFS-LLM work uses for
attention: "the query acts as the synaptic weight of the key spikes"), plus a static synapse from A that
removes the offset of B's code. Exact in value, but a static-synapse chip cannot hold it (like ``K^T V``
in spike-driven attention): it is reported as a product, one MAC per product, not an AC.

What is not exact. LayerNorm's ``1/sqrt(var + eps)`` is a fitted two-layer ReLU network (relative error
2.8e-4 on its domain with the shipped 128 hidden units); the report labels such a model ``exact: false`` and
gives the measured error. The discrete-time mode quantizes spike times (measured error and a bound).
"""
import spikec.codings.ttfs.ops  # noqa: F401  (registers the ops and kernels)
import spikec.codings.ttfs.converters  # noqa: F401  (nn.LayerNorm converter)
from spikec.codings.ttfs.nn import ShiftReLU  # noqa: F401
from spikec.codings.ttfs.simulate import simulate  # noqa: F401
from spikec.codings.ttfs.timing import assign_ttfs_timing  # noqa: F401
from spikec.codings.ttfs.report import summary_lines  # noqa: F401
