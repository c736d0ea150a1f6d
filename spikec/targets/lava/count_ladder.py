"""A bounded integer-firing neuron (Sinabs's ``MaxSpike(D)`` / ``MultiSpike`` with a static bound, ``lava_intfire``
with ``rounding="floor"``) on Lava's standard LIF: a *ladder* of D binary copies, the membrane in each copy's ``u``.

The integer reference's neuron sends ``S = clip(floor(v / T), 0, D)`` (``T = vth << 6``) and keeps ``v - S T``:
``S`` counts the rungs ``q = 1..D`` with ``v >= q T``. Lava's LIF sends one bit. So the population becomes ``D``
copies of itself in one Lava LIF of ``D N`` neurons (copy-major: channel ``q C + c``, or neuron ``q N + i``), each
with the membrane in ``u`` as ``current_reset.py`` keeps a subtract reset's:

    u_t = dec(u_{t-1}) + (a_t + bias_u - w S_{t-1}) << 6        every copy the same (the same input, the same S)
    v_t = trunc(v_{t-1} / 4096) + u_t + b_q                      (dv = 4095; v = 0 after a spike)
    copy q fires iff v_t > T, i.e. u_t + c_qt > q T (copies 2..D) or u_t + c_qt >= T (copy 1: b_1 = 1)

with ``c_qt = trunc(v_{t-1} / 4096)`` the copy's own carry (its ``v`` holds its offset too), the rung offsets
``b_q = -(q - 1) T`` on ``v`` (Lava's per-neuron bias, not integrated: ``dv = 4095``), and the
reset a Sparse self-synapse of weight ``-w`` from *every* copy of a neuron onto every copy of it
(``I ⊗ ones(D, D) ⊗ I`` in Lava's folded order), so that all copies subtract ``w S``. The synapse into the neuron
is repeated for each copy (its weights tiled over the copies' rows) and the synapse out of it reads the D copies as
its input (its weights tiled over their columns): ``sum_q W s_q = W S``, binary spikes instead of a graded payload.

Against the reference's integer neuron (measured, ``report["count_ladders"]``): the carries ``c_qt`` (as in
``current_reset.py``, per copy); the strict ``>`` of the rungs above the first (a membrane exactly on ``q T`` sends one spike
less); with ``beta = 1`` (Sinabs's IAF) ``u`` keeps 4095/4096 a step (Lava's current has no exact integrator), and
with ``beta < 1`` the reset subtracts ``round(w (4096 - dv) / 4096)`` after the decay instead of ``w`` before it.
Lava's bias is a 13-bit mantissa ``<< e`` (``e <= 7``), so ``(D - 1) T`` must be one: the deployment is quantized
with ``vth`` at most about ``8192 / (D - 1)`` (``ladder_vth``), which the weights' precision follows.

A graph output is the copies' spikes, summed into the count on the host (``ops.ladder_counts``: ``spikec.load``'s outputs, the
measurements). Refused (the neuron stays SpikecIntFire, the reason on its node as ``count_ladder_refused``): a
membrane read, a lower clamp (Sinabs's ``min_v_mem``: Lava's LIF has none), rounding to nearest, an unrolled schedule, per-channel
decays or thresholds, a synaptic current, a bias two 8-bit Denses do not hold, an input other than synapses used by
the neuron alone, or a reader other than Dense / Conv (``groups = 1``) synapses, directly or through ``flatten``.
"""
import numpy as np

from spikec.ir.graph import Graph, Node, TensorType
from spikec.targets.lava import current_reset
from spikec.targets.lava.ops import LADDER, bias_value, ladder_counts, primary

SYNAPSES = ("lava_dense", "lava_conv")
BIAS_MANT = 4096          # Lava's LIF bias mantissa: 13-bit signed (-4096..4095); the offsets are negative
BIAS_EXP = 7
# D copies cost D x the neurons and D_in x D_out a Dense's weights: a static count bound grows with depth (a
# hidden layer's can reach hundreds), so beyond these the neuron stays SpikecIntFire and says why
MAX_COPIES = 16
MAX_DENSE_WEIGHTS = 1 << 22   # a tiled Dense's weights (per sample; Lava's CPU model holds them dense)


def _offset(k: int) -> tuple[int, int] | None:
    """``(m, e)`` with ``m << e == k`` (``k >= 0``), ``m <= 4096``, ``e <= 7``, or None."""
    for e in range(BIAS_EXP, -1, -1):
        if k % (1 << e) == 0 and k >> e <= BIAS_MANT:
            return k >> e, e
    return None


def offsets(vth: int, d: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(bias_mant, bias_exp)`` per copy ``q = 1..d``: ``+1`` (copy 1 fires on ``>=``) and ``-((q - 1) vth << 6)``."""
    mant, exp = [1], [0]
    for q in range(2, d + 1):
        me = _offset((q - 1) * vth << 6)
        if me is None:
            return None
        mant.append(-me[0])
        exp.append(me[1])
    return np.array(mant, dtype=np.int64), np.array(exp, dtype=np.int64)


def ladder_vth(vth: int, d: int) -> int:
    """The largest threshold ``<= vth`` the ladder deploys: an 8-bit mantissa (the reset synapse's weight) whose
    rung offsets Lava's bias holds."""
    v = min(int(vth), (BIAS_MANT << (BIAS_EXP - 6)) // max(d - 1, 1))
    while v > 1 and (current_reset.representable_vth(v) != v or offsets(v, d) is None):
        v -= 1
    return max(v, 1)


def _synapse_tree(graph: Graph, name: str, used_by: str) -> list[Node] | None:
    """The synapses (and the ``add`` nodes joining them) that feed ``name``'s input, each used by it alone."""
    n = graph.node(name)
    if [c.name for c in graph.consumers(name)] != [used_by]:
        return None
    if n.op in SYNAPSES:
        return [n] if n.op == "lava_dense" or int(n.attrs.get("groups", 1)) == 1 else None
    if n.op == "add":
        parts = [_synapse_tree(graph, i, name) for i in n.inputs]
        return None if any(p is None for p in parts) else [n] + [m for p in parts for m in p]
    return None


def _readers(graph: Graph, name: str) -> list[Node] | None:
    """The flatten nodes and synapses that read ``name``'s spikes (None if anything else does)."""
    found = []
    for c in graph.consumers(name):
        if c.op == "flatten":
            rest = _readers(graph, c.name)
            if rest is None or c.name in graph.outputs:
                return None
            found += [c] + rest
        elif c.op in SYNAPSES and list(c.inputs) == [name] and int(c.attrs.get("groups", 1)) == 1:
            found.append(c)
        else:
            return None
    return found


def refusal(graph: Graph, n: Node, quantized: bool = True) -> str | None:
    """Why ``lava_intfire`` population ``n`` stays SpikecIntFire (None: it becomes a ladder)."""
    a, p = n.attrs, n.params
    if a.get("rounding") != "floor" or a.get("unrolled"):
        return "its count rounds to nearest or replays over sub-steps (the ladder takes floor(v / theta), per step)"
    if current_reset.on_sub_steps(graph):
        return current_reset.SUB_STEPS
    if current_reset.twins(graph, n):
        return "its membrane is read (each copy's v holds a different offset)"
    if "v_min" in p:
        return ("its membrane is clamped below (Sinabs's min_v_mem): Lava's LIF has no lower clamp of u "
                "(min_v_mem=None, e.g. sinabs.from_model(..., min_v_mem=None), makes it a ladder; retrain if the "
                "clamp mattered)")
    if any(np.asarray(p[k]).ndim for k in ("du", "dv", "vth")) or int(p["du"]) != 4095:
        return "per-channel decays or thresholds, or a synaptic current (Lava's LIF takes one du, dv, vth; u is taken)"
    if len(n.type.shape) not in (1, 3):
        return f"its shape {n.type.shape} is neither (N,) nor (C, H, W)"
    tree, readers = _synapse_tree(graph, n.inputs[0], n.name), _readers(graph, n.name)
    if tree is None:
        return "its input is not synapses (Dense, Conv with groups = 1) used by it alone"
    if readers is None:
        return "something other than Dense / Conv (groups = 1) synapses reads its spikes (directly or through flatten)"
    return _size_refusal(graph, n, tree, readers) or current_reset.bias_refusal(p, quantized)


def _copies(graph: Graph, name: str) -> int:
    """The copies an integer-firing neuron ``name`` would have (1 for anything else, or beyond MAX_COPIES)."""
    m = graph.node(name)
    d = int(m.attrs["max_spikes"]) if m.op == "lava_intfire" and not m.attrs.get("unrolled") else 1
    return d if d <= MAX_COPIES else 1


def _size_refusal(graph: Graph, n: Node, tree: list, readers: list) -> str | None:
    d = int(n.attrs["max_spikes"])
    if d > MAX_COPIES:
        return (f"at most {d} spikes a step (its static bound) would take {d} copies, beyond the ladder's "
                f"{MAX_COPIES} (D x the neurons, D_in x D_out a Dense's weights; spike_fn=MaxSpike(n) with n <= "
                f"{MAX_COPIES} bounds it)")
    for s in tree + readers:
        if s.op != "lava_dense":
            continue
        other = _copies(graph, s.inputs[0]) if s in tree else \
            max((_copies(graph, c.name) for c in graph.consumers(s.name)), default=1)
        if np.size(s.params["weight"]) * d * other > MAX_DENSE_WEIGHTS:
            return (f"Dense {s.name!r} would hold {np.size(s.params['weight']) * d * other:,} weights over the "
                    f"copies, beyond {MAX_DENSE_WEIGHTS:,} (a smaller n in spike_fn=MaxSpike(n) shrinks it)")
    return None


def candidates(graph: Graph) -> dict[str, int]:
    """``{population: the vth it deploys}`` for the ladders (before requantizing)."""
    return {n.name: ladder_vth(int(n.params["vth"]), int(n.attrs["max_spikes"])) for n in graph.nodes
            if n.op == "lava_intfire" and primary(n) and refusal(graph, n, quantized=False) is None}


def _tiled_shape(shape: tuple, d: int) -> tuple:
    return (d * shape[0],) + tuple(shape[1:])


def _ladder_node(n: Node) -> Node:
    """``n`` as the ladder's Lava LIF (module doc)."""
    p, d, vth = n.params, int(n.attrs["max_spikes"]), int(n.params["vth"])
    mant, exp = offsets(vth, d)
    per = n.type.shape[0]   # channels of a (C, H, W) population, neurons of a vector: one bias each
    rep = lambda a: np.repeat(a, per)   # noqa: E731  copy-major
    m, e = current_reset.reset_weight_of(n)   # an immediate subtract: vth decayed by dv
    params = {"du": np.int64(max(int(p["dv"]) - 1, 0)), "dv": np.int64(4095), "vth": np.int64(vth),
              "bias_mant": rep(mant), "bias_exp": rep(exp), "reset_weight": np.int64(-m)}
    bias = np.broadcast_to(bias_value(np.asarray(p["bias_mant"], dtype=np.int64),
                                      np.asarray(p["bias_exp"], dtype=np.int64)), (per,))
    if bias.any():
        params["bias_u"] = np.tile(bias >> 6, d)
    attrs = {k: v for k, v in n.attrs.items() if k not in ("max_spikes", "rounding", "unrolled", "fire")}
    attrs.update(reset="zero", process="LIF", reset_weight_exp=e, membrane_in_u="subtract", **{LADDER: d})
    return Node(n.name, "lava_lif", n.inputs, TensorType(_tiled_shape(n.type.shape, d), "binary"), attrs, params,
                scope=n.scope)


def _tile_in(n: Node, d: int) -> Node:
    """A synapse (or add) into a ladder: one row block per copy."""
    params = dict(n.params)
    if n.op in SYNAPSES:
        params["weight"] = np.tile(n.params["weight"], (d,) + (1,) * (n.params["weight"].ndim - 1))
    return n.with_(type=TensorType(_tiled_shape(n.type.shape, d), n.type.kind), params=params)


def _tile_out(n: Node, d: int) -> Node:
    """A flatten or synapse reading a ladder: the copies' columns (input channels) share the weights."""
    if n.op == "flatten":
        return n.with_(type=TensorType(_tiled_shape(n.type.shape, d), "binary"))
    w = n.params["weight"]
    return n.with_(params={**n.params, "weight": np.tile(w, (1, d) + (1,) * (w.ndim - 2))},
                   attrs={**n.attrs, "num_message_bits": 0})


def apply(graph: Graph) -> tuple[Graph, list[str], dict]:
    """``(graph with the ladders, their names, {population: why not} for the other integer neurons)``; the refused
    ones carry the reason as ``count_ladder_refused``."""
    changed, refused, edits = [], {}, {}
    for n in graph.nodes:
        if n.op != "lava_intfire" or not primary(n):
            continue
        d, vth = int(n.attrs["max_spikes"]), int(n.params["vth"])
        why = refusal(graph, n)
        if why is None and ladder_vth(vth, d) != vth:
            why = f"vth = {vth} has no rung offsets in Lava's bias or is no 8-bit mantissa (set by vth_override)"
        if why is not None:
            refused[n.name] = why
            edits[n.name] = n.with_(attrs=dict(n.attrs, count_ladder_refused=why))
            continue
        changed.append(n.name)
        edits[n.name] = _ladder_node(n)
        for m in _synapse_tree(graph, n.inputs[0], n.name):   # a synapse may also read an earlier ladder
            edits[m.name] = _tile_in(edits.get(m.name, m), d)
        for m in _readers(graph, n.name):
            edits[m.name] = _tile_out(edits.get(m.name, m), d)
    if not edits:
        return graph, changed, refused
    return Graph(tuple(edits.get(n.name, n) for n in graph.nodes), graph.outputs, graph.meta), changed, refused


def annotate(layers, graph: Graph, ladders: list, refused: dict) -> None:
    """The layer records of the ladders (their process and notes) and of the refused integer neurons."""
    for layer in layers:
        if layer.name in ladders:
            n = graph.node(layer.name)
            layer.info.update(process="LIF", lowered_as=(
                f"a count ladder (count_ladder.py): {n.attrs[LADDER]} binary copies in Lava's LIF, the membrane in u "
                f"(du = {int(n.params['du'])}, dv = 4095), rung offsets on v, a -vth Sparse from every copy onto "
                "every copy; the synapses tiled over the copies"))
            if int(n.params["du"]) == 0:
                layer.info.setdefault("notes", []).append(current_reset.BETA_ONE)
        elif layer.name in refused:
            layer.info["count_ladder_refused"] = refused[layer.name]


def measure(ref: dict, graph: Graph, ladders: list, refused: dict, trace) -> dict:
    """The ladders' counts (their copies summed) against the reference's integer neuron of the same weights and
    threshold (``ref``: the exact integer graph's run on the same inputs), and every output."""
    got = ladder_counts(graph, trace.values)
    per = {}
    for name in ladders:
        a, b = np.asarray(ref[name]).astype(np.int64), got[name]
        per[name] = {"copies": int(graph.node(name).attrs[LADDER]), "count_agreement": float((a == b).mean()),
                     "spikes_reference": int(a.sum()), "spikes_deployed": int(b.sum()),
                     "max_abs_difference": int(np.abs(a - b).max(initial=0))}
    outputs = {}
    for o in graph.outputs:
        a, b = np.asarray(ref[o]), np.asarray(got[o])
        outputs[o] = {"values_equal": float((a == b).mean()) if a.size else 1.0}
    return {"populations": ladders, "kept_custom": refused, "per_population": per, "outputs": outputs,
            "compared_with": "the integer-firing neuron (SpikecIntFire's arithmetic: floor(v / vth << 6), v in v) of "
                             "the same weights, thresholds and biases, on the verification inputs",
            "rule": "an integer-firing neuron with at most D spikes a step is D copies in Lava's LIF, the membrane in "
                    "u, rung q firing at u > q vth << 6 (>= for the first), reset by a -vth Sparse from every copy "
                    "onto every copy; it differs by the carry trunc(v / 4096), the ties of rungs 2..D and, for beta = "
                    "1, u's 4095/4096 (count_ladder.py)"}


def line(v: dict) -> str:
    parts = [f"{n} ({p['copies']} copies) counts {100 * p['count_agreement']:.2f}%"
             for n, p in v["per_population"].items()]
    parts += [f"output {o} values {100 * a['values_equal']:.2f}%" for o, a in v["outputs"].items()]
    kept = f"; kept as SpikecIntFire: {', '.join(f'{k} ({w})' for k, w in v['kept_custom'].items())}" \
        if v["kept_custom"] else ""
    return (f"integer-firing neurons as count ladders of Lava's LIF: {', '.join(v['populations'])}; against the "
            f"integer-firing neuron on the verification inputs: {', '.join(parts)}{kept}")
