"""fixed_pt ProcessModels of spikec's custom Lava Processes."""
import numpy as np

from lava.magma.core.decorator import implements, requires, tag
from lava.magma.core.model.py.model import PyLoihiProcessModel
from lava.magma.core.model.py.ports import PyInPort, PyOutPort, PyRefPort
from lava.magma.core.model.py.type import LavaPyType
from lava.magma.core.resources import CPU
from lava.magma.core.sync.protocols.loihi_protocol import LoihiProtocol
from lava.proc.lif.models import AbstractPyLifModelFixed

from spikec.targets.lava.procs.process import Readout, Recorder, SpikecLIF, StateProbe, VarWriter


@implements(proc=SpikecLIF, protocol=LoihiProtocol)
@requires(CPU)
@tag("fixed_pt")
class PySpikecLIFModelFixed(AbstractPyLifModelFixed):
    """Lava's fixed-point LIF update (``subthr_dynamics`` of AbstractPyLifModelFixed, unchanged) with
    per-neuron decays and thresholds, and soft or hard reset."""
    s_out: PyOutPort = LavaPyType(PyOutPort.VEC_DENSE, np.int32, precision=24)
    du: np.ndarray = LavaPyType(np.ndarray, np.uint16, precision=12)
    dv: np.ndarray = LavaPyType(np.ndarray, np.uint16, precision=12)
    vth: np.ndarray = LavaPyType(np.ndarray, np.int32, precision=17)
    v_reset: np.ndarray = LavaPyType(np.ndarray, np.int32, precision=24)

    def __init__(self, proc_params):
        super().__init__(proc_params)
        self.reset = proc_params["reset"]
        self.effective_vth = 0

    def scale_threshold(self):
        self.effective_vth = np.left_shift(self.vth, self.vth_shift)
        self.isthrscaled = True

    def spiking_activation(self):
        return self.v > self.effective_vth

    def reset_voltage(self, spike_vector):
        if self.reset == "subtract":
            self.v[spike_vector] -= self.effective_vth[spike_vector]
        else:
            self.v[spike_vector] = self.v_reset[spike_vector]


@implements(proc=Readout, protocol=LoihiProtocol)
@requires(CPU)
@tag("fixed_pt")
class PyReadoutModelFixed(PyLoihiProcessModel):
    a_in: PyInPort = LavaPyType(PyInPort.VEC_DENSE, np.int32, precision=24)
    s_out: PyOutPort = LavaPyType(PyOutPort.VEC_DENSE, np.int32, precision=24)
    bias: np.ndarray = LavaPyType(np.ndarray, np.int32, precision=24)

    def run_spk(self):
        self.s_out.send(self.a_in.recv() + self.bias)


@implements(proc=Recorder, protocol=LoihiProtocol)
@requires(CPU)
@tag("fixed_pt")
class PyRecorderModelFixed(PyLoihiProcessModel):
    a_in: PyInPort = LavaPyType(PyInPort.VEC_DENSE, np.int32, precision=24)

    def __init__(self, proc_params):
        super().__init__(proc_params)
        self.steps, self.path = proc_params["steps"], proc_params["path"]
        self.buffer = np.zeros(tuple(proc_params["shape"]) + (self.steps,), dtype=np.int64)

    def run_spk(self):
        data = self.a_in.recv()
        if self.time_step <= self.steps:
            self.buffer[..., self.time_step - 1] = data
        if self.time_step == self.steps:
            np.save(self.path, self.buffer)


@implements(proc=StateProbe, protocol=LoihiProtocol)
@requires(CPU)
@tag("fixed_pt")
class PyStateProbeModelFixed(PyLoihiProcessModel):
    state: PyRefPort = LavaPyType(PyRefPort.VEC_DENSE, np.int32)

    def post_guard(self):
        return self.time_step == self.proc_params["step"]

    def run_post_mgmt(self):
        np.save(self.proc_params["path"], np.asarray(self.state.read(), dtype=np.int64))


@implements(proc=VarWriter, protocol=LoihiProtocol)
@requires(CPU)
@tag("fixed_pt")
class PyVarWriterModelFixed(PyLoihiProcessModel):
    state: PyRefPort = LavaPyType(PyRefPort.VEC_DENSE, np.int32)

    def post_guard(self):
        return self.time_step == self.proc_params["step"]

    def run_post_mgmt(self):
        self.state.write(np.asarray(self.proc_params["value"], dtype=self.state._d_type).reshape(self.state._shape))
        self.state.wait()
