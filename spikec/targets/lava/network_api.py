"""The emitted network as Lava objects, to connect to your own sources and sinks: ``network(OUTDIR)``
(``spikec.targets.lava.network``).

Rebuilt from ``OUTDIR/lava`` (``network.json`` + ``params.npz``) with the process builders the verification
uses (``build.py``), so these are the processes spikec proved bit-exact against its integer reference, without
the verification's recorders and state probes. ``inputs[name]`` is the list of InPorts an input feeds (a Lava
``OutPort.connect`` takes the list); ``outputs[name]`` the OutPort of each recorded value (spikes, read-outs,
graded payloads, host values; the model's outputs are ``output_names``). Layout: per sample Lava's ``(W, H, C)``
(IR ``(C, H, W)`` transposed; vectors as they are), samples folded side by side (``batch``). Schedule: physical
step ``t`` of an input is sent at Lava step ``t * period``; output ``name``'s physical step ``t`` arrives at Lava
step ``starts[name] + t * period`` (0-based), silence elsewhere. ``helpers`` are spikec's VarWriters that switch
a LIF's bias on at its first update (``chip.py``: CPU processes; on the chip, a ``Var.set`` between two runs).

A read-out that is Lava's LIF (``standard_readout.py``, type ``LIFReadout``) sends nothing: ``outputs[name]`` is
then its Var ``u``, and its value is ``(u >> 6) + bias`` from its start on (``readout_bias[name]``, batch folded):
probe ``u`` with Lava's Monitor and apply ``standard_readout.host_values``, as ``run`` does.

``Network.run(x)`` does all of that for you: RingBuffer sources, Lava's sink RingBuffers on the model's
outputs, ``Loihi2SimCfg(select_tag="fixed_pt")`` unless given another run configuration, the runtime stopped
in any case; it returns the outputs as ``[T, B, *ir]`` integers, equal bit for bit to the integer reference
(``spikec.targets.lava.load(OUTDIR)(x)``); a count ladder's output (``count_ladder.py``: ``D`` binary copies of an
integer-firing population, ``outputs[name]`` their ``D C`` spikes) comes back as the counts, its copies summed. A Network is one Lava graph: it runs once (build another to run
again). It runs Lava in *your* process (Lava forks its workers from it; ``stop`` ends them): spikec's own
verification runs it in a supervised session instead (``supervisor.py``).
"""
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from spikec.ir.errors import BadInput
from spikec.targets.lava.layout import fold_data, folded_shape, unfold_data
from spikec.targets.lava.lower import POPULATION_TYPES, lava_steps, load_network


@dataclass
class Network:
    processes: dict                  # name -> Lava process, in network.json order
    inputs: dict                     # input name -> [InPort, ...] it feeds
    outputs: dict                    # recorded name -> OutPort
    output_names: list               # the model's outputs (keys of ``outputs``)
    input_shapes: dict               # input name -> Lava shape of the source's OutPort (batch folded)
    flattened: dict                  # input name -> per port of ``inputs``: it reads the input flattened
                                     # (connect ``out.flatten()`` to that port)
    starts: dict                     # output name -> Lava step (0-based) of physical step 0
    period: int                      # Lava steps per physical step
    batch: int
    helpers: list = field(default_factory=list)
    readout_bias: dict = field(default_factory=dict)   # standard LIF read-out name -> its folded bias (host side)
    spec: dict = field(default_factory=dict, repr=False)   # network.json
    _ran: bool = field(default=False, repr=False)

    def lava_steps(self, steps: int) -> int:
        """Lava steps that carry ``steps`` physical steps through to the last output."""
        return lava_steps(self.spec, steps)

    def encode(self, name: str, x) -> np.ndarray:
        """``x`` ``[T, B, *ir]`` integers as a source's data ``(*input_shape, lava_steps(T))``."""
        x = np.asarray(x, dtype=np.int64)
        if x.shape[1] != self.batch:
            raise BadInput(f"input {name!r} has {x.shape[1]} samples; this network was built for {self.batch}",
                           remedy=f"network(OUTDIR, batch={x.shape[1]})")
        data = np.zeros(self.input_shapes[name] + (self.lava_steps(x.shape[0]),), dtype=np.int64)
        sent = tuple(next(i["ir_shape"] for i in self.spec["inputs"] if i["name"] == name))   # a view's (unit_views)
        if tuple(d for d in x.shape[2:] if d != 1) != tuple(d for d in sent if d != 1):
            raise BadInput(f"input {name!r} has per-step shape {x.shape[2:]}; this network takes {sent}",
                           remedy="give the input as the compiled model takes it, [T, B, *input_shape]")
        data[..., :x.shape[0] * self.period:self.period] = fold_data(x.reshape(x.shape[:2] + sent))
        return data

    def decode(self, name: str, data: np.ndarray, steps: int) -> np.ndarray:
        """A sink's ``(*port_shape, lava_steps)`` data of output ``name`` as ``[steps, B, *ir]``."""
        from spikec.targets.lava.compare import schedule_index
        from spikec.targets.lava.ops import sum_copies
        r = next(r for r in self.spec["recorded"] if r["name"] == name)
        full = unfold_data(np.asarray(data).astype(np.int64), self.batch, tuple(r["ir_shape"]))
        full = full[schedule_index(r["start"], self.period, r["substeps"], steps * r["substeps"])]
        p = next((p for p in self.spec["processes"] if p["name"] == r.get("proc")), {})
        # a count ladder's output (count_ladder.py): its copies summed into the count, as the host reads it
        return sum_copies(full, p["ladder"]) if p.get("ladder") and name in self.output_names else full

    def run(self, x, run_cfg=None, record=None) -> dict:
        """Run on ``x`` (``[T, B, *ir]`` integers, or a dict by input name); ``{output name: [T, B, *ir]}``."""
        from spikec.targets.lava._shim import import_lava
        import_lava()
        from lava.magma.core.run_conditions import RunSteps
        from lava.magma.core.run_configs import Loihi2SimCfg
        from lava.proc.io.sink import RingBuffer as Sink
        from lava.proc.io.source import RingBuffer as Source

        if self._ran:
            raise BadInput("this Network has run already (a Lava graph runs once)",
                           remedy="build another: network(OUTDIR)")
        x = x if isinstance(x, dict) else {next(iter(self.inputs)): x}
        if set(x) != set(self.inputs):
            raise BadInput(f"inputs {sorted(x)} given, the network reads {sorted(self.inputs)}")
        t = next(iter(x.values())).shape[0]
        steps = self.lava_steps(t)
        first = None
        for name, ports in self.inputs.items():
            src = Source(data=self.encode(name, x[name]))
            for port, flat in zip(ports, self.flattened[name]):
                (src.s_out.flatten() if flat else src.s_out).connect(port)
            first = first or src
        sinks, monitors = {}, {}
        for name in record or self.output_names:
            if name in self.readout_bias:   # a standard LIF read-out: its u, read by Lava's Monitor
                from lava.proc.monitor.process import Monitor
                monitors[name] = Monitor()
                monitors[name].probe(self.outputs[name], steps)
                continue
            sinks[name] = Sink(shape=self.outputs[name].shape, buffer=steps)
            self.outputs[name].connect(sinks[name].a_in)
        self._ran = True
        try:
            first.run(condition=RunSteps(num_steps=steps), run_cfg=run_cfg or Loihi2SimCfg(select_tag="fixed_pt"))
            data = {name: s.data.get() for name, s in sinks.items()}
            data.update({name: self._host_values(name, m) for name, m in monitors.items()})
        finally:
            first.stop()
        return {name: self.decode(name, d, t) for name, d in data.items()}

    def _host_values(self, name: str, monitor) -> np.ndarray:
        from spikec.targets.lava.standard_readout import host_values
        r = next(r for r in self.spec["recorded"] if r["name"] == name)
        u = monitor.get_data()[self.processes[r["proc"]].name][r["port"]]
        p = next(p for p in self.spec["processes"] if p["name"] == r["proc"])
        return host_values(u, self.readout_bias[name], r["start"], p.get("act_shift", 6))


def network(outdir, batch: int = 1, steps: int | None = None) -> Network:
    """The Lava network written in ``outdir/lava`` as Lava processes for ``batch`` samples side by side.

    ``steps`` (physical steps) matters only to host partitions, which stop after it; by default the recorded
    inputs' length (``io.npz``)."""
    from spikec.targets.lava._shim import import_lava
    from spikec.targets.lava.build import _build_population, _build_process, connect, monitored_bias
    import_lava()
    net, arrays = load_network(Path(outdir) / "lava")
    steps = steps or _recorded_steps(Path(outdir))
    procs, helpers = {}, []
    for p in net["processes"]:
        if p["type"] in POPULATION_TYPES:   # without the verification's state probes
            procs[p["name"]] = _build_population(p, arrays, batch, helpers)
        else:
            procs[p["name"]] = _build_process(p, arrays, batch, steps, Path("."), {}, helpers)
    inputs = {i["name"]: [] for i in net["inputs"]}
    flattened = {i["name"]: [] for i in net["inputs"]}
    for c in net["connections"]:
        dst = getattr(procs[c["dst"]], c["dst_port"])
        if c["src"] in inputs:
            inputs[c["src"]].append(dst)
            flattened[c["src"]].append(bool(c.get("flatten")))
            continue
        connect(getattr(procs[c["src"]], c["port"]), dst, c)
    outputs = {r["name"]: getattr(procs[r["proc"]], r["port"]) for r in net["recorded"]}
    kinds = {p["name"]: p for p in net["processes"]}
    readout_bias = {r["name"]: monitored_bias(kinds[r["proc"]], arrays, batch) for r in net["recorded"]
                    if r.get("via") == "monitor"}
    names = [r["name"] for r in net["recorded"] if r["name"] in net["outputs"] or r["ir_node"] in net["outputs"]]
    return Network(processes=procs, inputs=inputs, outputs=outputs, output_names=names or list(outputs),
                   input_shapes={i["name"]: folded_shape(i["lava_shape"], batch) for i in net["inputs"]},
                   flattened=flattened, starts={r["name"]: r["start"] for r in net["recorded"]},
                   period=net["period"], batch=batch, helpers=helpers, readout_bias=readout_bias, spec=net)


def _recorded_steps(outdir: Path) -> int:
    try:
        with np.load(outdir / "io.npz", allow_pickle=False) as z:
            return int(z["input"].shape[0])
    except (OSError, KeyError, ValueError):
        return 2 ** 31 - 1   # no recorded inputs: host partitions never stop
