"""torch.fx tracing: a multi-step PyTorch model into a verified IR graph through the converter registry.

Convention: the model maps ``[T, B, ...]`` to ``[T, B, ...]``. Per-step torch modules (Conv2d,
BatchNorm, pooling) appear inside ``spikec.nn.TimeDistributed``, which merges T and B as torch
needs; Linear, ReLU and the ``spikec.nn`` modules also run on ``[T, B, ...]`` directly.

Modules with a converter (the neurons, the layers spikec maps itself) are fx leaves converted by the registry;
every other call -- a torch function or method with no converter, a ``torch.nn`` module with none (Conv1d,
AvgPool1d) -- is captured to core ATen and lowered through one table (``spikec.frontend.aten``), or refused
naming the ATen op and the user's line.
"""
import operator
import inspect
import traceback

import torch
import torch.fx
from torch import nn

from spikec.ir.errors import BadInput, ShapeError, SpikecError, UnsupportedOp
from spikec.ir.graph import Graph, Node, TensorType
from spikec.core.verify import verify
from spikec.frontend.registry import (FALLBACK, FUNCTIONS, PENDING, REGISTER_HINT, ConvertContext, Merged, ReadLast,
                                      ToAten, Unmerged, find_converter, load_frameworks, register_converter)
from spikec.frontend.aten import capture, capture_module
from spikec.frontend.loop import MULTISTEP, Looped
from spikec.frontend.stepping import Stepped
# The built-in converters, imported for their registrations (they import the registry, never this module).
from spikec.frontend import (torch_modules, torch_functions, snntorch, spikingjelly, spikingjelly_layers,  # noqa: F401
                             norse, sdna, loihi, sinabs, xylo)


_ASSERT_IS_NONE = getattr(torch.fx._symbolic_trace, "_assert_is_none", None)


class _Root(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)


class _Tracer(torch.fx.Tracer):
    # a call captured to ATen is refused naming the user's line (``aten.values.user_line``): each node keeps where it
    # was made. Not by fx's record_stack_traces: that symbolizes through torch's C++ profiler, whose first use costs
    # 1.2-2.5 s of CPU per process (and imports torch._dynamo for its filter); Python's own stack is the same frames.
    record_stack_traces = False

    def create_node(self, *args, **kwargs):
        node = super().create_node(*args, **kwargs)
        if not node.stack_trace:
            frames = _from_first_forward(traceback.extract_stack())
            if frames:
                node.stack_trace = "".join(frames.format()).strip()
        return node

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        if type(m) is nn.Sequential:
            return False
        return find_converter(m) is not None or super().is_leaf_module(m, qualname)

    def call_module(self, m, forward, args, kwargs):
        try:
            return super().call_module(m, forward, args, kwargs)
        except SpikecError:
            raise
        except Exception as e:  # fx could not trace *through* this module: it needs a converter of its own
            path = self.path_of_module(m)
            cls = f"{type(m).__module__}.{type(m).__qualname__}"
            raise UnsupportedOp(f"no converter for module of class {cls}, and torch.fx cannot trace through it "
                                f"({type(e).__name__}: {e})", where=f"module {path!r}",
                                remedy=REGISTER_HINT.format(cls=type(m).__qualname__)) from None


def _from_first_forward(frames: traceback.StackSummary) -> traceback.StackSummary | None:
    """The frames from the first ``forward`` on (fx's own rule: a stack with no forward says nothing of the model)."""
    first = next((i for i, f in enumerate(frames) if f.name == "forward"), None)
    return None if first is None else traceback.StackSummary.from_list(frames[first:])


def traced_root(model: nn.Module) -> nn.Module:
    """The module whose forward fx traces: ``model``, or a parent for a model that is itself a leaf (whose
    nodes are then named ``model.*``)."""
    if type(model) is not nn.Sequential and find_converter(model) is not None:
        return _Root(model)  # fx always traces the root's forward: give a leaf root a parent
    return model


def fx_trace(model: nn.Module, concrete_args: dict | None = None):
    """``(root, fx graph)`` of ``model`` with every module that has a converter kept as a leaf call.

    ``concrete_args``: parameters traced as these Python values (a step model's ``state=None``, so that its
    ``if state is None: state = [None, None]`` is followed as the first step runs it)."""
    model = traced_root(model)
    try:
        return model, _Tracer().trace(model, concrete_args=concrete_args)
    except SpikecError:
        raise
    except Exception as e:
        raise UnsupportedOp(f"torch.fx cannot trace the model: {type(e).__name__}: {e}",
                            where=f"model {type(model).__qualname__}",
                            remedy="keep data-dependent control flow inside leaf modules with a registered converter"
                                   "; a forward that runs its own time loop is --stepping loop") from None


def trace(model: nn.Module, input_shape, *, input_kind: str = "binary", ceiling: int | None = None) -> Graph:
    """Trace ``model`` (put in eval mode) for per-step input shape ``input_shape`` into a verified IR graph."""
    model.eval()
    root, fx_graph = fx_trace(model)
    try:
        return _convert_graph(root, fx_graph, input_shape, input_kind, ceiling)
    except ShapeError as e:  # the usual cause: a per-step input shape the model's first layers cannot take
        if e.remedy:
            raise
        raise ShapeError(e.what, where=e.where, remedy=f"check the per-step input shape {tuple(input_shape)} "
                                                         "(--input-shape, or the model's input_shape) against the "
                                                         "layer named, or fix that layer") from e


def _convert_graph(model, fx_graph, input_shape, input_kind, ceiling) -> Graph:
    ctx = ConvertContext()
    outputs = convert_fx(ctx, model, fx_graph, _input(ctx, input_shape, input_kind, ceiling))
    nodes = _reaching(ctx.nodes, outputs)
    meta = {"source": type(model.model if isinstance(model, _Root) else model).__qualname__,
            "converters": sorted((m, _with_ops(c, m, nodes)) for m, c in ctx.mappings.items()),
            "module_outputs": sorted((m, n) for m, n in ctx.module_outputs.items() if n in {x.name for x in nodes})}
    return verify(Graph(nodes, tuple(outputs), meta), "after tracing")


def _with_ops(converter: str, module: str, nodes) -> str:
    """``"[op, op] <class> -> <converter>"``: the IR ops the module became, so two frameworks' neurons that
    are one op with different parameters read as such in the report."""
    ops = sorted({n.op for n in nodes if n.scope == module or n.scope.startswith(module + ".")})
    return f"[{', '.join(ops)}] {converter}" if ops else converter


def _reaching(nodes, outputs) -> tuple:
    """The input and the nodes some output depends on: a neuron's state read-out that only carried state
    from call to call (the multi-step op carries it itself) is not part of the graph."""
    by_name = {n.name: n for n in nodes}
    live, todo = set(), list(outputs)
    while todo:
        name = todo.pop()
        if name not in live:
            live.add(name)
            todo += by_name[name].inputs
    return tuple(n for n in nodes if n.name in live or n.op == "input")


def convert_fx(ctx, model, fx_graph, x: str, *, threads_state: bool = False) -> list[str]:
    """Convert ``model``'s fx graph into ``ctx`` with its input bound to node ``x``; returns the output names.

    Parameters after the first must have defaults (a Norse state argument): they stay Python values.
    ``threads_state``: ``forward`` returns ``(y, state)``; only ``y`` is an output. Nodes marked ``MULTISTEP``
    (a loop model's computation before its loop) are converted as multi-step ``[T, B, ...]`` tensors.
    """
    env, outputs, bound = {}, [], False
    modules = dict(model.named_modules())
    for fx_node in fx_graph.nodes:
        if fx_node.op == "placeholder":
            if bound and not fx_node.args:
                raise BadInput("the model takes more than one input; spikec traces single-input models",
                               where=f"argument {fx_node.name!r}")
            env[fx_node.name], bound = (fx_node.args[0] if bound else x), True
        elif fx_node.op == "call_function" and fx_node.target is _ASSERT_IS_NONE:
            env[fx_node.name] = None  # fx's guard on a concrete None argument: it holds by construction
        elif fx_node.op == "call_function" and fx_node.target is operator.getitem and not fx_node.users:
            env[fx_node.name] = None  # an item nothing reads (`m, _ = x.max(0)`): needs no tensor
        elif fx_node.op == "output":
            result = fx_node.args[0]
            if threads_state:
                result = _first_of_pair(result, env)
            outputs = _outputs(result, env, model)
        elif fx_node.meta.get(MULTISTEP):
            outer = ctx.per_step, ctx.stepping
            ctx.per_step, ctx.stepping = False, "multistep"
            try:
                env[fx_node.name] = _convert_node(ctx, fx_node, env, modules)
            finally:
                ctx.per_step, ctx.stepping = outer
        else:
            env[fx_node.name] = _convert_node(ctx, fx_node, env, modules)
    return outputs


def _convert_node(ctx, fx_node, env, modules):
    """The IR name(s) one fx call node becomes."""
    if fx_node.op == "call_module" and find_converter(modules[fx_node.target]) is None:
        return _captured(ctx, fx_node, env, modules[fx_node.target])  # e.g. nn.Conv1d, nn.AvgPool1d
    if fx_node.op == "call_module":
        xs = _tensor_args(fx_node, env)
        out = _with_layout(ctx, xs, lambda: ctx.convert_module(modules[fx_node.target], fx_node.target, *xs))
        if isinstance(out, str) and out not in xs and not isinstance(out, Merged) and not ctx.per_step:
            ctx.module_outputs[fx_node.target] = out
        return out
    if fx_node.op in ("call_function", "call_method"):
        xs = [env[a.name] for a in fx_node.all_input_nodes if isinstance(env.get(a.name), str)]
        return _with_layout(ctx, xs, lambda: _convert_function(ctx, fx_node, env))
    if fx_node.op == "get_attr":  # a parameter or buffer read in forward(): a constant of the calls that take it
        value = _attribute(modules, fx_node.target)
        if isinstance(value, torch.Tensor):
            return value.detach()
    raise UnsupportedOp(f"fx node {fx_node.name!r} of kind {fx_node.op} ({fx_node.target}) is not supported",
                        remedy="register parameters inside modules rather than reading them in forward()")


def _attribute(modules, target: str):
    path, _, attr = target.rpartition(".")
    return getattr(modules.get(path), attr, None)


def _first_of_pair(result, env):
    """``y`` of a ``(y, state)`` result, whether fx sees the pair or a module call returning it."""
    if isinstance(result, (tuple, list)) and len(result) == 2:
        return result[0]
    value = env.get(result.name) if isinstance(result, torch.fx.Node) else None
    if isinstance(value, tuple) and len(value) == 2:
        return _Named(value[0])
    raise BadInput("forward(x, state) does not return a pair (y, state)", where="the output of the model",
                   remedy="return (output, state) from a forward that takes a state, or drop the state argument")


class _Named:
    """An already converted output standing where ``_outputs`` expects an fx node."""

    def __init__(self, value):
        self.value = value


def _with_layout(ctx, xs, convert):
    """Run a converter with ``ctx.per_step`` set when an input has T and B merged; its output stays merged
    unless the converter returns ``Unmerged`` (or ``Merged``) itself."""
    merged = any(isinstance(x, Merged) for x in xs)
    read_last = any(isinstance(x, ReadLast) for x in xs)   # [B, ...] after a read-out over time: per step too
    outer = ctx.per_step, ctx.read_out
    ctx.per_step, ctx.read_out = ctx.per_step or merged or read_last, read_last and not (ctx.per_step or merged)
    try:
        out = convert()
    finally:
        ctx.per_step, ctx.read_out = outer
    if isinstance(out, Unmerged):
        return str(out)
    if read_last and isinstance(out, str) and not isinstance(out, ReadLast):
        return ReadLast(out)
    return Merged(out) if merged and isinstance(out, str) and not isinstance(out, Merged) else out


def _outputs(result, env, model) -> list[str]:
    """The node names ``forward`` returns: one tensor, or a flat tuple/list of tensors; anything else is bad input."""
    items = result if isinstance(result, (tuple, list)) else (result,)
    names = [env.get(a.name) if isinstance(a, torch.fx.Node) else a.value if isinstance(a, _Named) else None
             for a in items]
    if len(names) == 1 and isinstance(names[0], tuple):  # a module (or adapter) returning a tuple
        names = list(names[0])
    merged = next((n for n in names if isinstance(n, Merged)), None)
    if merged is not None:
        raise BadInput(f"forward returns node {merged!r} with T and B merged into one dimension",
                       where="the output of model " + type(model.model if isinstance(model, _Root) else model).__qualname__,
                       remedy="return it as [T, B, ...]: y.unflatten(0, (T, B)) or y.reshape(T, B, ...)")
    if items and all(isinstance(n, str) for n in names):
        return [str(n) for n in names]

    def kind(v):  # an fx node standing for something other than one tensor is a module's tuple
        return "a tuple" if isinstance(v, torch.fx.Node) else "None" if v is None else "a dict" \
            if isinstance(v, dict) else f"a {type(v).__name__}"
    bad = next((a for a, n in zip(items, names) if not isinstance(n, str)), None)
    what = kind(result) if not isinstance(result, (tuple, list)) else \
        f"an empty {type(result).__name__}" if not items else f"a {type(result).__name__} holding {kind(bad)}"
    cls = type(model.model if isinstance(model, _Root) else model).__qualname__
    raise BadInput(f"forward returns {what}, not a tensor [T, B, ...] or a flat tuple of tensors",
                   where=f"the output of model {cls}",
                   remedy="return the output tensor (or a tuple of output tensors) from forward")


def _input(ctx, input_shape, kind, ceiling):
    node = Node("input", "input", (), TensorType(tuple(input_shape), kind, ceiling))
    ctx.nodes.append(node)
    ctx.types[node.name] = node.type
    return node.name


def _tensor_args(fx_node, env) -> list[str]:
    """The IR inputs of a module call: its tensor arguments. Trailing arguments that are ``None`` are a neuron's
    reset state (Norse's ``cell(x, state)`` with the ``state=None`` a step model starts from, ``forward(x,
    state=None)``): the multi-step op carries the state itself, so they are dropped."""
    args = list(fx_node.args)
    while len(args) > 1 and args[-1] is None:  # a literal None: a state traced as the concrete None it starts as
        args.pop()
    if not args or fx_node.kwargs or not all(isinstance(a, torch.fx.Node) for a in args):
        raise UnsupportedOp(f"module call {fx_node.target!r} has non-tensor or keyword arguments; spikec converts "
                            "module calls whose arguments are all tensors, passed positionally",
                            where=f"module {fx_node.target!r}",
                            remedy="pass the module's tensors positionally (a state as the forward's state "
                                   "argument, None at the first step)")
    xs = [env[a.name] for a in args]
    while len(xs) > 1 and xs[-1] is None:
        xs.pop()
    if not all(isinstance(x, str) for x in xs):
        raise UnsupportedOp("a tuple (or a state) was passed to a module; unpack it first", where=f"module "
                            f"{fx_node.target!r}",
                            remedy="pass the module its input tensor; a neuron's state only as the state the "
                                   "step's forward(x, state=None) received (spikec carries it from step to step), or "
                                   "the output tensor of a module that returned a tuple (out, state = m(x))")
    return xs


class _Value:
    """Wraps an env value while torch.fx maps arguments (map_arg only maps fx Nodes, and returns what fn gives)."""

    def __init__(self, value):
        self.value = value


def _unwrap(v):
    if isinstance(v, _Value):
        return v.value
    if isinstance(v, (tuple, list)):
        return type(v)(_unwrap(x) for x in v)
    if isinstance(v, dict):
        return {k: _unwrap(x) for k, x in v.items()}
    return v


def _scope(fx_node) -> str:
    stack = fx_node.meta.get("nn_module_stack") or {}
    return next(reversed(stack.values()))[0] if stack else ""


def _convert_function(ctx, fx_node, env) -> str:
    target = fx_node.target
    if PENDING:   # a framework's function converters (registry.on_framework)
        load_frameworks()
    fn = FUNCTIONS.get(target)
    call = target if fx_node.op == "call_function" else \
        (lambda x, *args, **kwargs: getattr(x, target)(*args, **kwargs))
    if fn is None:  # no converter: the call captured to ATen and lowered
        return _captured(ctx, fx_node, env, call)
    lookup = lambda a: _Value(env[a.name])  # nested args too, e.g. reshape(x, (x.shape[0], ...))
    args = _unwrap(torch.fx.node.map_arg(fx_node.args, lookup))
    kwargs = _unwrap(torch.fx.node.map_arg(fx_node.kwargs, lookup))
    scope = _scope(fx_node)  # named inside its module, so names read like the model's structure
    try:
        return fn(ctx, f"{scope}.{fx_node.name}" if scope else fx_node.name, args, kwargs, scope=scope)
    except ToAten:
        return _captured(ctx, fx_node, env, call)


def _captured(ctx, fx_node, env, call):
    """A call with no converter, captured to core ATen (``spikec.frontend.aten``); named inside its module."""
    if fx_node.op == "call_module":
        ctx.mappings.setdefault(fx_node.target, f"{type(call).__module__}.{type(call).__qualname__} -> core ATen")
    scope = fx_node.target if fx_node.op == "call_module" else _scope(fx_node)
    name = fx_node.target if fx_node.op == "call_module" else f"{scope}.{fx_node.name}" if scope else fx_node.name
    dtype = next((t.dtype for t in call.parameters() if t.is_floating_point()), torch.float64) \
        if isinstance(call, nn.Module) else torch.float64
    return capture(ctx, fx_node, env, call, name, scope, dtype)


def _stepped(ctx, m: Stepped, name, x):
    """A per-step model: its forward traced once on ``[B, ...]``, each neuron call one step of a multi-step op."""
    # the state a step model threads is None at the first step, where the multi-step ops start from their reset
    state = list(inspect.signature(m.model.forward).parameters)[1] if m.threads_state else None
    root, fx_graph = fx_trace(m.model, {state: None} if state else None)
    outer = ctx.per_step, ctx.stepping
    ctx.per_step, ctx.stepping = True, "step"
    try:
        outs = convert_fx(ctx, root, fx_graph, x, threads_state=m.threads_state)
    finally:
        ctx.per_step, ctx.stepping = outer
    return outs[0] if len(outs) == 1 else tuple(outs)


register_converter(Stepped, _stepped)


def _looped(ctx, m, name, x):
    """A model running its own time loop: the folded step-0 body (``spikec.frontend.loop``), one step of it."""
    if getattr(m, "body", None) is None:
        raise BadInput("the loop model was not captured on its inputs", where=f"module {name!r}",
                       remedy="build it with spikec.frontend.loop.bind(model, inputs, leaf)")
    if getattr(m, "multistep", False):   # the input repeated over T by forward itself: a multi-step graph
        outs = convert_fx(ctx, m.root, m.body, x)
        return outs[0] if len(outs) == 1 else tuple(outs)
    outer = ctx.per_step, ctx.stepping, ctx.concrete
    ctx.per_step, ctx.stepping, ctx.concrete = True, "step", m.lead
    try:
        outs = convert_fx(ctx, m.model, m.body, x)
    finally:
        ctx.per_step, ctx.stepping, ctx.concrete = outer
    return outs[0] if len(outs) == 1 else tuple(outs)


def is_leaf(m: nn.Module) -> bool:
    return find_converter(m) is not None


register_converter(Looped, _looped)
FALLBACK[:] = [capture_module]  # a torch module a converter calls (TimeDistributed's children): captured too
