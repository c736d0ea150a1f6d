"""What the Norse converters share (``spikec.frontend.norse``, ``spikec.frontend.norse_recurrent``): Norse's
parameters as the IR's () or (C,) arrays, ``dt * tau_inv`` as Norse rounds it, and the refusals every Norse
neuron has (a non-heaviside ``method``, a subclass, a rest state the IR cannot start from)."""
import torch

from spikec.frontend.registry import refuse

# Norse's ``threshold`` methods; each one's forward is ``heaviside`` (strict ``> 0``), only its gradient differs.
HEAVISIDE_METHODS = ("heaviside", "super", "triangle", "tanh", "circ", "heavi_erfc")
SYN, MEM = "dt_tau_syn_inv", "dt_tau_mem_inv"


# -- parameters ------------------------------------------------------------------------------
def _param(value, shape, what, name, module) -> torch.Tensor:
    """A Norse parameter (a float, or a tensor torch broadcasts against a step ``[B, *shape]``) as () or (C,)."""
    # a Python float is a double (torch.as_tensor would round it to float32)
    t = value.detach() if isinstance(value, torch.Tensor) else torch.tensor(float(value), dtype=torch.float64)
    if t.dim() == 0:
        return t.double()  # exact: Norse's own rounding (of dt * tau, say) is already done
    try:
        full = torch.broadcast_to(t, (1, *shape)).reshape(shape[0], -1) if shape else None
    except RuntimeError:
        full = None
    if full is None or not bool((full == full[:, :1]).all()):
        refuse(name, module, f"{what} of shape {tuple(t.shape)} is not a scalar or one value per channel for a step "
               f"of shape {tuple(shape)}", "use a scalar, or one value per channel broadcast along the other axes "
               "(shape (C,) for [B, C], (C, 1, 1) for [B, C, H, W])")
    return full[:, 0].double()


def _factor(dt, inverse_tau):
    """``dt * tau_inv`` as Norse computes it: a Python float, or a tensor in the parameter's dtype."""
    return dt * inverse_tau


def _check_method(p, name, m):
    if p.method not in HEAVISIDE_METHODS:
        refuse(name, m, f"p.method={p.method!r} has no heaviside forward (Norse's threshold() knows "
               f"{', '.join(HEAVISIDE_METHODS)}; 'adjoint' and others raise there)",
               "use one of those methods, e.g. LIFParameters(method='super')")


def _check_rest(m, name, multistep: bool):
    """Norse's multi-step modules start ``v`` at ``torch.full(..., v_leak, dtype=float32)``."""
    if not multistep:
        return
    v_leak = torch.as_tensor(m.p.v_leak)
    if v_leak.numel() != 1:
        refuse(name, m, f"{type(m).__name__} builds its initial state with torch.full(v_leak), which takes only a "
               f"scalar; v_leak has shape {tuple(v_leak.shape)}", "use a scalar v_leak, or the Cell in step stepping")
    if float(v_leak.reshape(()).float()) != float(v_leak.reshape(())):
        refuse(name, m, f"v_leak={float(v_leak.reshape(()))!r} is rounded to float32 in {type(m).__name__}'s "
               "initial state but not in its leak, a mixed first step the IR does not repeat",
               "use a v_leak that is a float32 value (e.g. a float32 tensor)")


def _exact_type(m, name, cls):
    if type(m) is not cls:
        refuse(name, m, f"{type(m).__qualname__} subclasses norse {cls.__name__}, which may change its step",
               f"use norse's {cls.__name__} itself, or register a converter for {type(m).__qualname__}")


def _record_states(m) -> bool:
    return bool(getattr(m, "record_states", False))
