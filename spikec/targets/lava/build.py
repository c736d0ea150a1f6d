"""Build Lava processes from the network data (``network.json`` + ``params.npz``) for one batch of inputs.

Runs where Lava runs (the runner's job process, ``runner.py``). Samples run side by side in one network
(``layout.fold``). Recording: ``Var.get`` moves data element by element, so spikes go to Recorder
processes and states to StateProbes that write ``.npy`` files directly. A read-out that is Lava's LIF
(``standard_readout.py``) is read by Lava's own Monitor instead: ``finish`` (after the run, before the runtime
stops) fetches its ``u``, adds the bias as the host does and writes the values where a Recorder would; a leaky
integrator that is Lava's LIF (``standard_integrator.py``) likewise, its ``v`` as it is.
"""
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from spikec.ir.errors import BadInput
from spikec.targets.lava import max_tree
from spikec.targets.lava.layout import fold, fold_data, fold_dense, folded_shape, lava_shape
from spikec.targets.lava.lower import PARAMS, POPULATION_TYPES, STATE_VARS


def build(net: dict, arrays: dict, x: dict, steps: int, workdir: Path):
    """Lava processes for ``x`` (name -> ``[T, B, *ir]`` integers) padded to ``steps`` Lava steps.

    Returns ``(procs, aux, files)``: processes by name, recorders/probes, and the .npy files the run will
    write (``("spikes" | state var, name) -> path``).
    """
    from spikec.targets.lava._shim import import_lava
    import_lava()
    from lava.proc.io.source import RingBuffer
    from spikec.targets.lava.procs.process import Recorder

    batch = next(iter(x.values())).shape[1]
    t = next(iter(x.values())).shape[0]
    period = net["period"]
    procs, files, aux = {}, {}, []
    for i in net["inputs"]:
        data = np.zeros(folded_shape(i["lava_shape"], batch) + (steps,), dtype=np.int64)
        xi = np.asarray(x[i["name"]], dtype=np.int64)   # in the shape the input is sent in (unit_views.py)
        data[..., :t * period:period] = fold_data(xi.reshape(xi.shape[:2] + tuple(i["ir_shape"])))
        procs[i["name"]] = RingBuffer(data=data)
    for p in net["processes"]:
        procs[p["name"]] = _build_process(p, arrays, batch, t, workdir, files, aux)
    for c in net["connections"]:
        src = getattr(procs[c["src"]], c["port"])
        dst = getattr(procs[c["dst"]], c["dst_port"])
        connect(src, dst, c)
    for r in net["recorded"]:
        files[("spikes", r["name"])] = workdir / f"{r['name']}.out.npy"
        if r.get("via") == "monitor":
            aux.append(monitor_read(net, arrays, r, procs, batch, steps, files[("spikes", r["name"])]))
            continue
        port = getattr(procs[r["proc"]], r["port"])
        aux.append(Recorder(shape=port.shape, steps=steps, path=files[("spikes", r["name"])]))
        port.connect(aux[-1].a_in)
    return procs, aux, files


def connect(src, dst, c: dict) -> None:
    """Connection ``c``: ``src`` flattened (a Dense reading a conv population) or reshaped to ``dst`` (a bias Dense
    into a (C, H, W) population, current_bias.py) when it says so."""
    (src.flatten() if c.get("flatten") else src.reshape(dst.shape) if c.get("reshape") else src).connect(dst)


@dataclass(frozen=True)
class MonitorRead:
    """Lava's Monitor on a standard LIF read-out's ``u`` (or a standard integrator's ``v``); ``finish`` writes its
    host values to ``path``."""
    monitor: object
    proc: object
    var: str
    bias: np.ndarray          # folded Lava layout (0: an integrator's v is its value)
    start: int
    path: Path
    shift: int = 6            # the read-out's u = a << 6; 0 for an integrator's v


def monitor_read(net: dict, arrays: dict, r: dict, procs: dict, batch: int, steps: int, path: Path) -> MonitorRead:
    from lava.proc.monitor.process import Monitor
    p = next(p for p in net["processes"] if p["name"] == r["proc"])
    monitor = Monitor()
    monitor.probe(getattr(procs[r["proc"]], r["port"]), steps)
    return MonitorRead(monitor, procs[r["proc"]], r["port"], monitored_bias(p, arrays, batch),
                       p.get("bias_from_step", p["start"]), path, p.get("act_shift", 6))


def monitored_bias(p: dict, arrays: dict, batch: int) -> np.ndarray:
    """What the host adds to a monitored value (folded): a read-out's bias, nothing for an integrator's v."""
    return fold(arrays[p["bias"]], batch) if "bias" in p else np.zeros((), np.int64)


def finish(aux: list) -> None:
    """After the run (the runtime still up): each Monitor's data as the read-out's values, written to its path."""
    from spikec.targets.lava.standard_readout import host_values
    for a in aux:
        if isinstance(a, MonitorRead):
            u = a.monitor.get_data()[a.proc.name][a.var]
            np.save(a.path, host_values(u, a.bias, a.start, a.shift))


def _build_process(p: dict, arrays: dict, batch: int, t: int, workdir: Path, files: dict, aux: list):
    """The Lava process of record ``p``; its probes to ``aux``, the files they write to ``files``."""
    from spikec.targets.lava.procs.process import HostRegion, Relay

    name, typ = p["name"], p["type"]
    if typ in ("Conv", "Dense", "DelayDense"):
        return _build_synapse(p, arrays, batch)
    if typ == "Sparse" and "tree" in p:   # max_tree.py: a max tree's graded +-1 synapse, or its identity out
        from lava.proc.sparse.process import Sparse
        return Sparse(weights=max_tree.folded_matrix(arrays, p, batch), weight_exp=p["weight_exp"],
                      num_message_bits=p["num_message_bits"], sign_mode=_sign_mode(p), name=name)
    if typ == "Sparse":   # a diagonal self-synapse (current_reset.py): the identity of the folded population
        return _build_diagonal(p, arrays, batch)
    if typ in max_tree.TYPES:
        return _build_sigma_delta(p, batch)
    if typ == "BiasLIF":   # current_bias.py: one always-firing LIF per sample, the source of the bias Denses
        from lava.proc.lif.process import LIF
        return LIF(shape=folded_shape(p["lava_shape"], batch), du=p["du"], dv=p["dv"], vth=p["vth"],
                   bias_mant=p["bias_mant"], bias_exp=p["bias_exp"], name=name)
    if typ == "Relay":
        return Relay(shape=folded_shape(p["lava_shape"], batch), delay=p["delay"], name=name)
    if typ == "Host":
        return HostRegion(in_shapes=[folded_shape(lava_shape(s["ir_shape"]), batch) for s in p["in_ports"]],
                          out_shapes=[folded_shape(lava_shape(s["ir_shape"]), batch) for s in p["out_ports"]],
                          spec=_host_spec(p, arrays, batch, t), start=p["start"], period=p["period"], name=name)
    if typ in POPULATION_TYPES:
        from spikec.targets.lava.procs.process import StateProbe
        proc = _build_population(p, arrays, batch, aux)
        final = p["start"] + (t - 1) * p["period"] + 1   # Lava time_step (1-based) of the last update
        for var in STATE_VARS.get(typ, ()):
            files[(var, name)] = workdir / f"{name}.{var}.npy"
            aux.append(StateProbe(var=getattr(proc, var), step=final, path=files[(var, name)]))
        return proc
    raise BadInput(f"unknown process type {typ!r} in the Lava network", where=f"process {name!r}")


def _build_synapse(p: dict, arrays: dict, batch: int):
    from lava.proc.conv.process import Conv
    from lava.proc.dense.process import DelayDense, Dense

    name = p["name"]
    if p["type"] == "Conv":
        from spikec.targets.lava.simulate import MAX_CONV_GROUPS
        if p["groups"] * batch > MAX_CONV_GROUPS:
            raise BadInput(f"Lava's Conv holds groups in an int8: {p['groups']} groups x {batch} samples side by side "
                           f"is beyond {MAX_CONV_GROUPS} (it wraps and the Conv sends nothing)",
                           where=f"process {name!r}",
                           remedy=f"run at most {max(1, MAX_CONV_GROUPS // p['groups'])} samples per network")
        w = np.tile(arrays[f"{name}/weight"], (batch, 1, 1, 1))
        return Conv(weight=w, input_shape=folded_shape(p["input_lava_shape"], batch), stride=tuple(p["stride"]),
                    padding=tuple(p["padding"]), dilation=tuple(p["dilation"]), groups=p["groups"] * batch,
                    num_message_bits=p["num_message_bits"], name=name)
    if p.get("current_bias"):   # from the always-firing source: its rows in the folded population's order
        from spikec.targets.lava.current_bias import folded_weights
        w = folded_weights(arrays[f"{name}/weights"], p["ir_shape"], batch)
    else:
        w = fold_dense(arrays[f"{name}/weights"], batch, p["flatten_input"], p["input_lava_shape"])
    if p["type"] == "Dense":
        return Dense(weights=w, weight_exp=p["weight_exp"], num_message_bits=p["num_message_bits"], name=name)
    return DelayDense(weights=w, delays=int(p["axon_delay"]), weight_exp=p["weight_exp"],
                      num_message_bits=p["num_message_bits"], name=name)


def _build_sigma_delta(p: dict, batch: int):
    """A max tree's Delta, ReLU SigmaDelta level or Sigma (max_tree.py): every delta sent (vth 0), no scaling."""
    from lava.proc.sdn.process import ActivationMode, Delta, Sigma, SigmaDelta
    shape = folded_shape(p["lava_shape"], batch)
    if p["type"] == max_tree.DELTA_TYPE:
        return Delta(shape=shape, vth=0, cum_error=False, spike_exp=0, state_exp=0)   # (Delta, Sigma: no name)
    if p["type"] == max_tree.SIGMA_TYPE:
        return Sigma(shape=shape)
    return SigmaDelta(shape=shape, vth=0, bias=0, act_mode=ActivationMode.RELU, cum_error=False, spike_exp=0,
                      state_exp=0, name=p["name"])


def _build_diagonal(p: dict, arrays: dict, batch: int):
    from lava.proc.sparse.process import Sparse
    from scipy.sparse import identity, kron
    size = int(np.prod(folded_shape(p["lava_shape"], batch)))
    block = identity(size, dtype=np.int32, format="csr")
    if p.get("ladder"):   # count_ladder.py: every copy of a neuron onto every copy of it
        d, inner = p["ladder"], p["ladder_inner"]
        block = kron(kron(identity(size // (d * inner), dtype=np.int32), np.ones((d, d), dtype=np.int32)),
                     identity(inner, dtype=np.int32), format="csr")
    w = int(arrays[f"{p['name']}/weight"]) * block
    return Sparse(weights=w, weight_exp=p["weight_exp"], num_message_bits=0, name=p["name"], sign_mode=_sign_mode(p))


def _sign_mode(p: dict):
    """Lava's SignMode of a Sparse record's ``sign_mode`` (excitatory, inhibitory or mixed)."""
    from lava.utils.weightutils import SignMode
    return {"mixed": SignMode.MIXED, "inhibitory": SignMode.INHIBITORY}.get(p["sign_mode"], SignMode.EXCITATORY)


def _build_population(p: dict, arrays: dict, batch: int, aux: list):
    """A neuron, OR or read-out process; the VarWriter that switches a LIF's bias on goes to ``aux``."""
    from lava.proc.lif.process import LIF
    from spikec.targets.lava.procs.process import (Readout, SpikecCSiLIF, SpikecIntFire, SpikecLIF, SpikecSiLIF,
                                                   VarWriter)

    name, typ = p["name"], p["type"]
    shape = folded_shape(p["lava_shape"], batch)
    sched = {"start": p["start"], "period": p["period"]}
    get = lambda k: fold(arrays[f"{name}/{k}"], batch)
    if typ == "LIF":
        proc = LIF(shape=shape, du=p["du"], dv=p["dv"], vth=p["vth"], bias_mant=np.zeros(shape, np.int64),
                   bias_exp=get("bias_exp"), name=name)
        bias = get("bias_mant")
        if np.any(bias):   # the bias starts with the first input: written after Lava step `start`
            aux.append(VarWriter(var=proc.bias_mant, step=p["bias_on_after_step"], value=bias))
        return proc
    if typ == "SpikecAND":
        from spikec.targets.lava.procs.and_gate import SpikecAND
        return SpikecAND(shape=shape, name=name, **sched)
    if typ == "AND":   # two-input AND neurons as Lava's LIF (and_neurons.AND_LIF)
        return LIF(shape=shape, du=p["du"], dv=p["dv"], vth=p["vth"], bias_mant=0, bias_exp=0, name=name)
    if typ == "OR":
        return LIF(shape=shape, du=4095, dv=4095, vth=0, bias_mant=0, bias_exp=0, name=name)
    if typ == "LIFReadout":   # standard_readout.py: its u is the read-out, the bias added by the host
        return LIF(shape=shape, du=p["du"], dv=p["dv"], vth=p["vth"], bias_mant=0, bias_exp=0, name=name)
    if typ == "SpikecLIF":
        extra = {k: get(k) for k in PARAMS[typ] if f"{name}/{k}" in arrays}
        return SpikecLIF(shape=shape, bias_mant=get("bias_mant"), bias_exp=get("bias_exp"), reset=p["reset"],
                         fire=p.get("fire", "gt"), name=name, **sched, **extra)
    if typ == "SpikecIntFire":
        clamp = {"v_min": get("v_min")} if f"{name}/v_min" in arrays else {}   # Sinabs's min_v_mem
        return SpikecIntFire(shape=shape, **{k: get(k) for k in PARAMS[typ] + ("bias_mant", "bias_exp")}, **clamp,
                             max_spikes=p["max_spikes"], rounding=p["rounding"], unrolled=p["unrolled"],
                             name=name, **sched)
    if typ == "SpikecSiLIF":
        return SpikecSiLIF(shape=shape, **{k: get(k) for k in PARAMS[typ] + ("bias_mant", "bias_exp")},
                           name=name, **sched)
    if typ == "SpikecCSiLIF":
        return SpikecCSiLIF(shape=shape, **{k: get(k) for k in PARAMS[typ] + ("bias_mant", "bias_exp")},
                            name=name, **sched)
    return Readout(shape=shape, bias=get("bias"), name=name, **sched)


def _host_spec(p: dict, arrays: dict, batch: int, steps: int) -> dict:
    nodes = []
    for node in p["spec"]["nodes"]:
        node = dict(node)
        if node["kind"] == "host":
            node["gains"] = [None if g is None else arrays[g] for g in node["gains"]]
            node["params"] = {k: arrays[v] for k, v in node["params"].items()}
        else:
            node["gain"] = arrays[node["gain"]]
        nodes.append(node)
    return {"nodes": nodes, "outputs": p["spec"]["outputs"], "in_ir_shapes": p["spec"]["in_ir_shapes"],
            "batch": batch, "steps": steps}
