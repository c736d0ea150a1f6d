"""Sinabs's own neurons (``lif_sinabs``: ``IAF`` / ``LIF`` / ``ExpLeak`` with the default ``MultiSpike`` and
``MembraneSubtract``) in a NIR file written for Sinabs: the consumer scheme ``sinabs`` (``schemes_sinabs``).

NIR's LIF/IF emit one binary spike and reset to ``v_reset``; no composition of NIR primitives counts spikes. But
``sinabs.from_nir`` reads NIR ``LIF`` as ``LIFSqueeze(tau_mem=tau, spike_threshold=v_threshold, norm_input=False)``
and ``IF`` as ``IAFSqueeze(min_v_mem=-v_threshold)``, both MultiSpike with a subtract reset: Sinabs's default
neurons. A graph with ``lif_sinabs`` (not read from NIR, consumer ``any``) is therefore written at ``dt = 1`` (Sinabs
counts ``tau`` in steps) in that scheme, labelled in the file's metadata (``scheme: sinabs``), and run by Sinabs:

* ``IAF`` (no ``min_v_mem``) -> ``LIF`` with ``tau = 2**60``: ``exp(-1/tau)`` is 1.0 in float32 and float64, so
  ``v <- 1.0 v + I`` is the IAF's step exactly; ``IAF(min_v_mem=-θ)`` -> ``IF``;
* ``LIF(tau_mem)`` (no ``tau_syn``, no ``min_v_mem``) -> ``LIF`` with the float32 ``tau`` whose float64
  ``exp(-1/tau)`` is the IR's decay (Sinabs's float32 ``exp`` then gives the user's float32 decay);
  ``norm_input=True`` (LIF's default) -> a diagonal ``Affine`` (a 1x1 conv for maps) of ``1 - exp(-1/tau)`` as the
  user's float32 layer computes it, before it: Sinabs's ``(1 - alpha) i`` bit for bit in float32, the float64 IR's
  gain to within a float32 ulp (so ``bit_exact_params`` is false; the checker compares every count);
* ``ExpLeak`` -> ``LI`` (the same gain for ``norm_input``).

``v_threshold`` is stored as float32 when the threshold is one (Sinabs keeps ``spike_threshold`` as the file gives
it: a float32 array keeps its state float32, as the user's layer). Refused by name: ``MaxSpike(n)`` and
``SingleSpike`` (``from_nir`` builds MultiSpike; the nearest variant, MultiSpike, is measured), ``MembraneReset``, a
``subtract_value``, ``tau_syn``, another ``min_v_mem``, another ``dt``, and any other neuron in the same file (its
NIR node would be read as a Sinabs neuron).
"""
import nir
import numpy as np
import torch

from spikec.targets.nir.export import LOWERINGS, _refuse
from spikec.targets.nir.reasons import LIF_SINABS

SCHEME = "sinabs"
DT = 1.0
IAF_TAU = 2.0 ** 60   # exp(-1/tau) rounds to 1.0 in float32 and float64: an integrator
NOTE = ("Sinabs {cls} (MultiSpike, MembraneSubtract) as NIR {kind} in the consumer scheme 'sinabs': sinabs.from_nir "
        "reads it as {sinabs}")
REMEDY = ("compile with --target onnx, which lowers lif_sinabs exactly; for NIR use Sinabs's defaults (MultiSpike, "
          "MembraneSubtract, no tau_syn, no min_v_mem or an IAF's min_v_mem = -spike_threshold), or SingleSpike without "
          "tau_syn / min_v_mem (spikec's own lif)")
WHY = "sinabs.from_nir builds every NIR LIF/IF as a MultiSpike neuron with a subtract reset (LIFSqueeze / IAFSqueeze)"


def float32_tau(alpha: float) -> float | None:
    """A float32 ``tau`` whose float64 ``exp(-1.0 / tau)`` (torch, as the IR and the interpreter compute it) is
    ``alpha``; None if no float32 within 16 ulps gives it (e.g. a trained alpha)."""
    if alpha == 1.0:
        return IAF_TAU
    if not 0.0 < alpha < 1.0:
        return None
    start = np.float32(-1.0 / np.log(alpha))
    for k in sorted(range(-16, 17), key=abs):
        c = start
        for _ in range(abs(k)):
            c = np.nextafter(c, np.float32(np.inf if k > 0 else -np.inf))
        if float(torch.exp(-1.0 / torch.tensor(float(c), dtype=torch.float64))) == alpha:
            return float(c)
    return None


def _gain32(tau: float) -> float:
    """``1 - exp(-1/tau)`` as a float32 Sinabs layer computes its ``norm_input`` gain."""
    alpha = torch.exp(-1.0 / torch.tensor(tau, dtype=torch.float32))
    return float(1 - alpha)


def _why(ex, node, p: dict) -> list[str]:
    a = node.attrs
    kind = "IAF" if p["alpha_mem"] == 1.0 else "LIF"
    return [w for w, bad in (
        (f"written in scheme {ex.form.scheme!r} (nir_consumer {ex.form.consumer!r}), not Sinabs's 'sinabs'",
         ex.form.scheme != SCHEME),
        (f"dt = {ex.form.dt:g} (Sinabs counts tau in steps: dt = 1)", ex.form.dt != DT),
        (f"MaxSpike({a.get('max_spikes')})", a["spike"] == "max"),
        ("SingleSpike (with tau_syn, min_v_mem or a float64 threshold)", a["spike"] == "single"),
        ("MembraneReset", a["reset"] == "reset"),
        ("a subtract_value", "subtract" in p and p["subtract"] != p.get("threshold")),
        ("tau_syn (from_nir builds no synaptic current)", "alpha_syn" in p),
        (f"min_v_mem = {p.get('min_v_mem')} (from_nir: none for a LIF, -spike_threshold for an IAF)",
         "min_v_mem" in p and not (kind == "IAF" and p["min_v_mem"] == -p.get("threshold", np.nan))),
        ("no float32 tau_mem gives its decay exp(-1/tau_mem) (a trained alpha?)", float32_tau(p["alpha_mem"]) is None),
    ) if bad]


def lif_sinabs(ex, node) -> None:
    p = {k: float(v) for k, v in node.params.items()}
    a, shape = node.attrs, node.type.shape
    why = _why(ex, node, p)
    if why:
        _refuse(node, f"{'; '.join(why)}: {WHY}, and NIR's own LIF/IF emit one spike and reset to v_reset", REMEDY)
    tau = float32_tau(p["alpha_mem"])
    full = lambda v, dtype=np.float64: np.full(shape, v, dtype=dtype)  # noqa: E731
    inputs = node.inputs
    if a["norm_input"]:
        inputs = (f"{node.name}.norm_src",)
        ex.sources[inputs[0]] = [ex.channel_affine(node, f"{node.name}.norm_input", node.inputs, _gain32(tau), 0.0,
                                                   shape)]
        ex.exact_params = False   # the float32 gain: Sinabs's own, the float64 IR's to within a float32 ulp
    if a["spike"] == "none":
        state, cls, kind, sinabs = nir.LI(tau=full(tau), r=full(1.0), v_leak=full(0.0)), "ExpLeak", "LI", \
            "ExpLeakSqueeze(norm_input=False)"
    else:
        theta = p["threshold"]
        th = full(theta, np.float32 if float(np.float32(theta)) == theta else np.float64)
        if "min_v_mem" in p:
            state, cls, kind, sinabs = nir.IF(r=full(1.0), v_threshold=th, v_reset=full(0.0)), "IAF", "IF", \
                "IAFSqueeze(min_v_mem=-v_threshold)"
        else:
            state = nir.LIF(tau=full(tau), r=full(1.0), v_leak=full(0.0), v_threshold=th, v_reset=full(0.0))
            cls, kind = ("IAF", "LIF (tau = 2**60: exp(-1/tau) = 1.0)") if tau == IAF_TAU else ("LIF", "LIF")
            sinabs = "LIFSqueeze(norm_input=False)"
    name = ex.add(node.name, state, inputs)
    ex.sources.pop(f"{node.name}.norm_src", None)
    ex.single(node, name)
    ex.notes.append(f"{node.name}: " + NOTE.format(cls=cls, kind=kind, sinabs=sinabs)
                    + ("; norm_input as a float32 1 - exp(-1/tau) gain before it" if a["norm_input"] else ""))


LOWERINGS[LIF_SINABS] = lif_sinabs
