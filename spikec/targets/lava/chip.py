"""Chip readiness: which emitted Lava processes Intel's Loihi 2 stack can run.

The rule (``chip_ready``). lava-nc 0.10.0, the open package spikec runs, ships CPU ProcessModels only: no
process in ``lava.proc`` has a model requiring ``Loihi2NeuroCore``. The Loihi 2 (NeuroCore microcode) models
of Lava's standard processes are in Intel's closed ``lava-loihi``, given to the INRC with hardware access. So a
process is ``chip_ready: true`` when it is a *standard Lava process class that Intel's Loihi 2 stack
implements*: ``LIF`` (lava.proc.lif), ``Dense`` / ``DelayDense`` (lava.proc.dense), ``Conv`` (lava.proc.conv) --
the classes lava-dl's netx builds its networks from and Intel's tutorials run with ``Loihi2HwCfg``. Every
spikec process (``procs/process.py``: SpikecLIF, SpikecIntFire, SpikecSiLIF, SpikecCSiLIF, Readout, Relay,
HostRegion; ``procs/and_gate.py``: SpikecAND, the two-input AND neurons of binary products, and the verification harness's Recorder / StateProbe / VarWriter) is ``chip_ready: false``: it has
only spikec's Python CPU model and no Loihi 2 microcode model in the open packages. ``chip_ready`` says the
process class has a chip model in Intel's stack; it is not a claim that the chip reproduces Lava's
fixed-point simulation (those CPU models are not validated against silicon, lava#322), and spikec cannot
test it here.
"""
STANDARD = {
    "LIF": "lava.proc.lif.process.LIF",
    "OR": "lava.proc.lif.process.LIF",
    "Dense": "lava.proc.dense.process.Dense",
    "DelayDense": "lava.proc.dense.process.DelayDense",
    "Conv": "lava.proc.conv.process.Conv",
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
                 "products.py)",
    "Host": "spikec's HostRegion: float64 ops on a CPU beside the chip (a host partition by design)",
}
RULE = ("chip_ready: a standard Lava process class (LIF, Dense, DelayDense, Conv) whose Loihi 2 model is in "
        "Intel's closed lava-loihi; lava-nc 0.10 itself ships CPU models only. Custom spikec processes are "
        "CPU-only. Not a claim about the chip's arithmetic (untested here)")


def verdict(p: dict) -> dict:
    """``{"chip_ready", "why"}`` of one process record of ``network.json``."""
    typ = p["type"]
    if typ in STANDARD:
        why = f"standard Lava process {STANDARD[typ]}, implemented on Loihi 2 by Intel's lava-loihi"
        if typ == "OR":
            why += " (an OR layer: du = dv = 4095, vth = 0)"
        if p.get("bias_on_after_step") and typ == "LIF":
            why += (f"; its bias is switched on after Lava step {p['bias_on_after_step']} (spikec's run writes "
                    "bias_mant then; on the chip, a Var write between two runs)")
        return {"chip_ready": True, "why": why}
    return {"chip_ready": False, "why": f"{CUSTOM.get(typ, f'custom process {typ}')}: {NO_MODEL}"}


def annotate(processes: list[dict], net: dict) -> list[dict]:
    """The report's ``processes`` entries with ``chip_ready`` and ``why`` (matched by name in ``net``)."""
    by_name = {p["name"]: p for p in net["processes"]}
    return [{**e, **verdict(by_name.get(e["name"], e))} for e in processes]


def readiness(net: dict) -> dict:
    """Counts over the network's processes, the CPU-only ones by name, and the rule."""
    verdicts = [(p["name"], p["type"], verdict(p)["chip_ready"]) for p in net["processes"]]
    cpu = [{"name": n, "type": t} for n, t, ok in verdicts if not ok]
    return {"processes": len(verdicts), "chip_ready": len(verdicts) - len(cpu), "cpu_only": len(cpu),
            "cpu_only_processes": cpu, "rule": RULE}


def line(r: dict) -> str:
    """One line for the CLI summary."""
    text = (f"chip-ready: {r['chip_ready']} of {r['processes']} processes are standard Lava processes with "
            "Loihi 2 models")
    if r["cpu_only"]:
        names = [f"{c['name']} ({c['type']})" for c in r["cpu_only_processes"]]
        text += (f"; CPU-only (spikec custom, no Loihi 2 model): {', '.join(names[:6])}"
                 + (f" and {len(names) - 6} more" if len(names) > 6 else ""))
    return text


def add_to_report(report: dict, net: dict) -> None:
    """``processes`` entries annotated, ``chip_readiness`` added and its line appended to ``summary``."""
    report["processes"] = annotate(report.get("processes") or
                                   [{"name": p["name"], "type": p["type"]} for p in net["processes"]], net)
    report["chip_readiness"] = readiness(net)
    if "summary" in report:
        report["summary"] += "\n             " + line(report["chip_readiness"])
