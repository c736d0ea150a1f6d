"""Chip readiness: which emitted Lava processes Intel's Loihi 2 stack can run.

The rule (``chip_ready``). lava-nc 0.10.0, the open package spikec runs, ships CPU ProcessModels only: no
process in ``lava.proc`` has a model requiring ``Loihi2NeuroCore``. The Loihi 2 (NeuroCore microcode) models
of Lava's standard processes are in Intel's closed ``lava-loihi``, given to the INRC with hardware access. So a
process is ``chip_ready: true`` when it is a *standard Lava process class that Intel's Loihi 2 stack
implements*: ``LIF`` (lava.proc.lif; the OR and AND layers, the standard read-outs, standard_readout.py, and the
always-firing source of current biases, current_bias.py, are LIFs too), ``Dense`` / ``DelayDense``
(lava.proc.dense), ``Conv`` (lava.proc.conv), ``Sparse`` (lava.proc.sparse), and the sigma-delta neurons
``Delta`` / ``SigmaDelta`` / ``Sigma`` (lava.proc.sdn: netx's SDNN neurons, PilotNet SDNN runs on Loihi 2; a max
tree, max_tree.py) -- the classes lava-dl's netx builds its networks from and Intel's tutorials run with
``Loihi2HwCfg``. Every
spikec process (``procs/process.py``: SpikecLIF, SpikecIntFire, SpikecSiLIF, SpikecCSiLIF, Readout, Relay,
HostRegion; ``procs/and_gate.py``: SpikecAND, the AND neurons of binary products under a sub-step schedule, and the
verification harness's Recorder / StateProbe / VarWriter) is ``chip_ready: false``: it has
only spikec's Python CPU model and no Loihi 2 microcode model in the open packages. ``chip_ready`` says the
process class has a chip model in Intel's stack; it is not a claim that the chip reproduces Lava's
fixed-point simulation (those CPU models are not validated against silicon, lava#322), and spikec cannot
test it here.

``blockers``: per process that is not chip-ready, why (for a SpikecLIF each thing Lava's LIF lacks, read from its
record and arrays) and what would make it chip-ready; ``blocker_lines`` gives the summary one line per process.
"""
import numpy as np

STANDARD = {
    "LIF": "lava.proc.lif.process.LIF",
    "OR": "lava.proc.lif.process.LIF",
    "AND": "lava.proc.lif.process.LIF",
    "LIFReadout": "lava.proc.lif.process.LIF",
    "BiasLIF": "lava.proc.lif.process.LIF",
    "Dense": "lava.proc.dense.process.Dense",
    "DelayDense": "lava.proc.dense.process.DelayDense",
    "Conv": "lava.proc.conv.process.Conv",
    "Sparse": "lava.proc.sparse.process.Sparse",
    "Delta": "lava.proc.sdn.process.Delta",
    "SigmaDelta": "lava.proc.sdn.process.SigmaDelta",
    "Sigma": "lava.proc.sdn.process.Sigma",
}
NO_MODEL = "no Loihi 2 microcode model in the open packages (spikec's Python CPU model only)"
CUSTOM = {
    "SpikecLIF": "spikec's SpikecLIF: a LIF with what Lava's LIF lacks (subtract or delayed reset, firing on >=, "
                 "per-channel du/dv/vth, a current bias, state reads, a sub-step schedule)",
    "SpikecIntFire": "spikec's integer-firing neuron (graded payload, or a count unrolled into binary sub-steps)",
    "SpikecSiLIF": "spikec's SiLIF resonator (12-bit decays)",
    "SpikecCSiLIF": "spikec's complex SiLIF resonator (12-bit rotation)",
    "Readout": "spikec's read-out: the synaptic sum plus a bias, sent every step as a 24-bit graded value",
    "Relay": "spikec's Relay: a delay line before a Conv or a direct connection (on Loihi 2 it would be an "
             "axonal delay of the synapses it feeds)",
    "SpikecAND": "spikec's two-input AND neurons (s = [a >= 2], no state: the product of two binary spike tensors, "
                 "products.py), used only under a sub-step schedule (Lava's LIF would update between its inputs)",
    "Host": "spikec's HostRegion: float64 ops on a CPU beside the chip (a host partition by design)",
}
NO_COMPOSITION = ("by default a subtract reset is Lava's LIF with the membrane in u (du = dv - 1, dv = 4095, a -vth "
                  "diagonal Sparse self-synapse one step late; current_reset.py)")
# what would make each custom process chip-ready (SpikecLIF's depend on why it is one: ``_lif_blockers``)
REMEDY = {
    "SpikecIntFire": "a count ladder (count_ladder.py: D copies of the neuron in Lava's LIF, where the reason above "
                     "allows), a binary LIF, or a Loihi 2 microcode neuron with graded spikes (lava-loihi, not in the "
                     "open package)",
    "SpikecSiLIF": "Loihi 2's resonate-and-fire microcode neuron (lava-loihi's RF process), not in the open package",
    "SpikecCSiLIF": "Loihi 2's resonate-and-fire microcode neuron (lava-loihi's RF process), not in the open package",
    "Readout": "the standard read-out (standard_readout.py: Lava's LIF with du = 4095, its u = 64 a read by Lava's "
               "Monitor each step, the bias added by the host), which needs one Lava step per physical step, synapse "
               "inputs only, no process reading the value and a synaptic sum within [-131071, 131072] on every "
               "input (smaller weights or fewer inputs per read-out neuron); or read the output layer's spikes",
    "Relay": "fold the delay into the synapses it feeds (DelayDense; Loihi 2 axon delays), or, for binary spikes, "
             "one identity stage per Lava step of delay (a 1x1 depthwise Conv into an OR-layer LIF, du = dv = 4095, "
             "vth = 0; not built)",
    "SpikecAND": "no sub-step schedule (no unrolled integer neuron in the network): then AND neurons are Lava's LIF",
    "Host": "binary operands (spiking Q, K, V, attention), so that products run on chip as AND neurons; or run the "
            "op on Loihi 2's embedded CPUs (not modelled here)",
}
# a host partition's remedy by the ops it runs (the first that has one; else REMEDY["Host"])
HOST_REMEDY = {
    "maxpool2d": "a max pool of synaptic sums whose one reader is a neuron goes on chip as a max tree "
                 "(max_tree.py) when no neuron is unrolled into sub-steps (no sub-step schedule); else pool "
                 "after the neuron instead of before it (a max pool over binary spikes is an OR layer on chip: a "
                 "depthwise all-ones Conv into a LIF with vth = 0), retrained, or the measured variant "
                 "lava_reset='zero' that does so (chip_variant.pools_after_neurons); or run the op on Loihi 2's "
                 "embedded CPUs (not modelled here)",
}
RULE = ("chip_ready: a standard Lava process class (LIF, Dense, DelayDense, Conv, Sparse, Delta, SigmaDelta, Sigma; AND "
        "and OR layers, read-outs, count ladders and the current-bias source are LIFs) whose Loihi 2 model is in "
        "Intel's closed lava-loihi; lava-nc 0.10 itself ships CPU models only. Custom spikec processes are "
        "CPU-only. Not a claim about the chip's arithmetic (untested here)")


def verdict(p: dict) -> dict:
    """``{"chip_ready", "why"}`` of one process record of ``network.json``."""
    typ = p["type"]
    if typ in STANDARD:
        why = f"standard Lava process {STANDARD[typ]}, implemented on Loihi 2 by Intel's lava-loihi"
        if typ == "OR":
            why += " (an OR layer: du = dv = 4095, vth = 0)"
        if typ == "LIFReadout":
            why += (" (a read-out: du = dv = 4095, vth = 131071, no bias; its current u = a << 6 read with Lava's "
                    "Monitor each step, the bias added by the host" +
                    (f"; exact: a in [{p['a_bound'][0]}, {p['a_bound'][1]}] on any input, within "
                     f"[{p['a_exact'][0]}, {p['a_exact'][1]}]" if "a_bound" in p else "") + ")")
        if typ == "BiasLIF":
            why += (" (the source of current biases: du = dv = 4095, vth = 0, bias_mant = 1, firing every Lava step "
                    "from step 0 with no input)")
        cb = p.get("current_bias")
        if isinstance(cb, dict):   # a population with a current bias (current_bias.py)
            why += (f"; its current bias bias_u in [{cb['bias_u'][0]}, {cb['bias_u'][1]}] arrives through "
                    f"{', '.join(cb['synapses'])} from the always-firing {cb['source']} (axon delay {cb['axon_delay']})")
        elif cb:   # one of its synapses
            why += f" (carries {p['target']}'s current bias from the always-firing LIF {p['input']})"
        if typ == "AND":
            why += " (two-input AND neurons: du = dv = 4095, vth = 1, weight-1 synapses: fires iff both inputs spiked)"
        if p.get("membrane_in_u"):
            why += (f" (a {p['membrane_in_u']} reset with the membrane in u: du = {p['du']}, dv = {p['dv']}, a -vth "
                    "diagonal Sparse self-synapse; current_reset.py)")
        if p.get("ladder"):
            why += (f" (a count ladder: {p['ladder']} binary copies of an integer-firing neuron, rung q firing at "
                    "u > q vth << 6, a -vth Sparse from every copy onto every copy; count_ladder.py)")
        if p.get("integrator"):
            why += (f" (a leaky-integrator read-out: du = {p['du']}, dv = {p['dv']}, vth = {p['vth']} never reached: "
                    f"v in [{p['v_bound'][0]}, {p['v_bound'][1]}] on any input; v read with Lava's Monitor each step)")
        if p.get("bias_on_after_step") and typ == "LIF":
            why += (f"; its bias is switched on after Lava step {p['bias_on_after_step']} (spikec's run writes "
                    "bias_mant then; on the chip, a Var write between two runs)")
        return {"chip_ready": True, "why": why}
    return {"chip_ready": False, "why": f"{CUSTOM.get(typ, f'custom process {typ}')}: {NO_MODEL}"}


def _lif_blockers(p: dict, net: dict, arrays: dict) -> list[tuple[str, str]]:
    """``[(why, what would make it chip-ready)]`` of a SpikecLIF process: what Lava's LIF lacks, from its record."""
    get = lambda k: arrays.get(f"{p['name']}/{k}")
    out = []
    reset = p.get("reset")
    if reset in ("subtract", "snntorch_subtract", "delayed_subtract"):
        kept = (f"; not Lava's LIF with the membrane in u because {p['membrane_in_u_refused']}"
                if p.get("membrane_in_u_refused") else "; kept as SpikecLIF by the target option lava_reset")
        out.append(("a subtract (soft) reset, v -= vth at a spike" + (" one step late (snnTorch's reset_delay)"
                                                                       if reset == "delayed_subtract" else "") + kept,
                    ("leave lava_reset unset (" + NO_COMPOSITION + ") where the reason above allows, " if not
                     p.get("membrane_in_u_refused") else "")
                    + "train with a zero reset (snnTorch reset_mechanism='zero', SpikingJelly v_reset=0.0, spikec.nn.LIF "
                    "reset='zero'), or deploy the approximate zero-reset variant (target option lava_reset='zero', its "
                    "spike disagreement measured)"))
    elif reset == "delayed_zero":
        out.append(("a zero reset one step after the spike (snnTorch's reset_delay)", "reset_delay=False"))
    elif reset == "none":
        out.append(("no reset", "a zero reset"))
    if p.get("fire") == "ge":
        out.append(("it fires on v >= vth << 6 (SpikingJelly's >=); Lava's LIF on v > vth << 6 (spikec lowers a >= "
                    "neuron with a hard reset, only synaptic inputs and VTH >= 2 to Lava's LIF with the threshold one "
                    "LSB lower: not this one)",
                    "a hard reset (v_reset=0.0) and a synapse (Linear / Conv) between a host value and the neuron, or a "
                    "Loihi 2 microcode neuron"))
    elif p.get("fire") == "never":
        out.append(("a leaky integrator read-out whose state v is the output, not Lava's LIF because "
                    + p.get("standard_integrator_refused", "its form has none"),
                    "Lava's LIF with vth out of reach and v read by Lava's Monitor (standard_integrator.py), which "
                    "needs one Lava step per physical step, scalar decays with a leak (beta < 1), no current bias, "
                    "only the host reading v, and v within 2^23 - 64 on every input (smaller weights or a larger "
                    "leak)"))
    if get("v_reset") is not None:
        out.append(("a hard reset to a nonzero value", "v_reset = 0 (Lava's LIF resets to 0)"))
    if get("bias_u") is not None:
        out.append(("a current bias (the synapse's bias added to u)"
                    + (f", not carried by a Dense from an always-firing LIF because {p['current_bias_refused']}"
                       if p.get("current_bias_refused") else ""),
                    "bias values that one or two 8-bit Dense weights w << weight_exp hold (current_bias.py), or "
                    "bias=False on the synapse feeding it"))
    if any(get(k) is not None and get(k).size > 1 and len(set(get(k).reshape(-1).tolist())) > 1
           for k in ("du", "dv", "vth")):
        out.append(("per-channel decays or thresholds (Lava's LIF takes one du, dv, vth)",
                    "one beta and threshold per layer"))
    if p.get("period", 1) > 1:
        out.append((f"a sub-step schedule ({p['period']} Lava steps per physical step: an unrolled integer neuron)",
                    "no unrolled integer neuron in the network"))
    if any(r["proc"] == p["name"] and r["port"] != "s_out" for r in net.get("recorded", ())) \
            or any(c["src"] == p["name"] and c["port"] != "s_out" for c in net.get("connections", ())):
        out.append(("its state (v or the pre-reset membrane) is read every step", "read its spikes instead"))
    return out or [("a LIF form Lava's LIF lacks", "a hard reset to 0, scalar parameters, strict firing")]


def blockers(net: dict, arrays: dict | None = None) -> list[dict]:
    """Per process that is not chip-ready: ``{name, type, why, remedy}`` (one entry per reason)."""
    out = []
    for p in net["processes"]:
        if verdict(p)["chip_ready"]:
            continue
        if p["type"] == "SpikecLIF":
            reasons = _lif_blockers(p, net, arrays or {})
        else:
            why = CUSTOM.get(p["type"], f"custom process {p['type']}")
            if p.get("standard_readout_refused"):   # why the read-out is not Lava's LIF
                why += f"; not Lava's LIF because {p['standard_readout_refused']}"
            if p.get("count_ladder_refused"):   # count_ladder.py: why it is no ladder of Lava LIFs
                why += f"; not a ladder of Lava LIFs because {p['count_ladder_refused']}"
            remedy = next((HOST_REMEDY[op] for op in p.get("host_ops", ()) if op in HOST_REMEDY), None)
            reasons = [(why, remedy or REMEDY.get(p["type"], "a standard Lava process in its place"))]
        out.append({"name": p["name"], "type": p["type"], "why": "; ".join(w for w, _ in reasons),
                    "remedy": "; ".join(dict.fromkeys(r for _, r in reasons))})
    return out


def blocker_lines(r: dict, limit: int = 8) -> list[str]:
    """One CLI line per blocking process (the first ``limit``; the rest counted by type)."""
    items = r.get("blocking", [])
    lines = [f"chip blocker: {b['name']} ({b['type']}): {b['why']}; chip-ready with: {b['remedy']}"
             for b in items[:limit]]
    if len(items) > limit:
        rest: dict = {}
        for b in items[limit:]:
            rest[b["type"]] = rest.get(b["type"], 0) + 1
        lines.append(f"chip blocker: and {len(items) - limit} more ("
                     + ", ".join(f"{k} x{v}" for k, v in rest.items()) + "), listed in report.json "
                     "(targets.lava.chip_readiness.blocking)")
    return lines


def annotate(processes: list[dict], net: dict) -> list[dict]:
    """The report's ``processes`` entries with ``chip_ready`` and ``why`` (matched by name in ``net``)."""
    by_name = {p["name"]: p for p in net["processes"]}
    return [{**e, **verdict(by_name.get(e["name"], e))} for e in processes]


# the processes that hold the network's own neurons (not its synapses, OR / AND layers, read-outs, bias sources)
NEURON_TYPES = ("LIF", "SpikecLIF", "SpikecIntFire", "SpikecSiLIF", "SpikecCSiLIF")


def neurons(net: dict) -> dict:
    """The network's neurons (a count ladder's D copies counted once) and how many are in standard processes."""
    total = standard = 0
    for p in net["processes"]:
        if p["type"] in NEURON_TYPES and p.get("ir_shape"):
            k = int(np.prod(p["ir_shape"])) // int(p.get("ladder", 1))
            total += k
            standard += k if verdict(p)["chip_ready"] else 0
    return {"network": total, "standard": standard, "share": round(standard / total, 6) if total else 1.0,
            "counted": "the populations of the network's neurons (" + ", ".join(NEURON_TYPES) + "), per sample, a "
                       "count ladder's copies once"}


def readiness(net: dict, arrays: dict | None = None) -> dict:
    """Counts over the network's processes and neurons, the CPU-only ones by name, what blocks each and the rule."""
    verdicts = [(p["name"], p["type"], verdict(p)["chip_ready"]) for p in net["processes"]]
    cpu = [{"name": n, "type": t} for n, t, ok in verdicts if not ok]
    return {"processes": len(verdicts), "chip_ready": len(verdicts) - len(cpu), "cpu_only": len(cpu),
            "neurons": neurons(net), "cpu_only_processes": cpu, "blocking": blockers(net, arrays), "rule": RULE}


def line(r: dict) -> str:
    """One line for the CLI summary."""
    text = (f"chip-ready: {r['chip_ready']} of {r['processes']} processes are standard Lava processes with "
            "Loihi 2 models")
    if r.get("neurons", {}).get("network"):
        n = r["neurons"]
        text += f" ({n['standard']:,} of {n['network']:,} neurons, {100 * n['share']:.1f}%)"
    if r["cpu_only"]:
        names = [f"{c['name']} ({c['type']})" for c in r["cpu_only_processes"]]
        text += (f"; CPU-only (spikec custom, no Loihi 2 model): {', '.join(names[:6])}"
                 + (f" and {len(names) - 6} more" if len(names) > 6 else ""))
    return text


def add_to_report(report: dict, net: dict, arrays: dict | None = None) -> None:
    """``processes`` entries annotated, ``chip_readiness`` added, its blocker lines and its line (last) appended to
    ``summary``."""
    report["processes"] = annotate(report.get("processes") or
                                   [{"name": p["name"], "type": p["type"]} for p in net["processes"]], net)
    report["chip_readiness"] = readiness(net, arrays)
    if "summary" in report:
        for text in blocker_lines(report["chip_readiness"]) + [line(report["chip_readiness"])]:
            report["summary"] += "\n             " + text
