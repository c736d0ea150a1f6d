"""What the compile report says about a graph: parameter accounting and the AC/MAC layer table."""
from torch import nn

from spikec.ir.graph import Graph
from spikec.ops import OPS, deployed_params
from spikec.ops.neurons import INTFIRE, INTFIRE_UNROLLED


def source_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _in_scope(scope: str, module: str) -> bool:
    return scope == module or scope.startswith(module + ".")


def params_report(model: nn.Module, graph: Graph) -> dict:
    """Trainable parameters of the source vs parameters the deployed graph stores (buffers excluded)."""
    by_module = {name: {"source": source_params(child),
                        "deployed": sum(deployed_params(n) for n in graph.nodes if _in_scope(n.scope, name))}
                 for name, child in model.named_children()}
    return {"source": source_params(model), "deployed": sum(deployed_params(n) for n in graph.nodes),
            "by_module": by_module}


def synaptic_kind(graph: Graph, node) -> str | None:
    """AC when every input of a synaptic op is a binary spike tensor (any spike tensor for an op whose cost says
    ``ac_on="spikes"``: an all-ones kernel), MAC otherwise; None for other ops."""
    spec = OPS[node.op]
    if not spec.synaptic:
        return None
    kinds = [graph.node(i).type.kind for i in node.inputs]
    if spec.cost is not None and spec.cost.ac_on == "spikes":
        return "AC" if all(k != "real" for k in kinds) else "MAC"
    return "AC" if all(k == "binary" for k in kinds) else "MAC"


def pairwise_neuron(op: str) -> bool:
    """A neuron over several inputs (its card: ``neuron``, arity > 1): pair neurons firing on products of its
    inputs' integer spikes (SDNA Pairwise, the one such op)."""
    spec = OPS.get(op)
    return spec is not None and spec.neuron and spec.arity > 1


def product_kind(graph: Graph, node) -> str | None:
    """How an element-wise product of spike tensors runs; nothing dense is called spike-driven."""
    if pairwise_neuron(node.op):
        return "pairwise integer spike products Q_i*K_j and a_ij*V_j: not spike-driven"
    if node.op != "mul":
        return None
    types = [graph.node(i).type for i in node.inputs]
    if all(t.kind == "binary" for t in types):
        return "coincidence (AND) of binary spikes: spike-driven"
    if all(t.is_spike for t in types):
        d = " x ".join(str(t.ceiling or 1) for t in types)
        return f"integer spike product: not spike-driven (after unrolling a {d} sub-step coincidence sum)"
    return "dense product (real operand): not spike-driven"


def lowering(node) -> str | None:
    if node.op == INTFIRE and node.attrs.get("output", "spikes") == "spikes":
        return f"integer spikes 0..{node.attrs['max_spikes']} (graded payload)"
    if node.op == INTFIRE_UNROLLED:
        return f"binary spikes over {node.attrs['max_spikes']} virtual sub-steps"
    return None


def layers_report(graph: Graph) -> list[dict]:
    rows = []
    for n in graph.nodes:
        if n.op == "input":
            continue
        kinds = sorted({graph.node(i).type.kind for i in n.inputs})
        row = {"name": n.name, "op": n.op, "scope": n.scope, "shape": list(n.type.shape),
               "output_kind": n.type.kind, "substeps": n.type.substeps,
               "operand_kind": kinds[0] if len(kinds) == 1 else "/".join(kinds),
               "synaptic_kind": synaptic_kind(graph, n)}
        extra = {"product": product_kind(graph, n), "lowering": lowering(n),
                 "host": True if OPS[n.op].dense else None}
        rows.append({**row, **{k: v for k, v in extra.items() if v is not None}})
    return rows
