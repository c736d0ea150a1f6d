"""spikec's own integer reference of Xylo Audio 2's neuron arithmetic, written apart from Rockpool (numpy only).

What each line does was read off ``xylosim.v2`` by driving it with single events at the limits (the tests in
``tests/targets/xylo/test_xylo_arithmetic.py`` keep each rule pinned); nothing here calls Rockpool or xylosim.
Per time step ``t``, for hidden neurons ``h`` and output neurons ``o`` (all values int, 16-bit state)::

    leak(x, d)    = max(x >> d, 1) for x > 0, else x >> d   (arithmetic shift: a value loses at least 1 a step)
    sat(x)        = clip(x, -32768, 32767);   wrap(x) = x as 16-bit two's complement (-(-32768) is -32768)
    acc(s, n, W)  = for each source j in order: s = sat(s + n[j] * W[j])   (saturating after each source)
    Isyn_h  = acc(acc(Isyn_h, in[t], W_in << s_in), n_h[t-1], W_rec << s_rec)   the input, then the recurrence
    Isyn_h  = Isyn_h - leak(Isyn_h, dash_syn_h)      the current decays *after* taking the step's input
    Vmem_h  = sat(Vmem_h + sat(sat(Isyn_h + wrap(-leak(Vmem_h, dash_mem_h))) + bias_h))
                                                     the membrane's leak is taken off the current first, and
                                                     that difference saturates on its own (it shows when Isyn
                                                     is near saturation and Vmem is far from zero)
    n_h[t]  = clip(floor(Vmem_h / thr_h), 0, 31)     several spikes a step; a negative Vmem fires none
    Vmem_h -= n_h[t] * thr_h                         the reset subtracts at once, in the same step
    Isyn_o  = acc(Isyn_o, n_h[t-1], W_out << s_out);  Isyn_o -= leak(Isyn_o, dash_syn_out_o)
    Vmem_o  = as Vmem_h, with the output neuron's dash_mem_out, Isyn_o and bias_out
    y_o[t]  = [Vmem_o >= thr_o];  Vmem_o -= y_o[t] * thr_o     an output neuron fires at most once a step

The hidden spikes reach the recurrent and the output weights one step later (``n_h[t-1]``); the input reaches
the hidden neurons in the same step. States start at zero. The saturation order (per source, input before
recurrence, the leak's difference saturated apart from the bias) was found by driving the simulator into
saturation with random specifications; ``tests/targets/xylo`` repeats that comparison.
"""
from dataclasses import dataclass

import numpy as np

STATE_MIN, STATE_MAX = -(2 ** 15), 2 ** 15 - 1
MAX_HIDDEN_SPIKES = 31


def leak(x: np.ndarray, dash: np.ndarray) -> np.ndarray:
    """What Xylo's bit-shift decay takes off ``x``: ``x >> dash``, and at least 1 off a positive value."""
    step = x >> dash                         # numpy >> on int64 is an arithmetic (flooring) shift
    return np.where((x > 0) & (step == 0), 1, step)


def decay(x: np.ndarray, dash: np.ndarray) -> np.ndarray:
    """Xylo's bit-shift decay ``x - leak(x)``."""
    return x - leak(x, dash)


def sat(x: np.ndarray) -> np.ndarray:
    return np.clip(x, STATE_MIN, STATE_MAX)


def wrap(x: np.ndarray) -> np.ndarray:
    """``x`` as a 16-bit two's-complement value (wraps: ``-(-32768)`` is ``-32768``)."""
    return ((x - STATE_MIN) % 2 ** 16) + STATE_MIN


def accumulate(state: np.ndarray, counts: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Add each source's events to ``state`` in source order, saturating after each source (the order of the
    sums matters once the 16-bit state saturates); ``counts[j]`` events of source ``j`` add ``counts[j] * W[j]``
    (repeated saturating adds of one sign give the same)."""
    for j in np.flatnonzero(counts):
        state = sat(state + counts[j] * weights[j])
    return state


@dataclass(frozen=True)
class Run:
    """One sample's recorded integer run, [T, N] each."""
    spikes: np.ndarray        # hidden spike counts
    isyn: np.ndarray
    vmem: np.ndarray
    out: np.ndarray           # output spikes (0/1)
    isyn_out: np.ndarray
    vmem_out: np.ndarray


def _as2d(w) -> np.ndarray:
    w = np.asarray(w, np.int64)
    return w[..., 0] if w.ndim == 3 else w   # spikec uses the first synapse only


def run(spec: dict, raster: np.ndarray) -> Run:
    """Run ``spec`` (the keyword arguments of ``XyloSim.from_specification``) on ``raster`` [T, Nin] of counts."""
    w_in, w_rec, w_out = _as2d(spec["weights_in"]), _as2d(spec["weights_rec"]), _as2d(spec["weights_out"])
    w_in = w_in << int(spec["weight_shift_in"])
    w_rec = w_rec << int(spec["weight_shift_rec"])
    w_out = w_out << int(spec["weight_shift_out"])
    hid = {k: np.asarray(spec[k], np.int64) for k in ("dash_syn", "dash_mem", "threshold", "bias")}
    out = {k: np.asarray(spec[k], np.int64) for k in ("dash_syn_out", "dash_mem_out", "threshold_out", "bias_out")}
    nh, no = w_rec.shape[0], w_out.shape[1]
    isyn, vmem, prev = np.zeros(nh, np.int64), np.zeros(nh, np.int64), np.zeros(nh, np.int64)
    isyn_o, vmem_o = np.zeros(no, np.int64), np.zeros(no, np.int64)
    rec = {k: [] for k in Run.__dataclass_fields__}
    for x in np.asarray(raster, np.int64):
        isyn = accumulate(accumulate(isyn, x, w_in), prev, w_rec)     # the input first, then last step's spikes
        isyn = decay(isyn, hid["dash_syn"])
        vmem = sat(vmem + sat(sat(isyn + wrap(-leak(vmem, hid["dash_mem"]))) + hid["bias"]))
        n = np.clip(vmem // hid["threshold"], 0, MAX_HIDDEN_SPIKES)     # floor division: several spikes a step
        vmem = vmem - n * hid["threshold"]                              # subtractive reset, same step
        isyn_o = decay(accumulate(isyn_o, prev, w_out), out["dash_syn_out"])  # the hidden spikes of the last step
        vmem_o = sat(vmem_o + sat(sat(isyn_o + wrap(-leak(vmem_o, out["dash_mem_out"]))) + out["bias_out"]))
        y = (vmem_o >= out["threshold_out"]).astype(np.int64)           # at most one output spike a step
        vmem_o = vmem_o - y * out["threshold_out"]
        prev = n
        for k, v in zip(Run.__dataclass_fields__, (n, isyn, vmem, y, isyn_o, vmem_o)):
            rec[k].append(v)
    return Run(**{k: np.array(v, np.int64).reshape(len(v), -1) for k, v in rec.items()})
