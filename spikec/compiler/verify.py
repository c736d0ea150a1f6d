"""The IR verifier: run before and after every rewrite. Collects every problem, then raises once."""
import numpy as np

from spikec.compiler.errors import IRError, SpikecError
from spikec.compiler.ir import NAME_CHARS, Graph
from spikec.ops import OPS, infer_type


# attributes whose value selects a behaviour, by op (None: every op): any other value would silently select a
# default branch in the interpreter or a target
CHOICES = {(None, "output"): ("spikes", "membrane"), ("lif", "reset"): ("subtract", "zero"),
           ("lif_snntorch", "reset"): ("subtract", "zero", "none")}


def problems(graph: Graph) -> list[str]:
    """Every rule the graph breaks, each naming its node or edge; empty when the graph is well formed."""
    found, seen = [], {}
    for node in graph.nodes:
        found += _node_problems(node, seen)
        seen[node.name] = node
    found += [f"graph output {o!r} is not a node" for o in graph.outputs if o not in seen]
    if not graph.outputs:
        found.append("the graph has no outputs")
    return found


def _node_problems(node, seen) -> list[str]:
    where = f"node {node.name!r}"
    if not node.name or not set(node.name) <= NAME_CHARS:
        return [f"{where}: name must be non-empty and use only letters, digits, '_' and '.'"]
    if node.op not in OPS:
        return [f"{where}: unknown op {node.op!r}"]
    spec = OPS[node.op]
    out = [f"edge {i!r} -> {node.name!r}: source is not an earlier node (missing, or a cycle)"
           for i in node.inputs if i not in seen]
    if len(node.inputs) != spec.arity:
        out.append(f"{where}: {node.op} takes {spec.arity} inputs, has {len(node.inputs)}")
    missing = [p for p in spec.required if p not in node.params]
    extra = [p for p in node.params if p not in spec.required + spec.optional]
    out += [f"{where}: missing parameter {p!r}" for p in missing]
    out += [f"{where}: unexpected parameter {p!r}" for p in extra]
    out += [f"{where}: parameter {k!r} holds NaN or Inf" for k, v in node.params.items()
            if v.dtype.kind == "f" and not np.isfinite(v).all()]
    out += [f"{where}: attribute {k!r} = {node.attrs[k]!r} is not one of {', '.join(map(repr, allowed))}"
            for (op, k), allowed in CHOICES.items()
            if op in (None, node.op) and k in node.attrs and node.attrs[k] not in allowed]
    if out:
        return out
    try:
        expected = infer_type(node, [seen[i].type for i in node.inputs])
    except SpikecError as e:
        return [e.message()]
    except (KeyError, TypeError, ValueError) as e:
        return [f"{where}: malformed attributes or parameters ({type(e).__name__}: {e})"]
    if expected != node.type:
        src = ", ".join(f"{i!r} ({seen[i].type.describe()})" for i in node.inputs)
        return [f"edge {src} -> {node.name!r}: node declares {node.type.describe()} "
                f"but its inputs give {expected.describe()}"]
    return []


def verify(graph: Graph, when: str = "") -> Graph:
    """Raise IRError listing every problem; return the graph unchanged when it is well formed."""
    found = problems(graph)
    if found:
        raise IRError("IR verification failed" + (f" {when}" if when else "") + ":\n  " + "\n  ".join(found))
    return graph
