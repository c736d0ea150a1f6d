"""SpikecAND: a population of two-input AND neurons (the product of two binary spike tensors), and its
fixed_pt ProcessModel.

Each neuron receives two binary spike streams through weight-1 synapses (``products.py`` builds them: one
Dense per operand, each selecting the operand's element the product needs). Its input port therefore sums
to ``a`` in {0, 1, 2} per physical step, and the neuron fires iff ``a >= 2``: both inputs arrived in that
step. It keeps no state from one step to the next (no membrane, no leak, no reset): the spike of step ``t``
is ``x_t AND y_t``, the product ``x_t * y_t`` of binary spikes, exactly. Scheduled like spikec's other
populations (``start``, ``period``: the input port is summed over each period, one update per period).

Used only under a sub-step schedule (``period > 1``): otherwise the AND neurons are Lava's own LIF with
``du = dv = 4095`` and ``vth = 1`` (network type ``AND``, ``and_neurons.py``), which is chip-ready. This process is
``chip_ready: false``: spikec's Python CPU model only.
"""
import numpy as np

from lava.magma.core.decorator import implements, requires, tag
from lava.magma.core.resources import CPU
from lava.magma.core.sync.protocols.loihi_protocol import LoihiProtocol

from spikec.targets.lava.procs.models import _Stateless
from spikec.targets.lava.procs.process import _Population

BOTH = 2   # the sum of two binary inputs when both arrived


class SpikecAND(_Population):
    """Two-input AND neurons: ``s = [a >= 2]`` on the input port's sum ``a`` over each period; no state."""

    def __init__(self, *, shape, start=0, period=1, name=None):
        super().__init__(shape=shape, start=start, period=period, name=name)


@implements(proc=SpikecAND, protocol=LoihiProtocol)
@requires(CPU)
@tag("fixed_pt")
class PySpikecANDModelFixed(_Stateless):
    def output(self, a):
        return (a >= BOTH).astype(np.int32)
