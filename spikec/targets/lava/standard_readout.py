"""A real-valued read-out (``lava_readout``: ``y = a + bias``, ``a`` the synaptic sum) as Lava's standard ``LIF``.

The population is ``lava.proc.lif.process.LIF`` with ``du = 4095``, ``dv = 4095``, ``vth = 2^17 - 1``, no bias
(type ``LIFReadout`` in network.json). Lava's fixed-point LIF (``AbstractPyLifModelFixed.subthr_dynamics``)
decays the current by ``4096 - (du + ds_offset)`` with ``ds_offset = 1``: factor 0, so nothing of the previous step
is carried and ``u = wrap24(a << 6)``: ``u = 64 a`` exactly while ``-2^23 < 64 a <= 2^23``, i.e.
``-131072 < a <= 131072`` (outside, Lava wraps u modulo 2^24). ``v`` is not read: ``dv = 4095`` still carries
``trunc(v / 4096)`` into the next step, and the LIF's bias goes to ``v``. Lava's own Monitor
(``lava.proc.monitor``) reads ``u`` after every step and the host computes ``y = (u >> 6) + bias`` from the read-out's
first update on (before it, ``u`` must be 0: compared as silence). ``s_out`` is connected to nothing (the
threshold 131071 << 6 is reached only by ``a`` above 131039, and a spike resets ``v``, never ``u``).

``choose`` makes a read-out this standard LIF when it is exact for *every* input: the bound of ``a`` from the
weights and the sources' value ranges (binary spikes 0/1, integer payloads 0..D) lies in the exact range, one Lava
step per physical step (a sub-step schedule sums a window, which a LIF with no current memory cannot), its terms
are synapses (a host value sent straight into the port has no static bound) and nothing but the host reads it (a
process reading the read-out's value needs the value sent). Otherwise it stays spikec's ``Readout`` and its record
says why (``standard_readout_refused``), which ``chip.py`` reports.
"""
import numpy as np

from spikec.targets.lava import ops as lops, standard_integrator

TYPE = "LIFReadout"
DU, DV, VTH = 4095, 4095, 2 ** 17 - 1
ACT_SHIFT = 6
EXACT = (-(2 ** 17) + 1, 2 ** 17)      # a with u = a << 6 unwrapped: -2^23 < 64 a <= 2^23
RULE = (f"u = a << 6 (du = {DU}: no current carried), exact for {EXACT[0]} <= a <= {EXACT[1]} (Lava's 24-bit "
        "current wraps beyond); the bound of a is taken over every input from the weights and the sources' value "
        "ranges")


def _source_max(q, name: str) -> int | None:
    """The largest value a synapse's source sends (its values lie in 0..max), or None when not known statically."""
    t = q.node(name).type
    if t.kind == "binary":
        return 1
    if t.kind == "integer":
        return int(t.ceiling)
    return None


def _term_bound(q, syn) -> tuple[int, int] | str:
    """``(lo, hi)`` of one synapse's contribution to ``a`` over every input, or why there is none."""
    m = 1 if syn.attrs.get("num_message_bits", 0) == 0 else _source_max(q, syn.inputs[0])
    if m is None:
        return f"synapse {syn.name!r} reads {syn.inputs[0]!r}, whose values have no static bound"
    w = np.asarray(syn.params["weight"], dtype=np.int64)
    if syn.op == "lava_dense":
        w = lops.dense_effective_weights(w)
    w = w.reshape(w.shape[0], -1)
    hi = int((np.maximum(w, 0).sum(1) * m).max(initial=0))
    lo = int((np.minimum(w, 0).sum(1) * m).min(initial=0))
    e = int(syn.attrs.get("weight_exp", 0)) if syn.op == "lava_dense" else 0
    # Lava's shift (floor for e < 0) is monotone: the shifted bounds bound the shifted sums
    return (lo << e, hi << e) if e >= 0 else (lo >> -e, hi >> -e)


def bound(q, n, terms: list) -> tuple[int, int] | str:
    """``(lo, hi)`` with ``lo <= a <= hi`` for read-out ``n`` on any input, or why there is no static bound."""
    lo = hi = 0
    for kind, t in terms:
        if kind != "syn":
            return f"{t!r} is sent straight into its input port (no static bound on its values)"
        b = _term_bound(q, q.node(t))
        if isinstance(b, str):
            return b
        lo, hi = lo + b[0], hi + b[1]
    return lo, hi


def refusal(q, n, base: dict, terms: list) -> str | None:
    """Why read-out ``n`` cannot be the standard LIF exactly (None: it can)."""
    if base["period"] > 1:
        return (f"a sub-step schedule ({base['period']} Lava steps per physical step): the read-out sums its input "
                "over each period, a LIF with no current memory keeps one Lava step")
    readers = [m.name for m in q.nodes if n.name in m.inputs]
    if readers:
        return f"{readers[0]!r} reads its value (a standard LIF sends no value, the host reads its state)"
    b = bound(q, n, terms)
    if isinstance(b, str):
        return b
    if b[0] < EXACT[0] or b[1] > EXACT[1]:
        return (f"its synaptic sum may reach [{b[0]}, {b[1]}] on some input, beyond [{EXACT[0]}, {EXACT[1]}] where "
                "u = a << 6 is exact (Lava's 24-bit current wraps)")
    return None


def choose(q, n, record: dict, terms: list) -> dict:
    """The read-out's process record: the standard LIF when exact on every input (module doc), else ``Readout``
    with ``standard_readout_refused`` (its bias array ``<name>/bias`` is written by the lowering either way)."""
    why = refusal(q, n, record, terms)
    if why is not None:
        return dict(record, standard_readout_refused=why)
    lo, hi = bound(q, n, terms)
    return dict(record, type=TYPE, du=DU, dv=DV, vth=VTH, state="u", act_shift=ACT_SHIFT, bias=f"{n.name}/bias",
                bias_from_step=record["start"], a_bound=[lo, hi], a_exact=list(EXACT), rule=RULE)


def host_values(u: np.ndarray, bias: np.ndarray, start: int, shift: int = ACT_SHIFT) -> np.ndarray:
    """``(*shape, steps)`` read-out values from Lava's Monitor data of ``u`` ``(steps, *shape)``: ``(u >> 6) + bias``
    from Lava step ``start`` (0-based) on, ``u >> 6`` before (0 when nothing arrived early: compared as silence).
    ``shift = 0`` and no bias: a standard integrator's ``v`` as it is (standard_integrator.py)."""
    u = np.moveaxis(np.rint(np.asarray(u, dtype=np.float64)).astype(np.int64), 0, -1)
    on = (np.arange(u.shape[-1]) >= start).astype(np.int64)
    return (u >> shift) + np.asarray(bias, dtype=np.int64)[..., None] * on


def measured(net: dict, q, trace) -> dict:
    """Per standard LIF read-out: its static bound of ``a``, the exact range, and ``a``'s range on these inputs
    (from the integer reference, ``a = y - bias``), checked within the exact range and within the static bound (a
    value outside the bound is a compiler bug: the bound is wrong); per standard leaky integrator
    (standard_integrator.py) its bound of ``v`` likewise."""
    out = standard_integrator.measured(net, trace)
    for p in net["processes"]:
        if p["type"] != TYPE:
            continue
        name = p["name"]
        y = np.asarray(trace.values[p["ir_node"]], dtype=np.int64)
        a = y - _bias(q, p["ir_node"], y.ndim)
        lo, hi = int(a.min(initial=0)), int(a.max(initial=0))
        out[name] = {"process": "lava.proc.lif.process.LIF", "read": "u with Lava's Monitor, each step",
                     "a_bound": p["a_bound"], "a_exact": p["a_exact"], "a_measured": [lo, hi],
                     "within": bool(EXACT[0] <= lo and hi <= EXACT[1]),
                     "within_bound": bool(p["a_bound"][0] <= lo and hi <= p["a_bound"][1])}
    return out


def _bias(q, name: str, ndim: int) -> np.ndarray:
    """The read-out's integer bias, broadcast over ``[T, B, C, ...]``."""
    b = np.asarray(q.node(name).params["bias"], dtype=np.int64)
    return b.reshape((1, 1, -1) + (1,) * (ndim - 3)) if b.ndim else b


def line(m: dict) -> str:
    """One summary line for the standard LIF read-outs."""
    parts = [f"{k} a in [{v['a_measured'][0]}, {v['a_measured'][1]}] on these inputs, bound [{v['a_bound'][0]}, "
             f"{v['a_bound'][1]}] on any, exact in [{v['a_exact'][0]}, {v['a_exact'][1]}]" for k, v in m.items()
             if "a_measured" in v]
    integrators = {k: v for k, v in m.items() if "v_measured" in v}
    text = "read-out as Lava's LIF (u = a << 6 read by Lava's Monitor, bias added by the host): " + "; ".join(parts)
    if not integrators:
        return text
    return (text + "\n             " if parts else "") + standard_integrator.line(integrators)


def add_to_report(report: dict, net: dict, q, trace) -> None:
    """``standard_readouts`` (``measured``) and its summary line, when the network has any."""
    m = measured(net, q, trace)
    if m:
        report["standard_readouts"] = m
        if "summary" in report:
            report["summary"] += "\n             " + line(m)


def readouts_ok(m: dict | None) -> bool:
    """Every standard LIF read-out's synaptic sum within its exact range and its static bound on these inputs."""
    return all(v["within"] and v["within_bound"] for v in (m or {}).values())
