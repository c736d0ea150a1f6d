"""Lower the integer reference graph to a Lava process network, as plain data.

The network is written as ``network.json`` + ``params.npz`` (per sample, in Lava's layouts, ``layout.py``)
so the artifact that is verified is the artifact that is shipped; ``build.py`` turns that data into Lava
processes. The traps of targets.md handled here:

- Dense: mixed-sign weights were already emitted as ``2 w`` with ``weight_exp = -1`` by the quantizer
  (Lava truncates their LSB); here a check proves Lava's clip/truncate leaves every weight unchanged.
- Conv: kernel/stride/padding/dilation are given in (W, H) order, the kernel flipped and transposed.
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
"""
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from spikec.ir.errors import BadInput, IRError, UnsupportedOp
from spikec.ir.graph import Graph, Node, TensorType, thaw
from spikec.targets.lava import current_bias, max_tree, ops as lops, standard_integrator, standard_readout, unit_views
from spikec.targets.lava.fixed_point import PAYLOAD_BITS
from spikec.targets.lava.layout import conv_weight_to_lava, flatten_perm, lava_shape, per_neuron

FORMAT, VERSION = "spikec-lava-network", 2
MAX_AXON_DELAY = 62          # DelayDense on Loihi 2: delays 0..62
POPULATION_TYPES = ("LIF", "SpikecLIF", "SpikecIntFire", "SpikecSiLIF", "SpikecCSiLIF", "OR", "Readout", "SpikecAND",
                    "AND", "LIFReadout")
STATE_VARS = {"LIF": ("v", "u"), "SpikecLIF": ("v", "u"), "SpikecIntFire": ("v", "u"), "SpikecSiLIF": ("v",),
              "SpikecCSiLIF": ("v", "w")}
PARAMS = {"SpikecLIF": ("du", "dv", "vth", "v_reset", "bias_u"), "SpikecIntFire": ("du", "dv", "vth"),
          "SpikecSiLIF": ("decay", "vth", "kappa"), "SpikecCSiLIF": ("a_re", "a_im", "vth", "kappa")}


@dataclass(frozen=True)
class _Lowered:
    """The network so far, filled in place while the integer graph is walked in order."""
    q: Graph
    period: int
    arrays: dict = field(default_factory=dict)
    procs: list = field(default_factory=list)
    conns: list = field(default_factory=list)
    inputs: list = field(default_factory=list)
    recorded: list = field(default_factory=list)
    origin: dict = field(default_factory=dict)   # int node -> {proc, port, phi, emit, k (physical delay), ...}
    regions_done: set = field(default_factory=set)
    reshaped: set = field(default_factory=set)   # flat outputs sent into a (W, H, C) population (max_tree.py)


def lower(q: Graph) -> tuple[dict, dict]:
    """``(network, arrays)``: processes in topological order, per sample, in Lava layout."""
    period = max([POPULATIONS[n.op].emit(n) for n in q.nodes if n.op in POPULATIONS] + [1])
    lo = _Lowered(q, period)
    for n in q.nodes:
        _lower_node(lo, n)
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


def read_network_json(directory: Path) -> dict:
    """``directory/network.json`` as a dict; a named BadInput for a file that does not parse or is no document."""
    path = Path(directory) / "network.json"
    try:
        net = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError) as e:  # RecursionError: JSON nested too deep to parse
        raise BadInput(f"cannot read the Lava network {path}: {type(e).__name__}: {e}",
                       remedy="point at an OUTDIR written by `spikec compile --target lava`") from e
    if not isinstance(net, dict):
        raise BadInput(f"{path} is a JSON {type(net).__name__}, not a Lava network document",
                       remedy="point at an OUTDIR written by `spikec compile --target lava`")
    return net


def load_network(directory: Path, check_format: bool = True) -> tuple[dict, dict]:
    """``(network.json, params.npz arrays)`` of ``directory`` (a TTFS network is of its own format: unchecked)."""
    directory = Path(directory)
    net = read_network_json(directory)
    try:
        with np.load(directory / "params.npz", allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError) as e:
        raise BadInput(f"cannot read the Lava network in {directory}: {e}",
                       remedy="point at an OUTDIR written by `spikec compile --target lava`") from e
    if check_format and (net.get("format") != FORMAT or net.get("version") != VERSION):
        raise BadInput(f"{directory / 'network.json'} is not a {FORMAT} v{VERSION} document")
    return net, arrays


# -- values ----------------------------------------------------------------------------------
def _origin(proc, port, phi, emit, ir_shape, **kw) -> dict:
    return {"proc": proc, "port": port, "phi": int(phi), "emit": int(emit), "k": 0, "ir_shape": list(ir_shape),
            "flat": False, **kw}


def _lower_node(lo: _Lowered, n: Node) -> None:
    """Lower integer node ``n`` through ``LOWERINGS`` (keyed by its op)."""
    if n.op not in LOWERINGS:
        raise IRError(f"op {n.op} has no Lava process", where=f"node {n.name!r}")
    LOWERINGS[n.op](lo, n)


def _lower_input(lo: _Lowered, n: Node) -> None:
    nmb = 0 if n.type.kind == "binary" else PAYLOAD_BITS if n.type.kind == "real" else \
        max(1, int(n.type.ceiling).bit_length())   # real: graded spikes round(g x) (assemble.py)
    lo.inputs.append({"name": n.name, "ir_shape": list(n.type.shape), "lava_shape": lava_shape(n.type.shape),
                      "num_message_bits": nmb})
    lo.origin[n.name] = _origin(n.name, "s_out", 0, 1, n.type.shape, nmb=nmb)


def _lower_flatten(lo: _Lowered, n: Node) -> None:
    if n.inputs[0] in lo.origin:
        lo.origin[n.name] = dict(lo.origin[n.inputs[0]], flat=True)


def _lower_delay(lo: _Lowered, n: Node) -> None:
    if n.inputs[0] in lo.origin:
        o = lo.origin[n.inputs[0]]
        lo.origin[n.name] = dict(o, k=o["k"] + int(n.attrs["steps"]))


def _lower_count(lo: _Lowered, n: Node) -> None:
    if n.inputs[0] in lo.origin:   # an unrolled neuron's count, read by a host; else a term of a population
        lo.origin[n.name] = dict(lo.origin[n.inputs[0]], count=True)


def _lower_term(lo: _Lowered, n: Node) -> None:
    """A term of a population (a synapse, a sum): lowered with the population."""


def _lower_population_node(lo: _Lowered, n: Node) -> None:
    output = lops.output_of(n)
    if lops.primary(n):
        _lower_population(lo, n)
        pop = lo.procs[-1]
    else:
        pop = next(p for p in lo.procs if p["name"] == _owner(lo.q, n))
    if output == "membrane":
        lo.origin[n.name] = _origin(pop["name"], "m_out", pop["start"], 1, n.type.shape)
    in_u = output == "u" and pop.get("membrane_in_u") and pop["type"] == "LIF"   # current_reset.py: the membrane
    if (output in STATE_PORTS or in_u) and n.name in lo.q.outputs:   # a state read as a graph output, every step
        monitored = (pop.get("integrator") and n.name == pop["name"]) or in_u   # Lava's LIF: read by Lava's Monitor
        if pop["type"] != "SpikecLIF" and not monitored:
            raise IRError(f"the state of a {pop['type']} process is not recorded", where=f"node {n.name!r}")
        port = "u" if in_u else "v" if monitored else STATE_PORTS[output]
        lo.recorded.append({"name": n.name, "proc": pop["name"], "port": port,
                            "ir_node": n.name, "start": pop["start"], "substeps": 1, "ir_shape": list(n.type.shape),
                            "what": "state", **({"via": "monitor"} if monitored else {})})
    # else: a state read-out twin (v, u, flags), recorded by the reference only


STATE_PORTS = {"membrane": "m_out", "v": "v_out"}   # SpikecLIF's per-step state ports (pre-reset v, post-step v)


def _lower_host(lo: _Lowered, n: Node) -> None:
    _lower_region(lo, n.attrs["region"])


def _lower_quant(lo: _Lowered, n: Node) -> None:
    if n.name not in lo.origin:
        raise IRError("a lava_quant node outside a host region", where=f"node {n.name!r}")


def _owner(q: Graph, twin: Node) -> str:
    return next(m.name for m in q.nodes if m.op == twin.op and m.inputs == twin.inputs and lops.primary(m))


def _terms(lo: _Lowered, name: str) -> list:
    """``[("syn", node) | ("direct", node)]`` summed into a population's input port (``TERMS``, by op)."""
    n = lo.q.node(name)
    expand = TERMS.get(n.op)
    found = expand(lo, n) if expand is not None else None
    if found is not None:
        return found
    if name in lo.origin:
        return [("direct", name)]
    raise IRError(f"{n.op} node {name!r} cannot feed a population's input port", where=f"node {name!r}")


def _syn_origin(lo: _Lowered, syn: str) -> dict:
    src = lo.q.node(syn).inputs[0]
    if src not in lo.origin:
        raise IRError(f"synapse {syn!r} reads {src!r}, which no process sends", where=f"node {syn!r}")
    return lo.origin[src]


# -- populations -------------------------------------------------------------------------------
def _lower_population(lo: _Lowered, n: Node) -> None:
    spec = POPULATIONS[n.op]
    terms = _terms(lo, n.inputs[0])
    phi, emit, names = _lower_inputs(lo, terms, n.name, spec.stateless)
    emit = emit if spec.stateless else spec.emit(n)
    P, shape = lo.period, n.type.shape
    base = {"name": n.name, "ir_node": n.name, "ir_shape": list(shape), "lava_shape": lava_shape(shape),
            "inputs": [src for src, _ in names], "input": names[0][0], "start": phi, "latency": phi, "period": P,
            "emit": emit, "substeps": n.type.substeps}
    record = spec.process(n, base, lo.arrays)
    if spec.readout:   # Lava's LIF where exact on every input, else spikec's Readout (standard_readout.py)
        record = standard_readout.choose(lo.q, n, record, terms)
    elif n.op == "lava_lif" and n.attrs.get("fire") == "never":   # a leaky integrator (standard_integrator.py)
        record = standard_integrator.choose(lo.q, n, record, standard_readout.bound(lo.q, n, terms), lo.arrays)
    if record["type"] == "LIF" and "bias_u" in n.params:   # its current bias through Dense (current_bias.py)
        bias = [(syn, "a_out") for syn in current_bias.add(lo, n, record)]
        names += bias
        record["inputs"] = record["inputs"] + [syn for syn, _ in bias]
    lo.procs.append(record)
    for src, port in names:
        lo.conns.append({"src": src, "port": port, "dst": n.name, "dst_port": "a_in",
                         **({"reshape": True} if src in record.get("reshape_inputs", ()) or src in lo.reshaped
                            else {})})
    record.pop("reshape_inputs", None)
    lo.origin[n.name] = _origin(n.name, "s_out", phi, emit, shape)
    if n.attrs.get("recurrent"):
        _lower_recurrence(lo, n)
    if "reset_weight" in n.params:   # a subtract reset with the membrane in u (current_reset.py)
        _lower_reset_synapse(lo, n)
    if lops.output_of(n) != "spikes":
        return   # a read-out integrator: its state is its output (recorded by _lower_population_node)
    monitored = record["type"] == "LIFReadout"   # its current u, read by Lava's Monitor; the host adds the bias
    lo.recorded.append({"name": n.name, "proc": n.name, "port": "u" if monitored else "s_out", "ir_node": n.name,
                        "start": phi, "substeps": n.type.substeps, "ir_shape": list(shape),
                        "what": "output" if spec.readout else "payload" if n.type.kind == "integer" else "spikes",
                        **({"via": "monitor"} if monitored else {})})


def _lower_inputs(lo: _Lowered, terms: list, target: str, stateless: bool) -> tuple[int, int, list]:
    """The synapses and direct streams (``terms``) into ``target``'s input port, each arriving at ``target``'s
    first update (earlier ones delayed): ``(phi, the emission width of a stateless one's input, [(process, port)])``."""
    P, origins = lo.period, [_syn_origin(lo, t) if kind == "syn" else lo.origin[t] for kind, t in terms]
    lat = [1 if kind == "syn" else 0 for kind, _ in terms]
    if stateless:
        (o,) = origins
        phi, emit = o["phi"] + 1, o["emit"]
    else:
        phi, emit = max(o["phi"] + l + o["emit"] - 1 for o, l in zip(origins, lat)), 1
    names = []
    for (kind, t), o, l in zip(terms, origins, lat):
        delay = o["k"] * P + (0 if stateless else phi - (o["phi"] + l + o["emit"] - 1))
        if kind == "syn":
            names.append(_lower_synapse(lo, t, o, delay, target))
        else:
            names.append(_direct(lo, t, o, delay, target))
    return phi, emit, names


def _lower_maxpool(lo: _Lowered, n: Node) -> None:
    """A max pool of integer sums before a neuron (max_tree.py): its synapses into a Delta, the tree after it; the
    neuron reads the tree's Sigma through an identity Sparse."""
    if lo.period != 1:
        raise UnsupportedOp("a max pool of synaptic sums runs on chip only outside a sub-step schedule",
                            where=f"node {n.name!r}", remedy="pool the neuron's spikes instead (after the neuron)")
    in_shape = lo.q.node(n.inputs[0]).type.shape
    delta = f"{n.name}.delta"
    phi, _, names = _lower_inputs(lo, _terms(lo, n.inputs[0]), delta, False)
    tree = max_tree.tree_of(n, in_shape)
    procs, conns = max_tree.records(n.name, tree, in_shape, n.type.shape, phi, lo.period, n.inputs[0])
    procs[0]["inputs"] = [src for src, _ in names]
    max_tree.save(lo.arrays, n.name, tree)
    lo.procs.extend(procs)
    lo.conns.extend([{"src": src, "port": port, "dst": delta, "dst_port": "a_in"} for src, port in names] + conns)
    lo.origin[n.name] = _origin(procs[-1]["name"], "a_out", procs[-1]["latency"], 1, n.type.shape)
    lo.reshaped.add(procs[-1]["name"])   # its flat a_out into the (W, H, C) neuron


def _lif_process(n: Node, base: dict, arrays: dict) -> dict:
    """The process record of population ``n`` (schedule fields in ``base``); its parameter arrays to ``arrays``."""
    shape = n.type.shape
    kind = n.attrs.get("process", "SpikecLIF")
    if kind == "LIF" and base["period"] > 1:
        kind = "SpikecLIF"   # Lava's LIF updates every Lava step: a sub-step schedule needs the custom one
    why = current_bias.refusal(n, base["start"]) if kind == "LIF" and "bias_u" in n.params else None
    if why is not None:   # no exact bias Dense: the custom process adds bias_u itself
        kind, base = "SpikecLIF", dict(base, current_bias_refused=why)
    d = dict(base, type=kind, reset=n.attrs["reset"], fire=n.attrs.get("fire", "gt"),
             bias_on_after_step=base["start"])
    if n.attrs.get("membrane_in_u_refused"):   # current_reset.py: why it is not Lava's LIF (the chip-blocker line)
        d["membrane_in_u_refused"] = n.attrs["membrane_in_u_refused"]
    for k in ("bias_mant", "bias_exp"):
        arrays[f"{n.name}/{k}"] = per_neuron(n.params[k], shape)
    if kind == "LIF":
        if any(np.asarray(n.params[k]).ndim for k in ("du", "dv", "vth")) or "v_reset" in n.params \
                or n.attrs["reset"] != "zero" or n.attrs.get("fire", "gt") != "gt":
            raise IRError("Lava's LIF needs scalar du, dv, vth, a hard reset to 0 and strict firing (v > vth << 6)",
                          where=f"node {n.name!r}")
        d.update(du=int(n.params["du"]), dv=int(n.params["dv"]), vth=int(n.params["vth"]))
        if n.attrs.get("membrane_in_u"):   # current_reset.py: its membrane is u, read as it is (no act shift)
            d.update(membrane_in_u=n.attrs["membrane_in_u"], act_shift=0)
        if n.attrs.get("ladder"):   # count_ladder.py: D binary copies of an integer-firing neuron
            d["ladder"] = int(n.attrs["ladder"])
    else:
        for k in PARAMS["SpikecLIF"]:
            if k in n.params:
                arrays[f"{n.name}/{k}"] = per_neuron(n.params[k], shape)
    return d


def _and_process(base: dict) -> dict:
    """AND neurons: Lava's own LIF (type ``AND``, ``and_neurons.AND_LIF``) when every Lava step is a physical step;
    under a sub-step schedule (P > 1) Lava's LIF would update between the period's inputs, so SpikecAND sums them."""
    if base["period"] > 1:
        return dict(base, type="SpikecAND")
    from spikec.targets.lava.and_neurons import AND_LIF
    return dict(base, type="AND", **AND_LIF)


def _intfire_process(n: Node, base: dict, arrays: dict) -> dict:
    d = dict(base, type="SpikecIntFire", max_spikes=int(n.attrs["max_spikes"]), rounding=n.attrs["rounding"],
             unrolled=bool(n.attrs.get("unrolled")))
    if n.attrs.get("count_ladder_refused"):   # count_ladder.py: why it is no ladder of Lava LIFs (the chip blocker)
        d["count_ladder_refused"] = n.attrs["count_ladder_refused"]
    for k in PARAMS["SpikecIntFire"] + ("bias_mant", "bias_exp") + (("v_min",) if "v_min" in n.params else ()):
        arrays[f"{n.name}/{k}"] = per_neuron(n.params[k], n.type.shape)
    return d


def _custom_process(kind: str):
    """A custom neuron process ``kind`` whose parameters are ``PARAMS[kind]`` and a bias mantissa/exponent."""
    def process(n: Node, base: dict, arrays: dict) -> dict:
        for k in PARAMS[kind] + ("bias_mant", "bias_exp"):
            arrays[f"{n.name}/{k}"] = per_neuron(n.params[k], n.type.shape)
        return dict(base, type=kind)
    return process


def _readout_process(n: Node, base: dict, arrays: dict) -> dict:
    arrays[f"{n.name}/bias"] = per_neuron(n.params["bias"], n.type.shape)
    return dict(base, type="Readout")


@dataclass(frozen=True)
class PopulationLowering:
    """How an integer population op becomes a Lava process.

    ``process(n, base, arrays)``: its process record (schedule fields in ``base``), parameter arrays to ``arrays``;
    ``emit(n)``: Lava steps its output of one physical step occupies (D for an unrolled integer neuron);
    ``stateless``: starts one Lava step after its single source, keeping its emission width (an OR layer);
    ``readout``: what it records is a real-valued output, not spikes."""
    process: Callable
    emit: Callable = lambda n: 1
    stateless: bool = False
    readout: bool = False


POPULATIONS: dict[str, PopulationLowering] = {
    "lava_lif": PopulationLowering(_lif_process),
    "lava_intfire": PopulationLowering(_intfire_process,
                                       emit=lambda n: int(n.attrs["max_spikes"]) if n.attrs.get("unrolled") else 1),
    "lava_silif": PopulationLowering(_custom_process("SpikecSiLIF")),
    "lava_csilif": PopulationLowering(_custom_process("SpikecCSiLIF")),
    "lava_or": PopulationLowering(lambda n, base, arrays: dict(base, type="OR"), stateless=True),
    "lava_readout": PopulationLowering(_readout_process, readout=True),
    "lava_and": PopulationLowering(lambda n, base, arrays: _and_process(base)),   # products.py
}
POPULATION_OPS = tuple(POPULATIONS)


# -- synapses and relays --------------------------------------------------------------------------
def _relay(lo: _Lowered, o: dict, delay: int, name: str) -> dict:
    """A Relay delaying origin ``o`` by ``delay`` Lava steps; returns the relay's origin."""
    lo.procs.append({"name": name, "type": "Relay", "delay": int(delay), "ir_shape": o["ir_shape"],
                     "lava_shape": lava_shape(o["ir_shape"]), "latency": o["phi"]})
    lo.conns.append({"src": o["proc"], "port": o["port"], "dst": name, "dst_port": "s_in"})
    return dict(o, proc=name, port="s_out")


def _direct(lo: _Lowered, t: str, o: dict, delay: int, target: str) -> tuple:
    """A value sent straight into ``target``'s input port (a host value): ``(process, port)``."""
    if delay:
        o = _relay(lo, o, delay, f"{t}.relay.{target}")
    return o["proc"], o["port"]


def _lower_synapse(lo: _Lowered, syn: str, o: dict, delay: int, target: str) -> tuple:
    """The Conv / Dense / DelayDense process of synapse ``syn`` (a Relay first when needed): ``(process, port)``."""
    n = lo.q.node(syn)
    nmb = n.attrs.get("num_message_bits", 0)
    if o["proc"] in {i["name"] for i in lo.inputs}:
        nmb = next(i["num_message_bits"] for i in lo.inputs if i["name"] == o["proc"])
    src_shape = o["ir_shape"]
    d = {"name": syn, "ir_node": syn, "ir_shape": list(n.type.shape), "lava_shape": lava_shape(n.type.shape),
         "input": o["proc"], "input_ir_shape": src_shape, "latency": o["phi"] + 1, "num_message_bits": nmb,
         "target": target, "delay": int(delay)}
    o, flat = SYNAPSES[n.op](lo, n, o, d, delay)
    lo.procs.append(d)
    lo.conns.append({"src": o["proc"], "port": o["port"], "dst": syn, "dst_port": "s_in", "flatten": flat})
    return syn, "a_out"


def _conv_synapse(lo: _Lowered, n: Node, o: dict, d: dict, delay: int) -> tuple[dict, bool]:
    """A Conv process (delayed by a Relay before it): fills ``d``; ``(the origin it reads, flattened?)``."""
    a, syn = n.attrs, n.name
    if delay:
        o = _relay(lo, o, delay, f"{syn}.relay")
        d["input"] = o["proc"]
    lo.arrays[f"{syn}/weight"] = conv_weight_to_lava(np.array(n.params["weight"]))
    d.update(type="Conv", input_lava_shape=lava_shape(d["input_ir_shape"]),
             kernel_size=[int(n.params["weight"].shape[3]), int(n.params["weight"].shape[2])],
             stride=[a["stride"][1], a["stride"][0]], padding=[a["padding"][1], a["padding"][0]],
             dilation=[a["dilation"][1], a["dilation"][0]], groups=a["groups"])
    return o, False


def _dense_synapse(lo: _Lowered, n: Node, o: dict, d: dict, delay: int) -> tuple[dict, bool]:
    """A Dense, or a DelayDense with axon delays (a Relay first beyond them): fills ``d``."""
    syn = n.name
    w, flat = _dense_weights(n, d["input_ir_shape"])
    if delay > MAX_AXON_DELAY:
        o = _relay(lo, o, delay, f"{syn}.relay")
        d["input"], delay = o["proc"], 0
    lo.arrays[f"{syn}/weights"] = np.ascontiguousarray(w)
    d.update(type="DelayDense" if delay else "Dense", flatten_input=flat,
             input_lava_shape=lava_shape(d["input_ir_shape"]), weight_exp=int(n.attrs.get("weight_exp", 0)),
             sign_mode=lops.sign_mode(w), axon_delay=int(delay))
    return o, flat


def _lower_recurrence(lo: _Lowered, n: Node) -> None:
    """A recurrent population's self-synapse: a Dense / Conv from its ``s_out`` back to its own ``a_in`` (a cycle:
    build.py connects ports once every process exists). Lava's Dense and Conv send, at Lava step m, the sum of the
    spikes they received at m - 1 (send before receive: no deadlock), so the spikes of an update at Lava step
    phi + t P reach the population inside its next window and count at physical step t + 1: the integer
    reference's ``a_t = x_t + rec(s_{t-1})`` for any period P, with no relay."""
    name, shape = f"{n.name}.recurrent", n.type.shape
    if n.attrs["recurrent"] == "dense":
        syn = Node(name, "lava_dense", (n.name,), TensorType(shape),
                   {"weight_exp": int(n.attrs.get("rec_weight_exp", 0))}, {"weight": n.params["rec_weight"]})
    else:
        pad = list(n.attrs["rec_padding"])
        syn = Node(name, "lava_conv", (n.name,), TensorType(shape),
                   {"stride": [1, 1], "padding": pad, "dilation": [1, 1], "groups": 1},
                   {"weight": n.params["rec_weight"]})
    o = lo.origin[n.name]
    d = {"name": name, "ir_node": n.name, "ir_shape": list(shape), "lava_shape": lava_shape(shape), "input": n.name,
         "input_ir_shape": list(shape), "latency": o["phi"] + 1, "num_message_bits": 0, "target": n.name,
         "delay": 0, "recurrent": True}
    SYNAPSES[syn.op](lo, syn, o, d, 0)
    lo.procs.append(d)
    lo.conns.append({"src": n.name, "port": "s_out", "dst": name, "dst_port": "s_in", "flatten": False})
    lo.conns.append({"src": name, "port": "a_out", "dst": n.name, "dst_port": "a_in"})


def _lower_reset_synapse(lo: _Lowered, n: Node) -> None:
    """A subtract reset's self-synapse (current_reset.py): Lava's Sparse with one weight on its diagonal, from the
    population's flattened ``s_out`` back to its ``a_in``. With one weight for every neuron, the identity is the same
    in any order of the folded Lava layout, so build.py makes it the identity of the folded size. A count ladder's
    (count_ladder.py) joins the D copies of each neuron: ``I ⊗ ones(D, D) ⊗ I_inner`` in Lava's folded order (``inner``
    the channels of a (W, H, B D C) population, the neurons of a (B D N) vector)."""
    name, shape, o = f"{n.name}.reset", n.type.shape, lo.origin[n.name]
    w = np.asarray(n.params["reset_weight"], dtype=np.int64)
    lo.arrays[f"{name}/weight"] = w
    lo.procs.append({"name": name, "type": "Sparse", "ir_node": n.name, "ir_shape": list(shape),
                     "lava_shape": lava_shape(shape), "input": n.name, "input_ir_shape": list(shape),
                     "latency": o["phi"] + 1, "num_message_bits": 0, "target": n.name, "delay": 0,
                     "recurrent": True, "diagonal": True, "weight_exp": int(n.attrs.get("reset_weight_exp", 0)),
                     **({"ladder": int(n.attrs["ladder"]), "ladder_inner": int(shape[0]) // int(n.attrs["ladder"])}
                        if n.attrs.get("ladder") else {}),
                     "sign_mode": "inhibitory" if w < 0 else "excitatory"})
    lo.conns.append({"src": n.name, "port": "s_out", "dst": name, "dst_port": "s_in", "flatten": True})
    lo.conns.append({"src": name, "port": "a_out", "dst": n.name, "dst_port": "a_in", "reshape": True})


# the integer synapse ops, each with its Lava process
SYNAPSES: dict[str, Callable] = {"lava_conv": _conv_synapse, "lava_dense": _dense_synapse}
# what each op contributes to a population's input port: more terms, or itself as a synapse (else a direct value)
TERMS: dict[str, Callable] = {
    "add": lambda lo, n: _terms(lo, n.inputs[0]) + _terms(lo, n.inputs[1]),
    "substep_sum": lambda lo, n: None if n.name in lo.origin else _terms(lo, n.inputs[0]),
    **{op: (lambda lo, n: [("syn", n.name)]) for op in SYNAPSES}}


def _dense_weights(n: Node, src_shape) -> tuple[np.ndarray, bool]:
    """``(weights in Lava's column order, whether the source is flattened)``; refuses weights Lava would alter."""
    w = np.array(n.params["weight"])
    flat = len(src_shape) == 3
    if flat:
        w = w[:, flatten_perm(tuple(src_shape))]
    eff = lops.dense_effective_weights(w)
    if not np.array_equal(eff, w):
        bad = np.argwhere(eff != w)[0]
        raise IRError(f"Lava's Dense would alter weight {tuple(bad)} ({w[tuple(bad)]} -> "
                      f"{eff[tuple(bad)]}); the quantizer must emit values Lava keeps",
                      where=f"node {n.name!r}")
    return w, flat


# -- host regions ---------------------------------------------------------------------------------
def _lower_region(lo: _Lowered, r: int) -> None:
    """Host region ``r`` as one Host process: its chip inputs (relayed to arrive together) and outputs."""
    if r in lo.regions_done:
        return
    lo.regions_done.add(r)
    q, P = lo.q, lo.period
    hosts = [n for n in q.nodes if n.op in lops.HOST_OPS and n.attrs["region"] == r]
    names = {n.name for n in hosts}
    quants = [n for n in q.nodes if n.op == "lava_quant" and n.inputs[0] in names]
    external = _region_inputs(lo, hosts, names)
    proc = f"host{r}"
    phi = max([lo.origin[i]["phi"] + lo.origin[i]["emit"] - 1 for i in external] + [0])
    ports = {}
    for j, i in enumerate(external):
        o = lo.origin[i]
        delay = o["k"] * P + phi - (o["phi"] + o["emit"] - 1)
        if delay:
            o = _relay(lo, o, delay, f"{i}.relay.{proc}")
        lo.conns.append({"src": o["proc"], "port": o["port"], "dst": proc, "dst_port": f"in{j}"})
        ports[i] = f"in{j}"
    spec_nodes = _host_spec_nodes(proc, hosts, ports, lo.arrays)
    outputs = []
    for j, qn in enumerate(quants):
        lo.arrays[f"{proc}/{qn.name}/gain"] = np.asarray(qn.params["gain"], dtype=np.float64)
        spec_nodes.append({"kind": "quant", "name": qn.name, "inputs": [qn.inputs[0]],
                           "gain": f"{proc}/{qn.name}/gain", "bits": int(qn.attrs.get("bits", 0))})
        outputs.append(qn.name)
        lo.origin[qn.name] = _origin(proc, f"out{j}", phi, 1, qn.type.shape)
        lo.recorded.append({"name": qn.name, "proc": proc, "port": f"out{j}", "ir_node": qn.name, "start": phi,
                            "substeps": 1, "ir_shape": list(qn.type.shape), "what": "host"})
    lo.procs.append({"name": proc, "type": "Host", "start": phi, "latency": phi, "period": P, "emit": 1,
                     "nodes": [h.name for h in hosts], "host_ops": [h.attrs["op"] for h in hosts],
                     "in_ports": [{"node": i, "ir_shape": list(lo.origin[i]["ir_shape"])} for i in external],
                     "out_ports": [{"node": qn.name, "ir_shape": list(qn.type.shape)} for qn in quants],
                     "spec": {"nodes": spec_nodes, "outputs": outputs,
                              "in_ir_shapes": [list(lo.origin[i]["ir_shape"]) for i in external]}})


def _region_inputs(lo: _Lowered, hosts: list, names: set) -> list:
    """The chip values a host region reads, in order; refuses one the chip computes only later."""
    external = []
    for h in hosts:
        for i in h.inputs:
            if i not in names and i not in external:
                if i not in lo.origin:
                    raise UnsupportedOp(f"host node {h.name!r} reads {i!r}, which the chip computes after the "
                                        "host region it belongs to", where=f"node {h.name!r}",
                                        remedy="a host region must not feed the chip values it reads back")
                external.append(i)
    return external


def _host_spec_nodes(proc: str, hosts: list, ports: dict, arrays: dict) -> list:
    """The host ops of a region as the Host process's spec; their gains and parameters to ``arrays``."""
    spec_nodes = []
    for h in hosts:
        gains = []
        for k, i in enumerate(h.inputs):
            g = h.params.get(f"gain{k}")
            if g is not None:
                arrays[f"{proc}/{h.name}/gain{k}"] = np.asarray(g, dtype=np.float64)
            gains.append(None if g is None else f"{proc}/{h.name}/gain{k}")
        params = {}
        for k, v in h.params.items():
            if k.startswith("p_"):
                arrays[f"{proc}/{h.name}/{k}"] = np.asarray(v)
                params[k[2:]] = f"{proc}/{h.name}/{k}"
        spec_nodes.append({"kind": "host", "name": h.name, "op": h.attrs["op"], "attrs": thaw(h.attrs["attrs"]),
                           "inputs": [ports.get(i, i) for i in h.inputs], "gains": gains, "params": params})
    return spec_nodes


# the integer graph's ops, each with its lowering: adding an op is adding its entry here
LOWERINGS: dict[str, Callable] = {
    "input": _lower_input, "flatten": _lower_flatten, "delay": _lower_delay, "substep_sum": _lower_count,
    "add": _lower_term, "lava_quant": _lower_quant, "maxpool2d": _lower_maxpool, "reshape": unit_views.lower_view,
    **{op: _lower_term for op in SYNAPSES}, **{op: _lower_population_node for op in POPULATIONS},
    **{op: _lower_host for op in lops.HOST_OPS}}
