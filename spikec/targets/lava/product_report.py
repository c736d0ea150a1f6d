"""The report's ``products`` section: which product ran where and why, and the work on chip vs host.

Counted on the integer reference's run over the verification inputs (the run Lava reproduced bit for bit
when ``bit_exact`` is true), per inference (one sample, all its physical steps):

* chip: populations and neurons, spikes (a graded payload or an unrolled count counts its value), and
  synaptic operations: every nonzero input value times the nonzero weights it fans out to (Dense / Conv);
* host: its partitions, the multiply-accumulates of its ops (``mul``: one per output; ``matmul``: the inner dim
  per output; ``sdna_pairwise``: ``2 k^2`` per output, the products ``Q_i K_j`` and ``a_ij V_j``; ``scale``: one per
  output; views none), and the values it reads from and sends to the chip.

``spikes_per_second`` is given as the Lava CPU simulation's throughput (spikes simulated per wall-clock
second) and per physical step: Loihi 2's time per step is not measured here.
"""
import numpy as np
import torch
import torch.nn.functional as F

from spikec.targets.lava.lower import POPULATION_TYPES
from spikec.targets.lava.ops_table import entry, having


def products_section(prep, q, net: dict, trace, lava: dict) -> dict:
    """``q`` the integer reference graph, ``trace`` its run (every node recorded), ``lava`` the Lava run."""
    samples = int(np.asarray(next(iter(trace.values.values()))).shape[1])
    steps = _steps(trace, net)
    chip = _chip(q, net, trace, samples)
    host = _host(q, net, steps)
    total = chip["spikes_per_inference"] * samples
    return {
        "placement": prep.products,
        "rewrites": [r for r in prep.rewrites if "nodes" in r],
        "synapses_split": [r["nodes"][0] for r in prep.rewrites if r.get("placement")],   # placement.py
        "rewrite_check": next((r for r in prep.rewrites if "rewritten" in r), {}),
        "binary_products_on_chip": [p["node"] for p in prep.products if p["runs"] == "chip"],
        "products_on_host": [p["node"] for p in prep.products if p["runs"] == "host"],
        "per_inference": {"chip": chip, "host": host, "physical_steps": steps},
        "spikes_per_second": {
            "per_physical_step": round(chip["spikes_per_inference"] / max(steps, 1), 3),
            "lava_cpu_simulation": round(total / lava["sim_seconds"], 1) if lava.get("sim_seconds") else None,
            "note": "spikes per physical step on chip, and the Lava CPU simulation's throughput (spikes simulated per "
                    "wall-clock second); Loihi 2's time per step is not measured here"},
        "how": "counted on the integer reference's run of the verification inputs (the run Lava matched bit for bit "
               "when bit_exact), per sample over all its physical steps",
    }


def _steps(trace, net: dict) -> int:
    for r in net["recorded"]:
        v = trace.values.get(r["ir_node"])
        if v is not None:
            return int(np.asarray(v).shape[0] // max(1, r.get("substeps", 1)))
    return 0


def _chip(q, net: dict, trace, samples: int) -> dict:
    pops = [p for p in net["processes"] if p["type"] in POPULATION_TYPES]
    spikes, per_pop = 0, {}
    for p in pops:
        v = trace.values.get(p["name"])
        if p["type"] in ("Readout", "LIFReadout") or v is None:
            continue
        s = int(np.abs(np.asarray(v)).sum())
        per_pop[p["name"]] = round(s / samples, 3)
        spikes += s
    ops, per_syn = 0, {}
    for n in q.nodes:
        if n.op in ("lava_dense", "lava_conv"):
            k = _synops(n, trace.values[n.inputs[0]])
            per_syn[n.name] = round(k / samples, 3)
            ops += k
    ands = [p for p in pops if p["type"] in ("AND", "SpikecAND")]
    size = lambda ps: int(sum(np.prod(p["ir_shape"]) for p in ps))
    return {"populations": len(pops), "neurons": size(pops), "and_populations": [p["name"] for p in ands],
            "and_neurons": size(ands), "and_spikes_per_inference": round(sum(per_pop[p["name"]] for p in ands), 3),
            "spikes_per_inference": round(spikes / samples, 3), "synaptic_ops_per_inference": round(ops / samples, 3),
            "spikes_per_population": per_pop, "synaptic_ops_per_synapse": per_syn}


def _synops(n, x) -> int:
    """Nonzero inputs times the nonzero weights each fans out to, over the run (all samples)."""
    w = np.asarray(n.params["weight"])
    active = (np.asarray(x) != 0).astype(np.float64)
    if n.op == "lava_dense":
        fan = (w != 0).sum(0).astype(np.float64)
        return int((active.reshape(active.shape[0] * active.shape[1], -1) @ fan).sum())
    a = n.attrs
    z = torch.from_numpy(active.reshape(-1, *active.shape[2:]))
    k = torch.from_numpy((w != 0).astype(np.float64))
    return int(F.conv2d(z, k, None, a["stride"], a["padding"], a["dilation"], a["groups"]).sum())


MACS = {"mul": lambda out, ins, attrs: int(np.prod(out)),
        "scale": lambda out, ins, attrs: int(np.prod(out)),
        "matmul": lambda out, ins, attrs: int(np.prod(out)) * int(ins[0][-1]),
        **{op: entry(op).host.macs for op in having("host")}}   # neurons on the host (ops_table.HostOp)


def _host(q, net: dict, steps: int) -> dict:
    parts, macs, read, sent = [], 0, 0, 0
    for p in net["processes"]:
        if p["type"] != "Host":
            continue
        per_step = 0
        for name in p["nodes"]:
            n = q.node(name)
            f = MACS.get(n.attrs["op"])
            ins = [q.node(i).type.shape for i in n.inputs]
            per_step += f(n.type.shape, ins, n.attrs["attrs"]) if f else 0
        r = sum(int(np.prod(i["ir_shape"])) for i in p["in_ports"]) * steps
        s = sum(int(np.prod(o["ir_shape"])) for o in p["out_ports"]) * steps
        parts.append({"name": p["name"], "ops": p["host_ops"], "multiply_accumulates_per_inference": per_step * steps,
                      "values_read_from_chip_per_inference": r, "values_sent_to_chip_per_inference": s})
        macs, read, sent = macs + per_step * steps, read + r, sent + s
    return {"partitions": len(parts), "multiply_accumulates_per_inference": macs,
            "values_read_from_chip_per_inference": read, "values_sent_to_chip_per_inference": sent,
            "per_partition": parts}
