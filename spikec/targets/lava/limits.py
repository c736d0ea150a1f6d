"""What the Lava target's integers can hold: values beyond it are refused, by node, before any cast.

A float -> int64 cast of a value beyond int64 (1e300, inf, nan) gives garbage with only a numpy
RuntimeWarning, and since the integer reference and Lava then run the same garbage, the compile used to
say "equivalent true". Every float -> int cast of data in this target (inputs, calibration inputs,
weights, biases, thresholds, resets, decays) goes through ``to_int`` or ``int_inputs``:

- inputs (verification and calibration): spike counts Lava sends as graded payloads into 24-bit synaptic
  sums and states, so ``|x| < 2**23``; integral, finite;
- parameters: exact integers of the integer reference, ``|v| < 2**53`` (float64's exact integers: the
  reference's conv sums are computed in float64); narrower Lava registers saturate and are reported.
"""
import numpy as np

from spikec.ir.errors import BadInput
from spikec.core.interpreter import as_inputs
from spikec.targets.lava import ops as lops

EXACT_BITS = 53                    # float64 holds every integer of magnitude below 2**53
STATE_BITS = lops.STATE_BITS       # Lava's synaptic sums and neuron states: signed 24 bits
PAYLOAD_BITS = 8                   # real inputs as signed 8-bit graded spikes (fixed_point.PAYLOAD_BITS)
HOLDS = f"the integer reference holds {EXACT_BITS}-bit exact integers, Lava's state {STATE_BITS} bits"


def describe(values) -> str:
    """``"values up to 1e+300 need 998 bits"`` (sign included), or what is not finite."""
    v = np.asarray(values, dtype=np.float64)
    if v.size and not np.isfinite(v).all():
        bad = v[~np.isfinite(v)]
        return f"{bad.size} value(s) are not finite ({bad.flat[0]})"
    m = float(np.abs(v).max(initial=0))
    return f"values up to {m:.3g} need {int(m).bit_length() + 1} bits"


def fits(values, magnitude_bits: int) -> bool:
    """All finite, with ``|v| < 2**magnitude_bits``."""
    v = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return bool(np.isfinite(v).all() and (np.abs(v) < 2.0 ** magnitude_bits).all())


def to_int(values, *, node: str, what: str, magnitude_bits: int = EXACT_BITS) -> np.ndarray:
    """``values`` (already rounded) as int64, or a BadInput naming ``node`` when the integer reference cannot
    hold them exactly."""
    if not fits(values, magnitude_bits):
        raise BadInput(f"{what}: {describe(values)}; {HOLDS}", where=f"node {node!r}",
                       remedy="the model's parameters are out of any fixed-point range: check the checkpoint "
                              "(a huge bias, threshold or reset, or a near-zero threshold)")
    return np.asarray(values).astype(np.int64)


def _reader(graph, name: str) -> str:
    readers = [c.name for c in graph.consumers(name)]
    return readers[0] if readers else name


def int_inputs(graph, inputs) -> dict:
    """The graph inputs as int64 ``[T, B, ...]`` arrays (read by the interpreter's ``as_inputs``), refused by node
    when they are not spike counts Lava can carry: non-finite, beyond ``2**23`` (a 24-bit payload and state), or
    not integral."""
    names = [n.name for n in graph.inputs]
    x = as_inputs(graph, inputs)
    out = {}
    gains = graph.meta.get("input_gains", {}) if graph.meta else {}
    for k, v in x.items():
        v = np.asarray(v)
        reader = _reader(graph, k)
        if k in names and graph.node(k).type.kind == "real":
            if not fits(v, EXACT_BITS):
                raise BadInput(f"input {k!r}: {describe(v)}", where=f"node {reader!r}",
                               remedy="feed finite real values")
            # sent as 8-bit graded spikes round(g x) (the integer graph's meta); the float graph's stay real
            out[k] = lops.quantize_values(v, gains[k], PAYLOAD_BITS) if k in gains else v
            continue
        ceiling = graph.node(k).type.ceiling if k in names else None
        if not fits(v, STATE_BITS - 1) or (ceiling is not None and not fits(ceiling, STATE_BITS - 1)):
            shown = v if not fits(v, STATE_BITS - 1) else ceiling
            raise BadInput(f"input {k!r}: {describe(shown)}; Lava's graded spikes and "
                           f"states hold {STATE_BITS} bits (the integer reference {EXACT_BITS}-bit exact integers)",
                           where=f"node {reader!r}",
                           remedy=f"feed spike counts below 2**{STATE_BITS - 1} ({2 ** (STATE_BITS - 1):,}): "
                                  "rescale the inputs, or use --target none for real-valued inputs")
        if not np.array_equal(v, np.round(v)):
            raise BadInput(f"input {k!r} is not integral: the Lava target runs spike inputs only",
                           where=f"node {reader!r}", remedy="feed binary or integer spikes")
        out[k] = v.astype(np.int64)
    return out


def check_scale(node: str, scale: np.ndarray) -> None:
    """A population's weight scale must be finite and positive (a near-zero threshold makes it overflow)."""
    s = np.asarray(scale, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        ok = bool(np.isfinite(s).all() and (s > 0).all())
    if not ok:
        raise BadInput(f"the fixed-point scale of this population is {s[~np.isfinite(s) | (s <= 0)][0]:g}: "
                       "its threshold is too small (or its weights zero) for any integer scale", where=f"node {node!r}",
                       remedy="check the neuron's threshold in the checkpoint (it must be well above 0)")
