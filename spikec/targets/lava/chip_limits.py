"""Loihi 2 per-core and per-chip limits: the one table the resource estimate and the core placement read.

Each number carries its source. Intel publishes chip-level maxima; the per-core capacities spikec uses are
those maxima divided evenly over the neurocores (so they are upper bounds: a real core also spends its memory
on neuron state, axon routing and microcode, which depend on the neuron model and the synapse encoding, and
Lava's open source does not publish those costs). ``Limits`` carries the numbers one placement runs under;
``LOIHI2`` is the default, and tests build artificially small ones to force several chips.
"""
from dataclasses import dataclass

BRIEF = ("Intel Labs, 'Taking Neuromorphic Computing to the Next Level with Loihi 2', technology brief (2021), "
         "table of Loihi 2 vs Loihi")
LAVA_MAPPER = ("lava-nc 0.10.0, lava/magma/compiler/subcompilers/constants.py NUM_VIRTUAL_CORES_L2 = 128, used by "
               "lava/magma/compiler/mapper.py as cores per chip (chip_id = core_id // num_cores)")
PILOTNET = ("lava-dl, tutorials/lava/lib/dl/netx/pilotnet_snn/benchmark.ipynb (Loihi 2 run, kp_build): the "
            "partitioner's per-core distribution table, 74 cores in total, at most 3,168 neurons on one core, and "
            "its cost database limit 'SynMem' = 12000 reported on a violation")

# name: (value, unit, source). One row per number; everything else derives from these.
TABLE = {
    "neurocores_per_chip": (128, "neurocores", f"{BRIEF}; {LAVA_MAPPER}"),
    "neurons_per_chip": (2 ** 20, "neurons", f"{BRIEF}: up to 1M neurons per chip (taken as 2**20)"),
    "synapses_per_chip": (120_000_000, "synapses", f"{BRIEF}: up to 120M synapses per chip"),
    "memory_per_core_kb": (192, "KB SRAM", f"{BRIEF}: 192 KB per neuron core, flexibly allocated between "
                                           "synapses, neuron state and routing (not used as a limit: the "
                                           "allocation per encoding is not public)"),
    "embedded_cores_per_chip": (3, "x86 cores", "lava-nc 0.10.0, lava/magma/compiler/subcompilers/constants.py "
                                                "MAX_EMBEDDED_CORES_PER_CHIP = 3 (host-side helpers, not neurocores)"),
    "pilotnet_lif_cores": (74, "neurocores", f"{PILOTNET} (the per-layer split spikec's greedy baseline follows)"),
    "pilotnet_max_neurons_on_a_core": (3168, "neurons", PILOTNET),
    "lava_synmem_register_limit": (12000, "SynMem words", PILOTNET),
}
NOT_PUBLISHED = {
    "axons_in_per_core": "input axons per Loihi 2 core are not published (Loihi 1: 4,096 fan-in axons per core, "
                         "Davies et al., IEEE Micro 2018); unchecked unless a Limits sets one",
}


def value(name: str) -> int:
    return TABLE[name][0]


CORES_PER_CHIP = value("neurocores_per_chip")
NEURONS_PER_CORE = value("neurons_per_chip") // CORES_PER_CHIP          # 8,192
SYNAPSES_PER_CORE = value("synapses_per_chip") // CORES_PER_CHIP        # 937,500


@dataclass(frozen=True)
class Limits:
    """What one neurocore and one chip hold. ``axons_in_per_core`` None: not checked (not published)."""
    neurons_per_core: int = NEURONS_PER_CORE
    synapses_per_core: int = SYNAPSES_PER_CORE
    cores_per_chip: int = CORES_PER_CHIP
    axons_in_per_core: int | None = None
    name: str = "Loihi 2 (Intel's chip maxima divided evenly per core)"

    def to_json(self) -> dict:
        return {"name": self.name, "neurons_per_core": self.neurons_per_core,
                "synapses_per_core": self.synapses_per_core, "cores_per_chip": self.cores_per_chip,
                "axons_in_per_core": self.axons_in_per_core,
                "sources": {"neurons_per_core": "neurons_per_chip / neurocores_per_chip",
                            "synapses_per_core": "synapses_per_chip / neurocores_per_chip",
                            "cores_per_chip": "neurocores_per_chip",
                            "axons_in_per_core": NOT_PUBLISHED["axons_in_per_core"]}}


LOIHI2 = Limits()


def table() -> list[dict]:
    """The table as documented rows (docs/targets.md 'Core placement' prints it)."""
    rows = [{"name": k, "value": v, "unit": u, "source": s} for k, (v, u, s) in TABLE.items()]
    rows += [{"name": "neurons_per_core", "value": NEURONS_PER_CORE, "unit": "neurons",
              "source": "derived: neurons_per_chip / neurocores_per_chip (an upper bound per core)"},
             {"name": "synapses_per_core", "value": SYNAPSES_PER_CORE, "unit": "synapses",
              "source": "derived: synapses_per_chip / neurocores_per_chip (an upper bound per core)"}]
    return rows + [{"name": k, "value": None, "unit": "", "source": s} for k, s in NOT_PUBLISHED.items()]
