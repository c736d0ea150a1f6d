"""Sinabs's multi-spike neurons (``lif_sinabs`` with ``MaxSpike(n)`` / ``MultiSpike``) on Loihi 2.

Sinabs's ``MaxSpike(n)`` with its subtract reset and no synaptic current is, per step
(``spikec/frontend/sinabs.py``)::

    v = alpha_mem v + u                        (u = (1 - alpha_mem) x with norm_input, else x)
    s = min([v > 0] trunc(v / theta), n)       float32 counts
    v = v - s theta                            a float32 product (Sinabs's float32 spikes times the 0-dim theta)
    v = relu(v - min_v_mem) + min_v_mem        with min_v_mem (sinabs.from_model's default -1): intfire's v_min

which is spikec's integer-firing neuron ``intfire`` (``beta = alpha_mem``, ``alpha = 1 - alpha_mem`` or 1,
``threshold = theta``, ``rounding="floor"``, ``max_spikes = n``): ``clamp(floor(v / theta), 0, n)`` is the same
count (``trunc`` and ``floor`` agree for ``v > 0``, both give 0 below), and ``h = u - theta q`` the same residual
when every ``q theta`` (q = 1..n) is a float32 number, so that Sinabs's float32 product rounds nothing
(``_float32_exact``). ``lower`` rewrites such nodes to ``intfire`` (same name and input); the Lava target deploys it
as SpikecIntFire with a graded payload of ``n``'s bits, and ``products.check`` proves the rewritten graph on the
verification inputs as every Lava rewrite.

``MultiSpike`` (Sinabs's default ``spike_fn``) has no bound of its own on the count, and a graded payload has a
fixed width, chosen before the run. But after its reset ``v - s theta < theta`` (``s = floor(v / theta)``), so
``v_t < max(alpha_mem, 0) theta + max u`` and the count is at most ``n = floor(alpha_mem + max u / theta)``: where a
static bound of ``u`` over *every* input follows from the weights and the sources' value ranges (``value_ranges``:
binary spikes 0..1, integer counts 0..ceiling, through conv2d / linear / pools / flatten / scale / add, a bounded
MultiSpike's own 0..n), the neuron is ``MaxSpike(n)`` on every input and is lowered as one. Without such a bound (a
real-valued input, an op the bound does not follow) it is refused (``refuse_unbounded``) with the largest count
the verification inputs reach and the remedy ``MaxSpike(n)`` (the same function while counts stay within ``n``).
Any other ``lif_sinabs`` stays as it is (refused by the mapping).
"""
import numpy as np

from spikec.ir.errors import UnsupportedOp
from spikec.ir.graph import Graph, Node, TensorType
from spikec.ops.neurons import INTFIRE, LIF
from spikec.targets.lava.ops_table import having

COUNTING = having("counts_as_intfire")   # Sinabs's lif_sinabs (ops_table.py)


def _float32_exact(theta: float, n: int) -> bool:
    """Every ``q theta`` (q = 1..n) is a float32 number (theta itself one): Sinabs's float32 product is exact."""
    q = np.arange(1, n + 1, dtype=np.float64) * theta   # exact in float64 (24 + log2 n bits < 53)
    return bool(np.float32(theta) == theta) and bool(np.all(q.astype(np.float32).astype(np.float64) == q))


def exact_intfire(n: Node, max_spikes: int | None = None) -> bool:
    """``n`` is a ``lif_sinabs`` MaxSpike(n) neuron (or a MultiSpike one whose count is at most ``max_spikes`` on
    every input) that ``intfire`` computes exactly (module doc)."""
    a, p = n.attrs, n.params
    # a SingleSpike reaches here only with what the frontend's lif lacks (min_v_mem): MaxSpike(1)
    spike_ok = a.get("spike") in ("max", "single") or (a.get("spike") == "multi" and max_spikes is not None)
    if n.op not in COUNTING or not spike_ok or a.get("reset") != "subtract" or "alpha_syn" in p:
        return False
    theta = float(np.asarray(p["threshold"]))
    if "min_v_mem" in p and not float(np.asarray(p["min_v_mem"])) < theta:   # the count bound needs v < theta
        return False
    if "subtract" in p and float(np.asarray(p["subtract"])) != theta:
        return False
    m = int(a["max_spikes"]) if a.get("spike") == "max" else 1 if a.get("spike") == "single" else max_spikes
    return theta > 0 and _float32_exact(theta, m)


def why_not(n: Node, bound: int | None) -> str:
    """Why MultiSpike neuron ``n`` (with its static ``bound`` or None) is no exact ``intfire``: the first reason."""
    a, p = n.attrs, n.params
    if "min_v_mem" in p and not float(np.asarray(p["min_v_mem"])) < float(np.asarray(p.get("threshold", np.inf))):
        return f"its min_v_mem = {float(np.asarray(p['min_v_mem'])):g} is not below its threshold"
    if "alpha_syn" in p:
        return "it has a synaptic current (tau_syn): the count bound and the integer neuron take the membrane alone"
    if a.get("reset") != "subtract":
        return f"its reset is {a.get('reset')!r}, not MembraneSubtract"
    theta = float(np.asarray(p.get("threshold", 0.0)))
    if not theta > 0:
        return f"its threshold {theta:g} is not positive"
    if "subtract" in p and float(np.asarray(p["subtract"])) != theta:
        return (f"its reset subtracts {float(np.asarray(p['subtract'])):g}, not its threshold {theta:g} (the integer "
                "neuron subtracts what it counts)")
    if bound is None:
        return ("its input has no static bound from the weights and the sources' value ranges (a real-valued input, "
                "or an op the bound does not follow)")
    return "its threshold's multiples are not float32-exact (Sinabs's float32 product would round them)"


def _intfire(n: Node, m: int) -> Node:
    """``intfire`` counting up to ``m``; for ``m = 1`` the binary ``lif`` (subtract reset, fires on
    ``v - theta >= 0``: ``floor(v / theta) >= 1`` exactly then), which the frontend makes of a SingleSpike too."""
    alpha_mem = np.asarray(n.params["alpha_mem"], dtype=np.float64)
    alpha = (1 - alpha_mem) if n.attrs["norm_input"] else np.asarray(1.0)
    params = {"beta": alpha_mem, "alpha": np.asarray(alpha, dtype=np.float64),
              "threshold": np.asarray(n.params["threshold"], dtype=np.float64)}
    if "min_v_mem" in n.params:   # the clamp after the reset: intfire's v_min (lif has none, even for m = 1)
        params["v_min"] = np.asarray(n.params["min_v_mem"], dtype=np.float64)
    if m == 1 and "v_min" not in params:
        return Node(n.name, LIF, n.inputs, TensorType(n.type.shape, "binary"), {"reset": "subtract"},
                    {**params, "bias": np.asarray(0.0), "v_reset": np.asarray(0.0)}, scope=n.scope)
    return Node(n.name, INTFIRE, n.inputs, TensorType(n.type.shape, "integer", m),
                {"max_spikes": m, "rounding": "floor"}, params, scope=n.scope)


def _span(lo: float, hi: float, zero: bool = False) -> tuple[float, float]:
    return (min(lo, 0.0), max(hi, 0.0)) if zero else (lo, hi)


def _synapse_range(n: Node, r: tuple[float, float]) -> tuple[float, float]:
    """``(lo, hi)`` of a conv2d / linear over inputs in ``r`` (a conv's zero padding included)."""
    lo, hi = _span(*r, zero=n.op == "conv2d")
    w = np.asarray(n.params["weight"], dtype=np.float64)
    w = w.reshape(w.shape[0], -1)
    b = np.asarray(n.params.get("bias", np.zeros(w.shape[0])), dtype=np.float64).reshape(-1)
    pos, neg = np.maximum(w, 0).sum(1), np.minimum(w, 0).sum(1)
    return float((b + pos * lo + neg * hi).min(initial=0.0)), float((b + pos * hi + neg * lo).max(initial=0.0))


def count_bound(n: Node, u: tuple[float, float] | None) -> int | None:
    """The most spikes MultiSpike neuron ``n`` sends in a step on any input whose synaptic input lies in ``u``:
    ``floor(max(alpha_mem, 0) + max u' / theta)`` (``u' = (1 - alpha_mem) u`` with norm_input; module doc), or None."""
    p = n.params
    # v < theta after a step needs the subtract reset of at least theta; a synaptic current is not u itself
    if u is None or "threshold" not in p or n.attrs.get("reset") != "subtract" or "alpha_syn" in p:
        return None
    alpha_mem, theta = float(np.asarray(p["alpha_mem"])), float(np.asarray(p["threshold"]))
    if theta <= 0 or alpha_mem < 0 or ("subtract" in p and float(np.asarray(p["subtract"])) < theta):
        return None
    gain = (1 - alpha_mem) if n.attrs.get("norm_input") else 1.0
    top = max(gain * u[0], gain * u[1], 0.0)
    # a relative margin: Sinabs's float32 membrane may round past the exact bound's integer
    return max(1, int(np.floor(alpha_mem + top / theta + 1e-6)))


_SAME = ("flatten", "reshape", "maxpool2d", "avgpool2d", "delay", "adaptive_avgpool2d")


def value_ranges(graph: Graph) -> dict[str, tuple[float, float] | None]:
    """``(lo, hi)`` of every node's values over *every* input (None where there is no static bound): the sources'
    kinds, then the linear ops and MultiSpike counts (``count_bound``) in graph order."""
    out: dict = {}
    for n in graph.nodes:
        ins = [out.get(i) for i in n.inputs]
        if n.type.kind == "binary":
            r = (0.0, 1.0)
        elif n.type.kind == "integer" and n.type.ceiling is not None:
            r = (0.0, float(n.type.ceiling))
        elif not ins or any(i is None for i in ins):
            r = None
        elif n.op in ("conv2d", "linear"):
            r = _synapse_range(n, ins[0])
        elif n.op in _SAME:
            r = _span(*ins[0], zero=any(int(p) for p in np.ravel(n.attrs.get("padding", 0))))
        elif n.op == "scale":
            a, b = float(n.attrs.get("a", 1.0)), float(n.attrs.get("b", 0.0))
            r = tuple(sorted((a * ins[0][0] + b, a * ins[0][1] + b)))
        elif n.op == "add":
            r = (sum(i[0] for i in ins), sum(i[1] for i in ins))
        elif n.op in COUNTING and n.attrs.get("spike") == "multi":
            m = count_bound(n, ins[0])
            r = None if m is None else (0.0, float(m))
        else:
            r = None
        out[n.name] = r
    return out


def lower(graph: Graph) -> tuple[Graph, list]:
    """``(graph with exact MaxSpike neurons, and MultiSpike ones with a static bound, as intfire, one rewrite
    record each)``."""
    records, nodes = [], []
    ranges = value_ranges(graph) if any(n.attrs.get("spike") == "multi" for n in graph.nodes if n.op in COUNTING) \
        else {}
    for n in graph.nodes:
        bound = count_bound(n, ranges.get(n.inputs[0])) if n.inputs and n.attrs.get("spike") == "multi" else None
        if exact_intfire(n, bound):
            m = bound if bound is not None else 1 if n.attrs.get("spike") == "single" else int(n.attrs["max_spikes"])
            nodes.append(_intfire(n, m))
            floor = "min_v_mem" in n.params
            what = (f"Sinabs SingleSpike neuron {n.name!r} (MaxSpike(1))" if n.attrs.get("spike") == "single" else
                    f"Sinabs MaxSpike({m}) neuron {n.name!r}" if bound is None else
                    f"Sinabs MultiSpike neuron {n.name!r}, at most {m} spike(s) a step on every input (its input "
                    f"lies in [{ranges[n.inputs[0]][0]:.6g}, {ranges[n.inputs[0]][1]:.6g}] by the weights and the "
                    f"sources' ranges, and v < alpha_mem theta + max u after its reset), so MaxSpike({m}),")
            how = ("as lif (binary, its subtract reset; floor(v / theta) >= 1 is v >= theta)" if m == 1 and not floor
                   else "as intfire (rounding floor, the same count and subtract reset"
                   + (", its min_v_mem floor as v_min" if floor else "") + ")")
            records.append({"nodes": [n.name], "as": f"{what} {how}"})
        else:
            nodes.append(n)
    if not records:
        return graph, []
    return Graph(tuple(nodes), graph.outputs, graph.meta), records


def refuse_unbounded(graph: Graph, inputs, reference) -> None:
    """Refuses the first ``MultiSpike`` neuron by name, with the largest count it reaches on ``inputs``."""
    multi = [n for n in graph.nodes if n.op in COUNTING and n.attrs.get("spike") == "multi"]
    if multi:   # a count with a static bound is MaxSpike(bound) (``lower``): only the unbounded ones are refused
        ranges = value_ranges(graph)
        multi = [n for n in multi if not exact_intfire(n, count_bound(n, ranges.get(n.inputs[0])))]
    if not multi:
        return
    values = getattr(reference, "values", {})
    if any(n.name not in values for n in multi):
        from spikec.core.interpreter import run
        values = run(graph, inputs).values
    n = multi[0]
    peak = int(np.max(np.asarray(values[n.name]), initial=0))
    why = why_not(n, count_bound(n, ranges.get(n.inputs[0])))
    raise UnsupportedOp(
        f"the Lava target cannot map node {n.name!r} ({n.op}): Sinabs's MultiSpike neuron is no exact integer-firing "
        f"neuron here because {why}; on the verification inputs its count reaches {peak} "
        f"({max(1, peak.bit_length())} bits)",
        where=f"node {n.name!r}" + (f", module {n.scope!r}" if n.scope else ""),
        remedy=f"spike_fn=MaxSpike(n) with n >= {max(1, peak)} (the same function while counts stay within n; exact on "
          "Lava with its subtract reset and a float32-exact threshold), or SingleSpike")
