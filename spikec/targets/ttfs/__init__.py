"""Time-to-first-spike as a target of the driver: ``TTFS_CODING`` (``compile``: the timing pass run by the
pass manager, then ``verify``: the event-driven simulator's checks, a ``TargetResult`` whose report is the
report's ``ttfs`` object). The coding itself (ops, pass, simulator) is ``spikec.codings.ttfs``; its ONNX
emitters are ``spikec.targets.onnx.ttfs``; TTFS on Lava is ``spikec.targets.lava.ttfs*``.
"""
from spikec.targets.ttfs.compile import TTFS_CODING, TTFSResult, compile_ttfs, lower_ttfs  # noqa: F401
from spikec.targets.ttfs.verify import verify_ttfs  # noqa: F401
