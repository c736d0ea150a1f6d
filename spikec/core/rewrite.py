"""Graph surgery shared by the passes."""
from spikec.ir.graph import Graph, Node


def splice(graph: Graph, replace: dict[str, list[Node]], remove=()) -> Graph:
    """Put ``replace[name]`` where node ``name`` stood (in order) and drop ``remove``; the rest keeps its place."""
    remove = set(remove)
    nodes = []
    for n in graph.nodes:
        if n.name in replace:
            nodes += replace[n.name]
        elif n.name not in remove:
            nodes.append(n)
    return graph.with_nodes(nodes)


def sole_consumer(graph: Graph, name: str):
    """The one node reading ``name``, or None when it has several readers or is a graph output."""
    readers = graph.consumers(name)
    return readers[0] if len(readers) == 1 and name not in graph.outputs else None


def retype(graph: Graph) -> Graph:
    """Recompute every node's type from its inputs, in order (after a rewrite changed kinds or time bases)."""
    from spikec.ops import infer_type
    types, nodes = {}, []
    for n in graph.nodes:
        if n.op != "input":
            n = n.with_(type=infer_type(n, [types[i] for i in n.inputs]))
        types[n.name] = n.type
        nodes.append(n)
    return graph.with_nodes(nodes)
