"""Loihi 2 fixed-point arithmetic: 8-bit weights, their sign modes and rounding, the mixed-sign LSB rule,
13-bit bias mantissa / 3-bit exponent, the 17-bit threshold, payload widths.

Weights ``Wq = round(s_c alpha_c W / g)`` (``g`` = the source's payload units per float unit, 1 for spikes):
8-bit magnitude + sign mode per stream (mixed [-128, 127]; single-sign [0, 255] or [-255, 0]); VTH is the
largest integer keeping every stream's weights in range. Lava's Dense drops the LSB of mixed-sign weights,
so they are emitted as ``2 Wq`` with ``weight_exp = -1`` (exact).
"""
import numpy as np

from spikec.ir.graph import TensorType
from spikec.targets.lava.limits import to_int

VTH_MAX = 2 ** 17 - 1          # LIF vth: unsigned 17-bit mantissa
BIAS_MANT = (-4096, 4095)      # 13-bit signed
BIAS_EXP_MAX = 7               # 3-bit
DECAY_MAX = 4095               # 12-bit
DECAY_ONE = 4096
PAYLOAD_BITS = 8               # graded payloads a host sends into a synapse (signed)


def weight_range(w: np.ndarray) -> tuple[int, int, str]:
    mode = "mixed"
    if w.size == 0 or w.min() >= 0:
        mode = "excitatory"
    elif w.max() <= 0:
        mode = "inhibitory"
    return {"excitatory": (0, 255, mode), "inhibitory": (-255, 0, mode), "mixed": (-128, 127, mode)}[mode]


def bias_mant_exp(b: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Integer biases as mantissa << exponent; returns (mant, exp, number saturated)."""
    b = np.asarray(b, dtype=np.int64)
    exp = np.zeros_like(b)
    mant = b.copy()
    for e in range(1, BIAS_EXP_MAX + 1):
        big = (mant > BIAS_MANT[1]) | (mant < BIAS_MANT[0])
        if not big.any():
            break
        mant = np.where(big, np.round(b / 2.0 ** e).astype(np.int64), mant)
        exp = np.where(big, e, exp)
    saturated = int(((mant > BIAS_MANT[1]) | (mant < BIAS_MANT[0])).sum())
    return np.clip(mant, *BIAS_MANT), exp, saturated


def scalar_or_channels(v: np.ndarray) -> np.ndarray:
    """A per-channel parameter as a scalar when every channel holds the same value."""
    v = np.asarray(v)
    return v[:1].reshape(()) if v.size and np.all(v == v.flat[0]) else v


def channel_axis(w: np.ndarray) -> tuple:
    """The shape broadcasting a per-output-channel vector over weights ``w``."""
    return (-1,) + (1,) * (w.ndim - 1)


def full_range(w: np.ndarray) -> float:
    """The scale mapping the largest |weight| onto the edge of the 8-bit range (no weight rounded beyond it)."""
    c = float(_edge_scales(w.reshape(1, -1)).min(initial=np.inf))
    return c if np.isfinite(c) else 1.0


def _edge_scales(w: np.ndarray) -> np.ndarray:
    """Per output row, the largest scale whose round-to-nearest keeps every weight in range. Mixed signs span
    [-128, 127]: a positive weight may reach only 127.5 (exclusive), else it rounds to 128 and is clipped."""
    lo, hi, _ = weight_range(w)
    edge = max(hi, -lo)
    rows = w.reshape(w.shape[0], -1)
    pos, neg = np.maximum(rows, 0).max(1, initial=0), np.maximum(-rows, 0).max(1, initial=0)
    with np.errstate(divide="ignore"):
        return np.minimum(np.where(pos > 0, min(edge, hi + 0.5 - 1e-6) / np.where(pos > 0, pos, 1), np.inf),
                          np.where(neg > 0, edge / np.where(neg > 0, neg, 1), np.inf))


def max_vth(weights: list, theta: np.ndarray) -> int:
    """The largest VTH keeping every stream's weights (``[(stream, float weight | None, gain)]``) in its 8-bit
    range; 0 when a threshold is <= 0 (such a population is scaled by its weight range instead)."""
    if (theta <= 0).any():
        return 0
    lim = np.inf
    for _, w, _ in weights:
        if w is None:
            continue
        with np.errstate(over="ignore"):
            c = _edge_scales(w) * theta
        lim = min(lim, float(c.min(initial=np.inf)))
    return int(max(1, min(VTH_MAX, np.floor(lim) if np.isfinite(lim) else VTH_MAX)))


def payload_bits(t: TensorType) -> int:
    """``num_message_bits`` a synapse reading a source of type ``t`` needs (0: binary spikes)."""
    if t.kind == "binary":
        return 0
    if t.kind == "integer":
        return max(1, int(t.ceiling).bit_length())
    return PAYLOAD_BITS


def round_weights(w: np.ndarray, scale: np.ndarray, gain: float, *, node: str,
                  what: str) -> tuple[np.ndarray, str, dict]:
    """``(Wq, sign mode, info)``: float weights ``w`` at per-channel ``scale``, rounded to nearest and clipped
    to the sign mode's 8-bit range; ``info`` the clipping and the rms error in source units (``gain``)."""
    lo, hi, mode = weight_range(w)
    wq_f = np.round(w * scale.reshape(channel_axis(w)))
    wq = to_int(np.clip(wq_f, lo, hi), node=node, what=what)
    err = wq / scale.reshape(channel_axis(w)) * gain - w * gain
    info = {"sign_mode": mode, "weight_range": [lo, hi], "weights_clipped": int((wq != wq_f).sum()),
            "weight_rms_error": float(np.sqrt(np.mean(err ** 2))) if w.size else 0.0}
    return wq, mode, info


def dense_weights(wq: np.ndarray, mode: str) -> tuple[np.ndarray, int]:
    """``(weights, weight_exp)`` handed to Lava's Dense for the integer weights ``wq`` of sign ``mode``."""
    if mode == "mixed":   # Lava truncates the LSB of mixed-sign 8-bit weights: 2w with weight_exp -1 is exact
        emitted, wexp = 2 * wq, -1
    else:
        emitted, wexp = wq, 0
    return emitted, wexp
