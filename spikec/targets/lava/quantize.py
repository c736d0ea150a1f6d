"""Quantize a float spikec graph to Loihi 2 fixed point: the integer reference graph.

The float graph is cut into *populations* (a neuron layer, a read-out, a max-pool OR layer), each
fed by one or more *synaptic streams* whose integer sums Lava adds in the population's input port:

    float   X = sum_i A_i(src_i delayed by k_i) + b           (conv2d / linear, pools folded)
    fixed   a = sum_i Wq_i src_i                                (Dense, DelayDense, Conv processes)

Streams come from ``add`` nodes (residuals, TDM dual kernels ``W_a x_t - W_b x_{t-1}``), from sums of
spike tensors before a synapse (``W (s1 + s2) = W s1 + W s2``) and from ``delay`` nodes (``x_{t-k}``:
DelayDense, or a delay relay before a Conv). A source is the graph input (binary or integer
spikes), a neuron's spikes (binary, or the integer-firing neuron's graded payload), the unrolled
integer neuron's binary sub-step spikes, an OR layer, or a host value.

Neurons (per output channel ``c``, integer membrane ``v ~ 64 s_c U`` with ``s_c = VTH / theta_c``,
threshold-normalized so that one integer VTH serves the population):

- lif        ``U = beta H + alpha X + bias``: Lava's LIF (hard reset, scalar parameters) or the custom
             SpikecLIF; ``dv = round(4096 (1 - beta))``, ``du = 4095``, bias mantissa/exponent;
- intfire    the integer-firing neuron (semantics 1.2) with the same arithmetic: graded payload
             ``S = clip(round(v / (VTH << 6)), 0, D)`` (custom SpikecIntFire), or, after
             ``unroll_virtual_steps`` (``intfire_unrolled``), the same count replayed as D binary sub-steps;
- silif      ``u = a (u - kappa s) + b x``: decay ``A = round(4096 a)`` (12-bit, *approximate*),
             ``K = round(64 s_c kappa)``, threshold ``>=`` (custom SpikecSiLIF);
- csilif     the complex state as two integer states (real v, imaginary w), decays
             ``round(4096 a_re)``, ``round(4096 a_im)`` (*approximate*), threshold on ``2 Re(m)``;
- weights ``Wq = round(s_c alpha_c W / g)`` (``g`` = the source's payload units per float unit, 1 for
  spikes): 8-bit magnitude + sign mode per stream (mixed [-128, 127]; single-sign [0, 255] or
  [-255, 0]); VTH is the largest integer keeping every stream's weights in range, then lowered by
  calibration until the observed states keep ``headroom_bits`` below 24 bits.

Max pooling over binary spikes is an OR layer (an all-ones depthwise Conv into ``a > 0``), exact.
Dense float ops (``host.HOST``: DS-MPA, products of activations, softmax, per-time-step BN) go to
*host partitions*: a host reads spikes, membranes (pre-reset ``v / 64 s_c``) or synaptic sums
(read-outs) from the chip, computes in float64, and sends back integers: a current into a neuron's
input port (``round(s_c alpha_c x)``) or a graded payload into a synapse (``round(g x)``, 8-bit, ``g``
from calibration). Graph outputs that are synaptic expressions become ``lava_readout`` nodes with one
scale ``s`` for the whole layer (``y ~ s * y_float``). Anything else is refused with the node named.
"""
from dataclasses import dataclass, field

import numpy as np

from spikec.compiler.errors import UnsupportedOp
from spikec.compiler.interpreter import run
from spikec.compiler.ir import Graph, Node, TensorType
from spikec.ops.common import window as _window
from spikec.targets.lava import host as hostmod
from spikec.targets.lava import ops as lops
from spikec.targets.lava.limits import check_scale, int_inputs, to_int

VTH_MAX = 2 ** 17 - 1          # LIF vth: unsigned 17-bit mantissa
BIAS_MANT = (-4096, 4095)      # 13-bit signed
BIAS_EXP_MAX = 7               # 3-bit
DECAY_MAX = 4095               # 12-bit
DECAY_ONE = 4096
HEADROOM_BITS = 1              # calibrated states stay below 2^(23 - HEADROOM_BITS)
PAYLOAD_BITS = 8               # graded payloads a host sends into a synapse (signed)
NEURONS = ("lif", "intfire", "intfire_unrolled", "silif", "csilif")
MAPPED = ("input", "conv2d", "linear", "flatten", "avgpool2d", "maxpool2d", "delay", "add", "substep_sum") \
    + NEURONS + hostmod.HOST
NO_MAPPING = {
    "tdm": "TDM has no static fixed-point form here (run tdm_dual_kernel first)",
    "windowsum": "a window sum outside an SDNA block is not mapped",
    "mul": "a product of two activations has no static synapse (not mapped)",
    "scale": "a scale node is not mapped (fold it into the adjacent synapse)",
}
SUPPORTED = ("input (binary or integer spikes), lif, intfire (graded or unrolled), silif, csilif, conv2d, linear, "
             "flatten, avgpool2d folded into an adjacent conv2d/linear, maxpool2d over binary spikes, delay, "
             "add of synaptic streams, and host ops (" + ", ".join(hostmod.HOST) + ")")


def refuse(node: Node, why: str) -> UnsupportedOp:
    return UnsupportedOp(f"the Lava target cannot map node {node.name!r} ({node.op}): {why}",
                         where=f"node {node.name!r}" + (f", module {node.scope!r}" if node.scope else ""),
                         remedy=f"the Lava target maps: {SUPPORTED}; use --target none (or another target) "
                                "for this model")


# -- float linear operators (folding pools) ----------------------------------------------
@dataclass
class Operator:
    """``A(x) + b`` on ``src`` (per-sample shape ``in_shape``), float64; ``src`` is the node below the pools
    and flatten (a spike source, a delay, a sum of spikes, a max pool or a host value)."""
    kind: str                          # "conv" | "dense"
    weight: np.ndarray                 # conv (C_out, C_in/g, kH, kW) PyTorch layout; dense (N_out, N_in)
    bias: np.ndarray                   # (C_out,)
    src: str                           # spike source node (input or lif)
    in_shape: tuple
    out_shape: tuple
    attrs: dict = field(default_factory=dict)   # conv: stride, padding, dilation, groups
    flatten: bool = False              # dense over a flattened (C, H, W) source
    nodes: list = field(default_factory=list)   # float nodes this operator replaces, in order
    notes: list = field(default_factory=list)


def fold_conv_then_pool(w, stride, padding, dilation, k, s):
    """Composite kernel of avgpool(k, s) after conv: kernel ``st*(k-1) + d*(kw-1) + 1``, stride ``st*s``."""
    kh, kw = w.shape[2:]
    (sh, sw), (dh, dw) = stride, dilation
    ch, cw = sh * (k[0] - 1) + dh * (kh - 1) + 1, sw * (k[1] - 1) + dw * (kw - 1) + 1
    out = np.zeros(w.shape[:2] + (ch, cw))
    for i in range(k[0]):
        for j in range(k[1]):
            for m in range(kh):
                for n in range(kw):
                    out[:, :, sh * i + dh * m, sw * j + dw * n] += w[:, :, m, n]
    return out / (k[0] * k[1]), (sh * s[0], sw * s[1]), tuple(padding), (1, 1)


def fold_pool_then_conv(w, stride, padding, dilation, k):
    """Composite kernel of conv after a non-overlapping avgpool(k, stride k): every tap spread over k x k."""
    kh, kw = w.shape[2:]
    dh, dw = dilation
    out = np.zeros(w.shape[:2] + (k[0] * (dh * (kh - 1) + 1), k[1] * (dw * (kw - 1) + 1)))
    for m in range(kh):
        for n in range(kw):
            for i in range(k[0]):
                for j in range(k[1]):
                    out[:, :, k[0] * dh * m + i, k[1] * dw * n + j] += w[:, :, m, n]
    return (out / (k[0] * k[1]), (stride[0] * k[0], stride[1] * k[1]),
            (padding[0] * k[0], padding[1] * k[1]), (1, 1))


def _pool_ok(pool: Node, in_shape, non_overlapping: bool) -> str | None:
    a = pool.attrs
    if tuple(a["padding"]) != (0, 0):
        return "pool padding is not folded"
    if a.get("ceil_mode"):
        return "ceil_mode pooling is not folded"
    if tuple(a.get("dilation", (1, 1))) != (1, 1):
        return "dilated pooling is not folded"
    if non_overlapping and (tuple(a["kernel"]) != tuple(a["stride"]) or in_shape[1] % a["kernel"][0]
                            or in_shape[2] % a["kernel"][1]):
        return "only a non-overlapping pool (kernel == stride) that tiles its input folds into the next synapse"
    return None


def operator_of(graph: Graph, node: Node) -> Operator:
    """The float linear operator computing ``node`` from a spike source, pools folded; refuses otherwise."""
    post_pool = None
    syn = node
    if syn.op == "avgpool2d":
        post_pool, syn = syn, graph.node(syn.inputs[0])
    if syn.op not in ("conv2d", "linear"):
        raise refuse(node if post_pool is None else post_pool,
                     "a neuron or output must be fed by a conv2d or linear (optionally with an avgpool2d)")
    chain, src = [], graph.node(syn.inputs[0])
    while src.op in ("flatten", "avgpool2d"):
        chain.insert(0, src)
        src = graph.node(src.inputs[0])
    w = np.array(syn.params["weight"], dtype=np.float64)
    b = np.array(syn.params["bias"], dtype=np.float64) if "bias" in syn.params else np.zeros(w.shape[0])
    in_shape = src.type.shape
    nodes = [*chain, syn] + ([post_pool] if post_pool is not None else [])
    notes = []
    if syn.op == "conv2d":
        a = dict(stride=tuple(syn.attrs["stride"]), padding=tuple(syn.attrs["padding"]),
                 dilation=tuple(syn.attrs["dilation"]), groups=syn.attrs["groups"])
        if [c.op for c in chain] not in ([], ["avgpool2d"]):
            raise refuse(chain[-1], "only a single avgpool2d may sit between spikes and a conv2d")
        if chain:
            pool = chain[0]
            why = _pool_ok(pool, in_shape, True)
            if why:
                raise refuse(pool, why)
            w, stride, pad, dil = fold_pool_then_conv(w, a["stride"], a["padding"], a["dilation"], pool.attrs["kernel"])
            a.update(stride=stride, padding=pad, dilation=dil)
            notes.append(f"avgpool {pool.name!r} folded into the following conv {syn.name!r}: kernel "
                         f"{tuple(w.shape[2:])}, stride {stride}, padding {pad} (exact in real arithmetic)")
        out_shape = syn.type.shape
        if post_pool is not None:
            why = _pool_ok(post_pool, syn.type.shape, False)
            if why:
                raise refuse(post_pool, why)
            k, s = tuple(post_pool.attrs["kernel"]), tuple(post_pool.attrs["stride"])
            w, stride, pad, dil = fold_conv_then_pool(w, a["stride"], a["padding"], a["dilation"], k, s)
            out_shape = post_pool.type.shape
            h = _window(in_shape[1], w.shape[2], stride[0], pad[0], 1)
            wd = _window(in_shape[2], w.shape[3], stride[1], pad[1], 1)
            if (h, wd) != tuple(out_shape[1:]):
                raise refuse(post_pool, f"folding it into conv {syn.name!r} gives a {h}x{wd} map, not "
                                        f"{out_shape[1]}x{out_shape[2]}")
            a.update(stride=stride, padding=pad, dilation=dil)
            notes.append(f"avgpool {post_pool.name!r} folded into the preceding conv {syn.name!r}: kernel "
                         f"{tuple(w.shape[2:])}, stride {stride}, padding {pad} (exact in real arithmetic)")
        return Operator("conv", w, b, src.name, in_shape, out_shape, a, False, nodes, notes)
    # linear
    ops = [c.op for c in chain]
    if ops == []:
        if len(in_shape) != 1:
            raise refuse(syn, f"linear on a {in_shape} tensor (not a vector) is not mapped")
        return Operator("dense", w, b, src.name, in_shape, syn.type.shape, {}, False, nodes, notes)
    flat = chain[-1]
    if flat.op != "flatten" or ops not in (["flatten"], ["avgpool2d", "flatten"]):
        raise refuse(chain[-1], "only flatten, or avgpool2d then flatten, may sit between spikes and a linear")
    if flat.type.shape != (int(np.prod(flat.type.shape)),) or len(in_shape) != 3 and ops[0] == "avgpool2d":
        raise refuse(flat, "flatten must produce a vector")
    if ops[0] == "avgpool2d":
        pool = chain[0]
        why = _pool_ok(pool, in_shape, True)
        if why:
            raise refuse(pool, why)
        kh, kw = pool.attrs["kernel"]
        c, hp, wp = pool.type.shape
        w4 = w.reshape(w.shape[0], c, hp, wp) / (kh * kw)
        w = np.repeat(np.repeat(w4, kh, axis=2), kw, axis=3).reshape(w.shape[0], -1)
        notes.append(f"avgpool {pool.name!r} folded into linear {syn.name!r} (weights spread over each "
                     f"{kh}x{kw} window; exact in real arithmetic)")
    return Operator("dense", w, b, src.name, in_shape, syn.type.shape, {}, len(in_shape) > 1, nodes, notes)


# -- fixed point ------------------------------------------------------------------------
def weight_range(w: np.ndarray) -> tuple[int, int, str]:
    mode = "mixed"
    if w.size == 0 or w.min() >= 0:
        mode = "excitatory"
    elif w.max() <= 0:
        mode = "inhibitory"
    return {"excitatory": (0, 255, mode), "inhibitory": (-255, 0, mode), "mixed": (-128, 127, mode)}[mode]


def bias_mant_exp(b: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Integer biases as mantissa << exponent; returns (mant, exp, number saturated)."""
    b = np.asarray(b, dtype=np.int64)
    exp = np.zeros_like(b)
    mant = b.copy()
    for e in range(1, BIAS_EXP_MAX + 1):
        big = (mant > BIAS_MANT[1]) | (mant < BIAS_MANT[0])
        if not big.any():
            break
        mant = np.where(big, np.round(b / 2.0 ** e).astype(np.int64), mant)
        exp = np.where(big, e, exp)
    saturated = int(((mant > BIAS_MANT[1]) | (mant < BIAS_MANT[0])).sum())
    return np.clip(mant, *BIAS_MANT), exp, saturated


def _scalar_or_channels(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v)
    return v[:1].reshape(()) if v.size and np.all(v == v.flat[0]) else v


def _full_range(w: np.ndarray) -> float:
    """The scale mapping the largest |weight| onto the edge of the 8-bit range (no weight rounded beyond it)."""
    c = float(_edge_scales(w.reshape(1, -1)).min(initial=np.inf))
    return c if np.isfinite(c) else 1.0


def _edge_scales(w: np.ndarray) -> np.ndarray:
    """Per output row, the largest scale whose round-to-nearest keeps every weight in range. Mixed signs span
    [-128, 127]: a positive weight may reach only 127.5 (exclusive), else it rounds to 128 and is clipped."""
    lo, hi, _ = weight_range(w)
    edge = max(hi, -lo)
    rows = w.reshape(w.shape[0], -1)
    pos, neg = np.maximum(rows, 0).max(1, initial=0), np.maximum(-rows, 0).max(1, initial=0)
    with np.errstate(divide="ignore"):
        return np.minimum(np.where(pos > 0, min(edge, hi + 0.5 - 1e-6) / np.where(pos > 0, pos, 1), np.inf),
                          np.where(neg > 0, edge / np.where(neg > 0, neg, 1), np.inf))


def payload_bits(t: TensorType) -> int:
    """``num_message_bits`` a synapse reading a source of type ``t`` needs (0: binary spikes)."""
    if t.kind == "binary":
        return 0
    if t.kind == "integer":
        return max(1, int(t.ceiling).bit_length())
    return PAYLOAD_BITS


# -- populations and streams ------------------------------------------------------------
@dataclass
class Stream:
    """One synaptic stream into a population: ``op`` applied to ``source`` delayed by ``delay`` steps.

    ``op`` is None for a direct stream (a host value sent into the population's input port)."""
    op: Operator | None
    source: str
    delay: int = 0
    index: int = 0             # streams one synapse makes from a sum of spike tensors: 0, 1, ...
    name: str = ""             # its integer synapse node

    @property
    def kind(self) -> str:
        return "direct" if self.op is None else self.op.kind

    @property
    def synapse(self) -> str | None:
        """The float synapse node (conv2d / linear; the max pool of an OR layer)."""
        if self.op is None:
            return None
        return next((n.name for n in self.op.nodes if n.op in ("conv2d", "linear")), self.op.nodes[-1].name)


@dataclass
class Population:
    """One quantized population (neuron layer, read-out or OR layer) and the streams that feed it."""
    name: str                  # the neuron (or read-out / max-pool) node: float and integer graph share it
    kind: str                  # lif | intfire | silif | csilif | readout | or
    neuron: Node | None        # the float neuron (None for read-outs and OR layers)
    streams: list
    bias: np.ndarray           # float bias of the synaptic expression, per output channel
    out_shape: tuple
    nodes: list                # float nodes of the synaptic expression (folded into this population)
    notes: list = field(default_factory=list)
    vth: int = 0               # threshold-normalized VTH (neurons with all thresholds > 0)
    gain: float = 1.0          # weight-range scaling (read-outs, zero thresholds): fraction of the full range
    bias_unit: int = 1         # biases rounded to multiples of this (64 = whole weight LSBs, as netx needs)
    scale: np.ndarray = None   # s_c: integer weight units per float unit, per output channel
    membrane: str | None = None  # the float membrane twin a host reads, if any
    info: dict = field(default_factory=dict)

    @property
    def synapse(self) -> str | None:
        return next((s.name for s in self.streams if s.op is not None), None)

    @property
    def synapses(self) -> list:
        return [s.name for s in self.streams]


Layer = Population   # the name the rest of the target (and its reports) used for a population


@dataclass
class HostNode:
    node: Node
    inputs: list               # (kind, float source, delay): kind spikes | count | membrane | readout | host
    region: int = 0


def _neuron_kind(n: Node) -> str:
    return {"intfire_unrolled": "intfire"}.get(n.op, n.op)


class _Mapper:
    """Cuts the float graph into populations, streams and host nodes; refuses what cannot map, by name."""

    def __init__(self, graph: Graph):
        self.g = graph
        self.pops: dict[str, Population] = {}
        self.hosts: dict[str, HostNode] = {}
        self.used: set = set()
        self.order: list = []          # population / host names in float-graph order

    # classification
    @staticmethod
    def is_neuron(n: Node) -> bool:
        return n.op in NEURONS and n.attrs.get("output", "spikes") == "spikes"

    @staticmethod
    def is_twin(n: Node) -> bool:
        return n.op in NEURONS and n.attrs.get("output", "spikes") == "membrane"

    @staticmethod
    def is_host(n: Node) -> bool:
        return n.op in hostmod.HOST

    def run(self):
        g = self.g
        for n in g.nodes:   # first the ops with no mapping at all, so the refusal names them
            if n.op not in MAPPED:
                raise refuse(n, NO_MAPPING.get(n.op, "no Loihi mapping in this target"))
        for inp in g.inputs:
            if inp.type.kind == "real":
                raise refuse(inp, "real-valued inputs are not mapped; feed spikes (binary or integer)")
            if inp.type.substeps != 1:
                raise refuse(inp, "sub-step time bases are not mapped on inputs")
        outputs = set(g.outputs)
        for n in g.nodes:
            if self.is_neuron(n):
                streams, bias, nodes, notes = self.parse_sum(n.inputs[0])
                self.add(Population(n.name, _neuron_kind(n), n, streams, bias, n.type.shape, nodes, notes))
            elif self.is_host(n):
                self.host(n)
            elif n.name in outputs and n.op in ("conv2d", "linear", "avgpool2d", "add", "substep_sum") \
                    and n.name not in self.pops and not (n.op == "substep_sum" and "bias" not in n.params
                                                         and g.node(n.inputs[0]).type.kind == "binary"):
                self.readout(n)
            elif n.name in outputs and n.op == "maxpool2d":
                self.or_pool(n)
        self.check_coverage()
        first = {}
        for h in self.hosts.values():   # regions numbered 0, 1, ... in order of their first node
            h.region = first.setdefault(h.region, len(first))
        return self

    def add(self, pop: Population):
        self.pops[pop.name] = pop
        self.order.append(pop.name)
        self.used.update(x.name for x in pop.nodes)
        self.used.add(pop.name)

    def readout(self, n: Node) -> str:
        if n.name not in self.pops:
            streams, bias, nodes, notes = self.parse_sum(n.name)
            self.add(Population(n.name, "readout", None, streams, bias, n.type.shape, nodes, notes))
        return n.name

    # synaptic expressions
    def parse_sum(self, name: str):
        """``(streams, float bias (C,), float nodes, notes)`` of the synaptic expression ``name``."""
        g = self.g
        n = g.node(name)
        if n.op == "add":
            s1, b1, n1, t1 = self.parse_sum(n.inputs[0])
            s2, b2, n2, t2 = self.parse_sum(n.inputs[1])
            return s1 + s2, b1 + b2, n1 + n2 + [n], t1 + t2
        if n.op == "substep_sum" and g.node(n.inputs[0]).type.kind == "real":
            s, b, ns, t = self.parse_sum(n.inputs[0])
            if "bias" in n.params:
                b = b + np.asarray(n.params["bias"], dtype=np.float64)
            return s, b, ns + [n], t
        if n.op in ("conv2d", "linear") or (n.op == "avgpool2d" and g.node(n.inputs[0]).op == "conv2d"):
            op = operator_of(g, n)
            sources = self.parse_source(op.src)
            shapes = {g.node(s).type.shape for s, _ in sources}
            if len(shapes) != 1:
                raise refuse(n, f"its input sums tensors of shapes {sorted(shapes)}")
            return ([Stream(op, s, d, i) for i, (s, d) in enumerate(sources)], op.bias.copy(), list(op.nodes),
                    list(op.notes))
        if n.op == "delay" or self.is_host(n):
            sources = self.parse_source(name)
            if any(not self.is_host(g.node(s)) for s, _ in sources):
                raise refuse(n, "a population's input must come through a synapse (conv2d/linear) or from a host "
                                "partition")
            return [Stream(None, s, d) for s, d in sources], np.zeros(n.type.shape[0]), [], []
        raise refuse(n, "a population's input must be a sum of synaptic streams (conv2d/linear, optionally "
                        "pooled, delayed or added) or a host value")

    def parse_source(self, name: str) -> list:
        """``[(source, delay)]``: the spike sources (or host values) a synapse reads, summed."""
        g = self.g
        n = g.node(name)
        if n.op == "delay":
            self.used.add(name)
            return [(s, d + int(n.attrs["steps"])) for s, d in self.parse_source(n.inputs[0])]
        if n.op == "add":
            self.used.add(name)
            return self.parse_source(n.inputs[0]) + self.parse_source(n.inputs[1])
        if n.op == "substep_sum" and "bias" not in n.params and g.node(n.inputs[0]).type.kind == "binary":
            self.used.add(name)   # the count of an unrolled neuron: a synapse sums its D sub-steps anyway
            return self.parse_source(n.inputs[0])
        if n.op == "maxpool2d":
            return [(self.or_pool(n), 0)]
        if n.op == "input" or self.is_neuron(n) or self.is_host(n):
            return [(name, 0)]
        raise refuse(n, "a synapse's input must be spikes (the graph input, a neuron, a max pool over spikes), "
                        "a delay or a sum of those, or a host value")

    def or_pool(self, n: Node) -> str:
        if n.name in self.pops:
            return n.name
        a = n.attrs
        in_shape = self.g.node(n.inputs[0]).type.shape
        if a.get("ceil_mode") and tuple(n.type.shape[1:]) != tuple(
                _window(in_shape[i + 1], a["kernel"][i], a["stride"][i], a["padding"][i], a["dilation"][i])
                for i in range(2)):
            raise refuse(n, "ceil_mode max pooling is not mapped")
        sources = self.parse_source(n.inputs[0])
        if len(sources) != 1:
            raise refuse(n, "max pooling of a sum of spike tensors is a max, not an OR")
        src, delay = sources[0]
        if self.g.node(src).type.kind != "binary":
            raise refuse(n, "max pooling of integer (graded) spikes is a max, not an OR: unroll the integer neuron "
                            "first (pass unroll_virtual_steps) so that it pools binary sub-step spikes")
        c = n.type.shape[0]
        w = np.ones((c, 1) + tuple(a["kernel"]))
        op = Operator("conv", w, np.zeros(c), src, in_shape, n.type.shape,
                      dict(stride=tuple(a["stride"]), padding=tuple(a["padding"]), dilation=tuple(a["dilation"]),
                           groups=c), False, [n], [])
        self.add(Population(n.name, "or", None, [Stream(op, src, delay)], np.zeros(c), n.type.shape, [n]))
        return n.name

    # host partitions
    def host(self, n: Node):
        g = self.g
        inputs = []
        for i in n.inputs:
            src, k = g.node(i), 0
            while src.op == "delay":
                k += int(src.attrs["steps"])
                self.used.add(src.name)
                src = g.node(src.inputs[0])
            kind = None
            if self.is_host(src):
                kind = "host"
            elif src.op == "input" or self.is_neuron(src):
                kind = "spikes"
            elif src.op == "maxpool2d":
                self.or_pool(src)
                kind = "spikes"
            elif src.op == "substep_sum" and "bias" not in src.params and g.node(src.inputs[0]).type.kind == "binary" \
                    and self.is_neuron(g.node(src.inputs[0])):
                self.used.add(src.name)
                kind, src = "count", src
            elif self.is_twin(src):
                neuron = next((m for m in g.nodes if self.is_neuron(m) and _neuron_kind(m) == _neuron_kind(src)
                               and m.inputs == src.inputs and dict(m.attrs, output="membrane") == dict(src.attrs)),
                              None)   # (an unrolled integer neuron keeps an ``intfire`` membrane twin)
                if neuron is None or neuron.name not in self.pops:
                    raise refuse(src, "a membrane read-out needs its neuron on the chip")
                pop = self.pops[neuron.name]
                if pop.membrane not in (None, src.name):
                    raise refuse(src, "a second membrane read-out of one population")
                pop.membrane = src.name
                self.used.add(src.name)
                kind = "membrane"
            elif src.op in ("conv2d", "linear", "avgpool2d", "add", "substep_sum"):
                self.readout(src)
                kind = "readout"
            else:
                raise refuse(src, f"host node {n.name!r} cannot read it from the chip (spikes, a membrane, a "
                                  "synaptic sum or another host value)")
            inputs.append((kind, src.name, k))
        region = len(self.hosts)
        for kind, src, _ in inputs:   # one region per connected set of host nodes (they share one process)
            if kind == "host":
                old = self.hosts[src].region
                for h in self.hosts.values():
                    if h.region == old:
                        h.region = region
        self.hosts[n.name] = HostNode(n, inputs, region)
        self.order.append(n.name)
        self.used.add(n.name)

    def check_coverage(self):
        g = self.g
        outputs = set(g.outputs)
        for n in g.nodes:
            if n.op == "input" or n.name in self.used:
                continue
            if self.is_twin(n) and not g.consumers(n.name) and n.name not in outputs:
                continue   # an unread membrane twin
            if self.is_twin(n):
                raise refuse(n, "a membrane read-out is deployable only into a host partition")
            if n.op == "flatten" and n.name in outputs and g.node(n.inputs[0]).name in self.pops:
                continue   # a flattened spike output: the population's spikes, reshaped
            if n.op == "substep_sum" and n.name in outputs and "bias" not in n.params \
                    and g.node(n.inputs[0]).name in self.pops:
                continue   # the count of an unrolled neuron as a graph output
            raise refuse(n, "it is neither part of a synapse feeding a population or a host, nor a spike output")
        for h in self.hosts.values():
            if h.node.name in outputs:
                raise refuse(h.node, "a host value as a graph output is not recorded by the Lava network")
        for pop in self.pops.values():
            inside = {x.name for x in pop.nodes} | {pop.name}
            if pop.neuron is not None:   # the neuron's membrane twin reads the same synaptic sum
                inside |= {c.name for c in g.nodes if self.is_twin(c) and c.inputs == pop.neuron.inputs}
            for x in pop.nodes:
                if x.name == pop.name:
                    continue
                if x.name in outputs:
                    raise refuse(x, "an intermediate of a folded synapse cannot be a graph output")
                bad = [c for c in g.consumers(x.name) if c.name not in inside]
                if bad:
                    raise refuse(x, f"its value is also read by {bad[0].name!r}; a folded synapse must have one "
                                    "consumer")


def build_layers(graph: Graph) -> list[Population]:
    """The populations of ``graph`` (neurons, read-outs, OR layers) in order; refuses what cannot map."""
    m = _Mapper(graph).run()
    return [m.pops[k] for k in m.order if k in m.pops]


# -- per-population quantization ----------------------------------------------------------
def _neuron_params(node: Node, c: int) -> dict:
    """Float parameters per channel: alpha (input gain), theta (firing level of the integer state's
    variable), beta or decays, the neuron's own bias, and what else the kind needs."""
    get = lambda k, default=0.0: np.broadcast_to(np.array(node.params.get(k, default), dtype=np.float64),
                                                 (c,)).copy()
    op = node.op
    if op == "lif":
        return {k: get(k) for k in ("beta", "alpha", "bias", "threshold", "v_reset")}
    if op in ("intfire", "intfire_unrolled"):
        return {"beta": get("beta"), "alpha": get("alpha"), "bias": get("bias"), "threshold": get("threshold")}
    if op == "silif":
        return {"decay": get("decay"), "alpha": get("b"), "bias": get("bias"), "threshold": get("v_th")}
    if op == "csilif":   # s = [2 Re(m) >= v_th]: the integer state is Re(m), its firing level v_th / 2
        return {"a_re": get("a_re"), "a_im": get("a_im"), "alpha": get("b"), "bias": get("bias"),
                "threshold": get("v_th") / 2}
    raise AssertionError(op)


def _channel_axis(w: np.ndarray) -> tuple:
    return (-1,) + (1,) * (w.ndim - 1)


class _Ctx:
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

    def source(self, name: str, pops: dict) -> tuple[str, TensorType, float]:
        """``(integer node, its type, gain)`` for a stream's float source (the gain: payload units per float unit)."""
        n = self.g.node(name)
        if n.op in hostmod.HOST:
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


def _stream_weights(pop: Population, p: dict | None, ctx: _Ctx, pops: dict) -> list:
    """``[(stream, effective float weight, source gain)]``: the weights the integer sum multiplies."""
    out = []
    for s in pop.streams:
        if s.op is None:
            out.append((s, None, None))
            continue
        gain = float(ctx.host_gains[s.source]) if ctx.g.node(s.source).op in hostmod.HOST else 1.0
        w = s.op.weight if p is None else s.op.weight * p["alpha"].reshape(_channel_axis(s.op.weight))
        out.append((s, w / gain, gain))
    return out


def _max_vth(pop: Population, weights: list, theta: np.ndarray) -> int:
    """The largest VTH keeping every stream's weights in its 8-bit range."""
    if (theta <= 0).any():
        return 0
    lim = np.inf
    for s, w, _ in weights:
        if w is None:
            continue
        with np.errstate(over="ignore"):
            c = _edge_scales(w) * theta
        lim = min(lim, float(c.min(initial=np.inf)))
    return int(max(1, min(VTH_MAX, np.floor(lim) if np.isfinite(lim) else VTH_MAX)))


def _emit_stream(pop, s: Stream, w, scale, ctx: _Ctx, pops: dict) -> tuple[str, dict]:
    """Integer nodes of one weighted stream; returns (the term the population sums, stream info)."""
    src, st, gain = ctx.source(s.source, pops)
    x = ctx.delayed(src, s.delay)
    op = s.op
    if pop.kind == "or":
        wq, info = op.weight.astype(np.int64), {"weights": "all ones (OR window)"}
        lo, hi, mode = 0, 255, "excitatory"
    else:
        lo, hi, mode = weight_range(w)
        wq_f = np.round(w * scale.reshape(_channel_axis(w)))
        wq = to_int(np.clip(wq_f, lo, hi), node=pop.name, what=f"weights of synapse {s.name!r}")
        err = wq / scale.reshape(_channel_axis(w)) * gain - w * gain
        info = {"sign_mode": mode, "weight_range": [lo, hi], "weights_clipped": int((wq != wq_f).sum()),
                "weight_rms_error": float(np.sqrt(np.mean(err ** 2))) if w.size else 0.0}
    nmb = payload_bits(st) if ctx.g.node(s.source).op not in hostmod.HOST else PAYLOAD_BITS
    info.update(source=s.source, delay=s.delay, num_message_bits=nmb,
                source_substeps=st.substeps, payload_gain=gain if gain != 1.0 else None)
    name = s.name
    out_type = TensorType(op.out_shape, "real", None, st.substeps)
    if op.kind == "conv":
        ctx.emit(Node(name, "lava_conv", (x,), out_type, dict(op.attrs, num_message_bits=nmb), {"weight": wq},
                      scope=pop.name))
    else:
        if op.flatten:
            flat = next((n.name for n in op.nodes if n.op == "flatten"), name + ".flatten")
            flat = flat if s.index == 0 else f"{flat}.{s.index}"
            ctx.emit(Node(flat, "flatten", (x,), TensorType((int(np.prod(op.in_shape)),), st.kind, st.ceiling,
                                                            st.substeps), {"start": 0, "end": -1}))
            x = flat
        if mode == "mixed":   # Lava truncates the LSB of mixed-sign 8-bit weights: 2w with weight_exp -1 is exact
            emitted, wexp = 2 * wq, -1
        else:
            emitted, wexp = wq, 0
        ctx.emit(Node(name, "lava_dense", (x,), out_type, {"weight_exp": wexp, "num_message_bits": nmb},
                      {"weight": emitted}, scope=pop.name))
    if st.substeps > 1 and pop.kind != "or":   # the population integrates the D sub-steps of each physical step
        name = ctx.emit(Node(f"{name}.sum", "substep_sum", (name,), TensorType(op.out_shape), {}, {},
                             scope=pop.name))
    return name, info


def _emit_direct(pop, s: Stream, gain: np.ndarray, ctx: _Ctx) -> tuple[str, dict]:
    shape = ctx.g.node(s.source).type.shape
    name = ctx.emit(Node(f"{s.source}.to.{pop.name}", "lava_quant", (s.source,), TensorType(shape), {"bits": 0},
                         {"gain": _scalar_or_channels(gain)}, scope=s.source))
    return ctx.delayed(name, s.delay), {"source": s.source, "delay": s.delay,
                                        "direct": "a host value sent into the population's input port"}


def _sum_terms(pop, terms: list, ctx: _Ctx) -> str:
    acc = terms[0]
    for i, t in enumerate(terms[1:], start=1):
        name = f"{pop.name}.input" if i == len(terms) - 1 else f"{pop.name}.input{i}"
        acc = ctx.emit(Node(name, "add", (acc, t), TensorType(pop.out_shape), {}, {}, scope=pop.name))
    return acc


def quantize_population(pop: Population, ctx: _Ctx, pops: dict) -> None:
    """Integer nodes (streams, sum, population) for ``pop`` at its current VTH / gain, appended to ``ctx``."""
    c = pop.out_shape[0]
    info = pop.info
    info.clear()
    p = _neuron_params(pop.neuron, c) if pop.neuron is not None else None
    weights = _stream_weights(pop, p, ctx, pops)
    if pop.kind == "or":
        scale = np.ones(c)
        info["scaling"] = "none: an OR layer (all-ones window, fires when any input spiked)"
    elif p is not None:
        theta = p["threshold"]
        if pop.kind == "lif":
            if (theta < 0).any():
                raise refuse(pop.neuron, "a negative threshold has no Loihi form")
            if ((p["beta"] < 0) | (p["beta"] > 1)).any():
                raise refuse(pop.neuron, "beta outside [0, 1] is not a 12-bit decay")
        if pop.kind == "intfire" and ((p["beta"] < 0) | (p["beta"] > 1)).any():
            raise refuse(pop.neuron, "beta outside [0, 1] is not a 12-bit decay")
        if (theta > 0).all():
            scale = pop.vth / theta
            vth = np.full(c, pop.vth, dtype=np.int64)
            info["scaling"] = f"threshold-normalized: s_c = VTH / theta_c, VTH = {pop.vth}"
        else:   # a threshold <= 0: one weight scale for the population, thresholds rounded
            ws = [w for _, w, _ in weights if w is not None]
            full = min((_full_range(w) for w in ws), default=1.0)
            scale = np.full(c, full * pop.gain)
            vth = to_int(np.round(scale * theta), node=pop.name, what="thresholds (s theta)")
            info["scaling"] = f"weight-range (a threshold is <= 0): one scale for the population, gain {pop.gain:.3g}"
    else:
        ws = [w for _, w, _ in weights if w is not None]
        scale = np.full(c, min((_full_range(w) for w in ws), default=1.0) * pop.gain)
        info["scaling"] = "one scale for the read-out layer: y_int ~ s * y_float"
    check_scale(pop.name, scale)
    pop.scale = scale
    terms, streams_info = [], []
    for s, w, _ in weights:
        if s.op is None:
            term, si = _emit_direct(pop, s, scale * p["alpha"] if p is not None else scale, ctx)
        else:
            term, si = _emit_stream(pop, s, w, scale, ctx, pops)
        terms.append(term)
        streams_info.append({"synapse": s.name, **si})
    if len(streams_info) == 1:
        info.update({k: v for k, v in streams_info[0].items() if k not in ("synapse", "source", "delay")
                     and v is not None})
    info["streams"] = streams_info
    x = _sum_terms(pop, terms, ctx)
    if pop.kind == "or":
        ctx.emit(Node(pop.name, "lava_or", (x,), TensorType(pop.out_shape, "binary", None, ctx.types[x].substeps),
                      {}, {}, scope=pop.name))
        info.update(process="LIF", lowering="OR layer: Lava LIF with du = dv = 4095, vth = 0 (fires iff a > 0)")
        return
    if pop.neuron is None:
        bq = to_int(np.round(pop.bias * scale), node=pop.name, what="read-out biases (s b)")
        ctx.emit(Node(pop.name, "lava_readout", (x,), TensorType(pop.out_shape), {}, {"bias": bq}, scope=pop.name))
        info.update(scale=float(scale[0]), process="Readout")
        return
    b = p["alpha"] * pop.bias + p["bias"]
    bias_v = to_int(np.round(64 * scale * b / pop.bias_unit) * pop.bias_unit, node=pop.name,
                    what="neuron biases (64 s b)")
    mant, exp, sat = bias_mant_exp(bias_v)
    info.update(bias_saturated=sat, bias_exp_max=int(exp.max(initial=0)),
                scale=scale.tolist() if np.ptp(scale) else float(scale[0]), vth=_scalar_or_channels(vth).tolist())
    {"lif": _lif_node, "intfire": _intfire_node, "silif": _silif_node, "csilif": _csilif_node}[pop.kind](
        pop, p, x, scale, vth, mant, exp, ctx)
    if pop.membrane:
        main = ctx.nodes[-1]
        ctx.emit(main.with_(name=pop.membrane, attrs=dict(main.attrs, output="membrane"),
                            type=TensorType(pop.out_shape)))
        info["membrane_read_by_host"] = pop.membrane


def membrane_gain(pop: Population) -> np.ndarray:
    """Integer membrane units per float unit of the neuron's ``U`` (per channel)."""
    return 64 * pop.scale / (2 if pop.kind == "csilif" else 1)


def _decay12(beta: np.ndarray, node: str = "") -> np.ndarray:
    return to_int(np.clip(np.round(4096 * (1 - beta)), 0, DECAY_MAX), node=node, what="decays (4096 (1 - beta))")


def _lif_node(pop, p, x, scale, vth, mant, exp, ctx):
    dv = _decay12(p["beta"], pop.name)
    hard = pop.neuron.attrs["reset"] == "zero"
    v_reset = to_int(np.round(64 * scale * p["v_reset"]), node=pop.name, what="reset values (64 s v_reset)")
    params = {"du": np.int64(4095), "dv": _scalar_or_channels(dv), "vth": _scalar_or_channels(vth),
              "bias_mant": mant, "bias_exp": exp}
    if hard and (v_reset != 0).any():
        params["v_reset"] = _scalar_or_channels(v_reset)
    lava_lif = hard and "v_reset" not in params and params["dv"].ndim == 0 and params["vth"].ndim == 0 \
        and int(params["vth"]) <= VTH_MAX and not pop.membrane
    process = "LIF" if lava_lif else "SpikecLIF"
    ctx.emit(Node(pop.name, "lava_lif", (x,), TensorType(pop.out_shape, "binary"),
                  {"reset": pop.neuron.attrs["reset"], "output": "spikes", "process": process}, params, scope=pop.name))
    pop.info.update(process=process, dv=params["dv"].tolist(), du=4095, reset=pop.neuron.attrs["reset"],
                    beta_effective=(1 - params["dv"] / 4096).tolist(), lowering="binary spikes")
    if (p["beta"] == 0).any():
        pop.info.setdefault("notes", []).append("beta = 0 maps to dv = 4095: 1/4096 of v survives a step")


def _intfire_node(pop, p, x, scale, vth, mant, exp, ctx):
    n = pop.neuron
    d = int(n.attrs["max_spikes"])
    unrolled = n.op == "intfire_unrolled"
    dv = _decay12(p["beta"], pop.name)
    params = {"du": np.int64(4095), "dv": _scalar_or_channels(dv), "vth": _scalar_or_channels(vth),
              "bias_mant": mant, "bias_exp": exp}
    t = TensorType(pop.out_shape, "binary", None, d) if unrolled else TensorType(pop.out_shape, "integer", d)
    ctx.emit(Node(pop.name, "lava_intfire", (x,), t, {"max_spikes": d, "rounding": n.attrs["rounding"],
                                                      "unrolled": unrolled, "output": "spikes"}, params,
                  scope=pop.name))
    lowering = (f"unrolled: the count S replayed as binary spikes over D = {d} Lava sub-steps per physical step "
                "(thermometer code), read by binary synapses" if unrolled else
                f"graded payload: S in 0..{d} sent as a graded spike ({max(1, d.bit_length())} message bits) "
                "read by Dense/Conv with num_message_bits > 0")
    pop.info.update(process="SpikecIntFire", lowering=lowering, max_spikes=d, rounding=n.attrs["rounding"],
                    dv=params["dv"].tolist(), du=4095, beta_effective=(1 - params["dv"] / 4096).tolist())


def _approx(name, f, q) -> dict:
    err = np.abs(q - f)
    return {f"{name}_float": f.tolist(), f"{name}_fixed": q.tolist(), f"{name}_max_abs_error": float(err.max(initial=0))}


def _silif_node(pop, p, x, scale, vth, mant, exp, ctx):
    a = p["decay"]
    if ((a < 0) | (a > 1)).any():
        raise refuse(pop.neuron, "a SiLIF decay outside [0, 1]")
    aq = to_int(np.clip(np.round(DECAY_ONE * a), 0, DECAY_ONE), node=pop.name, what="decays (4096 a)")
    kappa = float(pop.neuron.attrs["kappa"])
    k = to_int(np.round(64 * scale * kappa), node=pop.name, what="resets (64 s kappa)")
    params = {"decay": _scalar_or_channels(aq), "vth": _scalar_or_channels(vth), "kappa": _scalar_or_channels(k),
              "bias_mant": mant, "bias_exp": exp}
    ctx.emit(Node(pop.name, "lava_silif", (x,), TensorType(pop.out_shape, "binary"), {"output": "spikes"}, params,
                  scope=pop.name))
    pop.info.update(process="SpikecSiLIF", lowering="binary spikes", approximate=True,
                    decay_quantization=_approx("decay", a, aq / DECAY_ONE),
                    kappa_quantization=_approx("kappa", np.full_like(scale, kappa), k / (64 * scale)),
                    note="12-bit decay A = round(4096 a) (approximate); the decay rounds toward zero like Lava's LIF")


def _csilif_node(pop, p, x, scale, vth, mant, exp, ctx):
    are, aim = p["a_re"], p["a_im"]
    qre = to_int(np.round(DECAY_ONE * are), node=pop.name, what="decays (4096 a_re)")
    qim = to_int(np.round(DECAY_ONE * aim), node=pop.name, what="decays (4096 a_im)")
    unstable = qre ** 2 + qim ** 2 >= DECAY_ONE ** 2
    while unstable.any():   # keep the fixed-point pole inside the unit circle, as the float one is
        qre = np.where(unstable, qre - np.sign(qre), qre)
        qim = np.where(unstable, qim - np.sign(qim), qim)
        unstable = qre ** 2 + qim ** 2 >= DECAY_ONE ** 2
    kappa = float(pop.neuron.attrs["kappa"])
    k = to_int(np.round(64 * scale * kappa), node=pop.name, what="resets (64 s kappa)")
    params = {"a_re": _scalar_or_channels(qre), "a_im": _scalar_or_channels(qim), "vth": _scalar_or_channels(vth),
              "kappa": _scalar_or_channels(k), "bias_mant": mant, "bias_exp": exp}
    ctx.emit(Node(pop.name, "lava_csilif", (x,), TensorType(pop.out_shape, "binary"), {"output": "spikes"}, params,
                  scope=pop.name))
    pole_err = np.abs((qre + 1j * qim) / DECAY_ONE - (are + 1j * aim))
    pop.info.update(process="SpikecCSiLIF", lowering="binary spikes", approximate=True,
                    decay_quantization={**_approx("a_re", are, qre / DECAY_ONE), **_approx("a_im", aim, qim / DECAY_ONE),
                                        "pole_max_abs_error": float(pole_err.max(initial=0)),
                                        "pole_magnitude_fixed_max": float(np.abs(qre + 1j * qim).max() / DECAY_ONE)},
                    kappa_quantization=_approx("kappa", np.full_like(scale, kappa), k / (64 * scale)),
                    note="complex state as two 24-bit integer states (v = Re m, w = Im m); signed 12-bit "
                         "fractional decays (approximate); threshold on Re m >= v_th / 2")


def _host_node(h: HostNode, ctx: _Ctx, pops: dict) -> None:
    n = h.node
    ins, params = [], {f"p_{k}": v for k, v in n.params.items()}
    for i, (kind, src, k) in enumerate(h.inputs):
        if kind == "host":
            x = src
        elif kind == "spikes":
            x = src
            params[f"gain{i}"] = np.float64(1.0)
        elif kind == "count":
            x = src
            if src not in ctx.types:
                inner = ctx.g.node(src).inputs[0]
                ctx.emit(Node(src, "substep_sum", (inner,), TensorType(ctx.types[inner].shape, "integer",
                                                                      ctx.types[inner].substeps), {}, {}))
            params[f"gain{i}"] = np.float64(1.0)
        elif kind == "membrane":
            x = src
            owner = next(p for p in pops.values() if p.membrane == src)
            params[f"gain{i}"] = _scalar_or_channels(membrane_gain(owner)).astype(np.float64)
        else:   # a read-out of a synaptic sum
            x = src
            params[f"gain{i}"] = np.float64(float(pops[src].scale[0]))
        ins.append(ctx.delayed(x, k))
    ctx.emit(Node(n.name, lops.host_op(len(ins)), tuple(ins), TensorType(n.type.shape),
                  {"op": n.op, "attrs": dict(n.attrs), "region": h.region}, params, scope=n.scope))


# -- assembly, calibration ------------------------------------------------------------------
def _name_streams(pops: list) -> None:
    for pop in pops:
        for s in pop.streams:
            if s.op is None:
                s.name = f"{s.source}.to.{pop.name}"
                continue
            base = s.synapse if s.synapse != pop.name else pop.name + ".synapse"
            if pop.kind == "or":
                base = pop.name + ".window"
            s.name = base if s.index == 0 else f"{base}.{s.index}"


def assemble(graph: Graph, layers: list, hosts: dict | None = None, host_gains: dict | None = None) -> Graph:
    hosts = hosts or {}
    pops = {p.name: p for p in layers}
    ctx = _Ctx(graph, host_gains or {})
    for n in graph.nodes:
        if n.op == "input":
            ctx.emit(Node(n.name, "input", (), n.type))
        elif n.name in pops:
            with np.errstate(over="ignore"):   # an overflow to inf is refused by to_int / check_scale, by node
                quantize_population(pops[n.name], ctx, pops)
        elif n.name in hosts:
            _host_node(hosts[n.name], ctx, pops)
    outputs = []
    for o in graph.outputs:
        node = graph.node(o)
        if o in ctx.types:
            outputs.append(o)
        elif node.op in ("flatten", "substep_sum"):
            ctx.emit(Node(o, node.op, (node.inputs[0],), node.type, dict(node.attrs)))
            outputs.append(o)
    scales = {l.name: (float(l.scale[0]) if np.ptp(l.scale) == 0 else [float(v) for v in l.scale]) for l in layers}
    meta = {"quantized_for": "lava", "source_outputs": list(graph.outputs),
            "scales": scales}   # integer units per float unit: read-out y_float ~ y_int / scale; membranes v ~ 64 scale U
    if "schedule" in graph.meta:
        meta["schedule"] = graph.meta["schedule"]
    return Graph(tuple(ctx.nodes), tuple(outputs), meta)


def with_readouts(qgraph: Graph, what=None) -> Graph:
    """``qgraph`` plus state read-out twins ``<population>.<state>`` (states of ``ops.STATES``, ``flags``,
    ``membrane``) of every neuron population (the same dynamics run once)."""
    nodes, names = [], {n.name for n in qgraph.nodes}
    for n in qgraph.nodes:
        nodes.append(n)
        if n.op in lops.STATES and n.attrs.get("output", "spikes") == "spikes":
            for w in (what or lops.STATES[n.op] + ("flags", "membrane")):
                if w not in lops.STATES[n.op] + ("flags", "membrane") or f"{n.name}.{w}" in names:
                    continue
                nodes.append(n.with_(name=f"{n.name}.{w}", attrs=dict(n.attrs, output=w),
                                     type=TensorType(n.type.shape)))
    return Graph(tuple(nodes), qgraph.outputs, qgraph.meta)


def _membrane_name(q: Graph, n: Node) -> str:
    """The membrane twin of population ``n`` in ``with_readouts(q)``."""
    twin = next((m.name for m in q.nodes if m.op == n.op and m.inputs == n.inputs
                 and m.attrs.get("output") == "membrane"), None)
    return twin or f"{n.name}.membrane"


def _population_of(q: Graph, name: str) -> str | None:
    """The population a synapse's sum flows into (through sub-step sums and adds)."""
    for c in q.consumers(name):
        if c.op in ("substep_sum", "add"):
            return _population_of(q, c.name)
        if c.op in lops.STATES or c.op in ("lava_readout", "lava_or"):
            return c.name
    return None


def _conv_wraps(node: Node, x: np.ndarray) -> int:
    """Entries where Lava's Conv (and the reference) wrapped the sum modulo 2^24: recomputed unwrapped."""
    import torch
    a = node.attrs
    xs = x if a.get("num_message_bits", 0) else (x != 0)
    z = torch.from_numpy(np.asarray(xs, dtype=np.float64)).flatten(0, 1)
    y = torch.nn.functional.conv2d(z, torch.from_numpy(np.asarray(node.params["weight"], dtype=np.float64)), None,
                                   a["stride"], a["padding"], a["dilation"], a["groups"])
    return int((y.abs() >= lops.M).sum())


def measure(q: Graph, x) -> tuple[dict, "Trace"]:
    """Run the integer reference with state read-outs; per population: peak |state| (|value| for read-outs),
    overflow events (u wrapped, v saturated, ``a << 6`` beyond 24 bits, a Conv sum wrapped modulo 2^24);
    per host payload: values clipped to the payload range."""
    full = with_readouts(q)
    trace = run(full, x, integer=True)
    peaks = {}
    for n in q.nodes:
        if n.op in lops.STATES and n.attrs.get("output", "spikes") == "spikes":
            vals = [trace.values[f"{n.name}.{s}"] for s in lops.STATES[n.op]] + [trace.values[_membrane_name(full, n)]]
            flags = trace.values[n.name + ".flags"]
        elif n.op == "lava_readout":
            vals, flags = [trace.values[n.name]], np.zeros(1, dtype=np.int64)
        else:
            continue
        peak = max(int(np.abs(v).max(initial=0)) for v in vals)
        peaks[n.name] = {"peak_state": peak, "headroom_bits": round(float(np.log2(lops.M / max(peak, 1))), 3),
                         "u_wrapped": int(((flags & lops.FLAG_U_WRAP) != 0).sum()),
                         "v_saturated": int(((flags & lops.FLAG_V_SAT) != 0).sum()),
                         "input_overflow": int(((flags & lops.FLAG_ACT) != 0).sum()), "conv_wrapped": 0}
        peaks[n.name]["overflow_events"] = int((flags != 0).sum())
    for n in q.nodes:
        if n.op == "lava_conv":
            wraps = _conv_wraps(n, trace.values[n.inputs[0]])
            pop = _population_of(q, n.name)
            if wraps and pop in peaks:
                peaks[pop]["conv_wrapped"] += wraps
                peaks[pop]["overflow_events"] += wraps
        elif n.op == "lava_quant" and n.attrs.get("bits", 0):
            lim = 2 ** (n.attrs["bits"] - 1) - 1
            y = np.floor(trace.values[n.inputs[0]] * np.asarray(n.params["gain"]) + 0.5)
            clipped = int((np.abs(y) > lim).sum())
            peaks[n.name] = {"payload_clipped": clipped, "overflow_events": clipped,
                             "peak_payload": int(np.abs(trace.values[n.name]).max(initial=0))}
    return peaks, trace


@dataclass
class Quantized:
    graph: Graph                      # the integer reference graph
    layers: list                      # Population, in order
    calibration: dict
    notes: list
    hosts: dict = field(default_factory=dict)   # float host node name -> HostNode


def _host_gains(graph: Graph, hosts: dict, x: dict) -> dict:
    """Payload gain of every host value fed into a synapse: its calibration peak onto the payload range."""
    if not hosts:
        return {}
    trace = run(graph, x, record="all")
    lim = 2 ** (PAYLOAD_BITS - 1) - 1
    out = {}
    for name in hosts:
        peak = float(np.abs(trace.values[name]).max(initial=0))
        out[name] = lim / peak if peak > 0 else 1.0
    return out


def quantize(graph: Graph, calib_inputs, *, headroom_bits: int = HEADROOM_BITS, max_rounds: int = 8,
             vth_override: dict | None = None, bias_unit: int = 1) -> Quantized:
    """Quantize ``graph``; scales from the weights, then lowered until ``calib_inputs`` keep headroom.

    ``bias_unit=64`` rounds every neuron bias to whole weight LSBs (netx fixes the bias exponent at 6).
    """
    mapper = _Mapper(graph).run()
    layers = [mapper.pops[k] for k in mapper.order if k in mapper.pops]
    _name_streams(layers)
    x = {i.name: np.asarray(calib_inputs[i.name] if isinstance(calib_inputs, dict) else calib_inputs)
         for i in graph.inputs}
    int_inputs(graph, x)   # refuse what the integer run of calibration would cast to garbage
    host_gains = _host_gains(graph, mapper.hosts, x)
    notes = [n for l in layers for n in l.notes]
    probe = _Ctx(graph, host_gains)
    for layer in layers:
        layer.bias_unit = bias_unit
        if layer.neuron is not None:
            p = _neuron_params(layer.neuron, layer.out_shape[0])
            layer.vth = _max_vth(layer, _stream_weights(layer, p, probe, mapper.pops), p["threshold"])
            if vth_override and layer.name in vth_override:
                layer.vth = int(vth_override[layer.name])
    limit = 2 ** (lops.STATE_BITS - 1 - headroom_bits)
    rounds = 0
    while True:
        q = assemble(graph, layers, mapper.hosts, host_gains)
        peaks, _ = measure(q, x)
        rounds += 1
        changed = False
        for layer in layers:
            m = peaks.get(layer.name)
            if m is None or (vth_override and layer.name in vth_override) or rounds >= max_rounds:
                continue
            if m["peak_state"] > limit or m["overflow_events"]:
                factor = min(limit / max(m["peak_state"], 1), 0.5 if m["overflow_events"] else 1.0)
                if layer.vth > 1:
                    layer.vth = max(1, int(layer.vth * factor))
                    changed = True
                elif layer.vth == 0 and layer.gain > 1e-3:
                    layer.gain *= factor
                    changed = True
        if not changed:
            break
    first = next(iter(x.values()))
    calibration = {"inputs": "the verification inputs", "samples": int(first.shape[1]), "steps": int(first.shape[0]),
                   "rounds": rounds, "headroom_bits_target": headroom_bits, "state_limit": limit,
                   "bias_unit": bias_unit,
                   "per_layer": peaks,
                   "host_payload_gains": host_gains,
                   "overflow": any(p["overflow_events"] for p in peaks.values())}
    return Quantized(q, layers, calibration, notes, mapper.hosts)
