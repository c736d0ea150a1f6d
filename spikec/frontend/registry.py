"""The converter registries and the context a converter receives.

A module converter is ``fn(ctx, module, name, *inputs) -> output node name`` (or a tuple of names for a
module returning a tuple); a function converter is ``fn(ctx, name, args, kwargs, scope="") -> node name``.
Both emit nodes with ``ctx.emit``. This module imports no converter module: each converter module imports
it and registers its converters; ``spikec.frontend.tracing`` imports the built-in converter modules.

A third-party framework is imported only for a model that uses it: its converter module registers with
``on_framework(package)`` a function that imports the framework and registers its converters, and the function
runs the first time a converter is looked up while ``package`` is in ``sys.modules`` (a module of that
framework exists only if something imported it) -- at once if it already is.
"""
import sys
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn

from spikec.ir.errors import UnsupportedOp
from spikec.ir.graph import Node, TensorType
from spikec.ops import infer_type

CONVERTERS: dict[type, Callable] = {}
# fn(ctx, module, name, *inputs) for a torch.nn module with no converter; set by spikec.frontend.tracing to the
# ATen capture (which imports this module, so it cannot be imported here)
FALLBACK: list[Callable] = []
FUNCTIONS: dict[object, Callable] = {}   # call_function targets and call_method names -> converter
REGISTER_HINT = ("register one with spikec.frontend.register_converter({cls}, fn), where "
                 "fn(ctx, module, name, x) emits IR nodes with ctx.emit(...) and returns the output node name")


class ToAten(Exception):
    """Raised by a function converter for a call it does not map (a tensor where it maps numbers, say): the
    tracer captures the call to core ATen instead (``spikec.frontend.aten``), which lowers it or refuses it."""


class Merged(str):
    """A node name whose torch tensor has T and B merged into one leading dim (``x.flatten(0, 1)``,
    ``x.reshape(T * B, ...)``): torch modules applied to it run per step. The IR has no node for the merge."""


class ReadLast(str):
    """A node name whose torch tensor is a read-out over time (``x.mean(0)``, ``x.max(0)`` of ``[T, B, ...]``):
    torch sees ``[B, ...]``; the IR holds its running value ``[T, B, ...]``, which the model's output reads at the
    last step (``read='last'``). Per-step torch calls on it run at every step, as on a merged tensor."""


class Unmerged(str):
    """A node name a converter returns to say its output has T and B apart again (``unflatten(0, (T, B))``)."""


def refuse_after_read_out(ctx, module, name) -> None:
    """A stateful module fed a read-out over time (``ReadLast``): torch runs it once on ``[B, ...]``, the graph would
    step it through the running read-out; refused by name (the multi-step checks call this first)."""
    if ctx.per_step and ctx.read_out:
        refuse(name, module, "a neuron after a read-out over time (x.mean(0), x.max(0)): torch runs it once on "
               "[B, ...], while the graph would step it through the running read-out",
               "reduce over time after the last neuron, or return the [T, B, ...] sequence and reduce it outside "
               "the model")


def lead_count(ctx, x) -> int:
    """How many leading dims torch sees before the per-step shape of ``x``: 2 for [T, B], 1 merged or per step."""
    return 1 if ctx.per_step or isinstance(x, (Merged, ReadLast)) else 2


# framework package -> the registrations waiting for it (see the module docstring); emptied as they run
PENDING: dict[str, list[Callable]] = {}


def on_framework(package: str):
    """Decorator: ``fn()`` imports the framework ``package`` and registers its converters; it runs once, when a
    converter or function is first looked up with ``package`` imported: a model that uses no module of the
    framework never pays for its import. Never at decoration time: the module defining ``fn`` is not fully
    executed yet (its converters below ``fn`` undefined) when the user's code imported the framework first."""
    def deco(fn: Callable) -> Callable:
        PENDING.setdefault(package, []).append(fn)
        return fn
    return deco


def load_frameworks() -> None:
    """Run the registrations of every framework the process has imported (the user's code did, or a caller)."""
    for package in [p for p in PENDING if p in sys.modules]:
        for fn in PENDING.pop(package, ()):  # popped first: a registration that imports another runs once
            fn()


def register_converter(module_type: type, fn: Callable) -> None:
    """Teach the frontend a module type (and its subclasses); the module becomes an fx leaf."""
    CONVERTERS[module_type] = fn


def register_function(target, fn: Callable) -> None:
    """Teach the frontend a function or method name: ``fn(ctx, name, args, kwargs) -> node name``."""
    FUNCTIONS[target] = fn


def find_converter(module: nn.Module) -> Callable | None:
    if PENDING:
        load_frameworks()
    for cls in type(module).__mro__:
        if cls in CONVERTERS:
            return CONVERTERS[cls]
    return None


def refuse(name, module, why, remedy):
    """Raise UnsupportedOp for a module a converter cannot map, naming the module path and class."""
    raise UnsupportedOp(why, where=f"module {name!r} ({type(module).__qualname__})", remedy=remedy)


@dataclass
class ConvertContext:
    """State of one trace.

    ``stepping`` is how neuron modules are called: ``"multistep"`` (a call sees the whole ``[T, B, ...]``
    sequence) or ``"step"`` (a call is one time step on ``[B, ...]``; the tracer carries the state between
    calls, checks that a call's state arguments are the module's own previous state or its reset state, and
    passes the converter only the data input). Either way a neuron converter emits one multi-step IR op and
    returns what the module returns, with IR node names in place of tensors (``None`` for a tensor it cannot
    represent): a name, a tuple, or a namedtuple such as Norse's state. ``per_step`` is True when torch sees one
    leading dimension: ``T*B`` merged (inside TimeDistributed) or the step's ``B`` (stepping ``"step"``).
    """
    nodes: list = field(default_factory=list)
    types: dict = field(default_factory=dict)
    mappings: dict = field(default_factory=dict)   # module path -> "which converter was used"
    module_outputs: dict = field(default_factory=dict)  # top-level module call -> its output node
    per_step: bool = False
    read_out: bool = False          # per_step because the input is a read-out over time (ReadLast), not merged
    stepping: str = "multistep"
    concrete: tuple | None = None  # (T, B) when shapes were captured as numbers (a loop model's capture)

    def unique(self, name: str) -> str:
        base, k = name, 1
        while name in self.types:
            name, k = f"{base}_{k}", k + 1
        return name

    def type(self, name: str) -> TensorType:
        return self.types[name]

    def emit(self, name, op, inputs, attrs=None, params=None, scope="") -> str:
        """Add a node; its type is inferred from its inputs (shape errors name the node and module)."""
        name = self.unique(name.replace("-", "_"))
        params = {k: _float64(v) for k, v in (params or {}).items() if v is not None}
        probe = Node(name, op, tuple(inputs), TensorType((1,)), attrs or {}, params, scope)
        node = probe.with_(type=infer_type(probe, [self.types[i] for i in inputs]))
        self.nodes.append(node)
        self.types[name] = node.type
        return name

    def convert_module(self, module: nn.Module, name: str, *xs: str):
        fn = find_converter(module)
        if fn is None and FALLBACK and type(module).__module__.startswith("torch.nn"):
            self.mappings.setdefault(name, f"{type(module).__module__}.{type(module).__qualname__} -> core ATen")
            return FALLBACK[0](self, module, name, *xs)  # a torch module: captured to ATen and lowered
        if fn is None:
            cls = f"{type(module).__module__}.{type(module).__qualname__}"
            raise UnsupportedOp(f"no converter for module of class {cls}", where=f"module {name!r}",
                                remedy=REGISTER_HINT.format(cls=type(module).__qualname__))
        self.mappings.setdefault(name, mapping_name(module))
        return fn(self, module, name, *xs)


def mapping_name(module) -> str:
    """``"<module class> -> <converter>"``, recorded in the graph's metadata for each converted module."""
    fn = find_converter(module)
    return f"{type(module).__module__}.{type(module).__qualname__} -> {fn.__module__}.{fn.__name__}"


def _float64(v):
    """Parameters as numpy arrays: floating tensors in float64 (the IR's reference precision)."""
    if isinstance(v, torch.Tensor):
        v = v.detach().cpu()
        return v.double().numpy() if v.is_floating_point() else v.numpy()
    return v
