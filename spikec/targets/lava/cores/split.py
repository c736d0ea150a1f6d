"""Split each population into per-core pieces within a core's limits.

A piece is a block of a population's (C, P) neuron grid: channels ``[c0, c1)`` x flat positions ``[p0, p1)``.
A population that fits one core is one piece. Otherwise: whole channel columns over runs of positions when a
column of all C channels fits a core, else the channels cut into the fewest equal groups that minimise the
number of pieces; positions are cut into near-equal runs. A piece still over the axon limit (when one is set)
is halved along positions, then channels. The split is a placement plan only: the IR and the Lava network are
unchanged (each piece is a slice of one Lava process), so there is nothing to prove equivalent; the tests check
that the pieces cover every neuron exactly once and that each respects every limit.
"""
import math
from dataclasses import dataclass

import numpy as np

from spikec.ir.errors import BadInput
from spikec.targets.lava.cores.network import Population, fan_in


@dataclass(frozen=True)
class Piece:
    population: str
    channels: tuple[int, int]
    positions: tuple[int, int]
    neurons: int
    synapses: int
    axons_in: int


def _runs(n: int, parts: int) -> list[tuple[int, int]]:
    """``[0, n)`` cut into ``parts`` contiguous runs whose sizes differ by at most one."""
    edges = [round(i * n / parts) for i in range(parts + 1)]
    return [(a, b) for a, b in zip(edges, edges[1:]) if b > a]


def _shape(fan: np.ndarray, limits) -> tuple[int, int]:
    """(channel groups, positions per piece) minimising the pieces of a (C, P) grid of per-neuron fan-in."""
    c, p = fan.shape
    per_channel = fan.max(1) if p else np.zeros(c, dtype=np.int64)
    best = None
    for groups in range(1, c + 1):
        runs = _runs(c, groups)
        size = max(b - a for a, b in runs)
        syn = max(int(per_channel[a:b].sum()) for a, b in runs)
        if size > limits.neurons_per_core or syn > limits.synapses_per_core:
            continue
        k = min(limits.neurons_per_core // size, limits.synapses_per_core // max(syn, 1), p)
        pieces = groups * math.ceil(p / k)
        if best is None or pieces < best[0]:
            best = (pieces, groups, k)
        if best is not None and groups >= best[0]:   # more groups cannot give fewer pieces
            break
    if best is None:
        raise BadInput(f"one neuron needs {int(per_channel.max())} synapses, over a core's "
                       f"{limits.synapses_per_core:,}", remedy="prune the layer's fan-in or raise the limit")
    return best[1], best[2]


def split(pop: Population, limits, axons=None) -> list[Piece]:
    """``pop``'s pieces. ``axons(pop, channels, positions)`` counts a block's input axons (checked only when
    ``limits.axons_in_per_core`` is set)."""
    fan = fan_in(pop)
    c, p = fan.shape
    groups, k = _shape(fan, limits)
    blocks = [(ch, pos) for ch in _runs(c, groups) for pos in _runs(p, math.ceil(p / k))]
    cum = np.zeros((c + 1, p + 1), dtype=np.int64)
    cum[1:, 1:] = fan.cumsum(0).cumsum(1)
    out = []
    while blocks:
        (c0, c1), (p0, p1) = blocks.pop(0)
        syn = int(cum[c1, p1] - cum[c0, p1] - cum[c1, p0] + cum[c0, p0])
        ax = axons(pop, (c0, c1), (p0, p1)) if axons is not None and limits.axons_in_per_core else 0
        if limits.axons_in_per_core and ax > limits.axons_in_per_core:
            if p1 - p0 > 1:
                m = (p0 + p1) // 2
                blocks[:0] = [((c0, c1), (p0, m)), ((c0, c1), (m, p1))]
            elif c1 - c0 > 1:
                m = (c0 + c1) // 2
                blocks[:0] = [((c0, m), (p0, p1)), ((m, c1), (p0, p1))]
            else:
                raise BadInput(f"one neuron of {pop.name!r} reads {ax} input axons, over a core's "
                               f"{limits.axons_in_per_core}", where=f"population {pop.name!r}",
                               remedy="raise axons_in_per_core or reduce the layer's fan-in")
            continue
        out.append(Piece(pop.name, (c0, c1), (p0, p1), (c1 - c0) * (p1 - p0), syn, ax))
    return out
