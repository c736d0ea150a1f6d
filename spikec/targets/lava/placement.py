"""Per-step structure on chip: ``concat``, ``slice``, ``sum`` and ``mean`` before a synapse are only placement.

Loihi has no concatenation, slicing or reduction process: which neurons feed which synapse *is* the network's
wiring. Before mapping, ``split`` rewrites every ``linear`` / ``conv2d`` whose input is a chain of ``concat``,
``slice``, ``sum``, ``mean`` (with ``flatten`` / ``reshape`` / ``transpose`` between them) over some source
tensors into one synapse per source, summed (``add``) into the same target: the synaptic streams of one
population, as for a residual sum.

* ``linear`` (a per-step vector input): the source's weight column ``j`` is ``sum gain * W[:, i]`` over the
  positions ``i`` of the linear's input that element ``j`` of the source reaches -- a concat or slice picks
  columns (an unselected neuron gets a zero column), ``sum`` repeats a column over the reduced elements and
  ``mean`` repeats it scaled by ``1/N`` (the quantizer scales that weight as any other).
* ``conv2d`` (``groups == 1``): only a concat / slice of whole channels (spatial positions kept): the source's
  input channels are the conv's input channels they fill.
* The bias stays on the first source's synapse.

Anything else is left as it is (and refused by the mapping, naming the node). The rewritten float graph is run
against the given one by ``products.check`` (a split sum adds in another order: it may differ in the last bit;
the check decides, and the Lava verdict requires it).
"""
import numpy as np

from spikec.ir.graph import Graph, Node, TensorType
from spikec.ops.registry import infer_type
from spikec.targets.lava.ops_table import having

PLACEMENT = ("concat", "slice", "sum", "mean")        # an op that makes a synapse's input a placement
SEEN_THROUGH = PLACEMENT + ("flatten", "reshape", "transpose")


def _leaf(shape) -> np.ndarray:
    return np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)


def _positions(g: Graph, name: str, root: bool = True) -> list | None:
    """``[(source, pos, gain)]``: element ``e`` (row-major) of per-step tensor ``source`` reaches position
    ``pos[e]`` of ``name``'s flattened step (-1: nowhere) weighted ``gain[e]``; None when ``name`` is a leaf."""
    n = g.node(name)
    if n.op not in SEEN_THROUGH or (root and n.op not in PLACEMENT and not _has_placement(g, name)):
        return None
    ins = [_positions(g, i, False) or [(i, _leaf(g.node(i).type.shape).reshape(-1),
                                        np.ones(g.node(i).type.size))] for i in n.inputs]
    shapes = [g.node(i).type.shape for i in n.inputs]
    if n.op in ("flatten", "reshape"):
        return ins[0]   # row-major: flat positions unchanged
    if n.op == "concat":
        ax = n.attrs["axis"]
        full = _leaf(n.type.shape)
        cut = shapes[0][ax]
        parts = [np.take(full, np.arange(cut), ax).reshape(-1),
                 np.take(full, np.arange(cut, n.type.shape[ax]), ax).reshape(-1)]
        return [(s, np.where(p >= 0, part[np.maximum(p, 0)], -1), gain)
                for part, pieces in zip(parts, ins) for s, p, gain in pieces]
    (pieces,) = ins
    x = _leaf(shapes[0])
    to = np.full(x.size, -1, dtype=np.int64)
    scale = 1.0
    if n.op == "slice":
        a = n.attrs
        sel = np.take(x, np.arange(a["start"], a["stop"], a["step"]), a["dim"])
        to[sel.reshape(-1)] = np.arange(sel.size)
    elif n.op == "transpose":
        to[x.transpose(n.attrs["perm"]).reshape(-1)] = np.arange(x.size)
    else:   # sum / mean: every element reaches the one output it is reduced into
        dims = tuple(n.attrs["dims"])
        keep = [d for d in range(x.ndim) if d not in dims]
        out = np.ravel_multi_index(np.indices(x.shape)[keep], [x.shape[d] for d in keep]) if keep else \
            np.zeros(x.shape, dtype=np.int64)
        to[x.reshape(-1)] = out.reshape(-1)
        if n.op == "mean":
            scale = 1.0 / int(np.prod([x.shape[d] for d in dims]))
    return [(s, np.where(p >= 0, to[np.maximum(p, 0)], -1), gain * scale) for s, p, gain in pieces]


def _has_placement(g: Graph, name: str) -> bool:
    n = g.node(name)
    return n.op in PLACEMENT or (n.op in SEEN_THROUGH and any(_has_placement(g, i) for i in n.inputs))


def _linear_columns(w: np.ndarray, pos: np.ndarray, gain: np.ndarray) -> np.ndarray:
    """A source's weight: column ``e`` sums ``gain[e] * w[:, pos[e]]`` (zero where ``pos[e] < 0``)."""
    cols = w[:, np.maximum(pos, 0)] * np.where(pos >= 0, gain, 0.0)
    return cols


def _conv_channels(g: Graph, src: str, pos: np.ndarray, gain: np.ndarray, x_shape) -> np.ndarray | None:
    """``chan[c]``: the conv input channel source channel ``c`` fills (-1: none); None unless whole channels map
    with spatial positions kept and gain 1."""
    shape = g.node(src).type.shape
    if len(shape) != 3 or tuple(shape[1:]) != tuple(x_shape[1:]) or not np.all(gain == 1):
        return None
    p = pos.reshape(shape)
    hw = shape[1] * shape[2]
    chan = np.where(p[:, 0, 0] >= 0, p[:, 0, 0] // hw, -1)
    want = np.where(chan[:, None, None] >= 0, chan[:, None, None] * hw + _leaf(shape[1:])[None], -1)
    return chan if np.array_equal(p, want) else None


def _merged(pieces: list) -> list:
    """Pieces of one source merged (a source read twice gets one synapse): ``[(source, [(pos, gain), ...])]``."""
    out: dict = {}
    for s, p, gain in pieces:
        out.setdefault(s, []).append((p, gain))
    return list(out.items())


class _Emitter:
    def __init__(self):
        self.nodes, self.types, self.made = [], {}, {}

    def emit(self, name, op, inputs, attrs=None, params=None, scope="") -> str:
        proto = Node(name, op, tuple(inputs), TensorType((1,)), dict(attrs or {}), dict(params or {}), scope=scope)
        t = infer_type(proto, [self.types[i] for i in inputs])
        self.nodes.append(proto.with_(type=t))
        self.types[name] = t
        return name

    def keep(self, n: Node) -> None:
        self.nodes.append(n)
        self.types[n.name] = n.type


def _split_synapse(e: _Emitter, g: Graph, n: Node, pieces: list) -> str | None:
    """The streams replacing synapse ``n`` (their sum named ``n.name``), or None when ``n`` stays as it is."""
    x_shape = g.node(n.inputs[0]).type.shape
    w = np.asarray(n.params["weight"], dtype=np.float64)
    streams = []
    for src, reads in _merged(pieces):
        if n.op == "linear":
            if len(x_shape) != 1:
                return None
            ws = sum(_linear_columns(w, p, gain) for p, gain in reads)
            streams.append((src, ws, {}))
        else:
            if n.attrs["groups"] != 1:
                return None
            ws = 0
            for p, gain in reads:
                chan = _conv_channels(g, src, p, gain, x_shape)
                if chan is None:
                    return None
                ws = ws + w[:, np.maximum(chan, 0)] * (chan >= 0)[None, :, None, None]
            streams.append((src, ws, dict(n.attrs)))
    names = []
    for k, (src, ws, attrs) in enumerate(streams):
        params = {"weight": ws}
        if "bias" in n.params:
            params["bias"] = np.asarray(n.params["bias"]) if k == 0 else np.zeros_like(n.params["bias"])
        read = src
        if n.op == "linear" and len(g.node(src).type.shape) != 1:
            read = e.made.get(("flat", src)) or e.emit(f"{src}.flat", "flatten", [src], {"start": 0, "end": -1},
                                                       scope=n.scope)
            e.made[("flat", src)] = read
        names.append(e.emit(f"{n.name}.from.{src}" if len(streams) > 1 else n.name, n.op, [read], attrs, params,
                            scope=n.scope))
    total = names[0]
    for k, other in enumerate(names[1:], 1):
        total = e.emit(n.name if k == len(names) - 1 else f"{n.name}.sum{k}", "add", [total, other], scope=n.scope)
    return total


def split(graph: Graph) -> tuple[Graph, list]:
    """``(graph with synapses over placements split per source, one rewrite record per synapse)``."""
    e, records = _Emitter(), []
    for n in graph.nodes:
        pieces = _positions(graph, n.inputs[0]) if n.op in ("linear", "conv2d") else None
        before, made = len(e.nodes), dict(e.made)
        if pieces is None or _split_synapse(e, graph, n, pieces) is None:
            del e.nodes[before:]
            e.made = made
            e.keep(n)
            continue
        srcs = [s for s, _ in _merged(pieces)]
        records.append({"nodes": [n.name], "placement": True, "as": f"{n.op} {n.name!r} reading {graph.node(n.inputs[0]).op} "
                                                 f"{n.inputs[0]!r}: one {n.op} per source ({', '.join(srcs)}) "
                                                 "summed into its target (a placement, no process)"})
    if not records:
        return graph, []
    return Graph(tuple(e.nodes), graph.outputs, graph.meta), records


SPLIT_INPUT = having("dense_input_weights")   # Norse's recurrent LIF (ops_table.py)


def split_norse_input(graph: Graph) -> tuple[Graph, list]:
    """Norse's recurrent LIF reads ``linear(x, W_in)`` (no bias) through identity input weights: its input synapse
    becomes a node of its own (a Dense into the population), the float values unchanged (``F.linear`` by an identity
    adds one product by 1.0 to exact zeros). Its state reads (``.v``, ``.i``) read the same linear node."""
    nodes, types, made, records = [], {}, {}, []
    for n in graph.nodes:
        w = n.params.get("input_weights") if n.op in SPLIT_INPUT else None
        if w is None or (w.shape[0] == w.shape[1] and np.array_equal(np.asarray(w), np.eye(w.shape[0]))):
            nodes.append(n)
            types[n.name] = n.type
            continue
        key = (n.inputs[0], np.asarray(w).tobytes())
        if key not in made:
            lin = Node(f"{n.name}.input", "linear", n.inputs, TensorType((1,)), {}, {"weight": w}, scope=n.scope)
            lin = lin.with_(type=infer_type(lin, [types[n.inputs[0]]]))
            nodes.append(lin)
            types[lin.name] = lin.type
            made[key] = lin.name
            records.append({"nodes": [n.name], "placement": True, "as": f"Norse's input_weights of {n.name!r} as a linear {lin.name!r} "
                                                     "into the population (identity input weights left in the op)"})
        eye = np.eye(w.shape[0], dtype=np.asarray(w).dtype)
        nodes.append(n.with_(inputs=(made[key],), params=dict(n.params, input_weights=eye)))
        types[n.name] = n.type
    if not records:
        return graph, []
    return Graph(tuple(nodes), graph.outputs, graph.meta), records
