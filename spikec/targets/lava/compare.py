"""Compare a Lava run with the integer reference, bit for bit.

Spikes (and graded payloads, read-outs, host values, state reads recorded as outputs) are compared at their Lava steps (the schedule of
``lower.py``) and required silent at every other recorded step; final states are read after the last update.
"""
import numpy as np

from spikec.targets.lava.lower import STATE_VARS

MAX_REPORTED = 10


def schedule_index(start: int, period: int, substeps: int, n: int) -> np.ndarray:
    """Lava step (0-based) of each of the ``n`` reference steps of a value with ``substeps`` per physical step."""
    j = np.arange(n)
    return start + (j // substeps) * period + (j % substeps)


def compare(net: dict, trace, lava: dict, steps: int) -> dict:
    """Bit-for-bit: every spike, graded payload, read-out and host value at its Lava step, silence at every
    other Lava step up to the last compared one, and the final states of every neuron population."""
    mismatches, per_node = [], {}
    counts = {"spikes_compared": 0, "graded_payloads_compared": 0, "values_compared": 0, "host_values_compared": 0,
              "states_compared": 0, "state_reads_compared": 0, "pre_latency_values_checked": 0}
    period = net["period"]

    def note(node, what, exp, got, lava_steps=None, state=False):
        bad = exp != got
        k = int(bad.sum())
        if k:
            per_node.setdefault(node, {})
            per_node[node][what] = per_node[node].get(what, 0) + k
        for pos in np.argwhere(bad)[: max(0, MAX_REPORTED - len(mismatches))]:
            pos = tuple(int(i) for i in pos)
            m = {"node": node, "what": what, "expected": int(exp[pos]), "got": int(got[pos])}
            if state:
                m.update(batch=pos[0], index=list(pos[1:]), after_step=steps - 1)
            else:
                m.update(step=pos[0], lava_step=int(lava_steps[pos[0]]) + 1, batch=pos[1], index=list(pos[2:]))
            mismatches.append(m)
        return k

    for r in net["recorded"]:
        name = r["name"]
        rec = lava["outputs"][name]
        exp = trace.values[r["ir_node"]].astype(np.int64)
        idx = schedule_index(r["start"], period, r["substeps"], exp.shape[0])
        got = rec[idx]
        what = {"spikes": "spikes", "payload": "payload", "output": "output", "host": "host_value",
                "state": "state"}[r["what"]]
        note(name, what, exp, got, idx)
        key = {"spikes": "spikes_compared", "payload": "spikes_compared", "output": "values_compared",
               "host": "values_compared", "state": "state_reads_compared"}[r["what"]]
        counts[key] += exp.size
        if r["what"] == "payload":
            counts["graded_payloads_compared"] += exp.size
        if r["what"] == "host":
            counts["host_values_compared"] += exp.size
        off = np.setdiff1d(np.arange(int(idx.max(initial=-1)) + 1), idx)   # before the last compared step only
        if off.size:
            note(name, "off_schedule", np.zeros_like(rec[off]), rec[off], off)
            counts["pre_latency_values_checked"] += rec[off].size
    for p in net["processes"]:
        for var in STATE_VARS.get(p["type"], ()):
            exp_s = trace.values[f"{p['name']}.{var}"][steps - 1].astype(np.int64)
            note(p["name"], f"final_{var}", exp_s, lava["states"][(var, p["name"])], state=True)
            counts["states_compared"] += exp_s.size
    order = []   # processes in order, a host's outputs right after it
    for p in net["processes"]:
        order += [p["name"]] + [o["node"] for o in p.get("out_ports", ())]
    first = next((n for n in order if n in per_node), None)
    syn = {p["name"]: p.get("input") for p in net["processes"]}
    return {"bit_exact": not per_node, "steps_compared": steps, **counts,
            "mismatch_counts": per_node,
            "first_divergent_layer": None if first is None else {"population": first, "synapse": syn.get(first)},
            "first_mismatches": mismatches}
