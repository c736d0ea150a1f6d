"""fixed_pt ProcessModel of ``SpikecTTFS`` (process.py): integer arithmetic, tick by tick.

Written independently of the integer reference (``spikec.targets.lava.ttfs_reference``, a closed form per
layer), so that comparing them checks both. Per Lava step, with ``k = time_step - 1 - lag``::

    if k <= k_min:      v += u          (integrate the slope of the spikes received before tick k)
    elif k < k_max:     v += ramp       (the reference ramp of the window)
    if k < k_min:       u += a_in       (spikes arriving in the window carry no charge)
    s = k_min <= k < k_max and not done and v >= vth;   done |= s
"""
import numpy as np

from lava.magma.core.decorator import implements, requires, tag
from lava.magma.core.model.py.model import PyLoihiProcessModel
from lava.magma.core.model.py.ports import PyInPort, PyOutPort
from lava.magma.core.model.py.type import LavaPyType
from lava.magma.core.resources import CPU
from lava.magma.core.sync.protocols.loihi_protocol import LoihiProtocol

from spikec.targets.lava.procs.models import guarded
from spikec.targets.lava.ttfs_procs.process import SpikecTTFS


@implements(proc=SpikecTTFS, protocol=LoihiProtocol)
@requires(CPU)
@tag("fixed_pt")
class PySpikecTTFSModelFixed(PyLoihiProcessModel):
    a_in: PyInPort = LavaPyType(PyInPort.VEC_DENSE, np.int32, precision=24)
    s_out: PyOutPort = LavaPyType(PyOutPort.VEC_DENSE, np.int32, precision=24)
    u: np.ndarray = LavaPyType(np.ndarray, np.int64, precision=24)
    v: np.ndarray = LavaPyType(np.ndarray, np.int64, precision=24)
    done: np.ndarray = LavaPyType(np.ndarray, np.int64, precision=1)
    vth: np.ndarray = LavaPyType(np.ndarray, np.int64, precision=24)

    @guarded
    def run_spk(self):
        a = np.asarray(self.a_in.recv(), dtype=np.int64)
        p = self.proc_params
        k, k_min, k_max = self.time_step - 1 - p["lag"], p["k_min"], p["k_max"]
        if k <= k_min:
            self.v[:] = self.v + self.u
        elif k < k_max:
            self.v[:] = self.v + p["ramp"]
        if k < k_min:
            self.u[:] = self.u + a
        s = np.zeros(self.v.shape, dtype=bool)
        if k_min <= k < k_max:
            s = (self.done == 0) & (self.v >= self.vth)
            self.done[:] = self.done | s
        self.s_out.send(s.astype(np.int32))
