"""The ``sinabs`` discretization: a NIR file's neurons as ``sinabs.from_nir`` (Sinabs 3.1.3, ``sinabs/nir.py``)
builds and runs them, for files written for Sinabs (their metadata ``scheme`` is ``"sinabs"``).

``from_nir`` makes every NIR ``LIF`` a ``LIFSqueeze(tau_mem=tau, spike_threshold=v_threshold, norm_input=False)``
and every ``IF`` an ``IAFSqueeze(spike_threshold=v_threshold, min_v_mem=-v_threshold)``, both with Sinabs's
defaults ``MultiSpike`` and ``MembraneSubtract``; ``LI`` an ``ExpLeakSqueeze(tau_mem=tau, norm_input=False)``. Per
step (``sinabs/layers/functional/lif.py``), ``tau`` counted in steps of ``dt``, from ``v = 0``::

    LIF   v <- exp(-dt/tau) v + I;  s = [v > 0] trunc(v / v_threshold);  v <- v - s v_threshold   (output s)
    IF    v <- v + I;  s and the subtraction as LIF;  v <- max(v, -v_threshold)                 (output s)
    LI    v <- exp(-dt/tau) v + I                                                              (output v)

``s`` is a spike *count* (several per step), and ``s v_threshold`` a float32 product (Sinabs's spikes are
float32): ``v_threshold`` is a float32 value in such a file. ``r`` is ignored by Sinabs and ``v_leak`` refused:
both must be 1 and 0 here. NIR's own LIF/IF (one binary spike, reset to ``v_reset``) are other neurons: this is a
consumer-specific reading, named in the file's metadata, not NIR's ODE. Sinabs reads no other neuron.
"""
import torch

from spikec.ir.errors import UnsupportedOp

NODES = ("LIF", "IF", "LI")


def _check(ev, *need_zero) -> None:
    if "r" in ev.p and bool((ev.param("r") != 1).any()):
        raise UnsupportedOp("r != 1: Sinabs ignores r, so the sinabs scheme defines the neuron for r = 1 only",
                            where=f"NIR node {ev.name!r} ({ev.kind})")
    for k in need_zero:
        if bool((ev.param(k) != 0).any()):
            raise UnsupportedOp(f"{k} != 0: Sinabs's from_nir raises on it", where=f"NIR node {ev.name!r} ({ev.kind})")


def _fire(v, theta):
    """MultiSpike, and MembraneSubtract's float32 ``s * threshold``."""
    s = (v > 0) * torch.div(v, theta, rounding_mode="trunc")
    return s, v - (s.float() * theta.float()).to(v.dtype)


def step(ev, x):
    """One step of NIR node evaluator ``ev`` (``interpreter._Node``) in the sinabs scheme."""
    if ev.kind not in NODES:
        raise UnsupportedOp(f"{ev.kind} has no meaning in the sinabs scheme: sinabs.from_nir reads only "
                            f"{', '.join(NODES)} as neurons", where=f"NIR node {ev.name!r} ({ev.kind})")
    v = torch.zeros_like(x) if ev.state is None else ev.state
    if ev.kind == "IF":
        _check(ev)
        theta = ev.param("v_threshold")
        s, v = _fire(v + x, theta)
        ev.state = torch.relu(v + theta) - theta    # min_v_mem = -v_threshold: relu(v - min) + min
        return s
    _check(ev, "v_leak")
    alpha = torch.exp(-ev.dt / ev.param("tau"))
    v = alpha * v + x
    if ev.kind == "LI":
        ev.state = v
        return v.clone()
    s, ev.state = _fire(v, ev.param("v_threshold"))
    return s
