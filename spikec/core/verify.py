"""The IR verifier: run before and after every rewrite. Collects every problem, then raises once."""
import numpy as np

from spikec.ir.errors import IRError, SpikecError
from spikec.ir.graph import NAME_CHARS, Graph
from spikec.ops import OPS, infer_type
from spikec.ops.neurons import LIF


# attributes whose value selects a behaviour, by op (None: every op): any other value would silently select a
# default branch in the interpreter or a target (a framework neuron's card checks its own: snnTorch's reset is
# refused by its type inference)
CHOICES = {(None, "output"): ("spikes", "membrane"), (LIF, "reset"): ("subtract", "zero")}


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
    out += _param_problems(node, spec, where)
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


def _param_problems(node, spec, where) -> list[str]:
    """The node's parameters against its op's schema: names (missing, unknown) and ranks (``Param.ranks``)."""
    out = [f"{where}: missing parameter {p!r}" for p in spec.required if p not in node.params]
    out += [f"{where}: unexpected parameter {p!r} ({_takes(spec)})" for p in node.params if p not in spec.param_names]
    for p in spec.params:
        v = node.params.get(p.name)
        if v is not None and p.ranks is not None and v.ndim not in p.ranks:
            out.append(f"{where}: parameter {p.name!r} has shape {v.shape}; {node.op} lays it out as {p.layout}")
    return out


def _takes(spec) -> str:
    return f"{spec.name} takes " + (", ".join(spec.param_names) if spec.params else "no parameters")


def unknown_params_remedy(graph: Graph) -> str:
    """The remedy for parameters an op's schema does not know: the names each such op takes."""
    ops = sorted({n.op for n in graph.nodes if n.op in OPS and set(n.params) - set(OPS[n.op].param_names)})
    if not ops:
        return ""
    return "use the parameter names of each op's schema (docs/ops.md): " + "; ".join(_takes(OPS[op]) for op in ops)


def verify(graph: Graph, when: str = "") -> Graph:
    """Raise IRError listing every problem; return the graph unchanged when it is well formed."""
    found = problems(graph)
    if found:
        raise IRError("IR verification failed" + (f" {when}" if when else "") + ":\n  " + "\n  ".join(found),
                      remedy=unknown_params_remedy(graph))
    return graph
