"""spikec's custom Lava Processes (see models.py for their fixed-point behaviour)."""
import numpy as np

from lava.magma.core.process.ports.ports import InPort, OutPort, RefPort
from lava.magma.core.process.process import AbstractProcess
from lava.magma.core.process.variable import Var


class SpikecLIF(AbstractProcess):
    """Lava's bit-accurate LIF with per-neuron ``du``, ``dv``, ``vth``, ``v_reset`` and a reset mode.

    ``reset="subtract"`` (soft reset, ``v -= vth << 6`` on a spike) or ``"zero"`` (``v = v_reset``).
    Sub-threshold arithmetic is inherited unchanged from ``lava.proc.lif.models.AbstractPyLifModelFixed``.
    """

    def __init__(self, *, shape, du, dv, vth, bias_mant, bias_exp, v_reset=0, reset="subtract", name=None):
        super().__init__(shape=shape, reset=reset, name=name)
        full = lambda v: np.broadcast_to(np.asarray(v), shape).copy()
        self.a_in = InPort(shape=shape)
        self.s_out = OutPort(shape=shape)
        self.u = Var(shape=shape, init=0)
        self.v = Var(shape=shape, init=0)
        self.du = Var(shape=shape, init=full(du))
        self.dv = Var(shape=shape, init=full(dv))
        self.vth = Var(shape=shape, init=full(vth))
        self.v_reset = Var(shape=shape, init=full(v_reset))
        self.bias_mant = Var(shape=shape, init=full(bias_mant))
        self.bias_exp = Var(shape=shape, init=full(bias_exp))


class Readout(AbstractProcess):
    """Non-spiking read-out: sends ``a_in + bias`` (an integer payload) every step."""

    def __init__(self, *, shape, bias, name=None):
        super().__init__(shape=shape, name=name)
        self.a_in = InPort(shape=shape)
        self.s_out = OutPort(shape=shape)
        self.bias = Var(shape=shape, init=np.broadcast_to(np.asarray(bias), shape).copy())


class Recorder(AbstractProcess):
    """Records its input every step; writes ``shape + (steps,)`` int32 to ``path`` (.npy) after the last step.

    Replaces ``Var.get`` on a sink buffer, which moves data element by element.
    """

    def __init__(self, *, shape, steps, path, name=None):
        super().__init__(shape=shape, steps=steps, path=str(path), name=name)
        self.a_in = InPort(shape=shape)


class StateProbe(AbstractProcess):
    """Reads a Var through a RefPort after step ``step`` and writes it to ``path`` (.npy)."""

    def __init__(self, *, var, step, path, name=None):
        super().__init__(step=step, path=str(path), name=name)
        self.state = RefPort(var.shape)
        self.state.connect_var(var)


class VarWriter(AbstractProcess):
    """Writes ``value`` into a Var through a RefPort after step ``step`` (e.g. a bias switched on when
    the first input reaches a layer)."""

    def __init__(self, *, var, step, value, name=None):
        super().__init__(step=step, value=np.asarray(value), name=name)
        self.state = RefPort(var.shape)
        self.state.connect_var(var)
