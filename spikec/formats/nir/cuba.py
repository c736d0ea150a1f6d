"""When a NIR ``CubaLIF`` is snnTorch's Synaptic / RSynaptic (``synaptic_snntorch``) bit for bit, and why not.

Read in the snntorch scheme, a CubaLIF with ``v_leak = v_reset = 0``, decays ``1 - dt/tau`` in [0, 1] and
``v_threshold >= 0`` (positive ``r``, ``w_in``) steps exactly as Synaptic with a zero reset and no reset delay
(``synaptic_misfits``). Fed back through a dense ``Affine``/``Linear`` that only it feeds and only it reads, with
one feed-forward input, it is RSynaptic with its recurrence summed with the input first (``rec_add="input"``,
NIR's order) -- the NIR paper's Braille RNN (``recurrent_cubalif_reason``).
"""
import numpy as np

from spikec.formats.nir.interpreter import kind


RECURRENT_CUBALIF_REMEDY = ("read the file with --nir-scheme snntorch, with v_leak = v_reset = 0 and one input into the "
                            "CubaLIF; or compile the model it came from (snnTorch's RSynaptic with "
                            "reset_mechanism='zero', reset_delay=False: spikec traces it to synaptic_snntorch, which ONNX "
                            "and Lava lower)")


def recurrent_cubalif_reason(conv, u: str, v: str) -> str:
    """Why the CubaLIF ``v`` fed back through ``u`` has no bit-exact IR form ("" when it has: snnTorch's RSynaptic
    summing its recurrence with the input, the NIR paper's Braille RNN). ``conv``: the frontend's converter
    (its nodes, edges, inputs and scheme)."""
    fb, node, why = conv.nodes[u], conv.nodes[v], []
    if isinstance(fb, tuple) or kind(fb) not in ("Affine", "Linear"):
        why.append(f"its feedback {u!r} is a {kind(fb) if not isinstance(fb, tuple) else 'nested graph port'}, "
                   "not an Affine/Linear (the IR's recurrent CubaLIF is RSynaptic with a dense recurrence)")
    elif [s for s, d in conv.edges if d == u] != [v] or conv.outs(u) != [v]:
        why.append(f"its feedback {u!r} is not fed by the CubaLIF alone and read by it alone")
    elif np.asarray(fb.weight).shape != (np.asarray(fb.weight).shape[0],) * 2:
        why.append(f"its feedback weight has shape {np.asarray(fb.weight).shape}, not (N, N)")
    if conv.scheme == "norse":
        why.append("in the norse scheme the current steps as i + dt/tau_syn (w_in x - i), which RSynaptic does "
                   "not (read the file with --nir-scheme snntorch)")
    if len(conv.ins(v)) != 1:
        why.append(f"it has {len(conv.ins(v))} feed-forward inputs; the IR sums exactly one input with the "
                   "recurrence in NIR's order")
    why += synaptic_misfits(node, conv.dt)
    if not why:
        return ""
    return f"a CubaLIF fed back through {u!r} has no bit-exact IR form: " + "; ".join(why)


def synaptic_misfits(node, dt: float) -> list[str]:
    """What keeps a CubaLIF from being snnTorch's Synaptic with a zero reset and no reset delay (read in the
    snntorch scheme at ``dt``): empty when it is."""
    decays = [1 - dt / np.asarray(getattr(node, k), dtype=np.float64) for k in ("tau_syn", "tau_mem")]
    why = [] if all(((d >= 0) & (d <= 1)).all() for d in decays) else \
        ["a decay 1 - dt/tau outside [0, 1] (Synaptic clamps its decays to [0, 1])"]
    why += [f"{param} != 0 ({what} Synaptic does not have)" for param, what in
           (("v_leak", "a leak"), ("v_reset", "a reset value")) if np.any(np.asarray(getattr(node, param)) != 0)]
    if np.any(np.asarray(node.v_threshold) < 0) or np.any(np.asarray(node.r) <= 0) or \
            np.any(np.asarray(node.w_in) <= 0):
        why.append("a negative threshold or a non-positive r or w_in (Synaptic's zero reset would fire again "
                   "on the reset membrane)")
    return why
