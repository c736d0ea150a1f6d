"""Norse's adaptive neurons onto the ops ``lif_adex_norse`` and ``lsnn_norse`` defined here: ``LIFAdExCell`` /
``LIFAdExRecurrentCell`` and ``LSNNCell`` / ``LSNNRecurrentCell`` (stepping ``"step"``, ``cell(x, state)``), and
``LIFAdEx`` / ``LIFAdExRecurrent`` and ``LSNN`` / ``LSNNRecurrent`` (stepping ``"multistep"``).
``spikec.frontend.norse`` registers the converters.

Norse 1.1's steps (``functional/lif_adex.py``, ``functional/lsnn.py``), in their order of operations, with ``a_mem
= dt * tau_mem_inv``, ``a_syn = dt * tau_syn_inv``, ``a_ada = dt * tau_ada_inv`` (AdEx), ``a_adapt = dt *
tau_adapt_inv`` (LSNN) each rounded once in the parameters' precision as Norse rounds them. ``in(x)`` is ``x``
(feed-forward) or ``linear(x, W_in) + linear(z, W_rec)`` with the previous step's spikes ``z`` (recurrent;
``input_weights`` (N, I), ``recurrent_weights`` (N, N), taken as the module holds them)::

    AdEx (lif_adex_norse)   i' = i + in(x)                                   (left to right)
                            e  = delta_T * exp((v - v_th) / delta_T)
                            v~ = v + a_mem * ((((v_leak - v) + e) + i') - a)
                            i  = i' + (-a_syn) * i'
                            a~ = a + a_ada * (adaptation_current * (v - v_leak) - a)
                            z  = [v~ - v_th > 0]                             margin |v~ - v_th|
                            v  = (1 - z) * v~ + z * v_reset;   a = a~ + z * adaptation_spike

    LSNN (lsnn_norse)       v~ = v + a_mem * ((v_leak - v) + i)              (the current of the previous step)
                            i~ = i + (-a_syn) * i
                            b~ = b + a_adapt * (v_th - b)                    (the adaptive threshold)
                            z  = [v~ - b~ > 0]                               margin |v~ - b~|
                            v  = (1 - z) * v~ + z * v_reset;   b = b~ + z * beta
                            i  = i~ + in(x)                                  (the input enters after the spike)

From rest: ``z = 0``, ``v = v_leak``, ``i = 0``, ``a = 0``, ``b = v_th``. Every module but ``LIFAdExCell`` builds
``v`` with ``torch.full(v_leak)`` in the input's dtype (``v_leak`` must be a scalar). ``LIFAdExCell`` starts from
``v = p.v_leak`` itself, a tensor in the parameters' precision: its first ``e`` is computed there, and the
converter passes it as the parameter ``dv_exp_rest`` (computed with Norse's own tensors), which the kernel uses
at step 0. (LSNN's cells start ``b`` at ``p.v_th`` likewise, but ``v_th - b`` is 0 in any precision.)

Ops (a step ``(I,)`` -> ``(N,)`` with the weights, else the step's shape; scalars () or (C,)):
  lif_adex_norse  dt_tau_mem_inv, dt_tau_syn_inv, dt_tau_ada_inv, delta_T, v_leak, threshold, v_reset,
                  adaptation_current, adaptation_spike; dv_exp_rest (optional); input_weights and
                  recurrent_weights (optional, together); attr read "spikes" | "v" | "i" | "a"
  lsnn_norse      dt_tau_mem_inv, dt_tau_syn_inv, dt_tau_adapt_inv, v_leak, threshold, v_reset, beta; the weights
                  (optional); attr read "spikes" | "v" | "i" | "b"
"""
import torch
import torch.nn.functional as F

from spikec.ir.graph import TensorType
from spikec.frontend.exact_neurons import float_only, require_stepping
from spikec.frontend.norse_common import MEM, SYN, _check_method, _exact_type, _factor, _param, _record_states
from spikec.frontend.registry import refuse
from spikec.ops import Param, define, register_kernel
from spikec.ops.common import channel, per_channel, sizes
from spikec.ops.registry import need

ADA, ADAPT = "dt_tau_ada_inv", "dt_tau_adapt_inv"
WEIGHTS = ("input_weights", "recurrent_weights")
SCALARS = {"lif_adex_norse": (MEM, SYN, ADA, "delta_T", "v_leak", "threshold", "v_reset", "adaptation_current",
                              "adaptation_spike"),
           "lsnn_norse": (MEM, SYN, ADAPT, "v_leak", "threshold", "v_reset", "beta")}
READS = {"lif_adex_norse": ("spikes", "v", "i", "a"), "lsnn_norse": ("spikes", "v", "i", "b")}


# -- the converters --------------------------------------------------------------------------
def _family(m):
    """``(op, exact class, multistep, recurrent, Norse step function, state class)`` of a Norse adaptive module."""
    import norse.torch as nt
    from norse.torch.functional import lif_adex as adex, lsnn
    table = {nt.LIFAdExCell: ("lif_adex_norse", False, False, adex.lif_adex_feed_forward_step,
                              adex.LIFAdExFeedForwardState),
             nt.LIFAdEx: ("lif_adex_norse", True, False, adex.lif_adex_feed_forward_step, adex.LIFAdExFeedForwardState),
             nt.LIFAdExRecurrentCell: ("lif_adex_norse", False, True, adex.lif_adex_step, adex.LIFAdExState),
             nt.LIFAdExRecurrent: ("lif_adex_norse", True, True, adex.lif_adex_step, adex.LIFAdExState),
             nt.LSNNCell: ("lsnn_norse", False, False, lsnn.lsnn_feed_forward_step, lsnn.LSNNFeedForwardState),
             nt.LSNN: ("lsnn_norse", True, False, lsnn.lsnn_feed_forward_step, lsnn.LSNNFeedForwardState),
             nt.LSNNRecurrentCell: ("lsnn_norse", False, True, lsnn.lsnn_step, lsnn.LSNNState),
             nt.LSNNRecurrent: ("lsnn_norse", True, True, lsnn.lsnn_step, lsnn.LSNNState)}
    cls = next(c for c in type(m).__mro__ if c in table)
    return (cls, *table[cls])


def _params(m, op, out, name, cell_adex) -> dict:
    p = m.p
    get = lambda value, what: _param(value, out, what, name, m)  # noqa: E731
    params = {MEM: get(_factor(m.dt, p.tau_mem_inv), "dt * tau_mem_inv"),
              SYN: get(_factor(m.dt, p.tau_syn_inv), "dt * tau_syn_inv"),
              "v_leak": get(p.v_leak, "v_leak"), "threshold": get(p.v_th, "v_th"), "v_reset": get(p.v_reset, "v_reset")}
    if op == "lsnn_norse":
        return {**params, ADAPT: get(_factor(m.dt, p.tau_adapt_inv), "dt * tau_adapt_inv"), "beta": get(p.beta, "beta")}
    params.update({ADA: get(_factor(m.dt, p.tau_ada_inv), "dt * tau_ada_inv"), "delta_T": get(p.delta_T, "delta_T"),
                   "adaptation_current": get(p.adaptation_current, "adaptation_current"),
                   "adaptation_spike": get(p.adaptation_spike, "adaptation_spike")})
    if cell_adex:  # the first step's exponential, in the precision of v = p.v_leak (Norse's initial state)
        v = torch.as_tensor(p.v_leak).detach()
        params["dv_exp_rest"] = get(p.delta_T * torch.exp((v - p.v_th) / p.delta_T), "the first step's exponential")
    return params


def adaptive(ctx, m, name, x):
    """A Norse AdEx or LSNN module -> ``(z, state)``, the state's leaves nodes (``None`` for a multi-step module's
    final state unless ``record_states``; its ``z`` is the spike node)."""
    cls, op, multistep, recurrent, step, state_cls = _family(m)
    _exact_type(m, name, cls)
    require_stepping(ctx, m, name, "multistep" if multistep else "step")
    _check_method(m.p, name, m)
    if m.activation is not step:
        refuse(name, m, f"its activation is not norse's {step.__name__} (adjoint=True, or a replaced activation)",
               f"build the {cls.__name__} with adjoint=False and a heaviside method")
    cell_adex = cls.__name__ == "LIFAdExCell"
    full = (() if cell_adex else ("v_leak",)) + (("v_th",) if op == "lsnn_norse" and multistep else ())
    for key in full:  # Norse itself raises on any other
        if torch.as_tensor(getattr(m.p, key)).numel() != 1:
            refuse(name, m, f"{cls.__name__} builds its initial state with torch.full({key}), which takes only a "
                   "scalar", f"use a scalar {key}")
    shape = ctx.type(x).shape
    if recurrent:
        w_in = m.input_weights.detach()
        if len(shape) != 1 or w_in.shape[1:] != shape:
            refuse(name, m, f"a step of shape {shape} does not match input_size {tuple(w_in.shape[1:])}",
                   "flatten the input to [B, input_size] first")
        shape = (int(w_in.shape[0]),)
    params = _params(m, op, shape, name, cell_adex)
    if recurrent:
        params.update(input_weights=m.input_weights.detach(), recurrent_weights=m.recurrent_weights.detach())
    z = ctx.emit(name, op, [x], {}, params, scope=name)
    leaves = [f for f in state_cls._fields if f != "z"]
    if multistep and not _record_states(m):
        return z, state_cls(**{f: None for f in state_cls._fields})
    nodes = {f: ctx.emit(f"{name}.{f}", op, [x], {"read": f}, params, scope=name) for f in leaves}
    return z, state_cls(**({"z": z} if recurrent else {}), **nodes)


# -- the ops ---------------------------------------------------------------------------------
def _infer(node, ins):
    (t,) = ins
    p, op = node.params, node.op
    out = t
    if "input_weights" in p or "recurrent_weights" in p:
        w, r = p.get("input_weights"), p.get("recurrent_weights")
        need(len(t.shape) == 1, node, f"with weights a step must have shape (I,), got {t.shape}")
        need(w is not None and w.ndim == 2 and w.shape[1] == t.shape[0], node,
             f"input_weights must have shape (N, {t.shape[0]})")
        need(r is not None and r.shape == (w.shape[0],) * 2, node, f"recurrent_weights must have shape "
             f"({w.shape[0]}, {w.shape[0]})")
        out = TensorType((w.shape[0],))
    per_channel(node, out, SCALARS[op] + ("dv_exp_rest",))
    read = node.attrs.get("read", "spikes")
    need(read in READS[op], node, f"read must be one of {READS[op]}, got {read!r}")
    return TensorType(out.shape, "binary") if read == "spikes" else TensorType(out.shape)


def _count(node) -> int:
    """Deployed parameters, counted on the spike node only (a state read-out shares them)."""
    return sizes(node, *WEIGHTS, *SCALARS[node.op]) if node.attrs.get("read", "spikes") == "spikes" else 0


def _setup(node, p, x):
    """``add_input(i, x_t, z)`` (``i + x_t``, or ``i + linear(x_t, W_in) + linear(z, W_rec)`` left to right), the
    parameters broadcast against a step, the zero state and the outputs."""
    float_only(node, x)
    w = p.get("input_weights")
    state = (x.shape[1], w.shape[0]) if w is not None else tuple(x.shape[1:])
    nd = len(state)
    c = {k: channel(p[k], nd) for k in SCALARS[node.op] + ("dv_exp_rest",) if k in p}
    drive = (lambda i, x_t, z: i + F.linear(x_t, w) + F.linear(z, p["recurrent_weights"])) if w is not None else \
        (lambda i, x_t, z: i + x_t)
    zeros = torch.zeros(state, dtype=x.dtype)
    out = torch.empty((x.shape[0], *state), dtype=x.dtype)
    return c, drive, zeros, out, torch.empty_like(out)


def _result(node, out, margins):
    return (out, margins) if node.attrs.get("read", "spikes") == "spikes" else out


def lif_adex_norse_kernel(node, p, x):
    """``lif_adex_feed_forward_step`` / ``lif_adex_step`` over ``x [T, B, ...]`` from rest (module docstring)."""
    c, drive, zeros, out, margins = _setup(node, p, x)
    read = node.attrs.get("read", "spikes")
    z, v, i, a = zeros, (c["v_leak"] + zeros), zeros, zeros
    for t, x_t in enumerate(x):
        i_jump = drive(i, x_t, z)
        dv_leak = c["v_leak"] - v
        dv_exp = c["dv_exp_rest"] if t == 0 and "dv_exp_rest" in c else \
            c["delta_T"] * torch.exp((v - c["threshold"]) / c["delta_T"])
        v_decayed = v + c[MEM] * (dv_leak + dv_exp + i_jump - a)
        i = i_jump + -c[SYN] * i_jump
        a_decayed = a + c[ADA] * (c["adaptation_current"] * (v - c["v_leak"]) - a)
        z = (v_decayed - c["threshold"] > 0).to(x.dtype)
        margins[t] = (v_decayed - c["threshold"]).abs()
        v = (1 - z) * v_decayed + z * c["v_reset"]
        a = a_decayed + z * c["adaptation_spike"]
        out[t] = {"spikes": z, "v": v, "i": i, "a": a}[read]
    return _result(node, out, margins)


def lsnn_norse_kernel(node, p, x):
    """``lsnn_feed_forward_step`` / ``lsnn_step`` over ``x [T, B, ...]`` from rest (module docstring)."""
    c, drive, zeros, out, margins = _setup(node, p, x)
    read = node.attrs.get("read", "spikes")
    z, v, i, b = zeros, (c["v_leak"] + zeros), zeros, (c["threshold"] + zeros)
    for t, x_t in enumerate(x):
        v_decayed = v + c[MEM] * ((c["v_leak"] - v) + i)
        i_decayed = i + -c[SYN] * i
        b_decayed = b + c[ADAPT] * (c["threshold"] - b)
        z_new = (v_decayed - b_decayed > 0).to(x.dtype)
        margins[t] = (v_decayed - b_decayed).abs()
        v = (1 - z_new) * v_decayed + z_new * c["v_reset"]
        i = drive(i_decayed, x_t, z)
        b = b_decayed + z_new * c["beta"]
        z = z_new
        out[t] = {"spikes": z, "v": v, "i": i, "b": b}[read]
    return _result(node, out, margins)


def _schema(op):
    docs = {MEM: "dt * tau_mem_inv", SYN: "dt * tau_syn_inv", ADA: "dt * tau_ada_inv", ADAPT: "dt * tau_adapt_inv",
            "delta_T": "the exponential's sharpness", "v_leak": "rest potential (the state starts there)",
            "threshold": "v_th" + (" (AdEx fires on v~ - v_th > 0)" if op == "lif_adex_norse" else
                                   ": the adaptive threshold's rest value b = v_th"),
            "v_reset": "the membrane after a spike", "adaptation_current": "AdEx's subthreshold adaptation",
            "adaptation_spike": "AdEx's jump of a per spike", "beta": "LSNN's jump of b per spike"}
    scalars = tuple(Param(k, "() or (C,)", docs[k] + (", rounded as Norse rounds it" if k.startswith("dt_") else ""))
                    for k in SCALARS[op])
    extra = (Param("dv_exp_rest", "() or (C,)", "the first step's delta_T exp((v_leak - v_th) / delta_T) in the "
                   "parameters' precision (LIFAdExCell)", required=False),) if op == "lif_adex_norse" else ()
    weights = (Param("input_weights", "(N, I)", "recurrent variants: F.linear(x, W_in)", required=False),
               Param("recurrent_weights", "(N, N)", "recurrent variants: F.linear(z_prev, W_rec)", required=False))
    return scalars + extra + weights


define("lif_adex_norse", 1, _infer, count=_count, stateful=True, neuron=True, state=("v", "i", "a", "e", "z"),
       params=_schema("lif_adex_norse"),
       doc="Norse's adaptive exponential LIF (LIFAdExCell, LIFAdEx, and recurrent), exact; attr read spikes|v|i|a")
define("lsnn_norse", 1, _infer, count=_count, stateful=True, neuron=True, state=("v", "i", "b", "z"),
       params=_schema("lsnn_norse"),
       doc="Norse's LSNN, an adaptive threshold (LSNNCell, LSNN, and recurrent), exact; attr read spikes|v|i|b")
register_kernel("lif_adex_norse", lif_adex_norse_kernel)
register_kernel("lsnn_norse", lsnn_norse_kernel)
