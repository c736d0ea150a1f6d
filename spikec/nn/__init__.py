"""Reference PyTorch modules with the exact semantics of ``docs/neurons.md`` and ``docs/ops.md``.

Every module maps ``[T, B, ...]`` to ``[T, B, ...]``; neurons return spikes only.
Per-channel parameters act on dim 2 (the channel of ``[T, B, C, ...]``, or the
feature of ``[T, B, N]``).
"""
from spikec.nn.neurons import LIF, IntFire, SiLIF, CSiLIF
from spikec.nn.temporal import TDM, BNTT, Delay
from spikec.nn.structural import RepConv, WindowSum, TimeDistributed
from spikec.nn.attention import DSMPA
from spikec.nn.sdna import SDNALinear, SDNAPairwise
from spikec.nn import loihi  # Loihi-exact training modules: spikec.nn.loihi.Dense, Conv2d, LIF
from spikec.nn import xylo  # noqa: F401  (Xylo-exact training modules: spikec.nn.xylo.Hidden, Output)

__all__ = ["LIF", "IntFire", "SiLIF", "CSiLIF", "TDM", "BNTT", "Delay",
           "RepConv", "WindowSum", "TimeDistributed", "DSMPA",
           "SDNALinear", "SDNAPairwise", "loihi"]
