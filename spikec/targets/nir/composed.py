"""The frameworks' default neurons as compositions of NIR primitives, and the nearest variant a consumer reads.

snnTorch's default ``Leaky`` (subtract reset, ``reset_delay=True``; ``lif_snntorch``) steps, in float64 as its
kernel (``spikec.frontend.snntorch_neurons``)::

    r = [mem_prev > θ];   mem = (beta * mem_prev + x) - r * θ;   spk = [mem > θ]   (mem is what it returns)

``r`` is the previous step's spike, so the reset is a cycle: ``LI`` (state ``mem``, ``1 - dt/tau == beta``,
``r dt/tau == 1``: the output is the state itself) -> ``Threshold(θ)`` -> a per-neuron ``-θ`` (diagonal ``Affine``
or depthwise 1x1 ``Conv2d``) -> back into the ``LI``, read one step late. ``θ`` itself (not ``nextafter``):
``mem - θ > 0`` is ``mem > θ`` for every float. A 0-dim ``θ`` is subtracted as a float32 product (snnTorch's
spike tensor is float32), so the feedback weight is ``-float32(θ)``. One rounding differs: NIR sums a node's
inputs first, so the LI computes ``beta * mem + (x - θ)`` where snnTorch computes ``(beta * mem + x) - θ``, on
the steps after a spike; the checker compares every spike and membrane on the user's inputs.
``beta = 1`` uses ``I`` (``dt r == 1``).

No consumer reads the composition (``consumers.limits``): snnTorch's ``import_from_nir`` and Norse's ``from_nir``
read neither ``LI`` nor ``Threshold``, Sinabs's reads ``LI`` but not ``Threshold``. ``nearest(graph)`` is the
variant every consumer reads -- each composed neuron as a zero-reset ``LIF`` -- for the NIR target to measure on
the user's inputs how many spikes it changes.
"""
import nir
import numpy as np

from spikec.compiler.errors import UnsupportedOp
from spikec.targets.nir import forms

LEAKY_NOTE = "snnTorch Leaky (subtract reset, reset_delay=True) as LI + Threshold + a -threshold feedback cycle"


def _refuse(node, why: str, remedy: str):
    raise UnsupportedOp(f"cannot be exported to NIR exactly: {why}",
                        where=f"node {node.name!r} ({node.op}{', module ' + repr(node.scope) if node.scope else ''})",
                        remedy=remedy)


def _integrator(form, beta: np.ndarray) -> tuple[nir.NIRNode, bool]:
    """``v <- beta v + I`` whose output is ``v`` itself (gain exactly 1 in the reader's float64)."""
    dt = form.dt
    if (beta == 1).all():
        r, found = forms.search(np.full_like(beta, 1 / dt), lambda r: dt * r == 1.0)
        return nir.I(r=r), bool(found.all())
    if (beta == 1).any():
        return None, False
    if form.scheme == "norse":
        return forms.li(form, beta, np.ones_like(beta), np.zeros_like(beta))
    tau, ok = forms.tau_for(beta, dt)
    r, found = forms.search(tau / dt, lambda r: r * dt / tau == 1.0)
    return nir.LI(tau=tau, r=r, v_leak=np.zeros_like(beta)), ok and bool(found.all())


def snntorch_leaky(ex, node, refuse_reason: str, remedy: str):
    """The ``lif_snntorch`` lowering: the default Leaky (spikes or mem) as the LI/I + Threshold cycle."""
    a = node.attrs
    if a["reset"] != "subtract" or not a["reset_delay"]:
        _refuse(node, refuse_reason, remedy)
    raw = {k: np.asarray(node.params[k], dtype=np.float64) for k in ("beta", "threshold")}
    beta, theta = (ex.per_neuron(node, raw[k]) for k in ("beta", "threshold"))
    key = ("lif_snntorch", node.inputs, tuple(sorted((k, v.tobytes()) for k, v in raw.items())))
    known = ex.neurons.setdefault(key, {})
    if not known:
        state, ok = _integrator(ex.form, beta)
        if state is None:
            _refuse(node, "beta = 1 on some channels and < 1 on others: neither NIR LI nor I covers both", remedy)
        ex.exact_params &= ok and ex.form.scheme == "snntorch"
        li = ex.add(f"{node.name}.li", state, node.inputs)
        spikes = ex.add(f"{node.name}.spikes" if a.get("read", "spikes") == "mem" else node.name,
                        nir.Threshold(threshold=theta.copy()))
        ex.edges.append((li, spikes))
        sub = np.float32(raw["threshold"]).astype(np.float64) if raw["threshold"].ndim == 0 else raw["threshold"]
        fb = -ex.per_neuron(node, sub).reshape(node.type.shape[0], -1)[:, 0]
        src = f"{node.name}.fb_src"
        ex.sources[src] = [spikes]
        feedback = ex.channel_affine(node, f"{node.name}.reset", (src,), fb, 0.0, node.type.shape)
        del ex.sources[src]
        ex.edges.append((feedback, li))
        ex.notes.append(f"{node.name}: {LEAKY_NOTE} (read one step late)")
        known["mem"], known["spikes"] = li, spikes
    ex.single(node, known[a.get("read", "spikes")])


def composed_neurons(graph: nir.NIRGraph) -> list[tuple[str, str, str]]:
    """``(integrator, threshold, feedback)`` for every LI/I -> Threshold -> feedback -> LI/I cycle."""
    out = []
    for th, node in graph.nodes.items():
        if type(node).__name__ != "Threshold":
            continue
        into = [s for s, d in graph.edges if d == th]
        fbs = [d for s, d in graph.edges if s == th and [dd for ss, dd in graph.edges if ss == d] == into]
        if len(into) == 1 and type(graph.nodes[into[0]]).__name__ in ("LI", "I") and len(fbs) == 1:
            out.append((into[0], th, fbs[0]))
    return out


def nearest(graph: nir.NIRGraph, dt: float) -> nir.NIRGraph | None:
    """Each composed neuron as a zero-reset ``LIF`` (reset on the spiking step, to 0): what snnTorch, Norse and
    Sinabs read. None when a membrane (the LI/I) is read by anything but its Threshold: no LIF outputs it."""
    found = composed_neurons(graph)
    if not found:
        return None
    nodes, edges = dict(graph.nodes), list(graph.edges)
    for li, th, fb in found:
        if [d for s, d in edges if s == li] != [th]:
            return None
        state = nodes.pop(li)
        thr = np.asarray(nodes[th].threshold, dtype=np.float64)
        if type(state).__name__ == "I":   # beta = 1: a LIF whose 1 - dt/tau rounds to 1 (forms.IF_AS_LIF)
            tau, r = np.full_like(thr, dt * forms.IF_AS_LIF), np.full_like(thr, forms.IF_AS_LIF)
        else:
            tau, r = np.asarray(state.tau, dtype=np.float64), np.asarray(state.r, dtype=np.float64)
        gain = r * dt / tau
        nodes[th] = nir.LIF(tau=tau, r=r, v_leak=np.zeros_like(thr), v_threshold=thr * gain,
                            v_reset=np.zeros_like(thr))
        del nodes[fb]
        edges = [(s, th if d == li else d) for s, d in edges if fb not in (s, d) and (s, d) != (li, th)]
    return nir.NIRGraph(nodes=nodes, edges=edges, metadata=dict(graph.metadata or {}), type_check=False)
