"""Event-driven simulator of a TTFS graph: exact spike times, no time grid (semantics.md 1.4).

Every layer is simulated from the *spike events* of its sources: an event is one spike (neuron ``j``
of a source layer, arriving at ``t_j + delay``); a silent neuron sends none. The B1 membrane is
piecewise linear -- between events its slope ``(1/tau) sum_{arrived j} W_ij`` is constant -- and the
sweep integrates it exactly from event to event in time order (``V += slope * (t_next - t)``, then the
arriving column is added to the slope), up to the window start ``t_min`` (events at or after
``t_min`` carry no charge: in the window the slope is the ramp ``1/tau`` alone). In the window the
first crossing of ``theta`` is solved analytically: ``t_i = t_min + tau (theta_i - V_i(t_min))``, at
``t_min`` if ``V_i(t_min) >= theta_i`` already, silent (``t_max``) if it falls past ``t_max``. A neuron
fires at most once: the simulator keeps one time per neuron, and counts spikes from the event lists.

The effective synaptic matrices (pooling and flatten folded into the weights) are read off the
graph by running its synaptic ops on one-hot charges. Product sub-layers (``ttfs_dynsyn``,
``ttfs_dynmatmul``) use a dynamic-weight synapse: its contribution ``g (value of A) * (charge of B)``
(summed over the contracted dim for a matmul) is evaluated in closed form at ``t_min`` from the simulated
spike times -- exact in value; the mechanism is not a static synapse.

``dt`` (discrete-time mode): every spike -- input encoding included -- is emitted at the first grid
point ``t_min + k dt`` at or after its exact time (a clock-driven neuron sees the crossing at the next
tick); a layer then reads the quantised times. ``T_w / dt`` is the number of distinguishable states
per neuron.
"""
from dataclasses import dataclass, field

import numpy as np

from spikec.ir.errors import BadInput, PassError
from spikec.core.interpreter import run
from spikec.ir.graph import Graph, Node, TensorType

MAX_MATRIX = 1 << 24        # entries of one layer's dense fan-out matrix
CHUNK = 512                 # samples swept together
CLIP_TOL = 1e-12
EPS = float(np.finfo(np.float64).eps)
DYNAMIC = ("ttfs_dynsyn", "ttfs_dynmatmul")
VIEWS = ("flatten", "reshape", "transpose")
LOWER_IS_ACTIVATION = ("relu", "shift_relu", "product_relu")


@dataclass
class SimLayer:
    name: str               # the fire / encode node
    source: str             # the ANN node whose value it carries
    kind: str
    shape: tuple
    t_min: float
    t_ref: float
    t_max: float
    scale: float
    lo: float
    hi: float
    times: np.ndarray       # [N, *shape]; t_max for a silent neuron
    emitted: np.ndarray     # bool: the neuron spiked (t < t_max)
    raw: np.ndarray         # the value before clipping to the window, t_ref - t_unclipped
    clipped: np.ndarray     # bool: raw lies outside the window (beyond the activation's own clip)
    affected: np.ndarray    # bool: clipped, or reads (transitively) a clipped neuron
    synaptic_events: int = 0  # input spikes times their non-zero fan-out into this layer

    @property
    def value(self) -> np.ndarray:
        return self.t_ref - self.times

    @property
    def window(self) -> float:
        return self.t_max - self.t_min


@dataclass
class SimResult:
    layers: dict            # fire/encode node name -> SimLayer, in graph order
    outputs: dict           # graph output name -> decoded values [T, B, ...]
    dt: float | None
    samples: int
    spike_counts: dict = field(default_factory=dict)   # layer -> max spikes of one neuron (from event lists)


@dataclass
class _Synapses:
    charges: list           # charge node names, in column order
    sources: list           # (spike layer node, delay) per charge
    sizes: list             # inputs per charge
    wt: np.ndarray | None   # (n_inputs_total, n_out): row j = the fan-out of input j
    dynsyn: Node | None = None      # product layers: the dynamic-weight synapse
    views: tuple = ()               # product layers: transpose/reshape nodes between charges and dynsyn
    operand_sources: tuple = ()     # product layers: (spike layer node, delay) behind operands a and b


def _spike_source(graph: Graph, name: str):
    """(spike layer node, total delay) behind a charge's input."""
    d = 0.0
    node = graph.node(name)
    while node.op == "ttfs_delay":
        d += float(node.attrs["delay"])
        node = graph.node(node.inputs[0])
    if node.op not in ("ttfs_fire", "ttfs_encode"):
        raise PassError(f"charge input {name!r} is not a TTFS layer (got {node.op})")
    return node.name, d


def _synapses(graph: Graph, fire: Node) -> _Synapses:
    """The synaptic subgraph between a fire node and its charge nodes, as dense fan-out rows."""
    sub, charges, stack = [], [], [fire.inputs[0]]
    seen = set()
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        node = graph.node(name)
        if node.op == "ttfs_charge":
            charges.append(name)
            continue
        sub.append(name)
        stack.extend(node.inputs)
    order = [n.name for n in graph.nodes]
    charges.sort(key=order.index)
    sub_nodes = [graph.node(n) for n in sorted(sub, key=order.index)]
    sources = [_spike_source(graph, graph.node(c).inputs[0]) for c in charges]
    sizes = [graph.node(c).type.size for c in charges]
    dyn = [n for n in sub_nodes if n.op in DYNAMIC]
    if dyn:
        views = tuple(n for n in sub_nodes if n is not dyn[0])
        if len(dyn) != 1 or dyn[0].name != fire.inputs[0] or any(n.op not in VIEWS for n in views):
            raise PassError(f"layer {fire.name!r}: a product sub-layer holds one dynamic synapse fed by views "
                            f"of charges only (found {[n.op for n in sub_nodes]})")
        behind = []
        for name in dyn[0].inputs:
            while name not in charges:
                name = graph.node(name).inputs[0]
            behind.append(sources[charges.index(name)])
        return _Synapses(charges, sources, sizes, None, dyn[0], views, tuple(behind))
    n_out = fire.type.size
    if sum(sizes) * n_out > MAX_MATRIX:
        raise BadInput(f"layer {fire.name!r} needs a {sum(sizes)} x {n_out} fan-out matrix",
                       remedy=f"the event-driven simulator holds dense fan-out matrices of up to {MAX_MATRIX:,} "
                              "entries per layer; simulate a smaller model")
    inputs = [Node(c, "input", (), TensorType(graph.node(c).type.shape)) for c in charges]
    mini = Graph(tuple(inputs + sub_nodes), (fire.inputs[0],))
    rows = []
    for c, size in zip(charges, sizes):
        feed = {}
        for c2 in charges:
            shape = graph.node(c2).type.shape
            feed[c2] = np.zeros((1, size, *shape))
        feed[c] = np.eye(size).reshape(1, size, *graph.node(c).type.shape)
        out = run(mini, feed, record="outputs").values[fire.inputs[0]]
        rows.append(out.reshape(size, n_out))
    return _Synapses(charges, sources, sizes, np.vstack(rows))


def _quantize(t, t_min, dt):
    if dt is None:
        return t
    k = np.ceil((t - t_min) / dt - 1e-9)
    return t_min + np.maximum(k, 0.0) * dt


def _sweep(wt: np.ndarray, arrivals: np.ndarray, t_min: float, tau: float) -> tuple[np.ndarray, int]:
    """``V(t_min)`` of every neuron by exact piecewise-linear integration over the sorted events.

    ``arrivals`` is ``[N, n_in]`` (``inf``: no event). Returns ``V [N, n_out]`` and the synaptic events.
    """
    n, n_out = arrivals.shape[0], wt.shape[1]
    v_out = np.zeros((n, n_out))
    nnz = (wt != 0).sum(1)
    events = 0
    rows = wt / tau
    for lo in range(0, n, CHUNK):
        arr = arrivals[lo:lo + CHUNK]
        m = arr.shape[0]
        order = np.argsort(arr, axis=1, kind="stable")
        ts = np.take_along_axis(arr, order, 1)
        count = (ts < t_min).sum(1)
        events += int(nnz[order[ts < t_min]].sum()) if count.any() else 0
        v = np.zeros((m, n_out))
        slope = np.zeros((m, n_out))
        t_prev = np.where(count > 0, ts[:, 0], t_min)
        for r in range(int(count.max(initial=0))):
            active = r < count
            t = np.where(active, ts[:, r], t_prev)
            v += slope * (t - t_prev)[:, None]
            add = rows[order[:, r]]
            add[~active] = 0.0
            slope += add
            t_prev = t
        v += slope * (t_min - t_prev)[:, None]
        v_out[lo:lo + m] = v
    return v_out, events


def simulate(graph: Graph, x: np.ndarray, *, dt: float | None = None, cache: dict | None = None) -> SimResult:
    """Run the TTFS ``graph`` event by event on inputs ``[T, B, ...]`` (T*B independent inferences)."""
    x = np.asarray(x, dtype=np.float64)
    (inp,) = graph.inputs
    if tuple(x.shape[2:]) != inp.type.shape:
        raise BadInput(f"inputs have per-step shape {tuple(x.shape[2:])}, the graph expects {inp.type.shape}")
    n = x.shape[0] * x.shape[1]
    if dt is not None and not dt > 0:
        raise BadInput(f"dt must be > 0, got {dt}")
    cache = {} if cache is None else cache
    layers: dict = {}
    for node in graph.nodes:
        a = node.attrs
        if node.op == "ttfs_encode":
            val = x.reshape(n, *inp.type.shape) * a["gain"]
            tol = CLIP_TOL * (a["t_max"] - a["t_min"])
            clipped = (val > a["hi"] + tol) | (val < a["lo"] - tol)
            t = _quantize(a["t_ref"] - np.clip(val, a["lo"], a["hi"]), a["t_min"], dt)
            layers[node.name] = SimLayer(node.name, inp.name, "input", inp.type.shape, a["t_min"], a["t_ref"],
                                         a["t_max"], a["gain"], a["lo"], a["hi"], t, t < a["t_max"], val, clipped,
                                         clipped.copy())
        elif node.op == "ttfs_fire":
            layers[node.name] = _fire(graph, node, layers, dt, cache, n)
    outputs = {}
    for o in graph.outputs:
        d = graph.node(o)
        if d.op != "ttfs_decode":
            raise PassError(f"graph output {o!r} is not a ttfs_decode node")
        src = layers[d.inputs[0]]
        outputs[o] = ((d.attrs["t_ref"] - src.times) / d.attrs["scale"]).reshape(x.shape[0], x.shape[1], *src.shape)
    counts = {}
    for k, l in layers.items():  # spikes per neuron, counted from the event list (sample, neuron)
        ev = np.argwhere(l.emitted.reshape(n, -1))
        counts[k] = int(np.unique(ev, axis=0, return_counts=True)[1].max()) if len(ev) else 0
    return SimResult(layers, outputs, dt, n, counts)


def _through_views(graph, syn: _Synapses, arrays: dict) -> dict:
    """Charge arrays ``[N, *shape]`` carried through the product layer's views to the dynamic synapse's inputs."""
    if not syn.views:
        return arrays
    inputs = [Node(c, "input", (), TensorType(graph.node(c).type.shape)) for c in syn.charges]
    mini = Graph(tuple(inputs) + syn.views, tuple(dict.fromkeys(syn.dynsyn.inputs)))
    tr = run(mini, {c: a[None] for c, a in arrays.items()}, record="all")
    return {name: tr.values[name][0] for name in syn.dynsyn.inputs}


def _fire(graph, node, layers, dt, cache, n) -> SimLayer:
    a = node.attrs
    t_min, t_max, tau = a["t_min"], a["t_max"], a["tau"]
    shape = node.type.shape
    if node.name not in cache:
        cache[node.name] = _synapses(graph, node)
    syn = cache[node.name]
    srcs = [layers[s] for s, _ in syn.sources]
    arrivals = [np.where(l.emitted, l.times + d, np.inf).reshape(n, -1) for l, (_, d) in zip(srcs, syn.sources)]
    affected_in = [l.affected.reshape(n, -1) for l in srcs]
    if syn.dynsyn is None:
        arr = np.hstack(arrivals)
        v, events = _sweep(syn.wt, arr, t_min, tau)
        reach = (np.abs(syn.wt) > 0).astype(np.float64)
        affected = (np.hstack(affected_in).astype(np.float64) @ reach) > 0
        # the magnitude the sum cancelled: float64 rounding of the crossing scales with it
        mag = (np.clip(t_min - np.where(np.isinf(arr), t_min, arr), 0.0, None) @ np.abs(syn.wt)) / tau
        terms = syn.wt.shape[0]
    else:
        d = syn.dynsyn.attrs
        q = {c: np.clip(t_min - np.where(np.isinf(arr), t_min, arr), 0.0, None).reshape(n, *graph.node(c).type.shape)
             for arr, c in zip(arrivals, syn.charges)}
        aff = {c: af.reshape(n, *graph.node(c).type.shape).astype(np.float64)
               for af, c in zip(affected_in, syn.charges)}
        q, aff = _through_views(graph, syn, q), _through_views(graph, syn, aff)
        ca, cb = syn.dynsyn.inputs
        g = d["gain"]
        if syn.dynsyn.op == "ttfs_dynmatmul":
            v = g * ((q[ca] - d["l_a"]) @ q[cb]) - (g * d["l_b"]) * q[ca].sum(-1, keepdims=True)
            mag = abs(g) * (np.abs(q[ca] - d["l_a"]) @ q[cb]) + abs(g * d["l_b"]) * q[ca].sum(-1, keepdims=True)
            affected = (aff[ca].max(-1, keepdims=True) + aff[cb].max(-2, keepdims=True)) > 0
            terms = q[ca].shape[-1]
            events = int(np.prod(shape)) * terms * n     # one multiply per term: MACs
        else:
            v = g * (q[ca] - d["l_a"]) * q[cb] - (g * d["l_b"]) * q[ca]
            mag = abs(g) * np.abs(q[ca] - d["l_a"]) * q[cb] + abs(g * d["l_b"]) * q[ca]
            affected = (aff[ca] + aff[cb]) > 0
            terms = 1
            events = int(np.prod(shape)) * n
        v = np.broadcast_to(v / tau, (n, *shape)).reshape(n, -1)
        mag = np.broadcast_to(mag / tau, (n, *shape)).reshape(n, -1)
        affected = np.broadcast_to(affected, (n, *shape)).reshape(n, -1)
    theta = np.asarray(node.params["threshold"]).reshape(1, -1)
    t_cross = t_min + tau * (theta - v)                   # the ramp's crossing, unclipped
    raw = a["t_ref"] - t_cross
    t = np.clip(t_cross, t_min, None)
    t = _quantize(t, t_min, dt)
    silent = t >= t_max
    t = np.where(silent, t_max, t)
    # beyond the window by more than float64 rounding: clipped (a value at the edge up to rounding is not)
    tol = CLIP_TOL * (t_max - t_min) + EPS * (terms + 8) * (tau * (mag + np.abs(theta)) + abs(a["t_ref"]))
    clipped = raw > a["hi"] + tol
    if a["activation"] not in LOWER_IS_ACTIVATION:
        clipped |= raw < a["lo"] - tol
    affected = affected | clipped
    r = lambda z: z.reshape(n, *shape)
    return SimLayer(node.name, a["source"], a["activation"], shape, t_min, a["t_ref"], t_max, a["scale"], a["lo"],
                    a["hi"], r(t), r(~silent), r(raw), r(clipped), r(affected), events)
