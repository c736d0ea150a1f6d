"""Products of two activations on Loihi 2: binary x binary on chip as AND neurons, the rest on host partitions.

No static synapse holds the product of two activations (a dynamic weight). Before mapping, ``prepare``
rewrites the float graph so that every product has a place (``products`` in the report says which went where):

* ``mul(a, b)`` of two *binary* spike tensors, and ``matmul(A, B)`` of two binary tensors (each a spike
  population seen through ``reshape`` / ``transpose`` / ``flatten``), run **on chip**: one two-input AND
  neuron per product ``a_i * b_j`` (op ``and_gate``; Lava's standard ``LIF`` with du = dv = 4095, vth = 1,
  ``and_neurons.py``, or ``SpikecAND`` under a sub-step schedule),
  fed by two weight-1 Dense synapses that select its operands, firing iff both spiked in that step
  (``s = [a >= 2]``, no state). A matmul's sum over its inner dim N is a weight-1 Dense from the AND spikes
  (accumulate only) into a read-out: the integer count ``sum_n A_in B_nj``, which the host reads exactly.
  For binary operands ``a * b = a AND b``, so this is the same function, not an approximation.
* ``windowsum(x)`` (SDNA's k x k neighbourhood sum) followed by ``scale(a)`` becomes a depthwise conv2d
  whose k x k weights all equal ``a`` (an all-equal window: one integer weight on Loihi, accumulate only).
* A spike tensor added straight into a real-valued stream (``x + s``, a membrane shortcut) is read through a
  weight-1 identity synapse (``x + I s``), so the population adding it sums two synaptic streams.
* Every other product (``mul`` / ``matmul`` with an integer or real operand, SDNA's ``sdna_pairwise``), and the
  ``reshape`` / ``transpose`` / ``scale`` around it, runs on a **host partition** (``host.py``): the values the
  host reads from the chip and sends back are integers the Lava run and the integer reference both carry, so
  the comparison covers every crossing value.

``check`` proves the rewrite on the verification inputs: the rewritten float graph is run and its outputs
compared with the original's (AND is exact; the all-equal window sums ``a x_i`` in another order than
``a sum x_i``, so it may differ in the last bit: the largest difference is reported, not hidden). The proof is
part of the Lava verdict (``proven``): Lava is compared with the integer reference of the rewritten graph.
"""
from dataclasses import dataclass, field

import numpy as np
import torch

from spikec.ir.graph import Graph, Node, TensorType
from spikec.ops import OPS, KernelContext
from spikec.ops.registry import infer_type
from spikec.ops.pooling import window_sum_as_conv
from spikec.targets.lava import canonical, chip_variant, placement, sinabs_counts, tokens, unit_views
from spikec.targets.lava.and_neurons import BOTH, fixed_scale  # noqa: F401  (defines and_gate)
from spikec.targets.lava.ops_table import entry

CHAIN = ("reshape", "transpose", "flatten")   # structural ops an AND operand may be seen through
MAX_AND_NEURONS = 1 << 16   # beyond: the binary product goes to the host (its selection synapses grow as N^2)


@dataclass(frozen=True)
class Prepared:
    graph: Graph
    products: list = field(default_factory=list)   # one record per product: where it runs and why
    rewrites: list = field(default_factory=list)   # what else was rewritten


class _Rewriter:
    def __init__(self, g: Graph):
        self.g = g
        self.nodes: list = []
        self.types: dict = {}
        self.rename: dict = {}
        self.products: list = []
        self.rewrites: list = []
        self.identity: dict = {}   # (source, reader's inputs) -> its identity synapse (shared by twins)

    def emit(self, name, op, inputs, attrs=None, params=None, scope="") -> str:
        inputs = tuple(self.rename.get(i, i) for i in inputs)
        proto = Node(name, op, inputs, TensorType((1,)), dict(attrs or {}), dict(params or {}), scope=scope)
        t = infer_type(proto, [self.types[i] for i in inputs])
        self.nodes.append(proto.with_(type=t))
        self.types[name] = t
        return name

    def keep(self, n: Node) -> None:
        n = n.with_(inputs=tuple(self.rename.get(i, i) for i in n.inputs))
        self.nodes.append(n)
        self.types[n.name] = n.type


def prepare(graph: Graph) -> Prepared:
    """``graph`` with its products placed (AND populations, all-equal windows, host ops); see the module doc."""
    graph, views = unit_views.rewrite(graph)   # a Conv1d's (C, L) <-> (C, 1, L) views out of the chip's way
    graph, canon = canonical.rewrite(graph)   # a reshape to a vector is a flatten; a scale folds into its synapse
    canon = views + canon
    graph, counts = sinabs_counts.lower(graph)   # Sinabs's MaxSpike(n) neurons as intfire
    counts = canon + counts
    graph, memoryless = chip_variant.memoryless_resets(graph)   # beta = 0: the subtract reset is the zero reset
    counts += memoryless
    graph, norse = placement.split_norse_input(graph)   # Norse's recurrent LIF: its input weights a synapse
    graph, tokenwise = tokens.lower(graph)   # token-wise linears and the neurons on them as vectors
    norse = counts + norse + tokenwise
    graph, placements = placement.split(graph)   # concat / slice / sum / mean before a synapse: its wiring
    r = _Rewriter(graph)
    r.rewrites.extend(norse + placements)
    skip = set()
    for n in graph.nodes:
        if n.name in skip:
            continue
        kind = _product_kind(graph, n)
        if kind == "and":
            _and_product(r, n)
        elif kind == "host":
            r.keep(n)
            r.products.append(_host_record(graph, n))
        elif n.op == "windowsum" and _scaled(graph, n) is not None:
            sc = _scaled(graph, n)
            _window_conv(r, n, sc)
            skip.add(sc.name)
        elif n.op == "avgpool2d" and _sum_pool_scale(graph, n) is not None:
            sc = _sum_pool_scale(graph, n)
            _sum_pool(r, n, sc)
            skip.add(sc.name)
        elif _pooled_count(graph, n):
            _count_then_pool(r, n)
        elif _sums_spikes(graph, n) and any(_spike_into_sum(graph, n, i) for i in n.inputs):
            _identity_streams(r, n)
        else:
            r.keep(n)
    out = _unshare(_drop_dead(Graph(tuple(r.nodes), graph.outputs, graph.meta)), r.rewrites)
    if not r.products and not r.rewrites:
        return Prepared(graph)   # nothing to place: the graph as it was, node order included
    return Prepared(_host_late(out) if r.products else out, r.products, r.rewrites)


def _is_binary(g: Graph, name: str) -> bool:
    return g.node(name).type.kind == "binary" and g.node(name).type.substeps == 1


def _product_kind(g: Graph, n: Node) -> str | None:
    """"and" for a product of two binary spike tensors the chip can hold, "host" for other products, else None."""
    if entry(n.op).host is not None:
        return "host"
    if n.op not in ("mul", "matmul"):
        return None
    if all(_is_binary(g, i) for i in n.inputs) and all(_trace(g, i) is not None for i in n.inputs):
        return "and" if _and_neurons(g, n) <= MAX_AND_NEURONS else "host"
    return "host"


def _and_neurons(g: Graph, n: Node) -> int:
    """AND neurons product ``n`` needs: one per element of a ``mul``, one per (row, inner, column) of a matmul."""
    a, b = (g.node(i).type.shape for i in n.inputs)
    return int(np.prod(a)) if n.op == "mul" else int(np.prod(a)) * int(b[-1])


def _trace(g: Graph, name: str):
    """``(spike source, index map)``: which element of the source each element of ``name`` is, through
    ``reshape`` / ``transpose`` / ``flatten`` only; None when ``name`` is not such a view of a spike population."""
    chain = []
    n = g.node(name)
    while n.op in CHAIN:
        chain.insert(0, n)
        n = g.node(n.inputs[0])
    if n.type.kind != "binary" or n.type.substeps != 1 or n.op in ("mul", "matmul"):
        return None
    ctx = KernelContext(False, {})
    x = torch.arange(int(np.prod(n.type.shape)), dtype=torch.float64).reshape(1, 1, *n.type.shape)
    for c in chain:
        x = OPS[c.op].kernel(ctx, c, {}, x)
    return n.name, x[0, 0].numpy().astype(np.int64)


def _operands(g: Graph, n: Node) -> tuple:
    """``(source a, index a, source b, index b, and shape, count matrix or None)`` of product ``n``: the AND
    neuron ``k`` multiplies element ``ia[k]`` of ``a`` by ``ib[k]`` of ``b``; a matmul's count sums its inner dim."""
    (sa, ia), (sb, ib) = _trace(g, n.inputs[0]), _trace(g, n.inputs[1])
    if n.op == "mul":
        return sa, ia.reshape(-1), sb, ib.reshape(-1), None
    lead = ia.shape[:-2]
    i_, nn_, j_ = ia.shape[-2], ia.shape[-1], ib.shape[-1]
    h = int(np.prod(lead))
    a4 = np.broadcast_to(ia.reshape(h, i_, nn_, 1), (h, i_, nn_, j_))
    b4 = np.broadcast_to(ib.reshape(h, 1, nn_, j_), (h, i_, nn_, j_))
    count = np.zeros((h * i_ * j_, h * i_ * nn_ * j_))
    cells = np.arange(h * i_ * nn_ * j_).reshape(h, i_, nn_, j_)
    rows = np.arange(h * i_ * j_).reshape(h, i_, 1, j_)
    count[np.broadcast_to(rows, cells.shape).reshape(-1), cells.reshape(-1)] = 1.0
    return sa, a4.reshape(-1), sb, b4.reshape(-1), count


def _selection(index: np.ndarray, n_src: int) -> np.ndarray:
    w = np.zeros((index.size, n_src))
    w[np.arange(index.size), index] = 1.0
    return w


def _flat(r: _Rewriter, src: str, tag: str, scope: str) -> str:
    shape = r.types[r.rename.get(src, src)].shape
    if len(shape) == 1:
        return src
    return r.emit(f"{tag}.flatten", "flatten", [src], {"start": 0, "end": len(shape) - 1}, scope=scope)


def _and_product(r: _Rewriter, n: Node) -> None:
    """AND neurons for product ``n`` (two weight-1 selection synapses into ``and_gate``), a count synapse for a
    matmul, and the product's shape restored by a host reshape when it is not the AND population's own."""
    g = r.g
    sa, ia, sb, ib, count = _operands(g, n)
    base = n.name + ".and"
    terms = []
    for side, src, idx in (("a", sa, ia), ("b", sb, ib)):
        x = _flat(r, src, f"{base}.{side}", n.scope)
        w = _selection(idx, int(np.prod(g.node(src).type.shape)))
        terms.append(r.emit(f"{base}.{side}", "linear", [x], {}, {"weight": w, "bias": np.zeros(w.shape[0])},
                            scope=n.scope))
    total = r.emit(f"{base}.input", "add", terms, scope=n.scope)
    flat_shape = (ia.size,)
    if count is None and flat_shape == n.type.shape:
        and_name = r.emit(n.name, "and_gate", [total], scope=n.scope)
    else:
        and_name = r.emit(base, "and_gate", [total], scope=n.scope)
        if count is not None:
            and_name = r.emit(f"{n.name}.count", "linear", [and_name], {},
                              {"weight": count, "bias": np.zeros(count.shape[0])}, scope=n.scope)
        r.emit(n.name, "reshape", [and_name], {"shape": tuple(n.type.shape)}, scope=n.scope)
    inner = int(g.node(n.inputs[0]).type.shape[-1]) if n.op == "matmul" else 1
    r.products.append({
        "node": n.name, "op": n.op, "operands": [f"{i} ({g.node(i).type.kind})" for i in n.inputs],
        "runs": "chip", "process": "LIF", "and_neurons": int(ia.size), "and_population": and_name
        if count is None else base, "sources": [sa, sb],
        "why": "both operands are binary spikes: a * b = a AND b, a two-input AND neuron per product fed by weight-1 "
               "synapses" + (f"; the sum over the inner dim ({inner}) is a weight-1 Dense into a read-out (the "
                             "integer count), read by the host" if count is not None else "")})


def _host_record(g: Graph, n: Node) -> dict:
    kinds = [g.node(i).type.kind for i in n.inputs]
    if kinds == ["binary", "binary"] and n.op in ("mul", "matmul") and _and_neurons(g, n) > MAX_AND_NEURONS:
        return {"node": n.name, "op": n.op, "operands": [f"{i} ({g.node(i).type.kind})" for i in n.inputs],
                "runs": "host", "why": f"binary x binary, but it would need {_and_neurons(g, n):,} AND neurons "
                                       f"(more than {MAX_AND_NEURONS:,}): computed on the host instead"}
    host = entry(n.op).host
    why = (host.why if host is not None else
           f"an operand is {'real' if 'real' in kinds else 'integer'}-valued ({', '.join(kinds)}): no AND neuron "
           "computes it and no static synapse holds it")
    return {"node": n.name, "op": n.op, "operands": [f"{i} ({g.node(i).type.kind})" for i in n.inputs],
            "runs": "host", "why": why}


def _scaled(g: Graph, n: Node):
    """The ``scale`` (b = 0) that is the only reader of windowsum ``n``, or None."""
    cons = g.consumers(n.name)
    if len(cons) == 1 and cons[0].op == "scale" and float(cons[0].attrs.get("b", 0.0)) == 0.0 \
            and n.name not in g.outputs:
        return cons[0]
    return None


def _window_conv(r: _Rewriter, n: Node, sc: Node) -> None:
    k, d = int(n.attrs["kernel"]), int(n.attrs["dilation"])
    c = n.type.shape[0]
    w = np.full((c, 1, k, k), float(sc.attrs["a"]))
    pad = d * (k - 1) // 2
    r.emit(sc.name, "conv2d", [n.inputs[0]], {"stride": (1, 1), "padding": (pad, pad), "dilation": (d, d),
                                              "groups": c}, {"weight": w, "bias": np.zeros(c)}, scope=n.scope)
    r.rewrites.append({"nodes": [n.name, sc.name], "as": f"depthwise conv2d {sc.name!r}, every {k}x{k} weight "
                       f"{float(sc.attrs['a']):.6g} (dilation {d}): the window sum times its scale, accumulate only"})


def _sum_pool_scale(g: Graph, n: Node):
    """The ``scale`` (``a = kh kw``, ``b = 0``) that is the only reader of an unpadded avgpool2d ``n``: a sum pool
    (Sinabs's ``SumPool2d``, an ``LPPool2d`` of norm 1, traces as the average times the window), or None."""
    sc = _scaled(g, n)
    k = tuple(n.attrs["kernel"])
    if sc is None or tuple(n.attrs["padding"]) != (0, 0) or n.attrs.get("ceil_mode") \
            or float(sc.attrs["a"]) != float(k[0] * k[1]):
        return None
    return sc


def _sum_pool(r: _Rewriter, n: Node, sc: Node) -> None:
    """``scale(avgpool2d(x))`` as the sum pool it is: a depthwise all-ones conv2d with the pool's window and stride
    (``pooling.is_sum_pool``), which folds into the next synapse as a sum pool."""
    k = tuple(n.attrs["kernel"])
    attrs, params = window_sum_as_conv(n.type.shape[0], k, n.attrs["stride"], (0, 0))
    r.emit(sc.name, "conv2d", [n.inputs[0]], attrs, params, scope=n.scope)
    r.rewrites.append({"nodes": [n.name, sc.name], "as": f"sum pool {sc.name!r}: the {k[0]}x{k[1]} average times "
                       f"{float(sc.attrs['a']):.6g} as the window sum (a depthwise all-ones conv2d, stride "
                       f"{tuple(n.attrs['stride'])})"})


def _pooled_count(g: Graph, n: Node) -> bool:
    """``substep_sum(avgpool2d(s))`` over binary sub-step spikes ``s`` (the sum of averages, a linear map)."""
    if n.op != "substep_sum" or "bias" in n.params or g.node(n.inputs[0]).op != "avgpool2d":
        return False
    s = g.node(g.node(n.inputs[0]).inputs[0])
    return s.type.kind == "binary" and s.type.substeps > 1


def _count_then_pool(r: _Rewriter, n: Node) -> None:
    """``avgpool2d(substep_sum(s))``: the same linear map, its count first, so a synapse reads the count."""
    pool = r.g.node(n.inputs[0])
    count = r.emit(f"{pool.inputs[0]}.count", "substep_sum", [pool.inputs[0]], scope=n.scope)
    r.emit(n.name, "avgpool2d", [count], dict(pool.attrs), scope=n.scope)
    r.rewrites.append({"nodes": [pool.name, n.name], "as": f"avgpool2d of the count {count!r} (the sum over sub-steps "
                                                           "first; the same linear map)"})


def _sums_spikes(g: Graph, n: Node) -> bool:
    """``n`` sums its inputs into a population's input: a real-valued add, or a neuron."""
    from spikec.targets.lava.vocabulary import NEURON, role
    return (n.op == "add" and n.type.kind == "real") or role(n.op) == NEURON


def _spike_into_sum(g: Graph, n: Node, i: str) -> bool:
    """Input ``i`` of ``n`` (``_sums_spikes``) is spikes or an unrolled neuron's count, added with no synapse."""
    from spikec.targets.lava.vocabulary import NEURON, role
    src = g.node(i)
    if len(src.type.shape) not in (1, 3) or src.type.substeps != 1:
        return False
    if src.op == "substep_sum" and "bias" not in src.params:
        src = g.node(src.inputs[0])
        return src.type.kind == "binary" and (role(src.op) == NEURON or src.op == "maxpool2d")
    return src.type.kind == "binary" and (role(src.op) == NEURON or src.op == "maxpool2d")


def _identity_streams(r: _Rewriter, n: Node) -> None:
    ins = []
    for i in n.inputs:
        if not _spike_into_sum(r.g, n, i):
            ins.append(i)
            continue
        shape = r.g.node(i).type.shape
        c = shape[0]
        name = r.identity.get((i, n.inputs)) if n.op != "add" else None
        if name is not None:   # a twin of a neuron already given its identity synapse reads the same one
            ins.append(name)
            continue
        name = f"{i}.to.{n.name}"
        r.identity[(i, n.inputs)] = name
        if len(shape) == 3:
            w = np.eye(c).reshape(c, c, 1, 1)
            r.emit(name, "conv2d", [i], {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1},
                   {"weight": w, "bias": np.zeros(c)}, scope=n.scope)
        else:
            r.emit(name, "linear", [i], {}, {"weight": np.eye(c), "bias": np.zeros(c)}, scope=n.scope)
        r.rewrites.append({"nodes": [n.name], "as": f"spikes {i!r} added through a weight-1 identity synapse "
                                                    f"{name!r} (a second synaptic stream of the sum)"})
        ins.append(name)
    if n.op == "add":
        r.emit(n.name, "add", ins, scope=n.scope)
    else:
        r.keep(n.with_(inputs=tuple(ins)))


def _is_expr(g: Graph, name: str) -> bool:
    """A node of a synaptic expression (a synapse, a sum, a pool or view of one): folded into one population."""
    n = g.node(name)
    if n.op in ("conv2d", "linear", "avgpool2d"):
        return True
    if n.op == "add":
        return n.type.kind == "real"
    if n.op in ("flatten", "substep_sum"):
        return _is_expr(g, n.inputs[0])
    return False


def _twins(a: Node, b: Node) -> bool:
    """Two reads of one neuron run (a neuron and its membrane or state read-out; an unrolled integer neuron keeps
    an ``intfire`` membrane twin): they share their synaptic sum."""
    from spikec.targets.lava.vocabulary import NEURON, role
    return role(a.op) == role(b.op) == NEURON and a.inputs == b.inputs


def _unshare(g: Graph, rewrites: list) -> Graph:
    """Each synaptic expression read by one consumer: a second reader gets its own copy (``<node>.for.<reader>``),
    down to the spike sources, so that on chip each population has its own synapses (a residual stream read by a
    neuron and by the next sum is two sets of synapses from the same spikes)."""
    claimed, nodes, made = {}, [], {}

    def clone(name: str, reader: str) -> str:
        key = (name, reader)
        if key not in made:
            n = g.node(name)
            ins = tuple(clone(i, reader) if _is_expr(g, i) else i for i in n.inputs)
            made[key] = f"{name}.for.{reader}"
            nodes.append(n.with_(name=made[key], inputs=ins))
        return made[key]

    for n in g.nodes:
        ins = []
        for i in n.inputs:
            first = claimed.setdefault(i, n)
            if _is_expr(g, i) and first is not n and not _twins(first, n):
                ins.append(clone(i, n.name))
            else:
                ins.append(i)
        nodes.append(n.with_(inputs=tuple(ins)))
    if made:
        rewrites.append({"nodes": sorted({k for k, _ in made}), "as": f"{len(made)} synaptic expression node(s) "
                         "copied for their second reader (<node>.for.<reader>): one set of synapses per population"})
    return Graph(tuple(nodes), g.outputs, g.meta)


def _host_late(g: Graph) -> Graph:
    """The same graph, host nodes ordered as late as their readers allow (a stable topological order preferring
    chip nodes): a host region is lowered at its first node, so every chip value it reads (an AND count) must
    come before it."""
    import heapq
    from spikec.targets.lava.host import HOST
    index = {n.name: k for k, n in enumerate(g.nodes)}
    waiting = {n.name: len(set(n.inputs)) for n in g.nodes}
    readers: dict = {}
    for n in g.nodes:
        for i in set(n.inputs):
            readers.setdefault(i, []).append(n.name)
    key = lambda name: (g.node(name).op in HOST, index[name])
    ready = [key(n.name) + (n.name,) for n in g.nodes if not waiting[n.name]]
    heapq.heapify(ready)
    order = []
    while ready:
        *_, name = heapq.heappop(ready)
        order.append(g.node(name))
        for c in readers.get(name, ()):
            waiting[c] -= 1
            if not waiting[c]:
                heapq.heappush(ready, key(c) + (c,))
    return Graph(tuple(order), g.outputs, g.meta)


def _drop_dead(g: Graph) -> Graph:
    live = set(g.outputs)
    for n in reversed(g.nodes):
        if n.name in live or n.op == "input":
            live.update(n.inputs)
    return Graph(tuple(n for n in g.nodes if n.name in live or n.op == "input"), g.outputs, g.meta)


def check(graph: Graph, reference, trace) -> dict:
    """The rewritten graph's float run ``trace`` against the original ``graph``'s run ``reference`` on every output:
    ``equivalent`` by the checker's rule (spikes equal, real values within its relative tolerance: the all-equal
    window may round in the last bit), ``outputs_equal`` bit for bit. The Lava verdict requires ``equivalent``:
    Lava is compared with the integer reference of the *rewritten* graph, which only this check ties to ``graph``."""
    from spikec.core.checker import Comparison
    result = Comparison()
    for o in graph.outputs:
        got = trace.values.get(o)
        result.add(o, np.asarray(reference.values[o]), np.zeros(0) if got is None else np.asarray(got),
                   graph.node(o).type.is_spike)
    diffs = {o: float(np.abs(np.asarray(reference.values[o]) - np.asarray(trace.values[o])).max(initial=0))
             if o in trace.values and np.shape(trace.values[o]) == np.shape(reference.values[o]) else float("inf")
             for o in graph.outputs}
    return {"rewritten": True, "equivalent": result.equivalent, "outputs_equal": all(v == 0 for v in diffs.values()),
            "max_abs_difference": diffs, "spike_mismatches": result.spike_mismatches,
            "real_mismatches": result.real_mismatches, "max_rel_diff": result.max_rel_diff,
            "first_mismatches": [m.to_json() for m in result.mismatches[:5]], "inputs": "the verification inputs"}


def proven(prep) -> bool:
    """The products rewrite ``prep`` (a ``Prepared`` or None: nothing rewritten) is proven on the inputs."""
    return prep is None or all(r.get("equivalent", True) for r in prep.rewrites if "rewritten" in r)


def placed(graph: Graph, inputs, reference) -> tuple:
    """``(graph, reference, Prepared or None)``: the graph with its products placed and the float run of it
    (``reference``, the original graph's run, unchanged when nothing was rewritten); the rewrite's ``check``
    against ``reference`` in ``Prepared.rewrites``."""
    from spikec.core.interpreter import run
    sinabs_counts.refuse_unbounded(graph, inputs, reference)   # MultiSpike: the count it reaches, named
    prep = prepare(graph)
    if not prep.products and not prep.rewrites:
        return graph, reference, None
    trace = run(prep.graph, inputs)
    proof = check(graph, reference, trace)
    return prep.graph, trace, Prepared(prep.graph, prep.products, prep.rewrites + [proof])


def report(prep: Prepared, q: Graph, net: dict, trace, lava: dict) -> dict:
    """The report's ``products`` section (``product_report.py``)."""
    from spikec.targets.lava.product_report import products_section
    kinds = {p["name"]: p["type"] for p in net["processes"]}
    records = [dict(r, process="LIF" if kinds.get(r["and_population"]) == "AND" else kinds.get(r["and_population"]))
               if r["runs"] == "chip" else r for r in prep.products]   # as lowered (SpikecAND when P > 1)
    return products_section(Prepared(prep.graph, records, prep.rewrites), q, net, trace, lava)


def line(section: dict) -> str:
    """One line for the CLI summary: which products ran where, and the work on chip vs host per inference."""
    chip, host = section["per_inference"]["chip"], section["per_inference"]["host"]
    on_chip, proof = section["binary_products_on_chip"], section["rewrite_check"]
    failed = "" if proof.get("equivalent", True) else (
        f"REWRITE NOT PROVEN ({proof['spike_mismatches']} spike and {proof['real_mismatches']} value mismatches of "
        "the rewritten graph against the given one: bit_exact false); ")
    custom = {p["process"] for p in section["placement"] if p["runs"] == "chip"} - {"LIF"}
    text = (f"products: {len(on_chip)} on chip as AND neurons ({', '.join(on_chip)}; {chip['and_neurons']:,} "
            f"AND neurons, {'SpikecAND (a sub-step schedule)' if custom else 'standard Lava LIF'})" if on_chip
            else "products: none binary x binary (none on chip)")
    text += f", {len(section['products_on_host'])} on host"
    if section.get("synapses_split"):
        text += (f"; {len(section['synapses_split'])} synapse(s) split per source over concat / slice / sum / mean "
                 f"or Norse's input weights ({', '.join(section['synapses_split'])})")
    return failed + (text + f"; per inference: chip {chip['spikes_per_inference']:,.0f} spikes, "
            f"{chip['synaptic_ops_per_inference']:,.0f} synaptic ops; host {host['multiply_accumulates_per_inference']:,} "
            f"MACs, {host['values_read_from_chip_per_inference']:,} values read, "
            f"{host['values_sent_to_chip_per_inference']:,} sent")
