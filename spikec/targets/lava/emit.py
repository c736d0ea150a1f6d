"""Lower the integer reference graph to a Lava process network, run it in Lava, compare bit for bit.

The network is first written as plain data (``network.json`` + ``params.npz``, per sample, in Lava's
layouts) so the artifact that is verified is the artifact that is shipped; ``build`` turns that data
into Lava processes. The traps of targets.md are handled here:

- Dense: mixed-sign weights were already emitted as ``2 w`` with ``weight_exp = -1`` by the quantizer
  (Lava truncates their LSB); here a check proves Lava's clip/truncate leaves every weight unchanged.
- Conv: Lava computes a true convolution in ``(W, H, C)`` layout with weights ``(C_out, kW, kH, C_in)``:
  the PyTorch kernel is flipped in both spatial axes and transposed; kernel/stride/padding/dilation
  are given in (W, H) order. A Dense fed by a flattened conv population gets its columns permuted
  from PyTorch's (C, H, W) flatten order to Lava's (W, H, C) order.
- LIF: ``du = 4095`` (no synaptic current carried over; ``du = 0`` would still carry 4095/4096).
- Latency: every synapse process delivers one step later. A population ``L`` synapses away from the
  input runs logical step ``t`` at Lava step ``t + L + 1`` (1-based). Its bias is written (VarWriter)
  after Lava step ``L``, so it starts with its first input, as in the reference; its spikes are
  compared at Lava steps ``L .. L+T-1`` (and must be silent before), its final states read after
  Lava step ``T + L``. No shift is searched for.
- Batch: samples run side by side in one network: conv populations fold the batch into channels
  (``groups = B * groups``), dense ones into blocks (block-diagonal weights); chunks of the batch run
  separately when a folded Dense would be too large.
- Recording: ``Var.get`` moves data element by element, so spikes go to Recorder processes and states
  to StateProbes that write ``.npy`` files directly.
"""
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from spikec.compiler.errors import BadInput, IRError
from spikec.compiler.ir import Graph
from spikec.targets.lava import ops as lops

FORMAT, VERSION = "spikec-lava-network", 1
MAX_FOLDED_WEIGHTS = 3e7     # int entries of one batch-folded (block-diagonal) Dense
MAX_REPORTED = 10


# -- layouts ----------------------------------------------------------------------------
def lava_shape(ir_shape) -> list[int]:
    """IR per-sample (C, H, W) -> Lava (W, H, C); vectors unchanged."""
    return [ir_shape[2], ir_shape[1], ir_shape[0]] if len(ir_shape) == 3 else list(ir_shape)


def to_lava(a: np.ndarray) -> np.ndarray:
    """A per-sample IR-layout array (C, H, W) in Lava's (W, H, C) layout."""
    return a.transpose(2, 1, 0) if a.ndim == 3 else a


def conv_weight_to_lava(w: np.ndarray) -> np.ndarray:
    """PyTorch (C_out, C_in, kH, kW) cross-correlation -> Lava (C_out, kW, kH, C_in) true convolution."""
    return np.ascontiguousarray(w[:, :, ::-1, ::-1].transpose(0, 3, 2, 1))


def conv_weight_from_lava(w: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(w.transpose(0, 3, 2, 1)[:, :, ::-1, ::-1])


def flatten_perm(ir_shape) -> np.ndarray:
    """``perm[j]``: the PyTorch flatten index of the neuron at Lava flatten index ``j``."""
    return np.arange(int(np.prod(ir_shape))).reshape(ir_shape).transpose(2, 1, 0).reshape(-1)


def per_neuron(p: np.ndarray, ir_shape) -> np.ndarray:
    """A () or (C,) IR parameter as a per-neuron array in Lava layout."""
    p = np.asarray(p)
    full = np.broadcast_to(p.reshape(-1, *([1] * (len(ir_shape) - 1))) if p.ndim else p, ir_shape)
    return np.ascontiguousarray(to_lava(np.array(full)))


# -- lowering (integer IR -> network data) ------------------------------------------------
def lower(q: Graph) -> tuple[dict, dict]:
    """``(network, arrays)``: processes in topological order, per sample, in Lava layout."""
    arrays, procs, latency, lshape, irshape = {}, [], {}, {}, {}
    inputs = []
    for n in q.nodes:
        if n.op == "input":
            latency[n.name], irshape[n.name] = 0, list(n.type.shape)
            nmb = 0 if n.type.kind == "binary" else max(1, int(n.type.ceiling).bit_length())
            inputs.append({"name": n.name, "ir_shape": list(n.type.shape), "lava_shape": lava_shape(n.type.shape),
                           "num_message_bits": nmb})
            continue
        if n.op == "flatten":   # a view: the Dense reading it permutes its columns
            latency[n.name], irshape[n.name] = latency[n.inputs[0]], irshape[n.inputs[0]]
            continue
        src = n.inputs[0]
        base = {"name": n.name, "ir_node": n.name, "ir_shape": list(n.type.shape),
                "lava_shape": lava_shape(n.type.shape)}
        if n.op in ("lava_conv", "lava_dense"):
            origin = q.node(src)
            while origin.op == "flatten":
                origin = q.node(origin.inputs[0])
            nmb = n.attrs.get("num_message_bits", 0)
            if origin.op == "input":
                nmb = next(i["num_message_bits"] for i in inputs if i["name"] == origin.name)
            d = dict(base, input=origin.name, input_ir_shape=irshape[src], latency=latency[src] + 1,
                     num_message_bits=nmb)
            if n.op == "lava_conv":
                a = n.attrs
                arrays[f"{n.name}/weight"] = conv_weight_to_lava(np.array(n.params["weight"]))
                d.update(type="Conv", input_lava_shape=lava_shape(irshape[src]),
                         kernel_size=[int(n.params["weight"].shape[3]), int(n.params["weight"].shape[2])],
                         stride=[a["stride"][1], a["stride"][0]], padding=[a["padding"][1], a["padding"][0]],
                         dilation=[a["dilation"][1], a["dilation"][0]], groups=a["groups"])
            else:
                w = np.array(n.params["weight"])
                flat = len(irshape[src]) == 3
                if flat:
                    w = w[:, flatten_perm(tuple(irshape[src]))]
                eff = lops.dense_effective_weights(w)
                if not np.array_equal(eff, w):
                    bad = np.argwhere(eff != w)[0]
                    raise IRError(f"Lava's Dense would alter weight {tuple(bad)} ({w[tuple(bad)]} -> "
                                  f"{eff[tuple(bad)]}); the quantizer must emit values Lava keeps",
                                  where=f"node {n.name!r}")
                arrays[f"{n.name}/weights"] = np.ascontiguousarray(w)
                d.update(type="Dense", flatten_input=flat, input_lava_shape=lava_shape(irshape[src]),
                         weight_exp=int(n.attrs.get("weight_exp", 0)), sign_mode=lops.sign_mode(w))
            procs.append(d)
            latency[n.name], irshape[n.name] = d["latency"], list(n.type.shape)
        elif n.op == "lava_lif":
            shape = n.type.shape
            kind = n.attrs.get("process", "SpikecLIF")
            d = dict(base, type=kind, input=src, latency=latency[src], reset=n.attrs["reset"],
                     bias_on_after_step=latency[src])
            for k in ("bias_mant", "bias_exp"):
                arrays[f"{n.name}/{k}"] = per_neuron(n.params[k], shape)
            if kind == "LIF":
                if any(np.asarray(n.params[k]).ndim for k in ("du", "dv", "vth")) or "v_reset" in n.params \
                        or n.attrs["reset"] != "zero":
                    raise IRError("Lava's LIF needs scalar du, dv, vth and a hard reset to 0", where=f"node {n.name!r}")
                d.update(du=int(n.params["du"]), dv=int(n.params["dv"]), vth=int(n.params["vth"]))
            else:
                for k in ("du", "dv", "vth") + (("v_reset",) if "v_reset" in n.params else ()):
                    arrays[f"{n.name}/{k}"] = per_neuron(n.params[k], shape)
            procs.append(d)
            latency[n.name], irshape[n.name] = latency[src], list(shape)
        elif n.op == "lava_readout":
            arrays[f"{n.name}/bias"] = per_neuron(n.params["bias"], n.type.shape)
            procs.append(dict(base, type="Readout", input=src, latency=latency[src]))
            latency[n.name], irshape[n.name] = latency[src], list(n.type.shape)
        else:
            raise IRError(f"op {n.op} has no Lava process", where=f"node {n.name!r}")
    net = {"format": FORMAT, "version": VERSION, "inputs": inputs, "processes": procs,
           "max_latency": max((p["latency"] for p in procs), default=0),
           "outputs": list(q.outputs),
           "claim": "bit-exact with Lava 0.10.0's fixed-point CPU models (Loihi2SimCfg(select_tag='fixed_pt')); "
                    "these models are not validated against Loihi 2 silicon (lava#322)"}
    return net, arrays


def save_network(net: dict, arrays: dict, directory: Path) -> None:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "network.json").write_text(json.dumps(net, indent=1))
    with open(directory / "params.npz", "wb") as f:
        np.savez(f, **arrays)


def load_network(directory: Path) -> tuple[dict, dict]:
    directory = Path(directory)
    try:
        net = json.loads((directory / "network.json").read_text())
        with np.load(directory / "params.npz", allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError) as e:
        raise BadInput(f"cannot read the Lava network in {directory}: {e}",
                       remedy="point at an OUTDIR written by `spikec compile --target lava`") from e
    if net.get("format") != FORMAT or net.get("version") != VERSION:
        raise BadInput(f"{directory / 'network.json'} is not a {FORMAT} v{VERSION} document")
    return net, arrays


# -- batch folding ------------------------------------------------------------------------
def fold(a: np.ndarray, batch: int) -> np.ndarray:
    """A per-neuron Lava-layout array for ``batch`` samples side by side (channels or blocks)."""
    return np.tile(a, (1, 1, batch)) if a.ndim == 3 else np.tile(a, batch)


def fold_data(x: np.ndarray) -> np.ndarray:
    """``[T, B, *ir]`` -> folded Lava layout ``(*lava_folded, T)``."""
    t, b = x.shape[:2]
    if x.ndim == 5:   # (T, B, C, H, W) -> (W, H, B*C, T)
        return np.ascontiguousarray(x.transpose(4, 3, 1, 2, 0).reshape(x.shape[4], x.shape[3], b * x.shape[2], t))
    return np.ascontiguousarray(x.reshape(t, -1).T)


def unfold_data(r: np.ndarray, batch: int, ir_shape) -> np.ndarray:
    """Folded ``(*lava_folded, T)`` -> ``[T, B, *ir]``."""
    t = r.shape[-1]
    if len(ir_shape) == 3:
        c, h, w = ir_shape
        return np.ascontiguousarray(r.reshape(w, h, batch, c, t).transpose(4, 2, 3, 1, 0))
    return np.ascontiguousarray(r.reshape(batch, *ir_shape, t).transpose(2, 0, 1))


def unfold_state(r: np.ndarray, batch: int, ir_shape) -> np.ndarray:
    return unfold_data(r[..., None], batch, ir_shape)[0]


def fold_dense(w: np.ndarray, batch: int, flatten_input: bool, input_lava_shape) -> np.ndarray:
    n_out, n_in = w.shape
    big = np.zeros((batch * n_out, batch * n_in), dtype=w.dtype)
    if flatten_input:
        wd, h, c = input_lava_shape
        j = np.arange(n_in)
        xy, ch = j // c, j % c
        for b in range(batch):
            big[b * n_out:(b + 1) * n_out, xy * batch * c + b * c + ch] = w
    else:
        for b in range(batch):
            big[b * n_out:(b + 1) * n_out, b * n_in:(b + 1) * n_in] = w
    return big


def batch_chunk(net: dict, arrays: dict, batch: int) -> int:
    worst = max((arrays[f"{p['name']}/weights"].size for p in net["processes"] if p["type"] == "Dense"), default=1)
    return int(max(1, min(batch, np.floor(np.sqrt(MAX_FOLDED_WEIGHTS / worst)))))


# -- building and running -----------------------------------------------------------------
def build(net: dict, arrays: dict, x: dict, steps: int, workdir: Path):
    """Lava processes for ``x`` (name -> ``[T, B, *ir]`` integers) padded to ``steps`` Lava steps.

    Returns ``(procs, files)``: processes by name, and the .npy files the run will write
    (``("spikes"|"v"|"u", name) -> path``).
    """
    from spikec.targets.lava._shim import import_lava
    import_lava()
    from lava.proc.conv.process import Conv
    from lava.proc.dense.process import Dense
    from lava.proc.io.source import RingBuffer
    from lava.proc.lif.process import LIF
    from spikec.targets.lava.procs.process import Readout, Recorder, SpikecLIF, StateProbe, VarWriter

    batch = next(iter(x.values())).shape[1]
    t = next(iter(x.values())).shape[0]
    procs, out, files = {}, {}, {}
    aux = []
    for i in net["inputs"]:
        data = np.zeros(tuple(fold(np.zeros(i["lava_shape"]), batch).shape) + (steps,), dtype=np.int64)
        data[..., :t] = fold_data(np.asarray(x[i["name"]], dtype=np.int64))
        procs[i["name"]] = RingBuffer(data=data)
        out[i["name"]] = procs[i["name"]].s_out
    for p in net["processes"]:
        name, src = p["name"], out[p["input"]]
        if p["type"] == "Conv":
            w = np.tile(arrays[f"{name}/weight"], (batch, 1, 1, 1))
            in_shape = tuple(fold(np.zeros(p["input_lava_shape"]), batch).shape)
            proc = Conv(weight=w, input_shape=in_shape, stride=tuple(p["stride"]), padding=tuple(p["padding"]), dilation=tuple(p["dilation"]),
                        groups=p["groups"] * batch, num_message_bits=p["num_message_bits"], name=name)
            src.connect(proc.s_in)
            out[name] = proc.a_out
        elif p["type"] == "Dense":
            w = fold_dense(arrays[f"{name}/weights"], batch, p["flatten_input"], p["input_lava_shape"])
            proc = Dense(weights=w, weight_exp=p["weight_exp"], num_message_bits=p["num_message_bits"], name=name)
            (src.flatten() if p["flatten_input"] else src).connect(proc.s_in)
            out[name] = proc.a_out
        elif p["type"] in ("LIF", "SpikecLIF"):
            shape = tuple(fold(np.zeros(p["lava_shape"]), batch).shape)
            bias = fold(arrays[f"{name}/bias_mant"], batch)
            exp = fold(arrays[f"{name}/bias_exp"], batch)
            if p["type"] == "LIF":
                proc = LIF(shape=shape, du=p["du"], dv=p["dv"], vth=p["vth"], bias_mant=np.zeros(shape, np.int64),
                           bias_exp=exp, name=name)
            else:
                extra = {k: fold(arrays[f"{name}/{k}"], batch) for k in ("du", "dv", "vth", "v_reset")
                         if f"{name}/{k}" in arrays}
                proc = SpikecLIF(shape=shape, bias_mant=np.zeros(shape, np.int64), bias_exp=exp, reset=p["reset"],
                                 name=name, **extra)
            src.connect(proc.a_in)
            if np.any(bias):   # the bias starts with the first input: written after Lava step `latency`
                aux.append(VarWriter(var=proc.bias_mant, step=p["bias_on_after_step"], value=bias))
            for var in ("v", "u"):
                files[(var, name)] = workdir / f"{name}.{var}.npy"
                aux.append(StateProbe(var=getattr(proc, var), step=t + p["latency"], path=files[(var, name)]))
            out[name] = proc.s_out
        elif p["type"] == "Readout":
            shape = tuple(fold(np.zeros(p["lava_shape"]), batch).shape)
            proc = Readout(shape=shape, bias=fold(arrays[f"{name}/bias"], batch), name=name)
            src.connect(proc.a_in)
            out[name] = proc.s_out
        else:
            raise BadInput(f"unknown process type {p['type']!r} in the Lava network", where=f"process {name!r}")
        procs[name] = proc
        if p["type"] in ("LIF", "SpikecLIF", "Readout"):
            files[("spikes", name)] = workdir / f"{name}.out.npy"
            shape = tuple(fold(np.zeros(p["lava_shape"]), batch).shape)
            aux.append(Recorder(shape=shape, steps=steps, path=files[("spikes", name)]))
            out[name].connect(aux[-1].a_in)
    return procs, aux, files


def run_lava(net: dict, arrays: dict, x: dict) -> dict:
    """Run the network on ``x`` (name -> ``[T, B, *ir]`` integers) in Loihi2SimCfg(select_tag="fixed_pt").

    Returns ``{"outputs": name -> [steps, B, *ir], "states": (var, name) -> [B, *ir], "steps", timings}``.
    """
    from spikec.targets.lava._shim import import_lava
    import_lava()
    from lava.magma.core.run_conditions import RunSteps
    from lava.magma.core.run_configs import Loihi2SimCfg

    first = next(iter(x.values()))
    t, batch = first.shape[:2]
    steps = t + net["max_latency"]
    chunk = batch_chunk(net, arrays, batch)
    ir = {p["name"]: tuple(p["ir_shape"]) for p in net["processes"]}
    outputs, states = {}, {}
    build_s = sim_s = 0.0
    for lo in range(0, batch, chunk):
        xb = {k: np.asarray(v)[:, lo:lo + chunk] for k, v in x.items()}
        b = next(iter(xb.values())).shape[1]
        workdir = Path(tempfile.mkdtemp(prefix="spikec-lava-"))
        try:
            start = time.perf_counter()
            procs, aux, files = build(net, arrays, xb, steps, workdir)
            build_s += time.perf_counter() - start
            source = procs[net["inputs"][0]["name"]]
            start = time.perf_counter()
            try:
                source.run(condition=RunSteps(num_steps=steps), run_cfg=Loihi2SimCfg(select_tag="fixed_pt"))
            finally:
                source.stop()
            sim_s += time.perf_counter() - start
            for (what, name), path in files.items():
                r = np.load(path)
                if what == "spikes":
                    outputs.setdefault(name, []).append(unfold_data(r, b, ir[name]))
                else:
                    states.setdefault((what, name), []).append(unfold_state(r, b, ir[name]))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    return {"outputs": {k: np.concatenate(v, axis=1) for k, v in outputs.items()},
            "states": {k: np.concatenate(v, axis=0) for k, v in states.items()},
            "steps": steps, "batch_chunk": chunk, "chunks": -(-batch // chunk),
            "build_seconds": round(build_s, 3), "sim_seconds": round(sim_s, 3)}


# -- comparison ---------------------------------------------------------------------------
def compare(net: dict, trace, lava: dict, steps: int) -> dict:
    """Bit-for-bit: every spike / read-out value at every logical step (at Lava step ``t + latency``),
    silence before each population's first input, and the final ``v``, ``u`` of every population."""
    mismatches, per_node = [], {}
    counts = {"spikes_compared": 0, "values_compared": 0, "states_compared": 0, "pre_latency_values_checked": 0}

    def note(node, what, exp, got, lat=None, state=False):
        bad = exp != got
        k = int(bad.sum())
        if k:
            per_node.setdefault(node, {})
            per_node[node][what] = per_node[node].get(what, 0) + k
        for pos in np.argwhere(bad)[: max(0, MAX_REPORTED - len(mismatches))]:
            pos = tuple(int(i) for i in pos)
            m = {"node": node, "what": what, "expected": int(exp[pos]), "got": int(got[pos])}
            if state:
                m.update(batch=pos[0], index=list(pos[1:]), after_step=steps - 1)
            else:
                m.update(step=pos[0], lava_step=pos[0] + lat + 1, batch=pos[1], index=list(pos[2:]))
            mismatches.append(m)
        return k

    for p in net["processes"]:
        name, lat = p["name"], p["latency"]
        if p["type"] not in ("LIF", "SpikecLIF", "Readout"):
            continue
        rec = lava["outputs"][name]
        exp = trace.values[name].astype(np.int64)
        got = rec[lat:lat + steps]
        spikes = p["type"] != "Readout"
        note(name, "spikes" if spikes else "output", exp, got, lat)
        counts["spikes_compared" if spikes else "values_compared"] += exp.size
        if spikes:
            pre = rec[:lat]
            note(name, "spikes_before_first_input", np.zeros_like(pre), pre, 0)
            counts["pre_latency_values_checked"] += pre.size
            for var in ("v", "u"):
                exp_s = trace.values[f"{name}.{var}"][steps - 1].astype(np.int64)
                note(name, f"final_{var}", exp_s, lava["states"][(var, name)], state=True)
                counts["states_compared"] += exp_s.size
    order = [p["name"] for p in net["processes"]]
    first = next((n for n in order if n in per_node), None)
    syn = {p["name"]: p["input"] for p in net["processes"]}
    return {"bit_exact": not per_node, "steps_compared": steps, **counts,
            "mismatch_counts": per_node,
            "first_divergent_layer": None if first is None else {"population": first, "synapse": syn.get(first)},
            "first_mismatches": mismatches}
