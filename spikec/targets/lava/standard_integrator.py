"""A leaky-integrator read-out (``lava_lif`` with ``fire="never"``: Norse's LI / LICell, a state-only read-out) as
Lava's standard ``LIF``, where a static bound proves it bit-exact with spikec's integer reference.

spikec's reference of the read-out (``ops.lava_lif``) is Lava's LIF sub-threshold arithmetic, one step per physical
step, with no firing: ``u = dec(u, 4096 - (du + 1)) + (a << 6)`` (wrapped to 24 bits), ``v = dec(v, 4096 - dv) + u
+ bias`` (clipped to +-(2^23 - 1)), ``dec(x, f) = sgn(x f) (|x f| >> 12)``. Lava's LIF computes the same and then
fires ``v > vth << 6`` and zeroes ``v``. With ``vth = 2^17 - 1`` (Lava's largest, ``vth << 6 = 2^23 - 64``) it never
fires while ``v <= 2^23 - 64``, and then it *is* the reference, step for step: the process ``LIF`` (chip-ready), its
``v`` read by Lava's Monitor every step, ``s_out`` connected to nothing, the bias switched on at the first update
(as for every LIF: ``bias_on_after_step``).

``choose`` proves it from the weights alone (every input): the synaptic sum ``a`` lies in ``[lo, hi]``
(``standard_readout.bound``, given by the lowering: binary or bounded payload sources), ``dec`` is monotone and ``|dec(x, f)| <= f |x| /
4096``, so ``u`` stays within the fixed point of ``X <- dec(X, fu) + 64 hi`` (at most ``64 hi 4096 / (4096 - fu)``; the
negative twin alike; no wrap if within 24 bits) and ``v`` within that of ``X <- dec(X, fv) + u_hi + max bias``: the
values a constant worst input reaches, so the bound is tight. ``dv = 0`` (no leak: beta = 1) has no such bound. Otherwise the read-out stays
spikec's SpikecLIF, its record saying why (``standard_integrator_refused``), which ``chip.py`` reports.
"""
import numpy as np

from spikec.targets.lava import current_bias, ops as lops
from spikec.targets.lava.fixed_point import VTH_MAX

VTH = VTH_MAX                      # out of reach: v <= VTH << 6 never fires
THETA = VTH << 6                   # 2^23 - 64
U_LIMIT = 2 ** 23                  # u wraps beyond (-2^23, 2^23]
RULE = (f"a leaky integrator as Lava's LIF with vth = {VTH} (never reached): bit-exact while v <= {THETA} on every "
        "input, bounded from the weights and the sources' value ranges (v read with Lava's Monitor each step)")


ITERATIONS = 1 << 20


def _ceil_gain(c: int, f: int) -> int | None:
    """The largest ``X`` reaches under ``X <- dec(X, f) + c`` from ``X = 0`` (``c >= 0``), which bounds every ``X_t <=
    dec(X_{t-1}, f) + c``: ``dec`` is monotone, so the iterates rise to its least fixed point (the value a constant
    worst input holds); ``c 4096 / (4096 - f)`` if that takes over ``ITERATIONS`` steps. None when ``f = 4096`` (no
    decay: no bound independent of the run's length)."""
    if c <= 0:
        return 0
    if f >= 4096:
        return None
    x = 0
    for _ in range(ITERATIONS):
        nx = ((x * f) >> 12) + c
        if nx == x:
            return x
        x = nx
    return -(-c * 4096 // (4096 - f))


def _scalar(n, k: str) -> int | None:
    a = np.asarray(n.params[k])
    return int(a) if a.ndim == 0 or len(set(a.reshape(-1).tolist())) == 1 else None


def v_bound(n, a: tuple[int, int]) -> tuple[int, int] | str:
    """``(v_lo, v_hi)`` of integrator ``n`` whose synaptic sum lies in ``a``, or why there is no bound."""
    du, dv = _scalar(n, "du"), _scalar(n, "dv")
    if du is None or dv is None:
        return "per-channel decays (Lava's LIF takes one du and one dv)"
    fu, fv = 4096 - ((du + 1) & 0xFFFF), 4096 - dv
    u_hi, u_neg = _ceil_gain(64 * max(a[1], 0), fu), _ceil_gain(-64 * min(a[0], 0), fu)
    if u_hi is None or u_neg is None:
        return "du = 4095 - 4096: its current never decays (no static bound)"
    if u_hi > U_LIMIT or u_neg >= U_LIMIT:
        return f"its current u may reach [{-u_neg}, {u_hi}], beyond Lava's 24 bits"
    b = lops.bias_value(np.asarray(n.params["bias_mant"], dtype=np.int64),
                        np.asarray(n.params["bias_exp"], dtype=np.int64))
    v_hi = _ceil_gain(u_hi + int(b.max()), fv)    # v starts at 0: a negative drive keeps it <= 0
    v_neg = _ceil_gain(u_neg - int(b.min()), fv)
    if v_hi is None or v_neg is None:
        return "dv = 0 (no leak, beta = 1): v has no static bound independent of the run's length"
    return -v_neg, v_hi


def with_bias(n, a: tuple[int, int]) -> tuple[int, int]:
    """The bound of the input ``a + bias_u`` (a current bias, delivered by a Dense: current_bias.py) from that of
    the synaptic sum ``a``."""
    if "bias_u" not in n.params:
        return a
    b = np.asarray(n.params["bias_u"], dtype=np.int64)
    return a[0] + min(int(b.min()), 0), a[1] + max(int(b.max()), 0)


def refusal(q, n, record: dict, a) -> str | None:
    """Why integrator ``n`` cannot be Lava's LIF exactly (None: it can)."""
    if record["period"] > 1:
        return f"a sub-step schedule ({record['period']} Lava steps per physical step): Lava's LIF updates every step"
    if "bias_u" in n.params and (why := current_bias.refusal(n, record["start"])) is not None:
        return "a current bias (the synapse's bias added to u; Lava's LIF biases v) no Dense carries exactly: " + why
    if n.attrs.get("recurrent"):
        return "a self-synapse"
    twins = [m for m in q.nodes if m.op == n.op and m.inputs == n.inputs and m.name != n.name]
    readers = [m.name for m in q.nodes if any(i in m.inputs for i in [n.name] + [t.name for t in twins])]
    if readers or n.name not in q.outputs or any(t.name in q.outputs for t in twins):
        return "its value is read by a process or as another state (a standard LIF sends none; the host reads v)"
    if isinstance(a, str):
        return a
    v = v_bound(n, with_bias(n, a))
    if isinstance(v, str):
        return v
    if v[1] > THETA:
        return (f"its state v may reach {v[1]} on some input (the synaptic sum in [{a[0]}, {a[1]}]), beyond {THETA} "
                "where Lava's LIF with its largest vth would fire and reset")
    return None


def choose(q, n, record: dict, a, arrays: dict) -> dict:
    """The integrator's process record: Lava's LIF when exact on every input (module doc), else the SpikecLIF record
    with ``standard_integrator_refused``. ``a``: the synaptic sum's static bound ``(lo, hi)``, or why it has none."""
    why = refusal(q, n, record, a)
    if why is not None:
        return dict(record, standard_integrator_refused=why)
    a = with_bias(n, a)
    lo, hi = v_bound(n, a)
    for k in ("du", "dv", "vth", "bias_u"):
        arrays.pop(f"{n.name}/{k}", None)   # Lava's LIF takes them as scalars (the record's)
    return dict(record, type="LIF", du=_scalar(n, "du"), dv=_scalar(n, "dv"), vth=VTH, integrator=True,
                state="v", act_shift=0, a_bound=[a[0], a[1]], v_bound=[lo, hi], v_limit=THETA, rule=RULE)


def measured(net: dict, trace) -> dict:
    """Per standard integrator: its static bound of ``v``, and ``v``'s range on these inputs (the integer reference),
    checked within the bound (a value outside is a compiler bug) and never firing."""
    out = {}
    for p in net["processes"]:
        if not p.get("integrator"):
            continue
        v = np.asarray(trace.values[p["ir_node"]], dtype=np.int64)
        lo, hi = int(v.min(initial=0)), int(v.max(initial=0))
        out[p["name"]] = {"process": "lava.proc.lif.process.LIF", "read": "v with Lava's Monitor, each step",
                          "v_bound": p["v_bound"], "v_limit": p["v_limit"], "v_measured": [lo, hi],
                          "within_bound": bool(p["v_bound"][0] <= lo and hi <= p["v_bound"][1]),
                          "within": bool(hi <= p["v_limit"])}
    return out


def line(m: dict) -> str:
    parts = [f"{k} v in [{v['v_measured'][0]}, {v['v_measured'][1]}] on these inputs, bound [{v['v_bound'][0]}, "
             f"{v['v_bound'][1]}] on any, never firing below {v['v_limit']}" for k, v in m.items()]
    return "leaky-integrator read-out as Lava's LIF (vth out of reach, v read by Lava's Monitor): " + "; ".join(parts)
