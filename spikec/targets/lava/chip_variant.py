"""The nearest chip-ready variant of a network whose neurons reset by subtraction: the same network with a zero
reset (``lava_reset="zero"``), **approximate**, its disagreement with the given network measured.

The frameworks' subtract (soft) reset keeps the residual ``v - theta`` after a spike; Lava's LIF zeroes ``v``.
No composition of Lava's standard processes computes the subtract reset bit for bit in the arithmetic spikec's
integer reference uses: a ``-theta`` self-synapse (Dense from ``s_out`` to ``a_in``) lands in the next Lava step,
after the LIF has zeroed ``v``; keeping the membrane in the current ``u`` instead (which Lava never resets:
``du`` for beta, ``dv = 4095``, the spike compared on ``v = (v_prev >> 12) + u``) carries ``trunc(v_prev / 4096)``
into every step, caps ``vth`` at 63 weight units for the carry to vanish on the positive side, cannot hold
``beta = 1`` (``u`` keeps at most 4095/4096) and adds Lava's bias to ``v``, not to ``u`` (docs/targets.md).

So the chip-ready option is a different neuron: ``zero_reset`` turns every spikec ``lif`` and snnTorch Leaky
(``lif_snntorch``) with a subtract reset into the same neuron with a zero reset (Lava's LIF when the rest is Lava's:
scalar decays and thresholds, strict firing), and ``measure`` runs both float graphs on the verification inputs:
spike agreement per changed neuron and on every output (spikes, or the argmax class of a real-valued output). The
deployment is then bit-exact with *its own* integer reference, not with the given network: the Lava target reports
``approximate_variant`` and does not call it equivalent.
"""
import numpy as np

from spikec.ir.graph import Graph, TensorType
from spikec.ops import OPS
from spikec.ops.neurons import INTFIRE
from spikec.targets.lava.mapping import tree_pool
from spikec.targets.lava.ops_table import entry

OPTION = "lava_reset"


def memoryless_resets(graph: Graph) -> tuple[Graph, list]:
    """Exact, not a variant: a spikec ``lif`` with ``beta = 0`` in every channel keeps nothing of ``H`` (``U_t = 0 H +
    alpha X + b``), so its subtract reset is its zero reset (the same spikes and the same pre-reset membrane ``U``):
    written as the zero reset, the population is Lava's LIF. ``(graph, one rewrite record per neuron)``."""
    nodes, records = [], []
    for n in graph.nodes:
        # a membrane twin (output "membrane") reads the pre-reset U, which the reset does not reach either
        if entry(n.op).memoryless_zero_reset and n.attrs.get("reset") == "subtract" \
                and not np.any(np.asarray(n.params["beta"])):
            n = n.with_(attrs=dict(n.attrs, reset="zero"),
                        params=dict(n.params, v_reset=np.zeros_like(np.asarray(n.params["v_reset"], dtype=np.float64))))
            records.append({"nodes": [n.name], "as": f"{n.op} {n.name!r} has beta = 0: its subtract reset is a zero reset "
                                                     "(nothing of the reset membrane is kept), Lava's LIF"})
        nodes.append(n)
    return (Graph(tuple(nodes), graph.outputs, graph.meta), records) if records else (graph, [])
MAXPOOL = "maxpool2d"


def pools_after_neurons(graph: Graph, stays=tree_pool) -> tuple[Graph, list[str]]:
    """``(graph, the neurons moved)``: each neuron fed by a max pool of real values (snnTorch's tutorial conv net,
    ``lif(max_pool2d(conv(x)))``) that ``stays`` does not keep (by default the pools max_tree.py computes exactly on
    chip stay: only one under a sub-step schedule moves) becomes the neuron at the pool's input resolution followed
    by the max pool of its spikes (an OR layer on chip). The pooled
    spikes keep the neuron's name (so the variant is measured against it), the neuron is ``<name>.unpooled``. Not
    moved: a pool read by anything else (a neuron whose state is read has a twin reading the pool), a neuron with
    other than binary spikes (a max of counts is no OR layer) or with a parameter not per channel (a recurrence's
    weights depend on the resolution)."""
    by_name, moved, nodes = {n.name: n for n in graph.nodes}, {}, []
    for n in graph.nodes:
        pool = by_name.get(n.inputs[0]) if n.inputs and OPS[n.op].neuron else None
        if pool is None or pool.op != MAXPOOL or pool.type.is_spike or pool.name in graph.outputs \
                or [c.name for c in graph.consumers(pool.name)] != [n.name] or n.type.kind != "binary" \
                or any(np.ndim(v) > 1 or np.size(v) not in (1, n.type.shape[0]) for v in n.params.values()) \
                or stays(graph, pool):   # by default one the chip computes exactly (max_tree.py): nothing to move
            continue
        moved[pool.name] = n
    for n in graph.nodes:
        if n.name in moved:   # the pool's place: the neuron on the pool's input
            neuron = moved[n.name]
            src = by_name[n.inputs[0]]
            nodes.append(neuron.with_(name=f"{neuron.name}.unpooled", inputs=(src.name,),
                                      type=TensorType(src.type.shape, neuron.type.kind, neuron.type.ceiling)))
        elif n.name in {m.name for m in moved.values()}:   # the neuron's place: the pool of its spikes
            pool = next(p for p, m in moved.items() if m.name == n.name)
            nodes.append(by_name[pool].with_(name=n.name, inputs=(f"{n.name}.unpooled",), type=n.type, scope=n.scope))
        else:
            nodes.append(n)
    return (Graph(tuple(nodes), graph.outputs, graph.meta), [m.name for m in moved.values()]) if moved else (graph, [])


def zero_reset(graph: Graph) -> tuple[Graph, list[str]]:
    """``(graph with subtract resets as zero resets, the neurons changed)``: the neurons whose table entry says
    ``zero_reset_variant`` (``ops_table.py``), with the entry's ``zero_reset_attrs`` (snnTorch's Synaptic and RLeaky:
    ``reset_delay=False``, their zero reset one step late being no Lava LIF either); one with a ``v_reset``
    parameter (its card's schema) resets to 0. Sinabs's neurons first become the ``lif`` a bounded count is
    (``sinabs_counts.lower``), so that their subtract reset is one of these; an ``intfire``'s membrane floor
    (``v_min``, Sinabs's ``min_v_mem``: Lava's LIF has none) is dropped, so that it is a count ladder
    (``count_ladder.py``)."""
    from spikec.targets.lava import sinabs_counts
    graph, _ = sinabs_counts.lower(graph)   # Sinabs's bounded counts as the lif / intfire they are, exactly
    graph, pooled = pools_after_neurons(graph)
    nodes, changed = [], list(pooled)
    for n in graph.nodes:
        if n.op == INTFIRE and "v_min" in n.params:
            n = n.with_(params={k: v for k, v in n.params.items() if k != "v_min"})
            changed.append(n.name)   # a count is never moved (pools_after_neurons takes binary neurons only)
        elif entry(n.op).zero_reset_variant and n.attrs.get("reset") == "subtract":
            params = dict(n.params)
            if "v_reset" in OPS[n.op].param_names:
                params["v_reset"] = np.zeros_like(np.asarray(params.get("v_reset", 0.0), dtype=np.float64))
            n = n.with_(attrs=dict(n.attrs, reset="zero", **entry(n.op).zero_reset_attrs), params=params)
            spikes = n.attrs.get("output", "spikes") == "spikes" and n.attrs.get("read", "spikes") == "spikes"
            if n.name.removesuffix(".unpooled") not in pooled and spikes:   # a moved neuron is measured by its
                changed.append(n.name)   # pooled spikes; a state read-out (snnTorch's mem) changes with its neuron
        nodes.append(n)
    return Graph(tuple(nodes), graph.outputs, graph.meta), changed


def _agreement(a, b, spikes: bool) -> dict:
    a, b = np.asarray(a), np.asarray(b)
    if spikes:
        return {"spike_agreement": float((a == b).mean()) if a.size else 1.0,
                "spikes_given": int(np.abs(a).sum()), "spikes_variant": int(np.abs(b).sum())}
    ca, cb = a.sum(0).reshape(a.shape[1], -1).argmax(-1), b.sum(0).reshape(b.shape[1], -1).argmax(-1)
    return {"class_agreement": float((ca == cb).mean()),
            "max_abs_difference": float(np.abs(a - b).max(initial=0))}


def measure(graph: Graph, variant: Graph, changed: list[str], inputs, reference) -> dict:
    """The variant against the given graph on ``inputs`` (``reference`` the given graph's run)."""
    from spikec.core.interpreter import run
    trace = run(variant, inputs)
    given = reference.values if all(c in reference.values for c in changed) else run(graph, inputs).values
    per_neuron = {c: _agreement(given[c], trace.values[c], True) for c in changed}
    outputs = {o: _agreement(reference.values[o], trace.values[o], graph.node(o).type.is_spike)
               for o in graph.outputs}
    floors = [c for c in changed if variant.node(c).op == INTFIRE and "v_min" not in variant.node(c).params
              and variant.node(c).attrs.get("reset") != "zero"]
    pools = [c for c in changed if variant.node(c).op == MAXPOOL]
    given_nodes = {n.name: n for n in graph.nodes}
    resets = [n.name for n in variant.nodes if n.attrs.get("reset") == "zero" and given_nodes.get(
        n.name.removesuffix(".unpooled"), n).attrs.get("reset") == "subtract"
        and n.attrs.get("output", "spikes") == "spikes" and n.attrs.get("read", "spikes") == "spikes"]
    return {"option": f"{OPTION}='zero'", "approximate": True, "neurons_changed": changed, "floors_dropped": floors,
            "pools_moved": pools, "resets_zeroed": resets,
            "per_neuron": per_neuron, "outputs": outputs, "inputs": "the verification inputs",
            "why": "the frameworks' subtract reset has no exact composition of standard Lava processes (module doc of "
                   "chip_variant.py); this variant resets to zero instead, so that the neurons are Lava's LIF; a "
                   "membrane floor (Sinabs's min_v_mem) has none either: dropped, so that the count is a ladder; nor "
                   "a max pool of synaptic sums before a neuron: the neuron first, then the pool of its spikes",
            "trace": trace}


def line(v: dict) -> str:
    """One summary line: the variant and what it costs on the verification inputs."""
    parts = [f"{c} {100 * a['spike_agreement']:.1f}%" for c, a in v["per_neuron"].items()]
    for o, a in v["outputs"].items():
        parts.append(f"output {o} " + (f"spikes {100 * a['spike_agreement']:.1f}%" if "spike_agreement" in a
                                       else f"classes {100 * a['class_agreement']:.1f}%"))
    floors, pools = len(v.get("floors_dropped", ())), len(v.get("pools_moved", ()))
    resets = len(v.get("resets_zeroed", v["neurons_changed"]))
    return (f"APPROXIMATE chip-ready variant ({v['option']}): {resets} subtract "
            f"reset(s) made zero resets" + (f", {floors} membrane floor(s) (min_v_mem) dropped" if floors else "")
            + (f", {pools} max pool(s) of synaptic sums moved after their neuron" if pools else "") + f"; agreement with the given network on the verification inputs: {', '.join(parts)}; "
            "bit-exact only with the variant's own integer reference")
