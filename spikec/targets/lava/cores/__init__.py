"""Core placement: a Lava deployment's populations onto Loihi 2 neurocores and chips (``OUTDIR/lava/placement.json``).

``plan_placement(network, spike_counts, limits)``:

1. ``split``: each population cut into per-core pieces within ``limits`` (neurons, synapses, input axons per
   core; ``chip_limits.py`` holds the Loihi 2 figures and their sources). A placement plan only: the IR and the
   Lava network are unchanged, so no rewrite is proved; the tests check every neuron is placed exactly once and
   every limit holds.
2. ``traffic``: spikes per inference from each piece to each piece it has synapses into, from the spike counts
   of the compile's own run (the integer reference on the verification inputs).
3. ``partition``: one core per piece; chips by METIS (pymetis) minimising inter-chip spikes, against the greedy
   per-layer baseline (cores filled in network order), which the plan reports beside its own figures.
"""
from dataclasses import dataclass

import numpy as np

from spikec.ir.errors import BadInput
from spikec.targets.lava import max_tree
from spikec.targets.lava.chip_limits import LOIHI2, Limits
from spikec.targets.lava.cores import network as _network
from spikec.targets.lava.cores.network import Population, fan_in, populations
from spikec.targets.lava.cores.partition import greedy, measure, planned
from spikec.targets.lava.cores.split import Piece, split
from spikec.targets.lava.cores.traffic import axons_in, traffic

FORMAT, VERSION = "spikec-lava-placement", 1
__all__ = ["LOIHI2", "Limits", "Piece", "Plan", "Population", "check_document", "for_deployment", "line",
           "plan_placement", "populations"]


@dataclass(frozen=True)
class Plan:
    limits: Limits
    populations: tuple          # Population
    pieces: tuple               # Piece, in network order
    chip: tuple                 # chip of each piece (the plan)
    core: tuple                 # global core of each piece (the plan)
    traffic: dict               # measure() of the plan
    greedy: dict                # cores, chips, traffic of the greedy per-layer baseline
    partitioner: dict

    @property
    def cores(self) -> int:
        return len(set(self.core))

    @property
    def chips(self) -> int:
        return len(set(self.chip))

    def utilisation(self) -> dict:
        lim, cores = self.limits, max(self.cores, 1)
        per_chip = [self.chip.count(k) for k in range(self.chips)]
        return {"neurons": round(sum(p.neurons for p in self.pieces) / (cores * lim.neurons_per_core), 4),
                "synapses": round(sum(p.synapses for p in self.pieces) / (cores * lim.synapses_per_core), 4),
                "cores_of_chips": round(cores / (max(self.chips, 1) * lim.cores_per_chip), 4),
                "cores_per_chip": per_chip,
                "meaning": "neurons and synapses placed / what the used cores hold; cores used / what the used "
                           "chips hold"}

    def summary(self) -> dict:
        """The report's ``placement`` entry (report.json, lava section)."""
        g = self.greedy
        ratio = (g["traffic"]["inter_chip"] / self.traffic["inter_chip"] if self.traffic["inter_chip"]
                 else None)
        return {"cores": self.cores, "chips": self.chips, "utilisation": self.utilisation(),
                "traffic": self.traffic, "greedy": g, "partitioner": self.partitioner,
                "inter_chip_greedy_over_planned": round(ratio, 3) if ratio is not None else None,
                "file": "lava/placement.json"}

    def line(self) -> str:
        return line({"planned": True, **self.summary()})

    def to_json(self) -> dict:
        """``placement.json`` (schema: docs/outdir.md)."""
        cores = []
        within = {}
        for i in sorted(range(len(self.pieces)), key=lambda i: self.core[i]):
            p = self.pieces[i]
            k = self.chip[i]
            within[k] = within.get(k, -1) + 1
            cores.append({"core": self.core[i], "chip": k, "core_on_chip": within[k], "population": p.population,
                          "channels": list(p.channels), "positions": list(p.positions), "neurons": p.neurons,
                          "synapses": p.synapses, "axons_in": p.axons_in if self.limits.axons_in_per_core else None})
        return {"format": FORMAT, "version": VERSION, "limits": self.limits.to_json(),
                "neuron_index": "IR layout per sample: a population of shape (C, H, W) is a grid of C channels x "
                                "H*W positions (position y*W + x); any other shape a vector (N channels x 1 position)",
                "split": "placement only: the IR graph and the Lava network are unchanged; each core holds the "
                         "block channels[0]:channels[1] x positions[0]:positions[1] of one population",
                "populations": [{"name": p.name, "process": p.process, "shape": list(p.shape), "neurons": p.neurons,
                                 "cores": [self.core[i] for i, c in enumerate(self.pieces) if c.population == p.name]}
                                for p in self.populations],
                "assignment": cores, **self.summary()}


def _counts(pops: list[Population], spike_counts: dict) -> dict:
    out = {}
    for pop in pops:
        v = spike_counts.get(pop.name)
        if v is None:
            raise BadInput(f"no spike counts for population {pop.name!r}", where=f"population {pop.name!r}",
                           remedy="pass the recorded run of every population (or its spikes per neuron)")
        v = np.asarray(v, dtype=np.float64)
        out[pop.name] = v.reshape(pop.grid) if v.size == pop.neurons else \
            _network.spike_counts({pop.name: v}, [pop])[pop.name]
    return out


def plan_placement(graph_or_populations, spike_counts: dict, limits: Limits = LOIHI2) -> Plan:
    """Place a deployment: ``graph_or_populations`` is ``(network.json dict, params arrays)`` or a list of
    ``Population``; ``spike_counts`` maps each population to its recorded run ``[T, B, ...]`` or to its spikes
    per neuron per inference."""
    pops = (list(graph_or_populations) if not isinstance(graph_or_populations, tuple)
            else populations(*graph_or_populations))
    counts = _counts(pops, spike_counts)
    pieces = [pc for pop in pops for pc in split(pop, limits, axons_in)]
    flows = traffic(pops, pieces, counts)
    base = list(range(len(pieces)))
    base_chip = greedy(len(pieces), limits)
    chip, info = planned(len(pieces), flows, limits)
    order = sorted(range(len(pieces)), key=lambda i: (chip[i], i))
    core = [0] * len(pieces)
    for c, i in enumerate(order):
        core[i] = c
    g = {"cores": len(pieces), "chips": len(set(base_chip)), "traffic": measure(base_chip, base, flows),
         "rule": "Lava's per-layer split: each piece on its own core, cores filled in network order, "
                 f"{limits.cores_per_chip} per chip"}
    info["lower_bound_cores"] = sum(max(1, -(-pop.neurons // limits.neurons_per_core),
                                        -(-sum(p.synapses for p in pieces if p.population == pop.name)
                                          // limits.synapses_per_core)) for pop in pops)
    return Plan(limits, tuple(pops), tuple(pieces), tuple(chip), tuple(core), measure(chip, core, flows), g, info)


def for_deployment(net: dict, arrays: dict, values: dict, limits: Limits = LOIHI2) -> tuple[dict, dict | None]:
    """``(report entry, placement.json document)`` of a compiled Lava deployment, from the integer reference's
    run ``values``; a deployment that cannot be placed gets ``{"planned": False, "why", "remedy"}`` and no
    document (the placement is a plan beside the bit-exact verdict, never part of it)."""
    try:
        values = {**values, **max_tree.activity(net, arrays, values)}   # what a max tree's processes send
        plan = plan_placement((net, arrays), values, limits)
    except BadInput as e:
        return {"planned": False, "why": str(e), "remedy": e.remedy}, None
    return {"planned": True, **plan.summary()}, plan.to_json()


def check_document(doc: dict, net: dict, arrays: dict, limits: Limits = LOIHI2) -> list[str]:
    """What is wrong with a ``placement.json`` for the written ``net``: a neuron placed twice or never, a core
    over ``limits`` (Loihi 2's, never the limits the file states) with its neurons and synapses counted again from
    the network (not read from the file), a chip over its cores; empty when the plan holds."""
    try:
        pops = {pop.name: pop for pop in populations(net, arrays)}
        fans = {name: fan_in(pop) for name, pop in pops.items()}
        seen = {name: np.zeros(f.shape, dtype=np.int64) for name, f in fans.items()}
        bad, per_chip = [], {}
        for c in doc["assignment"]:
            (c0, c1), (p0, p1), name = c["channels"], c["positions"], c["population"]
            if name not in seen or not (0 <= c0 < c1 <= seen[name].shape[0] and 0 <= p0 < p1 <= seen[name].shape[1]):
                bad.append(f"core {c['core']}: block {c['channels']} x {c['positions']} is not in {name!r}")
                continue
            seen[name][c0:c1, p0:p1] += 1
            per_chip[c["chip"]] = per_chip.get(c["chip"], 0) + 1
            counted = {"neurons": (c1 - c0) * (p1 - p0), "synapses": int(fans[name][c0:c1, p0:p1].sum())}
            for key, n in counted.items():
                cap = getattr(limits, f"{key}_per_core")
                if n > cap:
                    bad.append(f"core {c['core']}: {n:,} {key} over a core's {cap:,}")
                if c.get(key) != n:
                    bad.append(f"core {c['core']}: the file says {c.get(key)} {key}, the network gives {n}")
        bad += [f"population {k!r}: {int((v == 0).sum())} neuron(s) on no core, {int((v > 1).sum())} on several"
                for k, v in seen.items() if (v != 1).any()]
        bad += [f"chip {k}: {n} cores over {limits.cores_per_chip}" for k, n in sorted(per_chip.items(), key=str)
                if n > limits.cores_per_chip]
        return bad
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        return [f"placement.json is not a placement document ({type(e).__name__}: {e})"]


def line(entry: dict) -> str:
    """The CLI summary line of a report's ``placement`` entry."""
    if not entry.get("planned"):
        return f"placement: none ({entry.get('why', 'not planned')})"
    t, g = entry["traffic"], entry["greedy"]["traffic"]
    return (f"placement: {entry['cores']} neurocores on {entry['chips']} chip(s) (lava/placement.json); inter-chip "
            f"spikes/inference {t['inter_chip']:,.0f} vs {g['inter_chip']:,.0f} for the greedy per-layer split")
