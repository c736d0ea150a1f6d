"""Assemble the integer reference graph from the mapped populations at their current VTH / gain.

Each population becomes its streams (``lava_dense`` / ``lava_conv`` with integer weights, delays, sub-step
sums), their sum, and its integer node (a neuron, ``lava_or``, or ``lava_readout`` with one scale ``s`` for
the whole layer, ``y ~ s * y_float``). Host partitions become ``lava_host`` nodes computing in float64: they
read spikes, membranes (pre-reset ``v / 64 s_c``) or synaptic sums (read-outs) from the chip and send back
integers (``lava_quant``): a current into a neuron's input port (``round(s_c alpha_c x)``) or a graded payload
into a synapse (``round(g x)``, 8-bit, ``g`` from calibration). A real-valued graph input is sent the same way: as
8-bit graded spikes ``round(g x)`` (``g`` in ``meta["input_gains"]``), the synapses reading it weighted ``W / g``.
A population's state read as a graph output is a twin of its integer node (``ops.twin``) with its integer output.
"""
import numpy as np

from spikec.ir.errors import UnsupportedOp
from spikec.ir.graph import Graph, Node, TensorType
from spikec.targets.lava import ops as lops
from spikec.targets.lava.fixed_point import (PAYLOAD_BITS, channel_axis, dense_weights, full_range, payload_bits,
                                             round_weights, scalar_or_channels)
from spikec.targets.lava.fixed_point import weight_range
from spikec.targets.lava.framework_neurons import SJ_NOTE
from spikec.targets.lava.limits import check_scale, to_int
from spikec.targets.lava import unit_views
from spikec.targets.lava.mapping import HostNode, Population, Stream
from spikec.targets.lava.neurons import check_neuron, membrane_gain, neuron_node, neuron_params
from spikec.targets.lava.ops_table import KIND_LIF


class _Assembly:
    """Assembly state: integer nodes so far, the integer node and type of each float source."""

    def __init__(self, graph: Graph, host_gains: dict):
        self.g = graph
        self.nodes: list = []
        self.types: dict = {}
        self.host_gains = host_gains

    def emit(self, node: Node) -> str:
        if node.name in self.types:
            raise UnsupportedOp(f"the Lava target would create two nodes named {node.name!r}",
                                where=f"node {node.name!r}", remedy="rename the model's modules")
        self.nodes.append(node)
        self.types[node.name] = node.type
        return node.name

    def source(self, name: str) -> tuple[str, TensorType, float]:
        """``(integer node, its type, gain)`` for a stream's float source (the gain: payload units per float unit)."""
        n = self.g.node(name)
        if unit_views.input_view(self.g, n):   # an input viewed as (C, 1, L): the view of its integer node
            src, st, gain = self.source(n.inputs[0])
            if name not in self.types:
                self.emit(Node(name, "reshape", (src,), TensorType(n.type.shape, st.kind, st.ceiling, st.substeps),
                               {"shape": tuple(n.type.shape)}, {}, scope=n.scope))
            return name, self.types[name], gain
        if n.op == "input" and name in self.host_gains:   # a real input, sent as graded spikes round(g x)
            return name, self.types[name], float(self.host_gains[name])
        if name in self.host_gains:
            payload = f"{name}.payload"
            if payload not in self.types:
                gain = self.host_gains[name]
                self.emit(Node(payload, "lava_quant", (name,), TensorType(n.type.shape), {"bits": PAYLOAD_BITS},
                               {"gain": np.float64(gain)}, scope=name))
            return payload, self.types[payload], float(self.host_gains[name])
        return name, self.types[name], 1.0

    def delayed(self, src: str, k: int) -> str:
        if not k:
            return src
        name = f"{src}.delay{k}"
        if name not in self.types:
            self.emit(Node(name, "delay", (src,), self.types[src], {"steps": int(k)}))
        return name


def stream_weights(pop: Population, p: dict | None, graph: Graph, host_gains: dict) -> list:
    """``[(stream, effective float weight, source gain)]``: the weights the integer sum multiplies."""
    out = []
    for s in pop.streams:
        if s.op is None:
            out.append((s, None, None))
            continue
        gain = float(host_gains.get(s.source, 1.0))   # a host value's or a real input's payload gain
        w = s.op.weight if p is None else s.op.weight * p["alpha"].reshape(channel_axis(s.op.weight))
        out.append((s, w / gain, gain))
    return out


def assemble(graph: Graph, layers: list, hosts: dict, host_gains: dict) -> Graph:
    """The integer reference graph of ``layers`` and ``hosts`` in float-graph order."""
    pops = {p.name: p for p in layers}
    asm = _Assembly(graph, host_gains)
    for n in graph.nodes:
        if n.op == "input":
            asm.emit(Node(n.name, "input", (), n.type))
        elif n.name in pops:
            with np.errstate(over="ignore"):   # an overflow to inf is refused by to_int / check_scale, by node
                _assemble_population(pops[n.name], asm)
        elif n.name in hosts:
            _assemble_host(hosts[n.name], asm, pops)
    outputs = []
    for o in graph.outputs:
        node = graph.node(o)
        if o in asm.types:
            outputs.append(o)
        elif node.op in ("flatten", "substep_sum"):
            asm.emit(Node(o, node.op, (node.inputs[0],), node.type, dict(node.attrs)))
            outputs.append(o)
    scales = {l.name: (float(l.scale[0]) if np.ptp(l.scale) == 0 else [float(v) for v in l.scale]) for l in layers}
    # scales: integer units per float unit (read-out y_float ~ y_int / scale; membranes v ~ 64 scale U)
    meta = {"quantized_for": "lava", "source_outputs": list(graph.outputs), "scales": scales,
            "input_gains": {i.name: float(host_gains[i.name]) for i in graph.inputs if i.name in host_gains}}
    if "schedule" in graph.meta:
        meta["schedule"] = graph.meta["schedule"]
    return Graph(tuple(asm.nodes), tuple(outputs), meta)


def _assemble_population(pop: Population, asm: _Assembly) -> None:
    """Integer nodes (streams, sum, population) for ``pop`` at its current VTH / gain, appended to ``asm``."""
    info = pop.info
    info.clear()
    p = neuron_params(pop.neuron, pop.out_shape[0]) if pop.neuron is not None else None
    weights = stream_weights(pop, p, asm.g, asm.host_gains)
    from spikec.targets.lava.and_neurons import fixed_scale
    scale, vth = fixed_scale(pop, asm.g) or _population_scale(pop, p, weights)
    check_scale(pop.name, scale)
    pop.scale = scale
    x = _assemble_streams(pop, p, weights, scale, asm)
    if pop.kind == "or":
        asm.emit(Node(pop.name, "lava_or", (x,), TensorType(pop.out_shape, "binary", None, asm.types[x].substeps),
                      {}, {}, scope=pop.name))
        info.update(process="LIF", lowering="OR layer: Lava LIF with du = dv = 4095, vth = 0 (fires iff a > 0)")
        return
    if pop.neuron is None:
        bq = to_int(np.round(pop.bias * scale), node=pop.name, what="read-out biases (s b)")
        asm.emit(Node(pop.name, "lava_readout", (x,), TensorType(pop.out_shape), {}, {"bias": bq}, scope=pop.name))
        info.update(scale=float(scale[0]), process="Readout")
        return
    main = neuron_node(pop, p, x, scale, vth)
    asm.emit(main)
    if pop.membrane:
        asm.emit(main.with_(name=pop.membrane, attrs=dict(main.attrs, output="membrane"),
                            type=TensorType(pop.out_shape)))
        info["membrane_read_by_host"] = pop.membrane
    for name, output in pop.reads.items():   # state reads recorded as graph outputs
        asm.emit(lops.twin(main, name, output))
    if pop.reads:
        info["state_reads"] = {k: f"integer {v} (v ~ 64 s U){', + v_leak' if 'v_leak' in p else ''}"
                               for k, v in pop.reads.items()}


def _population_scale(pop: Population, p: dict | None, weights: list) -> tuple[np.ndarray, np.ndarray | None]:
    """``(s_c per channel, integer thresholds or None)``; how they were chosen goes to ``pop.info``."""
    c = pop.out_shape[0]
    info = pop.info
    vth = None
    if pop.kind == "or":
        scale = np.ones(c)
        info["scaling"] = "none: an OR layer (all-ones window, fires when any input spiked)"
    elif p is not None:
        theta = p["threshold"]
        check_neuron(pop, p)
        if (theta > 0).all() and _strict_ge(pop, p):
            # fires on U >= theta, a hard reset: Lava's v > vth << 6 with 64 s_c theta_c = (vth << 6) + 1, so that
            # the integer tie v = 64 s theta fires as >= does (a scale at most VTH / theta: weights stay in range)
            vq = pop.vth if _fits((64 * pop.vth + 1) / (64 * theta), weights) else pop.vth - 1
            scale = (64 * vq + 1) / (64 * theta)
            vth = np.full(c, vq, dtype=np.int64)
            p["fire"] = "gt"
            p["notes"] = [n for n in p.get("notes", []) if n != SJ_NOTE] + [GE_NOTE]
            info["scaling"] = (f"threshold-normalized for >= as Lava's >: s_c = (64 VTH' + 1) / (64 theta_c), "
                               f"VTH' = {vq}")
        elif (theta > 0).all():
            scale = pop.vth / theta
            vth = np.full(c, pop.vth, dtype=np.int64)
            info["scaling"] = f"threshold-normalized: s_c = VTH / theta_c, VTH = {pop.vth}"
        else:   # a threshold <= 0: one weight scale for the population, thresholds rounded
            ws = [w for _, w, _ in weights if w is not None]
            full = min((full_range(w) for w in ws), default=1.0)
            scale = np.full(c, full * pop.gain)
            vth = to_int(np.round(scale * theta), node=pop.name, what="thresholds (s theta)")
            info["scaling"] = f"weight-range (a threshold is <= 0): one scale for the population, gain {pop.gain:.3g}"
    else:
        ws = [w for _, w, _ in weights if w is not None]
        scale = np.full(c, min((full_range(w) for w in ws), default=1.0) * pop.gain)
        info["scaling"] = "one scale for the read-out layer: y_int ~ s * y_float"
    return scale, vth


GE_NOTE = ("fires on H >= theta: Lava's v > vth << 6 with 64 s theta = (vth << 6) + 1 (the integer tie fires, as >= "
           "does)")


def _fits(scale: np.ndarray, weights: list) -> bool:
    """Every stream's weights at ``scale`` round within their 8-bit range (no clipping)."""
    for _, w, _ in weights:
        if w is not None:
            lo, hi, _ = weight_range(w)
            q = np.round(w * scale.reshape(channel_axis(w)))
            if q.size and (q.min() < lo or q.max() > hi):
                return False
    return True


def _strict_ge(pop: Population, p: dict) -> bool:
    """A neuron firing on ``>=`` with a hard reset to 0 (SpikingJelly's IF / LIF): in integers ``v >= T`` is
    ``v > T - 1``, so with ``T = (vth << 6) + 1`` it is Lava's own comparison, fed by synapses only."""
    # only behind synapses: a host value sent straight in (attention's integer multiples) reaches theta exactly, a
    # tie that the exact scale VTH / theta keeps and (64 VTH + 1) / (64 theta) would round away
    return p.get("fire") == "ge" and p.get("reset") == "zero" and pop.kind == KIND_LIF and pop.vth >= 2 \
        and not np.any(p.get("v_reset", 0.0)) and all(s.op is not None for s in pop.streams)


def _assemble_streams(pop: Population, p: dict | None, weights: list, scale: np.ndarray, asm: _Assembly) -> str:
    """The streams of ``pop`` and their sum (the integer node the population reads); stream info to ``pop.info``."""
    terms, streams_info = [], []
    for s, w, _ in weights:
        if s.op is None:
            term, si = _direct_stream(pop, s, scale * p["alpha"] if p is not None else scale, asm)
        else:
            term, si = _weighted_stream(pop, s, w, scale, asm)
        terms.append(term)
        streams_info.append({"synapse": s.name, **si})
    if len(streams_info) == 1:
        pop.info.update({k: v for k, v in streams_info[0].items() if k not in ("synapse", "source", "delay")
                         and v is not None})
    pop.info["streams"] = streams_info
    acc = terms[0]
    shape = asm.types[acc].shape if pop.pool is not None else pop.out_shape
    for i, t in enumerate(terms[1:], start=1):
        name = f"{pop.name}.input" if i == len(terms) - 1 else f"{pop.name}.input{i}"
        acc = asm.emit(Node(name, "add", (acc, t), TensorType(shape), {}, {}, scope=pop.name))
    if pop.pool is not None:   # max_tree.py: the max of the integer sums, the population's input
        pop.info["max_pool"] = ("on chip: Lava's Delta, SigmaDelta (ReLU) and Sigma processes compute the max of the "
                                "integer sums exactly (max_tree.py)")
        acc = asm.emit(Node(pop.pool.name, "maxpool2d", (acc,), TensorType(pop.out_shape), dict(pop.pool.attrs), {},
                            scope=pop.name))
    return acc


def _weighted_stream(pop: Population, s: Stream, w, scale, asm: _Assembly) -> tuple[str, dict]:
    """Integer nodes of one weighted stream; returns (the term the population sums, stream info)."""
    src, st, gain = asm.source(s.source)
    x = asm.delayed(src, s.delay)
    op = s.op
    if pop.kind == "or":
        wq, info = op.weight.astype(np.int64), {"weights": "all ones (OR window)"}
        mode = "excitatory"
    else:
        wq, mode, info = round_weights(w, scale, gain, node=pop.name, what=f"weights of synapse {s.name!r}")
    nmb = payload_bits(st) if s.source not in asm.host_gains else PAYLOAD_BITS
    info.update(source=s.source, delay=s.delay, num_message_bits=nmb,
                source_substeps=st.substeps, payload_gain=gain if gain != 1.0 else None)
    name = s.name
    out_type = TensorType(op.out_shape, "real", None, st.substeps)
    if op.kind == "conv":
        asm.emit(Node(name, "lava_conv", (x,), out_type, dict(op.attrs, num_message_bits=nmb), {"weight": wq},
                      scope=pop.name))
    else:
        if op.flatten:
            flat = next((n.name for n in op.nodes if n.op == "flatten"), name + ".flatten")
            flat = flat if s.index == 0 else f"{flat}.{s.index}"
            asm.emit(Node(flat, "flatten", (x,), TensorType((int(np.prod(op.in_shape)),), st.kind, st.ceiling,
                                                            st.substeps), {"start": 0, "end": -1}))
            x = flat
        emitted, wexp = dense_weights(wq, mode)
        asm.emit(Node(name, "lava_dense", (x,), out_type, {"weight_exp": wexp, "num_message_bits": nmb},
                      {"weight": emitted}, scope=pop.name))
    if st.substeps > 1 and pop.kind != "or":   # the population integrates the D sub-steps of each physical step
        name = asm.emit(Node(f"{name}.sum", "substep_sum", (name,), TensorType(op.out_shape), {}, {},
                             scope=pop.name))
    return name, info


def _direct_stream(pop: Population, s: Stream, gain: np.ndarray, asm: _Assembly) -> tuple[str, dict]:
    shape = asm.g.node(s.source).type.shape
    name = asm.emit(Node(f"{s.source}.to.{pop.name}", "lava_quant", (s.source,), TensorType(shape), {"bits": 0},
                         {"gain": scalar_or_channels(gain)}, scope=s.source))
    return asm.delayed(name, s.delay), {"source": s.source, "delay": s.delay,
                                        "direct": "a host value sent into the population's input port"}


def _assemble_host(h: HostNode, asm: _Assembly, pops: dict) -> None:
    n = h.node
    ins, params = [], {f"p_{k}": v for k, v in n.params.items()}
    for i, (kind, src, k) in enumerate(h.inputs):
        if kind == "spikes":
            params[f"gain{i}"] = np.float64(1.0)
        elif kind == "count":
            if src not in asm.types:
                inner = asm.g.node(src).inputs[0]
                asm.emit(Node(src, "substep_sum", (inner,), TensorType(asm.types[inner].shape, "integer",
                                                                      asm.types[inner].substeps), {}, {}))
            params[f"gain{i}"] = np.float64(1.0)
        elif kind == "membrane":
            owner = next(p for p in pops.values() if p.membrane == src)
            params[f"gain{i}"] = scalar_or_channels(membrane_gain(owner)).astype(np.float64)
        elif kind == "readout":   # a read-out of a synaptic sum
            params[f"gain{i}"] = np.float64(float(pops[src].scale[0]))
        ins.append(asm.delayed(src, k))
    asm.emit(Node(n.name, lops.host_op(len(ins)), tuple(ins), TensorType(n.type.shape),
                  {"op": n.op, "attrs": dict(n.attrs), "region": h.region}, params, scope=n.scope))
