"""Norse's recurrent LIF onto the ``lif_recurrent_norse`` op defined here: ``LIFRecurrentCell`` (stepping
``"step"``: ``z, state = cell(x, state)`` once per time step on ``[B, I]``) and ``LIFRecurrent`` (stepping
``"multistep"``: one call on ``[T, B, I]``). ``spikec.frontend.norse`` registers the converters.

Norse 1.1's step (``functional/lif.py`` ``lif_step``), in its order of operations, with ``a_mem = dt *
tau_mem_inv`` and ``a_syn = dt * tau_syn_inv`` rounded once in the parameters' precision as Norse rounds them
(``spikec.frontend.norse``), ``W_in = input_weights`` ``(N, I)``, ``W_rec = recurrent_weights`` ``(N, N)`` (its
diagonal zeroed by Norse at construction unless ``autapses=True``; spikec takes the matrix as it is)::

    i' = i + linear(x, W_in) + linear(z, W_rec)     left to right; z is the previous step's spikes
    v~ = v + a_mem * ((v_leak - v) + i')
    i  = i' + (-a_syn) * i'                          ((-dt) * tau_syn_inv is -(dt * tau_syn_inv) exactly)
    z  = [v~ - v_th > 0]                             (every heaviside ``method``; margin |v~ - v_th|)
    v  = (1 - z) * v~ + z * v_reset

from rest: ``z = 0``, ``v = v_leak``, ``i = 0`` (Norse's ``initial_state`` when the state is ``None``; it builds
``v`` with ``torch.full(..., dtype=float32)``, so ``v_leak`` must be a scalar and a float32 value, checked).

Op ``lif_recurrent_norse`` (input a step ``(I,)``, output ``(N,)``): params ``input_weights`` (N, I),
``recurrent_weights`` (N, N), ``dt_tau_mem_inv``, ``dt_tau_syn_inv``, ``v_leak``, ``threshold``, ``v_reset``
(() or (N,)); attr ``read`` "spikes" (default, binary) | "v" (post-reset) | "i" (decayed current), the leaves of
``LIFState(z, v, i)``. A multi-step module's final state is a single step no node holds: ``None`` leaves, unless
``record_states=True``.
"""
import torch
import torch.nn.functional as F

from spikec.ir.graph import TensorType
from spikec.frontend.exact_neurons import float_only, require_stepping
from spikec.frontend.norse_common import MEM, SYN, _check_method, _check_rest, _exact_type, _factor, _param, \
    _record_states
from spikec.frontend.registry import refuse
from spikec.ops import Param, define, register_kernel
from spikec.ops.common import channel, per_channel, sizes
from spikec.ops.registry import need

OP = "lif_recurrent_norse"
READS = ("spikes", "v", "i")
SCALARS = (MEM, SYN, "v_leak", "threshold", "v_reset")


# -- the converter ---------------------------------------------------------------------------
def lif_recurrent(ctx, m, name, x):
    """``LIFRecurrentCell`` (step) -> ``(z, LIFState(z, v, i))``; ``LIFRecurrent`` (multistep) -> ``(z, final
    state)``, whose leaves are ``None`` unless ``record_states``."""
    from norse.torch import LIFRecurrent, LIFRecurrentCell
    from norse.torch.functional.lif import LIFState, lif_step
    multistep = isinstance(m, LIFRecurrent)
    _exact_type(m, name, LIFRecurrent if multistep else LIFRecurrentCell)
    require_stepping(ctx, m, name, "multistep" if multistep else "step")
    _check_method(m.p, name, m)
    if m.activation is not lif_step:
        refuse(name, m, "its activation is not norse's lif_step", "build it with a heaviside method")
    _check_rest(m, name, True)  # the cell builds its initial v with torch.full(v_leak, float32) too
    shape, p = ctx.type(x).shape, m.p
    w_in, w_rec = m.input_weights.detach(), m.recurrent_weights.detach()
    if len(shape) != 1 or w_in.shape[1:] != shape:
        refuse(name, m, f"a step of shape {shape} does not match input_size {tuple(w_in.shape[1:])}; spikec's "
               "recurrent Norse neuron takes [B, input_size] per step", "flatten the input to [B, input_size] first")
    out = (int(w_in.shape[0]),)
    params = {"input_weights": w_in, "recurrent_weights": w_rec,
              MEM: _param(_factor(m.dt, p.tau_mem_inv), out, "dt * tau_mem_inv", name, m),
              SYN: _param(_factor(m.dt, p.tau_syn_inv), out, "dt * tau_syn_inv", name, m),
              "v_leak": _param(p.v_leak, out, "v_leak", name, m),
              "threshold": _param(p.v_th, out, "v_th", name, m),
              "v_reset": _param(p.v_reset, out, "v_reset", name, m)}
    z = ctx.emit(name, OP, [x], {}, params, scope=name)
    if multistep and not _record_states(m):
        return z, LIFState(z=None, v=None, i=None)
    v = ctx.emit(f"{name}.v", OP, [x], {"read": "v"}, params, scope=name)
    i = ctx.emit(f"{name}.i", OP, [x], {"read": "i"}, params, scope=name)
    return z, LIFState(z=z, v=v, i=i)


# -- the op ----------------------------------------------------------------------------------
def _infer(node, ins):
    (t,) = ins
    w, r = node.params.get("input_weights"), node.params.get("recurrent_weights")
    need(len(t.shape) == 1, node, f"a step must have shape (I,), got {t.shape}")
    need(w is not None and w.ndim == 2 and w.shape[1] == t.shape[0], node,
         f"input_weights must have shape (N, {t.shape[0]})")
    n = w.shape[0]
    need(r is not None and r.shape == (n, n), node, f"recurrent_weights must have shape ({n}, {n})")
    out = TensorType((n,))
    per_channel(node, out, SCALARS)
    read = node.attrs.get("read", "spikes")
    need(read in READS, node, f"read must be one of {READS}, got {read!r}")
    return TensorType((n,), "binary") if read == "spikes" else out


def _count(node) -> int:
    """Deployed parameters, counted on the spike node only (a state read-out shares them)."""
    return sizes(node, "input_weights", "recurrent_weights", *SCALARS) if node.attrs.get("read", "spikes") == \
        "spikes" else 0


def lif_recurrent_norse_kernel(node, p, x):
    """``lif_step`` over ``x [T, B, I]`` from rest, in Norse's order of operations (module docstring)."""
    float_only(node, x)
    w_in, w_rec = p["input_weights"], p["recurrent_weights"]
    a_mem, a_syn, v_leak, v_th, v_reset = (channel(p[k], 2) for k in SCALARS)
    read = node.attrs.get("read", "spikes")
    state = (x.shape[1], w_in.shape[0])
    z, v, i = torch.zeros(state, dtype=x.dtype), v_leak.expand(state).to(x.dtype).clone(), torch.zeros(state,
                                                                                                      dtype=x.dtype)
    out = torch.empty((x.shape[0], *state), dtype=x.dtype)
    margins = torch.empty_like(out)
    for t, x_t in enumerate(x):
        i_jump = i + F.linear(x_t, w_in) + F.linear(z, w_rec)
        v_decayed = v + a_mem * ((v_leak - v) + i_jump)
        i = i_jump + -a_syn * i_jump
        z = (v_decayed - v_th > 0).to(x.dtype)
        margins[t] = (v_decayed - v_th).abs()
        v = (1 - z) * v_decayed + z * v_reset
        out[t] = z if read == "spikes" else v if read == "v" else i
    return (out, margins) if read == "spikes" else out


_SCHEMA = (Param("input_weights", "(N, I)", "Norse's input_weights: F.linear(x, W_in)"),
           Param("recurrent_weights", "(N, N)", "Norse's recurrent_weights: F.linear(z_prev, W_rec)"),
           *(Param(k, "() or (C,)", d) for k, d in (
               (MEM, "dt * tau_mem_inv, rounded as Norse rounds it"), (SYN, "dt * tau_syn_inv, rounded as Norse does"),
               ("v_leak", "rest potential (the state starts there)"), ("threshold", "v_th: fires on v~ - v_th > 0"),
               ("v_reset", "the membrane after a spike"))))
define(OP, 1, _infer, count=_count, stateful=True, neuron=True, state=("v", "i", "z"), params=_SCHEMA,
       doc="Norse's recurrent LIF (LIFRecurrentCell / LIFRecurrent), exact; attr read spikes | v | i")
register_kernel(OP, lif_recurrent_norse_kernel)
