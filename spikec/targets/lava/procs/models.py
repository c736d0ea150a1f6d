"""fixed_pt ProcessModels of spikec's custom Lava Processes.

Population models share one schedule (``_Scheduled``): every Lava step they add their input port into
an accumulator; at update steps (``start + t * period``) they update once with the accumulated sum.
The neuron arithmetic is written here again, independently of the integer reference (``ops.py``), so
that comparing the two checks both; LIF's sub-threshold update is Lava's own
(``AbstractPyLifModelFixed.subthr_dynamics``).
"""
import numpy as np

from lava.magma.core.decorator import implements, requires, tag
from lava.magma.core.model.py.model import PyLoihiProcessModel
from lava.magma.core.model.py.ports import PyInPort, PyOutPort, PyRefPort
from lava.magma.core.model.py.type import LavaPyType
from lava.magma.core.resources import CPU
from lava.magma.core.sync.protocols.loihi_protocol import LoihiProtocol
from lava.proc.lif.models import AbstractPyLifModelFixed

from spikec.targets.lava.procs.process import (MAX_HOST_PORTS, HostRegion, Readout, Recorder, Relay, SpikecCSiLIF,
                                               SpikecIntFire, SpikecLIF, SpikecSiLIF, StateProbe, VarWriter)

UNITY, LIMIT = 4096, 2 ** 23 - 1
ERRORS_ENV = "SPIKEC_LAVA_ERRORS"


def guarded(run_spk):
    """Lava hangs when a ProcessModel raises (its peers wait on their channels forever). A guarded
    ``run_spk`` writes the traceback to ``$SPIKEC_LAVA_ERRORS/<process>.txt`` (read by ``simulate.run_lava``,
    which raises it) and keeps the protocol going: in the failing step it receives on the input ports and
    sends zeros on the output ports it had not used yet, and from then on it drains inputs and sends zeros."""
    import functools
    import os
    import traceback

    @functools.wraps(run_spk)
    def run(self):
        if not getattr(self, "_spikec_tracked", False):
            _track(self)
        if getattr(self, "_spikec_failed", False):
            return _finish_step(self)
        try:
            return run_spk(self)
        except Exception:
            self._spikec_failed = True
            where = os.environ.get(ERRORS_ENV)
            if where:
                name = str(self.proc_params.get("name", type(self).__name__)).replace("/", "_")
                with open(os.path.join(where, f"{name}.{os.getpid()}.txt"), "w") as f:
                    f.write(f"Lava process {name!r} failed at time step {self.time_step}:\n{traceback.format_exc()}")
            return _finish_step(self)
    return run


def _track(self):
    """Mark, per port, the last time step it received or sent (to finish a step that raised half-way)."""
    self._spikec_tracked = True
    for port in self.py_ports:
        for method in ("recv", "send"):
            if isinstance(port, (PyInPort, PyOutPort)) and hasattr(port, method):
                orig = getattr(port, method)

                def used(*a, _orig=orig, _port=port, **k):
                    _port._spikec_step = self.time_step
                    return _orig(*a, **k)
                setattr(port, method, used)


def _finish_step(self):
    for port in self.py_ports:
        if getattr(port, "_spikec_step", None) == self.time_step:
            continue
        if isinstance(port, PyInPort):
            port.recv()
        elif isinstance(port, PyOutPort):
            port.send(np.zeros(port._shape, dtype=np.int32))


class _Scheduled:
    """The window schedule: ``window(a)`` returns the sum of ``a`` since the last update at an update step,
    else None."""
    acc = None

    def window(self, a):
        a = np.asarray(a, dtype=np.int64)
        self.acc = a if self.acc is None else self.acc + a
        n = self.time_step - 1
        start, period = self.proc_params["start"], self.proc_params["period"]
        if n >= start and (n - start) % period == 0:
            out, self.acc = self.acc, None
            return out
        return None

    def silent(self):
        zero = np.zeros(self.s_out.shape, dtype=np.int32)
        self.s_out.send(zero)
        for port in ("m_out", "v_out"):
            if hasattr(self, port):
                getattr(self, port).send(zero)


def _decay(x, factor):
    y = np.asarray(x, dtype=np.int64) * np.asarray(factor, dtype=np.int64)
    return np.sign(y) * np.right_shift(np.abs(y), 12)


def _bias(mant, exp):
    mant = np.asarray(mant, dtype=np.int64)
    exp = np.asarray(exp, dtype=np.int64)
    return np.where(exp >= 0, np.left_shift(mant, np.maximum(exp, 0)), np.right_shift(mant, np.maximum(-exp, 0)))


class _LifBase(_Scheduled, AbstractPyLifModelFixed):
    s_out: PyOutPort = LavaPyType(PyOutPort.VEC_DENSE, np.int32, precision=24)
    m_out: PyOutPort = LavaPyType(PyOutPort.VEC_DENSE, np.int32, precision=24)
    du: np.ndarray = LavaPyType(np.ndarray, np.uint16, precision=12)
    dv: np.ndarray = LavaPyType(np.ndarray, np.uint16, precision=12)
    vth: np.ndarray = LavaPyType(np.ndarray, np.int32, precision=17)

    def scale_threshold(self):
        self.effective_vth = np.left_shift(np.asarray(self.vth, dtype=np.int64), self.vth_shift)
        self.isthrscaled = True

    def step_input(self):
        """This update's synaptic input (``None`` on a step outside the window), bias and threshold scaled."""
        a = self.window(self.a_in.recv())
        if a is not None:
            self.scale_bias()
            if not self.isthrscaled:
                self.scale_threshold()
        return a

    @guarded
    def run_spk(self):
        a = self.step_input()
        if a is None:
            return self.after_idle()
        self.subthr_dynamics(activation_in=a.astype(np.int32))
        self.m_out.send(self.v.copy())
        self.s_out.send(self.fire())

    def after_idle(self):
        self.silent()


@implements(proc=SpikecLIF, protocol=LoihiProtocol)
@requires(CPU)
@tag("fixed_pt")
class PySpikecLIFModelFixed(_LifBase):
    """Lava's fixed-point LIF update (``subthr_dynamics`` of AbstractPyLifModelFixed, unchanged) with
    per-neuron decays, thresholds and current bias, the reset kinds of ``SpikecLIF``, ``>`` or ``>=`` firing,
    and the window schedule."""
    v_out: PyOutPort = LavaPyType(PyOutPort.VEC_DENSE, np.int32, precision=24)
    v_reset: np.ndarray = LavaPyType(np.ndarray, np.int32, precision=24)
    bias_u: np.ndarray = LavaPyType(np.ndarray, np.int32, precision=24)

    @guarded
    def run_spk(self):
        a = self.step_input()
        if a is None:
            return self.after_idle()
        kind = self.proc_params["reset"]
        theta = np.asarray(self.effective_vth, dtype=np.int64)
        fire = self.proc_params["fire"]
        level = theta - 1 if fire == "ge" else np.int64(2 ** 62) if fire == "never" else theta
        r = np.asarray(self.v, dtype=np.int64) > level          # the previous step's spike (delayed resets)
        self.subthr_dynamics(activation_in=(a + self.bias_u).astype(np.int32))
        v = np.asarray(self.v, dtype=np.int64)
        if kind == "delayed_subtract":
            self.v[:] = np.maximum(np.where(r, v - theta, v), -LIMIT)
        elif kind == "delayed_zero":
            self.v[:] = np.where(r, 0, v)
        v = np.asarray(self.v, dtype=np.int64)
        self.m_out.send(self.v.copy())
        s = (np.where(r, v - theta, v) if kind == "snntorch_subtract" else v) > level
        if kind == "zero":
            self.v[s] = self.v_reset[s]
        elif kind in ("subtract", "snntorch_subtract"):
            self.v[s] -= self.effective_vth[s]
        self.v_out.send(self.v.copy())
        self.s_out.send(s.astype(np.int32))


@implements(proc=SpikecIntFire, protocol=LoihiProtocol)
@requires(CPU)
@tag("fixed_pt")
class PySpikecIntFireModelFixed(_LifBase):
    """The integer-firing neuron: graded payload S, or its thermometer code over D Lava steps."""
    v_min: np.ndarray = LavaPyType(np.ndarray, np.int32, precision=24)
    pending = None
    sent = 0

    def fire(self):
        theta = self.effective_vth
        v = np.asarray(self.v, dtype=np.int64)
        z = v + (theta // 2 if self.proc_params["rounding"] == "round" else 0)
        q = np.clip(np.floor_divide(z, theta), 0, self.proc_params["max_spikes"])
        self.v[:] = np.maximum(v - q * theta, self.v_min)
        if not self.proc_params["unrolled"]:
            return q.astype(np.int32)
        self.pending, self.sent = q, 1
        return (q > 0).astype(np.int32)

    def after_idle(self):
        if self.proc_params["unrolled"] and self.pending is not None and self.sent < self.proc_params["max_spikes"]:
            self.s_out.send((self.pending > self.sent).astype(np.int32))
            self.m_out.send(np.zeros(self.s_out.shape, dtype=np.int32))
            self.sent += 1
        else:
            self.silent()


class _ResonatorBase(_Scheduled, PyLoihiProcessModel):
    a_in: PyInPort = LavaPyType(PyInPort.VEC_DENSE, np.int32, precision=24)
    s_out: PyOutPort = LavaPyType(PyOutPort.VEC_DENSE, np.int32, precision=24)
    m_out: PyOutPort = LavaPyType(PyOutPort.VEC_DENSE, np.int32, precision=24)
    v: np.ndarray = LavaPyType(np.ndarray, np.int32, precision=24)
    s_prev: np.ndarray = LavaPyType(np.ndarray, np.int32, precision=1)
    vth: np.ndarray = LavaPyType(np.ndarray, np.int32, precision=24)
    kappa: np.ndarray = LavaPyType(np.ndarray, np.int32, precision=24)
    bias_mant: np.ndarray = LavaPyType(np.ndarray, np.int16, precision=13)
    bias_exp: np.ndarray = LavaPyType(np.ndarray, np.int16, precision=3)

    @guarded
    def run_spk(self):
        a = self.window(self.a_in.recv())
        if a is None:
            return self.silent()
        act = np.left_shift(a, 6)
        bias = _bias(self.bias_mant, self.bias_exp)
        z = np.asarray(self.v, dtype=np.int64) - np.asarray(self.kappa, dtype=np.int64) * self.s_prev
        self.step(z, act + bias)
        s = (np.asarray(self.v, dtype=np.int64) >= np.left_shift(np.asarray(self.vth, dtype=np.int64), 6))
        self.s_prev[:] = s
        self.m_out.send(self.v.copy())
        self.s_out.send(s.astype(np.int32))


@implements(proc=SpikecSiLIF, protocol=LoihiProtocol)
@requires(CPU)
@tag("fixed_pt")
class PySpikecSiLIFModelFixed(_ResonatorBase):
    """SiLIF: ``v = dec(v - kappa s, decay) + (a << 6) + bias``, saturated to 24 bits; ``s = v >= vth << 6``."""
    decay: np.ndarray = LavaPyType(np.ndarray, np.int32, precision=13)

    def step(self, z, drive):
        self.v[:] = np.clip(_decay(z, self.decay) + drive, -LIMIT, LIMIT)


@implements(proc=SpikecCSiLIF, protocol=LoihiProtocol)
@requires(CPU)
@tag("fixed_pt")
class PySpikecCSiLIFModelFixed(_ResonatorBase):
    """CSiLIF: ``m = a (m - kappa s) + b x`` in integers, m = v + j w; ``s = v >= vth << 6``."""
    w: np.ndarray = LavaPyType(np.ndarray, np.int32, precision=24)
    a_re: np.ndarray = LavaPyType(np.ndarray, np.int32, precision=13)
    a_im: np.ndarray = LavaPyType(np.ndarray, np.int32, precision=13)

    def step(self, z, drive):
        w = np.asarray(self.w, dtype=np.int64)
        v_new = _decay(z, self.a_re) - _decay(w, self.a_im) + drive
        w_new = _decay(w, self.a_re) + _decay(z, self.a_im)
        self.v[:] = np.clip(v_new, -LIMIT, LIMIT)
        self.w[:] = np.clip(w_new, -LIMIT, LIMIT)


class _Stateless(_Scheduled, PyLoihiProcessModel):
    """A population with no state: at each update it sends ``output(a)`` of the window's input sum ``a`` (``m_out``
    0), and nothing between updates (the read-out here, SpikecAND in and_gate.py)."""
    a_in: PyInPort = LavaPyType(PyInPort.VEC_DENSE, np.int32, precision=24)
    s_out: PyOutPort = LavaPyType(PyOutPort.VEC_DENSE, np.int32, precision=24)
    m_out: PyOutPort = LavaPyType(PyOutPort.VEC_DENSE, np.int32, precision=24)

    @guarded
    def run_spk(self):
        a = self.window(self.a_in.recv())
        if a is None:
            return self.silent()
        self.m_out.send(np.zeros(self.s_out.shape, dtype=np.int32))
        self.s_out.send(self.output(a))

    def output(self, a):
        raise NotImplementedError


@implements(proc=Readout, protocol=LoihiProtocol)
@requires(CPU)
@tag("fixed_pt")
class PyReadoutModelFixed(_Stateless):
    bias: np.ndarray = LavaPyType(np.ndarray, np.int32, precision=24)

    def output(self, a):
        return a + self.bias


@implements(proc=Relay, protocol=LoihiProtocol)
@requires(CPU)
@tag("fixed_pt")
class PyRelayModelFixed(PyLoihiProcessModel):
    s_in: PyInPort = LavaPyType(PyInPort.VEC_DENSE, np.int32, precision=24)
    s_out: PyOutPort = LavaPyType(PyOutPort.VEC_DENSE, np.int32, precision=24)
    buffer = None

    @guarded
    def run_spk(self):
        x = self.s_in.recv()
        if self.buffer is None:
            self.buffer = [np.zeros(self.s_out.shape, dtype=np.int64) for _ in range(self.proc_params["delay"])]
        self.buffer.append(np.asarray(x, dtype=np.int64))
        self.s_out.send(self.buffer.pop(0))


def _host_ports(cls):
    for i in range(MAX_HOST_PORTS):
        setattr(cls, f"in{i}", LavaPyType(PyInPort.VEC_DENSE, np.int32, precision=24))
        setattr(cls, f"out{i}", LavaPyType(PyOutPort.VEC_DENSE, np.int32, precision=24))
        cls.__annotations__[f"in{i}"] = PyInPort
        cls.__annotations__[f"out{i}"] = PyOutPort
    return cls


@implements(proc=HostRegion, protocol=LoihiProtocol)
@requires(CPU)
@tag("fixed_pt")
@_host_ports
class PyHostRegionModel(_Scheduled, PyLoihiProcessModel):
    """A host partition: dequantize chip values, run float64 host ops, quantize what goes back to the chip.

    The float computation is ``spikec.targets.lava.host.host_step`` (what the integer reference calls too).
    """
    __annotations__ = {}

    @guarded
    def run_spk(self):
        from spikec.targets.lava import host, layout
        from spikec.targets.lava.ops import quantize_values
        spec = self.proc_params["spec"]
        n_in, n_out = len(self.proc_params["in_shapes"]), len(self.proc_params["out_shapes"])
        ins = [np.asarray(getattr(self, f"in{i}").recv(), dtype=np.int64) for i in range(n_in)]
        for i in range(n_in, MAX_HOST_PORTS):
            getattr(self, f"in{i}").recv()
        self.acc_in = ins if getattr(self, "acc_in", None) is None else [a + b for a, b in zip(self.acc_in, ins)]
        n = self.time_step - 1
        start, period = self.proc_params["start"], self.proc_params["period"]
        outs = [np.zeros(s, dtype=np.int32) for s in self.proc_params["out_shapes"]]
        if n >= start and (n - start) % period == 0 and (n - start) // period < spec["steps"]:
            t = (n - start) // period
            batch = spec["batch"]
            values = {f"in{i}": layout.unfold_state(x, batch, spec["in_ir_shapes"][i])
                      for i, x in enumerate(self.acc_in)}
            for node in spec["nodes"]:
                xs = [values[r] for r in node["inputs"]]
                if node["kind"] == "host":
                    xs = [x.astype(np.float64) / _per_channel(node["gains"][k], x.ndim)
                          if node["gains"][k] is not None else x for k, x in enumerate(xs)]
                    if host.stateful(node["op"]):   # given its inputs' history (host.host_step)
                        self.past = getattr(self, "past", None) or {}
                        self.past.setdefault(node["name"], []).append(xs)
                        xs = [np.stack(h) for h in zip(*self.past[node["name"]])]
                    values[node["name"]] = host.host_step(node["op"], node["attrs"], node["params"], t, xs)
                else:
                    values[node["name"]] = quantize_values(xs[0], _per_channel(node["gain"], xs[0].ndim),
                                                           node["bits"])
            for j, name in enumerate(spec["outputs"]):
                outs[j] = layout.fold_data(values[name][None])[..., 0].astype(np.int32)
            self.acc_in = None
        for j in range(n_out):
            getattr(self, f"out{j}").send(outs[j])
        for j in range(n_out, MAX_HOST_PORTS):
            getattr(self, f"out{j}").send(np.zeros(1, dtype=np.int32))


def _per_channel(g, ndim):
    """A () or (C,) gain broadcast against one step ``[B, C, ...]``."""
    g = np.asarray(g, dtype=np.float64)
    return g if g.ndim == 0 else g.reshape(1, -1, *([1] * (ndim - 2)))


@implements(proc=Recorder, protocol=LoihiProtocol)
@requires(CPU)
@tag("fixed_pt")
class PyRecorderModelFixed(PyLoihiProcessModel):
    a_in: PyInPort = LavaPyType(PyInPort.VEC_DENSE, np.int32, precision=24)

    def __init__(self, proc_params):
        super().__init__(proc_params)
        self.steps, self.path = proc_params["steps"], proc_params["path"]
        self.buffer = np.zeros(tuple(proc_params["shape"]) + (self.steps,), dtype=np.int64)

    @guarded
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
