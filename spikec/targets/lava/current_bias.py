"""A current bias (``bias_u`` of ``lava_lif``: the synapse's bias added to the current ``u`` every step, as Norse's
``LIFCell`` / ``LICell`` integrate a biased ``nn.Linear``'s bias) as standard Lava processes, exactly.

Lava's LIF has a bias on ``v`` only. spikec's integer reference adds ``bias_u`` to the synaptic sum:
``u = dec(u, fu) + ((a + bias_u) << 6)`` (``ops.lava_lif``). Lava adds every connection into an InPort, so a Dense
that delivers exactly ``bias_u`` into the population's ``a_in`` at each of its updates makes Lava's LIF compute the
reference step for step:

- the source: one Lava ``LIF`` for the whole network (type ``BiasLIF`` in network.json, one neuron per sample),
  ``du = dv = 4095``, ``vth = 0``, ``bias_mant = 1``: ``v = (v_prev >> 12) + 1 = 1 > 0`` at every Lava step from
  step 0 on, reset to 0: it fires every step, with no input and no Var write;
- per biased population, one or two ``Dense`` from it (``<population>.current_bias<k>``, a ``DelayDense`` with
  axon delay ``start - 1``): Lava's Dense sends at step ``m + 1`` what it received at ``m``, so the source's spike of
  Lava step ``start - 1 + t`` lands in the update ``start + t`` (physical step ``t``) and none before ``start`` (the
  population is silent before its first update, as the comparison requires). One spike of weight ``w`` delivers
  ``dense_effective_weights(w) << e`` (``e >= 0``) or its floor shift (``e < 0``), so ``bias_u`` must be exactly a sum
  of at most two such 8-bit terms (``terms``); the sum is checked against ``bias_u`` (``delivered``) when lowered,
  in the report and in ``spikec verify``.

A ``(C, H, W)`` population (a biased conv's) takes the Dense too, its rows laid out as Lava's folded ``(W, H, B C)``
and its ``a_out`` reshaped to the population's ``a_in`` (``folded_weights``). Otherwise (a bias no two Dense terms
hold, a first update at Lava step 0 or beyond the axon delays) the population stays spikec's SpikecLIF and its record says why
(``current_bias_refused``), which the chip-blocker line repeats.
"""
import numpy as np

from spikec.targets.lava import ops as lops
from spikec.targets.lava.layout import lava_shape

TYPE = "BiasLIF"
SOURCE = "current_bias.source"
SOURCE_LIF = {"du": 4095, "dv": 4095, "vth": 0, "bias_mant": 1, "bias_exp": 0}
MAX_TERMS = 2
# the synaptic weight exponent's range, Loihi's (NxSDK weightExponent -8..7), assumed for Loihi 2 (its microcode
# limits are not in the open packages); Lava 0.10's CPU Dense takes any shift
WEIGHT_EXP = (-8, 7)
MAX_AXON_DELAY = 62          # DelayDense on Loihi 2: delays 0..62 (lower.MAX_AXON_DELAY)
RULE = ("a current bias as a Dense from an always-firing LIF (du = dv = 4095, vth = 0, bias_mant = 1: v = 1 > 0 every "
        "Lava step) into the population's a_in, delayed to land from its first update on: u gets (a + bias_u) << 6, "
        "the integer reference's; exact when bias_u is a sum of at most two 8-bit Dense terms w << weight_exp")


def _one(b: np.ndarray) -> tuple[np.ndarray, int] | None:
    """``(weights, weight_exp)`` of one Dense delivering ``b`` (per neuron) for one input spike, or None. Single
    sign: ``w <= 255`` in magnitude, ``w << e``; mixed sign: Lava drops the LSB, so ``2 m`` with ``weight_exp = e - 1``
    delivers ``m << e`` for ``-128 <= m <= 127``. ``e`` is the largest shift all values share (smallest mantissas),
    within ``WEIGHT_EXP``."""
    b = np.asarray(b, dtype=np.int64)
    nz = b[b != 0]
    if nz.size == 0:
        return None
    e = min(int((int(v) & -int(v)).bit_length()) - 1 for v in np.unique(np.abs(nz)))
    m = b >> e
    if m.min() >= 0 or m.max() <= 0:
        found = (m, e) if np.abs(m).max() <= 255 else None
    else:
        found = (2 * m, e - 1) if -128 <= m.min() and m.max() <= 127 else None
    return found if found is None or WEIGHT_EXP[0] <= found[1] <= WEIGHT_EXP[1] else None


def delivered(terms: list) -> np.ndarray:
    """What the terms' Denses deliver for one spike of the source, summed: Lava's weight rules and shift
    (``ops.dense_effective_weights``, ``a << e`` or floor ``a >> -e``)."""
    out = 0
    for w, e in terms:
        out = out + lops.weight_shift(lops.dense_effective_weights(np.asarray(w, dtype=np.int64)), e)
    return np.asarray(out, dtype=np.int64)


def terms(b: np.ndarray) -> list | None:
    """At most ``MAX_TERMS`` ``(weights, weight_exp)`` whose Denses deliver exactly ``b``, or None. Two terms:
    ``b = lo + (hi << k)``, ``hi`` by floor, rounding or ceiling, for every split ``k``."""
    b = np.asarray(b, dtype=np.int64)
    if not b.any():
        return []
    one = _one(b)
    if one is not None:
        return [one]
    for k in range(1, 25):
        for hi in (b >> k, (b + (1 << (k - 1))) >> k, -((-b) >> k)):
            lo, top = b - (hi << k), hi << k
            parts = [_one(lo), _one(top)]
            if all(p is not None or not v.any() for p, v in zip(parts, (lo, top))):
                found = [p for p in parts if p is not None]
                if np.array_equal(delivered(found), b):
                    return found
    return None


def _per_neuron(n) -> np.ndarray:
    """``bias_u`` per neuron of population ``n``, flat in the IR's order (``(C, H, W)`` row-major: the rows of the
    bias Dense as params.npz holds them; ``build.py`` lays them out in Lava's folded ``(W, H, B C)``)."""
    b, shape = np.asarray(n.params["bias_u"], dtype=np.int64), tuple(n.type.shape)
    return np.broadcast_to(b.reshape(-1, *([1] * (len(shape) - 1))) if b.ndim else b, shape).reshape(-1).copy()


def folded_weights(w: np.ndarray, ir_shape, batch: int) -> np.ndarray:
    """A bias Dense's weights ``(N, 1)`` (IR order) for ``batch`` samples side by side: ``(B N, B)``, sample ``b``'s
    source feeding sample ``b``'s neurons, rows in the folded population's flat order (a vector: blocks; a
    ``(C, H, W)`` population: Lava's ``(W, H, B C)``, its ``a_out`` reshaped to the population's ``a_in``)."""
    w = np.asarray(w).reshape(-1)
    if len(ir_shape) != 3:
        return np.kron(np.eye(batch, dtype=w.dtype), w.reshape(-1, 1))
    c, h, wd = ir_shape
    lava = w.reshape(c, h, wd).transpose(2, 1, 0)            # (W, H, C)
    big = np.zeros((wd, h, batch, c, batch), dtype=w.dtype)
    for b in range(batch):
        big[:, :, b, :, b] = lava
    return big.reshape(-1, batch)


def refusal(n, start: int) -> str | None:
    """Why population ``n`` (first update at Lava step ``start``) cannot take its current bias from a Dense exactly
    (None: it can)."""
    if len(n.type.shape) not in (1, 3):
        return f"a current bias into a {tuple(n.type.shape)} population (the bias Dense is built for (N,) and (C, H, W))"
    if start < 1:
        return "its first update is Lava step 0, before any synapse can deliver the bias (one Lava step)"
    if start - 1 > MAX_AXON_DELAY:
        return (f"its first update is Lava step {start}: the bias synapse would need an axon delay of {start - 1}, "
                f"beyond DelayDense's {MAX_AXON_DELAY}")
    b = np.unique(np.asarray(n.params["bias_u"], dtype=np.int64))
    if terms(b) is None:
        return (f"its current bias {b.min()}..{b.max()} ({b.size} values) is no sum of {MAX_TERMS} 8-bit Dense weights "
                "w << weight_exp (too many significant bits across the channels)")
    return None


def source_record(period: int) -> dict:
    return {"name": SOURCE, "type": TYPE, "ir_shape": [1], "lava_shape": [1], "start": 0, "latency": 0,
            "period": period, "emit": 1, **SOURCE_LIF, "rule": RULE}


def add(lo, n, record: dict) -> list[str]:
    """The bias synapses of population ``n`` (record ``record``, Lava's LIF): the shared source (first use), one
    Dense per term into ``a_in``, their weights to ``lo.arrays``; ``record["current_bias"]`` says what they deliver.
    Returns the synapse names (their connections into the population are the caller's)."""
    if not any(p["name"] == SOURCE for p in lo.procs):
        lo.procs.insert(0, source_record(lo.period))
    b = _per_neuron(n)
    found = terms(b)
    delay = int(record["start"]) - 1
    names = []
    for k, (w, e) in enumerate(found):
        name = f"{n.name}.current_bias{k}"
        lo.arrays[f"{name}/weights"] = np.ascontiguousarray(np.asarray(w, dtype=np.int64).reshape(-1, 1))
        lo.procs.append({"name": name, "ir_node": n.name, "ir_shape": list(n.type.shape),
                         "lava_shape": lava_shape(n.type.shape), "input": SOURCE, "input_ir_shape": [1],
                         "latency": 1, "num_message_bits": 0, "target": n.name, "delay": delay,
                         "type": "DelayDense" if delay else "Dense", "flatten_input": False, "input_lava_shape": [1],
                         "weight_exp": int(e), "sign_mode": lops.sign_mode(np.asarray(w)), "axon_delay": delay,
                         "current_bias": True})
        lo.conns.append({"src": SOURCE, "port": "s_out", "dst": name, "dst_port": "s_in", "flatten": False})
        names.append(name)
    if len(n.type.shape) == 3:   # the caller connects them: their a_out reshaped to the population's (W, H, B C)
        record["reshape_inputs"] = names
    record["current_bias"] = {"source": SOURCE, "synapses": names, "axon_delay": delay,
                              "bias_u": [int(b.min(initial=0)), int(b.max(initial=0))], "rule": RULE}
    return names


def check(net: dict, arrays: dict, q) -> dict:
    """Per population with a current bias on Lava's LIF: the Denses' delivery (their written weights, Lava's rules)
    equals ``bias_u`` of the integer reference on every neuron, and they land from its first update on."""
    out, failures = {}, []
    procs = {p["name"]: p for p in net["processes"]}
    for p in net["processes"]:
        cb = p.get("current_bias")
        if not isinstance(cb, dict):   # no bias, or one of the bias synapses
            continue
        syns = [procs.get(s) for s in cb["synapses"]]
        if any(s is None for s in syns):
            failures.append(f"population {p['name']!r}: a bias synapse of {cb['synapses']} is missing")
            continue
        got = delivered([(arrays[f"{s['name']}/weights"].reshape(-1), int(s["weight_exp"])) for s in syns])
        want = _per_neuron(q.node(p["name"]))
        timed = all(int(s.get("axon_delay", 0)) == int(p["start"]) - 1 and s["input"] == SOURCE for s in syns)
        ok = bool(np.array_equal(got, want)) and timed
        out[p["name"]] = {"synapses": cb["synapses"], "bias_u": cb["bias_u"], "delivered_equals_bias_u": ok,
                          "axon_delay": cb["axon_delay"]}
        if not ok:
            failures.append(f"population {p['name']!r}: its bias synapses deliver "
                            + ("other values than bias_u" if timed else "at other Lava steps than its updates"))
    return {"ok": not failures, "per_population": out, "failures": failures}


def line(c: dict) -> str:
    pops = c["per_population"]
    return (f"current bias on Lava's LIF: {len(pops)} population(s) fed by an always-firing LIF through "
            f"{sum(len(v['synapses']) for v in pops.values())} Dense(s), delivering bias_u exactly: "
            + ("yes" if c["ok"] else "NO: " + "; ".join(c["failures"][:2])))


def add_to_report(report: dict, net: dict, arrays: dict, q) -> bool:
    """``current_biases`` (``check``) and its summary line, when the network has any; returns whether it holds."""
    c = check(net, arrays, q)
    if c["per_population"] or not c["ok"]:
        report["current_biases"] = c
        if "summary" in report:
            report["summary"] += "\n             " + line(c)
    return c["ok"]
