"""The placement's view of a Lava deployment: populations, the synaptic streams into them, spike counts.

Everything is per sample and in IR layout: a population of IR shape (C, H, W) is a (C, H*W) grid of neurons
(channel, flat position ``y * W + x``); any other shape is a vector of N neurons, a (N, 1) grid. A stream is
one synapse process (Conv, Dense, DelayDense) into a population, its source resolved through Relays (on
Loihi 2 an axonal delay, not a core) to the population whose spikes it carries, or None when the values come
from off the chip (a graph input, a host partition).
"""
from dataclasses import dataclass

import numpy as np

from spikec.ir.errors import BadInput
from spikec.targets.lava import max_tree
from spikec.targets.lava.layout import conv_weight_from_lava, flatten_perm
from spikec.targets.lava.lower import POPULATION_TYPES
from spikec.targets.lava.selfcheck import SYNAPSES


@dataclass(frozen=True)
class Stream:
    """One synapse process into a population. ``weight``: conv (C_out, C_in / groups, kH, kW) as PyTorch
    holds it; dense (N_out, N_in) with columns in the source's IR flatten order."""
    name: str
    source: str | None
    source_shape: tuple
    kind: str                      # "conv", "dense" or "sparse" (a scipy matrix: a max tree's, max_tree.py)
    weight: np.ndarray
    stride: tuple = (1, 1)         # (y, x)
    padding: tuple = (0, 0)
    dilation: tuple = (1, 1)
    groups: int = 1


@dataclass(frozen=True)
class Population:
    """Neurons on cores: ``channels`` x ``positions`` of them (IR layout), with their input streams."""
    name: str
    process: str
    shape: tuple                   # the IR shape per sample
    streams: tuple

    @property
    def grid(self) -> tuple[int, int]:
        return grid(self.shape)

    @property
    def neurons(self) -> int:
        c, p = self.grid
        return c * p


def grid(shape) -> tuple[int, int]:
    """(channels, positions) of a per-sample IR shape: (C, H*W) for (C, H, W), else (N, 1)."""
    shape = tuple(int(s) for s in shape)
    return (shape[0], shape[1] * shape[2]) if len(shape) == 3 else (int(np.prod(shape, dtype=np.int64)), 1)


def fan_in(pop: Population) -> np.ndarray:
    """Synapses per neuron, a (C, P) int64 grid: per conv stream the nonzero taps of its output channel (an
    upper bound at the borders, where taps fall outside the input), per dense stream the nonzero weights of
    its row; summed over the streams."""
    c, p = pop.grid
    out = np.zeros((c, p), dtype=np.int64)
    for s in pop.streams:
        if s.kind == "conv":
            out += (s.weight != 0).reshape(s.weight.shape[0], -1).sum(1)[:, None]
        elif s.kind == "sparse":
            out += np.asarray((s.weight != 0).sum(1)).reshape(c, p)
        else:
            out += (s.weight != 0).sum(1).reshape(c, p)
    return out


def _relay_sources(net: dict) -> dict:
    """relay name -> the process whose output it delays (its one incoming connection)."""
    relays = {p["name"] for p in net["processes"] if p["type"] == "Relay"}
    return {c["dst"]: c["src"] for c in net.get("connections", []) if c["dst"] in relays}


def _source(name: str, relays: dict, pops: set) -> str | None:
    seen = set()
    while name in relays and name not in seen:
        seen.add(name)
        name = relays[name]
    return name if name in pops else None


def _stream(p: dict, arrays: dict, source: str | None) -> Stream:
    if "tree" in p:   # a max tree's Sparse (max_tree.py): a scipy matrix in IR flat order
        return Stream(p["name"], source, tuple(p["input_ir_shape"]), "sparse", max_tree.matrix(arrays, p))
    if p["type"] == "Conv":
        w = conv_weight_from_lava(np.asarray(arrays[f"{p['name']}/weight"]))
        rev = lambda k: tuple(int(v) for v in reversed(p[k]))   # Lava's (x, y) order -> (y, x)
        return Stream(p["name"], source, tuple(p["input_ir_shape"]), "conv", w, rev("stride"), rev("padding"),
                      rev("dilation"), int(p.get("groups", 1)))
    w = np.asarray(arrays[f"{p['name']}/weights"])
    shape = tuple(p["input_ir_shape"])
    if p.get("flatten_input"):   # columns in Lava's (W, H, C) flatten order -> the IR's (C, H, W) order
        ir = np.zeros_like(w)
        ir[:, flatten_perm(shape)] = w
        w = ir
    return Stream(p["name"], source, shape, "dense", w)


def populations(net: dict, arrays: dict) -> list[Population]:
    """The populations of ``network.json`` (in its order) with their synaptic streams."""
    kinds = POPULATION_TYPES + max_tree.TYPES
    names = {p["name"] for p in net["processes"] if p["type"] in kinds}
    relays = _relay_sources(net)
    into = {}
    for p in net["processes"]:
        if (p["type"] in SYNAPSES or "tree" in p) and p.get("target") in names:
            into.setdefault(p["target"], []).append(_stream(p, arrays, _source(p["input"], relays, names)))
    pops = [Population(p["name"], p["type"], tuple(p["ir_shape"]), tuple(into.get(p["name"], ())))
            for p in net["processes"] if p["type"] in kinds]
    size = {p.name: p.neurons for p in pops}
    for pop in pops:
        for s in pop.streams:
            if s.source is not None and int(np.prod(s.source_shape)) != size[s.source]:
                raise BadInput(f"synapse {s.name!r} reads {int(np.prod(s.source_shape))} values from population "
                               f"{s.source!r} of {size[s.source]} neurons", where=f"population {pop.name!r}",
                               remedy="this network's wiring is outside what the placement models; the "
                                      "deployment itself is unaffected")
    return pops


def spike_counts(values: dict, pops: list[Population]) -> dict:
    """Spikes per neuron per inference, a (C, P) float grid per population: the nonzero outputs (a graded spike
    is one message) of a recorded run ``values[name]`` laid out [T, B, ...], summed over T, mean over B."""
    out = {}
    for pop in pops:
        if pop.name not in values:
            raise BadInput(f"no recorded output of population {pop.name!r} to count its spikes",
                           where=f"population {pop.name!r}",
                           remedy="pass the integer reference's run of every population (record='all')")
        v = np.asarray(values[pop.name])
        if v.ndim < 2 or v[0, 0].size != pop.neurons:
            raise BadInput(f"recorded output of {pop.name!r} has shape {v.shape}, not [T, B, {pop.shape}]",
                           where=f"population {pop.name!r}", remedy="pass the run of this deployment")
        n = (v != 0).reshape(v.shape[0], v.shape[1], -1).sum(0).mean(0)
        out[pop.name] = n.reshape(pop.grid)
    return out
