"""Replay integer spikes as binary spikes over virtual sub-steps (passes.md, "Integer-to-binary
virtual-step unrolling").

Each integer-firing neuron (ceiling ``D``) becomes an ``intfire_unrolled`` node emitting binary spikes on
``D`` sub-steps per physical step (a thermometer code: the first ``S`` sub-steps fire). Downstream,
the sub-step stream passes through max-pool and flatten (both commute with a thermometer code) to
the first synapses (conv/linear/window-sum/avg-pool), which read binary operands (accumulate-only)
because a synapse is linear: ``W S = sum_d W s_d``. After them a ``substep_sum`` integrates the ``D``
sub-steps (adding the synaptic bias once) before any stateful op: the downstream neuron leaks and
fires once per physical step. Any other reader (a product, an addition) gets the summed count. The graph's ``meta["schedule"]`` records the new time base.
"""
from spikec.ir.graph import Graph, Node
from spikec.core.passes import Pass, PassResult
from spikec.core.rewrite import retype, splice
from spikec.ops.neurons import INTFIRE, INTFIRE_UNROLLED

LINEAR = ("conv2d", "linear", "windowsum", "avgpool2d")   # synapses: commute with the per-step sum
ROUTING = ("maxpool2d", "flatten")                         # keep the thermometer code itself


def _region(graph: Graph, neuron: str) -> tuple[dict, list]:
    """Nodes that run on the sub-step stream, and the edges that leave it.

    The stream passes through routing ops (max-pool commutes with a thermometer code) and ends at the
    first synapse, which reads binary sub-step spikes; its output is summed back to physical steps.
    """
    region, exits, todo = {neuron: "neuron"}, [], [neuron]
    while todo:
        name = todo.pop()
        for c in graph.consumers(name):
            if region[name] == "synapse" or len(c.inputs) != 1 or c.op not in LINEAR + ROUTING:
                exits.append((name, c))
            elif "bias" in c.params or (c.op == "linear" and len(c.type.shape) > 1):
                exits.append((name, c))   # a biased synapse: runs on sub-steps, its bias after the sum
            elif c.name not in region:
                region[c.name] = "synapse" if c.op in LINEAR else "routing"
                todo.append(c.name)
    exits += [(name, None) for name in region if name in graph.outputs]
    return region, exits


def unroll(graph: Graph, neuron: Node) -> tuple[Graph, list[str], dict]:
    """Unroll one integer neuron; types (kinds, time bases) are re-inferred afterwards."""
    d = neuron.attrs["max_spikes"]
    region, exits = _region(graph, neuron.name)
    replace = {neuron.name: [neuron.with_(op=INTFIRE_UNROLLED)]}
    remap, outputs = {}, list(graph.outputs)
    for src, consumer in exits:
        # a biased synapse reading the stream directly (not after another synapse) runs on sub-steps; a
        # token-wise linear (bias on the last axis, not the channel) is left on physical steps
        if consumer is not None and consumer.op in LINEAR and "bias" in consumer.params \
                and region[src] != "synapse" and not (consumer.op == "linear" and len(consumer.type.shape) > 1):
            # the synapse runs on sub-steps without its bias; the sum adds it once and takes the name
            inner = consumer.with_(name=f"{consumer.name}.substeps",
                                   params={k: v for k, v in consumer.params.items() if k != "bias"})
            total = Node(consumer.name, "substep_sum", (inner.name,), consumer.type, {},
                         {"bias": consumer.params["bias"]}, consumer.scope)
            replace[consumer.name] = [inner, total]
            region[consumer.name] = "synapse"
            continue
        count = f"{src}.sum" if region[src] == "synapse" else f"{src}.count"
        if count not in {n.name for nodes in replace.values() for n in nodes}:
            node = replace.get(src, [graph.node(src)])
            replace[src] = node + [Node(count, "substep_sum", (src,), graph.node(src).type, {}, {},
                                        graph.node(src).scope)]
        if consumer is None:
            outputs = [count if o == src else o for o in outputs]
        else:
            remap[(consumer.name, src)] = count
    graph = splice(graph, replace)
    nodes = [n.with_(inputs=tuple(remap.get((n.name, i), i) for i in n.inputs)) for n in graph.nodes]
    graph = retype(graph.with_nodes(nodes, outputs))
    return graph, sorted(region), {"neuron": neuron.name, "substeps": d, "region": sorted(region)}


def schedule(graph: Graph) -> dict:
    """Start offset of every node within a physical step, in sub-steps: a layer starts after the D
    sub-steps of its producers have been integrated; the total latency adds up layer by layer."""
    start: dict[str, int] = {}
    for n in graph.nodes:
        start[n.name] = max((start[i] + (graph.node(i).type.substeps if n.op == "substep_sum" else 0)
                             for i in n.inputs), default=0)
    latency = max((start[o] + (graph.node(o).type.substeps if graph.node(o).type.substeps > 1 else 0)
                   for o in graph.outputs), default=0)
    return {"start_substep": start, "latency_substeps_per_step": latency}


def unroll_virtual_steps(graph: Graph) -> PassResult:
    changed, notes, unrolled = [], [], []
    for name in [n.name for n in graph.nodes if n.op == INTFIRE and n.attrs.get("output", "spikes") == "spikes"]:
        graph, names, info = unroll(graph, graph.node(name))  # the current node: earlier unrolls rewire inputs
        neuron = graph.node(name)
        changed += names
        unrolled.append(info)
        notes.append(f"{neuron.name}: integer spikes (D={info['substeps']}) replayed as binary spikes over "
                     f"{info['substeps']} sub-steps; sub-step region: {', '.join(info['region'])}")
    if unrolled:
        meta = dict(graph.meta)
        meta["schedule"] = {"unrolled": unrolled, **schedule(graph)}
        graph = Graph(graph.nodes, graph.outputs, meta)
    return PassResult(graph, tuple(changed), (), tuple(notes))


UNROLL_VIRTUAL_STEPS = Pass("unroll_virtual_steps", unroll_virtual_steps,
                            requires="integer-firing neurons (intfire) reading physical-step inputs",
                            ensures="no intfire emits integer spikes; their synapses read binary sub-step spikes")
