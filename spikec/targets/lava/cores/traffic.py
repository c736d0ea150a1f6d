"""Spike traffic between pieces, from the spike counts of a run.

The message model: a spike of a source neuron is sent once to every core holding a target neuron it has a
synapse to (Loihi routes an axon per destination core; the core fans it out to its synapses), once per synapse
process (each is its own set of axons). So the traffic from piece ``a`` to piece ``b`` is the sum, over the
neurons of ``a`` with at least one nonzero synapse into ``b`` (per stream), of their spikes per inference.
Which source neurons reach a block is exact: a conv block reads the input positions under its nonzero taps
(stride, padding, dilation and groups as lowered), a dense block the columns where its rows are nonzero.
"""
import numpy as np

from spikec.targets.lava.cores.network import Population, Stream, grid


def _conv_reach(s: Stream, out_shape, channels, positions) -> np.ndarray:
    """(C_in, P_in) bool: the source neurons with a nonzero synapse into the block of a conv's output."""
    c_out, cin_g, kh, kw = s.weight.shape
    cin, h_in, w_in = s.source_shape
    _, h_out, w_out = out_shape
    taps = np.zeros((cin, kh * kw), dtype=bool)
    per_group = c_out // s.groups
    c0, c1 = channels
    for g in range(c0 // per_group, (c1 - 1) // per_group + 1):
        lo, hi = max(c0, g * per_group), min(c1, (g + 1) * per_group)
        taps[g * cin_g:(g + 1) * cin_g] |= (s.weight[lo:hi] != 0).any(0).reshape(cin_g, -1)
    block = np.zeros(h_out * w_out, dtype=bool)
    block[positions[0]:positions[1]] = True
    block = block.reshape(h_out, w_out)
    (sy, sx), (py, px), (dy, dx) = s.stride, s.padding, s.dilation
    reached = np.zeros((kh * kw, h_in, w_in), dtype=bool)
    for i in range(kh):
        ys = np.arange(h_out) * sy - py + i * dy
        vy = (ys >= 0) & (ys < h_in)
        for j in range(kw):
            xs = np.arange(w_out) * sx - px + j * dx
            vx = (xs >= 0) & (xs < w_in)
            reached[i * kw + j][np.ix_(ys[vy], xs[vx])] = block[np.ix_(vy, vx)]
    used = taps.any(0)
    return (taps[:, used].astype(np.float32) @ reached[used].reshape(int(used.sum()), -1).astype(np.float32)) > 0


def reach(pop: Population, s: Stream, channels, positions) -> np.ndarray:
    """(C_in, P_in) bool grid of the source neurons with a synapse into ``pop``'s block, through stream ``s``."""
    if s.kind == "conv":
        return _conv_reach(s, pop.shape, channels, positions)
    _, p = pop.grid
    rows = (np.arange(*channels)[:, None] * p + np.arange(*positions)[None, :]).reshape(-1)
    if s.kind == "sparse":
        return (np.asarray(abs(s.weight[rows]).sum(0)).reshape(-1) > 0).reshape(grid(s.source_shape))
    return (s.weight[rows] != 0).any(0).reshape(grid(s.source_shape))


def axons_in(pop: Population, channels, positions) -> int:
    """Input axons of a block: the source neurons (on chip or not) reaching it, counted per stream."""
    return sum(int(reach(pop, s, channels, positions).sum()) for s in pop.streams)


def _block_sums(cum: np.ndarray, blocks) -> np.ndarray:
    return np.array([cum[c1, p1] - cum[c0, p1] - cum[c1, p0] + cum[c0, p0] for (c0, c1), (p0, p1) in blocks])


def traffic(pops: list[Population], pieces: list, counts: dict) -> dict:
    """``{(source piece, target piece): spikes per inference}`` over the global piece indices of ``pieces``."""
    by_pop = {}
    for i, pc in enumerate(pieces):
        by_pop.setdefault(pc.population, []).append(i)
    out = {}
    for pop in pops:
        for s in pop.streams:
            if s.source is None:
                continue   # values from off the chip: no core sends them
            src = by_pop[s.source]
            blocks = [(pieces[i].channels, pieces[i].positions) for i in src]
            spikes = counts[s.source].reshape(grid(s.source_shape))   # the same neurons, in IR row-major order
            for b in by_pop[pop.name]:
                m = reach(pop, s, pieces[b].channels, pieces[b].positions)
                cum = np.zeros((m.shape[0] + 1, m.shape[1] + 1))
                cum[1:, 1:] = (spikes * m).cumsum(0).cumsum(1)
                for a, w in zip(src, _block_sums(cum, blocks)):
                    if w > 0:
                        out[(a, b)] = out.get((a, b), 0.0) + float(w)
    return out
