"""spikec's custom Lava Processes (see models.py for their fixed-point behaviour).

Every population process takes a schedule: ``start`` (the 0-based Lava step of its first update) and
``period`` (Lava steps per physical step). It adds up its input port over each period and updates
once, at Lava steps ``start + t * period``; at other steps it sends zeros (or, for the unrolled
integer neuron, the rest of its thermometer code). With ``period = 1`` this is an ordinary
one-update-per-step neuron that stays silent before ``start``.
"""
import numpy as np

from lava.magma.core.process.ports.ports import InPort, OutPort, RefPort
from lava.magma.core.process.process import AbstractProcess
from lava.magma.core.process.variable import Var

MAX_HOST_PORTS = 8


def _full(v, shape):
    return np.broadcast_to(np.asarray(v), shape).copy()


class _Population(AbstractProcess):
    def __init__(self, *, shape, start=0, period=1, name=None, **params):
        super().__init__(shape=shape, start=int(start), period=int(period), name=name, **params)
        self.a_in = InPort(shape=shape)
        self.s_out = OutPort(shape=shape)
        self.m_out = OutPort(shape=shape)   # the pre-reset membrane, at update steps (read by a host)

    def _vars(self, shape, states, **params):
        """Per-neuron Vars: ``states`` start at 0, ``params`` are broadcast to ``shape``."""
        for name in states:
            setattr(self, name, Var(shape=shape, init=0))
        for name, value in params.items():
            setattr(self, name, Var(shape=shape, init=_full(value, shape)))


class SpikecLIF(_Population):
    """Lava's bit-accurate LIF with per-neuron ``du``, ``dv``, ``vth``, ``v_reset``, a current bias ``bias_u``
    (added to the synaptic input before Lava's ``<< 6``), a reset mode, a firing comparison and a schedule.

    ``reset``: "subtract" (soft reset, ``v -= vth << 6`` on a spike), "zero" (``v = v_reset``), "none", or
    snnTorch's: "delayed_subtract" / "delayed_zero" (the reset of a spike acts after the next step's decay) and
    "snntorch_subtract" (its ``reset_delay=False``). ``fire``: "gt" (``v > vth << 6``, Lava's), "ge" (``>=``) or
"never" (a leaky integrator read-out). ``v_out`` sends ``v`` after each update (zeros between updates).
    Sub-threshold arithmetic is inherited unchanged from ``lava.proc.lif.models.AbstractPyLifModelFixed``.
    """

    def __init__(self, *, shape, du, dv, vth, bias_mant, bias_exp, v_reset=0, bias_u=0, reset="subtract", fire="gt",
                 start=0, period=1, name=None):
        super().__init__(shape=shape, start=start, period=period, name=name, reset=reset, fire=fire)
        self.v_out = OutPort(shape=shape)   # v after the step (after its reset), at update steps (a state read-out)
        self._vars(shape, ("u", "v"), du=du, dv=dv, vth=vth, v_reset=v_reset, bias_u=bias_u, bias_mant=bias_mant,
                   bias_exp=bias_exp)


class SpikecIntFire(_Population):
    """The integer-firing neuron on LIF's sub-threshold arithmetic: ``S = clip(round(v / (vth << 6)), 0, D)``,
    ``v -= S (vth << 6)``, then ``v = max(v, v_min)`` (Sinabs's min_v_mem; the default is the 24-bit state's floor,
    no clamp). ``unrolled=False`` sends S as a graded payload at the update step; ``unrolled=True`` sends ``[d < S]``
    at the update step and the ``D - 1`` Lava steps after it."""

    def __init__(self, *, shape, du, dv, vth, bias_mant, bias_exp, max_spikes, rounding="round", unrolled=False,
                 v_min=-(2 ** 23 - 1), start=0, period=1, name=None):
        super().__init__(shape=shape, start=start, period=period, name=name, max_spikes=int(max_spikes),
                         rounding=rounding, unrolled=bool(unrolled))
        self._vars(shape, ("u", "v"), du=du, dv=dv, vth=vth, bias_mant=bias_mant, bias_exp=bias_exp, v_min=v_min)


class SpikecSiLIF(_Population):
    """Fixed-point SiLIF: ``v = dec(v - kappa s, decay) + (a << 6) + bias``, ``s = v >= vth << 6``."""

    def __init__(self, *, shape, decay, vth, kappa, bias_mant, bias_exp, start=0, period=1, name=None):
        super().__init__(shape=shape, start=start, period=period, name=name)
        self._vars(shape, ("v", "s_prev"), decay=decay, vth=vth, kappa=kappa, bias_mant=bias_mant,
                   bias_exp=bias_exp)


class SpikecCSiLIF(_Population):
    """Fixed-point CSiLIF: the complex state as two integer states ``v`` (real) and ``w`` (imaginary)."""

    def __init__(self, *, shape, a_re, a_im, vth, kappa, bias_mant, bias_exp, start=0, period=1, name=None):
        super().__init__(shape=shape, start=start, period=period, name=name)
        self._vars(shape, ("v", "w", "s_prev"), a_re=a_re, a_im=a_im, vth=vth, kappa=kappa, bias_mant=bias_mant,
                   bias_exp=bias_exp)


class Readout(_Population):
    """Non-spiking read-out: sends ``sum of a_in over the period + bias`` (an integer payload) at update steps."""

    def __init__(self, *, shape, bias, start=0, period=1, name=None):
        super().__init__(shape=shape, start=start, period=period, name=name)
        self._vars(shape, (), bias=bias)


class Relay(AbstractProcess):
    """An axonal delay: sends what it received ``delay`` Lava steps earlier (zero before). Used where Lava has
    no delayed synapse: before a Conv, into a host, or into a population's input port."""

    def __init__(self, *, shape, delay, name=None):
        super().__init__(shape=shape, delay=int(delay), name=name)
        self.s_in = InPort(shape=shape)
        self.s_out = OutPort(shape=shape)


class HostRegion(AbstractProcess):
    """A host partition: float64 ops on a CPU beside the chip (``spikec.targets.lava.host``).

    Reads chip values on ``in0..`` (integers, summed over each period), evaluates its nodes at update steps
    and sends integers to the chip on ``out0..``. ``spec`` lists the nodes, their inputs and gains."""

    def __init__(self, *, in_shapes, out_shapes, spec, start=0, period=1, name=None):
        if len(in_shapes) > MAX_HOST_PORTS or len(out_shapes) > MAX_HOST_PORTS:
            raise ValueError(f"a host region has at most {MAX_HOST_PORTS} input and output ports")
        super().__init__(in_shapes=[tuple(s) for s in in_shapes], out_shapes=[tuple(s) for s in out_shapes],
                         spec=spec, start=int(start), period=int(period), name=name)
        for i in range(MAX_HOST_PORTS):
            setattr(self, f"in{i}", InPort(shape=tuple(in_shapes[i]) if i < len(in_shapes) else (1,)))
            setattr(self, f"out{i}", OutPort(shape=tuple(out_shapes[i]) if i < len(out_shapes) else (1,)))


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
