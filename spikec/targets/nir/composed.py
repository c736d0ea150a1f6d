"""The frameworks' default neurons as compositions of NIR primitives, and the nearest variant a consumer reads.

snnTorch's default ``Leaky`` (subtract reset, ``reset_delay=True``; ``lif_snntorch``) steps, in float64 as its
kernel (``spikec.frontend.snntorch_neurons``)::

    r = [mem_prev > θ];   mem = (beta * mem_prev + x) - r * θ;   spk = [mem > θ]   (mem is what it returns)

``r`` is the previous step's spike, so the reset is a cycle, read one step late. Two compositions:

* read as spikes, ``0 <= beta <= 1``, ``θ >= 0`` (what the importers run): a ``CubaLIF`` whose current is the
  Leaky's ``mem`` (``1 - dt/tau_syn == beta``, input gain ``w_in dt/tau_syn == 1``; for ``beta = 1``
  ``tau_syn = dt 2**60``, ``w_in = 2**60``, as ``forms.IF_AS_LIF``) and whose membrane, with
  ``tau_mem = dt`` (``beta_mem = 0``), is that current each step: it fires on ``current > θ`` and its zero reset
  is forgotten by the next step. ``-θ`` per neuron (diagonal ``Affine`` or depthwise 1x1 ``Conv2d``) and an
  identity of the same kind close the loop back into the CubaLIF: three nodes, because snnTorch's importer turns a
  two-node LIF/CubaLIF <-> Affine/Linear loop into a nested graph nirtorch cannot build (``consumers.NESTED``).
  snnTorch's ``import_from_nir`` builds ``Synaptic(alpha=beta, beta=0)`` and Norse's ``from_nir`` its CubaLIF cell;
  both run the file with nirtorch, which reads the loop one step late (0 at the first step: no bias here).
* otherwise (the ``mem`` read, a negative ``θ``): ``LI`` (state ``mem``, ``1 - dt/tau == beta``,
  ``r dt/tau == 1``: the output is the state itself; ``I`` with ``dt r == 1`` for ``beta = 1``) ->
  ``Threshold(θ)`` -> the ``-θ`` -> back into the ``LI``. No consumer reads it (``consumers.limits``): snnTorch's
  and Norse's importers read neither ``LI``/``I`` nor ``Threshold``, Sinabs's reads ``LI`` but not ``Threshold``.
  ``nearest(graph)`` is the variant they read -- each such neuron a zero-reset ``LIF`` -- for the NIR target to
  measure on the user's inputs how many spikes it changes.

``θ`` itself is the threshold (not ``nextafter``): ``mem - θ > 0`` is ``mem > θ`` for every float. A 0-dim ``θ`` is
subtracted as a float32 product (snnTorch's spike tensor is float32), so the feedback is ``-float32(θ)``. One
rounding differs from snnTorch: a NIR node sums its inputs first, so the state takes ``beta * mem + (x - θ)``
where snnTorch computes ``(beta * mem + x) - θ``, on the steps after a spike; the checker compares every spike on
the user's inputs, in spikec's interpreter and in each consumer.
"""
import nir
import numpy as np

from spikec.ir.errors import UnsupportedOp
from spikec.targets.nir import forms
from spikec.targets.nir.reasons import LIF_SNNTORCH

CUBA_NOTE = ("snnTorch Leaky (subtract reset, reset_delay=True) as CubaLIF (its current the Leaky's mem, "
             "tau_mem = dt: the membrane is the current) + a -threshold feedback through an identity back into it")
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


def _key(node) -> tuple:
    raw = tuple(sorted((k, np.asarray(v, dtype=np.float64).tobytes()) for k, v in node.params.items()))
    return (LIF_SNNTORCH, node.inputs, raw, node.attrs["reset"], node.attrs["reset_delay"])


def _reset_cycle(ex, node, into: str, spikes: str, sub: np.ndarray, through: bool) -> None:
    """``spikes`` -> a per-neuron ``-θ`` -> (an identity, when ``through``) -> ``into``: a cycle, read one step late."""
    src = f"{node.name}.fb_src"
    ex.sources[src] = [spikes]
    last = ex.channel_affine(node, f"{node.name}.reset", (src,), -sub, 0.0, node.type.shape)
    if through:
        ex.sources[src] = [last]
        last = ex.channel_affine(node, f"{node.name}.reset_pass", (src,), 1.0, 0.0, node.type.shape)
    del ex.sources[src]
    ex.edges.append((last, into))


def snntorch_leaky(ex, node, refuse_reason: str, remedy: str):
    """The ``lif_snntorch`` lowering: the default Leaky as the CubaLIF cycle (spikes, ``0 <= beta <= 1``,
    ``θ >= 0``, no mem read) that snnTorch and Norse run, else as the LI/I + Threshold cycle."""
    a = node.attrs
    if a["reset"] != "subtract" or not a["reset_delay"]:
        _refuse(node, refuse_reason, remedy)
    raw = {k: np.asarray(node.params[k], dtype=np.float64) for k in ("beta", "threshold")}
    beta, theta = (ex.per_neuron(node, raw[k]) for k in ("beta", "threshold"))
    sub_raw = np.float32(raw["threshold"]).astype(np.float64) if raw["threshold"].ndim == 0 else raw["threshold"]
    sub = ex.per_neuron(node, sub_raw).reshape(node.type.shape[0], -1)[:, 0]
    known = ex.neurons.setdefault(_key(node), {})
    mem_read = any(n.op == LIF_SNNTORCH and _key(n) == _key(node) and n.attrs.get("read", "spikes") == "mem"
                   for n in ex.graph.nodes)
    integrate = bool((beta == 1).all())   # an IF: the current's tau_syn = dt 2**60, w_in = 2**60 (forms.IF_AS_LIF)
    if not known and not mem_read and (integrate or ((beta >= 0) & (beta < 1)).all()) and (theta >= 0).all():
        cuba, ok = membrane_cuba(ex, beta, np.ones_like(beta), np.nextafter(theta, np.inf))
        ex.exact_params &= ok
        known["spikes"] = ex.add(node.name, cuba, node.inputs)
        _reset_cycle(ex, node, known["spikes"], known["spikes"], sub, True)
        ex.notes.append(f"{node.name}: {CUBA_NOTE} (read one step late)")
    if not known:
        state, ok = _integrator(ex.form, beta)
        if state is None:
            _refuse(node, "beta = 1 on some channels and < 1 on others: neither NIR LI nor I covers both", remedy)
        ex.exact_params &= ok and ex.form.scheme == "snntorch"
        li = ex.add(f"{node.name}.li", state, node.inputs)
        spikes = ex.add(f"{node.name}.spikes" if a.get("read", "spikes") == "mem" else node.name,
                        nir.Threshold(threshold=theta.copy()))
        ex.edges.append((li, spikes))
        _reset_cycle(ex, node, li, spikes, sub, False)
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


SJ_NOTE = ("SpikingJelly soft reset (v_reset=None, decay_input=True) as k*x into a CubaLIF (its current SpikingJelly's "
           "H, decay 1 - k, tau_mem = dt) + a -(1 - k)*threshold feedback through an identity")


def sj_soft(ex, node, k: float, theta: float) -> None:
    """SpikingJelly's soft-reset charge ``H = V + (X - V) k``, ``S = [H >= θ]``, ``V = H - S θ``: in exact arithmetic
    ``H_t = (1 - k) H_{t-1} + k X_t - (1 - k) θ S_{t-1}``, the Leaky's CubaLIF cycle with the input scaled by ``k``
    and the feedback ``-(1 - k) θ``. Rounding differs from SpikingJelly's order; the checker measures the spikes."""
    shape = node.type.shape
    full = lambda v: np.full(shape, v, dtype=np.float64)
    scaled = ex.channel_affine(node, f"{node.name}.in", node.inputs, k, 0.0, shape)
    src = f"{node.name}.in_src"
    ex.sources[src] = [scaled]
    mem = {"beta": full(0.0), "alpha": full(1.0), "bias": full(0.0), "theta": full(theta), "v_reset": full(0.0)}
    cuba, ok = forms.cuba(ex.form, {"beta": full(1.0 - k), "alpha": full(1.0)}, mem, True)
    del ex.sources[src]
    ex.exact_params &= ok
    name = ex.add(node.name, cuba)
    ex.edges.append((scaled, name))
    _reset_cycle(ex, node, name, name, np.full(shape[0], (1.0 - k) * theta), True)
    ex.single(node, name)
    ex.notes.append(f"{node.name}: {SJ_NOTE} (read one step late)")


NORSE_NOTE = ("Norse LIFCell as CubaLIF: its current jumps by the input then decays (a leaky integrator of gain 1, "
              "w_in dt/tau_syn = 1), its membrane v + a_mem ((v_leak - v) + i)")
NORSE_BOX_NOTE = "Norse LIFBoxCell as LIF: v + a_mem ((x + v_leak) - v), NIR's Euler step (r = 1)"


def norse_lif(ex, node, refuse_reason: str, remedy: str) -> None:
    """``lif_norse`` read as spikes, reset to a value, resting at ``v_leak = 0`` (NIR's states start at 0):
    LIFCell (``current``) as ``CubaLIF``, LIFBoxCell as ``LIF``. Norse's ``v~ - v_th > 0`` is ``>``: the
    threshold passed is ``nextafter(v_th, +inf)`` in the ``U >= theta`` convention of ``forms``."""
    a = node.attrs
    p = {k: ex.per_neuron(node, np.asarray(v, dtype=np.float64)) for k, v in node.params.items()}
    if a.get("read", "spikes") != "spikes" or a.get("reset") != "value" or (p["v_leak"] != 0).any():
        _refuse(node, refuse_reason, remedy)
    a_mem, zeros, ones = p["dt_tau_mem_inv"], np.zeros_like(p["v_leak"]), np.ones_like(p["v_leak"])
    if not ((a_mem > 0) & (a_mem <= 1)).all():
        _refuse(node, f"dt * tau_mem_inv outside (0, 1]: {refuse_reason}", remedy)
    theta = np.nextafter(p["threshold"], np.inf)
    if a["current"]:
        a_syn = p["dt_tau_syn_inv"]
        mem = {"beta": 1 - a_mem, "alpha": a_mem, "bias": zeros, "theta": theta, "v_reset": p["v_reset"]}
        state, ok = forms.cuba(ex.form, {"beta": 1 - a_syn, "alpha": ones}, mem, True)
        note = NORSE_NOTE
    else:
        state, ok = forms.lif(ex.form, 1 - a_mem, a_mem, zeros, theta, p["v_reset"])
        note = NORSE_BOX_NOTE
    ex.exact_params &= ok
    ex.single(node, ex.add(node.name, state, node.inputs))
    ex.notes.append(f"{node.name}: {note}")


LIF_NOTE = ("subtract reset as CubaLIF (its current the neuron's U / alpha, tau_mem = dt: fires on current >= "
            "threshold) + a -beta*threshold/alpha feedback through an identity back into it")


def membrane_cuba(ex, beta, alpha, theta) -> tuple:
    """``(CubaLIF, exact)`` whose current is the membrane: the current decays by ``beta`` (``beta = 1`` on every
    neuron: ``tau_syn = dt 2**60``, ``w_in = 2**60``, an exact integrator in float64) with input gain ``alpha``, and
    the membrane (``tau_mem = dt``, no leak) is that current each step, firing on ``> theta`` (its zero reset
    forgotten by the next step). The one form of the Leaky, RLeaky and subtract-reset ``lif`` cycles."""
    integrate = bool((beta == 1).all())
    ones, zeros = np.ones_like(beta), np.zeros_like(beta)
    mem = {"beta": zeros, "alpha": ones, "bias": zeros, "theta": theta, "v_reset": zeros}
    cuba, ok = forms.cuba(ex.form, {"beta": zeros if integrate else beta, "alpha": alpha}, mem, True)
    if integrate:   # 1 - dt/tau_syn rounds to 1.0 and w_in dt/tau_syn is 1.0 exactly in float64
        cuba.tau_syn = np.full_like(beta, ex.form.dt * forms.IF_AS_LIF)
        cuba.w_in = np.full_like(beta, forms.IF_AS_LIF)
    return cuba, ok


def lif_subtract(ex, node, beta, alpha, bias, theta) -> str | None:
    """spikec's own subtract-reset ``lif`` read as spikes (``U_t = beta (U_{t-1} - θ S_{t-1}) + alpha X_t``, ``S =
    [U >= θ]``): the Leaky's CubaLIF cycle with the input gain ``alpha`` and the feedback ``-beta θ / alpha`` (in the
    current's units, ``U / alpha``), which snnTorch, Norse and SpikingJelly read. None (the LI + Threshold form) for a
    bias, ``θ < 0``, ``alpha <= 0``, mixed ``beta = 1`` / ``< 1`` or a feedback varying within a channel."""
    shape = node.type.shape
    integrate = bool((beta == 1).all())
    fb = (beta * theta / alpha).reshape(shape[0], -1)
    if (bias != 0).any() or (theta < 0).any() or (alpha <= 0).any() or not (fb == fb[:, :1]).all() or \
            not (integrate or ((beta >= 0) & (beta < 1)).all()):
        return None
    cuba, ok = membrane_cuba(ex, beta, alpha, theta)
    ex.exact_params &= ok and bool((alpha == 1).all())
    name = ex.add(node.name, cuba, node.inputs)
    _reset_cycle(ex, node, name, name, fb[:, 0], True)
    ex.notes.append(f"{node.name}: {LIF_NOTE} (read one step late)")
    return name
