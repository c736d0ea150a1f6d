"""``--stepping``: which model convention a model follows, and the multi-step module and inputs it gives.

``multistep`` and ``step`` take the verification inputs as ``[T, B, ...]``. ``loop`` takes them exactly as the
model's ``forward`` does: ``[T, B, ...]`` when it reads ``x[step]``, a static ``[B, ...]`` when its loop
feeds the same input every step; its ``[T, B, ...]`` form repeats that input over the loop's T steps.
``auto`` tries each convention (trace, and for ``loop`` the capture) and takes the only one that fits; a model
without state fits ``multistep`` and ``step`` alike, and is taken as ``multistep``. The capture runs the model's
forward for real: when ``multistep`` or ``step`` already fits, ``loop`` is first captured on one sample of the
``[T, B, ...]`` inputs (``x[:, :1]``), and on all of them only if that fits (a multi-step model then costs a
forward of one sample, not of the batch, to be told apart from a loop). Before that capture, when another
convention fits, the model's forward is traced symbolically (no run): one that does not return a record stacked
over steps (``torch.stack(record)``, or its ``.sum(0)`` / ``.mean(0)``) is refused as a loop without running it
(the capture would refuse it for the same reason, after a forward).
"""
from dataclasses import dataclass

import numpy as np
import torch
import torch.fx
from torch import nn

from spikec.ir.errors import BadInput, SpikecError, UnsupportedOp
from spikec.frontend import trace
from spikec.frontend.loop import _stacked_outputs, bind, bind_repeated
from spikec.frontend.stepping import STEPPINGS, adapt, reset_state
from spikec.frontend.tracing import fx_trace, is_leaf
from spikec.ops import opdef


@dataclass(frozen=True)
class Convention:
    stepping: str          # multistep | step | loop
    model: torch.nn.Module  # the multi-step module spikec traces and runs
    x: np.ndarray          # the inputs [T, B, ...] it takes
    static: bool = False   # loop: the model takes one [B, ...] input, repeated each step


def loop_convention(model, raw: np.ndarray, as_given: bool, random: bool = False) -> Convention:
    """``raw`` as the model takes it (``as_given``: a user's file) or as ``[T, B, ...]`` (random or recorded:
    a static model takes its step 0, which a recording repeats and random inputs need not)."""
    tensor = torch.as_tensor(raw, dtype=_dtype(model))
    first = None
    try:
        looped, x = bind(model, tensor, is_leaf)
        if not looped.static:
            return Convention("loop", looped, x.double().numpy())
    except SpikecError as e:
        first = e
    example = tensor if as_given else tensor[0]
    if not as_given and not random and not bool((tensor == tensor[:1]).all()):
        if first is not None:   # it cannot take them as [T, B, ...], and they change over their first dim (no
            try:                # repeated step): the file is the static [B, ...] batch as the model takes it
                return _static(model, tensor, None)
            except SpikecError:
                raise first from None
        raise UnsupportedOp("the loop model reads no x[step], and its [T, B, ...] inputs change over T",
                            where="model forward (--stepping loop)",
                            remedy="give the static input as the model takes it, [B, ...]")
    return _static(model, example, None if as_given else first)


def _static(model, example, first) -> Convention:
    """A model taking one static ``[B, ...]`` input: its own loop, or its forward repeating ``x`` over T itself."""
    try:
        looped, x = bind(model, example, is_leaf)
    except SpikecError as e:
        repeated = bind_repeated(model, example, fx_trace) if example.ndim >= 2 else None  # forward repeats x itself
        if repeated is None:
            raise (first if first is not None else e)
        looped, x = repeated
    return Convention("loop", looped, x.double().numpy(), static=True)


def _dtype(model) -> torch.dtype:
    p = next(iter(model.parameters()), None)
    return p.dtype if p is not None and p.is_floating_point() else torch.float32


def _fits(model, stepping, x, shape, kind, ceiling, as_given=False, random=False) -> Convention:
    if stepping == "loop":
        conv = loop_convention(model, x, as_given, random)
        trace(conv.model, conv.x.shape[2:], input_kind=kind, ceiling=ceiling)
        return conv
    adapted = adapt(model, stepping)
    trace(adapted, shape, input_kind=kind, ceiling=ceiling)
    return Convention(stepping, adapted, x)


def choose(model, stepping: str, x: np.ndarray, kind: str, ceiling, as_given=False, random=False) -> Convention:
    """The convention ``stepping`` names (or, for ``auto``, the only one that fits) for inputs ``x``
    (``as_given``: a user's file, laid out as the model takes it; else ``[T, B, ...]``)."""
    shape = tuple(x.shape[2:])
    if stepping != "auto":
        if stepping not in STEPPINGS:
            raise BadInput(f"--stepping {stepping!r} is not a model convention",
                           remedy=f"use one of: auto, {', '.join(STEPPINGS)}")
        return _fits(model, stepping, x, shape, kind, ceiling, as_given, random) if stepping == "loop" else \
            Convention(stepping, adapt(model, stepping), x)
    fits, errors = {}, {}
    for s in STEPPINGS if x.ndim >= 3 else ("loop",):
        try:
            if s == "loop" and fits and (refused := _returns_no_record(model)) is not None:
                raise refused  # another convention fits: the loop's capture (a forward) would refuse it too
            if s == "loop" and fits and not as_given and x.ndim >= 3 and x.shape[1] > 1:
                _fits(model, s, x[:, :1], shape, kind, ceiling, as_given, random)  # raises if the loop does not fit
            fits[s] = _fits(model, s, x, shape, kind, ceiling, as_given, random)
        except SpikecError as e:
            errors[s] = e
        except Exception as e:  # a candidate convention the model's code cannot run in: it does not fit
            errors[s] = UnsupportedOp(f"{type(e).__name__}: {e}", where=f"model {type(model).__qualname__}")
    if len(fits) == 1:
        return next(iter(fits.values()))
    if {"multistep", "step"} <= set(fits) and not _stateful(fits["multistep"].model, shape, kind, ceiling):
        return fits["multistep"]  # no state: one step at a time and all steps at once are the same computation
    if not fits:
        if _draws_random(model, x):
            raise BadInput("forward draws random numbers (torch's generator moves when it runs), so no deployment "
                           "can be checked against it (a rate encoder inside forward, e.g. snntorch.spikegen.rate, or a "
                           "dropout in training mode)", where=f"model {type(model).__qualname__}",
                           remedy="encode outside the model and give the spikes as --inputs ([T, B, ...]: "
                                  "spikegen.rate(data, num_steps)), and call model.eval()")
        raise _none_fits(model, errors)
    raise BadInput(f"the model fits several conventions: {', '.join(fits)}", where=f"model {type(model).__qualname__}",
                   remedy=f"say which with --stepping {'|'.join(fits)}")


def _draws_random(model, x: np.ndarray) -> bool:
    """Whether ``model`` on ``x`` (as given) draws from torch's random generator (its state moves: a rate encoder or a
    training-mode dropout inside forward). False when it does not run on ``x`` at all."""
    import copy
    try:
        with torch.no_grad(), torch.random.fork_rng():
            torch.manual_seed(0)
            before = torch.get_rng_state()
            copy.deepcopy(model)(torch.as_tensor(x, dtype=_dtype(model)))
            return not torch.equal(before, torch.get_rng_state())
    except Exception:
        return False


def _none_fits(model, errors: dict) -> SpikecError:
    """The error of the first convention that failed for a reason of its own (not because the model is
    written for another convention), with its remedy, and what the other conventions said."""
    def about_stepping(e):  # the model is written for another convention
        return any(k in e.what for k in ("traced as", "(--stepping", "applied to a [T, B, ...] tensor",
                                         "not a record stacked", "reads no x[step]"))
    if "preallocated with torch.zeros" in getattr(errors.get("loop"), "what", ""):
        first = "loop"   # a loop model's own record, decoded in forward: more to the point than fx's failure to trace it
    else:
        first = next((s for s, e in errors.items() if not about_stepping(e)), next(iter(errors)))
    e = errors[first]
    others = "; ".join(f"{s}: {o.what}" for s, o in errors.items() if s != first)
    return type(e)(e.what, where=e.where, remedy=f"{e.remedy or 'fix what is named'} (--stepping auto tried every "
                   f"convention; this is what {first} reports; {others})")


class _Symbolic(torch.fx.Tracer):
    """fx's symbolic tracer with the loop capture's leaves (``loop.concrete_trace``), running nothing."""

    def is_leaf_module(self, m, qualname):
        return type(m) is not nn.Sequential and (is_leaf(m) or super().is_leaf_module(m, qualname))


def _returns_no_record(model) -> SpikecError | None:
    """The loop capture's refusal of a forward that returns no record stacked over steps, found by tracing the
    forward symbolically instead of running it; None when it cannot be told so (the capture then decides).

    A forward fx traces symbolically has no control flow on tensor values or shapes (fx refuses a proxy's truth
    value, length and iteration), so the capture, which runs that same Python code with concrete values, records
    the same calls and returns the same kind of node."""
    try:
        graph = _Symbolic().trace(model)
    except Exception:  # data-dependent control flow, a loop over x.shape[0], ...: only the capture can tell
        return None
    finally:
        reset_state(model)  # as the capture leaves it
    out = next((n for n in graph.nodes if n.op == "output"), None)
    try:
        _stacked_outputs(out.args[0] if out is not None else None)
    except SpikecError as e:
        return e
    return None


def _stateful(model, shape, kind, ceiling) -> bool:
    graph = trace(model, shape, input_kind=kind, ceiling=ceiling)
    return any(n.op != "input" and opdef(n.op).stateful for n in graph.nodes)
