"""Norse feed-forward neurons onto the ``lif_norse`` and ``li_norse`` ops defined here; registered only when
``norse.torch`` imports.

Converted: ``LIFCell``, ``LIFBoxCell``, ``LICell``, ``LILinearCell`` (a linear into LICell's op), ``LIBoxCell``
(stepping ``"step"``: one call per time step on ``[B, ...]``), ``LIF`` and ``LI`` (stepping ``"multistep"``: one
call on ``[T, B, ...]``), and ``SequentialState``
(either stepping, its children stepping as it does; a bare one is the model through ``stepping.StateDropped`` in
multistep). ``LIFRecurrentCell`` / ``LIFRecurrent``: ``spikec.frontend.norse_recurrent``; AdEx and LSNN (and
their recurrent forms): ``spikec.frontend.norse_adaptive``. Norse 1.1 has no
multi-step ``LIFBox``. The mapping is exact: a float64 run of the module and of
its IR agree bit for bit, spikes and state alike. The built-in ``lif`` op is not used: it folds the leak into
``beta H + alpha X + bias``, which rounds differently from Norse's ``v + dt/tau (v_leak - v + i)``.

Norse's step, one Euler step of ``dt`` (``functional/lif.py`` ``lif_feed_forward_step``, ``lif_box.py``,
``leaky_integrator.py``, ``leaky_integrator_box.py``), in its order of operations, with
``a_mem = dt * tau_mem_inv`` and ``a_syn = dt * tau_syn_inv`` rounded once, in the parameters' own precision
(float32 for Norse's default tensors), exactly as Norse rounds them::

    LIF   i' = i + x                                 (the input jumps into the current before any decay)
          v~ = v + a_mem * ((v_leak - v) + i')       (the membrane sees the jumped current)
          i  = i' + (-a_syn) * i'                    (then the current decays)
    LIFBox      v~ = v + a_mem * ((x + v_leak) - v)  (no current: the input drives the membrane directly)
    LI    i' = i + x;  v = v + a_mem * ((v_leak - v) + i');  i = i' + (-a_syn) * i'     (no threshold)
    LIBox       v = v + a_mem * ((v_leak - v) + x)
    spike z = [v~ - v_th > 0]                        (strict: every surrogate ``method`` of Norse's ``threshold``
                                                      fires on heaviside(v~ - v_th), which is 0 for <= 0)
    reset v = (1 - z) v~ + z v_reset                 (``reset_value``; LIF always, LIFBox by default)
          v = (1 - z) v~ + z (v~ - v_th)             (``reset_subtract``, LIFBox only)

The state starts at rest, ``v = v_leak, i = 0`` (Norse's ``initial_state`` when the state argument is ``None``).
A spike is emitted on the step whose ``v~`` crosses, and the reset acts on that same step.

Ops (params () or (C,), C = ``shape[0]`` of a step; a Norse parameter broadcast over ``[B, C, ...]`` is accepted
when it is constant along every other axis):
  lif_norse  dt_tau_mem_inv, v_leak, threshold, v_reset; dt_tau_syn_inv iff attr ``current``.
             attrs ``current`` (bool: LIF True, LIFBox False), ``reset`` ("value" | "subtract"),
             ``read`` ("spikes", default: binary | "v": the post-reset membrane | "i": the decayed current; real)
  li_norse   dt_tau_mem_inv, v_leak; dt_tau_syn_inv iff attr ``current`` (LI True, LIBox False).
             attr ``read`` ("v", default | "i"); real output
``read`` picks which sequence of the same run a node outputs: the spikes and the state leaves Norse returns
(``LIFFeedForwardState(v, i)``, ``LIFBoxFeedForwardState(v)``, ``LIState(v, i)``, ``LIBoxState(v)``). (It is not the
neurons' ``output`` attribute: that one's "membrane" is the *pre*-reset potential.) A multi-step module's final
state is a single step, which no ``[T, B, ...]`` node holds: its leaves are ``None``; with ``record_states=True``
the state is the whole sequence and its leaves are nodes.
"""
import torch

from spikec.ir.graph import TensorType
from spikec.frontend import norse_adaptive, norse_recurrent
from spikec.frontend.exact_neurons import float_only, require_stepping
from spikec.frontend.norse_common import (HEAVISIDE_METHODS, MEM, SYN, _check_method, _check_rest,  # noqa: F401
                                          _exact_type, _factor, _param, _record_states)
from spikec.frontend.registry import on_framework, refuse, register_converter
from spikec.ops import Decay, define, register_kernel
from spikec.ops.common import channel, per_channel
from spikec.ops.registry import f64, need


# -- converters ------------------------------------------------------------------------------
def _lif_nodes(ctx, m, name, x, current: bool, reset: str):
    """Emit the spike, ``v`` and (with a current) ``i`` nodes of one run; returns their names."""
    shape, p = ctx.type(x).shape, m.p
    params = {MEM: _param(_factor(m.dt, p.tau_mem_inv), shape, "dt * tau_mem_inv", name, m),
              "v_leak": _param(p.v_leak, shape, "v_leak", name, m),
              "threshold": _param(p.v_th, shape, "v_th", name, m),
              "v_reset": _param(p.v_reset, shape, "v_reset", name, m)}
    if current:
        params[SYN] = _param(_factor(m.dt, p.tau_syn_inv), shape, "dt * tau_syn_inv", name, m)
    attrs = {"current": current, "reset": reset}
    z = ctx.emit(name, "lif_norse", [x], attrs, params, scope=name)
    v = ctx.emit(f"{name}.v", "lif_norse", [x], {**attrs, "read": "v"}, params, scope=name)
    i = ctx.emit(f"{name}.i", "lif_norse", [x], {**attrs, "read": "i"}, params, scope=name) if current else None
    return z, v, i


def _li_nodes(ctx, m, name, x, current: bool):
    shape, p = ctx.type(x).shape, m.p
    params = {MEM: _param(_factor(m.dt, p.tau_mem_inv), shape, "dt * tau_mem_inv", name, m),
              "v_leak": _param(p.v_leak, shape, "v_leak", name, m)}
    if current:
        params[SYN] = _param(_factor(m.dt, p.tau_syn_inv), shape, "dt * tau_syn_inv", name, m)
    v = ctx.emit(name, "li_norse", [x], {"current": current}, params, scope=name)
    i = ctx.emit(f"{name}.i", "li_norse", [x], {"current": current, "read": "i"}, params, scope=name) \
        if current else None
    return v, i


def lif(ctx, m, name, x):
    """``LIFCell`` (step) -> ``(z, LIFFeedForwardState(v, i))``; ``LIF`` (multistep) -> ``(z, final state)``."""
    from norse.torch import LIF, LIFCell
    from norse.torch.functional.lif import LIFFeedForwardState, lif_feed_forward_step
    multistep = isinstance(m, LIF)
    _exact_type(m, name, LIF if multistep else LIFCell)
    require_stepping(ctx, m, name, "multistep" if multistep else "step")
    _check_method(m.p, name, m)
    if m.activation is not lif_feed_forward_step:
        refuse(name, m, "its activation is not norse's lif_feed_forward_step", "build it with a heaviside method")
    _check_rest(m, name, multistep)
    z, v, i = _lif_nodes(ctx, m, name, x, current=True, reset="value")
    if multistep and not _record_states(m):
        return z, LIFFeedForwardState(v=None, i=None)
    return z, LIFFeedForwardState(v=v, i=i)


def lif_box(ctx, m, name, x):
    """``LIFBoxCell`` (step) -> ``(z, LIFBoxFeedForwardState(v))``."""
    from norse.torch import LIFBoxCell
    from norse.torch.functional.lif_box import LIFBoxFeedForwardState, lif_box_feed_forward_step
    from norse.torch.functional.reset import reset_subtract, reset_value
    _exact_type(m, name, LIFBoxCell)
    require_stepping(ctx, m, name, "step")
    _check_method(m.p, name, m)
    if m.activation is not lif_box_feed_forward_step:
        refuse(name, m, "its activation is not norse's lif_box_feed_forward_step", "use norse's LIFBoxCell")
    resets = {reset_value: "value", reset_subtract: "subtract"}
    if m.p.reset_method not in resets:
        refuse(name, m, f"reset_method {getattr(m.p.reset_method, '__name__', m.p.reset_method)!r} is not one of "
               "norse's reset_value, reset_subtract", "use norse.torch.functional.reset.reset_value or reset_subtract")
    z, v, _ = _lif_nodes(ctx, m, name, x, current=False, reset=resets[m.p.reset_method])
    return z, LIFBoxFeedForwardState(v=v)


def li(ctx, m, name, x):
    """``LICell`` (step) -> ``(v, LIState(v, i))``; ``LI`` (multistep) -> ``(v, final state)``."""
    from norse.torch import LI, LICell
    from norse.torch.functional.leaky_integrator import LIState, li_feed_forward_step
    multistep = isinstance(m, LI)
    _exact_type(m, name, LI if multistep else LICell)
    require_stepping(ctx, m, name, "multistep" if multistep else "step")
    if m.activation is not li_feed_forward_step:
        refuse(name, m, "its activation is not norse's li_feed_forward_step", f"use norse's {type(m).__name__}")
    _check_rest(m, name, multistep)
    v, i = _li_nodes(ctx, m, name, x, current=True)
    if multistep and not _record_states(m):
        return v, LIState(v=None, i=None)
    return v, LIState(v=v, i=i)


def li_linear(ctx, m, name, x):
    """``LILinearCell`` (step; Norse's ConvNet read-out) -> ``(v, LIState(v, i))``: its ``li_step`` is LICell's
    ``li_feed_forward_step`` on ``F.linear(x, input_weights)`` (no bias) from the same initial state (``v = v_leak``,
    ``i = 0``), so it is a ``linear`` into ``li_norse``."""
    from norse.torch.functional.leaky_integrator import LIState
    from norse.torch.module.leaky_integrator import LILinearCell
    _exact_type(m, name, LILinearCell)
    require_stepping(ctx, m, name, "step")
    if len(ctx.type(x).shape) != 1:
        refuse(name, m, f"F.linear reads a vector per step; here it is shaped {ctx.type(x).shape}",
               "flatten each step first")
    y = ctx.emit(f"{name}.linear", "linear", [x], {}, {"weight": m.input_weights, "bias": None}, scope=name)
    v, i = _li_nodes(ctx, m, name, y, current=True)
    return v, LIState(v=v, i=i)


def li_box(ctx, m, name, x):
    """``LIBoxCell`` (step) -> ``(v, LIBoxState(v))``."""
    from norse.torch import LIBoxCell
    from norse.torch.functional.leaky_integrator_box import LIBoxState, li_box_feed_forward_step
    _exact_type(m, name, LIBoxCell)
    require_stepping(ctx, m, name, "step")
    if m.activation is not li_box_feed_forward_step:
        refuse(name, m, "its activation is not norse's li_box_feed_forward_step", "use norse's LIBoxCell")
    v, _ = _li_nodes(ctx, m, name, x, current=False)
    return v, LIBoxState(v=v)


def sequential_state(ctx, m, name, x):
    """``SequentialState``: its children in order, each stateful child's first output passed on; returns ``(out,
    [state per child])`` (``None`` for stateless children) or, with ``return_hidden``, ``([out per child],
    states)``. Either stepping: called once per step (its children Norse cells) or once on ``[T, B, ...]`` (its
    children multi-step modules, ``LIF``, ``LI``, ``LIFRecurrent``, and torch layers); each child's converter
    checks that it steps as the trace does."""
    states, hidden = [None] * len(m), []
    for index, (child_name, child) in enumerate(m.named_children()):
        out = ctx.convert_module(child, f"{name}.{child_name}", x)
        if m.stateful_layers[index]:
            if not (isinstance(out, tuple) and len(out) == 2):
                refuse(f"{name}.{child_name}", child, "a stateful child must return (output, state)",
                       "use a Norse cell, or a module whose converter returns (output, state)")
            out, states[index] = out
        x = out
        hidden.append(x)
    return (hidden if m.return_hidden else x), states


def lift(ctx, m, name, x):
    """``Lift(module)``: ``module`` applied at every step of ``[T, B, ...]`` and the outputs stacked, which is what
    a per-step torch module inside ``spikec.nn.TimeDistributed`` means. A lifted Norse cell carries its state
    through the steps: that is the cell's multi-step module, which spikec converts instead."""
    if m.is_stateful:
        refuse(name, m, f"Lift of the stateful module {type(m.lifted_module).__qualname__}",
               "use the cell's multi-step module (e.g. norse LIF() for Lift(LIFCell())), which spikec converts")
    outer, ctx.per_step = ctx.per_step, True
    try:
        return ctx.convert_module(m.lifted_module, f"{name}.lifted_module", x)
    finally:
        ctx.per_step = outer


def recurrent(ctx, m, name, x):
    refuse(name, m, f"no exact converter for the recurrent Norse neuron {type(m).__qualname__} (spikec converts "
           "LIFRecurrentCell, LIFRecurrent, LIFAdExRecurrentCell, LIFAdExRecurrent, LSNNRecurrentCell, LSNNRecurrent)", f"use one of those, or the feed-forward cell (e.g. LIFCell) after an "
           f"nn.Linear, or register a converter for {type(m).__qualname__}")


def other_neuron(ctx, m, name, x):
    refuse(name, m, f"no exact converter for the Norse neuron {type(m).__qualname__} (spikec converts LIFCell, "
           "LIF, LIFBoxCell, LICell, LI, LIBoxCell, LIFRecurrentCell, LIFRecurrent, LIFAdExCell, LIFAdEx, LSNNCell, "
           "LSNN and their recurrent forms)",
           f"use one of those, or register a converter for {type(m).__qualname__}")


# -- the ops ---------------------------------------------------------------------------------
def _infer(spiking: bool):
    reads = ("spikes", "v", "i") if spiking else ("v", "i")

    def infer(node, ins):
        (t,) = ins
        per_channel(node, t, ("dt_tau_mem_inv", "dt_tau_syn_inv", "v_leak", "threshold", "v_reset"))
        current, read = node.attrs.get("current"), node.attrs.get("read", reads[0])
        need(current in (True, False), node, f"attr current must be True or False, got {current!r}")
        need((SYN in node.params) == current, node, f"parameter {SYN} is present exactly when current is True")
        need(read in reads, node, f"read must be one of {', '.join(map(repr, reads))}, got {read!r}")
        need(read != "i" or current, node, "read 'i' needs a current (current=True)")
        if spiking:
            reset = node.attrs.get("reset")
            need(reset in ("value", "subtract"), node, f"reset must be 'value' or 'subtract', got {reset!r}")
            need(reset == "value" or not current, node, "Norse's LIF resets to a value; 'subtract' is LIFBox's")
        return TensorType(t.shape, "binary") if read == "spikes" else TensorType(t.shape)
    return infer


def norse_kernel(node, p, x):
    """Norse's feed-forward step over ``x [T, B, ...]`` from rest, in its order of operations (module docstring)."""
    float_only(node, x)
    nd, spiking, current = x.dim() - 1, node.op == "lif_norse", node.attrs["current"]
    a_mem, v_leak = channel(p[MEM], nd), channel(p["v_leak"], nd)
    a_syn = channel(p[SYN], nd) if current else None
    v_th, v_reset = (channel(p[k], nd) if spiking else None for k in ("threshold", "v_reset"))
    read = node.attrs.get("read", "spikes" if spiking else "v")
    v, i = v_leak.expand_as(x[0]).clone(), torch.zeros_like(x[0])
    out, margins = torch.empty_like(x), torch.empty_like(x)
    for t, x_t in enumerate(x):
        if current:
            i_jump = i + x_t
            v_new = v + a_mem * ((v_leak - v) + i_jump)
            i = i_jump + -a_syn * i_jump
        elif spiking:
            v_new = v + a_mem * (x_t + v_leak - v)
        else:
            v_new = v + a_mem * ((v_leak - v) + x_t)
        if spiking:
            z = (v_new - v_th > 0).to(x.dtype)
            after = v_reset if node.attrs["reset"] == "value" else v_new - v_th
            margins[t] = (v_new - v_th).abs()
            v_new = (1 - z) * v_new + z * after
            out[t] = z if read == "spikes" else v_new if read == "v" else i
        else:
            out[t] = v_new if read == "v" else i
        v = v_new
    return (out, margins) if read == "spikes" else out


def norse_decays(n) -> list:
    """Euler steps ``v + a_mem ((v_leak - v) + i)`` and ``i + (-a_syn) i``: the membrane keeps ``1 - dt*tau_mem_inv``
    of itself and the current ``1 - dt*tau_syn_inv``."""
    return [(f"1 - {name}", 1 - f64(n, name)) for name in (MEM, SYN) if name in n.params]


define("lif_norse", 1, _infer(True), (MEM, "v_leak", "threshold", "v_reset"), (SYN,), stateful=True, neuron=True,
       decay=Decay(norse_decays), state=("v", "i"), threshold_margin=True)
define("li_norse", 1, _infer(False), (MEM, "v_leak"), (SYN,), stateful=True, decay=Decay(norse_decays),
       state=("v", "i"))
register_kernel("lif_norse", norse_kernel)
register_kernel("li_norse", norse_kernel)


# -- registration, only where the package imports -----------------------------------------
@on_framework("norse")  # imported only for a model whose code imported it
def _register():
    try:
        import norse.torch as _norse
        from norse.torch.module.snn import SNN, SNNCell, SNNRecurrent, SNNRecurrentCell
    except ImportError:
        return
    for _cls, _fn in [(SNNCell, other_neuron), (SNN, other_neuron), (SNNRecurrentCell, recurrent),
                      (SNNRecurrent, recurrent), (_norse.LIFCell, lif), (_norse.LIF, lif),
                      (_norse.LIFBoxCell, lif_box), (_norse.LICell, li), (_norse.LI, li),
                      (_norse.LILinearCell, li_linear),
                      (_norse.LIBoxCell, li_box), (_norse.SequentialState, sequential_state), (_norse.Lift, lift),
                      (_norse.LIFRecurrentCell, norse_recurrent.lif_recurrent),
                      (_norse.LIFRecurrent, norse_recurrent.lif_recurrent),
                      *((getattr(_norse, c), norse_adaptive.adaptive) for c in (
                          "LIFAdExCell", "LIFAdEx", "LIFAdExRecurrentCell", "LIFAdExRecurrent", "LSNNCell", "LSNN",
                          "LSNNRecurrentCell", "LSNNRecurrent"))]:
        register_converter(_cls, _fn)
