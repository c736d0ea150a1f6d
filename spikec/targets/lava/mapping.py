"""Map the float graph onto Loihi 2 *populations* fed by *synaptic streams*, and host partitions.

A population is a neuron layer, a read-out or a max-pool OR layer, fed by one or more synaptic streams
whose integer sums Lava adds in the population's input port:

    float   X = sum_i A_i(src_i delayed by k_i) + b           (conv2d / linear, pools folded)
    fixed   a = sum_i Wq_i src_i                                (Dense, DelayDense, Conv processes)

Streams come from ``add`` nodes (residuals, TDM dual kernels ``W_a x_t - W_b x_{t-1}``), from sums of
spike tensors before a synapse (``W (s1 + s2) = W s1 + W s2``) and from ``delay`` nodes (``x_{t-k}``:
DelayDense, or a delay relay before a Conv). A source is the graph input (binary or integer
spikes), a neuron's spikes (binary, or the integer-firing neuron's graded payload), the unrolled
integer neuron's binary sub-step spikes, an OR layer, or a host value.

Dense float ops (``host.HOST``), and max pooling of real values, go to *host partitions*: a host reads spikes, membranes, sub-step counts or
synaptic sums (read-outs) from the chip; connected host nodes share one region (one host process).
Graph outputs that are synaptic expressions become read-outs; a LIF population's state read as a graph output (lif's
membrane, snnTorch's ``mem``, Norse's ``v``: ``ops_table.LavaOp.reads``) is recorded from the population
every step (``Population.reads``). Real-valued graph inputs are sent as 8-bit graded spikes into the synapses that
read them (their gain from calibration). Anything else is refused with the node named.
"""
from dataclasses import dataclass, field

import numpy as np

from spikec.ir.errors import UnsupportedOp
from spikec.ir.graph import Graph, Node
from spikec.targets.lava import max_tree, unit_views
from spikec.targets.lava.pooling import Operator, check_or_shape, operator_of, or_operator
from spikec.targets.lava.neurons import NEURONS as NEURON_LOWERINGS
from spikec.targets.lava.ops_table import KIND_LIF, entry
from spikec.targets.lava.vocabulary import HOST_OP, NEURON, SYNAPSE, refuse, role, unmapped

READOUTS = ("conv2d", "linear", "avgpool2d", "add", "substep_sum")   # synaptic expressions a read-out can sum
STATE_READ = ("a neuron's current (snnTorch's syn, Norse's i) is Lava's u, which the network does not record, and a "
              "host reads lif's pre-reset membrane only; output the membrane (snnTorch's mem, Norse's v) or the "
              "spikes, or read the current with --target none")


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
    def synapse(self) -> str | None:
        """The float synapse node (conv2d / linear, after any folded sum pool; the max pool of an OR layer)."""
        if self.op is None:
            return None
        return next((n.name for n in reversed(self.op.nodes) if role(n.op) == SYNAPSE), self.op.nodes[-1].name)


@dataclass
class Population:
    """One quantized population (neuron layer, read-out or OR layer) and the streams that feed it.

    Mutable: calibration lowers ``vth`` / ``gain`` round by round, assembly records ``scale`` and ``info``."""
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
    pool: Node | None = None   # a max pool of the streams' sum before the neuron (max_tree.py)
    reads: dict = field(default_factory=dict)   # float state-read twin that is a graph output -> integer output
    info: dict = field(default_factory=dict)

    @property
    def synapse(self) -> str | None:
        return next((s.name for s in self.streams if s.op is not None), None)


@dataclass
class HostNode:
    node: Node
    inputs: list               # (kind, float source, delay): kind spikes | count | membrane | readout | host
    region: int = 0            # renumbered while regions merge


@dataclass(frozen=True)
class Mapping:
    layers: list               # Population, in float-graph order, streams named
    hosts: dict                # float host node name -> HostNode


def _reads_spikes(n: Node) -> bool:
    """A neuron node outputting its spikes (lif's ``output``, the framework neurons' ``read``); Norse's LI read-out
    is its ``v``."""
    if n.op == "li_norse":
        return n.attrs.get("read", "v") == "v"
    return n.attrs.get("output", "spikes") == "spikes" and n.attrs.get("read", "spikes") == "spikes"


def _is_neuron(n: Node) -> bool:
    return role(n.op) == NEURON and _reads_spikes(n)


def _is_twin(n: Node) -> bool:
    """A state read-out of a neuron run: lif's ``output="membrane"``, a framework neuron's ``read`` of a state."""
    return role(n.op) == NEURON and not _reads_spikes(n) and n.attrs.get("output", "spikes") in ("spikes",
                                                                                                "membrane")


def _is_host(n: Node, g: Graph | None = None) -> bool:
    """A host partition node: a dense float op, or (given the graph) a max pool of real values."""
    if g is not None and unit_views.input_view(g, n):   # an input viewed as (C, 1, L): the input itself
        return False
    return role(n.op) == HOST_OP or (g is not None and _real_pool(g, n))


def _real_pool(g: Graph, n: Node) -> bool:
    """A max pool of real values on the host: one the chip's max tree (max_tree.py) does not compute."""
    return n.op == "maxpool2d" and g.node(n.inputs[0]).type.kind == "real" and not tree_pool(g, n)


def tree_pool(g: Graph, n: Node) -> bool:
    """A max pool of real values the chip computes as a max tree (max_tree.on_chip) of a synaptic sum."""
    return max_tree.on_chip(g, n, _is_neuron, _is_twin) and _synaptic(g, g.node(n.inputs[0]))


def _synaptic(g: Graph, n: Node) -> bool:
    """``n`` is a sum of synapses (conv2d / linear, added, averaged after a conv): what a max tree's Delta receives;
    not a host value (a host partition's output would feed the tree directly, which the tree does not take)."""
    if n.op in ("conv2d", "linear"):
        return True
    if n.op == "add":
        return all(_synaptic(g, g.node(i)) for i in n.inputs)
    return n.op in ("avgpool2d", "substep_sum") and _synaptic(g, g.node(n.inputs[0]))


def _key(g: Graph, n: Node) -> str:
    """How the walk reads node ``n``: its role for neurons and host nodes, else its op."""
    if _is_host(n, g):
        return HOST_OP
    return NEURON if role(n.op) == NEURON else n.op


def _neuron_kind(n: Node) -> str:
    return NEURON_LOWERINGS[n.op].kind


def _is_count(g: Graph, n: Node) -> bool:
    """The count of an unrolled neuron's binary sub-step spikes (a synapse sums its D sub-steps anyway)."""
    return n.op == "substep_sum" and "bias" not in n.params and g.node(n.inputs[0]).type.kind == "binary"


def map_graph(graph: Graph) -> Mapping:
    """The populations and host nodes of ``graph``; refuses what cannot map, naming the node."""
    for n in graph.nodes:   # first the ops with no mapping at all, so the refusal names them
        if unmapped(n.op) is not None:
            raise refuse(n, unmapped(n.op))
    for inp in graph.inputs:
        if inp.type.substeps != 1:
            raise refuse(inp, "sub-step time bases are not mapped on inputs")
    m = _Mapper(graph)
    outputs = set(graph.outputs)
    for n in graph.nodes:
        if _is_neuron(n):
            streams, bias, nodes, notes = m.parse_sum(n.inputs[0])
            pool = graph.node(n.inputs[0]) if tree_pool(graph, graph.node(n.inputs[0])) else None
            m.add(Population(n.name, _neuron_kind(n), n, streams, bias, n.type.shape, nodes, notes, pool=pool))
        elif _is_host(n, graph):
            m.host(n)
        elif n.name in outputs and n.op in READOUTS \
                and n.name not in m.pops and not _is_count(graph, n):
            m.readout(n)
        elif n.name in outputs and n.op == "maxpool2d":
            m.or_pool(n)
    for n in graph.nodes:
        if n.name in outputs and _is_twin(n):
            m.state_read(n)
    _check_coverage(graph, m)
    first = {}
    for h in m.hosts.values():   # regions numbered 0, 1, ... in order of their first node
        h.region = first.setdefault(h.region, len(first))
    layers = [m.pops[k] for k in m.order if k in m.pops]
    _name_streams(layers)
    return Mapping(layers, m.hosts)


class _Mapper:
    """The walk over synaptic expressions: populations, host nodes and the float nodes they use."""

    def __init__(self, graph: Graph):
        self.g = graph
        self.pops: dict[str, Population] = {}
        self.hosts: dict[str, HostNode] = {}
        self.used: set = set()
        self.order: list = []          # population / host names in float-graph order

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

    def parse_sum(self, name: str):
        """``(streams, float bias (C,), float nodes, notes)`` of the synaptic expression ``name`` (``SUMS``)."""
        n = self.g.node(name)
        parse = SUMS.get(HOST_OP if _is_host(n, self.g) else n.op)
        found = parse(self, n) if parse is not None else None
        if found is None:
            raise refuse(n, "a population's input must be a sum of synaptic streams (conv2d/linear, optionally "
                            "pooled, delayed or added) or a host value")
        return found

    def _sum_add(self, n: Node):
        s1, b1, n1, t1 = self.parse_sum(n.inputs[0])
        s2, b2, n2, t2 = self.parse_sum(n.inputs[1])
        return s1 + s2, b1 + b2, n1 + n2 + [n], t1 + t2

    def _sum_substeps(self, n: Node):
        if self.g.node(n.inputs[0]).type.kind != "real":
            return None
        s, b, ns, t = self.parse_sum(n.inputs[0])
        if "bias" in n.params:
            b = b + np.asarray(n.params["bias"], dtype=np.float64)
        return s, b, ns + [n], t

    def _sum_pooled(self, n: Node):
        return self._sum_synapse(n) if self.g.node(n.inputs[0]).op == "conv2d" else None

    def _sum_max(self, n: Node):
        """A max pool of a synaptic sum, on chip as a max tree: its bias (one per channel) added after the max."""
        if not tree_pool(self.g, n):
            return None
        s, b, ns, t = self.parse_sum(n.inputs[0])   # synapses only (tree_pool: no host value under the pool)
        return s, b, ns + [n], t

    def _sum_synapse(self, n: Node):
        g = self.g
        op = operator_of(g, n)
        sources = self.parse_source(op.src)
        shapes = {g.node(s).type.shape for s, _ in sources}
        if len(shapes) != 1:
            raise refuse(n, f"its input sums tensors of shapes {sorted(shapes)}")
        return ([Stream(op, s, d, i) for i, (s, d) in enumerate(sources)], op.bias.copy(), list(op.nodes),
                list(op.notes))

    def _sum_direct(self, n: Node):
        sources = self.parse_source(n.name)
        if any(not _is_host(self.g.node(s), self.g) for s, _ in sources):
            raise refuse(n, "a population's input must come through a synapse (conv2d/linear) or from a host "
                            "partition")
        return [Stream(None, s, d) for s, d in sources], np.zeros(n.type.shape[0]), [], []

    def parse_source(self, name: str) -> list:
        """``[(source, delay)]``: the spike sources (or host values) a synapse reads, summed (``SOURCES``)."""
        n = self.g.node(name)
        parse = SOURCES.get(_key(self.g, n))
        found = parse(self, n) if parse is not None else None
        if found is None:
            raise refuse(n, "a synapse's input must be spikes (the graph input, a neuron, a max pool over spikes), "
                            "a delay or a sum of those, or a host value")
        return found

    def _source_delay(self, n: Node):
        self.used.add(n.name)
        return [(s, d + int(n.attrs["steps"])) for s, d in self.parse_source(n.inputs[0])]

    def _source_add(self, n: Node):
        self.used.add(n.name)
        return self.parse_source(n.inputs[0]) + self.parse_source(n.inputs[1])

    def _source_count(self, n: Node):
        if not _is_count(self.g, n):
            return None
        self.used.add(n.name)
        return self.parse_source(n.inputs[0])

    def _source_itself(self, n: Node):
        return [(n.name, 0)]

    def _source_view(self, n: Node):
        """A graph input viewed as (C, 1, L) (a Conv1d's first input, unit_views.input_view): sent so."""
        if not unit_views.input_view(self.g, n):
            return None
        self.used.add(n.name)
        return [(n.name, 0)]

    def _source_neuron(self, n: Node):
        return [(n.name, 0)] if _is_neuron(n) else None   # a membrane twin is no spike source

    def or_pool(self, n: Node) -> str:
        if n.name in self.pops:
            return n.name
        in_shape = self.g.node(n.inputs[0]).type.shape
        check_or_shape(n, in_shape)
        sources = self.parse_source(n.inputs[0])
        if len(sources) != 1:
            raise refuse(n, "max pooling of a sum of spike tensors is a max, not an OR")
        src, delay = sources[0]
        if self.g.node(src).type.kind != "binary":
            raise refuse(n, "max pooling of integer (graded) spikes is a max, not an OR: unroll the integer neuron "
                            "first (pass unroll_virtual_steps) so that it pools binary sub-step spikes")
        c = n.type.shape[0]
        op = or_operator(n, src, in_shape)
        self.add(Population(n.name, "or", None, [Stream(op, src, delay)], np.zeros(c), n.type.shape, [n]))
        return n.name

    def host(self, n: Node):
        inputs = [self._host_input(n, i) for i in n.inputs]
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

    def _host_input(self, n: Node, name: str) -> tuple:
        """``(kind, float source, delay)`` of host node ``n``'s input ``name``."""
        g = self.g
        src, k = g.node(name), 0
        while src.op == "delay":
            k += int(src.attrs["steps"])
            self.used.add(src.name)
            src = g.node(src.inputs[0])
        if src.op == "add" and not _synaptic(g, src):   # a sum of spike tensors (a SEW block's ADD): no read-out
            e = refuse(src, f"host node {n.name!r} reads this sum of spike tensors, and a host reads spikes, a "
                            "membrane, a synaptic sum or another host value, not a sum of spikes (e.g. SpikingJelly's "
                            "SEW 'IAND' after an 'ADD' block: 1 - x of a count)")
            raise UnsupportedOp(e.what, where=e.where, remedy="one connect_f for every SEW block ('ADD' maps on chip), "
                                "or read the spikes themselves; or deploy this model with --target onnx")
        read = HOST_READS.get(_key(g, src))
        kind = read(self, src) if read is not None else None
        if kind is None:
            raise refuse(src, f"host node {n.name!r} cannot read it from the chip (spikes, a membrane, a "
                              "synaptic sum or another host value)")
        return kind, src.name, k

    def _read_host(self, src: Node) -> str:
        return "host"

    def _read_spikes(self, src: Node) -> str:
        if src.type.kind == "real":
            raise refuse(src, "a host partition reads chip values; a real-valued input goes to the chip only as graded "
                              "spikes into a synapse (conv2d/linear)")
        return "spikes"

    def _read_or(self, src: Node) -> str:
        self.or_pool(src)
        return "spikes"

    def _read_neuron(self, src: Node) -> str:
        if _is_neuron(src):
            return "spikes"
        if "read" in src.attrs:
            raise refuse(src, STATE_READ)
        _membrane_owner(self.g, src, self.pops).membrane = src.name   # a membrane twin
        self.used.add(src.name)
        return "membrane"

    def state_read(self, n: Node) -> None:
        """Record twin ``n`` (a graph output) from its population: ``pop.reads[n] = integer output``."""
        if "read" in n.attrs:
            what = entry(n.op).reads.get(n.attrs["read"])
            if what is None:
                raise refuse(n, STATE_READ)
            owner = next((m for m in self.g.nodes if _is_neuron(m) and m.op == n.op and m.inputs == n.inputs
                          and dict(m.attrs, read=n.attrs["read"]) == dict(n.attrs) and m.name in self.pops), None)
            spikes_as = entry(n.op).zero_reset_spikes_as
            if owner is None and spikes_as and n.attrs["reset"] == "zero":
                # the frontend's zero-reset Leaky spikes are spikec's lif (hard reset): its post-reset v is this mem
                owner = next((m for m in self.g.nodes if _is_neuron(m) and m.op == spikes_as and m.inputs == n.inputs
                              and m.attrs.get("reset") == "zero" and m.name in self.pops
                              and np.array_equal(m.params["beta"], n.params["beta"])), None)
            if owner is None and entry(n.op).integrates_alone and n.attrs.get("reset") == "none":
                # no reset: the state does not depend on the spikes, which nothing reads: the read is a population
                # of its own that never fires (framework_neurons: a leaky integrator, standard_integrator.py)
                streams, bias, nodes, notes = self.parse_sum(n.inputs[0])
                self.add(Population(n.name, _neuron_kind(n), n, streams, bias, n.type.shape, nodes, notes))
                return
            if owner is None:
                raise refuse(n, "a state read is recorded from its spiking neuron's population, which is not in the "
                                "graph: output the neuron's spikes too (or, for a membrane read-out, no reset)")
            pop = self.pops[owner.name]
        else:
            pop, what = _membrane_owner(self.g, n, self.pops, host=False), "membrane"
        if pop.kind != KIND_LIF:
            raise refuse(n, f"the state of a {pop.kind} population is not recorded (only LIF populations record "
                            "theirs); output its spikes")
        pop.reads[n.name] = what
        self.used.add(n.name)

    def _read_count(self, src: Node) -> str:
        if _is_count(self.g, src) and _is_neuron(self.g.node(src.inputs[0])):
            self.used.add(src.name)
            return "count"
        return self._read_sum(src)

    def _read_sum(self, src: Node) -> str:
        self.readout(src)
        return "readout"


# how a synaptic expression is read, by op (or role): a population's input sum, and the sources a synapse reads
SUMS = {"add": _Mapper._sum_add, "substep_sum": _Mapper._sum_substeps, "conv2d": _Mapper._sum_synapse,
        "linear": _Mapper._sum_synapse, "avgpool2d": _Mapper._sum_pooled, "delay": _Mapper._sum_direct,
        "maxpool2d": _Mapper._sum_max,
        HOST_OP: _Mapper._sum_direct}
SOURCES = {"delay": _Mapper._source_delay, "add": _Mapper._source_add, "substep_sum": _Mapper._source_count,
           "maxpool2d": lambda m, n: [(m.or_pool(n), 0)], "input": _Mapper._source_itself,
           "reshape": _Mapper._source_view,
           NEURON: _Mapper._source_neuron, HOST_OP: _Mapper._source_itself}
# what a host partition reads from a chip value, by op (or role): spikes, a count, a membrane, a read-out sum
HOST_READS = {HOST_OP: _Mapper._read_host, "input": _Mapper._read_spikes, NEURON: _Mapper._read_neuron,
              "maxpool2d": _Mapper._read_or, "substep_sum": _Mapper._read_count,
              **{op: _Mapper._read_sum for op in READOUTS if op != "substep_sum"}}


def _membrane_owner(g: Graph, twin: Node, pops: dict, host: bool = True) -> Population:
    """The population whose membrane ``twin`` reads; refuses a twin of no on-chip neuron, or a second one."""
    neuron = next((m for m in g.nodes if _is_neuron(m) and _neuron_kind(m) == _neuron_kind(twin)
                   and m.inputs == twin.inputs and dict(m.attrs, output="membrane") == dict(twin.attrs)),
                  None)   # (an unrolled integer neuron keeps an ``intfire`` membrane twin)
    if neuron is None or neuron.name not in pops:
        never = "threshold" in twin.params and bool((np.asarray(twin.params["threshold"]) >= np.finfo(float).max).all())
        raise refuse(twin, "a synaptic current read as an output (snnTorch's syn: a lif that never fires, read as its "
                     "membrane) is Lava's u, which the target does not record" if never else
                     "a membrane read-out needs its neuron on the chip")
    pop = pops[neuron.name]
    if host and pop.membrane not in (None, twin.name):
        raise refuse(twin, "a second membrane read-out of one population")
    return pop


def _check_coverage(g: Graph, m: _Mapper) -> None:
    """Every float node belongs to a population, a host or a spike output; folded synapses have one reader."""
    outputs = set(g.outputs)
    for n in g.nodes:
        if n.op == "input" or n.name in m.used or n.name in m.hosts:
            continue
        if _is_twin(n) and not g.consumers(n.name) and n.name not in outputs:
            continue   # an unread membrane twin
        if _is_twin(n):
            raise refuse(n, STATE_READ if "read" in n.attrs else
                         "a membrane read-out is deployable only into a host partition")
        if n.op == "flatten" and n.name in outputs and g.node(n.inputs[0]).name in m.pops:
            continue   # a flattened spike output: the population's spikes, reshaped
        if n.op == "substep_sum" and n.name in outputs and "bias" not in n.params \
                and g.node(n.inputs[0]).name in m.pops:
            continue   # the count of an unrolled neuron as a graph output
        raise refuse(n, "it is neither part of a synapse feeding a population or a host, nor a spike output")
    for h in m.hosts.values():
        if h.node.name in outputs:
            raise refuse(h.node, "a host value as a graph output is not recorded by the Lava network")
    for pop in m.pops.values():
        inside = {x.name for x in pop.nodes} | {pop.name}
        if pop.neuron is not None:   # the neuron's membrane twin reads the same synaptic sum
            inside |= {c.name for c in g.nodes if _is_twin(c) and c.inputs == pop.neuron.inputs}
        for x in pop.nodes:
            if x.name == pop.name:
                continue
            if x.name in outputs:
                raise refuse(x, "an intermediate of a folded synapse cannot be a graph output")
            bad = [c for c in g.consumers(x.name) if c.name not in inside]
            if bad:
                raise refuse(x, f"its value is also read by {bad[0].name!r}; a folded synapse must have one "
                                "consumer")


def _name_streams(pops: list) -> None:
    """Name each stream's integer synapse node after its float synapse (``.1``, ``.2`` for sums of sources)."""
    for pop in pops:
        for s in pop.streams:
            if s.op is None:
                s.name = f"{s.source}.to.{pop.name}"
                continue
            base = s.synapse if s.synapse != pop.name else pop.name + ".synapse"
            if pop.kind == "or":
                base = pop.name + ".window"
            s.name = base if s.index == 0 else f"{base}.{s.index}"
