"""The capture: one fx call with no converter run by ``make_fx`` (core ATen decompositions) on example tensors,
and its ATen graph lowered node by node through ``LOWERINGS``."""
import operator
from collections import namedtuple
from dataclasses import replace

import torch
import torch.fx
from torch._decomp import core_aten_decompositions
from torch.fx.experimental.proxy_tensor import make_fx

from spikec.ir.errors import SpikecError, UnsupportedOp
from spikec.frontend.aten.table import FOLDS, LOWERINGS
from spikec.frontend.aten.values import (Call, Lowering, Unavailable, Value, call_of, describe_module, remedy_for,
                                         where)
from spikec.frontend.registry import Merged, ReadLast, Unmerged
from spikec.frontend.torch_functions import B_DIM, T_DIM, TB_DIM, LeadDim, leading

DECOMPOSITIONS = core_aten_decompositions()
SIZES = (3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43)  # example T and B: the first two no shape uses


# -- capture -----------------------------------------------------------------------------------------------
class _Leaf:
    """An env value standing for one tensor argument of the captured call."""

    def __init__(self, value):
        self.value = value


def capture(ctx, fx_node, env, fn, name, scope, dtype=torch.float64):
    """Convert one fx call node with no converter: ``fn(*args, **kwargs)`` captured to ATen and lowered."""
    args = torch.fx.node.map_arg(fx_node.args, lambda a: _Leaf(env[a.name]))
    kwargs = torch.fx.node.map_arg(fx_node.kwargs, lambda a: _Leaf(env[a.name]))
    return capture_call(ctx, call_of(fx_node, fn), fn, args, kwargs, name, scope, dtype)


def capture_module(ctx, module, name, *xs):
    """A torch module with no converter called by a converter (a child of TimeDistributed or a container)."""
    dtype = next((t.dtype for t in module.parameters() if t.is_floating_point()), torch.float64)
    call = Call("call_module", name, name, None, describe_module(name, module))
    return capture_call(ctx, call, module, tuple(_Leaf(x) for x in xs), {}, name, name, dtype)


def capture_call(ctx, call, fn, args, kwargs, name, scope, dtype):
    """``fn`` on ``args`` / ``kwargs`` (IR values wrapped in ``_Leaf``) run by make_fx and lowered into ``ctx``."""
    sizes = _lead_sizes(ctx, _ints_in((args, kwargs), ctx, fn))
    # the examples take the dtype of the call's own tensors (a module's parameters, a buffer read in forward)
    consts = [t for t in _flat((args, kwargs)) if isinstance(t, _Leaf) and isinstance(t.value, torch.Tensor)]
    dtype = next((t.value.dtype for t in consts if t.value.is_floating_point()), dtype)
    inputs, examples, merged_in = [], [], _has_merged((args, kwargs))
    args, kwargs = (_example(ctx, call, v, sizes, dtype, inputs, examples) for v in (args, kwargs))

    def run(*tensors):
        return fn(*_fill(args, tensors), **_fill(kwargs, tensors))
    try:
        gm = _traced(call, run, (args, kwargs), examples)
    except SpikecError:
        raise
    except Exception as e:
        lead = ", ".join(f"{d!r}={sizes[d]}" for d in (T_DIM, B_DIM)) if inputs else ""
        raise UnsupportedOp(f"{call.what} could not be captured to ATen ({type(e).__name__}: "
                            f"{str(e).splitlines()[0] if str(e) else ''})" +
                            (f" on example tensors with {lead} standing for the time and batch sizes" if lead else ""),
                            where=where(call), remedy="check the shapes it is called on, " + remedy_for(call)) from None
    lw = Lowering(ctx, name, scope, sizes, call)
    out = _result(lw, lower(lw, gm, inputs), merged_in)
    if not isinstance(out, tuple):
        return out
    with torch.no_grad():
        kind = type(run(*examples))
    fields = getattr(kind, "__match_args__", None)  # torch.return_types (values, indices): read by field
    return namedtuple(kind.__name__, fields)(*out) if fields else out


def _has_merged(v) -> bool:
    if isinstance(v, _Leaf):
        v = v.value
    if isinstance(v, (tuple, list)):
        return any(_has_merged(x) for x in v)
    if isinstance(v, dict):
        return any(_has_merged(x) for x in v.values())
    return isinstance(v, Merged)


def _example(ctx, call, v, sizes, dtype, inputs, examples, leaf=False):
    """An env value -> what the captured function receives: IR values (the names inside a ``_Leaf``) become
    example tensors (appended to ``examples``, their ``Value`` to ``inputs``); Python values (an einsum equation,
    a padding mode) stay."""
    if isinstance(v, _Leaf):
        return _example(ctx, call, v.value, sizes, dtype, inputs, examples, True)
    if isinstance(v, str) and leaf:
        lead = leading(ctx, v)
        inputs.append(Value(str(v), lead))
        kind = torch.bool if str(v) in masks(ctx) else dtype
        examples.append(torch.zeros(*(sizes[d] for d in lead), *ctx.type(v).shape, dtype=kind))
        return _Slot(len(examples) - 1)
    if isinstance(v, LeadDim):  # its example size could land in a per-step dim, which the graph would bake in
        raise UnsupportedOp(f"{call.what} takes the runtime size {v!r} (read from x.shape), which spikec cannot "
                            "follow through its ATen form", where=where(call),
                            remedy="pass only per-step sizes; reshape with x.reshape(x.shape[0], x.shape[1], ...) "
                                   "or x.unflatten(0, (T, B))")
    if isinstance(v, (tuple, list)) and not hasattr(v, "_fields"):
        return type(v)(_example(ctx, call, x, sizes, dtype, inputs, examples, leaf) for x in v)
    if isinstance(v, dict):
        return {k: _example(ctx, call, x, sizes, dtype, inputs, examples, leaf) for k, x in v.items()}
    if v is None or isinstance(v, (int, float, bool, str, torch.dtype, torch.device, slice, type(Ellipsis),
                                   torch.Tensor)):
        return v  # a tensor here is a parameter or buffer read in forward(): a constant of the call
    raise UnsupportedOp(f"{call.what} takes {type(v).__name__} {v!r}, which spikec cannot pass to torch",
                        where=where(call), remedy="pass tensors, numbers and shapes")


_CACHE: dict = {}  # (target, arguments, example shapes) -> captured graph: a block repeated N times is traced once


def _traced(call, run, arguments, examples):
    """``make_fx`` of ``run`` on ``examples``; a function or method call (no module weights, no tensor constants)
    is cached by its target, its Python arguments and the examples' shapes and dtypes."""
    key = _key(arguments) if call.op != "call_module" else None
    key = key and (call.op, call.target, key, tuple((tuple(e.shape), e.dtype) for e in examples))
    if key in _CACHE:
        return _CACHE[key]
    with torch.no_grad():
        gm = make_fx(run, decomposition_table=DECOMPOSITIONS)(*examples)
    if key:
        if len(_CACHE) >= 512:
            _CACHE.clear()
        _CACHE[key] = gm
    return gm


def _key(v):
    """A hashable stand-in for a call's arguments; None when one cannot be keyed (a tensor constant, an object)."""
    if isinstance(v, _Slot):
        return ("slot", v.index)
    if isinstance(v, (tuple, list)):
        items = tuple(_key(x) for x in v)
        return None if any(x is None for x in items) else (type(v).__name__, items)
    if isinstance(v, dict):
        return _key(tuple(sorted(v.items(), key=lambda kv: kv[0])))
    if isinstance(v, slice):
        return ("slice", v.start, v.stop, v.step)
    if v is None or isinstance(v, (bool, int, float, str, torch.dtype, torch.device, type(Ellipsis))):
        return (type(v).__name__, v)
    return None


class _Slot:
    def __init__(self, index):
        self.index = index


def _fill(v, tensors):
    if isinstance(v, _Slot):
        return tensors[v.index]
    if isinstance(v, (tuple, list)):
        return type(v)(_fill(x, tensors) for x in v)
    if isinstance(v, dict):
        return {k: _fill(x, tensors) for k, x in v.items()}
    return v


def _ints_in(value, ctx, fn) -> set:
    """Every size a lead dim must not be mistaken for: the arguments' numbers, per-step dims, parameter dims."""
    found = set()

    def walk(v):
        if isinstance(v, _Leaf):
            v = v.value
            if isinstance(v, str):
                found.update(ctx.type(v).shape)
                return
        if isinstance(v, bool):
            return
        if isinstance(v, int):
            found.add(abs(v))
        elif isinstance(v, (tuple, list)):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
    walk(value)
    if isinstance(fn, torch.nn.Module):
        for t in list(fn.parameters()) + list(fn.buffers()):
            found.update(t.shape)
    return found


def _lead_sizes(ctx, taken: set) -> dict:
    if ctx.concrete is not None:  # a loop model's capture: the user's shapes hold the real T and B
        t, b = ctx.concrete
    else:
        free = [s for s in SIZES if s not in taken]
        t, b = free[0], next(s for s in free[1:] if s * free[0] not in taken)
    return {T_DIM: t, B_DIM: b, TB_DIM: t * b}


def _result(lw, out, merged_in):
    """The converter's return value: IR names, marked ``Merged`` / ``Unmerged`` as the lead dims they have."""
    if isinstance(out, (tuple, list)):
        return tuple(_result(lw, o, merged_in) for o in out)
    if isinstance(out, Unavailable):
        return None
    if isinstance(out, torch.Tensor) and not isinstance(out, torch.fx.Proxy):
        return out  # a constant made from parameters (W.t(), pos[:n]): an argument of the calls that read it
    if not isinstance(out, Value):
        lw.refuse("returns a value that does not depend on the model's input", "compute constants outside forward")
    if out.folded:
        lw.refuse("returns a view whose first dim merges the leading [T, B] dims with per-step dims",
                  "keep [T, B] leading (merge only T and B: x.flatten(0, 1)), or view it back in the same call")
    if out.lead == (TB_DIM,) and not lw.ctx.per_step:
        return Merged(out.name)
    if out.lead == (B_DIM,) and lw.ctx.stepping != "step":   # a read-out over time, or a call on one
        return ReadLast(out.name)
    if out.lead == (T_DIM, B_DIM) and (merged_in or lw.ctx.per_step):
        return Unmerged(out.name)
    return out.name


def lower(lw: Lowering, gm, inputs: list[Value]):
    """Lower the captured graph's nodes (those the output reads) in order; returns what its output holds."""
    live = _live(gm.graph)
    ops = [n for n in live if n.op == "call_function" and n.target is not operator.getitem]
    lw = replace(lw, single=len(ops) == 1)
    env, placeholders = {}, iter(inputs)
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            env[node] = next(placeholders)
        elif node.op == "get_attr":
            env[node] = getattr(gm, node.target)
        elif node.op == "output":
            return torch.fx.node.map_arg(node.args[0], lambda n: env[n])
        elif node in live:
            here = replace(lw, aten_node=node)
            args = torch.fx.node.map_arg(node.args, lambda n: env[n])
            kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n])
            env[node] = _lower_node(here, node, args, kwargs)
    return None


def _live(graph) -> set:
    out = next(n for n in graph.nodes if n.op == "output")
    live, todo = set(), list(out.all_input_nodes)
    while todo:
        n = todo.pop()
        if n not in live:
            live.add(n)
            todo += n.all_input_nodes
    return live


def _flat(v):
    if isinstance(v, _Leaf) and isinstance(v.value, (tuple, list)):
        return _flat(v.value)
    if isinstance(v, (tuple, list)):
        return [y for x in v for y in _flat(x)]
    if isinstance(v, dict):
        return [y for x in v.values() for y in _flat(x)]
    return [v]


def _lower_node(lw, node, args, kwargs):
    if node.target is operator.getitem:
        return args[0][args[1]]
    values = [v for v in _flat((args, kwargs)) if isinstance(v, (Value, Unavailable))]
    for v in values:
        if isinstance(v, Unavailable):
            lw.refuse(f"reads {v.what}, which spikec does not compute", "use only the main output")
    if not values:  # constants only (a weight's transpose, a filled tensor): evaluated here
        with torch.no_grad():
            return node.target(*args, **kwargs)
    fn = LOWERINGS.get(node.target)
    if fn is None:
        lw.refuse("no IR lowering for this ATen op", "express it with ops spikec lowers (the ATen lowering table "
                  "spikec.frontend.aten.LOWERINGS), " + remedy_for(lw.call))
    if fn not in FOLDS and any(isinstance(v, Value) and v.folded for v in values):
        lw.refuse("works on a view whose first dim merges the leading [T, B] dims with per-step dims (such as "
                  "x.reshape(-1, D)); spikec follows that view only into a product (linear, matmul) and back",
                  "reshape back to [T, B, ...] first, or merge only T and B (x.flatten(0, 1))")
    out = fn(lw, *args, **kwargs)
    if node.meta.get("val") is not None and getattr(node.meta["val"], "dtype", None) == torch.bool:
        for v in out if isinstance(out, tuple) else (out,):
            if isinstance(v, Value):
                masks(lw.ctx).add(v.name)  # torch holds it as bool: a later capture's example must be one too
    return out


def masks(ctx) -> set:
    """The IR values of this trace that torch holds as bool tensors (comparisons, masks)."""
    return ctx.__dict__.setdefault("_aten_masks", set())

