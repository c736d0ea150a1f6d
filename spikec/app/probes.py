"""Seeded probe samples appended to the verification inputs, reaching branches random spikes rarely do.

Random spikes at p=0.3 seldom light a tensor's border (the padding edges of a conv or a pool) on their
own, never saturate a layer, and almost never land a membrane exactly on a threshold. Each probe is one
extra sample: every input on at every step (saturation); the two checkerboards; each border of the
spatial plane alone (each padding edge); spikes on alternate steps (reset and decay paths). Values are
dyadic (a power of two, or the integer ceiling), so sums of dyadic weights are exact and threshold ties
are reachable. ``near_threshold`` counts how close the neurons came, so the report says whether ties
were exercised at all.
"""
import numpy as np

TIE_TOLERANCE = 1e-9


def _patterns(shape: tuple) -> list[np.ndarray]:
    ones = np.ones(shape)
    grid = np.indices(shape).sum(0) % 2
    out = [ones, grid.astype(float), 1.0 - grid]
    if len(shape) >= 2:  # each border of the last two (spatial) dimensions alone
        for index in ((..., 0, slice(None)), (..., -1, slice(None)), (..., slice(None), 0), (..., slice(None), -1)):
            edge = np.zeros(shape)
            edge[index] = 1.0
            out.append(edge)
    elif shape:
        for i in (0, -1):
            edge = np.zeros(shape)
            edge[i] = 1.0
            out.append(edge)
    return out


def probe_value(x: np.ndarray, kind: str, ceiling: int | None) -> float:
    """The dyadic magnitude a probe carries: 1 for spikes, the ceiling for integers, a power of two near the
    inputs' largest magnitude for real values."""
    if kind == "binary":
        return 1.0
    if kind == "integer":
        return float(ceiling or 1)
    peak = float(np.abs(x).max(initial=0.0))
    return float(2.0 ** np.round(np.log2(peak))) if peak > 0 else 1.0


def probes(x: np.ndarray, kind: str, ceiling: int | None) -> np.ndarray:
    """Probe samples ``[T, P, ...]`` matching ``x`` ``[T, B, ...]``."""
    steps, shape = x.shape[0], tuple(x.shape[2:])
    value = probe_value(x, kind, ceiling)
    samples = [np.broadcast_to(p, (steps, *shape)) for p in _patterns(shape)]
    alternate = np.zeros((steps, *shape))
    alternate[::2] = 1.0
    samples.append(alternate)
    return value * np.stack(samples, axis=1)


def with_probes(x: np.ndarray, kind: str, ceiling: int | None) -> tuple[np.ndarray, int]:
    """``x`` with the probe samples appended along B, and how many were added."""
    p = probes(x, kind, ceiling).astype(x.dtype)
    return np.concatenate([x, p], axis=1), p.shape[1]


def near_threshold(margins: dict, tolerance: float = TIE_TOLERANCE) -> dict:
    """How many neuron values came within ``tolerance`` of their firing boundary (and exactly on it)."""
    by_node = {}
    for name, m in margins.items():
        close = int((m <= tolerance).sum())
        if close:
            by_node[name] = {"within": close, "exact_ties": int((m == 0).sum())}
    return {"tolerance": tolerance, "count": sum(v["within"] for v in by_node.values()),
            "exact_ties": sum(v["exact_ties"] for v in by_node.values()), "by_node": by_node}
