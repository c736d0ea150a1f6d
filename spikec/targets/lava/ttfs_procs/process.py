"""``SpikecTTFS``: the discrete-time B1 / R-TTFS neuron (semantics.md 1.4 on a tick grid), one spike at most.

Per neuron: a current ``u`` with no decay (each input spike adds its weight to the slope), a voltage ``v``
integrating ``u`` once per tick up to the layer's window start ``k_min``, then the reference ramp ``ramp``
per tick; the neuron fires at the first tick ``k`` in ``[k_min, k_max)`` with ``v >= vth`` and is then
locked out (``done``). Ticks are Lava steps shifted by ``lag``: tick ``k`` is Lava ``time_step = k + lag + 1``.
Arithmetic in ``models.py``.
"""
import numpy as np

from lava.magma.core.process.ports.ports import InPort, OutPort
from lava.magma.core.process.process import AbstractProcess
from lava.magma.core.process.variable import Var


class SpikecTTFS(AbstractProcess):
    """TTFS neurons of one layer (batch folded into the neuron dimension); ``vth`` per neuron, the rest scalars."""

    def __init__(self, *, shape, vth, ramp, k_min, k_max, lag, name=None):
        super().__init__(shape=shape, ramp=int(ramp), k_min=int(k_min), k_max=int(k_max), lag=int(lag), name=name)
        self.a_in = InPort(shape=shape)
        self.s_out = OutPort(shape=shape)
        self.u = Var(shape=shape, init=0)
        self.v = Var(shape=shape, init=0)
        self.done = Var(shape=shape, init=0)
        self.vth = Var(shape=shape, init=np.broadcast_to(np.asarray(vth, dtype=np.int64), shape).copy())
