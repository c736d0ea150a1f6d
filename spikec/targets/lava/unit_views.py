"""A Conv1d network in Lava's layouts: the frontend's ``(C, L) <-> (C, 1, L)`` views taken out of the chip's way.

The frontend writes a Conv1d (and a MaxPool1d / AvgPool1d) as the 2-d op on the step viewed as ``(C, 1, L)``,
between two ``reshape`` nodes. On Lava a ``(C, L)`` population is a vector and a ``(C, 1, L)`` one a ``(W, H, C)``
grid, so each view would be a host partition. Three rewrites, each exact in real arithmetic (row-major order is the
same; the Lava target proves the rewritten graph against the given one on the verification inputs,
``products.check``), repeated until none applies:

- a view ``(C, 1, L) -> (C, L)`` read only by per-channel element-wise ops (a neuron or a batchnorm whose parameters
  are scalars or one per channel, a constant ``scale``) moves after them: they run on ``(C, 1, L)``, and each is
  viewed back for whatever read it (``<name>.1d``; a graph output keeps its name and shape);
- two views in a row are one; a view to its input's own shape is nothing;
- a flatten of the view ``(C, 1, L) -> (C, L)`` is the flatten of its input.

A graph input ``(C, L)`` viewed as ``(C, 1, L)`` is sent in the grid's layout directly (``input_view``: the mapping
takes the view for the input, the lowering lays the input out so).
"""
import numpy as np

from spikec.ir.errors import IRError
from spikec.ir.graph import Graph, Node, TensorType
from spikec.ops import OPS
from spikec.ops.structure import unit_view
from spikec.targets.lava.layout import lava_shape


def _drops_unit(g: Graph, n: Node) -> bool:
    """A reshape ``(C, 1, L) -> (C, L)``."""
    return n.op == "reshape" and unit_view(g.node(n.inputs[0]).type.shape, n.type.shape) == "drops"


def _per_channel(n: Node, channels: int) -> bool:
    """An element-wise op of one input whose parameters are scalars or one per channel (axis 0 either way)."""
    if len(n.inputs) != 1:
        return False
    elementwise = n.op in ("batchnorm", "scale") or OPS[n.op].neuron
    return elementwise and all(np.ndim(v) <= 1 and np.size(v) in (1, channels) for v in n.params.values())


def input_view(g: Graph, n: Node) -> bool:
    """A graph input ``(C, L)`` viewed as ``(C, 1, L)`` by ``n``, its only reader, itself read by synapses only."""
    if n.op != "reshape" or g.node(n.inputs[0]).op != "input":
        return False
    readers = g.consumers(n.name)   # synapses only (a Conv1d's conv2d): a host op reads the input as it is
    return unit_view(g.node(n.inputs[0]).type.shape, n.type.shape) == "adds" \
        and [c.name for c in g.consumers(n.inputs[0])] == [n.name] and n.inputs[0] not in g.outputs \
        and bool(readers) and all(r.op in ("conv2d", "linear") for r in readers) and n.name not in g.outputs


def rewrite(graph: Graph) -> tuple[Graph, list]:
    """``(graph, one record per rewrite)``; the graph itself when nothing applies."""
    records = []
    while True:
        step = _move_one(graph) or _merge_one(graph)
        if step is None:
            return graph, records
        graph, record = step
        records.append(record)


def _replace(graph: Graph, nodes: list, rename: dict, keep=frozenset()) -> Graph:
    """``nodes`` with every read of a key of ``rename`` reading its value instead (but by the nodes in ``keep``),
    the outputs likewise."""
    out = [n.with_(inputs=tuple(rename.get(i, i) for i in n.inputs))
           if n.name not in keep and any(i in rename for i in n.inputs) else n for n in nodes]
    return Graph(tuple(out), tuple(rename.get(o, o) for o in graph.outputs), graph.meta)


def _move_one(graph: Graph):
    """The first view ``(C, 1, L) -> (C, L)`` moved after the per-channel ops reading it."""
    for v in graph.nodes:
        readers = graph.consumers(v.name)
        if not _drops_unit(graph, v) or v.name in graph.outputs or not readers \
                or not all(_per_channel(r, v.type.shape[0]) for r in readers):
            continue
        src = graph.node(v.inputs[0])
        moved, rename, backs, nodes = {r.name for r in readers}, {}, set(), []
        for n in graph.nodes:
            if n.name == v.name:
                continue
            if n.name not in moved:
                nodes.append(n)
                continue
            out = n.name in graph.outputs   # an output keeps its name and shape: the op runs as <name>.2d
            grid = n.with_(name=f"{n.name}.2d" if out else n.name, inputs=(src.name,),
                           type=TensorType(src.type.shape, n.type.kind, n.type.ceiling, n.type.substeps))
            back = Node(n.name if out else f"{n.name}.1d", "reshape", (grid.name,), n.type,
                        {"shape": tuple(n.type.shape)}, {}, scope=n.scope)
            nodes += [grid, back]
            backs.add(back.name)
            if not out:   # the op's own name now holds the (C, 1, L) value: its readers read the view back
                rename[n.name] = back.name
        graph = Graph(tuple(nodes), graph.outputs, graph.meta)
        graph = _replace(graph, list(graph.nodes), rename, keep=backs)
        return graph, {"nodes": [v.name, *sorted(moved)],
                       "as": f"view {v.name!r} (C, 1, L) -> (C, L) moved after {', '.join(sorted(moved))}"}
    return None


def _merge_one(graph: Graph):
    """Two views in a row as one (none when it restores the shape), or a flatten of a unit-dim view."""
    for n in graph.nodes:
        if not n.inputs or n.op not in ("reshape", "flatten"):
            continue
        v = graph.node(n.inputs[0])
        if v.op != "reshape" or (n.op == "flatten" and (not _drops_unit(graph, v)
                                                        or len(n.type.shape) != 1)):   # a whole flatten only
            continue
        src = graph.node(v.inputs[0])
        if n.op == "flatten" or tuple(src.type.shape) != tuple(n.type.shape):
            whole = {"start": 0, "end": -1} if n.op == "flatten" else dict(n.attrs)   # every per-step dim, in order
            nodes = [m.with_(inputs=(src.name,), attrs=whole) if m.name == n.name else m for m in graph.nodes]
            what = f"{n.op} {n.name!r} of view {v.name!r} reads {src.name!r}"
            rename = {}
        else:   # back to the source's shape: no view at all
            if n.name in graph.outputs:
                continue
            nodes, rename = [m for m in graph.nodes if m.name != n.name], {n.name: src.name}
            what = f"views {v.name!r} and {n.name!r} restore {src.name!r}'s shape: none"
        graph = _replace(graph, nodes, rename)
        if not graph.consumers(v.name) and v.name not in graph.outputs:
            graph = Graph(tuple(m for m in graph.nodes if m.name != v.name), graph.outputs, graph.meta)
        return graph, {"nodes": [v.name, n.name], "as": what}
    return None


def lower_view(lo, n: Node) -> None:
    """The lowering of an input view (``input_view``): the input itself, declared in the view's shape, so that Lava's
    source sends it in the ``(W, H, C)`` grid's layout (build.py and network_api.py reshape the input so)."""
    src = n.inputs[0]
    rec = next((i for i in lo.inputs if i["name"] == src), None)
    if rec is None or src not in lo.origin:
        raise IRError(f"reshape {n.name!r} of {src!r} has no Lava process (only a graph input's (C, 1, L) view has)",
                      where=f"node {n.name!r}")
    rec.update(ir_shape=list(n.type.shape), lava_shape=lava_shape(n.type.shape))
    lo.origin[src] = dict(lo.origin[src], ir_shape=list(n.type.shape))
    lo.origin[n.name] = lo.origin[src]
