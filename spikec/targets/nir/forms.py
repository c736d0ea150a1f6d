"""The form a NIR export is written in: its ``dt``, its discretization scheme, and each neuron's parameters.

A graph read from a ``.nir`` file (``spikec.frontend.nir_file``) records the ``dt`` and scheme it was read at
on its ``lif``/``delay`` nodes (attrs ``nir_dt``, ``nir_scheme``; ``load_nir`` also in ``graph.meta["nir"]``), and
is written back at them. A graph traced from PyTorch is written at ``DT = 1e-4`` in the ``snntorch`` scheme.

``consumer`` (the target option ``nir_consumer``) picks the form a consumer's importer honours:

* ``"any"`` (default): the source's ``dt`` and scheme; an ``IF`` with ``dt*r = 1`` (what Norse's IF adds).
* ``"snntorch"``: ``dt = 1e-4`` (snnTorch's importer hard-codes it), scheme ``snntorch``; ``IF`` with ``r = 1``
  (snnTorch asserts it), ``CubaLIF`` with ``r dt/tau_mem = 1`` and ``w_in dt/tau_syn = 1``.
* ``"norse"``: the source's ``dt`` (``from_nir(graph, dt=dt)``), scheme ``norse`` (Norse's Euler step); ``LIF``
  with ``r = 1`` (Norse's LIF has no ``r``), ``IF`` with ``dt*r = 1`` (Norse's IF adds its input unscaled).

A traced graph with Sinabs's own neurons (``lif_sinabs``) and consumer ``"any"`` is written at ``dt = 1`` in the
consumer scheme ``sinabs`` (``schemes_sinabs``, ``sinabs_export``): for ``sinabs.from_nir`` only.

A traced graph with SpikingJelly neurons (``lif_sj``) is written at ``dt = 1`` in the ``norse`` scheme (consumer
``"any"`` or ``"norse"``): their charge ``V + (X - V)/tau`` is that scheme's Euler step (``sj_lif``), and with
``dt = 1`` Norse's float32 ``dt * (1/tau)`` is the decay exactly.

Per scheme the neuron ``U = beta H + alpha X + bias`` (``v_th`` = ``nextafter(theta, -inf)``, fired on ``>``):

* ``snntorch``: ``tau`` with ``1 - dt/tau == beta``; the state is in units of the input (``U / alpha``), the
  threshold and reset divided by the input gain ``g = r dt/tau`` (searched so the importer's float64 gives back
  the IR's values).
* ``norse``: ``tau`` with ``1 - dt*(1/tau) == beta`` (and ``dt*(1/tau) == alpha`` where one exists: a graph read
  in Norse's scheme gets its file's own ``tau``), ``r = 1``, ``v_leak = bias/(dt/tau)``: the state is ``U`` itself
  where ``alpha = dt/tau``, else ``c U`` with ``c = (dt/tau)/alpha`` (threshold, reset and ``v_leak`` scaled by
  ``c``: equal in exact arithmetic, ``bit_exact_params`` false). A CubaLIF keeps ``w_in`` and ``r`` (Norse
  honours both); an IF has ``dt*r = 1`` and the state ``U/alpha``.
"""
from dataclasses import dataclass

import nir
import numpy as np

from spikec.ir.errors import BadInput, UnsupportedOp
from spikec.targets.nir.reasons import LIF_SINABS, LIF_SJ

DT = 1e-4  # snnTorch's import_from_nir hard-codes it; the default for a graph not read from NIR
SCHEME = "snntorch"
CONSUMERS = ("any", "snntorch", "norse")
CONSUMER = "any"
SINABS_DT, SINABS = 1.0, "sinabs"   # Sinabs counts tau in steps; its consumer scheme (schemes_sinabs)
SJ_DT = 1.0  # SpikingJelly's tau counts steps: dt = 1 makes dt/tau its decay exactly, in float32 too (Norse)


@dataclass(frozen=True)
class Form:
    dt: float
    scheme: str        # the discretization the file is written for (its metadata "scheme")
    consumer: str      # "any" | "snntorch" | "norse"
    origin: str        # where dt and scheme came from


def source_time_base(graph) -> tuple[float, str] | None:
    """The (dt, scheme) a graph read from NIR was read at; None for a graph from elsewhere."""
    found = {(float(n.attrs["nir_dt"]), str(n.attrs["nir_scheme"])) for n in graph.nodes
             if "nir_dt" in n.attrs and "nir_scheme" in n.attrs}
    meta = graph.meta.get("nir") if hasattr(graph.meta, "get") else None
    if not found and meta is not None and "dt" in meta and "scheme" in meta:
        found = {(float(meta["dt"]), str(meta["scheme"]))}
    if len(found) > 1:
        raise UnsupportedOp(f"the graph was read from NIR at several time bases {sorted(found)}; one NIR file has "
                            "one dt", where="NIR export", remedy="read every NIR part at the same --dt and --nir-scheme")
    return found.pop() if found else None


def form_for(graph, dt: float | None = None, consumer: str = CONSUMER) -> Form:
    """The export form of ``graph`` for ``consumer``; an explicit ``dt`` overrides the time base."""
    if consumer not in CONSUMERS:
        raise BadInput(f"unknown NIR consumer {consumer!r}", where="NIR export",
                       remedy=f"use one of {', '.join(CONSUMERS)}")
    source = source_time_base(graph)
    src_dt, src_scheme = source if source else (DT, SCHEME)
    origin = (f"read from NIR at dt = {src_dt:g}, scheme {src_scheme!r}" if source
              else f"not read from NIR: the default dt = {DT:g}, scheme {SCHEME!r}")
    if consumer == "snntorch":
        form_dt, scheme = DT, "snntorch"
        origin += "; written for snnTorch (dt = 1e-4, scheme 'snntorch')"
    elif not source and consumer == "any" and any(n.op == LIF_SINABS for n in graph.nodes):
        form_dt, scheme = SINABS_DT, SINABS
        origin += ("; dt = 1, scheme 'sinabs' (Sinabs's MultiSpike neurons: the file is for sinabs.from_nir, which "
                   "reads NIR LIF/IF as them; schemes_sinabs)")
    elif not source and any(n.op == LIF_SJ for n in graph.nodes):   # consumer any or norse
        form_dt, scheme = SJ_DT, "norse"
        origin += ("; dt = 1 (SpikingJelly's tau counts steps), scheme 'norse': SpikingJelly's charge "
                   "V + (X - V)/tau is that scheme's Euler step")
    elif consumer == "norse":
        form_dt, scheme = src_dt, "norse"
        origin += "; written for Norse (scheme 'norse')"
    else:
        form_dt, scheme = src_dt, src_scheme
    if dt is not None:
        form_dt, origin = float(dt), origin + f"; dt = {float(dt):g} as the option nir_export_dt asks"
    if not form_dt > 0:
        raise UnsupportedOp(f"dt must be positive, got {form_dt}", where="NIR export")
    return Form(form_dt, scheme, consumer, origin)


# -- searches: parameters the readers' own float64 arithmetic maps back to the IR's values ------------------
def _ulps(x: np.ndarray, k: int) -> np.ndarray:
    direction = np.inf if k > 0 else -np.inf
    for _ in range(abs(k)):
        x = np.nextafter(x, direction)
    return x


def search(start: np.ndarray, ok, reach: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Per element, the float nearest ``start`` (within ``reach`` ulps) for which ``ok`` holds, and where found."""
    start = np.asarray(start, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        best, found = start.copy(), np.asarray(ok(start), dtype=bool).copy()
        for k in [s * i for i in range(1, reach + 1) for s in (1, -1)]:
            cand = _ulps(start, k)
            hit = ok(cand) & ~found
            best[hit], found = cand[hit], found | hit
    return best, found


def tau_for(beta: np.ndarray, dt: float) -> tuple[np.ndarray, bool]:
    """``tau`` with ``1 - dt/tau == beta`` in float64 (as snnTorch's importer computes it), where one exists."""
    with np.errstate(divide="ignore"):
        tau, found = search(dt / (1.0 - beta), lambda t: 1.0 - dt / t == beta)
    return tau, bool(found.all())


def threshold_for(target: np.ndarray, gain: np.ndarray) -> tuple[np.ndarray, bool]:
    """``v`` with ``v / gain == target`` in float64 (snnTorch: ``v_threshold / (r*dt/tau)``)."""
    v, found = search(target * gain, lambda v: v / gain == target)
    return v, bool(found.all())


def norse_leak(beta, alpha, dt: float) -> tuple[np.ndarray, np.ndarray, bool]:
    """Norse's Euler form of ``beta H + alpha X``: ``(tau, r, exact)`` with ``1 - dt*(1/tau) == beta`` and
    ``r = alpha / (dt*(1/tau))``; where ``dt*(1/tau) == alpha`` can hold too, that ``tau`` and ``r = 1``."""
    unit, at_unit = search(dt / alpha, lambda t: (dt * (1 / t) == alpha) & (1 - dt * (1 / t) == beta))
    tau, found = search(dt / (1.0 - beta), lambda t: 1 - dt * (1 / t) == beta)
    tau = np.where(at_unit, unit, tau)
    r = np.where(at_unit, 1.0, alpha / (dt * (1 / tau)))
    return tau, r, bool((at_unit | found).all())


# -- neurons -------------------------------------------------------------------------------------------------
def lif(form: Form, beta, alpha, bias, theta, v_reset) -> tuple[nir.NIRNode, bool]:
    """A hard-reset LIF (``0 <= beta < 1``) in ``form``; the flag: the readers give back beta and theta."""
    dt, below = form.dt, np.nextafter(theta, -np.inf)
    if form.scheme == "norse":  # Norse's LIF has no r: where r != 1 the state is scaled by c = (dt/tau)/alpha
        tau, r, ok = norse_leak(beta, alpha, dt)
        a = dt * (1 / tau)
        c = np.where(r == 1, 1.0, 1.0 / r)
        return nir.LIF(tau=tau, r=np.ones_like(r), v_leak=c * bias / a, v_threshold=c * below,
                       v_reset=c * v_reset), ok and bool((r == 1).all())
    tau, ok_tau = tau_for(beta, dt)
    r = alpha.copy()
    gain = (r * dt) / tau  # as snnTorch computes w_scale = r * dt / tau
    target = below if (alpha == 1).all() else np.nextafter(theta / alpha, -np.inf)
    v_th, ok_th = threshold_for(target, gain)
    return nir.LIF(tau=tau, r=r, v_leak=bias.copy(), v_threshold=v_th, v_reset=v_reset * (1.0 - beta)), \
        ok_tau and ok_th


def sj_lif(form: Form, k: float, theta: float, shape) -> tuple[nir.LIF, bool]:
    """SpikingJelly's hard-reset (``v_reset = 0``) charge ``H = V + (X - V) k`` (``k = 1/tau`` or PLIF's decay) as
    the norse scheme's Euler step ``v + dt*(1/tau)*((r I + v_leak) - v)`` with ``r = 1``, ``v_leak = 0`` and
    ``tau`` searched so that ``dt*(1/tau) == k`` in float64 (the flag: found). Bit for bit when ``X k`` is
    ``X / tau`` (``k`` from ``1/tau`` with ``tau`` a power of two, or PLIF's ``k`` itself)."""
    dt = form.dt
    tau, found = search(np.asarray(dt / k), lambda t: dt * (1 / t) == k)
    full = lambda v: np.full(shape, v, dtype=np.float64)
    return nir.LIF(tau=full(tau), r=full(1.0), v_leak=full(0.0), v_threshold=full(np.nextafter(theta, -np.inf)),
                   v_reset=full(0.0)), bool(found)


def if_node(form: Form, alpha, theta, v_reset) -> tuple[nir.IF, bool, str]:
    """A hard-reset IF (``beta = 1``, no bias) in ``form``: ``(node, exact params, note)``."""
    dt, below = form.dt, np.nextafter(theta, -np.inf)
    if form.scheme == "norse":  # v <- v + (dt*r) I with dt*r = 1, as Norse's IF adds its input: v = U/alpha
        r, found = search(np.full_like(alpha, 1 / dt), lambda r: dt * r == 1.0)
        exact = bool(found.all() and (alpha == 1).all())
        if exact:
            return nir.IF(r=r, v_threshold=below, v_reset=v_reset.copy()), True, "dt*r = 1"
        return nir.IF(r=r, v_threshold=np.nextafter(theta / alpha, -np.inf), v_reset=v_reset / alpha), False, \
            "dt*r = 1, the state scaled by 1/alpha"
    if form.consumer == "snntorch" and (alpha == 1).all() and (v_reset == 0).all():
        return _if_as_lif(dt, below)
    if form.consumer == "snntorch":
        r, note = np.ones_like(alpha), "r = 1 (snnTorch asserts it)"
    else:  # dt*r = 1: the IF Norse's importer runs (it adds its input unscaled); the state is U/alpha
        r, _ = search(np.full_like(alpha, 1 / dt), lambda r: r * dt == 1.0)
        note = "dt*r = 1"
    gain = r * dt  # snnTorch's scheme: u <- u + I, fire u > v_threshold/(r dt): u is U/alpha
    target = below if (alpha == 1).all() else np.nextafter(theta / alpha, -np.inf)
    v_th, ok_th = threshold_for(target, gain)
    v_rst, ok_rst = threshold_for(v_reset / alpha, gain)
    return nir.IF(r=r, v_threshold=v_th, v_reset=v_rst), ok_th and ok_rst, note


IF_AS_LIF = 2.0 ** 60  # tau = dt * 2**60: 1 - dt/tau rounds to 1.0 in float64


def _if_as_lif(dt: float, below: np.ndarray) -> tuple[nir.LIF, bool, str]:
    """An IF (input gain 1, reset to 0) for snnTorch, whose importer makes every NIR IF a ``Leaky(beta=0.9)``: a
    LIF with ``tau = dt 2**60`` and ``r = 2**60``, so that ``1 - dt/tau == 1.0`` and ``r dt/tau == 1.0`` in float64
    and snnTorch builds ``Leaky(beta=1.0)``, zero reset: an integrate-and-fire. (The leak, 2**-60 per step, is
    below float64's resolution of 1.)"""
    tau, r = dt * IF_AS_LIF, IF_AS_LIF
    exact = 1 - dt / tau == 1.0 and r * dt / tau == 1.0
    full = lambda v: np.full(below.shape, v, dtype=np.float64)
    return nir.LIF(tau=full(tau), r=full(r), v_leak=full(0.0), v_threshold=below.copy(), v_reset=full(0.0)), \
        bool(exact), "LIF with tau = dt*2**60, r = 2**60 (snnTorch imports it as Leaky(beta=1.0), an IF)"


def li(form: Form, beta, alpha, bias) -> tuple[nir.NIRNode, bool]:
    """A never-firing neuron read as its membrane ``U``: NIR ``LI`` (``I`` for ``beta = 1``)."""
    dt = form.dt
    if (beta == 1).all():
        r, found = search(alpha / dt, lambda r: dt * r == alpha)
        return nir.I(r=r), bool(found.all())
    if form.scheme == "norse":
        tau, r, ok = norse_leak(beta, alpha, dt)
        return nir.LI(tau=tau, r=r, v_leak=bias / (dt * (1 / tau))), ok
    tau, ok = tau_for(beta, dt)  # snnTorch scheme: u <- beta u + I + v_leak/r, output (r dt/tau) u, u = U/alpha
    r, found = search(alpha * tau / dt, lambda r: r * dt / tau == alpha)
    return nir.LI(tau=tau, r=r, v_leak=bias * r / alpha), ok and bool(found.all())


def cuba(form: Form, syn: dict, mem: dict, fire: bool) -> tuple[nir.NIRNode, bool]:
    """A synapse ``S = bs S + as X`` feeding ``U = bm U + am S + bias`` as NIR ``CubaLIF`` (``CubaLI`` when the
    membrane never fires). ``syn``/``mem``: per-neuron arrays beta, alpha (and bias, theta, v_reset for mem)."""
    dt = form.dt
    if form.scheme == "norse":  # i <- i + a_s (w_in I - i);  v <- v + a_m (r i + v_leak - v)
        tau_syn, w_in, ok_s = norse_leak(syn["beta"], syn["alpha"], dt)
        tau_mem, r, ok_m = norse_leak(mem["beta"], mem["alpha"], dt)
        v_leak = mem["bias"] / (dt * (1 / tau_mem))
        if not fire:
            return nir.CubaLI(tau_syn=tau_syn, tau_mem=tau_mem, r=r, v_leak=v_leak, w_in=w_in), ok_s and ok_m
        return nir.CubaLIF(tau_syn=tau_syn, tau_mem=tau_mem, r=r, v_leak=v_leak,
                           v_threshold=np.nextafter(mem["theta"], -np.inf), v_reset=mem["v_reset"].copy(),
                           w_in=w_in), ok_s and ok_m
    # snnTorch's scheme: s <- bs s + I, u <- bm u + s + v_leak/(r gs), fire u > v_th/(gm gs): u = U/(as am)
    tau_syn, ok_s = tau_for(syn["beta"], dt)
    tau_mem, ok_m = tau_for(mem["beta"], dt)
    # a CubaLIF: gs = gm = 1 (snnTorch asserts r = tau_mem/dt); a CubaLI outputs gm gs u = U: gs, gm = the alphas
    want_s, want_m = (1.0, 1.0) if fire else (syn["alpha"], mem["alpha"])
    w_in, _ = search(want_s * tau_syn / dt, lambda w: w * dt / tau_syn == want_s)
    r, _ = search(want_m * tau_mem / dt, lambda r: r * dt / tau_mem == want_m)
    gs, gm = w_in * dt / tau_syn, r * dt / tau_mem
    k = syn["alpha"] * mem["alpha"]
    v_leak = mem["bias"] / k * (r * gs)
    if not fire:
        return nir.CubaLI(tau_syn=tau_syn, tau_mem=tau_mem, r=r, v_leak=v_leak, w_in=w_in), ok_s and ok_m
    theta = mem["theta"]
    target = np.nextafter(theta, -np.inf) if (k == 1).all() else np.nextafter(theta / k, -np.inf)
    v_th, ok_th = threshold_for(target, gm * gs)
    v_rst, ok_rst = threshold_for(mem["v_reset"] / k, gm * gs)
    return nir.CubaLIF(tau_syn=tau_syn, tau_mem=tau_mem, r=r, v_leak=v_leak, v_threshold=v_th, v_reset=v_rst,
                       w_in=w_in), ok_s and ok_m and ok_th and ok_rst
