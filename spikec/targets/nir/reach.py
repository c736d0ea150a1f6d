"""NIR forms of what framework users write that no single NIR node is: ``concat``, snnTorch's default ``Synaptic``,
Norse's ``LIFRecurrentCell`` and ``LICell``. Each is a composition of NIR primitives, exact in spikec's NIR
interpreter (the target proves it on the user's inputs), run in every consumer that reads it.

* ``concat`` along a vector's dim (or the channel dim of a ``(C, L)`` / ``(C, H, W)`` step): NIR has no concat node,
  but a node sums its inputs. Each part goes through a 0/1 selection ``Linear`` (a 1x1 ``Conv1d`` / ``Conv2d``
  for channels) that places it at its offset; the readers sum the parts. Exact: ``x * 1`` and ``+ 0`` round nothing.
* snnTorch's ``Synaptic`` with its default subtract reset, ``reset_delay=True``, ``θ >= 0``, read as spikes:
  ``syn = alpha syn + x`` is an ``LI`` whose output is its state (gain 1), feeding the Leaky's CubaLIF reset cycle
  (``composed.snntorch_leaky``: the CubaLIF's current is ``mem = beta mem + syn - θ r``). One rounding differs as
  in the Leaky (``beta mem + (syn - θ)``); the checker compares every spike.
* Norse's ``LIFRecurrentCell`` read as spikes (``v_leak = 0``): ``Linear(input_weights)`` into the LIFCell's
  ``CubaLIF`` (``composed.norse_lif``) with ``Linear(recurrent_weights)`` from its spikes back into it, a cycle read
  one step late (Norse adds ``linear(z_prev, W_rec)`` to the current jump). NIR sums the two linears first where
  Norse adds them to the current one by one: another rounding, measured.
* Norse's ``LICell`` (a current, ``v_leak = 0``) read as ``v``: the LIFCell's ``CubaLIF`` that never fires, NIR's
  ``CubaLI`` (``forms.cuba`` with ``fire=False``).
"""
import nir
import numpy as np

from spikec.targets.nir import composed, forms
from spikec.targets.nir.export import LOWERINGS, REMEDIES, VARIANT_REASONS, _refuse

SYN_NOTE = ("snnTorch Synaptic (subtract reset, reset_delay=True) as LI (syn, gain 1) into the Leaky's CubaLIF "
            "(its current the Synaptic's mem, tau_mem = dt) + a -threshold feedback through an identity")
REC_NOTE = ("Norse LIFRecurrentCell as Linear(input_weights) into the LIFCell's CubaLIF + Linear(recurrent_weights) "
            "from its spikes back into it (read one step late)")
LI_NOTE = "Norse LICell as CubaLI: its current jumps by the input then decays (gain 1), its membrane v + a_mem (i - v)"


def _selection(ex, node, src: str, offset: int, total: int) -> str:
    """``src`` placed at ``offset`` along the concat's dim of ``total``: a 0/1 Linear or a 1x1 conv."""
    shape = ex.graph.node(src).type.shape
    n = shape[node.attrs["axis"]]
    place = np.zeros((total, n))
    place[offset + np.arange(n), np.arange(n)] = 1.0
    base = f"{node.name}.part"
    if len(shape) == 1:
        return ex.add(base, nir.Linear(weight=place), (src,))
    if len(shape) == 2:
        conv = nir.Conv1d(input_shape=int(shape[1]), weight=place[:, :, None], stride=1, padding=0, dilation=1,
                          groups=1, bias=np.zeros(total))
        return ex.add(base, conv, (src,))
    return ex.conv(node, base, (src,), shape, place[:, :, None, None], np.zeros(total), 1, 0, 1, 1)


def concat(ex, node) -> None:
    axis, shape = node.attrs["axis"], node.type.shape
    if axis != 0 or len(shape) > 3:
        _refuse(node, f"a concat along dim {axis} of a {shape} step: NIR has no concat node, and only a vector's "
                "dim or the channel dim (a 0/1 Linear or 1x1 conv per part, summed by the reader) has a NIR form",
                "concatenate vectors or channels, or flatten before the concat")
    parts, offset = [], 0
    for src in node.inputs:
        parts.append(_selection(ex, node, src, offset, shape[0]))
        offset += ex.graph.node(src).type.shape[0]
    ex.sources[node.name] = parts
    ex.notes.append(f"{node.name}: concat as a 0/1 selection per part, summed by its reader")


_plain_synaptic = LOWERINGS["synaptic_snntorch"]


def synaptic(ex, node) -> None:
    a = node.attrs
    if not (a["reset"] == "subtract" and a["reset_delay"] and a.get("recurrent", "none") == "none"
            and a.get("read", "spikes") == "spikes"):
        return _plain_synaptic(ex, node)
    raw = {k: np.asarray(node.params[k], dtype=np.float64) for k in ("alpha", "beta", "threshold")}
    alpha, beta, theta = (ex.per_neuron(node, raw[k]) for k in ("alpha", "beta", "threshold"))
    if (theta < 0).any() or not (((beta >= 0) & (beta < 1)).all() and ((alpha >= 0) & (alpha <= 1)).all()):
        _refuse(node, "a negative threshold, or a decay outside [0, 1) (beta) / [0, 1] (alpha): "
                + VARIANT_REASONS["synaptic_snntorch"], REMEDIES["synaptic_snntorch"])
    syn, ok = composed._integrator(ex.form, alpha)
    if syn is None:
        _refuse(node, "alpha = 1 on some channels and < 1 on others: neither NIR LI nor I covers both",
                REMEDIES["synaptic_snntorch"])
    ex.exact_params &= ok and ex.form.scheme == "snntorch"
    li = ex.add(f"{node.name}.syn", syn, node.inputs)
    zeros, ones = np.zeros_like(beta), np.ones_like(beta)
    mem = {"beta": zeros, "alpha": ones, "bias": zeros, "theta": np.nextafter(theta, np.inf), "v_reset": zeros}
    cuba, ok = forms.cuba(ex.form, {"beta": beta, "alpha": ones}, mem, True)
    ex.exact_params &= ok
    name = ex.add(node.name, cuba)
    ex.edges.append((li, name))
    sub_raw = np.float32(raw["threshold"]).astype(np.float64) if raw["threshold"].ndim == 0 else raw["threshold"]
    sub = ex.per_neuron(node, sub_raw).reshape(node.type.shape[0], -1)[:, 0]
    composed._reset_cycle(ex, node, name, name, sub, True)
    ex.single(node, name)
    ex.notes.append(f"{node.name}: {SYN_NOTE} (read one step late)")


def _norse_params(ex, node, skip=()) -> dict:
    return {k: ex.per_neuron(node, np.asarray(v, dtype=np.float64)) for k, v in node.params.items() if k not in skip}


def lif_recurrent_norse(ex, node) -> None:
    weights = ("input_weights", "recurrent_weights")
    p = _norse_params(ex, node, weights)
    why = "a v or i read-out, or v_leak != 0" if node.attrs.get("read", "spikes") != "spikes" or \
        (p["v_leak"] != 0).any() else "dt * tau_mem_inv outside (0, 1]" \
        if not ((p["dt_tau_mem_inv"] > 0) & (p["dt_tau_mem_inv"] <= 1)).all() else None
    if why:
        _refuse(node, f"{why}: Norse's LIFRecurrentCell is exported read as spikes, resting at v_leak = 0 (NIR's "
                "CubaLIF outputs spikes only and starts at 0)", "compile with --target onnx, which lowers "
                "lif_recurrent_norse exactly (spikes, v and i)")
    w_in, w_rec = (np.asarray(node.params[k], dtype=np.float64) for k in weights)
    lin = ex.add(f"{node.name}.w_in", nir.Linear(weight=w_in), node.inputs)
    a_mem, ones, zeros = p["dt_tau_mem_inv"], np.ones_like(p["v_leak"]), np.zeros_like(p["v_leak"])
    mem = {"beta": 1 - a_mem, "alpha": a_mem, "bias": zeros, "theta": np.nextafter(p["threshold"], np.inf),
           "v_reset": p["v_reset"]}
    cuba, ok = forms.cuba(ex.form, {"beta": 1 - p["dt_tau_syn_inv"], "alpha": ones}, mem, True)
    ex.exact_params &= ok
    name = ex.add(node.name, cuba)
    rec = ex.add(f"{node.name}.w_rec", nir.Linear(weight=w_rec))
    ex.edges += [(lin, name), (name, rec), (rec, name)]
    ex.single(node, name)
    ex.notes.append(f"{node.name}: {REC_NOTE}")


def li_norse(ex, node) -> None:
    p = _norse_params(ex, node)
    a = node.attrs
    if not a.get("current") or a.get("read", "v") != "v" or (p["v_leak"] != 0).any() or \
            not ((p["dt_tau_mem_inv"] > 0) & (p["dt_tau_mem_inv"] <= 1)).all():
        _refuse(node, VARIANT_REASONS["li_norse"], REMEDIES["li_norse"])
    a_mem, ones, zeros = p["dt_tau_mem_inv"], np.ones_like(p["v_leak"]), np.zeros_like(p["v_leak"])
    mem = {"beta": 1 - a_mem, "alpha": a_mem, "bias": zeros, "theta": zeros, "v_reset": zeros}
    state, ok = forms.cuba(ex.form, {"beta": 1 - p["dt_tau_syn_inv"], "alpha": ones}, mem, False)
    ex.exact_params &= ok
    ex.single(node, ex.add(node.name, state, node.inputs))
    ex.notes.append(f"{node.name}: {LI_NOTE}")


LOWERINGS.update({"concat": concat, "synaptic_snntorch": synaptic, "lif_recurrent_norse": lif_recurrent_norse,
                  "li_norse": li_norse})
