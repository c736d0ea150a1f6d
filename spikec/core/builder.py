"""Building an IR graph node by node, each node typed from its inputs as it is added."""
from spikec.ir.graph import Graph, Node, TensorType
from spikec.ops import infer_type


class GraphBuilder:
    """Nodes in order and their types; ``add`` infers each new node's type (shape errors name the node)."""

    def __init__(self, shape: tuple, kind: str = "binary", input_name: str = "x"):
        self.nodes: list[Node] = [Node(input_name, "input", (), TensorType(tuple(shape), kind))]
        self.types: dict[str, TensorType] = {input_name: self.nodes[0].type}

    def add(self, name, op, inputs, attrs=None, params=None, scope="") -> str:
        node = Node(name, op, tuple(inputs), TensorType((1,)), attrs or {}, params or {}, scope)
        node = node.with_(type=infer_type(node, [self.types[i] for i in inputs]))
        self.nodes.append(node)
        self.types[name] = node.type
        return name

    def shape(self, name) -> tuple:
        return self.types[name].shape

    def graph(self, *outputs, meta=None) -> Graph:
        return Graph(tuple(self.nodes), tuple(outputs), meta or {})
