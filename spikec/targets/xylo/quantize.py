"""The float layers (mapper.py) as Xylo integers: ``spec``, exactly the keyword arguments of Rockpool's
``XyloSim.from_specification``, and what each rounding costs.

Per population (hidden, output), in the membrane's units::

    dash_mem  = round(-log2(1 - beta)) in 0..15 (beta = 0: 0, which empties the membrane each step as beta = 0
                does); exact iff beta == 1 - 2**-dash_mem
    dash_syn  Synaptic: round(-log2(1 - alpha)), at least 1; Leaky/RLeaky: 1. Xylo's synaptic current decays
                *before* it reaches the membrane (reference.py), so dash_syn 0 would pass nothing, and a
                neuron without a synaptic state has no exact form: Leaky's input goes through a current
                that keeps half of itself for the next step (labelled approximate)
    gain      Synaptic: 1 / a, a = 1 - 2**-dash_syn: Xylo's current after its decay is ``a * (I + W x)``;
                weights times 1/a make it ``a * I + W x``, snnTorch's ``alpha * syn + x`` when a = alpha.
                Leaky/RLeaky: 1, so the current ``a * (I + W x)`` with a = 1/2 passes the input's total
                (a / (1 - a) = 1) spread over the following steps: approximate; gain 1/a (the first step's
                response matched) fired 5x too many spikes on the keyword-spotting test network
    scale s   membrane units per source unit: the largest threshold maps to THRESHOLD_TARGET (1024: 31 spikes'
                worth of membrane stays inside 16 bits), lowered if a weight matrix would need a shift > 7
    weights   W * gain * s = W_int << shift, W_int in -128..127, shift = the smallest in 0..7 that fits (one
                shift per matrix: input, recurrent, output, as Xylo's registers hold them)
    threshold round(theta * s) >= 1;  bias round(b * s) (Synaptic: round(b * s / (1 - alpha)), the constant
                current a bias would build up, labelled approximate), clipped to 16 bits
"""
from dataclasses import dataclass

import numpy as np

from spikec.targets.xylo.limits import Chip
from spikec.targets.xylo.mapper import Mapped, Population

THRESHOLD_TARGET = 1024
SPEC_KEYS = ("weights_in", "weights_out", "weights_rec", "dash_mem", "dash_mem_out", "dash_syn", "dash_syn_2",
             "dash_syn_out", "threshold", "threshold_out", "bias", "bias_out", "weight_shift_in",
             "weight_shift_rec", "weight_shift_out", "dt")


@dataclass(frozen=True)
class Quantized:
    spec: dict               # the keyword arguments of XyloSim.from_specification
    report: dict             # per population: scale, shifts, dashes, exactness of each rounding


def dash_of(decay: np.ndarray, chip: Chip, minimum: int = 0) -> np.ndarray:
    with np.errstate(divide="ignore"):
        d = np.where(decay >= 1, chip["dash_max"], np.round(-np.log2(np.clip(1 - decay, 2.0 ** -30, 1))))
    return np.clip(d, minimum, chip["dash_max"]).astype(np.int64)


def _chip_decay(dash: np.ndarray) -> np.ndarray:
    return 1 - 2.0 ** -dash.astype(np.float64)


def _shift(mag: float, chip: Chip) -> int:
    """The smallest shift that brings ``mag`` (membrane units) into the signed weight range."""
    top = 2 ** (chip["weight_bits"] - 1) - 1
    return 0 if mag <= top else int(np.ceil(np.log2(mag / top) - 1e-12))


def _population(p: Population, chip: Chip, matrices: dict) -> tuple[dict, dict]:
    """``matrices``: name -> float [pre, post] weights into ``p`` (the recurrent one included)."""
    top, smax = 2 ** (chip["weight_bits"] - 1) - 1, chip["weight_shift_max"]
    dash_mem = dash_of(p.beta, chip)
    dash_syn = dash_of(p.alpha, chip, 1) if p.alpha is not None else np.ones(p.size, np.int64)
    # Synaptic: 1/a makes the chip current snnTorch's syn (exact in real arithmetic); Leaky: 1, the current's
    # total response a/(1-a) = 1 equals the input (measured closer than 1/a: fewer spikes too many, docs/targets.md)
    gain = 1 / _chip_decay(dash_syn) if p.alpha is not None else np.ones(p.size)
    scale = THRESHOLD_TARGET / float(p.threshold.max())
    for w in matrices.values():
        mag = float(np.abs(w * gain).max(initial=0.0))
        if mag > 0:
            scale = min(scale, top * 2 ** smax / mag)
    ints, shifts, err = {}, {}, {}
    for name, w in matrices.items():
        eff = w * gain * scale
        k = min(_shift(float(np.abs(eff).max(initial=0.0)), chip), smax)
        ints[name] = np.clip(np.round(eff / 2 ** k), -top - 1, top).astype(np.int64)
        shifts[name] = k
        err[name] = float(np.abs(ints[name] * 2 ** k - eff).max(initial=0.0) / scale)
    lo, hi = -(2 ** (chip["bias_bits"] - 1)), 2 ** (chip["bias_bits"] - 1) - 1
    bias_f = p.bias * scale / (1 - p.alpha) if p.alpha is not None else p.bias * scale
    bias = np.clip(np.round(bias_f), lo, hi).astype(np.int64)
    threshold = np.clip(np.round(p.threshold * scale), 1, 2 ** (chip["threshold_bits"] - 1) - 1).astype(np.int64)
    exact = lambda src, dash: bool(np.all((src == _chip_decay(dash)) | ((src == 0) & (dash == 0))))
    rep = {"node": p.node, "op": p.op, "scale": scale, "weight_shifts": shifts,
           "max_weight_rounding": err, "dash_mem": dash_mem.tolist(), "dash_syn": dash_syn.tolist(),
           "beta": sorted(set(p.beta.tolist())), "beta_exact_as_shift": exact(p.beta, dash_mem),
           "alpha": sorted(set(p.alpha.tolist())) if p.alpha is not None else None,
           "alpha_exact_as_shift": exact(p.alpha, dash_syn) if p.alpha is not None else False,
           "threshold": sorted(set(threshold.tolist())),
           "max_threshold_rounding": float(np.abs(threshold - p.threshold * scale).max() / scale),
           "max_bias_rounding": float(np.abs(bias - bias_f).max(initial=0.0) / scale)}
    return {"ints": ints, "shifts": shifts, "dash_mem": dash_mem, "dash_syn": dash_syn, "threshold": threshold,
            "bias": bias}, rep


def to_integers(m: Mapped, chip: Chip, dt: float = 1e-3) -> Quantized:
    h, hrep = _population(m.hidden, chip, {"in": m.hidden.weights, "rec": m.hidden.weights_rec})
    o, orep = _population(m.output, chip, {"out": m.output.weights})
    spec = {
        "weights_in": h["ints"]["in"], "weights_out": o["ints"]["out"], "weights_rec": h["ints"]["rec"],
        "dash_mem": h["dash_mem"], "dash_mem_out": o["dash_mem"], "dash_syn": h["dash_syn"],
        "dash_syn_2": np.zeros(m.hidden.size, np.int64), "dash_syn_out": o["dash_syn"],
        "threshold": h["threshold"], "threshold_out": o["threshold"], "bias": h["bias"], "bias_out": o["bias"],
        "weight_shift_in": np.int64(h["shifts"]["in"]), "weight_shift_rec": np.int64(h["shifts"]["rec"]),
        "weight_shift_out": np.int64(o["shifts"]["out"]), "dt": np.float64(dt),
    }
    return Quantized(spec, {"hidden": hrep, "output": orep})
