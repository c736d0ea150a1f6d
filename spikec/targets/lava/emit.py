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
- Several streams into one population: Lava adds every connection into an InPort.

Schedule (no shift is ever searched for). A network runs ``P`` Lava steps per physical step, ``P`` the
largest sub-step count of an unrolled integer neuron (1 without one). Every process has a start
``phi`` (0-based Lava step of its first update) and an emission width ``e`` (1, or D for an unrolled
neuron: its thermometer code occupies D consecutive Lava steps). Physical step ``t`` of a
population updates at Lava step ``phi + t P``, with the sum of everything its input port received
since its previous update. Inputs start at 0; a synapse (Dense / DelayDense / Conv) delivers one Lava
step later; host processes and direct connections deliver in the same step. A population starts at
``phi = max over its streams (phi_src + latency + e_src - 1)``; a stream arriving earlier is delayed
by the difference (plus ``k P`` for a ``Delay(k)`` node): DelayDense for a Dense, a Relay process
before a Conv or on a direct connection. An OR layer is stateless: ``phi = phi_src + 1``, ``e = e_src``.
Spikes (and graded payloads, read-outs, host values) are compared at their Lava steps and required
silent at every other recorded step; final states are read after the last update.

- Batch: samples run side by side in one network: conv populations fold the batch into channels
  (``groups = B * groups``), dense ones into blocks (block-diagonal weights); chunks of the batch run
  separately when a folded Dense would be too large.
- Recording: ``Var.get`` moves data element by element, so spikes go to Recorder processes and states
  to StateProbes that write ``.npy`` files directly.
"""
import json
from pathlib import Path

import numpy as np

from spikec.compiler.errors import BadInput, IRError, UnsupportedOp
from spikec.compiler.ir import Graph, thaw
from spikec.targets.lava import ops as lops

FORMAT, VERSION = "spikec-lava-network", 2
ERRORS_ENV = "SPIKEC_LAVA_ERRORS"   # (the same name as procs/models.py and supervisor.py, which must not import this)
MAX_FOLDED_WEIGHTS = 3e7     # int entries of one batch-folded (block-diagonal) Dense
MAX_REPORTED = 10
MAX_AXON_DELAY = 62          # DelayDense on Loihi 2: delays 0..62
POPULATION_OPS = ("lava_lif", "lava_intfire", "lava_silif", "lava_csilif", "lava_or", "lava_readout")
NEURON_TYPES = ("LIF", "SpikecLIF", "SpikecIntFire", "SpikecSiLIF", "SpikecCSiLIF")
POPULATION_TYPES = NEURON_TYPES + ("OR", "Readout")
STATE_VARS = {"LIF": ("v", "u"), "SpikecLIF": ("v", "u"), "SpikecIntFire": ("v", "u"), "SpikecSiLIF": ("v",),
              "SpikecCSiLIF": ("v", "w")}
PARAMS = {"SpikecLIF": ("du", "dv", "vth", "v_reset"), "SpikecIntFire": ("du", "dv", "vth"),
          "SpikecSiLIF": ("decay", "vth", "kappa"), "SpikecCSiLIF": ("a_re", "a_im", "vth", "kappa")}


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
class _Lowering:
    """Walks the integer graph in order; ``origin[name]`` says which process port carries a node's value."""

    def __init__(self, q: Graph):
        self.q = q
        self.arrays, self.procs, self.conns, self.inputs, self.recorded = {}, [], [], [], []
        self.origin: dict = {}      # int node -> {proc, port, phi, emit, k (physical delay), ir_shape, flat}
        self.period = max([int(n.attrs["max_spikes"]) for n in q.nodes
                           if n.op == "lava_intfire" and n.attrs.get("unrolled")] + [1])
        self.regions_done: set = set()
        self.consumer = {}

    def run(self):
        for n in self.q.nodes:
            self.node(n)
        return self

    # values ---------------------------------------------------------------------------
    def node(self, n):
        q = self.q
        if n.op == "input":
            nmb = 0 if n.type.kind == "binary" else max(1, int(n.type.ceiling).bit_length())
            self.inputs.append({"name": n.name, "ir_shape": list(n.type.shape), "lava_shape": lava_shape(n.type.shape),
                                "num_message_bits": nmb})
            self.origin[n.name] = self._origin(n.name, "s_out", 0, 1, n.type.shape, nmb=nmb)
        elif n.op == "flatten":
            if n.inputs[0] in self.origin:
                self.origin[n.name] = dict(self.origin[n.inputs[0]], flat=True)
        elif n.op == "delay":
            if n.inputs[0] in self.origin:
                o = self.origin[n.inputs[0]]
                self.origin[n.name] = dict(o, k=o["k"] + int(n.attrs["steps"]))
        elif n.op == "substep_sum" and n.inputs[0] in self.origin:   # an unrolled neuron's count, read by a host
            self.origin[n.name] = dict(self.origin[n.inputs[0]], count=True)
        elif n.op in ("lava_conv", "lava_dense", "add", "substep_sum"):
            pass   # terms of a population: lowered with it
        elif n.op in POPULATION_OPS and n.attrs.get("output", "spikes") == "spikes":
            self.population(n)
        elif n.op in POPULATION_OPS and n.attrs.get("output") == "membrane":
            pop = next(p for p in self.procs if p["name"] == self._owner(n))
            self.origin[n.name] = self._origin(pop["name"], "m_out", pop["start"], 1, n.type.shape)
        elif n.op in lops.HOST_OPS:
            self.region(n.attrs["region"])
        elif n.op == "lava_quant":
            if n.name not in self.origin:
                raise IRError("a lava_quant node outside a host region", where=f"node {n.name!r}")
        elif n.op in POPULATION_OPS:
            pass   # a state read-out twin
        else:
            raise IRError(f"op {n.op} has no Lava process", where=f"node {n.name!r}")

    def _owner(self, twin):
        return next(m.name for m in self.q.nodes if m.op == twin.op and m.inputs == twin.inputs
                    and m.attrs.get("output", "spikes") == "spikes")

    @staticmethod
    def _origin(proc, port, phi, emit, ir_shape, **kw):
        return {"proc": proc, "port": port, "phi": int(phi), "emit": int(emit), "k": 0, "ir_shape": list(ir_shape),
                "flat": False, **kw}

    def terms(self, name) -> list:
        """``[("syn", node) | ("direct", node)]`` summed into a population's input port."""
        n = self.q.node(name)
        if n.op == "add":
            return self.terms(n.inputs[0]) + self.terms(n.inputs[1])
        if n.op == "substep_sum" and n.name not in self.origin:
            return self.terms(n.inputs[0])
        if n.op in ("lava_conv", "lava_dense"):
            return [("syn", name)]
        if name in self.origin:
            return [("direct", name)]
        raise IRError(f"{n.op} node {name!r} cannot feed a population's input port", where=f"node {name!r}")

    def syn_origin(self, syn) -> dict:
        src = self.q.node(syn).inputs[0]
        if src not in self.origin:
            raise IRError(f"synapse {syn!r} reads {src!r}, which no process sends", where=f"node {syn!r}")
        return self.origin[src]

    # populations ------------------------------------------------------------------------
    def population(self, n):
        P = self.period
        terms = self.terms(n.inputs[0])
        origins = [self.syn_origin(t) if kind == "syn" else self.origin[t] for kind, t in terms]
        lat = [1 if kind == "syn" else 0 for kind, _ in terms]
        if n.op == "lava_or":
            (o,) = origins
            phi, emit = o["phi"] + 1, o["emit"]
        else:
            phi = max(o["phi"] + l + o["emit"] - 1 for o, l in zip(origins, lat))
            emit = int(n.attrs["max_spikes"]) if n.op == "lava_intfire" and n.attrs.get("unrolled") else 1
        names = []
        for (kind, t), o, l in zip(terms, origins, lat):
            delay = o["k"] * P + (0 if n.op == "lava_or" else phi - (o["phi"] + l + o["emit"] - 1))
            if kind == "syn":
                names.append(self.synapse(t, o, delay, n.name))
            else:
                names.append(self.direct(t, o, delay, n.name))
        shape = n.type.shape
        base = {"name": n.name, "ir_node": n.name, "ir_shape": list(shape), "lava_shape": lava_shape(shape),
                "inputs": [src for src, _ in names], "input": names[0][0], "start": phi, "latency": phi, "period": P, "emit": emit,
                "substeps": n.type.substeps}
        if n.op == "lava_lif":
            kind = n.attrs.get("process", "SpikecLIF")
            if kind == "LIF" and P > 1:
                kind = "SpikecLIF"   # Lava's LIF updates every Lava step: a sub-step schedule needs the custom one
            d = dict(base, type=kind, reset=n.attrs["reset"], bias_on_after_step=phi)
            for k in ("bias_mant", "bias_exp"):
                self.arrays[f"{n.name}/{k}"] = per_neuron(n.params[k], shape)
            if kind == "LIF":
                if any(np.asarray(n.params[k]).ndim for k in ("du", "dv", "vth")) or "v_reset" in n.params \
                        or n.attrs["reset"] != "zero":
                    raise IRError("Lava's LIF needs scalar du, dv, vth and a hard reset to 0", where=f"node {n.name!r}")
                d.update(du=int(n.params["du"]), dv=int(n.params["dv"]), vth=int(n.params["vth"]))
            else:
                for k in PARAMS["SpikecLIF"]:
                    if k in n.params:
                        self.arrays[f"{n.name}/{k}"] = per_neuron(n.params[k], shape)
        elif n.op == "lava_intfire":
            d = dict(base, type="SpikecIntFire", max_spikes=int(n.attrs["max_spikes"]), rounding=n.attrs["rounding"],
                     unrolled=bool(n.attrs.get("unrolled")))
            for k in PARAMS["SpikecIntFire"] + ("bias_mant", "bias_exp"):
                self.arrays[f"{n.name}/{k}"] = per_neuron(n.params[k], shape)
        elif n.op in ("lava_silif", "lava_csilif"):
            kind = "SpikecSiLIF" if n.op == "lava_silif" else "SpikecCSiLIF"
            d = dict(base, type=kind)
            for k in PARAMS[kind] + ("bias_mant", "bias_exp"):
                self.arrays[f"{n.name}/{k}"] = per_neuron(n.params[k], shape)
        elif n.op == "lava_or":
            d = dict(base, type="OR")
        else:
            self.arrays[f"{n.name}/bias"] = per_neuron(n.params["bias"], shape)
            d = dict(base, type="Readout")
        self.procs.append(d)
        for src, port in names:
            self.conns.append({"src": src, "port": port, "dst": n.name, "dst_port": "a_in"})
        self.origin[n.name] = self._origin(n.name, "s_out", phi, emit, shape)
        self.recorded.append({"name": n.name, "proc": n.name, "port": "s_out", "ir_node": n.name, "start": phi,
                              "substeps": n.type.substeps, "ir_shape": list(shape),
                              "what": "output" if n.op == "lava_readout" else
                              "payload" if n.type.kind == "integer" else "spikes"})

    def relay(self, o: dict, delay: int, name: str) -> dict:
        """A Relay delaying origin ``o`` by ``delay`` Lava steps; returns the relay's origin."""
        self.procs.append({"name": name, "type": "Relay", "delay": int(delay), "ir_shape": o["ir_shape"],
                           "lava_shape": lava_shape(o["ir_shape"]), "latency": o["phi"]})
        self.conns.append({"src": o["proc"], "port": o["port"], "dst": name, "dst_port": "s_in"})
        return dict(o, proc=name, port="s_out")

    def direct(self, t, o, delay, target) -> tuple:
        """A value sent straight into ``target``'s input port (a host value): ``(process, port)``."""
        if delay:
            o = self.relay(o, delay, f"{t}.relay.{target}")
        return o["proc"], o["port"]

    def synapse(self, syn, o, delay, target) -> tuple:
        n = self.q.node(syn)
        nmb = n.attrs.get("num_message_bits", 0)
        if o["proc"] in {i["name"] for i in self.inputs}:
            nmb = next(i["num_message_bits"] for i in self.inputs if i["name"] == o["proc"])
        src_shape = o["ir_shape"]
        d = {"name": syn, "ir_node": syn, "ir_shape": list(n.type.shape), "lava_shape": lava_shape(n.type.shape),
             "input": o["proc"], "input_ir_shape": src_shape, "latency": o["phi"] + 1, "num_message_bits": nmb,
             "target": target, "delay": int(delay)}
        if n.op == "lava_conv":
            a = n.attrs
            if delay:
                o = self.relay(o, delay, f"{syn}.relay")
                d["input"] = o["proc"]
            self.arrays[f"{syn}/weight"] = conv_weight_to_lava(np.array(n.params["weight"]))
            d.update(type="Conv", input_lava_shape=lava_shape(src_shape),
                     kernel_size=[int(n.params["weight"].shape[3]), int(n.params["weight"].shape[2])],
                     stride=[a["stride"][1], a["stride"][0]], padding=[a["padding"][1], a["padding"][0]],
                     dilation=[a["dilation"][1], a["dilation"][0]], groups=a["groups"])
            flat = False
        else:
            w = np.array(n.params["weight"])
            flat = len(src_shape) == 3
            if flat:
                w = w[:, flatten_perm(tuple(src_shape))]
            eff = lops.dense_effective_weights(w)
            if not np.array_equal(eff, w):
                bad = np.argwhere(eff != w)[0]
                raise IRError(f"Lava's Dense would alter weight {tuple(bad)} ({w[tuple(bad)]} -> "
                              f"{eff[tuple(bad)]}); the quantizer must emit values Lava keeps",
                              where=f"node {syn!r}")
            if delay > MAX_AXON_DELAY:
                o = self.relay(o, delay, f"{syn}.relay")
                d["input"], delay = o["proc"], 0
            self.arrays[f"{syn}/weights"] = np.ascontiguousarray(w)
            d.update(type="DelayDense" if delay else "Dense", flatten_input=flat,
                     input_lava_shape=lava_shape(src_shape), weight_exp=int(n.attrs.get("weight_exp", 0)),
                     sign_mode=lops.sign_mode(w), axon_delay=int(delay))
        self.procs.append(d)
        self.conns.append({"src": o["proc"], "port": o["port"], "dst": syn, "dst_port": "s_in", "flatten": flat})
        return syn, "a_out"

    # host regions -------------------------------------------------------------------------
    def region(self, r):
        if r in self.regions_done:
            return
        self.regions_done.add(r)
        q, P = self.q, self.period
        hosts = [n for n in q.nodes if n.op in lops.HOST_OPS and n.attrs["region"] == r]
        names = {n.name for n in hosts}
        quants = [n for n in q.nodes if n.op == "lava_quant" and n.inputs[0] in names]
        external = []
        for h in hosts:
            for i in h.inputs:
                if i not in names and i not in external:
                    if i not in self.origin:
                        raise UnsupportedOp(f"host node {h.name!r} reads {i!r}, which the chip computes after the "
                                            "host region it belongs to", where=f"node {h.name!r}",
                                            remedy="a host region must not feed the chip values it reads back")
                    external.append(i)
        proc = f"host{r}"
        phi = max([self.origin[i]["phi"] + self.origin[i]["emit"] - 1 for i in external] + [0])
        ports = {}
        for j, i in enumerate(external):
            o = self.origin[i]
            delay = o["k"] * P + phi - (o["phi"] + o["emit"] - 1)
            if delay:
                o = self.relay(o, delay, f"{i}.relay.{proc}")
            self.conns.append({"src": o["proc"], "port": o["port"], "dst": proc, "dst_port": f"in{j}"})
            ports[i] = f"in{j}"
        spec_nodes = []
        for h in hosts:
            gains = []
            for k, i in enumerate(h.inputs):
                g = h.params.get(f"gain{k}")
                if g is not None:
                    self.arrays[f"{proc}/{h.name}/gain{k}"] = np.asarray(g, dtype=np.float64)
                gains.append(None if g is None else f"{proc}/{h.name}/gain{k}")
            params = {}
            for k, v in h.params.items():
                if k.startswith("p_"):
                    self.arrays[f"{proc}/{h.name}/{k}"] = np.asarray(v)
                    params[k[2:]] = f"{proc}/{h.name}/{k}"
            spec_nodes.append({"kind": "host", "name": h.name, "op": h.attrs["op"], "attrs": thaw(h.attrs["attrs"]),
                               "inputs": [ports.get(i, i) for i in h.inputs], "gains": gains, "params": params})
        outputs = []
        for j, qn in enumerate(quants):
            self.arrays[f"{proc}/{qn.name}/gain"] = np.asarray(qn.params["gain"], dtype=np.float64)
            spec_nodes.append({"kind": "quant", "name": qn.name, "inputs": [qn.inputs[0]],
                               "gain": f"{proc}/{qn.name}/gain", "bits": int(qn.attrs.get("bits", 0))})
            outputs.append(qn.name)
            self.origin[qn.name] = self._origin(proc, f"out{j}", phi, 1, qn.type.shape)
            self.recorded.append({"name": qn.name, "proc": proc, "port": f"out{j}", "ir_node": qn.name, "start": phi,
                                  "substeps": 1, "ir_shape": list(qn.type.shape), "what": "host"})
        self.procs.append({"name": proc, "type": "Host", "start": phi, "latency": phi, "period": P, "emit": 1,
                           "nodes": [h.name for h in hosts], "host_ops": [h.attrs["op"] for h in hosts],
                           "in_ports": [{"node": i, "ir_shape": list(self.origin[i]["ir_shape"])} for i in external],
                           "out_ports": [{"node": qn.name, "ir_shape": list(qn.type.shape)} for qn in quants],
                           "spec": {"nodes": spec_nodes, "outputs": outputs,
                                    "in_ir_shapes": [list(self.origin[i]["ir_shape"]) for i in external]}})


def lower(q: Graph) -> tuple[dict, dict]:
    """``(network, arrays)``: processes in topological order, per sample, in Lava layout."""
    lo = _Lowering(q).run()
    procs = lo.procs
    last = [r["start"] + 1 for r in lo.recorded]
    net = {"format": FORMAT, "version": VERSION, "inputs": lo.inputs, "processes": procs,
           "connections": lo.conns, "recorded": lo.recorded,
           "period": lo.period,
           "max_latency": max((p["latency"] for p in procs), default=0),
           "max_start": max(last, default=1) - 1,
           "max_emit": max((p.get("emit", 1) for p in procs), default=1),
           "outputs": list(q.outputs),
           "schedule": (f"{lo.period} Lava steps per physical step; physical step t of a process with start phi "
                        f"updates at Lava step phi + t*{lo.period} (0-based)"),
           "claim": "bit-exact with Lava 0.10.0's fixed-point CPU models (Loihi2SimCfg(select_tag='fixed_pt')); "
                    "these models are not validated against Loihi 2 silicon (lava#322)"}
    return net, lo.arrays


def lava_steps(net: dict, t: int) -> int:
    """Lava steps needed for ``t`` physical steps: the last emission of the last-starting process."""
    return net["max_start"] + (t - 1) * net["period"] + net["max_emit"]


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


def folded_shape(lava_shape_, batch: int) -> tuple:
    return tuple(fold(np.zeros(lava_shape_), batch).shape)


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
    return unfold_data(np.asarray(r)[..., None], batch, ir_shape)[0]


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
    worst = max((arrays[f"{p['name']}/weights"].size * (p.get("axon_delay", 0) + 1) for p in net["processes"]
                 if p["type"] in ("Dense", "DelayDense")), default=1)
    return int(max(1, min(batch, np.floor(np.sqrt(MAX_FOLDED_WEIGHTS / worst)))))


# -- building and running -----------------------------------------------------------------
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


def build(net: dict, arrays: dict, x: dict, steps: int, workdir: Path):
    """Lava processes for ``x`` (name -> ``[T, B, *ir]`` integers) padded to ``steps`` Lava steps.

    Returns ``(procs, aux, files)``: processes by name, recorders/probes, and the .npy files the run will
    write (``("spikes" | state var, name) -> path``).
    """
    from spikec.targets.lava._shim import import_lava
    import_lava()
    from lava.proc.conv.process import Conv
    from lava.proc.dense.process import DelayDense, Dense
    from lava.proc.io.source import RingBuffer
    from lava.proc.lif.process import LIF
    from spikec.targets.lava.procs.process import (HostRegion, Readout, Recorder, Relay, SpikecCSiLIF, SpikecIntFire,
                                                   SpikecLIF, SpikecSiLIF, StateProbe, VarWriter)

    batch = next(iter(x.values())).shape[1]
    t = next(iter(x.values())).shape[0]
    period = net["period"]
    procs, files, aux = {}, {}, []
    for i in net["inputs"]:
        data = np.zeros(folded_shape(i["lava_shape"], batch) + (steps,), dtype=np.int64)
        data[..., :t * period:period] = fold_data(np.asarray(x[i["name"]], dtype=np.int64))
        procs[i["name"]] = RingBuffer(data=data)
    for p in net["processes"]:
        name, typ = p["name"], p["type"]
        if typ == "Conv":
            w = np.tile(arrays[f"{name}/weight"], (batch, 1, 1, 1))
            proc = Conv(weight=w, input_shape=folded_shape(p["input_lava_shape"], batch), stride=tuple(p["stride"]),
                        padding=tuple(p["padding"]), dilation=tuple(p["dilation"]), groups=p["groups"] * batch,
                        num_message_bits=p["num_message_bits"], name=name)
        elif typ in ("Dense", "DelayDense"):
            w = fold_dense(arrays[f"{name}/weights"], batch, p["flatten_input"], p["input_lava_shape"])
            if typ == "Dense":
                proc = Dense(weights=w, weight_exp=p["weight_exp"], num_message_bits=p["num_message_bits"], name=name)
            else:
                proc = DelayDense(weights=w, delays=int(p["axon_delay"]), weight_exp=p["weight_exp"],
                                  num_message_bits=p["num_message_bits"], name=name)
        elif typ == "Relay":
            proc = Relay(shape=folded_shape(p["lava_shape"], batch), delay=p["delay"], name=name)
        elif typ == "Host":
            proc = HostRegion(in_shapes=[folded_shape(lava_shape(s["ir_shape"]), batch) for s in p["in_ports"]],
                              out_shapes=[folded_shape(lava_shape(s["ir_shape"]), batch) for s in p["out_ports"]],
                              spec=_host_spec(p, arrays, batch, t), start=p["start"], period=p["period"], name=name)
        elif typ in POPULATION_TYPES:
            shape = folded_shape(p["lava_shape"], batch)
            sched = {"start": p["start"], "period": p["period"]}
            get = lambda k: fold(arrays[f"{name}/{k}"], batch)
            if typ == "LIF":
                proc = LIF(shape=shape, du=p["du"], dv=p["dv"], vth=p["vth"], bias_mant=np.zeros(shape, np.int64),
                           bias_exp=get("bias_exp"), name=name)
                bias = get("bias_mant")
                if np.any(bias):   # the bias starts with the first input: written after Lava step `start`
                    aux.append(VarWriter(var=proc.bias_mant, step=p["bias_on_after_step"], value=bias))
            elif typ == "OR":
                proc = LIF(shape=shape, du=4095, dv=4095, vth=0, bias_mant=0, bias_exp=0, name=name)
            elif typ == "SpikecLIF":
                extra = {k: get(k) for k in PARAMS[typ] if f"{name}/{k}" in arrays}
                proc = SpikecLIF(shape=shape, bias_mant=get("bias_mant"), bias_exp=get("bias_exp"), reset=p["reset"],
                                 name=name, **sched, **extra)
            elif typ == "SpikecIntFire":
                proc = SpikecIntFire(shape=shape, **{k: get(k) for k in PARAMS[typ] + ("bias_mant", "bias_exp")},
                                     max_spikes=p["max_spikes"], rounding=p["rounding"], unrolled=p["unrolled"],
                                     name=name, **sched)
            elif typ == "SpikecSiLIF":
                proc = SpikecSiLIF(shape=shape, **{k: get(k) for k in PARAMS[typ] + ("bias_mant", "bias_exp")},
                                   name=name, **sched)
            elif typ == "SpikecCSiLIF":
                proc = SpikecCSiLIF(shape=shape, **{k: get(k) for k in PARAMS[typ] + ("bias_mant", "bias_exp")},
                                    name=name, **sched)
            else:
                proc = Readout(shape=shape, bias=get("bias"), name=name, **sched)
            final = p["start"] + (t - 1) * p["period"] + 1   # Lava time_step (1-based) of the last update
            for var in STATE_VARS.get(typ, ()):
                files[(var, name)] = workdir / f"{name}.{var}.npy"
                aux.append(StateProbe(var=getattr(proc, var), step=final, path=files[(var, name)]))
        else:
            raise BadInput(f"unknown process type {typ!r} in the Lava network", where=f"process {name!r}")
        procs[name] = proc
    for c in net["connections"]:
        src = getattr(procs[c["src"]], c["port"])
        dst = getattr(procs[c["dst"]], c["dst_port"])
        (src.flatten() if c.get("flatten") else src).connect(dst)
    for r in net["recorded"]:
        port = getattr(procs[r["proc"]], r["port"])
        files[("spikes", r["name"])] = workdir / f"{r['name']}.out.npy"
        aux.append(Recorder(shape=port.shape, steps=steps, path=files[("spikes", r["name"])]))
        port.connect(aux[-1].a_in)
    return procs, aux, files


def run_lava(net: dict, arrays: dict, x: dict) -> dict:
    """Run the network on ``x`` (name -> ``[T, B, *ir]`` integers) in Loihi2SimCfg(select_tag="fixed_pt").

    Lava runs in a supervised process session (``supervisor.py``): an interrupt or a killed compiler
    leaves no Lava process, shared-memory segment or work directory behind.
    Returns ``{"outputs": name -> [steps, B, *ir], "states": (var, name) -> [B, *ir], "steps", timings}``.
    """
    from spikec.targets.lava import supervisor
    first = next(iter(x.values()))
    t, batch = first.shape[:2]
    steps = lava_steps(net, t)
    chunk = batch_chunk(net, arrays, batch)
    ir = {r["name"]: tuple(r["ir_shape"]) for r in net["recorded"]}
    ir.update({p["name"]: tuple(p["ir_shape"]) for p in net["processes"] if p["type"] in POPULATION_TYPES})
    outputs, states = {}, {}
    with supervisor.workdir("spikec-lava-") as workdir:
        (workdir / "network.json").write_text(json.dumps(net))
        with open(workdir / "params.npz", "wb") as f:
            np.savez(f, **arrays)
        with open(workdir / "inputs.npz", "wb") as f:
            np.savez(f, *[np.asarray(v) for v in x.values()])   # positional: any input name is safe
        r = supervisor.run("network", workdir, {"steps": steps, "chunk": chunk, "inputs": list(x)})
        failed = sorted((workdir / "errors").iterdir())   # guarded ProcessModels' tracebacks (ERRORS_ENV)
        if failed:
            raise IRError("a Lava process failed during the run:\n" + "\n".join(f.read_text() for f in failed),
                          where=f"Lava process {failed[0].name.split('.')[0]!r}",
                          remedy="this is a compiler bug: report it with the model")
        for c in r["chunks"]:
            for what, name, rel in c["files"]:
                data = np.load(workdir / rel, allow_pickle=False)
                if what == "spikes":
                    outputs.setdefault(name, []).append(unfold_data(data, c["batch"], ir[name]))
                else:
                    states.setdefault((what, name), []).append(unfold_state(data, c["batch"], ir[name]))
    return {"outputs": {k: np.concatenate(v, axis=1) for k, v in outputs.items()},
            "states": {k: np.concatenate(v, axis=0) for k, v in states.items()},
            "steps": steps, "batch_chunk": chunk, "chunks": -(-batch // chunk),
            "build_seconds": round(r["build_seconds"], 3), "sim_seconds": round(r["sim_seconds"], 3)}


# -- comparison ---------------------------------------------------------------------------
def schedule_index(start: int, period: int, substeps: int, n: int) -> np.ndarray:
    """Lava step (0-based) of each of the ``n`` reference steps of a value with ``substeps`` per physical step."""
    j = np.arange(n)
    return start + (j // substeps) * period + (j % substeps)


def compare(net: dict, trace, lava: dict, steps: int) -> dict:
    """Bit-for-bit: every spike, graded payload, read-out and host value at its Lava step, silence at every
    other Lava step up to the last compared one, and the final states of every neuron population."""
    mismatches, per_node = [], {}
    counts = {"spikes_compared": 0, "graded_payloads_compared": 0, "values_compared": 0, "host_values_compared": 0,
              "states_compared": 0, "pre_latency_values_checked": 0}
    period = net["period"]

    def note(node, what, exp, got, lava_steps=None, state=False):
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
                m.update(step=pos[0], lava_step=int(lava_steps[pos[0]]) + 1, batch=pos[1], index=list(pos[2:]))
            mismatches.append(m)
        return k

    for r in net["recorded"]:
        name = r["name"]
        rec = lava["outputs"][name]
        exp = trace.values[r["ir_node"]].astype(np.int64)
        idx = schedule_index(r["start"], period, r["substeps"], exp.shape[0])
        got = rec[idx]
        what = {"spikes": "spikes", "payload": "payload", "output": "output", "host": "host_value"}[r["what"]]
        note(name, what, exp, got, idx)
        key = {"spikes": "spikes_compared", "payload": "spikes_compared", "output": "values_compared",
               "host": "values_compared"}[r["what"]]
        counts[key] += exp.size
        if r["what"] == "payload":
            counts["graded_payloads_compared"] += exp.size
        if r["what"] == "host":
            counts["host_values_compared"] += exp.size
        off = np.setdiff1d(np.arange(int(idx.max(initial=-1)) + 1), idx)   # before the last compared step only
        if off.size:
            note(name, "off_schedule", np.zeros_like(rec[off]), rec[off], off)
            counts["pre_latency_values_checked"] += rec[off].size
    for p in net["processes"]:
        for var in STATE_VARS.get(p["type"], ()):
            exp_s = trace.values[f"{p['name']}.{var}"][steps - 1].astype(np.int64)
            note(p["name"], f"final_{var}", exp_s, lava["states"][(var, p["name"])], state=True)
            counts["states_compared"] += exp_s.size
    order = []   # processes in order, a host's outputs right after it
    for p in net["processes"]:
        order += [p["name"]] + [o["node"] for o in p.get("out_ports", ())]
    first = next((n for n in order if n in per_node), None)
    syn = {p["name"]: p.get("input") for p in net["processes"]}
    return {"bit_exact": not per_node, "steps_compared": steps, **counts,
            "mismatch_counts": per_node,
            "first_divergent_layer": None if first is None else {"population": first, "synapse": syn.get(first)},
            "first_mismatches": mismatches}
