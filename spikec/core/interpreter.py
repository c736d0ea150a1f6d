"""Reference interpreter: runs the IR over ``[T, B, ...]`` tensors in float64, or exactly in int64.

Stateless ops run on all steps at once (T and B merged); neurons loop over ``t`` only.
Each kernel repeats the arithmetic of its ``spikec.nn`` module / torch op in the same order,
so a float64 run of the source model and of its IR agree bit for bit.

Integer mode (all params int64 and integral inputs) is exact: synaptic sums are computed in
float64 only after proving ``sum |w| * max|x| < 2**53``; ops with no exact integer form raise.
"""
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm import tqdm

from spikec.core import heap
from spikec.ir.errors import BadInput, IRError
from spikec.ir.graph import Graph
from spikec.ops import KernelContext, opdef
from spikec.ops.common import NeuronOut, dynamics_key


@dataclass
class Trace:
    """Every recorded node output ``[T, B, ...]``, and for neurons the firing margin ``|U - boundary|``."""
    values: dict[str, np.ndarray] = field(default_factory=dict)
    margins: dict[str, np.ndarray] = field(default_factory=dict)

    def outputs(self, graph: Graph) -> list[np.ndarray]:
        """The graph's outputs as the source model returns them: an output read at the last step
        (``read_last``) is that step, ``[B, ...]``; every other one the ``[T, B, ...]`` sequence."""
        last = read_last(graph)
        return [self.values[o][-1] if o in last else self.values[o] for o in graph.outputs]


def read_last(graph: Graph) -> set[str]:
    """The outputs the source model returns at the last step only: those computed from a read-out over time (a
    node with attr ``read`` = ``"last"``, such as ``time_sum`` for ``x.mean(0)``); their ``[T, B, ...]`` value
    is the running read-out, and the model's ``[B, ...]`` output is its last step."""
    return {o for o in graph.outputs if o in read_last_nodes(graph)}


def read_last_nodes(graph: Graph) -> set[str]:
    """Every node the source holds at the last step only (``read_last``'s rule, outputs or not: a module's)."""
    marked = {n.name for n in graph.nodes if n.attrs.get("read") == "last"}
    for n in graph.nodes:  # topological order: what reads a marked value is read at the last step too
        if any(i in marked for i in n.inputs):
            marked.add(n.name)
    return marked


def is_integer_graph(graph: Graph) -> bool:
    params = [v for n in graph.nodes for v in n.params.values()]
    return bool(params) and all(v.dtype.kind == "i" for v in params)


def as_inputs(graph: Graph, inputs) -> dict[str, np.ndarray]:
    """``inputs`` as a dict input name -> ``[T, B, *shape]`` array: an array stands for a one-input graph's
    input; every graph input must be given with the per-step shape it was traced with, T and B >= 1 (BadInput
    otherwise). The one reader of run inputs: the interpreter and the Lava target's integer inputs use it."""
    names = [n.name for n in graph.inputs]
    if not isinstance(inputs, dict):
        if len(names) != 1:
            raise BadInput(f"the graph has {len(names)} inputs {names}; pass a dict name -> array")
        inputs = {names[0]: inputs}
    for n in graph.inputs:
        x = np.asarray(inputs.get(n.name)) if n.name in inputs else None
        if x is None or x.ndim != 2 + len(n.type.shape) or tuple(x.shape[2:]) != n.type.shape:
            got = "nothing" if x is None else f"shape {tuple(x.shape)}"
            raise BadInput(f"input {n.name!r} expects [T, B, {', '.join(map(str, n.type.shape))}], got {got}",
                           remedy="give inputs laid out [T, B, ...] with the per-step shape the model was traced with")
        if x.shape[0] < 1 or x.shape[1] < 1:
            raise BadInput(f"input {n.name!r} has T={x.shape[0]}, B={x.shape[1]}; both must be >= 1")
    return inputs


@dataclass(frozen=True)
class Reuse:
    """A run of another graph on the same inputs (``trace``, of ``graph``) whose values a run may take instead of
    computing them again: a node that is the very node of ``graph`` (the same object: op, attributes, parameters,
    input names and type) and whose inputs all hold the values they held in that run computes, kernels being
    deterministic, exactly the value it computed there. A pass leaves most nodes as they were: its check then
    computes only what the rewrite changed and what that reaches (a value found equal, bit for bit, stops the
    spread)."""
    graph: Graph
    trace: Trace


def run(graph: Graph, inputs, *, record="all", integer: bool | None = None,
        progress: str | None = None, visit=None, reuse: Reuse | None = None) -> Trace:
    """Run ``graph`` on ``inputs`` (an array for a one-input graph, or name -> array).

    ``record="all"`` keeps every node's output; ``"outputs"`` only the graph outputs (less memory); a collection
    of node names keeps those and the outputs (values, and margins of neurons). ``visit(name, value, margin)``,
    if given, sees every node's output as it is produced (``margin`` None unless a neuron), before it is freed.
    ``reuse``: values of an earlier run on these very inputs taken where they are the same computation (``Reuse``).
    """
    integer = is_integer_graph(graph) if integer is None else integer
    if reuse is not None and (is_integer_graph(reuse.graph) != integer
                              or [n.name for n in reuse.graph.inputs] != [n.name for n in graph.inputs]):
        reuse = None  # another arithmetic, or other inputs: nothing is the same computation
    clean: set[str] = set()  # nodes whose value is the one they hold in reuse.trace
    ctx = KernelContext(integer, {n.name: n.type.substeps for n in graph.nodes})
    trace, shared = Trace(), {}
    env: dict[str, torch.Tensor] = {}
    remaining = {n.name: 0 for n in graph.nodes}
    for n in graph.nodes:
        for i in n.inputs:
            remaining[i] += 1
    every = isinstance(record, str) and record == "all"
    keep = set(graph.outputs) | (set() if isinstance(record, str) else set(record))
    inputs = as_inputs(graph, inputs)
    nodes = tqdm(graph.nodes, desc=progress, delay=1.0, leave=False, disable=progress is None)
    for node in nodes:
        if node.op == "input":
            x = np.asarray(inputs[node.name])
            if integer and not np.array_equal(x, np.round(x)):
                raise BadInput(f"input {node.name!r} is not integral; an integer graph needs integer inputs")
            out, margin = torch.as_tensor(np.array(x, dtype=np.int64 if integer else np.float64)), None
            clean.add(node.name)
        elif reuse is not None and _same_computation(node, reuse, clean):
            out, margin = _reused(node, reuse, every or node.name in keep, trace)
            clean.add(node.name)
        else:
            params = {k: torch.as_tensor(np.array(v)) for k, v in node.params.items()}
            key = dynamics_key(node) if "output" in node.attrs or node.name + ".membrane" in remaining else None
            kernel = opdef(node.op).kernel
            if kernel is None:
                raise IRError(f"op {node.op} has no kernel", where=f"node {node.name!r}",
                              remedy="define the op with kernel= (spikec.ops.registry.define)")
            out = shared.get(key) or kernel(ctx, node, params, *(env[i] for i in node.inputs))
            if key is not None:
                shared[key] = out
            if isinstance(out, NeuronOut):
                out, margin = out.output(node), out.margin
            elif isinstance(out, tuple):
                out, margin = out
            else:
                margin = None
            if margin is not None and (every or node.name in keep):
                trace.margins[node.name] = margin.numpy()
            if reuse is not None and _equal_to_reused(node, out, reuse):
                clean.add(node.name)  # a value the rewrite left as it was (spikes, mostly): what reads only such is
        env[node.name] = out
        if every or node.name in keep:
            trace.values[node.name] = out.numpy()
        if visit is not None:
            visit(node.name, out.numpy(), None if margin is None else margin.numpy())
        for i in node.inputs:  # free what no later node reads
            remaining[i] -= 1
            if remaining[i] == 0 and i not in keep:
                env.pop(i, None)
        heap.bound()  # a compile keeps freed memory for the next output: within a bound (spikec.core.heap)
    return trace


def _same_computation(node, reuse: Reuse, clean: set) -> bool:
    """``node`` computes what it computed in ``reuse.trace``, which still holds that value."""
    name = node.name
    return name in reuse.graph and reuse.graph.node(name) is node and name in reuse.trace.values \
        and all(i in clean for i in node.inputs)


def _reused(node, reuse: Reuse, recorded: bool, trace: Trace):
    """The value (and a neuron's margin) ``node`` holds in ``reuse.trace``, recorded in ``trace`` as computed."""
    value, margin = reuse.trace.values[node.name], reuse.trace.margins.get(node.name)
    if margin is not None and recorded:
        trace.margins[node.name] = margin
    return torch.as_tensor(value), None if margin is None else torch.as_tensor(margin)


def _equal_to_reused(node, out: torch.Tensor, reuse: Reuse) -> bool:
    """``out`` of ``node`` equals (bit for bit, same dtype) its value in ``reuse.trace``, with the same type there."""
    old, new = reuse.trace.values.get(node.name), out.numpy()
    if old is None or node.name not in reuse.graph or reuse.graph.node(node.name).type != node.type \
            or old.dtype != new.dtype or old.shape != new.shape:
        return False
    a, b = old.reshape(-1), new.reshape(-1)
    head = min(a.size, 4096)  # a value the rewrite changed differs early, mostly: told apart at a glance
    return bool(np.array_equal(a[:head], b[:head]) and np.array_equal(a, b))
